// lionet/base/clock.h: the one clock every layer uses for deadlines and timeouts.
// Monotonic (steady_clock == CLOCK_MONOTONIC on Linux), never wall time.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace lionet {
using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

inline TimePoint now() noexcept { return Clock::now(); }

// The same clock as now() as of the kernel's last tick (CLOCK_MONOTONIC_COARSE, same epoch):
// never ahead of now(), behind it by about coarse_resolution() (one jiffy, 1-10 ms), and by
// more while the kernel's timekeeping CPU is held up (a preempted vCPU): callers must work
// with any lag, paying only in precision. The vDSO returns it without reading the TSC: a few
// ns, against ~25 for now() on these VMs (a proxied HTTP request read now() 21 times). For
// ages and "may it be due yet" checks where a tick does not matter: idle connection ages, an
// upstream's down-until, when a slow handler's client starts being watched, a timer heap's
// early-out. Never to resolve a timeout a caller gave (that would end it up to a tick early).
inline TimePoint coarse_now() noexcept {
#ifdef CLOCK_MONOTONIC_COARSE
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return TimePoint(
      std::chrono::duration_cast<Duration>(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
#else
  return Clock::now();
#endif
}
// coarse_now()'s resolution (clock_getres, read once): how far it usually trails now().
Duration coarse_resolution() noexcept;
// Whether now() has surely not reached t yet, told without reading it: t lies more than two
// coarse ticks past `coarse` (a coarse_now() reading). False means "maybe": read now() to know.
inline bool surely_ahead(TimePoint t, TimePoint coarse = coarse_now()) noexcept {
  return t > coarse + 2 * coarse_resolution();
}

// A time point as nanoseconds since the clock's epoch, and back: how deadlines are kept in
// atomics and owner-only int64 fields (sched/cancel.h, the fiber dump's wait record).
inline int64_t to_ns(TimePoint t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline TimePoint from_ns(int64_t ns) noexcept {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns)));
}

// Nanoseconds since an arbitrary fixed epoch (for counters and histograms).
inline int64_t monotonic_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace lionet
