// lionet/base/spinlock.h: a test-and-test-and-set spinlock for critical sections of a few
// dozen instructions (wait lists of sync primitives, stack pool refills). Never hold it across a
// fiber switch or a system call: a worker spinning on a lock held by a parked fiber deadlocks.
// (The one exception, park_and_unlock in sched/park.h, holds a channel's lock across the jump
// itself only, and releases it first whenever the switch would be longer: scheduler.cc.)
//
// A waiter spins with `pause` for about kSpinsBeforeYield rounds (a few microseconds), then
// calls sched_yield() between looks: a holder preempted by the kernel (a busy machine, more
// threads than CPUs) then gets the CPU back instead of the waiter burning its whole slice.
// unlock() stays one plain store.
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
    unsigned spins = 0;
    do {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins < kSpinsBeforeYield) {
          ++spins;
          cpu_relax();
        } else {
          sched_yield();  // not hooked (hook/ leaves it to the kernel): the thread, not the fiber
        }
      }
    } while (locked_.exchange(true, std::memory_order_acquire));
  }

  std::atomic<bool> locked_{false};
};
}  // namespace lionet
