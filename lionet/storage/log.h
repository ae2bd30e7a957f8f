// lionet/storage/log.h: lionet::storage::Log, one directory of segments: a Kafka-style
// append-only log of records (offset, timestamp, key, value).
//
// Owns: the segment list of one directory, appending (encode, roll, flush policy), reading,
// offset_for_time, truncate_to, retention and recovery on open. Must not: know topics (Store
// does), read configuration (LogOptions is data), or throw on the request path.
//
// Files in the directory, per segment, named by the segment's base offset (20 digits):
//   00000000000000000000.log        record batches (detail/batch_format.h), CRC-32C each
//   00000000000000000000.index      sparse: (relative offset, position) per index_interval_bytes
//   00000000000000000000.timeindex  (max timestamp before that point, relative offset) + trailer
// Index files are written when a segment is sealed (rolled); the active segment's index lives
// in memory and is rebuilt by the scan recovery does on every open.
//
// Recovery on open: sealed segments load their index files (checked against the log; missing
// or stale ones are rebuilt by a full validating scan). The active (last) segment is always
// scanned: the scan stops at the first batch whose length, CRC, framing or offset is wrong,
// the file is truncated there and the cut is logged (logger "storage"). A bad batch in a
// sealed segment is not cut: reading it returns Errc::kCorrupt, never its bytes.
//
// Concurrency:
//  - append/append_batch/flush/truncate_to/enforce_retention serialise on one lionet::Mutex
//    (one appender at a time; callable from any fibers/threads). With FlushPolicy::kEveryBatch
//    the fdatasync runs after that mutex is released, so concurrent appenders share syncs.
//  - read/offset_for_time/start_offset/end_offset/size_bytes may run on any number of fibers or
//    threads at once, concurrently with the appender, without locks on the data path. Readers
//    see only batches whose write completed (size published with release after the pwrite,
//    acquired by readers: detail/segment.h /*1*/). The segment list is an immutable
//    snapshot (shared_ptr) replaced on roll/retention/truncate, so a reader keeps the segments
//    it started with alive (a deleted segment's fd stays open until its last reader finishes).
//  - A read racing truncate_to over the range it reads may return Errc::kCorrupt or
//    kOffsetOutOfRange for that range; it never returns bytes that failed their CRC.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/base/spinlock.h"
#include "lionet/storage/errors.h"
#include "lionet/storage/log_options.h"
#include "lionet/storage/record.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"

namespace lionet::storage {

class File;
namespace detail {
class Segment;
}

class Log {
 public:
  // Opens (creating the directory and a first segment at offset 0 if empty) and recovers.
  static Result<std::unique_ptr<Log>> open(const std::string& dir, const LogOptions& options);
  // Flushes (fdatasync of the active segment) and closes.
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // Appends one record; returns its offset once the flush policy is satisfied.
  Result<int64_t> append(const Record& record);
  // Appends the records as one batch (one write, one CRC, one sync); returns the first offset:
  // the records get first, first+1, ... Empty, or a record whose `headers` is not a Kafka
  // header section (kKafka format): Errc::kInvalidArgument.
  Result<int64_t> append_batch(std::span<const Record> records);
  // Appends Kafka RecordBatches (magic 2, e.g. a Kafka Produce's) as they are, one after the
  // other (one write, one sync; a roll never splits them): each is checked first (header rules
  // and CRC-32C of detail/kafka_format.h, then every record, a compressed one inflated within
  // max_batch_bytes), then gets its base offset (the next offset) and partition leader epoch 0,
  // and its max timestamp if its records say otherwise (the CRC recomputed: what Kafka does).
  // Returns the first batch's base offset. Errors, nothing appended: kInvalidArgument (empty,
  // or a batch that is not valid), kRecordTooLarge (together larger than max_batch_bytes, or
  // one whose records inflate past it). A log writing BatchFormat::kLionet stores their records as one
  // batch of its own format, without their headers.
  Result<int64_t> append_kafka_batches(std::span<const std::string_view> batches);

  // Whole records from `offset` on, from one segment: always the batch holding `offset` (even
  // if larger than max_bytes, so a reader always progresses), then following batches while the
  // total stays within max_bytes. offset == end_offset(): ok, no records. Outside
  // [start_offset(), end_offset()]: Errc::kOffsetOutOfRange. The batch holding `offset` fails
  // its CRC or framing: Errc::kCorrupt (a damaged batch after it only ends the read early).
  // The out-parameter form reuses out's buffers.
  Result<void> read(int64_t offset, std::size_t max_bytes, ReadResult& out) const;
  Result<ReadResult> read(int64_t offset, std::size_t max_bytes) const;

  // Where stored Kafka batches (BatchFormat::kKafka segments) lie, to send them as they are (a
  // Kafka Fetch by sendfile): whole batches from the one holding `offset` (which may begin
  // before it: Kafka consumers skip those records), at least that one, then following ones
  // of the same segment while the total stays within max_bytes. Their headers are checked
  // (offsets follow on, lengths fit, magic 2), not their CRCs: the consumer checks those, as
  // with Kafka (read() checks them). Offsets as read(); offset == end_offset(): ok, 0 bytes.
  // When the segment holding `offset` is in BatchFormat::kLionet, `format` says so and
  // nothing else is set: use read().
  struct StoredBatches {
    BatchFormat format = BatchFormat::kKafka;
    std::shared_ptr<const void> keep;  // keeps the segment's file open while it is sent
    File* file = nullptr;  // the segment's file (native_handle() for sendfile)
    uint64_t position = 0;
    uint64_t bytes = 0;
    int64_t first_offset = 0;  // the first batch's base offset (<= offset)
    int64_t next_offset = 0;  // one past the range's last record
  };
  Result<StoredBatches> read_stored(int64_t offset, std::size_t max_bytes) const;

  // The first offset whose record has timestamp >= ts_ms (end_offset() if none).
  Result<int64_t> offset_for_time(int64_t ts_ms) const;

  // fdatasync of everything appended so far (whatever the policy).
  Result<void> flush();
  // Removes every record with offset >= offset (a batch cut in the middle is rewritten with its
  // first records: a compressed Kafka batch as plain ones, split to fit max_batch_bytes, or
  // kRecordTooLarge with nothing changed if one record alone cannot); the next append gets
  // `offset`. Durable when it returns. If the files do not scan back as expected afterwards
  // (an IO error), the log refuses appends (kLogFailed), as after a failed fdatasync.
  Result<void> truncate_to(int64_t offset);
  // Deletes whole oldest segments per retention_bytes / retention_ms (now_ms < 0: the wall
  // clock). Returns how many were deleted. Also runs at each roll.
  Result<std::size_t> enforce_retention(int64_t now_ms = -1);

  // Waits until end_offset() > offset (a record at `offset` or later can be read), the deadline
  // passes (nullopt: none), or wake_waiters() is called; returns end_offset() then. A fiber
  // parks (its worker runs others), a plain thread blocks: for live tails and long-poll reads,
  // with no polling. Any number of waiters; an append costs them one atomic load when there
  // are none.
  int64_t wait_beyond(int64_t offset, std::optional<TimePoint> deadline) const;
  // Wakes every fiber in wait_beyond now (shutdown: they return the current end_offset()).
  void wake_waiters() const;

  int64_t start_offset() const { return start_offset_.load(std::memory_order_acquire); }
  int64_t end_offset() const { return end_offset_.load(std::memory_order_acquire); }  // next offset
  uint64_t size_bytes() const;
  std::size_t segment_count() const;
  // Base offsets of the current segments, oldest first.
  std::vector<int64_t> segment_base_offsets() const;
  const std::string& dir() const { return dir_; }
  const LogOptions& options() const { return opt_; }

 private:
  using SegmentList = std::vector<std::shared_ptr<detail::Segment>>;
  Log(std::string dir, const LogOptions& options);

  std::shared_ptr<const SegmentList> snapshot() const;
  void publish(std::shared_ptr<const SegmentList> list);
  Result<void> recover();
  Result<std::shared_ptr<detail::Segment>> create_segment(int64_t base);
  Result<void> roll(int64_t now_ms);
  // One batch of an append: offsets [first, next), `len` bytes at encode_buf_[at].
  struct Written {
    int64_t first, next;
    uint32_t at, len;
    int64_t max_ts;
  };
  // Under append_mu_: refuses a failed log, rolls when the append (len bytes, `records`
  // records) needs it, sizes encode_buf_; returns the file position to write at.
  Result<uint64_t> prepare_append(std::size_t len, std::size_t records, int64_t now);
  // Under lk (append_mu_): writes encode_buf_[0, len) at pos, publishes `batches`, applies the
  // flush policy (kEveryBatch unlocks lk for the sync). Returns the first batch's offset.
  Result<int64_t> finish_append(std::unique_lock<lionet::Mutex>& lk, uint64_t pos, std::size_t len,
                                std::span<const Written> batches, int64_t now);
  // Under append_mu_: the active segment takes appends in opt_.batch_format (an empty one is
  // reopened in it; one holding batches of the other format is sealed by a roll).
  Result<void> adopt_format(int64_t now_ms);
  Result<std::size_t> enforce_retention_locked(int64_t now_ms);
  void remove_segment_files(const detail::Segment& seg);
  // Records at or past `end` (the end_offset() the caller saw) are left out: a segment publishes
  // a batch before end_offset_ moves past it, and a reader must never be handed an offset that
  // end_offset() does not cover yet (its next read there would be kOffsetOutOfRange).
  Result<void> read_segment(const detail::Segment& seg, int64_t offset, std::size_t max_bytes, ReadResult& out,
                            int64_t end) const;
  std::size_t active_index_capacity() const;
  // Preallocation (LogOptions::preallocate_bytes), appender only: the active segment's file
  // is at least `end` bytes long; a failure only turns preallocation off (the pwrite decides).
  void preallocate(detail::Segment& seg, uint64_t end);
  // Cuts the file back to its data (before a segment is sealed or the log closes).
  Result<void> release_preallocation(detail::Segment& seg);

  const std::string dir_;
  const LogOptions opt_;
  FileSystem& fs_;

  mutable SpinLock segments_lock_;  // guards segments_ (the pointer, not the list)
  std::shared_ptr<const SegmentList> segments_;  // written under append_mu_ + segments_lock_

  std::atomic<int64_t> start_offset_{0};  // written by the appender (release), read by anyone
  std::atomic<int64_t> end_offset_{0};  // idem: stored after the segment published the batch
  std::atomic<bool> failed_{false};  // an fdatasync failed: appends refused

  // wait_beyond: waiters_ counts them (seq_cst, against the appender's fence after it stored
  // end_offset_: either the waiter sees the new end or the appender sees the waiter);
  // appended_ is notified under wait_mu_ after each append that found a waiter.
  void notify_appended() const;
  mutable lionet::Mutex wait_mu_;
  mutable lionet::CondVar appended_;
  mutable std::atomic<int> waiters_{0};
  mutable std::atomic<uint64_t> wake_generation_{0};  // bumped by wake_waiters()

  lionet::Mutex append_mu_;
  // Appender-owned (under append_mu_):
  std::shared_ptr<detail::Segment> active_;
  int64_t next_offset_ = 0;
  std::vector<char> encode_buf_;
  uint64_t unflushed_messages_ = 0;
  int64_t last_flush_ms_ = 0;
  bool preallocate_off_ = false;  // the file system said EOPNOTSUPP
};

}  // namespace lionet::storage
