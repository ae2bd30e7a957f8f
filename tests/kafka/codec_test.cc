// lionet/kafka/codec.h, record_batch.h, requests.h: primitive round trips (varint edges),
// malformed input refused with a reason and never read past the frame (every prefix of valid
// requests and batches, forged lengths and counts, a flipped byte under the CRC), RecordBatch
// encode -> decode round trips with keys, null keys, headers and timestamps.
#include <gtest/gtest.h>

#include <cstdint>
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
  EXPECT_EQ(varint_size(0), 1u);
  EXPECT_EQ(varint_size(-65), 2u);
}

TEST(KafkaCodec, MalformedInputIsRefusedNotOverread) {
  {  // a string length past the frame
    std::string b = "\x00\x10" "abc";
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
    std::string c("\x7f\xff\xff\xff" "ab", 6);
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
  std::vector<OutRecord> recs = {{100, 1700000000000, "k1", "v1", {}},
                                 {101, 1700000000005, "", "v2", hdr},
                                 {102, 1699999999999, "k3", "", {}}};
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
  {  // compressed (attributes = gzip), CRC recomputed: refused as unsupported, not corrupt
    std::string c = b;
    c[22] = 1;
    const uint32_t crc = storage::crc32c(0, c.data() + 21, c.size() - 21);
    std::string fix;
    Writer(fix).u32(crc);
    c.replace(17, 4, fix);
    EXPECT_EQ(decode_batches(c, out).code, ErrorCode::kUnsupportedCompressionType);
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

}  // namespace
}  // namespace lionet::kafka
