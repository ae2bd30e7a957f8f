// lionet/sync/task_group.h: lionet::TaskGroup, structured concurrency (Trio's nursery, Go's
// errgroup): children that cannot outlive their group.
//
//   lionet::TaskGroup g(std::chrono::seconds(1));      // optional: a deadline for the group
//   g.spawn([&] { a = fetch_user(id); });
//   g.spawn([&] { b = fetch_orders(id); });
//   g.wait();   // joins both; the first exception cancels the other and is rethrown here
//
// Owns: its children's handles and the first exception one of them threw. Policy:
//  - a child inherits the deadline in force where spawn() was called, and the group's own
//    (the earlier of the two): its blocking calls fail past it (sched/cancel.h);
//  - the first child to throw cancels every other child; wait() rethrows that exception once
//    all children have ended;
//  - cancel() cancels every child (and children spawned later start cancelled);
//  - wait() interrupted (its fiber cancelled, or past its deadline) cancels the children,
//    waits for them and throws FiberInterrupted;
//  - the destructor cancels whatever still runs and waits for it: no child outlives the group.
// Concurrency: spawn(), cancel() and wait() from any fiber (children included) or thread;
// one wait() at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"

namespace lionet {

class TaskGroup {
 public:
  // Children run on `sched` (default: the scheduler running the caller; a plain thread must
  // name one).
  explicit TaskGroup(Scheduler* sched = nullptr);
  // A group whose children and wait() end `timeout` from now: their blocking calls fail with
  // ETIMEDOUT past it, and wait() then throws FiberInterrupted(ETIMEDOUT).
  explicit TaskGroup(Duration timeout, Scheduler* sched = nullptr);
  ~TaskGroup();
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Starts f() in a child fiber. Its exception, if any, is kept for wait() (the first one) and
  // cancels the other children. Throws as Scheduler::spawn does (no stack, stopping).
  template <class F>
  void spawn(F&& f, SpawnOptions opts = {}) {
    const int64_t deadline = child_deadline_ns();
    running_.add(1);
    try {
      add_child(sched_->spawn(
          [this, fn = std::decay_t<F>(std::forward<F>(f)), deadline]() mutable { run_child([&] { fn(); }, deadline); },
          opts));
    } catch (...) {
      running_.done();
      throw;
    }
  }

  // Joins every child. Rethrows the first child's exception; throws FiberInterrupted if the
  // waiting fiber is cancelled or the group's (or the waiter's) deadline passes first, after
  // the children have been cancelled and have ended. The group may be used again afterwards.
  void wait();
  // Cancels every child, now and spawned later, until wait() returns.
  void cancel() noexcept;
  // Children spawned and not yet ended (a snapshot).
  std::size_t running() const noexcept { return static_cast<std::size_t>(running_.count()); }

 private:
  template <class Body>
  void run_child(Body&& body, int64_t deadline_ns) noexcept {
    {
      std::optional<DeadlineScope> scope;
      if (deadline_ns != detail::CancelState::kNoDeadline) scope.emplace(from_ns(deadline_ns));
      try {
        body();
      } catch (...) {
        on_child_error(std::current_exception());
      }
    }
    note_end();
    running_.done();  // the last touch of *this: wait() may return and the group go
  }
  int64_t child_deadline_ns() const noexcept;
  void note_end() noexcept;  // records when the latest child ended (the group timeout's test)
  void add_child(JoinHandle<void> h);
  void on_child_error(std::exception_ptr e) noexcept;
  // Waits for every child with cancellation and deadlines shielded off.
  void drain() noexcept;

  Scheduler* sched_;
  int64_t deadline_ns_ = detail::CancelState::kNoDeadline;
  WaitGroup running_;
  Mutex mu_;  // protects the fields below (never held across a child's join)
  std::vector<JoinHandle<void>> children_;  // for cancel(); never joined (running_ counts)
  std::exception_ptr first_error_;
  bool cancelled_ = false;
  std::atomic<int64_t> last_end_ns_{0};  // steady ns at which the latest child ended
};

}  // namespace lionet
