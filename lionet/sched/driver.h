// lionet/sched/driver.h: the one seam between the scheduler and an event source (the IO
// reactor), after folly's LoopController: the scheduler asks "wait for events until this
// deadline" and "wake up"; the driver makes fibers runnable by unparking them.
//
// Owns: the Driver interface. Must not know epoll, io_uring or sockets (io/ implements it).
//
// Contract with the scheduler (see scheduler.cc, protocol 8):
// - At most one worker is inside wait() or poll() at a time (the "poller").
// - wait() blocks until an event, the deadline, or wake(); poll() never blocks and says whether
//   it delivered any event (a busy worker polls less often while polls come back empty).
// - Both may call Parker::unpark() (the woken fibers go to the polling worker's queue).
// - wake() is thread-safe and may be called before wait() starts: the next wait() returns
//   at once (e.g. an eventfd that stays readable until drained).
// - cancel_all() (Scheduler::stop, when every worker has idled with fibers still parked):
//   wakes every fiber waiting on the driver with ECANCELED and makes later waits fail so.
// - per_worker() (protocol 8c): the driver has one event source per worker (io_uring: a
//   single-issuer ring each). Then the one-poller rule is per worker: every worker may be
//   inside wait()/poll() at once, each in its own source (the driver tells them apart by
//   this_fiber::worker_index()), an idle worker sleeps in its own wait(), and wake_worker(i)
//   ends worker i's wait (wake() ends every worker's). A per-worker driver must be polled
//   by each worker: its events are reaped by no one else.
//
// Every Scheduler makes its own driver at construction (SchedulerOptions::io) by calling
// lionet_make_io_driver, which io/ defines: sched/ declares it weak and never includes io/.
#pragma once

#include <string>

#include "lionet/base/clock.h"

namespace lionet {
class Scheduler;

// The IO driver every Scheduler comes with. Fields document their defaults; app/ fills them
// from the io.* keys. (IOManagerOptions, io/io_manager.h, is the same struct.)
struct IoOptions {
  // "auto": the platform's best working backend (epoll on Linux: io_uring measures at parity
  // or ahead with one worker, and with several (a ring each) from behind to level, see
  // bench/RESULTS.md and docs/ARCHITECTURE.md D9; kqueue on BSD/macOS). "epoll", "io_uring"
  // (falls back to the auto choice, with one log line, where io_uring is unavailable), or
  // "none": no driver; hooked calls in fibers then run as plain libc and block their worker
  // (the first one logs a warning). YAML: io.backend.
  std::string backend = "auto";
  // io_uring submission queue size. YAML: io.uring_entries.
  unsigned uring_entries = 256;
  // With the io_uring backend: socket reads, writes that would block, accepts and connects are
  // completion-based operations (the kernel performs the call and reports the result) instead
  // of a readiness wait and a retry. Off: io_uring is used for readiness only, as epoll. YAML:
  // io.uring_socket_ops.
  bool uring_socket_ops = true;
  // With the io_uring backend and several workers: one single-issuer ring per worker (Linux
  // 6.1+; each worker submits to, polls and sleeps in its own ring, sched/ protocol 8c), so
  // every ring uses the completion-based operations. Off: the workers share one ring (below).
  // YAML: io.uring_ring_per_worker.
  bool uring_ring_per_worker = true;
  // ... the operations also on a shared ring: several workers share one (uring_ring_per_worker
  // off, or a kernel without single-issuer rings; a single worker gets a single-issuer ring and
  // uses the operations). Off by default: on a shared ring they measured no faster than
  // readiness (2 workers, echo at 1000 / 100 connections: 0.77x / 0.94x the epoll backend vs
  // 0.78x / 0.97x; the completions' task work interrupts the submitting worker;
  // bench/RESULTS.md). YAML: io.uring_shared_ring_ops.
  bool uring_shared_ring_ops = false;
  // Most events taken from the kernel per wait. YAML: io.max_events.
  int max_events = 256;
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual void wait(TimePoint deadline) noexcept = 0;
  virtual bool poll() noexcept = 0;
  virtual void wake() noexcept = 0;
  virtual void cancel_all() noexcept {}
  // Protocol 8c. Fixed for the driver's life (set_driver reads it once).
  virtual bool per_worker() const noexcept { return false; }
  // Ends worker `index`'s wait() (or makes its next one return at once). A shared driver has
  // one wait at a time: wake().
  virtual void wake_worker(int index) noexcept {
    (void)index;
    wake();
  }
};

}  // namespace lionet

// Makes a scheduler's own driver (which attaches itself with set_driver); throws if it cannot.
// Defined in io/io_manager.cc, which every program linking the hooks contains; a weak
// reference in scheduler.cc, so that it resolves whatever the order of static initialisation.
extern "C" lionet::Driver* lionet_make_io_driver(lionet::Scheduler& sched, const lionet::IoOptions& options);
