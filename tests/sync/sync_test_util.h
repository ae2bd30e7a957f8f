// Shared helpers of the sync/ tests: iteration scaling for sanitizer builds and a way to run a
// body inside a scheduler and wait for it.
#pragma once

#include <chrono>
#include <utility>

#include "lionet/sched/scheduler.h"

namespace lionet::test {
#if defined(LIONET_TSAN) || defined(LIONET_ASAN)
// Sanitizers run 5-20x slower; each test keeps its shape with counts divided by this.
inline constexpr int kScale = 10;
#else
inline constexpr int kScale = 1;
#endif

// Runs body() in a fiber of a fresh scheduler with `threads` workers; returns its result.
template <class F>
auto run_in_scheduler(int threads, F&& body) {
  Scheduler s({.threads = threads});
  return s.spawn(std::forward<F>(body)).join();
}

inline std::chrono::nanoseconds elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::steady_clock::now() - t0;
}
}  // namespace lionet::test
