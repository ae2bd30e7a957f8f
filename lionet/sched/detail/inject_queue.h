// lionet/sched/detail/inject_queue.h: the scheduler-wide MPMC queue through which outside
// threads (and overflowing local queues) hand fibers to the workers.
//
// A mutex around an intrusive FIFO list (Fiber::next_), like Tokio's inject queue: it is off
// the hot path (workers prefer their local queues and look here every 64 ticks or when
// idle), and a batch costs one lock. len_ lets workers skip the lock when it is empty.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "lionet/fiber/fiber.h"

namespace lionet::detail {

class InjectQueue {
 public:
  // Any thread. Links [first..last] (already chained through next_) at the tail.
  void push_batch(Fiber* first, Fiber* last, uint32_t n) noexcept {
    last->next_ = nullptr;
    std::lock_guard<std::mutex> lk(mu_);
    if (tail_) tail_->next_ = first;
    else head_ = first;
    tail_ = last;
    // release: a worker that sees len_ > 0 and then locks sees the list anyway (the mutex
    // orders it); relaxed would do, release documents intent for the empty() fast path.
    len_.store(len_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  void push(Fiber* f) noexcept { push_batch(f, f, 1); }

  // Any thread. Pops up to max fibers; returns the first, chained through next_ (null-ended).
  Fiber* pop_batch(uint32_t max, uint32_t* got) noexcept {
    *got = 0;
    if (empty()) return nullptr;
    std::lock_guard<std::mutex> lk(mu_);
    Fiber* first = head_;
    Fiber* last = nullptr;
    uint32_t n = 0;
    for (Fiber* f = head_; f && n < max; f = f->next_) {
      last = f;
      ++n;
    }
    if (n == 0) return nullptr;
    head_ = last->next_;
    if (!head_) tail_ = nullptr;
    last->next_ = nullptr;
    len_.store(len_.load(std::memory_order_relaxed) - n, std::memory_order_release);
    *got = n;
    return first;
  }

  bool empty() const noexcept { return len_.load(std::memory_order_acquire) == 0; }
  uint32_t len() const noexcept { return len_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  Fiber* head_ = nullptr;  // guarded by mu_
  Fiber* tail_ = nullptr;  // guarded by mu_
  std::atomic<uint32_t> len_{0};  // written under mu_, read without it
};
}  // namespace lionet::detail
