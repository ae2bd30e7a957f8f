// lionet/storage/detail/batch_format.cc: encoding and CRC of record batches (layout in the .h).
#include "lionet/storage/detail/batch_format.h"

#include <algorithm>
#include <limits>

#include "lionet/storage/crc32c.h"

namespace lionet::storage::detail {
namespace {
template <class T>
inline void store_le(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
}  // namespace

uint32_t batch_crc(const char* batch, std::size_t length) {
  uint32_t c = crc32c(0, batch, 4);  // the length field
  return crc32c(c, batch + 8, length - 8);
}

int64_t encode_batch(char* dst, int64_t base_offset, std::span<const Record> records, int64_t now_ms) {
  const int64_t first_ts = records.front().timestamp < 0 ? now_ms : records.front().timestamp;
  int64_t max_ts = std::numeric_limits<int64_t>::min();
  std::size_t pos = kBatchHeaderBytes;
  uint32_t i = 0;
  for (const Record& r : records) {
    const int64_t ts = r.timestamp < 0 ? now_ms : r.timestamp;
    max_ts = std::max(max_ts, ts);
    char* h = dst + pos;
    store_le<int64_t>(h, ts - first_ts);
    store_le<uint32_t>(h + 8, i++);
    store_le<uint32_t>(h + 12, static_cast<uint32_t>(r.key.size()));
    store_le<uint32_t>(h + 16, static_cast<uint32_t>(r.value.size()));
    pos += kRecordHeaderBytes;
    if (!r.key.empty()) std::memcpy(dst + pos, r.key.data(), r.key.size());
    pos += r.key.size();
    if (!r.value.empty()) std::memcpy(dst + pos, r.value.data(), r.value.size());
    pos += r.value.size();
  }
  store_le<uint32_t>(dst, static_cast<uint32_t>(pos));
  store_le<int64_t>(dst + 8, base_offset);
  store_le<uint32_t>(dst + 16, static_cast<uint32_t>(records.size()));
  store_le<uint32_t>(dst + 20, 0);
  store_le<int64_t>(dst + 24, first_ts);
  store_le<int64_t>(dst + 32, max_ts);
  store_le<uint32_t>(dst + 4, batch_crc(dst, pos));
  return max_ts;
}

bool batch_valid(const char* p, const BatchHeader& h, std::size_t max_len) {
  if (h.length < kBatchHeaderBytes + kRecordHeaderBytes || h.length > max_len) return false;
  if (h.record_count == 0 || h.attributes != 0) return false;
  return batch_crc(p, h.length) == h.crc;
}

}  // namespace lionet::storage::detail
