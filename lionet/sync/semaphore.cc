// lionet/sync/semaphore.cc (wake rule: detail/wait_queue.h).
#include "lionet/sync/semaphore.h"

namespace lionet {

Semaphore::~Semaphore() {
  detail::check_no_waiters(lock_, queue_, "lionet::Semaphore destroyed while fibers are waiting on it");
}

bool Semaphore::try_acquire() noexcept {
  lock_.lock();
  const bool ok = count_ > 0;
  if (ok) --count_;
  lock_.unlock();
  return ok;
}

void Semaphore::acquire() noexcept {
  lock_.lock();
  if (count_ > 0) {
    --count_;
    lock_.unlock();
    return;
  }
  detail::park_queued(queue_, lock_, WaitKind::kSemaphore, this);  // woken by release() holding our permit
}

bool Semaphore::try_acquire_until(TimePoint deadline) noexcept {
  lock_.lock();
  if (count_ > 0) {
    --count_;
    lock_.unlock();
    return true;
  }
  WaitClaim claim;
  detail::WaitNode node;
  node.claim = &claim;
  queue_.push_back(&node);
  lock_.unlock();
  note_wait(WaitKind::kSemaphore, this);
  const bool notified = claim.wait(deadline) != WaitClaim::kTimedOut;  // a win carries the permit
  // W3: after a timeout, unlink; after a notify, wait until release() has left lock_ (its last
  // access), so the caller may destroy the semaphore as soon as we return.
  lock_.lock();
  if (!notified) queue_.remove_if_linked(&node);
  lock_.unlock();
  return notified;
}

void Semaphore::release(int64_t n) noexcept {
  LIONET_CHECK(n >= 0, "lionet::Semaphore::release with a negative count");
  detail::WakeBatch batch;
  lock_.lock();
  while (n > 0) {
    detail::Taken t = queue_.take();  // a notified timed waiter returns at once: never touch it again
    if (!t) break;
    batch.add(t);
    --n;
  }
  count_ += n;
  lock_.unlock();
  batch.run();
}

int64_t Semaphore::available() const noexcept {
  lock_.lock();
  int64_t c = count_;
  lock_.unlock();
  return c;
}
}  // namespace lionet
