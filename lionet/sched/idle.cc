// lionet/sched/idle.cc: idle-worker coordination: who sleeps, who searches, who watches the
// driver, and how a push of new work wakes exactly one sleeper. Protocols 3 (wake-up), 4
// (parking), 8 and 8b (the driver's poller) and 9 (polling before sleeping), written at the
// top of scheduler.cc with the others; the idle-state word and the inline parts that
// find_work() runs on every idle round (try_begin_search, end_search, has_visible_work) are in
// detail/worker.h. Tokio's multi_thread/idle.rs is the same idea.
#include <algorithm>
#include <chrono>
#include <mutex>

#include "lionet/sched/detail/coarse_clock.h"
#include "lionet/sched/detail/futex.h"
#include "lionet/sched/detail/worker.h"

namespace lionet {
namespace {
std::atomic<uint64_t> g_io_generation{1};
}  // namespace
uint64_t io_generation() noexcept { return g_io_generation.load(std::memory_order_relaxed); }
}  // namespace lionet

namespace lionet::detail {

namespace {
// A poll delivered events or a driver wait ended: what fibers read from here on is new.
inline bool next_io_generation(bool events) noexcept {
  if (events) g_io_generation.fetch_add(1, std::memory_order_relaxed);
  return events;
}
}  // namespace

// ---------------------------------------------------------------- a worker going idle

void Worker::wake() noexcept {
  // seq_cst: with in_driver, a Dekker pair (protocol 8). The futex call only if it may sleep.
  if (wake_word.exchange(1, std::memory_order_seq_cst) != 0) return;
  if (in_driver.load(std::memory_order_seq_cst)) {
    // Protocol 8b: announce ourselves before reading `driver`, so set_driver() waits for us.
    sched->driver_wakers.fetch_add(1, std::memory_order_seq_cst);
    if (Driver* d = sched->driver.load(std::memory_order_seq_cst)) d->wake_worker(index);
    sched->driver_wakers.fetch_sub(1, std::memory_order_release);
  } else {
    futex_wake(&wake_word, 1);
  }
}

bool Worker::poll_driver() noexcept {
  if (!sched->driver.load(std::memory_order_relaxed)) return false;
  if (sched->driver_per_worker.load(std::memory_order_relaxed)) {
    if (Driver* d = take_own_driver()) {  // protocol 8c: our own part, whoever else polls
      const bool events = next_io_generation(d->poll());
      release_own_polling();
      return events;
    }
  }
  if (sched->polling.load(std::memory_order_relaxed) || sched->polling.exchange(true, std::memory_order_seq_cst))
    return false;
  // Protocol 8b: re-read after taking `polling`; set_driver() waits while we hold it.
  bool events = false;
  if (Driver* d = sched->take_driver()) events = next_io_generation(d->poll());
  sched->release_polling();
  return events;
}

Fiber* Worker::poll_before_sleep() noexcept {
  if (!sched->driver.load(std::memory_order_relaxed)) return nullptr;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(idle_poll_ns);
  do {
    fire_due_timers();
    if (poll_driver() || lifo_slot || sched->has_visible_work(*this)) {  // the latter sees our ring too
      if (Fiber* f = find_work()) return f;
    }
    if (sched->stopping.load(std::memory_order_relaxed)) break;
    cpu_relax();
  } while (std::chrono::steady_clock::now() < until);
  coarse_now_ns = coarse_monotonic_ns();
  return nullptr;
}

void Worker::park_idle() noexcept {
  fire_due_timers();  // exact: the sleep below must not start with a due timer unfired
  drain_handback();
  if (lifo_slot || mine_head || popped_pos < popped_len || !queue.empty() || pinned_len.load(std::memory_order_acquire))
    return;
  sched->register_sleeper(*this);
  if (sched->has_visible_work(*this) ||
      (sched->stopping.load(std::memory_order_seq_cst) && (sched->alive() == 0 || sched->abandoned.load()))) {
    sched->unregister_sleeper(*this);
    return;
  }
  const TimePoint deadline = timers.next_deadline();
  parks.inc();
  Driver* d = nullptr;
  bool own = false;  // protocol 8c: every idle worker sleeps in its own part of the driver
  if (sched->driver.load(std::memory_order_relaxed)) {
    if (sched->driver_per_worker.load(std::memory_order_relaxed) && (d = take_own_driver()) != nullptr) {
      own = true;
    } else if (!sched->polling.exchange(true, std::memory_order_seq_cst)) {
      // Protocol 8b: the driver as of after taking `polling` (set_driver may just have removed it).
      d = sched->take_driver();
      if (!d) sched->release_polling();
    }
  }
  if (d) {
    in_driver.store(true, std::memory_order_seq_cst);
    if (wake_word.load(std::memory_order_seq_cst) == 0) d->wait(deadline);
    next_io_generation(true);
    in_driver.store(false, std::memory_order_seq_cst);
    if (own) release_own_polling();
    else sched->release_polling();
    wake_word.store(0, std::memory_order_release);
    coarse_now_ns = coarse_monotonic_ns();
    sched->unregister_sleeper(*this);
    // Leaving with work: let another idle worker take over watching the driver.
    if (lifo_slot || !queue.empty()) sched->notify_parked();
    return;
  }
  if (wake_word.load(std::memory_order_acquire) == 0) futex_wait(&wake_word, 0, &deadline);
  wake_word.store(0, std::memory_order_release);
  coarse_now_ns = coarse_monotonic_ns();
  sched->unregister_sleeper(*this);
}

// ---------------------------------------------------------------- the driver's poller (8, 8b)

Driver* SchedulerImpl::take_driver() noexcept {
  Driver* d = driver.load(std::memory_order_seq_cst);
  polling_driver.store(d ? d : no_driver(), std::memory_order_seq_cst);
  return d;
}

// Protocol 8c: as `polling` + take_driver(), but this worker's own pair; gives it back at once
// (nullptr) if the driver is gone or is not per worker (set_driver is replacing it).
Driver* Worker::take_own_driver() noexcept {
  own_polling.store(true, std::memory_order_seq_cst);
  Driver* d = sched->driver.load(std::memory_order_seq_cst);
  own_polling_driver.store(d ? d : SchedulerImpl::no_driver(), std::memory_order_seq_cst);
  if (d && d->per_worker()) return d;
  release_own_polling();
  return nullptr;
}

void Worker::release_own_polling() noexcept {
  own_polling_driver.store(nullptr, std::memory_order_seq_cst);
  own_polling.store(false, std::memory_order_release);
}

void SchedulerImpl::release_polling() noexcept {
  polling_driver.store(nullptr, std::memory_order_seq_cst);
  polling.store(false, std::memory_order_release);
}

Driver* SchedulerImpl::no_driver() noexcept {
  static char tag;  // never dereferenced: an address no driver can have
  return reinterpret_cast<Driver*>(&tag);
}

// ---------------------------------------------------------------- waking and sleepers (3, 4)

void SchedulerImpl::notify_parked() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with register_sleeper's RMW
  const uint32_t n = static_cast<uint32_t>(workers.size());
  uint32_t s = idle_state.load(std::memory_order_relaxed);
  if (searching_of(s) != 0 || unparked_of(s) >= n) return;
  Worker* w = nullptr;
  {
    std::lock_guard<std::mutex> lk(sleepers_mu);
    s = idle_state.load(std::memory_order_relaxed);
    if (searching_of(s) != 0 || unparked_of(s) >= n || sleepers.empty()) return;
    w = sleepers.back();
    sleepers.pop_back();
    w->sleeping = false;
    idle_state.fetch_add(1 + kSearchingOne, std::memory_order_seq_cst);  // unparked++, searching++
  }
  w->wake();
}

void SchedulerImpl::notify_all() noexcept {
  for (auto& w : workers) w->wake();
}

bool SchedulerImpl::register_sleeper(Worker& w) noexcept {
  std::lock_guard<std::mutex> lk(sleepers_mu);
  const uint32_t dec = 1 + (w.searching ? kSearchingOne : 0);
  const bool last_searcher = w.searching && searching_of(idle_state.load(std::memory_order_relaxed)) == 1;
  w.searching = false;
  idle_state.fetch_sub(dec, std::memory_order_seq_cst);
  w.sleeping = true;
  sleepers.push_back(&w);
  return last_searcher;
}

void SchedulerImpl::unregister_sleeper(Worker& w) noexcept {
  std::lock_guard<std::mutex> lk(sleepers_mu);
  if (w.sleeping) {
    sleepers.erase(std::find(sleepers.begin(), sleepers.end(), &w));
    w.sleeping = false;
    idle_state.fetch_add(1, std::memory_order_seq_cst);
  } else {
    w.searching = true;  // a notifier popped us and counted us as searching
  }
}

}  // namespace lionet::detail
