// tests/io/io_test_util.h: helpers shared by the IOManager tests.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "lionet/io/io_manager.h"

namespace lionet::io_test {

// ---- raw fds (bypassing hook/) ----
inline long sys_read(int fd, void* b, size_t n) { return ::syscall(SYS_read, fd, b, n); }
inline long sys_write(int fd, const void* b, size_t n) { return ::syscall(SYS_write, fd, b, n); }
inline void sys_close(int fd) { ::syscall(SYS_close, fd); }

struct Pair {
  int a = -1, b = -1;
};
inline Pair make_socketpair() {
  int fds[2];
  EXPECT_EQ(::syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0)
      << strerror(errno);
  return {fds[0], fds[1]};
}

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
