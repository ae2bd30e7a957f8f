// lionet/fiber/stack_pool.h: fiber stacks (ARCHITECTURE decision 5).
//
// Owns: stacks carved out of large slab mappings (one mmap for many stacks, so a million live
// fibers cost about a thousand kernel mappings, not two million), committed lazily by the
// kernel (MAP_NORESERVE); their overflow protection (a guard page per stack, or a canary word
// where no guard page can be had: see StackProtection); reuse through a per-thread cache so
// that set-up is paid once per stack, not per fiber; the return of cold stacks' pages to the
// kernel in batches; and the SIGSEGV handler on an alternate signal stack that turns a
// guard-page hit into one line naming the fiber and its stack size.
// Must not: know about schedulers. Thread-safety: see each function.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lionet {

// How a stack's overflow is caught. Set once per stack, by StackPool::protect().
enum class StackGuard : uint8_t {
  kNone = 0,  // not protected yet (a stack carved but never run)
  kRegion,  // a guard page installed with madvise(MADV_GUARD_INSTALL): no mapping of its own
  kPage,  // a guard page made with mprotect(PROT_NONE): splits the slab (+2 kernel mappings)
  kCanary,  // a canary word at the bottom, checked whenever its fiber switches out
};
const char* to_string(StackGuard g) noexcept;

struct Stack {
  void* bottom = nullptr;  // lowest usable address (just above the guard/slack page)
  std::size_t size = 0;  // usable bytes
  StackGuard guard = StackGuard::kNone;
  explicit operator bool() const noexcept { return bottom != nullptr; }
};

// Which protection StackPool::protect() gives a stack.
enum class StackProtection : uint8_t {
  // Guard regions where the kernel has them (Linux >= 6.13); else mprotect'ed guard pages for
  // the first guard_page_budget stacks and canaries beyond. Overflow is always detected.
  kAuto,
  kGuardRegion,  // guard regions only; on an older kernel, as kAuto (they cannot be had)
  kGuardPage,  // mprotect'ed guard pages within guard_page_budget, canaries beyond
  kCanary,  // canaries only (e.g. to keep kernel mappings to a minimum on old kernels)
};
const char* to_string(StackProtection p) noexcept;

struct StackPoolOptions {
  std::size_t stack_size = 128 * 1024;  // usable bytes, rounded up to whole pages (min 16 KiB)
  // Unused stacks kept with their touched pages in the shared pool (fast reuse); beyond it,
  // stacks stay carved but their pages go back to the kernel (MADV_DONTNEED, in batches).
  std::size_t shared_cache = 1024;
  StackProtection protection = StackProtection::kAuto;
  // kGuardPage (and kAuto without guard regions): stacks given an mprotect'ed guard page, each
  // costing 2 of the process's vm.max_map_count mappings (65,530 by default); later stacks get
  // a canary. 4096 stacks = about 8,200 mappings.
  std::size_t guard_page_budget = 4096;
  // Cap on the address space mapped for stacks (slabs, guard pages included), 0 = none: past
  // it reserve() throws. Virtual bytes: a parked fiber's real cost is the pages it touched.
  // (A Scheduler derives it from max_stack_memory plus room for its caches and batches, and
  // checks max_stack_memory itself against its live fibers.)
  std::size_t max_reserved_bytes = 0;
};

// Figures for /metrics and fiber dumps. Each is read separately (relaxed): approximate while
// the pool is in use.
struct StackPoolStats {
  std::size_t mapped = 0;  // stacks carved from slabs: in use or cached
  std::size_t cached = 0;  // of those, unused (shared pool and worker caches)
  std::size_t reserved_bytes = 0;  // address space of every slab (virtual, not resident)
  std::size_t slabs = 0;  // slab mappings (before guard pages split any)
  std::size_t guard_pages = 0;  // stacks protected with an mprotect'ed page (kPage)
  std::size_t canaries = 0;  // stacks protected with a canary (kCanary) right now
};

class StackPool {
 public:
  explicit StackPool(StackPoolOptions options = {});
  ~StackPool();  // unmaps every slab; stacks still out must have been returned
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // ---- Reservation: how spawn() fails at the spawn site while stacks are taken at first run.
  // A scheduler reserves a stack when it spawns a fiber (throwing there if none can be had) and
  // takes the stack itself only when the fiber first runs, from the running worker's cache: a
  // thousand fibers spawned before any runs then share a few hot stacks instead of touching a
  // thousand. reserve() maps slabs so that capacity >= stacks out of the pool + reservations
  // not yet taken, so taking a reserved stack never needs a new mapping. Holders may take and
  // give back reservations in batches.

  // Reserves up to n stacks (at least one), mapping slabs as needed. Thread-safe. Throws
  // std::system_error (ENOMEM) when not even one can be had: max_reserved_bytes reached, or
  // the address space / map count exhausted.
  std::size_t reserve(std::size_t n);
  // n reservations end: unused, or turned into stacks (acquire_reserved).
  void unreserve(std::size_t n) noexcept;
  // Up to n stacks into out (one lock), the first against a reservation the caller holds (and
  // keeps: it returns it with unreserve, in batches if it likes); the others only where they
  // leave every other reservation covered. Returns how many (>= 1). Thread-safe.
  std::size_t acquire_reserved(Stack* out, std::size_t n);
  // For a user without a scheduler: reserve(1) + acquire_reserved + unreserve(1); one stack
  // or std::system_error. Thread-safe.
  Stack acquire();
  // Thread-safe. The stack must come from this pool. The first shared_cache unused stacks keep
  // their touched pages (no madvise per release: it costs TLB shootdowns); beyond that, their
  // pages are returned to the kernel in batches.
  void release(Stack s) noexcept;
  // Returns the touched pages of the unused stacks beyond the `keep` most recently released to
  // the kernel (they stay carved, like those beyond shared_cache), after a burst: the shared
  // cache would otherwise hold up to shared_cache stacks' pages for good. Thread-safe; one
  // madvise per run of neighbouring stacks. Returns how many stacks gave their pages back.
  std::size_t trim(std::size_t keep) noexcept;

  // Gives s (s.guard == kNone) its overflow protection, per the options. Never fails: a stack
  // that cannot get a guard page gets a canary. Any thread.
  void protect(Stack& s) noexcept;
  // For the fresh stacks (guard kNone) among n just taken: where the kernel has guard regions
  // and process_madvise for itself (Linux 6.13), installs their guards and faults in their top
  // pages in two system calls per 64 stacks instead of one call and one page fault each. The
  // stacks it could not do keep kNone (protect() at their first run). Any thread.
  void prepare_fresh(Stack* stacks, std::size_t n) noexcept;

  std::size_t stack_size() const noexcept { return stack_size_; }
  // Usable bytes and address space (usable + its guard/slack page) of a stack of a pool made
  // with StackPoolOptions::stack_size = requested.
  static std::size_t usable_size(std::size_t requested) noexcept;
  static std::size_t stride(std::size_t requested) noexcept;
  // Stacks currently carved (in use or cached).
  std::size_t mapped() const noexcept;
  // cached counts the pool's own free stacks only: add the StackCaches' cached() in front of it.
  StackPoolStats stats() const noexcept;

 private:
  struct Impl;
  Impl* impl_;
  std::size_t stack_size_;
};

// A per-thread front for a StackPool: a plain array, no locks. Not thread-safe: one owner
// thread (each scheduler worker has one). Refills and spills in batches of half its capacity.
class StackCache {
 public:
  StackCache(StackPool& pool, std::size_t capacity) noexcept : pool_(pool), capacity_(capacity ? capacity : 1) {}
  ~StackCache();  // returns every cached stack to the pool
  StackCache(const StackCache&) = delete;
  StackCache& operator=(const StackCache&) = delete;

  // Against a reservation the caller holds (StackPool::reserve): never fails.
  Stack acquire_reserved() noexcept {
    std::size_t n = count_.load(std::memory_order_relaxed);
    if (n == 0) n = refill();
    count_.store(n - 1, std::memory_order_relaxed);
    return cache_[n - 1];
  }
  void release(Stack s) noexcept {
    std::size_t n = count_.load(std::memory_order_relaxed);
    if (n == capacity_) n = spill();
    cache_[n] = s;
    count_.store(n + 1, std::memory_order_relaxed);
  }
  // Any thread (a statistic: stale once read).
  std::size_t cached() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::size_t refill() noexcept;  // returns the new count
  std::size_t spill() noexcept;  // returns the new count
  StackPool& pool_;
  std::size_t capacity_;
  // Written only by the owner (plain loads and stores, no locked RMW); atomic so that
  // statistics may read it from other threads.
  std::atomic<std::size_t> count_{0};
  Stack* cache_ = new Stack[capacity_];
};

// The canary word a kCanary stack holds at its bottom (it depends on the address, so a stale
// copy from another stack never matches).
inline uint64_t stack_canary_value(const void* bottom) noexcept {
  return 0x4c696f4e65745354ull ^ reinterpret_cast<uintptr_t>(bottom);
}
inline bool stack_canary_intact(const Stack& s) noexcept {
  return s.guard != StackGuard::kCanary ||
         *static_cast<const volatile uint64_t*>(s.bottom) == stack_canary_value(s.bottom);
}

// Prints `lionet: fiber stack overflow: fiber id N name "x" overflowed its S-byte stack ...` and
// aborts. Async-signal-safe (the SIGSEGV handler calls it). how: what caught it.
[[noreturn]] void die_of_stack_overflow(uint64_t fiber_id, const char* name, std::size_t size,
                                        const char* how) noexcept;

// Installs (once per process) the SIGSEGV handler that reports guard-page hits, and gives the
// calling thread an alternate signal stack (each worker thread calls this at start). The handler
// looks up current_fiber() and its stack, so switches pay nothing for it.
void install_stack_overflow_handler();

}  // namespace lionet
