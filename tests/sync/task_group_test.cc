// lionet::TaskGroup (sync/task_group.h) and lionet::Pool<T> (sync/pool.h): the first failure
// cancels the siblings wherever they block, nothing outlives its group, the group timeout, and
// a pool that bounds its objects and honours the fiber's cancel and deadline.
#include "lionet/sync/task_group.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "lionet/sync/channel.h"
#include "lionet/sync/pool.h"
#include "sync_test_util.h"

namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

TEST(TaskGroup, FirstFailureCancelsSiblingsInSleepChannelAndHookedRead) {
  lionet::Scheduler s({.threads = 2});
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto r = s.spawn([&] {
              lionet::Channel<int> ch(0);
              std::atomic<int> ended{0};
              lionet::TaskGroup g;
              g.spawn([&] {
                lionet::this_fiber::sleep_for(1h);
                ++ended;
              });
              g.spawn([&] {
                (void)ch.recv();
                ++ended;
              });
              g.spawn([&] {
                char c;
                (void)::read(sv[0], &c, 1);  // a blocking library call, hooked
                ++ended;
              });
              g.spawn([] {
                lionet::this_fiber::sleep_for(30ms);
                throw std::runtime_error("boom");
              });
              const auto t0 = Clock::now();
              std::string what;
              try {
                g.wait();
              } catch (const std::runtime_error& e) {
                what = e.what();
              }
              return std::make_tuple(what, ended.load(), ms_since(t0));
            })
               .join();
  EXPECT_EQ(std::get<0>(r), "boom");
  EXPECT_EQ(std::get<1>(r), 3);  // every sibling ended before wait() returned
  EXPECT_LT(std::get<2>(r), 500.0);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(TaskGroup, DestructorCancelsAndJoinsNestedGroups) {
  lionet::Scheduler s({.threads = 2});
  std::atomic<int> ended{0};
  s.spawn([&] {
     lionet::TaskGroup outer;
     outer.spawn([&] {
       lionet::TaskGroup inner;
       inner.spawn([&] {
         lionet::this_fiber::sleep_for(1h);
         ++ended;
       });
       lionet::this_fiber::sleep_for(1h);
       ++ended;
     });  // inner's destructor joins its child when outer cancels this one
     lionet::this_fiber::sleep_for(20ms);
   }).join();  // outer's destructor: cancel, join
  EXPECT_EQ(ended.load(), 2);
}

TEST(TaskGroup, GroupTimeoutEndsChildrenAndWait) {
  lionet::Scheduler s({.threads = 2});
  auto r = s.spawn([] {
              const auto t0 = Clock::now();
              lionet::TaskGroup g(100ms);
              std::atomic<bool> slept_fully{true};
              g.spawn([&] { slept_fully = lionet::this_fiber::sleep_for(1h); });
              int code = 0;
              try {
                g.wait();
              } catch (const lionet::FiberInterrupted& e) {
                code = e.code().value();
              }
              return std::make_tuple(code, slept_fully.load(), ms_since(t0));
            })
               .join();
  EXPECT_EQ(std::get<0>(r), ETIMEDOUT);
  EXPECT_FALSE(std::get<1>(r));
  EXPECT_GE(std::get<2>(r), 95.0);
  EXPECT_LT(std::get<2>(r), 400.0);
}

TEST(TaskGroup, ChildrenInheritTheSpawnersDeadlineAndWaitIsCancellable) {
  lionet::Scheduler s({.threads = 2});
  auto inherited = s.spawn([] {
                      lionet::DeadlineScope d(80ms);
                      lionet::TaskGroup g;
                      std::atomic<bool> had{false};
                      g.spawn([&] { had = lionet::this_fiber::deadline().has_value(); });
                      g.wait();
                      return had.load();
                    })
                       .join();
  EXPECT_TRUE(inherited);
  std::atomic<bool> child_ended{false};
  auto waiter = s.spawn([&] {
    lionet::TaskGroup g;
    g.spawn([&] {
      lionet::this_fiber::sleep_for(1h);
      child_ended = true;
    });
    try {
      g.wait();
    } catch (const lionet::FiberInterrupted& e) {
      return e.code().value();
    }
    return 0;
  });
  std::this_thread::sleep_for(30ms);
  waiter.cancel();
  EXPECT_EQ(waiter.join(), ECANCELED);
  EXPECT_TRUE(child_ended.load());  // cancelled and joined before wait() threw
}

TEST(Pool, BoundsObjectsReusesThemAndHonoursDeadlineAndCancel) {
  lionet::Scheduler s({.threads = 2});
  std::atomic<int> made{0}, destroyed{0};
  lionet::Pool<int> pool(
      {.max_size = 2},
      [&] {
        ++made;
        return lionet::Pool<int>::Handle(new int(made.load()), [&](int* p) {
          ++destroyed;
          delete p;
        });
      },
      [](int& v) { return v >= 0; });  // a negative value marks it broken
  s.spawn([&] {
     {
       auto a = pool.acquire();
       auto b = pool.acquire();
       EXPECT_EQ(pool.size(), 2u);
       // Full: a deadline ends the wait.
       lionet::DeadlineScope d(50ms);
       int code = 0;
       try {
         (void)pool.acquire();
       } catch (const lionet::FiberInterrupted& e) {
         code = e.code().value();
       }
       EXPECT_EQ(code, ETIMEDOUT);
       *b = -1;  // fails the check on release: destroyed
     }
     EXPECT_EQ(pool.idle(), 1u);
     EXPECT_EQ(destroyed.load(), 1);
     auto c = pool.acquire();  // the idle one, not a new one
     EXPECT_EQ(made.load(), 2);
   }).join();
  // A waiter cancelled from outside gives up; the pool still serves the next one.
  auto held = s.spawn([&] {
    auto a = pool.acquire();
    auto b = pool.acquire();
    lionet::this_fiber::sleep_for(100ms);
  });
  std::this_thread::sleep_for(20ms);
  auto waiter = s.spawn([&] {
    try {
      (void)pool.acquire();
    } catch (const lionet::FiberInterrupted& e) {
      return e.code().value();
    }
    return 0;
  });
  std::this_thread::sleep_for(20ms);
  waiter.cancel();
  EXPECT_EQ(waiter.join(), ECANCELED);
  held.join();
  EXPECT_TRUE(s.spawn([&] { return static_cast<bool>(pool.acquire()); }).join());
}

}  // namespace
