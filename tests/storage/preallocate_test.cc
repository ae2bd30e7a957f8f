// tests/storage/preallocate_test.cc: LogOptions::preallocate_bytes. The active segment's file
// runs ahead of its data (so an fdatasync finds the size unchanged), but what a user sees on
// disk after a close or a roll is exactly the data, and after a crash recovery cuts the zeros
// without calling them damage or losing a record.
#include <gtest/gtest.h>

#include <filesystem>

#include "lionet/storage/log.h"
#include "tests/storage/fault_injection_fs.h"
#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using test::append_n;
using test::file_size;
using test::segment_file;
using test::TempDir;
using test::verify_range;

LogOptions preallocating(uint64_t preallocate, uint64_t segment_bytes = uint64_t{1} << 20) {
  LogOptions o;
  o.segment_bytes = segment_bytes;
  o.index_interval_bytes = 512;
  o.flush_policy = FlushPolicy::kEveryBatch;
  o.preallocate_bytes = preallocate;
  return o;
}

TEST(StoragePreallocate, TheActiveFileRunsAheadAndIsCutToItsDataAtClose) {
  TempDir d;
  const std::string active = segment_file(d.path(), 0, ".log");
  uint64_t data = 0;
  {
    auto log = Log::open(d.path(), preallocating(64 * 1024)).value();
    append_n(*log, 1);
    const uint64_t first = log->size_bytes();
    ASSERT_GT(first, 0u);
    EXPECT_EQ(file_size(active), first + 64 * 1024) << "preallocated ahead of the first batch";
    append_n(*log, 19);
    EXPECT_GT(log->size_bytes(), first);
    EXPECT_EQ(file_size(active), first + 64 * 1024) << "small appends stay inside the preallocated space";
    data = log->size_bytes();
  }
  EXPECT_EQ(file_size(active), data);
  auto log = Log::open(d.path(), preallocating(64 * 1024)).value();
  EXPECT_EQ(log->end_offset(), 20);
  EXPECT_EQ(verify_range(*log, 0, 20), 20);
}

TEST(StoragePreallocate, OffKeepsTheFileAtItsData) {
  TempDir d;
  auto log = Log::open(d.path(), preallocating(0)).value();
  append_n(*log, 10);
  EXPECT_EQ(file_size(segment_file(d.path(), 0, ".log")), log->size_bytes());
}

TEST(StoragePreallocate, SealedSegmentsHoldOnlyTheirBatches) {
  TempDir d;
  auto log = Log::open(d.path(), preallocating(64 * 1024, 8192)).value();
  append_n(*log, 200);
  const auto bases = log->segment_base_offsets();
  ASSERT_GT(bases.size(), 3u);
  uint64_t sealed = 0;
  for (std::size_t i = 0; i + 1 < bases.size(); i++) {
    const uint64_t s = file_size(segment_file(d.path(), bases[i], ".log"));
    EXPECT_LE(s, 8192u) << "segment " << bases[i];
    sealed += s;
  }
  // Preallocation never runs past the roll size.
  EXPECT_EQ(file_size(segment_file(d.path(), bases.back(), ".log")), 8192u);
  EXPECT_LT(sealed, log->size_bytes());
  EXPECT_EQ(verify_range(*log, 0, 200), 200);
}

TEST(StoragePreallocate, ACrashLeavesZerosThatRecoveryCutsKeepingEveryAcknowledgedRecord) {
  TempDir d;
  test::FaultInjectionFs fs(7);
  LogOptions o = preallocating(32 * 1024);
  o.fs = &fs;
  const std::string active = segment_file(d.path(), 0, ".log");
  {
    auto log = Log::open(d.path(), o).value();
    append_n(*log, 50);
    fs.freeze();  // the power goes: the close below can neither cut nor sync
  }
  fs.crash(test::CrashMode::kDropUnsynced);
  ASSERT_GT(file_size(active), 0u);
  const uint64_t with_zeros = file_size(active);
  auto log = Log::open(d.path(), o).value();
  EXPECT_EQ(log->end_offset(), 50) << "every acknowledged (synced) record is there";
  EXPECT_EQ(verify_range(*log, 0, 50), 50);
  EXPECT_LT(log->size_bytes(), with_zeros);
  // The reopened log preallocates again only when it appends; its data is intact behind.
  append_n(*log, 5);
  EXPECT_EQ(verify_range(*log, 0, 55), 55);
}

TEST(StoragePreallocate, ZerosAfterASealedSegmentAreCutNotReportedAsDamage) {
  TempDir d;
  std::vector<int64_t> bases;
  {
    auto log = Log::open(d.path(), preallocating(0, 8192)).value();
    append_n(*log, 120);
    bases = log->segment_base_offsets();
  }
  ASSERT_GT(bases.size(), 2u);
  // As a power cut between cutting a sealed segment's preallocation and syncing it leaves it.
  const std::string first = segment_file(d.path(), bases[0], ".log");
  const uint64_t data = file_size(first);
  std::filesystem::resize_file(first, data + 4096);
  auto log = Log::open(d.path(), preallocating(0, 8192)).value();
  EXPECT_EQ(log->end_offset(), 120);
  EXPECT_EQ(verify_range(*log, 0, 120), 120);
  EXPECT_EQ(file_size(first), data);
}

}  // namespace
}  // namespace lionet::storage
