// Fiber mechanics seen by a user: switching, fiber-local storage, exceptions, stack overflow.
#include "lionet/fiber/fiber.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "lionet/fiber/fiber_local.h"
#include "lionet/fiber/stack_pool.h"
#include "lionet/sched/scheduler.h"

namespace {

TEST(Fiber, SwitchingInterleavesTwoFibersOnOneThread) {
  lionet::Scheduler s({.threads = 1});
  std::string trace;
  s.spawn([&] {  // spawn both from a fiber: both are queued before either runs
     auto step = [&trace](const char* letters) {
       for (const char* c = letters; *c; ++c) {
         trace += *c;
         lionet::this_fiber::yield();
       }
     };
     auto a = lionet::Scheduler::current()->spawn([&] { step("ace"); });
     auto b = lionet::Scheduler::current()->spawn([&] { step("bdf"); });
     a.join();
     b.join();
   })
      .join();
  EXPECT_EQ(trace, "abcdef");
}

TEST(Fiber, LocalsAreSeparatePerFiberAndSurviveSwitches) {
  static lionet::FiberLocal<int> counter;
  lionet::Scheduler s({.threads = 2});
  std::vector<lionet::JoinHandle<int>> hs;
  for (int i = 0; i < 50; ++i) {
    hs.push_back(s.spawn([i] {
      for (int k = 0; k < 100; ++k) {
        *counter += i;
        lionet::this_fiber::yield();  // may migrate to the other worker
      }
      return *counter;
    }));
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(hs[i].join(), 100 * i);
  *counter = 7;  // the plain thread has its own instance
  EXPECT_EQ(*counter, 7);
}

struct Tracker {
  static inline std::atomic<int> live{0};
  Tracker() { ++live; }
  ~Tracker() { --live; }
};

TEST(Fiber, LocalValuesAreDestroyedWithTheFiber) {
  static lionet::FiberLocal<Tracker> local;
  {
    lionet::Scheduler s({.threads = 1});
    s.spawn([] { (void)local.get(); }).join();
  }
  EXPECT_EQ(Tracker::live.load(), 0);
}

TEST(Fiber, ExceptionIsCapturedAndNamesReachTheHandle) {
  lionet::Scheduler s({.threads = 1});
  auto h = s.spawn([] { throw std::out_of_range("index 9"); }, {.name = "thrower"});
  EXPECT_THROW(h.join(), std::out_of_range);
}

TEST(Fiber, StatesAreReported) {
  EXPECT_STREQ(lionet::to_string(lionet::FiberState::kParked), "parked");
  lionet::Scheduler s({.threads = 1});
  auto h = s.spawn([] { return lionet::current_fiber()->state() == lionet::FiberState::kRunning; });
  EXPECT_TRUE(h.join());
}

TEST(StackPool, ReusesStacksInsteadOfMappingNewOnes) {
  lionet::StackPool pool({.stack_size = 64 * 1024});
  lionet::Stack a = pool.acquire();
  EXPECT_GE(a.size, 64u * 1024);
  pool.release(a);
  lionet::Stack b = pool.acquire();
  EXPECT_EQ(a.bottom, b.bottom);
  EXPECT_EQ(pool.mapped(), 1u);
  pool.release(b);
}

TEST(StackPool, CacheBatchesThroughThePool) {
  lionet::StackPool pool({.stack_size = 32 * 1024});
  {
    lionet::StackCache cache(pool, 4);
    std::vector<lionet::Stack> out;
    ASSERT_EQ(pool.reserve(10), 10u);
    for (int i = 0; i < 10; ++i) out.push_back(cache.acquire_reserved());
    pool.unreserve(10);
    for (auto& st : out) cache.release(st);
    EXPECT_LE(cache.cached(), 4u);
    EXPECT_EQ(pool.mapped(), 10u);
  }
  // Everything is back in the pool: reacquiring maps nothing new.
  lionet::Stack again = pool.acquire();
  EXPECT_EQ(pool.mapped(), 10u);
  pool.release(again);
}

[[gnu::noinline]] int recurse(int depth) {
  volatile char pad[1024];
  pad[0] = static_cast<char>(depth);
  return depth <= 0 ? pad[0] : recurse(depth - 1) + pad[0];
}

TEST(FiberDeathTest, StackOverflowNamesTheFiberAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        lionet::Scheduler s({.threads = 1, .stack_size = 64 * 1024});
        s.spawn([] { return recurse(1 << 20); }, {.name = "deep-recursion"}).join();
      },
      "fiber stack overflow: fiber id [0-9]+ name \"deep-recursion\" overflowed its 65536-byte stack");
}
}  // namespace
