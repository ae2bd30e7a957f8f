// lionet::select: fairness, timeout/default, closed channels, exactly-once under contention.
#include "lionet/sync/select.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "lionet/sync/channel.h"
#include "lionet/sync/wait_group.h"
#include "sync_test_util.h"

namespace {
using namespace std::chrono_literals;
using lionet::test::kScale;

// The fairness test: 100,000 selections over three always-ready cases (two
// receives from full buffers, one send into an empty one). Each must get its fair third
// within wide bounds (25%..42%); a fixed-order select would give one case 100%.
TEST(Select, FairAmongReadyCases) {
  constexpr int kSelections = 100000;
  lionet::Channel<int> a(1), b(1), out(1);
  std::optional<int> va, vb;
  long hits[3] = {0, 0, 0};
  for (int i = 0; i < kSelections; ++i) {
    if (a.size() == 0) a.try_send(1);
    if (b.size() == 0) b.try_send(2);
    if (out.size() == 1) out.try_recv();
    int k = lionet::select(lionet::recv_case(a, va), lionet::recv_case(b, vb), lionet::send_case(out, 3));
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 3);
    if (k == 0) {
      ASSERT_EQ(va, 1);
    }
    if (k == 1) {
      ASSERT_EQ(vb, 2);
    }
    ++hits[k];
  }
  for (int k = 0; k < 3; ++k) {
    EXPECT_GT(hits[k], kSelections * 25 / 100) << "case " << k;
    EXPECT_LT(hits[k], kSelections * 42 / 100) << "case " << k;
  }
}

// Fair when only a subset is ready too (the not-ready case must not bias the choice).
TEST(Select, FairAmongTheReadySubset) {
  constexpr int kSelections = 100000 / kScale;
  lionet::Channel<int> a(1), b(1), never(0);
  std::optional<int> va, vb, vn;
  long hits[3] = {0, 0, 0};
  for (int i = 0; i < kSelections; ++i) {
    if (a.size() == 0) a.try_send(1);
    if (b.size() == 0) b.try_send(2);
    ++hits[lionet::select(lionet::recv_case(never, vn), lionet::recv_case(a, va), lionet::recv_case(b, vb))];
  }
  EXPECT_EQ(hits[0], 0);
  EXPECT_GT(hits[1], kSelections * 40 / 100);
  EXPECT_GT(hits[2], kSelections * 40 / 100);
}

TEST(Select, DefaultAndTimeout) {
  lionet::Channel<int> a(0), b(0);
  std::optional<int> va, vb;
  EXPECT_EQ(lionet::select(lionet::recv_case(a, va), lionet::send_case(b, 1), lionet::default_case()), 2);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(lionet::select(lionet::recv_case(a, va), lionet::timeout_case(10ms)), 1);  // plain thread
  EXPECT_GE(lionet::test::elapsed_since(t0), 10ms);
  lionet::Scheduler s({.threads = 1});
  s.spawn([&] {
     auto t1 = std::chrono::steady_clock::now();
     EXPECT_EQ(lionet::select(lionet::timeout_case(10ms), lionet::recv_case(a, va), lionet::recv_case(b, vb)), 0);
     EXPECT_GE(lionet::test::elapsed_since(t1), 10ms);
   }).join();
}

TEST(Select, BlockedSelectIsWokenByEitherChannel) {
  lionet::Scheduler s({.threads = 2});
  lionet::Channel<int> a(0), b(0);
  for (int round = 0; round < 200; ++round) {
    auto sel = s.spawn([&] {
      std::optional<int> va, vb;
      int k = lionet::select(lionet::recv_case(a, va), lionet::recv_case(b, vb));
      return k == 0 ? *va : 100 + *vb;
    });
    if (round % 2) {
      ASSERT_TRUE(b.send(round));
      EXPECT_EQ(sel.join(), 100 + round);
    } else {
      ASSERT_TRUE(a.send(round));
      EXPECT_EQ(sel.join(), round);
    }
  }
}

TEST(Select, ClosedChannelsCompleteTheirCases) {
  lionet::Channel<int> a(0), b(0);
  a.close();
  std::optional<int> va = 5;
  EXPECT_EQ(lionet::select(lionet::recv_case(a, va)), 0);
  EXPECT_EQ(va, std::nullopt);
  b.close();
  bool sent = true;
  EXPECT_EQ(lionet::select(lionet::send_case(b, 1, &sent)), 0);
  EXPECT_FALSE(sent);
  // A select blocked on a channel is woken by its close().
  lionet::Channel<int> c(0);
  lionet::Scheduler s({.threads = 2});
  auto h = s.spawn([&] {
    std::optional<int> vc;
    bool sent2 = true;
    lionet::Channel<int> other(0);
    int k = lionet::select(lionet::recv_case(other, vc), lionet::send_case(c, 4, &sent2));
    return k == 1 && !sent2;
  });
  c.close();
  EXPECT_TRUE(h.join());
}

// Selecting senders and selecting receivers across two workers, on two channels at once:
// every value exactly once. 4 select-senders x 20,000 (TSan 2,000) values, 4 select-receivers
// that also time out now and then.
TEST(Select, ExactlyOnceBetweenSelectingSendersAndReceivers) {
  constexpr int kSenders = 4, kPerSender = 20000 / kScale, kTotal = kSenders * kPerSender;
  lionet::Scheduler s({.threads = 2});
  lionet::Channel<int> x(0), y(2);
  std::vector<std::atomic<uint8_t>> seen(kTotal);
  lionet::WaitGroup senders(kSenders);
  std::atomic<int> received{0};
  std::vector<lionet::JoinHandle<void>> receivers;
  for (int r = 0; r < 4; ++r) {
    receivers.push_back(s.spawn([&] {
      std::optional<int> vx, vy;
      for (;;) {
        int k = lionet::select(lionet::recv_case(x, vx), lionet::recv_case(y, vy), lionet::timeout_case(1ms));
        if (k == 2) continue;
        std::optional<int>& v = k == 0 ? vx : vy;
        if (!v) return;  // closed
        seen[*v].fetch_add(1, std::memory_order_relaxed);
        received.fetch_add(1, std::memory_order_relaxed);
      }
    }));
  }
  for (int p = 0; p < kSenders; ++p) {
    s.spawn([&, p] {
       for (int i = 0; i < kPerSender; ++i) {
         bool sent = false;
         lionet::select(lionet::send_case(x, p * kPerSender + i, &sent),
                        lionet::send_case(y, p * kPerSender + i, &sent));
         ASSERT_TRUE(sent);
       }
       senders.done();
     }).detach();
  }
  ASSERT_TRUE(senders.wait_for(120s)) << "senders stuck: a lost wake-up";
  // Receivers exit on the first closed channel they see; close both once everything is sent.
  x.close();
  y.close();
  for (auto& h : receivers) h.join();
  // y may still buffer values if every receiver saw x closed first: drain them here.
  while (auto v = y.try_recv()) {
    seen[*v].fetch_add(1);
    received.fetch_add(1);
  }
  EXPECT_EQ(received.load(), kTotal);
  int bad = 0;
  for (int v = 0; v < kTotal; ++v) bad += seen[v].load() != 1;
  EXPECT_EQ(bad, 0) << "values lost or duplicated";
}
}  // namespace
