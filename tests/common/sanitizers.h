// Which sanitizer a test binary runs under, and how far to stretch what a test waits for.
//
// A bound a test asserts on (a timer that must fire "about" on time, a flood that must finish)
// stays tight in the release build and grows by kSlowdown under a sanitizer, where every memory
// access is instrumented. Under TSan every fiber is also a TSan thread, and TSan dies above 8128
// live threads, so tests that hold thousands of fibers scale their count with kMaxLiveFibers.
#pragma once

namespace lionet::test {

#if defined(LIONET_TSAN) || defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif
#if defined(LIONET_ASAN) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif

inline constexpr double kSlowdown = kTsan ? 4.0 : kAsan ? 2.0 : 1.0;
// Live fibers a test may hold at once (TSan's thread table has 8128 slots; keep headroom for
// the workers, the test's own threads and fibers that are finishing).
inline constexpr int kMaxLiveFibers = kTsan ? 6000 : 1 << 30;

}  // namespace lionet::test
