// lionet/sync/event.cc. set_ flips under lock_ and waiters re-check it under lock_ before
// queueing, so a waiter is either queued before set() drains the queue or sees set_ == true.
#include "lionet/sync/event.h"

namespace lionet {

Event::~Event() {
  lock_.lock();
  const bool idle = queue_.empty();
  lock_.unlock();
  LIONET_CHECK(idle, "lionet::Event destroyed while fibers are waiting on it");
}

void Event::set() noexcept {
  if (is_set()) return;
  detail::WakeBatch batch;
  lock_.lock();
  set_.store(true, std::memory_order_release);
  while (detail::Taken t = queue_.take()) batch.add(t);
  lock_.unlock();
  batch.run();
}

void Event::wait() noexcept {
  if (is_set()) return;
  detail::WaitNode node;
  node.parker = Parker::current();
  lock_.lock();
  if (set_.load(std::memory_order_relaxed)) {  // lock_ orders it
    lock_.unlock();
    return;
  }
  queue_.push_back(&node);
  lock_.unlock();
  park();
}

bool Event::wait_until(TimePoint deadline) noexcept {
  if (is_set()) return true;
  WaitClaim claim;
  detail::WaitNode node;
  node.claim = &claim;
  lock_.lock();
  if (set_.load(std::memory_order_relaxed)) {
    lock_.unlock();
    return true;
  }
  queue_.push_back(&node);
  lock_.unlock();
  if (claim.wait(deadline) != WaitClaim::kTimedOut) return true;
  lock_.lock();
  queue_.remove_if_linked(&node);  // W3
  lock_.unlock();
  return is_set();
}
}  // namespace lionet
