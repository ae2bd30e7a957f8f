// lionet/sched/cancel.h: cancelling a fiber, deadlines owned by a fiber, shields, and hooks
// that run on cancel. The protocol (how a cancel races a wake-up and a deadline, exactly once)
// is protocol 10 at the top of scheduler.cc.
//
//   auto h = sched.spawn([] { ...; });
//   h.cancel();                         // its current and later blocking calls fail (below)
//
//   {
//     lionet::DeadlineScope d(std::chrono::milliseconds(200));
//     PQexec(conn, "SELECT pg_sleep(10)");        // a hooked libpq call: fails with ETIMEDOUT
//   }
//
// What a cancelled fiber (or one whose deadline passed) sees, until it ends:
//  - every blocking call that has to wait fails at once, and the one it waits in ends
//    promptly: sleeps return false; sync/ waits return their documented failure value
//    (Channel: false / nullopt, Event/WaitGroup/CondVar/Semaphore::try_acquire_until: false,
//    select: -1); JoinHandle::join() throws FiberInterrupted; net/, ssl/ and file/ calls fail
//    with ECANCELED (cancel) or ETIMEDOUT (deadline); hooked libc calls (read, recv, send,
//    connect, accept, poll, select, sleep, nanosleep, getaddrinfo, ...) return -1 with errno
//    ECANCELED or ETIMEDOUT (never EINTR, which libpq, hiredis and libcurl retry);
//  - a call that can complete without waiting (data already buffered, a permit free) still
//    completes;
//  - Mutex::lock(), SharedMutex and Semaphore::acquire() are not cancellable (they are locks:
//    their holders release them soon); their timed variants are.
// Plain threads are never cancelled; DeadlineScope and CancelShield do nothing there.
//
// Cost: nothing on a wait that nobody cancels beyond a few plain loads and stores (no locked
// instruction, no fence: protocol 10 puts the fence on the canceller, as membarrier(2)).
#pragma once

#include <cerrno>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "lionet/base/asymmetric_barrier.h"
#include "lionet/base/clock.h"
#include "lionet/fiber/fiber.h"

namespace lionet {

// Thrown where a blocking call has no failure value to return (JoinHandle::join,
// TaskGroup::wait): code() is ECANCELED or ETIMEDOUT.
class FiberInterrupted : public std::system_error {
 public:
  explicit FiberInterrupted(int err, const std::string& what) : std::system_error(err, std::generic_category(), what) {}
};

// Inside it, blocking calls of this fiber ignore cancellation and deadlines, so cleanup
// (closing a connection politely, writing a record) still works. Nests. No-op on a thread.
class CancelShield {
 public:
  CancelShield() noexcept;
  ~CancelShield();
  CancelShield(const CancelShield&) = delete;
  CancelShield& operator=(const CancelShield&) = delete;

 private:
  Fiber* fiber_;
};

// Every blocking call of this fiber in the scope fails with ETIMEDOUT (or its documented
// failure value) once `deadline` passes. Nested scopes keep the earliest deadline; the
// destructor restores the one before. Scopes must be destroyed in reverse order (RAII).
class DeadlineScope {
 public:
  explicit DeadlineScope(TimePoint deadline) noexcept;
  explicit DeadlineScope(Duration d) noexcept : DeadlineScope(now() + d) {}
  template <class Rep, class Period>
  explicit DeadlineScope(const std::chrono::duration<Rep, Period>& d) noexcept
      : DeadlineScope(std::chrono::ceil<Duration>(d)) {}
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  Fiber* fiber_;
  int64_t saved_ns_ = 0;
};

namespace detail {
struct OnCancelNode;
}

// A registration made by this_fiber::on_cancel(); destroying it unregisters, and if the
// callback is running, waits for it to end (so it may use what the caller owns).
class [[nodiscard]] OnCancel {
 public:
  OnCancel() = default;
  explicit OnCancel(detail::OnCancelNode* n) noexcept : node_(n) {}
  OnCancel(OnCancel&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  OnCancel& operator=(OnCancel&& o) noexcept;
  ~OnCancel() { reset(); }
  // Unregisters now (as the destructor does).
  void reset() noexcept;
  // The callback has been started (cancel or deadline).
  bool fired() const noexcept;

 private:
  detail::OnCancelNode* node_ = nullptr;
};

namespace this_fiber {
// cancel() was called for the running fiber. False on a plain thread.
bool cancelled() noexcept;
// The deadline of the innermost DeadlineScope in force (the earliest), or none.
std::optional<TimePoint> deadline() noexcept;
// What a blocking call that has to wait would fail with now: ECANCELED (cancelled),
// ETIMEDOUT (the deadline passed), or 0. Respects CancelShield (0 inside one).
int interruption() noexcept;
// Runs f, in a fiber of its own, when this fiber is cancelled or its deadline (the one in
// force now) passes while the registration lives (Go's context.AfterFunc): where a library's
// own cancel path is wired in (libpq's PQcancel, which stops the query on the server; closing
// the socket alone leaves it running). At most once per registration. A CancelShield does not
// affect registrations (it shields blocking calls): a cancel, or the deadline in force when
// registering, fires them inside one too. On a plain thread: f never runs.
OnCancel on_cancel(std::function<void()> f);
}  // namespace this_fiber

namespace detail {
// Cancels f (JoinHandle::cancel, TaskGroup, servers, Scheduler::stop). Thread-safe,
// idempotent; the caller keeps f alive for the duration of the call.
void cancel_fiber(Fiber* f) noexcept;

// ---- The waiting side of protocol 10, for sched/, sync/ and io/ (not for applications). ----

// True when waits of this fiber may be ended by a cancel or its deadline (no shield).
inline bool interruptible(const Fiber& f) noexcept { return f.cancel_.shield == 0; }
// The fiber's deadline (steady ns), or CancelState::kNoDeadline, shields respected.
inline int64_t wait_deadline_ns(const Fiber& f) noexcept {
  return f.cancel_.shield == 0 ? f.cancel_.deadline_ns : CancelState::kNoDeadline;
}
void wait_for_cancellers(CancelState& c) noexcept;

// Publishes fn(a, b) as what a canceller calls to end this wait. Returns false if the fiber
// is already cancelled: the caller then fails the wait itself (a canceller may be running fn
// meanwhile: fn and the caller must agree, as any two wakers do). Call only when
// interruptible(f); ALWAYS pair with end_wait(), on every path, and only after releasing any
// lock fn takes (a canceller inside fn may be waiting for that lock while end_wait waits for
// the canceller).
inline bool begin_wait(Fiber& f, CancelFn fn, void* a, void* b) noexcept {
  CancelState& c = f.cancel_;
  c.target_a.store(a, std::memory_order_relaxed);
  c.target_b.store(b, std::memory_order_relaxed);
  c.target_fn.store(fn, std::memory_order_release);
  light_barrier();  // the store above before the load below: protocol 10's Dekker pair
  return !__builtin_expect(c.flags.load(std::memory_order_relaxed) & CancelState::kCancelled, 0);
}
// Withdraws the target; returns once no canceller can still be inside it.
inline void end_wait(Fiber& f) noexcept {
  CancelState& c = f.cancel_;
  c.target_fn.store(nullptr, std::memory_order_relaxed);
  light_barrier();
  if (__builtin_expect(c.cancellers.load(std::memory_order_acquire) != 0, 0)) wait_for_cancellers(c);
}
// After a wait ended without its event: ECANCELED if the fiber is cancelled, else `otherwise`.
inline int interrupted_errno(const Fiber* f, int otherwise = ETIMEDOUT) noexcept {
  return f && f->cancel_.shield == 0 && (f->cancel_.flags.load(std::memory_order_relaxed) & CancelState::kCancelled)
             ? ECANCELED
             : otherwise;
}
}  // namespace detail
}  // namespace lionet
