// lionet/sync/wait_group.h: lionet::WaitGroup, Go's sync.WaitGroup for fibers and threads.
//
// Owns: a counter and the waiters for it to reach zero. add(n) raises it, done() lowers it by
// one, wait() parks until it is zero (returns at once if it already is). The counter going
// negative is a bug: fatal. A WaitGroup may be reused once wait() has returned for everyone.
// Concurrency: any method, any fiber or thread; done() may race with wait().
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
  void wait() noexcept;
  // False if the deadline passed with the counter still above zero.
  bool wait_until(TimePoint deadline) noexcept;
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) noexcept {
    return wait_until(now() + std::chrono::ceil<Duration>(d));
  }
  int64_t count() const noexcept { return count_.load(std::memory_order_acquire); }

 private:
  void wake_all() noexcept;

  // acq_rel on every change /*1*/: the add() that reaches zero acquires the writes of every
  // earlier done(), and releases them to the waiter that reads zero (acquire loads in wait()).
  std::atomic<int64_t> count_;
  SpinLock lock_;            // protects queue_
  detail::WaitQueue queue_;  // waiters for zero
};
}  // namespace lionet
