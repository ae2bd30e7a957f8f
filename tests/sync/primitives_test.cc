// lionet::Semaphore, lionet::WaitGroup, lionet::Event.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "lionet/sync/event.h"
#include "lionet/sync/semaphore.h"
#include "lionet/sync/wait_group.h"
#include "sync_test_util.h"

namespace {
using namespace std::chrono_literals;
using lionet::test::kScale;

TEST(Semaphore, BoundsConcurrencyAcrossWorkers) {
  constexpr int kPermits = 3, kFibers = 200, kIters = 200 / kScale;
  lionet::Scheduler s({.threads = 2});
  lionet::Semaphore sem(kPermits);
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<lionet::JoinHandle<void>> hs;
  for (int f = 0; f < kFibers; ++f) {
    hs.push_back(s.spawn([&] {
      for (int i = 0; i < kIters; ++i) {
        sem.acquire();
        int now_inside = inside.fetch_add(1) + 1;
        int m = max_inside.load();
        while (now_inside > m && !max_inside.compare_exchange_weak(m, now_inside)) {
        }
        lionet::this_fiber::yield();
        inside.fetch_sub(1);
        sem.release();
      }
    }));
  }
  for (auto& h : hs) h.join();
  EXPECT_LE(max_inside.load(), kPermits);
  EXPECT_EQ(sem.available(), kPermits);
}

TEST(Semaphore, TimedAcquireAndBatchRelease) {
  lionet::Semaphore sem(0);
  EXPECT_FALSE(sem.try_acquire());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(sem.try_acquire_for(10ms));  // plain thread
  EXPECT_GE(lionet::test::elapsed_since(t0), 10ms);
  lionet::Scheduler s({.threads = 2});
  std::atomic<int> got{0};
  std::vector<lionet::JoinHandle<void>> hs;
  for (int i = 0; i < 5; ++i) {
    hs.push_back(s.spawn([&] {
      if (sem.try_acquire_for(30s)) got.fetch_add(1);
    }));
  }
  sem.release(5);
  for (auto& h : hs) h.join();
  EXPECT_EQ(got.load(), 5);
  EXPECT_EQ(sem.available(), 0);
}

// Timed acquirers with tiny deadlines racing with release(): a permit handed to a waiter whose
// deadline just won must go to the next waiter, never vanish. 8 fibers x 3,000 (TSan: 300)
// acquire/release pairs on 2 permits; at the end all permits are back.
TEST(Semaphore, TimedAcquirersRacingWithReleaseLoseNoPermit) {
  constexpr int kFibers = 8, kIters = 3000 / kScale;
  lionet::Scheduler s({.threads = 2});
  lionet::Semaphore sem(2);
  std::atomic<long> timeouts{0};
  lionet::WaitGroup wg(kFibers);
  for (int f = 0; f < kFibers; ++f) {
    s.spawn([&, f] {
       for (int i = 0; i < kIters; ++i) {
         if (f % 2) {
           while (!sem.try_acquire_for(20us)) timeouts.fetch_add(1, std::memory_order_relaxed);
         } else {
           sem.acquire();
         }
         if (i % 4 == 0) lionet::this_fiber::yield();
         sem.release();
       }
       wg.done();
     }).detach();
  }
  ASSERT_TRUE(wg.wait_for(120s)) << "acquirers stuck: a lost permit";
  EXPECT_EQ(sem.available(), 2);
  RecordProperty("timeouts", static_cast<int>(timeouts.load()));
}

// Many rounds of: waiters with tiny timeouts poll an Event / a WaitGroup while another fiber
// sets / completes it. Every waiter must observe completion; no waiter may hang.
TEST(Event, TimedWaitersRacingWithSet) {
  constexpr int kRounds = 2000 / kScale;
  lionet::Scheduler s({.threads = 2});
  s.spawn([&] {
     for (int r = 0; r < kRounds; ++r) {
       lionet::Event ev;
       lionet::WaitGroup wg(1), waiters(4);
       for (int w = 0; w < 4; ++w) {
         lionet::go([&, w] {
           if (w % 2) {
             while (!ev.wait_for(5us)) {
             }
           } else {
             while (!wg.wait_for(5us)) {
             }
           }
           waiters.done();
         });
       }
       lionet::go([&] {
         lionet::this_fiber::yield();
         ev.set();
         wg.done();
       });
       ASSERT_TRUE(waiters.wait_for(30s)) << "round " << r;
     }
   }).join();
}

TEST(WaitGroup, WaitsForEveryFiber) {
  constexpr int kFibers = 10000 / kScale;
  lionet::Scheduler s({.threads = 2});
  lionet::WaitGroup wg;
  std::atomic<int> ran{0};
  s.spawn([&] {
     wg.add(kFibers);
     for (int i = 0; i < kFibers; ++i) {
       lionet::go([&] {
         ran.fetch_add(1, std::memory_order_relaxed);
         wg.done();
       });
     }
     wg.wait();
     EXPECT_EQ(ran.load(), kFibers);
   }).join();
  wg.wait();  // zero: returns at once, from a plain thread
}

TEST(WaitGroup, PlainThreadWaitsAndTimesOut) {
  lionet::WaitGroup wg(1);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(wg.wait_for(10ms));
  EXPECT_GE(lionet::test::elapsed_since(t0), 10ms);
  lionet::Scheduler s({.threads = 1});
  s.spawn([&] { wg.done(); }).detach();
  EXPECT_TRUE(wg.wait_for(30s));
  EXPECT_EQ(wg.count(), 0);
}

#if !defined(LIONET_TSAN)
TEST(WaitGroupDeathTest, NegativeCounterIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        lionet::WaitGroup wg;
        wg.done();
      },
      "negative");
}
#endif

TEST(Event, SetReleasesPastAndFutureWaiters) {
  lionet::Scheduler s({.threads = 2});
  lionet::Event ev;
  int payload = 0;
  std::vector<lionet::JoinHandle<int>> hs;
  for (int i = 0; i < 20; ++i) {
    hs.push_back(s.spawn([&] {
      ev.wait();
      return payload;  // written before set(): visible after wait()
    }));
  }
  EXPECT_FALSE(ev.wait_for(5ms));
  payload = 7;
  ev.set();
  ev.set();  // idempotent
  for (auto& h : hs) EXPECT_EQ(h.join(), 7);
  EXPECT_TRUE(ev.is_set());
  EXPECT_TRUE(s.spawn([&] { return ev.wait_for(1ms); }).join());
}
}  // namespace
