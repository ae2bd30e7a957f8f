// lionet/storage/kafka_batch.h: Kafka's RecordBatch (magic 2), the one codec of the format. The
// store writes its kKafka segments in it byte for byte (detail/kafka_format.h adds the store's
// rules), and kafka/ decodes producers' batches and encodes Fetch responses with it, so one
// format has one encoder and one decoder.
//
// Owns: reading a batch's header, checking it (magic, lengths, counts, CRC-32C), inflating a
// compressed records section (bounded), walking records (every length checked), encoding
// records into a batch. Must not: do IO, or decide policy (which attributes a store keeps,
// whether max_timestamp must match: the callers').
//
// Layout (big-endian; "varint" is zig-zag, as Kafka's):
//   0  i64 base_offset            (not covered by the CRC)
//   8  i32 batch_length           bytes after this field (the batch is batch_length + 12)
//  12  i32 partition_leader_epoch (not covered by the CRC)
//  16  i8  magic                  2
//  17  u32 crc                    CRC-32C of bytes [21, end)
//  21  i16 attributes             bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
//                                 bit 3 LogAppendTime, bit 4 transactional, bit 5 control
//  23  i32 last_offset_delta      record count - 1
//  27  i64 base_timestamp         record timestamps are base + delta (the first record's, as
//                                 Kafka's producer writes it; a delta may be negative)
//  35  i64 max_timestamp          their largest
//  43  i64 producer_id, 51 i16 producer_epoch, 53 i32 base_sequence
//  57  i32 record_count
//  61  records (compressed as a whole when the codec is not 0), each:
//      length varint | attributes i8 | timestamp_delta varlong | offset_delta varint |
//      key_length varint (-1 null) | key | value_length varint (-1 null) | value |
//      header count varint | headers (key_length varint, key, value_length varint (-1), value)
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lionet/storage/compression.h"
#include "lionet/storage/record.h"

namespace lionet::storage {

inline constexpr std::size_t kKafkaHeaderBytes = 61;
inline constexpr std::size_t kKafkaMinRecordBytes = 7;  // length, attributes, 2 deltas, 2 lengths, count
inline constexpr std::size_t kKafkaMinBatchBytes = kKafkaHeaderBytes + kKafkaMinRecordBytes;

struct KafkaBatchHeader {
  int64_t base_offset = 0;
  uint32_t length = 0;  // the whole batch (batch_length + 12); 0 for a negative or huge batch_length
  int8_t magic = 0;
  uint32_t crc = 0;
  int16_t attributes = 0;
  int32_t last_offset_delta = 0;
  int64_t base_timestamp = 0;
  int64_t max_timestamp = 0;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  int32_t record_count = 0;

  int codec() const noexcept { return attributes & 0x7; }
};

// The header of the batch at p (needs kKafkaHeaderBytes). No validation.
KafkaBatchHeader read_kafka_batch_header(const char* p);

// The batch at p, h.length bytes of it readable: null when its framing holds (magic 2, length
// >= kKafkaMinBatchBytes, record_count >= 1 and equal to last_offset_delta + 1, CRC-32C),
// else what is wrong with it, for an error message.
const char* kafka_batch_problem(const char* p, const KafkaBatchHeader& h);

// The records section of a checked batch: its bytes, or for a compressed batch their inflation
// into `scratch` (replaced), at most max_inflated bytes. Not kOk: compression.h's kBadStream,
// kTooLarge, kUnknownCodec, with `why`.
Inflate kafka_batch_records(const char* p, const KafkaBatchHeader& h, std::size_t max_inflated, std::string& scratch,
                            std::string_view& records, const char*& why);

// One record of a walked batch (views into the records section).
struct KafkaRecord {
  int64_t offset = 0;
  int64_t timestamp = 0;  // base_timestamp + delta, added with wrap-around (no UB on any bytes)
  std::optional<std::string_view> key;
  std::optional<std::string_view> value;
  std::string_view headers;  // the header section, count included (one byte 0 when none)
  uint32_t header_count = 0;
};

// A record header section (count varint >= 0, then per header a key length varint >= 0, the
// key, a value length varint >= -1, the value), nothing after it; *count gets the count.
bool kafka_headers_valid(std::string_view headers, uint32_t* count = nullptr);

// Walks the records section of a batch with header h, calling f(const KafkaRecord&) for each.
// Null when the records exactly fill the section with offset deltas 0,1,2,... and every length
// in bounds (*max_ts then holds their largest timestamp), else what is wrong.
template <class F>
const char* walk_kafka_records(std::string_view records, const KafkaBatchHeader& h, int64_t* max_ts, F&& f);

// Bytes encode_kafka_batch writes for these records.
std::size_t kafka_batch_size(std::span<const Record> records, int64_t now_ms);
// Writes one uncompressed batch (CreateTime, producer id -1) at dst: offsets base_offset...,
// base_timestamp the first record's, an empty key as a null key, each record's `headers` as its
// header section (empty: none). Records with timestamp < 0 get now_ms when now_ms >= 0 (the
// store's appends) and keep theirs when now_ms < 0. Returns the max timestamp.
int64_t encode_kafka_batch(char* dst, int64_t base_offset, std::span<const Record> records, int64_t now_ms);

// Sets base_offset and partition_leader_epoch (0) of the batch at p, and its max_timestamp to
// max_ts (recomputing the CRC) when they differ.
void stamp_kafka_batch(char* p, std::size_t length, int64_t base_offset, int64_t max_ts);

// ---- implementation of the template ----
namespace detail {
class KafkaCursor {
 public:
  explicit KafkaCursor(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }
  const char* pos() const { return p_; }
  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }
  uint64_t uvarint(int max_bytes) {
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; i++) {
      if (p_ == end_) break;
      const auto b = static_cast<uint8_t>(*p_++);
      v |= uint64_t{b & 0x7fu} << (7 * i);
      if ((b & 0x80) == 0) return v;
    }
    fail();
    return 0;
  }
  int32_t varint() {
    const auto u = static_cast<uint32_t>(uvarint(5));
    return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  int64_t varlong() {
    const uint64_t u = uvarint(10);
    return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  }
  std::string_view take(std::size_t n) {
    if (!ok_ || n > left()) {
      fail();
      return {};
    }
    std::string_view s(p_, n);
    p_ += n;
    return s;
  }
  void fail() {
    ok_ = false;
    p_ = end_;
  }

 private:
  const char* p_;
  const char* end_;
  bool ok_ = true;
};
}  // namespace detail

template <class F>
const char* walk_kafka_records(std::string_view records, const KafkaBatchHeader& h, int64_t* max_ts, F&& f) {
  detail::KafkaCursor c(records);
  if (h.record_count < 1 || static_cast<std::size_t>(h.record_count) > records.size() / kKafkaMinRecordBytes)
    return "a record count the records section cannot hold";
  int64_t mx = 0;
  for (int32_t i = 0; i < h.record_count; i++) {
    const int32_t len = c.varint();
    if (!c.ok() || len < 0 || static_cast<std::size_t>(len) > c.left()) return "a record length past the batch";
    detail::KafkaCursor r(c.take(static_cast<std::size_t>(len)));
    r.take(1);  // record attributes: unused
    const int64_t ts_delta = r.varlong();
    const int32_t off_delta = r.varint();
    if (!r.ok()) return "a record cut short";
    if (off_delta != i) return "record offset deltas are not consecutive";
    KafkaRecord v;
    v.offset = h.base_offset + i;
    v.timestamp = static_cast<int64_t>(static_cast<uint64_t>(h.base_timestamp) + static_cast<uint64_t>(ts_delta));
    const int32_t klen = r.varint();
    if (klen < -1) return "a negative key length";
    if (klen >= 0) v.key = r.take(static_cast<std::size_t>(klen));
    const int32_t vlen = r.varint();
    if (vlen < -1) return "a negative value length";
    if (vlen >= 0) v.value = r.take(static_cast<std::size_t>(vlen));
    if (!r.ok()) return "a key or value past its record";
    v.headers = std::string_view(r.pos(), r.left());
    if (!kafka_headers_valid(v.headers, &v.header_count)) return "a record's header section is malformed";
    mx = i == 0 ? v.timestamp : std::max(mx, v.timestamp);
    f(static_cast<const KafkaRecord&>(v));
  }
  if (!c.at_end()) return "bytes after a batch's last record";
  *max_ts = mx;
  return nullptr;
}

}  // namespace lionet::storage
