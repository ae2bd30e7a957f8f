// lionet::CondVar: producer/consumer across workers with timed waits, pure timeouts,
// notify_all, fiber <-> plain thread.
#include "lionet/sync/cond_var.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "lionet/sync/mutex.h"
#include "lionet/sync/wait_group.h"
#include "sync_test_util.h"

namespace {
using namespace std::chrono_literals;
using lionet::test::kScale;

// Bounded queue of capacity 4; 4 producers x 20,000 items (TSan: 2,000), 4 consumers that
// wait with a 20 us timeout (so timeouts and notifications race all the time). Every item is
// consumed exactly once: the sum and the count are exact.
TEST(CondVar, ProducerConsumerWithTimeoutsExact) {
  constexpr int kProducers = 4, kConsumers = 4;
  constexpr int kItems = 20000 / kScale;
  constexpr std::size_t kCap = 4;
  lionet::Scheduler s({.threads = 2});
  lionet::Mutex mu;
  lionet::CondVar not_empty, not_full;
  std::deque<int> q;
  int producers_left = kProducers;
  long long sum = 0, count = 0;
  std::atomic<long> timeouts{0};
  std::vector<lionet::JoinHandle<void>> hs;
  for (int p = 0; p < kProducers; ++p) {
    hs.push_back(s.spawn([&, p] {
      for (int i = 1; i <= kItems; ++i) {
        std::unique_lock<lionet::Mutex> lk(mu);
        while (q.size() >= kCap) {
          if (not_full.wait_for(lk, 20us) == std::cv_status::timeout) timeouts.fetch_add(1);
        }
        q.push_back(p * kItems + i);
        not_empty.notify_one();
      }
      std::lock_guard<lionet::Mutex> g(mu);
      if (--producers_left == 0) not_empty.notify_all();
    }));
  }
  for (int c = 0; c < kConsumers; ++c) {
    hs.push_back(s.spawn([&] {
      for (;;) {
        std::unique_lock<lionet::Mutex> lk(mu);
        if (!not_empty.wait_for(lk, 20us, [&] { return !q.empty() || producers_left == 0; })) {
          timeouts.fetch_add(1);
          continue;
        }
        if (q.empty()) return;  // producers done and drained
        sum += q.front();
        ++count;
        q.pop_front();
        not_full.notify_one();
      }
    }));
  }
  for (auto& h : hs) h.join();
  const long long n = static_cast<long long>(kProducers) * kItems;
  EXPECT_EQ(count, n);
  EXPECT_EQ(sum, n * (n + 1) / 2);
  RecordProperty("timeouts", static_cast<int>(timeouts.load()));
}

TEST(CondVar, WaitForTimesOutWithoutNotify) {
  lionet::Scheduler s({.threads = 1});
  s.spawn([] {
     lionet::Mutex mu;
     lionet::CondVar cv;
     std::unique_lock<lionet::Mutex> lk(mu);
     auto t0 = std::chrono::steady_clock::now();
     EXPECT_EQ(cv.wait_for(lk, 15ms), std::cv_status::timeout);
     EXPECT_GE(lionet::test::elapsed_since(t0), 15ms);
     EXPECT_TRUE(lk.owns_lock());
     EXPECT_FALSE(cv.wait_for(lk, 1ms, [] { return false; }));
   }).join();
  // And on a plain thread.
  lionet::Mutex mu;
  lionet::CondVar cv;
  std::unique_lock<lionet::Mutex> lk(mu);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(cv.wait_for(lk, 10ms), std::cv_status::timeout);
  EXPECT_GE(lionet::test::elapsed_since(t0), 10ms);
}

// CondVar takes any BasicLockable: a bare lionet::Mutex as well as std::unique_lock.
TEST(CondVar, WorksWithABareMutex) {
  lionet::Scheduler s({.threads = 2});
  lionet::Mutex mu;
  lionet::CondVar cv;
  int stage = 0;
  auto waiter = s.spawn([&] {
    mu.lock();
    cv.wait(mu, [&] { return stage == 1; });
    stage = 2;
    mu.unlock();
    cv.notify_one();
  });
  mu.lock();
  stage = 1;
  mu.unlock();
  cv.notify_one();
  mu.lock();
  EXPECT_TRUE(cv.wait_for(mu, 30s, [&] { return stage == 2; }));
  mu.unlock();
  waiter.join();
}

TEST(CondVar, NotifyAllWakesEveryWaiter) {
  constexpr int kWaiters = 50;
  lionet::Scheduler s({.threads = 2});
  lionet::Mutex mu;
  lionet::CondVar cv;
  bool go = false;
  int waiting = 0, woke = 0;
  lionet::CondVar all_waiting;
  std::vector<lionet::JoinHandle<void>> hs;
  for (int i = 0; i < kWaiters; ++i) {
    hs.push_back(s.spawn([&] {
      std::unique_lock<lionet::Mutex> lk(mu);
      ++waiting;
      all_waiting.notify_one();
      cv.wait(lk, [&] { return go; });
      ++woke;
    }));
  }
  {
    std::unique_lock<lionet::Mutex> lk(mu);  // a plain thread waits on a CondVar too
    ASSERT_TRUE(all_waiting.wait_for(lk, 30s, [&] { return waiting == kWaiters; }));
    go = true;
  }
  cv.notify_all();
  for (auto& h : hs) h.join();
  EXPECT_EQ(woke, kWaiters);
}

// Fiber and plain thread alternate through one condition: 2 x 20,000 turns (TSan 2,000),
// no lost notification (a lost one would hang; bounded by the wait_for below).
TEST(CondVar, FiberAndPlainThreadPingPong) {
  constexpr int kTurns = 20000 / kScale;
  lionet::Scheduler s({.threads = 1});
  lionet::Mutex mu;
  lionet::CondVar cv;
  int turn = 0;  // even: fiber's turn, odd: thread's
  auto fiber = s.spawn([&] {
    for (int i = 0; i < kTurns; ++i) {
      std::unique_lock<lionet::Mutex> lk(mu);
      cv.wait(lk, [&] { return turn % 2 == 0; });
      ++turn;
      cv.notify_one();
    }
  });
  for (int i = 0; i < kTurns; ++i) {
    std::unique_lock<lionet::Mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 30s, [&] { return turn % 2 == 1; })) << "lost wake-up at turn " << turn;
    ++turn;
    cv.notify_one();
  }
  fiber.join();
  EXPECT_EQ(turn, 2 * kTurns);
}
}  // namespace
