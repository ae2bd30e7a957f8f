// lionet/sched/driver.h: the one seam between the scheduler and an event source (the IO
// reactor), after folly's LoopController: the scheduler asks "wait for events until this
// deadline" and "wake up"; the driver makes fibers runnable by unparking them.
//
// Owns: the Driver interface. Must not know epoll, io_uring or sockets (io/ implements it).
//
// Contract with the scheduler (see scheduler.cc, protocol 8):
// - At most one worker is inside wait() or poll() at a time (the "poller").
// - wait() blocks until an event, the deadline, or wake(); poll() never blocks.
// - Both may call Parker::unpark() (the woken fibers go to the polling worker's queue).
// - wake() is thread-safe and may be called before wait() starts: the next wait() returns
//   at once (e.g. an eventfd that stays readable until drained).
#pragma once

#include "lionet/base/clock.h"

namespace lionet {
class Driver {
 public:
  virtual ~Driver() = default;
  virtual void wait(TimePoint deadline) noexcept = 0;
  virtual void poll() noexcept = 0;
  virtual void wake() noexcept = 0;
};
}  // namespace lionet
