// lionet/storage/log_options.h: every knob of one Log, with its default, cost and YAML key
// (ARCHITECTURE decision 10: storage/ reads no configuration; app/ maps conf/ onto this).
//
// Owns: FlushPolicy, LogOptions. Must not: read files or environment.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lionet::storage {

class FileSystem;

// When an append's bytes are forced to stable storage (fdatasync), and so what an
// acknowledged append survives:
//  kEveryBatch  fdatasync before append returns (group commit: concurrent appenders whose
//               batches were written before one fdatasync started share it). Survives kill -9
//               AND power loss / kernel crash.
//  kMessages    fdatasync once flush_messages records were appended since the last one.
//  kInterval    fdatasync at the first append at least flush_ms after the last one (checked
//               on append; there is no timer thread: an idle log syncs at flush()/close).
//  kNone        only at roll (the sealed segment), flush() and close.
// The last three survive kill -9 (the bytes are in the page cache once append returns) but NOT
// power loss: up to the unsynced tail is lost, never anything before it, and recovery cuts
// any torn batch.
enum class FlushPolicy { kEveryBatch, kMessages, kInterval, kNone };

// The layout of the batches a Log writes into its new segments (a segment keeps the format it
// was created with; each segment's is read from its first batch, so a directory may hold both):
//  kKafka   Kafka's RecordBatch (magic 2), byte for byte as a Kafka producer sends it and a
//           consumer reads it (detail/kafka_format.h): a Kafka Fetch can send the segment's
//           bytes as they are (sendfile), compressed batches stay compressed, record headers
//           are kept. The default.
//  kLionet  the format segments had before kKafka (detail/batch_format.h): still read, and
//           still written by a log opened with it (tests; a downgrade path).
enum class BatchFormat : uint8_t { kLionet = 1, kKafka = 2 };

// "every_batch", "messages", "ms", "none".
std::optional<FlushPolicy> parse_flush_policy(std::string_view s) noexcept;
const char* to_string(FlushPolicy p) noexcept;

struct LogOptions {
  // YAML: storage.segment_bytes. A segment rolls when the next batch would take it past this
  // (a batch never spans segments; one larger batch gets a segment of its own). Max 2 GiB.
  uint64_t segment_bytes = uint64_t{1} << 30;
  // YAML: storage.segment_ms. Roll when the active segment's first append is this old
  // (checked at append); 0 = never by age. Kafka's default: 7 days.
  int64_t segment_ms = 7LL * 24 * 3600 * 1000;
  // YAML: storage.index_interval_bytes. One sparse index entry per this many bytes of batches
  // (Kafka's default 4096). Smaller: faster offset lookups, more index memory (16 B/entry).
  uint32_t index_interval_bytes = 4096;
  // YAML: storage.flush.policy ("every_batch" | "messages" | "ms" | "none").
  FlushPolicy flush_policy = FlushPolicy::kEveryBatch;
  // YAML: storage.flush.messages (policy "messages").
  uint64_t flush_messages = 10000;
  // YAML: storage.flush.ms (policy "ms").
  int64_t flush_ms = 1000;
  // YAML: storage.retention.bytes. Delete whole oldest segments while the log stays at least
  // this big without them; -1 = unlimited. The active segment is never deleted.
  int64_t retention_bytes = -1;
  // YAML: storage.retention.ms. Delete whole segments whose newest record is older than
  // this; -1 = forever. Retention runs at each roll and at Log::enforce_retention(). A segment
  // whose records carry no time (Kafka's timestamp -1) is left to retention_bytes.
  int64_t retention_ms = -1;
  // YAML: storage.max_batch_bytes. Largest batch accepted (and believed during recovery).
  uint32_t max_batch_bytes = 64u << 20;
  // YAML: storage.preallocate_bytes. The active segment's file is extended (fallocate) this
  // many bytes ahead of its data, so most fdatasyncs of `every_batch` appends find the file
  // size unchanged and skip ext4's journal commit (measured: ~100 us instead of ~150 us per
  // sync). Cost: up to this much extra disk per partition, given back when the segment rolls
  // or the log closes (after a crash, recovery cuts the zeros). 0 = off.
  uint64_t preallocate_bytes = uint64_t{1} << 20;
  // Not YAML: the format of new segments (see BatchFormat). Opening a log whose active segment
  // holds batches of the other format seals it, so appends go to a segment of this one.
  BatchFormat batch_format = BatchFormat::kKafka;

  // Not YAML: the file layer (nullptr = default_file_system()); tests put a fault-injecting
  // one here. Must outlive the Log.
  FileSystem* fs = nullptr;
};

}  // namespace lionet::storage
