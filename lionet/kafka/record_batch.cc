// lionet/kafka/record_batch.cc: RecordBatch v2 decoding and encoding (see record_batch.h).
#include "lionet/kafka/record_batch.h"

#include <algorithm>

#include "lionet/kafka/codec.h"
#include "lionet/storage/compression.h"
#include "lionet/storage/crc32c.h"

namespace lionet::kafka {
using storage::decompress;
using storage::Inflate;
namespace {

// One record inside its length-delimited slice; false (with why) on any framing error.
bool decode_record(Reader& r, int64_t base_ts, int32_t expect_delta, DecodedRecord& rec, const char*& why) {
  const int32_t len = r.varint();
  if (!r.ok() || len < 0 || static_cast<std::size_t>(len) > r.remaining()) {
    why = "a record length past the batch";
    return false;
  }
  Reader in(r.raw(static_cast<std::size_t>(len)));
  in.i8();  // record attributes: unused
  const int64_t ts_delta = in.varlong();
  const int32_t off_delta = in.varint();
  if (in.ok() && off_delta != expect_delta) {
    why = "record offset deltas are not consecutive";
    return false;
  }
  rec.timestamp = base_ts + ts_delta;
  const int32_t klen = in.varint();
  if (klen < -1) in.fail("a negative key length");
  if (klen >= 0) rec.key = in.raw(static_cast<std::size_t>(klen));
  const int32_t vlen = in.varint();
  if (vlen < -1) in.fail("a negative value length");
  if (vlen >= 0) rec.value = in.raw(static_cast<std::size_t>(vlen));
  const char* hstart = in.position();
  const int32_t hn = in.varint();
  if (hn < 0 || static_cast<std::size_t>(hn) > in.remaining()) in.fail("a bad header count");
  for (int32_t i = 0; i < hn && in.ok(); ++i) {
    const int32_t hk = in.varint();
    if (hk < 0) in.fail("a negative header key length");
    in.raw(static_cast<std::size_t>(hk < 0 ? 0 : hk));
    const int32_t hv = in.varint();
    if (hv < -1) in.fail("a negative header value length");
    if (hv > 0) in.raw(static_cast<std::size_t>(hv));
  }
  if (!in.ok()) {
    why = in.error();
    return false;
  }
  if (!in.at_end()) {
    why = "bytes after a record's headers";
    return false;
  }
  rec.header_count = static_cast<uint32_t>(hn);
  rec.headers = std::string_view(hstart, static_cast<std::size_t>(in.position() - hstart));
  return true;
}

}  // namespace

BatchError decode_batches(std::string_view bytes, std::vector<DecodedBatch>& out, std::size_t max_inflated) {
  out.clear();
  Reader r(bytes);
  while (!r.at_end()) {
    DecodedBatch b;
    const char* batch_start = r.position();
    b.base_offset = r.i64();
    const int32_t len = r.i32();
    if (!r.ok() || len < static_cast<int32_t>(kBatchHeaderBytes - 12) ||
        static_cast<std::size_t>(len) > r.remaining())
      return {ErrorCode::kCorruptMessage, "a batch length past the records"};
    Reader br(r.raw(static_cast<std::size_t>(len)));
    b.raw = std::string_view(batch_start, static_cast<std::size_t>(len) + 12);
    br.i32();  // partition leader epoch
    const int8_t magic = br.i8();
    if (magic != 2) return {ErrorCode::kCorruptMessage, "a batch of magic other than 2"};
    const uint32_t crc = br.u32();
    const std::string_view covered(br.position(), br.remaining());
    if (storage::crc32c(0, covered.data(), covered.size()) != crc)
      return {ErrorCode::kCorruptMessage, "a batch whose CRC-32C does not match"};
    b.attributes = br.i16();
    b.last_offset_delta = br.i32();
    b.base_timestamp = br.i64();
    b.max_timestamp = br.i64();
    b.producer_id = br.i64();
    b.producer_epoch = br.i16();
    b.base_sequence = br.i32();
    // A record takes at least 7 bytes: checked against the (inflated) records section below.
    const int32_t count = br.i32();
    if (!br.ok() || count < 0) return {ErrorCode::kCorruptMessage, "a bad record count"};
    if (count == 0 || b.last_offset_delta != count - 1)
      return {ErrorCode::kCorruptMessage, "the record count does not match last_offset_delta"};
    // A compressed batch: the rest of it is the records section, compressed.
    Reader plain_reader(std::string_view{});
    Reader* rr = &br;
    if (b.compression() != 0) {
      if (b.compression() > 4) return {ErrorCode::kUnsupportedCompressionType, "an unknown compression codec"};
      b.inflated = std::make_unique<std::string>();
      const char* why = "";
      switch (decompress(b.compression(), br.raw(br.remaining()), max_inflated, *b.inflated, why)) {
        case Inflate::kOk: break;
        case Inflate::kTooLarge: return {ErrorCode::kMessageTooLarge, "a batch that inflates past the limit"};
        case Inflate::kUnknownCodec: return {ErrorCode::kUnsupportedCompressionType, why};
        case Inflate::kBadStream: return {ErrorCode::kCorruptMessage, why};
      }
      plain_reader = Reader(*b.inflated);
      rr = &plain_reader;
    }
    if (static_cast<std::size_t>(count) > rr->remaining() / 7) return {ErrorCode::kCorruptMessage, "a bad record count"};
    b.records.resize(static_cast<std::size_t>(count));
    for (int32_t i = 0; i < count; ++i) {
      const char* why = "";
      if (!decode_record(*rr, b.base_timestamp, i, b.records[static_cast<std::size_t>(i)], why))
        return {ErrorCode::kCorruptMessage, why};
    }
    if (!rr->at_end()) return {ErrorCode::kCorruptMessage, "bytes after a batch's last record"};
    if (rr != &br && !br.at_end()) return {ErrorCode::kCorruptMessage, "bytes after a compressed section"};
    out.push_back(std::move(b));
  }
  if (!r.ok()) return {ErrorCode::kCorruptMessage, r.error()};
  return {};
}

void encode_batch(std::span<const OutRecord> records, std::string& out) {
  if (records.empty()) return;
  Writer w(out);
  int64_t base_ts = records[0].timestamp, max_ts = records[0].timestamp;
  for (const OutRecord& r : records) {
    base_ts = std::min(base_ts, r.timestamp);
    max_ts = std::max(max_ts, r.timestamp);
  }
  const int64_t base = records[0].offset;
  const std::size_t start = out.size();
  w.i64(base);
  const std::size_t len_at = w.reserve_i32();
  w.i32(0);  // partition leader epoch
  w.i8(2);   // magic
  const std::size_t crc_at = w.reserve_i32();
  const std::size_t crc_from = out.size();
  w.i16(0);  // attributes: uncompressed, CreateTime, not transactional
  w.i32(static_cast<int32_t>(records.back().offset - base));
  w.i64(base_ts);
  w.i64(max_ts);
  w.i64(-1);  // producer id
  w.i16(-1);  // producer epoch
  w.i32(-1);  // base sequence
  w.i32(static_cast<int32_t>(records.size()));
  // Each record is written in place: its length first, computed from the fields' sizes, so no
  // record is built aside and copied (the values are most of a Fetch response's bytes).
  for (const OutRecord& r : records) {
    const int64_t ts_delta = r.timestamp - base_ts;
    const auto off_delta = static_cast<int32_t>(r.offset - base);
    const auto klen = static_cast<int32_t>(r.key.size());
    const auto vlen = static_cast<int32_t>(r.value.size());
    const std::size_t body = 1 + varint_size(ts_delta) + varint_size(off_delta) +
                             (r.key.empty() ? varint_size(-1) : varint_size(klen) + r.key.size()) +
                             varint_size(vlen) + r.value.size() + (r.headers.empty() ? varint_size(0) : r.headers.size());
    w.varint(static_cast<int32_t>(body));
    w.i8(0);
    w.varlong(ts_delta);
    w.varint(off_delta);
    if (r.key.empty()) {
      w.varint(-1);
    } else {
      w.varint(klen);
      w.raw(r.key);
    }
    w.varint(vlen);
    w.raw(r.value);
    if (r.headers.empty())
      w.varint(0);
    else
      w.raw(r.headers);
  }
  w.patch_i32(len_at, static_cast<int32_t>(out.size() - start - 12));
  w.patch_u32(crc_at, storage::crc32c(0, out.data() + crc_from, out.size() - crc_from));
}

}  // namespace lionet::kafka
