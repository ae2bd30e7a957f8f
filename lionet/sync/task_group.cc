// lionet/sync/task_group.cc: the non-template half of TaskGroup (task_group.h).
#include "lionet/sync/task_group.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>

namespace lionet {
namespace {
Scheduler* scheduler_or_current(Scheduler* s) {
  if (s) return s;
  if (Scheduler* cur = Scheduler::current()) return cur;
  throw std::logic_error("lionet::TaskGroup: no scheduler given and none runs the caller");
}

}  // namespace

TaskGroup::TaskGroup(Scheduler* sched) : sched_(scheduler_or_current(sched)) {}

TaskGroup::TaskGroup(Duration timeout, Scheduler* sched)
    : sched_(scheduler_or_current(sched)), deadline_ns_(to_ns(now() + timeout)) {}

TaskGroup::~TaskGroup() {
  cancel();
  drain();
}

int64_t TaskGroup::child_deadline_ns() const noexcept {
  int64_t d = deadline_ns_;
  if (auto mine = this_fiber::deadline()) d = std::min(d, to_ns(*mine));
  return d;
}

void TaskGroup::add_child(JoinHandle<void> h) {
  std::lock_guard lk(mu_);
  if (cancelled_) h.cancel();
  // Forget children that ended, so a long-lived group does not grow.
  if (children_.size() >= 64 && children_.size() == children_.capacity())
    children_.erase(std::remove_if(children_.begin(), children_.end(), [](const auto& c) { return c.done(); }),
                    children_.end());
  children_.push_back(std::move(h));
}

void TaskGroup::note_end() noexcept {
  const int64_t t = to_ns(now());
  int64_t seen = last_end_ns_.load(std::memory_order_relaxed);
  while (seen < t && !last_end_ns_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
  }
}

void TaskGroup::on_child_error(std::exception_ptr e) noexcept {
  {
    std::lock_guard lk(mu_);
    if (!first_error_) first_error_ = std::move(e);
  }
  cancel();
}

void TaskGroup::cancel() noexcept {
  std::lock_guard lk(mu_);
  cancelled_ = true;
  for (auto& c : children_) c.cancel();
}

void TaskGroup::drain() noexcept {
  CancelShield shield;
  running_.wait();
}

void TaskGroup::wait() {
  std::optional<DeadlineScope> scope;
  if (deadline_ns_ != detail::CancelState::kNoDeadline) scope.emplace(from_ns(deadline_ns_));
  const bool all_ended = running_.wait();
  int interrupted = 0;
  if (!all_ended) {
    interrupted = this_fiber::interruption();
    if (interrupted == 0) interrupted = ETIMEDOUT;
    cancel();
    drain();
  }
  // Children that ended by themselves, but only once the group's deadline had passed (their
  // waits failed with ETIMEDOUT): the group timed out all the same.
  if (interrupted == 0 && deadline_ns_ != detail::CancelState::kNoDeadline &&
      last_end_ns_.load(std::memory_order_relaxed) >= deadline_ns_)
    interrupted = ETIMEDOUT;
  std::exception_ptr err;
  {
    std::lock_guard lk(mu_);
    last_end_ns_.store(0, std::memory_order_relaxed);
    err = std::exchange(first_error_, nullptr);
    children_.clear();  // all ended: dropping the handles frees them
    cancelled_ = false;
  }
  if (err) std::rethrow_exception(err);
  if (interrupted) throw FiberInterrupted(interrupted, "lionet::TaskGroup::wait: interrupted");
}

}  // namespace lionet
