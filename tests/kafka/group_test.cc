// lionet/kafka's consumer groups over a raw socket (group_coordinator.h, G1-G8): FindCoordinator;
// two members joining (MEMBER_ID_REQUIRED first), the leader getting every member's metadata
// and the one protocol both support, its SyncGroup delivering each member's assignment;
// heartbeat errors during a rebalance; a member that does not rejoin removed at the rebalance
// deadline; session expiry leading to a rebalance; LeaveGroup (v1 and a v3 batch); static
// membership refused; OffsetCommit/OffsetFetch round trips and their checks, offsets after a
// restart; a stop answering parked requests; malformed group requests closing only their
// connection.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/poll_until.h"
#include "kafka_test_util.h"
#include "lionet/kafka/offset_store.h"

namespace lionet::kafka {
namespace {
using namespace std::chrono_literals;
using testing::create;
using testing::KafkaFixture;
using testing::RawClient;
using Protocols = std::vector<std::pair<std::string, std::string>>;  // name, metadata

struct Join {
  int16_t error = -99;
  int32_t generation = -2;
  std::string protocol, leader, member_id;
  std::map<std::string, std::string> members;  // the leader's: id -> metadata
};

struct JoinArgs {
  std::string group = "g";
  std::string member_id;
  int32_t session_ms = 10000;
  int32_t rebalance_ms = 10000;
  Protocols protocols = {{"range", "md"}};
  std::string type = "consumer";
  std::optional<std::string> instance;
};

int32_t send_join(RawClient& c, int16_t v, const JoinArgs& a) {
  return c.send(11, v, [&](Writer& w) {
    w.string(a.group);
    w.i32(a.session_ms);
    if (v >= 1) w.i32(a.rebalance_ms);
    w.string(a.member_id);
    if (v >= 5) w.nullable_string(a.instance ? std::optional<std::string_view>(*a.instance) : std::nullopt);
    w.string(a.type);
    w.array_count(static_cast<int32_t>(a.protocols.size()));
    for (const auto& [name, md] : a.protocols) {
      w.string(name);
      w.bytes(md);
    }
  });
}

Join read_join(RawClient& c, int32_t corr, int16_t v) {
  Join j;
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  if (v >= 2) {
    EXPECT_EQ(r.i32(), 0);
  }
  j.error = r.i16();
  j.generation = r.i32();
  j.protocol = r.string();
  j.leader = r.string();
  j.member_id = r.string();
  const int32_t n = r.array_count();
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    std::string id(r.string());
    if (v >= 5) {
      EXPECT_FALSE(r.nullable_string());
    }
    j.members[id] = std::string(r.bytes());
  }
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return j;
}

Join join(RawClient& c, int16_t v, const JoinArgs& a) { return read_join(c, send_join(c, v, a), v); }

// v5's first step: MEMBER_ID_REQUIRED and the id to join with.
std::string member_id(RawClient& c, JoinArgs a) {
  a.member_id.clear();
  const Join j = join(c, 5, a);
  EXPECT_EQ(j.error, 79);
  EXPECT_EQ(j.generation, -1);
  EXPECT_FALSE(j.member_id.empty());
  return j.member_id;
}

using Assignments = std::vector<std::pair<std::string, std::string>>;  // member, assignment

int32_t send_sync(RawClient& c, int16_t v, const std::string& group, int32_t gen, const std::string& member,
                  const Assignments& as = {}) {
  return c.send(14, v, [&](Writer& w) {
    w.string(group);
    w.i32(gen);
    w.string(member);
    if (v >= 3) w.nullable_string(std::nullopt);
    w.array_count(static_cast<int32_t>(as.size()));
    for (const auto& [m, a] : as) {
      w.string(m);
      w.bytes(a);
    }
  });
}

std::pair<int16_t, std::string> read_sync(RawClient& c, int32_t corr, int16_t v) {
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  if (v >= 1) r.i32();
  const int16_t err = r.i16();
  std::string a(r.bytes());
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return {err, a};
}

int16_t heartbeat(RawClient& c, int16_t v, const std::string& group, int32_t gen, const std::string& member) {
  const int32_t corr = c.send(12, v, [&](Writer& w) {
    w.string(group);
    w.i32(gen);
    w.string(member);
    if (v >= 3) w.nullable_string(std::nullopt);
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  if (v >= 1) r.i32();
  const int16_t err = r.i16();
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return err;
}

// Polls (poll_until) `member`'s heartbeat at generation `gen` until it answers
// REBALANCE_IN_PROGRESS (27): the group is preparing a rebalance, so a JoinGroup another
// connection sent without reading its answer has reached the group and is parked there. Two
// connections give no order: a fixed sleep let the rejoin that follows overtake it (issue 40).
bool rebalance_begun(RawClient& c, int32_t gen, const std::string& member) {
  return lionet::test::poll_until([&] { return heartbeat(c, 3, "g", gen, member) == 27; });
}

// A (the leader) and B in a Stable group "g" at generation 2, both synced (empty assignments):
// A joins alone (generation 1; with settle_alone it also completes that generation, so the group
// is Stable before B comes), B joins, A rejoins. Call with ASSERT_NO_FATAL_FAILURE.
void form_pair(RawClient& a, RawClient& b, JoinArgs& ja, JoinArgs& jb, bool settle_alone = false) {
  ja.member_id = member_id(a, ja);
  ASSERT_EQ(join(a, 5, ja).generation, 1);
  if (settle_alone) {
    ASSERT_EQ(read_sync(a, send_sync(a, 3, "g", 1, ja.member_id, {}), 3).first, 0);
  }
  jb.member_id = member_id(b, jb);
  const int32_t bc = send_join(b, 5, jb);
  ASSERT_TRUE(rebalance_begun(a, 1, ja.member_id)) << "B's JoinGroup never reached the group";
  ASSERT_EQ(join(a, 5, ja).generation, 2);
  ASSERT_EQ(read_join(b, bc, 5).generation, 2);
  const int32_t bs = send_sync(b, 3, "g", 2, jb.member_id);
  ASSERT_EQ(read_sync(a, send_sync(a, 3, "g", 2, ja.member_id, {}), 3).first, 0);
  ASSERT_EQ(read_sync(b, bs, 3).first, 0);
}

int16_t leave_v1(RawClient& c, const std::string& group, const std::string& member) {
  const int32_t corr = c.send(13, 1, [&](Writer& w) {
    w.string(group);
    w.string(member);
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  r.i32();
  const int16_t err = r.i16();
  EXPECT_TRUE(r.ok() && r.at_end());
  return err;
}

std::vector<int16_t> leave_v3(RawClient& c, const std::string& group, const std::vector<std::string>& members) {
  const int32_t corr = c.send(13, 3, [&](Writer& w) {
    w.string(group);
    w.array_count(static_cast<int32_t>(members.size()));
    for (const auto& m : members) {
      w.string(m);
      w.nullable_string(std::nullopt);
    }
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  r.i32();
  EXPECT_EQ(r.i16(), 0);
  std::vector<int16_t> out;
  const int32_t n = r.array_count();
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    EXPECT_EQ(r.string(), members[static_cast<std::size_t>(i)]);
    EXPECT_FALSE(r.nullable_string());
    out.push_back(r.i16());
  }
  EXPECT_TRUE(r.ok() && r.at_end());
  return out;
}

struct CommitArg {
  std::string topic;
  int32_t partition;
  int64_t offset;
  std::optional<std::string> metadata;
};

std::vector<int16_t> commit(RawClient& c, int16_t v, const std::string& group, int32_t gen, const std::string& member,
                            const std::vector<CommitArg>& parts) {
  const int32_t corr = c.send(8, v, [&](Writer& w) {
    w.string(group);
    w.i32(gen);
    w.string(member);
    if (v >= 7) w.nullable_string(std::nullopt);
    if (v <= 4) w.i64(-1);
    w.array_count(static_cast<int32_t>(parts.size()));  // one topic entry per partition: allowed
    for (const auto& p : parts) {
      w.string(p.topic);
      w.array_count(1);
      w.i32(p.partition);
      w.i64(p.offset);
      if (v >= 6) w.i32(-1);
      w.nullable_string(p.metadata ? std::optional<std::string_view>(*p.metadata) : std::nullopt);
    }
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  if (v >= 3) r.i32();
  std::vector<int16_t> out;
  const int32_t nt = r.array_count();
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    EXPECT_EQ(r.string(), parts[static_cast<std::size_t>(i)].topic);
    EXPECT_EQ(r.array_count(), 1);
    EXPECT_EQ(r.i32(), parts[static_cast<std::size_t>(i)].partition);
    out.push_back(r.i16());
  }
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return out;
}

struct Fetched {
  int64_t offset = -2;
  std::optional<std::string> metadata;
  int16_t error = -99;
};
using FetchMap = std::map<std::pair<std::string, int32_t>, Fetched>;
FetchMap::key_type K(const std::string& topic, int32_t partition) { return {topic, partition}; }

// topics nullopt: every committed partition (v2+).
FetchMap fetch(RawClient& c, int16_t v, const std::string& group,
               std::optional<std::vector<std::pair<std::string, int32_t>>> parts) {
  const int32_t corr = c.send(9, v, [&](Writer& w) {
    w.string(group);
    if (!parts) {
      w.array_count(-1);
      return;
    }
    w.array_count(static_cast<int32_t>(parts->size()));
    for (const auto& [t, p] : *parts) {
      w.string(t);
      w.array_count(1);
      w.i32(p);
    }
  });
  const std::string resp = c.recv();
  Reader r(resp);
  EXPECT_EQ(r.i32(), corr);
  if (v >= 3) r.i32();
  FetchMap out;
  const int32_t nt = r.array_count();
  for (int32_t i = 0; i < nt && r.ok(); ++i) {
    const std::string topic(r.string());
    const int32_t np = r.array_count();
    for (int32_t j = 0; j < np && r.ok(); ++j) {
      Fetched f;
      const int32_t p = r.i32();
      f.offset = r.i64();
      if (v >= 5) {
        EXPECT_EQ(r.i32(), -1);  // leader epoch (none committed)
      }
      if (auto m = r.nullable_string()) f.metadata = std::string(*m);
      f.error = r.i16();
      out[{topic, p}] = f;
    }
  }
  if (v >= 2) {
    EXPECT_EQ(r.i16(), 0);
  }
  EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
  return out;
}

ServerOptions short_sessions() {
  ServerOptions o;
  o.broker.groups.min_session_timeout = 100ms;
  return o;
}

TEST(KafkaGroups, FindCoordinatorNamesThisBrokerForGroupsOnly) {
  KafkaFixture fx;
  RawClient c(fx.port());
  for (int16_t v : {0, 1, 2}) {
    for (int8_t key_type : {0, 1, 7}) {
      if (v == 0 && key_type != 0) continue;  // v0 has no key type
      const int32_t corr = c.send(10, v, [&](Writer& w) {
        w.string("my-group");
        if (v >= 1) w.i8(key_type);
      });
      const std::string resp = c.recv();
      Reader r(resp);
      EXPECT_EQ(r.i32(), corr);
      if (v >= 1) {
        EXPECT_EQ(r.i32(), 0);
      }
      const int16_t err = r.i16();
      std::optional<std::string_view> msg;
      if (v >= 1) msg = r.nullable_string();
      const int32_t node = r.i32();
      const std::string host(r.string());
      const int32_t port = r.i32();
      EXPECT_TRUE(r.ok() && r.at_end()) << r.error();
      if (key_type == 0) {
        EXPECT_EQ(err, 0);
        EXPECT_FALSE(msg);
        EXPECT_EQ(node, 1);
        EXPECT_EQ(host, "127.0.0.1");
        EXPECT_EQ(port, fx.port());
      } else {
        EXPECT_EQ(err, key_type == 1 ? 53 : 42) << int(key_type);  // transactions refused; not a key type
        EXPECT_TRUE(msg);
        EXPECT_EQ(node, -1);
      }
    }
  }
}

// The classic two-member flow: A alone (generation 1), then B joins: A's heartbeat answers
// REBALANCE_IN_PROGRESS until A rejoins; generation 2 with A still leader, given both members'
// metadata for the one protocol both support; B's SyncGroup waits for A's assignments.
TEST(KafkaGroups, TwoMembersJoinSyncAndGetTheLeadersAssignments) {
  KafkaFixture fx;
  RawClient a(fx.port()), b(fx.port());
  JoinArgs ja;
  ja.protocols = {{"roundrobin", "a-rr"}, {"range", "a-range"}};
  ja.member_id = member_id(a, ja);
  const Join a1 = join(a, 5, ja);
  ASSERT_EQ(a1.error, 0);
  EXPECT_EQ(a1.generation, 1);
  EXPECT_EQ(a1.leader, ja.member_id);
  EXPECT_EQ(a1.member_id, ja.member_id);
  EXPECT_EQ(a1.protocol, "roundrobin");  // alone: its first choice
  EXPECT_EQ(a1.members, (std::map<std::string, std::string>{{ja.member_id, "a-rr"}}));
  auto s = read_sync(a, send_sync(a, 3, "g", 1, ja.member_id, {{ja.member_id, "all-of-it"}}), 3);
  EXPECT_EQ(s, std::make_pair(int16_t{0}, std::string("all-of-it")));
  EXPECT_EQ(heartbeat(a, 3, "g", 1, ja.member_id), 0);

  JoinArgs jb;
  jb.protocols = {{"range", "b-range"}};  // range only: the group must settle on range
  jb.member_id = member_id(b, jb);
  const int32_t b_corr = send_join(b, 5, jb);  // parks: A has not rejoined
  // REBALANCE_IN_PROGRESS (27): rejoin; from when the server has B's JoinGroup.
  EXPECT_TRUE(rebalance_begun(a, 1, ja.member_id)) << "A's heartbeat never said REBALANCE_IN_PROGRESS";
  EXPECT_EQ(read_sync(a, send_sync(a, 3, "g", 1, ja.member_id), 3).first, 27);
  const Join a2 = join(a, 5, ja);  // completes the join phase for both
  const Join b2 = read_join(b, b_corr, 5);
  ASSERT_EQ(a2.error, 0);
  ASSERT_EQ(b2.error, 0);
  EXPECT_EQ(a2.generation, 2);
  EXPECT_EQ(b2.generation, 2);
  EXPECT_EQ(a2.protocol, "range");
  EXPECT_EQ(b2.protocol, "range");
  EXPECT_EQ(a2.leader, ja.member_id);
  EXPECT_EQ(b2.leader, ja.member_id);
  EXPECT_EQ(b2.member_id, jb.member_id);
  EXPECT_EQ(a2.members, (std::map<std::string, std::string>{{ja.member_id, "a-range"}, {jb.member_id, "b-range"}}));
  EXPECT_TRUE(b2.members.empty());  // followers get no member list
  // The follower's SyncGroup waits for the leader's; then each gets its own assignment.
  const int32_t bs = send_sync(b, 3, "g", 2, jb.member_id);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(heartbeat(a, 3, "g", 2, ja.member_id), 0);  // CompletingRebalance: heartbeats are fine
  EXPECT_EQ(heartbeat(a, 3, "g", 1, ja.member_id), 22);  // ILLEGAL_GENERATION
  EXPECT_EQ(heartbeat(a, 3, "g", 2, "nobody"), 25);  // UNKNOWN_MEMBER_ID
  EXPECT_EQ(heartbeat(a, 0, "other", 2, ja.member_id), 25);
  s = read_sync(a, send_sync(a, 0, "g", 2, ja.member_id, {{ja.member_id, "p0,p1"}, {jb.member_id, "p2"}}), 0);
  EXPECT_EQ(s, std::make_pair(int16_t{0}, std::string("p0,p1")));
  EXPECT_EQ(read_sync(b, bs, 3), std::make_pair(int16_t{0}, std::string("p2")));
  EXPECT_EQ(heartbeat(b, 3, "g", 2, jb.member_id), 0);
  // A SyncGroup in Stable (a member that missed its answer) gets the same assignment again,
  // and so does a non-leader's JoinGroup with unchanged protocols: no rebalance.
  EXPECT_EQ(read_sync(b, send_sync(b, 3, "g", 2, jb.member_id), 3).second, "p2");
  const Join b3 = join(b, 5, jb);
  EXPECT_EQ(b3.error, 0);
  EXPECT_EQ(b3.generation, 2);
  EXPECT_EQ(heartbeat(a, 3, "g", 2, ja.member_id), 0);
  EXPECT_EQ(fx.server().broker().stats().groups.rebalances, 2u);
}

TEST(KafkaGroups, JoinGroupChecksItsArguments) {
  KafkaFixture fx;
  RawClient c(fx.port());
  JoinArgs a;
  a.group = "";
  EXPECT_EQ(join(c, 5, a).error, 24);  // INVALID_GROUP_ID
  a.group = "g";
  a.session_ms = 1000;  // below the default minimum, 6000
  EXPECT_EQ(join(c, 5, a).error, 26);  // INVALID_SESSION_TIMEOUT
  a.session_ms = 31 * 60 * 1000;
  EXPECT_EQ(join(c, 5, a).error, 26);
  a.session_ms = 10000;
  a.instance = "static-1";
  EXPECT_EQ(join(c, 5, a).error, 35);  // G8: static membership refused, in every request
  a.instance.reset();
  {
    const int32_t corr = c.send(12, 3, [](Writer& w) {
      w.string("g");
      w.i32(1);
      w.string("m");
      w.nullable_string(std::string_view("static-1"));
    });
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();
    EXPECT_EQ(r.i16(), 35);
  }
  {
    const int32_t corr = c.send(8, 7, [](Writer& w) {
      w.string("g");
      w.i32(-1);
      w.string("");
      w.nullable_string(std::string_view("static-1"));
      w.array_count(1);
      w.string("t");
      w.array_count(1);
      w.i32(0);
      w.i64(1);
      w.i32(-1);
      w.nullable_string(std::nullopt);
    });
    const std::string resp = c.recv();
    Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();
    EXPECT_EQ(r.array_count(), 1);
    r.string();
    EXPECT_EQ(r.array_count(), 1);
    r.i32();
    EXPECT_EQ(r.i16(), 35);
  }
  a.protocols.clear();
  EXPECT_EQ(join(c, 5, a).error, 23);  // INCONSISTENT_GROUP_PROTOCOL: no protocol
  a.protocols = {{"range", ""}};
  // v0-3 join at once (no MEMBER_ID_REQUIRED step).
  const Join first = join(c, 3, a);
  ASSERT_EQ(first.error, 0);
  EXPECT_EQ(first.generation, 1);
  EXPECT_FALSE(first.member_id.empty());
  EXPECT_EQ(read_sync(c, send_sync(c, 2, "g", 1, first.member_id, {}), 2), std::make_pair(int16_t{0}, std::string()));
  // Another type, or no protocol in common with the members: refused.
  RawClient d(fx.port());
  JoinArgs other = a;
  other.type = "connect";
  EXPECT_EQ(join(d, 3, other).error, 23);
  other.type = "consumer";
  other.protocols = {{"sticky", ""}};
  EXPECT_EQ(join(d, 3, other).error, 23);
  a.member_id = "never-handed-out";
  EXPECT_EQ(join(d, 5, a).error, 25);  // UNKNOWN_MEMBER_ID
}

// B stops heartbeating: its session (1 s) expires by the group's timer and A is told to rejoin,
// then gets a generation of its own.
TEST(KafkaGroups, SessionExpiryRemovesASilentMemberAndRebalances) {
  KafkaFixture fx(storage::FlushPolicy::kNone, short_sessions());
  RawClient a(fx.port()), b(fx.port());
  JoinArgs ja, jb;
  ja.session_ms = 10000;
  jb.session_ms = 1000;
  ASSERT_NO_FATAL_FAILURE(form_pair(a, b, ja, jb, /*settle_alone=*/true));
  const auto silent_from = std::chrono::steady_clock::now();
  // A heartbeats every 100 ms; B says nothing.
  int16_t err = 0;
  auto expired_at = silent_from;
  for (int i = 0; i < 100 && err == 0; ++i) {
    std::this_thread::sleep_for(100ms);
    err = heartbeat(a, 3, "g", 2, ja.member_id);
    expired_at = std::chrono::steady_clock::now();
  }
  EXPECT_EQ(err, 27);
  EXPECT_GE(expired_at - silent_from, 900ms);
  EXPECT_LT(expired_at - silent_from, 3s);
  const Join a3 = join(a, 5, ja);
  EXPECT_EQ(a3.error, 0);
  EXPECT_EQ(a3.generation, 3);
  EXPECT_EQ(a3.members.size(), 1u);
  EXPECT_EQ(heartbeat(b, 3, "g", 2, jb.member_id), 25);
  EXPECT_EQ(fx.server().broker().stats().groups.expired_members, 1u);
}

// C joins a Stable group of A and B; A rejoins, B only heartbeats: at the rebalance deadline
// (the largest rebalance timeout, 1.5 s) B is removed and A and C get the new generation.
TEST(KafkaGroups, AMemberThatDoesNotRejoinIsRemovedAtTheRebalanceDeadline) {
  KafkaFixture fx(storage::FlushPolicy::kNone, short_sessions());
  RawClient a(fx.port()), b(fx.port()), c(fx.port());
  JoinArgs ja, jb, jc;
  for (JoinArgs* j : {&ja, &jb, &jc}) j->rebalance_ms = 1500;
  ASSERT_NO_FATAL_FAILURE(form_pair(a, b, ja, jb));

  jc.member_id = member_id(c, jc);
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t cc = send_join(c, 5, jc);
  ASSERT_TRUE(rebalance_begun(a, 2, ja.member_id)) << "C's JoinGroup never reached the group";
  const int32_t ac = send_join(a, 5, ja);
  EXPECT_EQ(heartbeat(b, 3, "g", 2, jb.member_id), 27);  // told, but it never rejoins
  const Join c3 = read_join(c, cc, 5);
  const Join a3 = read_join(a, ac, 5);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 4s);
  EXPECT_EQ(c3.generation, 3);
  EXPECT_EQ(a3.generation, 3);
  EXPECT_EQ(a3.leader, ja.member_id);
  EXPECT_EQ(a3.members.size(), 2u);
  EXPECT_TRUE(a3.members.count(jc.member_id));
  EXPECT_EQ(heartbeat(b, 3, "g", 2, jb.member_id), 25);
}

TEST(KafkaGroups, LeaveGroupRebalancesAndTheLastLeaveEmptiesTheGroup) {
  KafkaFixture fx;
  RawClient a(fx.port()), b(fx.port());
  JoinArgs ja, jb;
  ASSERT_NO_FATAL_FAILURE(form_pair(a, b, ja, jb));
  // v1: B leaves; A is told to rejoin and then is alone. An unknown member: error 25.
  EXPECT_EQ(leave_v1(b, "g", jb.member_id), 0);
  EXPECT_EQ(leave_v1(b, "g", jb.member_id), 25);
  EXPECT_EQ(heartbeat(a, 3, "g", 2, ja.member_id), 27);
  const Join a3 = join(a, 5, ja);
  EXPECT_EQ(a3.generation, 3);
  EXPECT_EQ(a3.members.size(), 1u);
  // v3 batch: A and a stranger; per-member errors.
  EXPECT_EQ(leave_v3(a, "g", {ja.member_id, "stranger"}), (std::vector<int16_t>{0, 25}));
  EXPECT_EQ(heartbeat(a, 3, "g", 3, ja.member_id), 25);  // the group is Empty
  EXPECT_EQ(leave_v3(a, "no-such-group", {"x"}), std::vector<int16_t>{25});
  // A new member of the Empty group starts the next generation.
  JoinArgs jn;
  jn.member_id = member_id(a, jn);
  EXPECT_EQ(join(a, 5, jn).generation, 5);  // 4 was the empty one the last leave made
}

TEST(KafkaGroups, OffsetCommitAndFetchRoundTripWithTheirChecks) {
  KafkaFixture fx;
  create(fx.store(), "t", 3);
  RawClient c(fx.port());
  // Standalone commits (generation -1, a group with no members), v2 and v7.
  EXPECT_EQ(commit(c, 2, "solo", -1, "", {{"t", 0, 10, "ten"}, {"t", 1, 20, std::nullopt}}),
            (std::vector<int16_t>{0, 0}));
  EXPECT_EQ(commit(c, 7, "solo", -1, "", {{"t", 2, 30, ""}}), std::vector<int16_t>{0});
  for (int16_t v : {1, 5}) {
    auto f =
        fetch(c, v, "solo", std::vector<std::pair<std::string, int32_t>>{{"t", 0}, {"t", 1}, {"t", 2}, {"nope", 0}});
    EXPECT_EQ(f[K("t", 0)].offset, 10);
    EXPECT_EQ(f[K("t", 0)].metadata.value_or("<null>"), "ten");
    EXPECT_EQ(f[K("t", 1)].offset, 20);
    EXPECT_EQ(f[K("t", 1)].metadata.value_or("<null>"), "");  // null kept as "" (Kafka's)
    EXPECT_EQ(f[K("t", 2)].offset, 30);
    EXPECT_EQ(f[K("nope", 0)].offset, -1);  // nothing committed: -1, no error
    EXPECT_EQ(f[K("nope", 0)].error, 0);
  }
  auto all = fetch(c, 2, "solo", std::nullopt);  // every committed partition
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(all[K("t", 2)].offset, 30);
  EXPECT_TRUE(fetch(c, 2, "nobody-committed", std::nullopt).empty());
  EXPECT_EQ(fetch(c, 1, "nobody-committed", std::vector<std::pair<std::string, int32_t>>{{"t", 0}})[K("t", 0)].offset,
            -1);
  // Per-partition checks: unknown topic or partition, metadata over 4096 bytes.
  EXPECT_EQ(commit(c, 7, "solo", -1, "",
                   {{"nope", 0, 1, std::nullopt},
                    {"t", 9, 1, std::nullopt},
                    {"t", 0, 11, std::string(4097, 'm')},
                    {"t", 0, 12, std::string(4096, 'm')}}),
            (std::vector<int16_t>{3, 3, 12, 0}));
  // A generation on a group that does not exist: ILLEGAL_GENERATION.
  EXPECT_EQ(commit(c, 7, "ghost", 3, "m", {{"t", 0, 1, std::nullopt}}), std::vector<int16_t>{22});
  // A real group: the member and generation are checked.
  RawClient m(fx.port());
  JoinArgs j;
  j.member_id = member_id(m, j);
  ASSERT_EQ(join(m, 5, j).generation, 1);
  EXPECT_EQ(commit(m, 7, "g", 1, j.member_id, {{"t", 0, 5, std::nullopt}}),
            std::vector<int16_t>{27});  // not synced yet
  ASSERT_EQ(read_sync(m, send_sync(m, 3, "g", 1, j.member_id, {}), 3).first, 0);
  EXPECT_EQ(commit(m, 7, "g", 1, j.member_id, {{"t", 0, 5, std::nullopt}}), std::vector<int16_t>{0});
  EXPECT_EQ(commit(m, 7, "g", 0, j.member_id, {{"t", 0, 6, std::nullopt}}), std::vector<int16_t>{22});
  EXPECT_EQ(commit(m, 7, "g", 1, "someone", {{"t", 0, 6, std::nullopt}}), std::vector<int16_t>{25});
  EXPECT_EQ(commit(m, 7, "g", -1, "", {{"t", 0, 6, std::nullopt}}), std::vector<int16_t>{25});  // the group has members
  EXPECT_EQ(fetch(m, 5, "g", std::vector<std::pair<std::string, int32_t>>{{"t", 0}})[K("t", 0)].offset, 5);
}

// Committed offsets are in __kafka_offsets: a restart of the Broker and the Store reads them
// back; an unchanged re-commit writes no record while its record is in the active segment.
TEST(KafkaGroups, CommittedOffsetsSurviveARestart) {
  KafkaFixture fx(storage::FlushPolicy::kEveryBatch);
  create(fx.store(), "t", 2);
  {
    RawClient c(fx.port());
    EXPECT_EQ(commit(c, 7, "g", -1, "", {{"t", 0, 100, "first"}, {"t", 1, 7, std::nullopt}}),
              (std::vector<int16_t>{0, 0}));
    EXPECT_EQ(commit(c, 7, "g", -1, "", {{"t", 0, 150, "second"}}), std::vector<int16_t>{0});
    storage::Log* log = fx.store().find(kOffsetsTopic, 0).value();
    const int64_t end = log->end_offset();
    EXPECT_EQ(end, 3);
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(commit(c, 7, "g", -1, "", {{"t", 0, 150, "second"}}), std::vector<int16_t>{0});
    EXPECT_EQ(log->end_offset(), end);
  }
  fx.close();
  fx.open();
  RawClient c(fx.port());
  auto f = fetch(c, 5, "g", std::nullopt);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_EQ(f[K("t", 0)].offset, 150);
  EXPECT_EQ(f[K("t", 0)].metadata.value_or(""), "second");
  EXPECT_EQ(f[K("t", 1)].offset, 7);
  // Membership is not kept: a member from before the restart is unknown and rejoins.
  EXPECT_EQ(heartbeat(c, 3, "g", 1, "g-member-before"), 25);
}

// Server::stop answers a JoinGroup parked for a rebalance (60 s rebalance timeout) at once.
TEST(KafkaGroups, StopAnswersParkedJoinGroupRequests) {
  KafkaFixture fx;
  RawClient a(fx.port()), b(fx.port());
  JoinArgs ja, jb;
  ja.rebalance_ms = jb.rebalance_ms = 60000;
  ja.member_id = member_id(a, ja);
  ASSERT_EQ(join(a, 5, ja).generation, 1);
  jb.member_id = member_id(b, jb);
  const int32_t bc = send_join(b, 5, jb);  // waits for A, which never rejoins
  ASSERT_TRUE(rebalance_begun(a, 1, ja.member_id)) << "B's JoinGroup never reached the group";
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] { fx.server().stop(std::chrono::seconds(5)); });
  const Join jr = read_join(b, bc, 5);
  stopper.join();
  EXPECT_EQ(jr.error, 15);  // COORDINATOR_NOT_AVAILABLE
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
}

TEST(KafkaGroups, MalformedGroupRequestsCloseOnlyTheirConnection) {
  KafkaFixture fx;
  RawClient parked(fx.port()), leader(fx.port());
  // A member parked in a JoinGroup on its own connection: unaffected by the bad ones.
  JoinArgs ja, jb;
  ja.member_id = member_id(leader, ja);
  ASSERT_EQ(join(leader, 5, ja).generation, 1);
  jb.member_id = member_id(parked, jb);
  const int32_t pc = send_join(parked, 5, jb);
  // Parked before the bad requests come, and before the leader rejoins: had the rejoin come
  // first, it would get generation 1 at once (G2: a join in CompletingRebalance with unchanged
  // protocols) and the parked member generation 2 only at the 10 s rebalance deadline.
  ASSERT_TRUE(rebalance_begun(leader, 1, ja.member_id)) << "the parked JoinGroup never reached the group";
  const std::vector<std::pair<std::pair<int16_t, int16_t>, std::function<void(Writer&)>>> bad = {
      {{11, 5},
       [](Writer& w) {  // JoinGroup: a protocol count past the frame
         w.string("g");
         w.i32(10000);
         w.i32(10000);
         w.string("");
         w.nullable_string(std::nullopt);
         w.string("consumer");
         w.array_count(1000);
       }},
      {{14, 3},
       [](Writer& w) {  // SyncGroup: a null assignment
         w.string("g");
         w.i32(1);
         w.string("m");
         w.nullable_string(std::nullopt);
         w.array_count(1);
         w.string("m");
         w.i32(-1);
       }},
      {{12, 3},
       [](Writer& w) {  // Heartbeat: cut short
         w.string("g");
         w.i32(1);
       }},
      {{13, 3},
       [](Writer& w) {  // LeaveGroup v3: a negative member count
         w.string("g");
         w.array_count(-3);
       }},
      {{8, 7},
       [](Writer& w) {  // OffsetCommit: a metadata length past the frame
         w.string("g");
         w.i32(-1);
         w.string("");
         w.nullable_string(std::nullopt);
         w.array_count(1);
         w.string("t");
         w.array_count(1);
         w.i32(0);
         w.i64(1);
         w.i32(-1);
         w.i16(500);
       }},
      {{9, 1},
       [](Writer& w) {  // OffsetFetch v1: a null topic list (v2+ only)
         w.string("g");
         w.array_count(-1);
       }},
      {{10, 2},
       [](Writer& w) {  // FindCoordinator: a byte after the last field
         w.string("g");
         w.i8(0);
         w.i8(0);
       }},
  };
  for (const auto& [api, body] : bad) {
    RawClient c(fx.port());
    c.send(api.first, api.second, body);
    EXPECT_TRUE(c.closed_by_server()) << api.first;
  }
  EXPECT_EQ(fx.server().broker().stats().malformed, bad.size());
  // The parked member is still parked, and completes when the leader rejoins.
  const Join l2 = join(leader, 5, ja);
  EXPECT_EQ(l2.generation, 2);
  EXPECT_EQ(read_join(parked, pc, 5).generation, 2);
}

}  // namespace
}  // namespace lionet::kafka
