// lionet/net/socket.cc: Socket (see socket.h for the call model and the close protocol).
#include "lionet/net/socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>
#include <vector>

#include "lionet/base/macros.h"
#include "lionet/io/io_manager.h"
#include "lionet/net/detail/sys.h"

namespace lionet {
namespace {

template <class T>
Result<T> fail(int err) noexcept {
  return Result<T>::failure(err);
}

// sendfile(2) has no MSG_NOSIGNAL: a write to a reset peer would kill the process. Ignore
// SIGPIPE once, unless the application installed its own handler.
void ignore_sigpipe_once() noexcept {
  static const bool done = [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
      ::signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)done;
}

bool is_tcp_family(int family) noexcept { return family == AF_INET || family == AF_INET6; }

// Plain-thread wait (no IOManager): poll(2) with the same results as IOManager waits.
int poll_wait(int fd, bool for_write, const std::optional<TimePoint>& deadline) noexcept {
  for (;;) {
    int ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now()).count();
      if (left <= 0) return ETIMEDOUT;
      ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    int r = ::poll(&p, 1, ms);
    if (r > 0) return 0;
    if (r == 0) continue;  // re-check the deadline (poll rounds)
    if (errno != EINTR) return 0;  // let the next system call report the problem
  }
}
}  // namespace

Socket::Socket(int fd) noexcept : fd_(fd) {
  ignore_sigpipe_once();
  if (fd_ >= 0) {
    int fl = ::fcntl(fd_, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK)) ::fcntl(fd_, F_SETFL, fl | O_NONBLOCK);
  }
}

Socket::~Socket() {
  close();
  LIONET_CHECK((state_.load(std::memory_order_acquire) & kCount) == 0,
               "lionet::Socket destroyed while a call on it is still in flight");
}

Socket::Socket(Socket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      state_(o.state_.exchange(0, std::memory_order_acq_rel)),
      io_(o.io_.exchange(nullptr, std::memory_order_acq_rel)),
      tcp_(o.tcp_),
      read_drained_(o.read_drained_.exchange(false, std::memory_order_relaxed)),
      read_timeout_(o.read_timeout_),
      write_timeout_(o.write_timeout_) {}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    state_.store(o.state_.exchange(0, std::memory_order_acq_rel), std::memory_order_release);
    io_.store(o.io_.exchange(nullptr, std::memory_order_acq_rel), std::memory_order_release);
    tcp_ = o.tcp_;
    read_drained_.store(o.read_drained_.exchange(false, std::memory_order_relaxed), std::memory_order_relaxed);
    read_timeout_ = o.read_timeout_;
    write_timeout_ = o.write_timeout_;
  }
  return *this;
}

// ---- close protocol ----

bool Socket::enter() noexcept {
  uint32_t s = state_.fetch_add(1, std::memory_order_acq_rel);
  if (LIONET_UNLIKELY(s & kClosed)) {
    leave();
    return false;
  }
  return true;
}

void Socket::leave() noexcept {
  uint32_t s = state_.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (LIONET_UNLIKELY(s == kClosed)) try_finish();
}

void Socket::try_finish() noexcept {
  uint32_t expect = kClosed;  // closed, nothing in flight, not yet finished
  if (!state_.compare_exchange_strong(expect, kClosed | kFinished, std::memory_order_acq_rel)) return;
  if (fd_ >= 0) {
    cancel_waiters();  // forgets the IOManager's registration before the number is reused
    detail::sys::close(fd_);
    fd_ = -1;
  }
}

void Socket::cancel_waiters() noexcept {
  // The IOManager may be gone (a socket kept past its scheduler, e.g. in an http::Client pool):
  // then there is no registration left to forget, and the close is a plain close.
  IOManager::cancel_if_alive(io_.load(std::memory_order_acquire), fd_);
}

void Socket::close() noexcept {
  // close() holds a call slot of its own while it touches fd_: otherwise the last call in flight
  // could finish (close the fd, clear fd_) between our reads of it, and the shutdown below could
  // hit a number already reused by another socket (a race TSan reported in Server::stop).
  uint32_t s = state_.fetch_add(1, std::memory_order_acq_rel);
  if (!(s & kClosed)) s = state_.fetch_or(kClosed, std::memory_order_acq_rel);
  if (s & kClosed) {  // closed already: drop our slot (if it was the last, that finishes)
    leave();
    return;
  }
  if ((s & kCount) > 1) {
    // Calls in flight besides ours: make the fd ready for good (EOF / EPIPE, accept fails with
    // EINVAL) so a waiter that registers after the cancel below still returns at once, then wake
    // the waiters that are registered.
    detail::sys::shutdown(fd_, SHUT_RDWR);
    cancel_waiters();
  }
  leave();  // the last slot to leave (ours or a call's) closes the fd
}

void Socket::cancel_waits() noexcept {
  Op op(this);  // holds fd_ still for the cancel (see close())
  if (op) cancel_waiters();
}

int Socket::release() noexcept {
  if (fd_ >= 0) cancel_waiters();  // the IOManager must not keep a registration we no longer own
  int fd = std::exchange(fd_, -1);
  state_.store(0, std::memory_order_release);
  io_.store(nullptr, std::memory_order_release);
  return fd;
}

int Socket::retry_after(int e, bool for_write, Deadline d, std::optional<TimePoint>& dl, bool& resolved,
                        IOManager** kernel) noexcept {
  if (e == EINTR) return 0;
  if (e != EAGAIN) return closed_by_other() ? ECANCELED : e;
  if (!resolved) dl = d.resolve(for_write ? write_timeout_ : read_timeout_), resolved = true;
  IOManager* io = IOManager::current();
  if (kernel && io && io->completion_io()) {
    remember_io(io);
    *kernel = io;
    return 0;
  }
  return wait(io, for_write, dl);
}

int Socket::wait(IOManager* io, bool for_write, const std::optional<TimePoint>& deadline,
                 bool after_short_read) noexcept {
  int rc;
  if (io) {
    remember_io(io);
    // Every caller waits right after EAGAIN/EINPROGRESS or a short read (see io_manager.h).
    if (for_write) rc = io->wait_writable_after_eagain(fd_, deadline);
    else if (after_short_read) rc = io->wait_readable_after_short_read(fd_, deadline);
    else rc = io->wait_readable_after_eagain(fd_, deadline);
  } else {
    rc = poll_wait(fd_, for_write, deadline);
  }
  if (LIONET_UNLIKELY(state_.load(std::memory_order_acquire) & kClosed)) return ECANCELED;
  return rc;
}

Result<size_t> Socket::op_result(int64_t r) noexcept {
  if (LIONET_UNLIKELY(closed_by_other())) return fail<size_t>(ECANCELED);  // also EOF made by close()
  if (r >= 0) return static_cast<size_t>(r);
  return fail<size_t>(static_cast<int>(-r));
}

// ---- creation ----

Result<Socket> Socket::open(int family, int type, int protocol) noexcept {
  ignore_sigpipe_once();
  int fd = detail::sys::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
  if (fd < 0) return fail<Socket>(errno);
  Socket s;
  s.fd_ = fd;
  return s;
}

Result<Socket> Socket::connect_to(const Address& peer, Deadline d) noexcept {
  auto s = open(peer.family(), SOCK_STREAM);
  if (!s) return s;
  if (is_tcp_family(peer.family())) {
    (void)s->set_nodelay(true);
    s->tcp_ = true;
  }
  if (auto r = s->connect(peer, d); !r) return r.error();
  return s;
}

Socket Socket::listen_on(const Address& local, const ListenOptions& o) {
  auto fail_with = [&](const char* what, std::error_code ec) {
    throw std::system_error(ec, std::string("lionet: ") + what + " " + local.to_string());
  };
  auto s = open(local.family(), SOCK_STREAM);
  if (!s) fail_with("socket for", s.error());
  if (local.is_ip()) {
    if (o.reuse_addr) (void)s->set_reuse_addr(true);
    if (o.reuse_port) {
      if (auto r = s->set_reuse_port(true); !r) fail_with("SO_REUSEPORT on", r.error());
    }
  }
  if (auto r = s->bind(local); !r) fail_with("bind", r.error());
  if (auto r = s->listen(o.backlog); !r) fail_with("listen on", r.error());
  return std::move(*s);
}

Result<void> Socket::bind(const Address& local) noexcept {
  if (::bind(fd_, local.sockaddr_ptr(), local.length()) < 0) return fail<void>(errno);
  return {};
}

Result<void> Socket::listen(int backlog) noexcept {
  if (::listen(fd_, backlog) < 0) return fail<void>(errno);
  return {};
}

Result<void> Socket::connect(const Address& peer, Deadline d) noexcept {
  Op op(this);
  if (!op) return fail<void>(EBADF);
  IOManager* io = IOManager::current();
  if (io && io->completion_io()) {
    remember_io(io);
    const int64_t c = io->connect(fd_, peer.sockaddr_ptr(), peer.length(), d.resolve(write_timeout_));
    if (closed_by_other()) return fail<void>(ECANCELED);
    if (c < 0) return fail<void>(static_cast<int>(-c));
    return {};
  }
  int r = detail::sys::connect(fd_, peer.sockaddr_ptr(), peer.length());
  if (r == 0) return {};
  int e = errno;
  if (e != EINPROGRESS && e != EINTR) return fail<void>(e);
  // In progress: writable once it completed or failed; SO_ERROR tells which.
  std::optional<TimePoint> dl = d.resolve(write_timeout_);
  for (;;) {
    if (int w = wait(io, true, dl)) return fail<void>(w);
    int err = 0;
    socklen_t len = sizeof err;
    if (detail::sys::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return fail<void>(errno);
    if (err == 0) return {};
    if (err != EINPROGRESS && err != EALREADY) return fail<void>(err);
  }
}

Socket Socket::accepted(int fd, const sockaddr_storage& ss, socklen_t len, Address* peer) noexcept {
  Socket s;
  s.fd_ = fd;
  if (is_tcp_family(ss.ss_family)) {
    (void)s.set_nodelay(true);
    s.tcp_ = true;
  }
  if (peer) *peer = Address(reinterpret_cast<const sockaddr*>(&ss), len);
  return s;
}

Result<Socket> Socket::accept(Address* peer, Deadline d) noexcept {
  Op op(this);
  if (!op) return fail<Socket>(EBADF);
  std::optional<TimePoint> dl;
  bool resolved = false;
  for (;;) {
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = detail::sys::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return accepted(fd, ss, len, peer);
    int e = errno;
    if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;
    if (e != EAGAIN) return fail<Socket>(closed_by_other() ? ECANCELED : e);
    IOManager* io = nullptr;
    if (int w = retry_after(e, /*for_write=*/false, d, dl, resolved, &io)) return fail<Socket>(w);
    if (io) {
      len = sizeof ss;
      const int64_t r = io->accept(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC, dl);
      if (r >= 0) {
        Socket s = accepted(static_cast<int>(r), ss, len, peer);
        if (closed_by_other()) return fail<Socket>(ECANCELED);  // s closes the connection
        return s;
      }
      if (r == -EINTR || r == -ECONNABORTED || r == -EPROTO || r == -EAGAIN) continue;
      return fail<Socket>(closed_by_other() ? ECANCELED : static_cast<int>(-r));
    }
  }
}

// ---- data ----

template <class Call, class Submit>
Result<size_t> Socket::read_loop(Call call, Submit submit, size_t want, Deadline d) noexcept {
  Op op(this);
  if (!op) return fail<size_t>(EBADF);
  std::optional<TimePoint> dl;
  bool resolved = false;
  // Completion-based IO (io_uring): the kernel's read, parked on until it has data (dl resolved).
  auto in_kernel = [&](IOManager* io) -> Result<size_t> {
    Result<size_t> r = op_result(submit(io, dl));
    if (r && tcp_) read_drained_.store(*r < want, std::memory_order_relaxed);
    return r;
  };
  // See tcp_ in socket.h: wait for the next edge, as after EAGAIN (fibers only). Relaxed: a hint.
  if (read_drained_.load(std::memory_order_relaxed)) {
    read_drained_.store(false, std::memory_order_relaxed);
    if (IOManager* io = IOManager::current()) {
      dl = d.resolve(read_timeout_), resolved = true;
      if (io->completion_io()) {
        remember_io(io);
        return in_kernel(io);
      }
      if (int w = wait(io, /*for_write=*/false, dl, /*after_short_read=*/true)) return fail<size_t>(w);
    }
  }
  for (;;) {
    ssize_t r = call();
    if (LIONET_LIKELY(r > 0)) {
      if (tcp_) read_drained_.store(static_cast<size_t>(r) < want, std::memory_order_relaxed);
      return static_cast<size_t>(r);
    }
    int e = r == 0 ? 0 : errno;
    if (closed_by_other()) return fail<size_t>(ECANCELED);  // EOF made by close()'s shutdown
    if (r == 0) return size_t{0};
    IOManager* io = nullptr;
    if (int w = retry_after(e, /*for_write=*/false, d, dl, resolved, &io)) return fail<size_t>(w);
    if (io) return in_kernel(io);
  }
}

Result<size_t> Socket::read(void* buf, size_t n, Deadline d) noexcept {
  if (n == 0) return size_t{0};
  return read_loop([&] { return detail::sys::read(fd_, buf, n); },
                   [&](IOManager* io, const std::optional<TimePoint>& dl) { return io->recv(fd_, buf, n, 0, dl); }, n,
                   d);
}

Result<size_t> Socket::readv(const iovec* iov, int iovcnt, Deadline d) noexcept {
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  if (want == 0) return size_t{0};  // as read(): a zero-length read is never issued
  return read_loop([&] { return detail::sys::readv(fd_, iov, iovcnt); },
                   [&](IOManager* io, const std::optional<TimePoint>& dl) {
                     msghdr m{};
                     m.msg_iov = const_cast<iovec*>(iov);
                     m.msg_iovlen = static_cast<size_t>(iovcnt);
                     return io->recvmsg(fd_, &m, 0, dl);
                   },
                   want, d);
}

Result<size_t> Socket::write_some(const void* buf, size_t n, Deadline d) noexcept {
  if (n == 0) return size_t{0};
  Op op(this);
  if (!op) return fail<size_t>(EBADF);
  std::optional<TimePoint> dl;
  bool resolved = false;
  for (;;) {
    ssize_t r = detail::sys::send(fd_, buf, n);
    if (r >= 0) return static_cast<size_t>(r);
    IOManager* io = nullptr;
    if (int w = retry_after(errno, /*for_write=*/true, d, dl, resolved, &io)) return fail<size_t>(w);
    if (io) return op_result(io->send(fd_, buf, n, MSG_NOSIGNAL, dl));
  }
}

Result<size_t> Socket::write(const void* buf, size_t n, Deadline d) noexcept { return send_flags(buf, n, d, 0); }

Result<size_t> Socket::write_more(const void* buf, size_t n, Deadline d) noexcept {
  return send_flags(buf, n, d, MSG_MORE);
}

Result<size_t> Socket::send_flags(const void* buf, size_t n, Deadline d, int flags) noexcept {
  Op op(this);
  if (!op) return fail<size_t>(EBADF);
  const char* p = static_cast<const char*>(buf);
  size_t done = 0;
  std::optional<TimePoint> dl;
  bool resolved = false;
  while (done < n) {
    ssize_t r = detail::sys::send(fd_, p + done, n - done, flags);
    if (r >= 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    IOManager* io = nullptr;
    if (int w = retry_after(errno, /*for_write=*/true, d, dl, resolved, &io)) return fail<size_t>(w);
    if (io) {
      // The kernel's send, parked on until the socket takes some bytes; then try again.
      Result<size_t> k = op_result(io->send(fd_, p + done, n - done, flags | MSG_NOSIGNAL, dl));
      if (!k) return k;
      done += *k;
    }
  }
  return n;
}

Result<size_t> Socket::writev(const iovec* iov, int iovcnt, Deadline d) noexcept {
  Op op(this);
  if (!op) return fail<size_t>(EBADF);
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  std::vector<iovec> rest;  // a copy only after a partial write (rare)
  const iovec* cur = iov;
  int cnt = iovcnt;
  size_t done = 0;
  std::optional<TimePoint> dl;
  bool resolved = false;
  while (done < total) {
    ssize_t r = detail::sys::sendv(fd_, cur, std::min(cnt, IOV_MAX));
    if (r < 0) {
      IOManager* io = nullptr;
      if (int w = retry_after(errno, /*for_write=*/true, d, dl, resolved, &io)) return fail<size_t>(w);
      if (!io) continue;
      // The kernel's sendmsg, parked on until the socket takes some bytes.
      msghdr m{};
      m.msg_iov = const_cast<iovec*>(cur);
      m.msg_iovlen = static_cast<size_t>(std::min(cnt, IOV_MAX));
      Result<size_t> k = op_result(io->sendmsg(fd_, &m, MSG_NOSIGNAL, dl));
      if (!k) return k;
      r = static_cast<ssize_t>(*k);
    }
    done += static_cast<size_t>(r);
    if (done == total) break;
    if (rest.empty()) {
      rest.assign(cur, cur + cnt);
      cur = rest.data();
    }
    // Advance past the r bytes sent; cur points into rest (our copy) from here on.
    size_t skip = static_cast<size_t>(r);
    iovec* v = rest.data() + (cur - rest.data());
    while (skip >= v->iov_len) {
      skip -= v->iov_len;
      ++v;
      --cnt;
    }
    v->iov_base = static_cast<char*>(v->iov_base) + skip;
    v->iov_len -= skip;
    cur = v;
  }
  return total;
}

Result<size_t> Socket::sendfile(int file_fd, off_t offset, size_t count, Deadline d) noexcept {
  Op op(this);
  if (!op) return fail<size_t>(EBADF);
  size_t done = 0;
  off_t off = offset;
  std::optional<TimePoint> dl;
  bool resolved = false;
  while (done < count) {
    ssize_t r = detail::sys::sendfile(fd_, file_fd, &off, count - done);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) break;  // end of file
    int e = errno;
    if (int w = retry_after(e, /*for_write=*/true, d, dl, resolved)) return fail<size_t>(w);
  }
  return done;
}

Result<void> Socket::shutdown(int how) noexcept {
  Op op(this);
  if (!op) return fail<void>(EBADF);
  if (detail::sys::shutdown(fd_, how) < 0) return fail<void>(errno);
  return {};
}

// ---- options ----

Result<void> Socket::set_option(int level, int name, int value) noexcept {
  if (detail::sys::setsockopt(fd_, level, name, &value, sizeof value) < 0) return fail<void>(errno);
  return {};
}

Result<int> Socket::get_option(int level, int name) const noexcept {
  int v = 0;
  socklen_t len = sizeof v;
  if (detail::sys::getsockopt(fd_, level, name, &v, &len) < 0) return fail<int>(errno);
  return v;
}

Result<void> Socket::set_nodelay(bool on) noexcept { return set_option(IPPROTO_TCP, TCP_NODELAY, on); }
Result<void> Socket::set_reuse_addr(bool on) noexcept { return set_option(SOL_SOCKET, SO_REUSEADDR, on); }
Result<void> Socket::set_reuse_port(bool on) noexcept { return set_option(SOL_SOCKET, SO_REUSEPORT, on); }
Result<void> Socket::set_keepalive(bool on) noexcept { return set_option(SOL_SOCKET, SO_KEEPALIVE, on); }

Result<void> Socket::set_linger(bool on, int seconds) noexcept {
  linger l{on ? 1 : 0, seconds};
  if (detail::sys::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l) < 0) return fail<void>(errno);
  return {};
}

namespace {
// getsockname or getpeername of fd, as an Address.
Result<Address> address_of(int fd, int (*get)(int, sockaddr*, socklen_t*)) noexcept {
  Address a;
  socklen_t len = Address::capacity();
  if (get(fd, a.sockaddr_ptr(), &len) < 0) return fail<Address>(errno);
  a.set_length(len);
  return a;
}
}  // namespace

Result<Address> Socket::local_address() const noexcept { return address_of(fd_, ::getsockname); }

Result<Address> Socket::peer_address() const noexcept { return address_of(fd_, ::getpeername); }
}  // namespace lionet
