// lionet/fiber/fiber.h: the Fiber object: identity, the one-word state, its stack and saved
// context, the exception it ended with, and fiber-local storage.
//
// Owns the mechanism of a fiber, not its policy: fiber/ knows nothing of run queues or
// workers (sched/ decides who runs when, and performs the switches through
// fiber/detail/context.h).
//
// MIGRATION HAZARD (ARCHITECTURE decision 6): a fiber may resume on another worker thread
// after any scheduling point (yield, sleep, park, any hooked call, any sync wait). Any
// thread-local read before such a point is stale after it: errno, a cached thread_local
// address, std::this_thread::get_id(). glibc marks __errno_location() `const`, so the
// compiler may reuse errno's address across a switch: code that must read errno after a
// switch reads it through a non-inlined function, and LioNet's own code never caches a
// thread-local address across a switch (see sched/detail/worker.h, current_worker()).
// Pin a fiber (SpawnOptions::pin_worker) if it must stay on one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/fiber/detail/cancel_state.h"
#include "lionet/fiber/detail/context.h"
#include "lionet/fiber/stack_pool.h"
#include "lionet/fiber/wait_reason.h"

namespace lionet {
class FiberRegistryShard;
namespace detail {
struct DebugLayout;  // debug_info.cc: the offsets debuggers read
}

// The state word: low bits are the FiberState, kNotifiedBit marks an unpark that arrived
// while the fiber was still running (it has not finished switching out yet).
enum class FiberState : uint32_t {
  kCreated = 0,  // spawned, never run, no stack yet
  kRunnable = 1,  // in a run queue
  kRunning = 2,  // on a worker
  kParked = 3,  // switched out, waiting for unpark()
  kDone = 4,  // body returned or threw; stack released
};
const char* to_string(FiberState s) noexcept;

class Fiber {
 public:
  static constexpr uint32_t kStateMask = 0xff;
  static constexpr uint32_t kNotifiedBit = 0x100;

  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  uint64_t id() const noexcept { return id_; }
  const std::string& name() const noexcept { return name_; }
  // Before the fiber is spawned, or by the fiber itself: fiber dumps read the name from other
  // threads, under the registry shard's lock, which set_name() takes once the fiber is listed.
  void set_name(std::string_view n);
  FiberState state() const noexcept {
    return static_cast<FiberState>(state_.load(std::memory_order_acquire) & kStateMask);
  }
  // The exception the body ended with (null if it returned). Valid once state() == kDone.
  const std::exception_ptr& exception() const noexcept { return exception_; }
  // Moves the exception out (join() does, so the exception object dies on the joiner's thread
  // with the exception in flight, not on whichever thread drops the last fiber reference).
  std::exception_ptr take_exception() noexcept { return std::move(exception_); }
  // -1: may run on any worker; otherwise the index of the worker it is pinned to.
  int pinned_worker() const noexcept { return pinned_worker_; }
  // Only the fiber itself changes its pin, while running (sched/ PinGuard); wakers read it
  // after the park/unpark handshake, which orders it.
  void set_pinned_worker(int w) noexcept { pinned_worker_ = w; }

  // Reference counting: the scheduler holds one until the fiber is done; each JoinHandle one.
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    // A holder that sees 1 is the only one, and no one else can add a reference (only holders
    // do): it frees without the RMW. acq_rel: the last releaser must see every write made by
    // other holders before it frees.
    if (refs_.load(std::memory_order_acquire) == 1 || refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }
  // True when the caller's reference is the only one (e.g. no JoinHandle exists).
  bool sole_owner() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }

  // Runs the body, catching any exception into exception(). Called once, on the fiber's stack.
  void run_body() noexcept;

  // Fiber objects come from a pool (fiber.cc): size classes of 64 bytes up to 1 KiB, per-thread
  // free lists of about kObjectCacheDepth per class, batches of 64 through a global depot, new
  // blocks carved from mmap'ed chunks (larger objects: the global allocator). A fiber freed on
  // another thread than the one that made it feeds that thread's list. Measured: malloc + free
  // were 40% of a detached spawn (glibc's tcache holds 7 objects per size), and glibc's arena
  // growth (an mprotect per page) stalled page faults of a million spawns (decision D16).
  static constexpr std::size_t kObjectCacheDepth = 1024;
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  // ---- Fiber-local storage (see fiber_local.h); slot indices are process-wide. ----
  void* local(size_t slot) const noexcept { return slot < locals_.size() ? locals_[slot] : nullptr; }
  void set_local(size_t slot, void* value, void (*deleter)(void*));

  // ---- Fields below are used by sched/ (the policy) and owned as documented. ----
  // state_ and its NOTIFIED bit: see sched/park.cc for every transition.
  std::atomic<uint32_t> state_{static_cast<uint32_t>(FiberState::kCreated)};
  detail::ExecutionContext ctx_;  // written only by the thread that switches this fiber out
  Stack stack_;  // acquired on first run, released when done
  Fiber* next_ = nullptr;  // intrusive link for the inject queue; owned by its holder
  // Worker it last ran on (sched/ private). Written by that worker when the fiber starts
  // running; relaxed: unparkers read it after the acquire on state_ that orders it, dumps
  // read it for display only.
  std::atomic<void*> worker_{nullptr};
  // Who joined: a Parker stored by join(); read by the finishing worker (see sched/join.cc).
  std::atomic<uintptr_t> joiner_{0};

  // ---- Introspection (fiber dumps, sched/fiber_dump.h); never read to decide anything. ----
  // When the fiber entered its current state: CLOCK_MONOTONIC_COARSE ns (sched/ writes it
  // from its workers' cached tick; see sched/detail/coarse_clock.h). Relaxed: display only.
  std::atomic<int64_t> state_since_ns_{0};
  FiberWaitRecord wait_;  // what it waits for while parked (wait_reason.h)
  // Registry links (fiber_registry.h): guarded by reg_shard_'s lock; reg_shard_ is written by
  // insert() before the fiber is published and cleared by remove() after it finished.
  Fiber* reg_prev_ = nullptr;
  Fiber* reg_next_ = nullptr;
  FiberRegistryShard* reg_shard_ = nullptr;
  // Cancellation, deadline and shields (sched/cancel.h; detail/cancel_state.h owns the rules).
  // Last: the fields a switch touches stay where they were (a yield measured 6% slower with
  // this record between them).
  detail::CancelState cancel_;
  // Pthread mutexes this fiber took and still holds after a switch found them held
  // (sched/os_locks.h): released wherever it resumes. Owner-only.
  uint32_t os_locks_carried_ = 0;

 protected:
  explicit Fiber(int pinned_worker = -1) noexcept;
  virtual ~Fiber();
  virtual void body() = 0;

 private:
  friend struct detail::DebugLayout;
  void destroy() noexcept { delete this; }

  const uint64_t id_;
  int pinned_worker_;
  std::atomic<uint32_t> refs_{1};
  std::string name_;
  std::exception_ptr exception_;
  struct LocalDeleter {
    void (*fn)(void*);
  };
  std::vector<void*> locals_;
  std::vector<LocalDeleter> local_deleters_;
};

// The fiber running on this thread, or nullptr on a plain thread / in a scheduler loop.
Fiber* current_fiber() noexcept;

namespace detail {
// The running fiber of this thread: read only through current_fiber() (a non-inlined call, so
// no caller keeps a value from before a switch); written by sched/ at every switch, inline,
// always before the jump on the thread that jumps. constinit: no TLS wrapper call.
extern constinit thread_local Fiber* t_current_fiber;
inline void set_current_fiber(Fiber* f) noexcept { t_current_fiber = f; }
}  // namespace detail
}  // namespace lionet
