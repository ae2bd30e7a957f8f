// lionet/sched/detail/timer_queue.h: one worker's timers: a binary min-heap of refcounted
// entries, touched only by its worker (add, fire); cancellation from any thread flips the
// entry's state and leaves it in the heap (lazy deletion), the owner drops it when it surfaces
// or when cancelled entries exceed half the heap (compaction).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/object_cache.h"

namespace lionet::detail {

class TimerQueue;

struct TimerEntry {
  enum State : uint32_t { kPending = 0, kRunning = 1, kFired = 2, kCancelled = 3 };
  TimePoint deadline;
  std::function<void()> callback;
  // kPending -> kRunning -> kFired by the owner worker; kPending -> kCancelled by anyone.
  std::atomic<uint32_t> state{kPending};
  std::atomic<uint32_t> refs{1};
  TimerQueue* owner = nullptr;  // set once by TimerQueue::add; the queue outlives its entries' handles
  void add_ref() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // One entry per timed wait (every kept-alive HTTP request's read has a deadline): entries come
  // from a per-thread cache instead of malloc (base/object_cache.h).
  using Cache = base::ObjectCache<128, 256>;
  static void* operator new(std::size_t n) { return Cache::allocate(n); }
  static void operator delete(void* p) noexcept { Cache::deallocate(p); }
};
static_assert(sizeof(TimerEntry) <= 128, "TimerEntry outgrew its cache's block size");

class TimerQueue {
 public:
  ~TimerQueue();
  // Owner only. Takes a reference of its own.
  void add(TimerEntry* e);
  // Owner only. Runs callbacks of entries due at `now`; returns how many ran.
  int fire_due(TimePoint now);
  // Owner only. Earliest pending deadline, or TimePoint::max().
  TimePoint next_deadline();
  // Owner only.
  bool empty() const noexcept { return heap_.empty(); }
  // Owner only, not empty: the earliest deadline, a cancelled entry's included (a lower bound
  // of next_deadline(), without popping).
  TimePoint front_deadline() const noexcept { return heap_.front()->deadline; }
  // Any thread: called after a cancel so the owner knows when to compact.
  void note_cancelled() noexcept { cancelled_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void pop_top();
  void compact();
  static bool later(const TimerEntry* a, const TimerEntry* b) noexcept { return a->deadline > b->deadline; }
  std::vector<TimerEntry*> heap_;
  std::atomic<uint32_t> cancelled_{0};  // approximate count of cancelled entries still in heap_
};
}  // namespace lionet::detail
