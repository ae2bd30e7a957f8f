// lionet/net/socket.h: lionet::Socket, an owned socket fd with blocking-style calls that park
// the calling fiber (never the worker thread) while the kernel is not ready.
//
// Owns: the fd (RAII), non-blocking mode, per-socket and per-call time limits, socket options,
// and the close protocol below. Must not: throw on the request path (every IO call returns a
// Result; only listen_on(), a setup call, throws), call hooked libc (see detail/sys.h), or
// know about TLS or HTTP.
//
// How a call works: the fd is always O_NONBLOCK. A call tries the system call; on EAGAIN it
// parks in IOManager::wait_readable/wait_writable (IOManager::current(), the manager of the
// scheduler running the fiber) and retries. With a completion-based IOManager (io_uring,
// IOManager::completion_io) the park is the kernel's own call instead (IOManager::recv, send,
// recvmsg, sendmsg, accept; connect goes to the kernel at once): a read after EAGAIN or after a
// short read is one completion that carries the data; sendfile still waits for readiness.
// Called from a plain thread (no IOManager) it waits in poll(2) instead, so a Socket also works
// in ordinary threads and tests.
//
// Time limits: each call takes a Deadline. The default, Deadline(), means "this socket's
// timeout" (set_read_timeout / set_write_timeout; none by default = wait forever). The
// timeout bounds the whole call (write() of 1 MiB included), not each wait. Expiry returns
// ETIMEDOUT; the socket stays usable.
//
// Errors are errno codes in std::generic_category(): ECONNRESET, EPIPE (writes after a reset
// never raise SIGPIPE: send/sendmsg use MSG_NOSIGNAL, and the first Socket opened sets
// SIGPIPE to SIG_IGN if it was SIG_DFL, which sendfile(2) needs), ETIMEDOUT, ECANCELED (the
// socket was closed by another fiber while this call waited), EBADF (closed before the call).
//
// Close protocol (a socket may be closed by one fiber while others are inside calls on it,
// e.g. TcpServer::stop, or a reader and a writer fiber): state_ holds a CLOSED bit and the
// number of calls in flight. close() sets CLOSED; if calls are in flight it shuts the socket
// down (so any waiter, even one that registers a moment later, sees it ready: this closes the
// race between "checked CLOSED" and "registered the wait") and cancels waiters through the
// IOManager; the fd itself is closed by whoever brings the count to zero with CLOSED set
// (the closer, or the last call leaving), so an fd number is never reused under a call.
// Concurrency: any number of fibers may call read*/write*/accept/close on one Socket at once
// (one reader and one writer is the sensible use; two readers get interleaved bytes).
// set_*_timeout, moves and destruction need exclusive access.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/net/address.h"

namespace lionet {
class IOManager;

// A per-call time limit. Deadline() = the socket's timeout for that direction.
class Deadline {
 public:
  constexpr Deadline() noexcept = default;
  static Deadline at(TimePoint t) noexcept { return Deadline(Kind::kAt, t); }
  static Deadline after(Duration d) noexcept { return Deadline(Kind::kAt, now() + d); }
  static Deadline never() noexcept { return Deadline(Kind::kNever, {}); }
  // The absolute deadline given the socket's timeout (nullopt = none).
  std::optional<TimePoint> resolve(const std::optional<Duration>& socket_timeout) const noexcept {
    if (kind_ == Kind::kAt) return at_;
    if (kind_ == Kind::kNever || !socket_timeout) return std::nullopt;
    return now() + *socket_timeout;
  }

 private:
  enum class Kind : uint8_t { kSocket, kNever, kAt };
  constexpr Deadline(Kind k, TimePoint t) noexcept : kind_(k), at_(t) {}
  Kind kind_ = Kind::kSocket;
  TimePoint at_{};
};

struct ListenOptions {
  int backlog = SOMAXCONN;  // the kernel caps it at net.core.somaxconn
  bool reuse_addr = true;  // SO_REUSEADDR: rebind at once after a restart (TIME_WAIT)
  bool reuse_port = false;  // SO_REUSEPORT: several listeners on one port, kernel balances
};

class Socket {
 public:
  Socket() noexcept = default;
  // Adopts fd (sets O_NONBLOCK on it). The Socket closes it.
  explicit Socket(int fd) noexcept;
  ~Socket();
  // Moves need exclusive access (no call in flight on either socket).
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A new non-blocking, close-on-exec socket.
  static Result<Socket> open(int family, int type = SOCK_STREAM, int protocol = 0) noexcept;
  // open() + connect(); TCP_NODELAY is on for TCP. Deadline() here means no limit.
  static Result<Socket> connect_to(const Address& peer, Deadline d = Deadline()) noexcept;
  // open() + options + bind + listen. Setup call: throws std::system_error whose what()
  // names the address ("lionet: bind 127.0.0.1:80: Address already in use").
  static Socket listen_on(const Address& local, const ListenOptions& options = {});

  Result<void> bind(const Address& local) noexcept;
  Result<void> listen(int backlog = SOMAXCONN) noexcept;
  // Uses the write timeout by default. ECONNREFUSED etc. as from the kernel.
  Result<void> connect(const Address& peer, Deadline d = Deadline()) noexcept;
  // Waits for a connection (read timeout by default). The new socket is non-blocking, with
  // TCP_NODELAY for TCP; peer (if given) receives its address. Transient per-connection
  // errors (ECONNABORTED, EPROTO) are skipped. EMFILE/ENFILE are returned: back off.
  Result<Socket> accept(Address* peer = nullptr, Deadline d = Deadline()) noexcept;

  // Some bytes (at least 1), 0 at end of stream. n == 0 returns 0 at once without a system
  // call (a zero-length read cannot be told from end of stream, so it is never issued).
  Result<size_t> read(void* buf, size_t n, Deadline d = Deadline()) noexcept;
  Result<size_t> readv(const iovec* iov, int iovcnt, Deadline d = Deadline()) noexcept;
  // All n bytes (returns n), or an error (some bytes may have been sent).
  Result<size_t> write(const void* buf, size_t n, Deadline d = Deadline()) noexcept;
  // write() with MSG_MORE: the kernel holds a short write back to share a segment with what
  // follows (a response head before its sendfile body), like nginx's tcp_nopush.
  Result<size_t> write_more(const void* buf, size_t n, Deadline d = Deadline()) noexcept;
  Result<size_t> writev(const iovec* iov, int iovcnt, Deadline d = Deadline()) noexcept;
  // At least 1 byte (waits for room), as a blocking send would without MSG_WAITALL.
  Result<size_t> write_some(const void* buf, size_t n, Deadline d = Deadline()) noexcept;
  // Kernel sendfile of count bytes of file_fd from offset: returns bytes sent (fewer only if
  // the file ended). EINVAL/ENOSYS if the kernel cannot (SocketStream falls back).
  Result<size_t> sendfile(int file_fd, off_t offset, size_t count, Deadline d = Deadline()) noexcept;

  // SHUT_WR = half-close: the peer reads end of stream, this side can still read.
  Result<void> shutdown(int how = SHUT_WR) noexcept;
  // Idempotent; safe while other fibers are inside calls on this socket (see the top).
  void close() noexcept;
  // Wakes the fibers waiting on this socket with ECANCELED, touching neither the fd nor the
  // kernel socket (close() shuts a socket with calls in flight down, and on a listening socket
  // that another process shares, e.g. after a binary upgrade, shutdown stops its listening
  // too). A call that registers its wait after this one is not woken: callers repeat it until
  // the calls they wanted out have left. Any thread.
  void cancel_waits() noexcept;

  void set_read_timeout(std::optional<Duration> t) noexcept { read_timeout_ = t; }
  void set_write_timeout(std::optional<Duration> t) noexcept { write_timeout_ = t; }
  std::optional<Duration> read_timeout() const noexcept { return read_timeout_; }
  std::optional<Duration> write_timeout() const noexcept { return write_timeout_; }

  Result<void> set_option(int level, int name, int value) noexcept;
  Result<int> get_option(int level, int name) const noexcept;
  Result<void> set_nodelay(bool on) noexcept;
  Result<void> set_reuse_addr(bool on) noexcept;
  Result<void> set_reuse_port(bool on) noexcept;
  Result<void> set_keepalive(bool on) noexcept;
  // SO_LINGER {on, seconds}; {true, 0} makes close() send RST.
  Result<void> set_linger(bool on, int seconds) noexcept;

  Result<Address> local_address() const noexcept;
  Result<Address> peer_address() const noexcept;

  int fd() const noexcept { return fd_; }
  bool is_open() const noexcept { return fd_ >= 0 && !(state_.load(std::memory_order_acquire) & kClosed); }
  explicit operator bool() const noexcept { return is_open(); }
  // Gives up ownership: returns the fd (still non-blocking) and leaves this Socket empty.
  // Needs exclusive access.
  int release() noexcept;

 private:
  // UdpSocket (udp_socket.h) holds a Socket and reuses its close protocol, Op and waits
  // instead of copying them; it touches nothing else here.
  friend class UdpSocket;
  static constexpr uint32_t kClosed = 1u << 31;
  static constexpr uint32_t kFinished = 1u << 30;  // the fd has been closed
  static constexpr uint32_t kCount = kFinished - 1;
  // RAII for one call in flight (see the close protocol at the top). In the header so that
  // UdpSocket's calls take the same guard.
  class Op {
   public:
    explicit Op(Socket* s) noexcept : s_(s), ok_(s->enter()) {}
    ~Op() {
      if (ok_) s_->leave();
    }
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;
    explicit operator bool() const noexcept { return ok_; }

   private:
    Socket* s_;
    bool ok_;
  };

  bool enter() noexcept;
  void leave() noexcept;
  // A Socket for fd, just accepted from a peer at ss (TCP_NODELAY on TCP); fills *peer if asked.
  static Socket accepted(int fd, const sockaddr_storage& ss, socklen_t len, Address* peer) noexcept;
  Result<size_t> send_flags(const void* buf, size_t n, Deadline d, int flags) noexcept;
  void try_finish() noexcept;
  void cancel_waiters() noexcept;
  bool closed_by_other() const noexcept { return state_.load(std::memory_order_acquire) & kClosed; }
  // Notes io in io_ (the IOManager this socket's calls parked in), for close.
  void remember_io(IOManager* io) noexcept {
    if (io_.load(std::memory_order_relaxed) != io) io_.store(io, std::memory_order_release);
  }
  // Waits in io (IOManager::current(), remembered in io_ for close) or, if io is null (a plain
  // thread), in poll(2). 0, ETIMEDOUT or ECANCELED.
  // after_short_read: see tcp_ below (IOManager::wait_readable_after_short_read).
  int wait(IOManager* io, bool for_write, const std::optional<TimePoint>& deadline,
           bool after_short_read = false) noexcept;
  // After a failed syscall with errno e: 0 to retry (EINTR, or EAGAIN and the fd became ready,
  // waited for with the deadline resolved on the first wait), else the error to return. A
  // caller that can perform the call in the kernel passes `kernel`: on EAGAIN with a
  // completion-based IOManager (IOManager::completion_io(), io_uring) nothing is waited for,
  // *kernel is set to that IOManager (remembered in io_), dl is resolved, and 0 is returned.
  int retry_after(int e, bool for_write, Deadline d, std::optional<TimePoint>& dl, bool& resolved,
                  IOManager** kernel = nullptr) noexcept;
  // The result of a completion-based call (IOManager::recv & co.): >= 0 as is, else the error
  // to return (ECANCELED if close() ran meanwhile).
  Result<size_t> op_result(int64_t r) noexcept;
  // read()/readv() share this: retry `call` (one read syscall) on EINTR, park on EAGAIN; with
  // a completion-based IOManager, `submit(io, deadline)` replaces the park and the retry.
  // `want`: the bytes asked for; a TCP read that returns fewer drained the receive queue.
  template <class Call, class Submit>
  Result<size_t> read_loop(Call call, Submit submit, size_t want, Deadline d) noexcept;

  int fd_ = -1;  // written only with exclusive access or by the one winner of try_finish()
  // CLOSED | FINISHED | calls in flight. acq_rel on every change: the finisher must see every
  // call's effects, and a call that entered must see the fd before CLOSED was set.
  std::atomic<uint32_t> state_{0};
  // The IOManager some call waited in (so close can cancel its registration). Written by
  // waiters (all the same value), read by the closer.
  std::atomic<IOManager*> io_{nullptr};
  // TCP (accepted or connected here): a read that returned fewer bytes than asked emptied the
  // kernel's receive queue, and any later segment makes a new epoll edge. So the next read
  // waits for readiness first instead of trying a read that would say EAGAIN (nginx's
  // `rev->ready = 0` after a short recv): one system call less per keep-alive request whose
  // next request has not arrived yet. An end of stream that came with the last bytes makes no
  // new edge: the IOManager keeps the epoll hang-up bit for that (its protocol, step 8).
  // A hint only: relaxed, since two readers at once (allowed, if odd) may overwrite each
  // other's; a stale "drained" costs one wait that returns at once, because the edge for bytes
  // that came meanwhile is remembered by the IOManager (its protocol, step 3). Known gap shared with nginx: a read that stops at TCP urgent data
  // (MSG_OOB from the peer) looks drained but is not; the rest is read on the next segment or
  // when the read's deadline passes. tcp_ is set once, before the socket is shared.
  bool tcp_ = false;
  std::atomic<bool> read_drained_{false};
  std::optional<Duration> read_timeout_;  // owner-set, exclusive access
  std::optional<Duration> write_timeout_;  // owner-set, exclusive access
};
}  // namespace lionet
