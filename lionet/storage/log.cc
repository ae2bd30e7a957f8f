// lionet/storage/log.cc: opening and recovering a Log, appending, rolling, flushing,
// retention and truncation. Reading is in log_read.cc.
#include "lionet/storage/log.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "lionet/log/log.h"
#include "lionet/storage/detail/formats.h"
#include "lionet/storage/detail/segment.h"
#include "lionet/storage/file_system.h"

namespace lionet::storage {
namespace {

using detail::Segment;

const std::shared_ptr<spdlog::logger>& logger() {
  static const std::shared_ptr<spdlog::logger> lg = lionet::log::get("storage");
  return lg;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "00000000000000000042.log" -> 42; -1 for anything else, including 20 digits past INT64_MAX
// (no offset this log hands out; such a name is not ours and is left alone).
int64_t parse_segment_name(const std::string& name) {
  if (name.size() != 24 || name.compare(20, 4, ".log") != 0) return -1;
  int64_t v = 0;
  for (int i = 0; i < 20; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    const int digit = name[i] - '0';
    if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return -1;
    v = v * 10 + digit;
  }
  return v;
}

Result<void> validate(const LogOptions& o) {
  if (o.segment_bytes < 1024 || o.segment_bytes > (uint64_t{2} << 30) || o.index_interval_bytes == 0 ||
      o.max_batch_bytes < 1024 || o.max_batch_bytes > (1u << 30) ||
      (o.flush_policy == FlushPolicy::kMessages && o.flush_messages == 0) ||
      (o.flush_policy == FlushPolicy::kInterval && o.flush_ms < 0) || o.preallocate_bytes > (uint64_t{1} << 30)) {
    return make_error_code(Errc::kInvalidArgument);
  }
  return {};
}

}  // namespace

std::optional<FlushPolicy> parse_flush_policy(std::string_view s) noexcept {
  if (s == "every_batch") return FlushPolicy::kEveryBatch;
  if (s == "messages") return FlushPolicy::kMessages;
  if (s == "ms") return FlushPolicy::kInterval;
  if (s == "none") return FlushPolicy::kNone;
  return std::nullopt;
}

const char* to_string(FlushPolicy p) noexcept {
  switch (p) {
    case FlushPolicy::kEveryBatch: return "every_batch";
    case FlushPolicy::kMessages: return "messages";
    case FlushPolicy::kInterval: return "ms";
    case FlushPolicy::kNone: return "none";
  }
  return "?";
}

Log::Log(std::string dir, const LogOptions& options)
    : dir_(std::move(dir)), opt_(options), fs_(options.fs ? *options.fs : default_file_system()) {}

Log::~Log() {
  if (!active_) return;
  std::lock_guard<lionet::Mutex> g(append_mu_);
  if (auto r = release_preallocation(*active_); !r) {
    LIONET_LOG_WARN(logger(), "{}: giving back preallocated space at close failed ({}); the next open cuts it",
                    active_->prefix(), r.error().message());
  }
  if (auto r = active_->sync_to(active_->size()); !r) {
    LIONET_LOG_ERROR(logger(), "{}: fdatasync at close failed: {}", dir_, r.error().message());
  }
}

Result<std::unique_ptr<Log>> Log::open(const std::string& dir, const LogOptions& options) {
  if (auto r = validate(options); !r) return r.error();
  std::unique_ptr<Log> log(new Log(dir, options));
  if (auto r = log->recover(); !r) return r.error();
  return log;
}

std::size_t Log::active_index_capacity() const {
  return static_cast<std::size_t>(opt_.segment_bytes / opt_.index_interval_bytes + 2);
}

void Log::preallocate(Segment& seg, uint64_t end) {
  if (end <= seg.file_bytes || opt_.preallocate_bytes == 0 || preallocate_off_) return;
  // Ahead by preallocate_bytes, never past the segment's roll size (a lone larger batch gets
  // only its own bytes).
  const uint64_t target = std::max(end, std::min(end + opt_.preallocate_bytes, opt_.segment_bytes));
  if (target == end) return;  // nothing gained: the pwrite extends the file anyway
  if (auto r = seg.file().allocate(target); !r) {
    if (r.error() == std::errc::operation_not_supported) {
      preallocate_off_ = true;
      LIONET_LOG_INFO(logger(), "{}: the file system cannot preallocate (fallocate): appends grow the file", dir_);
    }
    return;  // ENOSPC and the like: the pwrite that follows reports what matters
  }
  seg.file_bytes = target;
}

Result<void> Log::release_preallocation(Segment& seg) {
  if (seg.file_bytes <= seg.size()) return {};
  if (auto r = seg.file().truncate(seg.size()); !r) return r;
  seg.file_bytes = seg.size();
  return seg.file().datasync();  // the shorter size durable even when sync_to finds nothing new
}

std::shared_ptr<const Log::SegmentList> Log::snapshot() const {
  std::lock_guard<SpinLock> g(segments_lock_);
  return segments_;
}

void Log::publish(std::shared_ptr<const SegmentList> list) {
  std::lock_guard<SpinLock> g(segments_lock_);
  segments_.swap(list);  // the old list is released after the spin lock (outside it)
}

Result<std::shared_ptr<Segment>> Log::create_segment(int64_t base) {
  const std::string prefix = detail::segment_prefix(dir_, base);
  (void)fs_.remove(prefix + ".index");  // stale leftovers of an earlier segment at this base
  (void)fs_.remove(prefix + ".timeindex");
  auto f = fs_.open(prefix + ".log", true);
  if (!f) return f.error();
  if (auto r = (*f)->truncate(0); !r) return r.error();
  // The new name must survive power loss before anything acknowledged lands in it.
  if (auto r = fs_.sync_dir(dir_); !r) return r.error();
  return std::make_shared<Segment>(prefix, base, std::move(*f), active_index_capacity(), opt_.batch_format);
}

Result<void> Log::recover() {
  if (auto r = fs_.create_dirs(dir_); !r) return r;
  auto names = fs_.list(dir_);
  if (!names) return names.error();
  std::vector<int64_t> bases;
  for (const std::string& n : *names) {
    if (int64_t b = parse_segment_name(n); b >= 0) bases.push_back(b);
  }
  std::sort(bases.begin(), bases.end());
  auto list = std::make_shared<SegmentList>();
  if (bases.empty()) {
    auto seg = create_segment(0);
    if (!seg) return seg.error();
    list->push_back(std::move(*seg));
  }
  for (std::size_t i = 0; i < bases.size(); i++) {
    const std::string prefix = detail::segment_prefix(dir_, bases[i]);
    auto f = fs_.open(prefix + ".log", false);
    if (!f) return f.error();
    auto size = (*f)->size();
    if (!size) return size.error();
    const bool sealed = i + 1 < bases.size();
    const std::size_t cap =
        sealed ? static_cast<std::size_t>(*size / opt_.index_interval_bytes + 2) : active_index_capacity();
    BatchFormat format = opt_.batch_format;  // an empty file's
    if (*size > 0) {
      char first[kKafkaHeaderBytes];
      auto n = (*f)->pread(first, sizeof first, 0);
      if (!n) return n.error();
      format = detail::detect_format(first, *n, bases[i]);
    }
    auto seg = std::make_shared<Segment>(prefix, bases[i], std::move(*f), cap, format);
    // The same file as a segment of the other layout: for when damage to its first batch made
    // the detection guess wrong (the index files, or a scan, then tell which layout it has).
    const BatchFormat other = format == BatchFormat::kKafka ? BatchFormat::kLionet : BatchFormat::kKafka;
    auto reopen_as_other = [&]() -> Result<std::shared_ptr<Segment>> {
      auto g = fs_.open(prefix + ".log", false);
      if (!g) return g.error();
      return std::make_shared<Segment>(prefix, bases[i], std::move(*g), cap, other);
    };
    if (sealed) {
      if (seg->load_index_files(fs_, *size, bases[i + 1])) {
        list->push_back(std::move(seg));
        continue;
      }
      if (*size > 0) {
        auto alt = reopen_as_other();
        if (!alt) return alt.error();
        if ((*alt)->load_index_files(fs_, *size, bases[i + 1])) {
          list->push_back(std::move(*alt));
          continue;
        }
      }
    }
    auto scan = detail::scan_segment(*seg, *size, opt_.index_interval_bytes, opt_.max_batch_bytes);
    if (!scan) return scan.error();
    if (scan->valid_end == 0 && scan->stopped_early && !scan->zero_tail && *size > 0) {
      // Nothing good from the first byte on: the other layout may read it (a damaged first
      // batch made the guess); kept if it gets further.
      auto alt = reopen_as_other();
      if (!alt) return alt.error();
      auto alt_scan = detail::scan_segment(**alt, *size, opt_.index_interval_bytes, opt_.max_batch_bytes);
      if (!alt_scan) return alt_scan.error();
      if (alt_scan->valid_end > 0) {
        seg = std::move(*alt);
        scan = std::move(alt_scan);
      }
    }
    if (sealed && scan->zero_tail && scan->next_offset == bases[i + 1]) {
      // Preallocated zeros a crash left behind while the segment was being sealed.
      LIONET_LOG_INFO(logger(), "{}.log: {} preallocated bytes after the last batch cut", prefix,
                      *size - scan->valid_end);
      if (auto r = seg->file().truncate(scan->valid_end); !r) return r;
      if (auto r = seg->file().datasync(); !r) return r;
      if (auto r = seg->write_index_files(fs_, true); !r) {
        LIONET_LOG_WARN(logger(), "{}: writing index files failed: {}", prefix, r.error().message());
      }
    } else if (sealed) {
      if (scan->stopped_early || scan->next_offset != bases[i + 1]) {
        LIONET_LOG_ERROR(logger(),
                         "{}.log: sealed segment is damaged at position {} ({}); offsets {}..{} will read as "
                         "corrupt; the file is left as it is",
                         prefix, scan->valid_end, scan->stopped_early ? scan->reason : "records end early",
                         scan->next_offset, bases[i + 1] - 1);
      } else {
        LIONET_LOG_WARN(logger(), "{}: index files missing or stale, rebuilt ({} batches)", prefix, scan->batches);
      }
      if (auto r = seg->write_index_files(fs_, true); !r) {
        LIONET_LOG_WARN(logger(), "{}: writing index files failed: {}", prefix, r.error().message());
      }
    } else {
      if (scan->zero_tail) {
        // Preallocated space (the log was not closed): no data is lost, the zeros go.
        LIONET_LOG_INFO(logger(), "{}.log: {} preallocated bytes cut; the log ends at offset {}", prefix,
                        *size - scan->valid_end, scan->next_offset);
        if (auto r = seg->file().truncate(scan->valid_end); !r) return r;
        if (auto r = seg->file().datasync(); !r) return r;
      } else if (scan->stopped_early) {
        LIONET_LOG_WARN(logger(),
                        "{}.log: recovery cut {} bytes at position {} ({}); the log ends at offset {} "
                        "({} good batches in this segment)",
                        prefix, *size - scan->valid_end, scan->valid_end, scan->reason, scan->next_offset,
                        scan->batches);
        if (auto r = seg->file().truncate(scan->valid_end); !r) return r;
        if (auto r = seg->file().datasync(); !r) return r;
      }
      if (scan->batches > 0) seg->first_append_ms = wall_ms();
      seg->file_bytes = scan->valid_end < *size ? scan->valid_end : *size;
    }
    list->push_back(std::move(seg));
  }
  active_ = list->back();
  next_offset_ = active_->next_offset();
  start_offset_.store(list->front()->base_offset(), std::memory_order_release);
  end_offset_.store(next_offset_, std::memory_order_release);
  last_flush_ms_ = wall_ms();
  publish(std::move(list));
  std::lock_guard<lionet::Mutex> g(append_mu_);
  return adopt_format(wall_ms());
}

Result<void> Log::adopt_format(int64_t now_ms) {
  if (active_->format() == opt_.batch_format) return {};
  if (active_->size() > 0) {
    LIONET_LOG_INFO(logger(),
                    "{}.log holds batches in the {} format: sealed, appends go to a new segment in the {} format",
                    active_->prefix(), active_->format() == BatchFormat::kKafka ? "kafka" : "lionet",
                    opt_.batch_format == BatchFormat::kKafka ? "kafka" : "lionet");
    return roll(now_ms);
  }
  // Empty (or zeros only): the same file becomes a segment of the configured format.
  if (auto r = active_->file().truncate(0); !r) return r;
  auto f = fs_.open(active_->prefix() + ".log", false);
  if (!f) return f.error();
  auto fresh = std::make_shared<Segment>(active_->prefix(), active_->base_offset(), std::move(*f),
                                         active_index_capacity(), opt_.batch_format);
  auto list = std::make_shared<SegmentList>(*snapshot());
  list->back() = fresh;
  active_ = std::move(fresh);
  publish(std::move(list));
  return {};
}

Result<int64_t> Log::append(const Record& record) { return append_batch(std::span<const Record>(&record, 1)); }

Result<int64_t> Log::append_batch(std::span<const Record> records) {
  if (records.empty()) return make_error_code(Errc::kInvalidArgument);
  const int64_t now = wall_ms();
  const BatchFormat fmt = opt_.batch_format;  // the active segment's (adopt_format sees to it)
  if (fmt == BatchFormat::kKafka) {
    for (const Record& r : records) {
      if (!r.headers.empty() && !kafka_headers_valid(r.headers)) return make_error_code(Errc::kInvalidArgument);
    }
  }
  const std::size_t len = detail::encoded_size(fmt, records, now);
  if (len > opt_.max_batch_bytes) return make_error_code(Errc::kRecordTooLarge);
  std::unique_lock<lionet::Mutex> lk(append_mu_);
  auto pos = prepare_append(len, records.size(), now);
  if (!pos) return pos.error();
  const int64_t base = next_offset_;
  const int64_t max_ts = detail::encode_batch(fmt, encode_buf_.data(), base, records, now);
  const Written w{base, base + static_cast<int64_t>(records.size()), 0, static_cast<uint32_t>(len), max_ts};
  return finish_append(lk, *pos, len, std::span<const Written>(&w, 1), now);
}

Result<int64_t> Log::append_kafka_batches(std::span<const std::string_view> batches) {
  if (batches.empty()) return make_error_code(Errc::kInvalidArgument);
  const int64_t now = wall_ms();
  // Every batch is checked before anything is written.
  std::vector<std::string> inflated(batches.size());  // never resized: the views stay valid
  std::vector<std::string_view> sections(batches.size());
  std::vector<int64_t> max_ts(batches.size());
  std::size_t total = 0, count = 0;
  for (std::size_t i = 0; i < batches.size(); i++) {
    const std::string_view b = batches[i];
    if (b.size() > opt_.max_batch_bytes) return make_error_code(Errc::kRecordTooLarge);
    if (b.size() < kKafkaHeaderBytes) return make_error_code(Errc::kInvalidArgument);
    const detail::BatchHeader h = detail::read_kafka_header(b.data());
    if (h.length != b.size() || !detail::kafka_batch_valid(b.data(), h, opt_.max_batch_bytes)) {
      return make_error_code(Errc::kInvalidArgument);
    }
    const Inflate in = detail::kafka_records(b.data(), h, opt_.max_batch_bytes, inflated[i], sections[i]);
    if (in == Inflate::kTooLarge) return make_error_code(Errc::kRecordTooLarge);
    if (in != Inflate::kOk || !detail::walk_kafka_records(sections[i], h, &max_ts[i], [](const RecordView&) {})) {
      return make_error_code(Errc::kInvalidArgument);
    }
    total += b.size();
    count += h.record_count;
  }
  if (total > opt_.max_batch_bytes) return make_error_code(Errc::kRecordTooLarge);  // one write, one segment
  if (opt_.batch_format != BatchFormat::kKafka) {
    // A kLionet log: the records, without their headers, as one batch of that format.
    std::vector<Record> recs;
    recs.reserve(count);
    for (std::size_t i = 0; i < batches.size(); i++) {
      const detail::BatchHeader h = detail::read_kafka_header(batches[i].data());
      int64_t ignored = 0;
      (void)detail::walk_kafka_records(sections[i], h, &ignored, [&](const RecordView& v) {
        recs.push_back(Record{v.key, v.value, v.timestamp});
      });
    }
    return append_batch(recs);
  }
  std::unique_lock<lionet::Mutex> lk(append_mu_);
  auto pos = prepare_append(total, count, now);
  if (!pos) return pos.error();
  std::vector<Written> written(batches.size());
  int64_t next = next_offset_;
  uint32_t at = 0;
  for (std::size_t i = 0; i < batches.size(); i++) {
    char* p = encode_buf_.data() + at;
    std::memcpy(p, batches[i].data(), batches[i].size());
    const uint32_t n = detail::read_kafka_header(p).record_count;
    stamp_kafka_batch(p, batches[i].size(), next, max_ts[i]);
    written[i] = Written{next, next + n, at, static_cast<uint32_t>(batches[i].size()), max_ts[i]};
    next += n;
    at += static_cast<uint32_t>(batches[i].size());
  }
  return finish_append(lk, *pos, total, written, now);
}

Result<uint64_t> Log::prepare_append(std::size_t len, std::size_t records, int64_t now) {
  if (failed_.load(std::memory_order_relaxed)) return make_error_code(Errc::kLogFailed);
  // Appends are encoded in opt_.batch_format: never into a segment of the other layout (an
  // adopt_format that failed at open or after truncate_to is retried here).
  if (active_->format() != opt_.batch_format) {
    if (auto r = adopt_format(now); !r) return r.error();
  }
  uint64_t pos = active_->size();
  const bool too_big = pos + len > opt_.segment_bytes;
  const bool too_old =
      opt_.segment_ms > 0 && active_->first_append_ms >= 0 && now - active_->first_append_ms >= opt_.segment_ms;
  const bool offsets_full = next_offset_ + static_cast<int64_t>(records) - active_->base_offset() >=
                            int64_t{std::numeric_limits<uint32_t>::max()};
  if (pos > 0 && (too_big || too_old || offsets_full)) {
    if (auto r = roll(now); !r) return r.error();
    pos = 0;
  }
  if (encode_buf_.size() < len) encode_buf_.resize(len);
  return pos;
}

Result<int64_t> Log::finish_append(std::unique_lock<lionet::Mutex>& lk, uint64_t pos, std::size_t len,
                                   std::span<const Written> batches, int64_t now) {
  Segment& seg = *active_;
  preallocate(seg, pos + len);
  if (auto r = seg.file().pwrite(encode_buf_.data(), len, pos); !r) {
    // Nothing published: the next append overwrites whatever part of these batches landed.
    return r.error();
  }
  if (seg.first_append_ms < 0) seg.first_append_ms = now;
  seg.file_bytes = std::max(seg.file_bytes, pos + len);
  const int64_t base = batches.front().first;
  for (const Written& w : batches) {
    seg.publish_batch(w.first, w.next, pos + w.at, w.len, w.max_ts, opt_.index_interval_bytes);
  }
  next_offset_ = batches.back().next;
  end_offset_.store(next_offset_, std::memory_order_release);  // after the segment published /*1*/
  notify_appended();

  bool sync_now = false;
  switch (opt_.flush_policy) {
    case FlushPolicy::kEveryBatch: {
      // Group commit: sync outside the append lock; the shared_ptr keeps the segment alive
      // if it is rolled and deleted meanwhile.
      std::shared_ptr<Segment> keep = active_;
      lk.unlock();
      if (auto r = keep->sync_to(pos + len); !r) {
        failed_.store(true, std::memory_order_relaxed);
        LIONET_LOG_ERROR(logger(), "{}: fdatasync failed, the log refuses appends: {}", dir_, r.error().message());
        return r.error();
      }
      return base;
    }
    case FlushPolicy::kMessages:
      unflushed_messages_ += static_cast<uint64_t>(next_offset_ - base);
      sync_now = unflushed_messages_ >= opt_.flush_messages;
      break;
    case FlushPolicy::kInterval: sync_now = now - last_flush_ms_ >= opt_.flush_ms; break;
    case FlushPolicy::kNone: break;
  }
  if (sync_now) {
    if (auto r = seg.sync_to(pos + len); !r) {
      failed_.store(true, std::memory_order_relaxed);
      return r.error();
    }
    unflushed_messages_ = 0;
    last_flush_ms_ = now;
  }
  return base;
}

Result<void> Log::roll(int64_t now_ms) {
  // Seal: the old segment's data and index become durable before the new segment exists, so
  // after any crash only the last segment can have a torn tail (recovery scans only it).
  // Preallocated zeros go first, so the sync below also makes the sealed size durable.
  if (auto r = release_preallocation(*active_); !r) {
    LIONET_LOG_WARN(logger(), "{}: giving back preallocated space failed ({}); cut at the next open", active_->prefix(),
                    r.error().message());
  }
  if (auto r = active_->sync_to(active_->size()); !r) {
    failed_.store(true, std::memory_order_relaxed);
    return r;
  }
  if (auto r = active_->write_index_files(fs_, true); !r) {
    LIONET_LOG_WARN(logger(), "{}: writing index files failed ({}); rebuilt at next open", active_->prefix(),
                    r.error().message());
  }
  auto seg = create_segment(next_offset_);
  if (!seg) return seg.error();
  auto list = std::make_shared<SegmentList>(*snapshot());
  list->push_back(*seg);
  active_ = std::move(*seg);
  publish(std::move(list));
  unflushed_messages_ = 0;
  last_flush_ms_ = now_ms;
  if (auto r = enforce_retention_locked(now_ms); !r) return r.error();
  return {};
}

void Log::remove_segment_files(const Segment& seg) {
  for (const char* ext : {".index", ".timeindex", ".log"}) (void)fs_.remove(seg.prefix() + ext);
}

Result<std::size_t> Log::enforce_retention(int64_t now_ms) {
  std::lock_guard<lionet::Mutex> g(append_mu_);
  return enforce_retention_locked(now_ms < 0 ? wall_ms() : now_ms);
}

Result<std::size_t> Log::enforce_retention_locked(int64_t now_ms) {
  if (opt_.retention_bytes < 0 && opt_.retention_ms < 0) return std::size_t{0};
  auto cur = snapshot();
  uint64_t total = 0;
  for (const auto& s : *cur) total += s->size();
  std::size_t drop = 0;
  while (drop + 1 < cur->size()) {  // never the active segment
    const Segment& s = *(*cur)[drop];
    const bool by_bytes = opt_.retention_bytes >= 0 && total - s.size() >= static_cast<uint64_t>(opt_.retention_bytes);
    // A segment without a known record time (none, or only Kafka's "no timestamp" -1) is never
    // old enough: only retention.bytes removes it.
    const bool by_time =
        opt_.retention_ms >= 0 && s.max_timestamp() >= 0 && now_ms - s.max_timestamp() > opt_.retention_ms;
    if (!by_bytes && !by_time) break;
    total -= s.size();
    drop++;
  }
  if (drop == 0) return std::size_t{0};
  auto list = std::make_shared<SegmentList>(cur->begin() + static_cast<std::ptrdiff_t>(drop), cur->end());
  // start_offset_ first: a reader that still sees the old start and then the new list gets
  // kOffsetOutOfRange, as if it had come a moment later.
  start_offset_.store(list->front()->base_offset(), std::memory_order_release);
  publish(list);
  for (std::size_t i = 0; i < drop; i++) {
    LIONET_LOG_INFO(logger(), "{}: retention deleted segment {} ({} bytes)", dir_, (*cur)[i]->base_offset(),
                    (*cur)[i]->size());
    remove_segment_files(*(*cur)[i]);
  }
  return drop;
}

Result<void> Log::flush() {
  std::lock_guard<lionet::Mutex> g(append_mu_);
  if (auto r = active_->sync_to(active_->size()); !r) {
    failed_.store(true, std::memory_order_relaxed);
    return r;
  }
  unflushed_messages_ = 0;
  last_flush_ms_ = wall_ms();
  return {};
}

Result<void> Log::truncate_to(int64_t offset) {
  std::lock_guard<lionet::Mutex> g(append_mu_);
  if (offset < start_offset() || offset > next_offset_) return make_error_code(Errc::kOffsetOutOfRange);
  if (offset == next_offset_) return {};
  auto cur = snapshot();
  auto it = std::upper_bound(cur->begin(), cur->end(), offset,
                             [](int64_t o, const std::shared_ptr<Segment>& s) { return o < s->base_offset(); });
  const std::shared_ptr<Segment> seg = *(it - 1);
  // Find the batch's position by walking from the index entry (headers only).
  detail::IndexEntry e = seg->lookup_offset(offset);
  uint64_t pos = e.position;
  int64_t off = seg->base_offset() + e.rel_offset;
  const BatchFormat fmt = seg->format();
  const std::size_t hn = detail::header_bytes(fmt);
  char hdr[kKafkaHeaderBytes];
  detail::BatchHeader h;
  for (;;) {
    auto r = seg->file().pread(hdr, hn, pos);
    if (!r) return r.error();
    if (*r != hn) return make_error_code(Errc::kCorrupt);
    h = detail::read_header(fmt, hdr);
    if (h.base_offset != off || h.length < detail::min_batch_bytes(fmt)) return make_error_code(Errc::kCorrupt);
    if (h.next_offset() > offset) break;
    pos += h.length;
    off = h.next_offset();
  }
  uint64_t new_size = pos;
  if (h.base_offset < offset) {
    // Rewrite the batch with only its records below `offset` (read() verified its CRC), in the
    // segment's format; a compressed or producer-stamped Kafka batch becomes plain ones: as
    // many as max_batch_bytes needs (its records inflated may take more than it did). All is
    // encoded before any file is touched, so a refusal changes nothing.
    ReadResult whole;
    if (auto r = read_segment(*seg, h.base_offset, 1, whole, next_offset_); !r) return r;
    std::vector<Record> keep;
    for (const RecordView& v : whole.records()) {
      if (v.offset < offset) keep.push_back(Record{v.key, v.value, v.timestamp, v.headers});
    }
    const int64_t now = wall_ms();
    std::vector<char> buf;
    int64_t base = h.base_offset;
    for (std::size_t from = 0; from < keep.size();) {
      std::size_t n = keep.size() - from;  // the most records (at least one) that fit in one batch
      while (n > 1 && detail::encoded_size(fmt, std::span(keep).subspan(from, n), now) > opt_.max_batch_bytes) {
        n = n / 2;
      }
      const auto part = std::span<const Record>(keep).subspan(from, n);
      const std::size_t len = detail::encoded_size(fmt, part, now);
      if (len > opt_.max_batch_bytes) return make_error_code(Errc::kRecordTooLarge);  // one record alone
      buf.resize(buf.size() + len);
      detail::encode_batch(fmt, buf.data() + buf.size() - len, base, part, now);
      base += static_cast<int64_t>(n);
      from += n;
    }
    if (auto r = seg->file().pwrite(buf.data(), buf.size(), pos); !r) return r;
    new_size = pos + buf.size();
  }
  // Later segments go first (newest first, so a crash midway leaves a contiguous prefix).
  for (auto later = cur->end(); later != it;) {
    --later;
    remove_segment_files(**later);
  }
  if (auto r = seg->file().truncate(new_size); !r) return r;
  if (auto r = seg->file().datasync(); !r) return r;
  (void)fs_.remove(seg->prefix() + ".index");  // it is the active segment again
  (void)fs_.remove(seg->prefix() + ".timeindex");
  // A fresh Segment object (full-size index) for the truncated file; readers of the old
  // objects keep them until they finish.
  auto f = fs_.open(seg->prefix() + ".log", false);
  if (!f) return f.error();
  auto fresh =
      std::make_shared<Segment>(seg->prefix(), seg->base_offset(), std::move(*f), active_index_capacity(), fmt);
  auto scan = detail::scan_segment(*fresh, new_size, opt_.index_interval_bytes, opt_.max_batch_bytes);
  if (!scan || scan->next_offset != offset) {
    // The files no longer match the published state: no append may land on them.
    failed_.store(true, std::memory_order_relaxed);
    LIONET_LOG_ERROR(logger(),
                     "{}: truncate_to({}) left a segment that does not scan back ({}); the log refuses appends", dir_,
                     offset, scan ? scan->reason : scan.error().message());
    return scan ? make_error_code(Errc::kCorrupt) : scan.error();
  }
  fresh->first_append_ms = seg->first_append_ms;
  fresh->file_bytes = new_size;
  auto list = std::make_shared<SegmentList>(cur->begin(), it - 1);
  list->push_back(fresh);
  next_offset_ = offset;
  end_offset_.store(offset, std::memory_order_release);
  active_ = fresh;
  publish(std::move(list));
  if (auto r = fs_.sync_dir(dir_); !r) return r;
  unflushed_messages_ = 0;
  return adopt_format(wall_ms());
}

uint64_t Log::size_bytes() const {
  uint64_t total = 0;
  for (const auto& s : *snapshot()) total += s->size();
  return total;
}

std::size_t Log::segment_count() const { return snapshot()->size(); }

std::vector<int64_t> Log::segment_base_offsets() const {
  std::vector<int64_t> v;
  for (const auto& s : *snapshot()) v.push_back(s->base_offset());
  return v;
}

void Log::notify_appended() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // end_offset_ before waiters_ (see log.h)
  if (waiters_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<lionet::Mutex> lk(wait_mu_);
  appended_.notify_all();
}

int64_t Log::wait_beyond(int64_t offset, std::optional<TimePoint> deadline) const {
  if (end_offset() > offset) return end_offset();
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // waiters_ before end_offset_ (see log.h)
  const uint64_t generation = wake_generation_.load(std::memory_order_acquire);
  {
    std::unique_lock<lionet::Mutex> lk(wait_mu_);
    while (end_offset() <= offset && wake_generation_.load(std::memory_order_acquire) == generation) {
      if (!deadline) {
        if (!appended_.wait(lk)) break;  // cancelled or past the fiber's deadline (sched/cancel.h)
      } else if (appended_.wait_until(lk, *deadline) == std::cv_status::timeout) {
        break;
      }
    }
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return end_offset();
}

void Log::wake_waiters() const {
  std::lock_guard<lionet::Mutex> lk(wait_mu_);
  wake_generation_.fetch_add(1, std::memory_order_acq_rel);
  appended_.notify_all();
}

}  // namespace lionet::storage
