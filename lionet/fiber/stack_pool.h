// lionet/fiber/stack_pool.h: fiber stacks (ARCHITECTURE decision 5).
//
// Owns: mmap'd stacks with a PROT_NONE guard page below them, committed lazily by the kernel
// (MAP_NORESERVE), reused through a per-thread cache so the mmap + mprotect (about 12 us) is
// paid once per stack, not per fiber; and the SIGSEGV handler on an alternate signal stack
// that turns a guard-page hit into one line naming the fiber and its stack size.
// Must not: know about schedulers. Thread-safety: see each function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lionet {

struct Stack {
  void* bottom = nullptr;  // lowest usable address (just above the guard page)
  std::size_t size = 0;    // usable bytes
  explicit operator bool() const noexcept { return bottom != nullptr; }
};

struct StackPoolOptions {
  std::size_t stack_size = 128 * 1024;  // usable bytes, rounded up to whole pages
  std::size_t shared_cache = 1024;      // unused stacks kept mapped in the shared pool
};

class StackPool {
 public:
  explicit StackPool(StackPoolOptions options = {});
  ~StackPool();  // unmaps every cached stack; stacks still out must have been returned
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // Thread-safe (a mutex: use a StackCache in front of it on hot paths). Throws
  // std::system_error if mmap fails (address space or vm.max_map_count exhausted).
  Stack acquire();
  // Thread-safe. The stack must come from this pool. Up to shared_cache stacks are kept mapped
  // with their touched pages (no madvise: it costs TLB shootdowns on every release); beyond
  // that, stacks are unmapped.
  void release(Stack s) noexcept;

  std::size_t stack_size() const noexcept { return stack_size_; }
  // Stacks currently mapped (in use or cached).
  std::size_t mapped() const noexcept;

 private:
  struct Impl;
  Impl* impl_;
  std::size_t stack_size_;
};

// A per-thread front for a StackPool: a plain vector, no locks. Not thread-safe: one owner
// thread (each scheduler worker has one). Refills and spills in batches of half its capacity.
class StackCache {
 public:
  StackCache(StackPool& pool, std::size_t capacity) noexcept : pool_(pool), capacity_(capacity ? capacity : 1) {}
  ~StackCache();  // returns every cached stack to the pool
  StackCache(const StackCache&) = delete;
  StackCache& operator=(const StackCache&) = delete;

  Stack acquire() {
    if (count_ == 0) return pool_.acquire();
    return cache_[--count_];
  }
  void release(Stack s) noexcept {
    if (count_ == capacity_) spill();
    cache_[count_++] = s;
  }
  std::size_t cached() const noexcept { return count_; }

 private:
  void spill() noexcept;
  StackPool& pool_;
  std::size_t capacity_;
  std::size_t count_ = 0;
  Stack* cache_ = new Stack[capacity_];
};

// Installs (once per process) the SIGSEGV handler that reports guard-page hits, and gives the
// calling thread an alternate signal stack (each worker thread calls this at start). The handler
// looks up current_fiber() and its stack, so switches pay nothing for it.
void install_stack_overflow_handler();

}  // namespace lionet
