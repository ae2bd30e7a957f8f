// tests/websocket/abuse_test.cc: raw bytes that no well-behaved client sends, over a plain
// socket, against websocket::accept(): each gets the close code RFC 6455 assigns (read from the
// close frame the server sends back), the server-side Socket ends with that code, and the
// server goes on serving a well-behaved second connection.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "lionet/http/router.h"
#include "lionet/websocket/server.h"
#include "ws_test_util.h"

namespace lionet::websocket {
namespace {
using http::test::TestServer;
using namespace std::chrono_literals;
using test::client_frame;
using test::Endings;
using test::RawWs;

struct Abuse {
  const char* name;
  std::string bytes;
  uint16_t code;  // in the server's close frame
};

class WsAbuse : public ::testing::Test {
 protected:
  WsAbuse() {
    Options o;
    o.max_message_size = 64 * 1024;
    router_.get("/echo", accept(
                             [this](Socket& ws) {
                               Message m;
                               while (ws.receive(m))
                                 if (!ws.send(m)) break;
                               endings_.add(ws.close_code(), ws.close_reason());
                             },
                             o));
    server_ = std::make_unique<TestServer>(router_.handler());
    server_->start();
  }

  // A fresh, well-behaved connection still gets its echo.
  void expect_still_serving() {
    RawWs ws(server_->port());
    ASSERT_NE(ws.handshake("/echo").find(" 101 "), std::string::npos);
    ASSERT_TRUE(ws.send(client_frame(true, 0x1, "still here")));
    test::RawFrame f = ws.read_frame();
    ASSERT_TRUE(f.ok);
    EXPECT_EQ(f.opcode, 0x1);
    EXPECT_EQ(f.payload, "still here");
    ASSERT_TRUE(ws.send(client_frame(true, 0x8, "\x03\xE8")));
    f = ws.read_frame();
    EXPECT_EQ(f.opcode, 0x8);
    EXPECT_EQ(f.close_code(), 1000);
    EXPECT_TRUE(ws.sees_end_of_stream());
  }

  http::Router router_;
  Endings endings_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(WsAbuse, EachViolationGetsItsCloseCodeAndTheServerKeepsServing) {
  const Abuse cases[] = {
      {"unmasked client frame", client_frame(true, 0x1, "hello", /*masked=*/false), 1002},
      {"unknown opcode 3", client_frame(true, 0x3, "x"), 1002},
      {"unknown opcode 11", client_frame(true, 0xB, "x"), 1002},
      {"RSV1 without an extension", client_frame(true, 0x1, "x", true, 0x40), 1002},
      {"RSV3 without an extension", client_frame(true, 0x2, "x", true, 0x10), 1002},
      {"126-byte ping", client_frame(true, 0x9, std::string(126, 'p')), 1002},
      {"fragmented ping", client_frame(false, 0x9, "p"), 1002},
      {"invalid UTF-8 split across fragments",
       client_frame(false, 0x1, "valid so far \xED") + client_frame(true, 0x0, "\xA0\x80"), 1007},
      {"invalid UTF-8 in one frame", client_frame(true, 0x1, "\xC0\xAF"), 1007},
      {"2^63 payload length", std::string("\x82\xFF\x80\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04", 14), 1002},
      {"continuation without a message", client_frame(true, 0x0, "x"), 1002},
      {"message over max_message_size",
       client_frame(false, 0x2, std::string(40000, 'a')) + client_frame(true, 0x0, std::string(40000, 'b')), 1009},
      {"close frame with 1 byte", client_frame(true, 0x8, "\x03"), 1002},
      {"close frame with code 1006", client_frame(true, 0x8, "\x03\xEE"), 1002},
  };
  size_t n = 0;
  for (const Abuse& a : cases) {
    SCOPED_TRACE(a.name);
    {
      RawWs ws(server_->port());
      ASSERT_NE(ws.handshake("/echo").find(" 101 "), std::string::npos);
      ASSERT_TRUE(ws.send(a.bytes));
      test::RawFrame f = ws.read_frame();
      ASSERT_TRUE(f.ok) << "no close frame";
      EXPECT_EQ(f.opcode, 0x8);
      EXPECT_EQ(f.close_code(), a.code) << f.payload.substr(2);
      EXPECT_GT(f.payload.size(), 2u) << "the close frame names the reason";
      // The client answers the close; the server then ends the stream.
      ASSERT_TRUE(ws.send(client_frame(true, 0x8, f.payload.substr(0, 2))));
      EXPECT_TRUE(ws.sees_end_of_stream());
    }
    auto codes = endings_.wait_for(++n);
    ASSERT_EQ(codes.size(), n);
    EXPECT_EQ(codes.back(), a.code);
    expect_still_serving();
    ++n;  // expect_still_serving's connection ended too (1000)
    ASSERT_EQ(endings_.wait_for(n).back(), 1000);
  }
}

TEST_F(WsAbuse, ATruncatedFrameThenEndOfStreamEndsWith1006) {
  {
    RawWs ws(server_->port());
    ASSERT_NE(ws.handshake("/echo").find(" 101 "), std::string::npos);
    std::string f = client_frame(true, 0x1, "0123456789");
    ASSERT_TRUE(ws.send(f.substr(0, f.size() - 4)));  // 4 payload bytes short
    ASSERT_TRUE(ws.socket().shutdown(SHUT_WR));
    EXPECT_TRUE(ws.sees_end_of_stream());
  }
  auto codes = endings_.wait_for(1);
  ASSERT_EQ(codes.size(), 1u);
  EXPECT_EQ(codes[0], close_code::kAbnormal);
  expect_still_serving();
}

TEST_F(WsAbuse, ViolationsArriveWithLotsOfUnreadDataBehindThem) {
  // The server fails the connection while megabytes are still on their way: its close frame
  // must still be readable (no reset destroys it), and the next client is served.
  RawWs ws(server_->port());
  ASSERT_NE(ws.handshake("/echo").find(" 101 "), std::string::npos);
  std::string junk = client_frame(true, 0x1, "\xFF") + std::string(1 << 20, 'j');
  std::thread writer([&] { (void)ws.send(junk); });
  test::RawFrame f = ws.read_frame();
  writer.join();
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.close_code(), 1007);
  expect_still_serving();
}
}  // namespace
}  // namespace lionet::websocket
