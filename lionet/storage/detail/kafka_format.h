// lionet/storage/detail/kafka_format.h: the batch format of segments written with
// BatchFormat::kKafka (internal to storage/): Kafka's RecordBatch, magic 2, byte for byte as a
// Kafka producer sends it and a Kafka consumer reads it, so a Fetch can send segment bytes as
// they are (sendfile) and a compressed batch stays compressed on disk.
//
// Owns: reading the header, validating a batch (magic, lengths, attributes, CRC-32C), walking
// its records (inflating a compressed records section, bounded), encoding records into a
// batch. Must not: do IO.
//
// Layout (big-endian; "varint" is zig-zag, as Kafka's):
//   0  i64 base_offset            set by the store at append (not covered by the CRC)
//   8  i32 batch_length           bytes after this field (the batch is batch_length + 12)
//  12  i32 partition_leader_epoch set to 0 by the store at append (not covered by the CRC)
//  16  i8  magic                  2
//  17  u32 crc                    CRC-32C of bytes [21, end)
//  21  i16 attributes             bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd);
//                                 the store keeps only CreateTime, non-transactional data batches
//  23  i32 last_offset_delta      record count - 1
//  27  i64 base_timestamp         record timestamps are base + delta
//  35  i64 max_timestamp          their largest (the store checks it at append)
//  43  i64 producer_id, 51 i16 producer_epoch, 53 i32 base_sequence (as the producer sent them)
//  57  i32 record_count
//  61  records (compressed as a whole when the codec is not 0), each:
//      length varint | attributes i8 | timestamp_delta varlong | offset_delta varint |
//      key_length varint (-1 null) | key | value_length varint (-1 null) | value |
//      header count varint | headers (key_length varint, key, value_length varint (-1), value)
// The CRC does not cover the length, but a torn or garbage length makes the CRC's range wrong,
// so it fails; nor the base offset, which every reader checks against the offset it expects.
// A batch_length of zero where a batch would start means "end of data" (preallocated space).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "lionet/storage/compression.h"
#include "lionet/storage/detail/batch_format.h"
#include "lionet/storage/record.h"

namespace lionet::storage::detail {

inline constexpr std::size_t kKafkaHeaderBytes = 61;
inline constexpr std::size_t kKafkaMinRecordBytes = 7;  // length, attributes, 2 deltas, 2 lengths, count
inline constexpr std::size_t kKafkaMinBatchBytes = kKafkaHeaderBytes + kKafkaMinRecordBytes;
// A record's varints at most: length 5, attributes 1, timestamp delta 10, offset delta 5, key
// and value lengths 5 each, header count 1 (record.h's bound).
static_assert(kKafkaHeaderBytes <= kBatchOverheadBytes && 5 + 1 + 10 + 5 + 5 + 5 + 1 <= kRecordOverheadBytes,
              "record.h's bounds hold for this layout");

template <class T>
inline T load_be(const char* p) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  if constexpr (sizeof(T) == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return static_cast<T>(__builtin_bswap16(v));
  } else if constexpr (sizeof(T) == 4) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return static_cast<T>(__builtin_bswap32(v));
  } else {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<T>(__builtin_bswap64(v));
  }
}
template <class T>
inline void store_be(char* p, T v) {
  auto u = static_cast<uint64_t>(v);
  for (std::size_t i = sizeof(T); i-- > 0; u >>= 8) p[i] = static_cast<char>(u & 0xff);
}

// The batch_length field of the batch at p (needs 12 bytes): 0 means "end of data".
inline uint32_t kafka_length_field(const char* p) { return load_be<uint32_t>(p + 8); }

// The header of the batch at p (needs kKafkaHeaderBytes); length is the whole batch's size
// (0 for a negative batch_length). No validation.
BatchHeader read_kafka_header(const char* p);

// Magic 2, sane length (>= kKafkaMinBatchBytes, <= max_len), record count >= 1 and equal to
// last_offset_delta + 1, attributes the store keeps (codec 0-4, nothing else set), CRC.
bool kafka_batch_valid(const char* p, const BatchHeader& h, std::size_t max_len);

// The records section of a verified batch: the stored bytes, or for a compressed batch its
// inflation into `scratch` (replaced), at most max_inflated bytes. Not kOk: it does not inflate
// (compression.h's kBadStream, kTooLarge, kUnknownCodec).
Inflate kafka_records(const char* p, const BatchHeader& h, std::size_t max_inflated, std::string& scratch,
                      std::string_view& records);

// Walks the records section of a batch with header h, calling f(RecordView) for each (views
// into `records`; a null key or value is an empty view; headers: the record's header section,
// count included, empty when it has none). Returns false if the records do not exactly fill
// the section, their offset deltas are not 0,1,2,... or a length is wrong. *max_ts gets the
// largest record timestamp (timestamps add with wrap-around: no UB on any bytes).
template <class F>
bool walk_kafka_records(std::string_view records, const BatchHeader& h, int64_t* max_ts, F&& f);

// A record header section as Kafka encodes it (count varint >= 0, then per header a key length
// varint >= 0, the key, a value length varint >= -1, the value), nothing after it.
bool kafka_headers_valid(std::string_view headers);

// Bytes encode_kafka_batch writes for these records.
std::size_t kafka_encoded_size(std::span<const Record> records, int64_t now_ms);
// Writes one uncompressed batch (producer id -1) at dst: offsets base_offset..., records with
// timestamp < 0 get now_ms, each record's `headers` as its header section. Returns the max
// timestamp.
int64_t encode_kafka_batch(char* dst, int64_t base_offset, std::span<const Record> records, int64_t now_ms);

// Sets base_offset and partition_leader_epoch (0) of the batch at p, and its max_timestamp to
// max_ts (recomputing the CRC) when they differ.
void stamp_kafka_batch(char* p, std::size_t length, int64_t base_offset, int64_t max_ts);

// ---- implementation of the template ----
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
    ok_ = false;
    p_ = end_;
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
      ok_ = false;
      p_ = end_;
      return {};
    }
    std::string_view s(p_, n);
    p_ += n;
    return s;
  }
  void skip_byte() { take(1); }

 private:
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

template <class F>
bool walk_kafka_records(std::string_view records, const BatchHeader& h, int64_t* max_ts, F&& f) {
  KafkaCursor c(records);
  if (h.record_count > records.size() / kKafkaMinRecordBytes) return false;
  int64_t mx = 0;
  for (uint32_t i = 0; i < h.record_count; i++) {
    const int32_t len = c.varint();
    if (!c.ok() || len < 0 || static_cast<std::size_t>(len) > c.left()) return false;
    KafkaCursor r(c.take(static_cast<std::size_t>(len)));
    r.skip_byte();  // record attributes: unused
    const int64_t ts_delta = r.varlong();
    const int32_t off_delta = r.varint();
    if (!r.ok() || off_delta < 0 || static_cast<uint32_t>(off_delta) != i) return false;
    RecordView v;
    v.offset = h.base_offset + i;
    v.timestamp = static_cast<int64_t>(static_cast<uint64_t>(h.first_timestamp) + static_cast<uint64_t>(ts_delta));
    const int32_t klen = r.varint();
    if (klen < -1) return false;
    if (klen > 0) v.key = r.take(static_cast<std::size_t>(klen));
    const int32_t vlen = r.varint();
    if (vlen < -1) return false;
    if (vlen > 0) v.value = r.take(static_cast<std::size_t>(vlen));
    // The rest of the record is its header section; a count of 0 is the one byte 0.
    const std::string_view headers = r.ok() ? std::string_view(r.pos(), r.left()) : std::string_view();
    if (!kafka_headers_valid(headers)) return false;
    if (headers.size() > 1) v.headers = headers;
    mx = i == 0 ? v.timestamp : std::max(mx, v.timestamp);
    f(v);
  }
  if (!c.at_end()) return false;
  *max_ts = mx;
  return true;
}

}  // namespace lionet::storage::detail
