// bench/bench_client.cc: echo load client on LioNet fibers. Each connection is a fiber that
// keeps exactly one message in flight: write S bytes, read S bytes back, verify every byte,
// repeat (the same ping-pong as bench/reference's echo_client, so the two clients can be
// compared against the same server).
//
//   bench_client -h host -p port -c connections -s size -d seconds [-t threads] [-b backend]
//
// Prints one line per second, `[1s] QPS: 123456 | Throughput: 31.60 MB/s`, then the totals.
// Throughput counts the payload one way (requests x size), like the peer's MBps_each_way.
// Last line: `RESULT conns=C size=S secs=D requests=R qps=Q mbps=M errors=E`.
// An error is a connection that failed to connect, was reset or closed, or echoed a wrong
// byte; it stops that connection. Exit status 1 if errors > 0.
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lionet/io/io_manager.h"
#include "lionet/net/socket.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/wait_group.h"

namespace {
using namespace std::chrono_literals;

struct alignas(64) Counter {  // one per connection: no shared cache line on the hot path
  std::atomic<uint64_t> n{0};
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s -h host -p port -c connections -s size -d seconds [-t threads] [-b epoll|io_uring]\n",
               argv0);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", backend = "epoll";
  int port = 9000, conns = 100, threads = 1;
  size_t size = 256;
  double secs = 5;
  for (int opt; (opt = getopt(argc, argv, "h:p:c:s:d:t:b:")) != -1;) {
    switch (opt) {
      case 'h': host = optarg; break;
      case 'p': port = std::atoi(optarg); break;
      case 'c': conns = std::atoi(optarg); break;
      case 's': size = static_cast<size_t>(std::atol(optarg)); break;
      case 'd': secs = std::atof(optarg); break;
      case 't': threads = std::atoi(optarg); break;
      case 'b': backend = optarg; break;
      default: usage(argv[0]);
    }
  }
  if (conns < 1 || size < 1 || secs <= 0 || threads < 1) usage(argv[0]);

  std::string target;  // "host:port", "[v6]:port"
  bool bare_v6 = host.find(':') != std::string::npos && host.front() != '[';
  if (bare_v6) target += '[';
  target += host;
  if (bare_v6) target += ']';
  target += ':';
  target += std::to_string(port);

  lionet::Scheduler sched({.threads = threads, .name = "client", .io = {.backend = backend}});

  // The message: the same bytes as the peer client sends.
  std::string msg(size, '\0');
  for (size_t i = 0; i < size; ++i) msg[i] = static_cast<char>('a' + (i * 7 + i / 26) % 26);

  std::vector<Counter> counts(conns);
  std::atomic<uint64_t> errors{0};
  std::atomic<bool> stop{false};
  lionet::WaitGroup connected(conns), go(1), finished(conns);

  lionet::Address addr;
  {
    auto r = sched.spawn([&] { return lionet::Address::lookup(target); }).join();
    if (!r || r->empty()) {
      std::fprintf(stderr, "bench_client: cannot resolve %s: %s\n", target.c_str(),
                   r ? "no address" : r.error().message().c_str());
      return 1;
    }
    addr = r->front();
  }

  for (int i = 0; i < conns; ++i) {
    sched
        .spawn([&, i] {
          auto s = lionet::Socket::connect_to(addr, lionet::Deadline::after(10s));
          connected.done();
          go.wait();
          if (!s) {
            errors++;
            finished.done();
            return;
          }
          std::unique_ptr<char[]> buf(new char[size]);
          auto& mine = counts[i].n;
          uint64_t done = 0;
          while (!stop.load(std::memory_order_relaxed)) {
            if (!s->write(msg.data(), size)) {
              errors++;
              break;
            }
            size_t got = 0;
            bool ok = true;
            while (got < size) {
              auto r = s->read(buf.get() + got, size - got);
              if (!r || *r == 0 || std::memcmp(buf.get() + got, msg.data() + got, *r) != 0) {
                ok = false;
                break;
              }
              got += *r;
            }
            if (!ok) {
              errors++;
              break;
            }
            mine.store(++done, std::memory_order_relaxed);  // single writer: a plain store
          }
          finished.done();
        })
        .detach();
  }
  connected.wait();
  auto total = [&] {
    uint64_t t = 0;
    for (auto& c : counts) t += c.n.load(std::memory_order_relaxed);
    return t;
  };

  auto t0 = std::chrono::steady_clock::now();
  go.done();
  uint64_t prev = 0;
  int whole = static_cast<int>(secs);
  for (int sec = 1; sec <= whole; ++sec) {
    std::this_thread::sleep_until(t0 + std::chrono::seconds(sec));
    uint64_t now_total = total();
    uint64_t d = now_total - prev;
    prev = now_total;
    std::printf("[%ds] QPS: %llu | Throughput: %.2f MB/s\n", sec, static_cast<unsigned long long>(d),
                static_cast<double>(d) * static_cast<double>(size) / 1e6);
    std::fflush(stdout);
  }
  std::this_thread::sleep_until(
      t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(secs)));
  uint64_t requests = total();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop.store(true);
  finished.wait_for(10s);  // each fiber finishes its exchange in flight (the server answers)
  sched.stop();

  double qps = static_cast<double>(requests) / elapsed;
  double mbps = qps * static_cast<double>(size) / 1e6;
  std::printf("Total requests: %llu\nAverage QPS: %.0f\nThroughput: %.2f MB/s\nErrors: %llu\n",
              static_cast<unsigned long long>(requests), qps, mbps, static_cast<unsigned long long>(errors.load()));
  std::printf("RESULT conns=%d size=%zu secs=%.2f requests=%llu qps=%.0f mbps=%.2f errors=%llu\n", conns, size, elapsed,
              static_cast<unsigned long long>(requests), qps, mbps, static_cast<unsigned long long>(errors.load()));
  return errors.load() ? 1 : 0;
}
