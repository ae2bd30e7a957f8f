// lionet/sync/shared_mutex.cc (wake rule: detail/wait_queue.h). Only plain (untimed) nodes
// are queued here, so removal under lock_ is the whole wake decision (W2).
#include "lionet/sync/shared_mutex.h"

namespace lionet {

SharedMutex::~SharedMutex() {
  lock_.lock();
  const bool idle = readers_ == 0 && !writer_ && readq_.empty() && writeq_.empty();
  lock_.unlock();
  LIONET_CHECK(idle, "lionet::SharedMutex destroyed while held or waited on");
}

void SharedMutex::lock() noexcept {
  lock_.lock();
  if (!writer_ && readers_ == 0) {
    writer_ = true;
    lock_.unlock();
    return;
  }
  detail::park_queued(writeq_, lock_, WaitKind::kSharedMutex, this);  // the unlocker set writer_ = true for us
}

bool SharedMutex::try_lock() noexcept {
  lock_.lock();
  const bool ok = !writer_ && readers_ == 0;
  if (ok) writer_ = true;
  lock_.unlock();
  return ok;
}

void SharedMutex::unlock() noexcept {
  detail::WakeBatch batch;
  lock_.lock();
  LIONET_CHECK(writer_, "lionet::SharedMutex::unlock() without an exclusive holder");
  writer_ = false;
  if (!readq_.empty()) {
    while (detail::WaitNode* n = readq_.pop_front()) {  // hand-off to every queued reader
      ++readers_;
      batch.add_plain(n);
    }
  } else if (detail::WaitNode* n = writeq_.pop_front()) {
    writer_ = true;  // hand-off to the oldest writer
    batch.add_plain(n);
  }
  lock_.unlock();
  batch.run();
}

void SharedMutex::lock_shared() noexcept {
  lock_.lock();
  if (!writer_ && writeq_.empty()) {
    ++readers_;
    lock_.unlock();
    return;
  }
  detail::park_queued(readq_, lock_, WaitKind::kSharedMutexShared, this);  // the unlocker counted us in readers_
}

bool SharedMutex::try_lock_shared() noexcept {
  lock_.lock();
  const bool ok = !writer_ && writeq_.empty();
  if (ok) ++readers_;
  lock_.unlock();
  return ok;
}

void SharedMutex::unlock_shared() noexcept {
  detail::WakeBatch batch;
  lock_.lock();
  LIONET_CHECK(readers_ > 0, "lionet::SharedMutex::unlock_shared() without a shared holder");
  if (--readers_ == 0) {
    if (detail::WaitNode* n = writeq_.pop_front()) {
      writer_ = true;
      batch.add_plain(n);
    }
  }
  lock_.unlock();
  batch.run();
}
}  // namespace lionet
