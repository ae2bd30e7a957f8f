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
// Policy: BARGING with bounded spinning (the futex mutex of Drepper's "Futexes are tricky",
// like glibc and Go's normal mode). unlock() releases the word and wakes one waiter, which then
// competes with newcomers; a running fiber may take the lock again before the woken one runs.
// Why not FIFO hand-off: hand-off makes every contended unlock cost a full context switch
// before anyone makes progress (lock convoys); barging keeps the lock hot on a running worker.
// The cost is unfairness: a waiter can lose the race several times in a row. Use a Channel or
// a Semaphore when strict FIFO order matters.
//
// Debug builds (!NDEBUG) check, at the cost of one relaxed store per lock/unlock:
//  - unlock() by a fiber/thread that does not hold the mutex (a fiber that locked and then
//    handed the unlock to another fiber, or a double unlock): fatal, with file and line;
//  - lock() by the fiber/thread that already holds it (a certain self-deadlock): fatal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "lionet/base/clock.h"
#include "lionet/base/macros.h"
#include "lionet/base/spinlock.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() { LIONET_DCHECK(state_.load(std::memory_order_relaxed) == kUnlocked, "lionet::Mutex destroyed while locked"); }

  // May run in parallel with every other method, from any fiber or thread.
  void lock() noexcept {
    uint32_t expected = kUnlocked;
    // acquire: pairs with the release in unlock() /*1*/, so the critical section sees the
    // previous holder's writes.
    if (LIONET_UNLIKELY(!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                                        std::memory_order_relaxed))) {
      lock_slow();
    }
    debug_acquired();
  }

  bool try_lock() noexcept {
    uint32_t expected = kUnlocked;
    if (!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) {
      return false;
    }
    debug_acquired();
    return true;
  }

  // Only by the holder (checked in debug builds).
  void unlock() noexcept {
    debug_releasing();
    // release /*1*/: publishes the critical section to the next acquirer. A previous value
    // of kContended means a waiter may be queued: wake one (see mutex.cc for why none is lost).
    if (LIONET_UNLIKELY(state_.exchange(kUnlocked, std::memory_order_release) == kContended)) wake_one();
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
  static constexpr uint32_t kUnlocked = 0;
  static constexpr uint32_t kLocked = 1;     // held, no waiter queued
  static constexpr uint32_t kContended = 2;  // held, waiters may be queued

  void lock_slow() noexcept;
  void wake_one() noexcept;
#ifdef NDEBUG
  void debug_acquired() noexcept {}
  void debug_releasing() noexcept {}
#else
  void debug_acquired() noexcept;
  void debug_releasing() noexcept;
#endif

  std::atomic<uint32_t> state_{kUnlocked};  // lock word; RMW by lockers and the holder
  SpinLock queue_lock_;                     // protects queue_
  detail::WaitQueue queue_;                 // parked lockers (untimed and timed nodes)
  // Debug builds: current_owner_token() of the holder, 0 when free. Written by the holder
  // only; relaxed everywhere: a fiber reading its own token back can only see its own latest
  // write, which is all the self-deadlock check needs. Present in every build (same layout).
  std::atomic<uint64_t> owner_{0};
};
}  // namespace lionet
