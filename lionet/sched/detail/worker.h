// lionet/sched/detail/worker.h: the scheduler's private structures: SchedulerImpl (shared
// by all workers) and Worker (one OS thread, its run queues, timers and stack cache).
// The protocols that tie them together are described at the top of scheduler.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lionet/base/macros.h"
#include "lionet/base/spinlock.h"
#include "lionet/fiber/fiber.h"
#include "lionet/fiber/fiber_registry.h"
#include "lionet/fiber/stack_pool.h"
#include "lionet/sched/detail/inject_queue.h"
#include "lionet/sched/detail/local_queue.h"
#include "lionet/sched/detail/timer_queue.h"
#include "lionet/sched/scheduler.h"

namespace lionet::detail {

class SchedulerImpl;
class Worker;

// A counter written only by one worker and read by anyone: a plain add on x86, no lock prefix.
class OwnerCounter {
 public:
  void inc() noexcept { v_.store(v_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  uint64_t get() const noexcept { return v_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> v_{0};
};

// What the fiber that switched out asks the context it resumes to do with it.
enum class AfterSwitch : uint8_t {
  kNothing,  // from the worker's main loop
  kRequeue,  // yield: put prev at the tail of the worker's own FIFO (Worker::mine)
  kPark,  // park: prev waits for unpark() (unless NOTIFIED already)
  kParkUnlock,  // park_and_unlock: prev is PARKED (a store), then SwitchMsg::lock is released
  kFinish,  // prev's body returned: release its stack, wake its joiner, drop the reference
};
struct SwitchMsg {
  Worker* worker;  // the worker performing the switch: the resumed side runs on it (no TLS read)
  Fiber* prev;  // null when switching out of the main loop
  AfterSwitch action;
  SpinLock* lock = nullptr;  // kParkUnlock: released after prev is PARKED
};

class alignas(kCacheLine) Worker {
 public:
  Worker(SchedulerImpl* sched, int index, StackPool& pool);
  ~Worker();

  void run();  // thread body: the main loop

  // ---- Called on this worker's thread only ----
  // Makes f runnable here. lifo: put it in the LIFO slot (message passing wake-ups).
  // notify: wake an idle worker if none is searching (new work others could take).
  void schedule_local(Fiber* f, bool lifo, bool notify) noexcept;
  // A fiber this worker switched out (yield, or a park an unpark beat) runs again later: the
  // tail of `mine` (its home's pinned list if pinned).
  void requeue(Fiber* f) noexcept;
  // Switches the running fiber `self` out; `action` says what the resumed side does with it.
  void switch_away(Fiber* self, AfterSwitch action, SpinLock* lock = nullptr) noexcept;
  [[noreturn]] void finish_current(Fiber* self) noexcept;
  void add_timer(TimerEntry* e) { timers.add(e); }
  bool yield_current(Fiber* self) noexcept;

  // ---- Any thread ----
  void push_pinned(Fiber* f) noexcept;  // f is pinned to this worker
  void wake() noexcept;  // futex-wake this worker if it sleeps

  SchedulerImpl* const sched;
  const int index;

  // Owned by this worker's thread unless noted.
  LocalQueue queue;  // stealable by others (see local_queue.h)
  // The oldest few fibers of `queue`, claimed with one CAS (LocalQueue::pop_batch) so that
  // the CAS is paid once per kPopBatch switches. Not stealable: at most kPopBatch - 1 fibers
  // wait here while their worker runs a fiber that does not yield.
  static constexpr uint32_t kPopBatch = 8;
  Fiber* popped[kPopBatch];
  uint32_t popped_pos = 0, popped_len = 0;
  Fiber* lifo_slot = nullptr;
  uint32_t lifo_streak = 0;  // consecutive LIFO runs, capped (kMaxLifoStreak)
  // Fibers this worker requeued itself (yields): an intrusive FIFO through Fiber::next_, owner
  // only, no atomics, not stealable. publish_mine() moves its older half into `queue` when
  // another worker is idle (protocol 2). mine_turn: the slow tick gives `mine` one turn ahead
  // of `queue` (a yielder's wait stays bounded while the ring keeps being refilled).
  Fiber* mine_head = nullptr;
  Fiber* mine_tail = nullptr;
  uint32_t mine_len = 0;
  bool mine_turn = false;
  Fiber* running = nullptr;  // the fiber this worker runs now (owner only)
  // Protocol 11: a fiber dump is reading stacks of this scheduler's fibers (the readers count,
  // set by SchedulerImpl::begin_stack_reads). Read by the owner at every switch, written rarely.
  std::atomic<uint32_t> stack_readers{0};
  [[gnu::noinline]] void wait_for_stack_reader() noexcept;
  // Whether `mine` is used at all: not when workers outnumber CPUs. Then a worker may sit
  // preempted by the kernel for milliseconds, and fibers only it can see would wait with it
  // (measured: 16 workers on 2 CPUs, CPU-bound yielders, 0.82x of 2 workers instead of 0.88x):
  // requeues go to the stealable ring and overflow to the inject queue, as before `mine`.
  // The workers do not outnumber the CPUs this thread may run on (sched_getaffinity, asked once,
  // by the constructor): use_mine, the idle spin and protocol 9's polling all depend on it.
  bool fits_cpus = true;
  bool use_mine = true;
  std::unique_ptr<Fiber*[]> spill_buf;  // scratch for spill() (use_mine off): capacity/2 + 1
  // Scheduling points until the slow tick (timers, inject check, driver poll, publishing).
  uint32_t tick_countdown = 32;
  uint32_t slow_ticks = 0;
  // The driver is polled by a busy worker every driver_every slow ticks: reset to the minimum
  // when a poll finds events, doubled up to the maximum while polls find none (protocol 8).
  uint32_t driver_every = 2, driver_countdown = 2;
  int64_t driver_polled_ns = 0;  // coarse time of the last busy poll
  // Slow ticks until publish_mine() may publish and wake a sleeper again: doubles after each
  // publication while no thief takes anything from our ring (the wakes were wasted), reset
  // once a steal from us is seen or every worker is busy.
  uint32_t publish_every = 1, publish_countdown = 1;
  uint64_t stolen_seen = 0;  // stolen_from as of the last publish_mine()
  bool searching = false;  // counted in SchedulerImpl::idle_state_ searching
  ExecutionContext main_ctx;  // this thread's own stack
  StackCache stacks;
  // Stack reservations (StackPool::reserve), taken in batches of kStackCreditBatch for spawns
  // here (stack_credits: not used yet); fibers that took their stacks here, not yet given back
  // to the pool (given back in batches).
  static constexpr std::size_t kStackCreditBatch = 32;
  std::size_t stack_credits = 0, stacks_started = 0;
  TimerQueue timers;
  uint64_t rng;

  SpinLock pinned_mu;  // protects pinned
  std::deque<Fiber*> pinned;  // fibers pinned here, woken from any thread
  std::atomic<uint32_t> pinned_len{0};  // written under pinned_mu

  // Steals taken from this worker's ring (thieves add; relaxed: a hint for publish_mine()).
  alignas(kCacheLine) std::atomic<uint64_t> stolen_from{0};

  // Idle parking: 0 = no wake pending, 1 = woken. Futex word.
  alignas(kCacheLine) std::atomic<uint32_t> wake_word{0};
  bool sleeping = false;  // guarded by SchedulerImpl::sleepers_mu_
  std::atomic<bool> in_driver{false};  // inside Driver::wait(): wake() goes through the driver
  // Protocol 8c (a per-worker driver): this worker is inside its own part of the driver
  // (wait/poll), and the driver it went into; SchedulerImpl::polling and polling_driver's
  // roles (protocol 8b), one pair per worker. seq_cst.
  std::atomic<bool> own_polling{false};
  std::atomic<Driver*> own_polling_driver{nullptr};
  Driver* take_own_driver() noexcept;  // the per-worker driver, announced; else nullptr
  void release_own_polling() noexcept;

  // Statistics (Scheduler::stats()). Each is written only by this worker's thread.
  // fiber_parks: park() calls of fibers running here that switched out; fiber_unparks:
  // unpark() calls made on this thread aimed at fibers of this scheduler.
  OwnerCounter spawned, switches, steals, parks, finished, fiber_parks, fiber_unparks;
  // Cached CLOCK_MONOTONIC_COARSE (detail/coarse_clock.h): refreshed every
  // kSlowTickInterval scheduling points and after idle sleeps; stamps fibers' state changes.
  int64_t coarse_now_ns = 0;
  int64_t idle_poll_ns = 0;  // protocol 9; set at start
  std::thread thread;

  // Live fibers spawned by code running on this worker (fiber_registry.h, kOwnerBiased: only
  // this worker inserts and removes, with no atomic RMW; dumps read it). Fibers of it that
  // finish on another worker come back through `handback` (a Treiber stack through
  // Fiber::next_, pushed by any worker, drained by this one at its slow tick, before it sleeps
  // and before it exits), with the scheduler's reference, which drain_handback() drops.
  alignas(kCacheLine) FiberRegistryShard registry;
  std::atomic<Fiber*> handback{nullptr};
  void hand_back(Fiber* f) noexcept;  // any worker
  void drain_handback() noexcept;  // this worker

 private:
  Fiber* next_runnable() noexcept;  // fast local sources only
  Fiber* slow_tick() noexcept;  // every kSlowTickInterval scheduling points
  void push_mine(Fiber* f) noexcept;
  Fiber* pop_mine() noexcept;
  void publish_mine() noexcept;  // share yielders with idle workers (protocol 2)
  void overflow(Fiber* f) noexcept;  // the ring is full: `mine`, or half the ring to inject
  void spill(Fiber* f) noexcept;
  Fiber* find_work() noexcept;  // local, then steal, then inject (main loop)
  Fiber* steal_work() noexcept;
  Fiber* take_inject() noexcept;
  void run_fiber(Fiber* f) noexcept;  // from the main loop
  void prepare_to_run(Fiber* f) noexcept;
  void first_run(Fiber* f) noexcept;
  void park_idle() noexcept;
  Fiber* poll_before_sleep() noexcept;  // SchedulerOptions::idle_poll (protocol 9)
  void maybe_fire_timers() noexcept;  // inline, below: a busy worker's check (coarse gate)
  void fire_due_timers() noexcept;  // inline, below: before sleeping (exact)
  bool poll_driver() noexcept;  // true if the driver delivered events
  friend class SchedulerImpl;
};

class SchedulerImpl {
 public:
  SchedulerImpl(Scheduler* owner, SchedulerOptions opts);
  ~SchedulerImpl();
  void start();
  void stop();

  // Any thread: makes a runnable fiber known (local queue when called on one of our workers).
  void submit(Fiber* f);
  // Any thread: schedules an unparked fiber. w: the calling thread's worker (current_worker()).
  void schedule_woken(Fiber* f, Worker* w) noexcept;
  // Wakes one sleeping worker if none is searching (see "Wake-up" in scheduler.cc).
  void notify_parked() noexcept;
  void notify_all() noexcept;
  Worker* pinned_home(const Fiber* f) const noexcept;  // the worker f is pinned to, or nullptr
  uint64_t alive() const noexcept;

  // idle_state_ packs (searching << 16) | unparked.
  bool try_begin_search(Worker& w) noexcept;
  bool end_search(Worker& w) noexcept;  // true if w was the last searcher
  bool register_sleeper(Worker& w) noexcept;  // true if it was the last searcher
  void unregister_sleeper(Worker& w) noexcept;
  bool has_visible_work(const Worker& self) const noexcept;

  Scheduler* const owner;
  const SchedulerOptions opts;
  StackPool stack_pool;
  // max_stack_memory in stacks (0: no limit): submit() refuses a spawn while alive() >= it.
  const std::size_t stack_budget;
  [[noreturn]] void throw_stack_budget() const;
  std::vector<std::unique_ptr<Worker>> workers;
  InjectQueue inject;
  alignas(kCacheLine) std::atomic<uint32_t> idle_state;
  std::atomic<bool> stopping{false};
  std::atomic<Driver*> driver{nullptr};
  // driver->per_worker() as of the last set_driver (protocol 8c): a hint for which token a
  // worker takes; the driver itself is asked again once announced.
  std::atomic<bool> driver_per_worker{false};
  std::atomic<bool> polling{false};  // a worker is inside driver->wait()/poll() (at most one)
  // The driver the poller went into (no_driver(): it found none); nullptr while `polling` is
  // free or the poller has not re-read `driver` yet. seq_cst: protocol 8b.
  std::atomic<Driver*> polling_driver{nullptr};
  Driver* take_driver() noexcept;  // after winning `polling`: the driver to use, announced
  void release_polling() noexcept;
  static Driver* no_driver() noexcept;
  // Worker::wake() calls inside driver->wake(): set_driver() waits for them to leave before
  // the old driver may be destroyed (protocol 8b). seq_cst, a Dekker pair with `driver`.
  std::atomic<uint32_t> driver_wakers{0};
  std::atomic<uint64_t> external_spawned{0};
  // unpark() calls aimed at our fibers from threads that are not our workers. relaxed:
  // a statistic; outside wake-ups already pay an RMW on external_wakers.
  std::atomic<uint64_t> external_unparks{0};
  // Live fibers spawned from outside threads (the registry's extra shard).
  alignas(kCacheLine) FiberRegistryShard outside_registry;
  // Wake-ups from outside threads still touching this scheduler after they made a fiber
  // runnable (that fiber may finish and the scheduler be destroyed meanwhile): the destructor
  // waits for this to drop to zero.
  std::atomic<uint32_t> external_wakers{0};  // spawns from threads that are not our workers
  std::mutex sleepers_mu;
  std::vector<Worker*> sleepers;  // guarded by sleepers_mu
  std::mutex stop_mu;  // serializes stop()
  bool stopped = false;  // guarded by stop_mu
  // Worker threads that left run(), guarded by exit_mu; stop() waits on exit_cv.
  std::mutex exit_mu;
  std::condition_variable exit_cv;
  std::size_t exited = 0;
  bool started = false;  // start() ran (written before any worker exists, read by stop())
  // stop() gave up on fibers that stayed parked (SchedulerOptions::stop_timeout): workers exit
  // with alive() > 0, and the owner leaks the scheduler. seq_cst: rare.
  std::atomic<bool> abandoned{false};
  void wait_for_workers();
  bool all_idle() noexcept;
  void cancel_io_waits() noexcept;
  void cancel_all_fibers() noexcept;  // protocol 6b: JoinHandle::cancel of every listed fiber

  // Protocol 11 (fiber stacks in dumps, fiber_dump.cc). Between begin_stack_reads() and
  // end_stack_reads(), a fiber that a worker resumes is RUNNING before the worker looks at
  // Worker::stack_readers, and a worker that sees readers takes stack_read_mu before the jump;
  // so a reader that holds stack_read_mu and sees a fiber PARKED or RUNNABLE may walk its
  // stack: it is not resumed until the reader lets go.
  void begin_stack_reads() noexcept;
  void end_stack_reads() noexcept;
  std::mutex stack_read_mu;
};

// ---- the idle-state word (protocol 3): idle_state packs (searching << 16) | unparked ----
inline constexpr uint32_t kUnparkedMask = 0xffff;
inline constexpr uint32_t kSearchingOne = 1u << 16;
inline uint32_t searching_of(uint32_t s) noexcept { return s >> 16; }
inline uint32_t unparked_of(uint32_t s) noexcept { return s & kUnparkedMask; }

// Inline because find_work() and the main loop's spin run them on every idle round; the rest
// of idle coordination is in idle.cc.
inline void Worker::maybe_fire_timers() noexcept {
  if (timers.empty()) return;
  // now() only when the earliest entry may be due (most are timeouts seconds away), told by
  // the coarse clock slow_tick, the only caller, has just read. Should the coarse clock stall
  // (a preempted timekeeping vCPU), a due timer waits for the worker's next sleep, which fires
  // by now() (fire_due_timers).
  if (surely_ahead(timers.front_deadline(), from_ns(coarse_now_ns))) return;
  timers.fire_due(now());
}

inline void Worker::fire_due_timers() noexcept {
  if (!timers.empty()) timers.fire_due(now());
}

inline bool SchedulerImpl::try_begin_search(Worker& w) noexcept {
  if (w.searching) return true;
  const uint32_t s = idle_state.load(std::memory_order_seq_cst);
  if (2 * searching_of(s) >= workers.size()) return false;
  idle_state.fetch_add(kSearchingOne, std::memory_order_seq_cst);
  w.searching = true;
  return true;
}

inline bool SchedulerImpl::end_search(Worker& w) noexcept {
  if (!w.searching) return false;
  w.searching = false;
  return searching_of(idle_state.fetch_sub(kSearchingOne, std::memory_order_seq_cst)) == 1;
}

inline bool SchedulerImpl::has_visible_work(const Worker& self) const noexcept {
  if (!inject.empty() || self.pinned_len.load(std::memory_order_acquire)) return true;
  for (const auto& w : workers)
    if (!w->queue.empty()) return true;
  return false;
}

// Where Worker::switch_away begins: the stacks in fiber dumps start below it (fiber_dump.cc).
uintptr_t switch_away_entry() noexcept;

// A finished fiber's exception, logged (fiber_dump.cc): debug when a joiner will receive it
// (joinable), a warning when nobody can.
void log_fiber_exception(const Fiber& f, const std::exception_ptr& ex, bool joinable);

// CPUs in this thread's affinity mask (what taskset or a cgroup cpuset allows).
std::size_t allowed_cpus() noexcept;

// The process-wide list of live schedulers that dump_fibers() walks (fiber_dump.cc).
void register_scheduler(SchedulerImpl* s);
void unregister_scheduler(SchedulerImpl* s) noexcept;

// The worker running the calling code, or nullptr. Never cached across a switch (see fiber.h).
Worker* current_worker() noexcept;
// The variable behind it, for the switch paths (yield, park) that read it once before their
// switch and never after (on_resumed takes the worker from the SwitchMsg). Anything else calls
// current_worker().
extern constinit thread_local Worker* t_worker;
}  // namespace lionet::detail
