// lionet/sched/park.h: the one way anything in LioNet blocks: park the current fiber (or,
// on a plain thread, the thread) until exactly one unpark() arrives.
//
// Owns the park/unpark protocol and the WaitClaim timed-wait protocol that sync/, io/ and
// join() build on. Must not know any particular primitive.
//
// Protocol (exactly once): every park() returns after exactly one unpark() aimed at that
// park, never spuriously. The caller's data structure guarantees that one and only one party
// unparks a parked waiter (typically: it removed the waiter from a list under a lock, or
// won a WaitClaim). An unpark() that arrives before the fiber has finished switching out is
// kept (the NOTIFIED bit in the fiber's state word) and makes that park() return at once.
// After unpark() the waker must not touch the waiter's memory: the waiter may already run.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "lionet/base/clock.h"
#include "lionet/base/spinlock.h"

namespace lionet {
class Fiber;

namespace detail {
struct ThreadParker;
}

// Who is parked: the current fiber, or the current plain thread. Copyable, trivially so;
// valid while the party it names is parked (or about to park).
class Parker {
 public:
  // The running fiber if called inside one, else the calling thread.
  static Parker current() noexcept;
  // Wakes the party. Thread-safe; callable from fibers, plain threads and timer callbacks.
  void unpark() const noexcept;
  bool is_fiber() const noexcept { return fiber_ != nullptr; }
  Fiber* fiber() const noexcept { return fiber_; }

 private:
  Fiber* fiber_ = nullptr;
  detail::ThreadParker* thread_ = nullptr;
};

// Parks the current fiber (or thread) until an unpark(); see the protocol above.
void park() noexcept;

// Parks like park() and releases `lock`, which the caller holds, once the fiber has switched
// out (on a plain thread: releases, then parks). For a primitive whose wakers find their waiter
// only under that lock (a channel's wait queue): no unpark can then arrive before the fiber is
// PARKED, so the park needs no atomic read-modify-write (one locked instruction less per wait).
// The lock is held across the jump only when the switch is short; before a longer one (a slow
// tick, a fresh fiber's first run) it is released first and the park is park()'s, with the CAS
// (scheduler.cc, protocol 1), so a waker spinning on `lock` never waits on a page fault.
// Every party that may unpark this waiter must hold `lock` when it takes the waiter.
void park_and_unlock(SpinLock& lock) noexcept;

// A timed wait that cannot lose or double a wake-up. The waiter constructs a WaitClaim on its
// stack, publishes it (e.g. in a primitive's wait list), then calls wait(). Any number of
// notifiers may race to notify(); the deadline races too; exactly one wins the claim, and only
// the winner unparks. wait() returns the winning value.
//
// After wait() returns kTimedOut, notifiers may still be looking at the claim (they will lose
// the CAS): the waiter must unpublish it (under the primitive's lock) before it goes out of scope.
class WaitClaim {
 public:
  static constexpr uint32_t kWaiting = 0;
  static constexpr uint32_t kTimedOut = 1;
  static constexpr uint32_t kNotified = 2;  // default notify value; any value >= 2 may be used

  WaitClaim() noexcept : parker_(Parker::current()) {}
  explicit WaitClaim(Parker p) noexcept : parker_(p) {}

  // Parks until notified or until the deadline (none = forever). Returns kTimedOut or the
  // value passed to the winning notify(). In a fiber, also ends with kTimedOut when the fiber
  // is cancelled or its DeadlineScope passes (sched/cancel.h; detail::interrupted_errno tells
  // which), unless a CancelShield is in force.
  uint32_t wait(std::optional<TimePoint> deadline = std::nullopt) noexcept;
  uint32_t wait_for(Duration d) noexcept { return wait(now() + d); }

  // Tries to win the claim with `value` (>= 2); on success unparks the waiter and returns true.
  // Thread-safe. Returns false if someone else (or the deadline) won first.
  bool notify(uint32_t value = kNotified) noexcept;

  // Claimed yet? (kWaiting if not). Acquire: pairs with the winner's CAS.
  uint32_t value() const noexcept { return state_.load(std::memory_order_acquire); }
  const Parker& parker() const noexcept { return parker_; }

  // Used by the timer that implements the deadline: claims with kTimedOut and unparks.
  bool expire() noexcept { return notify_impl(kTimedOut); }

 private:
  bool notify_impl(uint32_t value) noexcept;
  uint32_t wait_until_ns(int64_t deadline_ns) noexcept;  // a fiber's wait (kNoDeadline: none)
  std::atomic<uint32_t> state_{kWaiting};
  Parker parker_;
};
}  // namespace lionet
