// lionet/hook/io_hooks.cc: hooks that create, transfer on and close fds: socket, socketpair,
// pipe, pipe2, accept, accept4, connect, open/openat (only to forget stale entries), the read/write families (including pread/pwrite/
// preadv/pwritev for regular files), sendfile, close, shutdown, dup, dup2, dup3. Behaviour is
// described in hook.h.
//
// The one rule every function here follows: errno is read with get_errno() and written with
// set_errno(), and only after the last call that may switch fibers (wait_fd).
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <optional>
#include <type_traits>

#include "lionet/fiber/fiber.h"
#include "lionet/hook/detail/common.h"
#include "lionet/hook/detail/fd_table.h"
#include "lionet/hook/detail/real.h"
#include "lionet/hook/hook.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/offload.h"

#define LIONET_HOOK_API extern "C" __attribute__((visibility("default")))

extern "C" const int lionet_hook_anchor_io = 0;

namespace lionet::hook::detail {
namespace {

// The entry of fd if the hooks must emulate blocking on it, else nullptr (plain call).
// In an active fiber the fd is classified and made non-blocking in the kernel on first use.
// call: the hooked function's name, for the warning when the scheduler has no IO driver.
FdEntry* blocking_entry(int fd, const char* call) noexcept {
  const bool io = io_active() != nullptr;
  if (!io) warn_io_off(call, fd);
  FdEntry* e = io ? fd_table().managed(fd, /*make_nonblock=*/true) : fd_table().find(fd);
  return e && e->emulates_blocking() ? e : nullptr;
}

// Runs call() (one non-blocking attempt of a transfer), parking on EAGAIN until fd is ready
// in dir. timeout_ns: the SO_RCVTIMEO/SO_SNDTIMEO to honour. Returns call()'s result with
// errno as the kernel would have left it for a blocking fd.
// kernel(io, deadline): the same transfer as a completion-based call (IOManager::recv & co.),
// used instead of the readiness wait and retry on a socket when the IOManager performs socket
// calls itself (io_uring); NoKernelCall where there is none.
struct NoKernelCall {
  int64_t operator()(IOManager*, const std::optional<TimePoint>&) const noexcept { return -ENOTSUP; }
};

template <class Call, class Kernel = NoKernelCall>
ssize_t do_io(const char* name, int fd, Dir dir, int msg_flags, Call&& call, Kernel&& kernel = {}) noexcept {
  if (msg_flags & MSG_DONTWAIT) return call();
  FdEntry* e = blocking_entry(fd, name);
  if (!e) return call();
  int64_t t = (dir == Dir::kRead ? e->rcv_timeout_ns : e->snd_timeout_ns).load(std::memory_order_relaxed);
  std::optional<TimePoint> deadline;
  if (has_timeout(t)) deadline = deadline_after(t);
  for (;;) {
    ssize_t n = call();
    if (n >= 0) return n;
    int err = get_errno();
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) return n;  // errno is still the call's
    if constexpr (!std::is_same_v<std::decay_t<Kernel>, NoKernelCall>) {
      IOManager* iom = io_active();
      if (iom && iom->completion_io() && e->kind.load(std::memory_order_relaxed) == FdKind::kSocket) {
        int64_t r;
        {
          PinGuard pin;  // as wait_fd (hook.cc): errno's address must stay this thread's
          r = kernel(iom, deadline);
        }
        if (r >= 0) return static_cast<ssize_t>(r);
        if (r == -EINTR || r == -EAGAIN) continue;
        if (fail_if_interrupted()) return -1;  // a cancel or the fiber's deadline (sched/cancel.h)
        // As below: a timeout is the kernel's EAGAIN, a cancel (close by another fiber) EBADF.
        set_errno(r == -ETIMEDOUT ? EAGAIN : r == -ECANCELED ? EBADF : static_cast<int>(-r));
        return -1;
      }
    }
    int w = wait_fd(fd, dir, deadline, /*after_eagain=*/true);
    if (w != 0 && fail_if_interrupted()) return -1;
    if (w == ETIMEDOUT) {
      set_errno(EAGAIN);  // what the kernel reports when SO_RCVTIMEO/SO_SNDTIMEO expire
      return -1;
    }
    if (w == ECANCELED) {
      set_errno(EBADF);  // closed by someone else while we waited
      return -1;
    }
    if (w != 0) {  // the reactor refused the fd (e.g. ENOMEM): report instead of spinning
      set_errno(w);
      return -1;
    }
  }
}

// Completion-based forms of the transfers below (do_io's `kernel`).
auto kernel_recv(int fd, void* buf, size_t n, int flags) noexcept {
  return [=](IOManager* io, const std::optional<TimePoint>& dl) { return io->recv(fd, buf, n, flags, dl); };
}
auto kernel_send(int fd, const void* buf, size_t n, int flags) noexcept {
  return [=](IOManager* io, const std::optional<TimePoint>& dl) { return io->send(fd, buf, n, flags, dl); };
}
auto kernel_recvmsg(int fd, msghdr* msg, int flags) noexcept {
  return [=](IOManager* io, const std::optional<TimePoint>& dl) { return io->recvmsg(fd, msg, flags, dl); };
}
auto kernel_sendmsg(int fd, const msghdr* msg, int flags) noexcept {
  return [=](IOManager* io, const std::optional<TimePoint>& dl) { return io->sendmsg(fd, msg, flags, dl); };
}
// recvmsg/sendmsg of an iovec array, with an optional address (recvfrom/sendto).
auto kernel_msg(int fd, bool write, const iovec* iov, int cnt, int flags, sockaddr* addr, socklen_t* len) noexcept {
  return [=](IOManager* io, const std::optional<TimePoint>& dl) {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = static_cast<size_t>(cnt);
    m.msg_name = addr;
    m.msg_namelen = len ? *len : 0;
    const int64_t r = write ? io->sendmsg(fd, &m, flags, dl) : io->recvmsg(fd, &m, flags, dl);
    if (r >= 0 && len && !write) *len = m.msg_namelen;
    return r;
  };
}

// ---- regular files (hook.h, REGULAR FILES) ----

// Limits from lionet::hook::configure_regular_files() (hook.h): relaxed, read per call.
std::atomic<size_t> g_nowait_max{256 * 1024};
std::atomic<size_t> g_inline_write_max{256 * 1024};
std::atomic<bool> g_offload_sync{true};

std::atomic<uint64_t> g_file_fast{0};  // served by the RWF_NOWAIT try
std::atomic<uint64_t> g_file_offload{0};  // ran on the offload pool
std::atomic<uint64_t> g_file_inline{0};  // small buffered writes done in place (no NOWAIT support)

// The fd's entry if the call must take the regular-file path: an active fiber (no IOManager
// needed: the offload pool parks the fiber itself) and a regular file.
FdEntry* regular_entry(int fd) noexcept {
  if (!sleep_active()) return nullptr;
  return fd_table().regular(fd);
}

size_t iov_bytes(const iovec* iov, int cnt) noexcept {
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  return n;
}

// Runs call() (a blocking syscall returning ssize_t) on the offload pool and returns its result
// with errno set on this thread. The fiber is pinned for the wait, like every hooked wait
// (hook.cc, wait_fd): errno's address may have been computed by the caller before the call.
template <class Call>
ssize_t offload_call(Call&& call) noexcept {
  g_file_offload.fetch_add(1, std::memory_order_relaxed);
  struct Out {
    ssize_t r;
    int err;
  };
  Out out;
  {
    PinGuard pin;
    out = offload([&]() noexcept -> Out {
      ssize_t r = call();
      return {r, r < 0 ? errno : 0};  // the pool thread's errno, read right after the call
    });
  }
  if (out.r < 0) set_errno(out.err);
  return out.r;
}

// One read (write) of a regular file at off (-1: the file position) in an active fiber.
// Tries preadv2/pwritev2(RWF_NOWAIT) first: it succeeds when the data is in the page cache
// (or, for writes, when the filesystem can take it without blocking), and says EAGAIN when it
// would have to wait for the device; then the call goes to the offload pool. EOF reads return
// 0 from the try. A partial NOWAIT read (part of the range cached) is completed by an offloaded
// read of the rest, so the caller sees a full read unless EOF came first.
ssize_t file_io(FdEntry* e, int fd, bool write, const iovec* iov, int cnt, off_t off) noexcept {
  const size_t total = iov_bytes(iov, cnt);
  const bool buffered = !e->direct.load(std::memory_order_relaxed);
  if (write && buffered && e->nowait_write_unsupported.load(std::memory_order_relaxed) &&
      total <= g_inline_write_max.load(std::memory_order_relaxed)) {
    // The filesystem cannot say "would block" for buffered writes (ext4: EOPNOTSUPP), and a
    // small buffered write is a page-cache copy that blocks only under dirty-page throttling:
    // done in place, it costs ~1-2 us instead of ~17 us on the pool (README in lionet/file).
    g_file_inline.fetch_add(1, std::memory_order_relaxed);
    return off < 0 ? LIONET_REAL(writev)(fd, iov, cnt) : LIONET_REAL(pwritev)(fd, iov, cnt, off);
  }
  const bool try_nowait = buffered && total <= g_nowait_max.load(std::memory_order_relaxed) &&
                          !(write && e->nowait_write_unsupported.load(std::memory_order_relaxed));
  ssize_t first = 0;
  if (try_nowait) {
    ssize_t r = write ? LIONET_REAL(pwritev2)(fd, iov, cnt, off, RWF_NOWAIT)
                      : LIONET_REAL(preadv2)(fd, iov, cnt, off, RWF_NOWAIT);
    if (r >= 0) {
      g_file_fast.fetch_add(1, std::memory_order_relaxed);
      if (static_cast<size_t>(r) == total || r == 0 || write || cnt != 1) return r;
      first = r;  // part of one buffer was cached: read the rest on the pool
    } else {
      int err = get_errno();
      if (err == EOPNOTSUPP && write) {
        e->nowait_write_unsupported.store(true, std::memory_order_relaxed);
        if (total <= g_inline_write_max.load(std::memory_order_relaxed)) return file_io(e, fd, write, iov, cnt, off);
      } else if (err != EAGAIN && err != EOPNOTSUPP && err != EINTR) {
        return r;  // EBADF, EINVAL, EFBIG, ...: the kernel's answer, errno intact
      }
    }
  }
  if (first > 0) {
    iovec rest{static_cast<char*>(iov[0].iov_base) + first, iov[0].iov_len - static_cast<size_t>(first)};
    const off_t roff = off < 0 ? -1 : off + first;
    ssize_t r = offload_call(
        [&] { return roff < 0 ? LIONET_REAL(readv)(fd, &rest, 1) : LIONET_REAL(preadv)(fd, &rest, 1, roff); });
    if (roff < 0 && r < 0) return first;  // position already advanced: report what we have
    return r < 0 ? first : first + r;
  }
  if (off < 0) {
    return offload_call([&] { return write ? LIONET_REAL(writev)(fd, iov, cnt) : LIONET_REAL(readv)(fd, iov, cnt); });
  }
  return offload_call(
      [&] { return write ? LIONET_REAL(pwritev)(fd, iov, cnt, off) : LIONET_REAL(preadv)(fd, iov, cnt, off); });
}

// Records a freshly created socket or pipe end.
void record_new(int fd, FdKind kind, bool user_nb, bool kernel_nb) noexcept {
  if (FdEntry* e = fd_table().get(fd)) e->init(kind, user_nb, kernel_nb);
}

// Before fd stops naming its current file (close, dup2/dup3 onto it): wake its waiters and
// forget the entry. Waiters are only known to the IOManager of the calling scheduler.
void forget_fd(int fd) noexcept {
  if (fd < 0) return;
  if (current_fiber() != nullptr) {
    if (IOManager* iom = IOManager::current()) iom->cancel(fd);
  }
  if (FdEntry* e = fd_table().find(fd)) e->reset();
}

void copy_entry(int from, int to) noexcept {
  FdEntry* dst = fd_table().get(to);
  if (!dst) return;
  FdEntry* src = fd_table().find(from);
  if (src && src->kind.load(std::memory_order_relaxed) != FdKind::kUnknown) {
    dst->copy_from(*src);
  } else {
    dst->reset();
  }
}

int accept_impl(int fd, sockaddr* addr, socklen_t* len, int flags, bool is_accept4) noexcept {
  const bool user_nb = (flags & SOCK_NONBLOCK) != 0;
  const bool force = !user_nb && io_active() != nullptr;
  const int kflags = force ? (flags | SOCK_NONBLOCK) : flags;
  auto call = [&]() -> ssize_t {
    return (is_accept4 || kflags != 0) ? LIONET_REAL(accept4)(fd, addr, len, kflags)
                                       : LIONET_REAL(accept)(fd, addr, len);
  };
  auto kernel = [&](IOManager* io, const std::optional<TimePoint>& dl) {
    return io->accept(fd, addr, len, kflags, dl);
  };
  int n = static_cast<int>(do_io(is_accept4 ? "accept4" : "accept", fd, Dir::kRead, 0, call, kernel));
  if (n >= 0) {
    if (FdEntry* e = fd_table().get(n)) {
      e->init(FdKind::kSocket, user_nb, user_nb || force);
      // Accepted sockets inherit the listener's SO_RCVTIMEO/SO_SNDTIMEO in the kernel.
      if (FdEntry* l = fd_table().find(fd); l && l->managed()) {
        e->rcv_timeout_ns.store(l->rcv_timeout_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
        e->snd_timeout_ns.store(l->snd_timeout_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
    }
  }
  return n;
}

int connect_impl(int fd, const sockaddr* addr, socklen_t len) noexcept {
  FdEntry* e = blocking_entry(fd, "connect");
  if (!e || e->kind.load(std::memory_order_relaxed) != FdKind::kSocket) {
    return LIONET_REAL(connect)(fd, addr, len);
  }
  int64_t t = e->snd_timeout_ns.load(std::memory_order_relaxed);
  std::optional<TimePoint> deadline;
  if (has_timeout(t)) deadline = deadline_after(t);
  for (;;) {
    int r = LIONET_REAL(connect)(fd, addr, len);
    if (r == 0) return 0;
    int err = get_errno();
    if (err == EINTR) continue;
    if (err == EAGAIN && addr && addr->sa_family == AF_UNIX) {
      // Full AF_UNIX backlog: the kernel would block until the listener accepts. There is no
      // readiness to wait for on the connecting socket, so retry every millisecond.
      if (deadline && now() >= *deadline) return r;  // EAGAIN, as the kernel on timeout
      this_fiber::sleep_for(std::chrono::milliseconds(1));
      if (fail_if_interrupted()) return -1;
      if (!io_active()) {  // migrated to a worker with the switch off: finish as plain libc
        set_errno(EAGAIN);
        return -1;
      }
      continue;
    }
    if (err != EINPROGRESS) return r;
    break;
  }
  int w = wait_fd(fd, Dir::kWrite, deadline, /*after_eagain=*/true);  // after EINPROGRESS
  if (w != 0 && fail_if_interrupted()) return -1;
  if (w == ETIMEDOUT) {
    set_errno(EINPROGRESS);  // the kernel's answer when a blocking connect hits SO_SNDTIMEO
    return -1;
  }
  if (w != 0) {
    set_errno(w == ECANCELED ? EBADF : w);
    return -1;
  }
  int so_error = 0;
  socklen_t sl = sizeof(so_error);
  if (LIONET_REAL(getsockopt)(fd, SOL_SOCKET, SO_ERROR, &so_error, &sl) != 0) return -1;
  if (so_error != 0) {
    set_errno(so_error);
    return -1;
  }
  return 0;
}

}  // namespace
}  // namespace lionet::hook::detail

using namespace lionet::hook::detail;

// ---- creation ----

LIONET_HOOK_API int socket(int domain, int type, int protocol) {
  const bool user_nb = (type & SOCK_NONBLOCK) != 0;
  const bool force = !user_nb && io_active() != nullptr;
  int fd = LIONET_REAL(socket)(domain, force ? (type | SOCK_NONBLOCK) : type, protocol);
  if (fd >= 0) record_new(fd, FdKind::kSocket, user_nb, user_nb || force);
  return fd;
}

LIONET_HOOK_API int socketpair(int domain, int type, int protocol, int sv[2]) {
  const bool user_nb = (type & SOCK_NONBLOCK) != 0;
  const bool force = !user_nb && io_active() != nullptr;
  int r = LIONET_REAL(socketpair)(domain, force ? (type | SOCK_NONBLOCK) : type, protocol, sv);
  if (r == 0) {
    record_new(sv[0], FdKind::kSocket, user_nb, user_nb || force);
    record_new(sv[1], FdKind::kSocket, user_nb, user_nb || force);
  }
  return r;
}

LIONET_HOOK_API int pipe2(int fds[2], int flags) {
  const bool user_nb = (flags & O_NONBLOCK) != 0;
  const bool force = !user_nb && io_active() != nullptr;
  int r = LIONET_REAL(pipe2)(fds, force ? (flags | O_NONBLOCK) : flags);
  if (r == 0) {
    record_new(fds[0], FdKind::kPipe, user_nb, user_nb || force);
    record_new(fds[1], FdKind::kPipe, user_nb, user_nb || force);
  }
  return r;
}

LIONET_HOOK_API int pipe(int fds[2]) { return pipe2(fds, 0); }

LIONET_HOOK_API int accept(int fd, sockaddr* addr, socklen_t* len) { return accept_impl(fd, addr, len, 0, false); }

LIONET_HOOK_API int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return accept_impl(fd, addr, len, flags, true);
}

LIONET_HOOK_API int connect(int fd, const sockaddr* addr, socklen_t len) { return connect_impl(fd, addr, len); }

// ---- opening files ----
// open/openat are hooked only to forget a stale fd-table entry: the number may have belonged to
// a socket or pipe closed behind the hooks' back (raw close, fclose), and a stale kSocket/kPipe
// entry would send this file's reads down the socket path (made O_NONBLOCK, never offloaded).
// The new fd is classified on its first hooked use. Behaviour is otherwise plain libc.
namespace {
mode_t open_mode(int flags, va_list ap) noexcept {
  // The mode argument exists only with O_CREAT or O_TMPFILE (promoted to int through "...").
  return ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}
int opened(int fd) noexcept {
  if (fd >= 0) {
    if (FdEntry* e = fd_table().find(fd)) e->reset();
  }
  return fd;
}
}  // namespace

LIONET_HOOK_API int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return opened(LIONET_REAL(open)(path, flags, mode));
}

LIONET_HOOK_API int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return opened(LIONET_REAL(open64)(path, flags, mode));
}

LIONET_HOOK_API int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return opened(LIONET_REAL(openat)(dirfd, path, flags, mode));
}

LIONET_HOOK_API int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return opened(LIONET_REAL(openat64)(dirfd, path, flags, mode));
}

LIONET_HOOK_API int creat(const char* path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
LIONET_HOOK_API int creat64(const char* path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
// _FORTIFY_SOURCE entry points (used when the flags are not known at compile time).
LIONET_HOOK_API int __open_2(const char* path, int flags) { return open(path, flags); }
LIONET_HOOK_API int __open64_2(const char* path, int flags) { return open(path, flags); }
LIONET_HOOK_API int __openat_2(int dirfd, const char* path, int flags) { return openat(dirfd, path, flags); }
LIONET_HOOK_API int __openat64_2(int dirfd, const char* path, int flags) { return openat(dirfd, path, flags); }

// ---- transfers ----

LIONET_HOOK_API ssize_t read(int fd, void* buf, size_t n) {
  if (FdEntry* e = regular_entry(fd)) {
    iovec v{buf, n};
    return file_io(e, fd, false, &v, 1, -1);
  }
  return do_io(
      "read", fd, Dir::kRead, 0, [&] { return LIONET_REAL(read)(fd, buf, n); }, kernel_recv(fd, buf, n, 0));
}

LIONET_HOOK_API ssize_t readv(int fd, const iovec* iov, int cnt) {
  if (FdEntry* e = regular_entry(fd)) return file_io(e, fd, false, iov, cnt, -1);
  return do_io(
      "readv", fd, Dir::kRead, 0, [&] { return LIONET_REAL(readv)(fd, iov, cnt); },
      kernel_msg(fd, false, iov, cnt, 0, nullptr, nullptr));
}

LIONET_HOOK_API ssize_t recv(int fd, void* buf, size_t n, int flags) {
  return do_io(
      "recv", fd, Dir::kRead, flags, [&] { return LIONET_REAL(recv)(fd, buf, n, flags); },
      kernel_recv(fd, buf, n, flags));
}

LIONET_HOOK_API ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* addr, socklen_t* len) {
  iovec v{buf, n};
  return do_io(
      "recvfrom", fd, Dir::kRead, flags, [&] { return LIONET_REAL(recvfrom)(fd, buf, n, flags, addr, len); },
      kernel_msg(fd, false, &v, 1, flags, addr, addr ? len : nullptr));
}

LIONET_HOOK_API ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  return do_io(
      "recvmsg", fd, Dir::kRead, flags, [&] { return LIONET_REAL(recvmsg)(fd, msg, flags); },
      kernel_recvmsg(fd, msg, flags));
}

LIONET_HOOK_API ssize_t write(int fd, const void* buf, size_t n) {
  if (FdEntry* e = regular_entry(fd)) {
    iovec v{const_cast<void*>(buf), n};
    return file_io(e, fd, true, &v, 1, -1);
  }
  return do_io(
      "write", fd, Dir::kWrite, 0, [&] { return LIONET_REAL(write)(fd, buf, n); }, kernel_send(fd, buf, n, 0));
}

LIONET_HOOK_API ssize_t writev(int fd, const iovec* iov, int cnt) {
  if (FdEntry* e = regular_entry(fd)) return file_io(e, fd, true, iov, cnt, -1);
  return do_io(
      "writev", fd, Dir::kWrite, 0, [&] { return LIONET_REAL(writev)(fd, iov, cnt); },
      kernel_msg(fd, true, iov, cnt, 0, nullptr, nullptr));
}

// Positional transfers: only regular files change behaviour (sockets and pipes cannot seek).
LIONET_HOOK_API ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  if (FdEntry* e = regular_entry(fd); e && off >= 0) {
    iovec v{buf, n};
    return file_io(e, fd, false, &v, 1, off);
  }
  return LIONET_REAL(pread)(fd, buf, n, off);
}

LIONET_HOOK_API ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  if (FdEntry* e = regular_entry(fd); e && off >= 0) {
    iovec v{const_cast<void*>(buf), n};
    return file_io(e, fd, true, &v, 1, off);
  }
  return LIONET_REAL(pwrite)(fd, buf, n, off);
}

LIONET_HOOK_API ssize_t preadv(int fd, const iovec* iov, int cnt, off_t off) {
  if (FdEntry* e = regular_entry(fd); e && off >= 0) return file_io(e, fd, false, iov, cnt, off);
  return LIONET_REAL(preadv)(fd, iov, cnt, off);
}

LIONET_HOOK_API ssize_t pwritev(int fd, const iovec* iov, int cnt, off_t off) {
  if (FdEntry* e = regular_entry(fd); e && off >= 0) return file_io(e, fd, true, iov, cnt, off);
  return LIONET_REAL(pwritev)(fd, iov, cnt, off);
}

// fsync/fdatasync of a regular file in an active fiber: on the offload pool (a sync waits for the
// device: 150-300 us on the test machines' disk), so the worker serves its other fibers
// meanwhile, and appenders on one worker share the next sync (storage's group commit).
// Measured: the storage API with every_batch, 1 worker, 16 connections 4.4k -> 24k appends/s;
// one connection alone 3.25k -> 3.0k (the pool hand-off on each sync's latency).
// RegularFileOptions::offload_sync = false keeps them on the worker. Counted as offloaded.
template <class Sync>
int sync_regular_file(int fd, Sync real_sync) noexcept {
  if (g_offload_sync.load(std::memory_order_relaxed) && regular_entry(fd))
    return static_cast<int>(offload_call([&] { return static_cast<ssize_t>(real_sync(fd)); }));
  return real_sync(fd);
}

LIONET_HOOK_API int fsync(int fd) { return sync_regular_file(fd, LIONET_REAL(fsync)); }
LIONET_HOOK_API int fdatasync(int fd) { return sync_regular_file(fd, LIONET_REAL(fdatasync)); }

// On LP64 glibc the *64 names are the same functions.
static_assert(sizeof(off64_t) == sizeof(off_t), "LP64 only");
LIONET_HOOK_API ssize_t pread64(int fd, void* buf, size_t n, off64_t off) { return pread(fd, buf, n, off); }
LIONET_HOOK_API ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) { return pwrite(fd, buf, n, off); }
LIONET_HOOK_API ssize_t preadv64(int fd, const iovec* iov, int cnt, off64_t off) { return preadv(fd, iov, cnt, off); }
LIONET_HOOK_API ssize_t pwritev64(int fd, const iovec* iov, int cnt, off64_t off) { return pwritev(fd, iov, cnt, off); }

LIONET_HOOK_API ssize_t send(int fd, const void* buf, size_t n, int flags) {
  return do_io(
      "send", fd, Dir::kWrite, flags, [&] { return LIONET_REAL(send)(fd, buf, n, flags); },
      kernel_send(fd, buf, n, flags));
}

LIONET_HOOK_API ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* addr, socklen_t len) {
  iovec v{const_cast<void*>(buf), n};
  socklen_t alen = len;
  return do_io(
      "sendto", fd, Dir::kWrite, flags, [&] { return LIONET_REAL(sendto)(fd, buf, n, flags, addr, len); },
      kernel_msg(fd, true, &v, 1, flags, const_cast<sockaddr*>(addr), addr ? &alen : nullptr));
}

LIONET_HOOK_API ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  return do_io(
      "sendmsg", fd, Dir::kWrite, flags, [&] { return LIONET_REAL(sendmsg)(fd, msg, flags); },
      kernel_sendmsg(fd, msg, flags));
}

LIONET_HOOK_API ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  return do_io("sendfile", out_fd, Dir::kWrite, 0, [&] { return LIONET_REAL(sendfile)(out_fd, in_fd, offset, count); });
}

// On LP64 glibc, sendfile64 is the same function under another name.
LIONET_HOOK_API ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  static_assert(sizeof(off64_t) == sizeof(off_t), "LP64 only");
  return sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(offset), count);
}

// _FORTIFY_SOURCE entry points: check the buffer size as glibc does, then take the hook.
extern "C" [[noreturn]] void __chk_fail(void);
LIONET_HOOK_API ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return read(fd, buf, n);
}
LIONET_HOOK_API ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  if (n > buflen) __chk_fail();
  return pread(fd, buf, n, off);
}
LIONET_HOOK_API ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t off, size_t buflen) {
  if (n > buflen) __chk_fail();
  return pread(fd, buf, n, off);
}
LIONET_HOOK_API ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __chk_fail();
  return recv(fd, buf, n, flags);
}
LIONET_HOOK_API ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* addr,
                                       socklen_t* len) {
  if (n > buflen) __chk_fail();
  return recvfrom(fd, buf, n, flags, addr, len);
}

// ---- closing and renaming ----

LIONET_HOOK_API int close(int fd) {
  forget_fd(fd);
  return LIONET_REAL(close)(fd);
}

LIONET_HOOK_API int shutdown(int fd, int how) { return LIONET_REAL(shutdown)(fd, how); }

LIONET_HOOK_API int dup(int oldfd) {
  int fd = LIONET_REAL(dup)(oldfd);
  if (fd >= 0) copy_entry(oldfd, fd);
  return fd;
}

LIONET_HOOK_API int dup2(int oldfd, int newfd) {
  if (oldfd != newfd && LIONET_REAL(fcntl)(oldfd, F_GETFD) >= 0) forget_fd(newfd);
  int fd = LIONET_REAL(dup2)(oldfd, newfd);
  if (fd >= 0 && oldfd != newfd) copy_entry(oldfd, fd);
  return fd;
}

LIONET_HOOK_API int dup3(int oldfd, int newfd, int flags) {
  if (oldfd != newfd && LIONET_REAL(fcntl)(oldfd, F_GETFD) >= 0) forget_fd(newfd);
  int fd = LIONET_REAL(dup3)(oldfd, newfd, flags);
  if (fd >= 0) copy_entry(oldfd, fd);
  return fd;
}

namespace lionet::hook {
RegularFileStats regular_file_stats() noexcept {
  return {detail::g_file_fast.load(std::memory_order_relaxed), detail::g_file_offload.load(std::memory_order_relaxed),
          detail::g_file_inline.load(std::memory_order_relaxed)};
}

void configure_regular_files(const RegularFileOptions& o) noexcept {
  detail::g_nowait_max.store(o.nowait_max, std::memory_order_relaxed);
  detail::g_inline_write_max.store(o.inline_write_max, std::memory_order_relaxed);
  detail::g_offload_sync.store(o.offload_sync, std::memory_order_relaxed);
}

RegularFileOptions regular_file_options() noexcept {
  return {detail::g_nowait_max.load(std::memory_order_relaxed),
          detail::g_inline_write_max.load(std::memory_order_relaxed),
          detail::g_offload_sync.load(std::memory_order_relaxed)};
}
}  // namespace lionet::hook
