// tests/websocket/send_queue_test.cc: the bounded send queue (Options::send_queue_bytes),
// try_send (never parks: "full" instead) and broadcast(): a peer that reads nothing makes
// try_send say kFull within the bound while the sender keeps running, and every message that
// was queued then arrives intact and in order; send() and try_send() from one fiber keep call
// order; a broadcast reaches every member of a room of 20 clients.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "../ssl/ssl_test_util.h"
#include "lionet/http/router.h"
#include "lionet/sync/wait_group.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/server.h"
#include "ws_test_util.h"

namespace lionet::websocket {
namespace {
using http::test::TestServer;
using namespace std::chrono_literals;
using test::client_frame;
using test::Endings;
using test::RawWs;

constexpr size_t kQueueBound = 256 * 1024;
constexpr size_t kMessage = 64 * 1024;
constexpr int kMaxAttempts = 4000;  // 250 MiB: far beyond any kernel buffering on loopback

std::string numbered(int i) {
  std::string s(kMessage, static_cast<char>('a' + i % 26));
  std::memcpy(s.data(), &i, sizeof i);
  return s;
}

class WsSendQueue : public ::testing::Test {
 protected:
  WsSendQueue() {
    Options o;
    o.send_queue_bytes = kQueueBound;
    // /flood: on "go", try_send 64 KiB messages until the queue says full, to a peer that
    // reads nothing meanwhile; reports how many were queued, the queue's size just before the
    // refused try_send, and how long the loop took.
    router_.get("/flood", accept(
                              [this](Socket& ws) {
                                if (!ws.receive()) return;
                                const TimePoint start = now();
                                int queued = 0;
                                size_t before = 0;
                                SendResult r = SendResult::kQueued;
                                for (int i = 0; i < kMaxAttempts; ++i) {
                                  // Read before the call: this fiber is the only one queueing,
                                  // and the writer fiber only shrinks the queue, so this is at
                                  // least the size try_send judged. Read after a kFull, the
                                  // writer may already have drained it all into the kernel's
                                  // buffers (issue 40: 0 under TSan).
                                  before = ws.queued_bytes();
                                  r = ws.try_send_binary(numbered(i));
                                  if (r != SendResult::kQueued) break;
                                  ++queued;
                                }
                                flood_queue_at_full_ = before;
                                flood_took_ = now() - start;
                                flood_result_ = r;
                                flood_queued_.store(queued);
                                while (ws.receive()) {
                                }
                                endings_.add(ws.close_code(), ws.close_reason());
                              },
                              o));
    // /mixed: send() and try_send() interleaved from one fiber; then try_send after close.
    router_.get("/mixed", accept([this](Socket& ws) {
                  if (!ws.receive()) return;
                  bool ok = ws.try_send_text("a") == SendResult::kQueued;
                  ok = ok && ws.send_text("b");
                  ok = ok && ws.try_send_text("c") == SendResult::kQueued;
                  ok = ok && ws.try_send_text("d") == SendResult::kQueued;
                  ok = ok && ws.send_text("e");
                  ok = ok && ws.try_send_text("f") == SendResult::kQueued;  // goes out before the close frame
                  mixed_ok_ = ok;
                  (void)ws.close(4300, "mixed done");
                  mixed_after_close_ = ws.try_send_text("late");
                  endings_.add(ws.close_code(), ws.close_reason());
                }));
    // /room: members register for broadcasts until their peer closes.
    router_.get("/room", accept([this](Socket& ws) {
                  {
                    std::lock_guard<std::mutex> g(room_mu_);
                    room_.push_back(&ws);
                  }
                  while (ws.receive()) {
                  }
                  {
                    std::lock_guard<std::mutex> g(room_mu_);
                    std::erase(room_, &ws);
                  }
                  endings_.add(ws.close_code(), ws.close_reason());
                }));
    server_ = std::make_unique<TestServer>(router_.handler());
    server_->start();
  }
  std::string url(const char* path) const { return "ws://127.0.0.1:" + std::to_string(server_->port()) + path; }

  http::Router router_;
  Endings endings_;
  std::unique_ptr<TestServer> server_;
  std::atomic<int> flood_queued_{-1};
  std::atomic<SendResult> flood_result_{SendResult::kQueued};
  std::atomic<size_t> flood_queue_at_full_{0};
  std::atomic<Duration> flood_took_{};
  std::atomic<bool> mixed_ok_{false};
  std::atomic<SendResult> mixed_after_close_{SendResult::kQueued};
  std::mutex room_mu_;
  std::vector<Socket*> room_;
};

TEST_F(WsSendQueue, TrySendSaysFullInsteadOfParkingAndEveryQueuedMessageArrivesInOrder) {
  {
    RawWs ws(server_->port());
    ASSERT_NE(ws.handshake("/flood").find(" 101 "), std::string::npos);
    ASSERT_TRUE(ws.send(client_frame(true, 0x1, "go")));
    // The client reads nothing until the server's loop has ended.
    const TimePoint end = now() + test::scaled(20s);
    while (flood_queued_.load() < 0 && now() < end) std::this_thread::sleep_for(5ms);
    const int queued = flood_queued_.load();
    ASSERT_GE(queued, 0) << "the try_send loop did not end: a try_send parked";
    EXPECT_EQ(flood_result_.load(), SendResult::kFull) << "no kFull in " << kMaxAttempts << " attempts of 64 KiB";
    EXPECT_LT(queued, kMaxAttempts);
    // kFull only when the message really did not fit: the queue then held more than the
    // bound minus one framed message (kMessage plus at most kMaxHeaderSize).
    EXPECT_GT(flood_queue_at_full_.load(), kQueueBound - (kMessage + kMaxHeaderSize)) << "kFull with room left";
    EXPECT_LE(flood_queue_at_full_.load(), kQueueBound) << "the queue stays within its bound";
    EXPECT_LT(flood_took_.load(), test::scaled(5s));
    // Now read: exactly the queued messages, whole and in order.
    for (int i = 0; i < queued; ++i) {
      test::RawFrame f = ws.read_frame(10s);
      ASSERT_TRUE(f.ok) << "message " << i << " of " << queued;
      ASSERT_EQ(f.opcode, 0x2);
      ASSERT_TRUE(f.payload == numbered(i)) << "message " << i << " differs";
    }
    ASSERT_TRUE(ws.send(client_frame(true, 0x8, "\x03\xE8")));
    test::RawFrame f = ws.read_frame();
    EXPECT_EQ(f.opcode, 0x8) << "nothing but the close frame after the queued messages";
    EXPECT_TRUE(ws.sees_end_of_stream());
  }
  EXPECT_EQ(endings_.wait_for(1).at(0), 1000);
}

TEST_F(WsSendQueue, SendAndTrySendFromOneFiberKeepCallOrderAndCloseFlushesTheQueue) {
  lionet::test::Runtime rt;
  rt.run([&] {
    auto ws = connect(url("/mixed"));
    ASSERT_TRUE(ws) << ws.error().message();
    ASSERT_TRUE((*ws)->send_text("go"));
    std::string got;
    while (auto m = (*ws)->receive()) got += m->data;
    EXPECT_EQ(got, "abcdef");
    EXPECT_EQ((*ws)->close_code(), 4300);
  });
  EXPECT_EQ(endings_.wait_for(1).at(0), 4300);
  EXPECT_TRUE(mixed_ok_.load());
  EXPECT_EQ(mixed_after_close_.load(), SendResult::kClosed);
}

TEST_F(WsSendQueue, ABroadcastReachesEveryMemberOfTheRoom) {
  constexpr int kClients = 20;
  lionet::test::Runtime rt;
  std::atomic<int> received{0}, connected{0};
  WaitGroup all;
  all.add(kClients);
  std::vector<std::string> got(kClients);
  for (int i = 0; i < kClients; ++i) {
    rt.sched().spawn_detached([&, i] {
      auto ws = connect(url("/room"));
      if (ws) {
        connected.fetch_add(1);
        for (int k = 0; k < 2; ++k) {
          if (auto m = (*ws)->receive()) got[i] += m->data + ";";
        }
        received.fetch_add(1);
        (void)(*ws)->close();
      }
      all.done();
    });
  }
  const TimePoint end = now() + test::scaled(10s);
  for (;;) {
    {
      std::lock_guard<std::mutex> g(room_mu_);
      if (room_.size() == kClients || now() >= end) break;
    }
    std::this_thread::sleep_for(5ms);
  }
  BroadcastResult r1, r2;
  {
    std::lock_guard<std::mutex> g(room_mu_);  // members stay alive while we hold the room
    ASSERT_EQ(room_.size(), size_t{kClients});
    r1 = broadcast(room_, Message::text("first"));
    r2 = broadcast(room_, Message::text(std::string(3000, 'x')));
  }
  EXPECT_EQ(r1.queued, size_t{kClients});
  EXPECT_EQ(r1.full + r1.closed, 0u);
  EXPECT_EQ(r2.queued, size_t{kClients});
  ASSERT_TRUE(all.wait_for(test::scaled(20s)));
  EXPECT_EQ(connected.load(), kClients);
  EXPECT_EQ(received.load(), kClients);
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[i], "first;" + std::string(3000, 'x') + ";") << "client " << i;
  EXPECT_EQ(endings_.wait_for(kClients).size(), size_t{kClients});
}
}  // namespace
}  // namespace lionet::websocket
