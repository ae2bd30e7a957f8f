// lionet/sched/scheduler.h: the public face of the work-stealing fiber scheduler.
//
// Owns: SchedulerOptions, Scheduler (workers, spawn, stop), JoinHandle<R>, go().
// The protocols (wake-up, parking, shutdown) are written once, at the top of scheduler.cc.
// Must not read configuration (ARCHITECTURE decision 10): app/ fills SchedulerOptions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/fiber/fiber.h"
#include "lionet/sched/cancel.h"
#include "lionet/sched/driver.h"

namespace lionet {

struct SchedulerOptions {
  // Worker threads. 0 = the CPUs this process may run on (its affinity mask: taskset, a
  // cgroup cpuset). Each costs one OS thread.
  int threads = 1;
  // Usable stack per fiber (rounded up to pages; a guard page is added). Virtual memory only
  // until touched: a parked fiber costs the pages it touched (usually one). YAML: fiber.stack_size.
  std::size_t stack_size = 128 * 1024;
  // How a stack overflow is caught (fiber/stack_pool.h): kAuto = a guard page per stack without
  // a kernel mapping each (Linux >= 6.13), else mprotect'ed guard pages for the first
  // stack_guard_page_budget stacks and a canary checked at every switch beyond.
  // YAML: fiber.stack_protection.
  StackProtection stack_protection = StackProtection::kAuto;
  // mprotect'ed guard pages at most (each costs 2 of vm.max_map_count's 65,530 mappings); only
  // used where guard regions are not available. YAML: fiber.guard_page_budget.
  std::size_t stack_guard_page_budget = 4096;
  // Address space reserved for stacks at most (bytes; 0 = no limit). Past it spawn() throws
  // std::system_error at the spawn site. YAML: fiber.max_stack_memory.
  std::size_t max_stack_memory = 0;
  // Stacks each worker keeps cached for reuse (beyond this they go back to the shared pool).
  std::size_t stack_cache_per_worker = 64;
  // Used in thread names ("<name>-w<i>") and logs.
  std::string name = "lionet";
  // Capacity of each worker's local (stealable) run queue, a power of two; overflow goes to
  // the worker's private FIFO, shared with idle workers at its slow tick (scheduler.cc, 2).
  std::size_t local_queue_capacity = 256;
  // List every live fiber for fiber dumps (sched/fiber_dump.h): a link and unlink in the
  // spawning worker's own list at spawn and exit, no atomic RMW (fiber/fiber_registry.h;
  // measured ~4 ns, ~6%, of spawn+run+join; switches unaffected). Off: dumps list no fibers of
  // this scheduler (statistics still work). YAML: fiber.registry.
  bool fiber_registry = true;
  // The IO driver this scheduler comes with (sched/driver.h): backend "auto" (epoll on Linux)
  // by default, so hooked blocking calls, Socket, TcpServer and File park fibers with no other
  // object; "none" for a scheduler without IO. YAML: io.*.
  IoOptions io{};
  // stop() waits for every fiber. Once every worker has been idle this long with fibers still
  // alive (parked, and nobody left to wake them), every fiber is cancelled (sched/cancel.h:
  // its waits end, on channels, sleeps, events, joins and IO alike, and later ones fail; IO
  // waits with ECANCELED): servers' accept loops, idle connections and handlers blocked in a
  // slow upstream end. Fibers are found through the registry (fiber_registry: on by default).
  Duration stop_io_grace = std::chrono::seconds(1);
  // Fibers still parked this long after that (inside a CancelShield, or in a wait that is not
  // cancellable: Mutex::lock, Semaphore::acquire) are logged with the fiber dump and
  // abandoned: stop() returns and their memory (and the scheduler's) is leaked rather than
  // freed under them. Duration::max(): wait forever.
  Duration stop_timeout = std::chrono::seconds(30);
  // A worker that runs out of work keeps polling the IO driver (without blocking) and the run
  // queues this long before it sleeps (scheduler.cc, protocol 9): a reply that arrives
  // meanwhile is picked up without a sleep and a wake-up, which on these VMs cost tens of
  // microseconds when the wake crosses CPUs (a proxy waiting on its upstream, a client on its
  // server). Cost: up to this much CPU each time the worker runs dry. Applies only when
  // workers do not outnumber CPUs. Zero: sleep at once. YAML: scheduler.idle_poll_us.
  Duration idle_poll = std::chrono::microseconds(0);
};

struct SpawnOptions {
  // Shown in logs and fiber dumps (sched/fiber_dump.h). Copied; names longer than 15 bytes
  // cost an allocation per spawn (std::string's small-string limit).
  std::string_view name{};
  int pin_worker = -1;  // -1: any worker; else run only on worker pin_worker % threads
};

// Counters of one worker. Each is written only by its worker (relaxed), so a snapshot taken
// from another thread is approximate while the scheduler runs and exact after stop().
struct WorkerStats {
  uint64_t spawned = 0;  // fibers created by code running on this worker
  uint64_t switches = 0;  // context switches into fibers
  uint64_t steals = 0;  // successful steal operations (each takes up to half a queue)
  uint64_t parks = 0;  // times the worker slept for lack of work
  uint64_t finished = 0;  // fibers that ended on this worker
  uint64_t fiber_parks = 0;  // park() calls of fibers on this worker that switched out
  uint64_t fiber_unparks = 0;  // unpark() calls made by this worker aimed at our fibers
};

// Scheduler-wide figures for /metrics: sums of the per-worker counters plus the outside-thread
// ones. Cost of a snapshot: 7 loads per worker, no lock; nothing on the hot paths beyond the
// per-worker counters themselves (one load and one store each, no lock prefix: OwnerCounter).
// Approximate while the scheduler runs (each counter is read at a slightly different time);
// exact after stop().
struct SchedulerStats {
  int threads = 0;
  uint64_t fibers_alive = 0;  // spawned and not yet finished
  uint64_t fibers_created = 0;  // spawned since start (from workers and outside threads)
  uint64_t fibers_finished = 0;
  uint64_t switches = 0;  // context switches into fibers
  uint64_t steals = 0;  // successful steal operations
  uint64_t fiber_parks = 0;  // fiber waits that switched out (sync, io, sleep, join, ...)
  // unpark() calls (from any thread). At rest fiber_unparks - fiber_parks = waits whose
  // wake-up came before the fiber had switched out (they returned without a switch).
  uint64_t fiber_unparks = 0;
  uint64_t worker_sleeps = 0;  // times a worker slept for lack of work (WorkerStats::parks)
  // Stack memory (fiber/stack_pool.h StackPoolStats).
  uint64_t stacks_mapped = 0;  // carved from slabs: in use or cached
  uint64_t stacks_cached = 0;  // of those, unused
  uint64_t stack_bytes_reserved = 0;  // address space of the slabs (virtual)
};

class Scheduler;
namespace detail {
class SchedulerImpl;
// Non-template halves of spawn()/join(), in scheduler.cc.
// Takes the scheduler's reference of f. Throws std::logic_error (after dropping that reference)
// if called from outside the scheduler once stop() has begun.
void submit(SchedulerImpl* impl, Fiber* f);
// Parks a fiber or blocks a thread until f is done: 0. A fiber cancelled, or past its deadline,
// first: ECANCELED or ETIMEDOUT, and f runs on (it may be joined again).
int join_fiber(Fiber* f) noexcept;
// A handle dropped without join(): the fiber's exception, if it ended with one, is logged now.
void note_unjoined(Fiber* f) noexcept;

template <class R>
class ResultFiber : public Fiber {
 public:
  using Fiber::Fiber;
  std::optional<R> result_;
};
template <>
class ResultFiber<void> : public Fiber {
 public:
  using Fiber::Fiber;
};

template <class F, class R>
class FiberImpl final : public ResultFiber<R> {
 public:
  FiberImpl(F&& fn, int pin) : ResultFiber<R>(pin), fn_(std::move(fn)) {}

 private:
  void body() override {
    if constexpr (std::is_void_v<R>) {
      fn_();
    } else {
      this->result_.emplace(fn_());
    }
  }
  F fn_;
};
}  // namespace detail

// Owner of a spawned fiber's result. join() waits (parking a fiber, blocking a plain thread)
// and returns the result or rethrows the fiber's exception. Dropping the handle detaches.
template <class R>
class JoinHandle {
 public:
  JoinHandle() = default;
  explicit JoinHandle(detail::ResultFiber<R>* f) noexcept : f_(f) {}
  JoinHandle(JoinHandle&& o) noexcept : f_(std::exchange(o.f_, nullptr)) {}
  JoinHandle& operator=(JoinHandle&& o) noexcept {
    if (this != &o) {
      reset();
      f_ = std::exchange(o.f_, nullptr);
    }
    return *this;
  }
  ~JoinHandle() { reset(); }

  bool valid() const noexcept { return f_ != nullptr; }
  bool done() const noexcept { return f_ && f_->state() == FiberState::kDone; }
  uint64_t id() const noexcept { return f_ ? f_->id() : 0; }
  void detach() noexcept { reset(); }

  // Asks the fiber to stop (sched/cancel.h): its current blocking call ends promptly and every
  // later one fails, until it ends. Thread-safe, idempotent, from fibers and plain threads.
  // Still join() (or drop the handle) to wait for it and free it.
  void cancel() noexcept {
    if (f_) detail::cancel_fiber(f_);
  }

  // Waits for the fiber; returns its result or rethrows its exception. Once only. If the
  // joining fiber is cancelled or its deadline passes first, throws FiberInterrupted (the
  // joined fiber runs on and the handle stays valid).
  R join() {
    if (!f_) throw std::logic_error("lionet::JoinHandle::join on an empty or already joined handle");
    if (const int err = detail::join_fiber(f_))
      throw FiberInterrupted(err, "lionet::JoinHandle::join: the joining fiber was interrupted");
    detail::ResultFiber<R>* f = std::exchange(f_, nullptr);
    std::exception_ptr e = f->take_exception();
    if (e) {
      f->release();
      std::rethrow_exception(std::move(e));
    }
    if constexpr (std::is_void_v<R>) {
      f->release();
    } else {
      R r = std::move(*f->result_);
      f->release();
      return r;
    }
  }

 private:
  void reset() noexcept {
    if (!f_) return;
    detail::note_unjoined(f_);
    std::exchange(f_, nullptr)->release();
  }
  detail::ResultFiber<R>* f_ = nullptr;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});
  // Calls stop(), then destroys the scheduler's own IO driver.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Creates a fiber running fn() and makes it runnable. From a worker of this scheduler it goes
  // to that worker's local queue (no lock); from elsewhere through the inject queue. The stack
  // is taken here: throws std::system_error (ENOMEM) if no stack can be had (max_stack_memory,
  // address space), and std::logic_error after stop() has begun; fn is destroyed then.
  template <class F>
  auto spawn(F&& fn, SpawnOptions opts = {}) -> JoinHandle<std::invoke_result_t<std::decay_t<F>&>> {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    auto* f = new detail::FiberImpl<std::decay_t<F>, R>(std::decay_t<F>(std::forward<F>(fn)), opts.pin_worker);
    if (!opts.name.empty()) f->set_name(opts.name);
    f->add_ref();  // the handle's reference; the scheduler keeps the one from construction
    JoinHandle<R> handle(f);  // first, so that a throwing submit() still frees f
    detail::submit(impl_.get(), f);
    return handle;
  }

  // spawn() without a handle: the fiber is detached from the start, which saves the
  // reference counting a handle costs.
  template <class F>
  void spawn_detached(F&& fn, SpawnOptions opts = {}) {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    auto* f = new detail::FiberImpl<std::decay_t<F>, R>(std::decay_t<F>(std::forward<F>(fn)), opts.pin_worker);
    if (!opts.name.empty()) f->set_name(opts.name);
    detail::submit(impl_.get(), f);  // on refusal submit() drops the only reference
  }

  // Waits until every fiber has finished, then stops the worker threads; refuses later spawns
  // from outside. Never hangs forever: parked fibers that nobody wakes are cancelled after
  // stop_io_grace of idleness, and any still parked are abandoned (logged, leaked) after
  // stop_timeout more (see SchedulerOptions). Idempotent. Must not be called from a fiber
  // of this scheduler (it would wait for itself): throws std::logic_error then.
  void stop();

  // The scheduler whose worker runs the calling code, or nullptr.
  static Scheduler* current() noexcept;

  int threads() const noexcept;
  const SchedulerOptions& options() const noexcept;
  WorkerStats stats(int worker) const noexcept;
  WorkerStats total_stats() const noexcept;
  // Everything /metrics shows for this scheduler (see SchedulerStats). Any thread.
  SchedulerStats stats() const noexcept;
  // The stack pool's figures (mappings, guard pages, canaries). Any thread.
  StackPoolStats stack_stats() const noexcept;
  // After a burst of fibers: the pages of unused stacks beyond the `keep` most recently used go
  // back to the kernel (StackPool::trim; workers' own small caches are kept). Any thread.
  // Returns how many stacks gave their pages back.
  std::size_t trim_stacks(std::size_t keep = 64) noexcept;
  // Fibers spawned and not yet finished (approximate while running).
  uint64_t alive() const noexcept;

  // Attaches an event source (the IOManager does this). Idle workers then wait in
  // driver->wait() (one at a time) instead of sleeping, and busy workers poll it every 64
  // scheduling points while it delivers events, backing off to every 1024 while it does not. Returns only once no worker is inside the previous
  // driver (a poller blocked in it is woken), so the previous driver may be destroyed then,
  // even while the scheduler runs; fibers still waiting on its fds are the caller's concern.
  void set_driver(Driver* driver) noexcept;
  Driver* driver() const noexcept;
  // The driver this scheduler made for itself (SchedulerOptions::io), attached unless another
  // replaced it; nullptr with io.backend "none". A replacing driver (an IOManager of the
  // caller's) hands the scheduler back to this one when it is destroyed.
  Driver* own_driver() const noexcept { return own_driver_.get(); }

  detail::SchedulerImpl* impl() const noexcept { return impl_.get(); }

 private:
  std::unique_ptr<detail::SchedulerImpl> impl_;
  std::unique_ptr<Driver> own_driver_;  // made from SchedulerOptions::io (nullptr: io "none")
};

// spawn() on the scheduler running the caller, detached. Throws std::logic_error outside one.
template <class F>
void go(F&& fn, SpawnOptions opts = {}) {
  Scheduler* s = Scheduler::current();
  if (!s) throw std::logic_error("lionet::go called outside a LioNet scheduler");
  s->spawn_detached(std::forward<F>(fn), opts);
}

// Keeps the current fiber on the worker it runs on for the guard's scope: parks inside the
// scope resume on the same thread, so thread-locals (errno's address above all) stay valid.
// No-op on a plain thread or for a fiber already pinned. The hooks wrap their waits in one,
// so code that caches errno's address across a hooked call still reads the right errno.
// Cost: while pinned the fiber cannot be stolen, and a wake from another worker goes through
// that worker's pinned queue.
class PinGuard {
 public:
  PinGuard() noexcept;
  ~PinGuard();
  PinGuard(const PinGuard&) = delete;
  PinGuard& operator=(const PinGuard&) = delete;

 private:
  Fiber* fiber_ = nullptr;
};

// How many times any scheduler's workers have polled for I/O (a poll that delivered events, or
// a wait in the driver that ended), process-wide; starts at 1. A check of the outside world
// made at one generation may stand in for the same check until the next: everything the
// workers read since was already in the kernel's hands when that poll returned, unless a fiber
// read it without waiting (a busy connection's reads may never wait: then no poll comes, so a
// user bounds the age of its checks by time as well). http::StaticFiles checks a cached file
// once per generation and at least every ~2 ms (h2o's rule: once per event-loop turn). One
// relaxed load; a poll adds one relaxed increment.
uint64_t io_generation() noexcept;

namespace this_fiber {
// Lets other runnable fibers run; returns at once if none is waiting. On a plain thread:
// std::this_thread::yield().
void yield() noexcept;
// Parks the fiber on a timer (a plain thread sleeps). False if it ended early: the fiber was
// cancelled or its DeadlineScope passed first (sched/cancel.h).
bool sleep_until(TimePoint deadline) noexcept;
inline bool sleep_for(Duration d) noexcept { return sleep_until(now() + d); }
// Id of the current fiber (unique per process, never reused), 0 on a plain thread.
uint64_t id() noexcept;
// Index of the worker running the caller, -1 on a plain thread.
int worker_index() noexcept;
}  // namespace this_fiber
}  // namespace lionet
