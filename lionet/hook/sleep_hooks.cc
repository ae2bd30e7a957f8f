// lionet/hook/sleep_hooks.cc: sleep, usleep, nanosleep, clock_nanosleep. In an active fiber
// they park on a scheduler timer (this_fiber::sleep_until) instead of blocking the worker.
// They need no IOManager. A parked sleep is never interrupted (no signal reaches a fiber), so
// sleep() returns 0 and nanosleep() never reports EINTR.
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "lionet/hook/detail/common.h"
#include "lionet/hook/detail/real.h"
#include "lionet/sched/scheduler.h"

#define LIONET_HOOK_API extern "C" __attribute__((visibility("default")))

extern "C" const int lionet_hook_anchor_sleep = 0;

using namespace lionet::hook::detail;

namespace {
bool valid(const timespec* ts) noexcept { return ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L; }

lionet::Duration to_duration(const timespec& ts) noexcept {
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}
}  // namespace

LIONET_HOOK_API unsigned sleep(unsigned seconds) {
  if (!sleep_active()) return LIONET_REAL(sleep)(seconds);
  const lionet::TimePoint until = lionet::now() + std::chrono::seconds(seconds);
  if (lionet::this_fiber::sleep_until(until)) return 0;
  // Cut short by a cancel or the fiber's deadline (sched/cancel.h): as a signal would, the
  // seconds not slept (rounded up); errno says why.
  set_errno(lionet::this_fiber::interruption());
  const auto left = std::chrono::ceil<std::chrono::seconds>(until - lionet::now()).count();
  return static_cast<unsigned>(std::max<int64_t>(left, 1));
}

LIONET_HOOK_API int usleep(useconds_t usec) {
  if (!sleep_active()) return LIONET_REAL(usleep)(usec);
  if (lionet::this_fiber::sleep_for(std::chrono::microseconds(usec))) return 0;
  return fail_if_interrupted() ? -1 : 0;
}

LIONET_HOOK_API int nanosleep(const timespec* req, timespec* rem) {
  if (!sleep_active() || req == nullptr) return LIONET_REAL(nanosleep)(req, rem);  // EFAULT
  if (!valid(req)) {
    set_errno(EINVAL);
    return -1;
  }
  if (req->tv_sec < 0) return 0;
  const lionet::TimePoint until = lionet::now() + to_duration(*req);
  if (lionet::this_fiber::sleep_until(until)) return 0;
  if (!fail_if_interrupted()) return 0;  // ECANCELED or ETIMEDOUT (sched/cancel.h), not EINTR
  if (rem) {
    const auto left = std::max(until - lionet::now(), lionet::Duration::zero());
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
    rem->tv_sec = secs.count();
    rem->tv_nsec = static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(left - secs).count());
  }
  return -1;
}

// Returns an error number (not errno), like the original.
LIONET_HOOK_API int clock_nanosleep(clockid_t clock, int flags, const timespec* req, timespec* rem) {
  const bool known =
      clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC || clock == CLOCK_BOOTTIME || clock == CLOCK_TAI;
  if (!sleep_active() || !known || req == nullptr) return LIONET_REAL(clock_nanosleep)(clock, flags, req, rem);
  if (!valid(req)) return EINVAL;
  lionet::Duration d = to_duration(*req);
  if (flags & TIMER_ABSTIME) {
    timespec cur{};
    ::clock_gettime(clock, &cur);
    d -= to_duration(cur);
  }
  if (d > lionet::Duration::zero() && !lionet::this_fiber::sleep_for(d)) {
    if (const int e = lionet::this_fiber::interruption()) return e;  // ECANCELED / ETIMEDOUT
  }
  return 0;
}
