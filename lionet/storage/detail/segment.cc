// lionet/storage/detail/segment.cc: segment state, sparse index, index files, validating scan.
#include "lionet/storage/detail/segment.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <vector>

#include "lionet/storage/detail/formats.h"
#include "lionet/storage/errors.h"

namespace lionet::storage::detail {

std::string segment_prefix(const std::string& dir, int64_t base_offset) {
  char name[32];
  std::snprintf(name, sizeof name, "%020" PRId64, base_offset);
  return dir + "/" + name;
}

Segment::Segment(std::string prefix, int64_t base_offset, std::unique_ptr<File> log, std::size_t index_capacity,
                 BatchFormat format)
    : prefix_(std::move(prefix)),
      base_(base_offset),
      log_(std::move(log)),
      format_(format),
      next_offset_(base_offset),
      // default-initialised (not zeroed): a large active-segment index costs address space,
      // not memory, until entries are written.
      index_(new IndexEntry[std::max<std::size_t>(index_capacity, 1)]),
      index_capacity_(std::max<std::size_t>(index_capacity, 1)) {}

void Segment::add_index_entry(uint32_t rel, uint32_t pos, int64_t max_ts_before) {
  std::size_t n = index_count_.load(std::memory_order_relaxed);  // writer's own field
  if (n == index_capacity_) return;  // full: the index just gets sparser (lookups stay correct)
  index_[n] = IndexEntry{rel, pos, max_ts_before};
  index_count_.store(n + 1, std::memory_order_release);  // /*1*/ entry before count
}

void Segment::publish_batch(int64_t first, int64_t next, uint64_t pos, uint32_t len, int64_t batch_max_ts,
                            uint32_t index_interval) {
  if (index_count_.load(std::memory_order_relaxed) == 0 || bytes_since_index_ >= index_interval) {
    add_index_entry(static_cast<uint32_t>(first - base_), static_cast<uint32_t>(pos),
                    max_ts_.load(std::memory_order_relaxed));
    bytes_since_index_ = 0;
  }
  bytes_since_index_ += len;
  if (batch_max_ts > max_ts_.load(std::memory_order_relaxed)) max_ts_.store(batch_max_ts, std::memory_order_release);
  size_.store(pos + len, std::memory_order_release);  // /*1*/ bytes before size
  next_offset_.store(next, std::memory_order_release);
}

void Segment::reset() {
  index_count_.store(0, std::memory_order_release);
  bytes_since_index_ = 0;
  size_.store(0, std::memory_order_release);
  next_offset_.store(base_, std::memory_order_release);
  max_ts_.store(std::numeric_limits<int64_t>::min(), std::memory_order_release);
  synced_.store(0, std::memory_order_release);
}

void Segment::set_loaded(uint64_t size, int64_t next_offset, int64_t max_ts) {
  max_ts_.store(max_ts, std::memory_order_release);
  size_.store(size, std::memory_order_release);
  next_offset_.store(next_offset, std::memory_order_release);
  synced_.store(size, std::memory_order_release);  // sealed segments were synced at roll
}

IndexEntry Segment::lookup_offset(int64_t offset) const {
  std::size_t n = index_count_.load(std::memory_order_acquire);  // /*1*/
  const uint32_t rel = static_cast<uint32_t>(offset - base_);
  // First entry with rel_offset > rel, minus one.
  const IndexEntry* begin = index_.get();
  const IndexEntry* it =
      std::upper_bound(begin, begin + n, rel, [](uint32_t r, const IndexEntry& e) { return r < e.rel_offset; });
  if (it == begin) return IndexEntry{0, 0, std::numeric_limits<int64_t>::min()};
  return *(it - 1);
}

IndexEntry Segment::lookup_time(int64_t ts) const {
  std::size_t n = index_count_.load(std::memory_order_acquire);  // /*1*/
  // Last entry whose max_ts_before < ts: every record before it is older than ts.
  const IndexEntry* begin = index_.get();
  const IndexEntry* it =
      std::lower_bound(begin, begin + n, ts, [](const IndexEntry& e, int64_t t) { return e.max_ts_before < t; });
  if (it == begin) return IndexEntry{0, 0, std::numeric_limits<int64_t>::min()};
  return *(it - 1);
}

bool Segment::hint(int64_t offset, uint64_t* pos) const {
  uint64_t h = hint_.load(std::memory_order_relaxed);
  if (h == ~uint64_t{0} || static_cast<uint32_t>(h >> 32) != static_cast<uint32_t>(offset - base_)) return false;
  *pos = h & 0xffffffffu;
  return true;
}

void Segment::set_hint(int64_t offset, uint64_t pos) const {
  hint_.store(static_cast<uint64_t>(offset - base_) << 32 | (pos & 0xffffffffu), std::memory_order_relaxed);
}

Result<void> Segment::sync_to(uint64_t end) {
  if (synced_.load(std::memory_order_acquire) >= end) return {};
  std::lock_guard<lionet::Mutex> g(sync_mu_);
  if (synced_.load(std::memory_order_acquire) >= end) return {};  // another caller's sync covered us
  const uint64_t covered = size();  // every batch published before this fdatasync starts
  Result<void> r = log_->datasync();
  if (!r) return r;
  synced_.store(std::max(covered, end), std::memory_order_release);
  return {};
}

namespace {
template <class T>
void put(std::vector<char>& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.insert(out.end(), b, b + sizeof v);
}

Result<void> write_whole(FileSystem& fs, const std::string& path, const std::vector<char>& bytes, bool sync) {
  auto f = fs.open(path, true);
  if (!f) return f.error();
  if (auto r = (*f)->truncate(0); !r) return r;
  if (auto r = (*f)->pwrite(bytes.data(), bytes.size(), 0); !r) return r;
  if (sync) return (*f)->datasync();
  return {};
}

bool read_whole(FileSystem& fs, const std::string& path, std::vector<char>& out) {
  auto f = fs.open(path, false);
  if (!f) return false;
  auto sz = (*f)->size();
  if (!sz) return false;
  out.resize(*sz);
  auto n = (*f)->pread(out.data(), out.size(), 0);
  return n && *n == out.size();
}
}  // namespace

Result<void> Segment::write_index_files(FileSystem& fs, bool sync) const {
  std::size_t n = index_entries();
  std::vector<char> idx, tidx;
  idx.reserve(n * 8);
  tidx.reserve((n + 1) * 12);
  for (std::size_t i = 0; i < n; i++) {
    put<uint32_t>(idx, index_[i].rel_offset);
    put<uint32_t>(idx, index_[i].position);
    put<int64_t>(tidx, index_[i].max_ts_before);
    put<uint32_t>(tidx, index_[i].rel_offset);
  }
  put<int64_t>(tidx, max_timestamp());  // trailer: segment max timestamp, record count
  put<uint32_t>(tidx, static_cast<uint32_t>(next_offset() - base_));
  if (auto r = write_whole(fs, prefix_ + ".index", idx, sync); !r) return r;
  return write_whole(fs, prefix_ + ".timeindex", tidx, sync);
}

bool Segment::load_index_files(FileSystem& fs, uint64_t log_size, int64_t next_offset) {
  std::vector<char> idx, tidx;
  if (!read_whole(fs, prefix_ + ".index", idx) || !read_whole(fs, prefix_ + ".timeindex", tidx)) return false;
  if (idx.size() % 8 != 0 || tidx.size() % 12 != 0 || tidx.size() / 12 != idx.size() / 8 + 1) return false;
  const std::size_t n = idx.size() / 8;
  const uint32_t count = static_cast<uint32_t>(next_offset - base_);
  if (load_le<uint32_t>(tidx.data() + n * 12 + 8) != count) return false;
  if ((n == 0) != (log_size == 0) || n > index_capacity_) return false;
  std::vector<IndexEntry> e(n);
  for (std::size_t i = 0; i < n; i++) {
    e[i].rel_offset = load_le<uint32_t>(idx.data() + i * 8);
    e[i].position = load_le<uint32_t>(idx.data() + i * 8 + 4);
    e[i].max_ts_before = load_le<int64_t>(tidx.data() + i * 12);
    if (load_le<uint32_t>(tidx.data() + i * 12 + 8) != e[i].rel_offset) return false;
    if (e[i].position >= log_size || e[i].rel_offset >= count) return false;
    if (i == 0 ? (e[i].rel_offset != 0 || e[i].position != 0)
               : (e[i].rel_offset <= e[i - 1].rel_offset || e[i].position <= e[i - 1].position ||
                  e[i].max_ts_before < e[i - 1].max_ts_before)) {
      return false;
    }
  }
  // Walk batch headers from the last entry to the end: framing and offsets must meet exactly.
  uint64_t pos = n ? e[n - 1].position : 0;
  int64_t off = base_ + (n ? e[n - 1].rel_offset : 0);
  char h[kKafkaHeaderBytes];
  const std::size_t hn = header_bytes(format_);
  while (pos < log_size) {
    auto r = log_->pread(h, hn, pos);
    if (!r || *r != hn) return false;
    BatchHeader bh = read_header(format_, h);
    if (bh.base_offset != off || bh.length < min_batch_bytes(format_) || pos + bh.length > log_size) return false;
    pos += bh.length;
    off = bh.next_offset();
  }
  if (off != next_offset) return false;
  for (std::size_t i = 0; i < n; i++) index_[i] = e[i];
  index_count_.store(n, std::memory_order_release);
  set_loaded(log_size, next_offset, load_le<int64_t>(tidx.data() + n * 12));
  return true;
}

Result<ScanResult> scan_segment(Segment& seg, uint64_t file_size, uint32_t index_interval, uint32_t max_batch_bytes) {
  seg.reset();
  const BatchFormat fmt = seg.format();
  const std::size_t hdr = header_bytes(fmt);
  const std::size_t len_end = length_field_end(fmt);
  ScanResult res;
  res.next_offset = seg.base_offset();
  std::vector<char> buf(std::max<std::size_t>(1 << 20, hdr));
  std::string scratch;  // a compressed batch's inflated records
  uint64_t buf_pos = 0;  // file position of buf[0]
  std::size_t have = 0;  // valid bytes in buf
  uint64_t pos = 0;
  auto stop = [&](std::string why) {
    res.stopped_early = true;
    res.reason = std::move(why);
  };
  while (pos < file_size) {
    // Make sure the header (then the whole batch) of the batch at pos is in buf.
    auto ensure = [&](std::size_t need) -> Result<bool> {
      if (pos >= buf_pos && pos + need <= buf_pos + have) return true;
      if (need > buf.size()) buf.resize(need);
      buf_pos = pos;
      std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(buf.size(), file_size - pos));
      auto r = seg.file().pread(buf.data(), want, pos);
      if (!r) return r.error();
      have = *r;
      return need <= have;
    };
    if (file_size - pos < len_end) {
      stop("torn length field");
      break;
    }
    auto ok = ensure(std::min<uint64_t>(hdr, file_size - pos));
    if (!ok) return ok.error();
    const char* p = buf.data() + (pos - buf_pos);
    if (zero_length(fmt, p)) {
      stop("zero length (end of data)");
      res.zero_tail = true;
      break;
    }
    if (file_size - pos < hdr) {
      stop("torn batch header");
      break;
    }
    BatchHeader h = read_header(fmt, p);
    if (h.length < min_batch_bytes(fmt) || h.length > max_batch_bytes) {
      stop("bad batch length " + std::to_string(h.length));
      break;
    }
    if (h.length > file_size - pos) {
      stop("torn batch (length " + std::to_string(h.length) + " past end of file)");
      break;
    }
    ok = ensure(h.length);
    if (!ok) return ok.error();
    if (!*ok) {
      stop("short read");
      break;
    }
    p = buf.data() + (pos - buf_pos);
    if (!batch_valid(fmt, p, h, max_batch_bytes)) {
      stop("CRC mismatch");
      break;
    }
    if (h.base_offset != res.next_offset) {
      stop("offset " + std::to_string(h.base_offset) + " where " + std::to_string(res.next_offset) + " was expected");
      break;
    }
    if (!for_each_record(fmt, p, h, max_batch_bytes, scratch, [](const RecordView&) {})) {
      stop("bad record framing");
      break;
    }
    seg.publish_batch(h.base_offset, h.next_offset(), pos, h.length, h.max_timestamp, index_interval);
    pos += h.length;
    res.next_offset = h.next_offset();
    res.max_ts = std::max(res.max_ts, h.max_timestamp);
    res.batches++;
  }
  res.valid_end = pos;
  return res;
}

}  // namespace lionet::storage::detail
