// poll_until: the suite's one bounded poll, for what a server records a moment after the
// client already has its answer, or for a request that must be parked before the test goes on.
#pragma once

#include <chrono>
#include <thread>

#include "sanitizers.h"

namespace lionet::test {

// Calls `done` every 20 ms until it returns true or `limit` (stretched by kSlowdown under a
// sanitizer) has passed. Whether `done` came true.
template <class F>
bool poll_until(F done, std::chrono::milliseconds limit = std::chrono::seconds(2)) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit * kSlowdown);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace lionet::test
