// lionet/fiber/detail/cancel_state.h: the per-fiber record of cancellation and deadlines
// (sched/cancel.h is the public face; sched/cancel.cc runs the protocol, scheduler.cc's
// protocol 10 describes it).
//
// Owns only the fields. Writers are named per field; nothing here decides anything.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

namespace lionet::detail {

struct OnCancelNode;

// What a canceller calls to end the fiber's current wait: fn(a, b). Set by the waiting fiber
// for the span of one wait (sched/cancel.h detail::WaitTarget), read by cancellers.
using CancelFn = void (*)(void* a, void* b) noexcept;

struct CancelState {
  static constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
  static constexpr uint32_t kCancelled = 1;

  // kCancelled once cancel() was called. Written by cancellers (RMW), read by the fiber.
  std::atomic<uint32_t> flags{0};
  // Cancellers inside the fiber's wait target right now (protocol 10): a wait does not end,
  // so the target's memory stays valid, until this is zero.
  std::atomic<uint32_t> cancellers{0};
  // The current wait's target. Written by the fiber (a and b before fn, fn released), read by
  // cancellers (fn acquired, then a and b).
  std::atomic<CancelFn> target_fn{nullptr};
  std::atomic<void*> target_a{nullptr};
  std::atomic<void*> target_b{nullptr};
  // Owner-only (the fiber itself): its DeadlineScope deadline (steady-clock ns) and the depth
  // of CancelShields around the running code.
  int64_t deadline_ns = kNoDeadline;
  uint32_t shield = 0;
  // this_fiber::on_cancel registrations (sched/cancel.cc), under `mu` (a spin lock taken
  // there; not base/spinlock.h, which this header, included everywhere, keeps out); `fired`
  // once the registrations ran for a cancel (the deadline fires each by its own timer).
  std::atomic<bool> mu{false};
  OnCancelNode* callbacks = nullptr;
  bool fired = false;
};

}  // namespace lionet::detail
