// lionet/sync/wait_group.h: lionet::WaitGroup, Go's sync.WaitGroup for fibers and threads.
//
// Owns: a counter and the waiters for it to reach zero. add(n) raises it, done() lowers it by
// one, wait() parks until it is zero (returns at once if it already is). The counter going
// negative is a bug: fatal. A WaitGroup may be reused once wait() has returned for everyone.
// Concurrency: any method, any fiber or thread; done() may race with wait().
// Lifetime: the WaitGroup may be destroyed as soon as wait() returns true, even while the
// done() that released it is still returning: the transition to zero happens under lock_, and
// every successful wait() synchronizes with the end of that critical section (it takes lock_
// itself, or is unparked only after it), so done() never touches *this after a waiter could
// have observed zero. count() is a snapshot for diagnostics, not a substitute for wait().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "lionet/base/clock.h"
#include "lionet/base/spinlock.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class WaitGroup {
 public:
  explicit WaitGroup(int64_t initial = 0) noexcept : count_(initial) {}
  WaitGroup(const WaitGroup&) = delete;
  WaitGroup& operator=(const WaitGroup&) = delete;
  ~WaitGroup();  // fatal if fibers are still waiting

  void add(int64_t n = 1) noexcept;
  void done() noexcept { add(-1); }
  // False if the fiber was cancelled or its DeadlineScope passed first (sched/cancel.h).
  bool wait() noexcept;
  // False if the deadline passed with the counter still above zero (or on a cancel, as above).
  bool wait_until(TimePoint deadline) noexcept;
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) noexcept {
    return wait_until(now() + std::chrono::ceil<Duration>(d));
  }
  int64_t count() const noexcept { return count_.load(std::memory_order_acquire); }

 private:
  // Changed by CAS outside lock_ only when the result is not zero; the change TO zero happens
  // under lock_. acq_rel /*1*/: the add() that reaches zero acquires the writes of every
  // earlier done(), and releases them to the waiter that reads zero under lock_.
  std::atomic<int64_t> count_;
  SpinLock lock_;  // protects queue_
  detail::WaitQueue queue_;  // waiters for zero
};
}  // namespace lionet
