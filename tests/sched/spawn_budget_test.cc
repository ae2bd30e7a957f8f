// Running out of fiber stacks is an error at the spawn site, never an abort: the spawner gets
// std::system_error, fibers that exist keep running, and spawning works again once they exit.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "lionet/sched/scheduler.h"
#include "lionet/sync/event.h"

namespace {
constexpr std::size_t kStack = 64 * 1024;
std::size_t stride() { return kStack + static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

lionet::SchedulerOptions budget_options(int threads, std::size_t stacks) {
  return lionet::SchedulerOptions{.threads = threads, .stack_size = kStack, .max_stack_memory = stacks * stride()};
}

void wait_for(const std::atomic<long>& v, long want) {
  for (int i = 0; i < 10000 && v.load() < want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(v.load(), want);
}

// Spawns parked fibers with `spawn` until one throws; returns how many started.
template <class Spawn>
long spawn_until_refused(Spawn spawn, lionet::Event& release, std::atomic<long>& finished, std::string& error) {
  long n = 0;
  for (; n < 100000; ++n) {
    try {
      spawn([&] {
        release.wait();
        finished.fetch_add(1);
      });
    } catch (const std::system_error& e) {
      error = e.what();
      EXPECT_EQ(e.code().value(), ENOMEM);
      break;
    }
  }
  return n;
}

TEST(SpawnBudget, SpawnFromOutsideThrowsAtTheCallSiteAndRecovers) {
  lionet::Scheduler sched(budget_options(2, 40));
  lionet::Event release;
  std::atomic<long> finished{0};
  std::string error;
  const long n = spawn_until_refused([&](auto fn) { sched.spawn_detached(fn); }, release, finished, error);
  EXPECT_GT(n, 0);
  EXPECT_LE(n, 40);
  EXPECT_NE(error.find("fiber.max_stack_memory"), std::string::npos) << error;
  EXPECT_EQ(n, 40);  // from outside, one reservation per spawn: the whole budget
  EXPECT_THROW(sched.spawn([] { return 0; }), std::system_error);
  // The scheduler still runs what exists: the parked ones finish once released, and their
  // stacks can be had again.
  release.set();
  wait_for(finished, n);
  for (int i = 0; i < 10000 && sched.alive() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(sched.spawn([] { return 7; }).join(), 7);
  std::vector<lionet::JoinHandle<int>> again;
  for (int i = 0; i < 40; ++i) again.push_back(sched.spawn([i] { return i; }));
  int sum = 0;
  for (auto& h : again) sum += h.join();
  EXPECT_EQ(sum, 39 * 40 / 2);
}

TEST(SpawnBudget, SpawnFromAFiberThrowsAtTheCallSiteAndRecovers) {
  lionet::Scheduler sched(budget_options(2, 100));
  lionet::Event release;
  std::atomic<long> finished{0};
  std::string error;
  const long n =
      sched.spawn([&] { return spawn_until_refused([&](auto fn) { lionet::go(fn); }, release, finished, error); })
          .join();
  // Workers reserve stacks in batches, so a few of the budget may sit unused in a batch.
  EXPECT_GT(n, 100 - 2 * 32 - 2);
  EXPECT_LT(n, 100);  // the spawner's own fiber holds one
  EXPECT_FALSE(error.empty());
  release.set();
  const int after = sched
                        .spawn([&] {
                          while (finished.load() < n) lionet::this_fiber::yield();
                          // Exited fibers' stacks can be had again, from a fiber too.
                          std::vector<lionet::JoinHandle<int>> hs;
                          for (int i = 0; i < 50; ++i) hs.push_back(sched.spawn([i] { return i; }));
                          int sum = 0;
                          for (auto& h : hs) sum += h.join();
                          return sum;
                        })
                        .join();
  EXPECT_EQ(after, 49 * 50 / 2);
  EXPECT_EQ(finished.load(), n);
}

TEST(SpawnBudget, AFailedSpawnDestroysItsFunctionAndLeaksNoReference) {
  lionet::Scheduler sched(budget_options(1, 4));
  lionet::Event release;
  std::atomic<long> finished{0};
  std::string error;
  const long n = spawn_until_refused([&](auto fn) { sched.spawn_detached(fn); }, release, finished, error);
  auto token = std::make_shared<int>(1);
  EXPECT_THROW(sched.spawn([token] { return *token; }), std::system_error);
  EXPECT_EQ(token.use_count(), 1) << "the refused fiber's function was not destroyed";
  release.set();
  sched.stop();
  EXPECT_EQ(finished.load(), n);
  EXPECT_EQ(sched.stats().fibers_alive, 0u);
}
}  // namespace
