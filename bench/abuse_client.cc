// bench/abuse_client.cc: abuse an HTTP server on 127.0.0.1 while probes check that it keeps
// serving everyone else (issue 10). Plain epoll and threads, no LioNet: the client must not
// share the server's runtime or its bugs.
//
//   abuse_client flood 127.0.0.1 PORT [--conns 20000] [--limit 10000] [--secs 8] [--path /healthz]
//     Opens --conns connections as fast as the kernel lets it and sends nothing. Each one ends
//     as: refused (connect failed), closed by the server (EOF; "answered" if bytes came first),
//     reset by the server (ECONNRESET), or held (still open at the end). Passes if held <=
//     limit, at least the excess (conns - limit) were closed within 1 s of their connect (at
//     accept, not by a timeout), and the keep-alive probe stayed healthy. Beyond the
//     RLIMIT_NOFILE hard limit the connections are spread over forked processes.
//   abuse_client slowloris 127.0.0.1 PORT [--conns 2000] [--interval-ms 5000] [--timeout-ms 3000] [--secs 15]
//     Each connection sends one byte of a request head at once and then one every
//     --interval-ms. Passes if every one is closed by the server between 0.9 x timeout and
//     timeout + 2 s after its connect, and both probes stayed healthy.
//
// Two probes run beside the abuse, each one request every 10 ms:
//   keep-alive  one connection opened BEFORE the abuse, `GET PATH` on it again and again.
//               Healthy = no error and p99 < 100 ms, in both modes.
//   fresh       a new connection per request (connect + GET + answer, then close). A full
//               server closes new connections at accept, which is the point of the limit, so
//               in flood mode its failures are only counted (with the window in which they
//               happened) and the property is that fresh connections are served again once
//               the flood is over: the last 10 fresh requests must succeed. In slowloris mode
//               (below the limit) every fresh request must succeed.
// Every loop is bounded by --secs (at most 60 s) and by a count. The last line is
//   RESULT mode=.. conns=N connected=N refused=N closed_by_server=N answered=N reset=N held=N
//          closed_within_1s=N excess_closed_ms=.. close_ms_min=.. close_ms_p50=.. close_ms_max=..
//          probe_requests=N probe_p50_ms=.. probe_p99_ms=.. probe_max_ms=.. probe_errors=N
//          fresh_ok=N fresh_failed=N fresh_fail_first_ms=.. fresh_fail_last_ms=.. fresh_p99_ms=..
//          client_errors=N errors=N
// close_ms_* are measured from each connection's connect completing; excess_closed_ms is when
// (from the first connect) the (conns - limit)-th connection had been closed. The exit status
// is 1 when errors > 0, 2 on bad arguments.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0, Clock::time_point t1 = Clock::now()) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

struct Args {
  std::string mode, host = "127.0.0.1", path = "/healthz";
  int port = 0, conns = 0, limit = 10000, interval_ms = 5000, timeout_ms = 3000;
  double secs = 0;
};

sockaddr_in target(const Args& a) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(static_cast<uint16_t>(a.port));
  inet_pton(AF_INET, a.host.c_str(), &s.sin_addr);
  return s;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// ------------------------------------------------------------------------------ probes
// A blocking socket whose connect, send and recv each give up after 2 s (an answer slower
// than that is a failure, whatever the p99).
int probe_socket(const Args& a) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // also bounds connect()
  sockaddr_in s = target(a);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&s), sizeof s) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One request on fd and its whole answer (head + Content-Length body); true on a 200.
bool probe_request(int fd, const std::string& req) {
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return false;
  std::string buf;
  for (int reads = 0; reads < 64; ++reads) {
    char tmp[4096];
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
    auto he = buf.find("\r\n\r\n");
    if (he == std::string::npos) continue;
    auto cl = buf.find("Content-Length: ");
    std::size_t len = cl == std::string::npos ? 0 : std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
    if (buf.size() >= he + 4 + len) return buf.compare(0, 12, "HTTP/1.1 200") == 0;
  }
  return false;
}

struct Probe {
  bool fresh = false;  // a new connection per request (else one kept-alive connection)
  std::atomic<bool> stop{false};
  std::vector<double> lat_ms;  // successful requests
  std::vector<std::pair<double, double>> slowest;  // (latency, sent at ms since t0), the 5 worst
  std::vector<double> fail_at;  // failures, ms since t0
  std::vector<bool> outcome;  // every request in order (true = ok)
  Clock::time_point t0;
  std::thread th;

  bool start(const Args& a, bool fresh_conns) {
    fresh = fresh_conns;
    t0 = Clock::now();
    int fd = -1;
    if (!fresh && (fd = probe_socket(a)) < 0) return false;
    th = std::thread([this, a, fd] { run(a, fd); });
    return true;
  }
  void run(const Args& a, int fd) {
    // The probe shares CPU 1 with the abuse loops (and their child processes): a higher weight
    // lets it run as soon as an answer arrives, so its latency is the server's, not our own
    // run-queue wait. Needs root (CAP_SYS_NICE); without it the figures include that wait.
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), -10);
    const std::string req = "GET " + a.path + " HTTP/1.1\r\nHost: probe\r\n\r\n";
    for (int i = 0; i < 20000 && !stop.load(std::memory_order_relaxed); ++i) {
      const auto t = Clock::now();
      int c = fresh ? probe_socket(a) : fd;
      const bool ok = c >= 0 && probe_request(c, req);
      if (fresh && c >= 0) ::close(c);
      outcome.push_back(ok);
      if (ok) {
        lat_ms.push_back(ms_since(t));
        slowest.emplace_back(lat_ms.back(), ms_since(t0, t));
        std::sort(slowest.rbegin(), slowest.rend());
        if (slowest.size() > 5) slowest.pop_back();
      } else {
        fail_at.push_back(ms_since(t0, t));
        if (!fresh) {  // the one connection is unusable; a new one could be refused by a full server
          std::fprintf(stderr, "abuse_client: keep-alive probe request %d failed\n", i);
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fd >= 0) ::close(fd);
  }
  void finish() {
    stop = true;
    if (th.joinable()) th.join();
  }
  int failures() const { return static_cast<int>(fail_at.size()); }
  // Failures among the last n requests.
  int tail_failures(std::size_t n) const {
    std::size_t from = outcome.size() > n ? outcome.size() - n : 0;
    return static_cast<int>(std::count(outcome.begin() + static_cast<long>(from), outcome.end(), false));
  }
};

// ------------------------------------------------------------------------------ abuse
struct Conn {
  int fd = -1;
  bool connected = false, closed = false, answered = false;
  Clock::time_point established;
  std::size_t sent = 0;
};

// Fixed-size record so that a child process can send it through a pipe.
struct Counts {
  int connected = 0, refused = 0, closed = 0, answered = 0, reset = 0, held = 0, client_errors = 0;
  double last_connect_ms = 0, last_close_ms = 0;
};
struct Totals {
  Counts n;
  std::vector<double> close_ms;  // per closed connection: from its connect completing
  std::vector<double> close_at;  // per closed connection: from t0 (the common start)
};

Totals abuse(const Args& a, bool slow, Clock::time_point t0) {
  const std::string head = "GET " + a.path + " HTTP/1.1\r\nHost: slow\r\nX-Slow: " + std::string(64, 'x') + "\r\n\r\n";
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(a.secs * 1000));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(static_cast<std::size_t>(a.conns));
  sockaddr_in s = target(a);
  Totals t;
  Counts& n = t.n;
  int opened = 0;
  auto send_byte = [&](Conn& c) {
    if (c.sent < head.size() && ::send(c.fd, head.data() + c.sent, 1, MSG_NOSIGNAL) == 1) ++c.sent;
  };
  auto end = [&](Conn& c) {
    c.closed = true;
    ::close(c.fd);
  };
  Clock::time_point next_tick = Clock::now() + std::chrono::milliseconds(a.interval_ms);
  epoll_event evs[512];
  while (Clock::now() < deadline) {
    // Open connections in bursts of 256 per loop while any are left (as fast as possible).
    for (int k = 0; k < 256 && opened < a.conns; ++k, ++opened) {
      Conn& c = conns[static_cast<std::size_t>(opened)];
      c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c.fd < 0) {  // our own limit, not the server's doing: the run is not what was asked
        ++n.client_errors;
        c.closed = true;
        continue;
      }
      int r = ::connect(c.fd, reinterpret_cast<sockaddr*>(&s), sizeof s);
      if (r != 0 && errno != EINPROGRESS) {
        ++n.refused;
        end(c);
        continue;
      }
      epoll_event e{};
      e.events = EPOLLOUT | EPOLLRDHUP;
      e.data.u32 = static_cast<uint32_t>(opened);
      ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &e);
    }
    const int ne = ::epoll_wait(ep, evs, 512, 20);
    for (int i = 0; i < ne; ++i) {
      Conn& c = conns[evs[i].data.u32];
      if (c.closed) continue;
      const uint32_t ev = evs[i].events;
      if (!c.connected) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
          ++n.refused;
          end(c);
          continue;
        }
        if (!(ev & EPOLLOUT)) continue;
        c.connected = true;
        c.established = Clock::now();
        ++n.connected;
        n.last_connect_ms = ms_since(t0, c.established);
        epoll_event e{};
        e.events = EPOLLIN | EPOLLRDHUP;
        e.data.u32 = evs[i].data.u32;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &e);
        if (slow) send_byte(c);
      }
      if (!(ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) continue;
      // Read until end of stream, an error, or nothing more for now (e.g. a 408 before the FIN).
      bool gone = false, reset = false;
      for (int reads = 0; reads < 16; ++reads) {
        char buf[4096];
        ssize_t r = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0) {
          c.answered = true;
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        gone = true;
        reset = r < 0;  // ECONNRESET (or another error); r == 0 is an orderly close
        break;
      }
      if (!gone) continue;
      const auto now = Clock::now();
      ++n.closed;
      n.answered += c.answered;
      n.reset += reset;
      t.close_ms.push_back(ms_since(c.established, now));
      t.close_at.push_back(ms_since(t0, now));
      n.last_close_ms = ms_since(t0, now);
      end(c);
    }
    if (slow && Clock::now() >= next_tick) {  // one more byte on every open connection
      next_tick = Clock::now() + std::chrono::milliseconds(a.interval_ms);
      for (auto& c : conns)
        if (c.connected && !c.closed) send_byte(c);
    }
    if (slow && opened == a.conns && n.closed + n.refused + n.client_errors == a.conns) break;  // all cut off
  }
  for (auto& c : conns) {
    if (c.connected && !c.closed) ++n.held;
    if (!c.closed && c.fd >= 0) end(c);
  }
  ::close(ep);
  return t;
}

// Spreads abuse() over several processes when one cannot hold every fd (RLIMIT_NOFILE's hard
// limit): each takes an equal share. The children are forked before any thread exists (so
// they may allocate) and wait on a pipe for the common start t0; each sends its Totals back
// through another pipe.
struct Split {
  struct Kid {
    pid_t pid;
    int go, result;  // write end of the start pipe, read end of the result pipe
  };
  std::vector<Kid> kids;
  int share = 0, parent_conns = 0;
};

void child_run(const Args& a, bool slow, int go, int result) {
  int64_t start = 0;
  if (::read(go, &start, sizeof start) != sizeof start) ::_exit(1);  // the parent gave up
  const Clock::time_point t0{Clock::duration{start}};
  Totals t = abuse(a, slow, t0);
  const std::size_t m = t.close_ms.size();
  (void)!::write(result, &t.n, sizeof t.n);
  (void)!::write(result, &m, sizeof m);
  (void)!::write(result, t.close_ms.data(), m * sizeof(double));
  (void)!::write(result, t.close_at.data(), m * sizeof(double));
  ::_exit(0);
}

Split fork_shares(const Args& a, bool slow, int per_process) {
  Split s;
  const int parts = (a.conns + per_process - 1) / per_process;
  s.share = (a.conns + parts - 1) / parts;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int i = 0; i + 1 < parts; ++i) {
    int go[2], result[2];
    if (::pipe2(go, O_CLOEXEC) != 0) break;
    if (::pipe2(result, O_CLOEXEC) != 0) {
      ::close(go[0]), ::close(go[1]);
      break;
    }
    Args mine = a;
    mine.conns = s.share;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      ::close(result[0]);
      for (const auto& k : s.kids) ::close(k.go), ::close(k.result);
      child_run(mine, slow, go[0], result[1]);
    }
    ::close(go[0]);
    ::close(result[1]);
    if (pid < 0) {
      ::close(go[1]), ::close(result[0]);
      break;
    }
    s.kids.push_back({pid, go[1], result[0]});
  }
  s.parent_conns = a.conns - s.share * static_cast<int>(s.kids.size());
  return s;
}

// Starts the children at t0 (they measure from it as the parent does).
void start_shares(const Split& s, Clock::time_point t0) {
  const int64_t start = t0.time_since_epoch().count();  // steady_clock is one clock system-wide
  for (const auto& k : s.kids) (void)!::write(k.go, &start, sizeof start);
}

// Collects the children's Totals into t; children never started (started = false) just exit.
void join_shares(Split& s, bool started, Totals& t) {
  for (auto& k : s.kids) ::close(k.go);
  for (auto& k : s.kids) {
    FILE* f = ::fdopen(k.result, "r");
    Counts c;
    std::size_t m = 0;
    if (started && std::fread(&c, sizeof c, 1, f) == 1 && std::fread(&m, sizeof m, 1, f) == 1 && m <= 1u << 24) {
      std::vector<double> ms(m), at(m);
      if (std::fread(ms.data(), sizeof(double), m, f) == m && std::fread(at.data(), sizeof(double), m, f) == m) {
        t.close_ms.insert(t.close_ms.end(), ms.begin(), ms.end());
        t.close_at.insert(t.close_at.end(), at.begin(), at.end());
      }
      t.n.connected += c.connected, t.n.refused += c.refused, t.n.closed += c.closed;
      t.n.answered += c.answered, t.n.reset += c.reset, t.n.held += c.held, t.n.client_errors += c.client_errors;
      t.n.last_connect_ms = std::max(t.n.last_connect_ms, c.last_connect_ms);
      t.n.last_close_ms = std::max(t.n.last_close_ms, c.last_close_ms);
    } else if (started) {
      t.n.client_errors += s.share;  // a child that reported nothing: its share was not measured
    }
    std::fclose(f);
    ::waitpid(k.pid, nullptr, 0);
  }
}

bool parse(int argc, char** argv, Args& a) {
  if (argc < 4) return false;
  a.mode = argv[1];
  a.host = argv[2];
  a.port = std::atoi(argv[3]);
  const bool flood = a.mode == "flood";
  if (!flood && a.mode != "slowloris") return false;
  a.conns = flood ? 20000 : 2000;
  a.secs = flood ? 8 : 15;
  for (int i = 4; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--conns") a.conns = std::atoi(v);
    else if (k == "--limit") a.limit = std::atoi(v);
    else if (k == "--secs") a.secs = std::atof(v);
    else if (k == "--interval-ms") a.interval_ms = std::atoi(v);
    else if (k == "--timeout-ms") a.timeout_ms = std::atoi(v);
    else if (k == "--path") a.path = v;
    else return false;
  }
  if ((argc - 4) % 2 != 0) return false;
  a.secs = std::min(a.secs, 60.0);
  // Loopback only: this program is a denial-of-service tool.
  return a.host == "127.0.0.1" && a.port > 0 && a.port < 65536 && a.conns > 0 && a.conns <= 1000000 &&
         a.interval_ms > 0 && a.secs > 0 && !a.path.empty() && a.path[0] == '/';
}

int judge(const Args& a, bool slow, const Totals& t, const Probe& keep, const Probe& fresh) {
  int errors = keep.failures() + t.n.client_errors;
  if (keep.lat_ms.size() < 10 || percentile(keep.lat_ms, 0.99) >= 100) {
    ++errors;
    std::fprintf(stderr, "abuse_client: keep-alive probe: %zu answers, p99 %.1f ms (needs >= 10, < 100 ms)\n",
                 keep.lat_ms.size(), percentile(keep.lat_ms, 0.99));
  }
  if (t.n.client_errors)
    std::fprintf(stderr, "abuse_client: %d sockets could not be created here\n", t.n.client_errors);
  const int fast =
      static_cast<int>(std::count_if(t.close_ms.begin(), t.close_ms.end(), [](double d) { return d < 1000; }));
  if (!slow) {
    const int excess = a.conns - a.limit;
    if (t.n.held > a.limit)
      ++errors, std::fprintf(stderr, "abuse_client: %d connections held, limit %d\n", t.n.held, a.limit);
    // The excess must be closed at accept, long before any timeout could close the others.
    if (excess > 0 && fast + t.n.refused < excess) {
      ++errors;
      std::fprintf(stderr, "abuse_client: only %d of the %d excess connections were closed within 1 s\n",
                   fast + t.n.refused, excess);
    }
    // Once the flood is over the server must take new connections again.
    if (int f = fresh.tail_failures(10); f > 0 || fresh.outcome.size() < 10) {
      errors += std::max(f, 1);
      std::fprintf(stderr, "abuse_client: %d of the last 10 fresh-connection probes failed after the flood\n", f);
    }
  } else {
    const double lo = 0.9 * a.timeout_ms, hi = a.timeout_ms + 2000.0;
    const int outside = static_cast<int>(
        std::count_if(t.close_ms.begin(), t.close_ms.end(), [&](double d) { return d < lo || d > hi; }));
    const int missing = t.n.connected - t.n.closed;  // never cut off within --secs
    if (missing + outside > 0) {
      errors += missing + outside;
      std::fprintf(stderr, "abuse_client: %d slow clients never cut off, %d cut off outside [%.0f, %.0f] ms\n", missing,
                   outside, lo, hi);
    }
    if (fresh.failures() > 0 || fresh.lat_ms.size() < 10 || percentile(fresh.lat_ms, 0.99) >= 100) {
      errors += std::max(fresh.failures(), 1);
      std::fprintf(stderr, "abuse_client: fresh-connection probe: %d failed, p99 %.1f ms\n", fresh.failures(),
                   percentile(fresh.lat_ms, 0.99));
    }
  }
  return errors;
}

// The time (from t0) at which the k-th connection had been closed, or -1.
double kth_close_at(std::vector<double> at, int k) {
  if (k <= 0 || static_cast<std::size_t>(k) > at.size()) return -1;
  std::nth_element(at.begin(), at.begin() + (k - 1), at.end());
  return at[static_cast<std::size_t>(k - 1)];
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: abuse_client flood 127.0.0.1 PORT [--conns N] [--limit N] [--secs S] [--path P]\n"
                 "       abuse_client slowloris 127.0.0.1 PORT [--conns N] [--interval-ms MS] [--timeout-ms MS] "
                 "[--secs S] [--path P]\n"
                 "Only 127.0.0.1 is accepted.\n");
    return 2;
  }
  // As many fds as allowed; beyond the hard limit the connections are spread over processes.
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  const int per_process = static_cast<int>(std::min<rlim_t>(r.rlim_cur, 1 << 20)) - 64;
  const bool slow = a.mode == "slowloris";
  Split split;
  if (a.conns > per_process) split = fork_shares(a, slow, per_process);
  Args mine = a;
  if (!split.kids.empty()) mine.conns = split.parent_conns;
  Probe keep, fresh;
  if (!keep.start(a, false)) {
    std::fprintf(stderr, "abuse_client: the probe cannot connect to %s:%d\n", a.host.c_str(), a.port);
    Totals none;
    join_shares(split, false, none);
    std::printf("RESULT mode=%s errors=1\n", a.mode.c_str());
    return 1;
  }
  fresh.start(a, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // probe figures from before the abuse
  const auto t0 = Clock::now();
  start_shares(split, t0);
  Totals t = abuse(mine, slow, t0);
  join_shares(split, true, t);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // fresh probes after the abuse
  keep.finish();
  fresh.finish();

  const int errors = judge(a, slow, t, keep, fresh);
  const Counts& n = t.n;
  const int fast =
      static_cast<int>(std::count_if(t.close_ms.begin(), t.close_ms.end(), [](double d) { return d < 1000; }));
  const double excess_at = kth_close_at(t.close_at, a.conns - a.limit);
  const double cmax = t.close_ms.empty() ? 0 : *std::max_element(t.close_ms.begin(), t.close_ms.end());
  // Fresh-probe failure times, from the abuse's t0 (the probe started 200 ms earlier).
  const double shift = ms_since(fresh.t0, t0);
  const double ff = fresh.fail_at.empty() ? -1 : fresh.fail_at.front() - shift;
  const double fl = fresh.fail_at.empty() ? -1 : fresh.fail_at.back() - shift;
  std::printf(
      "%s: %d conns: %d connected, %d refused, %d closed by the server (%d after an answer, %d reset; last at %.0f ms, "
      "last connect at %.0f ms), %d held; %d closed within 1 s of connect, the %d excess closed by %.0f ms; close "
      "after "
      "connect min %.0f p50 %.0f max %.0f ms\n",
      a.mode.c_str(), a.conns, n.connected, n.refused, n.closed, n.answered, n.reset, n.last_close_ms,
      n.last_connect_ms, n.held, fast, std::max(0, a.conns - a.limit), excess_at, percentile(t.close_ms, 0),
      percentile(t.close_ms, 0.5), cmax);
  std::printf(
      "probes: keep-alive %zu ok, p50 %.2f p99 %.2f max %.2f ms, %d failed; fresh connections %zu ok (p99 %.2f ms), %d "
      "failed (from %.0f to %.0f ms)\n",
      keep.lat_ms.size(), percentile(keep.lat_ms, 0.5), percentile(keep.lat_ms, 0.99), percentile(keep.lat_ms, 1.0),
      keep.failures(), fresh.lat_ms.size(), percentile(fresh.lat_ms, 0.99), fresh.failures(), ff, fl);
  std::printf("slowest keep-alive answers (ms, sent at ms from the abuse's start):");
  for (auto [lat, at] : keep.slowest) std::printf(" %.1f@%.0f", lat, at - ms_since(keep.t0, t0));
  std::printf("\n");
  std::printf(
      "RESULT mode=%s conns=%d connected=%d refused=%d closed_by_server=%d answered=%d reset=%d held=%d "
      "closed_within_1s=%d excess_closed_ms=%.0f close_ms_min=%.0f close_ms_p50=%.0f close_ms_max=%.0f "
      "probe_requests=%zu probe_p50_ms=%.2f probe_p99_ms=%.2f probe_max_ms=%.2f probe_errors=%d fresh_ok=%zu "
      "fresh_failed=%d fresh_fail_first_ms=%.0f fresh_fail_last_ms=%.0f fresh_p99_ms=%.2f client_errors=%d errors=%d\n",
      a.mode.c_str(), a.conns, n.connected, n.refused, n.closed, n.answered, n.reset, n.held, fast, excess_at,
      percentile(t.close_ms, 0), percentile(t.close_ms, 0.5), cmax, keep.lat_ms.size() + keep.fail_at.size(),
      percentile(keep.lat_ms, 0.5), percentile(keep.lat_ms, 0.99), percentile(keep.lat_ms, 1.0), keep.failures(),
      fresh.lat_ms.size(), fresh.failures(), ff, fl, percentile(fresh.lat_ms, 0.99), n.client_errors, errors);
  return errors ? 1 : 0;
}
