// lionet/sched/detail/coarse_clock.h: the cheap clock behind Fiber::state_since_ns_.
//
// Owns: coarse_monotonic_ns(), base/clock.h's coarse_now() in nanoseconds. Must not be used
// to resolve a deadline or timeout a caller gave (now() is).
//
// Why CLOCK_MONOTONIC_COARSE: it is the same clock (same epoch) as CLOCK_MONOTONIC, the base
// of steady_clock, so a dump can compare it with now() and with deadlines; the vDSO returns
// the kernel's last tick without reading the TSC (a few ns, no syscall); its resolution of
// one jiffy (1-4 ms) is far below what a fiber dump shows. Workers read it every
// kSlowTickInterval scheduling points, after waking from idle and at every park() (not a
// channel's park_and_unlock), and stamp fibers with that cached value (Worker::coarse_now_ns),
// so a yield pays one load and one store; a park's stamp is fresh, other stamps early by at
// most that many fiber slices.
#pragma once

#include <cstdint>

#include "lionet/base/clock.h"

namespace lionet::detail {
inline int64_t coarse_monotonic_ns() noexcept { return to_ns(coarse_now()); }
}  // namespace lionet::detail
