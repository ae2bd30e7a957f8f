// tests/io/io_test_util.h: helpers shared by the IOManager tests.
#pragma once

#include <chrono>
#include <thread>

#include "lionet/io/io_manager.h"

namespace lionet::io_test {

// Bounded wait (from the test thread) until `n` fibers wait on fd (readiness waits and
// completion-based calls in flight alike: IOManager::waiting).
inline bool await_waiters(IOManager& io, int fd, int n) {
  const auto give_up = now() + std::chrono::seconds(10);
  while (io.waiting(fd) < n) {
    if (now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace lionet::io_test
