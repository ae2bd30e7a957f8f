// lionet/sync/channel.cc: the type-independent halves of Channel<T> and select().
// Wake rule W1-W4: detail/wait_queue.h.
#include <algorithm>
#include <array>

#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"

namespace lionet::detail {

uint32_t ChannelCore::wait_locked(WaitQueue& q, WaitNode& node, const TimePoint* deadline) noexcept {
  const WaitKind kind = &q == &recvq_ ? WaitKind::kChannelRecv : WaitKind::kChannelSend;
  TimePoint fiber_deadline;
  if (deadline == nullptr) {
    node.parker = Parker::current();
    Fiber* f = node.parker.fiber();
    if (!f || !interruptible(*f)) {
      q.push_back(&node);
      note_wait(kind, this);
      park_and_unlock(lock_);  // W1; every waker takes this node under lock_
      return node.status;  // written before unpark() (W2)
    }
    if (const int64_t dl = f->cancel_.deadline_ns; dl != CancelState::kNoDeadline) {
      // A DeadlineScope is in force: the timed path below, whose claim also takes cancels.
      fiber_deadline = from_ns(dl);
      deadline = &fiber_deadline;
    } else {
      // Protocol 10: a canceller removes the node under lock_, as a waker would (W2).
      q.push_back(&node);
      if (!begin_wait(*f, &q == &recvq_ ? &cancel_recv : &cancel_send, this, &node)) {
        q.remove(&node);  // under lock_: a canceller that comes for it finds it gone
        lock_.unlock();
        end_wait(*f);  // after the unlock: a canceller may be waiting for lock_
        return kChanTimeout;
      }
      note_wait(kind, this);
      park_and_unlock(lock_);
      end_wait(*f);
      return node.status;
    }
  }
  if (*deadline <= now()) {
    lock_.unlock();
    return kChanTimeout;
  }
  WaitClaim claim;
  node.claim = &claim;
  q.push_back(&node);
  lock_.unlock();
  note_wait(kind, this);
  const bool timed_out = claim.wait(*deadline) == WaitClaim::kTimedOut;
  // W3: after a win the waker may still be writing our payload under lock_; after a timeout
  // we must unlink. Both need the lock once.
  lock_.lock();
  if (timed_out) q.remove_if_linked(&node);
  lock_.unlock();
  return timed_out ? kChanTimeout : node.status;
}

void ChannelCore::cancel_waiter(WaitQueue& q, WaitNode* node) noexcept {
  lock_.lock();
  if (!node->linked) {  // a partner or close() took it first: that wake-up stands
    lock_.unlock();
    return;
  }
  q.remove(node);
  node->status = kChanTimeout;
  const Parker p = node->parker;
  lock_.unlock();
  p.unpark();  // W2, W4
}

void ChannelCore::cancel_recv(void* core, void* node) noexcept {
  auto* c = static_cast<ChannelCore*>(core);
  c->cancel_waiter(c->recvq_, static_cast<WaitNode*>(node));
}

void ChannelCore::cancel_send(void* core, void* node) noexcept {
  auto* c = static_cast<ChannelCore*>(core);
  c->cancel_waiter(c->sendq_, static_cast<WaitNode*>(node));
}

void ChannelCore::close_locked(WakeBatch& batch) noexcept {
  if (closed_.load(std::memory_order_relaxed)) return;
  closed_.store(true, std::memory_order_release);  // pairs with the acquire in closed()
  // Receivers wait only while the buffer is empty, so they all see "closed and drained";
  // senders wait only while it is full: their values are not delivered.
  // Writing status after a claim node's notify() is safe here: channel waiters take lock_
  // after waking before they read it (W3).
  while (Taken t = recvq_.take()) {
    t.node->status = kChanClosed;
    batch.add(t);
  }
  while (Taken t = sendq_.take()) {
    t.node->status = kChanClosed;
    batch.add(t);
  }
}

bool ChannelCore::destroyable() noexcept {
  lock_.lock();
  const bool idle = recvq_.empty() && sendq_.empty();
  lock_.unlock();
  return idle;
}

namespace {
// Per-thread xorshift64*, seeded from the thread-local's address and the clock. Read and
// written within one select call (no switch in between), so migration does not matter.
thread_local uint64_t t_rng = 0;

uint64_t next_random() noexcept {
  uint64_t x = t_rng;
  if (x == 0) x = (reinterpret_cast<uintptr_t>(&t_rng) ^ static_cast<uint64_t>(monotonic_ns())) | 1;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  t_rng = x;
  return x * 0x2545F4914F6CDD1DULL;
}

}  // namespace

// The distinct channels of a select, sorted by address: the global lock order that makes
// locking several channels at once deadlock-free.
struct SelectLockSet {
  std::array<ChannelCore*, 64> chans;
  std::size_t n = 0;

  SelectLockSet(SelectCaseBase** cases, std::size_t count) noexcept {
    for (std::size_t i = 0; i < count; ++i) chans[i] = cases[i]->channel();
    std::sort(chans.begin(), chans.begin() + count);
    n = static_cast<std::size_t>(std::unique(chans.begin(), chans.begin() + count) - chans.begin());
  }
  void lock() noexcept {
    for (std::size_t i = 0; i < n; ++i) chans[i]->lock_.lock();
  }
  void unlock() noexcept {
    for (std::size_t i = n; i > 0; --i) chans[i - 1]->lock_.unlock();
  }
};

// Returns the index (among channel cases) that completed, -1 for the deadline, -2 for default.
int select_impl(SelectCaseBase** cases, WaitNode* nodes, std::size_t n, const TimePoint* deadline,
                bool has_default) noexcept {
  if (n == 0) {
    if (has_default) return -2;
    if (deadline) this_fiber::sleep_until(*deadline);
    return -1;
  }
  SelectLockSet locks(cases, n);
  locks.lock();
  // 1. Pick uniformly among ready cases; a pick that fails (another channel won a select
  //    partner meanwhile) is definitive while we hold the lock, so drop it and pick again.
  uint64_t ready = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (cases[i]->ready_locked()) ready |= uint64_t{1} << i;
  }
  while (ready != 0) {
    const int count = __builtin_popcountll(ready);
    int k = static_cast<int>(next_random() % static_cast<uint64_t>(count));
    uint64_t bits = ready;
    while (k-- > 0) bits &= bits - 1;  // clear the k lowest set bits
    const int i = __builtin_ctzll(bits);
    ready &= ~(uint64_t{1} << i);
    DeferredWake wake;
    if (cases[i]->try_complete_locked(wake)) {
      locks.unlock();
      wake.run();
      return i;
    }
  }
  // 2. Nothing ready.
  if (has_default) {
    locks.unlock();
    return -2;
  }
  if (deadline && *deadline <= now()) {
    locks.unlock();
    return -1;
  }
  // 3. Queue one node per case, all racing for one claim.
  WaitClaim claim;
  for (std::size_t i = 0; i < n; ++i) {
    nodes[i].claim = &claim;
    nodes[i].claim_value = WaitClaim::kNotified + static_cast<uint32_t>(i);
    cases[i]->enqueue_locked(nodes[i]);
  }
  locks.unlock();
  note_wait(WaitKind::kSelect, nullptr, static_cast<uint32_t>(n));
  const uint32_t v = deadline ? claim.wait(*deadline) : claim.wait();
  // 4. Unlink the losers (the winner was removed by its waker), and let the winner's waker
  //    finish writing our payload: both need every lock once (W3).
  locks.lock();
  for (std::size_t i = 0; i < n; ++i) cases[i]->unlink_locked(nodes[i]);
  locks.unlock();
  if (v == WaitClaim::kTimedOut) return -1;
  const std::size_t won = v - WaitClaim::kNotified;
  cases[won]->finish(nodes[won].status);
  return static_cast<int>(won);
}
}  // namespace lionet::detail
