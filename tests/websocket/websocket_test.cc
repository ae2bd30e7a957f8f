// tests/websocket/websocket_test.cc: websocket::accept() and websocket::connect() together, in
// one process: messages both ways with fragmentation, close codes both ways, one fiber in
// receive() while others send, keepalive against a silent peer, subprotocols, wss, and the
// handshake's refusals (raw HTTP, and HTTP/2 through curl).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../ssl/ssl_test_util.h"
#include "lionet/http/router.h"
#include "lionet/http2/server.h"
#include "lionet/net/tcp_server.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/sync/wait_group.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/handshake.h"
#include "lionet/websocket/server.h"
#include "ws_test_util.h"

namespace lionet::websocket {
namespace {
using http::test::RawClient;
using http::test::TestServer;
using namespace std::chrono_literals;
using test::client_frame;
using test::Endings;
using test::RawWs;

class WsTest : public ::testing::Test {
 protected:
  void start(http::ServerOptions so = {}) {
    Options echo_opts;
    echo_opts.send_frame_size = 333;  // the server's echoes go out fragmented
    router_.get("/echo", accept(
                             [this](Socket& ws) {
                               Message m;
                               while (ws.receive(m))
                                 if (!ws.send(m)) break;
                               endings_.add(ws.close_code(), ws.close_reason());
                             },
                             echo_opts));
    router_.get("/close/{code}", accept([this](Socket& ws, const http::Request& req) {
                  // The path parameter is still readable: the request lives as long as the socket.
                  const uint16_t code = static_cast<uint16_t>(std::stoi(std::string(req.param("code"))));
                  if (ws.receive()) (void)ws.close(code, "closing " + std::string(req.param("code")));
                  endings_.add(ws.close_code(), ws.close_reason());
                }));
    Options proto;
    proto.subprotocols = {"chat.v2", "chat"};
    router_.get("/proto", accept(
                              [](Socket& ws) {
                                (void)ws.send_text(std::string(ws.subprotocol()));
                                while (ws.receive()) {
                                }
                              },
                              proto));
    Options keepalive;
    keepalive.ping_interval = 100ms;
    keepalive.ping_timeout = 200ms;
    keepalive.close_timeout = 300ms;
    router_.get("/keepalive", accept(
                                  [this](Socket& ws) {
                                    while (ws.receive()) {
                                    }
                                    endings_.add(ws.close_code(), ws.close_reason());
                                  },
                                  keepalive));
    server_ = std::make_unique<TestServer>(router_.handler(), std::move(so));
    if (tls_) server_->server().enable_tls(SslContext::server(lionet::test::server_options()));
    server_->start();
  }
  std::string url(const std::string& path) const {
    return std::string(tls_ ? "wss" : "ws") + "://127.0.0.1:" + std::to_string(server_->port()) + path;
  }
  ClientOptions client_options() const {
    ClientOptions o;
    if (tls_) o.tls = SslContext::client(lionet::test::client_options());
    return o;
  }

  bool tls_ = false;
  http::Router router_;
  Endings endings_;
  std::unique_ptr<TestServer> server_;
};

void echo_round_trips(Socket& ws) {
  std::string big = http::test::pattern(1 << 20, 7);
  const Message sent[] = {Message::text("hello"),
                          Message::binary(std::string("\0\1\2", 3)),
                          Message::text(""),
                          Message::binary(""),
                          Message::text("\xE2\x82\xAC" + std::string(1000, 'e')),
                          Message::binary(big)};
  for (const Message& m : sent) {
    ASSERT_TRUE(ws.send(m));
    auto got = ws.receive();
    ASSERT_TRUE(got) << ws.close_code() << " " << ws.close_reason();
    EXPECT_EQ(got->type, m.type);
    EXPECT_TRUE(got->data == m.data) << "size " << got->data.size() << " vs " << m.data.size();
  }
}

TEST_F(WsTest, MessagesEchoWithFragmentationBothWaysAndCloseCodesTravel) {
  start();
  server_->run([&] {
    ClientOptions o = client_options();
    o.send_frame_size = 1000;  // the client's 1 MiB goes as 1049 frames
    auto ws = connect(url("/echo"), o);
    ASSERT_TRUE(ws) << ws.error().message();
    echo_round_trips(**ws);
    ASSERT_TRUE((*ws)->ping("abc"));
    ASSERT_TRUE((*ws)->close(4100, "client done"));
    EXPECT_EQ((*ws)->close_code(), 4100);
    EXPECT_FALSE((*ws)->receive());
    EXPECT_EQ((*ws)->send_text("x").error(), std::errc::not_connected);
  });
  auto codes = endings_.wait_for(1);
  ASSERT_EQ(codes.size(), 1u);
  EXPECT_EQ(codes[0], 4100);
  EXPECT_EQ(endings_.reason(0), "client done");
}

TEST_F(WsTest, TheServerClosesWithItsCodeAndReason) {
  start();
  server_->run([&] {
    auto ws = connect(url("/close/4321"), client_options());
    ASSERT_TRUE(ws) << ws.error().message();
    ASSERT_TRUE((*ws)->send_text("please close"));
    EXPECT_FALSE((*ws)->receive());
    EXPECT_EQ((*ws)->close_code(), 4321);
    EXPECT_EQ((*ws)->close_reason(), "closing 4321");
  });
  EXPECT_EQ(endings_.wait_for(1).at(0), 4321);
}

TEST_F(WsTest, OverTlsToo) {
  tls_ = true;
  start();
  server_->run([&] {
    auto ws = connect(url("/echo"), client_options());
    ASSERT_TRUE(ws) << ws.error().message();
    echo_round_trips(**ws);
    ASSERT_TRUE((*ws)->close());
  });
  EXPECT_EQ(endings_.wait_for(1).at(0), 1000);
}

TEST_F(WsTest, OneFiberReceivesWhileOthersSendOnTheSameSocket) {
  start();
  constexpr int kSenders = 4;
  const int per_sender = 300 / http::test::kScale;
  server_->run([&] {
    auto ws = connect(url("/echo"), client_options());
    ASSERT_TRUE(ws) << ws.error().message();
    Socket& s = **ws;
    std::set<std::string> got;
    auto receiver = Scheduler::current()->spawn([&] {
      for (int i = 0; i < kSenders * per_sender; ++i) {
        auto m = s.receive();
        if (!m) return;
        got.insert(m->data);
      }
    });
    WaitGroup senders;
    std::atomic<int> failures{0};
    for (int f = 0; f < kSenders; ++f) {
      senders.add(1);
      go([&, f] {
        for (int i = 0; i < per_sender; ++i) {
          // Sizes straddle the 333-byte fragments of the echo and the 16 KiB staging chunks.
          std::string body = std::to_string(f) + ":" + std::to_string(i) + ":" + std::string((i * 97) % 20000, 'a' + f);
          if (!s.send_text(body)) failures.fetch_add(1);
        }
        senders.done();
      });
    }
    senders.wait();
    receiver.join();
    EXPECT_EQ(failures.load(), 0);
    ASSERT_EQ(got.size(), static_cast<size_t>(kSenders * per_sender)) << "a message was lost or mangled";
    for (int f = 0; f < kSenders; ++f) {
      for (int i = 0; i < per_sender; i += 37) {
        std::string body = std::to_string(f) + ":" + std::to_string(i) + ":" + std::string((i * 97) % 20000, 'a' + f);
        EXPECT_TRUE(got.count(body)) << f << ":" << i;
      }
    }
    ASSERT_TRUE(s.close());
  });
}

TEST_F(WsTest, CloseFromAnotherFiberEndsAParkedReceive) {
  start();
  server_->run([&] {
    auto ws = connect(url("/echo"), client_options());
    ASSERT_TRUE(ws) << ws.error().message();
    Socket& s = **ws;
    std::atomic<bool> returned{false};
    auto receiver = Scheduler::current()->spawn([&] {
      while (s.receive()) {
      }
      returned = true;
    });
    this_fiber::sleep_for(20ms);  // the receiver is parked in a read
    ASSERT_TRUE(s.close(4200, "from elsewhere"));
    receiver.join();
    EXPECT_TRUE(returned.load());
    EXPECT_EQ(s.close_code(), 4200);  // the server echoed it; the receiver saw the echo
  });
  EXPECT_EQ(endings_.wait_for(1).at(0), 4200);
}

TEST_F(WsTest, KeepalivePingsASilentPeerThenClosesWith1011) {
  start();
  RawWs ws(server_->port());
  ASSERT_NE(ws.handshake("/keepalive").find(" 101 "), std::string::npos);
  const TimePoint t0 = now();
  test::RawFrame ping = ws.read_frame();  // the client never answers
  ASSERT_TRUE(ping.ok);
  EXPECT_EQ(ping.opcode, 0x9);
  test::RawFrame close = ws.read_frame();
  ASSERT_TRUE(close.ok);
  EXPECT_EQ(close.opcode, 0x8);
  EXPECT_EQ(close.close_code(), 1011);
  EXPECT_GE(now() - t0, 250ms);  // interval + timeout
  EXPECT_LT(now() - t0, test::scaled(3s));
  EXPECT_EQ(endings_.wait_for(1).at(0), 1011);
}

TEST_F(WsTest, AnsweredPingsKeepTheConnectionOpen) {
  start();
  server_->run([&] {
    auto ws = connect(url("/keepalive"), client_options());
    ASSERT_TRUE(ws) << ws.error().message();
    // Our receive() answers the server's pings; nothing else is sent for 8 ping intervals.
    auto receiver = Scheduler::current()->spawn([&] {
      while ((*ws)->receive()) {
      }
    });
    this_fiber::sleep_for(800ms);
    EXPECT_TRUE((*ws)->is_open());
    ASSERT_TRUE((*ws)->close());
    receiver.join();
    EXPECT_EQ((*ws)->close_code(), 1000);
  });
  EXPECT_EQ(endings_.wait_for(1).at(0), 1000);
}

TEST_F(WsTest, SubprotocolIsTheServersFirstChoiceThatTheClientOffered) {
  start();
  server_->run([&] {
    ClientOptions o = client_options();
    o.subprotocols = {"chat", "other"};
    auto ws = connect(url("/proto"), o);
    ASSERT_TRUE(ws) << ws.error().message();
    EXPECT_EQ((*ws)->subprotocol(), "chat");
    auto m = (*ws)->receive();
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "chat");
    ASSERT_TRUE((*ws)->close());
    auto none = connect(url("/proto"), client_options());
    ASSERT_TRUE(none);
    EXPECT_EQ((*none)->subprotocol(), "");
    ASSERT_TRUE((*none)->close());
  });
}

TEST_F(WsTest, BytesSentWithTheHandshakeAreTheFirstFrames) {
  start();
  RawWs ws(server_->port());
  // The first frame rides in the same write as the request head: the server read it with the
  // head, and the takeover hands it to the socket.
  std::string head = ws.handshake("/echo", client_frame(true, 0x1, "early"));
  ASSERT_NE(head.find(" 101 "), std::string::npos);
  test::RawFrame f = ws.read_frame();
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.payload, "early");
}

TEST_F(WsTest, BadHandshakesAreRefusedWithTheirStatus) {
  start();
  auto ask = [&](const std::string& req) {
    RawClient c(server_->port());
    c.send(req);
    return c.read_until("\r\n\r\n");
  };
  const std::string key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  std::string r = ask("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 426 "), std::string::npos) << r;
  EXPECT_NE(r.find("Upgrade: websocket"), std::string::npos) << r;
  r = ask("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + key +
          "Sec-WebSocket-Version: 8\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 426 "), std::string::npos) << r;
  EXPECT_NE(r.find("Sec-WebSocket-Version: 13"), std::string::npos) << r;
  r =
      ask("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
          "Sec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 400 "), std::string::npos) << r;
  r =
      ask("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Version: 13\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 400 "), std::string::npos) << "no key: " << r;
  r = ask("GET /echo HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + key +
          "Sec-WebSocket-Version: 13\r\n\r\n");
  EXPECT_NE(r.find(" 400 "), std::string::npos) << r;
  // A valid one, with the accept key of RFC 6455's example.
  r = ask("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n" + key +
          "Sec-WebSocket-Version: 13\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 101 "), std::string::npos) << r;
  EXPECT_NE(r.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos) << r;
  EXPECT_EQ(r.find("Content-Length"), std::string::npos) << r;
}

TEST_F(WsTest, OverHttp2TheRouteAnswers501NamingRfc8441) {
  int st = -1;
  http::test::shell("curl --version 2>/dev/null | grep -q HTTP2", &st);
  if (st != 0) GTEST_SKIP() << "curl with HTTP/2 is not installed";
  http::ServerOptions so;
  http2::enable(so);
  start(std::move(so));
  std::string out = http::test::shell("curl -s --http2-prior-knowledge -w '\\n%{http_code} %{http_version}' " +
                                      server_->url("/echo") + " 2>&1");
  EXPECT_NE(out.find("501 2"), std::string::npos) << out;
  EXPECT_NE(out.find("RFC 8441"), std::string::npos) << out;
}

TEST_F(WsTest, TheClientRefusesAServerThatGetsTheAcceptKeyWrong) {
  http::Router r;
  r.get("/bad", [](http::Request& req, http::Response& res) {
    res.set_status(101);
    res.set_header("Upgrade", "websocket");
    res.set_header("Connection", "Upgrade");
    res.set_header("Sec-WebSocket-Accept", "not-the-right-key=");
    res.take_over([](http::Takeover&) {});
  });
  r.get("/nope", [](http::Request&, http::Response& res) { res.reply(403, "no\n"); });
  TestServer server(r.handler());
  server.start();
  server.run([&] {
    ConnectInfo info;
    auto ws = connect("ws://127.0.0.1:" + std::to_string(server.port()) + "/bad", {}, &info);
    EXPECT_EQ(ws.error(), std::errc::protocol_error);
    EXPECT_NE(info.failure.find("Sec-WebSocket-Accept"), std::string::npos) << info.failure;
    ws = connect("ws://127.0.0.1:" + std::to_string(server.port()) + "/nope", {}, &info);
    EXPECT_EQ(ws.error(), std::errc::protocol_error);
    EXPECT_EQ(info.status, 403);
    EXPECT_EQ(connect("http://127.0.0.1/x").error(), std::errc::invalid_argument);
    EXPECT_EQ(connect("wss://127.0.0.1:" + std::to_string(server.port()) + "/x").error(),
              std::errc::protocol_not_supported);
  });
}
// The client reads the 101 with http/'s response parser: a head whose blank line arrives in two
// pieces is put together; an HTTP/1.0 answer, or a field folded onto a second line, is refused
// as malformed (RFC 6455 4.1 wants HTTP/1.1; RFC 9112 5.2 forbids obs-fold in a response).
TEST_F(WsTest, TheClientReadsA101InPiecesAndRefusesAMalformedOne) {
  http::Router r;
  TestServer web(r.handler());  // for its scheduler
  enum Mode { kPieces, kHttp10, kFolded };
  std::atomic<int> mode{kPieces};
  TcpServer raw(web.sched(), [&](SocketStream& s) {
    std::string req;
    char buf[1024];
    while (req.find("\r\n\r\n") == std::string::npos) {
      auto n = s.read(buf, sizeof buf);
      if (!n || *n == 0) return;
      req.append(buf, *n);
    }
    const size_t k = req.find("Sec-WebSocket-Key: ") + 19;
    const std::string key = req.substr(k, req.find("\r\n", k) - k);
    const int m = mode.load();
    const std::string head = std::string(m == kHttp10 ? "HTTP/1.0" : "HTTP/1.1") +
                             " 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
                             (m == kFolded ? "X-Note: a\r\n b\r\n" : "") + "Sec-WebSocket-Accept: " + accept_key(key) +
                             "\r\n\r\n";
    if (m == kPieces) {
      if (!s.write(head.data(), head.size() - 3)) return;
      this_fiber::sleep_for(50ms);  // the client has read up to "\r" and waits for the rest
      if (!s.write(head.data() + head.size() - 3, 3)) return;
    } else if (!s.write(head)) {
      return;
    }
    (void)s.read(buf, sizeof buf);  // until the client closes
  });
  raw.listen(Address::ipv4_loopback(0));
  raw.start();
  const std::string url = "ws://127.0.0.1:" + std::to_string(raw.addresses()[0].port()) + "/";
  web.run([&] {
    ConnectInfo info;
    auto ws = connect(url, {}, &info);
    ASSERT_TRUE(ws) << ws.error().message() << " " << info.failure;
    EXPECT_EQ(info.status, 101);
    for (int m : {kHttp10, kFolded}) {
      mode = m;
      info = {};
      ws = connect(url, {}, &info);
      EXPECT_EQ(ws.error(), std::errc::protocol_error) << m;
      EXPECT_EQ(info.failure, "malformed response head") << m;
    }
  });
  raw.stop(1s);
}

}  // namespace
}  // namespace lionet::websocket

namespace lionet::websocket {
namespace {
// Server::stop() (SIGTERM in the binary) with WebSockets open: each client gets a close frame
// 1001 at the start of the drain, not a dropped connection at its end.
TEST(WebSocketStop, OpenSocketsGet1001WhenTheServerStops) {
  using Clock = std::chrono::steady_clock;
  http::Router router;
  router.get("/ws", accept([](Socket& ws) {
               while (auto m = ws.receive()) (void)ws.send(*m);
             }));
  http::test::TestServer server(router.handler());
  server.start();
  constexpr int kClients = 5;
  std::vector<JoinHandle<std::pair<uint16_t, int64_t>>> clients;
  std::atomic<int> connected{0};
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(server.sched().spawn([&] {
      auto ws = connect(server.url("/ws").replace(0, 4, "ws"));
      if (!ws) return std::pair<uint16_t, int64_t>{0, 0};
      ++connected;
      while ((*ws)->receive()) {
      }
      return std::pair<uint16_t, int64_t>{(*ws)->close_code(), Clock::now().time_since_epoch().count()};
    }));
  }
  for (int i = 0; i < 400 && connected < kClients; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(connected.load(), kClients);
  std::this_thread::sleep_for(20ms);
  const auto t0 = Clock::now();
  std::thread stopper([&] { server.server().stop(5s); });
  for (auto& c : clients) {
    const std::pair<uint16_t, int64_t> r = c.join();
    EXPECT_EQ(r.first, close_code::kGoingAway);
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::time_point(Clock::duration(r.second)) - t0).count();
    EXPECT_LT(ms, 100.0 * lionet::test::kSlowdown);
  }
  stopper.join();
}
}  // namespace
}  // namespace lionet::websocket
