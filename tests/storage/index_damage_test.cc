// tests/storage/index_damage_test.cc: damage the fuzzer (tests/fuzz/segment_recovery_fuzz.cc)
// reaches and the recovery tests do not: index files that are well-formed but wrong, a damaged
// batch in the middle of a multi-batch read, and a directory entry that looks like a segment.
// An index file is derived data: whatever happens to it, every sound record stays readable.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "lionet/storage/detail/batch_format.h"
#include "lionet/storage/log.h"
#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using test::append_n;
using test::segment_file;
using test::TempDir;
using test::verify_range;

// The batches these tests take apart are in the kLionet layout (batch_format.h); the kKafka
// layout's damage is in kafka_format_test.cc, and both go through the same index and read code.
LogOptions index_opts(uint32_t index_interval = 256) {
  LogOptions o;
  o.batch_format = BatchFormat::kLionet;
  o.segment_bytes = 4096;
  o.index_interval_bytes = index_interval;
  o.flush_policy = FlushPolicy::kNone;
  return o;
}

// 200 records in batches of 2 over several 4 KiB segments; returns the segment bases.
std::vector<int64_t> write_log(const std::string& dir, const LogOptions& o = index_opts()) {
  auto log = Log::open(dir, o).value();
  append_n(*log, 200, 2);
  auto bases = log->segment_base_offsets();
  EXPECT_GE(bases.size(), 3u);
  return bases;
}

template <class T>
T load(const std::string& s, std::size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}
template <class T>
void store(std::string& s, std::size_t at, T v) {
  std::memcpy(s.data() + at, &v, sizeof v);
}

// Every offset read one batch at a time and with large reads, contents checked; and backwards,
// so that no read starts from the previous read's hint: each one goes through the index.
void expect_all_readable(const Log& log, int64_t end) {
  EXPECT_EQ(verify_range(log, 0, end, 300, 1), end);
  EXPECT_EQ(verify_range(log, 0, end, 300, 1 << 16), end);
  ReadResult rr;
  for (int64_t off = end - 1; off >= 0; off--) {
    auto r = log.read(off, 1, rr);
    ASSERT_TRUE(r.ok()) << "offset " << off << ": " << r.error().message();
    ASSERT_FALSE(rr.empty());
    EXPECT_EQ(rr[0].offset, off);
    EXPECT_EQ(rr[0].value, test::value_for(off)) << "offset " << off;
  }
}

// An index with one entry {0, 0} passes open's shape checks, and a read walked batch headers past
// the end of its window (heap-buffer-overflow under ASan, stale bytes taken for headers without
// it). Seen in review of the read path while writing segment_recovery_fuzz; its input
// crash-sealed-record-count (a sealed batch's record count lowered) reaches the same overflow.
TEST(StorageIndexDamage, SparseButWellFormedIndexStillReadsEveryRecord) {
  TempDir d;
  const auto bases = write_log(d.path());
  const std::string tidx_path = segment_file(d.path(), 0, ".timeindex");
  const std::string tidx = test::read_file(tidx_path);
  std::string idx(8, '\0');  // rel 0, position 0
  std::string sparse_tidx(12, '\0');
  store<int64_t>(sparse_tidx, 0, std::numeric_limits<int64_t>::min());
  sparse_tidx += tidx.substr(tidx.size() - 12);  // the trailer: max timestamp, record count
  test::write_file(segment_file(d.path(), 0, ".index"), idx);
  test::write_file(tidx_path, sparse_tidx);
  auto log = Log::open(d.path(), index_opts()).value();
  expect_all_readable(*log, 200);
}

// Index entries that point inside a batch (every one but the first and the last, which open
// checks, shifted by a byte): each read falls back to earlier entries, down to {0, 0}, and
// still finds its record.
TEST(StorageIndexDamage, IndexEntriesPointingInsideBatchesFallBackToEarlierOnes) {
  TempDir d;
  const auto bases = write_log(d.path());
  for (std::size_t s = 0; s + 1 < bases.size(); s++) {
    const std::string path = segment_file(d.path(), bases[s], ".index");
    std::string idx = test::read_file(path);
    ASSERT_GE(idx.size(), 24u);
    for (std::size_t at = 8; at + 8 < idx.size(); at += 8) {
      store<uint32_t>(idx, at + 4, load<uint32_t>(idx, at + 4) + 1);
    }
    test::write_file(path, idx);
  }
  auto log = Log::open(d.path(), index_opts()).value();
  expect_all_readable(*log, 200);
}

// An index entry that names the wrong offset for a real batch boundary (entry 1 moved forward
// to the last batch before entry 2's: positions still increasing): the header check catches it
// and the reads of entry 1's first batches fall back to entry 0.
TEST(StorageIndexDamage, IndexEntryNamingTheWrongBatchIsNotTrusted) {
  TempDir d;
  const LogOptions o = index_opts(1024);  // entries ~1 KiB apart: a few batches each
  const auto bases = write_log(d.path(), o);
  const std::string path = segment_file(d.path(), bases[0], ".index");
  std::string idx = test::read_file(path);
  ASSERT_GE(idx.size(), 24u);
  const std::string seg = test::read_file(segment_file(d.path(), bases[0], ".log"));
  const uint32_t p1 = load<uint32_t>(idx, 12);
  const uint32_t p2 = load<uint32_t>(idx, 20);
  uint32_t last = p1;
  while (last + load<uint32_t>(seg, last) < p2) last += load<uint32_t>(seg, last);
  ASSERT_GT(last, p1) << "entry 1 should span more than one batch";
  store<uint32_t>(idx, 12, last);
  test::write_file(path, idx);
  auto log = Log::open(d.path(), o).value();
  expect_all_readable(*log, 200);
}

// A read that has accepted good batches returns them when it meets a damaged one; the read that
// starts at the damaged batch is the one that reports kCorrupt. Before, the whole read failed,
// so a consumer using large reads lost the good records in front of any damage.
TEST(StorageIndexDamage, DamagedBatchEndsALargeReadInsteadOfFailingIt) {
  TempDir d;
  const auto bases = write_log(d.path());
  const std::string path = segment_file(d.path(), bases[0], ".log");
  std::string bytes = test::read_file(path);
  const uint32_t len0 = load<uint32_t>(bytes, 0);
  const uint32_t len1 = load<uint32_t>(bytes, len0);
  bytes[len0 + len1 - 1] ^= 0x20;  // last value byte of the second batch (offsets 2, 3)
  test::write_file(path, bytes);
  auto log = Log::open(d.path(), index_opts()).value();  // the index files load: no rescan
  auto r = log->read(0, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->next_offset(), 2);
  EXPECT_EQ((*r)[1].value, test::value_for(1));
  for (int64_t off : {2, 3}) {
    auto bad = log->read(off, 1 << 20);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error(), Errc::kCorrupt);
  }
  EXPECT_EQ(verify_range(*log, 4, 200, 300, 1 << 16), 196);
}

// A batch with a good CRC whose header timestamps are not its records' (recovery builds the time
// index from headers, so offset_for_time would trust them), or whose record timestamps overflow
// int64: the scan cuts it from the active segment like any other bad batch.
TEST(StorageIndexDamage, BatchWhoseHeaderTimestampsDisagreeWithItsRecordsIsCut) {
  const std::vector<std::pair<int64_t, int64_t>> cases = {
      // {record 1 timestamp delta, max_timestamp bump}
      {0, 1},  // max_timestamp one more than the record's
      {std::numeric_limits<int64_t>::max(), 0}};  // first_timestamp + delta overflows
  for (const auto& [delta1, max_ts_bump] : cases) {
    TempDir d;
    {
      auto log = Log::open(d.path(), index_opts()).value();
      append_n(*log, 3);
    }
    const std::string k = "k", v = "v", v2 = "w";
    const std::vector<Record> recs = {Record{k, v, 5000}, Record{k, v2, 5001}};
    std::string batch(detail::encoded_size(recs), '\0');
    detail::encode_batch(batch.data(), 3, recs, 0);
    if (delta1 != 0) store<int64_t>(batch, detail::kBatchHeaderBytes + 20 + 2, delta1);  // record 1 delta
    store<int64_t>(batch, 32, load<int64_t>(batch, 32) + max_ts_bump);
    store<uint32_t>(batch, 4, detail::batch_crc(batch.data(), batch.size()));
    const std::string path = segment_file(d.path(), 0, ".log");
    const std::string good = test::read_file(path);
    test::write_file(path, good + batch);
    auto log = Log::open(d.path(), index_opts()).value();
    EXPECT_EQ(log->end_offset(), 3);
    EXPECT_EQ(std::filesystem::file_size(path), good.size());
    EXPECT_EQ(verify_range(*log, 0, 3), 3);
  }
}

// A 20-digit name past INT64_MAX overflowed the parse (UB; in practice a wrapped base offset
// 7766279631452241919 that the log then started at). It is not a name the log writes: ignored.
TEST(StorageIndexDamage, SegmentNamePastInt64MaxIsIgnored) {
  TempDir d;
  test::write_file(d.sub("99999999999999999999.log"), "");
  auto log = Log::open(d.path(), index_opts()).value();
  EXPECT_EQ(log->start_offset(), 0);
  EXPECT_EQ(log->end_offset(), 0);
  append_n(*log, 3);
  EXPECT_EQ(verify_range(*log, 0, 3), 3);
}

}  // namespace
}  // namespace lionet::storage
