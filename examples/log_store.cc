// examples/log_store.cc: the storage layer in one page: a Store of topics, each partition an
// append-only Log of records (offset, timestamp, key, value) kept in segment files.
//
//   ./log_store [dir] [records] [writers]
//       dir      where the data lives (default "": a new temporary directory, removed at the end)
//       records  records this run appends (default 1000)
//       writers  fibers appending at the same time (default 4)
//
// What it does:
//   1. Opens a Store in `dir`. Whatever an earlier run left there is recovered and kept: run it
//      twice on one directory and the second run's offsets continue where the first stopped.
//   2. `writers` fibers append to topic "events", partition 0: even writers one record at a
//      time (Log::append), odd writers ten at a time (Log::append_batch: one write, one CRC,
//      one fdatasync). Each append returns once the record is on disk (FlushPolicy::kEveryBatch;
//      concurrent appenders share fdatasyncs).
//   3. Reads back everything this run appended, 4 KiB at a time (a read returns whole records
//      and the offset to continue from), and checks each writer's records are all there, once,
//      in the order that writer appended them.
//   4. Closes the Store and opens it again: the end offset must survive.
// The last line can be checked:
//   result: start=S end=E appended=N read_back=N reopened_end=E status=ok
// Exit status 0 when everything checks out, 1 when not, 2 on bad arguments or an unusable dir.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "lionet/sched/scheduler.h"
#include "lionet/storage/store.h"

namespace storage = lionet::storage;

namespace {
constexpr char kTopic[] = "events";

// Opens the store with small segments (16 KiB instead of 1 GiB) so that even this small run
// rolls a few segment files and the reads cross from one segment to the next.
std::unique_ptr<storage::Store> open_store(const std::string& dir) {
  storage::StoreOptions options;
  options.data_dir = dir;
  options.log.segment_bytes = 16 * 1024;
  options.log.flush_policy = storage::FlushPolicy::kEveryBatch;  // the default, said out loud
  auto store = storage::Store::open(options);
  if (!store) {
    std::fprintf(stderr, "cannot open a store in %s: %s\n", dir.c_str(), store.error().message().c_str());
    return nullptr;
  }
  return std::move(store).value();
}

// The record a writer appends as its seq-th: key "w<writer>", value "w<writer>-<seq>".
// (Built with append: GCC 12 warns falsely, -Wrestrict, about a chain of string operator+.)
std::string key_of(int writer) { return std::string("w").append(std::to_string(writer)); }
std::string value_of(int writer, int seq) { return key_of(writer).append("-").append(std::to_string(seq)); }

// Appends `count` records for `writer`: one at a time, or in batches of up to 10.
bool write_records(storage::Log& log, int writer, int count, bool batches) {
  for (int seq = 0; seq < count;) {
    const int n = batches ? std::min(10, count - seq) : 1;
    std::vector<std::string> values;
    std::vector<storage::Record> records;  // borrows the strings: they must outlive the call
    for (int i = 0; i < n; ++i) values.push_back(value_of(writer, seq + i));
    const std::string key = key_of(writer);
    for (const auto& v : values) records.push_back({.key = key, .value = v});
    auto offset = n == 1 ? log.append(records[0]) : log.append_batch(records);
    if (!offset) {
      std::fprintf(stderr, "writer %d: append failed: %s\n", writer, offset.error().message().c_str());
      return false;
    }
    seq += n;
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "";
  const int records = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int writers = argc > 3 ? std::atoi(argv[3]) : 4;
  if (records < 0 || records > 1000000 || writers < 1 || writers > 1000) {
    std::fprintf(stderr, "usage: %s [dir] [records<=1000000] [writers>=1]\n", argv[0]);
    return 2;
  }
  const bool temporary = dir.empty();
  if (temporary) {
    char tmpl[] = "/tmp/lionet-log-store-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return 2;
    dir = tmpl;
  }
  std::printf("data in %s%s\n", dir.c_str(), temporary ? " (temporary)" : "");

  auto store = open_store(dir);
  if (!store) return 2;
  auto log_or = store->log(kTopic, 0);  // created on first use (auto_create_topics)
  if (!log_or) {
    std::fprintf(stderr, "topic %s: %s\n", kTopic, log_or.error().message().c_str());
    return 2;
  }
  storage::Log& log = **log_or;
  const int64_t start = log.end_offset();  // where this run's records begin
  if (start > 0) std::printf("found %lld records from an earlier run\n", static_cast<long long>(start));

  // 2. The writers: fibers on two worker threads. An append blocks its fiber (the log's
  //    lionet::Mutex, the write, the fdatasync); the other fibers keep going.
  lionet::Scheduler sched({.threads = 2, .name = "store"});
  std::vector<lionet::JoinHandle<bool>> fibers;
  for (int w = 0; w < writers; ++w) {
    const int count = records / writers + (w < records % writers ? 1 : 0);
    fibers.push_back(sched.spawn([&log, w, count] { return write_records(log, w, count, w % 2 == 1); }));
  }
  bool ok = true;
  for (auto& f : fibers) ok = f.join() && ok;
  const int64_t end = log.end_offset();

  // 3. Read back [start, end): every writer's records in its own order, each exactly once.
  std::vector<int> next_seq(writers, 0);
  int64_t read_back = 0;
  storage::ReadResult rr;  // reused: no allocation per read once its buffers are big enough
  for (int64_t offset = start; ok && offset < end; offset = rr.next_offset()) {
    if (auto r = log.read(offset, 4096, rr); !r) {
      std::fprintf(stderr, "read at %lld: %s\n", static_cast<long long>(offset), r.error().message().c_str());
      ok = false;
      break;
    }
    for (const storage::RecordView& rec : rr.records()) {
      const int w = std::atoi(std::string(rec.key.substr(1)).c_str());
      if (w < 0 || w >= writers || rec.value != value_of(w, next_seq[w])) {
        std::fprintf(stderr, "offset %lld: unexpected record %.*s\n", static_cast<long long>(rec.offset),
                     static_cast<int>(rec.value.size()), rec.value.data());
        ok = false;
        break;
      }
      ++next_seq[w];
      ++read_back;
    }
  }
  sched.stop();

  if (auto info = store->describe(kTopic)) {
    const storage::PartitionInfo& p = info->partitions[0];
    std::printf("topic %s partition 0: offsets %lld..%lld, %llu bytes in %zu segment files\n", kTopic,
                static_cast<long long>(p.start_offset), static_cast<long long>(p.end_offset),
                static_cast<unsigned long long>(p.size_bytes), p.segments);
  }

  // 4. Close (flushes) and open again: recovery must find every acknowledged record.
  store.reset();
  int64_t reopened_end = -1;
  if (auto again = open_store(dir)) {
    if (auto l = again->log(kTopic, 0)) reopened_end = (*l)->end_offset();
  }

  ok = ok && end - start == records && read_back == records && reopened_end == end;
  std::printf("result: start=%lld end=%lld appended=%lld read_back=%lld reopened_end=%lld status=%s\n",
              static_cast<long long>(start), static_cast<long long>(end), static_cast<long long>(end - start),
              static_cast<long long>(read_back), static_cast<long long>(reopened_end), ok ? "ok" : "wrong");
  if (temporary) std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}
