// bench/http_file_server.cc: the static-file server of the HTTP benchmarks: a
// lionet::http::Server on 127.0.0.1 whose Router sends every GET/HEAD under "/" to a
// StaticFiles over ROOT in the chosen mode (what `lionet` does for a static route). With
// --tls-port it also serves HTTPS from the same StaticFiles (the TLS sendfile path).
//
//   http_file_server ROOT PORT [--mode memory|chunk|sendfile|auto] [--threads N]
//                    [--tls-port P --cert C --key K] [--chunk-size B] [--http2]
//                    [--backend auto|epoll|io_uring|io_uring-poll]
//
// --http2: HTTP/2 beside HTTP/1.1 (lionet/http2): h2c with prior knowledge on PORT, h2 by ALPN
// on the TLS port.
// Defaults: mode auto, 1 worker. Runs until SIGINT/SIGTERM, then stops and prints
// `RESULT requests=N accepted=N files=N memory_hits=N memory_misses=N threads=T errors=N`
// (errors = requests the server itself answered 4xx/5xx).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/server_main.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http/static_files.h"
#include "lionet/http2/server.h"
#include "lionet/ssl/ssl_context.h"

namespace {
[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s ROOT PORT [--mode memory|chunk|sendfile|auto] [--threads N] "
               "[--tls-port P --cert C --key K] [--chunk-size B] [--http2] "
               "[--backend auto|epoll|io_uring|io_uring-poll]\n",
               argv0);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  std::string root, cert, key, backend = "auto";
  int port = -1, tls_port = -1, threads = 1;
  long chunk = 0;
  bool http2 = false;
  lionet::http::FileMode mode = lionet::http::FileMode::kAuto;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) {
      auto m = lionet::http::parse_file_mode(argv[++i]);
      if (!m) usage(argv[0]);
      mode = *m;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--tls-port" && i + 1 < argc) {
      tls_port = std::atoi(argv[++i]);
    } else if (a == "--cert" && i + 1 < argc) {
      cert = argv[++i];
    } else if (a == "--key" && i + 1 < argc) {
      key = argv[++i];
    } else if (a == "--chunk-size" && i + 1 < argc) {
      chunk = std::atol(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (a == "--http2") {
      http2 = true;
    } else if (!a.empty() && a[0] != '-' && root.empty()) {
      root = a;
    } else if (!a.empty() && a[0] != '-' && port < 0) {
      port = std::atoi(a.c_str());
    } else {
      usage(argv[0]);
    }
  }
  if (root.empty() || threads < 1 || port < 0 || port > 65535 || tls_port > 65535 ||
      (tls_port >= 0 && (cert.empty() || key.empty())))
    usage(argv[0]);

  std::unique_ptr<lionet::http::StaticFiles> files;
  try {
    lionet::http::StaticOptions so;
    so.root = root;
    so.mode = mode;
    if (chunk > 0) so.chunk_size = static_cast<size_t>(chunk);
    files = std::make_unique<lionet::http::StaticFiles>(so);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  lionet::bench::ServerMain runtime(threads, "files", backend);  // the scheduler comes with its IO driver
  lionet::Scheduler& sched = runtime.scheduler();
  lionet::http::Router router;
  router.prefix("GET", "/", files->handler());
  lionet::http::ServerOptions opts;
  opts.runs_inline = router.inline_predicate();  // the static route is nonblocking
  opts.tcp.reuse_port_per_worker = threads > 1;
  if (http2) lionet::http2::enable(opts);
  lionet::http::Server server(sched, router.handler(), opts);
  std::unique_ptr<lionet::http::Server> tls_server;
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
    if (tls_port >= 0) {
      lionet::SslOptions ssl;
      ssl.certificates = {{cert, key}};
      ssl.alpn = http2 ? std::vector<std::string>{"h2", "http/1.1"} : std::vector<std::string>{"http/1.1"};
      tls_server = std::make_unique<lionet::http::Server>(sched, router.handler(), opts);
      tls_server->enable_tls(lionet::SslContext::server(ssl));
      tls_server->listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(tls_port)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  server.start();
  if (tls_server) tls_server->start();
  std::fprintf(stderr, "http_file_server: %s on %s%s, mode %s, %d worker(s)\n", root.c_str(),
               server.addresses()[0].to_string().c_str(),
               tls_server ? (" and https " + tls_server->addresses()[0].to_string()).c_str() : "",
               std::string(lionet::http::file_mode_name(mode)).c_str(), threads);
  runtime.wait_for_stop();
  server.stop(std::chrono::seconds(1));
  if (tls_server) tls_server->stop(std::chrono::seconds(1));
  runtime.stop();
  auto st = files->stats();
  uint64_t requests = server.stats().requests.load(), errors = server.stats().errors.load();
  uint64_t accepted = server.tcp().accepted();
  if (tls_server) {
    requests += tls_server->stats().requests.load();
    errors += tls_server->stats().errors.load();
    accepted += tls_server->tcp().accepted();
  }
  std::printf(
      "RESULT requests=%llu accepted=%llu files=%llu memory_hits=%llu memory_misses=%llu threads=%d errors=%llu\n",
      static_cast<unsigned long long>(requests), static_cast<unsigned long long>(accepted),
      static_cast<unsigned long long>(st.files_served), static_cast<unsigned long long>(st.memory_hits),
      static_cast<unsigned long long>(st.memory_misses), threads, static_cast<unsigned long long>(errors));
  return 0;
}
