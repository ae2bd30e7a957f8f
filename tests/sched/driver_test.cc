// The scheduler/driver seam with a manual driver (the IO reactor plugs in the same way):
// idle workers wait in the driver, wake() reaches them there, and a busy worker still polls.
#include "lionet/sched/driver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "lionet/sched/park.h"
#include "lionet/sched/scheduler.h"

namespace {
using namespace std::chrono_literals;

// Events are Parkers to unpark, posted by the test. wait() sleeps on a condition variable.
class ManualDriver : public lionet::Driver {
 public:
  void post(lionet::Parker p, bool wake_poller) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ready_.push_back(p);
    }
    if (wake_poller) wake();
  }
  void wait(lionet::TimePoint deadline) noexcept override {
    std::unique_lock<std::mutex> lk(mu_);
    ++waits_;
    concurrent_ += 1;
    max_concurrent_ = std::max(max_concurrent_, concurrent_);
    cv_.wait_until(lk, deadline, [&] { return woken_ || !ready_.empty(); });
    woken_ = false;
    concurrent_ -= 1;
    drain(lk);
  }
  bool poll() noexcept override {
    std::unique_lock<std::mutex> lk(mu_);
    ++polls_;
    return drain(lk) > 0;
  }
  void wake() noexcept override {
    std::lock_guard<std::mutex> lk(mu_);
    woken_ = true;
    cv_.notify_all();
  }
  int waits() {
    std::lock_guard<std::mutex> lk(mu_);
    return waits_;
  }
  int polls() {
    std::lock_guard<std::mutex> lk(mu_);
    return polls_;
  }
  int max_concurrent() {
    std::lock_guard<std::mutex> lk(mu_);
    return max_concurrent_;
  }

 private:
  size_t drain(std::unique_lock<std::mutex>& lk) {
    std::vector<lionet::Parker> ready;
    ready.swap(ready_);
    lk.unlock();
    for (auto& p : ready) p.unpark();
    lk.lock();
    return ready.size();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<lionet::Parker> ready_;
  bool woken_ = false;
  int waits_ = 0, polls_ = 0, concurrent_ = 0, max_concurrent_ = 0;
};

TEST(Driver, IdleWorkerWaitsInTheDriverAndEventsWakeFibers) {
  ManualDriver driver;
  lionet::Scheduler s({.threads = 2});
  s.set_driver(&driver);
  constexpr int kFibers = 200;
  std::vector<lionet::Parker> parkers(kFibers);
  std::atomic<int> published{0}, woken{0};
  std::vector<lionet::JoinHandle<void>> hs;
  for (int i = 0; i < kFibers; ++i) {
    hs.push_back(s.spawn([&, i] {
      parkers[i] = lionet::Parker::current();
      published.fetch_add(1, std::memory_order_release);
      lionet::park();
      woken.fetch_add(1);
    }));
  }
  while (published.load(std::memory_order_acquire) < kFibers) std::this_thread::yield();
  for (int i = 0; i < kFibers; ++i) driver.post(parkers[i], /*wake_poller=*/true);
  for (auto& h : hs) h.join();
  EXPECT_EQ(woken.load(), kFibers);
  EXPECT_GT(driver.waits(), 0) << "idle workers never waited in the driver";
  EXPECT_EQ(driver.max_concurrent(), 1) << "more than one worker waited in the driver at once";
  s.stop();
  s.set_driver(nullptr);
}

TEST(Driver, BusyWorkerStillPollsTheDriver) {
  // One worker, always busy with a yielding fiber: events posted without waking anyone are
  // still noticed, because the busy worker polls the driver at least every 1024 scheduling
  // points (every 64 while polls find events; scheduler.cc protocol 8).
  ManualDriver driver;
  lionet::Scheduler s({.threads = 1});
  s.set_driver(&driver);
  lionet::Parker waiter;
  std::atomic<bool> published{false}, woke{false};
  auto w = s.spawn([&] {
    waiter = lionet::Parker::current();
    published = true;
    lionet::park();
    woke = true;
  });
  auto spinner = s.spawn([&] {
    while (!published.load()) lionet::this_fiber::yield();
    driver.post(waiter, /*wake_poller=*/false);
    int slices = 0;
    const auto give_up = lionet::now() + 5s;
    while (!woke.load() && lionet::now() < give_up) {
      lionet::this_fiber::yield();
      ++slices;
    }
    return slices;
  });
  const int slices = spinner.join();
  w.join();
  EXPECT_TRUE(woke.load());
  EXPECT_LE(slices, 1024 + 1) << "the event waited longer than the documented poll interval";
  EXPECT_GT(driver.polls(), 0);
  s.stop();
  s.set_driver(nullptr);
}
}  // namespace
