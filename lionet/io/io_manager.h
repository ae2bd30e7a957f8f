// lionet/io/io_manager.h: IOManager joins a Scheduler to an IO reactor (epoll or io_uring)
// through the scheduler's one seam, lionet::Driver (sched/driver.h).
//
// Owns: fd readiness waits for fibers (with deadlines), cancellation, backend choice.
// Must not: call epoll_* / io_uring_* itself (only the backend files do), read configuration
// (app/ fills IOManagerOptions), or block a worker thread.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lionet/base/clock.h"
#include "lionet/sched/driver.h"

namespace lionet {
class Scheduler;

// backend: "auto" (epoll on Linux), "epoll" or "io_uring" (if io_uring is unavailable, not
// compiled in or refused by the kernel, the auto choice is used and one log line says so).
using IOManagerOptions = IoOptions;

// Every Scheduler already comes with one IOManager (SchedulerOptions::io): construct one only
// to give a scheduler a driver with other options. It then replaces the scheduler's own.
class IOManager final : public Driver {
 public:
  // Creates the reactor and attaches it to `sched` (sched.set_driver(this)), replacing the
  // driver the scheduler had. Throws std::system_error if no backend can be created.
  IOManager(Scheduler& sched, IOManagerOptions options = {});
  // Wakes every fiber still waiting on it with ECANCELED, then detaches, handing the scheduler
  // back to its own driver (Scheduler::own_driver()) if this one had replaced it. Sockets
  // that waited here stay safe to use and close afterwards (see cancel_if_alive).
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
  // For a caller whose stream read (TCP) returned fewer bytes than it asked for: the receive
  // queue was empty then, so it waits as after EAGAIN, except that an end of stream or error
  // that arrived with those bytes (the peer's FIN in the same edge) returns 0 at once.
  int wait_readable_after_short_read(int fd, std::optional<TimePoint> deadline = std::nullopt);

  // Completion-based socket IO: true when the backend performs socket calls itself (io_uring
  // with single-issuer rings: one worker, or several with io.uring_ring_per_worker (the
  // default), unless io.uring_socket_ops is off; on a ring several workers share only if
  // io.uring_shared_ring_ops is on). net::Socket and the hooks then call the functions below
  // where they would otherwise wait for readiness and retry: one kernel completion instead of a
  // readiness event plus the fiber's own syscall.
  bool completion_io() const noexcept;
  // Each performs the system call of its name on fd in the kernel and parks the calling fiber
  // until it completes. Returns the call's result (>= 0: bytes, the accepted fd, 0 for connect)
  // or -errno, including -ETIMEDOUT once `deadline` passed (the kernel cancels the call) and
  // -ECANCELED after cancel(fd) (or a hooked close) or cancel_all(). Buffers, msghdr and
  // addresses are the kernel's until the call returns. Only from a fiber, only if
  // completion_io(): otherwise -ENOTSUP. The socket's O_NONBLOCK does not matter: the kernel
  // waits for readiness itself. MSG_NOSIGNAL is the caller's to pass. Thread-safe; any number of
  // calls may be in flight on one fd (stream sockets: one per direction keeps byte order).
  int64_t recv(int fd, void* buf, std::size_t n, int flags, std::optional<TimePoint> deadline) noexcept;
  int64_t recvmsg(int fd, msghdr* msg, int flags, std::optional<TimePoint> deadline) noexcept;
  int64_t send(int fd, const void* buf, std::size_t n, int flags, std::optional<TimePoint> deadline) noexcept;
  int64_t sendmsg(int fd, const msghdr* msg, int flags, std::optional<TimePoint> deadline) noexcept;
  int64_t accept(int fd, sockaddr* addr, socklen_t* len, int flags, std::optional<TimePoint> deadline) noexcept;
  int64_t connect(int fd, const sockaddr* addr, socklen_t len, std::optional<TimePoint> deadline) noexcept;

  // Wakes every fiber waiting on fd with ECANCELED and forgets the fd's registration.
  // Call it before closing fd (the hooked close() does). Required, not optional: the backends
  // register an fd persistently, and an fd number closed without cancel() and reused for a new
  // file would keep the old registration record (a waiter on the new file might never wake).
  // Calling it also on a freshly created fd (socket/accept/dup results) is cheap (one lock, no
  // syscall for a clean entry) and makes that case impossible. Completion-based calls in flight
  // on fd are cancelled in the kernel (they return -ECANCELED), and a caller in a fiber returns
  // only once they have ended, so none outlives the close that follows. Thread-safe.
  void cancel(int fd);

  // Fibers waiting on fd right now (readers + writers + completion-based calls in flight).
  // Registered waiters count even if they have not finished switching out. For tests,
  // debugging dumps and metrics; the answer may be stale by the time it is read. Plain-thread
  // waiters (in poll(2)) are not counted.
  int waiting(int fd) const noexcept;

  // "epoll" or "io_uring": the backend actually in use.
  const char* backend() const noexcept;
  Scheduler& scheduler() const noexcept;

  // The IOManager attached to the scheduler running the caller, or nullptr.
  static IOManager* current() noexcept;
  // The IOManager attached to `sched` (its own unless replaced), or nullptr (io "none").
  static IOManager* of(const Scheduler& sched) noexcept;
  // io->cancel(fd) if io has not been destroyed; nothing otherwise. Does not wait for the fd's
  // completion-based calls to end (the caller closes the fd only once its own calls returned).
  // For objects (Socket) that remember the IOManager their fd waited on and may outlive it.
  // Any thread; one shared lock.
  static void cancel_if_alive(IOManager* io, int fd) noexcept;

  // Scheduler::stop (sched/driver.h): wakes every waiter with ECANCELED; later waits return
  // ECANCELED at once.
  void cancel_all() noexcept override;

  // lionet::Driver (called by the scheduler only). With one io_uring ring per worker
  // (IoOptions::uring_ring_per_worker, several workers) the driver is per worker (sched/
  // protocol 8c): wait() and poll() use the calling worker's own ring.
  void wait(TimePoint deadline) noexcept override;
  bool poll() noexcept override;
  void wake() noexcept override;
  bool per_worker() const noexcept override;
  void wake_worker(int index) noexcept override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
}  // namespace lionet
