// tests/websocket/deflate_test.cc: permessage-deflate (RFC 7692): the negotiation both ways,
// the codec (RFC 7692's own examples, context takeover, the cap on inflated size), the frame
// reader's RSV1 rules and inflation, LioNet client and server compressing to each other with
// each parameter, and a deflate bomb thrown at a server that keeps serving.
#include <gtest/gtest.h>

#include <string>

#include "lionet/http/router.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/deflate.h"
#include "lionet/websocket/detail/frame_reader.h"
#include "lionet/websocket/server.h"
#include "ws_test_util.h"

namespace lionet::websocket {
namespace {
using http::test::TestServer;
using namespace std::chrono_literals;
using test::client_frame;
using test::Endings;
using test::RawWs;

DeflateOptions on() {
  DeflateOptions o;
  o.enabled = true;
  return o;
}

std::string inflate_all(std::string_view compressed, int window = 15, uint64_t limit = 1 << 30) {
  Inflater inf(window, false);
  std::string out;
  size_t filled = 0;
  EXPECT_EQ(inf.feed(compressed.data(), compressed.size(), out, &filled, limit), Inflater::Status::kOk);
  EXPECT_EQ(inf.finish(out, &filled, limit), Inflater::Status::kOk);
  out.resize(filled);
  return out;
}

// ---- negotiation ----

struct ServerCase {
  const char* offer;
  DeflateOptions ours;
  bool agreed;
  const char* response;  // when agreed
  DeflateParams params;  // when agreed
};

TEST(WsDeflateNegotiation, TheServerTakesTheFirstAcceptableOfferAndAnswersWithTheAgreedParameters) {
  DeflateOptions small_windows = on();
  small_windows.server_max_window_bits = 10;
  small_windows.client_max_window_bits = 11;
  DeflateOptions no_takeover = on();
  no_takeover.server_no_context_takeover = true;
  no_takeover.client_no_context_takeover = true;
  DeflateOptions asks_eight = on();
  asks_eight.client_max_window_bits = 8;
  const ServerCase cases[] = {
      {"permessage-deflate", on(), true, "permessage-deflate", {}},
      {"permessage-deflate", DeflateOptions{}, false, "", {}},  // not enabled on our side
      {"x-webkit-deflate-frame", on(), false, "", {}},
      {"permessage-deflate; client_max_window_bits", on(), true, "permessage-deflate", {}},
      {"permessage-deflate; client_max_window_bits",
       small_windows,
       true,
       "permessage-deflate; server_max_window_bits=10; client_max_window_bits=11",
       {false, false, 10, 11}},
      // The client did not offer client_max_window_bits: it cannot be limited, 15 it is.
      {"permessage-deflate",
       small_windows,
       true,
       "permessage-deflate; server_max_window_bits=10",
       {false, false, 10, 15}},
      {"permessage-deflate; client_max_window_bits=12",
       on(),
       true,
       "permessage-deflate; client_max_window_bits=12",
       {false, false, 15, 12}},
      {"permessage-deflate; server_max_window_bits=12",
       small_windows,
       true,
       "permessage-deflate; server_max_window_bits=10",
       {false, false, 10, 15}},
      {"permessage-deflate; server_max_window_bits=9",
       on(),
       true,
       "permessage-deflate; server_max_window_bits=9",
       {false, false, 9, 15}},
      // 8 bits for our window: zlib cannot; the next offer is taken instead.
      {"permessage-deflate; server_max_window_bits=8, permessage-deflate", on(), true, "permessage-deflate", {}},
      {"permessage-deflate; client_max_window_bits",
       asks_eight,
       true,
       "permessage-deflate; client_max_window_bits=9",
       {false, false, 15, 9}},
      {"permessage-deflate; server_no_context_takeover; client_no_context_takeover",
       on(),
       true,
       "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
       {true, true, 15, 15}},
      {"permessage-deflate",
       no_takeover,
       true,
       "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
       {true, true, 15, 15}},
      {"permessage-deflate; server_max_window_bits=\"11\"",
       on(),
       true,
       "permessage-deflate; server_max_window_bits=11",
       {false, false, 11, 15}},
      // Bad offers are skipped, not fatal.
      {"permessage-deflate; foo", on(), false, "", {}},
      {"permessage-deflate; server_max_window_bits=16", on(), false, "", {}},
      {"permessage-deflate; server_max_window_bits", on(), false, "", {}},
      {"permessage-deflate; server_no_context_takeover=1", on(), false, "", {}},
      {"permessage-deflate; client_no_context_takeover; client_no_context_takeover", on(), false, "", {}},
      {"permessage-deflate; foo, permessage-deflate; client_no_context_takeover",
       on(),
       true,
       "permessage-deflate; client_no_context_takeover",
       {false, true, 15, 15}},
  };
  for (const ServerCase& c : cases) {
    SCOPED_TRACE(c.offer);
    std::string response;
    auto p = negotiate_deflate({c.offer}, c.ours, &response);
    ASSERT_EQ(p.has_value(), c.agreed);
    if (!p) continue;
    EXPECT_EQ(response, c.response);
    EXPECT_EQ(p->server_no_context_takeover, c.params.server_no_context_takeover);
    EXPECT_EQ(p->client_no_context_takeover, c.params.client_no_context_takeover);
    EXPECT_EQ(p->server_max_window_bits, c.params.server_max_window_bits);
    EXPECT_EQ(p->client_max_window_bits, c.params.client_max_window_bits);
  }
  // Offers spread over two header fields count in order.
  std::string response;
  auto p = negotiate_deflate({"foo", "permessage-deflate; server_no_context_takeover"}, on(), &response);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->server_no_context_takeover);
}

TEST(WsDeflateNegotiation, TheClientOffersItsOptionsAndChecksTheAnswer) {
  EXPECT_EQ(deflate_offer(on()), "permessage-deflate; client_max_window_bits");
  DeflateOptions o = on();
  o.server_max_window_bits = 10;
  o.client_max_window_bits = 12;
  o.server_no_context_takeover = true;
  EXPECT_EQ(deflate_offer(o),
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12");

  const char* why = "";
  auto a = accept_deflate_response({}, on(), &why);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->accepted);
  a = accept_deflate_response({"permessage-deflate"}, on(), &why);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->accepted);
  EXPECT_EQ(a->params.server_max_window_bits, 15);
  EXPECT_EQ(a->params.client_max_window_bits, 15);
  a = accept_deflate_response({"permessage-deflate; client_max_window_bits=10; client_no_context_takeover"}, on(),
                              &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->params.client_max_window_bits, 10);
  EXPECT_TRUE(a->params.client_no_context_takeover);
  a = accept_deflate_response({"permessage-deflate; server_max_window_bits=9; server_no_context_takeover"}, o, &why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->params.server_max_window_bits, 9);

  // Answers a client must refuse, each with its reason.
  struct Bad {
    std::vector<std::string_view> fields;
    DeflateOptions ours;
  };
  const Bad bad[] = {
      {{"permessage-deflate"}, DeflateOptions{}},  // not offered
      {{"x-other"}, on()},  // not offered
      {{"permessage-deflate", "permessage-deflate"}, on()},  // twice
      {{"permessage-deflate; client_max_window_bits"}, on()},  // needs a value in an answer
      {{"permessage-deflate; client_max_window_bits=8"}, on()},  // zlib cannot
      {{"permessage-deflate; server_max_window_bits=12"}, o},  // larger than asked (10)
      {{"permessage-deflate"}, o},  // ignored our window and takeover
      {{"permessage-deflate; client_max_window_bits=13"}, o},  // above the 12 offered
      {{"permessage-deflate; mystery_param"}, on()},
  };
  for (const Bad& b : bad) {
    why = "";
    EXPECT_FALSE(accept_deflate_response(b.fields, b.ours, &why)) << b.fields[0];
    EXPECT_STRNE(why, "");
  }
}

// ---- the codec ----

TEST(WsDeflateCodec, Rfc7692ExamplesInflateAndOurOutputRoundTrips) {
  // RFC 7692 7.2.3.1: "Hello" compressed; 7.2.3.2: the second "Hello" with the context kept.
  EXPECT_EQ(inflate_all(std::string("\xf2\x48\xcd\xc9\xc9\x07\x00", 7)), "Hello");
  {
    Inflater inf(15, false);
    std::string out;
    size_t filled = 0;
    const std::string first("\xf2\x48\xcd\xc9\xc9\x07\x00", 7), second("\xf2\x00\x11\x00\x00", 5);
    ASSERT_EQ(inf.feed(first.data(), first.size(), out, &filled, 100), Inflater::Status::kOk);
    ASSERT_EQ(inf.finish(out, &filled, 100), Inflater::Status::kOk);
    ASSERT_EQ(inf.feed(second.data(), second.size(), out, &filled, 100), Inflater::Status::kOk);
    ASSERT_EQ(inf.finish(out, &filled, 100), Inflater::Status::kOk);
    EXPECT_EQ(out.substr(0, filled), "HelloHello");
  }
  // 7.2.3.6: an empty message may be a single 0x00 byte.
  EXPECT_EQ(inflate_all(std::string("\x00", 1)), "");
  for (int window : {9, 12, 15}) {
    Deflater d(window, 6, false);
    ASSERT_TRUE(d.ok());
    std::string z;
    const std::string text = "Hello, " + std::string(5000, 'w') + http::test::pattern(70000, 3);
    ASSERT_TRUE(d.compress(text, &z));
    EXPECT_LT(z.size(), text.size());
    EXPECT_NE(z.substr(z.size() - 4), std::string("\x00\x00\xff\xff", 4)) << "the sync-flush tail is removed";
    EXPECT_TRUE(inflate_all(z, window) == text) << window;
    ASSERT_TRUE(d.compress("", &z));
    EXPECT_EQ(inflate_all(z, window), "");
    // Two empty messages in a row on one stream (zlib emits nothing for the second flush).
    Inflater inf(window, false);
    std::string out;
    size_t filled = 0;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(d.compress(i == 2 ? "after" : "", &z));
      ASSERT_EQ(inf.feed(z.data(), z.size(), out, &filled, 100), Inflater::Status::kOk) << i;
      ASSERT_EQ(inf.finish(out, &filled, 100), Inflater::Status::kOk) << i;
    }
    EXPECT_EQ(out.substr(0, filled), "after");
  }
}

TEST(WsDeflateCodec, ContextTakeoverShrinksRepeatsAndNoContextTakeoverDoesNot) {
  const std::string msg = "{\"topic\":\"orders\",\"partition\":3,\"offset\":12345,\"value\":\"hello world\"}";
  Deflater keep(15, 6, false), reset(15, 6, true);
  std::string k1, k2, r1, r2;
  ASSERT_TRUE(keep.compress(msg, &k1));
  ASSERT_TRUE(keep.compress(msg, &k2));
  ASSERT_TRUE(reset.compress(msg, &r1));
  ASSERT_TRUE(reset.compress(msg, &r2));
  EXPECT_LT(k2.size(), k1.size() / 2) << "the second copy refers back to the first";
  EXPECT_EQ(r1, r2) << "each message compressed alone";
  EXPECT_EQ(inflate_all(r2), msg);  // inflatable by a fresh stream
}

TEST(WsDeflateCodec, InflationStopsAtTheCapWithoutBufferingTheBomb) {
  Deflater d(15, 9, false);
  std::string bomb;
  ASSERT_TRUE(d.compress(std::string(64u << 20, '\0'), &bomb));  // 64 MiB of zeros
  EXPECT_LT(bomb.size(), 128u * 1024) << "a bomb is small on the wire";
  Inflater inf(15, false);
  std::string out;
  size_t filled = 0;
  const uint64_t limit = 1u << 20;
  EXPECT_EQ(inf.feed(bomb.data(), bomb.size(), out, &filled, limit), Inflater::Status::kTooBig);
  EXPECT_LE(out.capacity(), limit) << "never more than the cap allocated";
  EXPECT_LE(filled, limit);
  // Exactly at the limit is fine.
  Deflater d2(15, 6, false);
  std::string exact;
  ASSERT_TRUE(d2.compress(std::string(limit, 'x'), &exact));
  Inflater inf2(15, false);
  out.clear();
  filled = 0;
  EXPECT_EQ(inf2.feed(exact.data(), exact.size(), out, &filled, limit), Inflater::Status::kOk);
  EXPECT_EQ(inf2.finish(out, &filled, limit), Inflater::Status::kOk);
  EXPECT_EQ(filled, limit);
  // Not deflate at all.
  Inflater inf3(15, false);
  filled = 0;
  EXPECT_EQ(inf3.feed("\xff\xff\xff\xff", 4, out, &filled, limit), Inflater::Status::kBadData);
}

// ---- the frame reader ----

std::string compressed_frame(bool fin, uint8_t opcode, std::string_view compressed, uint8_t rsv) {
  return client_frame(fin, opcode, compressed, true, rsv);
}

std::string compress(std::string_view s) {
  Deflater d(15, 6, true);
  std::string z;
  EXPECT_TRUE(d.compress(s, &z));
  return z;
}

detail::ReadEvent read(const std::string& wire, Message& m, bool deflate = true, uint64_t limit = 1 << 20) {
  detail::FrameReader r(/*server=*/true, limit, limit);
  if (deflate) {
    EXPECT_TRUE(r.enable_deflate(15, false));
  }
  size_t used = 0;
  return r.next(wire.data(), wire.size(), &used, m);
}

TEST(WsDeflateReader, CompressedMessagesInflateAndRsv1BreaksTheRulesElsewhere) {
  const std::string text = "h\xC3\xA9llo " + std::string(3000, 'z');
  const std::string z = compress(text);
  Message m;
  auto ev = read(compressed_frame(true, 0x1, z, 0x40), m);
  ASSERT_EQ(ev.kind, detail::ReadEvent::kMessage) << ev.text;
  EXPECT_EQ(m.data, text);
  // Fragmented: RSV1 on the first frame only, with a ping in between.
  const std::string wire = compressed_frame(false, 0x1, z.substr(0, 5), 0x40) + client_frame(true, 0x9, "p") +
                           compressed_frame(false, 0x0, z.substr(5, 7), 0) +
                           compressed_frame(true, 0x0, z.substr(12), 0);
  detail::FrameReader r(true, 1 << 20, 1 << 20);
  ASSERT_TRUE(r.enable_deflate(15, false));
  size_t used = 0, pos = 0;
  ev = r.next(wire.data(), wire.size(), &used, m);
  EXPECT_EQ(ev.kind, detail::ReadEvent::kPing);
  pos += used;
  ev = r.next(wire.data() + pos, wire.size() - pos, &used, m);
  ASSERT_EQ(ev.kind, detail::ReadEvent::kMessage) << ev.text;
  EXPECT_EQ(m.data, text);
  // An uncompressed message is still allowed when deflate was agreed.
  ev = read(client_frame(true, 0x1, "plain"), m);
  ASSERT_EQ(ev.kind, detail::ReadEvent::kMessage);
  EXPECT_EQ(m.data, "plain");

  struct Bad {
    const char* name;
    std::string wire;
    bool deflate;
    uint16_t code;
  };
  std::string bomb;
  {
    Deflater d(15, 9, false);
    ASSERT_TRUE(d.compress(std::string(8u << 20, 'a'), &bomb));
  }
  const Bad bad[] = {
      {"RSV1 without permessage-deflate", compressed_frame(true, 0x1, z, 0x40), false, 1002},
      {"RSV1 on a continuation",
       compressed_frame(false, 0x1, z.substr(0, 5), 0x40) + compressed_frame(true, 0x0, z.substr(5), 0x40), true, 1002},
      {"RSV1 on a ping", client_frame(true, 0x9, "p", true, 0x40), true, 1002},
      {"RSV2 with permessage-deflate", client_frame(true, 0x1, "x", true, 0x20), true, 1002},
      {"bytes that do not inflate", compressed_frame(true, 0x2, "\xff\xff\xff\xff", 0x40), true, 1007},
      {"compressed text that is not UTF-8", compressed_frame(true, 0x1, compress("ok \xC0\xAF"), 0x40), true, 1007},
      {"8 MiB bomb against a 1 MiB limit", compressed_frame(true, 0x2, bomb, 0x40), true, 1009},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    Message mm;
    ev = read(b.wire, mm, b.deflate);
    EXPECT_EQ(ev.kind, detail::ReadEvent::kFail);
    EXPECT_EQ(ev.code, b.code) << ev.text;
    EXPECT_LE(mm.data.capacity(), (1u << 20) + 64 * 1024) << "no more than the limit buffered";
  }
}

// ---- over sockets ----

class WsDeflate : public ::testing::Test {
 protected:
  void start(DeflateOptions server_deflate) {
    Options o;
    o.deflate = server_deflate;
    o.max_message_size = 4u << 20;
    router_.get("/echo", accept(
                             [this](Socket& ws) {
                               agreed_ = ws.deflate().has_value();
                               Message m;
                               while (ws.receive(m))
                                 if (!ws.send(m)) break;
                               endings_.add(ws.close_code(), ws.close_reason());
                             },
                             o));
    server_ = std::make_unique<TestServer>(router_.handler());
    server_->start();
  }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(server_->port()) + "/echo"; }

  http::Router router_;
  Endings endings_;
  std::atomic<bool> agreed_{false};
  std::unique_ptr<TestServer> server_;
};

void round_trips(Socket& ws) {
  const std::string big = http::test::pattern(3u << 20, 5);  // compressible, under the 4 MiB limit
  const Message sent[] = {
      Message::text("hello"), Message::text("hello"), Message::binary(std::string("\0\1\2", 3)),
      Message::text(""),      Message::binary(""),    Message::text("\xE2\x82\xAC" + std::string(1000, 'e')),
      Message::binary(big),   Message::binary(big)};
  for (const Message& m : sent) {
    ASSERT_TRUE(ws.send(m));
    auto got = ws.receive();
    ASSERT_TRUE(got) << ws.close_code() << " " << ws.close_reason() << " at message of size " << m.data.size() << " #"
                     << (&m - sent);
    EXPECT_EQ(got->type, m.type);
    EXPECT_TRUE(got->data == m.data) << "size " << got->data.size() << " vs " << m.data.size();
  }
}

TEST_F(WsDeflate, ClientAndServerCompressBothWaysWithEachParameter) {
  DeflateOptions server = on();
  server.server_max_window_bits = 12;  // the server limits itself
  start(server);
  struct Case {
    const char* name;
    DeflateOptions client;
    int server_bits, client_bits;
    bool server_nct, client_nct;
  };
  DeflateOptions small = on();
  small.client_max_window_bits = 9;
  small.server_max_window_bits = 10;
  DeflateOptions nct = on();
  nct.server_no_context_takeover = true;
  nct.client_no_context_takeover = true;
  const Case cases[] = {
      {"defaults", on(), 12, 15, false, false},
      {"small windows", small, 10, 9, false, false},
      {"no context takeover", nct, 12, 15, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    server_->run([&] {
      ClientOptions o;
      o.deflate = c.client;
      o.send_frame_size = 4096;  // compressed messages go out fragmented
      o.max_message_size = 4u << 20;
      auto ws = connect(url(), o);
      ASSERT_TRUE(ws) << ws.error().message();
      ASSERT_TRUE((*ws)->deflate());
      EXPECT_EQ((*ws)->deflate()->server_max_window_bits, c.server_bits);
      EXPECT_EQ((*ws)->deflate()->client_max_window_bits, c.client_bits);
      EXPECT_EQ((*ws)->deflate()->server_no_context_takeover, c.server_nct);
      EXPECT_EQ((*ws)->deflate()->client_no_context_takeover, c.client_nct);
      round_trips(**ws);
      ASSERT_TRUE((*ws)->close(4200, "deflate done"));
    });
    EXPECT_TRUE(agreed_.load());
  }
  auto codes = endings_.wait_for(3);
  ASSERT_EQ(codes.size(), 3u);
  for (uint16_t code : codes) EXPECT_EQ(code, 4200);
}

TEST_F(WsDeflate, NotEnabledOnOneSideMeansUncompressed) {
  start(DeflateOptions{});  // the server does not accept it
  server_->run([&] {
    ClientOptions o;
    o.deflate = on();
    o.max_message_size = 4u << 20;
    auto ws = connect(url(), o);
    ASSERT_TRUE(ws) << ws.error().message();
    EXPECT_FALSE((*ws)->deflate());
    round_trips(**ws);
    (void)(*ws)->close();
  });
  EXPECT_FALSE(agreed_.load());
}

TEST_F(WsDeflate, ADeflateBombIsClosedWith1009AndTheServerKeepsServing) {
  start(on());
  std::string bomb;
  {
    Deflater d(15, 9, false);
    ASSERT_TRUE(d.compress(std::string(64u << 20, '\0'), &bomb));  // 64 MiB against a 4 MiB limit
  }
  ASSERT_LT(bomb.size(), 512u * 1024);
  {
    RawWs ws(server_->port());
    const std::string head = ws.handshake("/echo", "", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    ASSERT_NE(head.find(" 101 "), std::string::npos) << head;
    ASSERT_NE(head.find("Sec-WebSocket-Extensions: permessage-deflate"), std::string::npos) << head;
    ASSERT_TRUE(ws.send(client_frame(true, 0x2, bomb, true, 0x40)));
    test::RawFrame f = ws.read_frame(10s);
    ASSERT_TRUE(f.ok) << "no close frame";
    EXPECT_EQ(f.opcode, 0x8);
    EXPECT_EQ(f.close_code(), 1009) << f.payload.substr(2);
    ASSERT_TRUE(ws.send(client_frame(true, 0x8, f.payload.substr(0, 2))));
    EXPECT_TRUE(ws.sees_end_of_stream());
  }
  EXPECT_EQ(endings_.wait_for(1).at(0), 1009);
  server_->run([&] {  // a well-behaved compressing client is still served
    ClientOptions o;
    o.deflate = on();
    auto ws = connect(url(), o);
    ASSERT_TRUE(ws) << ws.error().message();
    ASSERT_TRUE((*ws)->send_text("still here"));
    auto m = (*ws)->receive();
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "still here");
    (void)(*ws)->close();
  });
}
}  // namespace
}  // namespace lionet::websocket
