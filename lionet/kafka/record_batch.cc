// lionet/kafka/record_batch.cc: RecordBatch v2 decoding and encoding (see record_batch.h).
#include "lionet/kafka/record_batch.h"

#include <cstring>

#include "lionet/storage/kafka_batch.h"

namespace lionet::kafka {
using storage::Inflate;

BatchError decode_batches(std::string_view bytes, std::vector<DecodedBatch>& out, std::size_t max_inflated) {
  out.clear();
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t left = bytes.size() - at;
    const char* p = bytes.data() + at;
    if (left < 12) return {ErrorCode::kCorruptMessage, "a batch cut short before its length"};
    // The length field first: the header is read only once the whole batch is known to be there.
    uint32_t be_len;
    std::memcpy(&be_len, p + 8, 4);
    const auto len = static_cast<int32_t>(__builtin_bswap32(be_len));
    if (len < static_cast<int32_t>(kBatchHeaderBytes - 12) || static_cast<std::size_t>(len) > left - 12)
      return {ErrorCode::kCorruptMessage, "a batch length past the records"};
    const storage::KafkaBatchHeader h = storage::read_kafka_batch_header(p);
    if (const char* why = storage::kafka_batch_problem(p, h)) return {ErrorCode::kCorruptMessage, why};
    DecodedBatch b;
    static_cast<storage::KafkaBatchHeader&>(b) = h;
    b.raw = std::string_view(p, h.length);
    if (b.compression() > 4) return {ErrorCode::kUnsupportedCompressionType, "an unknown compression codec"};
    std::string_view records;
    const char* why = "";
    if (b.compression() != 0) b.inflated = std::make_unique<std::string>();
    std::string none;
    switch (storage::kafka_batch_records(p, h, max_inflated, b.inflated ? *b.inflated : none, records, why)) {
      case Inflate::kOk: break;
      case Inflate::kTooLarge: return {ErrorCode::kMessageTooLarge, "a batch that inflates past the limit"};
      case Inflate::kUnknownCodec: return {ErrorCode::kUnsupportedCompressionType, why};
      case Inflate::kBadStream: return {ErrorCode::kCorruptMessage, why};
    }
    b.records.reserve(static_cast<std::size_t>(h.record_count));
    int64_t max_ts = 0;
    why = storage::walk_kafka_records(records, h, &max_ts,
                                      [&](const storage::KafkaRecord& r) { b.records.push_back(r); });
    if (why) return {ErrorCode::kCorruptMessage, why};
    out.push_back(std::move(b));
    at += h.length;
  }
  return {};
}

void encode_batch(std::span<const OutRecord> records, std::string& out) {
  if (records.empty()) return;
  std::vector<storage::Record> recs;
  recs.reserve(records.size());
  for (const OutRecord& r : records) recs.push_back(storage::Record{r.key, r.value, r.timestamp, r.headers});
  const std::size_t start = out.size();
  out.resize(start + storage::kafka_batch_size(recs, -1));
  storage::encode_kafka_batch(out.data() + start, records.front().offset, recs, -1);
}

}  // namespace lionet::kafka
