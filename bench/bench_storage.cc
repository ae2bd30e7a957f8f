// bench/bench_storage.cc: lionet::storage::Log throughput and latency (Google Benchmark),
// the Takhin report's tables: single-record appends, batch appends, one-record reads, 50/50
// mixed; plus the CRC-32C implementations side by side (the figure behind storage/README.md).
//
// Every row reports bytes_per_second (payload bytes: record values, like the reference
// bench/reference's logbench counts them), ns per message/op, allocated bytes per message
// (a global operator new counter in this binary) and the flush policy (label and counter).
// scripts/bench-storage.sh runs this beside logbench and prints the ratios.
//
// Usage: bench_storage [--dir DIR] [benchmark flags]   (DIR also from LIONET_BENCH_DIR;
// default /tmp/lionet-bench-storage). LIONET_BENCH_BATCH_FORMAT=lionet measures the store's
// older batch layout (BatchFormat::kLionet) instead of the default Kafka one.
// Page cache figures swing with the VM's memory balloon:
// run bench/reference's `warm` (touch and free 1.25 GiB) first, as the script does.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "lionet/storage/crc32c.h"
#include "lionet/storage/log.h"

// ---- allocation counter: every operator new in this binary adds its size ----
static std::atomic<uint64_t> g_alloc_bytes{0};
void* operator new(std::size_t n) {
  g_alloc_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_alloc_bytes.fetch_add(n, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// gcc 12's -Wmismatched-new-delete sees free() of memory from `operator new` and cannot know
// that these replacements are the operator new above, which is malloc: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using lionet::storage::FlushPolicy;
using lionet::storage::Log;
using lionet::storage::LogOptions;
using lionet::storage::ReadResult;
using lionet::storage::Record;

std::string g_dir = "/tmp/lionet-bench-storage";

// 64 MiB of random bytes; record values are views into it at shifting positions.
const std::string& pool() {
  static const std::string p = [] {
    std::string s(64 << 20, '\0');
    std::mt19937_64 rng(42);
    for (std::size_t i = 0; i + 8 <= s.size(); i += 8) {
      uint64_t v = rng();
      std::memcpy(&s[i], &v, 8);
    }
    return s;
  }();
  return p;
}

std::string_view payload(std::size_t size, uint64_t& cursor) {
  if (cursor + size > pool().size()) cursor = 0;
  std::string_view v(pool().data() + cursor, size);
  cursor += 64 + (size & 63);
  return v;
}

struct BenchLog {
  std::string dir;
  std::unique_ptr<Log> log;
  BenchLog(const std::string& name, FlushPolicy policy) {
    dir = g_dir + "/" + name;
    std::filesystem::remove_all(dir);
    LogOptions o;
    o.segment_bytes = 1u << 30;  // 1 GiB, as the reference (and Kafka's default)
    o.flush_policy = policy;
    if (const char* f = std::getenv("LIONET_BENCH_BATCH_FORMAT"); f && std::strcmp(f, "lionet") == 0)
      o.batch_format = lionet::storage::BatchFormat::kLionet;
    auto r = Log::open(dir, o);
    if (!r) {
      std::fprintf(stderr, "bench_storage: open %s: %s\n", dir.c_str(), r.error().message().c_str());
      std::exit(1);
    }
    log = std::move(*r);
  }
  ~BenchLog() {
    log.reset();
    std::filesystem::remove_all(dir);
  }
  // Keeps the disk footprint bounded between iterations (outside the timed region).
  void trim(benchmark::State& state) {
    if (log->size_bytes() < (uint64_t{768} << 20)) return;
    state.PauseTiming();
    (void)log->truncate_to(log->start_offset());
    state.ResumeTiming();
  }
};

void report(benchmark::State& state, int64_t messages, std::size_t record_bytes, uint64_t alloc_before,
            FlushPolicy policy) {
  const int64_t total = messages * static_cast<int64_t>(state.iterations());
  state.SetBytesProcessed(total * static_cast<int64_t>(record_bytes));
  state.SetItemsProcessed(total);
  // Seconds per message (an inverted rate; Google Benchmark prints it with an SI prefix).
  state.counters["sec_per_msg"] =
      benchmark::Counter(static_cast<double>(total), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  const uint64_t alloc = g_alloc_bytes.load() - alloc_before;
  state.counters["alloc_bytes_per_msg"] = total ? static_cast<double>(alloc) / static_cast<double>(total) : 0;
  state.counters["flush_every_batch"] = policy == FlushPolicy::kEveryBatch ? 1 : 0;
  state.SetLabel(std::string("flush=") + lionet::storage::to_string(policy));
}

// Single-record appends: `messages` appends of one record each per iteration.
void append_rows(benchmark::State& state, FlushPolicy policy) {
  const std::size_t size = static_cast<std::size_t>(state.range(0));
  const int64_t messages = state.range(1);
  BenchLog b("append", policy);
  uint64_t cursor = 0;
  const uint64_t alloc0 = g_alloc_bytes.load();
  for (auto _ : state) {
    for (int64_t i = 0; i < messages; i++) {
      auto r = b.log->append(Record{{}, payload(size, cursor), -1});
      if (!r) state.SkipWithError(r.error().message().c_str());
    }
    b.trim(state);
  }
  report(state, messages, size, alloc0, policy);
}
void BM_Append(benchmark::State& state) { append_rows(state, FlushPolicy::kNone); }
void BM_AppendDurable(benchmark::State& state) { append_rows(state, FlushPolicy::kEveryBatch); }

// Batch appends: one append_batch of `batch` records per iteration.
void batch_rows(benchmark::State& state, FlushPolicy policy) {
  const std::size_t size = static_cast<std::size_t>(state.range(0));
  const int64_t batch = state.range(1);
  BenchLog b("batch", policy);
  uint64_t cursor = 0;
  std::vector<Record> recs(static_cast<std::size_t>(batch));
  const uint64_t alloc0 = g_alloc_bytes.load();
  for (auto _ : state) {
    for (auto& r : recs) r = Record{{}, payload(size, cursor), -1};
    auto r = b.log->append_batch(recs);
    if (!r) state.SkipWithError(r.error().message().c_str());
    b.trim(state);
  }
  report(state, batch, size, alloc0, policy);
}
void BM_AppendBatch(benchmark::State& state) { batch_rows(state, FlushPolicy::kNone); }
void BM_AppendBatchDurable(benchmark::State& state) { batch_rows(state, FlushPolicy::kEveryBatch); }

// Sequential one-record reads of a log of `messages` single-record batches (a consumer fetching
// record by record: max_bytes = one stored batch), CRC checked, into a reused ReadResult.
void BM_Read(benchmark::State& state) {
  const std::size_t size = static_cast<std::size_t>(state.range(0));
  const int64_t messages = state.range(1);
  BenchLog b("read", FlushPolicy::kNone);
  uint64_t cursor = 0;
  for (int64_t i = 0; i < messages; i++) (void)b.log->append(Record{{}, payload(size, cursor), -1});
  const std::size_t max_bytes = lionet::storage::kBatchOverheadBytes + lionet::storage::kRecordOverheadBytes + size;
  ReadResult rr;
  uint64_t checksum = 0;
  const uint64_t alloc0 = g_alloc_bytes.load();
  for (auto _ : state) {
    int64_t off = 0;
    while (off < messages) {
      auto r = b.log->read(off, max_bytes, rr);
      if (!r || rr.empty()) {
        state.SkipWithError("read failed");
        break;
      }
      checksum += rr[0].value.size();
      off = rr.next_offset();
    }
  }
  benchmark::DoNotOptimize(checksum);
  report(state, messages, size, alloc0, FlushPolicy::kNone);
}

// 50/50: alternately append one 1 KiB record and read one random earlier record (one-record
// read), on a log prefilled with 100 MB of single-record batches (the unit a one-record read
// must fetch and CRC-check is its batch). Time per iteration = time per op.
void BM_Mixed(benchmark::State& state) {
  const std::size_t size = 1024;
  BenchLog b("mixed", FlushPolicy::kNone);
  uint64_t cursor = 0;
  const int64_t prefill = 100'000'000 / static_cast<int64_t>(size);
  for (int64_t i = 0; i < prefill; i++) (void)b.log->append(Record{{}, payload(size, cursor), -1});
  std::mt19937_64 rng(7);
  ReadResult rr;
  const std::size_t max_bytes = lionet::storage::kBatchOverheadBytes + lionet::storage::kRecordOverheadBytes + size;
  uint64_t ops = 0;
  const uint64_t alloc0 = g_alloc_bytes.load();
  for (auto _ : state) {
    if (ops++ & 1) {
      const int64_t off = static_cast<int64_t>(rng() % static_cast<uint64_t>(b.log->end_offset()));
      auto r = b.log->read(off, max_bytes, rr);
      if (!r) state.SkipWithError(r.error().message().c_str());
    } else {
      auto r = b.log->append(Record{{}, payload(size, cursor), -1});
      if (!r) state.SkipWithError(r.error().message().c_str());
    }
  }
  report(state, 1, size, alloc0, FlushPolicy::kNone);
}

// CRC-32C: 0 = crc32c() (SSE4.2, three interleaved streams), 1 = the simple SSE4.2 loop
// (what logbench uses), 2 = Boost.CRC (table-driven; the portable fallback).
void BM_Crc32c(benchmark::State& state) {
  const int impl = static_cast<int>(state.range(0));
  const std::size_t n = static_cast<std::size_t>(state.range(1));
  if (impl < 2 && !lionet::storage::crc32c_hardware_available()) {
    state.SkipWithError("no SSE4.2");
    return;
  }
  const char* data = pool().data() + 5;
  uint32_t c = 0;
  for (auto _ : state) {
    switch (impl) {
      case 0: c = lionet::storage::crc32c(c, data, n); break;
      case 1: c = lionet::storage::crc32c_sse42_simple(c, data, n); break;
      default: c = lionet::storage::crc32c_portable(c, data, n); break;
    }
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetLabel(impl == 0 ? "sse42_3way" : impl == 1 ? "sse42_simple" : "boost");
}

void sizes_by_messages(benchmark::internal::Benchmark* b) {
  for (int64_t size : {100, 1024, 10240}) {
    for (int64_t n : {100, 1000, 10000}) b->Args({size, n});
  }
}
void sizes_by_batch(benchmark::internal::Benchmark* b) {
  for (int64_t size : {100, 1024, 10240}) {
    for (int64_t n : {10, 100, 1000}) b->Args({size, n});
  }
}

BENCHMARK(BM_Append)->Apply(sizes_by_messages)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_AppendBatch)->Apply(sizes_by_batch)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Read)->Apply(sizes_by_messages)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Mixed)->Unit(benchmark::kNanosecond)->UseRealTime();
BENCHMARK(BM_AppendDurable)->Args({1024, 100})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_AppendBatchDurable)
    ->Args({1024, 100})
    ->Args({1024, 1000})
    ->Args({10240, 100})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_Crc32c)->ArgsProduct({{0, 1, 2}, {1024, 65536}});

}  // namespace

int main(int argc, char** argv) {
  if (const char* e = std::getenv("LIONET_BENCH_DIR")) g_dir = e;
  // Strip --dir DIR / --dir=DIR before Google Benchmark sees the flags.
  int out = 1;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      g_dir = argv[++i];
    } else if (a.rfind("--dir=", 0) == 0) {
      g_dir = a.substr(6);
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  std::filesystem::create_directories(g_dir);
  (void)pool();  // build the 64 MiB payload pool before any timed loop (and count its allocation out)
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
