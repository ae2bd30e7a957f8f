// bench/B2-FileTransfer.cc: issue 7's B2 table, the successor of the earlier report's file
// transfer benchmark: for each (mode, size) row, one keep-alive connection GETs the same file
// `iterations` times back to back (no sleeps: the old client's 50 ms sleep is what capped the
// earlier 0.32 - 28.6 MB/s) and reports iterations, total ms, ops/s, MB/s and average latency.
//
//   B2-FileTransfer [--root DIR] [--port P] [--ref http://127.0.0.1:PORT] [--quick]
//                   [--budget-mb N] [--max-seconds S] [--threads N]
//
// The server (lionet::http::Server + StaticFiles, routes /memory /chunk /sendfile /auto over
// one root, --threads workers, default 1) runs in this process on 127.0.0.1 (port 0 unless
// --port); the client is lionet::http::Client in a fiber of a separate 1-worker scheduler.
// Files are written into --root (default: a temporary directory, removed at the end) as
// m16k.bin, m64k.bin, c128k.bin, c512k.bin, s2m.bin, s10m.bin, a32k.bin, a256k.bin, a5m.bin.
// --ref: a reference server (nginx in scripts/bench-http.sh) serving the same root at its
// top level; the same loop is run against it and the ratio printed.
// Iterations per row: budget / size, clamped to [10, 4000] (--quick: budget 1/8), and each
// row stops after --max-seconds (default 3). Every response is checked (status 200, exact
// length; the first of each row byte for byte); a failure counts as an error.
// Last line: RESULT mem16k_mbps=.. ... min_mbps=.. errors=N (ref_* and ratio_* with --ref).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "lionet/http/client.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http/static_files.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace {
using lionet::http::Client;
using lionet::http::FileMode;

struct Row {
  const char* key;  // RESULT key prefix
  const char* mode;  // route
  const char* file;
  size_t size;
};
constexpr Row kRows[] = {
    {"mem16k", "memory", "m16k.bin", 16 << 10},     {"mem64k", "memory", "m64k.bin", 64 << 10},
    {"chunk128k", "chunk", "c128k.bin", 128 << 10}, {"chunk512k", "chunk", "c512k.bin", 512 << 10},
    {"send2m", "sendfile", "s2m.bin", 2 << 20},     {"send10m", "sendfile", "s10m.bin", 10 << 20},
    {"auto32k", "auto", "a32k.bin", 32 << 10},      {"auto256k", "auto", "a256k.bin", 256 << 10},
    {"auto5m", "auto", "a5m.bin", 5 << 20},
};

struct Measure {
  int iterations = 0;
  double total_ms = 0;
  int errors = 0;
  double ops() const { return total_ms > 0 ? iterations * 1000.0 / total_ms : 0; }
  double mbps(size_t size) const { return total_ms > 0 ? iterations * double(size) / 1e6 / (total_ms / 1000.0) : 0; }
  double avg_ms() const { return iterations ? total_ms / iterations : 0; }
};

std::string content(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 7;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

Measure run_row(Client& c, const std::string& url, const std::string& expect, int iterations, double max_s) {
  Measure m;
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::duration<double>(max_s);
  for (int i = 0; i < iterations; ++i) {
    auto r = c.get(url);
    if (!r || r->status != 200 || r->body.size() != expect.size() || (i == 0 && r->body != expect)) {
      ++m.errors;
      if (m.errors == 1)
        std::fprintf(
            stderr, "B2: %s: %s\n", url.c_str(),
            !r ? r.error().message().c_str()
               : ("status " + std::to_string(r->status) + " length " + std::to_string(r->body.size())).c_str());
      if (m.errors > 3) break;
    }
    ++m.iterations;
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  m.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return m;
}
}  // namespace

int main(int argc, char** argv) {
  std::string root, ref;
  int port = 0, threads = 1;
  double budget_mb = 256, max_s = 3;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--root" && i + 1 < argc) root = argv[++i];
    else if (a == "--port" && i + 1 < argc) port = std::atoi(argv[++i]);
    else if (a == "--ref" && i + 1 < argc) ref = argv[++i];
    else if (a == "--budget-mb" && i + 1 < argc) budget_mb = std::atof(argv[++i]);
    else if (a == "--max-seconds" && i + 1 < argc) max_s = std::atof(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--root DIR] [--port P] [--ref http://127.0.0.1:PORT] [--quick] [--budget-mb N] "
                   "[--max-seconds S] [--threads N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (quick) budget_mb /= 8;
  bool temp_root = root.empty();
  if (temp_root) {
    char tmpl[] = "/tmp/lionet-b2-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    root = tmpl;
    ::chmod(root.c_str(), 0755);
  }
  std::vector<std::string> data;
  for (size_t i = 0; i < std::size(kRows); ++i) {
    data.push_back(content(kRows[i].size, static_cast<unsigned>(i)));
    std::string p = root + "/" + kRows[i].file;
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(data.back().data(), static_cast<std::streamsize>(data.back().size()));
    ::chmod(p.c_str(), 0644);
  }

  std::vector<std::unique_ptr<lionet::http::StaticFiles>> files;
  lionet::http::Router router;
  for (const char* mode : {"memory", "chunk", "sendfile", "auto"}) {
    lionet::http::StaticOptions so;
    so.root = root;
    so.mode = *lionet::http::parse_file_mode(mode);
    files.push_back(std::make_unique<lionet::http::StaticFiles>(so));
    router.prefix("GET", std::string("/") + mode, files.back()->handler());
  }
  lionet::Scheduler server_sched({.threads = threads, .name = "b2srv"});
  lionet::IOManager server_io(server_sched);
  lionet::http::Server server(server_io, router.handler());
  server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  server.start();
  std::string base = "http://127.0.0.1:" + std::to_string(server.addresses()[0].port());

  lionet::Scheduler client_sched({.threads = 1, .name = "b2cli"});
  lionet::IOManager client_io(client_sched);
  std::vector<Measure> mine(std::size(kRows)), theirs(std::size(kRows));
  client_sched
      .spawn([&] {
        lionet::http::ClientOptions co;
        co.max_body_bytes = 64u << 20;
        Client c(co), cref(co);
        for (size_t i = 0; i < std::size(kRows); ++i) {
          const Row& r = kRows[i];
          int iters = static_cast<int>(budget_mb * 1024 * 1024 / double(r.size));
          iters = std::max(10, std::min(4000, iters));
          // Warm-up (page cache, MEMORY cache, the pooled connection): not timed.
          (void)c.get(base + "/" + r.mode + "/" + r.file);
          mine[i] = run_row(c, base + "/" + r.mode + "/" + r.file, data[i], iters, max_s);
          if (!ref.empty()) {
            (void)cref.get(ref + "/" + r.file);
            theirs[i] = run_row(cref, ref + "/" + r.file, data[i], iters, max_s);
          }
        }
      })
      .join();

  std::printf("B2-FileTransfer: one keep-alive connection, sequential GETs, no sleeps; server %d worker(s)%s\n",
              threads, ref.empty() ? "" : (", reference " + ref).c_str());
  std::printf("(earlier report: 0.32 - 28.6 MB/s, capped by its client's 50 ms sleep)\n\n");
  std::printf("| Mode | Size | Iterations | Total ms | ops/s | MB/s | avg latency ms |%s\n",
              ref.empty() ? "" : " ref MB/s | ratio |");
  std::printf("|---|---:|---:|---:|---:|---:|---:|%s\n", ref.empty() ? "" : "---:|---:|");
  std::string result = "RESULT";
  int errors = 0;
  double min_mbps = 1e18;
  char buf[512];
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const Row& r = kRows[i];
    const Measure& m = mine[i];
    errors += m.errors + theirs[i].errors;
    double mb = m.mbps(r.size);
    min_mbps = std::min(min_mbps, mb);
    std::string size =
        r.size >= (1 << 20) ? std::to_string(r.size >> 20) + " MiB" : std::to_string(r.size >> 10) + " KiB";
    std::snprintf(buf, sizeof buf, "| %s | %s | %d | %.1f | %.0f | %.1f | %.3f |", r.mode, size.c_str(), m.iterations,
                  m.total_ms, m.ops(), mb, m.avg_ms());
    std::string line = buf;
    std::snprintf(buf, sizeof buf, " %s_mbps=%.1f", r.key, mb);
    result += buf;
    if (!ref.empty()) {
      double rm = theirs[i].mbps(r.size);
      double ratio = rm > 0 ? mb / rm : 0;
      std::snprintf(buf, sizeof buf, " %.1f | %.2f |", rm, ratio);
      line += buf;
      std::snprintf(buf, sizeof buf, " ref_%s_mbps=%.1f ratio_%s=%.2f", r.key, rm, r.key, ratio);
      result += buf;
    }
    std::printf("%s\n", line.c_str());
  }
  server.stop(std::chrono::seconds(1));
  server_sched.stop();
  client_sched.stop();
  if (temp_root) {
    for (const Row& r : kRows) ::unlink((root + "/" + r.file).c_str());
    ::rmdir(root.c_str());
  }
  std::snprintf(buf, sizeof buf, " min_mbps=%.1f errors=%d", min_mbps, errors);
  std::printf("\n%s%s\n", result.c_str(), buf);
  return errors == 0 ? 0 : 1;
}
