// lionet/sync/semaphore.h: lionet::Semaphore, a counting semaphore whose acquire() parks the
// fiber (or blocks a plain thread) while no permit is available.
//
// Owns: a permit count and a FIFO of waiters. Policy: strict FIFO hand-off: release() gives
// permits directly to the oldest waiters (a waiter that is woken already holds its permit), and
// acquire() never overtakes a queued waiter. Concurrency: any method, any fiber or thread.
#pragma once

#include <chrono>
#include <cstdint>

#include "lionet/base/clock.h"
#include "lionet/base/spinlock.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class Semaphore {
 public:
  explicit Semaphore(int64_t initial = 0) noexcept : count_(initial) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  ~Semaphore();  // fatal if fibers are still waiting

  void acquire() noexcept;
  bool try_acquire() noexcept;
  bool try_acquire_until(TimePoint deadline) noexcept;
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& d) noexcept {
    return try_acquire_until(now() + std::chrono::ceil<Duration>(d));
  }
  // Adds n permits (n >= 0), handing them to waiters first.
  void release(int64_t n = 1) noexcept;
  // Permits available now (racy snapshot).
  int64_t available() const noexcept;

 private:
  mutable SpinLock lock_;  // protects count_ and queue_
  int64_t count_;  // permits not handed to anyone; > 0 only while queue_ is empty
  detail::WaitQueue queue_;  // waiters, each wanting one permit
};
}  // namespace lionet
