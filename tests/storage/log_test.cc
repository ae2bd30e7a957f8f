// tests/storage/log_test.cc: Log behaviour a user sees: round trips across rolls, reads from
// every offset, index rebuild, retention, offset_for_time, truncate_to, flush policies, bad
// arguments.
#include "lionet/storage/log.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using test::append_n;
using test::key_for;
using test::segment_file;
using test::TempDir;
using test::value_for;
using test::verify_range;

LogOptions small_segments(uint64_t segment_bytes = 4096) {
  LogOptions o;
  o.segment_bytes = segment_bytes;
  o.index_interval_bytes = 512;
  o.flush_policy = FlushPolicy::kNone;
  return o;
}

TEST(StorageLog, EmptyLogReadsNothing) {
  TempDir d;
  auto log = Log::open(d.path(), small_segments()).value();
  EXPECT_EQ(log->start_offset(), 0);
  EXPECT_EQ(log->end_offset(), 0);
  auto r = log->read(0, 1024);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(r->next_offset(), 0);
  EXPECT_EQ(log->read(1, 1024).error(), Errc::kOffsetOutOfRange);
  EXPECT_EQ(log->read(-1, 1024).error(), Errc::kOffsetOutOfRange);
  EXPECT_TRUE(std::filesystem::exists(segment_file(d.path(), 0, ".log")));
}

TEST(StorageLog, RoundTripAcrossRollsAndReopen) {
  TempDir d;
  {
    auto log = Log::open(d.path(), small_segments()).value();
    append_n(*log, 300, 1);
    append_n(*log, 300, 7);
    EXPECT_EQ(log->end_offset(), 600);
    EXPECT_GT(log->segment_count(), 10u);  // 4 KiB segments, ~200 B records
    EXPECT_EQ(verify_range(*log, 0, 600), 600);
  }
  auto log = Log::open(d.path(), small_segments()).value();
  EXPECT_EQ(log->end_offset(), 600);
  EXPECT_EQ(verify_range(*log, 0, 600), 600);
  // The segment files are named by their base offsets, and those are contiguous.
  auto bases = log->segment_base_offsets();
  EXPECT_EQ(bases.front(), 0);
  for (int64_t b : bases) EXPECT_TRUE(std::filesystem::exists(segment_file(d.path(), b, ".log")));
  for (std::size_t i = 0; i + 1 < bases.size(); i++) {
    EXPECT_TRUE(std::filesystem::exists(segment_file(d.path(), bases[i], ".index")));
    EXPECT_TRUE(std::filesystem::exists(segment_file(d.path(), bases[i], ".timeindex")));
  }
  append_n(*log, 10, 3);  // appends continue after reopen
  EXPECT_EQ(verify_range(*log, 0, 610), 610);
}

TEST(StorageLog, ReadFromEveryOffsetReturnsThatRecordFirst) {
  TempDir d;
  auto log = Log::open(d.path(), small_segments(8192)).value();
  append_n(*log, 200, 5);  // batches of 5: most offsets are in the middle of a batch
  ReadResult rr;
  for (int64_t off = 0; off < 200; off++) {
    ASSERT_TRUE(log->read(off, 1, rr).ok()) << off;
    ASSERT_FALSE(rr.empty()) << off;
    EXPECT_EQ(rr[0].offset, off);
    EXPECT_EQ(rr[0].value, value_for(off));
    EXPECT_EQ(rr.next_offset(), rr.records().back().offset + 1);
    // max_bytes 1 still returns the whole batch holding the offset, and only that batch.
    EXPECT_EQ(rr.next_offset(), (off / 5 + 1) * 5);
  }
  // Large reads stop at max_bytes (after the first batch) and never cross a segment.
  ASSERT_TRUE(log->read(0, 2000, rr).ok());
  EXPECT_LE(rr.bytes(), 2000u);
  EXPECT_GT(rr.size(), 5u);
}

TEST(StorageLog, ReadResultViewsSurviveMove) {
  TempDir d;
  auto log = Log::open(d.path(), small_segments()).value();
  append_n(*log, 20, 4);
  ReadResult moved = log->read(4, 1 << 20).value();
  ReadResult r2 = std::move(moved);
  ASSERT_FALSE(r2.empty());
  EXPECT_EQ(r2[0].key, key_for(4));
  EXPECT_EQ(r2[0].value, value_for(4));
}

TEST(StorageLog, IndexFilesAreRebuiltAfterDeletion) {
  TempDir d;
  std::vector<int64_t> bases;
  {
    auto log = Log::open(d.path(), small_segments()).value();
    append_n(*log, 400, 2);
    bases = log->segment_base_offsets();
  }
  ASSERT_GT(bases.size(), 3u);
  for (int64_t b : bases) {
    std::filesystem::remove(segment_file(d.path(), b, ".index"));
    std::filesystem::remove(segment_file(d.path(), b, ".timeindex"));
  }
  // A stale index (one that no longer matches its log) is rebuilt as well.
  test::write_file(segment_file(d.path(), bases[1], ".index"), std::string(16, '\x01'));
  auto log = Log::open(d.path(), small_segments()).value();
  EXPECT_EQ(log->end_offset(), 400);
  EXPECT_EQ(verify_range(*log, 0, 400), 400);
  for (std::size_t i = 0; i + 1 < bases.size(); i++) {
    EXPECT_TRUE(std::filesystem::exists(segment_file(d.path(), bases[i], ".index"))) << bases[i];
    EXPECT_GT(std::filesystem::file_size(segment_file(d.path(), bases[i], ".index")), 0u);
  }
  ReadResult rr;
  for (int64_t off : {0, 57, 133, 399}) {  // random access through the rebuilt index
    ASSERT_TRUE(log->read(off, 1, rr).ok());
    EXPECT_EQ(rr[0].offset, off);
  }
}

TEST(StorageLog, RetentionByBytesDeletesWholeOldestSegments) {
  TempDir d;
  LogOptions o = small_segments();
  o.retention_bytes = 12 * 1024;
  auto log = Log::open(d.path(), o).value();
  append_n(*log, 600, 1);
  EXPECT_GT(log->start_offset(), 0);
  // Retention ran at the last roll: at least retention_bytes remained in sealed segments, less
  // than that plus one segment, plus the active segment (one segment + one batch).
  EXPECT_GE(log->size_bytes(), 12u * 1024);
  EXPECT_LE(log->size_bytes(), 12u * 1024 + 2 * (4096 + 400));
  EXPECT_FALSE(std::filesystem::exists(segment_file(d.path(), 0, ".log")));
  EXPECT_EQ(log->read(0, 100).error(), Errc::kOffsetOutOfRange);
  EXPECT_EQ(log->segment_base_offsets().front(), log->start_offset());
  EXPECT_EQ(verify_range(*log, log->start_offset(), 600), 600 - log->start_offset());
  // The start survives a reopen.
  int64_t start = log->start_offset();
  log.reset();
  log = Log::open(d.path(), o).value();
  EXPECT_EQ(log->start_offset(), start);
}

TEST(StorageLog, RetentionByAgeUsesTheNewestRecordOfASegment) {
  TempDir d;
  {
    auto log = Log::open(d.path(), small_segments()).value();
    append_n(*log, 200, 1);  // timestamps 1000..1199 (1970): no retention while writing
  }
  LogOptions o = small_segments();
  o.retention_ms = 1000;
  auto log = Log::open(d.path(), o).value();
  const std::size_t segs = log->segment_count();
  ASSERT_GT(segs, 3u);
  // With "now" at 2100, segments whose newest record is older than 1100 go.
  auto n = log->enforce_retention(2100);
  ASSERT_TRUE(n.ok());
  EXPECT_GT(*n, 0u);
  EXPECT_LT(*n, segs);
  auto bases = log->segment_base_offsets();
  ASSERT_GT(bases.size(), 1u);
  EXPECT_LE(bases.front(), 101);  // the segment holding offset 100 (timestamp 1100) stays
  EXPECT_EQ(verify_range(*log, log->start_offset(), 200), 200 - log->start_offset());
  // Far in the future everything but the active segment goes.
  ASSERT_TRUE(log->enforce_retention(1'000'000).ok());
  EXPECT_EQ(log->segment_count(), 1u);
}

TEST(StorageLog, OffsetForTime) {
  TempDir d;
  auto log = Log::open(d.path(), small_segments()).value();
  append_n(*log, 300, 3);  // record at offset o has timestamp 1000 + o
  for (int64_t ts : {0, 1000, 1001, 1150, 1299}) {
    auto r = log->offset_for_time(ts);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, std::max<int64_t>(0, ts - 1000)) << ts;
  }
  EXPECT_EQ(log->offset_for_time(5000).value(), 300);  // none that late: the end
}

TEST(StorageLog, TruncateToMiddleOfBatchKeepsEarlierRecords) {
  TempDir d;
  auto log = Log::open(d.path(), small_segments()).value();
  append_n(*log, 200, 4);
  ASSERT_TRUE(log->truncate_to(123).ok());  // inside the batch 120..123
  EXPECT_EQ(log->end_offset(), 123);
  EXPECT_EQ(verify_range(*log, 0, 123), 123);
  EXPECT_EQ(log->read(124, 10).error(), Errc::kOffsetOutOfRange);
  append_n(*log, 10, 1);
  EXPECT_EQ(verify_range(*log, 0, 133), 133);
  log.reset();
  log = Log::open(d.path(), small_segments()).value();
  EXPECT_EQ(log->end_offset(), 133);
  EXPECT_EQ(verify_range(*log, 0, 133), 133);
  ASSERT_TRUE(log->truncate_to(0).ok());
  EXPECT_EQ(log->end_offset(), 0);
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->truncate_to(5).error(), Errc::kOffsetOutOfRange);
}

TEST(StorageLog, SegmentRollsByAge) {
  TempDir d;
  LogOptions o = small_segments(1 << 20);
  o.segment_ms = 1;
  auto log = Log::open(d.path(), o).value();
  append_n(*log, 1, 1);
  // The active segment's first append must be >= 1 ms old for the next append to roll: wait
  // for the wall clock to move (bounded).
  auto t0 = std::chrono::system_clock::now();
  while (std::chrono::system_clock::now() - t0 < std::chrono::milliseconds(3)) {
  }
  append_n(*log, 1, 1);
  EXPECT_EQ(log->segment_count(), 2u);
}

TEST(StorageLog, FlushPoliciesAppendAndReadTheSame) {
  for (FlushPolicy p : {FlushPolicy::kEveryBatch, FlushPolicy::kMessages, FlushPolicy::kInterval, FlushPolicy::kNone}) {
    TempDir d;
    LogOptions o = small_segments();
    o.flush_policy = p;
    o.flush_messages = 3;
    o.flush_ms = 0;
    auto log = Log::open(d.path(), o).value();
    append_n(*log, 30, 2);
    ASSERT_TRUE(log->flush().ok());
    EXPECT_EQ(verify_range(*log, 0, 30), 30) << to_string(p);
  }
  EXPECT_EQ(parse_flush_policy("every_batch"), FlushPolicy::kEveryBatch);
  EXPECT_EQ(parse_flush_policy("ms"), FlushPolicy::kInterval);
  EXPECT_FALSE(parse_flush_policy("sometimes").has_value());
}

TEST(StorageLog, BadArguments) {
  TempDir d;
  LogOptions o = small_segments();
  o.segment_bytes = 10;
  EXPECT_EQ(Log::open(d.path(), o).error(), Errc::kInvalidArgument);
  o = small_segments();
  o.max_batch_bytes = 2048;
  auto log = Log::open(d.path(), o).value();
  EXPECT_EQ(log->append_batch({}).error(), Errc::kInvalidArgument);
  std::string big(4096, 'x');
  EXPECT_EQ(log->append(Record{"", big}).error(), Errc::kRecordTooLarge);
  EXPECT_EQ(log->end_offset(), 0);
  // A batch bigger than segment_bytes gets a segment of its own.
  o.max_batch_bytes = 1 << 20;
  o.segment_bytes = 4096;
  log.reset();
  log = Log::open(d.path(), o).value();
  ASSERT_TRUE(log->append(Record{"a", "b"}).ok());
  ASSERT_TRUE(log->append(Record{"", std::string(10000, 'y')}).ok());
  ASSERT_TRUE(log->append(Record{"c", "d"}).ok());
  EXPECT_EQ(log->segment_count(), 3u);
  EXPECT_EQ(log->read(1, 1).value()[0].value.size(), 10000u);
}

}  // namespace
}  // namespace lionet::storage
