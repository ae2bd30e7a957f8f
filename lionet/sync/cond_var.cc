// lionet/sync/cond_var.cc: queue operations of lionet::CondVar (wake rule: detail/wait_queue.h).
#include "lionet/sync/cond_var.h"

namespace lionet {

CondVar::~CondVar() {
  detail::check_no_waiters(lock_, queue_, "lionet::CondVar destroyed while fibers are waiting on it");
}

void CondVar::enqueue(detail::WaitNode* n) noexcept {
  lock_.lock();
  queue_.push_back(n);
  lock_.unlock();
}

void CondVar::unlink(detail::WaitNode* n) noexcept {
  lock_.lock();
  queue_.remove_if_linked(n);
  lock_.unlock();
}

void CondVar::notify_one() noexcept {
  lock_.lock();
  detail::DeferredWake wake(queue_.take());  // timed waiters that lost to their deadline are skipped
  lock_.unlock();
  wake.run();
}

void CondVar::notify_all() noexcept {
  detail::WakeBatch batch;
  lock_.lock();
  while (detail::Taken t = queue_.take()) batch.add(t);
  lock_.unlock();
  batch.run();
}
}  // namespace lionet
