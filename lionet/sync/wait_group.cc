// lionet/sync/wait_group.cc.
//
// No lost wake-up: a waiter re-reads count_ under lock_ before it queues; the add() that
// reaches zero takes lock_ after its RMW. If the waiter read a non-zero count, that RMW comes
// later in count_'s order, so the adder's lock_ acquisition cannot precede the waiter's
// critical section (had it, the waiter would have acquired the adder's release and seen
// zero): the adder finds the node.
#include "lionet/sync/wait_group.h"

namespace lionet {

WaitGroup::~WaitGroup() {
  lock_.lock();
  const bool idle = queue_.empty();
  lock_.unlock();
  LIONET_CHECK(idle, "lionet::WaitGroup destroyed while fibers are waiting on it");
}

void WaitGroup::add(int64_t n) noexcept {
  const int64_t after = count_.fetch_add(n, std::memory_order_acq_rel) + n;  // /*1*/
  LIONET_CHECK(after >= 0, "lionet::WaitGroup counter went negative (more done() than add())");
  if (after == 0 && n != 0) wake_all();
}

void WaitGroup::wake_all() noexcept {
  detail::WakeBatch batch;
  lock_.lock();
  while (detail::Taken t = queue_.take()) batch.add(t);
  lock_.unlock();
  batch.run();
}

void WaitGroup::wait() noexcept {
  if (count_.load(std::memory_order_acquire) == 0) return;  // /*1*/
  detail::WaitNode node;
  node.parker = Parker::current();
  lock_.lock();
  if (count_.load(std::memory_order_acquire) == 0) {
    lock_.unlock();
    return;
  }
  queue_.push_back(&node);
  lock_.unlock();
  park();
}

bool WaitGroup::wait_until(TimePoint deadline) noexcept {
  if (count_.load(std::memory_order_acquire) == 0) return true;
  WaitClaim claim;
  detail::WaitNode node;
  node.claim = &claim;
  lock_.lock();
  if (count_.load(std::memory_order_acquire) == 0) {
    lock_.unlock();
    return true;
  }
  queue_.push_back(&node);
  lock_.unlock();
  if (claim.wait(deadline) != WaitClaim::kTimedOut) return true;
  lock_.lock();
  queue_.remove_if_linked(&node);  // W3
  lock_.unlock();
  return count_.load(std::memory_order_acquire) == 0;
}
}  // namespace lionet
