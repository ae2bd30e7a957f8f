// bench/bench_ssl_server.cc: the TLS echo server of the TLS benchmark: a TcpServer on
// 127.0.0.1 whose connection fibers wrap the socket in an SslStream, handshake, and write back
// what they read through a 64 KiB buffer (the libevent + OpenSSL reference in
// bench/reference/tls/ echoes the same way).
//
//   bench_ssl_server port cert.pem key.pem [--threads N] [--tickets N]
//
// Defaults: 1 worker, epoll, the SslOptions defaults (TLS 1.2-1.3, stateless tickets).
// Runs until SIGINT/SIGTERM, then prints `RESULT accepted=N handshakes=H failed_handshakes=F
// threads=T errors=0` as its last line. Compared side by side with bench/reference's
// tls_echo_server by scripts/bench-tls.sh.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench/common/server_main.h"
#include "lionet/net/tcp_server.h"
#include "lionet/ssl/ssl_stream.h"

namespace {
[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s port cert.pem key.pem [--threads N] [--tickets N]\n", argv0);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) usage(argv[0]);
  int port = std::atoi(argv[1]), threads = 1;
  lionet::SslOptions tls;
  tls.certificates = {{argv[2], argv[3]}};
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--tickets" && i + 1 < argc) tls.tickets = std::atoi(argv[++i]);
    else usage(argv[0]);
  }
  if (threads < 1 || port < 0 || port > 65535) usage(argv[0]);

  std::shared_ptr<lionet::SslContext> ctx;
  try {
    ctx = lionet::SslContext::server(tls);
  } catch (const lionet::SslError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  lionet::bench::ServerMain runtime(threads, "tls");  // the scheduler's own IO driver (auto: epoll)
  std::atomic<uint64_t> handshakes{0}, failed{0};
  lionet::TcpServerOptions opts;
  opts.reuse_port_per_worker = threads > 1;
  opts.name = "tls";
  lionet::TcpServer server(
      runtime.scheduler(),
      [&](lionet::SocketStream& s) {
        lionet::SslStream tls_stream(ctx, s.socket());
        if (!tls_stream.handshake()) {
          failed.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        handshakes.fetch_add(1, std::memory_order_relaxed);
        constexpr size_t kBuf = 64 * 1024;
        std::unique_ptr<char[]> buf(new char[kBuf]);  // heap: fiber stacks are small
        for (;;) {
          auto r = tls_stream.read(buf.get(), kBuf);
          if (!r || *r == 0) return;
          if (!tls_stream.write(buf.get(), *r)) return;
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
  std::fprintf(stderr, "bench_ssl_server: listening on %s, %d worker(s), kTLS %s\n",
               server.addresses()[0].to_string().c_str(), threads, ctx->ktls_enabled() ? "on" : "off");

  runtime.wait_for_stop();
  server.stop(std::chrono::seconds(1));
  runtime.stop();
  std::printf("RESULT accepted=%llu handshakes=%llu failed_handshakes=%llu threads=%d errors=0\n",
              static_cast<unsigned long long>(server.accepted()), static_cast<unsigned long long>(handshakes.load()),
              static_cast<unsigned long long>(failed.load()), threads);
  return 0;
}
