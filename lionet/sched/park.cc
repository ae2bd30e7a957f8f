// lionet/sched/park.cc: park / unpark and WaitClaim; the protocol is described in park.h and scheduler.cc (5).
//
// Fiber state transitions made here:
//   unpark:  PARKED -> RUNNABLE (a store after the acquire load that saw PARKED: only one
//            unparker per park; a CAS in debug builds), then the fiber is scheduled
//            RUNNING -> RUNNING|NOTIFIED (CAS; the fiber has not finished switching out, or
//            has not called park() yet: its park returns at once / on_resumed requeues it)
//   park:    RUNNING|NOTIFIED -> RUNNING (fast path, no switch), else switch out with kPark.
#include "lionet/sched/park.h"

#include <algorithm>

#include "lionet/sched/cancel.h"

#include "lionet/base/macros.h"
#include "lionet/fiber/fiber.h"
#include "lionet/sched/detail/coarse_clock.h"
#include "lionet/sched/detail/futex.h"
#include "lionet/sched/detail/worker.h"
#include "lionet/sched/timer.h"

namespace lionet {
namespace detail {
// A plain thread's parker. word: 0 idle, 1 unpark pending, 2 the owner sleeps in futex_wait.
// Only the owner thread writes 0 and 2; unparkers write 1.
struct ThreadParker {
  std::atomic<uint32_t> word{0};
};

namespace {
thread_local ThreadParker t_thread_parker;

// Returns true when an unpark was consumed, false when the deadline passed first.
bool park_thread_until(ThreadParker& p, const TimePoint* deadline) noexcept {
  for (;;) {
    uint32_t s = p.word.load(std::memory_order_acquire);
    if (s == 1) {
      p.word.store(0, std::memory_order_relaxed);
      return true;
    }
    if (s == 0 && !p.word.compare_exchange_strong(s, 2, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;  // it became 1
    if (deadline && now() >= *deadline) {
      uint32_t e = 2;
      if (p.word.compare_exchange_strong(e, 0, std::memory_order_acq_rel, std::memory_order_acquire)) return false;
      continue;  // an unpark arrived just now
    }
    futex_wait(&p.word, 2, deadline);
  }
}

void unpark_thread(ThreadParker* p) noexcept {
  // release: everything the waker wrote before unpark is visible to the woken thread.
  if (p->word.exchange(1, std::memory_order_acq_rel) == 2) futex_wake(&p->word, 1);
}

// Statistics: one per unpark() call (the protocol makes each call a distinct wake-up).
// Counted before the state CAS, while f (parked or about to park) keeps its scheduler alive.
void count_unpark(Worker* w, SchedulerImpl* sched) noexcept {
  if (w && w->sched == sched) {
    w->fiber_unparks.inc();
  } else {
    sched->external_unparks.fetch_add(1, std::memory_order_relaxed);  // a statistic: no order
  }
}

void unpark_fiber(Fiber* f) noexcept {
  uint32_t s = f->state_.load(std::memory_order_acquire);
  // relaxed: worker_ was stored before the release that made f RUNNING, which we acquired.
  Worker* home = static_cast<Worker*>(f->worker_.load(std::memory_order_relaxed));
  Worker* const self = t_worker;  // no switch in here: read once, inline
  count_unpark(self, home->sched);
  for (;;) {
    const auto st = static_cast<FiberState>(s & Fiber::kStateMask);
    if (st == FiberState::kParked) {
      // The acquire load above pairs with the release CAS in on_resumed(kPark) that saved f's
      // context. Once PARKED, nothing else writes the state word until f runs again, and the
      // protocol gives a park exactly one unparker: a plain store suffices (one locked RMW less
      // per wake-up: measured ~15% of a channel ping-pong). Debug builds keep the CAS, so that a
      // double unpark racing with this one is caught by the check below.
#ifdef NDEBUG
      f->state_.store(static_cast<uint32_t>(FiberState::kRunnable), std::memory_order_relaxed);
      home->sched->schedule_woken(f, self);
      return;
#else
      if (f->state_.compare_exchange_weak(s, static_cast<uint32_t>(FiberState::kRunnable), std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
        home->sched->schedule_woken(f, self);
        return;
      }
#endif
    } else {
      LIONET_CHECK(st == FiberState::kRunning && !(s & Fiber::kNotifiedBit),
                   "unpark of a fiber that is not parked or running (double unpark breaks the exactly-once protocol)");
      if (f->state_.compare_exchange_weak(s, s | Fiber::kNotifiedBit, std::memory_order_acq_rel,
                                          std::memory_order_acquire))
        return;
    }
  }
}
}  // namespace
}  // namespace detail

Parker Parker::current() noexcept {
  Parker p;
  detail::Worker* w = detail::t_worker;  // no switch in here: read once, inline
  if (Fiber* f = w ? w->running : nullptr) {
    p.fiber_ = f;
  } else {
    p.thread_ = &detail::t_thread_parker;
  }
  return p;
}

void Parker::unpark() const noexcept {
  if (fiber_) {
    detail::unpark_fiber(fiber_);
  } else {
    detail::unpark_thread(thread_);
  }
}

void park() noexcept {
  // The one thread-local read, before the switch (see detail::t_worker).
  detail::Worker* w = detail::t_worker;
  Fiber* f = w ? w->running : nullptr;
  if (!f) {
    detail::park_thread_until(detail::t_thread_parker, nullptr);
    return;
  }
  uint32_t s = f->state_.load(std::memory_order_acquire);
  if (s & Fiber::kNotifiedBit) {
    // The unpark came first: consume it without switching. Only this fiber clears the bit.
    f->state_.store(static_cast<uint32_t>(FiberState::kRunning), std::memory_order_relaxed);
    f->wait_.clear();
    return;
  }
  // A park is stamped with the time it happens, not with the worker's last refresh: after a
  // long slice that one may be the slice's length old, and a dump overstated every wait that
  // followed it. One vDSO read (~5 ns). park_and_unlock (channels: message passing, where a
  // round trip is ~48 ns) keeps the cached value.
  w->coarse_now_ns = detail::coarse_monotonic_ns();
  w->switch_away(f, detail::AfterSwitch::kPark);
  f->wait_.clear();  // f is this fiber: valid on whichever worker it resumed
}

void park_and_unlock(SpinLock& lock) noexcept {
  detail::Worker* w = detail::t_worker;
  Fiber* f = w ? w->running : nullptr;
  if (!f) {
    lock.unlock();
    detail::park_thread_until(detail::t_thread_parker, nullptr);
    return;
  }
  LIONET_DCHECK(!(f->state_.load(std::memory_order_relaxed) & Fiber::kNotifiedBit),
                "park_and_unlock: an unpark arrived without the lock");
  w->switch_away(f, detail::AfterSwitch::kParkUnlock, &lock);
  f->wait_.clear();
}

bool WaitClaim::notify(uint32_t value) noexcept {
  LIONET_DCHECK(value >= kNotified, "WaitClaim::notify values below 2 are reserved");
  return notify_impl(value);
}

bool WaitClaim::notify_impl(uint32_t value) noexcept {
  const Parker p = parker_;  // copied first: after the CAS the waiter may only wait for unpark()
  uint32_t expected = kWaiting;
  if (!state_.compare_exchange_strong(expected, value, std::memory_order_acq_rel, std::memory_order_acquire))
    return false;
  p.unpark();
  return true;
}

namespace {
constexpr int64_t kNoDeadline = detail::CancelState::kNoDeadline;
void expire_claim(void* claim, void*) noexcept { static_cast<WaitClaim*>(claim)->expire(); }
}  // namespace

uint32_t WaitClaim::wait(std::optional<TimePoint> deadline) noexcept {
  if (!parker_.is_fiber()) {
    if (!deadline) {
      detail::park_thread_until(detail::t_thread_parker, nullptr);
      return value();
    }
    const TimePoint dl = *deadline;
    if (detail::park_thread_until(detail::t_thread_parker, &dl)) return value();
    uint32_t expected = kWaiting;
    if (state_.compare_exchange_strong(expected, kTimedOut, std::memory_order_acq_rel, std::memory_order_acquire))
      return kTimedOut;
    detail::park_thread_until(detail::t_thread_parker, nullptr);  // the winner's unpark is on its way
    return value();
  }
  // Protocol 10: a cancel expires the claim (as the deadline would) while it is published;
  // the fiber's own deadline joins the caller's.
  Fiber* const f = parker_.fiber();
  if (!detail::interruptible(*f)) return wait_until_ns(deadline ? to_ns(*deadline) : kNoDeadline);
  int64_t dl = f->cancel_.deadline_ns;
  if (deadline) dl = std::min(dl, to_ns(*deadline));
  if (!detail::begin_wait(*f, &expire_claim, this, nullptr)) {
    // Already cancelled: fail at once, unless a notifier (or the canceller, expiring the claim)
    // won first: then consume its unpark. Either way no canceller may still be in expire().
    uint32_t expected = kWaiting;
    if (!state_.compare_exchange_strong(expected, kTimedOut, std::memory_order_acq_rel, std::memory_order_acquire))
      park();
    detail::end_wait(*f);
    return value();
  }
  const uint32_t v = wait_until_ns(dl);
  detail::end_wait(*f);
  return v;
}

uint32_t WaitClaim::wait_until_ns(int64_t deadline_ns) noexcept {
  if (deadline_ns == kNoDeadline) {
    park();
    return value();
  }
  // A deadline already past times out without a switch (try_lock_for(0), a TLS close's
  // write "only if it cannot wait" count on that). An IO timeout seconds away costs no read of
  // now(): the coarse clock tells it is still ahead.
  if (const TimePoint dl = from_ns(deadline_ns); !surely_ahead(dl) && dl <= now()) {
    uint32_t expected = kWaiting;
    if (state_.compare_exchange_strong(expected, kTimedOut, std::memory_order_acq_rel, std::memory_order_acquire))
      return kTimedOut;
    park();  // a notifier (or a canceller) won: consume its unpark
    return value();
  }
  Timer timer = add_timer(from_ns(deadline_ns), [this] { expire(); });
  parker_.fiber()->wait_.deadline_ns.store(deadline_ns, std::memory_order_relaxed);  // for dumps only
  park();
  // Whoever won (a notifier, a canceller, the timer): make sure the timer callback is not
  // running (it touches *this) and never will.
  timer.cancel();
  return value();
}
}  // namespace lionet
