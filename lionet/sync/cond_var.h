// lionet/sync/cond_var.h: lionet::CondVar, a condition variable that parks the waiting fiber
// (or blocks a plain thread).
//
// Owns: the queue of waiters of one condition. Works with any BasicLockable, in particular
// lionet::Mutex and std::unique_lock<lionet::Mutex> (like std::condition_variable_any). Never
// use it with a std::mutex held by a fiber: the fiber would park holding an OS lock.
//
// Guarantees: no lost wake-up (a waiter is queued before it releases the user's lock, so a
// notify made under, or after, that lock finds it); no spurious wake-up either (park() is
// exactly-once), but code should still wait with a predicate, as with any condition variable:
// between the notify and the moment the waiter re-acquires the lock, another party may have
// consumed the state. notify_one wakes the oldest waiter (FIFO).
// Concurrency: every method may run in parallel with every other, from fibers and threads.
#pragma once

#include <chrono>
#include <condition_variable>  // std::cv_status
#include <utility>

#include "lionet/base/clock.h"
#include "lionet/base/spinlock.h"
#include "lionet/sched/cancel.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;
  ~CondVar();  // fatal if fibers are still waiting

  void notify_one() noexcept;
  void notify_all() noexcept;

  // Atomically releases `lock` and parks; re-acquires `lock` before returning. Returns false
  // if the fiber was cancelled or its DeadlineScope passed (sched/cancel.h) instead: a
  // notify_one() that raced with that is passed on to another waiter, never lost.
  template <class Lock>
  bool wait(Lock& lock) {
    if (Fiber* f = current_fiber(); f && detail::interruptible(*f))
      return wait_claimed(lock, std::nullopt) == std::cv_status::no_timeout;
    detail::WaitNode node;
    node.parker = Parker::current();
    enqueue(&node);  // W1: queued before the user's lock is released
    lock.unlock();
    note_wait(WaitKind::kCondVar, this);
    park();
    lock.lock();
    return true;
  }

  // Returns pred(): false only if the wait was interrupted (cancel, deadline) with pred() false.
  template <class Lock, class Pred>
  bool wait(Lock& lock, Pred pred) {
    while (!pred()) {
      if (!wait(lock)) return pred();
    }
    return true;
  }

  // std::cv_status::timeout also when the fiber is cancelled or its DeadlineScope passes.
  template <class Lock>
  std::cv_status wait_until(Lock& lock, TimePoint deadline) {
    return wait_claimed(lock, deadline);
  }

  template <class Lock, class C, class D>
  std::cv_status wait_until(Lock& lock, const std::chrono::time_point<C, D>& t) {
    return wait_until(lock, now() + std::chrono::ceil<Duration>(t - C::now()));
  }

  template <class Lock, class Rep, class Period>
  std::cv_status wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& d) {
    return wait_until(lock, now() + std::chrono::ceil<Duration>(d));
  }

  // Predicate forms: return pred() (false only if the deadline passed with pred() false).
  template <class Lock, class Pred>
  bool wait_until(Lock& lock, TimePoint deadline, Pred pred) {
    while (!pred()) {
      if (wait_until(lock, deadline) == std::cv_status::timeout) return pred();
    }
    return true;
  }

  template <class Lock, class Rep, class Period, class Pred>
  bool wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& d, Pred pred) {
    return wait_until(lock, now() + std::chrono::ceil<Duration>(d), std::move(pred));
  }

 private:
  template <class Lock>
  std::cv_status wait_claimed(Lock& lock, std::optional<TimePoint> deadline) {
    WaitClaim claim;
    detail::WaitNode node;
    node.claim = &claim;
    enqueue(&node);
    lock.unlock();
    note_wait(WaitKind::kCondVar, this);
    const bool timed_out = claim.wait(deadline) == WaitClaim::kTimedOut;
    // W3: after a timeout, unlink `node` before it leaves scope; after a notify, wait until
    // the notifier has left lock_, so the CondVar may be destroyed once we return.
    unlink(&node);
    lock.lock();
    return timed_out ? std::cv_status::timeout : std::cv_status::no_timeout;
  }
  void enqueue(detail::WaitNode* n) noexcept;
  void unlink(detail::WaitNode* n) noexcept;

  SpinLock lock_;  // protects queue_
  detail::WaitQueue queue_;  // waiters, oldest first
};
}  // namespace lionet
