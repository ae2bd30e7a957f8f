// lionet/kafka/codec.h, record_batch.h, requests.h: primitive round trips (varint edges),
// malformed input refused with a reason and never read past the frame (every prefix of valid
// requests and batches, forged lengths and counts, a flipped byte under the CRC), RecordBatch
// encode -> decode round trips with keys, null keys, headers and timestamps.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/protocol.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/kafka/requests.h"
#include "lionet/storage/crc32c.h"

namespace lionet::kafka {
namespace {

TEST(KafkaCodec, PrimitivesRoundTrip) {
  std::string buf;
  Writer w(buf);
  const int32_t v32[] = {0, 1, -1, 63, -64, 64, 300, INT32_MAX, INT32_MIN};
  const int64_t v64[] = {0, -1, 1LL << 40, INT64_MAX, INT64_MIN};
  w.i8(-5);
  w.i16(-2);
  w.i32(0x12345678);
  w.i64(-9);
  for (int32_t v : v32) w.varint(v);
  for (int64_t v : v64) w.varlong(v);
  w.string("abc");
  w.nullable_string(std::nullopt);
  w.nullable_bytes(std::string_view("xy"));
  w.nullable_bytes(std::nullopt);
  Reader r(buf);
  EXPECT_EQ(r.i8(), -5);
  EXPECT_EQ(r.i16(), -2);
  EXPECT_EQ(r.i32(), 0x12345678);
  EXPECT_EQ(r.i64(), -9);
  for (int32_t v : v32) EXPECT_EQ(r.varint(), v);
  for (int64_t v : v64) EXPECT_EQ(r.varlong(), v);
  EXPECT_EQ(r.string(), "abc");
  EXPECT_FALSE(r.nullable_string());
  EXPECT_EQ(r.nullable_bytes().value(), "xy");
  EXPECT_FALSE(r.nullable_bytes());
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.at_end());
}

TEST(KafkaCodec, MalformedInputIsRefusedNotOverread) {
  {  // a string length past the frame
    std::string b =
        "\x00\x10"
        "abc";
    Reader r(b);
    r.string();
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.i32(), 0);  // sticky: later reads return 0
  }
  {  // a negative string length
    std::string b("\xff\xfe", 2);
    Reader r(b);
    r.string();
    EXPECT_FALSE(r.ok());
  }
  {  // a negative array count, and a count the frame cannot hold
    std::string b("\xff\xff\xff\xfe", 4);
    Reader r(b);
    r.array_count();
    EXPECT_FALSE(r.ok());
    std::string c(
        "\x7f\xff\xff\xff"
        "ab",
        6);
    Reader r2(c);
    r2.array_count();
    EXPECT_FALSE(r2.ok());
    std::string d("\xff\xff\xff\xff", 4);
    Reader r3(d);
    EXPECT_EQ(r3.array_count(true), -1);
    EXPECT_TRUE(r3.ok());
  }
  {  // a varint of 6 bytes
    std::string b("\xff\xff\xff\xff\xff\x01", 6);
    Reader r(b);
    r.varint();
    EXPECT_FALSE(r.ok());
  }
}

std::string batch_of(const std::vector<OutRecord>& recs) {
  std::string out;
  encode_batch(recs, out);
  return out;
}

TEST(KafkaRecordBatch, EncodeDecodeRoundTrip) {
  std::string hdr;  // one header a=1 and one with a null value
  Writer hw(hdr);
  hw.varint(2);
  hw.varint(1);
  hw.raw("a");
  hw.varint(1);
  hw.raw("1");
  hw.varint(1);
  hw.raw("b");
  hw.varint(-1);
  std::vector<OutRecord> recs = {
      {100, 1700000000000, "k1", "v1", {}}, {101, 1700000000005, "", "v2", hdr}, {102, 1699999999999, "k3", "", {}}};
  const std::string b = batch_of(recs);
  std::vector<DecodedBatch> out;
  const BatchError e = decode_batches(b, out);
  ASSERT_EQ(e.code, ErrorCode::kNone) << e.why;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].base_offset, 100);
  EXPECT_EQ(out[0].producer_id, -1);
  ASSERT_EQ(out[0].records.size(), 3u);
  EXPECT_EQ(out[0].records[0].key.value(), "k1");
  EXPECT_FALSE(out[0].records[1].key);  // empty key -> null
  EXPECT_EQ(out[0].records[1].header_count, 2u);
  EXPECT_EQ(out[0].records[1].headers, hdr);
  EXPECT_EQ(out[0].records[2].value.value(), "");
  EXPECT_EQ(out[0].records[0].timestamp, 1700000000000);
  EXPECT_EQ(out[0].records[2].timestamp, 1699999999999);
  EXPECT_EQ(out[0].max_timestamp, 1700000000005);
  // Two batches back to back decode as two.
  EXPECT_EQ(decode_batches(b + b, out).code, ErrorCode::kNone);
  EXPECT_EQ(out.size(), 2u);
}

TEST(KafkaRecordBatch, MalformedBatchesAreRefused) {
  const std::string b = batch_of({{0, 1, "k", "v", {}}, {1, 2, "k", "vv", {}}});
  std::vector<DecodedBatch> out;
  // Every proper prefix: refused, never read past.
  for (std::size_t n = 1; n < b.size(); ++n)
    EXPECT_EQ(decode_batches(std::string_view(b.data(), n), out).code, ErrorCode::kCorruptMessage) << n;
  // Every single flipped byte after the CRC field: the CRC catches it.
  for (std::size_t i = 21; i < b.size(); ++i) {
    std::string c = b;
    c[i] = static_cast<char>(c[i] ^ 0x40);
    EXPECT_NE(decode_batches(c, out).code, ErrorCode::kNone) << i;
  }
  {  // magic 1
    std::string c = b;
    c[16] = 1;
    EXPECT_EQ(decode_batches(c, out).code, ErrorCode::kCorruptMessage);
  }
  for (char codec : {'\x01', '\x05'}) {  // attributes say compressed, CRC recomputed
    std::string c = b;
    c[22] = codec;
    const uint32_t crc = storage::crc32c(0, c.data() + 21, c.size() - 21);
    std::string fix;
    Writer(fix).u32(crc);
    c.replace(17, 4, fix);
    // gzip over bytes that are not gzip: corrupt; codec 5: unsupported, not corrupt.
    EXPECT_EQ(decode_batches(c, out).code,
              codec == 1 ? ErrorCode::kCorruptMessage : ErrorCode::kUnsupportedCompressionType);
  }
  {  // a batch length of 2 GiB
    std::string c = b;
    c.replace(8, 4, std::string("\x7f\xff\xff\xff", 4));
    EXPECT_EQ(decode_batches(c, out).code, ErrorCode::kCorruptMessage);
  }
}

std::string frame(int16_t api, int16_t ver, int32_t corr, const std::string& body) {
  std::string f;
  Writer w(f);
  w.i16(api);
  w.i16(ver);
  w.i32(corr);
  w.nullable_string(std::string_view("test"));
  w.raw(body);
  return f;
}

TEST(KafkaRequests, DecodesEachApiAndRefusesEveryTruncation) {
  std::string produce;
  {
    Writer w(produce);
    w.nullable_string(std::nullopt);
    w.i16(-1);
    w.i32(5000);
    w.array_count(1);
    w.string("t");
    w.array_count(1);
    w.i32(0);
    w.nullable_bytes(std::string_view(batch_of({{0, 1, "k", "v", {}}})));
  }
  std::string fetch;
  {
    Writer w(fetch);
    w.i32(-1);
    w.i32(500);
    w.i32(1);
    w.i32(1 << 20);
    w.i8(0);
    w.i32(0);
    w.i32(-1);
    w.array_count(1);
    w.string("t");
    w.array_count(1);
    w.i32(0);
    w.i32(-1);  // current leader epoch (v9+)
    w.i64(7);
    w.i64(-1);
    w.i32(1 << 20);
    w.array_count(0);
    w.string("");
  }
  const std::string f_produce = frame(0, 7, 11, produce);
  const std::string f_fetch = frame(1, 11, 12, fetch);
  RequestHeader h;
  RequestBody body;
  ASSERT_FALSE(decode_request(f_produce, h, body));
  EXPECT_EQ(h.correlation_id, 11);
  auto& p = std::get<ProduceRequest>(body);
  EXPECT_EQ(p.acks, -1);
  ASSERT_EQ(p.topics.size(), 1u);
  EXPECT_EQ(p.topics[0].name, "t");
  ASSERT_FALSE(decode_request(f_fetch, h, body));
  auto& f = std::get<FetchRequest>(body);
  EXPECT_EQ(f.topics[0].partitions[0].fetch_offset, 7);
  EXPECT_EQ(f.max_wait_ms, 500);
  // Every truncation of either is a DecodeError, and so is a trailing byte.
  for (const std::string* fr : {&f_produce, &f_fetch}) {
    for (std::size_t n = 0; n < fr->size(); ++n) EXPECT_TRUE(decode_request(fr->substr(0, n), h, body)) << n;
    EXPECT_TRUE(decode_request(*fr + "x", h, body));
  }
  // An unsupported version is refused by decode_request but its header prefix is readable.
  EXPECT_TRUE(decode_request(frame(18, 3, 5, ""), h, body));
  EXPECT_FALSE(decode_header_prefix(frame(18, 3, 5, ""), h));
  EXPECT_EQ(h.correlation_id, 5);
  EXPECT_TRUE(supported(0, 3));
  EXPECT_FALSE(supported(0, 2));
  EXPECT_FALSE(supported(1, 12));
  EXPECT_TRUE(supported(18, 0));
}

// The group APIs at the lowest and highest version implemented: each field read where its
// version has it (Kafka's *Request.json), every truncation and a trailing byte refused.
TEST(KafkaRequests, DecodesTheGroupApisAtEachVersionBoundary) {
  struct Case {
    int16_t api, version;
    std::string body;
    std::function<void(const RequestBody&)> check;
  };
  std::vector<Case> cases;
  auto body = [](const std::function<void(Writer&)>& f) {
    std::string b;
    Writer w(b);
    f(w);
    return b;
  };
  cases.push_back({10, 0, body([](Writer& w) { w.string("g"); }), [](const RequestBody& b) {
                     EXPECT_EQ(std::get<FindCoordinatorRequest>(b).key, "g");
                     EXPECT_EQ(std::get<FindCoordinatorRequest>(b).key_type, 0);
                   }});
  cases.push_back({10, 2, body([](Writer& w) {
                     w.string("tx");
                     w.i8(1);
                   }),
                   [](const RequestBody& b) { EXPECT_EQ(std::get<FindCoordinatorRequest>(b).key_type, 1); }});
  for (int16_t v : {0, 5}) {
    cases.push_back({11, v, body([v](Writer& w) {
                       w.string("grp");
                       w.i32(10000);
                       if (v >= 1) w.i32(30000);
                       w.string("m-1");
                       if (v >= 5) w.nullable_string(std::string_view("inst"));
                       w.string("consumer");
                       w.array_count(2);
                       w.string("range");
                       w.bytes("md-r");
                       w.string("roundrobin");
                       w.bytes("");
                     }),
                     [v](const RequestBody& b) {
                       const auto& j = std::get<JoinGroupRequest>(b);
                       EXPECT_EQ(j.group_id, "grp");
                       EXPECT_EQ(j.session_timeout_ms, 10000);
                       EXPECT_EQ(j.rebalance_timeout_ms, v >= 1 ? 30000 : 10000);  // v0: the session timeout
                       EXPECT_EQ(j.member_id, "m-1");
                       EXPECT_EQ(j.group_instance_id.value_or("<null>"), v >= 5 ? "inst" : "<null>");
                       EXPECT_EQ(j.protocol_type, "consumer");
                       ASSERT_EQ(j.protocols.size(), 2u);
                       EXPECT_EQ(j.protocols[0].metadata, "md-r");
                       EXPECT_EQ(j.protocols[1].name, "roundrobin");
                     }});
  }
  for (int16_t v : {0, 3}) {
    cases.push_back({14, v, body([v](Writer& w) {
                       w.string("grp");
                       w.i32(4);
                       w.string("m-1");
                       if (v >= 3) w.nullable_string(std::nullopt);
                       w.array_count(1);
                       w.string("m-2");
                       w.bytes("assign");
                     }),
                     [](const RequestBody& b) {
                       const auto& s = std::get<SyncGroupRequest>(b);
                       EXPECT_EQ(s.generation_id, 4);
                       ASSERT_EQ(s.assignments.size(), 1u);
                       EXPECT_EQ(s.assignments[0].member_id, "m-2");
                       EXPECT_EQ(s.assignments[0].assignment, "assign");
                     }});
  }
  for (int16_t v : {0, 3}) {
    cases.push_back({12, v, body([v](Writer& w) {
                       w.string("grp");
                       w.i32(7);
                       w.string("m-1");
                       if (v >= 3) w.nullable_string(std::nullopt);
                     }),
                     [](const RequestBody& b) { EXPECT_EQ(std::get<HeartbeatRequest>(b).generation_id, 7); }});
  }
  cases.push_back({13, 0, body([](Writer& w) {
                     w.string("grp");
                     w.string("m-1");
                   }),
                   [](const RequestBody& b) {
                     const auto& l = std::get<LeaveGroupRequest>(b);
                     ASSERT_EQ(l.members.size(), 1u);
                     EXPECT_EQ(l.members[0].member_id, "m-1");
                   }});
  cases.push_back({13, 3, body([](Writer& w) {
                     w.string("grp");
                     w.array_count(2);
                     w.string("m-1");
                     w.nullable_string(std::nullopt);
                     w.string("m-2");
                     w.nullable_string(std::string_view("i"));
                   }),
                   [](const RequestBody& b) {
                     const auto& l = std::get<LeaveGroupRequest>(b);
                     ASSERT_EQ(l.members.size(), 2u);
                     EXPECT_EQ(l.members[1].group_instance_id.value_or(""), "i");
                   }});
  for (int16_t v : {2, 7}) {
    cases.push_back({8, v, body([v](Writer& w) {
                       w.string("grp");
                       w.i32(-1);
                       w.string("");
                       if (v >= 7) w.nullable_string(std::nullopt);
                       if (v <= 4) w.i64(-1);  // retention_time_ms
                       w.array_count(1);
                       w.string("t");
                       w.array_count(1);
                       w.i32(3);
                       w.i64(42);
                       if (v >= 6) w.i32(5);
                       w.nullable_string(std::string_view("meta"));
                     }),
                     [v](const RequestBody& b) {
                       const auto& c = std::get<OffsetCommitRequest>(b);
                       EXPECT_EQ(c.generation_id, -1);
                       ASSERT_EQ(c.topics.size(), 1u);
                       ASSERT_EQ(c.topics[0].partitions.size(), 1u);
                       EXPECT_EQ(c.topics[0].partitions[0].index, 3);
                       EXPECT_EQ(c.topics[0].partitions[0].offset, 42);
                       EXPECT_EQ(c.topics[0].partitions[0].leader_epoch, v >= 6 ? 5 : -1);
                       EXPECT_EQ(c.topics[0].partitions[0].metadata.value_or(""), "meta");
                     }});
  }
  for (int16_t v : {1, 5}) {
    cases.push_back({9, v, body([](Writer& w) {
                       w.string("grp");
                       w.array_count(1);
                       w.string("t");
                       w.array_count(2);
                       w.i32(0);
                       w.i32(2);
                     }),
                     [](const RequestBody& b) {
                       const auto& f = std::get<OffsetFetchRequest>(b);
                       ASSERT_TRUE(f.topics);
                       EXPECT_EQ((*f.topics)[0].partitions, (std::vector<int32_t>{0, 2}));
                     }});
  }
  cases.push_back({9, 2, body([](Writer& w) {
                     w.string("grp");
                     w.array_count(-1);  // every committed partition (v2+)
                   }),
                   [](const RequestBody& b) { EXPECT_FALSE(std::get<OffsetFetchRequest>(b).topics); }});
  RequestHeader h;
  RequestBody b;
  for (const Case& c : cases) {
    const std::string f = frame(c.api, c.version, 9, c.body);
    ASSERT_FALSE(decode_request(f, h, b)) << c.api << " v" << c.version;
    c.check(b);
    for (std::size_t n = 0; n < f.size(); ++n) EXPECT_TRUE(decode_request(f.substr(0, n), h, b)) << c.api << " " << n;
    EXPECT_TRUE(decode_request(f + "x", h, b)) << c.api;
  }
  // A null topic list before v2, a null protocol metadata and a null assignment are malformed.
  std::string nul;
  Writer(nul).string("grp");
  Writer(nul).array_count(-1);
  EXPECT_TRUE(decode_request(frame(9, 1, 1, nul), h, b));
  const std::string join_null = body([](Writer& w) {
    w.string("grp");
    w.i32(10000);
    w.i32(10000);
    w.string("");
    w.string("consumer");
    w.array_count(1);
    w.string("range");
    w.i32(-1);
  });
  EXPECT_TRUE(decode_request(frame(11, 1, 1, join_null), h, b));
  const std::string sync_null = body([](Writer& w) {
    w.string("grp");
    w.i32(1);
    w.string("m");
    w.array_count(1);
    w.string("m");
    w.i32(-1);
  });
  EXPECT_TRUE(decode_request(frame(14, 2, 1, sync_null), h, b));
  // The versions advertised and no others: flexible ones are refused.
  EXPECT_TRUE(supported(11, 5));
  EXPECT_FALSE(supported(11, 6));
  EXPECT_FALSE(supported(8, 1));
  EXPECT_FALSE(supported(8, 8));
  EXPECT_FALSE(supported(9, 0));
  EXPECT_FALSE(supported(9, 6));
  EXPECT_FALSE(supported(10, 3));
}

}  // namespace
}  // namespace lionet::kafka
