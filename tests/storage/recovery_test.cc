// tests/storage/recovery_test.cc: what open() does with a damaged log: a torn or garbage tail of
// the active segment is cut (at every byte of the last record), a damaged sealed segment is
// reported on read as corruption and never returned as data.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "lionet/storage/log.h"
#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using test::append_n;
using test::segment_file;
using test::TempDir;
using test::value_for;
using test::verify_range;

LogOptions recovery_opts(uint64_t segment_bytes = 1 << 20) {
  LogOptions o;
  o.segment_bytes = segment_bytes;
  o.index_interval_bytes = 256;
  o.flush_policy = FlushPolicy::kNone;
  return o;
}

TEST(StorageRecovery, TruncateActiveSegmentAtEveryByteOfItsLastRecord) {
  TempDir d;
  int64_t last_start = 0;
  {
    auto log = Log::open(d.path(), recovery_opts()).value();
    append_n(*log, 40, 1);
    last_start = static_cast<int64_t>(log->size_bytes());
    append_n(*log, 1, 1);  // offset 40: the record to tear
  }
  const std::string path = segment_file(d.path(), 0, ".log");
  const std::string whole = test::read_file(path);
  ASSERT_GT(whole.size(), static_cast<std::size_t>(last_start));
  // Every cut inside the last batch (header and record), including cutting it off entirely.
  for (std::size_t cut = static_cast<std::size_t>(last_start); cut < whole.size(); cut++) {
    test::write_file(path, whole.substr(0, cut));
    auto log = Log::open(d.path(), recovery_opts()).value();
    ASSERT_EQ(log->end_offset(), 40) << "cut at " << cut;
    ASSERT_EQ(verify_range(*log, 0, 40), 40) << "cut at " << cut;
    EXPECT_EQ(log->read(40, 1 << 20).value().size(), 0u);  // nothing partial is visible
    EXPECT_EQ(std::filesystem::file_size(path), static_cast<uintmax_t>(last_start)) << "the torn bytes are cut";
  }
  // And the log goes on from there.
  test::write_file(path, whole.substr(0, whole.size() - 3));
  auto log = Log::open(d.path(), recovery_opts()).value();
  append_n(*log, 5, 1);
  EXPECT_EQ(verify_range(*log, 0, 45), 45);
}

TEST(StorageRecovery, GarbageOrZerosAfterTheLastBatchAreCut) {
  TempDir d;
  {
    auto log = Log::open(d.path(), recovery_opts()).value();
    append_n(*log, 30, 3);
  }
  const std::string path = segment_file(d.path(), 0, ".log");
  const std::string whole = test::read_file(path);
  std::mt19937 rng(3);
  for (int round = 0; round < 20; round++) {
    std::string tail(1 + rng() % 200, '\0');
    if (round % 2) {
      for (char& c : tail) c = static_cast<char>(rng());
    }
    test::write_file(path, whole + tail);
    auto log = Log::open(d.path(), recovery_opts()).value();
    ASSERT_EQ(log->end_offset(), 30) << round;
    ASSERT_EQ(verify_range(*log, 0, 30), 30);
    EXPECT_EQ(std::filesystem::file_size(path), whole.size());
  }
}

TEST(StorageRecovery, CorruptBatchInTheMiddleOfTheActiveSegmentCutsFromThere) {
  TempDir d;
  {
    auto log = Log::open(d.path(), recovery_opts()).value();
    append_n(*log, 50, 1);
  }
  const std::string path = segment_file(d.path(), 0, ".log");
  std::string bytes = test::read_file(path);
  bytes[bytes.size() / 2] ^= 0x40;
  test::write_file(path, bytes);
  auto log = Log::open(d.path(), recovery_opts()).value();
  EXPECT_GT(log->end_offset(), 10);
  EXPECT_LT(log->end_offset(), 50);
  EXPECT_EQ(verify_range(*log, 0, log->end_offset()), log->end_offset());
}

// Flip one byte somewhere in a sealed segment (whose index is loaded, not re-scanned): reading
// the damaged batch reports corruption; nothing wrong is ever returned as data.
TEST(StorageRecovery, ByteFlipInOldSegmentReadsAsCorruption) {
  TempDir d;
  std::vector<int64_t> bases;
  {
    auto log = Log::open(d.path(), recovery_opts(4096)).value();
    append_n(*log, 200, 2);
    bases = log->segment_base_offsets();
  }
  ASSERT_GT(bases.size(), 3u);
  const std::string path = segment_file(d.path(), bases[1], ".log");
  const std::string original = test::read_file(path);
  std::mt19937 rng(11);
  const int rounds = 40 / test::kSanitizerDivisor;  // 40 random flips (10 under sanitizers)
  for (int round = 0; round < rounds; round++) {
    std::string bytes = original;
    std::size_t at = rng() % bytes.size();
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
    test::write_file(path, bytes);
    auto log = Log::open(d.path(), recovery_opts(4096)).value();
    ASSERT_EQ(log->end_offset(), 200);
    int corrupt = 0;
    ReadResult rr;
    for (int64_t off = bases[1]; off < bases[2]; off++) {
      auto r = log->read(off, 1, rr);
      if (!r.ok()) {
        EXPECT_EQ(r.error(), Errc::kCorrupt) << "offset " << off << " flip at " << at;
        corrupt++;
        continue;
      }
      for (const RecordView& v : rr.records()) {
        ASSERT_EQ(v.value, value_for(v.offset)) << "wrong data returned at " << v.offset << " flip at " << at;
        ASSERT_EQ(v.key, test::key_for(v.offset));
      }
    }
    EXPECT_GT(corrupt, 0) << "flip at " << at << " went unnoticed";
    // Other segments are unaffected.
    EXPECT_EQ(verify_range(*log, 0, bases[1]), bases[1]);
    EXPECT_EQ(verify_range(*log, bases[2], 200), 200 - bases[2]);
  }
}

TEST(StorageRecovery, DamagedSealedSegmentWithoutIndexIsReportedNotCut) {
  TempDir d;
  std::vector<int64_t> bases;
  {
    auto log = Log::open(d.path(), recovery_opts(4096)).value();
    append_n(*log, 200, 2);
    bases = log->segment_base_offsets();
  }
  const std::string path = segment_file(d.path(), bases[1], ".log");
  std::string bytes = test::read_file(path);
  const std::size_t size = bytes.size();
  bytes[size / 2] ^= 0x01;
  test::write_file(path, bytes);
  std::filesystem::remove(segment_file(d.path(), bases[1], ".index"));
  auto log = Log::open(d.path(), recovery_opts(4096)).value();
  EXPECT_EQ(log->end_offset(), 200);
  EXPECT_EQ(std::filesystem::file_size(path), size);  // a sealed segment is never cut
  int corrupt = 0;
  for (int64_t off = bases[1]; off < bases[2]; off++) {
    auto r = log->read(off, 1);
    if (!r.ok()) {
      EXPECT_EQ(r.error(), Errc::kCorrupt);
      corrupt++;
    } else {
      for (const RecordView& v : r->records()) ASSERT_EQ(v.value, value_for(v.offset));
    }
  }
  EXPECT_GT(corrupt, 0);
  EXPECT_EQ(verify_range(*log, bases[2], 200), 200 - bases[2]);
}

}  // namespace
}  // namespace lionet::storage
