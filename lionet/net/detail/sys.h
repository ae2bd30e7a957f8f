// lionet/net/detail/sys.h: the raw system calls net/ makes on its sockets.
//
// Decision: net/ calls the kernel directly (syscall(2)), never through the libc symbols that
// hook/ interposes. Its sockets are non-blocking and park through the IOManager themselves;
// going through a hook would add a second fd-table lookup per call and make net/'s behaviour
// depend on how hook/ classifies fds it did not create. Consequence: the hook layer never
// sees net/'s fds, which is fine because net/ calls IOManager::cancel() itself before
// closing. Every wrapper returns like libc: -1 and errno on failure.
// Writes use MSG_NOSIGNAL so a peer reset is EPIPE, never SIGPIPE. The fds made and closed
// here are announced to ThreadSanitizer (tsan_fd_forget; nothing outside TSan builds).
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>

#include "lionet/base/tsan.h"

namespace lionet::detail::sys {

inline ssize_t read(int fd, void* buf, size_t n) noexcept { return ::syscall(SYS_read, fd, buf, n); }
inline ssize_t readv(int fd, const iovec* iov, int cnt) noexcept { return ::syscall(SYS_readv, fd, iov, cnt); }
inline ssize_t send(int fd, const void* buf, size_t n, int flags = 0) noexcept {
  return ::syscall(SYS_sendto, fd, buf, n, MSG_NOSIGNAL | flags, nullptr, 0);
}
inline ssize_t sendv(int fd, const iovec* iov, int cnt) noexcept {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(cnt);
  return ::syscall(SYS_sendmsg, fd, &m, MSG_NOSIGNAL);
}
inline ssize_t sendmsg(int fd, const msghdr* m) noexcept { return ::syscall(SYS_sendmsg, fd, m, MSG_NOSIGNAL); }
inline ssize_t recvmsg(int fd, msghdr* m, int flags) noexcept { return ::syscall(SYS_recvmsg, fd, m, flags); }
// Batches (UDP): the count of messages done, -1 and errno only when none was.
inline int sendmmsg(int fd, mmsghdr* v, unsigned n) noexcept {
  return static_cast<int>(::syscall(SYS_sendmmsg, fd, v, n, MSG_NOSIGNAL));
}
inline int recvmmsg(int fd, mmsghdr* v, unsigned n, int flags) noexcept {
  return static_cast<int>(::syscall(SYS_recvmmsg, fd, v, n, flags, nullptr));
}
inline ssize_t sendfile(int out_fd, int in_fd, off_t* off, size_t n) noexcept {
  return ::syscall(SYS_sendfile, out_fd, in_fd, off, n);
}
inline int socket(int family, int type, int proto) noexcept {
  int fd = static_cast<int>(::syscall(SYS_socket, family, type, proto));
  if (fd >= 0) tsan_fd_forget(fd);
  return fd;
}
inline int connect(int fd, const sockaddr* a, socklen_t len) noexcept {
  return static_cast<int>(::syscall(SYS_connect, fd, a, len));
}
inline int accept4(int fd, sockaddr* a, socklen_t* len, int flags) noexcept {
  int c = static_cast<int>(::syscall(SYS_accept4, fd, a, len, flags));
  if (c >= 0) tsan_fd_forget(c);
  return c;
}
inline int shutdown(int fd, int how) noexcept { return static_cast<int>(::syscall(SYS_shutdown, fd, how)); }
inline int close(int fd) noexcept {
  tsan_fd_forget(fd);
  return static_cast<int>(::syscall(SYS_close, fd));
}
inline int setsockopt(int fd, int level, int name, const void* v, socklen_t len) noexcept {
  return static_cast<int>(::syscall(SYS_setsockopt, fd, level, name, v, len));
}
inline int getsockopt(int fd, int level, int name, void* v, socklen_t* len) noexcept {
  return static_cast<int>(::syscall(SYS_getsockopt, fd, level, name, v, len));
}
}  // namespace lionet::detail::sys
