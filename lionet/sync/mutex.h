// lionet/sync/mutex.h: lionet::Mutex, a mutual-exclusion lock that parks the waiting fiber
// (or blocks the waiting plain thread), never the worker thread under a fiber.
//
// Owns: the lock word and the waiter queue of one mutex. Must not: be held across anything
// that is not a fiber-aware wait (a std::mutex or a SpinLock held while a fiber parks deadlocks
// an M:N runtime: the worker that would release it is the one now waiting).
//
// Satisfies Lockable (lock / try_lock / unlock), TimedLockable (try_lock_for / _until), so
// std::unique_lock, std::scoped_lock and std::lock_guard work. Works between fibers on any
// workers and plain threads, in any mix.
//
// Policy: BARGING with bounded spinning (like glibc and Go's normal mode). unlock() releases
// the word and wakes one waiter, which then competes with newcomers; a running fiber may take
// the lock again before the woken one runs. Why not FIFO hand-off: hand-off makes every
// contended unlock cost a full context switch before anyone makes progress (lock convoys);
// barging keeps the lock hot on a running worker. The cost is unfairness, bounded a little by
// requeueing a waiter that lost its race at the FRONT of the queue. Use a Channel or a
// Semaphore (strict FIFO) when order matters.
//
// One word holds everything (WebKit's WTF::Lock layout): LOCKED, HAS_WAITERS and QUEUE_LOCKED
// (a spin bit guarding the intrusive waiter queue). Keeping the queue lock in the word makes
// the releasing store the LAST access unlock() makes to the mutex, so (as POSIX requires) a
// Mutex may be destroyed by whoever acquires it after the final unlock(), even while that
// unlock() is still returning. Uncontended lock+unlock: two CAS.
//
// Debug builds of the library (LIONET_DEBUG_CHECKS, base/build_config.h: compiled without
// NDEBUG; the includer's NDEBUG changes nothing) check, at the cost of one relaxed store per lock/unlock:
//  - unlock() by a fiber/thread that does not hold the mutex (a fiber that locked and then
//    handed the unlock to another fiber, or a double unlock): fatal, with file and line;
//  - lock() by the fiber/thread that already holds it (a certain self-deadlock): fatal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "lionet/base/clock.h"
#include "lionet/base/macros.h"
#include "lionet/base/spinlock.h"  // cpu_relax
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() {
    LIONET_DCHECK(state_.load(std::memory_order_relaxed) == 0, "lionet::Mutex destroyed while locked or waited on");
  }

  // May run in parallel with every other method, from any fiber or thread.
  void lock() noexcept {
    uint32_t expected = 0;
    // acquire /*1*/: pairs with the release that ended the previous critical section.
    if (LIONET_UNLIKELY(!state_.compare_exchange_strong(expected, kLockedBit, std::memory_order_acquire,
                                                        std::memory_order_relaxed))) {
      lock_slow();
    }
    debug_acquired();
  }

  bool try_lock() noexcept {
    uint32_t s = state_.load(std::memory_order_relaxed);
    while (!(s & kLockedBit)) {  // barging is allowed even with waiters queued
      if (state_.compare_exchange_weak(s, s | kLockedBit, std::memory_order_acquire, std::memory_order_relaxed)) {
        debug_acquired();
        return true;
      }
    }
    return false;
  }

  // Only by the holder (checked in debug builds).
  void unlock() noexcept {
    debug_releasing();
    uint32_t expected = kLockedBit;
    // release /*1*/: publishes the critical section. Fails when waiters are queued or the
    // queue is being edited: then the slow path wakes one.
    if (LIONET_UNLIKELY(
            !state_.compare_exchange_strong(expected, 0, std::memory_order_release, std::memory_order_relaxed))) {
      unlock_slow();
    }
  }

  bool try_lock_until(TimePoint deadline) noexcept;
  bool try_lock_for(Duration d) noexcept { return try_lock_until(now() + d); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) noexcept {
    return try_lock_until(now() + std::chrono::ceil<Duration>(d));
  }
  template <class C, class D>
  bool try_lock_until(const std::chrono::time_point<C, D>& t) noexcept {
    return try_lock_until(now() + std::chrono::ceil<Duration>(t - C::now()));
  }

 private:
  static constexpr uint32_t kLockedBit = 1;  // held
  static constexpr uint32_t kHasWaitersBit = 2;  // queue_ is not empty (kept exact under the queue bit)
  static constexpr uint32_t kQueueLockedBit = 4;  // someone edits queue_ (a few instructions, never parks)

  void lock_slow() noexcept;
  void unlock_slow() noexcept;
  // Sets kQueueLockedBit (spinning while another holder has it); returns the word with it set.
  uint32_t lock_queue() noexcept;
  // Enqueues `node` if the mutex is still held (returns true), else takes it (returns false).
  // Called with the queue bit held; releases it.
  bool enqueue_or_acquire(detail::WaitNode* node, bool front) noexcept;
#if LIONET_DEBUG_CHECKS
  void debug_acquired() noexcept;
  void debug_releasing() noexcept;
#else
  void debug_acquired() noexcept {}
  void debug_releasing() noexcept {}
#endif

  // Lock word (bits above). Every change is a CAS, except the release of the queue bit by its
  // holder while LOCKED cannot change under it (see mutex.cc).
  std::atomic<uint32_t> state_{0};
  detail::WaitQueue queue_;  // parked lockers (untimed and timed nodes); under kQueueLockedBit
  // Debug builds: current_owner_token() of the holder, 0 when free. Written by the holder
  // only; relaxed everywhere: a fiber reading its own token back can only see its own latest
  // write, which is all the self-deadlock check needs. Present in every build (same layout).
  std::atomic<uint64_t> owner_{0};
};
}  // namespace lionet
