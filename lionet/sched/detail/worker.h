// lionet/sched/detail/worker.h: the scheduler's private structures: SchedulerImpl (shared
// by all workers) and Worker (one OS thread, its run queues, timers and stack cache).
// The protocols that tie them together are described at the top of scheduler.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdint>
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
  kRequeue,  // yield: put prev back at the tail of the run queue
  kPark,     // park: prev waits for unpark() (unless NOTIFIED already)
  kFinish,   // prev's body returned: release its stack, wake its joiner, drop the reference
};
struct SwitchMsg {
  Fiber* prev;  // null when switching out of the main loop
  AfterSwitch action;
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
  // Switches the running fiber `self` out; `action` says what the resumed side does with it.
  void switch_away(Fiber* self, AfterSwitch action) noexcept;
  [[noreturn]] void finish_current(Fiber* self) noexcept;
  void add_timer(TimerEntry* e) { timers.add(e); }
  bool yield_current(Fiber* self) noexcept;

  // ---- Any thread ----
  void push_pinned(Fiber* f) noexcept;  // f is pinned to this worker
  void wake() noexcept;                 // futex-wake this worker if it sleeps

  SchedulerImpl* const sched;
  const int index;

  // Owned by this worker's thread unless noted.
  LocalQueue queue;               // stealable by others (see local_queue.h)
  std::unique_ptr<Fiber*[]> spill_buf;  // scratch for spill(): capacity/2 + 1 fibers
  // The oldest few fibers of `queue`, claimed with one CAS (LocalQueue::pop_batch) so that
  // the CAS is paid once per kPopBatch switches. Not stealable: at most kPopBatch - 1 fibers
  // wait here while their worker runs a fiber that does not yield.
  static constexpr uint32_t kPopBatch = 8;
  Fiber* popped[kPopBatch];
  uint32_t popped_pos = 0, popped_len = 0;
  Fiber* lifo_slot = nullptr;
  uint32_t lifo_streak = 0;       // consecutive LIFO runs, capped (kMaxLifoStreak)
  uint32_t timer_countdown = 32;   // scheduling points until timers are looked at again
  uint32_t inject_countdown = 61;  // ... until the inject queue is looked at first
  bool searching = false;         // counted in SchedulerImpl::idle_state_ searching
  ExecutionContext main_ctx;      // this thread's own stack
  StackCache stacks;
  // Stack reservations (StackPool::reserve), taken in batches of kStackCreditBatch for spawns
  // here (stack_credits: not used yet); fibers that took their stacks here, not yet given back
  // to the pool (given back in batches).
  static constexpr std::size_t kStackCreditBatch = 32;
  std::size_t stack_credits = 0, stacks_started = 0;
  TimerQueue timers;
  uint64_t rng;

  SpinLock pinned_mu;                  // protects pinned
  std::deque<Fiber*> pinned;           // fibers pinned here, woken from any thread
  std::atomic<uint32_t> pinned_len{0};  // written under pinned_mu

  // Idle parking: 0 = no wake pending, 1 = woken. Futex word.
  alignas(kCacheLine) std::atomic<uint32_t> wake_word{0};
  bool sleeping = false;  // guarded by SchedulerImpl::sleepers_mu_
  std::atomic<bool> in_driver{false};  // inside Driver::wait(): wake() goes through the driver
  uint32_t driver_countdown = 61;      // scheduling points until a busy worker polls the driver

  // Statistics (Scheduler::stats()). Each is written only by this worker's thread.
  // fiber_parks: park() calls of fibers running here that switched out; fiber_unparks:
  // unpark() calls made on this thread aimed at fibers of this scheduler.
  OwnerCounter spawned, switches, steals, parks, finished, fiber_parks, fiber_unparks;
  // Cached CLOCK_MONOTONIC_COARSE (detail/coarse_clock.h): refreshed every
  // kTimerCheckInterval scheduling points and after idle sleeps; stamps fibers' state changes.
  int64_t coarse_now_ns = 0;
  std::thread thread;

  // Live fibers spawned by code running on this worker (fiber_registry.h). Its own line: the
  // lock is taken by this worker at spawn and exit, and by dumps and migrated fibers' exits.
  alignas(kCacheLine) FiberRegistryShard registry;

 private:
  Fiber* next_runnable() noexcept;  // fast local sources only
  Fiber* find_work() noexcept;      // local, then steal, then inject (main loop)
  Fiber* steal_work() noexcept;
  Fiber* take_inject() noexcept;
  void run_fiber(Fiber* f) noexcept;  // from the main loop
  void prepare_to_run(Fiber* f) noexcept;
  void park_idle() noexcept;
  void spill(Fiber* f) noexcept;
  void maybe_fire_timers() noexcept;
  void poll_driver() noexcept;
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
  // Any thread: schedules an unparked fiber.
  void schedule_woken(Fiber* f) noexcept;
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
  std::atomic<bool> polling{false};  // a worker is inside driver->wait()/poll() (at most one)
  // The driver the poller went into (no_driver(): it found none); nullptr while `polling` is
  // free or the poller has not re-read `driver` yet. seq_cst: protocol 8b.
  std::atomic<Driver*> polling_driver{nullptr};
  Driver* take_driver() noexcept;     // after winning `polling`: the driver to use, announced
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
  std::mutex stop_mu;             // serializes stop()
  bool stopped = false;           // guarded by stop_mu
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
};

// The process-wide list of live schedulers that dump_fibers() walks (fiber_dump.cc).
void register_scheduler(SchedulerImpl* s);
void unregister_scheduler(SchedulerImpl* s) noexcept;

// The worker running the calling code, or nullptr. Never cached across a switch (see fiber.h).
Worker* current_worker() noexcept;
}  // namespace lionet::detail
