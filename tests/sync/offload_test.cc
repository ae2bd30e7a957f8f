// lionet::offload: results, exceptions, bounded pool, inline on plain threads.
#include "lionet/sync/offload.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lionet/sync/wait_group.h"
#include "sync_test_util.h"

namespace {
using namespace std::chrono_literals;

TEST(Offload, ReturnsTheResultFromAPoolThread) {
  lionet::Scheduler s({.threads = 1});
  auto worker_thread = s.spawn([] { return std::this_thread::get_id(); }).join();
  auto [ran_on, value] =
      s.spawn([] {
         return lionet::offload([] { return std::make_pair(std::this_thread::get_id(), std::string("ok")); });
       }).join();
  EXPECT_NE(ran_on, worker_thread);
  EXPECT_EQ(value, "ok");
}

TEST(Offload, PropagatesExceptions) {
  lionet::Scheduler s({.threads = 2});
  auto h = s.spawn([] {
    try {
      lionet::offload([]() -> int { throw std::runtime_error("blocking call failed"); });
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  });
  EXPECT_EQ(h.join(), "blocking call failed");
  // void calls too, and the exception also crosses a join().
  auto v = s.spawn([] { lionet::offload([] { throw std::logic_error("void"); }); });
  EXPECT_THROW(v.join(), std::logic_error);
}

TEST(Offload, WorkerKeepsRunningFibersWhileACallBlocks) {
  lionet::Scheduler s({.threads = 1});
  lionet::OffloadPool pool({.threads = 1, .name = "t-offload"});
  std::atomic<bool> release{false};
  std::atomic<int> other{0};
  auto blocked = s.spawn([&] {
    return pool.run([&] {
      // A plain OS thread may block; bounded wait so a bug fails instead of hanging.
      for (int i = 0; i < 30000 && !release.load(); ++i) std::this_thread::sleep_for(1ms);
      return release.load();
    });
  });
  // One worker: this fiber only runs if the offloading fiber parked instead of blocking it.
  s.spawn([&] {
     other = 1;
     release = true;
   }).join();
  EXPECT_TRUE(blocked.join());
  EXPECT_EQ(other.load(), 1);
}

TEST(Offload, PoolBoundsConcurrentCalls) {
  constexpr int kThreads = 2, kFibers = 40;
  lionet::Scheduler s({.threads = 2});
  lionet::OffloadPool pool({.threads = kThreads});
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<lionet::JoinHandle<int>> hs;
  for (int i = 0; i < kFibers; ++i) {
    hs.push_back(s.spawn([&, i] {
      return pool.run([&, i] {
        int n = inside.fetch_add(1) + 1;
        int m = max_inside.load();
        while (n > m && !max_inside.compare_exchange_weak(m, n)) {
        }
        std::this_thread::sleep_for(200us);
        inside.fetch_sub(1);
        return i;
      });
    }));
  }
  for (int i = 0; i < kFibers; ++i) EXPECT_EQ(hs[i].join(), i);
  EXPECT_LE(max_inside.load(), kThreads);
  EXPECT_EQ(pool.options().threads, kThreads);
}

TEST(Offload, PlainThreadRunsInline) {
  auto id = lionet::offload([] { return std::this_thread::get_id(); });
  EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_THROW(lionet::offload([] { throw std::runtime_error("inline"); }), std::runtime_error);
  // The default pool exists now (or will on first fiber use); configuring it late is refused
  // only once it has been created.
  (void)lionet::default_offload_pool();
  EXPECT_FALSE(lionet::configure_offload({.threads = 8}));
}
}  // namespace
