// lionet/sync/mutex.cc: the slow paths of lionet::Mutex (layout and policy: mutex.h).
//
// Who changes the word:
//  - lockers set LOCKED by CAS when it is clear (fast path from 0; try_lock/spin from any);
//  - the holder of QUEUE_LOCKED edits queue_ and keeps HAS_WAITERS == !queue_.empty();
//  - unlock() clears LOCKED: by CAS 1 -> 0 when nothing else is set, else in unlock_slow()
//    together with the queue bit.
// No lost wake-up: a waiter decides to park while holding the queue bit and seeing LOCKED,
// and releases the bit with HAS_WAITERS set in the same CAS. The holder's unlock cannot clear
// LOCKED in between (its fast CAS needs the word to be exactly LOCKED), so it goes to
// unlock_slow(), waits for the queue bit and finds the node.
// Safe destruction: unlock_slow()'s last access to *this is the CAS that clears LOCKED and
// QUEUE_LOCKED together; the waiter it picked is unparked afterwards through a copied Parker.
#include "lionet/sync/mutex.h"

#include "lionet/sched/scheduler.h"

namespace lionet {
namespace {
// Spins before queueing: a holder running on another worker usually releases within a few
// hundred cycles. Bounded so that a holder that is parked (or queued behind us on our own
// worker) costs at most ~1-2 us of wasted spinning.
constexpr int kSpinIterations = 64;
}  // namespace

uint32_t Mutex::lock_queue() noexcept {
  uint32_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (s & kQueueLockedBit) {
      cpu_relax();
      s = state_.load(std::memory_order_relaxed);
      continue;
    }
    // acquire /*2*/: pairs with the release that last dropped the queue bit (queue_ contents).
    if (state_.compare_exchange_weak(s, s | kQueueLockedBit, std::memory_order_acquire, std::memory_order_relaxed)) {
      return s | kQueueLockedBit;
    }
  }
}

bool Mutex::enqueue_or_acquire(detail::WaitNode* node, bool front) noexcept {
  uint32_t s = lock_queue();
  for (;;) {
    if (!(s & kLockedBit)) {
      // Free after all: take it and drop the queue bit in one CAS (acquire /*1*/, release /*2*/).
      if (state_.compare_exchange_weak(s, (s | kLockedBit) & ~kQueueLockedBit, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
        return false;
      }
      continue;  // only LOCKED can have changed (a spinner), loop re-tests
    }
    if (front) {
      queue_.push_front(node);
    } else {
      queue_.push_back(node);
    }
    // The word is stable here: LOCKED cannot be cleared while we hold the queue bit (see the
    // top) nor set again (it is set), and only the queue-bit holder touches the rest.
    // release /*2*/: publishes the queue edit to the next holder of the queue bit.
    state_.store((s | kHasWaitersBit) & ~kQueueLockedBit, std::memory_order_release);
    return true;
  }
}

void Mutex::lock_slow() noexcept {
  LIONET_DCHECK(owner_.load(std::memory_order_relaxed) != detail::current_owner_token(),
                "lionet::Mutex::lock() by the fiber/thread that already holds it: self-deadlock");
  for (int i = 0; i < kSpinIterations; ++i) {
    uint32_t s = state_.load(std::memory_order_relaxed);
    if (!(s & kLockedBit) &&
        state_.compare_exchange_weak(s, s | kLockedBit, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    if (s & kHasWaitersBit) break;  // others are already queued: spinning would only barge harder
    cpu_relax();
  }
  detail::WaitNode node;
  node.parker = Parker::current();
  bool requeue = false;
  for (;;) {
    // A waiter that was woken and lost the race goes back to the front (bounded unfairness).
    if (!enqueue_or_acquire(&node, requeue)) return;
    note_wait(WaitKind::kMutex, this);
    park();  // W1; the waker removed the node (W2) before unparking us
    requeue = true;
    uint32_t s = state_.load(std::memory_order_relaxed);
    if (!(s & kLockedBit) &&
        state_.compare_exchange_strong(s, s | kLockedBit, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
  }
}

void Mutex::unlock_slow() noexcept {
  lock_queue();
  detail::DeferredWake wake(queue_.take());  // timed nodes are notified here, under the bit (W3)
  const uint32_t waiters = queue_.empty() ? 0 : kHasWaitersBit;
  // Clears LOCKED and the queue bit together: the last access to *this. Nobody else can
  // change the word meanwhile (LOCKED is ours, the queue bit is ours). release /*1*/ /*2*/.
  state_.store(waiters, std::memory_order_release);
  wake.run();
}

bool Mutex::try_lock_until(TimePoint deadline) noexcept {
  if (try_lock()) return true;
  LIONET_DCHECK(owner_.load(std::memory_order_relaxed) != detail::current_owner_token(),
                "lionet::Mutex::try_lock_until() by the fiber/thread that already holds it");
  bool requeue = false;
  for (;;) {
    WaitClaim claim;
    detail::WaitNode node;
    node.claim = &claim;
    if (!enqueue_or_acquire(&node, requeue)) {
      debug_acquired();
      return true;
    }
    note_wait(WaitKind::kMutex, this);
    if (claim.wait(deadline) == WaitClaim::kTimedOut) {
      // W3: unlink before the node leaves scope, keeping HAS_WAITERS exact.
      uint32_t s = lock_queue();
      queue_.remove_if_linked(&node);
      for (;;) {
        const uint32_t next = (queue_.empty() ? s & ~kHasWaitersBit : s) & ~kQueueLockedBit;
        if (state_.compare_exchange_weak(s, next, std::memory_order_release, std::memory_order_relaxed)) break;
      }
      // An unlock() may have popped us and lost to our deadline: it went on to the next node,
      // so nothing is lost; one last attempt keeps "timed out" meaning "was held throughout".
      return try_lock();
    }
    // Notified (the unlocker dropped our node, and touches nothing of ours any more): compete.
    requeue = true;
    if (try_lock()) return true;
  }
}

#if LIONET_DEBUG_CHECKS
void Mutex::debug_acquired() noexcept { owner_.store(detail::current_owner_token(), std::memory_order_relaxed); }
void Mutex::debug_releasing() noexcept {
  uint64_t owner = owner_.load(std::memory_order_relaxed);
  LIONET_CHECK(owner == detail::current_owner_token(),
               owner == 0 ? "lionet::Mutex::unlock() of a mutex that is not locked"
                          : "lionet::Mutex::unlock() by a fiber/thread that does not hold it "
                            "(locked on one fiber, unlocked on another?)");
  owner_.store(0, std::memory_order_relaxed);
}
#endif

namespace detail {
namespace {
std::atomic<uint64_t> g_next_thread_token{1};
thread_local uint64_t t_thread_token = 0;
}  // namespace

uint64_t current_owner_token() noexcept {
  if (uint64_t id = this_fiber::id()) return id;
  // Read the thread-local afresh on every call (never cached across a switch).
  if (t_thread_token == 0) {
    t_thread_token = (uint64_t{1} << 63) | g_next_thread_token.fetch_add(1, std::memory_order_relaxed);
  }
  return t_thread_token;
}
}  // namespace detail
}  // namespace lionet
