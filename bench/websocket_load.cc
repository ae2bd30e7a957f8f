// bench/websocket_load.cc: the load client of the WebSocket benchmark (scripts/bench-websocket.sh),
// one program for both servers compared there (bench/websocket_echo_server and
// bench/reference/websocket's gorilla server): LioNet's own websocket::connect(), one fiber per
// connection, on a Scheduler with one worker (the script pins the process to CPU 1).
//
//   websocket_load echo      -p PORT [-c CONNS] [-s SIZE] [-d SECS]
//   websocket_load broadcast -p PORT [-c CONNS] [-s SIZE] [-k ROUNDS]
//   websocket_load idle      -p PORT [-c CONNS] [-d SECS]
//   common: [-b epoll|io_uring] [--path /P] [--parallel N]
//
// echo (path /echo): CONNS connections, each with exactly one SIZE-byte binary message in
//   flight (send, receive the echo, compare every byte, repeat) for SECS seconds. Prints
//   messages/s, the round trip's p50/p99 (log-bucketed, within 1.6%), and the client's own CPU
//   share (its user + system time over the measured wall time, of the one CPU it runs on: near
//   1.0 means the client, not the server, set the pace).
//   Last line: RESULT mode=echo conns= size= secs= messages= msgs_per_s= p50_us= p99_us=
//              client_cpu= errors=
// broadcast (path /broadcast): CONNS connections, each with a fiber parked in receive(); then
//   ROUNDS times: one SIZE-byte trigger message sent on connection 0, and each connection's
//   delivery time measured from just before that send to when its receive() returned (so it
//   includes this client's own work to wake and read CONNS sockets on one CPU). A round waits
//   at most 10 s for every delivery, then 50 ms before the next trigger. Prints a line per
//   round (received, p50/p99/max, and the client's CPU share from the send to the last
//   delivery: near 1.0 means this client's reading, not the server's sending, set the pace)
//   and the medians over rounds.
//   Last line: RESULT mode=broadcast conns= rounds= received= expected= p50_ms= p99_ms= max_ms=
//              connect_s= client_cpu= errors=
// idle (path /echo): opens CONNS connections, prints `HOLDING conns=N` (the script reads the
//   server's RSS then), holds them SECS seconds sending nothing, then closes them all.
//   Last line: RESULT mode=idle conns= connected= connect_s= errors=
//
// Connections are opened by --parallel (64) connector fibers at once (so the listen backlog
// never overflows into SYN retries), each connect bounded by a 10 s handshake timeout. Every
// loop is bounded in count and time; only 127.0.0.1. An error is a connection that failed to
// open, a send or receive that failed, a wrong echo, or a broadcast delivery that never came;
// exit status 1 if errors > 0. RLIMIT_NOFILE is raised to its hard limit (10,000+ connections).
#include <getopt.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lionet/sched/scheduler.h"
#include "lionet/sync/wait_group.h"
#include "lionet/websocket/client.h"
#include "lionet/websocket/socket.h"

namespace {
namespace ws = lionet::websocket;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string mode;
  int port = -1;
  int conns = 100;
  size_t size = 64;
  double secs = 4;
  int rounds = 5;
  int parallel = 64;
  std::string path;
  std::string backend = "epoll";
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s echo|broadcast|idle -p PORT [-c CONNS] [-s SIZE] [-d SECS] [-k ROUNDS] "
               "[-b epoll|io_uring] [--path /P] [--parallel N]\n",
               argv0);
  std::exit(2);
}

int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

// The process's user + system CPU time so far, in seconds.
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void raise_nofile() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

// Nanosecond samples in log buckets: 64 per power of two, so a quantile is within 1/64 of
// the true value; one per connection (no sharing), merged at the end.
class LogHistogram {
 public:
  void add(int64_t ns) {
    uint64_t v = ns < 1 ? 1 : static_cast<uint64_t>(ns);
    int msb = 63 - std::countl_zero(v);
    size_t idx = msb < 6 ? v : static_cast<size_t>((msb - 5) * 64) + ((v >> (msb - 6)) & 63);
    ++counts_[std::min(idx, counts_.size() - 1)];
    ++total_;
  }
  void merge(const LogHistogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
  }
  // The lower bound of the bucket holding quantile q, in nanoseconds (0 if empty).
  double quantile(double q) const {
    if (total_ == 0) return 0;
    uint64_t want = static_cast<uint64_t>(q * static_cast<double>(total_ - 1)) + 1, seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= want) return static_cast<double>(lower_bound(i));
    }
    return static_cast<double>(lower_bound(counts_.size() - 1));
  }

 private:
  static uint64_t lower_bound(size_t idx) {
    if (idx < 64) return idx;
    size_t msb = idx / 64 + 5;
    return (uint64_t{1} << msb) | (static_cast<uint64_t>(idx % 64) << (msb - 6));
  }
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(64 * 40);  // up to 2^45 ns (~10 h)
  uint64_t total_ = 0;
};

double quantile_sorted(const std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return static_cast<double>(v[std::min(i, v.size() - 1)]);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];  // the lower middle one: always a measured value
}

// Opens n connections to url with `parallel` connector fibers; failed ones stay null. Runs in
// a fiber. Returns the seconds it took.
double open_all(lionet::Scheduler& sched, const std::string& url, int n, int parallel,
                std::vector<std::unique_ptr<ws::Socket>>& out) {
  out.clear();
  out.resize(static_cast<size_t>(n));
  ws::ClientOptions o;
  o.ping_interval = std::nullopt;  // the client sends no keepalive pings (nor does gorilla)
  o.handshake_timeout = 10s;
  std::atomic<int> next{0};
  int workers = std::max(1, std::min(parallel, n));
  lionet::WaitGroup done(workers);
  auto t0 = Clock::now();
  for (int w = 0; w < workers; ++w) {
    sched.spawn_detached([&] {
      for (int i = next.fetch_add(1, std::memory_order_relaxed); i < n;
           i = next.fetch_add(1, std::memory_order_relaxed)) {
        ws::ConnectInfo info;
        auto s = ws::connect(url, o, &info);
        if (s) {
          out[static_cast<size_t>(i)] = std::move(*s);
        } else if (i < 3) {
          std::fprintf(stderr, "websocket_load: connect %s: %s %s\n", url.c_str(), s.error().message().c_str(),
                       info.failure.c_str());
        }
      }
      done.done();
    });
  }
  // Each connect is bounded by its handshake timeout; this bounds the whole.
  if (!done.wait_for(std::chrono::seconds(30 + n / 100)))
    std::fprintf(stderr, "websocket_load: connecting timed out\n");
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t count_open(const std::vector<std::unique_ptr<ws::Socket>>& v) {
  return static_cast<uint64_t>(std::count_if(v.begin(), v.end(), [](auto& s) { return s != nullptr; }));
}

// Closes every socket, each in its own fiber (the handshakes overlap), bounded.
void close_all(lionet::Scheduler& sched, std::vector<std::unique_ptr<ws::Socket>>& v) {
  lionet::WaitGroup done(static_cast<int64_t>(v.size()));
  for (auto& s : v) {
    sched.spawn_detached([&s, &done] {
      if (s) (void)s->close();  // its outcome shows in the server's counters, not here
      done.done();
    });
  }
  done.wait_for(30s);  // each close is bounded by close_timeout (5 s)
}

std::string make_payload(size_t size) {
  std::string msg(size, '\0');
  for (size_t i = 0; i < size; ++i) msg[i] = static_cast<char>('a' + (i * 7 + i / 26) % 26);
  return msg;
}

// ---- echo ------------------------------------------------------------------------------------

int run_echo(lionet::Scheduler& sched, const Config& cfg, const std::string& url) {
  std::vector<std::unique_ptr<ws::Socket>> socks;
  sched.spawn([&] { open_all(sched, url, cfg.conns, cfg.parallel, socks); }).join();
  uint64_t errors = static_cast<uint64_t>(cfg.conns) - count_open(socks);

  const std::string msg = make_payload(cfg.size);
  struct alignas(64) PerConn {
    std::atomic<uint64_t> done{0};
    LogHistogram hist;
    bool failed = false;
  };
  std::vector<PerConn> per(static_cast<size_t>(cfg.conns));
  std::atomic<bool> stop{false};
  lionet::WaitGroup go(1), finished(cfg.conns);
  for (int i = 0; i < cfg.conns; ++i) {
    sched.spawn_detached([&, i] {
      auto& me = per[static_cast<size_t>(i)];
      ws::Socket* s = socks[static_cast<size_t>(i)].get();
      go.wait();
      ws::Message m;
      uint64_t n = 0;
      while (s && !stop.load(std::memory_order_relaxed)) {
        auto t0 = Clock::now();
        if (!s->send_binary(msg) || !s->receive(m) || m.data != msg) {
          me.failed = true;
          break;
        }
        me.hist.add(ns_since(t0));
        me.done.store(++n, std::memory_order_relaxed);  // single writer
      }
      finished.done();
    });
  }
  auto total = [&] {
    uint64_t t = 0;
    for (auto& p : per) t += p.done.load(std::memory_order_relaxed);
    return t;
  };
  double cpu0 = cpu_seconds();
  auto t0 = Clock::now();
  go.done();
  uint64_t prev = 0;
  for (int sec = 1; sec <= static_cast<int>(cfg.secs); ++sec) {
    std::this_thread::sleep_until(t0 + std::chrono::seconds(sec));
    uint64_t now_total = total();
    std::printf("[%ds] messages/s: %llu\n", sec, static_cast<unsigned long long>(now_total - prev));
    std::fflush(stdout);
    prev = now_total;
  }
  std::this_thread::sleep_until(t0 +
                                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.secs)));
  uint64_t messages = total();
  double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = (cpu_seconds() - cpu0) / elapsed;
  stop.store(true);
  if (!finished.wait_for(10s)) {  // each fiber ends its exchange in flight: a stuck one is an error
    ++errors;
    for (auto& s : socks) (void)s.release();  // still in use by a stuck fiber: leaked, not freed
  }
  LogHistogram all;
  for (auto& p : per) {
    all.merge(p.hist);
    if (p.failed) ++errors;
  }
  sched.spawn([&] { close_all(sched, socks); }).join();
  sched.stop();  // here, not in main(): every fiber ends while what it uses is alive
  double rate = static_cast<double>(messages) / elapsed;
  std::printf(
      "RESULT mode=echo conns=%d size=%zu secs=%.2f messages=%llu msgs_per_s=%.0f p50_us=%.1f p99_us=%.1f "
      "client_cpu=%.3f errors=%llu\n",
      cfg.conns, cfg.size, elapsed, static_cast<unsigned long long>(messages), rate, all.quantile(0.50) / 1e3,
      all.quantile(0.99) / 1e3, cpu, static_cast<unsigned long long>(errors));
  return errors ? 1 : 0;
}

// ---- broadcast -------------------------------------------------------------------------------

int run_broadcast(lionet::Scheduler& sched, const Config& cfg, const std::string& url) {
  const size_t n = static_cast<size_t>(cfg.conns);
  const int rounds = cfg.rounds;
  std::vector<std::unique_ptr<ws::Socket>> socks;
  double connect_s = 0;
  sched.spawn([&] { connect_s = open_all(sched, url, cfg.conns, cfg.parallel, socks); }).join();
  uint64_t errors = n - count_open(socks);
  if (!socks[0]) {
    sched.stop();
    std::printf("RESULT mode=broadcast conns=%d rounds=0 received=0 expected=0 errors=%llu\n", cfg.conns,
                static_cast<unsigned long long>(errors ? errors : 1));
    return 1;
  }

  // delivery[r][i]: ns from round r's send to connection i's receive (-1: none yet). Written by
  // connection i's fiber; read after that round's WaitGroup (or its timeout, then stale -1s
  // count as missing). One worker: no two fibers run at once.
  std::vector<std::vector<int64_t>> delivery(static_cast<size_t>(rounds), std::vector<int64_t>(n, -1));
  std::vector<std::unique_ptr<lionet::WaitGroup>> round_done;
  for (int r = 0; r < rounds; ++r) round_done.push_back(std::make_unique<lionet::WaitGroup>(static_cast<int64_t>(n)));
  std::vector<Clock::time_point> sent_at(static_cast<size_t>(rounds));
  std::atomic<uint64_t> bad{0};
  lionet::WaitGroup finished(static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    sched.spawn_detached([&, i] {
      ws::Socket* s = socks[i].get();
      ws::Message m;
      for (int got = 0; s && got < rounds;) {
        if (!s->receive(m)) break;  // the connection ended (or was closed for a missing round)
        auto at = Clock::now();
        uint32_t r = 0;
        if (m.data.size() != cfg.size || m.data.size() < 4) {
          bad.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        std::memcpy(&r, m.data.data(), 4);
        if (r >= static_cast<uint32_t>(rounds) || delivery[r][i] != -1) {
          bad.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        delivery[r][i] = std::chrono::duration_cast<std::chrono::nanoseconds>(at - sent_at[r]).count();
        round_done[r]->done();
        ++got;
      }
      finished.done();
    });
  }

  std::string msg = make_payload(std::max<size_t>(cfg.size, 4));
  std::vector<double> p50s, p99s, maxs, cpus;
  uint64_t received = 0;
  sched
      .spawn([&] {
        for (int r = 0; r < rounds; ++r) {
          uint32_t tag = static_cast<uint32_t>(r);
          std::memcpy(msg.data(), &tag, 4);
          double cpu0 = cpu_seconds();
          sent_at[static_cast<size_t>(r)] = Clock::now();
          if (!socks[0]->send_binary(msg)) {
            ++errors;
            break;
          }
          round_done[static_cast<size_t>(r)]->wait_for(10s);
          // The client's CPU share from the send to the last delivery (or the timeout).
          cpus.push_back((cpu_seconds() - cpu0) /
                         std::chrono::duration<double>(Clock::now() - sent_at[static_cast<size_t>(r)]).count());
          std::vector<int64_t> d;
          d.reserve(n);
          for (int64_t v : delivery[static_cast<size_t>(r)]) {
            if (v >= 0) d.push_back(v);
          }
          std::sort(d.begin(), d.end());
          received += d.size();
          double p50 = quantile_sorted(d, 0.50) / 1e6, p99 = quantile_sorted(d, 0.99) / 1e6,
                 mx = d.empty() ? 0 : static_cast<double>(d.back()) / 1e6;
          p50s.push_back(p50);
          p99s.push_back(p99);
          maxs.push_back(mx);
          std::printf("round %d: received %zu/%zu p50=%.2f ms p99=%.2f ms max=%.2f ms client_cpu=%.3f\n", r, d.size(),
                      n, p50, p99, mx, cpus.back());
          std::fflush(stdout);
          lionet::this_fiber::sleep_for(50ms);
        }
      })
      .join();
  uint64_t expected = static_cast<uint64_t>(rounds) * count_open(socks);
  // Receivers still waiting (a delivery never came) end when their socket is closed.
  sched.spawn([&] { close_all(sched, socks); }).join();
  if (!finished.wait_for(10s)) {
    ++errors;
    for (auto& s : socks) (void)s.release();  // still in use by a stuck receiver: leaked, not freed
  }
  sched.stop();
  errors += (expected - std::min(expected, received)) + bad.load();
  std::printf(
      "RESULT mode=broadcast conns=%d rounds=%d received=%llu expected=%llu p50_ms=%.2f p99_ms=%.2f "
      "max_ms=%.2f connect_s=%.2f client_cpu=%.3f errors=%llu\n",
      cfg.conns, rounds, static_cast<unsigned long long>(received), static_cast<unsigned long long>(expected),
      median(p50s), median(p99s), median(maxs), connect_s, median(cpus), static_cast<unsigned long long>(errors));
  return errors ? 1 : 0;
}

// ---- idle ------------------------------------------------------------------------------------

int run_idle(lionet::Scheduler& sched, const Config& cfg, const std::string& url) {
  std::vector<std::unique_ptr<ws::Socket>> socks;
  double connect_s = 0;
  sched.spawn([&] { connect_s = open_all(sched, url, cfg.conns, cfg.parallel, socks); }).join();
  uint64_t connected = count_open(socks);
  std::printf("HOLDING conns=%llu\n", static_cast<unsigned long long>(connected));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(cfg.secs));
  uint64_t errors = static_cast<uint64_t>(cfg.conns) - connected;
  for (auto& s : socks) {
    if (s && !s->is_open()) ++errors;  // the server ended it while idle
  }
  sched.spawn([&] { close_all(sched, socks); }).join();
  sched.stop();
  std::printf("RESULT mode=idle conns=%d connected=%llu connect_s=%.2f errors=%llu\n", cfg.conns,
              static_cast<unsigned long long>(connected), connect_s, static_cast<unsigned long long>(errors));
  return errors ? 1 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage(argv[0]);
  Config cfg;
  cfg.mode = argv[1];
  static const option longopts[] = {{"path", required_argument, nullptr, 'P'},
                                    {"parallel", required_argument, nullptr, 'x'},
                                    {nullptr, 0, nullptr, 0}};
  optind = 2;
  for (int opt; (opt = getopt_long(argc, argv, "p:c:s:d:k:b:", longopts, nullptr)) != -1;) {
    switch (opt) {
      case 'p': cfg.port = std::atoi(optarg); break;
      case 'c': cfg.conns = std::atoi(optarg); break;
      case 's': cfg.size = static_cast<size_t>(std::atol(optarg)); break;
      case 'd': cfg.secs = std::atof(optarg); break;
      case 'k': cfg.rounds = std::atoi(optarg); break;
      case 'b': cfg.backend = optarg; break;
      case 'P': cfg.path = optarg; break;
      case 'x': cfg.parallel = std::atoi(optarg); break;
      default: usage(argv[0]);
    }
  }
  bool known = cfg.mode == "echo" || cfg.mode == "broadcast" || cfg.mode == "idle";
  if (!known || cfg.port <= 0 || cfg.port > 65535 || cfg.conns < 1 || cfg.size < 1 || cfg.secs <= 0 ||
      cfg.secs > 3600 || cfg.rounds < 1 || cfg.rounds > 1000 || cfg.parallel < 1 ||
      (cfg.mode == "broadcast" && cfg.size < 4))
    usage(argv[0]);
  if (cfg.path.empty()) cfg.path = cfg.mode == "broadcast" ? "/broadcast" : "/echo";
  raise_nofile();

  std::string url = "ws://127.0.0.1:" + std::to_string(cfg.port) + cfg.path;
  lionet::Scheduler sched({.threads = 1, .name = "wsload", .io = {.backend = cfg.backend}});
  // Each mode stops the scheduler itself before its locals go.
  if (cfg.mode == "echo") return run_echo(sched, cfg, url);
  if (cfg.mode == "broadcast") return run_broadcast(sched, cfg, url);
  return run_idle(sched, cfg, url);
}
