// lionet/kafka/group_coordinator.h: consumer groups on one node: Kafka's classic group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and committed offsets (OffsetCommit,
// OffsetFetch, kept by offset_store.h). FindCoordinator needs no state (broker.cc answers it:
// this broker).
//
// Owns: the groups (state, generation, protocol, leader, members, the member ids handed out
// and not yet used), the parked JoinGroup and SyncGroup requests, one timer fiber per group
// with members (session expiry, rebalance and sync deadlines), the checks an OffsetCommit must
// pass. Must not: encode or decode (broker.cc does), persist membership (only offsets are
// persisted: after a restart every group is Empty and its members rejoin once, after an
// UNKNOWN_MEMBER_ID), or run a partition assignor (the leader client does, as in Kafka).
//
// The group protocol (Kafka's GroupCoordinator, classic protocol, numbered for the code):
//  G1 States: Empty (no members), PreparingRebalance (waiting for the members to (re)join),
//     CompletingRebalance (joined; waiting for the leader's SyncGroup), Stable.
//  G2 JoinGroup with no member id: v4+ gets MEMBER_ID_REQUIRED (79) with a new id
//     (client_id-<32 hex>) that is remembered as pending for one session timeout; v0-3 joins at
//     once. A known (or pending) member joins: its JoinGroup parks until the join phase ends.
//     A join moves Empty, Stable and CompletingRebalance to PreparingRebalance (Stable only if
//     the member is the leader or changed its protocols; otherwise the current generation is
//     returned at once, as to a member that missed its answer).
//  G3 The join phase ends when every member has a parked JoinGroup and no pending id is
//     outstanding, or at the rebalance deadline (now + the largest rebalance timeout of the
//     members, set when PreparingRebalance began): members without a parked JoinGroup are
//     removed, the generation is incremented, the protocol is chosen (among those every
//     member supports, the one most members list first), and every parked JoinGroup is
//     answered; the leader's answer lists every member with its metadata for that protocol.
//     No member left: Empty (the generation still moves on).
//  G4 SyncGroup in CompletingRebalance parks; the leader's carries the assignments (a member
//     it left out gets an empty one); then every parked SyncGroup gets its member's
//     assignment and the group is Stable. The leader does not sync before the sync deadline
//     (now + the largest rebalance timeout, from the end of the join phase): the members that
//     have not sent SyncGroup are removed and a rebalance begins. SyncGroup in Stable returns
//     the member's assignment; in PreparingRebalance REBALANCE_IN_PROGRESS (27).
//  G5 Heartbeat: unknown member UNKNOWN_MEMBER_ID (25), another generation ILLEGAL_GENERATION
//     (22), PreparingRebalance REBALANCE_IN_PROGRESS (27) (the client then rejoins), else NONE;
//     all but the first two push the member's session deadline to now + its session timeout.
//  G6 Session expiry: a member with no parked JoinGroup or SyncGroup whose session deadline
//     passed, and a pending id one session timeout old, are removed. Removing a member (expiry,
//     LeaveGroup, G3/G4 deadlines) answers its parked requests with UNKNOWN_MEMBER_ID and, in
//     Stable or CompletingRebalance, begins a rebalance (parked SyncGroups get
//     REBALANCE_IN_PROGRESS); in PreparingRebalance it may end the join phase (G3).
//  G7 OffsetCommit: generation -1 on a group with no members is a standalone commit (stored);
//     otherwise CompletingRebalance answers REBALANCE_IN_PROGRESS, an unknown member
//     UNKNOWN_MEMBER_ID, another generation ILLEGAL_GENERATION; PreparingRebalance accepts the
//     current generation's commits (a client commits in its revoke callback before rejoining).
//     An unknown group with a generation >= 0: ILLEGAL_GENERATION. Per partition: metadata
//     longer than offset_metadata_max_bytes OFFSET_METADATA_TOO_LARGE (12), a topic or
//     partition the store does not have UNKNOWN_TOPIC_OR_PARTITION (3).
//  G8 Static membership (group.instance.id) is refused: a JoinGroup, SyncGroup, Heartbeat or
//     OffsetCommit carrying one gets UNSUPPORTED_VERSION (35), as Kafka answers when its
//     inter-broker protocol predates static membership. No member ever has an instance id, so
//     a LeaveGroup v3 member naming one is UNKNOWN_MEMBER_ID.
//
// Timers: each group with members or pending ids has one fiber ("kafka-group") parked on a
// CondVar until the group's earliest deadline (G3, G4, G6) or a change (a join, a rebalance);
// heartbeats only push deadlines later and wake nobody. It ends when the group is Empty with no
// pending id. A parked request also wakes at its group's earliest deadline plus a second and
// applies it itself, so deadlines hold even where no fiber could be spawned.
//
// Concurrency: every method may run on any number of fibers at once (one per connection);
// join() and sync() park their fiber (never the worker) until answered. Each group has a
// lionet::Mutex held across its state changes and across an OffsetCommit's append (a fiber
// wait: the file write); the group table has a std::mutex held for a lookup only.
// stop() (any thread, once) answers every parked request with COORDINATOR_NOT_AVAILABLE (15),
// makes later group requests answer it at once, and waits for the timer fibers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/kafka/offset_store.h"
#include "lionet/kafka/protocol.h"
#include "lionet/kafka/requests.h"
#include "lionet/storage/fwd.h"
#include "lionet/sync/wait_group.h"

namespace lionet::kafka {

struct GroupOptions {
  // A JoinGroup's session timeout outside [min, max] gets INVALID_SESSION_TIMEOUT (26): the
  // shortest failure detection a client may ask for (each member's timer wakes once per
  // session) and the longest a dead member may hold its partitions. Kafka's
  // group.min.session.timeout.ms / group.max.session.timeout.ms.
  // YAML: servers[].group_min_session_timeout / group_max_session_timeout.
  Duration min_session_timeout = std::chrono::seconds(6);
  Duration max_session_timeout = std::chrono::minutes(30);
  // Longest metadata string an OffsetCommit may attach to an offset (Kafka's
  // offset.metadata.max.bytes); each is kept in memory and in __kafka_offsets.
  // YAML: servers[].offset_metadata_max_bytes.
  std::size_t offset_metadata_max_bytes = 4096;
};

struct GroupStats {
  uint64_t rebalances = 0;  // join phases completed (generations made)
  uint64_t expired_members = 0;  // members removed by session expiry or a missed deadline
  uint64_t offset_commits = 0;  // partitions committed
};

class GroupCoordinator {
 public:
  struct JoinResult {
    ErrorCode error = ErrorCode::kNone;
    int32_t generation_id = -1;
    std::string protocol_name;
    std::string leader_id;
    std::string member_id;
    struct Member {
      std::string member_id;
      std::string metadata;
    };
    std::vector<Member> members;  // the leader's answer only
  };
  struct SyncResult {
    ErrorCode error = ErrorCode::kNone;
    std::string assignment;
  };
  struct LeaveResult {
    ErrorCode error = ErrorCode::kNone;  // the request's (INVALID_GROUP_ID, ...)
    std::vector<ErrorCode> members;  // one per member of the request
  };
  // One per topic, one per partition, in the request's order.
  using CommitResult = std::vector<std::vector<ErrorCode>>;
  struct FetchedOffset {
    int32_t partition = 0;
    int64_t offset = -1;  // -1: nothing committed
    int32_t leader_epoch = -1;
    std::string metadata;
  };
  struct FetchResult {
    ErrorCode error = ErrorCode::kNone;
    std::vector<std::pair<std::string, std::vector<FetchedOffset>>> topics;
  };

  // Opens the offsets (internal topic __kafka_offsets). Errors: the store's.
  static Result<std::unique_ptr<GroupCoordinator>> open(storage::Store& store, GroupOptions options);
  ~GroupCoordinator();
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  // `client_id` names new member ids; `require_known_member_id`: JoinGroup v4+ (G2).
  JoinResult join(const JoinGroupRequest& r, std::string_view client_id, bool require_known_member_id);
  SyncResult sync(const SyncGroupRequest& r);
  ErrorCode heartbeat(const HeartbeatRequest& r);
  LeaveResult leave(const LeaveGroupRequest& r);
  CommitResult commit_offsets(const OffsetCommitRequest& r);
  FetchResult fetch_offsets(const OffsetFetchRequest& r) const;

  void stop();
  GroupStats stats() const noexcept;

  struct Group;  // in group_coordinator.cc

 private:
  GroupCoordinator(storage::Store& store, GroupOptions options, std::unique_ptr<OffsetStore> offsets);
  std::shared_ptr<Group> find(std::string_view id, bool create);
  void start_timer(const std::shared_ptr<Group>& g);  // under g->mu
  void run_timer(std::shared_ptr<Group> g) noexcept;

  storage::Store& store_;
  const GroupOptions opt_;
  std::unique_ptr<OffsetStore> offsets_;
  std::mutex groups_mu_;  // guards groups_ (the map only); held for no parking
  std::map<std::string, std::shared_ptr<Group>, std::less<>> groups_;
  std::atomic<bool> stopping_{false};
  lionet::WaitGroup timers_;  // one count per timer fiber
  std::atomic<uint64_t> rebalances_{0}, expired_{0}, commits_{0};
};

}  // namespace lionet::kafka
