// lionet/sched/cancel.cc: cancelling a fiber (the canceller's side of protocol 10 in
// scheduler.cc), CancelShield, DeadlineScope and on_cancel registrations.
#include "lionet/sched/cancel.h"

#include <sched.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "lionet/base/spinlock.h"
#include "lionet/sched/detail/worker.h"
#include "lionet/sched/park.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sched/timer.h"

namespace lionet {
namespace detail {

// CancelState::mu, the lock of the on_cancel list: a few pointer moves under it.
class ListLock {
 public:
  explicit ListLock(CancelState& c) noexcept : mu_(c.mu) {
    while (mu_.exchange(true, std::memory_order_acquire)) {
      while (mu_.load(std::memory_order_relaxed)) cpu_relax();
    }
  }
  ~ListLock() { mu_.store(false, std::memory_order_release); }
  ListLock(const ListLock&) = delete;
  ListLock& operator=(const ListLock&) = delete;

 private:
  std::atomic<bool>& mu_;
};

void wait_for_cancellers(CancelState& c) noexcept {
  // A canceller is inside our wait's target (a few dozen instructions, no switch): spin, and
  // give the CPU away if it was preempted (a canceller on a plain thread).
  for (int i = 0; c.cancellers.load(std::memory_order_acquire) != 0; ++i) {
    if (i < 128) {
      cpu_relax();
    } else {
      sched_yield();
    }
  }
}

struct OnCancelNode {
  std::function<void()> fn;
  Fiber* owner = nullptr;
  OnCancelNode* prev = nullptr;  // in owner->cancel_.callbacks, under owner->cancel_.mu
  OnCancelNode* next = nullptr;
  bool linked = false;
  // kArmed -> kRunning (fired: a fiber runs fn) -> kDone; or kArmed -> kDisarmed (reset first).
  static constexpr uint32_t kArmed = 0, kRunning = 1, kDone = 2, kDisarmed = 3;
  std::atomic<uint32_t> state{kArmed};
  // reset() waiting for a running fn: its claim, or kNoWaiter / kFinished.
  std::atomic<uintptr_t> waiter{0};
  Timer timer;  // the deadline's
};

namespace {
constexpr uintptr_t kFinished = 1;

// Starts node's callback once (cancel or deadline, whichever comes first), in a fiber of the
// owner's scheduler. `sched` is the scheduler to spawn on.
bool claim_node(OnCancelNode* n) noexcept {
  uint32_t s = OnCancelNode::kArmed;
  return n->state.compare_exchange_strong(s, OnCancelNode::kRunning, std::memory_order_acq_rel);
}

// After claim_node() won: n stays valid until the callback ends (reset() waits for it).
void start(OnCancelNode* n, Scheduler* sched) noexcept {
  auto run = [n] {
    try {
      n->fn();
    } catch (const std::exception& e) {
      spdlog::error("lionet: an on_cancel callback threw: {}", e.what());
    } catch (...) {
      spdlog::error("lionet: an on_cancel callback threw a non-std exception");
    }
    n->state.store(OnCancelNode::kDone, std::memory_order_release);
    const uintptr_t w = n->waiter.exchange(kFinished, std::memory_order_acq_rel);  // last touch of n
    if (w > kFinished) reinterpret_cast<WaitClaim*>(w)->notify();
  };
  try {
    sched->spawn_detached(std::move(run), SpawnOptions{.name = "on_cancel"});
  } catch (...) {
    // No fiber to be had (stopping, out of stacks): run it here rather than never.
    run();
  }
}

void fire(OnCancelNode* n, Scheduler* sched) noexcept {
  if (claim_node(n)) start(n, sched);
}

Scheduler* scheduler_of(Fiber* f) noexcept {
  auto* w = static_cast<Worker*>(f->worker_.load(std::memory_order_acquire));
  return w ? w->sched->owner : nullptr;
}
}  // namespace

void cancel_fiber(Fiber* f) noexcept {
  CancelState& c = f->cancel_;
  if (c.flags.fetch_or(CancelState::kCancelled, std::memory_order_seq_cst) & CancelState::kCancelled) return;
  // 1. End the wait it is in, if any (protocol 10).
  c.cancellers.fetch_add(1, std::memory_order_seq_cst);
  heavy_barrier();  // base/asymmetric_barrier.h: pairs with the waiter's light_barrier()
  if (CancelFn fn = c.target_fn.load(std::memory_order_acquire))
    fn(c.target_a.load(std::memory_order_relaxed), c.target_b.load(std::memory_order_relaxed));
  c.cancellers.fetch_sub(1, std::memory_order_release);
  // 2. Its on_cancel registrations, claimed under mu (reset() unlinks under it first, then
  // finds the node running and waits for its callback: the node outlives the start below).
  Scheduler* sched = nullptr;
  for (;;) {
    OnCancelNode* batch[16];
    std::size_t n = 0;
    {
      ListLock lk(c);
      c.fired = true;
      for (OnCancelNode* node = c.callbacks; node && n < std::size(batch); node = node->next)
        if (claim_node(node)) batch[n++] = node;
    }
    if (n == 0) return;
    if (!sched) sched = scheduler_of(f);
    for (std::size_t i = 0; i < n; ++i) start(batch[i], sched);
  }
}

}  // namespace detail

// ---------------------------------------------------------------- public

CancelShield::CancelShield() noexcept : fiber_(current_fiber()) {
  if (fiber_) ++fiber_->cancel_.shield;
}
CancelShield::~CancelShield() {
  if (fiber_) --fiber_->cancel_.shield;
}

DeadlineScope::DeadlineScope(TimePoint deadline) noexcept : fiber_(current_fiber()) {
  if (!fiber_) return;
  saved_ns_ = fiber_->cancel_.deadline_ns;
  fiber_->cancel_.deadline_ns = std::min(saved_ns_, to_ns(deadline));
}
DeadlineScope::~DeadlineScope() {
  if (fiber_) fiber_->cancel_.deadline_ns = saved_ns_;
}

OnCancel& OnCancel::operator=(OnCancel&& o) noexcept {
  if (this != &o) {
    reset();
    node_ = std::exchange(o.node_, nullptr);
  }
  return *this;
}

bool OnCancel::fired() const noexcept {
  return node_ && node_->state.load(std::memory_order_acquire) != detail::OnCancelNode::kArmed &&
         node_->state.load(std::memory_order_acquire) != detail::OnCancelNode::kDisarmed;
}

void OnCancel::reset() noexcept {
  detail::OnCancelNode* n = std::exchange(node_, nullptr);
  if (!n) return;
  n->timer.cancel();  // waits if its callback runs now; it fires nothing after this
  detail::CancelState& c = n->owner->cancel_;
  {
    detail::ListLock lk(c);
    if (n->linked) {
      if (n->prev) n->prev->next = n->next;
      else c.callbacks = n->next;
      if (n->next) n->next->prev = n->prev;
      n->linked = false;
    }
  }
  uint32_t s = detail::OnCancelNode::kArmed;
  if (!n->state.compare_exchange_strong(s, detail::OnCancelNode::kDisarmed, std::memory_order_acq_rel) &&
      (s == detail::OnCancelNode::kRunning || s == detail::OnCancelNode::kDone)) {
    // The callback runs in its fiber, or has just ended (kDone is stored before its last touch
    // of n, the exchange of `waiter`): wait for that touch, whatever this fiber's cancellation
    // says. A waiter already kFinished means it is over (TSan found the kDone window).
    CancelShield shield;
    WaitClaim claim;
    uintptr_t expected = 0;
    if (n->waiter.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(&claim), std::memory_order_acq_rel))
      claim.wait();
  }
  delete n;
}

namespace this_fiber {
bool cancelled() noexcept {
  Fiber* f = current_fiber();
  return f && (f->cancel_.flags.load(std::memory_order_relaxed) & detail::CancelState::kCancelled);
}

std::optional<TimePoint> deadline() noexcept {
  Fiber* f = current_fiber();
  if (!f || f->cancel_.deadline_ns == detail::CancelState::kNoDeadline) return std::nullopt;
  return from_ns(f->cancel_.deadline_ns);
}

int interruption() noexcept {
  Fiber* f = current_fiber();
  if (!f || f->cancel_.shield != 0) return 0;
  if (f->cancel_.flags.load(std::memory_order_relaxed) & detail::CancelState::kCancelled) return ECANCELED;
  if (f->cancel_.deadline_ns != detail::CancelState::kNoDeadline && f->cancel_.deadline_ns <= to_ns(now()))
    return ETIMEDOUT;
  return 0;
}

OnCancel on_cancel(std::function<void()> fn) {
  Fiber* f = current_fiber();
  if (!f) return OnCancel();
  auto* n = new detail::OnCancelNode;
  n->fn = std::move(fn);
  n->owner = f;
  detail::CancelState& c = f->cancel_;
  bool already;
  {
    detail::ListLock lk(c);
    already = c.fired;
    n->next = c.callbacks;
    if (c.callbacks) c.callbacks->prev = n;
    c.callbacks = n;
    n->linked = true;
  }
  Scheduler* sched = Scheduler::current();
  if (already) {
    detail::fire(n, sched);
  } else if (const int64_t dl = f->cancel_.deadline_ns; dl != detail::CancelState::kNoDeadline) {
    n->timer = add_timer(from_ns(dl), [n, sched] { detail::fire(n, sched); });
  }
  return OnCancel(n);
}
}  // namespace this_fiber
}  // namespace lionet
