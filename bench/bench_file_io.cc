// bench/bench_file_io.cc: file IO throughput of lionet::File in fibers, on one engine.
//
//   bench_file_io -w 4 -n 1000 -b 4096 -batch 4 -d /var/tmp/lionet-bench --engine libaio --direct --rw mixed
//   bench_file_io -w 32 -n 100000 -b 4096 -d DIR --engine io_uring --direct --rw randread   (QD 32)
//   bench_file_io --hook-bench -n 200000 -d DIR   (4 KiB page-cache reads: hooked ::pread vs plain)
//
// -w workers (fibers), -n operations per worker, -b block size, -batch requests per submit
// (File::submit, wait all), -d directory, --engine libaio|io_uring|threadpool, --direct
// (O_DIRECT), --rw read|write|randread|randwrite|mixed (mixed = random, half reads half
// writes), --threads scheduler workers (default 1), --no-coalesce (FileEngineOptions::
// coalesce_submits = false). Requests in flight = workers x batch.
// All modes use one 1 GiB file, DIR/lionet-bench-1g.dat, created (1 MiB O_DIRECT writes) if
// missing or of another size, and reused otherwise (also by scripts/bench-file.sh for fio).
// Sequential modes give each worker its own slice of the file.
// Last line: RESULT read_iops=N write_iops=N read_MBps=X write_MBps=X seconds=S errors=N
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lionet/file/file.h"
#include "lionet/hook/hook.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/offload.h"

namespace {
using Clock = std::chrono::steady_clock;
constexpr uint64_t kFileSize = 1ull << 30;

struct Args {
  int workers = 4;
  long ops = 1000;
  std::size_t block = 4096;
  int batch = 1;
  std::string dir = "/var/tmp/lionet-bench";
  std::string engine = "libaio";
  bool direct = false;
  std::string rw = "mixed";
  int threads = 1;
  bool hook_bench = false;
  bool coalesce = true;
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "bench_file_io: %s\nusage: bench_file_io [-w workers] [-n ops-per-worker] [-b block] [-batch N] "
               "[-d dir] [--engine libaio|io_uring|threadpool] [--direct] [--rw read|write|randread|randwrite|mixed] "
               "[--threads N] [--hook-bench] [--no-coalesce]\n",
               msg);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + k).c_str());
      return argv[++i];
    };
    if (k == "-w") a.workers = std::stoi(val());
    else if (k == "-n") a.ops = std::stol(val());
    else if (k == "-b") a.block = std::stoul(val());
    else if (k == "-batch" || k == "--batch") a.batch = std::stoi(val());
    else if (k == "-d") a.dir = val();
    else if (k == "--engine") a.engine = val();
    else if (k == "--direct") a.direct = true;
    else if (k == "--rw") a.rw = val();
    else if (k == "--threads") a.threads = std::stoi(val());
    else if (k == "--hook-bench") a.hook_bench = true;
    else if (k == "--no-coalesce") a.coalesce = false;
    else usage(("unknown option " + k).c_str());
  }
  if (a.workers < 1 || a.ops < 1 || a.batch < 1 || a.threads < 1 || a.block == 0 || a.block > (64u << 20))
    usage("bad numbers");
  if (a.rw != "read" && a.rw != "write" && a.rw != "randread" && a.rw != "randwrite" && a.rw != "mixed")
    usage("bad --rw");
  return a;
}

// Creates (or reuses) the 1 GiB file. Plain thread: plain syscalls.
bool ensure_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == kFileSize) return true;
  std::fprintf(stderr, "creating %s (1 GiB)...\n", path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  lionet::AlignedBuffer buf(1 << 20);
  for (std::size_t i = 0; i < buf.size(); ++i) buf.chars()[i] = static_cast<char>(i * 131 + 7);
  for (uint64_t off = 0; off < kFileSize; off += buf.size()) {
    if (::pwrite(fd, buf.data(), buf.size(), static_cast<off_t>(off)) != static_cast<ssize_t>(buf.size())) {
      ::close(fd);
      return false;
    }
  }
  ::fsync(fd);
  ::close(fd);
  return true;
}

uint64_t xorshift(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

struct Totals {
  std::atomic<uint64_t> reads{0}, writes{0}, errors{0};
};

void worker(const Args& a, lionet::File& f, int id, Totals& t) {
  const bool random = a.rw == "randread" || a.rw == "randwrite" || a.rw == "mixed";
  const uint64_t blocks = kFileSize / a.block;
  const uint64_t slice = blocks / static_cast<uint64_t>(a.workers);
  uint64_t seq = static_cast<uint64_t>(id) * slice;
  uint64_t rng = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(id + 1);
  lionet::AlignedBuffer bufs(a.block * static_cast<std::size_t>(a.batch));
  std::vector<lionet::FileRequest> reqs(static_cast<std::size_t>(a.batch));
  long done = 0;
  while (done < a.ops) {
    int n = static_cast<int>(std::min<long>(a.batch, a.ops - done));
    for (int i = 0; i < n; ++i) {
      uint64_t blk = random ? xorshift(rng) % blocks : (seq++ % blocks);
      bool write = a.rw == "write" || a.rw == "randwrite" || (a.rw == "mixed" && (xorshift(rng) & 1));
      void* p = bufs.data() + static_cast<std::size_t>(i) * a.block;
      reqs[i] = write ? lionet::FileRequest::write(p, a.block, static_cast<off_t>(blk * a.block))
                      : lionet::FileRequest::read(p, a.block, static_cast<off_t>(blk * a.block));
    }
    f.submit(std::span<lionet::FileRequest>(reqs.data(), static_cast<std::size_t>(n)));
    for (int i = 0; i < n; ++i) {
      if (reqs[i].res != static_cast<int64_t>(a.block)) {
        if (t.errors.fetch_add(1) < 5)
          std::fprintf(stderr, "request failed: res=%lld (%s)\n", static_cast<long long>(reqs[i].res),
                       reqs[i].res < 0 ? std::strerror(static_cast<int>(-reqs[i].res)) : "short");
      } else if (reqs[i].op == lionet::FileOp::kWrite) {
        t.writes.fetch_add(1, std::memory_order_relaxed);
      } else {
        t.reads.fetch_add(1, std::memory_order_relaxed);
      }
    }
    done += n;
  }
}

int run_io(const Args& a, const std::string& path) {
  lionet::FileOptions fo;
  fo.engine = a.engine;
  fo.engine_options.queue_depth = std::max(128u, static_cast<unsigned>(a.workers * a.batch));
  fo.engine_options.coalesce_submits = a.coalesce;
  int flags = O_RDWR | (a.direct ? O_DIRECT : 0);
  auto f = lionet::File::open(path, flags, 0644, fo);
  if (!f) {
    std::fprintf(stderr, "open %s: %s\n", path.c_str(), f.error().message().c_str());
    return 1;
  }
  lionet::SchedulerOptions so;
  so.threads = a.threads;
  so.name = "fbench";
  lionet::Scheduler sched(so);
  lionet::IOManager iom(sched);
  Totals t;
  auto t0 = Clock::now();
  std::vector<lionet::JoinHandle<void>> hs;
  for (int i = 0; i < a.workers; ++i) hs.push_back(sched.spawn([&, i] { worker(a, *f, i, t); }));
  for (auto& h : hs) h.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  sched.stop();
  auto st = f->engine()->stats();
  const double r_iops = t.reads / secs, w_iops = t.writes / secs;
  const double r_mbps = r_iops * a.block / 1e6, w_mbps = w_iops * a.block / 1e6;
  std::printf("engine=%s rw=%s direct=%d workers=%d batch=%d block=%zu threads=%d in_flight=%d\n", f->engine_name(),
              a.rw.c_str(), a.direct, a.workers, a.batch, a.block, a.threads, a.workers * a.batch);
  std::printf("reads:  %llu ops  %.0f IOPS  %.1f MB/s\n", static_cast<unsigned long long>(t.reads.load()), r_iops,
              r_mbps);
  std::printf("writes: %llu ops  %.0f IOPS  %.1f MB/s\n", static_cast<unsigned long long>(t.writes.load()), w_iops,
              w_mbps);
  std::printf("duration %.3f s, errors %llu\n", secs, static_cast<unsigned long long>(t.errors.load()));
  std::printf(
      "engine counters: submit_calls=%llu reap_passes=%llu eventfd_waits=%llu max_reaped=%llu queue_full=%llu\n",
      static_cast<unsigned long long>(st.submit_calls), static_cast<unsigned long long>(st.reap_passes),
      static_cast<unsigned long long>(st.eventfd_waits), static_cast<unsigned long long>(st.max_reaped),
      static_cast<unsigned long long>(st.queue_full));
  std::printf("RESULT read_iops=%.0f write_iops=%.0f read_MBps=%.1f write_MBps=%.1f seconds=%.3f errors=%llu\n", r_iops,
              w_iops, r_mbps, w_mbps, secs, static_cast<unsigned long long>(t.errors.load()));
  return t.errors.load() ? 1 : 0;
}

// 4 KiB reads that hit the page cache: a hooked ::pread in a fiber vs the plain syscall (hooks
// off) vs an explicit offload of the same pread. Shows what the hook's fast path buys.
int run_hook_bench(const Args& a) {
  const std::string path = a.dir + "/lionet-bench-cache-64m.dat";
  constexpr uint64_t kSize = 64 << 20;
  {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::ftruncate(fd, kSize) != 0) return 1;
    std::vector<char> b(1 << 20, 'x');
    for (uint64_t off = 0; off < kSize; off += b.size()) (void)!::pwrite(fd, b.data(), b.size(), off);
    for (uint64_t off = 0; off < kSize; off += b.size()) (void)!::pread(fd, b.data(), b.size(), off);  // warm
    ::close(fd);
  }
  lionet::hook::ensure_linked();
  lionet::Scheduler sched({.threads = 1, .name = "hbench"});
  lionet::IOManager iom(sched);
  const long n = a.ops;
  double ns[5] = {0, 0, 0, 0, 0};
  long errors = 0;
  sched
      .spawn([&] {
        int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        char buf[4096];
        for (long i = 0; i < n; ++i) {  // untimed warm-up pass: fault the pages and the fd entry in
          uint64_t rng = 12345 + static_cast<uint64_t>(i);
          (void)!::pread(fd, buf, sizeof buf, static_cast<off_t>((xorshift(rng) % (kSize / 4096)) * 4096));
        }
        for (int mode : {1, 0, 2, 4, 3}) {
          uint64_t rng = 12345;
          auto t0 = Clock::now();
          for (long i = 0; i < n; ++i) {
            off_t off = static_cast<off_t>((xorshift(rng) % (kSize / 4096)) * 4096);
            ssize_t r;
            if (mode == 0) {
              r = ::pread(fd, buf, sizeof buf, off);  // hooked
            } else if (mode == 1) {
              lionet::hook::ScopedDisable off_hooks;
              r = ::pread(fd, buf, sizeof buf, off);  // plain blocking syscall
            } else if (mode == 2) {
              r = lionet::offload([&] { return ::pread(fd, buf, sizeof buf, off); });
            } else if (mode == 3) {
              r = ::pwrite(fd, buf, sizeof buf, off);  // hooked
            } else {
              lionet::hook::ScopedDisable off_hooks;
              r = ::pwrite(fd, buf, sizeof buf, off);
            }
            if (r != 4096) ++errors;
          }
          ns[mode] = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
        }
        ::close(fd);
      })
      .join();
  sched.stop();
  std::printf("4 KiB page-cache pread in a fiber, %ld ops each:\n", n);
  std::printf("  hooked ::pread (RWF_NOWAIT fast path): %.0f ns/op\n", ns[0]);
  std::printf("  plain blocking pread (hooks off):      %.0f ns/op\n", ns[1]);
  std::printf("  always offloaded pread:                %.0f ns/op\n", ns[2]);
  std::printf("  hooked / plain = %.2fx, offload / plain = %.2fx\n", ns[0] / ns[1], ns[2] / ns[1]);
  std::printf("4 KiB buffered pwrite in a fiber: hooked %.0f ns/op, plain %.0f ns/op (%.2fx)\n", ns[3], ns[4],
              ns[3] / ns[4]);
  std::printf(
      "RESULT hooked_ns=%.0f plain_ns=%.0f offload_ns=%.0f ratio=%.2f write_hooked_ns=%.0f write_plain_ns=%.0f "
      "write_ratio=%.2f errors=%ld\n",
      ns[0], ns[1], ns[2], ns[0] / ns[1], ns[3], ns[4], ns[3] / ns[4], errors);
  return errors ? 1 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  ::mkdir(a.dir.c_str(), 0755);
  if (a.hook_bench) return run_hook_bench(a);
  const std::string path = a.dir + "/lionet-bench-1g.dat";
  if (!ensure_file(path)) {
    std::fprintf(stderr, "cannot create %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  return run_io(a, path);
}
