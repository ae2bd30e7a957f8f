// lionet/hook/detail/real.h: the original libc functions behind the hooks, resolved with
// dlsym(RTLD_NEXT, name) on first use (private to hook/).
//
// Resolution is lazy and lock-free: each pointer is an atomic that starts null; the first
// caller resolves it, racing callers store the same value (benign). No lock and no static guard
// is taken, so a hook called while dlsym itself runs (some libcs allocate inside dlsym) cannot
// deadlock. A missing symbol is fatal with a message naming it.
// Under ASan, RTLD_NEXT from the executable finds ASan's interceptor, which calls libc.
#pragma once

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

// X(name, function pointer type)
#define LIONET_HOOK_REAL_FUNCTIONS(X)                                                          \
  X(sleep, unsigned (*)(unsigned))                                                             \
  X(usleep, int (*)(useconds_t))                                                               \
  X(nanosleep, int (*)(const timespec*, timespec*))                                            \
  X(clock_nanosleep, int (*)(clockid_t, int, const timespec*, timespec*))                      \
  X(socket, int (*)(int, int, int))                                                            \
  X(socketpair, int (*)(int, int, int, int*))                                                  \
  X(connect, int (*)(int, const sockaddr*, socklen_t))                                         \
  X(accept, int (*)(int, sockaddr*, socklen_t*))                                               \
  X(accept4, int (*)(int, sockaddr*, socklen_t*, int))                                         \
  X(read, ssize_t (*)(int, void*, size_t))                                                     \
  X(readv, ssize_t (*)(int, const iovec*, int))                                                \
  X(recv, ssize_t (*)(int, void*, size_t, int))                                                \
  X(recvfrom, ssize_t (*)(int, void*, size_t, int, sockaddr*, socklen_t*))                     \
  X(recvmsg, ssize_t (*)(int, msghdr*, int))                                                   \
  X(write, ssize_t (*)(int, const void*, size_t))                                              \
  X(writev, ssize_t (*)(int, const iovec*, int))                                               \
  X(pread, ssize_t (*)(int, void*, size_t, off_t))                                             \
  X(open, int (*)(const char*, int, ...))                                                      \
  X(open64, int (*)(const char*, int, ...))                                                    \
  X(openat, int (*)(int, const char*, int, ...))                                               \
  X(openat64, int (*)(int, const char*, int, ...))                                             \
  X(pwrite, ssize_t (*)(int, const void*, size_t, off_t))                                      \
  X(preadv, ssize_t (*)(int, const iovec*, int, off_t))                                        \
  X(pwritev, ssize_t (*)(int, const iovec*, int, off_t))                                       \
  X(preadv2, ssize_t (*)(int, const iovec*, int, off_t, int))                                  \
  X(pwritev2, ssize_t (*)(int, const iovec*, int, off_t, int))                                 \
  X(fsync, int (*)(int))                                                                       \
  X(fdatasync, int (*)(int))                                                                   \
  X(send, ssize_t (*)(int, const void*, size_t, int))                                          \
  X(sendto, ssize_t (*)(int, const void*, size_t, int, const sockaddr*, socklen_t))            \
  X(sendmsg, ssize_t (*)(int, const msghdr*, int))                                             \
  X(sendfile, ssize_t (*)(int, int, off_t*, size_t))                                           \
  X(close, int (*)(int))                                                                       \
  X(shutdown, int (*)(int, int))                                                               \
  X(fcntl, int (*)(int, int, ...))                                                             \
  X(ioctl, int (*)(int, unsigned long, ...))                                                   \
  X(getsockopt, int (*)(int, int, int, void*, socklen_t*))                                     \
  X(setsockopt, int (*)(int, int, int, const void*, socklen_t))                                \
  X(poll, int (*)(pollfd*, nfds_t, int))                                                       \
  X(select, int (*)(int, fd_set*, fd_set*, fd_set*, timeval*))                                 \
  X(dup, int (*)(int))                                                                         \
  X(dup2, int (*)(int, int))                                                                   \
  X(dup3, int (*)(int, int, int))                                                              \
  X(pipe, int (*)(int*))                                                                       \
  X(pipe2, int (*)(int*, int))                                                                 \
  X(getaddrinfo, int (*)(const char*, const char*, const addrinfo*, addrinfo**))               \
  X(getnameinfo, int (*)(const sockaddr*, socklen_t, char*, socklen_t, char*, socklen_t, int)) \
  X(gethostbyname, hostent* (*)(const char*))                                                  \
  X(gethostbyname_r, int (*)(const char*, hostent*, char*, size_t, hostent**, int*))           \
  X(pthread_mutex_lock, int (*)(pthread_mutex_t*))                                             \
  X(pthread_mutex_trylock, int (*)(pthread_mutex_t*))                                          \
  X(pthread_mutex_timedlock, int (*)(pthread_mutex_t*, const timespec*))                       \
  X(pthread_mutex_unlock, int (*)(pthread_mutex_t*))

namespace lionet::hook::detail {

void* resolve_real(const char* name) noexcept;  // dlsym(RTLD_NEXT); fatal if missing

template <class Fn>
class RealFn {
 public:
  constexpr explicit RealFn(const char* name) noexcept : name_(name) {}
  Fn get() noexcept {
    // acquire pairs with the release store below (the pointer is the whole payload).
    Fn f = ptr_.load(std::memory_order_acquire);
    if (__builtin_expect(f == nullptr, 0)) {
      f = reinterpret_cast<Fn>(resolve_real(name_));
      ptr_.store(f, std::memory_order_release);
    }
    return f;
  }

 private:
  std::atomic<Fn> ptr_{nullptr};
  const char* name_;
};

struct RealFns {
#define LIONET_HOOK_DECLARE_REAL(name, type) RealFn<type> name{#name};
  LIONET_HOOK_REAL_FUNCTIONS(LIONET_HOOK_DECLARE_REAL)
#undef LIONET_HOOK_DECLARE_REAL
};

// The one table of originals (constant-initialised: usable before any constructor ran).
extern RealFns g_real;

}  // namespace lionet::hook::detail

// Calls the original: LIONET_REAL(read)(fd, buf, n).
#define LIONET_REAL(name) (::lionet::hook::detail::g_real.name.get())
