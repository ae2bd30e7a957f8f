// lionet::SpinLock: mutual exclusion when more threads want it than there are CPUs (the
// spin-then-sched_yield path of lock_contended), and a waiter that outlasts its spin budget
// while the holder sleeps still gets the lock once it is released.
#include "lionet/base/spinlock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace {
#if defined(LIONET_TSAN) || defined(LIONET_ASAN) || defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr long kScale = 10;
#else
constexpr long kScale = 1;
#endif

TEST(SpinLock, EightThreadsOnTwoCpusLoseNoIncrement) {
  constexpr int kThreads = 8;
  constexpr long kEach = 200000 / kScale;
  lionet::SpinLock lock;
  long counter = 0;  // plain: only the lock orders the increments
  long pairs = 0;  // two writes that must never be seen apart
  long torn = 0;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&] {
      for (long i = 0; i < kEach; ++i) {
        std::lock_guard<lionet::SpinLock> g(lock);
        if (pairs != counter) ++torn;
        ++counter;
        ++pairs;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, kThreads * kEach);
  EXPECT_EQ(torn, 0);
}

TEST(SpinLock, WaiterPastItsSpinBudgetGetsTheLockWhenReleased) {
  lionet::SpinLock lock;
  lock.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    lock.lock();  // spins kSpinsBeforeYield rounds, then yields until the release below
    got.store(true);
    lock.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // far past the spin budget
  EXPECT_FALSE(got.load()) << "the waiter entered while the lock was held";
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}
}  // namespace
