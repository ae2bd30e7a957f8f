// lionet/sched/os_locks.h: catching a fiber that reaches a scheduling point (a park, a yield,
// any hooked wait) while it holds a pthread mutex (std::mutex included).
//
// Why: the mutex belongs to the worker thread, not the fiber. While its fiber is parked, every
// other fiber that takes the same mutex blocks its whole worker thread, and if the holder can
// only be resumed on such a blocked worker, the process deadlocks. LioNet's hooks make this
// easy to reach without knowing: a third-party library that holds its own mutex across a read
// that the hooks turn into a park (brpc's most reported class of bug, apache/brpc #1099, #1741).
//
// How: hook/ interposes pthread_mutex_lock/trylock/timedlock/unlock and, while the check is on
// and the caller is a fiber, counts the mutexes its thread holds (t_os_locks_held) and keeps
// the last one's address. The scheduler's switch paths read that count (one thread-local load
// per switch, scheduler.cc) and, when it is not zero, call os_lock_held_at_switch(): a log line
// naming the fiber, the locks and the stack, once per call site, and a counter
// (os_lock_violations(), lionet_fiber_os_locks_held_at_switch_total in /metrics); or an abort.
// The count then moves to the fiber (it holds the locks, wherever it resumes), so the worker
// thread's next fiber starts at zero. lionet::Mutex and the other sync/ primitives are not
// pthread mutexes and are never reported (holding them across a park is what they are for).
//
// Owns: the mode, the per-thread count, the report. Must not: allocate or log except in the
// report, which runs once per new call site.
#pragma once

#include <cstdint>

namespace lionet {
class Fiber;

enum class OsLockCheck : uint8_t {
  kOff = 0,  // nothing counted, nothing reported
  kLog = 1,  // a warning per call site (with the stack), and the counter
  kAbort = 2,  // the report, then abort(): for tests and CI
};

// Process-wide. YAML: fiber.check_os_locks (off | log | abort). Default: kLog (the cost
// measured: lionet/sched/README.md).
void set_os_lock_check(OsLockCheck mode) noexcept;
OsLockCheck os_lock_check() noexcept;
// Scheduling points reached with a pthread mutex held, since the process started.
uint64_t os_lock_violations() noexcept;

// "off" / "log" / "abort"; false for anything else.
bool parse_os_lock_check(const char* text, OsLockCheck& out) noexcept;

namespace detail {
extern uint8_t g_os_lock_check;  // an OsLockCheck; read relaxed by the hooks
// Pthread mutexes the current thread's running fiber took and has not released (counted only
// while the check is on), and the addresses of the first kOsLockSlots of them (innermost last).
inline constexpr uint32_t kOsLockSlots = 8;
extern constinit thread_local uint32_t t_os_locks_held;
extern constinit thread_local uintptr_t t_os_lock_held_at[kOsLockSlots];
// The lock hooks' bookkeeping (hook/lock_hooks.cc).
inline void os_lock_taken(uintptr_t m) noexcept {
  if (t_os_locks_held < kOsLockSlots) t_os_lock_held_at[t_os_locks_held] = m;
  ++t_os_locks_held;
}
inline void os_lock_given_back(uintptr_t m) noexcept {
  const uint32_t n = t_os_locks_held < kOsLockSlots ? t_os_locks_held : kOsLockSlots;
  for (uint32_t i = n; i-- > 0;) {
    if (t_os_lock_held_at[i] != m) continue;
    for (uint32_t k = i; k + 1 < n; ++k) t_os_lock_held_at[k] = t_os_lock_held_at[k + 1];
    break;
  }
  --t_os_locks_held;
}
// A switch found t_os_locks_held != 0 for `self`: report (once per call site), move the count
// to the fiber, or abort.
[[gnu::noinline]] void os_lock_held_at_switch(Fiber* self) noexcept;
// The unlock hook, when its thread holds none: the fiber that carried the lock here releases it.
void os_lock_released_by_fiber() noexcept;
}  // namespace detail
}  // namespace lionet
