// lionet/base/spinlock.h: a test-and-test-and-set spinlock for critical sections of a few
// dozen instructions (wait lists of sync primitives, stack pool refills). Never hold it across a
// fiber switch or a system call: a worker spinning on a lock held by a parked fiber deadlocks.
// (The one exception, park_and_unlock in sched/park.h, holds a channel's lock across the jump
// itself only, and releases it first whenever the switch would be longer: scheduler.cc.)
//
// A waiter looks at the lock with exponential backoff between looks (1, 2, 4 ... 32 `pause`s:
// every look pulls the cache line away from the holder, and with two workers on a channel's
// lock that cost a fan-in 40% of its speed), for about kSpinsBeforeYield pauses in all (a few
// microseconds), then calls sched_yield() between looks: a holder preempted by the kernel (a
// busy machine, more threads than CPUs) then gets the CPU back instead of the waiter burning
// its whole slice. unlock() stays one plain store.
#pragma once

#include <sched.h>

#include <atomic>

namespace lionet {
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class SpinLock {
 public:
  static constexpr unsigned kSpinsBeforeYield = 256;

  void lock() noexcept {
    // acquire: pairs with the release in unlock(), so the protected data is visible.
    if (__builtin_expect(!locked_.exchange(true, std::memory_order_acquire), 1)) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  [[gnu::noinline]] void lock_contended() noexcept {
    unsigned spins = 0, backoff = 1;
    do {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins < kSpinsBeforeYield) {
          // Exponential backoff between looks: each look pulls the line away from the holder.
          for (unsigned i = 0; i < backoff; ++i) cpu_relax();
          spins += backoff;
          if (backoff < kMaxBackoff) backoff *= 2;
        } else {
          sched_yield();  // not hooked (hook/ leaves it to the kernel): the thread, not the fiber
        }
      }
    } while (locked_.exchange(true, std::memory_order_acquire));
  }
  static constexpr unsigned kMaxBackoff = 32;

  std::atomic<bool> locked_{false};
};
}  // namespace lionet
