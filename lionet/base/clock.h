// lionet/base/clock.h: the one clock every layer uses for deadlines and timeouts.
// Monotonic (steady_clock == CLOCK_MONOTONIC on Linux), never wall time.
#pragma once

#include <chrono>
#include <cstdint>

namespace lionet {
using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

inline TimePoint now() noexcept { return Clock::now(); }

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
