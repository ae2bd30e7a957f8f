// tests/websocket/frame_test.cc: the IO-free parts of websocket/: header parsing and writing,
// masking, UTF-8 validation, the frame reader's message assembly and every close code it
// assigns, and the handshake keys (RFC 6455's own example).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lionet/websocket/detail/frame_reader.h"
#include "lionet/websocket/frame.h"
#include "lionet/websocket/handshake.h"
#include "lionet/websocket/utf8.h"

namespace lionet::websocket {
namespace {
using detail::FrameReader;
using detail::ReadEvent;

constexpr uint32_t kKey = 0x11223344;

// One frame as a client (masked) or server (unmasked) would send it.
std::string frame(bool fin, uint8_t opcode, std::string_view payload, bool masked = true, uint8_t rsv = 0) {
  uint8_t h[kMaxHeaderSize];
  size_t n = write_frame_header(h, fin, static_cast<Opcode>(opcode), payload.size(), masked, kKey);
  h[0] |= rsv;
  std::string out(reinterpret_cast<char*>(h), n);
  std::string p(payload);
  if (masked) apply_mask(p.data(), p.size(), kKey, 0);
  return out + p;
}

// Feeds `wire` to a server-side reader `step` bytes at a time; returns the first event that is
// not kNeedMore (or kNeedMore if the bytes ran out) and the message.
ReadEvent feed(FrameReader& r, const std::string& wire, size_t step, Message& msg, size_t* pos_out = nullptr) {
  size_t pos = 0, avail = std::min(step, wire.size());
  for (int guard = 0; guard < 100000; ++guard) {
    size_t used = 0;
    ReadEvent ev = r.next(wire.data() + pos, avail - pos, &used, msg);
    pos += used;
    if (ev.kind != ReadEvent::kNeedMore) {
      if (pos_out) *pos_out = pos;
      return ev;
    }
    if (avail == wire.size()) break;
    avail = std::min(wire.size(), avail + step);
  }
  if (pos_out) *pos_out = pos;
  return {};
}

TEST(WsFrame, HeaderRoundTripsForEveryLengthForm) {
  for (uint64_t len : {0ull, 1ull, 125ull, 126ull, 65535ull, 65536ull, (1ull << 40)}) {
    for (bool masked : {false, true}) {
      uint8_t h[kMaxHeaderSize];
      size_t n = write_frame_header(h, true, Opcode::kBinary, len, masked, kKey);
      FrameHeader fh;
      auto o = parse_frame_header(h, n, {masked, UINT64_MAX}, &fh);
      ASSERT_EQ(o.status, ParseOutcome::kOk) << len;
      EXPECT_EQ(fh.payload_size, len);
      EXPECT_EQ(fh.header_size, n);
      EXPECT_EQ(fh.masked, masked);
      if (masked) {
        EXPECT_EQ(fh.mask_key, kKey);
      }
      EXPECT_EQ(parse_frame_header(h, n - 1, {masked, UINT64_MAX}, &fh).status, ParseOutcome::kNeedMore);
    }
  }
}

TEST(WsFrame, HeaderRulesGiveTheirCloseCodes) {
  FrameHeader fh;
  auto code = [&](std::string_view bytes, bool expect_masked = true, uint64_t max = UINT64_MAX) {
    auto o =
        parse_frame_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), {expect_masked, max}, &fh);
    return o.status == ParseOutcome::kError ? o.close_code : 0;
  };
  EXPECT_EQ(code(std::string("\x81\x02", 2)), 1002);  // unmasked, at a server
  EXPECT_EQ(code(std::string("\x81\x82", 2), false), 1002);  // masked, at a client
  EXPECT_EQ(code(std::string("\xC1\x80", 2)), 1002);  // RSV1
  EXPECT_EQ(code(std::string("\xA1\x80", 2)), 1002);  // RSV2
  EXPECT_EQ(code(std::string("\x91\x80", 2)), 1002);  // RSV3
  for (char op : {'\x83', '\x87', '\x8B', '\x8F'}) EXPECT_EQ(code(std::string{op, '\x80'}), 1002);
  EXPECT_EQ(code(std::string("\x09\x80", 2)), 1002);  // ping without FIN
  EXPECT_EQ(code(std::string("\x89\xFE\x00\x7E", 4)), 1002);  // 126-byte ping
  EXPECT_EQ(code(std::string("\x82\xFF\x80\x00\x00\x00\x00\x00\x00\x00", 10)), 1002);  // 2^63
  EXPECT_EQ(code(std::string("\x82\xFE\x04\x00", 4), true, 1023), 1009);  // 1024 > 1023
  EXPECT_EQ(code(std::string("\x82\xFE\x04\x00", 4), true, 1024), 0);
}

TEST(WsFrame, MaskingInPiecesEqualsMaskingWhole) {
  std::string s(1000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 31);
  std::string whole = s, pieces = s, copied(s.size(), '\0');
  apply_mask(whole.data(), whole.size(), kKey, 0);
  size_t off = 0;
  for (size_t k : {1u, 3u, 7u, 8u, 13u, 200u, 768u}) {
    apply_mask(pieces.data() + off, k, kKey, off);
    off += k;
  }
  copy_masked(copied.data(), s.data(), s.size(), kKey, 0);
  EXPECT_EQ(whole, pieces);
  EXPECT_EQ(whole, copied);
  uint8_t k[4];
  std::memcpy(k, &kKey, 4);
  for (size_t i = 0; i < s.size(); ++i)
    ASSERT_EQ(static_cast<uint8_t>(whole[i]), static_cast<uint8_t>(s[i] ^ k[i % 4]));
}

TEST(WsUtf8, AcceptsWellFormedAndRejectsTheRest) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ascii, long enough for the fast path"));
  EXPECT_TRUE(valid_utf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(valid_utf8("\xC0\x80"));  // overlong NUL
  EXPECT_FALSE(valid_utf8("\xE0\x80\xAF"));  // overlong '/'
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));  // surrogate U+D800
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(valid_utf8("\xF5\x80\x80\x80"));
  EXPECT_FALSE(valid_utf8("\x80"));
  EXPECT_FALSE(valid_utf8("\xE2\x82"));  // truncated
}

TEST(WsUtf8, IncrementalAnswersMatchWholeAtEverySplit) {
  const std::string s =
      "ab\xF0\x9F\x98\x80"
      "cd\xE2\x82\xAC"
      "e\xC3\xA9";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    Utf8Validator v;
    ASSERT_TRUE(v.feed(s.data(), cut));
    ASSERT_TRUE(v.feed(s.data() + cut, s.size() - cut));
    EXPECT_TRUE(v.complete()) << cut;
  }
  Utf8Validator v;
  EXPECT_TRUE(v.feed("\xED"));
  EXPECT_FALSE(v.complete());
  EXPECT_FALSE(v.feed("\xA0\x80"));  // a surrogate, seen only once the second piece arrives
  EXPECT_TRUE(v.failed());
}

TEST(WsReader, AssemblesFragmentsWithControlFramesBetweenAtAnyReadSize) {
  const std::string wire = frame(false, 0x1, "Hel") + frame(true, 0x9, "p1") + frame(false, 0x0, "lo, ") +
                           frame(true, 0xA, "") + frame(true, 0x0, "w\xC3\xB6rld") +
                           frame(true, 0x2, std::string(300, 'x'));
  for (size_t step : {1u, 2u, 5u, 64u, 4096u}) {
    FrameReader r(true, 1 << 20, 1 << 20);
    Message msg;
    // The reader consumes nothing of an incomplete header: like a socket's buffer, the window
    // of unread bytes grows by `step` whenever it needs more.
    size_t pos = 0, used = 0, avail = std::min(wire.size(), step);
    std::vector<std::string> seen;
    for (int guard = 0; guard < 10000; ++guard) {
      ReadEvent ev = r.next(wire.data() + pos, avail - pos, &used, msg);
      pos += used;
      if (ev.kind == ReadEvent::kNeedMore) avail = std::min(wire.size(), avail + step);
      if (ev.kind == ReadEvent::kPing) seen.push_back("ping:" + std::string(ev.text));
      if (ev.kind == ReadEvent::kPong) seen.push_back("pong");
      if (ev.kind == ReadEvent::kMessage) seen.push_back((msg.is_text() ? "text:" : "binary:") + msg.data);
      if (ev.kind == ReadEvent::kFail) FAIL() << ev.text;
      if (ev.kind == ReadEvent::kNeedMore && pos == wire.size()) break;
      if (ev.kind != ReadEvent::kNeedMore && pos == avail && avail < wire.size())
        avail = std::min(wire.size(), avail + step);
    }
    ASSERT_EQ(seen.size(), 4u) << step;
    EXPECT_EQ(seen[0], "ping:p1");
    EXPECT_EQ(seen[1], "pong");
    EXPECT_EQ(seen[2], "text:Hello, w\xC3\xB6rld");
    EXPECT_EQ(seen[3], "binary:" + std::string(300, 'x'));
  }
}

TEST(WsReader, DirectReadsIntoTheMessageGiveTheSameBytes) {
  std::string payload(200000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  const std::string wire = frame(true, 0x1, payload);
  FrameReader r(true, 1 << 20, 1 << 20);
  Message msg;
  size_t used = 0;
  ReadEvent ev = r.next(wire.data(), 14, &used, msg);  // the header only
  ASSERT_EQ(ev.kind, ReadEvent::kNeedMore);
  size_t pos = used;
  for (int guard = 0; guard < 1000 && pos < wire.size(); ++guard) {
    size_t room = 0;
    char* p = r.direct_target(msg, &room);
    ASSERT_NE(p, nullptr);
    ASSERT_LE(room, 64u * 1024u + msg.data.size());
    size_t k = std::min(room, wire.size() - pos);
    std::memcpy(p, wire.data() + pos, k);
    r.direct_commit(msg, k);
    pos += k;
  }
  ev = r.next(nullptr, 0, &used, msg);
  ASSERT_EQ(ev.kind, ReadEvent::kMessage);
  EXPECT_EQ(msg.data, payload);
}

struct Bad {
  const char* name;
  std::string wire;
  uint16_t code;
};

TEST(WsReader, EveryRuleAcrossFramesGivesItsCloseCode) {
  const Bad cases[] = {
      {"continuation with no message", frame(true, 0x0, "x"), 1002},
      {"new message inside a fragmented one", frame(false, 0x1, "a") + frame(true, 0x1, "b"), 1002},
      {"invalid UTF-8 split across fragments", frame(false, 0x1, "ok\xED") + frame(true, 0x0, "\xA0\x80"), 1007},
      {"text ending inside a character", frame(true, 0x1, "\xE2\x82"), 1007},
      {"message over the limit", frame(false, 0x2, std::string(600, 'a')) + frame(true, 0x0, std::string(600, 'b')),
       1009},
      {"close with a 1-byte payload", frame(true, 0x8, "\x03"), 1002},
      {"close with code 1005", frame(true, 0x8, "\x03\xED"), 1002},
      {"close with code 999", frame(true, 0x8, "\x03\xE7"), 1002},
      {"close with code 2000", frame(true, 0x8, "\x07\xD0"), 1002},
      {"close reason not UTF-8", frame(true, 0x8, std::string("\x03\xE8\xC0\x80", 4)), 1007},
      {"unmasked frame", frame(true, 0x1, "x", false), 1002},
      {"RSV bits", frame(true, 0x1, "x", true, 0x40), 1002},
  };
  for (const Bad& b : cases) {
    FrameReader r(true, 1 << 20, 1000);
    Message msg;
    ReadEvent ev = feed(r, b.wire, 3, msg);
    EXPECT_EQ(ev.kind, ReadEvent::kFail) << b.name;
    EXPECT_EQ(ev.code, b.code) << b.name << ": " << ev.text;
    size_t used = 0;
    EXPECT_EQ(r.next("", 0, &used, msg).kind, ReadEvent::kFail) << b.name << ": the failure sticks";
  }
}

TEST(WsReader, ClosePayloadsThatAreValid) {
  {
    FrameReader r(true, 1 << 20, 1 << 20);
    Message msg;
    ReadEvent ev = feed(r, frame(true, 0x8, ""), 100, msg);
    EXPECT_EQ(ev.kind, ReadEvent::kClose);
    EXPECT_EQ(ev.code, 1005);
  }
  {
    FrameReader r(true, 1 << 20, 1 << 20);
    Message msg;
    ReadEvent ev = feed(r, frame(true, 0x8, "\x0F\xA1see you"), 100, msg);  // 4001
    EXPECT_EQ(ev.kind, ReadEvent::kClose);
    EXPECT_EQ(ev.code, 4001);
    EXPECT_EQ(ev.text, "see you");
  }
}

TEST(WsReader, AClientRejectsMaskedFramesAndAcceptsPlainOnes) {
  FrameReader r(false, 1 << 20, 1 << 20);
  Message msg;
  EXPECT_EQ(feed(r, frame(true, 0x1, "hi", false), 100, msg).kind, ReadEvent::kMessage);
  EXPECT_EQ(msg.data, "hi");
  ReadEvent ev = feed(r, frame(true, 0x1, "hi", true), 100, msg);
  EXPECT_EQ(ev.kind, ReadEvent::kFail);
  EXPECT_EQ(ev.code, 1002);
}

TEST(WsHandshake, AcceptKeyIsRfc6455sExample) {
  EXPECT_EQ(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_TRUE(valid_client_key("dGhlIHNhbXBsZSBub25jZQ=="));
  EXPECT_FALSE(valid_client_key("dGhlIHNhbXBsZSBub25jZQ="));  // 23 characters
  EXPECT_FALSE(valid_client_key("dGhlIHNhbXBsZSBub25jZR=="));  // not 16 bytes exactly (stray bits)
  EXPECT_FALSE(valid_client_key("dGhlIHNhbXBsZSBub25j!Q=="));
  EXPECT_FALSE(valid_client_key("YWJj"));  // 3 bytes
  std::string k = make_client_key();
  EXPECT_TRUE(valid_client_key(k)) << k;
  EXPECT_NE(make_client_key(), k);
}

TEST(WsHandshake, SubprotocolIsTheServersFirstThatWasOffered) {
  std::vector<std::string> ours = {"chat.v2", "chat"};
  EXPECT_EQ(choose_subprotocol(ours, {"chat, other"}), "chat");
  EXPECT_EQ(choose_subprotocol(ours, {"x", " chat.v2 ,chat"}), "chat.v2");
  EXPECT_EQ(choose_subprotocol(ours, {"CHAT"}), "");
  EXPECT_EQ(choose_subprotocol(ours, {}), "");
}
}  // namespace
}  // namespace lionet::websocket
