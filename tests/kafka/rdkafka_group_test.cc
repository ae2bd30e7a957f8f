// librdkafka's C++ KafkaConsumer (Debian librdkafka 2.0.2) in a consumer group against
// lionet::kafka::Server: 100,000 records produced with acks=all to four
// partitions are consumed by a group of two members on their own threads; a third member joins
// mid-way, while records are still being produced, and the group rebalances. Each member commits
// synchronously what it processed (every 500 records and in its revoke callback), so the test
// asserts that every record is consumed exactly once and in order per partition, across the
// rebalances. Then the committed offsets are read back, the server (Broker and Store) is
// restarted, and a new member of the group starts exactly after them. (A kill -9 of the lionet
// binary under a committing group: tests/app/app_kafka_test.cc.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../common/sanitizers.h"
#include "kafka_test_util.h"
#include "rdkafka_util.h"

namespace lionet::kafka {
namespace {
using namespace std::chrono_literals;
using testing::GroupMember;
using testing::KafkaFixture;
using testing::Ledger;

// Waits (bounded) until pred() holds; returns pred().
template <class Pred>
bool wait_until(Pred pred, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  return pred();
}

TEST(KafkaRdkafka, AGroupThatGrowsFromTwoToThreeMembersConsumesEveryRecordOnceInOrder) {
  constexpr int32_t kPartitions = 4;
  constexpr int kCommitEvery = 333;  // divides none of the counts: a revoke finds work to commit
  // 100,000 in every build: ~1.5 s in release, ~3-4 s under TSan here. A multiple of 20 (the
  // phases below).
  constexpr int64_t n = 100000;
  KafkaFixture fx;
  storage::TopicOptions to;
  to.name = "rk";
  to.partitions = kPartitions;
  ASSERT_TRUE(fx.store().create_topic(to));
  std::string bootstrap = "127.0.0.1:" + std::to_string(fx.port());
  const auto t0 = std::chrono::steady_clock::now();

  // Half the records before the group exists.
  ASSERT_EQ(testing::produce_numbered(bootstrap, "rk", kPartitions, 0, n / 2), n / 2);
  Ledger ledger(kPartitions);
  std::atomic<bool> stop{false};
  auto a = std::make_unique<GroupMember>(bootstrap, "rk-group", "rk", "member-a", ledger, kCommitEvery);
  auto b = std::make_unique<GroupMember>(bootstrap, "rk-group", "rk", "member-b", ledger, kCommitEvery);
  std::thread ta([&] { a->run(stop); });
  std::thread tb([&] { b->run(stop); });
  // 30% more produced while the two consume; the third member joins in the middle of it, so
  // partitions move while records flow. The last 20% are produced once it holds partitions:
  // it consumes some of them for sure.
  int64_t produced = 0;
  std::thread producer([&] { produced = testing::produce_numbered(bootstrap, "rk", kPartitions, n / 2, n * 8 / 10); });
  EXPECT_TRUE(wait_until([&] { return ledger.total() >= n * 6 / 10; }, 60s));
  auto c = std::make_unique<GroupMember>(bootstrap, "rk-group", "rk", "member-c", ledger, kCommitEvery);
  std::thread tc([&] { c->run(stop); });
  producer.join();
  EXPECT_EQ(produced, n * 8 / 10 - n / 2);
  EXPECT_TRUE(wait_until([&] { return c->assigned_now() > 0; }, 60s)) << "the third member never got partitions";
  ASSERT_EQ(testing::produce_numbered(bootstrap, "rk", kPartitions, n * 8 / 10, n), n - n * 8 / 10);
  const bool all = wait_until([&] { return ledger.total() >= n; }, 120s);
  stop = true;
  ta.join();
  tb.join();
  tc.join();
  ASSERT_TRUE(all) << "consumed " << ledger.total() << " of " << n;

  // Exactly once, in order: each partition's records were consumed as 0, 1, 2, ... end-1.
  const auto offsets = ledger.offsets();
  for (int32_t p = 0; p < kPartitions; ++p) {
    const int64_t end = fx.store().find("rk", static_cast<uint32_t>(p)).value()->end_offset();
    EXPECT_EQ(end, n / kPartitions);
    std::vector<int64_t> want(static_cast<std::size_t>(end));
    std::iota(want.begin(), want.end(), 0);
    const auto& got = offsets[static_cast<std::size_t>(p)];
    EXPECT_EQ(got.size(), want.size()) << "partition " << p;
    EXPECT_TRUE(got == want) << "partition " << p << ": a record consumed twice, skipped or out of order";
  }
  EXPECT_EQ(ledger.total(), n);
  EXPECT_EQ(ledger.misplaced(), 0);
  EXPECT_GT(a->consumed(), 0);
  EXPECT_GT(b->consumed(), 0);
  EXPECT_GT(c->consumed(), 0);
  EXPECT_EQ(a->consumed() + b->consumed() + c->consumed(), n);
  for (const auto* m : {a.get(), b.get(), c.get()}) EXPECT_EQ(m->revoke_commit_failures(), 0);
  EXPECT_GE(fx.server().broker().stats().groups.rebalances, 3u);  // a; a+b; a+b+c
  // What the group committed: every partition's end.
  EXPECT_EQ(testing::committed_offsets(bootstrap, "rk-group", "rk", kPartitions),
            std::vector<int64_t>(kPartitions, n / kPartitions));

  a.reset();  // closed already: gone before the server restarts (no reconnect attempts)
  b.reset();
  c.reset();

  // A restart of the server (Broker and Store): a new member resumes after the commits.
  fx.close();
  fx.open();
  bootstrap = "127.0.0.1:" + std::to_string(fx.port());
  constexpr int64_t kMore = 100;
  ASSERT_EQ(testing::produce_numbered(bootstrap, "rk", kPartitions, n, n + kMore), kMore);
  Ledger after(kPartitions);
  GroupMember d(bootstrap, "rk-group", "rk", "member-d", after);
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (after.total() < kMore && std::chrono::steady_clock::now() < end) d.poll_once(100);
  for (int i = 0; i < 5; ++i) d.poll_once(100);  // nothing more comes (no record twice)
  d.close();
  EXPECT_EQ(after.total(), kMore);
  EXPECT_EQ(after.misplaced(), 0);
  const auto resumed = after.offsets();
  for (int32_t p = 0; p < kPartitions; ++p) {
    std::vector<int64_t> want(kMore / kPartitions);
    std::iota(want.begin(), want.end(), n / kPartitions);
    EXPECT_EQ(resumed[static_cast<std::size_t>(p)], want) << "partition " << p;
  }
  // Bounded: a few seconds here (the release build), longer under the sanitizers.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::duration<double>(60 * lionet::test::kSlowdown));
}

}  // namespace
}  // namespace lionet::kafka
