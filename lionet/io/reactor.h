// lionet/io/reactor.h: the one small interface every IO readiness backend implements
// (EpollReactor, UringReactor, KqueueReactor), after Seastar's reactor_backend.
//
// Owns: Reactor, ReactorEvent, the interest bits, make_reactor(). Must not know fibers, the
// scheduler or waiters: IOManager (io_manager.cc) keeps those and is the only user.
//
// Semantics (the same for every backend, so IOManager has one algorithm):
// - Interest is per fd and per direction (kIoReadable, kIoWritable). arm() makes the backend
//   report fd when a wanted direction is ready. Level-checked: if the fd is already ready when
//   arm() runs, an event follows at once, so "register waiter, then arm" cannot lose a wake-up.
// - An armed direction stays armed until an event says it was consumed
//   (ReactorEvent::disarmed) or until disarm(fd). Epoll registers both directions once,
//   persistent and edge-triggered (no syscall per wait); io_uring arms each direction as a
//   one-shot poll (queued, submitted in batches by wait()); kqueue arms each direction one-shot.
//   The caller keeps the record of what is armed (it passes it back in ArmRequest::armed),
//   so backends keep no per-fd table. Persistent interest reports a change once: the caller
//   must remember readiness that arrives while nobody waits (IOManager does).
// - Spurious events are allowed (a direction reported ready that is not): callers retry the
//   syscall. Errors and hang-ups report every armed direction ready.
// - Every event carries the 23-bit tag of the arm() that produced it, so a caller can drop
//   stale events that belong to an earlier life of the fd (closed and reused).
//
// Threads: arm() and disarm() may run on any thread concurrently with each other and with
// wait(), but calls for the SAME fd must be serialised by the caller (IOManager holds the fd's
// lock). wait() runs on one thread at a time (the scheduler's poller, driver.h). wake() is
// thread-safe, async-signal-unsafe, and may come before wait(): the next wait() then returns
// at once.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lionet/base/clock.h"

namespace lionet {

inline constexpr uint32_t kIoReadable = 1;
inline constexpr uint32_t kIoWritable = 2;
// In ReactorEvent::ready beside kIoReadable: the peer hung up or an error is pending (epoll's
// RDHUP/HUP/ERR). Sticky per fd in the IOManager: a read that returned fewer bytes than asked
// has not consumed an end of stream that arrived with those bytes, and no new edge will say so.
// Only edge-only backends (epoll) need to report it: a backend whose arm() checks the level
// (io_uring, kqueue) reports a pending end of stream as readable when the wait arms.
inline constexpr uint32_t kIoHangup = 4;

struct ReactorOp;

struct ReactorEvent {
  int fd;
  uint32_t ready;  // kIoReadable | kIoWritable that are (probably) ready, | kIoHangup
  uint32_t disarmed;  // directions no longer armed after this event (re-arm to keep waiting)
  uint32_t tag;  // ArmRequest::tag of the arming that produced the event (low 23 bits)
  // Non-null: this is the completion of a submitted operation (Reactor::submit), not a
  // readiness event; op->result holds its result and only `fd` of the fields above is set.
  ReactorOp* op = nullptr;
};

// A completion-based socket operation (backends whose supports_ops() is true: io_uring). The
// backend performs the system call in the kernel and reports its result as an event of wait().
// The op and everything it points to (buffers, msghdr, addresses) must stay valid and unmoved
// from submit() until that event: the kernel reads and writes them meanwhile.
struct ReactorOp {
  enum Kind : uint8_t { kRecv, kSend, kRecvmsg, kSendmsg, kAccept, kConnect };
  Kind kind = kRecv;
  int fd = -1;
  int flags = 0;  // recv/send/recvmsg/sendmsg: MSG_*; accept: SOCK_NONBLOCK | SOCK_CLOEXEC
  void* buf = nullptr;  // recv/send
  std::size_t len = 0;  // recv/send
  msghdr* msg = nullptr;  // recvmsg/sendmsg
  sockaddr* addr = nullptr;  // accept: out (may be null); connect: the peer
  socklen_t* addrlen = nullptr;  // accept: in/out (null if addr is)
  socklen_t connect_len = 0;  // connect: the peer's length
  // The operation is cancelled when CLOCK_MONOTONIC (steady_clock) passes this, in ns since its
  // epoch; 0 = no deadline. A cancelled op completes with -ECANCELED.
  int64_t deadline_ns = 0;
  int64_t result = 0;  // set before the completion event: >= 0 or -errno
  int64_t scratch[2] = {};  // the backend's (the timeout it hands the kernel)
};

struct ArmRequest {
  int fd;
  uint32_t want;  // directions to watch (non-empty); the backend may keep others armed too
  uint32_t armed;  // directions the caller's record says are still armed for fd
  bool known;  // arm() succeeded for fd since its last disarm(): epoll uses MOD, not ADD
  uint32_t tag;  // returned in events of this arming (low 23 bits are kept)
};

class Reactor {
 public:
  virtual ~Reactor() = default;

  // "epoll", "io_uring" or "kqueue".
  virtual const char* name() const noexcept = 0;

  // True if an armed direction reports only changes (epoll edge-triggered): arm() of an
  // already armed direction checks nothing, so a caller that wants a wait on a ready fd to
  // return at once must check the level itself when readiness it handed out may not have been
  // consumed. False (io_uring, kqueue): every arm() is a level check, and an armed direction
  // that has not reported yet means "not ready since it was armed" (or an event in flight).
  virtual bool reports_changes_only() const noexcept { return false; }

  // Arms req.fd for req.want. On success returns 0 and stores in *armed the directions now
  // armed (the caller's new record). Errors are returned, not thrown: EPERM means the fd cannot
  // be watched (a regular file: it is always ready), EBADF a closed fd, ENOMEM/ENOSPC limits.
  virtual int arm(const ArmRequest& req, uint32_t* armed) noexcept = 0;

  // Forgets every interest of fd (before it is closed, so the backend holds no reference to
  // the open file). Events already in flight may still be reported (with the old tag).
  virtual void disarm(int fd) noexcept = 0;
  // disarm(fd) from a caller that knows the life of fd it ends: `tag` is the ArmRequest::tag of
  // every arm() since the last disarm of fd, `ops` whether fd may have submitted operations in
  // flight. A backend that may carry a disarm out later (io_uring's single-issuer ring, asked by
  // a thread that is not its owner) then cancels that life's requests only: by the time it runs
  // fd may have been closed and its number reused. Default: disarm(fd).
  virtual void disarm_life(int fd, uint32_t tag, bool ops) noexcept {
    (void)tag;
    (void)ops;
    disarm(fd);
  }

  // Waits until an event, `deadline` (TimePoint::max() = forever; a past deadline = just
  // poll) or wake(); stores at most `max` events in out and returns how many (0 on timeout,
  // wake-up or EINTR). Internal events (the wake-up channel) are never returned.
  virtual int wait(ReactorEvent* out, int max, TimePoint deadline) noexcept = 0;

  // Makes the current or next wait() return. Thread-safe; coalesces repeated calls.
  virtual void wake() noexcept = 0;

  // Completion-based operations (io_uring only). submit() queues op (sent to the kernel with
  // the poller's next wait, or at once if the poller is blocked) and returns 0, or an errno if
  // it cannot (then no event follows). Exactly one event with ev.op == &op follows a 0; until
  // then op must stay valid. disarm(fd) cancels the ops of fd too (they complete with
  // -ECANCELED). Thread-safe as arm().
  virtual bool supports_ops() const noexcept { return false; }
  // True if only one thread may wait() (io_uring's single-issuer ring: the first thread that
  // waits); wait() from another thread then returns 0 at once, without events.
  virtual bool single_issuer() const noexcept { return false; }
  virtual int submit(ReactorOp& op) noexcept {
    (void)op;
    return ENOTSUP;
  }
  // Asks the kernel to end one submitted op early: it completes with -ECANCELED (or with its
  // result, if it finished first). Thread-safe as arm().
  virtual void cancel_op(ReactorOp& op) noexcept { (void)op; }
};

struct ReactorOptions {
  unsigned uring_entries = 256;  // io_uring submission queue size
  bool uring_single_issuer = false;  // io_uring: one thread enters the ring (UringReactor)
};

// Creates the backend called `name` ("epoll", "io_uring", "kqueue"). Throws std::system_error
// if it cannot be created here (not compiled in: ENOTSUP; kernel refuses: its errno) and
// std::invalid_argument for an unknown name.
std::unique_ptr<Reactor> make_reactor(const std::string& name, const ReactorOptions& options = {});

// Names of the backends compiled into this build, in order of preference.
const char* const* compiled_reactors() noexcept;  // nullptr-terminated
}  // namespace lionet
