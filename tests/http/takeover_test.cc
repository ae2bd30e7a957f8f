// tests/http/takeover_test.cc: the generic connection takeover (http/takeover.h): a handler
// answers 101 and then owns the stream, bytes read past the request head included; afterwards
// the keep-alive loop ends without touching the stream. And the misuses: a 101 without a
// takeover, a takeover on a response that is not 101, a request body in front of the new bytes.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <string>

#include "http_test_util.h"
#include "lionet/http/router.h"
#include "lionet/http/takeover.h"
#include "lionet/net/stream.h"

namespace lionet::http {
namespace {
using test::RawClient;
using test::TestServer;
using namespace std::chrono_literals;

// After the 101: sends back "buffered=<bytes>|", then upper-cases every byte it reads until
// it has seen a '.', then returns.
void shout(Takeover& t, std::atomic<int>* calls) {
  ++*calls;
  std::string hello = "buffered=" + std::string(t.buffered) + "|";
  (void)t.stream.write(hello);
  if (t.buffered.find('.') != std::string_view::npos) return;
  char buf[256];
  for (;;) {
    auto r = t.stream.read(buf, sizeof buf);
    if (!r || *r == 0) return;
    std::string up(buf, *r);
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    (void)t.stream.write(up);
    if (up.find('.') != std::string::npos) return;
  }
}

class TakeoverTest : public ::testing::Test {
 protected:
  TakeoverTest() {
    router_.route("GET,POST", "/shout", [this](Request& q, Response& s) {
      if (!q.can_take_over()) return s.reply(400, "HTTP/1.1 only\n");
      s.set_status(101);
      s.set_header("Upgrade", "shout");
      s.set_header("Connection", "Upgrade");
      s.take_over([this, path = std::string(q.path())](Takeover& t) {
        EXPECT_EQ(t.request.path(), path);  // the request is still readable
        shout(t, &calls_);
      });
    });
    // Copies what it needs, gives the HTTP input buffer back, then speaks on the stream.
    router_.get("/released", [this](Request&, Response& s) {
      s.set_status(101);
      s.set_header("Upgrade", "shout");
      s.set_header("Connection", "Upgrade");
      s.take_over([this](Takeover& t) {
        const std::string early(t.buffered);
        t.release_input();
        t.release_input();  // idempotent
        EXPECT_TRUE(t.buffered.empty());
        (void)t.stream.write("copied=" + early + "|");
        shout(t, &calls_);
      });
    });
    router_.get("/no-takeover", [](Request&, Response& s) { s.set_status(101); });
    router_.get("/not-101", [this](Request&, Response& s) {
      s.reply(200, "plain\n");
      s.take_over([this](Takeover& t) { shout(t, &calls_); });
    });
    router_.get("/hello", [](Request&, Response& s) { s.reply(200, "hello\n"); });
    server_ = std::make_unique<TestServer>(router_.handler());
    server_->start();
  }
  Router router_;
  std::atomic<int> calls_{0};
  std::unique_ptr<TestServer> server_;
};

TEST_F(TakeoverTest, TheHandlerOwnsTheStreamAfter101WithTheBytesReadPastTheHead) {
  RawClient c(server_->port());
  // The new protocol's first bytes ride with the request head.
  ASSERT_TRUE(c.send("GET /shout HTTP/1.1\r\nHost: x\r\n\r\nearly"));
  std::string got = c.read_until("buffered=early|");
  EXPECT_NE(got.find("HTTP/1.1 101 Switching Protocols\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("Upgrade: shout\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: Upgrade\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("Content-Length"), std::string::npos) << got;
  EXPECT_EQ(got.find("Connection: close"), std::string::npos) << got;
  ASSERT_TRUE(c.send("and more."));
  got = c.read_until_closed();
  // The takeover's bytes, then the end of the stream: no HTTP answer follows its return.
  EXPECT_EQ(got, "AND MORE.");
  EXPECT_EQ(calls_.load(), 1);
}

// Takeover::release_input(): the protocol keeps the stream and what it copied; the buffer is
// gone (buffered reads empty), and the connection still ends cleanly when the function returns.
TEST_F(TakeoverTest, AProtocolThatReleasesTheInputBufferKeepsTheStream) {
  RawClient c(server_->port());
  ASSERT_TRUE(c.send("GET /released HTTP/1.1\r\nHost: x\r\n\r\nearly"));
  std::string got = c.read_until("buffered=|");
  EXPECT_NE(got.find("HTTP/1.1 101 Switching Protocols\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("copied=early|buffered=|"), std::string::npos) << got;
  ASSERT_TRUE(c.send("still here."));
  EXPECT_EQ(c.read_until_closed(), "STILL HERE.");
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(TakeoverTest, ARequestBodyIsReadFirstAndIsNotPartOfTheBufferedBytes) {
  RawClient c(server_->port());
  ASSERT_TRUE(c.send("POST /shout HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nbodyXtail."));
  std::string got = c.read_until_closed();
  EXPECT_NE(got.find(" 101 "), std::string::npos) << got;
  EXPECT_NE(got.find("buffered=tail.|"), std::string::npos) << got;
}

TEST_F(TakeoverTest, A101WithoutATakeoverBecomes500) {
  RawClient c(server_->port());
  ASSERT_TRUE(c.send("GET /no-takeover HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got = c.read_until_closed();
  EXPECT_NE(got.find("HTTP/1.1 500 "), std::string::npos) << got;
  EXPECT_EQ(got.find(" 101 "), std::string::npos) << got;
}

TEST_F(TakeoverTest, ATakeoverOnAResponseThatIsNot101IsDroppedAndKeepAliveGoesOn) {
  RawClient c(server_->port());
  ASSERT_TRUE(c.send("GET /not-101 HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got = c.read_until("hello\n");
  EXPECT_NE(got.find("plain\n"), std::string::npos) << got;
  EXPECT_NE(got.find("hello\n"), std::string::npos) << got;
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(TakeoverTest, HttpOneZeroCannotBeTakenOver) {
  RawClient c(server_->port());
  ASSERT_TRUE(c.send("GET /shout HTTP/1.0\r\nHost: x\r\n\r\n"));
  std::string got = c.read_until_closed();
  EXPECT_NE(got.find(" 400 "), std::string::npos) << got;
  EXPECT_EQ(calls_.load(), 0);
}
}  // namespace
}  // namespace lionet::http
