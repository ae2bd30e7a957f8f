// The work-stealing ring under concurrent owner push/pop and thieves: every item is taken
// exactly once (exact accounting), FIFO for the owner, and steals take about half.
#include "lionet/sched/detail/local_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {
using lionet::Fiber;
using lionet::detail::LocalQueue;

// Items are fake Fiber pointers (never dereferenced by the queue): index + 1.
Fiber* item(uintptr_t i) { return reinterpret_cast<Fiber*>(i + 1); }
uintptr_t index_of(Fiber* f) { return reinterpret_cast<uintptr_t>(f) - 1; }

TEST(LocalQueue, OwnerGetsFifoOrder) {
  LocalQueue q(8);
  for (uintptr_t i = 0; i < 8; ++i) ASSERT_TRUE(q.try_push(item(i)));
  EXPECT_FALSE(q.try_push(item(99))) << "a full ring must refuse";
  for (uintptr_t i = 0; i < 8; ++i) EXPECT_EQ(q.pop(), item(i));
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(LocalQueue, StealTakesHalf) {
  LocalQueue victim(16), thief(16);
  for (uintptr_t i = 0; i < 10; ++i) ASSERT_TRUE(victim.try_push(item(i)));
  Fiber* first = victim.steal_into(thief);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(victim.len(), 5u);
  EXPECT_EQ(thief.len(), 4u);  // the fifth is returned to run at once
  EXPECT_EQ(thief.pop(), item(0));
  EXPECT_EQ(first, item(4));
  EXPECT_EQ(victim.pop(), item(5));
}

TEST(LocalQueue, TakeHalfWhenFull) {
  LocalQueue q(8);
  for (uintptr_t i = 0; i < 8; ++i) ASSERT_TRUE(q.try_push(item(i)));
  Fiber* out[4];
  ASSERT_EQ(q.take_half(out), 4u);
  for (uintptr_t i = 0; i < 4; ++i) EXPECT_EQ(out[i], item(i));
  EXPECT_TRUE(q.try_push(item(8)));
  EXPECT_EQ(q.pop(), item(4));
}

TEST(LocalQueue, ConcurrentOwnerAndThievesTakeEveryItemExactlyOnce) {
#if defined(LIONET_TSAN)
  constexpr uintptr_t kItems = 200'000;
#else
  constexpr uintptr_t kItems = 2'000'000;
#endif
  constexpr int kThieves = 3;
  LocalQueue owner_q(256);
  std::vector<std::atomic<uint8_t>> seen(kItems);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> stolen_total{0};

  auto take = [&](Fiber* f) {
    const uintptr_t i = index_of(f);
    ASSERT_LT(i, kItems);
    ASSERT_EQ(seen[i].fetch_add(1), 0) << "item " << i << " taken twice";
  };

  std::vector<std::thread> thieves;
  for (int t = 0; t < kThieves; ++t) {
    thieves.emplace_back([&] {
      LocalQueue mine(256);
      uint64_t n = 0;
      while (!done.load(std::memory_order_acquire) || !owner_q.empty()) {
        if (Fiber* f = owner_q.steal_into(mine)) {
          take(f);
          ++n;
          while (Fiber* g = mine.pop()) {
            take(g);
            ++n;
          }
        }
      }
      stolen_total += n;
    });
  }

  uint64_t owner_took = 0;
  std::vector<Fiber*> overflow;
  for (uintptr_t i = 0; i < kItems; ++i) {
    while (!owner_q.try_push(item(i))) {
      if (Fiber* f = owner_q.pop()) {
        take(f);
        ++owner_took;
      }
    }
    if (i % 3 == 0) {
      if (Fiber* f = owner_q.pop()) {
        take(f);
        ++owner_took;
      }
    }
  }
  while (Fiber* f = owner_q.pop()) {
    take(f);
    ++owner_took;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();

  EXPECT_EQ(owner_took + stolen_total.load(), kItems);
  for (uintptr_t i = 0; i < kItems; ++i) ASSERT_EQ(seen[i].load(), 1) << "item " << i;
  EXPECT_GT(stolen_total.load(), 0u) << "thieves never managed to steal";
}
}  // namespace

namespace {
TEST(LocalQueue, PopBatchTakesTheOldestInOrder) {
  LocalQueue q(16);
  for (uintptr_t i = 0; i < 10; ++i) ASSERT_TRUE(q.try_push(item(i)));
  Fiber* out[8];
  ASSERT_EQ(q.pop_batch(out, 8), 8u);
  for (uintptr_t i = 0; i < 8; ++i) EXPECT_EQ(out[i], item(i));
  ASSERT_EQ(q.pop_batch(out, 8), 2u);
  EXPECT_EQ(out[0], item(8));
  EXPECT_EQ(q.pop_batch(out, 8), 0u);
}
}  // namespace
