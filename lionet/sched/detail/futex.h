// lionet/sched/detail/futex.h: the two futex calls the scheduler and thread parkers use.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

#include "lionet/base/clock.h"

namespace lionet::detail {

// Sleeps while *word == expected, until woken or `deadline` (nullptr: no deadline). Spurious
// returns happen; callers re-check their condition.
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, const TimePoint* deadline) noexcept {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  timespec ts;
  timespec* tsp = nullptr;
  if (deadline) {
    if (*deadline == TimePoint::max()) {
      tsp = nullptr;
    } else {
      // steady_clock is CLOCK_MONOTONIC on Linux; FUTEX_WAIT_BITSET takes an absolute time on it.
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline->time_since_epoch()).count();
      if (ns < 0) ns = 0;
      ts.tv_sec = ns / 1000000000;
      ts.tv_nsec = ns % 1000000000;
      tsp = &ts;
    }
  }
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_BITSET_PRIVATE, expected, tsp, nullptr,
          FUTEX_BITSET_MATCH_ANY);
}

inline void futex_wake(std::atomic<uint32_t>* word, int n) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}
}  // namespace lionet::detail
