// lionet/sync/event.cc. set_ flips under lock_ and waiters test it under lock_ before
// queueing, so a waiter is either queued before set() drains the queue or sees set_ == true,
// and in both cases returns only after set() released lock_ (its last access to *this).
// There is deliberately no lock-free fast path in wait(): one would let a waiter return, and
// destroy the Event, while set() is still inside its critical section.
#include "lionet/sync/event.h"

namespace lionet {

Event::~Event() { detail::check_no_waiters(lock_, queue_, "lionet::Event destroyed while fibers are waiting on it"); }

void Event::set() noexcept {
  detail::WakeBatch batch;
  lock_.lock();
  set_.store(true, std::memory_order_release);
  while (detail::Taken t = queue_.take()) batch.add(t);
  lock_.unlock();
  batch.run();
}

bool Event::wait() noexcept {
  return detail::wait_latch(
      lock_, queue_, [this] { return set_.load(std::memory_order_relaxed); }, std::nullopt, WaitKind::kEvent, this);
}

bool Event::wait_until(TimePoint deadline) noexcept {
  // relaxed: lock_ orders set_ (it is written under lock_ too).
  return detail::wait_latch(
      lock_, queue_, [this] { return set_.load(std::memory_order_relaxed); }, deadline, WaitKind::kEvent, this);
}
}  // namespace lionet
