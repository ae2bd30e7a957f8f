// tests/hook/hook_test_util.h: the default runtime (a Scheduler, which comes with its IO
// driver: no IOManager line anywhere), and helpers shared by the hook tests (run a body in a
// fiber and get its result, raw kernel flags, elapsed time).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <functional>

#include <gtest/gtest.h>

#include <string>

#include "lionet/hook/hook.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace lionet::hook_test {

// The IO backend of the Runtimes made from now on ("auto" unless a test suite runs once per
// backend and sets it, as HookIo does).
inline std::string& runtime_backend() {
  static std::string backend = "auto";
  return backend;
}

inline SchedulerOptions sched_options(int threads) {
  SchedulerOptions o;
  o.threads = threads;
  o.name = "hooktest";
  o.io.backend = runtime_backend();
  return o;
}

// A default Scheduler, exactly as a user makes one; stop() on destruction.
struct Runtime {
  explicit Runtime(int threads = 1) : sched(sched_options(threads)) { hook::ensure_linked(); }
  ~Runtime() { sched.stop(); }

  // Runs fn in a fiber and returns its result (the test thread blocks in join()).
  template <class F>
  auto run(F&& fn) {
    return sched.spawn(std::forward<F>(fn)).join();
  }

  Scheduler sched;
};

// O_NONBLOCK as the kernel has it, bypassing the hooked fcntl.
inline bool kernel_nonblock(int fd) {
  long fl = ::syscall(SYS_fcntl, fd, F_GETFL);
  return fl >= 0 && (fl & O_NONBLOCK) != 0;
}

// errno of the thread running the caller now (see fiber/fiber.h, MIGRATION HAZARD).
__attribute__((noinline)) inline int read_errno() {
  asm volatile("" ::: "memory");
  return errno;
}
__attribute__((noinline)) inline void write_errno(int e) {
  asm volatile("" ::: "memory");
  errno = e;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline void raise_nofile(rlim_t want) {
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = std::min(std::max(rl.rlim_cur, want), rl.rlim_max);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &rl), 0);
  ASSERT_GE(rl.rlim_cur, want) << "RLIMIT_NOFILE hard limit too low for this test";
}

}  // namespace lionet::hook_test
