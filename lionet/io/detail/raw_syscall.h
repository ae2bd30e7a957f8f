// lionet/io/detail/raw_syscall.h: read/write/close/ppoll straight to the kernel, bypassing
// the hooked libc symbols of hook/.
//
// Why: the reactors and IOManager run inside the scheduler's poller, sometimes on a worker
// thread that is in the middle of a fiber's yield. A hooked read() of the wake eventfd could
// park that fiber inside the driver, and a hooked poll() from IOManager's plain-thread path
// would recurse into IOManager. io/ therefore never calls the hookable symbols.
// Must not be used outside io/ (it is in detail/).
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <ctime>

struct pollfd;

namespace lionet::detail {
#if defined(__linux__)
inline long raw_read(int fd, void* buf, std::size_t n) noexcept { return ::syscall(SYS_read, fd, buf, n); }
inline long raw_write(int fd, const void* buf, std::size_t n) noexcept { return ::syscall(SYS_write, fd, buf, n); }
inline int raw_close(int fd) noexcept { return static_cast<int>(::syscall(SYS_close, fd)); }
// ppoll exists on every Linux architecture (poll does not on aarch64). ts nullptr = forever.
inline int raw_ppoll(pollfd* fds, unsigned long n, const timespec* ts) noexcept {
  return static_cast<int>(::syscall(SYS_ppoll, fds, n, ts, nullptr, 0));
}
#else
// BSD/macOS: hook/ is Linux-only, so the libc calls are the raw ones.
inline long raw_read(int fd, void* buf, std::size_t n) noexcept { return ::read(fd, buf, n); }
inline long raw_write(int fd, const void* buf, std::size_t n) noexcept { return ::write(fd, buf, n); }
inline int raw_close(int fd) noexcept { return ::close(fd); }
int raw_ppoll(pollfd* fds, unsigned long n, const timespec* ts) noexcept;  // io_manager.cc
#endif
// A reactor's wake(): one write to its eventfd unless one is pending already. seq_cst: pairs
// with the poller's store of `pending` to false before it drains the eventfd (seeing true
// means a write is there undrained, or the poller is draining now and will return).
inline void wake_once(std::atomic<bool>& pending, int eventfd) noexcept {
  if (pending.exchange(true, std::memory_order_seq_cst)) return;
  const uint64_t one = 1;
  (void)raw_write(eventfd, &one, sizeof one);
}

}  // namespace lionet::detail
