// lionet/sync/shared_mutex.h: lionet::SharedMutex, a reader-writer lock that parks fibers (or
// blocks plain threads). Satisfies SharedLockable: std::shared_lock and std::unique_lock work.
//
// Owns: the reader count, the writer flag and two waiter queues, all under one SpinLock.
// Policy: writer-preferring with phase hand-off, so neither side starves:
//  - a new reader waits if a writer holds the lock OR any writer is queued;
//  - a writer's unlock hands the lock to ALL queued readers if there are any, else to the
//    oldest queued writer; the last reader's unlock hands it to the oldest queued writer.
// Hand-off means a woken waiter already owns the lock when it resumes (no re-check loop).
// Cost: every operation takes the SpinLock (about 2x a lionet::Mutex uncontended); use Mutex
// when reads are not long or numerous enough for sharing to pay.
// Concurrency: any method, any fiber or thread.
#pragma once

#include <cstdint>

#include "lionet/base/spinlock.h"
#include "lionet/sync/detail/wait_queue.h"

namespace lionet {

class SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  ~SharedMutex();  // fatal if held or waited on

  void lock() noexcept;
  bool try_lock() noexcept;
  void unlock() noexcept;

  void lock_shared() noexcept;
  bool try_lock_shared() noexcept;
  void unlock_shared() noexcept;

 private:
  SpinLock lock_;  // protects every field below
  int64_t readers_ = 0;  // readers holding the lock
  bool writer_ = false;  // a writer holds the lock
  detail::WaitQueue readq_;  // queued readers (plain nodes only)
  detail::WaitQueue writeq_;  // queued writers (plain nodes only)
};
}  // namespace lionet
