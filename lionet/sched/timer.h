// lionet/sched/timer.h: one-shot timers on the worker that adds them.
//
// Owns the Timer handle. Timer callbacks run on a worker thread, outside any fiber, between
// fibers: they must be short and must not block (typically: unpark a fiber, spawn one).
//
// Lateness bound: a worker looks at its timers whenever its run queue is empty and, while it
// is busy, every kSlowTickInterval (32) scheduling points (see scheduler.cc). A timer therefore
// fires late by at most the time its worker needs for that many fiber slices (plus futex
// wake-up latency when idle); a fiber that never yields delays the timers of its worker.
#pragma once

#include <functional>
#include <memory>

#include "lionet/base/clock.h"

namespace lionet {
namespace detail {
struct TimerEntry;
}

class Timer {
 public:
  Timer() = default;
  ~Timer();
  Timer(Timer&&) noexcept;
  Timer& operator=(Timer&&) noexcept;
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Cancels the timer. Returns true if the callback had not started and now never will.
  // If the callback is running right now on another thread, waits for it to finish (so the
  // caller may free what the callback touches) and returns false. Thread-safe.
  bool cancel() noexcept;
  // Cancels and re-arms the same callback at a new deadline, on the calling worker. Returns
  // false if the timer had already fired or been cancelled (then nothing is armed).
  bool reset(TimePoint deadline);
  bool reset_after(Duration d) { return reset(now() + d); }
  bool pending() const noexcept;
  explicit operator bool() const noexcept { return entry_ != nullptr; }

 private:
  friend Timer add_timer(TimePoint, std::function<void()>);
  explicit Timer(detail::TimerEntry* e) noexcept : entry_(e) {}
  detail::TimerEntry* entry_ = nullptr;
};

// Arms a one-shot timer on the current worker (from a fiber or a timer callback). On a plain
// thread with no scheduler, throws std::logic_error: there is no worker to run the callback.
Timer add_timer(TimePoint deadline, std::function<void()> callback);
inline Timer add_timer_after(Duration d, std::function<void()> callback) {
  return add_timer(now() + d, std::move(callback));
}
}  // namespace lionet
