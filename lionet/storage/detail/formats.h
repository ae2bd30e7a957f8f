// lionet/storage/detail/formats.h: one interface over the two batch formats a segment may hold
// (BatchFormat::kLionet: batch_format.h; BatchFormat::kKafka: kafka_format.h), so the scan, the
// read path and truncation are written once. Internal to storage/.
#pragma once

#include <string>
#include <string_view>

#include "lionet/storage/detail/batch_format.h"
#include "lionet/storage/detail/kafka_format.h"
#include "lionet/storage/log_options.h"

namespace lionet::storage::detail {

inline std::size_t header_bytes(BatchFormat f) {
  return f == BatchFormat::kKafka ? kKafkaHeaderBytes : kBatchHeaderBytes;
}
inline std::size_t min_batch_bytes(BatchFormat f) {
  return f == BatchFormat::kKafka ? kKafkaMinBatchBytes : kBatchHeaderBytes + kRecordHeaderBytes;
}
// Bytes from a batch's start through its length field.
inline std::size_t length_field_end(BatchFormat f) { return f == BatchFormat::kKafka ? 12 : 4; }
// The length field of the batch at p (length_field_end(f) bytes) is zero: end of data.
inline bool zero_length(BatchFormat f, const char* p) {
  return (f == BatchFormat::kKafka ? kafka_length_field(p) : load_le<uint32_t>(p)) == 0;
}
inline BatchHeader read_header(BatchFormat f, const char* p) {
  return f == BatchFormat::kKafka ? read_kafka_header(p) : read_header(p);
}
inline bool batch_valid(BatchFormat f, const char* p, const BatchHeader& h, std::size_t max_len) {
  return f == BatchFormat::kKafka ? kafka_batch_valid(p, h, max_len) : batch_valid(p, h, max_len);
}
// Calls fn(RecordView) for each record of a verified batch; false if its records are malformed
// (batch_format.h's and kafka_format.h's rules; a compressed records section that does not
// inflate within max_inflated bytes; a max timestamp that is not its records'). A compressed
// batch's records are inflated into `scratch` and the views point there.
template <class F>
bool for_each_record(BatchFormat f, const char* p, const BatchHeader& h, std::size_t max_inflated, std::string& scratch,
                     F&& fn) {
  if (f != BatchFormat::kKafka) return for_each_record(p, h, fn);
  std::string_view records;
  if (kafka_records(p, h, max_inflated, scratch, records) != Inflate::kOk) return false;
  int64_t max_ts = 0;
  return walk_kafka_records(records, h, &max_ts, fn) && max_ts == h.max_timestamp;
}
inline std::size_t encoded_size(BatchFormat f, std::span<const Record> records, int64_t now_ms) {
  return f == BatchFormat::kKafka ? kafka_batch_size(records, now_ms) : encoded_size(records);
}
inline int64_t encode_batch(BatchFormat f, char* dst, int64_t base_offset, std::span<const Record> records,
                            int64_t now_ms) {
  return f == BatchFormat::kKafka ? encode_kafka_batch(dst, base_offset, records, now_ms)
                                  : encode_batch(dst, base_offset, records, now_ms);
}

// The format of a non-empty segment file whose base offset is `base`, from its first n bytes
// (n >= header_bytes(kKafka), or all of the file if shorter): kKafka when they begin with
// `base` big-endian and carry magic 2; kLionet when they begin with a plausible length and
// hold `base` little-endian at byte 8; when neither is clear-cut (a damaged first batch),
// kKafka if one of its two marks is there, or if the first four bytes are zero and bytes
// after them are not (a kLionet batch never starts with a zero length before data), else
// kLionet. A wrong guess is corrected at open (Log::recover tries the other layout when the
// index files or the scan disagree with it).
inline BatchFormat detect_format(const char* p, std::size_t n, int64_t base) {
  const bool kafka_base = n >= 8 && load_be<int64_t>(p) == base;
  const bool kafka_magic = n >= 17 && p[16] == 2;
  if (kafka_base && kafka_magic) return BatchFormat::kKafka;
  if (n >= 16 && load_le<int64_t>(p + 8) == base && load_le<uint32_t>(p) >= kBatchHeaderBytes + kRecordHeaderBytes)
    return BatchFormat::kLionet;
  if (kafka_base || kafka_magic) return BatchFormat::kKafka;
  if (n >= 12 && load_le<uint32_t>(p) == 0) {
    for (std::size_t i = 4; i < n; i++)
      if (p[i] != 0) return BatchFormat::kKafka;
  }
  return BatchFormat::kLionet;
}

}  // namespace lionet::storage::detail
