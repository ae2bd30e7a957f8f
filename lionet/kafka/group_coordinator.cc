// lionet/kafka/group_coordinator.cc: GroupCoordinator (see group_coordinator.h; G1-G8 there).
#include "lionet/kafka/group_coordinator.h"

#include <sys/random.h>

#include <algorithm>

#include "lionet/sched/scheduler.h"
#include "lionet/storage/store.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"

namespace lionet::kafka {
namespace {

enum class State { kEmpty, kPreparingRebalance, kCompletingRebalance, kStable };  // G1

// A parked JoinGroup / SyncGroup: lives on its request's fiber stack; filled (done = true)
// under the group's lock by whoever ends the wait, which also unlinks it from its member.
struct JoinWaiter {
  bool done = false;
  GroupCoordinator::JoinResult result;
};
struct SyncWaiter {
  bool done = false;
  GroupCoordinator::SyncResult result;
};

struct Protocol {
  std::string name;
  std::string metadata;
  bool operator==(const Protocol&) const = default;
};

struct Member {
  std::string id;
  Duration session_timeout{};
  Duration rebalance_timeout{};
  std::vector<Protocol> protocols;  // the member's preference order
  JoinWaiter* join = nullptr;  // its parked JoinGroup, if any
  SyncWaiter* sync = nullptr;  // its parked SyncGroup, if any
  std::string assignment;  // this generation's, once the leader synced
  TimePoint session_deadline{};
};

std::string new_member_id(std::string_view client_id) {
  unsigned char raw[16] = {};
  if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    // No entropy to be had: a process-wide counter still keeps ids unique in this process.
    static std::atomic<uint64_t> counter{0};
    const uint64_t c = counter.fetch_add(1, std::memory_order_relaxed) + 1;
    const int64_t t = lionet::now().time_since_epoch().count();
    for (int i = 0; i < 8; ++i) raw[i] = static_cast<unsigned char>(c >> (8 * i));
    for (int i = 0; i < 8; ++i) raw[8 + i] = static_cast<unsigned char>(static_cast<uint64_t>(t) >> (8 * i));
  }
  std::string id(client_id);
  id.push_back('-');
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char b : raw) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

Duration ms(int32_t v) { return std::chrono::milliseconds(std::max(0, v)); }

std::vector<Protocol> protocols_of(const JoinGroupRequest& r) {
  std::vector<Protocol> out;
  out.reserve(r.protocols.size());
  for (const auto& p : r.protocols) out.push_back({std::string(p.name), std::string(p.metadata)});
  return out;
}

}  // namespace

struct GroupCoordinator::Group {
  explicit Group(std::string name, std::atomic<uint64_t>& rebalances, std::atomic<uint64_t>& expired)
      : id(std::move(name)), rebalances_(rebalances), expired_(expired) {}

  const std::string id;
  lionet::Mutex mu;  // guards everything below
  lionet::CondVar answered;  // parked JoinGroup/SyncGroup: a waiter was filled, or stop()
  lionet::CondVar changed;  // the timer fiber: a deadline may be earlier now, or stop()
  State state = State::kEmpty;
  int32_t generation = 0;
  std::string protocol_type;  // of the members (set by the first member of an Empty group)
  std::string protocol_name;  // chosen at the end of the last join phase
  std::string leader;
  std::map<std::string, Member> members;
  std::map<std::string, TimePoint> pending;  // ids from MEMBER_ID_REQUIRED -> expiry (G2, G6)
  TimePoint rebalance_deadline{};  // G3, in PreparingRebalance
  TimePoint sync_deadline{};  // G4, in CompletingRebalance
  bool timer_running = false;

  // ---- everything below runs under mu

  bool empty() const { return members.empty() && pending.empty() && state == State::kEmpty; }

  // Can a member of this type with these protocols be in the group (with its current members)?
  bool supports(std::string_view type, const std::vector<Protocol>& ps) const {
    if (type.empty() || ps.empty()) return false;
    if (members.empty()) return true;
    if (type != protocol_type) return false;
    for (const Protocol& p : ps) {
      bool all = true;
      for (const auto& [_, m] : members) {
        all = std::any_of(m.protocols.begin(), m.protocols.end(), [&](const Protocol& q) { return q.name == p.name; });
        if (!all) break;
      }
      if (all) return true;
    }
    return false;
  }

  // G3: among the protocols every member supports, the one most members list first among
  // those (ties: the leader's preference order).
  std::string select_protocol() const {
    std::vector<std::string> candidates;
    const Member& first = members.count(leader) ? members.at(leader) : members.begin()->second;
    for (const Protocol& p : first.protocols) {
      bool all = true;
      for (const auto& [_, m] : members)
        all = all &&
              std::any_of(m.protocols.begin(), m.protocols.end(), [&](const Protocol& q) { return q.name == p.name; });
      if (all) candidates.push_back(p.name);
    }
    std::map<std::string, int> votes;
    for (const auto& [_, m] : members) {
      for (const Protocol& p : m.protocols) {
        if (std::find(candidates.begin(), candidates.end(), p.name) != candidates.end()) {
          ++votes[p.name];
          break;
        }
      }
    }
    std::string best;
    int most = -1;
    for (const std::string& c : candidates) {
      if (votes[c] > most) {
        most = votes[c];
        best = c;
      }
    }
    return best;
  }

  Duration max_rebalance_timeout() const {
    Duration d{};
    for (const auto& [_, m] : members) d = std::max(d, m.rebalance_timeout);
    return d;
  }

  JoinResult current_join_result(const Member& m) const {
    JoinResult r;
    r.generation_id = generation;
    r.protocol_name = protocol_name;
    r.leader_id = leader;
    r.member_id = m.id;
    if (m.id == leader) {
      for (const auto& [id, o] : members) {
        auto p = std::find_if(o.protocols.begin(), o.protocols.end(),
                              [&](const Protocol& q) { return q.name == protocol_name; });
        r.members.push_back({id, p == o.protocols.end() ? std::string() : p->metadata});
      }
    }
    return r;
  }

  // Answers the member's parked JoinGroup or SyncGroup (its slot), if any.
  template <class Pending, class R>
  void answer(Pending*& slot, R r) {
    if (!slot) return;
    slot->result = std::move(r);
    slot->done = true;
    slot = nullptr;
    answered.notify_all();
  }
  void answer_join(Member& m, JoinResult r) { answer(m.join, std::move(r)); }
  void answer_sync(Member& m, SyncResult r) { answer(m.sync, std::move(r)); }
  static JoinResult join_error(ErrorCode e) {
    JoinResult r;
    r.error = e;
    return r;
  }

  // G3: the end of the join phase.
  void complete_join(TimePoint now) {
    for (auto it = members.begin(); it != members.end();) {
      if (it->second.join) {
        ++it;
        continue;
      }
      expired_.fetch_add(1, std::memory_order_relaxed);
      answer_sync(it->second, {ErrorCode::kUnknownMemberId, {}});
      it = members.erase(it);
    }
    ++generation;
    rebalances_.fetch_add(1, std::memory_order_relaxed);
    if (members.empty()) {
      state = State::kEmpty;
      protocol_name.clear();
      leader.clear();
      changed.notify_all();
      return;
    }
    if (!members.count(leader)) leader = members.begin()->first;
    protocol_name = select_protocol();
    state = State::kCompletingRebalance;
    sync_deadline = now + max_rebalance_timeout();
    for (auto& [_, m] : members) {
      m.assignment.clear();
      m.session_deadline = now + m.session_timeout;
      answer_join(m, current_join_result(m));
    }
    changed.notify_all();
  }

  bool all_joined() const {
    if (!pending.empty()) return false;
    return std::all_of(members.begin(), members.end(), [](const auto& kv) { return kv.second.join != nullptr; });
  }

  void try_complete_join(TimePoint now) {
    if (state == State::kPreparingRebalance && all_joined()) complete_join(now);
  }

  void prepare_rebalance(TimePoint now) {
    if (state == State::kCompletingRebalance) {
      for (auto& [_, m] : members) {
        m.assignment.clear();
        answer_sync(m, {ErrorCode::kRebalanceInProgress, {}});
      }
    }
    state = State::kPreparingRebalance;
    rebalance_deadline = now + max_rebalance_timeout();
    changed.notify_all();
    try_complete_join(now);
  }

  // G6: removes a member and lets the group react.
  void remove_member(const std::string& id, TimePoint now) {
    auto it = members.find(id);
    if (it == members.end()) return;
    answer_join(it->second, join_error(ErrorCode::kUnknownMemberId));
    answer_sync(it->second, {ErrorCode::kUnknownMemberId, {}});
    members.erase(it);
    if (leader == id) leader = members.empty() ? std::string() : members.begin()->first;
    switch (state) {
      case State::kStable:
      case State::kCompletingRebalance: prepare_rebalance(now); break;
      case State::kPreparingRebalance: try_complete_join(now); break;
      case State::kEmpty: break;
    }
  }

  // Registers `w` as m's parked JoinGroup (a previous one is answered REBALANCE_IN_PROGRESS:
  // its client gave up on it) and updates what the member supports.
  void update_member(Member& m, const JoinGroupRequest& r, std::vector<Protocol> ps, JoinWaiter* w) {
    if (m.join && m.join != w) answer_join(m, join_error(ErrorCode::kRebalanceInProgress));
    m.protocols = std::move(ps);
    m.session_timeout = ms(r.session_timeout_ms);
    m.rebalance_timeout = ms(r.rebalance_timeout_ms);
    m.join = w;
  }

  // G3/G4/G6 deadlines that passed by `now`.
  void expire(TimePoint now) {
    bool changed_pending = false;
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second <= now) {
        it = pending.erase(it);
        changed_pending = true;
      } else {
        ++it;
      }
    }
    std::vector<std::string> dead;
    for (const auto& [id, m] : members)
      if (!m.join && !m.sync && m.session_deadline <= now) dead.push_back(id);
    for (const std::string& id : dead) {
      expired_.fetch_add(1, std::memory_order_relaxed);
      remove_member(id, now);
    }
    if (state == State::kPreparingRebalance && now >= rebalance_deadline) {
      complete_join(now);
    } else if (changed_pending) {
      try_complete_join(now);
    }
    if (state == State::kCompletingRebalance && now >= sync_deadline) {
      dead.clear();
      for (const auto& [id, m] : members)
        if (!m.sync) dead.push_back(id);
      for (const std::string& id : dead) {
        expired_.fetch_add(1, std::memory_order_relaxed);
        remove_member(id, now);
      }
    }
  }

  // The earliest deadline expire() would act on (TimePoint::max(): none).
  TimePoint next_deadline() const {
    TimePoint t = TimePoint::max();
    for (const auto& [_, d] : pending) t = std::min(t, d);
    for (const auto& [_, m] : members)
      if (!m.join && !m.sync) t = std::min(t, m.session_deadline);
    if (state == State::kPreparingRebalance) t = std::min(t, rebalance_deadline);
    if (state == State::kCompletingRebalance) t = std::min(t, sync_deadline);
    return t;
  }

 private:
  std::atomic<uint64_t>& rebalances_;
  std::atomic<uint64_t>& expired_;
};

namespace {
// Parks until `done()` or stop, under `lk` (the group's lock). Wakes at the group's earliest
// deadline plus a second to apply it itself (header: Timers). Returns false on stop.
template <class Done>
bool park(GroupCoordinator::Group& g, std::unique_lock<lionet::Mutex>& lk, const std::atomic<bool>& stopping,
          Done done) {
  while (!done()) {
    if (stopping.load(std::memory_order_acquire)) return false;
    const TimePoint next = g.next_deadline();
    if (next == TimePoint::max()) {
      if (!g.answered.wait(lk)) return false;  // cancelled (sched/cancel.h): as on stop
    } else if (g.answered.wait_until(lk, next + std::chrono::seconds(1)) == std::cv_status::timeout) {
      if (this_fiber::interruption() != 0) return false;
      g.expire(lionet::now());
    }
  }
  return true;
}
}  // namespace

Result<std::unique_ptr<GroupCoordinator>> GroupCoordinator::open(storage::Store& store, GroupOptions options) {
  auto offsets = OffsetStore::open(store);
  if (!offsets) return offsets.error();
  return std::unique_ptr<GroupCoordinator>(new GroupCoordinator(store, std::move(options), std::move(*offsets)));
}

GroupCoordinator::GroupCoordinator(storage::Store& store, GroupOptions options, std::unique_ptr<OffsetStore> offsets)
    : store_(store), opt_(std::move(options)), offsets_(std::move(offsets)) {}

GroupCoordinator::~GroupCoordinator() { stop(); }

std::shared_ptr<GroupCoordinator::Group> GroupCoordinator::find(std::string_view id, bool create) {
  std::lock_guard<std::mutex> lk(groups_mu_);
  auto it = groups_.find(id);
  if (it != groups_.end()) return it->second;
  if (!create) return nullptr;
  auto g = std::make_shared<Group>(std::string(id), rebalances_, expired_);
  groups_.emplace(std::string(id), g);
  return g;
}

void GroupCoordinator::start_timer(const std::shared_ptr<Group>& g) {
  g->changed.notify_all();  // a running timer recomputes its deadline
  if (g->timer_running || g->empty() || stopping_.load(std::memory_order_acquire)) return;
  Scheduler* sched = Scheduler::current();
  if (!sched) return;  // a plain thread: parked requests apply the deadlines themselves
  timers_.add(1);
  g->timer_running = true;
  try {
    sched->spawn_detached([this, g] { run_timer(g); }, SpawnOptions{.name = "kafka-group"});
  } catch (const std::exception&) {  // no fiber to be had: as on a plain thread
    g->timer_running = false;
    timers_.done();
  }
}

void GroupCoordinator::run_timer(std::shared_ptr<Group> g) noexcept {
  std::unique_lock<lionet::Mutex> lk(g->mu);
  while (!stopping_.load(std::memory_order_acquire)) {
    g->expire(lionet::now());
    if (g->empty()) break;
    const TimePoint next = g->next_deadline();
    // A cancelled timer fiber (Scheduler::stop cancels what is left) ends: its waits would
    // return at once from here on (sched/cancel.h).
    if (next == TimePoint::max()) {
      if (!g->changed.wait(lk)) break;
    } else if (g->changed.wait_until(lk, next) == std::cv_status::timeout && this_fiber::interruption() == ECANCELED) {
      break;
    }
  }
  g->timer_running = false;
  lk.unlock();
  timers_.done();
}

GroupCoordinator::JoinResult GroupCoordinator::join(const JoinGroupRequest& r, std::string_view client_id,
                                                    bool require_known_member_id) {
  if (r.group_id.empty()) return Group::join_error(ErrorCode::kInvalidGroupId);
  if (r.group_instance_id) return Group::join_error(ErrorCode::kUnsupportedVersion);  // G8
  const Duration session = ms(r.session_timeout_ms);
  if (r.session_timeout_ms < 0 || session < opt_.min_session_timeout || session > opt_.max_session_timeout)
    return Group::join_error(ErrorCode::kInvalidSessionTimeout);
  if (stopping_.load(std::memory_order_acquire)) return Group::join_error(ErrorCode::kCoordinatorNotAvailable);
  std::shared_ptr<Group> g = find(r.group_id, true);
  std::unique_lock<lionet::Mutex> lk(g->mu);
  const TimePoint now = lionet::now();
  std::vector<Protocol> ps = protocols_of(r);
  if (!g->supports(r.protocol_type, ps)) return Group::join_error(ErrorCode::kInconsistentGroupProtocol);
  JoinWaiter w;
  std::string id(r.member_id);
  if (id.empty()) {  // G2: a new member
    id = new_member_id(client_id);
    if (require_known_member_id) {
      g->pending[id] = now + session;
      start_timer(g);
      JoinResult res = Group::join_error(ErrorCode::kMemberIdRequired);
      res.member_id = id;
      return res;
    }
  }
  if (auto p = g->pending.find(id); p != g->pending.end() || r.member_id.empty()) {
    if (p != g->pending.end()) g->pending.erase(p);
    if (g->members.empty()) g->protocol_type = std::string(r.protocol_type);
    Member& m = g->members[id];
    m.id = id;
    g->update_member(m, r, std::move(ps), &w);
    if (g->leader.empty()) g->leader = id;
    if (g->state == State::kPreparingRebalance) {
      g->try_complete_join(now);
    } else {
      g->prepare_rebalance(now);
    }
  } else {
    auto it = g->members.find(id);
    if (it == g->members.end()) return Group::join_error(ErrorCode::kUnknownMemberId);
    Member& m = it->second;
    switch (g->state) {
      case State::kEmpty: return Group::join_error(ErrorCode::kUnknownMemberId);
      case State::kPreparingRebalance:
        g->update_member(m, r, std::move(ps), &w);
        g->try_complete_join(now);
        break;
      case State::kCompletingRebalance:
        if (ps == m.protocols) return g->current_join_result(m);  // it missed its answer
        g->update_member(m, r, std::move(ps), &w);
        g->prepare_rebalance(now);
        break;
      case State::kStable:
        if (id != g->leader && ps == m.protocols) {
          m.session_deadline = now + m.session_timeout;
          return g->current_join_result(m);
        }
        g->update_member(m, r, std::move(ps), &w);
        g->prepare_rebalance(now);
        break;
    }
  }
  start_timer(g);
  if (!park(*g, lk, stopping_, [&] { return w.done; })) {
    // stop(): unlink the waiter (it lives on this stack) before answering.
    if (auto it = g->members.find(id); it != g->members.end() && it->second.join == &w) it->second.join = nullptr;
    return Group::join_error(ErrorCode::kCoordinatorNotAvailable);
  }
  return std::move(w.result);
}

GroupCoordinator::SyncResult GroupCoordinator::sync(const SyncGroupRequest& r) {
  if (r.group_id.empty()) return {ErrorCode::kInvalidGroupId, {}};
  if (r.group_instance_id) return {ErrorCode::kUnsupportedVersion, {}};  // G8
  if (stopping_.load(std::memory_order_acquire)) return {ErrorCode::kCoordinatorNotAvailable, {}};
  std::shared_ptr<Group> g = find(r.group_id, false);
  if (!g) return {ErrorCode::kUnknownMemberId, {}};
  std::unique_lock<lionet::Mutex> lk(g->mu);
  auto it = g->members.find(std::string(r.member_id));
  if (it == g->members.end()) return {ErrorCode::kUnknownMemberId, {}};
  if (r.generation_id != g->generation) return {ErrorCode::kIllegalGeneration, {}};
  Member& m = it->second;
  const TimePoint now = lionet::now();
  switch (g->state) {
    case State::kEmpty: return {ErrorCode::kUnknownMemberId, {}};
    case State::kPreparingRebalance: return {ErrorCode::kRebalanceInProgress, {}};
    case State::kStable: m.session_deadline = now + m.session_timeout; return {ErrorCode::kNone, m.assignment};
    case State::kCompletingRebalance: break;
  }
  SyncWaiter w;
  if (m.sync) g->answer_sync(m, {ErrorCode::kRebalanceInProgress, {}});  // superseded
  m.sync = &w;
  if (m.id == g->leader) {  // G4: the assignments; then every parked SyncGroup is answered
    for (const auto& a : r.assignments)
      if (auto t = g->members.find(std::string(a.member_id)); t != g->members.end())
        t->second.assignment = a.assignment;
    g->state = State::kStable;
    for (auto& [_, o] : g->members) {
      o.session_deadline = now + o.session_timeout;
      g->answer_sync(o, {ErrorCode::kNone, o.assignment});
    }
    g->changed.notify_all();
  }
  if (!park(*g, lk, stopping_, [&] { return w.done; })) {
    if (auto t = g->members.find(std::string(r.member_id)); t != g->members.end() && t->second.sync == &w)
      t->second.sync = nullptr;
    return {ErrorCode::kCoordinatorNotAvailable, {}};
  }
  return std::move(w.result);
}

ErrorCode GroupCoordinator::heartbeat(const HeartbeatRequest& r) {
  if (r.group_id.empty()) return ErrorCode::kInvalidGroupId;
  if (r.group_instance_id) return ErrorCode::kUnsupportedVersion;  // G8
  if (stopping_.load(std::memory_order_acquire)) return ErrorCode::kCoordinatorNotAvailable;
  std::shared_ptr<Group> g = find(r.group_id, false);
  if (!g) return ErrorCode::kUnknownMemberId;
  std::unique_lock<lionet::Mutex> lk(g->mu);
  auto it = g->members.find(std::string(r.member_id));
  if (it == g->members.end()) return ErrorCode::kUnknownMemberId;  // G5
  if (r.generation_id != g->generation) return ErrorCode::kIllegalGeneration;
  it->second.session_deadline = lionet::now() + it->second.session_timeout;
  switch (g->state) {
    case State::kEmpty: return ErrorCode::kUnknownMemberId;
    case State::kPreparingRebalance: return ErrorCode::kRebalanceInProgress;
    case State::kCompletingRebalance:
    case State::kStable: return ErrorCode::kNone;
  }
  return ErrorCode::kNone;
}

GroupCoordinator::LeaveResult GroupCoordinator::leave(const LeaveGroupRequest& r) {
  LeaveResult res;
  if (r.group_id.empty()) {
    res.error = ErrorCode::kInvalidGroupId;
    return res;
  }
  if (stopping_.load(std::memory_order_acquire)) {
    res.error = ErrorCode::kCoordinatorNotAvailable;
    return res;
  }
  res.members.assign(r.members.size(), ErrorCode::kUnknownMemberId);
  std::shared_ptr<Group> g = find(r.group_id, false);
  if (!g) return res;
  std::unique_lock<lionet::Mutex> lk(g->mu);
  const TimePoint now = lionet::now();
  for (std::size_t i = 0; i < r.members.size(); ++i) {
    const auto& lm = r.members[i];
    if (lm.group_instance_id) continue;  // G8: no member has one
    const std::string id(lm.member_id);
    if (auto p = g->pending.find(id); p != g->pending.end()) {
      g->pending.erase(p);
      g->try_complete_join(now);
      res.members[i] = ErrorCode::kNone;
    } else if (g->members.count(id)) {
      g->remove_member(id, now);
      res.members[i] = ErrorCode::kNone;
    }
  }
  g->changed.notify_all();
  return res;
}

GroupCoordinator::CommitResult GroupCoordinator::commit_offsets(const OffsetCommitRequest& r) {
  CommitResult res(r.topics.size());
  for (std::size_t t = 0; t < r.topics.size(); ++t) res[t].assign(r.topics[t].partitions.size(), ErrorCode::kNone);
  auto fail_all = [&](ErrorCode e) {
    for (auto& t : res) std::fill(t.begin(), t.end(), e);
    return res;
  };
  if (r.group_instance_id) return fail_all(ErrorCode::kUnsupportedVersion);  // G8
  if (stopping_.load(std::memory_order_acquire)) return fail_all(ErrorCode::kCoordinatorNotAvailable);
  // G7. An unknown group is created for a standalone commit only.
  std::shared_ptr<Group> g = find(r.group_id, r.generation_id < 0);
  if (!g) return fail_all(ErrorCode::kIllegalGeneration);
  std::unique_lock<lionet::Mutex> lk(g->mu);
  if (r.generation_id < 0 && g->state == State::kEmpty) {
    // a group that only keeps offsets
  } else if (g->state == State::kCompletingRebalance) {
    return fail_all(ErrorCode::kRebalanceInProgress);
  } else {
    auto it = g->members.find(std::string(r.member_id));
    if (it == g->members.end()) return fail_all(ErrorCode::kUnknownMemberId);
    if (r.generation_id != g->generation) return fail_all(ErrorCode::kIllegalGeneration);
    it->second.session_deadline = lionet::now() + it->second.session_timeout;
  }
  std::vector<OffsetStore::Commit> commits;
  std::vector<std::pair<std::size_t, std::size_t>> where;  // (topic, partition) index of each commit
  for (std::size_t t = 0; t < r.topics.size(); ++t) {
    const auto& topic = r.topics[t];
    for (std::size_t p = 0; p < topic.partitions.size(); ++p) {
      const auto& part = topic.partitions[p];
      const std::string_view md = part.metadata.value_or(std::string_view());
      if (md.size() > opt_.offset_metadata_max_bytes) {
        res[t][p] = ErrorCode::kOffsetMetadataTooLarge;
      } else if (part.index < 0 || !store_.find(topic.name, static_cast<uint32_t>(part.index))) {
        res[t][p] = ErrorCode::kUnknownTopicOrPartition;
      } else {
        commits.push_back({topic.name, part.index, part.offset, part.leader_epoch, md});
        where.emplace_back(t, p);
      }
    }
  }
  if (commits.empty()) return res;
  if (auto s = offsets_->commit(r.group_id, commits); !s) {
    for (auto [t, p] : where) res[t][p] = ErrorCode::kKafkaStorageError;
    return res;
  }
  commits_.fetch_add(commits.size(), std::memory_order_relaxed);
  return res;
}

GroupCoordinator::FetchResult GroupCoordinator::fetch_offsets(const OffsetFetchRequest& r) const {
  FetchResult res;
  if (stopping_.load(std::memory_order_acquire)) {
    res.error = ErrorCode::kCoordinatorNotAvailable;
    return res;
  }
  if (!r.topics) {
    for (auto& [topic, parts] : offsets_->all(r.group_id)) {
      std::vector<FetchedOffset> out;
      for (auto& [p, c] : parts) out.push_back({p, c.offset, c.leader_epoch, std::move(c.metadata)});
      res.topics.emplace_back(topic, std::move(out));
    }
    return res;
  }
  for (const auto& t : *r.topics) {
    std::vector<FetchedOffset> out;
    for (int32_t p : t.partitions) {
      FetchedOffset f;
      f.partition = p;
      if (auto c = offsets_->get(r.group_id, t.name, p)) {
        f.offset = c->offset;
        f.leader_epoch = c->leader_epoch;
        f.metadata = std::move(c->metadata);
      }
      out.push_back(std::move(f));
    }
    res.topics.emplace_back(std::string(t.name), std::move(out));
  }
  return res;
}

void GroupCoordinator::stop() {
  if (stopping_.exchange(true, std::memory_order_acq_rel)) return;
  std::vector<std::shared_ptr<Group>> all;
  {
    std::lock_guard<std::mutex> lk(groups_mu_);
    for (auto& [_, g] : groups_) all.push_back(g);
  }
  for (auto& g : all) {
    std::lock_guard<lionet::Mutex> lk(g->mu);  // a waiter is parked (or sees stopping_ first)
    g->answered.notify_all();
    g->changed.notify_all();
  }
  CancelShield shield;  // timer fibers use *this until done
  timers_.wait();
}

GroupStats GroupCoordinator::stats() const noexcept {
  auto l = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {l(rebalances_), l(expired_), l(commits_)};
}

}  // namespace lionet::kafka
