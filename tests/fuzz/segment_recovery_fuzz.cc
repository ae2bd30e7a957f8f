// libFuzzer target for storage recovery (lionet::storage::Log::open): arbitrary bytes become a
// segment file, and recovery must give a log a user can rely on.
//
// Input byte 0 picks the mode:
//   bit 0 clear: the bytes are the only (active) segment 00000000000000000000.log of a fresh
//         directory;
//   bit 0 set: the files of a real log (written once per process and format by the Log itself:
//         24 records in 12 batches over 4 KiB segments, kept in memory and copied in each run)
//         with one file replaced by the bytes: (byte 0 >> 1) % 4 = 0 the first sealed
//         segment's .log, 1 its .index, 2 its .timeindex, 3 the active segment's .log;
//   bit 3: the batch format the Log is opened with and the real log was written in: clear
//         BatchFormat::kLionet, set BatchFormat::kKafka (Kafka's RecordBatch; the replaced
//         bytes may be either: a segment's format is read from its first batch).
// Invariants (a violation traps, so libFuzzer reports it):
//   - open() succeeds (damage is cut from the active segment or reported on read, never an
//     open error on tmpfs), without crashing, hanging or leaking;
//   - start_offset <= end_offset; every offset in between reads back a batch whose records have
//     consecutive offsets starting exactly at it, with the real log's contents wherever the
//     bytes on disk are the real log's; Errc::kCorrupt only inside the sealed segment whose
//     .log was replaced. Index files are derived data: damaging them costs no record;
//   - reading backwards (every read through the sparse index, none from a hint) and a consumer
//     reading 64 KiB at a time see exactly the offsets the forward one-batch reads saw;
//   - offset_for_time returns the first offset whose record has that timestamp or a later one
//     (checked against the reads, except when the .timeindex was replaced);
//   - an append gets end_offset and reads back; a reopen keeps the new end_offset.
// The directory lives in /dev/shm when it exists (tmpfs: fast, no disk wear), one per process,
// emptied at the start and end of every run.
//
// Seeds (tests/corpus/segment_recovery_fuzz/): files of a real log produced by the Log itself
// (seed_log() below, dumped once by a one-off program that includes this file): each of the four replaceable files as
// it is, the active segment alone, and damaged variants: torn mid-batch, one byte flipped, zero
// tail, index entries shifted inside their batches (kafka-*: the same in the kKafka format,
// byte 0 with bit 3 set); and the inputs that failed on earlier code
// (crash-*: a large read failing past damage, found by this target in under a minute; a sealed
// batch's record count lowered, made by hand to reach a read overflow seen in review).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "lionet/log/log.h"
#include "lionet/storage/errors.h"
#include "lionet/storage/log.h"

namespace {
namespace fs = std::filesystem;
using lionet::storage::BatchFormat;
using lionet::storage::Errc;
using lionet::storage::Log;
using lionet::storage::LogOptions;
using lionet::storage::ReadResult;
using lionet::storage::Record;

#define CHECK(c)                \
  do {                          \
    if (!(c)) __builtin_trap(); \
  } while (0)

fs::path scratch_base() { return fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path(); }

fs::path scratch() {
  static const fs::path dir = scratch_base() / ("lionet-segment-fuzz-" + std::to_string(::getpid()));
  return dir;
}

LogOptions options(BatchFormat format) {
  LogOptions o;
  o.batch_format = format;
  o.segment_bytes = 4096;  // a few batches per segment: the odd modes get sealed segments
  o.index_interval_bytes = 128;
  o.flush_policy = lionet::storage::FlushPolicy::kNone;
  o.max_batch_bytes = 1 << 20;
  return o;
}

void write_file(const fs::path& p, const char* data, size_t size) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(data, static_cast<std::streamsize>(size));
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The real log of the odd modes: what each record is, and its files (name -> bytes).
struct SeedLog {
  std::vector<std::string> values;  // by offset; key "k", timestamp 1000 + batch number
  std::vector<int64_t> timestamps;
  std::vector<int64_t> bases;  // segment base offsets
  std::map<std::string, std::string> files;
};

SeedLog make_seed_log(BatchFormat format) {
  SeedLog s;
  const fs::path dir = scratch_base() / ("lionet-segment-fuzz-seed-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  {
    auto log = Log::open(dir.string(), options(format));
    CHECK(log.ok());
    for (int b = 0; b < 12; ++b) {
      std::vector<std::string> values;
      for (int r = 0; r <= b % 3; ++r) values.push_back(std::string(100 + 37 * b + r, static_cast<char>('a' + b)));
      std::vector<Record> batch;
      for (auto& v : values) batch.push_back({"k", v, 1000 + b});
      CHECK(log.value()->append_batch(batch).ok());
      for (auto& v : values) {
        s.values.push_back(v);
        s.timestamps.push_back(1000 + b);
      }
    }
    s.bases = log.value()->segment_base_offsets();
    CHECK(s.bases.size() >= 2 && s.bases[0] == 0);
  }
  for (const auto& e : fs::directory_iterator(dir)) s.files[e.path().filename().string()] = read_file(e.path());
  fs::remove_all(dir, ec);
  return s;
}

BatchFormat g_format = BatchFormat::kLionet;  // this run's (byte 0, bit 3)

const SeedLog& seed_log() {
  static const SeedLog lionet = make_seed_log(BatchFormat::kLionet);
  static const SeedLog kafka = make_seed_log(BatchFormat::kKafka);
  return g_format == BatchFormat::kKafka ? kafka : lionet;
}

std::string segment_name(int64_t base, const char* ext) {
  std::string digits = std::to_string(base);
  return std::string(20 - digits.size(), '0') + digits + ext;
}

// What a run may see at each offset.
struct Expectation {
  bool seeded = false;
  int which = 0;
  // A read at `off` may fail (kCorrupt): only inside the sealed segment whose .log was replaced.
  bool may_fail(int64_t off) const { return seeded && which == 0 && off < seed_log().bases[1]; }
  // Whether the record at `off` is the real log's (false where the fuzzer's bytes decide).
  bool known(int64_t off) const {
    if (!seeded || off >= static_cast<int64_t>(seed_log().values.size())) return false;
    if (which == 0) return off >= seed_log().bases[1];
    if (which == 3) return off < seed_log().bases.back();
    return true;
  }
};

// What the one-batch reads found at each offset of [start, end).
struct Seen {
  std::vector<uint8_t> readable;
  std::vector<int64_t> ts;
};

// One-batch reads from every offset.
Seen read_every_offset(const Log& log, const Expectation& x) {
  const int64_t start = log.start_offset(), end = log.end_offset();
  Seen seen;
  seen.readable.assign(static_cast<size_t>(end - start), 0);
  seen.ts.assign(static_cast<size_t>(end - start), 0);
  ReadResult rr;
  for (int64_t off = start; off < end;) {
    auto r = log.read(off, 1, rr);
    if (!r) {
      CHECK(x.may_fail(off) && r.error() == Errc::kCorrupt);
      ++off;  // skip the damaged offset; the next may be in an undamaged batch
      continue;
    }
    CHECK(!rr.empty() && rr[0].offset == off);
    int64_t expect = off;
    for (const auto& rec : rr.records()) {
      CHECK(rec.offset == expect);
      if (x.known(expect)) {
        CHECK(rec.value == seed_log().values[expect] && rec.key == "k");
        CHECK(rec.timestamp == seed_log().timestamps[expect]);
      }
      seen.readable[expect - start] = 1;
      seen.ts[expect - start] = rec.timestamp;
      ++expect;
    }
    CHECK(rr.next_offset() == expect && expect <= end);
    off = expect;
  }
  auto at_end = log.read(end, 4096, rr);  // end_offset itself: no records, no error
  CHECK(at_end.ok() && rr.empty() && rr.next_offset() == end);
  return seen;
}

// Reads backwards, one offset at a time: no read starts from the previous one's hint, so each
// goes through the sparse index (the fuzzed .index of mode 1), and agrees with the forward reads.
// Inside a replaced sealed .log the index is the old file's, and the bytes may hold overlapping
// chains of valid batches: there the two may differ, but each read is still whole and in order.
void read_backwards(const Log& log, const Seen& seen, const Expectation& x) {
  const int64_t start = log.start_offset(), end = log.end_offset();
  ReadResult rr;
  for (int64_t off = end - 1; off >= start && end - off <= 4096; --off) {
    const bool forward = seen.readable[off - start] != 0;
    auto r = log.read(off, 1, rr);
    if (!r) {
      CHECK(r.error() == Errc::kCorrupt && (!forward || x.may_fail(off)));
      continue;
    }
    CHECK(!rr.empty() && rr[0].offset == off && rr.next_offset() <= end);
    CHECK(x.may_fail(off) || (forward && rr[0].timestamp == seen.ts[off - start]));
    if (x.known(off)) CHECK(rr[0].value == seed_log().values[off]);
  }
}

// A consumer with large reads sees exactly the offsets the one-batch reads saw.
void consume(const Log& log, const Seen& seen) {
  const int64_t start = log.start_offset(), end = log.end_offset();
  const auto readable = [&](int64_t off) { return seen.readable[off - start] != 0; };
  ReadResult rr;
  for (int64_t off = start; off < end;) {
    auto r = log.read(off, 64 * 1024, rr);
    if (!r) {
      CHECK(!readable(off) && r.error() == Errc::kCorrupt);
      ++off;
      continue;
    }
    CHECK(!rr.empty());
    for (const auto& rec : rr.records()) {
      CHECK(rec.offset == off && readable(off) && rec.timestamp == seen.ts[off - start]);
      ++off;
    }
    CHECK(rr.next_offset() == off && off <= end);
  }
}

void check_offset_for_time(const Log& log, const Seen& seen, const Expectation& x) {
  const int64_t start = log.start_offset(), end = log.end_offset();
  const std::vector<int64_t>& ts = seen.ts;
  const bool exact = std::find(seen.readable.begin(), seen.readable.end(), 0) == seen.readable.end() &&
                     !(x.seeded && (x.which == 0 || x.which == 2));
  std::vector<int64_t> probes = {std::numeric_limits<int64_t>::min() + 1, 0, 1000, 1005, 1011,
                                 std::numeric_limits<int64_t>::max()};
  for (size_t i = 0; i < ts.size() && i < 8; i++) probes.push_back(ts[i]);
  for (int64_t t : probes) {
    auto r = log.offset_for_time(t);
    if (!r) {
      CHECK(!exact && r.error() == Errc::kCorrupt);
      continue;
    }
    CHECK(start <= *r && *r <= end);
    if (!exact) continue;
    int64_t want = end;
    for (size_t i = 0; i < ts.size(); i++) {
      if (ts[i] >= t) {
        want = start + static_cast<int64_t>(i);
        break;
      }
    }
    CHECK(*r == want);
  }
}

void check_log(const Log& log, const Expectation& x) {
  const int64_t start = log.start_offset(), end = log.end_offset();
  CHECK(0 <= start && start <= end);
  if (x.seeded && x.which != 3) CHECK(end == static_cast<int64_t>(seed_log().values.size()));
  if (x.seeded && x.which == 3) CHECK(end >= seed_log().bases.back());
  // A record takes at least 20 bytes of a small file, or 7 of at most max_batch_bytes inflated.
  CHECK(end - start <= (int64_t{1} << 22));
  const Seen seen = read_every_offset(log, x);
  read_backwards(log, seen, x);
  consume(log, seen);
  check_offset_for_time(log, seen, x);
}

void set_up(const fs::path& dir, const Expectation& x, const uint8_t* body, size_t body_size) {
  const char* bytes = reinterpret_cast<const char*>(body);
  if (!x.seeded) {
    write_file(dir / segment_name(0, ".log"), bytes, body_size);
    return;
  }
  const SeedLog& seed = seed_log();
  for (const auto& [name, content] : seed.files) write_file(dir / name, content.data(), content.size());
  static const char* const kExt[] = {".log", ".index", ".timeindex"};
  const std::string target = x.which == 3 ? segment_name(seed.bases.back(), ".log") : segment_name(0, kExt[x.which]);
  write_file(dir / target, bytes, body_size);
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
  Expectation x;
  x.seeded = data[0] & 1;
  x.which = (data[0] >> 1) % 4;
  g_format = (data[0] & 8) ? BatchFormat::kKafka : BatchFormat::kLionet;
  set_up(dir, x, data + 1, size - 1);
  int64_t end = -1;
  {
    auto log = Log::open(dir.string(), options(g_format));
    CHECK(log.ok());  // damage is recovered from or reported on read; only IO errors fail open
    check_log(*log.value(), x);
    end = log.value()->end_offset();
    const std::string v = "after-recovery";
    auto off = log.value()->append(Record{"k", v, 5});
    CHECK(off.ok() && off.value() == end);
    auto back = log.value()->read(end, 1 << 16);
    CHECK(back.ok() && back.value().size() == 1 && back.value()[0].value == v && back.value()[0].offset == end);
  }
  {
    auto again = Log::open(dir.string(), options(g_format));
    CHECK(again.ok() && again.value()->end_offset() == end + 1);
    auto back = again.value()->read(end, 1 << 16);
    CHECK(back.ok() && back.value().size() == 1 && back.value()[0].value == "after-recovery");
  }
  fs::remove_all(dir, ec);
  return 0;
}
