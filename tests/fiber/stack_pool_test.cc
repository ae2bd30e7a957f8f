// Fiber stacks as a user sees them: many parked fibers without a kernel mapping each, overflow
// caught (with the fiber named) in every protection mode, pages of unused stacks returned.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../common/sanitizers.h"
#include "lionet/fiber/stack_pool.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/event.h"
#include "lionet/sync/wait_group.h"

namespace {
using lionet::StackGuard;
using lionet::StackProtection;

long map_count() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  long n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

// Sanitizer builds keep per-fiber state of their own (ASan fake stacks), so they hold fewer.
constexpr long kManyFibers = lionet::test::kAsan ? 50000 : 200000;

// 200,000 parked fibers: more than vm.max_map_count (65,530) / 2 could ever hold with a mapping
// and a guard page per stack, so this proves the map budget is not per fiber.
TEST(ManyFibers, ParkedFibersDoNotCostAKernelMappingEach) {
  if (lionet::test::kTsan) {
    // TSan maps state of its own for every fiber (each is a TSan thread): ~4 mappings per
    // fiber, which is what this test would count. It runs in the release and ASan builds.
    GTEST_SKIP() << "TSan maps memory per fiber itself; the mapping count is checked without TSan";
  }
  lionet::Scheduler sched({.threads = 2});
  lionet::Event release;
  lionet::WaitGroup done;
  std::atomic<long> finished{0};
  const long maps_before = map_count();
  const uint64_t parks_before = sched.stats().fiber_parks;
  done.add(kManyFibers);
  sched
      .spawn([&] {
        for (long i = 0; i < kManyFibers; ++i) {
          lionet::go([&] {
            release.wait();
            finished.fetch_add(1, std::memory_order_relaxed);
            done.done();
          });
        }
      })
      .join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (static_cast<long>(sched.stats().fiber_parks - parks_before) < kManyFibers &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(static_cast<long>(sched.stats().fiber_parks - parks_before), kManyFibers) << "not all fibers parked";
  const long maps_parked = map_count();
  const lionet::StackPoolStats st = sched.stack_stats();
  EXPECT_GE(st.mapped, static_cast<std::size_t>(kManyFibers));
  EXPECT_LT(maps_parked - maps_before, 2000) << "kernel mappings grew with the number of fibers";
  EXPECT_LT(st.slabs, 1000u);
  if (st.canaries == 0 && st.guard_pages == 0) {
    SUCCEED() << "every stack has a guard region";
  } else {
    // A kernel without guard regions: guard pages up to the budget, canaries beyond.
    EXPECT_LE(st.guard_pages, lionet::SchedulerOptions{}.stack_guard_page_budget);
  }
  release.set();
  done.wait();
  EXPECT_EQ(finished.load(), kManyFibers);
  sched.stop();
  EXPECT_EQ(sched.stats().fibers_alive, 0u);
}

TEST(StackPool, CarvesManyStacksFromFewSlabs) {
  lionet::StackPool pool({.stack_size = 32 * 1024, .protection = StackProtection::kCanary});
  std::vector<lionet::Stack> out;
  for (int i = 0; i < 500; ++i) out.push_back(pool.acquire());
  EXPECT_EQ(pool.mapped(), 500u);
  EXPECT_LT(pool.stats().slabs, 10u);  // 16, 32, 64, 128, 256, 512: six slabs
  for (auto& s : out) pool.release(s);
  EXPECT_EQ(pool.stats().cached, 500u);
}

TEST(StackPool, EveryModeProtectsAStack) {
  for (StackProtection mode :
       {StackProtection::kAuto, StackProtection::kGuardRegion, StackProtection::kGuardPage, StackProtection::kCanary}) {
    lionet::StackPool pool({.stack_size = 16 * 1024, .protection = mode});
    lionet::Stack s = pool.acquire();
    EXPECT_EQ(s.guard, StackGuard::kNone);
    pool.protect(s);
    EXPECT_NE(s.guard, StackGuard::kNone) << to_string(mode);
    if (mode == StackProtection::kCanary) {
      EXPECT_EQ(s.guard, StackGuard::kCanary);
    }
    if (mode == StackProtection::kGuardPage) {
      EXPECT_EQ(s.guard, StackGuard::kPage);
    }
    EXPECT_TRUE(lionet::stack_canary_intact(s));
    static_cast<char*>(s.bottom)[s.size - 1] = 1;  // the stack itself is writable
    pool.release(s);
  }
}

TEST(StackPool, GuardPagesStopAtTheBudgetThenCanaries) {
  lionet::StackPool pool({.stack_size = 16 * 1024, .protection = StackProtection::kGuardPage, .guard_page_budget = 3});
  std::vector<lionet::Stack> out(5);
  for (auto& s : out) {
    s = pool.acquire();
    pool.protect(s);
  }
  EXPECT_EQ(pool.stats().guard_pages, 3u);
  EXPECT_EQ(pool.stats().canaries, 2u);
  EXPECT_EQ(out[4].guard, StackGuard::kCanary);
  for (auto& s : out) pool.release(s);
}

TEST(StackPool, ReservationsAreCappedByMaxReservedBytes) {
  const std::size_t stride = 16 * 1024 + static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  lionet::StackPool pool({.stack_size = 16 * 1024, .max_reserved_bytes = 10 * stride});
  EXPECT_EQ(pool.reserve(4), 4u);
  EXPECT_EQ(pool.reserve(100), 6u);  // what is left, not an error
  try {
    pool.reserve(1);
    ADD_FAILURE() << "reserve past max_reserved_bytes did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOMEM);
    EXPECT_NE(std::string(e.what()).find("fiber.max_stack_memory"), std::string::npos) << e.what();
  }
  pool.unreserve(1);
  EXPECT_EQ(pool.reserve(1), 1u);  // a returned reservation can be had again
  pool.unreserve(10);
}

// Stacks beyond the shared cache give their pages back: the RSS of a burst does not stay.
TEST(StackPool, UnusedStacksBeyondTheCacheReturnTheirPages) {
  lionet::StackPool pool({.stack_size = 64 * 1024, .shared_cache = 0, .protection = StackProtection::kGuardPage});
  std::vector<lionet::Stack> out;
  for (int i = 0; i < 512; ++i) {
    out.push_back(pool.acquire());
    pool.protect(out.back());
    std::memset(out.back().bottom, 1, out.back().size);  // touch every page
  }
  unsigned char vec[16];
  for (auto& s : out) pool.release(s);  // 2 full trim batches of 256
  for (auto& s : out) {
    ASSERT_EQ(mincore(s.bottom, 16 * 4096, vec), 0);
    for (unsigned char v : vec) ASSERT_EQ(v & 1, 0) << "a released stack kept its pages";
  }
  lionet::Stack again = pool.acquire();  // reused, not newly carved
  EXPECT_EQ(pool.mapped(), 512u);
  EXPECT_EQ(again.guard, StackGuard::kPage);  // the guard page survives the trim
  pool.release(again);
}

// A refill's fresh stacks get their guard regions and their top pages in two system calls
// (prepare_fresh): each stack is guarded, its top page (the first frame's) is resident and the
// rest of it is not, and a stack that already has its guard is left as it was.
TEST(StackPoolDeathTest, FreshStacksAreGuardedAndTheirTopPagesFaultedInByBatch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  lionet::StackPool pool({.stack_size = 64 * 1024, .protection = StackProtection::kGuardRegion});
  lionet::Stack probe = pool.acquire();
  pool.protect(probe);  // the first protect() learns whether the kernel has guard regions
  if (probe.guard != StackGuard::kRegion) {
    pool.release(probe);
    GTEST_SKIP() << "no guard regions on this kernel (Linux < 6.13): protect() gives each stack its guard";
  }
  std::vector<lionet::Stack> out(100);
  out[0] = probe;
  for (std::size_t i = 1; i < out.size(); ++i) out[i] = pool.acquire();
  pool.prepare_fresh(out.data(), out.size());
  const std::size_t pg = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  unsigned char top = 0, below[8];
  for (auto& s : out) {
    ASSERT_EQ(s.guard, StackGuard::kRegion);
    char* bottom = static_cast<char*>(s.bottom);
    ASSERT_EQ(mincore(bottom + s.size - pg, pg, &top), 0);
    if (&s != &out[0]) {  // the probe was protected before: not fresh
      EXPECT_EQ(top & 1, 1) << "a fresh stack's top page was not faulted in";
    }
    ASSERT_EQ(mincore(bottom, 8 * pg, below), 0);
    for (unsigned char v : below) ASSERT_EQ(v & 1, 0) << "more than the top page was faulted in";
  }
  EXPECT_EXIT(
      {
        *static_cast<volatile char*>(static_cast<char*>(out[50].bottom) - 1) = 1;  // the guard
        std::_Exit(0);
      },
      [](int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }, "");  // SIGSEGV (ASan: its report)
  for (auto& s : out) pool.release(s);
}

[[gnu::noinline]] int recurse_writing_every_byte(int depth) {
  volatile char pad[1024];
  for (auto& c : pad) c = static_cast<char>(depth);  // every byte written: no canary is skipped
  return depth <= 0 ? pad[0] : recurse_writing_every_byte(depth - 1) + pad[0];
}

#if defined(LIONET_ASAN) || defined(LIONET_TSAN) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Sanitizer frames carry redzones that a recursion writes around, not through, so the canary may
// survive a real overflow: the test clobbers the bottom of the stack the way the deepest frame
// of an overflow would, then switches out.
int overflow_then_sleep() {
  lionet::Fiber* f = lionet::current_fiber();
  std::memset(f->stack_.bottom, 0x5a, 256);
  lionet::this_fiber::sleep_for(std::chrono::milliseconds(1));
  return 0;
}
#else
// Overflows by about 4 KiB (into the slack page below the stack), then switches out.
[[gnu::noinline]] int recurse_then_sleep(int depth) {
  volatile char pad[1024];
  for (auto& c : pad) c = static_cast<char>(depth);
  if (depth <= 0) {
    lionet::this_fiber::sleep_for(std::chrono::milliseconds(1));
    return pad[0];
  }
  return recurse_then_sleep(depth - 1) + pad[0];
}
int overflow_then_sleep() { return recurse_then_sleep(63); }
#endif

void overflow_in_mode(StackProtection mode, int parked_first = 0) {
  lionet::Scheduler s({.threads = 1, .stack_size = 64 * 1024, .stack_protection = mode});
  lionet::Event release;  // never set: the deep fiber dies first
  for (int i = 0; i < parked_first; ++i) s.spawn([&] { release.wait(); });
  if (mode == StackProtection::kCanary) {
    s.spawn([] { return overflow_then_sleep(); }, {.name = "deep-recursion"}).join();
  } else {
    s.spawn([] { return recurse_writing_every_byte(1 << 20); }, {.name = "deep-recursion"}).join();
  }
}

constexpr const char* kOverflowMessage =
    "fiber stack overflow: fiber id [0-9]+ name \"deep-recursion\" overflowed its 65536-byte stack";

TEST(FiberDeathTest, OverflowIsCaughtWithAutoProtection) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_in_mode(StackProtection::kAuto),
               std::string(kOverflowMessage) + " \\(caught by its guard page");
}

TEST(FiberDeathTest, OverflowIsCaughtByAGuardRegion) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_in_mode(StackProtection::kGuardRegion),
               std::string(kOverflowMessage) + " \\(caught by its guard page");
}

// Behind 100 parked fibers the deep one runs on a stack its worker took in a later batch, whose
// guard prepare_fresh installed (not protect() at its first run).
TEST(FiberDeathTest, OverflowIsCaughtByAGuardInstalledForABatchOfStacks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_in_mode(StackProtection::kGuardRegion, 100),
               std::string(kOverflowMessage) + " \\(caught by its guard page");
}

TEST(FiberDeathTest, OverflowIsCaughtByAnMprotectedGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_in_mode(StackProtection::kGuardPage),
               std::string(kOverflowMessage) + " \\(caught by its guard page");
}

TEST(FiberDeathTest, OverflowIsCaughtByTheCanaryAtTheNextSwitch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_in_mode(StackProtection::kCanary),
               std::string(kOverflowMessage) + " \\(caught by its canary, at a switch");
}
}  // namespace
