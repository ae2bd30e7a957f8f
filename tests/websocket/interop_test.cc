// tests/websocket/interop_test.cc: LioNet against a WebSocket implementation no one here wrote,
// Python `websockets` (tests/websocket/ws_peer.py; scripts/install-deps.sh installs the pinned
// version): its client against websocket::accept() (text, binary, 0-byte and 16 MiB messages,
// fragments, ping/pong, close codes both ways; plain and TLS), and its server against
// websocket::connect() (the same, from the other side). Servers listen on 127.0.0.1 only.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "../ssl/ssl_test_util.h"
#include "lionet/http/router.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/server.h"
#include "ws_test_util.h"

namespace lionet::websocket {
namespace {
using http::test::TestServer;
using namespace std::chrono_literals;
using test::Child;
using test::Endings;

class Interop : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = test::python_websockets_missing();
    ASSERT_TRUE(missing.empty()) << missing;
  }
};

// The server side of these tests: /echo echoes every message and records how it ended;
// /close answers the first message with close(4000, "server bye").
std::unique_ptr<http::Router> make_router(Endings& endings) {
  auto r = std::make_unique<http::Router>();
  r->get("/echo", accept([&endings](Socket& ws) {
           Message m;
           while (ws.receive(m)) {
             if (!ws.send(m)) break;
           }
           endings.add(ws.close_code(), ws.close_reason());
         }));
  Options deflate;
  deflate.deflate.enabled = true;
  r->get("/echo-deflate", accept(
                              [&endings](Socket& ws) {
                                Message m;
                                while (ws.receive(m)) {
                                  if (!ws.send(m)) break;
                                }
                                endings.add(ws.close_code(), ws.close_reason());
                              },
                              deflate));
  r->get("/close", accept([&endings](Socket& ws) {
           if (ws.receive()) (void)ws.close(4000, "server bye");
           endings.add(ws.close_code(), ws.close_reason());
         }));
  return r;
}

// echo_path: /echo (permessage-deflate off) or /echo-deflate (on); python_compression: whether
// the Python client offers it (it does by default). `expect_ext` is what must be agreed.
void run_python_client(uint16_t port, bool tls, const std::string& ca, Endings& endings,
                       const std::string& echo_path = "/echo", bool python_compression = true,
                       const std::string& expect_ext = "none") {
  const std::string scheme = tls ? "wss" : "ws";
  const std::string base = scheme + "://127.0.0.1:" + std::to_string(port);
  std::vector<std::string> argv = {test::python(), test::peer_script(), "client", base + echo_path, "echo"};
  if (tls) argv.push_back(ca);
  if (!python_compression) argv.push_back("--no-compression");
  Child echo(argv);
  ASSERT_TRUE(echo.started());
  const int st = echo.wait(120s);
  const std::string out = echo.output();
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("EXT " + expect_ext + "\n"), std::string::npos) << "expected extensions " << expect_ext << ":\n"
                                                                     << out;
  for (const char* step :
       {"OK text echo", "OK binary echo", "OK empty text echo", "OK empty binary echo", "OK fragmented text echo",
        "OK fragmented binary echo", "OK 16 MiB binary echo", "OK ping answered by a pong"}) {
    EXPECT_NE(out.find(step), std::string::npos) << step << " missing in:\n" << out;
  }
  // Our close frame reached the client: it echoed the client's code (over TLS too: the peer's
  // SSL object is used by one thread at a time, ws_peer.py's SerializedSSLSocket says why).
  EXPECT_NE(out.find("CLOSED 4001"), std::string::npos) << "our close frame should echo 4001:\n" << out;
  auto codes = endings.wait_for(1);
  ASSERT_EQ(codes.size(), 1u);
  EXPECT_EQ(codes[0], 4001) << endings.reason(0);  // the client's close code, as the server saw it
  EXPECT_EQ(endings.reason(0), "client bye");

  argv = {test::python(), test::peer_script(), "client", base + "/close", "server-close"};
  if (tls) argv.push_back(ca);
  Child closer(argv);
  EXPECT_EQ(closer.wait(60s), 0) << closer.output();
  EXPECT_NE(closer.output().find("CLOSED 4000 server bye"), std::string::npos) << closer.output();
  codes = endings.wait_for(2);
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[1], 4000);  // the peer echoed our code
}

TEST_F(Interop, PythonClientAgainstTheServer) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  server.start();
  run_python_client(server.port(), false, "", endings);
}

// Many short connections over TLS 1.3 with session tickets (the server's default): each gets
// its echo and the server's close frame. Before the peer's SSL object was serialized, about 2%
// of such connections failed (stalled opening handshake, or no close frame), so 100 of them
// failed the test in about 9 runs of 10; plain ws as the control.
void run_many(bool tls) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  if (tls) server.server().enable_tls(SslContext::server(lionet::test::server_options()));
  server.start();
  constexpr int kConnections = 100;
  const std::string url = std::string(tls ? "wss" : "ws") + "://127.0.0.1:" + std::to_string(server.port()) + "/echo";
  std::vector<std::string> argv = {test::python(), test::peer_script(), "client", url,
                                   "many:" + std::to_string(kConnections)};
  if (tls) argv.push_back(lionet::test::Certs::get().localhost.cert);
  Child many(argv);
  ASSERT_TRUE(many.started());
  EXPECT_EQ(many.wait(300s), 0) << many.output();
  EXPECT_NE(many.output().find("OK 100 connections each got the server's close frame"), std::string::npos)
      << many.output();
  auto codes = endings.wait_for(kConnections);
  ASSERT_EQ(codes.size(), size_t{kConnections});
  for (uint16_t c : codes) EXPECT_EQ(c, 4001);  // every close frame of the client reached us
}

TEST_F(Interop, ManyPythonClientsOverTlsEachGetTheCloseFrame) { run_many(true); }
TEST_F(Interop, ManyPythonClientsEachGetTheCloseFrame) { run_many(false); }

// permessage-deflate with Python's client: offered by default and accepted by /echo-deflate
// (every message of the echo scenario compressed both ways, the 16 MiB one included), and
// not agreed when the client does not offer it.
TEST_F(Interop, PythonClientWithCompressionAgainstTheServer) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  server.start();
  run_python_client(server.port(), false, "", endings, "/echo-deflate", true, "permessage-deflate");
}

TEST_F(Interop, PythonClientWithoutCompressionAgainstACompressingServer) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  server.start();
  run_python_client(server.port(), false, "", endings, "/echo-deflate", false, "none");
}

TEST_F(Interop, PythonClientWithCompressionAgainstTheServerOverTls) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  server.server().enable_tls(SslContext::server(lionet::test::server_options()));
  server.start();
  run_python_client(server.port(), true, lionet::test::Certs::get().localhost.cert, endings, "/echo-deflate", true,
                    "permessage-deflate");
}

TEST_F(Interop, PythonClientAgainstTheServerOverTls) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  server.server().enable_tls(SslContext::server(lionet::test::server_options()));
  server.start();
  run_python_client(server.port(), true, lionet::test::Certs::get().localhost.cert, endings);
}

// Node's ws client (tests/websocket/ws_peer.js) against the server: text, binary, empty,
// fragmented and 1 MiB messages, ping/pong, close codes both ways, with permessage-deflate
// agreed (/echo-deflate; ws compresses only messages over 1 KiB, so both kinds cross) or not.
class NodeInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = test::node_ws_missing();
    ASSERT_TRUE(missing.empty()) << missing;
  }
};

void run_node_client(const std::string& path, bool compression, const std::string& expect_ext) {
  Endings endings;
  auto router = make_router(endings);
  TestServer server(router->handler());
  server.start();
  const std::string base = "ws://127.0.0.1:" + std::to_string(server.port());
  std::vector<std::string> argv = test::node_command(test::node_peer_script());
  for (const std::string& a : {std::string("client"), base + path, std::string("echo")}) argv.push_back(a);
  if (!compression) argv.push_back("--no-compression");
  Child echo(argv);
  ASSERT_TRUE(echo.started());
  EXPECT_EQ(echo.wait(120s), 0) << echo.output();
  const std::string out = echo.output();
  EXPECT_NE(out.find("EXT " + expect_ext), std::string::npos) << "expected extensions " << expect_ext << ":\n" << out;
  for (const char* step : {"OK text echo", "OK binary echo", "OK empty text echo", "OK fragmented text echo",
                           "OK 1 MiB binary echo", "OK ping answered by a pong"}) {
    EXPECT_NE(out.find(step), std::string::npos) << step << " missing in:\n" << out;
  }
  EXPECT_NE(out.find("CLOSED 4001"), std::string::npos) << "our close frame should echo 4001:\n" << out;
  auto codes = endings.wait_for(1);
  ASSERT_EQ(codes.size(), 1u);
  EXPECT_EQ(codes[0], 4001) << endings.reason(0);
  EXPECT_EQ(endings.reason(0), "node bye");

  argv = test::node_command(test::node_peer_script());
  for (const std::string& a : {std::string("client"), base + "/close", std::string("server-close")}) argv.push_back(a);
  Child closer(argv);
  EXPECT_EQ(closer.wait(60s), 0) << closer.output();
  EXPECT_NE(closer.output().find("CLOSED 4000 server bye"), std::string::npos) << closer.output();
  codes = endings.wait_for(2);
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[1], 4000);
}

TEST_F(NodeInterop, NodeClientAgainstTheServer) { run_node_client("/echo", true, "none"); }
TEST_F(NodeInterop, NodeClientWithCompressionAgainstTheServer) {
  run_node_client("/echo-deflate", true, "permessage-deflate");
}
TEST_F(NodeInterop, NodeClientWithoutCompressionAgainstACompressingServer) {
  run_node_client("/echo-deflate", false, "none");
}

// The LioNet client against the Python server: every path of ws_peer.py's handler.
// compress: our client offers permessage-deflate; agreed: whether the server is expected to
// accept it.
void run_lionet_client(lionet::test::Runtime& rt, uint16_t port, bool tls, bool compress = false, bool agreed = false) {
  ClientOptions o;
  if (tls) o.tls = SslContext::client(lionet::test::client_options());
  o.deflate.enabled = compress;
  const std::string base = std::string(tls ? "wss" : "ws") + "://127.0.0.1:" + std::to_string(port);
  rt.run([&] {
    {  // echo: text, binary, empty, 16 MiB, our fragments (send_frame_size), our ping
      ClientOptions fo = o;
      fo.send_frame_size = 1000;
      ConnectInfo info;
      auto ws = connect(base + "/echo", fo, &info);
      ASSERT_TRUE(ws) << ws.error().message() << " " << info.failure;
      EXPECT_EQ(info.status, 101);
      Socket& s = **ws;
      EXPECT_EQ(s.deflate().has_value(), agreed);
      ASSERT_TRUE(s.send_text("h\xC3\xA9llo"));
      auto m = s.receive();
      ASSERT_TRUE(m);
      EXPECT_TRUE(m->is_text());
      EXPECT_EQ(m->data, "h\xC3\xA9llo");
      ASSERT_TRUE(s.send_binary(std::string("\x00\xFF", 2)));
      m = s.receive();
      ASSERT_TRUE(m);
      EXPECT_TRUE(m->is_binary());
      EXPECT_EQ(m->data, std::string("\x00\xFF", 2));
      ASSERT_TRUE(s.send_text(""));
      m = s.receive();
      ASSERT_TRUE(m);
      EXPECT_EQ(m->data, "");
      std::string big = http::test::pattern(16u << 20, 3);
      ASSERT_TRUE(s.send_binary(big));  // 16,778 frames of 1000 bytes
      m = s.receive();
      ASSERT_TRUE(m);
      EXPECT_TRUE(m->data == big) << "16 MiB echo differs (size " << m->data.size() << ")";
      ASSERT_TRUE(s.ping("x"));
      ASSERT_TRUE(s.close(4003, "lionet bye"));
      EXPECT_EQ(s.close_code(), 4003);  // Python echoes the code
      EXPECT_FALSE(s.is_open());
      EXPECT_FALSE(s.send_text("late")) << "no data after the close frame";
    }
    {  // the server's fragments, reassembled
      auto ws = connect(base + "/frag", o);
      ASSERT_TRUE(ws) << ws.error().message();
      EXPECT_EQ((*ws)->deflate().has_value(), agreed);  // compressed fragments, reassembled
      auto m = (*ws)->receive();
      ASSERT_TRUE(m);
      EXPECT_EQ(m->data, "fragmented text");
      m = (*ws)->receive();
      ASSERT_TRUE(m);
      EXPECT_TRUE(m->is_binary());
      EXPECT_EQ(m->data, "\x01\x02\x03");
      (void)(*ws)->close();
    }
    {  // the server's ping gets our automatic pong (while we wait in receive())
      auto ws = connect(base + "/ping", o);
      ASSERT_TRUE(ws) << ws.error().message();
      auto m = (*ws)->receive();
      ASSERT_TRUE(m);
      EXPECT_EQ(m->data, "pong ok");
      (void)(*ws)->close();
    }
    {  // the server closes: receive() ends with its code and reason
      auto ws = connect(base + "/close", o);
      ASSERT_TRUE(ws) << ws.error().message();
      ASSERT_TRUE((*ws)->send_text("bye?"));
      EXPECT_FALSE((*ws)->receive());
      EXPECT_EQ((*ws)->close_code(), 4002);
      EXPECT_EQ((*ws)->close_reason(), "server bye");
    }
  });
}

TEST_F(Interop, TheClientAgainstPythonServer) {
  Child py({test::python(), test::peer_script(), "server"});
  const uint16_t port = py.wait_for_port();
  ASSERT_NE(port, 0) << py.output();
  lionet::test::Runtime rt;  // its scheduler runs the client
  run_lionet_client(rt, port, false);
  // The Python server saw our close codes (it prints them when its handler ends, which may be
  // a moment after our close() returned).
  TimePoint end = now() + 10s;
  while ((py.output().find("ENDED /echo 4003 lionet bye") == std::string::npos ||
          py.output().find("ENDED /frag 1000") == std::string::npos) &&
         now() < end) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_NE(py.output().find("ENDED /echo 4003 lionet bye"), std::string::npos) << py.output();
  EXPECT_NE(py.output().find("ENDED /frag 1000"), std::string::npos) << py.output();
}

TEST_F(Interop, TheClientWithCompressionAgainstPythonServer) {
  Child py({test::python(), test::peer_script(), "server"});
  const uint16_t port = py.wait_for_port();
  ASSERT_NE(port, 0) << py.output();
  lionet::test::Runtime rt;
  run_lionet_client(rt, port, false, /*compress=*/true, /*agreed=*/true);
  EXPECT_NE(py.output().find("EXT /echo permessage-deflate"), std::string::npos) << py.output();
}

TEST_F(Interop, TheClientWithCompressionAgainstPythonServerThatRefusesIt) {
  Child py({test::python(), test::peer_script(), "server", "--no-compression"});
  const uint16_t port = py.wait_for_port();
  ASSERT_NE(port, 0) << py.output();
  lionet::test::Runtime rt;
  run_lionet_client(rt, port, false, /*compress=*/true, /*agreed=*/false);
  EXPECT_NE(py.output().find("EXT /echo none"), std::string::npos) << py.output();
}

TEST_F(Interop, TheClientAgainstPythonServerOverTls) {
  const auto& c = lionet::test::Certs::get().localhost;
  Child py({test::python(), test::peer_script(), "server", c.cert, c.key});
  const uint16_t port = py.wait_for_port();
  ASSERT_NE(port, 0) << py.output();
  lionet::test::Runtime rt;
  run_lionet_client(rt, port, true);
}
}  // namespace
}  // namespace lionet::websocket
