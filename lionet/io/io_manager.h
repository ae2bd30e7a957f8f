// lionet/io/io_manager.h: IOManager joins a Scheduler to an IO reactor (epoll or io_uring)
// through the scheduler's one seam, lionet::Driver (sched/driver.h).
//
// Owns: fd readiness waits for fibers (with deadlines), cancellation, backend choice.
// Must not: call epoll_* / io_uring_* itself (only the backend files do), read configuration
// (app/ fills IOManagerOptions), or block a worker thread.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "lionet/base/clock.h"
#include "lionet/sched/driver.h"

namespace lionet {
class Scheduler;

struct IOManagerOptions {
  // "epoll" (default on Linux) or "io_uring". If io_uring is asked for but unavailable
  // (not compiled in, or the kernel refuses), epoll is used and one log line says so.
  // YAML: io.backend.
  std::string backend = "epoll";
  // io_uring submission queue size. YAML: io.uring_entries.
  unsigned uring_entries = 256;
  // Most events taken from the kernel per wait. YAML: io.max_events.
  int max_events = 256;
};

class IOManager final : public Driver {
 public:
  // Creates the reactor and attaches it to `sched` (sched.set_driver(this)).
  // Throws std::system_error if no backend can be created.
  IOManager(Scheduler& sched, IOManagerOptions options = {});
  // Detaches. Stop the scheduler first (or make sure no fiber waits on an fd any more).
  ~IOManager() override;
  IOManager(const IOManager&) = delete;
  IOManager& operator=(const IOManager&) = delete;

  // Parks the calling fiber until fd is readable (writable), the deadline passes, or the fd
  // is cancelled. Returns 0 when ready, ETIMEDOUT on timeout, ECANCELED if cancel(fd) (or a
  // hooked close(fd)) happened meanwhile. Errors and hang-ups count as ready (the next
  // read/write reports them). From a plain thread: blocks in poll(2) with the same results.
  // Other results: EBADF (fd not open / negative), ENOMEM or ENOSPC (kernel limits on
  // watched fds). A "ready" result may be spurious: retry the syscall and wait again on EAGAIN.
  // An fd the kernel cannot watch (a regular file) is always ready (0 at once), like poll(2).
  // Any number of fibers may wait on the same fd and direction; readiness wakes them all.
  // A wait on an fd that is ready right now returns 0 at once, like poll(2), also when the
  // previous wait returned for the same readiness and nothing was read in between (unread
  // data, EOF). Readiness that arrives while nobody waits is remembered for the next waiter.
  // Cheapest use (as with Go's netpoller and Tokio): wait only after the fd said "not ready"
  // (EAGAIN); with epoll a wait that follows a ready wait without EAGAIN costs a ppoll.
  // Thread-safe; the fiber may resume on another worker (re-read errno and thread-locals).
  int wait_readable(int fd, std::optional<TimePoint> deadline = std::nullopt);
  int wait_writable(int fd, std::optional<TimePoint> deadline = std::nullopt);
  // The same, for a caller that has just seen EAGAIN (or EINPROGRESS) on fd: the readiness last
  // handed out is known consumed, so the edge-triggered epoll backend skips re-checking the
  // level (one ppoll(2) less per wait). net/ and the hooks wait this way.
  int wait_readable_after_eagain(int fd, std::optional<TimePoint> deadline = std::nullopt);
  int wait_writable_after_eagain(int fd, std::optional<TimePoint> deadline = std::nullopt);

  // Wakes every fiber waiting on fd with ECANCELED and forgets the fd's registration.
  // Call it before closing fd (the hooked close() does). Required, not optional: the backends
  // register an fd persistently, and an fd number closed without cancel() and reused for a new
  // file would keep the old registration record (a waiter on the new file might never wake).
  // Calling it also on a freshly created fd (socket/accept/dup results) is cheap (one lock, no
  // syscall for a clean entry) and makes that case impossible. Thread-safe.
  void cancel(int fd);

  // Fibers waiting on fd right now (readers + writers). Registered waiters count even if
  // they have not finished switching out. For tests, debugging dumps and metrics; the answer
  // may be stale by the time it is read. Plain-thread waiters (in poll(2)) are not counted.
  int waiting(int fd) const noexcept;

  // "epoll" or "io_uring": the backend actually in use.
  const char* backend() const noexcept;
  Scheduler& scheduler() const noexcept;

  // The IOManager attached to the scheduler running the caller, or nullptr.
  static IOManager* current() noexcept;

  // lionet::Driver (called by the scheduler only).
  void wait(TimePoint deadline) noexcept override;
  void poll() noexcept override;
  void wake() noexcept override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
}  // namespace lionet
