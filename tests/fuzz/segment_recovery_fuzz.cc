// libFuzzer target for storage recovery (lionet::storage::Log::open): arbitrary bytes become a
// segment file, and recovery must give a log a user can rely on.
//
// Input byte 0 picks the mode:
//   even: the bytes are the only (active) segment 00000000000000000000.log of a fresh directory;
//   odd:  a real log is written first (small segments: a sealed segment with its .index and
//         .timeindex, and an active one), then the bytes replace one of the sealed segment's
//         three files (byte 0 >> 1, mod 3) or the active segment's .log (mod 4 == 3).
// Invariants (a violation traps):
//   - open() returns a log or an error, never crashes, hangs or leaks;
//   - start_offset <= end_offset; every offset in between (bounded) reads back a batch whose
//     records have consecutive offsets covering it, or Errc::kCorrupt for a damaged SEALED
//     segment; the active segment is always cut back to its valid prefix, so in even mode no
//     read may fail at all;
//   - an append gets end_offset, reads back its value, and a reopen keeps it.
// The directory lives in /dev/shm when it exists (tmpfs: fast, no disk wear), one per process.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lionet/log/log.h"
#include "lionet/storage/errors.h"
#include "lionet/storage/log.h"

namespace {
namespace fs = std::filesystem;
using lionet::storage::Errc;
using lionet::storage::Log;
using lionet::storage::LogOptions;
using lionet::storage::Record;

#define CHECK(c) \
  do {           \
    if (!(c)) __builtin_trap(); \
  } while (0)

fs::path scratch() {
  static const fs::path dir = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    return base / ("lionet-segment-fuzz-" + std::to_string(::getpid()));
  }();
  return dir;
}

LogOptions options() {
  LogOptions o;
  o.segment_bytes = 4096;  // a few batches per segment: the odd mode gets sealed segments
  o.index_interval_bytes = 128;
  o.flush_policy = lionet::storage::FlushPolicy::kNone;
  o.max_batch_bytes = 1 << 20;
  return o;
}

void write_file(const fs::path& p, const uint8_t* data, size_t size) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// A real log: 12 batches of 1-3 records with varied sizes, rolling every ~4 KiB.
void seed_log(const fs::path& dir) {
  auto log = Log::open(dir.string(), options());
  CHECK(log.ok());
  std::string value;
  for (int b = 0; b < 12; ++b) {
    std::vector<Record> batch;
    std::vector<std::string> values;
    for (int r = 0; r <= b % 3; ++r) values.push_back(std::string(100 + 37 * b + r, static_cast<char>('a' + b)));
    for (auto& v : values) batch.push_back({"k", v, 1000 + b});
    CHECK(log.value()->append_batch(batch).ok());
  }
}

void check_log(Log& log, bool reads_may_be_corrupt) {
  const int64_t start = log.start_offset(), end = log.end_offset();
  CHECK(0 <= start && start <= end);
  int64_t off = start;
  for (int guard = 0; off < end && guard < 100000; ++guard) {
    auto r = log.read(off, 1);
    if (!r.ok()) {
      CHECK(reads_may_be_corrupt && r.error() == Errc::kCorrupt);
      ++off;  // skip the damaged offset; the next may be in an undamaged batch
      continue;
    }
    const auto& rr = r.value();
    CHECK(!rr.empty());
    int64_t expect = rr[0].offset;
    CHECK(expect <= off);
    for (const auto& rec : rr.records()) CHECK(rec.offset == expect++);
    CHECK(rr.next_offset() == expect && expect > off && expect <= end);
    off = expect;
  }
  // end_offset itself: no records, no error.
  auto at_end = log.read(end, 4096);
  CHECK(at_end.ok() && at_end.value().empty());
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lionet::log::LoggerOptions quiet;
  quiet.name = "root";
  quiet.level = lionet::log::Level::kOff;
  lionet::log::configure({.loggers = {quiet}});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const fs::path dir = scratch();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const bool seeded = data[0] & 1;
  const uint8_t* body = data + 1;
  const size_t body_size = size - 1;
  if (!seeded) {
    write_file(dir / "00000000000000000000.log", body, body_size);
  } else {
    seed_log(dir);
    std::vector<fs::path> logs;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".log") logs.push_back(e.path());
    std::sort(logs.begin(), logs.end());
    CHECK(logs.size() >= 2);
    const int which = (data[0] >> 1) % 4;
    fs::path target = logs.front();
    if (which == 1) target.replace_extension(".index");
    if (which == 2) target.replace_extension(".timeindex");
    if (which == 3) target = logs.back();
    write_file(target, body, body_size);
  }
  int64_t end = -1;
  {
    auto log = Log::open(dir.string(), options());
    if (!log.ok()) {
      CHECK(seeded);  // a lone active segment is always recoverable (cut to its valid prefix)
      fs::remove_all(dir, ec);
      return 0;
    }
    check_log(*log.value(), seeded);
    end = log.value()->end_offset();
    const std::string v = "after-recovery";
    auto off = log.value()->append(Record{"k", v, 5});
    CHECK(off.ok() && off.value() == end);
    auto back = log.value()->read(end, 1 << 16);
    CHECK(back.ok() && back.value().size() == 1 && back.value()[0].value == v);
  }
  {
    auto again = Log::open(dir.string(), options());
    CHECK(again.ok() && again.value()->end_offset() == end + 1);
  }
  fs::remove_all(dir, ec);
  return 0;
}
