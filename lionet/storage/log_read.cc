// lionet/storage/log_read.cc: Log::read and Log::offset_for_time (the lock-free read path).
//
// One read = one snapshot of the segment list + one pread in the common case: the position
// comes from the segment's read hint (a sequential consumer's next batch) or the sparse index
// (then the read covers max_bytes plus one index interval, and batches before the offset are
// skipped by their headers). Every batch returned is CRC-checked here.
#include <algorithm>
#include <limits>

#include "lionet/storage/detail/batch_format.h"
#include "lionet/storage/detail/segment.h"
#include "lionet/storage/log.h"

namespace lionet::storage {

using detail::BatchHeader;
using detail::kBatchHeaderBytes;
using detail::kRecordHeaderBytes;
using detail::Segment;

Result<ReadResult> Log::read(int64_t offset, std::size_t max_bytes) const {
  ReadResult out;
  if (auto r = read(offset, max_bytes, out); !r) return r.error();
  return out;
}

Result<void> Log::read(int64_t offset, std::size_t max_bytes, ReadResult& out) const {
  out.records_.clear();
  out.bytes_ = 0;
  out.next_offset_ = offset;
  if (offset < start_offset() || offset > end_offset()) return make_error_code(Errc::kOffsetOutOfRange);
  if (offset == end_offset()) return {};
  auto list = snapshot();
  auto it = std::upper_bound(list->begin(), list->end(), offset,
                             [](int64_t o, const std::shared_ptr<Segment>& s) { return o < s->base_offset(); });
  if (it == list->begin()) return make_error_code(Errc::kOffsetOutOfRange);  // retention raced us
  return read_segment(**(it - 1), offset, max_bytes, out);
}

Result<void> Log::read_segment(const Segment& seg, int64_t offset, std::size_t max_bytes, ReadResult& out) const {
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
  uint64_t pos = 0;
  bool from_hint = seg.hint(offset, &pos);
  bool exact = from_hint;
  if (!from_hint) {
    detail::IndexEntry e = seg.lookup_offset(offset);
    pos = e.position;
    exact = seg.base_offset() + e.rel_offset == offset;
  }
  std::size_t want = std::max(max_bytes, kBatchHeaderBytes + kRecordHeaderBytes);
  if (!exact) want += opt_.index_interval_bytes + kBatchHeaderBytes;
  std::vector<char>& buf = out.buffer_;
  std::size_t have = 0;  // bytes of buf holding file bytes [pos, pos + have)
  auto fill = [&](std::size_t need) -> Result<void> {
    std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(std::max(need, want), limit - pos));
    if (buf.size() < n) buf.resize(n);
    auto r = seg.file().pread(buf.data(), n, pos);
    if (!r) return r.error();
    have = *r;
    return {};
  };
  if (auto r = fill(want); !r) return r;

  std::size_t cur = 0;
  int64_t expected = offset;
  bool accepted = false;
  for (;;) {
    if (pos + cur >= limit) break;
    if (have - cur < kBatchHeaderBytes) {
      if (accepted) break;
      pos += cur;  // nothing accepted yet: slide the window to the batch we are looking at
      cur = 0;
      if (auto r = fill(kBatchHeaderBytes); !r) return r;
      if (have < kBatchHeaderBytes) return make_error_code(Errc::kCorrupt);
    }
    const BatchHeader h = detail::read_header(buf.data() + cur);
    if (h.length < kBatchHeaderBytes + kRecordHeaderBytes || h.length > opt_.max_batch_bytes ||
        pos + cur + h.length > limit) {
      return make_error_code(Errc::kCorrupt);
    }
    if (accepted) {
      if (h.base_offset != expected) return make_error_code(Errc::kCorrupt);
      if (out.bytes_ + h.length > max_bytes || cur + h.length > have) break;
    } else {
      if (h.base_offset > offset) {
        if (from_hint) {  // a stale hint (truncate_to rewrote the segment): use the index
          from_hint = false;
          detail::IndexEntry e = seg.lookup_offset(offset);
          pos = e.position;
          cur = 0;
          if (auto r = fill(want + opt_.index_interval_bytes); !r) return r;
          continue;
        }
        return make_error_code(Errc::kCorrupt);
      }
      if (h.next_offset() <= offset) {  // before the offset: skip by the header
        cur += h.length;
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
    if (!detail::batch_valid(p, h, opt_.max_batch_bytes)) return make_error_code(Errc::kCorrupt);
    const std::size_t before = out.records_.size();
    const bool framed = detail::for_each_record(p, h, [&](const RecordView& v) {
      if (v.offset >= offset) out.records_.push_back(v);
    });
    if (!framed) {
      out.records_.resize(before);
      return make_error_code(Errc::kCorrupt);
    }
    out.bytes_ += h.length;
    expected = h.next_offset();
    accepted = true;
    cur += h.length;
  }
  if (!accepted) return make_error_code(Errc::kCorrupt);
  out.next_offset_ = expected;
  seg.set_hint(expected, pos + cur);
  return {};
}

Result<int64_t> Log::offset_for_time(int64_t ts_ms) const {
  auto list = snapshot();
  ReadResult chunk;
  for (const auto& seg : *list) {
    if (seg->max_timestamp() < ts_ms) continue;  // every record here is older
    const detail::IndexEntry e = seg->lookup_time(ts_ms);
    int64_t off = seg->base_offset() + e.rel_offset;
    const int64_t seg_end = seg->next_offset();
    while (off < seg_end) {
      if (auto r = read_segment(*seg, off, 256 * 1024, chunk); !r) return r.error();
      for (const RecordView& v : chunk.records()) {
        if (v.timestamp >= ts_ms) return v.offset;
      }
      off = chunk.next_offset();
    }
  }
  return end_offset();
}

}  // namespace lionet::storage
