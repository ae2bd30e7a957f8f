// bench/bench_server.cc: the echo server of the echo benchmark: a TcpServer on 127.0.0.1 with
// one fiber per connection that reads into a 64 KiB buffer and writes back what it read
// (the same buffer size as the epoll reference, bench/reference/echo/).
//
//   bench_server [port] [--threads N] [--backend epoll|io_uring|io_uring-poll|io_uring-shared]
//
// Defaults: port 9000, 1 worker, epoll. Runs until SIGINT/SIGTERM, then stops gracefully and
// prints `RESULT accepted=N backend=B threads=T errors=0` as its last line.
// Compared side by side with bench/reference's echo servers by scripts/bench-echo.sh.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench/common/server_main.h"
#include "lionet/net/tcp_server.h"

namespace {
[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [port] [--threads N] [--backend epoll|io_uring|io_uring-poll|io_uring-shared]\n",
               argv0);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  int port = 9000, threads = 1;
  std::string backend = "epoll";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      port = std::atoi(a.c_str());
    } else {
      usage(argv[0]);
    }
  }
  const bool known =
      backend == "epoll" || backend == "io_uring" || backend == "io_uring-poll" || backend == "io_uring-shared";
  if (threads < 1 || port < 0 || port > 65535 || !known) usage(argv[0]);

  // The default runtime: the scheduler's own IO driver, on the backend asked for.
  lionet::bench::ServerMain runtime(threads, "echo", backend);
  lionet::TcpServerOptions opts;
  opts.reuse_port_per_worker = threads > 1;  // one listener per worker, kernel-balanced
  opts.name = "echo";
  lionet::TcpServer server(
      runtime.scheduler(),
      [](lionet::SocketStream& s) {
        constexpr size_t kBuf = 64 * 1024;
        std::unique_ptr<char[]> buf(new char[kBuf]);  // heap: fiber stacks are small
        for (;;) {
          auto r = s.read(buf.get(), kBuf);
          if (!r || *r == 0) return;  // end of stream or reset: the connection ends
          if (!s.write(buf.get(), *r)) return;
        }
      },
      opts);
  try {
    server.listen(lionet::Address::ipv4_loopback(static_cast<uint16_t>(port)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  server.start();
  std::fprintf(stderr, "bench_server: listening on %s, %d worker(s), backend %s\n",
               server.addresses()[0].to_string().c_str(), threads, runtime.backend());

  runtime.wait_for_stop();
  server.stop(std::chrono::seconds(1));
  runtime.stop();
  std::printf("RESULT accepted=%llu backend=%s threads=%d errors=0\n",
              static_cast<unsigned long long>(server.accepted()), runtime.backend(), threads);
  return 0;
}
