// lionet/sync/mutex.cc: the slow paths of lionet::Mutex.
//
// Why no wake-up is lost. A locker that must wait does, under queue_lock_:
//   exchange(state_, kContended) -> if it was kUnlocked it owns the mutex, else link its node.
// unlock() does exchange(state_, kUnlocked) and, if it saw kContended, takes queue_lock_ and
// wakes the first node. If the unlocker's exchange comes after a waiter's exchange in the
// modification order of state_, it reads kContended (only exchanges to kContended happen
// while the mutex is held) and its queue_lock_ acquisition is ordered after the waiter's
// critical section (else its exchange would have happened-before the waiter's), so it finds
// the node. If it comes before, the waiter's exchange reads kUnlocked and the waiter owns it.
// A woken waiter re-enters with exchange(kContended), so while any waiter may remain queued
// the word says kContended and the next unlock() looks at the queue.
#include "lionet/sync/mutex.h"

#include "lionet/sched/scheduler.h"

namespace lionet {
namespace {
// Spins before queueing: a holder running on another worker usually releases within a few
// hundred cycles. Bounded so that a holder that is parked (or queued behind us on our own
// worker) costs at most ~1-2 us of wasted spinning.
constexpr int kSpinIterations = 64;
}  // namespace

void Mutex::lock_slow() noexcept {
  LIONET_DCHECK(owner_.load(std::memory_order_relaxed) != detail::current_owner_token(),
                "lionet::Mutex::lock() by the fiber/thread that already holds it: self-deadlock");
  for (int i = 0; i < kSpinIterations; ++i) {
    uint32_t s = state_.load(std::memory_order_relaxed);
    if (s == kUnlocked &&
        state_.compare_exchange_weak(s, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    if (s == kContended) break;  // others are already queued: spinning would only barge harder
    cpu_relax();
  }
  detail::WaitNode node;
  node.parker = Parker::current();
  for (;;) {
    queue_lock_.lock();
    // acquire /*1*/ when it reads kUnlocked: we own the mutex (kept kContended: we cannot
    // know whether others are queued).
    if (state_.exchange(kContended, std::memory_order_acquire) == kUnlocked) {
      queue_lock_.unlock();
      return;
    }
    queue_.push_back(&node);
    queue_lock_.unlock();
    park();  // W1; the waker removed the node (W2) before unparking us
  }
}

void Mutex::wake_one() noexcept {
  queue_lock_.lock();
  // Timed nodes are notified under the lock (W3) and never dereferenced again: a notified
  // try_lock_until() loops at once and reuses its stack slot for a new node.
  detail::DeferredWake wake(queue_.take());
  queue_lock_.unlock();
  wake.run();
}

bool Mutex::try_lock_until(TimePoint deadline) noexcept {
  if (try_lock()) return true;
  LIONET_DCHECK(owner_.load(std::memory_order_relaxed) != detail::current_owner_token(),
                "lionet::Mutex::try_lock_until() by the fiber/thread that already holds it");
  for (;;) {
    WaitClaim claim;
    detail::WaitNode node;
    node.claim = &claim;
    queue_lock_.lock();
    if (state_.exchange(kContended, std::memory_order_acquire) == kUnlocked) {
      queue_lock_.unlock();
      debug_acquired();
      return true;
    }
    queue_.push_back(&node);
    queue_lock_.unlock();
    if (claim.wait(deadline) == WaitClaim::kTimedOut) {
      queue_lock_.lock();
      queue_.remove_if_linked(&node);  // W3: unlink before the node leaves scope
      queue_lock_.unlock();
      // An unlock() may have popped and lost to our deadline: it went on to the next node,
      // so nothing is lost; one last attempt keeps "timed out" meaning "was held throughout".
      return try_lock();
    }
    // Notified: the waker has dropped the node; compete again. Nothing to read from the node,
    // so no lock barrier is needed (W3).
  }
}

#ifndef NDEBUG
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
