// The lionet binary's `kafka` server type: kcat produces keyed records that the HTTP storage
// API serves, and consumes what was POSTed over HTTP; a librdkafka consumer group's committed
// offsets survive a kill -9 of the binary (a new member resumes exactly after them); bad kafka
// configurations are refused naming the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../kafka/kafka_test_util.h"
#include "../kafka/rdkafka_util.h"
#include "app_process.h"

namespace lionet::app {
namespace {
using namespace lionet::app::testing;

TEST(AppKafka, KcatAndTheHttpStorageApiSeeEachOthersRecords) {
  ASSERT_EQ(sh("kcat -V >/dev/null 2>&1 && echo yes"), "yes\n") << "kcat is missing: run scripts/install-deps.sh";
  TempConf conf;
  const int http = free_port(), port = free_port();
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data, flush: {policy: every_batch}}\n"
                 "servers:\n"
                 "  - name: api\n    type: http\n    listen: ['127.0.0.1:" +
                 std::to_string(http) +
                 "']\n"
                 "    routes:\n"
                 "      - {path: /topics, type: storage}\n"
                 "      - {path: /metrics, type: metrics}\n"
                 "  - name: kafka\n    type: kafka\n    listen: ['127.0.0.1:" +
                 std::to_string(port) + "']\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  EXPECT_NE(p.output().find("server kafka (kafka) on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << p.output();
  const std::string b = "-b 127.0.0.1:" + std::to_string(port);
  int rc = -1;
  sh("printf 'user1:signed up\\nuser2:paid\\n' | timeout 30 kcat " + b + " -t events -P -K: 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(http) + "/topics/events/partitions/0/records";
  const Curl got = curl("'" + base + "?offset=0'");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_NE(got.body.find(R"("key":"user1")"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find(R"("value":"paid")"), std::string::npos) << got.body;
  const Curl posted = curl("-X POST --data-binary 'from http' '" + base + "?key=web'");
  EXPECT_EQ(posted.status, 201) << posted.body;
  const std::string out = sh("timeout 30 kcat " + b + " -q -t events -C -o beginning -e -f '%k=%s@%o\\n' 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "user1=signed up@0\nuser2=paid@1\nweb=from http@2\n");
  const Curl m = curl("http://127.0.0.1:" + std::to_string(http) + "/metrics");
  EXPECT_NE(m.body.find("lionet_kafka_records_in_total{server=\"kafka\"} 2"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_kafka_records_out_total{server=\"kafka\"} "), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_kafka_offset_commits_total{server=\"kafka\"} 0"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_kafka_group_rebalances_total{server=\"kafka\"} 0"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("lionet_connections_accepted_total{server=\"kafka\",type=\"kafka\"}"), std::string::npos)
      << m.body;
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

// A member of group "kg" consumes 1,000 of 2,000 records (four partitions) and commits them
// synchronously; the binary is killed with SIGKILL at once and started again on the same data;
// a new member of the group starts each partition exactly at the committed offset: together
// every record once. flush policy none: what an acknowledged commit needs to survive a crash
// of the process is its write, not an fdatasync.
TEST(AppKafka, CommittedOffsetsSurviveAKill9) {
  using lionet::kafka::testing::GroupMember;
  using lionet::kafka::testing::Ledger;
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data, default_partitions: 4, flush: {policy: none}}\n"
                 "servers:\n"
                 "  - name: kafka\n    type: kafka\n    listen: ['127.0.0.1:" +
                 std::to_string(port) + "']\n");
  const std::string bootstrap = "127.0.0.1:" + std::to_string(port);
  constexpr int64_t kTotal = 2000, kFirst = 1000;
  constexpr int32_t kPartitions = 4;
  auto p = std::make_unique<Process>(std::vector<std::string>{"-c", conf.path()});
  REQUIRE_BINARY(*p);
  ASSERT_TRUE(p->wait_for(kReady)) << p->output();
  ASSERT_EQ(lionet::kafka::testing::produce_numbered(bootstrap, "kt", kPartitions, 0, kTotal), kTotal);

  Ledger before(kPartitions);
  auto first = std::make_unique<GroupMember>(bootstrap, "kg", "kt", "before-kill", before, 100);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (before.total() < kFirst && std::chrono::steady_clock::now() < deadline) first->poll_once(100);
  ASSERT_EQ(before.total(), kFirst);
  ASSERT_TRUE(first->commit());
  p->signal(SIGKILL);
  EXPECT_EQ(p->wait(), -1);  // killed by the signal
  p = std::make_unique<Process>(std::vector<std::string>{"-c", conf.path()});
  ASSERT_TRUE(p->wait_for(kReady)) << p->output();
  first.reset();  // its membership died with the process; it leaves with nothing to commit

  Ledger after(kPartitions);
  GroupMember second(bootstrap, "kg", "kt", "after-restart", after, 100);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (before.total() + after.total() < kTotal && std::chrono::steady_clock::now() < deadline) second.poll_once(100);
  for (int i = 0; i < 5; ++i) second.poll_once(100);  // and nothing more (no record twice)
  second.close();
  EXPECT_EQ(after.total(), kTotal - kFirst);
  EXPECT_EQ(before.misplaced() + after.misplaced(), 0);
  const auto b = before.offsets(), a = after.offsets();
  for (int32_t part = 0; part < kPartitions; ++part) {
    const auto& got_before = b[static_cast<std::size_t>(part)];
    const auto& got_after = a[static_cast<std::size_t>(part)];
    std::vector<int64_t> all(got_before);
    all.insert(all.end(), got_after.begin(), got_after.end());
    std::vector<int64_t> want(kTotal / kPartitions);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(all, want) << "partition " << part << ": " << got_before.size() << " before the kill, "
                         << got_after.size() << " after";
  }
  p->signal(SIGTERM);
  EXPECT_EQ(p->wait(), 0) << p->output();
}

// The group keys reach the server: with group_min_session_timeout 1000ms a JoinGroup asking
// for 1500 ms is accepted, one asking for 900 ms gets INVALID_SESSION_TIMEOUT (26); and
// --print-config shows them.
TEST(AppKafka, GroupSessionTimeoutKeysReachTheCoordinator) {
  TempConf conf;
  const int port = free_port();
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "storage: {data_dir: " +
                 conf.path() +
                 "/data}\n"
                 "servers:\n"
                 "  - name: kafka\n    type: kafka\n    listen: ['127.0.0.1:" +
                 std::to_string(port) +
                 "']\n"
                 "    group_min_session_timeout: 1000ms\n    group_max_session_timeout: 2000ms\n"
                 "    offset_metadata_max_bytes: 10\n");
  {
    Process pc({"--print-config", "-c", conf.path()});
    REQUIRE_BINARY(pc);
    EXPECT_EQ(pc.wait(), 0) << pc.output();
    EXPECT_NE(pc.output().find("group_min_session_timeout: 1000ms"), std::string::npos) << pc.output();
    EXPECT_NE(pc.output().find("offset_metadata_max_bytes: 10\n"), std::string::npos) << pc.output();
  }
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  auto join_error = [&](int32_t session_ms) {
    lionet::kafka::testing::RawClient c(port);
    const int32_t corr = c.send(11, 2, [&](lionet::kafka::Writer& w) {
      w.string("g");
      w.i32(session_ms);
      w.i32(session_ms);
      w.string("");
      w.string("consumer");
      w.array_count(1);
      w.string("range");
      w.bytes("");
    });
    const std::string resp = c.recv();
    lionet::kafka::Reader r(resp);
    EXPECT_EQ(r.i32(), corr);
    r.i32();  // throttle_time_ms (v2+)
    return r.i16();
  };
  EXPECT_EQ(join_error(1500), 0);
  EXPECT_EQ(join_error(900), 26);
  EXPECT_EQ(join_error(2001), 26);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST(AppKafka, BadKafkaConfigurationsAreRefusedNamingTheKey) {
  struct Case {
    std::string server, expect;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], max_request_size: 10}", "max_request_size"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], advertised_port: 70000}", "advertised_port"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], routes: [{path: /, type: health}]}", "no routes"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], group_min_session_timeout: 0ms}",
            "group_min_session_timeout"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], group_min_session_timeout: 10000ms, "
            "group_max_session_timeout: 9000ms}",
            "must be at least group_min_session_timeout"},
           {"{name: k, type: kafka, listen: ['127.0.0.1:9092'], offset_metadata_max_bytes: 40000}",
            "offset_metadata_max_bytes"},
       }) {
    TempConf conf;
    conf.write("server.yml", "servers:\n  - " + c.server + "\n");
    Process p({"-c", conf.path(), "--check"});
    REQUIRE_BINARY(p);
    EXPECT_EQ(p.wait(), 1) << c.server;
    EXPECT_NE(p.output().find(c.expect), std::string::npos) << c.server << "\n" << p.output();
  }
}

}  // namespace
}  // namespace lionet::app
