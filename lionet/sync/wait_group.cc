// lionet/sync/wait_group.cc.
//
// No lost wake-up and safe destruction: count_ reaches zero only inside lock_ (add() switches
// to the locked path when its result would be zero), and waiters test count_ under lock_
// before queueing. So a waiter either queues before the zeroing critical section (and is
// taken by it) or tests after it (and sees zero); either way it returns only after done() has
// released lock_, its last access to *this (plain waiters are unparked after the unlock; timed
// waiters, notified under the lock, take lock_ once before returning).
#include "lionet/sync/wait_group.h"

namespace lionet {

WaitGroup::~WaitGroup() {
  detail::check_no_waiters(lock_, queue_, "lionet::WaitGroup destroyed while fibers are waiting on it");
}

void WaitGroup::add(int64_t n) noexcept {
  int64_t c = count_.load(std::memory_order_relaxed);
  while (c + n != 0) {  // fast path: a change that does not reach zero
    LIONET_CHECK(c + n > 0, "lionet::WaitGroup counter went negative (more done() than add())");
    if (count_.compare_exchange_weak(c, c + n, std::memory_order_acq_rel, std::memory_order_relaxed)) return;  // /*1*/
  }
  if (n == 0) return;
  detail::WakeBatch batch;
  lock_.lock();
  const int64_t after = count_.fetch_add(n, std::memory_order_acq_rel) + n;  // /*1*/
  LIONET_CHECK(after >= 0, "lionet::WaitGroup counter went negative (more done() than add())");
  if (after == 0) {
    while (detail::Taken t = queue_.take()) batch.add(t);
  }
  lock_.unlock();  // last access to *this
  batch.run();
}

bool WaitGroup::wait() noexcept {
  return detail::wait_latch(
      lock_, queue_, [this] { return count_.load(std::memory_order_acquire) == 0; }, std::nullopt, WaitKind::kWaitGroup,
      this);
}

bool WaitGroup::wait_until(TimePoint deadline) noexcept {
  return detail::wait_latch(
      lock_, queue_, [this] { return count_.load(std::memory_order_acquire) == 0; }, deadline, WaitKind::kWaitGroup,
      this);
}
}  // namespace lionet
