// lionet/http/handler_limits.h over real sockets on 127.0.0.1: a route `timeout` and the
// server's handler_timeout answer 504; a client that hangs up (HTTP/1.1) or resets its stream
// (HTTP/2) cancels its handler and only that one; ClientRequest::timeout; Request::query_param.
#include "lionet/http/handler_limits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http_test_util.h"
#include "lionet/http/client.h"
#include "lionet/http/router.h"
#include "lionet/http2/client.h"
#include "lionet/http2/server.h"
#include "proxy_test_util.h"

namespace lionet::http {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::kScale;
using test::RawClient;
using test::TestServer;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A handler that blocks up to 10 s in a cancellable sleep and records how it ended.
struct Blocker {
  std::atomic<bool> started{false};
  std::atomic<bool> slept_fully{true};
  std::atomic<int64_t> ended_ns{0};
  Handler handler() {
    return [this](Request&, Response& res) {
      started = true;
      slept_fully = this_fiber::sleep_for(10s);
      ended_ns = Clock::now().time_since_epoch().count();
      res.reply(200, "slept\n");
    };
  }
  Clock::time_point ended() const { return Clock::time_point(Clock::duration(ended_ns.load())); }
  void wait_ended() const {
    for (int i = 0; i < 1000 && ended_ns.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  }
};

TEST(HandlerLimits, RouteTimeoutAnswers504InTime) {
  Blocker b;
  Router router;
  router.get("/slow", with_timeout(b.handler(), 100ms));
  TestServer server(router.handler());
  server.start();
  const uint64_t before = handler_counters().timeouts.load();
  auto t0 = Clock::now();
  auto r = server.run([&] { return Client().get(server.url("/slow")); });
  const double ms = ms_between(t0, Clock::now());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->status, 504);
  EXPECT_NE(r->body.find("100 ms"), std::string::npos) << r->body;
  EXPECT_GE(ms, 95.0);
  EXPECT_LT(ms, 300.0 * kScale);
  EXPECT_FALSE(b.slept_fully.load());
  EXPECT_EQ(handler_counters().timeouts.load(), before + 1);
}

TEST(HandlerLimits, ServerHandlerTimeoutOverHttp1AndHttp2) {
  Blocker b;
  ServerOptions o;
  o.handler_timeout = 100ms;
  http2::enable(o, http2::Options{});
  TestServer server(b.handler(), o);
  server.start();
  for (bool h2 : {false, true}) {
    ClientOptions co;
    co.h2c = h2;
    if (h2) http2::enable(co);
    auto t0 = Clock::now();
    auto r = server.run([&] { return Client(co).get(server.url("/")); });
    const double ms = ms_between(t0, Clock::now());
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->protocol, h2 ? "HTTP/2" : "HTTP/1.1");
    EXPECT_EQ(r->status, 504);
    EXPECT_GE(ms, 95.0);
    EXPECT_LT(ms, 300.0 * kScale);
  }
}

// curl --max-time as a raw client: the request, then a hang-up while the handler blocks.
TEST(HandlerLimits, Http1ClientThatHangsUpCancelsItsHandler) {
  Blocker b;
  TestServer server(b.handler());  // cancel_on_disconnect: on by default
  server.start();
  const uint64_t before = handler_counters().cancelled.load();
  Clock::time_point closed;
  {
    RawClient c(server.port());
    ASSERT_TRUE(c.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
    for (int i = 0; i < 400 && !b.started; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(b.started.load());
    std::this_thread::sleep_for(150ms);
    closed = Clock::now();
  }  // closes the connection
  b.wait_ended();
  EXPECT_FALSE(b.slept_fully.load());
  EXPECT_LT(ms_between(closed, b.ended()), 100.0 * kScale);
  EXPECT_EQ(handler_counters().cancelled.load(), before + 1);
}

// A request with a body: the handler reads it whole, then blocks; the hang-up still cancels it.
TEST(HandlerLimits, Http1HangUpAfterABodyCancelsItsHandler) {
  Blocker b;
  std::atomic<size_t> got{0};
  Router router;
  Handler block = b.handler();
  router.post("/upload", [&](Request& q, Response& s) {
    std::string body;
    if (q.read_body(body)) got = body.size();
    block(q, s);
  });
  TestServer server(router.handler());
  server.start();
  Clock::time_point closed;
  {
    RawClient c(server.port());
    ASSERT_TRUE(c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
    for (int i = 0; i < 400 && !b.started; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(b.started.load());
    std::this_thread::sleep_for(100ms);
    closed = Clock::now();
  }
  b.wait_ended();
  EXPECT_EQ(got.load(), 5u);
  EXPECT_FALSE(b.slept_fully.load());
  EXPECT_LT(ms_between(closed, b.ended()), 100.0 * kScale);
}

// Bytes that arrive while a watched handler runs (a pipelined request) end the watch and are
// read by the connection at once: the watcher waits on a duplicate of the fd, so it cannot take
// the readiness edge the connection's wait after its short read counts on (before, the second
// request waited for header_timeout).
TEST(HandlerLimits, Http1RequestPipelinedDuringAWatchedHandlerIsServedAtOnce) {
  Router router;
  router.get("/slow", [](Request&, Response& s) {
    (void)this_fiber::sleep_for(80ms);  // past the watch's 20 ms: the watcher waits
    s.reply(200, "slow\n");
  });
  router.get("/fast", [](Request&, Response& s) { s.reply(200, "fast\n"); });
  ServerOptions o;
  o.header_timeout = 3s;
  TestServer server(router.handler(), o);
  server.start();
  for (int round = 0; round < 5; ++round) {
    RawClient c(server.port());
    ASSERT_TRUE(c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::this_thread::sleep_for(40ms);  // the watcher is waiting now
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string out = c.read_until("HTTP/1.1 200", 2, 5s);
    EXPECT_NE(out.find("fast\n"), std::string::npos) << "round " << round << ": " << out;
    EXPECT_LT(ms_between(t0, Clock::now()), 1000.0 * kScale) << "round " << round;
  }
}

TEST(HandlerLimits, CancelOnDisconnectOffLetsTheHandlerRun) {
  Blocker b;
  ServerOptions o;
  o.cancel_on_disconnect = false;
  Router router;
  router.get("/", [&](Request& q, Response& s) {
    b.started = true;
    b.slept_fully = this_fiber::sleep_for(300ms);
    b.ended_ns = Clock::now().time_since_epoch().count();
    s.reply(200, "done\n");
  });
  TestServer server(router.handler(), o);
  server.start();
  {
    RawClient c(server.port());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    for (int i = 0; i < 400 && !b.started; ++i) std::this_thread::sleep_for(5ms);
  }
  b.wait_ended();
  EXPECT_TRUE(b.slept_fully.load());
}

// Ten streams on one HTTP/2 connection: the client gives up on one (RST_STREAM); only that
// stream's handler is cancelled, the nine others finish.
TEST(HandlerLimits, Http2ResetCancelsOnlyThatStreamsHandler) {
  Blocker b;
  std::atomic<int> finished{0};
  Router router;
  router.get("/block", b.handler());
  router.get("/work", [&](Request&, Response& s) {
    if (this_fiber::sleep_for(300ms)) ++finished;
    s.reply(200, "worked\n");
  });
  ServerOptions o;
  http2::enable(o, http2::Options{});
  TestServer server(router.handler(), o);
  server.start();
  ClientOptions co;
  co.h2c = true;
  http2::enable(co);
  Client client(co);
  std::atomic<int> ok{0};
  std::atomic<int64_t> reset_ns{0};
  server.run([&] {
    ASSERT_TRUE(client.get(server.url("/work")));  // the connection, made once
    std::vector<JoinHandle<void>> hs;
    for (int i = 0; i < 9; ++i) {
      hs.push_back(server.sched().spawn([&] {
        auto r = client.get(server.url("/work"));
        if (r && r->status == 200 && r->reused_connection) ++ok;  // on the one connection
      }));
    }
    hs.push_back(server.sched().spawn([&] {
      ClientRequest q;
      q.url = server.url("/block");
      q.timeout = 100ms;
      auto r = client.request(q);
      reset_ns = Clock::now().time_since_epoch().count();
      EXPECT_FALSE(r);
      if (!r) {
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_NE(r.error().message().find("response timed out"), std::string::npos) << r.error().message();
      }
    }));
    for (auto& h : hs) h.join();
  });
  b.wait_ended();
  EXPECT_EQ(ok.load(), 9);
  EXPECT_EQ(finished.load(), 10);  // the nine, and the first request
  EXPECT_FALSE(b.slept_fully.load());
  EXPECT_LT(ms_between(Clock::time_point(Clock::duration(reset_ns.load())), b.ended()), 100.0 * kScale);
}

// client -> proxy -> upstream: the client hangs up; the proxy's handler is cancelled and closes
// its upstream connection (not pooled), so the upstream's own handler is cancelled in turn.
TEST(HandlerLimits, ProxyAbandonsTheUpstreamWhenItsClientLeaves) {
  Blocker b;
  test::ProxyHarness h;
  auto& up = h.http_upstream("slow", b.handler());
  h.front(test::to({up.address()}));
  Clock::time_point closed;
  {
    RawClient c(h.port());
    ASSERT_TRUE(c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    for (int i = 0; i < 400 && !b.started; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(b.started.load());
    std::this_thread::sleep_for(100ms);
    closed = Clock::now();
  }
  b.wait_ended();
  EXPECT_FALSE(b.slept_fully.load());
  EXPECT_LT(ms_between(closed, b.ended()), 200.0 * kScale);  // two watchers, each within ~20 ms
}

TEST(HandlerLimits, ClientHonoursTheFibersDeadline) {
  Blocker b;
  TestServer server(b.handler());  // the client's give-up ends the blocked handler too
  server.start();
  auto t0 = Clock::now();
  auto r = server.run([&] {
    DeadlineScope d(100ms);
    return Client().get(server.url("/"));
  });
  EXPECT_FALSE(r);
  EXPECT_LT(ms_between(t0, Clock::now()), 300.0 * kScale);
}

TEST(QueryParam, DecodedFirstValueAndIteration) {
  EXPECT_EQ(query_param("a=1&b=x%20y&b=2", "b"), "x y");
  EXPECT_EQ(query_param("q=a+b&flag", "flag"), "");
  EXPECT_EQ(query_param("q=a+b", "q"), "a b");
  EXPECT_EQ(query_param("na%6De=v", "name"), "v");
  EXPECT_FALSE(query_param("a=1", "b").has_value());
  EXPECT_FALSE(query_param("a=%zz", "a").has_value());
  const auto all = query_params("a=1&&b=%41&c");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1], (std::pair<std::string, std::string>{"b", "A"}));
  EXPECT_EQ(all[2], (std::pair<std::string, std::string>{"c", ""}));
  Router router;
  router.get("/q", [](Request& q, Response& s) { s.reply(200, q.query_param("name").value_or("-")); });
  TestServer server(router.handler());
  server.start();
  auto r = server.run([&] { return Client().get(server.url("/q?x=1&name=J%C3%BCrgen+M")); });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "J\xC3\xBCrgen M");
}

}  // namespace
}  // namespace lionet::http
