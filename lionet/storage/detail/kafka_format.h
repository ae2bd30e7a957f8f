// lionet/storage/detail/kafka_format.h: the store's rules over Kafka's RecordBatch
// (../kafka_batch.h, the one codec of the format) for segments written with
// BatchFormat::kKafka (internal to storage/): byte for byte as a Kafka producer sends it and a
// Kafka consumer reads it, so a Fetch can send segment bytes as they are (sendfile) and a
// compressed batch stays compressed on disk.
//
// Owns: the codec seen through BatchHeader and RecordView (the interface formats.h gives both
// formats), and what the store adds: a batch it keeps is CreateTime, non-transactional data
// (attributes hold a codec 0-4 and nothing else) and no longer than max_batch_bytes; at append
// the store sets base_offset and partition_leader_epoch (0), neither covered by the CRC. The
// CRC does not cover the length, but a torn or garbage length makes the CRC's range wrong, so
// it fails; nor the base offset, which every reader checks against the offset it expects. A
// batch_length of zero where a batch would start means "end of data" (preallocated space).
// Must not: do IO.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "lionet/storage/compression.h"
#include "lionet/storage/detail/batch_format.h"
#include "lionet/storage/kafka_batch.h"
#include "lionet/storage/record.h"

namespace lionet::storage::detail {

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

// The header of the batch at p (needs kKafkaHeaderBytes) as BatchHeader; length is the whole
// batch's size (0 for a negative batch_length), record_count 0 for a negative one. No validation.
inline BatchHeader read_kafka_header(const char* p) {
  const KafkaBatchHeader k = read_kafka_batch_header(p);
  BatchHeader h;
  h.base_offset = k.base_offset;
  h.length = k.length;
  h.crc = k.crc;
  h.attributes = static_cast<uint16_t>(k.attributes);
  h.first_timestamp = k.base_timestamp;
  h.max_timestamp = k.max_timestamp;
  h.record_count = k.record_count < 0 ? 0 : static_cast<uint32_t>(k.record_count);
  return h;
}

// kafka_batch_problem's framing, a length <= max_len, and attributes the store keeps.
inline bool kafka_batch_valid(const char* p, const BatchHeader& h, std::size_t max_len) {
  if (h.length < kKafkaMinBatchBytes || h.length > max_len) return false;
  if ((h.attributes & ~0x7u) != 0 || (h.attributes & 0x7u) > 4) return false;
  return kafka_batch_problem(p, read_kafka_batch_header(p)) == nullptr;
}

// The records section of a verified batch (kafka_batch_records without the reason).
inline Inflate kafka_records(const char* p, const BatchHeader& h, std::size_t max_inflated, std::string& scratch,
                             std::string_view& records) {
  KafkaBatchHeader k;
  k.length = h.length;
  k.attributes = static_cast<int16_t>(h.attributes);
  const char* why = "";
  return kafka_batch_records(p, k, max_inflated, scratch, records, why);
}

// Walks the records of a batch with header h, calling f(RecordView) for each (a null key or
// value is an empty view; headers empty when the record has none). False where
// walk_kafka_records finds a fault. *max_ts gets the largest record timestamp.
template <class F>
bool walk_kafka_records(std::string_view records, const BatchHeader& h, int64_t* max_ts, F&& f) {
  KafkaBatchHeader k;
  k.base_offset = h.base_offset;
  k.base_timestamp = h.first_timestamp;
  k.record_count = static_cast<int32_t>(std::min<uint32_t>(h.record_count, INT32_MAX));
  if (k.record_count == 0) return false;
  return storage::walk_kafka_records(records, k, max_ts, [&](const KafkaRecord& r) {
           RecordView v;
           v.offset = r.offset;
           v.timestamp = r.timestamp;
           v.key = r.key.value_or(std::string_view{});
           v.value = r.value.value_or(std::string_view{});
           if (r.header_count > 0) v.headers = r.headers;
           f(v);
         }) == nullptr;
}

}  // namespace lionet::storage::detail
