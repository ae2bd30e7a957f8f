// tests/kafka/compression_test.cc: the four codecs producers compress record batches with
// (lionet/storage/compression.h) and compressed batches through decode_batches: every record
// back as sent, a truncated or corrupted stream refused, a compression bomb stopped at the
// limit (MESSAGE_TOO_LARGE), snappy both raw and in the Java client's xerial framing. The
// round trip through real producers (kcat -z) is in clients_test.cc.
#include "lionet/storage/compression.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lionet/kafka/codec.h"
#include "lionet/kafka/record_batch.h"
#include "lionet/storage/crc32c.h"

namespace lionet::kafka {
using storage::codec_name;
using storage::compress;
using storage::decompress;
using storage::Inflate;
namespace {

constexpr int kCodecs[] = {1, 2, 3, 4};

std::string sample(std::size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1103515245 + 12345;
    s[i] = static_cast<char>(i % 7 == 0 ? (x >> 16) : 'a' + i % 13);  // compressible, not trivially
  }
  return s;
}

// A batch as a producer with `codec` sends it: the header of an uncompressed batch with the
// codec in its attributes, the records section compressed, length and CRC-32C recomputed.
std::string compressed_batch(const std::vector<OutRecord>& recs, int codec) {
  std::string plain;
  encode_batch(recs, plain);
  std::string b = plain.substr(0, kBatchHeaderBytes);
  EXPECT_TRUE(compress(codec, std::string_view(plain).substr(kBatchHeaderBytes), b));
  b[22] = static_cast<char>(codec);  // attributes (i16, big-endian): the codec bits
  std::string len, crc;
  Writer(len).i32(static_cast<int32_t>(b.size() - 12));
  b.replace(8, 4, len);
  Writer(crc).u32(storage::crc32c(0, b.data() + 21, b.size() - 21));
  b.replace(17, 4, crc);
  return b;
}

TEST(KafkaCompression, EveryCodecRoundTripsAndRefusesATruncatedStream) {
  const std::string data = sample(300000);
  for (int codec : kCodecs) {
    SCOPED_TRACE(codec_name(codec));
    std::string z;
    ASSERT_TRUE(compress(codec, data, z));
    EXPECT_LT(z.size(), data.size());
    std::string back;
    const char* why = "";
    ASSERT_EQ(decompress(codec, z, data.size(), back, why), Inflate::kOk) << why;
    EXPECT_EQ(back, data);
    // Appends: what was in `out` stays.
    std::string prefixed = "xy";
    ASSERT_EQ(decompress(codec, z, data.size(), prefixed, why), Inflate::kOk) << why;
    EXPECT_EQ(prefixed, "xy" + data);
    // Cut short: refused (at the cut, wherever it falls), never read past.
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, z.size() / 2, z.size() - 1}) {
      std::string part;
      EXPECT_EQ(decompress(codec, std::string_view(z).substr(0, cut), data.size(), part, why), Inflate::kBadStream)
          << "cut at " << cut;
    }
    // Garbage: refused.
    std::string junk = sample(1000), out;
    EXPECT_EQ(decompress(codec, junk, data.size(), out, why), Inflate::kBadStream);
  }
  std::string out;
  const char* why = "";
  EXPECT_EQ(decompress(5, "abc", 100, out, why), Inflate::kUnknownCodec);
}

TEST(KafkaCompression, ABombStopsAtTheLimitWithoutInflatingFurther) {
  const std::string zeros(16 << 20, '\0');  // 16 MiB of zeros: a few KiB compressed
  for (int codec : kCodecs) {
    SCOPED_TRACE(codec_name(codec));
    std::string z;
    ASSERT_TRUE(compress(codec, zeros, z));
    EXPECT_LT(z.size(), std::size_t{1} << 20);
    std::string out;
    const char* why = "";
    out = "kept";
    EXPECT_EQ(decompress(codec, z, 1 << 20, out, why), Inflate::kTooLarge);
    EXPECT_EQ(out, "kept") << "a failed inflate leaves what was there";
    // Exactly at the limit is not too large.
    std::string exact;
    EXPECT_EQ(decompress(codec, z, zeros.size(), exact, why), Inflate::kOk) << why;
    EXPECT_EQ(exact.size(), zeros.size());
  }
}

TEST(KafkaCompression, SnappyInTheJavaClientsXerialFraming) {
  const std::string a = sample(40000), b = sample(1000);
  std::string framed("\x82SNAPPY\0", 8);
  framed += std::string("\0\0\0\1\0\0\0\1", 8);  // version 1, compatible version 1
  for (const std::string* part : {&a, &b}) {
    std::string block;
    ASSERT_TRUE(compress(2, *part, block));
    std::string len;
    Writer(len).i32(static_cast<int32_t>(block.size()));
    framed += len + block;
  }
  std::string out;
  const char* why = "";
  ASSERT_EQ(decompress(2, framed, 1 << 20, out, why), Inflate::kOk) << why;
  EXPECT_EQ(out, a + b);
  // A block length past the end: refused.
  std::string cut = framed.substr(0, framed.size() - 3);
  out.clear();
  EXPECT_EQ(decompress(2, cut, 1 << 20, out, why), Inflate::kBadStream);
}

TEST(KafkaCompression, CompressedBatchesDecodeToTheRecordsSent) {
  std::string hdr;  // one header t=1
  Writer hw(hdr);
  hw.varint(1);
  hw.varint(1);
  hw.raw("t");
  hw.varint(1);
  hw.raw("1");
  std::vector<OutRecord> recs;
  std::vector<std::string> values;
  for (int i = 0; i < 500; ++i) values.push_back("value " + std::to_string(i) + std::string(100, 'v'));
  for (int i = 0; i < 500; ++i)
    recs.push_back({1000 + i, 1700000000000 + i, i % 3 ? std::string_view("key") : std::string_view(), values[i],
                    i % 2 ? std::string_view(hdr) : std::string_view()});
  for (int codec : kCodecs) {
    SCOPED_TRACE(codec_name(codec));
    const std::string b = compressed_batch(recs, codec);
    std::vector<DecodedBatch> out;
    BatchError e = decode_batches(b + b, out);  // two compressed batches back to back
    ASSERT_EQ(e.code, ErrorCode::kNone) << e.why;
    ASSERT_EQ(out.size(), 2u);
    for (const DecodedBatch& d : out) {
      EXPECT_EQ(d.compression(), codec);
      ASSERT_EQ(d.records.size(), recs.size());
      for (std::size_t i = 0; i < recs.size(); ++i) {
        EXPECT_EQ(d.records[i].value.value(), recs[i].value);
        EXPECT_EQ(d.records[i].key.value_or(""), recs[i].key);
        EXPECT_EQ(d.records[i].timestamp, recs[i].timestamp);
        EXPECT_EQ(d.records[i].headers, i % 2 ? hdr : std::string(1, '\0'));
      }
    }
    // The views survive moving the batches (they point into each batch's own inflated copy).
    std::vector<DecodedBatch> moved = std::move(out);
    EXPECT_EQ(moved[1].records[499].value.value(), values[499]);
    // Its records inflate to ~60 KiB: a smaller limit is MESSAGE_TOO_LARGE, not corrupt.
    e = decode_batches(b, out, 16 * 1024);
    EXPECT_EQ(e.code, ErrorCode::kMessageTooLarge);
    // A compressed section cut short, length and CRC recomputed (the CRC is the producer's, so
    // it vouches for nothing): corrupt, not a crash.
    std::string c = b.substr(0, b.size() - 10);
    std::string len, crc;
    Writer(len).i32(static_cast<int32_t>(c.size() - 12));
    c.replace(8, 4, len);
    Writer(crc).u32(storage::crc32c(0, c.data() + 21, c.size() - 21));
    c.replace(17, 4, crc);
    EXPECT_EQ(decode_batches(c, out).code, ErrorCode::kCorruptMessage);
  }
}

}  // namespace
}  // namespace lionet::kafka
