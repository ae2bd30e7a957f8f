// lionet/storage/detail/segment.h: one segment of a Log: the .log data file, its in-memory
// sparse offset/time index, and the .index / .timeindex files that persist it.
//
// Owns: the segment's file, published size/offset state, the index array, index file IO,
// and the scan that validates batches and rebuilds the index. Must not: decide rolling,
// retention or flushing (Log does).
//
// Concurrency (one writer, many readers, no lock on the read path):
//  - Writer: the Log's appender (under Log::append_mu_) is the only one that writes the file,
//    the index array and the published fields.
//  - Publication /*1*/: the writer pwrites a batch, stores its index entry and then
//    index_count_ (release), then size_ (release), then next_offset_ (release). A reader that
//    acquires size_ sees every byte below it fully written (the pwrite returned before the
//    store) and every index entry below index_count_.
//  - Index entries are written once into a preallocated array and never moved, so readers may
//    binary-search below the count they acquired while the writer appends.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "lionet/base/result.h"
#include "lionet/storage/file_system.h"
#include "lionet/storage/log_options.h"
#include "lionet/sync/mutex.h"

namespace lionet::storage::detail {

// rel_offset/position of the first batch at or after an index point, and the largest timestamp
// of every batch before that point (INT64_MIN for none): entries are nondecreasing in all three.
struct IndexEntry {
  uint32_t rel_offset;
  uint32_t position;
  int64_t max_ts_before;
};

std::string segment_prefix(const std::string& dir, int64_t base_offset);  // dir/<20 digits>

class Segment {
 public:
  // `format`: the layout of the segment's batches (formats.h; fixed for the segment's life).
  Segment(std::string prefix, int64_t base_offset, std::unique_ptr<File> log, std::size_t index_capacity,
          BatchFormat format);

  const std::string& prefix() const { return prefix_; }
  int64_t base_offset() const { return base_; }
  BatchFormat format() const { return format_; }
  File& file() const { return *log_; }

  // Published state; see /*1*/.
  uint64_t size() const { return size_.load(std::memory_order_acquire); }
  int64_t next_offset() const { return next_offset_.load(std::memory_order_acquire); }
  int64_t max_timestamp() const { return max_ts_.load(std::memory_order_acquire); }

  // Writer only: a batch of `len` bytes at `pos` holding offsets [first, next) was written.
  void publish_batch(int64_t first, int64_t next, uint64_t pos, uint32_t len, int64_t batch_max_ts,
                     uint32_t index_interval);
  // Writer only (recovery/rebuild): forget everything (index and published state).
  void reset();
  // Writer only: set the state of a sealed segment loaded from its index files.
  void set_loaded(uint64_t size, int64_t next_offset, int64_t max_ts);

  // The entry to start scanning from for `offset` (the largest with rel_offset <= offset-base).
  IndexEntry lookup_offset(int64_t offset) const;
  // The entry to start scanning from to find the first record with timestamp >= ts.
  IndexEntry lookup_time(int64_t ts) const;
  std::size_t index_entries() const { return index_count_.load(std::memory_order_acquire); }

  // Read-position hint: readers store where the next offset after their read starts, so a
  // sequential consumer finds its batch without an index scan. Relaxed: a hint is only a
  // guess, always validated against the batch header it points at.
  bool hint(int64_t offset, uint64_t* pos) const;
  void set_hint(int64_t offset, uint64_t pos) const;

  // Writes .index and .timeindex from the in-memory index (plus the trailer entry: segment max
  // timestamp and record count) and, if sync, fdatasyncs them. Writer only, on a sealed segment.
  Result<void> write_index_files(FileSystem& fs, bool sync) const;
  // Loads the index files of a sealed segment whose log is log_size bytes and whose records
  // end at next_offset; false when they are missing, short, stale or inconsistent with the
  // log (then the caller rebuilds). Checks the batch framing from the last index entry to the
  // end of the log with a few header reads (no CRC: old segments are checked on read).
  bool load_index_files(FileSystem& fs, uint64_t log_size, int64_t next_offset);

  // Group commit for FlushPolicy::kEveryBatch: returns once the file is fdatasync'd at least up
  // to `end`. One caller syncs (everything published when it starts); callers that arrive while
  // it runs wait on sync_mu_ and usually find their bytes already covered.
  Result<void> sync_to(uint64_t end);
  uint64_t synced_size() const { return synced_.load(std::memory_order_acquire); }

  // Appender-only bookkeeping (under Log::append_mu_).
  int64_t first_append_ms = -1;
  uint64_t file_bytes = 0;  // length of the .log file: size() plus preallocated zeros

 private:
  void add_index_entry(uint32_t rel, uint32_t pos, int64_t max_ts_before);

  const std::string prefix_;
  const int64_t base_;
  const std::unique_ptr<File> log_;
  const BatchFormat format_;

  std::atomic<uint64_t> size_{0};
  std::atomic<int64_t> next_offset_;
  std::atomic<int64_t> max_ts_{std::numeric_limits<int64_t>::min()};

  std::unique_ptr<IndexEntry[]> index_;
  std::size_t index_capacity_;
  std::atomic<std::size_t> index_count_{0};
  uint64_t bytes_since_index_ = 0;  // writer only

  mutable std::atomic<uint64_t> hint_{~uint64_t{0}};  // rel_offset << 32 | position

  lionet::Mutex sync_mu_;  // one fdatasync at a time
  std::atomic<uint64_t> synced_{0};  // bytes known durable (written under sync_mu_)
};

// The segment of `list` (ordered by base offset) that holds `offset`; nullptr when offset is
// below the first one's base (e.g. retention removed it after the caller checked the range).
inline const std::shared_ptr<Segment>* segment_holding(const std::vector<std::shared_ptr<Segment>>& list,
                                                       int64_t offset) {
  auto it = std::upper_bound(list.begin(), list.end(), offset,
                             [](int64_t o, const std::shared_ptr<Segment>& s) { return o < s->base_offset(); });
  return it == list.begin() ? nullptr : &*(it - 1);
}

struct ScanResult {
  uint64_t valid_end = 0;  // end of the last good batch
  int64_t next_offset = 0;  // one past its last record
  int64_t max_ts = std::numeric_limits<int64_t>::min();
  uint64_t batches = 0;
  bool stopped_early = false;  // bytes after valid_end are not data (bad or torn batch)
  bool zero_tail = false;  // stopped at a zero length: preallocated space, not damage
  std::string reason;  // why it stopped early (for the recovery log line)
};

// Reads the whole segment file, validating every batch (framing, CRC, offset continuity from
// the segment's base), and rebuilds seg's index and published state from the good prefix.
Result<ScanResult> scan_segment(Segment& seg, uint64_t file_size, uint32_t index_interval, uint32_t max_batch_bytes);

}  // namespace lionet::storage::detail
