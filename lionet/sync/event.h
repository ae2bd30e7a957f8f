// lionet/sync/event.h: lionet::Event, a one-shot latch: set() once, and every wait() (past and
// future) returns. Fibers park, plain threads block. Cannot be reset (make a new Event).
// Concurrency: any method, any fiber or thread; set() may be called more than once (no-op).
// Lifetime: the Event may be destroyed as soon as wait() returns true, even while set() is
// still returning (wait() synchronizes with the end of set()'s critical section, its last
// access). is_set() does not: it is a snapshot, not a substitute for wait() before destroying.
#pragma once

#include <atomic>
#include <chrono>

#include "lionet/base/clock.h"
#include "lionet/base/spinlock.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();  // fatal if fibers are still waiting

  void set() noexcept;
  // acquire: pairs with the release in set(): what the setter wrote before set() is visible.
  bool is_set() const noexcept { return set_.load(std::memory_order_acquire); }
  // Blocks until set(); returns at once if it already was. False if the fiber was cancelled or
  // its DeadlineScope passed first (sched/cancel.h).
  bool wait() noexcept;
  bool wait_until(TimePoint deadline) noexcept;  // false on timeout (or cancel, as above)
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) noexcept {
    return wait_until(now() + std::chrono::ceil<Duration>(d));
  }

 private:
  std::atomic<bool> set_{false};  // written once by set(), under lock_
  SpinLock lock_;  // protects queue_ and the transition of set_
  detail::WaitQueue queue_;
};
}  // namespace lionet
