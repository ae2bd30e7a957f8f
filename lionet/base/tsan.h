// lionet/base/tsan.h: happens-before edges that pass through the kernel, told to ThreadSanitizer.
//
// A request handed to the kernel by one thread (io_submit, an io_uring SQE) and reaped by
// another (io_getevents, a CQE) is ordered by the kernel, which TSan cannot see: without these
// calls it reports the reaper's read of the request as a race with the submitter's writes.
// tsan_release(p) after the last write to p before the hand-off; tsan_acquire(p) where it comes
// back. tsan_fd_forget(fd) after a raw syscall that returned a new fd and before a raw close:
// TSan tracks fd numbers only through the calls it intercepts, so a number it never saw
// opened still carries the last close() by another thread (reported as a race on the next
// intercepted use: fstat, epoll_ctl), and a number it never saw closed carries our last use
// into the next owner's open. All three compile to nothing outside TSan builds.
#pragma once

#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
extern "C" void __sanitizer_syscall_pre_impl_close(long fd);
#endif

namespace lionet {

inline void tsan_release([[maybe_unused]] const void* p) noexcept {
#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(p));
#endif
}

inline void tsan_acquire([[maybe_unused]] const void* p) noexcept {
#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(p));
#endif
}

// Reads between these are not checked (the thread's own accesses; synchronization still is):
// for reads whose order TSan cannot see, e.g. protocol 11's membarrier (sched/fiber_dump.cc).
inline void tsan_ignore_reads_begin() noexcept {
#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
  __tsan_ignore_thread_begin();
#endif
}
inline void tsan_ignore_reads_end() noexcept {
#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
  __tsan_ignore_thread_end();
#endif
}
// Forgets what TSan knew of the number, as its close interceptor does, with the race check
// switched off: the kernel orders one owner's close before the next owner's open.
inline void tsan_fd_forget([[maybe_unused]] int fd) noexcept {
#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
  __tsan_ignore_thread_begin();
  __sanitizer_syscall_pre_impl_close(fd);
  __tsan_ignore_thread_end();
#endif
}

}  // namespace lionet
