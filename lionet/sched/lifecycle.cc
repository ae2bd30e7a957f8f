// lionet/sched/lifecycle.cc: a scheduler's life: construction (threads resolved, the stack
// budget), start, stop and the drain that may have to cancel IO waits or abandon fibers
// (protocols 6 and 6b at the top of scheduler.cc), the driver's hand-over (protocol 8b), and
// the public Scheduler object with its statistics. The running part (switching, run queues)
// is scheduler.cc; idle workers are idle.cc.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "lionet/sched/detail/worker.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/scheduler.h"

// io/ defines it (driver.h); weak: sched/ must link without io/.
extern "C" lionet::Driver* lionet_make_io_driver(lionet::Scheduler& sched, const lionet::IoOptions& options)
    __attribute__((weak));

namespace lionet {
namespace detail {
namespace {

// SchedulerOptions::threads with 0 resolved to the CPUs this process may run on.
int resolved_threads(const SchedulerOptions& o) noexcept {
  return o.threads > 0 ? o.threads : static_cast<int>(allowed_cpus());
}

// max_stack_memory counts live fibers' stacks (checked in submit()); the mappings may go beyond
// it by what the workers' caches hold and what reservation batches keep ahead, so that stacks
// idle in one worker's cache never make a spawn fail.
std::size_t stack_mapping_cap(const SchedulerOptions& o) noexcept {
  if (!o.max_stack_memory) return 0;
  const std::size_t stride = StackPool::stride(o.stack_size);
  const std::size_t slack =
      static_cast<std::size_t>(resolved_threads(o)) * (o.stack_cache_per_worker + 2 * Worker::kStackCreditBatch);
  return (o.max_stack_memory / stride + slack) * stride;
}

}  // namespace

SchedulerImpl::SchedulerImpl(Scheduler* o, SchedulerOptions options)
    : owner(o),
      opts(std::move(options)),
      stack_pool(StackPoolOptions{.stack_size = opts.stack_size,
                                  .protection = opts.stack_protection,
                                  .guard_page_budget = opts.stack_guard_page_budget,
                                  .max_reserved_bytes = stack_mapping_cap(opts)}),
      stack_budget(opts.max_stack_memory
                       ? std::max<std::size_t>(1, opts.max_stack_memory / StackPool::stride(opts.stack_size))
                       : 0),
      idle_state(0) {
  const int n = resolved_threads(opts);
  LIONET_CHECK(n <= 4096, "SchedulerOptions::threads must be at most 4096");
  const_cast<SchedulerOptions&>(opts).threads = n;
  for (int i = 0; i < n; ++i) workers.push_back(std::make_unique<Worker>(this, i, stack_pool));
  idle_state.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
  register_scheduler(this);  // for dump_fibers() of every scheduler (fiber_dump.cc)
}

SchedulerImpl::~SchedulerImpl() {
  stop();
  // After stop(): a shutdown that hangs waiting for fibers is exactly when a dump helps.
  unregister_scheduler(this);  // waits for a dump in progress to finish with us
  while (external_wakers.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  workers.clear();  // stack caches go back to the pool before the pool dies
}

void SchedulerImpl::start() {
  for (auto& w : workers) w->thread = std::thread([w = w.get()] { w->run(); });
  started = true;
}

void SchedulerImpl::stop() {
  std::lock_guard<std::mutex> lk(stop_mu);
  if (stopped) return;
  stopping.store(true, std::memory_order_seq_cst);
  notify_all();
  if (started) wait_for_workers();
  for (auto& w : workers)
    if (w->thread.joinable()) w->thread.join();
  stopped = true;
}

bool SchedulerImpl::all_idle() noexcept {
  std::lock_guard<std::mutex> lk(sleepers_mu);
  return sleepers.size() == workers.size() && inject.empty();
}

// Shutdown, protocol 6's escalation: workers exit once alive() == 0. While they do not, a
// scheduler whose every worker sleeps has only parked fibers left that no running fiber can
// wake: after stop_io_grace of that, IO waits are cancelled (the driver's cancel_all); after
// stop_timeout more, the rest are logged and abandoned (`abandoned` lets workers exit; the
// owner then leaks the scheduler's memory, which those fibers' waiters may still point into).
void SchedulerImpl::wait_for_workers() {
  const auto step = std::chrono::milliseconds(10);
  // A flag beside the time point, not std::optional: gcc 12 reports a false -Wmaybe-uninitialized
  // on the optional's payload.
  bool idle = false;
  std::chrono::steady_clock::time_point idle_since{};
  bool io_cancelled = false;
  std::unique_lock<std::mutex> lk(exit_mu);
  while (exited < workers.size()) {
    exit_cv.wait_for(lk, step);
    if (exited >= workers.size()) break;
    lk.unlock();
    const bool idle_now = all_idle() && alive() != 0;
    const auto t = std::chrono::steady_clock::now();
    if (!idle_now) {
      idle = false;
    } else if (!idle) {
      idle = true;
      idle_since = t;
    } else if (!io_cancelled && opts.stop_io_grace != Duration::max() && t - idle_since >= opts.stop_io_grace) {
      io_cancelled = true;
      idle = false;
      cancel_io_waits();
      cancel_all_fibers();
    } else if (io_cancelled && opts.stop_timeout != Duration::max() && t - idle_since >= opts.stop_timeout) {
      spdlog::error(
          "scheduler '{}': stop() gave up on {} fiber(s) that stayed parked {} ms after they were cancelled "
          "(inside a CancelShield, or in an uncancellable wait: Mutex::lock, Semaphore::acquire); they are "
          "abandoned (their memory is leaked):\n{}",
          opts.name, alive(), std::chrono::duration_cast<std::chrono::milliseconds>(opts.stop_timeout).count(),
          dump_fibers(*owner));
      abandoned.store(true);
      notify_all();
    }
    lk.lock();
  }
}

namespace {
// The live fibers of one shard, each with a reference taken while it is listed (so none can be
// freed under us), without allocating under the shard's lock: reserve, and retry if it grew.
void collect_shard(const FiberRegistryShard& shard, std::vector<Fiber*>& out) {
  const std::size_t base = out.size();
  for (std::size_t room = shard.size() + 64;; room *= 2) {
    out.reserve(base + room);
    bool overflow = false;
    shard.for_each([&](const Fiber& f) {
      if (f.state() == FiberState::kDone) return true;
      if (out.size() == out.capacity()) {
        overflow = true;
        return false;
      }
      auto* live = const_cast<Fiber*>(&f);  // listed: its memory is valid (fiber_registry.h)
      live->add_ref();
      out.push_back(live);
      return true;
    });
    if (!overflow) return;
    for (std::size_t i = base; i < out.size(); ++i) out[i]->release();
    out.resize(base);
  }
}
}  // namespace

void SchedulerImpl::cancel_all_fibers() noexcept {
  // Protocol 6b: every fiber still alive is parked with nobody to wake it. Cancelled, each
  // one's wait ends (sched/cancel.h) and it can run to its end; what the cancels start (on_cancel
  // callbacks) runs before the workers exit, as any fiber does. Not under any shard's lock:
  // a cancel may spawn.
  std::vector<Fiber*> fibers;
  try {
    for (const auto& w : workers) collect_shard(w->registry, fibers);
    collect_shard(outside_registry, fibers);
  } catch (const std::bad_alloc&) {
    // Whatever was collected is still cancelled below; the rest wait for stop_timeout.
  }
  for (Fiber* f : fibers) {
    cancel_fiber(f);
    f->release();
  }
}

void SchedulerImpl::cancel_io_waits() noexcept {
  // Protocol 8b: counted as a waker, so set_driver() cannot destroy the driver under us.
  driver_wakers.fetch_add(1, std::memory_order_seq_cst);
  if (Driver* d = driver.load(std::memory_order_seq_cst)) d->cancel_all();
  driver_wakers.fetch_sub(1, std::memory_order_release);
}

void SchedulerImpl::throw_stack_budget() const {
  throw std::system_error(ENOMEM, std::generic_category(),
                          "lionet: fiber stack memory limit reached: " + std::to_string(stack_budget) +
                              " live fibers x " + std::to_string(stack_pool.stack_size()) +
                              "-byte stacks fill max_stack_memory " + std::to_string(opts.max_stack_memory) +
                              " (fiber.max_stack_memory)");
}

}  // namespace detail

// ---------------------------------------------------------------- public API

Scheduler::Scheduler(SchedulerOptions options)
    : impl_(std::make_unique<detail::SchedulerImpl>(this, std::move(options))) {
  if (impl_->opts.io.backend != "none") {
    if (!&lionet_make_io_driver)
      throw std::logic_error("lionet::Scheduler: no IO driver is linked in (use io.backend \"none\")");
    own_driver_.reset(lionet_make_io_driver(*this, impl_->opts.io));  // attaches itself; may throw
  }
  impl_->start();
}

Scheduler::~Scheduler() {
  stop();
  if (impl_->abandoned.load()) {
    // Abandoned fibers may still be listed in wait queues that outlive us (a channel, an fd):
    // their stacks, the workers and the driver must stay valid, so they are leaked.
    // Kept reachable (not merely dropped) so that leak checkers see a decision, not a bug.
    static std::mutex graveyard_mu;
    static auto* graveyard = new std::vector<std::pair<detail::SchedulerImpl*, Driver*>>;
    std::lock_guard<std::mutex> lk(graveyard_mu);
    graveyard->emplace_back(impl_.release(), own_driver_.release());
    return;
  }
  own_driver_.reset();  // detaches itself (set_driver(nullptr))
}

void Scheduler::stop() {
  detail::Worker* w = detail::current_worker();
  if (w && w->sched == impl_.get())
    throw std::logic_error("lionet::Scheduler::stop called from one of its own fibers (it would wait for itself)");
  impl_->stop();
}

void Scheduler::set_driver(Driver* d) noexcept {
  impl_->driver_per_worker.store(d && d->per_worker(), std::memory_order_seq_cst);  // protocol 8c
  Driver* old = impl_->driver.exchange(d, std::memory_order_seq_cst);
  if (old && old != d) {
    // Protocol 8b: no worker may still be inside `old` when we return (its owner is about to
    // destroy it). A poller blocked in old->wait() is woken; the wait is a few microseconds.
    // A poller inside the new driver (a replacement, not a removal) may stay there: only one
    // inside `old`, or between taking `polling` and saying where it went, is waited for.
    Driver* const target = d ? d : detail::SchedulerImpl::no_driver();
    for (;;) {
      const bool polling = impl_->polling.load(std::memory_order_seq_cst);
      Driver* in = impl_->polling_driver.load(std::memory_order_seq_cst);
      bool busy = impl_->driver_wakers.load(std::memory_order_seq_cst) || (polling && in != target);
      if (in == old) old->wake();
      // Protocol 8c: the same for every worker's own pair (a per-worker driver).
      for (const auto& w : impl_->workers) {
        const bool own = w->own_polling.load(std::memory_order_seq_cst);
        Driver* own_in = w->own_polling_driver.load(std::memory_order_seq_cst);
        busy = busy || (own && own_in != target);
        if (own_in == old) old->wake_worker(w->index);
      }
      if (!busy) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  impl_->notify_all();  // idle workers re-evaluate where to wait
}

Driver* Scheduler::driver() const noexcept { return impl_->driver.load(std::memory_order_acquire); }

Scheduler* Scheduler::current() noexcept {
  detail::Worker* w = detail::current_worker();
  return w ? w->sched->owner : nullptr;
}

int Scheduler::threads() const noexcept { return impl_->opts.threads; }
const SchedulerOptions& Scheduler::options() const noexcept { return impl_->opts; }
uint64_t Scheduler::alive() const noexcept { return impl_->alive(); }

WorkerStats Scheduler::stats(int worker) const noexcept {
  const auto& w = *impl_->workers.at(static_cast<size_t>(worker));
  return WorkerStats{w.spawned.get(),  w.switches.get(),    w.steals.get(),       w.parks.get(),
                     w.finished.get(), w.fiber_parks.get(), w.fiber_unparks.get()};
}

WorkerStats Scheduler::total_stats() const noexcept {
  WorkerStats t;
  for (int i = 0; i < threads(); ++i) {
    WorkerStats s = stats(i);
    t.spawned += s.spawned;
    t.switches += s.switches;
    t.steals += s.steals;
    t.parks += s.parks;
    t.finished += s.finished;
    t.fiber_parks += s.fiber_parks;
    t.fiber_unparks += s.fiber_unparks;
  }
  return t;
}

SchedulerStats Scheduler::stats() const noexcept {
  const WorkerStats t = total_stats();
  SchedulerStats s;
  s.threads = threads();
  // Created is read after finished (like alive()), so alive = created - finished >= 0.
  s.fibers_finished = t.finished;
  s.fibers_created = impl_->external_spawned.load(std::memory_order_seq_cst);
  for (int i = 0; i < s.threads; ++i) s.fibers_created += stats(i).spawned;
  s.fibers_alive = s.fibers_created - s.fibers_finished;
  s.switches = t.switches;
  s.steals = t.steals;
  s.fiber_parks = t.fiber_parks;
  s.fiber_unparks = t.fiber_unparks + impl_->external_unparks.load(std::memory_order_relaxed);
  s.worker_sleeps = t.parks;
  const StackPoolStats st = stack_stats();
  s.stacks_mapped = st.mapped;
  s.stacks_cached = st.cached;
  s.stack_bytes_reserved = st.reserved_bytes;
  return s;
}

std::size_t Scheduler::trim_stacks(std::size_t keep) noexcept { return impl_->stack_pool.trim(keep); }

StackPoolStats Scheduler::stack_stats() const noexcept {
  StackPoolStats st = impl_->stack_pool.stats();
  for (const auto& w : impl_->workers) st.cached += w->stacks.cached();
  return st;
}

}  // namespace lionet
