// lionet/storage/record.h: what goes into a Log and what comes out of it.
//
// Owns: Record (an append's input, borrowed views), RecordView (one stored record, views into a
// ReadResult's buffer) and ReadResult (the buffer and the views of one read). Must not: know
// the on-disk format (detail/batch_format.h does).
//
// Keys are optional: an empty key is stored as a zero-length key (there is no null/empty
// distinction). Timestamps are milliseconds since the Unix epoch (Kafka's convention); an
// append with timestamp < 0 stamps the record with the wall clock at the append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lionet::storage {

// Bounds of a batch's stored size (what Read's max_bytes counts), whichever format its segment
// has: at most kBatchOverheadBytes + the sum over its records of (kRecordOverheadBytes + key
// size + value size + header bytes), e.g. to keep a batch under max_batch_bytes. Exact sizes:
// BatchFormat::kKafka 61 + per record 7 to 32 bytes of varints (less when compressed);
// BatchFormat::kLionet 40 + per record 20 (no headers).
inline constexpr std::size_t kBatchOverheadBytes = 61;
inline constexpr std::size_t kRecordOverheadBytes = 32;

struct Record {
  std::string_view key{};
  std::string_view value{};
  int64_t timestamp = -1;  // ms since epoch; < 0: now
  // Kafka record headers, as Kafka encodes them (header count varint, then each header); empty:
  // none. Kept by BatchFormat::kKafka segments; a kLionet segment cannot hold them (dropped).
  std::string_view headers{};
};

struct RecordView {
  int64_t offset = 0;
  int64_t timestamp = 0;
  std::string_view key;  // points into the ReadResult that returned it
  std::string_view value;  // idem
  std::string_view headers;  // idem: the header section as in Record (empty: none)
};

// The result of Log::read: whole records, in offset order, every one from a batch whose
// CRC-32C was verified by this read. Views stay valid while the ReadResult lives and is not
// reused for another read; moving it keeps them valid (the buffer moves, it is not copied).
// Reuse one ReadResult across reads to read without allocating once its buffers are big enough.
class ReadResult {
 public:
  ReadResult() = default;
  ReadResult(ReadResult&&) noexcept = default;
  ReadResult& operator=(ReadResult&&) noexcept = default;
  ReadResult(const ReadResult&) = delete;
  ReadResult& operator=(const ReadResult&) = delete;

  std::span<const RecordView> records() const noexcept { return records_; }
  bool empty() const noexcept { return records_.empty(); }
  std::size_t size() const noexcept { return records_.size(); }
  const RecordView& operator[](std::size_t i) const noexcept { return records_[i]; }
  // The offset to read next: one past the last record returned (== the requested offset when
  // nothing was returned, i.e. at the end of the log).
  int64_t next_offset() const noexcept { return next_offset_; }
  // Bytes of stored batches this read returned (headers included): what max_bytes bounds.
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  friend class Log;
  std::vector<char> buffer_;
  // Inflated records sections of compressed batches (kKafka segments): views point into them;
  // kept (and reused) across reads, each string at a stable address.
  std::vector<std::unique_ptr<std::string>> inflated_;
  std::size_t inflated_used_ = 0;
  std::vector<RecordView> records_;
  int64_t next_offset_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace lionet::storage
