// lionet/base/tsan.h: happens-before edges that pass through the kernel, told to ThreadSanitizer.
//
// A request handed to the kernel by one thread (io_submit, an io_uring SQE) and reaped by
// another (io_getevents, a CQE) is ordered by the kernel, which TSan cannot see: without these
// calls it reports the reaper's read of the request as a race with the submitter's writes.
// tsan_release(p) after the last write to p before the hand-off; tsan_acquire(p) where it comes
// back. Both compile to nothing outside TSan builds.
#pragma once

#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
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

}  // namespace lionet
