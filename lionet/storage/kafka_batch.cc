// lionet/storage/kafka_batch.cc: Kafka RecordBatch v2, the one codec (layout in the .h).
#include "lionet/storage/kafka_batch.h"

#include <cstring>
#include <limits>

#include "lionet/storage/crc32c.h"
#include "lionet/storage/detail/kafka_format.h"

namespace lionet::storage {
using detail::load_be;
using detail::store_be;
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
         varint_size(static_cast<int64_t>(r.value.size())) + r.value.size() +
         (r.headers.empty() ? 1 : r.headers.size());
}

int64_t timestamp_of(const Record& r, int64_t now_ms) { return r.timestamp < 0 && now_ms >= 0 ? now_ms : r.timestamp; }
int64_t delta(int64_t ts, int64_t base) {
  return static_cast<int64_t>(static_cast<uint64_t>(ts) - static_cast<uint64_t>(base));
}
}  // namespace

KafkaBatchHeader read_kafka_batch_header(const char* p) {
  KafkaBatchHeader h;
  h.base_offset = load_be<int64_t>(p);
  const int32_t len = load_be<int32_t>(p + 8);
  h.length = len < 0 || static_cast<uint64_t>(len) + 12 > std::numeric_limits<uint32_t>::max()
                 ? 0
                 : static_cast<uint32_t>(len) + 12;
  h.magic = static_cast<int8_t>(p[16]);
  h.crc = load_be<uint32_t>(p + 17);
  h.attributes = load_be<int16_t>(p + 21);
  h.last_offset_delta = load_be<int32_t>(p + 23);
  h.base_timestamp = load_be<int64_t>(p + 27);
  h.max_timestamp = load_be<int64_t>(p + 35);
  h.producer_id = load_be<int64_t>(p + 43);
  h.producer_epoch = load_be<int16_t>(p + 51);
  h.base_sequence = load_be<int32_t>(p + 53);
  h.record_count = load_be<int32_t>(p + 57);
  return h;
}

const char* kafka_batch_problem(const char* p, const KafkaBatchHeader& h) {
  if (h.length < kKafkaMinBatchBytes) return "a batch length shorter than a batch";
  if (h.magic != 2) return "a batch of magic other than 2";
  if (crc32c(0, p + kCrcFrom, h.length - kCrcFrom) != h.crc) return "a batch whose CRC-32C does not match";
  if (h.record_count < 1 || h.last_offset_delta != h.record_count - 1)
    return "the record count does not match last_offset_delta";
  return nullptr;
}

Inflate kafka_batch_records(const char* p, const KafkaBatchHeader& h, std::size_t max_inflated, std::string& scratch,
                            std::string_view& records, const char*& why) {
  const std::string_view stored(p + kKafkaHeaderBytes, h.length - kKafkaHeaderBytes);
  if (h.codec() == 0) {
    records = stored;
    return Inflate::kOk;
  }
  scratch.clear();
  why = "";
  const Inflate r = decompress(h.codec(), stored, max_inflated, scratch, why);
  if (r == Inflate::kOk) records = scratch;
  return r;
}

bool kafka_headers_valid(std::string_view headers, uint32_t* count) {
  detail::KafkaCursor c(headers);
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
  if (!c.ok() || !c.at_end()) return false;
  if (count) *count = static_cast<uint32_t>(n);
  return true;
}

std::size_t kafka_batch_size(std::span<const Record> records, int64_t now_ms) {
  if (records.empty()) return 0;
  const int64_t base_ts = timestamp_of(records.front(), now_ms);
  std::size_t n = kKafkaHeaderBytes;
  uint32_t i = 0;
  for (const Record& r : records) {
    const std::size_t body = record_body_size(r, delta(timestamp_of(r, now_ms), base_ts), i++);
    n += uvarint_size(zigzag(static_cast<int64_t>(body))) + body;
  }
  return n;
}

int64_t encode_kafka_batch(char* dst, int64_t base_offset, std::span<const Record> records, int64_t now_ms) {
  const int64_t base_ts = timestamp_of(records.front(), now_ms);
  int64_t max_ts = std::numeric_limits<int64_t>::min();
  // Each record is written in place, its length first, computed from the fields' sizes, so no
  // record is built aside and copied (the values are most of a Fetch response's bytes).
  char* p = dst + kKafkaHeaderBytes;
  uint32_t i = 0;
  for (const Record& r : records) {
    const int64_t ts = timestamp_of(r, now_ms);
    max_ts = std::max(max_ts, ts);
    const int64_t d = delta(ts, base_ts);
    p = put_varint(p, static_cast<int64_t>(record_body_size(r, d, i)));
    *p++ = 0;  // attributes
    p = put_varint(p, d);
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

}  // namespace lionet::storage
