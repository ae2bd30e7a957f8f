// lionet/storage/log_read.cc: Log::read and Log::offset_for_time (the lock-free read path).
//
// One read = one snapshot of the segment list + one pread in the common case: the position
// comes from the segment's read hint (a sequential consumer's next batch) or the sparse index
// (then the read covers max_bytes plus one index interval, and batches before the offset are
// skipped by their headers). Every batch returned is CRC-checked here.
#include <algorithm>
#include <limits>

#include "lionet/storage/detail/formats.h"
#include "lionet/storage/detail/segment.h"
#include "lionet/storage/log.h"

namespace lionet::storage {

using detail::BatchHeader;
using detail::Segment;

Result<ReadResult> Log::read(int64_t offset, std::size_t max_bytes) const {
  ReadResult out;
  if (auto r = read(offset, max_bytes, out); !r) return r.error();
  return out;
}

Result<void> Log::read(int64_t offset, std::size_t max_bytes, ReadResult& out) const {
  out.records_.clear();
  out.inflated_used_ = 0;
  out.bytes_ = 0;
  out.next_offset_ = offset;
  // One load of the end: acquire, so every batch below it is published in its segment. Batches
  // the segment already shows past it are not committed yet and are left out.
  const int64_t end = end_offset();
  if (offset < start_offset() || offset > end) return make_error_code(Errc::kOffsetOutOfRange);
  if (offset == end) return {};
  auto list = snapshot();
  const std::shared_ptr<Segment>* seg = detail::segment_holding(*list, offset);
  if (!seg) return make_error_code(Errc::kOffsetOutOfRange);  // retention raced us
  return read_segment(**seg, offset, max_bytes, out, end);
}

namespace {
// Where a walk to `offset` may start: a batch boundary and the offset its batch must begin with.
struct WalkStart {
  uint64_t pos;
  int64_t first;
};

WalkStart index_start(const Segment& seg, int64_t offset) {
  const detail::IndexEntry e = seg.lookup_offset(offset);
  return {e.position, seg.base_offset() + e.rel_offset};
}
}  // namespace

// Start points, each a batch boundary whose first offset is known: the read hint (exact), else
// the sparse index entry at or before `offset`. A sealed segment's index came from files that
// are not checksummed (open checks their shape and the batches after their last entry only),
// and a hint may be stale after truncate_to; so a start whose batch header does not begin with
// the offset it promises is abandoned for the index entry before it, down to entry {0, 0}
// (position 0 is always a boundary). Good records stay readable whatever happened to the
// index files: a damaged index costs longer walks, never kCorrupt for sound data. Only the
// start header is judged this way: once it matches, a broken chain after it is damaged data
// (kCorrupt), which bounds the fallback to one walk per index entry.
Result<void> Log::read_segment(const Segment& seg, int64_t offset, std::size_t max_bytes, ReadResult& out,
                               int64_t end) const {
  out.records_.clear();  // (offset_for_time reuses one ReadResult across calls)
  out.inflated_used_ = 0;
  out.bytes_ = 0;
  // next_offset first, then size: the writer stores size before next_offset, so the size we
  // read afterwards covers every offset below the next_offset we saw.
  const int64_t seg_next = seg.next_offset();
  const uint64_t limit = seg.size();  // acquire /*1*/: every byte below is a complete batch
  if (offset >= seg_next) {
    // A hole: a sealed segment whose records ended early (damage found at open), or a
    // truncate_to that raced this read.
    if (offset >= end_offset()) return make_error_code(Errc::kOffsetOutOfRange);
    return make_error_code(Errc::kCorrupt);
  }
  const BatchFormat fmt = seg.format();
  const std::size_t hdr = detail::header_bytes(fmt);
  const std::size_t min_batch = detail::min_batch_bytes(fmt);
  std::vector<char>& buf = out.buffer_;
  uint64_t pos = 0;  // file position of buf[0]
  std::size_t have = 0;  // bytes of buf holding file bytes [pos, pos + have)
  std::size_t want = 0;  // bytes one window reads
  auto fill = [&](std::size_t need) -> Result<void> {
    std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(std::max(need, want), limit - pos));
    if (buf.size() < n) buf.resize(n);
    auto r = seg.file().pread(buf.data(), n, pos);
    if (!r) return r.error();
    have = *r;
    return {};
  };
  auto sane = [&](const BatchHeader& h, uint64_t at) {
    return h.length >= min_batch && h.length <= opt_.max_batch_bytes && h.length <= limit - at;
  };

  WalkStart start{0, offset};
  bool from_hint = seg.hint(offset, &start.pos);
  if (!from_hint) start = index_start(seg, offset);
  for (;;) {
    pos = start.pos;
    want = std::max(max_bytes, min_batch);
    if (start.first != offset) want += opt_.index_interval_bytes + hdr;
    if (pos < limit) {  // else a hint or entry past the published bytes: wrong too
      if (auto r = fill(want); !r) return r;
      if (have >= hdr) {
        const BatchHeader h = detail::read_header(fmt, buf.data());
        if (h.base_offset == start.first && sane(h, pos)) break;
      }
    }
    if (start.pos == 0 && start.first == seg.base_offset()) return make_error_code(Errc::kCorrupt);
    // A wrong start: the index entry covering offset (after a hint), else the one before it.
    if (from_hint) {
      start = index_start(seg, offset);
    } else if (start.first > seg.base_offset()) {
      start = index_start(seg, start.first - 1);  // strictly earlier: the loop ends at {0, base}
    } else {
      start = {0, seg.base_offset()};
    }
    from_hint = false;
  }

  std::size_t cur = 0;
  int64_t expected = start.first;  // the offset the batch at cur must begin with
  bool accepted = false;
  // Inflated records of compressed batches count against max_bytes too (after the first
  // batch): a read holds at most about max_bytes of memory plus one batch, however well its
  // batches compress.
  std::size_t inflated = 0;
  while (pos + cur < limit) {
    if (cur > have || have - cur < hdr) {
      if (accepted) break;
      pos += cur;  // nothing accepted yet: slide the window to the batch we are looking at
      cur = 0;
      if (auto r = fill(hdr); !r) return r;
      if (have < hdr) return make_error_code(Errc::kCorrupt);
    }
    const BatchHeader h = detail::read_header(fmt, buf.data() + cur);
    if (h.base_offset != expected || !sane(h, pos + cur)) {
      if (accepted) break;  // return the good batches before the damage; reading on from here fails
      return make_error_code(Errc::kCorrupt);
    }
    if (accepted) {
      if (h.base_offset >= end || out.bytes_ + h.length > max_bytes || cur + h.length > have) break;
    } else {
      if (h.next_offset() <= offset) {  // before the offset: skip by the header
        cur += h.length;
        expected = h.next_offset();
        continue;
      }
      if (cur + h.length > have) {  // the batch holding offset is bigger than what we read
        pos += cur;
        cur = 0;
        if (auto r = fill(h.length); !r) return r;
        if (have < h.length) return make_error_code(Errc::kCorrupt);
        continue;
      }
    }
    // From here on buf is not resized again, so views into it stay valid.
    const char* p = buf.data() + cur;
    const std::size_t before = out.records_.size();
    // A compressed batch's records are inflated into a string of out's pool (views point there).
    std::string none;
    std::string* scratch = &none;
    if (fmt == BatchFormat::kKafka && (h.attributes & 0x7u) != 0) {
      if (out.inflated_used_ == out.inflated_.size()) out.inflated_.push_back(std::make_unique<std::string>());
      scratch = out.inflated_[out.inflated_used_++].get();
    }
    const bool valid = detail::batch_valid(fmt, p, h, opt_.max_batch_bytes) &&
                       detail::for_each_record(fmt, p, h, opt_.max_batch_bytes, *scratch, [&](const RecordView& v) {
                         if (v.offset >= offset) out.records_.push_back(v);
                       });
    if (!valid) {
      out.records_.resize(before);
      if (accepted) break;
      return make_error_code(Errc::kCorrupt);
    }
    if (scratch != &none) {
      if (accepted && out.bytes_ + inflated + scratch->size() > max_bytes) {
        out.records_.resize(before);  // for the next read
        out.inflated_used_--;
        break;
      }
      inflated += scratch->size();
    }
    out.bytes_ += h.length;
    expected = h.next_offset();
    accepted = true;
    cur += h.length;
  }
  out.inflated_.resize(out.inflated_used_);  // keeps no inflated buffer this read does not use
  if (!accepted) return make_error_code(Errc::kCorrupt);
  out.next_offset_ = expected;
  seg.set_hint(expected, pos + cur);
  return {};
}

// Header walk only: a 4 KiB window of the file is read at a time, so small batches cost one pread
// per window and large ones one per batch, and their bytes are never copied here.
Result<Log::StoredBatches> Log::read_stored(int64_t offset, std::size_t max_bytes) const {
  StoredBatches out;
  out.first_offset = out.next_offset = offset;
  const int64_t end = end_offset();  // batches past it are left out, as in read()
  if (offset < start_offset() || offset > end) return make_error_code(Errc::kOffsetOutOfRange);
  if (offset == end) return out;
  auto list = snapshot();
  const std::shared_ptr<Segment>* holding = detail::segment_holding(*list, offset);
  if (!holding) return make_error_code(Errc::kOffsetOutOfRange);  // retention raced us
  const std::shared_ptr<Segment>& seg = *holding;
  out.format = seg->format();
  if (out.format != BatchFormat::kKafka) return out;
  const int64_t seg_next = seg->next_offset();  // before size: see read_segment
  const uint64_t limit = seg->size();
  if (offset >= seg_next) {
    if (offset >= end_offset()) return make_error_code(Errc::kOffsetOutOfRange);
    return make_error_code(Errc::kCorrupt);
  }
  constexpr std::size_t kWindow = 4096;
  char win[kWindow];
  uint64_t win_pos = 0;
  std::size_t win_have = 0;
  // The header of the batch at `at` if it is one that begins with `expect`.
  auto header_at = [&](uint64_t at, int64_t expect, BatchHeader& h) -> Result<bool> {
    if (at >= limit || limit - at < kKafkaHeaderBytes) return false;
    if (at < win_pos || at + kKafkaHeaderBytes > win_pos + win_have) {
      auto r = seg->file().pread(win, static_cast<std::size_t>(std::min<uint64_t>(kWindow, limit - at)), at);
      if (!r) return r.error();
      win_pos = at;
      win_have = *r;
      if (win_have < kKafkaHeaderBytes) return false;
    }
    const char* p = win + (at - win_pos);
    h = detail::read_kafka_header(p);
    return h.base_offset == expect && p[16] == 2 && h.length >= kKafkaMinBatchBytes &&
           h.length <= opt_.max_batch_bytes && h.length <= limit - at;
  };
  // Start points as read_segment's: the hint, else the index entry, else the segment's start.
  uint64_t pos = 0;
  int64_t first = offset;
  BatchHeader h;
  bool found = false;
  if (seg->hint(offset, &pos)) {
    auto r = header_at(pos, offset, h);
    if (!r) return r.error();
    found = *r;
  }
  if (!found) {
    const detail::IndexEntry e = seg->lookup_offset(offset);
    pos = e.position;
    first = seg->base_offset() + e.rel_offset;
    auto r = header_at(pos, first, h);
    if (!r) return r.error();
    found = *r;
  }
  if (!found && pos != 0) {
    pos = 0;
    first = seg->base_offset();
    auto r = header_at(pos, first, h);
    if (!r) return r.error();
    found = *r;
  }
  if (!found) return make_error_code(Errc::kCorrupt);
  while (h.next_offset() <= offset) {  // batches before the offset
    pos += h.length;
    first = h.next_offset();
    auto r = header_at(pos, first, h);
    if (!r) return r.error();
    if (!*r) return make_error_code(Errc::kCorrupt);
  }
  out.keep = seg;
  out.file = &seg->file();
  out.position = pos;
  out.bytes = h.length;
  out.first_offset = h.base_offset;
  out.next_offset = h.next_offset();
  while (pos + out.bytes < limit && out.next_offset < end) {
    BatchHeader next;
    auto r = header_at(pos + out.bytes, out.next_offset, next);
    if (!r) return r.error();
    if (!*r || out.bytes + next.length > max_bytes) break;  // damage ends the range before it
    out.bytes += next.length;
    out.next_offset = next.next_offset();
  }
  seg->set_hint(out.next_offset, pos + out.bytes);
  return out;
}

Result<int64_t> Log::offset_for_time(int64_t ts_ms) const {
  const int64_t end = end_offset();  // before the list: every segment in it is published up to end
  auto list = snapshot();
  ReadResult chunk;
  for (const auto& seg : *list) {
    if (seg->max_timestamp() < ts_ms) continue;  // every record here is older
    const detail::IndexEntry e = seg->lookup_time(ts_ms);
    int64_t off = seg->base_offset() + e.rel_offset;
    const int64_t seg_end = std::min(seg->next_offset(), end);
    while (off < seg_end) {
      if (auto r = read_segment(*seg, off, 256 * 1024, chunk, end); !r) return r.error();
      for (const RecordView& v : chunk.records()) {
        if (v.timestamp >= ts_ms) return v.offset;
      }
      off = chunk.next_offset();
    }
  }
  return end;
}

}  // namespace lionet::storage
