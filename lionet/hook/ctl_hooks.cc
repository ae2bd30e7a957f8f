// lionet/hook/ctl_hooks.cc: fcntl / fcntl64, ioctl(FIONBIO) and setsockopt(SO_RCVTIMEO /
// SO_SNDTIMEO): the calls through which a user sets what the fd table tracks.
//
// The user's O_NONBLOCK is what F_GETFL reports and what decides "EAGAIN at once" vs "park";
// the kernel's O_NONBLOCK stays set once the hooks set it (an fd used from fibers must never
// block a worker). These rules hold on every thread, because the kernel state they hide is
// the same on every thread.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstdint>

#include "lionet/hook/detail/common.h"
#include "lionet/hook/detail/fd_table.h"
#include "lionet/hook/detail/real.h"

#define LIONET_HOOK_API extern "C" __attribute__((visibility("default")))

extern "C" const int lionet_hook_anchor_ctl = 0;

using namespace lionet::hook::detail;

namespace {

// The variadic argument is read as a pointer-sized word whatever the command, as glibc's own
// fcntl does: on the LP64 ABIs an int argument occupies a full register / stack slot, and a
// command without an argument simply ignores the word.
int fcntl_impl(int fd, int cmd, void* arg) noexcept {
  switch (cmd) {
    case F_GETFL: {
      int fl = LIONET_REAL(fcntl)(fd, F_GETFL);
      FdEntry* e = fd_table().find(fd);
      if (fl >= 0 && e && e->managed()) {
        fl = e->user_nonblock.load(std::memory_order_relaxed) ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
      }
      return fl;
    }
    case F_SETFL: {
      int fl = static_cast<int>(reinterpret_cast<intptr_t>(arg));
      FdEntry* e = fd_table().find(fd);
      if (!e || !e->managed()) return LIONET_REAL(fcntl)(fd, F_SETFL, fl);
      const bool user_nb = (fl & O_NONBLOCK) != 0;
      const bool kernel_nb = user_nb || e->kernel_nonblock.load(std::memory_order_relaxed);
      int r = LIONET_REAL(fcntl)(fd, F_SETFL, kernel_nb ? (fl | O_NONBLOCK) : fl);
      if (r == 0) {
        e->user_nonblock.store(user_nb, std::memory_order_relaxed);
        e->kernel_nonblock.store(kernel_nb, std::memory_order_relaxed);
      }
      return r;
    }
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      int nfd = LIONET_REAL(fcntl)(fd, cmd, arg);
      if (nfd >= 0) {
        FdEntry* dst = fd_table().get(nfd);
        FdEntry* src = fd_table().find(fd);
        if (dst) {
          if (src) {
            dst->copy_from(*src);
          } else {
            dst->reset();
          }
        }
      }
      return nfd;
    }
    default: return LIONET_REAL(fcntl)(fd, cmd, arg);
  }
}

}  // namespace

LIONET_HOOK_API int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_impl(fd, cmd, arg);
}

// glibc >= 2.28 also exports fcntl64 (what -D_FILE_OFFSET_BITS=64 callers use); on LP64 it is
// the same call.
LIONET_HOOK_API int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_impl(fd, cmd, arg);
}

LIONET_HOOK_API int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (request == FIONBIO && arg != nullptr) {
    FdEntry* e = fd_table().find(fd);
    if (e && e->managed()) {
      const bool user_nb = *static_cast<int*>(arg) != 0;
      const bool kernel_nb = user_nb || e->kernel_nonblock.load(std::memory_order_relaxed);
      int on = kernel_nb ? 1 : 0;
      int r = LIONET_REAL(ioctl)(fd, FIONBIO, &on);
      if (r == 0) {
        e->user_nonblock.store(user_nb, std::memory_order_relaxed);
        e->kernel_nonblock.store(kernel_nb, std::memory_order_relaxed);
      }
      return r;
    }
  }
  return LIONET_REAL(ioctl)(fd, request, arg);
}

LIONET_HOOK_API int setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  int r = LIONET_REAL(setsockopt)(fd, level, name, val, len);
  if (r != 0 || level != SOL_SOCKET || val == nullptr) return r;
  bool rcv = name == SO_RCVTIMEO;
  bool snd = name == SO_SNDTIMEO;
#if defined(SO_RCVTIMEO_NEW) && defined(SO_SNDTIMEO_NEW)
  rcv = rcv || name == SO_RCVTIMEO_NEW;
  snd = snd || name == SO_SNDTIMEO_NEW;
#endif
  if (!rcv && !snd) return r;
  int64_t ns = 0;
  if (len >= static_cast<socklen_t>(2 * sizeof(int64_t))) {
    // struct timeval on LP64 and struct __kernel_sock_timeval (the _NEW options) share this layout.
    const auto* tv = static_cast<const int64_t*>(val);
    ns = timeval_to_ns(static_cast<long>(tv[0]), static_cast<long>(tv[1]));
  }
  const int saved = get_errno();  // classification below must not disturb errno
  if (FdEntry* e = fd_table().get(fd)) {
    if (e->kind.load(std::memory_order_relaxed) == FdKind::kUnknown) {
      fd_table().managed(fd, /*make_nonblock=*/false);  // reads both timeouts from the kernel
    } else if (e->managed()) {
      (rcv ? e->rcv_timeout_ns : e->snd_timeout_ns).store(ns, std::memory_order_relaxed);
    }
  }
  set_errno(saved);
  return r;
}
