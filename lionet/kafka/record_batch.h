// lionet/kafka/record_batch.h: Kafka's RecordBatch (magic 2) as producers send it and as Fetch
// returns it, in the Kafka API's terms: DecodedBatch/DecodedRecord (views into the request
// frame), decode_batches() with Kafka error codes, encode_batch() of records read from the
// store's older kLionet layout.
//
// Owns: mapping the codec's faults to ErrorCode. Must not: touch the store, accept a batch it
// cannot fully account for, or code the format itself: the one codec is
// storage/kafka_batch.h (layout there), which the store's kKafka segments are written in.
// Compressed batches (gzip, snappy, lz4, zstd: storage/compression.h) are inflated, bounded,
// and their records decoded like any others (to check them; the store then keeps the batch as
// it was sent).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/kafka/protocol.h"
#include "lionet/storage/kafka_batch.h"

namespace lionet::kafka {

inline constexpr std::size_t kBatchHeaderBytes = storage::kKafkaHeaderBytes;  // base_offset .. record count

// One record: offset (base_offset + delta), timestamp (base_timestamp + delta), key and value
// (nullopt: null), the header section as sent (count varint + headers) and its count.
using DecodedRecord = storage::KafkaRecord;

// A batch's header fields (storage::KafkaBatchHeader: base_offset, attributes,
// last_offset_delta, base/max timestamp, producer id/epoch, base_sequence, record_count) and
// its records.
struct DecodedBatch : storage::KafkaBatchHeader {
  std::string_view raw;  // the whole batch as sent (base_offset .. end)
  std::vector<DecodedRecord> records;
  // A compressed batch's inflated records section: its records' views point here (owned, so
  // that moving the batch keeps them valid). Null for an uncompressed batch.
  std::unique_ptr<std::string> inflated;

  int compression() const noexcept { return codec(); }
  bool transactional() const noexcept { return (attributes & 0x10) != 0; }
  bool control() const noexcept { return (attributes & 0x20) != 0; }
};

struct BatchError {
  ErrorCode code = ErrorCode::kNone;
  const char* why = "";
};

// Decodes every batch of a Produce partition's `records` bytes. The views point into `bytes`
// (or, for a compressed batch, into its `inflated`). Errors: kCorruptMessage (framing, lengths,
// counts, offsets, CRC, magic != 2, a compressed section that does not decompress),
// kUnsupportedCompressionType (a codec other than 1-4), kMessageTooLarge (a batch's records
// inflate past `max_inflated` bytes).
BatchError decode_batches(std::string_view bytes, std::vector<DecodedBatch>& out,
                          std::size_t max_inflated = std::size_t{64} << 20);

// One record for encode_batch: what the store holds plus the header section.
struct OutRecord {
  int64_t offset = 0;
  int64_t timestamp = 0;
  std::string_view key{};  // empty: encoded as a null key
  std::string_view value{};
  std::string_view headers{};  // a header section (count varint + headers); empty: no headers
};

// Appends one RecordBatch (producer -1, CreateTime, uncompressed, base_timestamp the first
// record's) holding `records`, whose offsets must be consecutive, to `out`.
void encode_batch(std::span<const OutRecord> records, std::string& out);

}  // namespace lionet::kafka
