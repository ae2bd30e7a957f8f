// lionet/base/spinlock.h: a test-and-test-and-set spinlock for critical sections of a few
// dozen instructions (wait lists of sync primitives, stack pool refills). Never hold it across a
// fiber switch or a system call: a worker spinning on a lock held by a parked fiber deadlocks.
#pragma once

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
  void lock() noexcept {
    // acquire: pairs with the release in unlock(), so the protected data is visible.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) cpu_relax();
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};
}  // namespace lionet
