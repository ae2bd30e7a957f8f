// Abuse of a TLS server (TcpServer + SslStream): plain-text bytes, a truncated ClientHello,
// a client that never speaks (handshake timeout), random bytes after the handshake. Each must
// close only its own connection while a healthy TLS client keeps being served in parallel.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>

#include "lionet/sync/wait_group.h"
#include "ssl_test_util.h"

namespace lionet {
namespace {
using namespace std::chrono_literals;
using test::Runtime;

// The first bytes of a real TLS ClientHello record (type 22, version 3.1, length 512) and of
// its handshake header (ClientHello, length 508): a peer that stops after them.
const unsigned char kClientHelloStart[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03,
                                           0x03, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};

class AbuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto o = test::server_options();
    o.handshake_timeout = 300ms;  // the silent client's fate, quickly
    ctx_ = SslContext::server(o);
    server_ = std::make_unique<TcpServer>(rt_.io(), [this](SocketStream& s) {
      SslStream tls(ctx_, s.socket());
      auto h = tls.handshake();
      if (!h) {
        std::lock_guard lk(mu_);
        handshake_errors_.push_back(h.error().value());
        return;
      }
      test::tls_echo(tls);
    });
    server_->listen(Address::ipv4_loopback(0));
    server_->start();
    addr_ = server_->addresses()[0];
    cctx_ = SslContext::client(test::client_options());
  }
  void TearDown() override { server_->stop(1s); }

  // Runs abuse() in a fiber while a healthy client echoes in another; the healthy client must
  // complete every round, before, during and after the abuse.
  template <class F>
  void with_healthy_client(F abuse) {
    rt_.run([&] {
      std::atomic<bool> stop{false};
      std::atomic<int> rounds{0};
      auto healthy = rt_.sched().spawn([&] {
        SslStream c(cctx_, Socket::connect_to(addr_).value());
        if (!c.handshake()) return false;
        auto end = now() + 20s;
        while (!stop.load() && now() < end) {
          if (!test::echo_once(c, test::pattern(1000, rounds.load()))) return false;
          rounds++;
        }
        return test::echo_once(c, "after the abuse");
      });
      auto until = [&](int n) {  // bounded wait for the healthy client's progress
        auto end = now() + 10s;
        while (rounds.load() < n && now() < end) this_fiber::sleep_for(1ms);
        return rounds.load() >= n;
      };
      EXPECT_TRUE(until(3)) << "the healthy client is not being served";
      abuse();
      EXPECT_TRUE(until(rounds.load() + 3)) << "the healthy client stopped being served";
      stop = true;
      EXPECT_TRUE(healthy.join()) << "the healthy client failed";
    });
  }

  // Reads until end of stream or reset; true if the server ended the connection within limit.
  static bool server_closes(Socket& s, Duration limit = 5s) {
    char buf[4096];
    auto end = now() + limit;
    for (;;) {
      auto r = s.read(buf, sizeof buf, Deadline::at(end));
      if (!r) return r.error() != std::errc::timed_out;  // ECONNRESET: closed as well
      if (*r == 0) return true;
    }
  }

  Runtime rt_;
  std::shared_ptr<SslContext> ctx_, cctx_;
  std::unique_ptr<TcpServer> server_;
  Address addr_;
  std::mutex mu_;
  std::vector<int> handshake_errors_;
};

TEST_F(AbuseTest, PlainTextBytesCloseOnlyThatConnection) {
  with_healthy_client([&] {
    auto s = Socket::connect_to(addr_).value();
    std::string http = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    ASSERT_TRUE(s.write(http.data(), http.size()));
    EXPECT_TRUE(server_closes(s));
  });
  std::lock_guard lk(mu_);
  ASSERT_EQ(handshake_errors_.size(), 1u);
  EXPECT_EQ(handshake_errors_[0], EPROTO);
}

TEST_F(AbuseTest, TruncatedClientHelloThenEndOfStreamClosesOnlyThatConnection) {
  with_healthy_client([&] {
    auto s = Socket::connect_to(addr_).value();
    ASSERT_TRUE(s.write(kClientHelloStart, sizeof kClientHelloStart));
    ASSERT_TRUE(s.shutdown(SHUT_WR));
    EXPECT_TRUE(server_closes(s));
  });
  std::lock_guard lk(mu_);
  ASSERT_EQ(handshake_errors_.size(), 1u);
  EXPECT_EQ(handshake_errors_[0], EPROTO);
}

TEST_F(AbuseTest, TruncatedClientHelloThatStallsEndsAtTheHandshakeTimeout) {
  with_healthy_client([&] {
    auto s = Socket::connect_to(addr_).value();
    ASSERT_TRUE(s.write(kClientHelloStart, sizeof kClientHelloStart));
    auto t0 = now();
    EXPECT_TRUE(server_closes(s));
    EXPECT_GE(now() - t0, 250ms);
  });
  std::lock_guard lk(mu_);
  ASSERT_EQ(handshake_errors_.size(), 1u);
  EXPECT_EQ(handshake_errors_[0], ETIMEDOUT);
}

TEST_F(AbuseTest, SilentClientIsClosedAtTheHandshakeTimeout) {
  with_healthy_client([&] {
    auto s = Socket::connect_to(addr_).value();
    auto t0 = now();
    EXPECT_TRUE(server_closes(s));
    auto took = now() - t0;
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, 5s);
  });
  std::lock_guard lk(mu_);
  ASSERT_EQ(handshake_errors_.size(), 1u);
  EXPECT_EQ(handshake_errors_[0], ETIMEDOUT);
}

TEST_F(AbuseTest, RandomBytesAfterTheHandshakeCloseOnlyThatConnection) {
  with_healthy_client([&] {
    SslStream c(cctx_, Socket::connect_to(addr_).value());
    ASSERT_TRUE(c.handshake());
    ASSERT_TRUE(test::echo_once(c, "a proper request first"));
    std::mt19937 rng(42);
    std::string junk(3000, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    junk[0] = 0x17;  // an application-data record header of 256 bytes, then garbage
    junk[1] = 0x03;
    junk[2] = 0x03;
    junk[3] = 0x01;
    junk[4] = 0x00;
    c.set_timeouts(5s, 5s);
    ASSERT_TRUE(c.socket().write(junk.data(), junk.size()));  // under TLS, on the raw socket
    char b[64];
    auto r = c.read(b, sizeof b);  // the server's alert, then its close
    ASSERT_TRUE(!r || *r == 0);
    if (!r) {
      EXPECT_NE(r.error(), std::errc::timed_out) << "the server did not close the connection";
    }
  });
  std::lock_guard lk(mu_);
  EXPECT_TRUE(handshake_errors_.empty());
}
}  // namespace
}  // namespace lionet
