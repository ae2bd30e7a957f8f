// lionet/sched/timer.cc: timers; see timer.h and detail/timer_queue.h.
#include "lionet/sched/timer.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "lionet/base/spinlock.h"
#include "lionet/sched/detail/timer_queue.h"
#include "lionet/sched/detail/worker.h"

namespace lionet {
namespace detail {

TimerQueue::~TimerQueue() {
  for (TimerEntry* e : heap_) e->release();
}

void TimerQueue::add(TimerEntry* e) {
  e->add_ref();
  e->owner = this;
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), later);
  const uint32_t c = cancelled_.load(std::memory_order_relaxed);
  if (c > 64 && c > heap_.size() / 2) compact();
}

void TimerQueue::pop_top() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  heap_.back()->release();
  heap_.pop_back();
}

void TimerQueue::compact() {
  auto dead = [](TimerEntry* e) { return e->state.load(std::memory_order_acquire) == TimerEntry::kCancelled; };
  uint32_t removed = 0;
  for (TimerEntry*& e : heap_) {
    if (dead(e)) {
      e->release();
      e = nullptr;
      ++removed;
    }
  }
  heap_.erase(std::remove(heap_.begin(), heap_.end(), nullptr), heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), later);
  cancelled_.fetch_sub(std::min(removed, cancelled_.load(std::memory_order_relaxed)), std::memory_order_relaxed);
}

int TimerQueue::fire_due(TimePoint now) {
  int ran = 0;
  while (!heap_.empty() && heap_.front()->deadline <= now) {
    TimerEntry* e = heap_.front();
    e->add_ref();
    pop_top();
    uint32_t expected = TimerEntry::kPending;
    // acq_rel: wins against a concurrent cancel(); the callback's effects are published by
    // the release store of kFired, which a waiting cancel() acquires.
    if (e->state.compare_exchange_strong(expected, TimerEntry::kRunning, std::memory_order_acq_rel)) {
      e->callback();
      e->state.store(TimerEntry::kFired, std::memory_order_release);
      ++ran;
    } else {
      uint32_t c = cancelled_.load(std::memory_order_relaxed);
      if (c) cancelled_.store(c - 1, std::memory_order_relaxed);
    }
    e->release();
  }
  return ran;
}

TimePoint TimerQueue::next_deadline() {
  while (!heap_.empty() && heap_.front()->state.load(std::memory_order_acquire) == TimerEntry::kCancelled) {
    pop_top();
    uint32_t c = cancelled_.load(std::memory_order_relaxed);
    if (c) cancelled_.store(c - 1, std::memory_order_relaxed);
  }
  return heap_.empty() ? TimePoint::max() : heap_.front()->deadline;
}
}  // namespace detail

Timer add_timer(TimePoint deadline, std::function<void()> callback) {
  detail::Worker* w = detail::current_worker();
  if (!w) throw std::logic_error("lionet::add_timer called outside a LioNet worker");
  auto* e = new detail::TimerEntry;
  e->deadline = deadline;
  e->callback = std::move(callback);
  w->add_timer(e);  // the queue's reference
  return Timer(e);  // the handle keeps the construction reference
}

Timer::~Timer() {
  if (entry_) entry_->release();
}
Timer::Timer(Timer&& o) noexcept : entry_(std::exchange(o.entry_, nullptr)) {}
Timer& Timer::operator=(Timer&& o) noexcept {
  if (this != &o) {
    if (entry_) entry_->release();
    entry_ = std::exchange(o.entry_, nullptr);
  }
  return *this;
}

bool Timer::cancel() noexcept {
  if (!entry_) return false;
  uint32_t expected = detail::TimerEntry::kPending;
  if (entry_->state.compare_exchange_strong(expected, detail::TimerEntry::kCancelled, std::memory_order_acq_rel)) {
    if (entry_->owner) entry_->owner->note_cancelled();
    return true;
  }
  // The callback is running on its worker: wait until it has finished (it is short).
  while (entry_->state.load(std::memory_order_acquire) == detail::TimerEntry::kRunning) {
    if (detail::current_worker() == nullptr) std::this_thread::yield();
    else cpu_relax();
  }
  return false;
}

bool Timer::reset(TimePoint deadline) {
  if (!entry_) return false;
  uint32_t expected = detail::TimerEntry::kPending;
  if (!entry_->state.compare_exchange_strong(expected, detail::TimerEntry::kCancelled, std::memory_order_acq_rel))
    return false;
  if (entry_->owner) entry_->owner->note_cancelled();
  // The cancelled entry never runs now, so its callback can move to the new entry.
  *this = add_timer(deadline, std::move(entry_->callback));
  return true;
}

bool Timer::pending() const noexcept {
  return entry_ && entry_->state.load(std::memory_order_acquire) == detail::TimerEntry::kPending;
}
}  // namespace lionet
