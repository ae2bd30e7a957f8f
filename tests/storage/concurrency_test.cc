// tests/storage/concurrency_test.cc: many readers concurrently with one appender (run under
// TSan too): readers only ever see whole, correct records in offset order, through segment
// rolls and retention; concurrent appenders with every_batch (group commit path)
// and every acknowledged offset is unique.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "lionet/sched/scheduler.h"
#include "lionet/storage/file_system.h"
#include "lionet/storage/log.h"
#include "tests/common/poll_until.h"
#include "tests/storage/storage_test_util.h"

namespace lionet::storage {
namespace {

using test::TempDir;

TEST(StorageConcurrency, ReadersDuringAppendsSeeOnlyWholeRecords) {
  TempDir d;
  LogOptions o;
  o.segment_bytes = 16384;
  o.index_interval_bytes = 512;
  o.flush_policy = FlushPolicy::kNone;
  o.retention_bytes = 64 * 1024;  // old segments disappear under the readers
  auto log = Log::open(d.path(), o).value();
  const int64_t total = 6000 / test::kSanitizerDivisor;  // records (1500 under sanitizers)
  std::atomic<bool> done{false};
  std::atomic<int64_t> records_seen{0};
  std::atomic<int> failures{0};

  auto tail_reader = [&] {  // follows the end of the log, sequentially
    int64_t off = 0;
    ReadResult rr;
    while (off < total) {
      auto r = log->read(off, 2048, rr);
      if (!r.ok()) {
        if (r.error() == Errc::kOffsetOutOfRange && off < log->start_offset()) {
          off = log->start_offset();  // retention passed us
          continue;
        }
        failures++;
        ADD_FAILURE() << "read " << off << ": " << r.error().message();
        return;
      }
      for (const RecordView& v : rr.records()) {
        if (v.offset != off || v.value != test::value_for(off) || v.key != test::key_for(off)) {
          failures++;
          ADD_FAILURE() << "bad record at " << off;
          return;
        }
        off++;
        records_seen.fetch_add(1, std::memory_order_relaxed);
      }
      if (rr.empty()) std::this_thread::yield();  // at the end: the appender is behind us
    }
  };
  auto random_reader = [&] {
    std::mt19937 rng(5);
    ReadResult rr;
    while (!done.load()) {
      const int64_t start = log->start_offset(), end = log->end_offset();
      if (end == start) continue;
      const int64_t off = start + static_cast<int64_t>(rng() % static_cast<uint64_t>(end - start));
      auto r = log->read(off, 1, rr);
      if (!r.ok()) {
        if (r.error() != Errc::kOffsetOutOfRange) {
          failures++;
          ADD_FAILURE() << "random read " << off << ": " << r.error().message();
          return;
        }
        continue;
      }
      if (rr.empty() || rr[0].offset != off || rr[0].value != test::value_for(off)) {
        failures++;
        ADD_FAILURE() << "bad random read at " << off;
        return;
      }
    }
  };
  std::vector<std::thread> readers;
  readers.emplace_back(tail_reader);
  readers.emplace_back(tail_reader);
  readers.emplace_back(random_reader);
  std::thread appender([&] {
    test::append_n(*log, total / 2, 1);
    test::append_n(*log, total - total / 2, 5);
  });
  appender.join();
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(records_seen.load(), total);  // both tail readers reached the end
  EXPECT_GT(log->start_offset(), 0);  // retention did run under them
}

// A segment shows a batch a moment before end_offset() moves past it. A read in that moment
// once handed out records at or past end_offset(), so a tail reader's next read, at an offset
// it had just been given, failed with kOffsetOutOfRange (a Kafka consumer would have reset its
// position). Every record read() returns, and every batch read_stored() points at, must be
// below an end_offset() loaded after the read returned.
TEST(StorageConcurrency, ReadsNeverRunAheadOfEndOffset) {
  for (BatchFormat fmt : {BatchFormat::kLionet, BatchFormat::kKafka}) {
    TempDir d;
    LogOptions o;
    o.segment_bytes = 1 << 20;
    o.flush_policy = FlushPolicy::kNone;
    o.batch_format = fmt;
    auto log = Log::open(d.path(), o).value();
    const int64_t total = 60000 / test::kSanitizerDivisor;
    std::atomic<int> ahead{0}, errors{0};
    auto reader = [&](bool stored) {
      int64_t off = 0;
      ReadResult rr;
      while (off < total) {
        int64_t next = off;
        if (stored) {
          auto r = log->read_stored(off, 4096);
          if (!r) {
            errors++;
            ADD_FAILURE() << "read_stored " << off << ": " << r.error().message();
            return;
          }
          next = r->next_offset;
        } else {
          auto r = log->read(off, 4096, rr);
          if (!r.ok()) {
            errors++;
            ADD_FAILURE() << "read " << off << ": " << r.error().message();
            return;
          }
          next = rr.next_offset();
        }
        if (next > log->end_offset()) ahead++;
        if (next == off) std::this_thread::yield();
        off = next;
      }
    };
    std::thread r1(reader, false), r2(reader, fmt == BatchFormat::kKafka);
    test::append_n(*log, total, 1, 40);
    r1.join();
    r2.join();
    EXPECT_EQ(errors.load(), 0) << (fmt == BatchFormat::kKafka ? "kafka" : "lionet");
    EXPECT_EQ(ahead.load(), 0) << "reads returned offsets end_offset() did not cover yet";
  }
}

TEST(StorageConcurrency, ConcurrentEveryBatchAppendersGetUniqueOffsets) {
  TempDir d;
  LogOptions o;
  o.segment_bytes = 1 << 20;
  o.flush_policy = FlushPolicy::kEveryBatch;
  auto log = Log::open(d.path(), o).value();
  const int threads = 4, per_thread = 100 / test::kSanitizerDivisor;  // 400 appends (100 under sanitizers)
  std::vector<std::vector<int64_t>> offsets(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      std::string value = "thread-" + std::to_string(t);
      for (int i = 0; i < per_thread; i++) {
        auto r = log->append(Record{"", value, 1});
        ASSERT_TRUE(r.ok());
        offsets[t].push_back(*r);
      }
    });
  }
  for (auto& t : ts) t.join();
  std::set<int64_t> all;
  for (int t = 0; t < threads; t++) {
    for (int64_t off : offsets[t]) {
      all.insert(off);
      auto r = log->read(off, 1).value();
      EXPECT_EQ(r[0].value, "thread-" + std::to_string(t));
    }
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(threads * per_thread));
  EXPECT_EQ(log->end_offset(), threads * per_thread);
}

// A disk whose fdatasync takes 2 ms (a slow disk, simulated), counting syncs.
class SlowSyncFs final : public FileSystem {
 public:
  std::atomic<int> syncs{0};
  Result<std::unique_ptr<File>> open(const std::string& path, bool create) override {
    auto f = default_file_system().open(path, create);
    if (!f) return f;
    return std::unique_ptr<File>(new SlowFile(this, std::move(*f)));
  }
  Result<std::vector<std::string>> list(const std::string& dir) override { return default_file_system().list(dir); }
  Result<void> create_dirs(const std::string& dir) override { return default_file_system().create_dirs(dir); }
  Result<void> remove(const std::string& path) override { return default_file_system().remove(path); }
  Result<void> sync_dir(const std::string&) override { return {}; }

 private:
  class SlowFile final : public File {
   public:
    SlowFile(SlowSyncFs* fs, std::unique_ptr<File> f) : fs_(fs), f_(std::move(f)) {}
    Result<std::size_t> pread(void* b, std::size_t n, uint64_t o) override { return f_->pread(b, n, o); }
    Result<void> pwrite(const void* b, std::size_t n, uint64_t o) override { return f_->pwrite(b, n, o); }
    Result<void> datasync() override {
      fs_->syncs++;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return {};
    }
    Result<void> truncate(uint64_t size) override { return f_->truncate(size); }
    Result<void> allocate(uint64_t size) override { return f_->allocate(size); }
    Result<uint64_t> size() override { return f_->size(); }

   private:
    SlowSyncFs* fs_;
    std::unique_ptr<File> f_;
  };
};

// Group commit: appenders that wrote while one fdatasync ran are covered by the next one, so
// four threads need fewer syncs than appends (without group commit: exactly one per append).
// How many fewer depends on how often the threads overlap (on an idle 2-core VM about half;
// on a loaded one much less), so only "some were shared" is asserted.
TEST(StorageConcurrency, EveryBatchAppendersShareFdatasyncs) {
  TempDir d;
  SlowSyncFs fs;
  LogOptions o;
  o.flush_policy = FlushPolicy::kEveryBatch;
  o.fs = &fs;
  auto log = Log::open(d.path(), o).value();
  const int threads = 4, per_thread = 50;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&] {
      for (int i = 0; i < per_thread; i++) ASSERT_TRUE(log->append(Record{"", "v", 1}).ok());
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(log->end_offset(), threads * per_thread);
  EXPECT_LT(fs.syncs.load(), threads * per_thread) << "no fdatasync was shared";
}

// The same shape inside fibers on two workers: one appender fiber, three reader fibers (the
// hooked pread/pwrite run under the fibers), readers yield when they reach the end.
TEST(StorageConcurrency, FiberReadersAndAppenderOnTwoWorkers) {
  TempDir d;
  LogOptions o;
  o.segment_bytes = 16384;
  o.index_interval_bytes = 512;
  o.flush_policy = FlushPolicy::kNone;
  auto log = Log::open(d.path(), o).value();
  const int64_t total = 1500 / test::kSanitizerDivisor;  // records (375 under sanitizers)
  std::atomic<int> failures{0};
  {
    Scheduler sched({.threads = 2});
    std::vector<JoinHandle<int64_t>> readers;
    for (int i = 0; i < 3; i++) {
      readers.push_back(sched.spawn([&]() -> int64_t {
        int64_t off = 0;
        ReadResult rr;
        while (off < total) {
          auto r = log->read(off, 4096, rr);
          if (!r.ok()) {
            failures++;
            return off;
          }
          for (const RecordView& v : rr.records()) {
            if (v.offset != off || v.value != test::value_for(off)) {
              failures++;
              return off;
            }
            off++;
          }
          if (rr.empty()) lionet::this_fiber::yield();
        }
        return off;
      }));
    }
    auto appender = sched.spawn([&] {
      for (int64_t i = 0; i < total; i += 3) {
        test::append_n(*log, std::min<int64_t>(3, total - i), 3);
        if (i % 30 == 0) lionet::this_fiber::yield();
      }
    });
    appender.join();
    for (auto& r : readers) EXPECT_EQ(r.join(), total);
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(test::verify_range(*log, 0, total), total);
}

// wait_beyond: live readers park until the append they wait for, a deadline or wake_waiters();
// a tail that reads as records arrive sees every record once, in order, without polling.
TEST(StorageConcurrency, WaitBeyondParksUntilAnAppendADeadlineOrAWake) {
  TempDir d;
  LogOptions o;
  o.flush_policy = FlushPolicy::kNone;
  auto log = Log::open(d.path(), o).value();
  test::append_n(*log, 2, 2);  // offsets 0, 1
  EXPECT_EQ(log->wait_beyond(1, std::nullopt), 2) << "already there: no wait";

  // A deadline with nothing appended: end_offset() unchanged, not before the deadline.
  auto t0 = now();
  EXPECT_EQ(log->wait_beyond(2, now() + std::chrono::milliseconds(80)), 2);
  EXPECT_GE(now() - t0, std::chrono::milliseconds(80));

  Scheduler sched({.threads = 2});
  // 50 fiber tails and one plain thread, all woken by one append.
  const int64_t total = 200 / test::kSanitizerDivisor;
  std::atomic<int> bad{0};
  std::vector<JoinHandle<int64_t>> tails;
  auto tail = [&]() -> int64_t {
    int64_t off = 2;
    ReadResult rr;
    while (off < 2 + total) {
      if (log->wait_beyond(off, now() + std::chrono::seconds(30)) <= off) {
        bad++;  // timed out: an append did not wake it
        return off;
      }
      if (!log->read(off, 1 << 20, rr).ok()) {
        bad++;
        return off;
      }
      for (const RecordView& v : rr.records()) {
        if (v.offset != off || v.value != test::value_for(off)) bad++;
        off++;
      }
    }
    return off;
  };
  for (int i = 0; i < 50; ++i) tails.push_back(sched.spawn(tail));
  int64_t thread_end = 0;
  std::thread plain([&] { thread_end = tail(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the tails are parked by now
  auto appender = sched.spawn([&] {
    for (int64_t i = 0; i < total; ++i) {
      test::append_n(*log, 1, 1);
      if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  appender.join();
  for (auto& t : tails) EXPECT_EQ(t.join(), 2 + total);
  plain.join();
  EXPECT_EQ(thread_end, 2 + total);
  EXPECT_EQ(bad.load(), 0);

  // wake_waiters() ends a wait with no deadline at once.
  // A wake that comes before the waiter is parked is not for it (it waits for the next one):
  // wake again every poll step until the wait has ended, rather than hoping a sleep was enough.
  auto waiter = sched.spawn([&] { return log->wait_beyond(log->end_offset(), std::nullopt); });
  const bool woken = lionet::test::poll_until([&] {
    log->wake_waiters();
    return waiter.done();
  });
  EXPECT_TRUE(woken) << "wake_waiters() did not end a wait with no deadline";
  if (!woken) test::append_n(*log, 1, 1);  // lets the waiter go (and join() then says so)
  EXPECT_EQ(waiter.join(), 2 + total);
  sched.stop();
}

}  // namespace
}  // namespace lionet::storage
