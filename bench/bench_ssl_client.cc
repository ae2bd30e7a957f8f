// bench/bench_ssl_client.cc: TLS echo load client on LioNet fibers (SslStream, client side).
// Each connection is a fiber: connect, TLS handshake, then `requests` ping-pongs of `payload`
// bytes (write, read back, verify every byte), then close_notify and close. All connections
// start at once. This is the earlier report's client shape (connections x requests x bytes).
//
//   bench_ssl_client host port connections requests-per-connection payload-bytes [client-threads]
//
// Prints completed requests, errors, elapsed ms (first connect to last close), QPS, MB/s (the
// payload one way), handshakes (and how many resumed a session: the client context caches
// the newest ticket, so connections that start after the first tickets arrived resume) and
// handshakes/s. Last line:
// `RESULT conns=C requests_per_conn=R size=S requests=N elapsed_ms=T qps=Q mbps=M
//  handshakes=H resumed=K hs_per_s=X errors=E`. Exit status 1 if errors > 0.
// An error is a connection that failed to connect or handshake, or a request whose echo failed
// or differed; the connection stops there.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lionet/io/io_manager.h"
#include "lionet/net/socket.h"
#include "lionet/sched/scheduler.h"
#include "lionet/ssl/ssl_stream.h"
#include "lionet/sync/wait_group.h"

namespace {
using namespace std::chrono_literals;

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s host port connections requests-per-connection payload-bytes [client-threads]\n",
               argv0);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 7) usage(argv[0]);
  std::string host = argv[1];
  int port = std::atoi(argv[2]);
  int conns = std::atoi(argv[3]);
  long per_conn = std::atol(argv[4]);
  size_t size = static_cast<size_t>(std::atol(argv[5]));
  int threads = argc == 7 ? std::atoi(argv[6]) : 1;
  if (conns < 1 || per_conn < 0 || size < 1 || threads < 1 || port <= 0 || port > 65535) usage(argv[0]);

  lionet::SslOptions o;
  o.server_name = "localhost";  // SNI; the benchmark's certificate is self-signed: no verification
  std::shared_ptr<lionet::SslContext> ctx = lionet::SslContext::client(o);

  lionet::Scheduler sched({.threads = threads, .name = "tlsclient"});
  lionet::IOManager io(sched);

  std::string target = host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
  (target += ':') += std::to_string(port);
  lionet::Address addr;
  {
    auto r = sched.spawn([&] { return lionet::Address::lookup(target); }).join();
    if (!r || r->empty()) {
      std::fprintf(stderr, "bench_ssl_client: cannot resolve %s\n", target.c_str());
      return 1;
    }
    addr = r->front();
  }

  std::string msg(size, '\0');
  for (size_t i = 0; i < size; ++i) msg[i] = static_cast<char>('A' + (i * 7 + i / 26) % 26);

  std::atomic<uint64_t> requests{0}, errors{0}, handshakes{0}, resumed{0};
  std::atomic<bool> first_error_printed{false};
  lionet::WaitGroup finished(conns);
  auto report = [&](const char* what, const std::string& detail) {
    errors.fetch_add(1, std::memory_order_relaxed);
    if (!first_error_printed.exchange(true))
      std::fprintf(stderr, "bench_ssl_client: first error: %s %s\n", what, detail.c_str());
  };
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < conns; ++i) {
    sched.spawn_detached([&] {
      auto s = lionet::Socket::connect_to(addr, lionet::Deadline::after(10s));
      if (!s) {
        report("connect", s.error().message());
        finished.done();
        return;
      }
      lionet::SslStream tls(ctx, std::move(*s));
      if (auto h = tls.handshake(); !h) {
        report("handshake", h.error().message() + " " + tls.last_error());
        finished.done();
        return;
      }
      handshakes.fetch_add(1, std::memory_order_relaxed);
      if (tls.session_reused()) resumed.fetch_add(1, std::memory_order_relaxed);
      std::unique_ptr<char[]> buf(new char[size]);
      uint64_t done = 0;
      for (long k = 0; k < per_conn; ++k) {
        if (auto w = tls.write(msg.data(), size); !w) {
          report("write", w.error().message());
          break;
        }
        auto r = tls.read_full(buf.get(), size);
        if (!r || *r != size || std::memcmp(buf.get(), msg.data(), size) != 0) {
          report("read", r ? "short or wrong echo" : r.error().message());
          break;
        }
        ++done;
      }
      requests.fetch_add(done, std::memory_order_relaxed);
      (void)tls.shutdown_write();
      tls.close();
      finished.done();
    });
  }
  finished.wait();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sched.stop();

  uint64_t n = requests.load(), e = errors.load(), h = handshakes.load();
  double qps = static_cast<double>(n) / elapsed;
  double mbps = qps * static_cast<double>(size) / 1e6;
  double hs = static_cast<double>(h) / elapsed;
  std::printf(
      "Completed requests: %llu of %llu\nErrors: %llu\nElapsed: %.1f ms\nQPS: %.0f\nThroughput: %.2f MB/s\n"
      "Handshakes: %llu (resumed %llu), %.0f handshakes/s\n",
      static_cast<unsigned long long>(n), static_cast<unsigned long long>(conns) * per_conn,
      static_cast<unsigned long long>(e), elapsed * 1e3, qps, mbps, static_cast<unsigned long long>(h),
      static_cast<unsigned long long>(resumed.load()), hs);
  std::printf(
      "RESULT conns=%d requests_per_conn=%ld size=%zu requests=%llu elapsed_ms=%.1f qps=%.0f mbps=%.2f "
      "handshakes=%llu resumed=%llu hs_per_s=%.0f errors=%llu\n",
      conns, per_conn, size, static_cast<unsigned long long>(n), elapsed * 1e3, qps, mbps,
      static_cast<unsigned long long>(h), static_cast<unsigned long long>(resumed.load()), hs,
      static_cast<unsigned long long>(e));
  return e ? 1 : 0;
}
