// lionet/storage/detail/batch_format.h: the on-disk record batch format (internal to storage/).
//
// Owns: the byte layout of one batch, encoding, header parsing, CRC check, record walking.
// Must not: do IO.
//
// Layout, little-endian (Kafka/Redpanda style: one CRC-32C over the whole batch, and that CRC
// covers the length field, so a torn or garbage length cannot pass as a shorter valid batch):
//   0  u32 length           bytes of the whole batch, this field included (>= kBatchHeaderBytes)
//   4  u32 crc              CRC-32C of bytes [0,4) followed by [8,length)
//   8  i64 base_offset      offset of the first record
//  16  u32 record_count     >= 1
//  20  u32 attributes       0 (reserved)
//  24  i64 first_timestamp  timestamp of the first record (ms)
//  32  i64 max_timestamp    largest record timestamp
//  40  records, each:  i64 timestamp_delta (from first_timestamp), u32 offset_delta (= its
//      index in the batch), u32 key_len, u32 value_len, key bytes, value bytes
// A length of zero where a batch would start means "end of data" (preallocated or zeroed
// space); recovery stops there without calling it corruption.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>

#include "lionet/storage/record.h"

namespace lionet::storage::detail {

static_assert(std::endian::native == std::endian::little, "the batch format is written little-endian");

inline constexpr std::size_t kBatchHeaderBytes = 40;
inline constexpr std::size_t kRecordHeaderBytes = 20;
static_assert(kBatchHeaderBytes <= kBatchOverheadBytes && kRecordHeaderBytes <= kRecordOverheadBytes,
              "record.h's bounds hold for this layout");

struct BatchHeader {
  uint32_t length = 0;
  uint32_t crc = 0;
  int64_t base_offset = 0;
  uint32_t record_count = 0;
  uint32_t attributes = 0;
  int64_t first_timestamp = 0;
  int64_t max_timestamp = 0;
  int64_t next_offset() const { return base_offset + record_count; }
};

template <class T>
inline T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::size_t encoded_size(std::span<const Record> records) {
  std::size_t n = kBatchHeaderBytes;
  for (const Record& r : records) n += kRecordHeaderBytes + r.key.size() + r.value.size();
  return n;
}

// Writes the batch (encoded_size(records) bytes) at dst; records with timestamp < 0 get now_ms.
// Returns the batch's max timestamp.
int64_t encode_batch(char* dst, int64_t base_offset, std::span<const Record> records, int64_t now_ms);

// The header fields of the batch at p (needs kBatchHeaderBytes). No validation.
inline BatchHeader read_header(const char* p) {
  BatchHeader h;
  h.length = load_le<uint32_t>(p);
  h.crc = load_le<uint32_t>(p + 4);
  h.base_offset = load_le<int64_t>(p + 8);
  h.record_count = load_le<uint32_t>(p + 16);
  h.attributes = load_le<uint32_t>(p + 20);
  h.first_timestamp = load_le<int64_t>(p + 24);
  h.max_timestamp = load_le<int64_t>(p + 32);
  return h;
}

uint32_t batch_crc(const char* batch, std::size_t length);
// Length sane (>= header, <= max_len), count >= 1, CRC matches: the batch at p (length bytes
// readable) may be trusted. Record framing is checked by for_each_record.
bool batch_valid(const char* p, const BatchHeader& h, std::size_t max_len);

// Calls f(RecordView) for every record of a verified batch (views into p). Returns false if the
// records do not exactly fill the batch, their offset deltas are not 0,1,2,..., or the header's
// timestamps are not the records' (first_timestamp is the first record's, max_timestamp their
// largest: recovery builds the time index from headers alone). A batch whose CRC matched but
// whose framing is wrong is still corrupt. Timestamps add with wrap-around (no UB on any bytes).
template <class F>
bool for_each_record(const char* p, const BatchHeader& h, F&& f) {
  std::size_t pos = kBatchHeaderBytes;
  int64_t max_ts = 0;
  for (uint32_t i = 0; i < h.record_count; i++) {
    if (h.length - pos < kRecordHeaderBytes) return false;
    const char* r = p + pos;
    int64_t ts_delta = load_le<int64_t>(r);
    uint32_t off_delta = load_le<uint32_t>(r + 8);
    uint32_t key_len = load_le<uint32_t>(r + 12);
    uint32_t value_len = load_le<uint32_t>(r + 16);
    pos += kRecordHeaderBytes;
    if (off_delta != i || uint64_t{key_len} + value_len > h.length - pos) return false;
    if (i == 0 && ts_delta != 0) return false;
    RecordView v;
    v.offset = h.base_offset + i;
    v.timestamp = static_cast<int64_t>(static_cast<uint64_t>(h.first_timestamp) + static_cast<uint64_t>(ts_delta));
    max_ts = i == 0 ? v.timestamp : std::max(max_ts, v.timestamp);
    v.key = std::string_view(p + pos, key_len);
    v.value = std::string_view(p + pos + key_len, value_len);
    pos += key_len + value_len;
    f(v);
  }
  return pos == h.length && max_ts == h.max_timestamp;
}

}  // namespace lionet::storage::detail
