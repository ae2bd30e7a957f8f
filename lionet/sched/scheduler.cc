// lionet/sched/scheduler.cc: workers running fibers: switching, run queues, spawning, joining.
// Idle workers (sleeping, searching, the driver's poller) are idle.cc; construction, stop and
// the public Scheduler object are lifecycle.cc. The protocols of all three are written here.
//
// PROTOCOLS (written once, here, where they run)
//
// 1. Switching. Every switch goes through Worker::switch_away / yield_current / run_fiber /
//    finish_current and carries a SwitchMsg{worker, prev, action, lock} on the stack of the
//    context that leaves. The context that resumes (on_resumed, inlined into each switch) takes
//    its worker from the message (no thread-local read after a jump), stores the saved context
//    into prev, then performs the action: kRequeue (yield) appends prev to the worker's private
//    FIFO; kPark moves prev RUNNING -> PARKED by CAS unless an unpark already set NOTIFIED, in
//    which case prev is requeued; kParkUnlock (park_and_unlock) stores PARKED and then releases
//    the caller's lock, under which every waker must find its waiter, so no unpark can race
//    with it. That lock is held across the jump only when the switch is short: before a slow
//    tick, a fresh fiber's first run or a wait for a stack reader, switch_away releases it
//    first and parks prev with kPark instead (release_before_switch). kFinish releases prev's
//    stack, marks it DONE, wakes its joiner and drops the scheduler's reference. Doing this on
//    the far side of the jump is what makes it safe: prev is not visible to any other worker
//    until its context is saved. Fibers switch directly to the next runnable fiber (one jump,
//    through fiber/detail/context.h's raw switch, inlined); the worker's main loop is entered
//    only when the worker has nothing local to run. The yield and park paths read the worker's
//    thread-local once, before their jump, and never after.
//
// 2. Run queues (per worker, in order of preference): a LIFO slot for fibers woken by the
//    running fiber (message-passing latency; at most kMaxLifoStreak consecutive uses, so two
//    fibers waking each other cannot starve the rest), pinned fibers, the local ring
//    (detail/local_queue.h: spawns and wake-ups, stealable), then `mine`: an owner-only
//    intrusive FIFO (no atomics) of fibers this worker requeued itself (yields, parks that an
//    unpark beat) and of ring overflow. A yield thus goes behind everything runnable here; each
//    slow tick gives `mine` one turn ahead of the ring, so a yielder waits at most
//    kSlowTickInterval scheduling points per fiber ahead of it. `mine` is invisible to thieves:
//    at each slow tick, if another worker is idle (a relaxed look at idle_state), its older
//    half moves into the ring and, if nobody is searching, one sleeper is woken (publish_mine;
//    the ring push comes before notify_parked's fence, so protocol 3/4's Dekker pair holds).
//    A wake after which no thief took anything from us doubles the wait before the next (at
//    most kPublishBackoffMax slow ticks), reset once a steal from us is seen or every worker
//    is busy. A missed hint costs
//    parallelism, never a fiber: `mine` is always run by its owner. Every kInjectCheckEvery
//    slow ticks the inject queue is looked at first (one fiber), so outside submissions are
//    never starved by a busy worker. Idle workers steal half of a random victim's ring.
//    The slow tick (every kSlowTickInterval scheduling points) also refreshes the coarse
//    clock, fires due timers and may poll the driver (8).
//
// 3. Wake-up (no thundering herd). idle_state packs (searching << 16) | unparked. A push of
//    new work on a multi-worker scheduler (spawn, wake-up, submission from outside) issues a
//    seq_cst fence and then reads idle_state; only if no worker is searching and some worker
//    sleeps does it take sleepers_mu and wake ONE sleeper, already counted as searching. At most
//    half the workers search (steal) at once. A searcher that finds work and was the last
//    searcher wakes one more sleeper, so work spreads one worker at a time.
//
// 4. Parking (no lost wake-up). A worker with nothing to do fires due timers, registers as a
//    sleeper (a seq_cst RMW on idle_state), then re-checks every queue; the pusher's fence in
//    (3) pairs with that RMW (Dekker): either the pusher sees the sleeper, or the sleeper sees
//    the work. It then sleeps on its futex word until woken or until its earliest timer is due.
//
// 5. Fiber park/unpark (park.cc): one atomic state word with a NOTIFIED bit, so an unpark that
//    arrives while the fiber is still switching out is kept, never lost. An unpark that finds
//    PARKED (acquire) stores RUNNABLE: a parked fiber has exactly one unparker and nobody else
//    writes its state, so no RMW is needed there (debug builds CAS, to catch a double unpark).
//
// 6. Shutdown. stop() sets `stopping` (seq_cst) and wakes every worker. Workers keep running
//    fibers; a worker that finds nothing to do and sees alive() == 0 wakes the others and
//    exits. alive() sums every worker's finished counter BEFORE the spawned counters, so it can
//    only overestimate (a fiber's spawn happens-before any finish that depends on it). Spawns
//    from outside threads bump external_spawned before checking `stopping` (both seq_cst), so a
//    spawn either is counted by a worker's final alive() check or is refused.
//
// 6b. Shutdown that cannot finish by itself. stop() waits on exit_cv for the workers; if every
//    worker sleeps (all registered as sleepers, inject queue empty) while alive() > 0, only
//    parked fibers nobody can wake remain. After SchedulerOptions::stop_io_grace of that, the
//    driver's cancel_all() wakes IO waiters with ECANCELED (and fails later waits) and every
//    fiber the registry lists is cancelled (protocol 10); after stop_timeout more, the rest
//    (shielded, or in an uncancellable wait) are dumped to the log and `abandoned` is set:
//    workers exit with fibers alive, and ~Scheduler leaks the scheduler (parked fibers' wait
//    nodes may still be linked into objects that outlive it). Fibers that make progress are
//    always waited for.
//
// 7. Timers (timer.cc) belong to the worker that armed them and are checked at every slow
//    tick (kSlowTickInterval scheduling points) and before the worker sleeps; cancel() is
//    thread-safe.
//
// 8. Driver (driver.h, the IO reactor's seam). An idle worker that wins `polling` waits in
//    driver->wait(deadline of its earliest timer) instead of its futex; it is still registered
//    as a sleeper, and Worker::wake() reaches it through driver->wake() (in_driver and
//    wake_word are a Dekker pair, both seq_cst). Fibers the driver unparks land on the polling
//    worker. When the poller leaves wait() with work, it wakes another sleeper, which becomes
//    the next poller, so some idle worker keeps watching for events. Busy workers poll the
//    driver without blocking when no one else is: every kDriverPollMin slow ticks (64
//    scheduling points) while polls deliver events, doubling up to kDriverPollMax (1024) while
//    they come back empty (an empty epoll_wait is a ~250 ns syscall: it was 8% of a yield at a
//    fixed 61), and at least once per kDriverPollMaxNs of the coarse clock (~1 ms plus the
//    clock's 1-4 ms resolution when slices are long).
//    Bound: a ready fd is noticed at once by an idle poller; with every worker busy, within
//    1024 scheduling points (64 while events flow) of any worker that reaches one.
// 8b. Replacing the driver (set_driver: a caller's IOManager replacing the scheduler's own, or
//    any IOManager detaching). The setter stores the new driver (seq_cst), then waits until no
//    worker can be inside the old one: a worker takes `polling` (seq_cst RMW), re-reads
//    `driver` (seq_cst) and only then announces it in `polling_driver`; the setter waits while
//    `polling` is held and `polling_driver` is not the new driver (null: not announced yet; the
//    old one: it calls old->wake()), and while `driver_wakers` (Worker::wake() bumps it before
//    reading `driver`) is non-zero. Dekker pairs both ways: either the worker sees the new
//    driver, or the setter sees the worker and waits. A poller already inside the new driver is
//    not waited for (waiting for it to leave a wait with no deadline would never end). So the
//    old driver may be destroyed as soon as set_driver returns.
// 8c. A per-worker driver (Driver::per_worker: io_uring with a single-issuer ring per worker).
//    Its events are reaped only by the worker whose source they are on, so `polling` is not
//    used: every worker polls its own part (the busy polls of 8, protocol 9's idle polls, and
//    once when it runs out of work, instead of the short idle spin before parking: what its
//    fibers queued there, io_uring SQEs, reaches the kernel only when it polls or waits) and
//    every idle worker waits in its own part instead of its futex, still registered as a
//    sleeper; Worker::wake() ends that wait with driver->wake_worker(index) (the same Dekker
//    pair of in_driver and wake_word as in 8). 8b holds per worker: a worker announces itself
//    in its own_polling (seq_cst) before re-reading `driver` and then says which driver it went
//    into in own_polling_driver (nullptr again before it clears own_polling); set_driver waits,
//    for each worker as for the shared pair, while own_polling is set and own_polling_driver is
//    not the new driver, waking the worker with old->wake_worker() while it is inside the old
//    one. SchedulerImpl::driver_per_worker (set by set_driver before it stores the driver) only
//    picks which token a worker tries first: a worker that finds the announced driver is not
//    per worker gives its own token back and takes `polling` as in 8, so a shared driver
//    never has two workers inside.
//
// 9. Polling before sleeping (SchedulerOptions::idle_poll). A worker with nothing to run and
//    a driver, when workers do not outnumber CPUs, first polls for up to idle_poll: the driver
//    without blocking (poll_driver: only if no other worker holds `polling`, so never two in
//    the reactor), its due timers, and has_visible_work, and runs the first fiber that appears.
//    It is not registered as a sleeper meanwhile, so protocol 3's pushers see it as busy and may
//    wake a sleeper instead: that costs a wake-up, never a fiber, because the poller finds the
//    pushed work itself within one round. It checks `stopping` each round and then goes
//    through park_idle as before, so shutdown (6) and parking (4) are unchanged.
//
// 10. Cancellation and deadlines (cancel.h, cancel.cc; the fields in fiber/detail/
//    cancel_state.h). A cancel must end the wait its fiber is in exactly once, racing the
//    wait's own waker and timer, without costing a wait nobody cancels a locked instruction.
//    - A waiting fiber publishes its wait's target, fn(a, b), in its CancelState (plain
//      stores; begin_wait), then, after light_barrier() (a compiler barrier), reads
//      `flags`: if already cancelled it withdraws the target and fails the wait itself. The
//      canceller sets `flags` (RMW), bumps `cancellers`, runs heavy_barrier() (membarrier(2):
//      a full barrier on every CPU running our threads; base/asymmetric_barrier.h), then reads
//      the target: the asymmetric Dekker pair, so either the waiter sees the cancel or the
//      canceller sees the target, with no fence on the waiter's side.
//    - The target decides the wake-up as any other waker would, so exactly one party wakes the
//      fiber: for a WaitClaim (every timed wait, IO waits, untimed waits of CondVar, Event,
//      WaitGroup, select, sleeps) fn expires the claim, which a notifier or the deadline's
//      timer may win instead (park.h); for an untimed channel wait fn takes the waiter's node
//      out of its queue under the channel's lock unless a partner took it (W2), and wakes it
//      with kChanTimeout; for join it CASes the joiner word back to 0 unless the finisher took
//      it; for an io_uring op it asks the kernel to cancel that op (the completion wakes).
//    - After the wait, the waiter withdraws the target (a plain store, light_barrier()) and
//      returns only once `cancellers` is 0: the target's memory (a claim, a node on its stack,
//      the primitive) stays valid while a canceller may still be inside fn. A canceller
//      that read the target before the withdrawal is counted; one that comes after reads null.
//    - Deadlines: DeadlineScope sets the fiber's own deadline (owner-only field); a claimed
//      wait takes the earlier of its own deadline and the fiber's (the same timer), an untimed
//      channel wait becomes a timed one while a scope is in force. CancelShield (a depth,
//      owner-only) skips all of it: no target published, no fiber deadline applied.
//    - Cost measured (bench/fiber_bench, bench/sync_bench before/after, interleaved): within
//      the run-to-run noise on yield, spawn+join and channel ping-pong; a cancel costs the
//      canceller one membarrier (bench/sync_bench BM_CancelLatency beside BM_WakeLatency).
//    - Scheduler::stop (6b) cancels every listed fiber after stop_io_grace of idleness; only a
//      fiber that stays in a shield or an uncancellable wait (Mutex::lock, Semaphore::acquire)
//      is abandoned after stop_timeout.
//
// 11. Reading a switched-out fiber's stack (fiber dumps with stacks, fiber_dump.cc; the walk
//    itself is fiber/stack_trace.h). A parked or runnable fiber's stack may be walked only while
//    it cannot be resumed, and the resume path must not pay for that with a lock or a fence.
//    - A dump raises every worker's `stack_readers` and runs heavy_barrier() (membarrier(2)).
//      A worker about to resume f stores RUNNING into f's state (prepare_to_run), then, after
//      light_barrier() (a compiler barrier), reads its own `stack_readers`: the asymmetric
//      Dekker pair of protocol 10. If it sees a reader it takes and drops `stack_read_mu`
//      before the jump. A fiber's first context (first_run: its stack and ctx_) is made only
//      after that look, so a dump never reads one being written.
//    - The dump walks one fiber at a time, each under `stack_read_mu`, reading f's state first:
//      RUNNING (or DONE, or never run: no saved context yet) is skipped. The walk leaves out
//      the switch's own frames (through Worker::switch_away). A fiber it sees PARKED or RUNNABLE cannot be
//      resumed until the walk ends: a worker that published RUNNING before the barrier is
//      seen as RUNNING; one that publishes after it sees the reader and waits on the mutex.
//    - The Fiber object stays valid because the walk runs under the registry shard's reader
//      lock (fiber_registry.h): spawns and exits on that worker wait for the shard's walks;
//      switches wait at most for the walk of one stack, and only while a dump runs.
//    - Cost when nobody dumps: one relaxed load of a worker-owned word per switch.
//
#include "lionet/sched/scheduler.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <thread>

#include <spdlog/spdlog.h>

#include "lionet/base/asymmetric_barrier.h"
#include "lionet/fiber/debug_info.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/detail/coarse_clock.h"
#include "lionet/sched/detail/futex.h"
#include "lionet/sched/detail/worker.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/os_locks.h"
#include "lionet/sched/park.h"
#include "lionet/sched/timer.h"

namespace lionet {
namespace detail {
constinit thread_local Worker* t_worker = nullptr;

namespace {

constexpr uint32_t kMaxLifoStreak = 3;
// The slow tick (Worker::slow_tick) comes every kSlowTickInterval scheduling points: the coarse
// clock and timers then; the inject queue every kInjectCheckEvery slow ticks; the driver every
// kDriverPollMin..kDriverPollMax slow ticks (adaptive, protocol 8) and at least once per
// kDriverPollMaxNs of coarse time; publishing of yielders to idle workers (protocol 2).
constexpr uint32_t kSlowTickInterval = 32;
constexpr uint32_t kInjectCheckEvery = 2;  // 64 scheduling points
constexpr uint32_t kDriverPollMin = 2;  // 64 scheduling points
constexpr uint32_t kDriverPollMax = 32;  // 1024 scheduling points
constexpr int64_t kDriverPollMaxNs = 1'000'000;
constexpr uint32_t kPublishBackoffMax = 64;  // slow ticks between wakes that found nothing to steal
constexpr int kIdleSpinRounds = 64;  // x16 pause: a few microseconds

// A kCanary stack's canary is checked whenever its fiber switches out (guard pages need no check:
// the kernel reports those). One byte compare for the others: measured in fiber_bench.
inline void check_stack(Fiber* self) noexcept {
  if (LIONET_UNLIKELY(self->stack_.guard == StackGuard::kCanary) && !stack_canary_intact(self->stack_))
    die_of_stack_overflow(self->id(), self->name().c_str(), self->stack_.size, "canary, at a switch");
}

// A pthread mutex held across a scheduling point (os_locks.h): one thread-local load.
inline void check_os_locks(Fiber* self) noexcept {
  if (LIONET_UNLIKELY(t_os_locks_held != 0)) os_lock_held_at_switch(self);
}

void set_state(Fiber* f, FiberState s) noexcept {
  // Plain store: only the worker that owns f's current transition writes here; an unpark
  // can only race with RUNNING (see park.cc), and RUNNING is left only by the fiber itself.
  LIONET_DCHECK((f->state_.load(std::memory_order_relaxed) & Fiber::kNotifiedBit) == 0,
                "a fiber with a pending unpark was rescheduled (did it yield while published as a waiter?)");
  f->state_.store(static_cast<uint32_t>(s), std::memory_order_release);
}

void on_resumed(Transfer t) noexcept;
void after_switch_slow(Worker* w, Fiber* prev, AfterSwitch action, void* from_ctx) noexcept;

void fiber_entry(Transfer t) {
  on_context_start();
  on_resumed(t);
  Fiber* self = current_fiber();
  self->run_body();
  current_worker()->finish_current(self);
}

}  // namespace

std::size_t allowed_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return std::max(1u, std::thread::hardware_concurrency());
  return static_cast<std::size_t>(std::max(1, CPU_COUNT(&set)));
}

namespace {

// The far side of every jump (protocol 1). Inlined into each switch; the common case (a yield)
// stays on the fast path, the others go out of line.
[[gnu::always_inline]] inline void on_resumed(Transfer t) noexcept {
  auto* m = static_cast<SwitchMsg*>(t.data);
  Worker* w = m->worker;  // the worker that jumped here is the one we now run on
  Fiber* prev = m->prev;
  const AfterSwitch action = m->action;  // read before prev can run elsewhere
  SpinLock* const lock = m->lock;
  if (LIONET_LIKELY(action == AfterSwitch::kRequeue)) {
    prev->ctx_.fctx = t.from_ctx;
    prev->state_since_ns_.store(w->coarse_now_ns, std::memory_order_relaxed);
    set_state(prev, FiberState::kRunnable);
    w->requeue(prev);
    return;
  }
  if (LIONET_LIKELY(action == AfterSwitch::kPark)) {
    prev->ctx_.fctx = t.from_ctx;
    w->fiber_parks.inc();
    // Before the CAS: a dump that sees PARKED (acquire) sees this stamp too.
    prev->state_since_ns_.store(w->coarse_now_ns, std::memory_order_relaxed);
    uint32_t s = static_cast<uint32_t>(FiberState::kRunning);
    // release: publishes ctx_ to the unparker (which loads PARKED with acquire).
    if (LIONET_UNLIKELY(!prev->state_.compare_exchange_strong(s, static_cast<uint32_t>(FiberState::kParked),
                                                              std::memory_order_acq_rel, std::memory_order_acquire))) {
      // NOTIFIED arrived while prev was switching out: it never really parks.
      prev->state_.store(static_cast<uint32_t>(FiberState::kRunnable), std::memory_order_release);
      w->requeue(prev);
    }
    return;
  }
  if (action == AfterSwitch::kParkUnlock) {
    prev->ctx_.fctx = t.from_ctx;
    w->fiber_parks.inc();
    prev->state_since_ns_.store(w->coarse_now_ns, std::memory_order_relaxed);
    // No unpark can be in flight: wakers take the waiter under `lock`, held until just below.
    LIONET_DCHECK(prev->state_.load(std::memory_order_relaxed) == static_cast<uint32_t>(FiberState::kRunning),
                  "park_and_unlock: unparked without the lock");
    // release: publishes ctx_; the waker's unlock/lock of `lock` orders its load after it.
    prev->state_.store(static_cast<uint32_t>(FiberState::kParked), std::memory_order_release);
    lock->unlock();
    return;
  }
  after_switch_slow(w, prev, action, t.from_ctx);
}

[[gnu::noinline]] void after_switch_slow(Worker* w, Fiber* prev, AfterSwitch action, void* from_ctx) noexcept {
  if (!prev) {
    w->main_ctx.fctx = from_ctx;
    return;
  }
  switch (action) {
    case AfterSwitch::kNothing:
    case AfterSwitch::kRequeue:  // kRequeue, kPark and kParkUnlock: handled in on_resumed
    case AfterSwitch::kPark:
    case AfterSwitch::kParkUnlock: prev->ctx_.fctx = from_ctx; break;
    case AfterSwitch::kFinish: {
      // First: once unlisted no dump can reach prev, and only then may it be freed below. A
      // fiber listed by another worker (it was stolen, or migrated) can only be unlisted by that
      // worker (fiber_registry.h): it is handed back with the scheduler's reference, and that
      // worker unlists and releases it at its next slow tick.
      FiberRegistryShard* const shard = prev->reg_shard_;
      Worker* const lister = shard ? static_cast<Worker*>(shard->owner) : nullptr;
      const bool hand_back = lister && lister != w;
      if (!hand_back) FiberRegistryShard::remove(prev);
      w->stacks.release(prev->stack_);
      prev->stack_ = Stack{};
      destroy_context(prev->ctx_);
      if (prev->exception()) log_fiber_exception(*prev, prev->exception(), !prev->sole_owner());
      prev->state_.store(static_cast<uint32_t>(FiberState::kDone), std::memory_order_release);
      // acq_rel: release the result/exception to the joiner; acquire its Parker. A detached
      // fiber (no handle) has no joiner: no RMW. The joiner's Parker stays valid until unparked.
      const uintptr_t joiner = prev->sole_owner() ? 0 : prev->joiner_.exchange(1, std::memory_order_acq_rel);
      // The hand-back gives away our reference (prev may be freed after it), and comes before
      // `finished` moves: see Worker::run's exit.
      if (hand_back) lister->hand_back(prev);
      w->finished.inc();  // before the joiner runs: a joined fiber is counted as finished
      if (joiner > 1) reinterpret_cast<Parker*>(joiner)->unpark();
      if (!hand_back) prev->release();  // detached: the only reference, freed without an RMW
      break;
    }
  }
}

std::string thread_name(const std::string& base, int index) {
  std::string n = base.substr(0, 10) + "-w" + std::to_string(index);
  return n.substr(0, 15);  // the kernel's limit
}
}  // namespace

[[gnu::noinline]] Worker* current_worker() noexcept {
  asm volatile("" ::: "memory");  // not `pure`: a fiber may resume on another thread
  return t_worker;
}

// ---------------------------------------------------------------- Worker

Worker::Worker(SchedulerImpl* s, int i, StackPool& pool)
    : sched(s),
      index(i),
      queue(s->opts.local_queue_capacity),
      fits_cpus(static_cast<std::size_t>(s->opts.threads) <= allowed_cpus()),
      use_mine(fits_cpus),
      spill_buf(use_mine ? nullptr : new Fiber*[s->opts.local_queue_capacity / 2 + 1]),
      stacks(pool, s->opts.stack_cache_per_worker),
      rng(0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1)),
      registry(FiberRegistryShard::Mode::kOwnerBiased) {
  registry.owner = this;
}

Worker::~Worker() {
  if (!sched->abandoned.load()) drain_handback();  // nothing left normally (run() drains at exit)
  sched->stack_pool.unreserve(stack_credits + stacks_started);
}

void Worker::hand_back(Fiber* f) noexcept {
  Fiber* head = handback.load(std::memory_order_relaxed);
  do {
    f->next_ = head;  // free: a finished fiber is in no queue
    // release: the finishing worker's writes to f (DONE, its result) before the owner frees it.
  } while (!handback.compare_exchange_weak(head, f, std::memory_order_release, std::memory_order_relaxed));
}

void Worker::drain_handback() noexcept {
  if (!handback.load(std::memory_order_relaxed)) return;
  Fiber* f = handback.exchange(nullptr, std::memory_order_acquire);
  while (f) {
    Fiber* next = f->next_;
    f->next_ = nullptr;
    FiberRegistryShard::remove(f);  // we listed it: owner-only removal
    f->release();
    f = next;
  }
}

void Worker::run() {
  t_worker = this;
  install_stack_overflow_handler();
  init_thread_context(main_ctx);
  pthread_setname_np(pthread_self(), thread_name(sched->opts.name, index).c_str());
  coarse_now_ns = coarse_monotonic_ns();
  // Spinning briefly before sleeping saves a futex sleep/wake pair when work arrives soon (a
  // spawning fiber on another worker); only when workers do not outnumber CPUs, or the spin
  // would steal the CPU from the worker that is about to produce the work.
  const bool may_spin = sched->workers.size() > 1 && fits_cpus;
  // Protocol 9: only when the workers do not outnumber the CPUs this thread may run on (a
  // process pinned with taskset counts its set), or polling would take the CPU from the
  // worker or process that is about to produce the event.
  idle_poll_ns = fits_cpus ? std::chrono::duration_cast<std::chrono::nanoseconds>(sched->opts.idle_poll).count() : 0;
  for (;;) {
    Fiber* f = find_work();
    // Protocol 8c: with a per-worker driver only we reap our part, and what our fibers queued
    // there (io_uring SQEs) goes to the kernel only when we poll or wait: poll it once, then
    // wait in it (park_idle) without the spin, which would hold both back.
    const bool own_driver = sched->driver_per_worker.load(std::memory_order_relaxed);
    if (!f && own_driver && poll_driver()) f = find_work();
    for (int i = 0; !f && may_spin && !own_driver && i < kIdleSpinRounds; ++i) {
      for (int k = 0; k < 16; ++k) cpu_relax();
      if (sched->has_visible_work(*this)) f = find_work();
    }
    if (!f && idle_poll_ns > 0) f = poll_before_sleep();
    if (f) {
      run_fiber(f);
      continue;
    }
    if (sched->stopping.load(std::memory_order_seq_cst) && (sched->alive() == 0 || sched->abandoned.load())) {
      // alive() == 0 was read after every finish's `finished` increment, and each finish hands
      // its fiber back before that increment: every hand-back to us is visible now.
      drain_handback();
      sched->notify_all();
      break;
    }
    park_idle();
  }
  t_worker = nullptr;
  {
    std::lock_guard<std::mutex> lk(sched->exit_mu);
    ++sched->exited;
  }
  sched->exit_cv.notify_all();
}

// ---- the owner-only FIFO of fibers this worker requeued (protocol 2) ----

inline void Worker::push_mine(Fiber* f) noexcept {
  f->next_ = nullptr;
  if (mine_tail) {
    mine_tail->next_ = f;
  } else {
    mine_head = f;
  }
  mine_tail = f;
  ++mine_len;
}

inline Fiber* Worker::pop_mine() noexcept {
  Fiber* f = mine_head;
  mine_head = f->next_;
  if (!mine_head) mine_tail = nullptr;
  f->next_ = nullptr;
  --mine_len;
  return f;
}

inline void Worker::requeue(Fiber* f) noexcept {
  if (LIONET_UNLIKELY(f->pinned_worker() >= 0 || !use_mine)) {
    schedule_local(f, /*lifo=*/false, /*notify=*/false);  // its home's pinned list, or the ring
    return;
  }
  push_mine(f);
}

void Worker::overflow(Fiber* f) noexcept {
  if (use_mine) {
    push_mine(f);
  } else {
    spill(f);
  }
}

// use_mine off: moves the older half of the full ring, and f, to the inject queue in one batch.
void Worker::spill(Fiber* f) noexcept {
  Fiber** batch = spill_buf.get();
  uint32_t n = queue.take_half(batch);
  if (n == 0) {
    if (queue.try_push(f)) return;
    sched->inject.push(f);
    return;
  }
  batch[n++] = f;
  for (uint32_t i = 0; i + 1 < n; ++i) batch[i]->next_ = batch[i + 1];
  sched->inject.push_batch(batch[0], batch[n - 1], n);
}

// Slow tick: fibers in `mine` are invisible to thieves. When another worker is idle (sleeping
// or searching: a relaxed look at idle_state, a hint), the older half of `mine` moves to the
// stealable ring and, if nobody is searching, one sleeper is woken (notify_parked: the usual
// Dekker pair, the work being in the ring first). A wake whose thief finds the work already run
// by us (short slices: no steal from our ring since) doubles the wait before the next one, up to
// kPublishBackoffMax slow ticks; it resets once a steal from us is seen or every worker is busy. A missed hint costs parallelism, never a fiber: `mine`
// is always run by its owner.
void Worker::publish_mine() noexcept {
  const uint32_t n = static_cast<uint32_t>(sched->workers.size());
  const uint32_t s = sched->idle_state.load(std::memory_order_relaxed);
  const uint64_t stolen = stolen_from.load(std::memory_order_relaxed);
  if ((searching_of(s) == 0 && unparked_of(s) >= n) || stolen != stolen_seen) {
    stolen_seen = stolen;
    publish_every = publish_countdown = 1;
    if (searching_of(s) == 0 && unparked_of(s) >= n) return;
  }
  if (--publish_countdown != 0) return;
  for (uint32_t k = mine_len - mine_len / 2; k > 0; --k) {
    // Unlinked before it is published: once in the ring a thief may run it at once, and its
    // next_ is reused (a hand-back when it finishes) before we could read it.
    Fiber* f = pop_mine();
    if (!queue.try_push(f)) {  // full: f goes back to the front of `mine`
      f->next_ = mine_head;
      mine_head = f;
      if (!mine_tail) mine_tail = f;
      ++mine_len;
      break;
    }
  }
  if (searching_of(s) == 0) sched->notify_parked();
  publish_countdown = publish_every;
  publish_every = std::min(publish_every * 2, kPublishBackoffMax);
}

// First run: take the stack reserved at spawn (submit) and set up its guard here, on the worker
// that runs it, so that a million spawns spread those system calls over the workers.
[[gnu::noinline]] void Worker::first_run(Fiber* f) noexcept {
  f->stack_ = stacks.acquire_reserved();
  if (++stacks_started == kStackCreditBatch) sched->stack_pool.unreserve(std::exchange(stacks_started, 0));
  if (f->stack_.guard == StackGuard::kNone) sched->stack_pool.protect(f->stack_);
  make_context(f->ctx_, f->stack_.bottom, f->stack_.size, fiber_entry);
}

[[gnu::always_inline]] inline void Worker::prepare_to_run(Fiber* f) noexcept {
  // Protocol 11: RUNNING is published before this look (a compiler barrier; a fiber dump pays
  // the membarrier), so a dump either sees f running or is waited for here. Only then is a
  // fresh fiber's context made (first_run writes ctx_ and its stack, which a dump reads of a
  // fiber it sees RUNNABLE).
  // relaxed: both are read by others only after an acquire of state_ (unpark) or for display.
  f->worker_.store(this, std::memory_order_relaxed);
  f->state_since_ns_.store(coarse_now_ns, std::memory_order_relaxed);
  set_state(f, FiberState::kRunning);
  light_barrier();
  if (LIONET_UNLIKELY(stack_readers.load(std::memory_order_relaxed) != 0)) wait_for_stack_reader();
  if (LIONET_UNLIKELY(!f->ctx_.fctx)) first_run(f);
  switches.inc();
  running = f;
  set_current_fiber(f);
}

namespace {
// Debuggers read a fiber's worker index through Fiber::worker_ (fiber/debug_info.h).
struct PublishWorkerLayout {
  PublishWorkerLayout() noexcept {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
    lionet_debug_info.worker_index = static_cast<uint32_t>(offsetof(Worker, index));
#pragma GCC diagnostic pop
  }
} g_publish_worker_layout;
}  // namespace

uintptr_t switch_away_entry() noexcept {
  // A non-virtual member function pointer holds the function's address (Itanium C++ ABI).
  static const uintptr_t entry = [] {
    auto p = &Worker::switch_away;
    uintptr_t a = 0;
    static_assert(sizeof(p) >= sizeof(a));
    std::memcpy(&a, &p, sizeof a);
    return a;
  }();
  return entry;
}

void Worker::wait_for_stack_reader() noexcept {
  std::lock_guard<std::mutex> lk(sched->stack_read_mu);  // the reader of one stack is done
}

void SchedulerImpl::begin_stack_reads() noexcept {
  for (auto& w : workers) w->stack_readers.fetch_add(1, std::memory_order_relaxed);
  heavy_barrier();  // every worker now sees a reader, or had published RUNNING before
}

void SchedulerImpl::end_stack_reads() noexcept {
  for (auto& w : workers) w->stack_readers.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::run_fiber(Fiber* f) noexcept {
  prepare_to_run(f);
  SwitchMsg m{this, nullptr, AfterSwitch::kNothing};
  Transfer t = jump(main_ctx, f->ctx_, &m);
  on_resumed(t);
}

// park_and_unlock's lock is held across the switch only while the switch is a few dozen
// instructions: not across a slow tick (timers, a driver poll: system calls), a fresh fiber's
// first run (a stack taken, a guard installed, page faults on first touch) or a wait for a
// stack reader. There the caller's lock is released first and prev parks as park() does (the
// CAS of kPark takes an unpark that comes in between). A worker spinning on a channel's lock
// thus never waits on a page fault: a million fibers parking on one channel spent a third of
// their time in that spin.
[[gnu::noinline]] static void release_before_switch(SwitchMsg& m) noexcept {
  m.lock->unlock();
  m.lock = nullptr;
  m.action = AfterSwitch::kPark;
}

void Worker::switch_away(Fiber* self, AfterSwitch action, SpinLock* lock) noexcept {
  check_stack(self);
  check_os_locks(self);
  SwitchMsg m{this, self, action, lock};
  if (action == AfterSwitch::kParkUnlock && LIONET_UNLIKELY(tick_countdown <= 1)) release_before_switch(m);
  Fiber* next = next_runnable();  // the slow tick, if due, runs in here
  // A fresh fiber's first run or a stack reader's wait comes in prepare_to_run below.
  if (m.action == AfterSwitch::kParkUnlock && next &&
      LIONET_UNLIKELY(!next->ctx_.fctx || stack_readers.load(std::memory_order_relaxed) != 0))
    release_before_switch(m);
  Transfer t;
  if (next) {
    prepare_to_run(next);
    t = jump(self->ctx_, next->ctx_, &m);
  } else {
    running = nullptr;
    set_current_fiber(nullptr);
    t = jump(self->ctx_, main_ctx, &m);
  }
  // Resumed, possibly on another worker: `this` is stale; on_resumed reads the worker from m.
  on_resumed(t);
}

[[gnu::always_inline]] inline bool Worker::yield_current(Fiber* self) noexcept {
  check_os_locks(self);  // a scheduling point even when nothing else runs
  Fiber* next = next_runnable();
  if (!next && !sched->inject.empty()) next = take_inject();
  if (!next) return false;  // nothing else to run: keep going without a switch
  check_stack(self);
  SwitchMsg m{this, self, AfterSwitch::kRequeue};
  prepare_to_run(next);
  Transfer t = jump(self->ctx_, next->ctx_, &m);
  on_resumed(t);
  return true;
}

void Worker::finish_current(Fiber* self) noexcept {
  // The message lives on self's stack, which stays mapped until the resumed side (on_resumed,
  // kFinish) has read it and released the stack.
  check_stack(self);
  SwitchMsg m{this, self, AfterSwitch::kFinish};
  Fiber* next = next_runnable();
  if (next) {
    prepare_to_run(next);
    jump_final(next->ctx_, &m);
  }
  running = nullptr;
  set_current_fiber(nullptr);
  jump_final(main_ctx, &m);
}

[[gnu::noinline]] Fiber* Worker::slow_tick() noexcept {
  tick_countdown = kSlowTickInterval;
  ++slow_ticks;
  coarse_now_ns = coarse_monotonic_ns();
  maybe_fire_timers();
  drain_handback();
  if (--driver_countdown == 0 || coarse_now_ns - driver_polled_ns >= kDriverPollMaxNs) {
    driver_polled_ns = coarse_now_ns;
    driver_every = poll_driver() ? kDriverPollMin : std::min(driver_every * 2, kDriverPollMax);
    driver_countdown = driver_every;
  }
  if (mine_len && sched->workers.size() > 1) publish_mine();
  mine_turn = true;
  if (slow_ticks % kInjectCheckEvery == 0 && !sched->inject.empty()) {
    // Fairness check: take ONE fiber. A batch would land in a local queue that may be full
    // and overflow straight back (measured: 13% of a 1000-fiber yield benchmark).
    uint32_t got = 0;
    if (Fiber* f = sched->inject.pop_batch(1, &got)) return f;
  }
  return nullptr;
}

[[gnu::always_inline]] inline Fiber* Worker::next_runnable() noexcept {
  if (LIONET_UNLIKELY(--tick_countdown == 0)) {
    if (Fiber* f = slow_tick()) return f;
  }
  if (lifo_slot && lifo_streak < kMaxLifoStreak) {
    ++lifo_streak;
    return std::exchange(lifo_slot, nullptr);
  }
  lifo_streak = 0;
  if (LIONET_UNLIKELY(pinned_len.load(std::memory_order_acquire))) {
    std::lock_guard<SpinLock> lk(pinned_mu);
    if (!pinned.empty()) {
      Fiber* f = pinned.front();
      pinned.pop_front();
      pinned_len.store(static_cast<uint32_t>(pinned.size()), std::memory_order_release);
      return f;
    }
  }
  // A yield goes behind everything runnable here: the ring (and its claimed batch) runs before
  // `mine`. Bounded: every slow tick gives `mine` one turn ahead of the ring, so a yielder waits
  // at most kSlowTickInterval scheduling points per fiber ahead of it in `mine`.
  if (LIONET_UNLIKELY(mine_turn)) {
    mine_turn = false;
    if (mine_head) return pop_mine();
  }
  if (popped_pos < popped_len) return popped[popped_pos++];
  popped_pos = 0;
  popped_len = queue.pop_batch(popped, kPopBatch);
  if (popped_len) return popped[popped_pos++];
  if (mine_head) return pop_mine();
  return std::exchange(lifo_slot, nullptr);
}

Fiber* Worker::take_inject() noexcept {
  const uint32_t n_workers = static_cast<uint32_t>(sched->workers.size());
  uint32_t want = sched->inject.len() / n_workers + 1;
  want = std::min(want, queue.capacity() / 2);
  uint32_t got = 0;
  Fiber* first = sched->inject.pop_batch(want, &got);
  if (!first) return nullptr;
  for (Fiber* f = first->next_; f;) {
    Fiber* next = f->next_;
    f->next_ = nullptr;
    if (!queue.try_push(f)) overflow(f);
    f = next;
  }
  first->next_ = nullptr;
  return first;
}

Fiber* Worker::steal_work() noexcept {
  const size_t n = sched->workers.size();
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  const size_t start = rng % n;
  for (size_t i = 0; i < n; ++i) {
    Worker* victim = sched->workers[(start + i) % n].get();
    if (victim == this) continue;
    if (Fiber* f = victim->queue.steal_into(queue)) {
      steals.inc();
      victim->stolen_from.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
  }
  return nullptr;
}

Fiber* Worker::find_work() noexcept {
  Fiber* f = next_runnable();
  if (!f) f = take_inject();
  if (!f && sched->workers.size() > 1 && sched->try_begin_search(*this)) f = steal_work();
  if (f && searching && sched->end_search(*this)) sched->notify_parked();
  return f;
}

void Worker::schedule_local(Fiber* f, bool lifo, bool notify) noexcept {
  Worker* home = sched->pinned_home(f);
  if (home && home != this) {
    home->push_pinned(f);
    return;
  }
  if (lifo) {  // the LIFO slot is never stolen from, so it may hold a fiber pinned here
    Fiber* displaced = std::exchange(lifo_slot, f);
    if (!displaced) return;  // a LIFO fiber runs next on this worker: no one else needs waking
    f = displaced;
    home = sched->pinned_home(f);
  }
  if (home) {
    push_pinned(f);
    return;
  }
  if (!queue.try_push(f)) overflow(f);  // into `mine` (protocol 2), or half the ring to inject
  if (notify && sched->workers.size() > 1) sched->notify_parked();
}

Worker* SchedulerImpl::pinned_home(const Fiber* f) const noexcept {
  const int pin = f->pinned_worker();
  return pin < 0 ? nullptr : workers[static_cast<size_t>(pin) % workers.size()].get();
}

void Worker::push_pinned(Fiber* f) noexcept {
  {
    std::lock_guard<SpinLock> lk(pinned_mu);
    pinned.push_back(f);
    pinned_len.store(static_cast<uint32_t>(pinned.size()), std::memory_order_release);
  }
  if (current_worker() != this) wake();
}

// ---------------------------------------------------------------- SchedulerImpl

void SchedulerImpl::submit(Fiber* f) {
  Worker* w = current_worker();
  if (w && w->sched != this) w = nullptr;
  try {
    // A stack is reserved at the spawn site, so that running out of stacks (max_stack_memory,
    // address space) is an exception for the spawner, never an abort on a worker; the stack
    // itself is taken at first run (prepare_to_run). Workers reserve in batches.
    if (stack_budget && alive() >= stack_budget) throw_stack_budget();
    if (w) {
      if (w->stack_credits == 0) w->stack_credits = stack_pool.reserve(Worker::kStackCreditBatch);
      --w->stack_credits;
    } else {
      stack_pool.reserve(1);
    }
  } catch (...) {
    f->release();  // the scheduler's reference; the caller's handle drops the other
    throw;
  }
  f->state_.store(static_cast<uint32_t>(FiberState::kRunnable), std::memory_order_relaxed);
  if (w) {
    w->spawned.inc();
    f->state_since_ns_.store(w->coarse_now_ns, std::memory_order_relaxed);
    if (opts.fiber_registry) w->registry.insert(f);  // before it is queued: the queue publishes the links
    w->schedule_local(f, /*lifo=*/false, /*notify=*/true);
    return;
  }
  external_spawned.fetch_add(1, std::memory_order_seq_cst);
  if (stopping.load(std::memory_order_seq_cst)) {
    external_spawned.fetch_sub(1, std::memory_order_seq_cst);
    stack_pool.unreserve(1);
    f->release();  // the scheduler's reference; the caller's handle drops the other
    throw std::logic_error("lionet::Scheduler::spawn after stop() began, from outside the scheduler");
  }
  f->state_since_ns_.store(coarse_monotonic_ns(), std::memory_order_relaxed);
  if (opts.fiber_registry) outside_registry.insert(f);
  schedule_woken(f, nullptr);
}

void SchedulerImpl::schedule_woken(Fiber* f, Worker* w) noexcept {
  // A worker inside the driver's wait() has not refreshed its clock since it went to sleep.
  const bool cached = w && !w->in_driver.load(std::memory_order_relaxed);
  f->state_since_ns_.store(cached ? w->coarse_now_ns : coarse_monotonic_ns(), std::memory_order_relaxed);
  if (w && w->sched == this) {
    w->schedule_local(f, /*lifo=*/true, /*notify=*/true);
    return;
  }
  // From outside: once f is queued it may run, finish, and let stop() + ~Scheduler proceed
  // while this thread is still in notify_parked()/wake(). external_wakers holds them off.
  external_wakers.fetch_add(1, std::memory_order_acq_rel);
  if (Worker* home = pinned_home(f)) {
    home->push_pinned(f);
  } else {
    inject.push(f);
    notify_parked();
  }
  external_wakers.fetch_sub(1, std::memory_order_release);  // pairs with the destructor's acquire
}

uint64_t SchedulerImpl::alive() const noexcept {
  uint64_t finished = 0;
  for (const auto& w : workers) finished += w->finished.get();
  uint64_t spawned = external_spawned.load(std::memory_order_seq_cst);
  for (const auto& w : workers) spawned += w->spawned.get();
  return spawned - finished;
}

void submit(SchedulerImpl* impl, Fiber* f) { impl->submit(f); }

void note_unjoined(Fiber* f) noexcept {
  // Only a finished fiber's exception is known here; one still running is logged when it ends
  // (then as a detached fiber's, since this handle is gone).
  if (f->state() == FiberState::kDone && f->exception()) log_fiber_exception(*f, f->exception(), false);
}

namespace {
// A cancel or the deadline of a joiner (protocol 10): takes the joiner's Parker back out of
// f->joiner_ (a = f, b = the Parker). Whoever changes the word wakes the joiner: the finisher
// (exchange to 1) or this CAS (to 0), never both.
void abandon_join(void* a, void* b) noexcept {
  auto* f = static_cast<Fiber*>(a);
  const Parker p = *static_cast<Parker*>(b);  // valid until our unpark: the joiner waits for it
  uintptr_t expected = reinterpret_cast<uintptr_t>(b);
  if (f->joiner_.compare_exchange_strong(expected, 0, std::memory_order_acq_rel, std::memory_order_acquire)) p.unpark();
}
}  // namespace

int join_fiber(Fiber* f) noexcept {
  LIONET_CHECK(f != current_fiber(), "a fiber cannot join itself");
  if (f->state() == FiberState::kDone) return 0;
  Parker self = Parker::current();
  uintptr_t expected = 0;
  if (!f->joiner_.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(&self), std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
    LIONET_CHECK(expected == 1, "a fiber can be joined only once");
    return 0;
  }
  Fiber* const me = self.fiber();
  if (!me) {
    park();
    return 0;
  }
  me->wait_.set(WaitKind::kJoin, f->id(), 0);
  if (!interruptible(*me)) {
    park();
    return 0;
  }
  if (!begin_wait(*me, &abandon_join, f, &self)) {
    abandon_join(f, &self);  // wakes us, unless the finisher (or the canceller) took the word first
    park();
    end_wait(*me);
    return f->joiner_.load(std::memory_order_acquire) == 0 ? interrupted_errno(me) : 0;
  }
  Timer timer;
  if (const int64_t dl = me->cancel_.deadline_ns; dl != CancelState::kNoDeadline) {
    const TimePoint at = from_ns(dl);
    if (at <= now()) {
      abandon_join(f, &self);
    } else {
      timer = add_timer(at, [f, p = &self] { abandon_join(f, p); });
    }
  }
  park();
  if (timer) timer.cancel();  // it may run now: wait for it, it touches `self`
  end_wait(*me);
  // 0: taken back by a cancel or the deadline (f runs on); 1: f finished and woke us.
  return f->joiner_.load(std::memory_order_acquire) == 0 ? interrupted_errno(me) : 0;
}
}  // namespace detail

// ---------------------------------------------------------------- public API

PinGuard::PinGuard() noexcept {
  Fiber* f = current_fiber();
  if (f && f->pinned_worker() < 0) {
    f->set_pinned_worker(this_fiber::worker_index());
    fiber_ = f;
  }
}

PinGuard::~PinGuard() {
  if (fiber_) fiber_->set_pinned_worker(-1);
}

namespace this_fiber {
void yield() noexcept {
  // The one thread-local read of a yield, inline: nothing in this function reads a thread-local
  // after the switch (on_resumed takes the worker from the switch message).
  detail::Worker* w = detail::t_worker;
  if (!w || !w->running) {
    std::this_thread::yield();
    return;
  }
  w->yield_current(w->running);
}

bool sleep_until(TimePoint deadline) noexcept {
  if (!current_fiber()) {
    std::this_thread::sleep_until(deadline);
    return true;
  }
  note_wait(WaitKind::kSleep);
  WaitClaim claim;
  claim.wait(deadline);  // no one notifies it: the deadline, a cancel or the fiber's own deadline
  return now() >= deadline;
}

uint64_t id() noexcept {
  Fiber* f = current_fiber();
  return f ? f->id() : 0;
}

int worker_index() noexcept {
  detail::Worker* w = detail::current_worker();
  return w ? w->index : -1;
}
}  // namespace this_fiber
}  // namespace lionet
