// lionet/storage/detail/kafka_format.cc: Kafka RecordBatch v2 as a stored batch (layout in the .h).
#include "lionet/storage/detail/kafka_format.h"

#include <limits>

#include "lionet/storage/compression.h"
#include "lionet/storage/crc32c.h"

namespace lionet::storage::detail {
namespace {
constexpr std::size_t kCrcFrom = 21;  // attributes .. end

std::size_t uvarint_size(uint64_t u) {
  std::size_t n = 1;
  while (u >= 0x80) {
    u >>= 7;
    n++;
  }
  return n;
}
uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
std::size_t varint_size(int64_t v) { return uvarint_size(zigzag(v)); }
char* put_varint(char* p, int64_t v) {
  uint64_t u = zigzag(v);
  while (u >= 0x80) {
    *p++ = static_cast<char>((u & 0x7f) | 0x80);
    u >>= 7;
  }
  *p++ = static_cast<char>(u);
  return p;
}

// The body of one record (everything after its length varint).
std::size_t record_body_size(const Record& r, int64_t ts_delta, uint32_t off_delta) {
  return 1 + varint_size(ts_delta) + varint_size(off_delta) +
         (r.key.empty() ? 1 : varint_size(static_cast<int64_t>(r.key.size())) + r.key.size()) +
         varint_size(static_cast<int64_t>(r.value.size())) + r.value.size() + (r.headers.empty() ? 1 : r.headers.size());
}

int64_t first_ts(std::span<const Record> records, int64_t now_ms) {
  return records.front().timestamp < 0 ? now_ms : records.front().timestamp;
}
}  // namespace

BatchHeader read_kafka_header(const char* p) {
  BatchHeader h;
  h.base_offset = load_be<int64_t>(p);
  const int32_t len = load_be<int32_t>(p + 8);
  h.length = len < 0 || static_cast<uint64_t>(len) + 12 > std::numeric_limits<uint32_t>::max()
                 ? 0
                 : static_cast<uint32_t>(len) + 12;
  h.crc = load_be<uint32_t>(p + 17);
  h.attributes = static_cast<uint16_t>(load_be<int16_t>(p + 21));
  h.first_timestamp = load_be<int64_t>(p + 27);
  h.max_timestamp = load_be<int64_t>(p + 35);
  const int32_t count = load_be<int32_t>(p + 57);
  h.record_count = count < 0 ? 0 : static_cast<uint32_t>(count);
  return h;
}

bool kafka_batch_valid(const char* p, const BatchHeader& h, std::size_t max_len) {
  if (h.length < kKafkaMinBatchBytes || h.length > max_len) return false;
  if (p[16] != 2 || h.record_count == 0) return false;
  if (load_be<int32_t>(p + 23) != static_cast<int32_t>(h.record_count - 1)) return false;
  if ((h.attributes & ~0x7u) != 0 || (h.attributes & 0x7u) > 4) return false;
  return crc32c(0, p + kCrcFrom, h.length - kCrcFrom) == h.crc;
}

Inflate kafka_records(const char* p, const BatchHeader& h, std::size_t max_inflated, std::string& scratch,
                      std::string_view& records) {
  const std::string_view stored(p + kKafkaHeaderBytes, h.length - kKafkaHeaderBytes);
  const int codec = static_cast<int>(h.attributes & 0x7u);
  if (codec == 0) {
    records = stored;
    return Inflate::kOk;
  }
  scratch.clear();
  const char* why = "";
  const Inflate r = decompress(codec, stored, max_inflated, scratch, why);
  if (r == Inflate::kOk) records = scratch;
  return r;
}

bool kafka_headers_valid(std::string_view headers) {
  KafkaCursor c(headers);
  const int32_t n = c.varint();
  if (!c.ok() || n < 0 || static_cast<std::size_t>(n) > c.left()) return false;
  for (int32_t i = 0; i < n && c.ok(); i++) {
    const int32_t k = c.varint();
    if (k < 0) return false;
    c.take(static_cast<std::size_t>(k));
    const int32_t v = c.varint();
    if (v < -1) return false;
    if (v > 0) c.take(static_cast<std::size_t>(v));
  }
  return c.ok() && c.at_end();
}

std::size_t kafka_encoded_size(std::span<const Record> records, int64_t now_ms) {
  const int64_t base_ts = first_ts(records, now_ms);
  std::size_t n = kKafkaHeaderBytes;
  uint32_t i = 0;
  for (const Record& r : records) {
    const int64_t ts = r.timestamp < 0 ? now_ms : r.timestamp;
    const std::size_t body = record_body_size(r, static_cast<int64_t>(static_cast<uint64_t>(ts) - static_cast<uint64_t>(base_ts)), i++);
    n += uvarint_size(zigzag(static_cast<int64_t>(body))) + body;
  }
  return n;
}

int64_t encode_kafka_batch(char* dst, int64_t base_offset, std::span<const Record> records, int64_t now_ms) {
  const int64_t base_ts = first_ts(records, now_ms);
  int64_t max_ts = std::numeric_limits<int64_t>::min();
  char* p = dst + kKafkaHeaderBytes;
  uint32_t i = 0;
  for (const Record& r : records) {
    const int64_t ts = r.timestamp < 0 ? now_ms : r.timestamp;
    max_ts = std::max(max_ts, ts);
    const auto delta = static_cast<int64_t>(static_cast<uint64_t>(ts) - static_cast<uint64_t>(base_ts));
    p = put_varint(p, static_cast<int64_t>(record_body_size(r, delta, i)));
    *p++ = 0;  // attributes
    p = put_varint(p, delta);
    p = put_varint(p, i++);
    if (r.key.empty()) {
      p = put_varint(p, -1);
    } else {
      p = put_varint(p, static_cast<int64_t>(r.key.size()));
      std::memcpy(p, r.key.data(), r.key.size());
      p += r.key.size();
    }
    p = put_varint(p, static_cast<int64_t>(r.value.size()));
    if (!r.value.empty()) std::memcpy(p, r.value.data(), r.value.size());
    p += r.value.size();
    if (r.headers.empty()) {
      *p++ = 0;
    } else {
      std::memcpy(p, r.headers.data(), r.headers.size());
      p += r.headers.size();
    }
  }
  const auto length = static_cast<std::size_t>(p - dst);
  store_be<int64_t>(dst, base_offset);
  store_be<int32_t>(dst + 8, static_cast<int32_t>(length - 12));
  store_be<int32_t>(dst + 12, 0);
  dst[16] = 2;
  store_be<int16_t>(dst + 21, 0);
  store_be<int32_t>(dst + 23, static_cast<int32_t>(records.size() - 1));
  store_be<int64_t>(dst + 27, base_ts);
  store_be<int64_t>(dst + 35, max_ts);
  store_be<int64_t>(dst + 43, -1);
  store_be<int16_t>(dst + 51, -1);
  store_be<int32_t>(dst + 53, -1);
  store_be<int32_t>(dst + 57, static_cast<int32_t>(records.size()));
  store_be<uint32_t>(dst + 17, crc32c(0, dst + kCrcFrom, length - kCrcFrom));
  return max_ts;
}

void stamp_kafka_batch(char* p, std::size_t length, int64_t base_offset, int64_t max_ts) {
  store_be<int64_t>(p, base_offset);
  store_be<int32_t>(p + 12, 0);
  if (load_be<int64_t>(p + 35) != max_ts) {
    store_be<int64_t>(p + 35, max_ts);
    store_be<uint32_t>(p + 17, crc32c(0, p + kCrcFrom, length - kCrcFrom));
  }
}

}  // namespace lionet::storage::detail
