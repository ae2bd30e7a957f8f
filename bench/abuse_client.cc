// bench/abuse_client.cc: abuse an HTTP server on 127.0.0.1 while a probe checks that it keeps
// serving everyone else (issue 10). Plain epoll, no LioNet: the client must not share the
// server's runtime or its bugs.
//
//   abuse_client flood HOST PORT [--conns 20000] [--limit 10000] [--secs 8]
//     Opens --conns connections as fast as the kernel lets it and sends nothing. Counts
//     connections the server closed (EOF or reset) and when; those still open at the end are
//     "held". Passes if held <= limit, at least the excess (conns - limit) were closed within
//     1 s of their connect (at accept, not by a timeout), and the probe stayed healthy. Beyond
//     the RLIMIT_NOFILE hard limit the connections are spread over forked processes.
//   abuse_client slowloris HOST PORT [--conns 2000] [--interval-ms 5000] [--timeout-ms 3000] [--secs 15]
//     Each connection sends one byte of a request head every --interval-ms. Passes if every
//     one is closed by the server within timeout + 2 s of its first byte, and the probe stayed
//     healthy.
//   The probe: one keep-alive connection opened BEFORE the abuse starts (a new connection could
//   be refused by a full server, which is the point of the limit), sending `GET /healthz`
//   every 10 ms and timing each answer; healthy = no error and p99 < 100 ms.
// Every loop is bounded by --secs (and 60 s at most). The last line is
//   RESULT mode=.. conns=N connected=N refused=N closed_by_server=N held=N close_ms_min=..
//          close_ms_p50=.. close_ms_max=.. probe_requests=N probe_p50_ms=.. probe_p99_ms=..
//          probe_errors=N errors=N
// and the exit status is 1 when errors > 0.
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
#include <chrono>
#include <cerrno>
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
  std::string mode, host = "127.0.0.1";
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

// ------------------------------------------------------------------------------ probe
struct Probe {
  std::atomic<bool> stop{false};
  std::vector<double> lat_ms;
  int errors = 0;
  std::thread th;

  bool start(const Args& a) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in s = target(a);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{2, 0};  // an answer slower than 2 s is an error
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&s), sizeof s) != 0) return false;
    th = std::thread([this, fd] { run(fd); });
    return true;
  }
  void run(int fd) {
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n";
    std::string buf;
    for (int i = 0; i < 100000 && !stop.load(); ++i) {
      const auto t0 = Clock::now();
      bool ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
      buf.clear();
      while (ok) {  // read one whole response: head + Content-Length body
        char tmp[4096];
        ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) {
          ok = false;
          break;
        }
        buf.append(tmp, static_cast<std::size_t>(n));
        auto he = buf.find("\r\n\r\n");
        if (he == std::string::npos) continue;
        auto cl = buf.find("Content-Length: ");
        std::size_t len = cl == std::string::npos ? 0 : std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
        if (buf.size() >= he + 4 + len) {
          ok = buf.compare(0, 12, "HTTP/1.1 200") == 0;
          break;
        }
      }
      if (!ok) {
        ++errors;
        std::fprintf(stderr, "abuse_client: probe request %d failed\n", i);
        break;  // the connection is unusable; reopening could be refused by a full server
      }
      lat_ms.push_back(ms_since(t0));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::close(fd);
  }
  void finish() {
    stop = true;
    if (th.joinable()) th.join();
  }
};

// ------------------------------------------------------------------------------ abuse
struct Conn {
  int fd = -1;
  bool connected = false, closed = false;
  Clock::time_point opened, first_byte;
  double close_ms = -1;  // from opened (flood) or first byte (slowloris)
  std::size_t sent = 0;
};

struct Totals {
  int connected = 0, refused = 0, closed = 0, held = 0;
  std::vector<double> close_ms;
  double last_connect_ms = 0, last_close_ms = 0;
};

Totals abuse(const Args& a, bool slow) {
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: " + std::string(64, 'x') + "\r\n\r\n";
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(static_cast<int64_t>(a.secs * 1000));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(static_cast<std::size_t>(a.conns));
  sockaddr_in s = target(a);
  Totals t;
  int opened = 0;
  auto send_byte = [&](Conn& c) {
    if (c.sent >= head.size()) return;
    if (::send(c.fd, head.data() + c.sent, 1, MSG_NOSIGNAL) == 1) {
      if (c.sent == 0) c.first_byte = Clock::now();
      ++c.sent;
    }
  };
  Clock::time_point next_tick = Clock::now();
  epoll_event evs[512];
  while (Clock::now() < deadline) {
    // Open connections in bursts of 256 per loop while any are left (as fast as possible).
    for (int k = 0; k < 256 && opened < a.conns; ++k, ++opened) {
      Conn& c = conns[static_cast<std::size_t>(opened)];
      c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c.fd < 0) {
        ++t.refused;
        c.closed = true;
        continue;
      }
      c.opened = Clock::now();
      int r = ::connect(c.fd, reinterpret_cast<sockaddr*>(&s), sizeof s);
      if (r != 0 && errno != EINPROGRESS) {
        ++t.refused;
        ::close(c.fd);
        c.closed = true;
        continue;
      }
      epoll_event e{};
      e.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
      e.data.u32 = static_cast<uint32_t>(opened);
      ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &e);
    }
    const int n = ::epoll_wait(ep, evs, 512, 20);
    for (int i = 0; i < n; ++i) {
      Conn& c = conns[evs[i].data.u32];
      if (c.closed) continue;
      if (!c.connected && (evs[i].events & EPOLLOUT)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
          ++t.refused;
          c.closed = true;
          ::close(c.fd);
          continue;
        }
        c.connected = true;
        ++t.connected;
        t.last_connect_ms = ms_since(t0);
        epoll_event e{};
        e.events = EPOLLIN | EPOLLRDHUP;
        e.data.u32 = evs[i].data.u32;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &e);
        if (slow) send_byte(c);
      }
      if (c.connected && (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        char buf[4096];
        ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
        if (r > 0 && !(evs[i].events & (EPOLLRDHUP | EPOLLHUP))) continue;  // e.g. a 408 before the FIN
        c.closed = true;
        ++t.closed;
        const auto now = Clock::now();
        c.close_ms = ms_since(slow && c.sent ? c.first_byte : c.opened, now);
        t.close_ms.push_back(c.close_ms);
        t.last_close_ms = ms_since(t0, now);
        ::close(c.fd);
      }
    }
    if (slow && Clock::now() >= next_tick) {  // one more byte on every open connection
      next_tick = Clock::now() + std::chrono::milliseconds(a.interval_ms);
      for (auto& c : conns)
        if (c.connected && !c.closed && c.sent > 0) send_byte(c);
    }
    if (slow && opened == a.conns && t.closed + t.refused == a.conns) break;  // all cut off
  }
  for (auto& c : conns) {
    if (c.connected && !c.closed) {
      ++t.held;
      ::close(c.fd);
    }
  }
  ::close(ep);
  return t;
}

// Runs abuse() over several processes when one cannot hold every fd (RLIMIT_NOFILE's hard
// limit): each child takes a share and sends its Totals back through a pipe. All start at once.
Totals abuse_split(Args a, bool slow, int per_process) {
  const int parts = (a.conns + per_process - 1) / per_process;
  const int total = a.conns;
  std::vector<std::pair<pid_t, int>> kids;
  for (int i = 0; i + 1 < parts; ++i) {
    int fds[2];
    if (::pipe(fds) != 0) break;
    Args share = a;
    share.conns = per_process;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      Totals t = abuse(share, slow);
      const int head[5] = {t.connected, t.refused, t.closed, t.held, static_cast<int>(t.close_ms.size())};
      const double times[2] = {t.last_connect_ms, t.last_close_ms};
      (void)!::write(fds[1], head, sizeof head);
      (void)!::write(fds[1], times, sizeof times);
      for (double d : t.close_ms) (void)!::write(fds[1], &d, sizeof d);
      ::_exit(0);
    }
    ::close(fds[1]);
    kids.emplace_back(pid, fds[0]);
  }
  a.conns = total - per_process * static_cast<int>(kids.size());
  Totals t = abuse(a, slow);
  for (auto [pid, fd] : kids) {
    FILE* f = ::fdopen(fd, "r");
    int head[5] = {};
    double times[2] = {};
    if (std::fread(head, sizeof head, 1, f) == 1 && std::fread(times, sizeof times, 1, f) == 1) {
      t.connected += head[0], t.refused += head[1], t.closed += head[2], t.held += head[3];
      t.last_connect_ms = std::max(t.last_connect_ms, times[0]);
      t.last_close_ms = std::max(t.last_close_ms, times[1]);
      for (int i = 0; i < head[4]; ++i) {
        double d;
        if (std::fread(&d, sizeof d, 1, f) == 1) t.close_ms.push_back(d);
      }
    } else {
      t.refused += per_process;  // a child that reported nothing counts as failed connections
    }
    std::fclose(f);
    ::waitpid(pid, nullptr, 0);
  }
  return t;
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
    else return false;
  }
  a.secs = std::min(a.secs, 60.0);
  return a.port > 0 && a.conns > 0 && (a.host == "127.0.0.1" || a.host.rfind("127.", 0) == 0);
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: abuse_client flood HOST PORT [--conns N] [--limit N] [--secs S]\n"
                 "       abuse_client slowloris HOST PORT [--conns N] [--interval-ms MS] [--timeout-ms MS] [--secs S]\n"
                 "HOST must be a 127.x.x.x address.\n");
    return 2;
  }
  // As many fds as allowed; beyond the hard limit the connections are spread over processes.
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  const int per_process = static_cast<int>(std::min<rlim_t>(r.rlim_cur, 1 << 20)) - 64;
  Probe probe;
  if (!probe.start(a)) {
    std::fprintf(stderr, "abuse_client: the probe cannot connect to %s:%d\n", a.host.c_str(), a.port);
    std::printf("RESULT mode=%s errors=1\n", a.mode.c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const bool slow = a.mode == "slowloris";
  std::fflush(stdout);
  Totals t = a.conns <= per_process ? abuse(a, slow) : abuse_split(a, slow, per_process);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  probe.finish();

  int errors = probe.errors;
  const double p99 = percentile(probe.lat_ms, 0.99);
  if (probe.lat_ms.size() < 10 || p99 >= 100) ++errors;
  const int fast = static_cast<int>(std::count_if(t.close_ms.begin(), t.close_ms.end(), [](double d) { return d < 1000; }));
  const double cmax = t.close_ms.empty() ? 0 : *std::max_element(t.close_ms.begin(), t.close_ms.end());
  if (!slow) {
    const int excess = a.conns - a.limit;
    if (t.held > a.limit) ++errors, std::fprintf(stderr, "abuse_client: %d connections held, limit %d\n", t.held, a.limit);
    // The excess must be closed at accept, long before any timeout could close the others.
    if (excess > 0 && fast + t.refused < excess) {
      ++errors;
      std::fprintf(stderr, "abuse_client: only %d of the %d excess connections were closed within 1 s\n",
                   fast + t.refused, excess);
    }
  } else {
    if (t.held > 0 || t.closed < t.connected) ++errors, std::fprintf(stderr, "abuse_client: %d slow clients never cut off\n", t.held);
    if (cmax > a.timeout_ms + 2000) ++errors, std::fprintf(stderr, "abuse_client: a slow client lasted %.0f ms\n", cmax);
  }
  std::printf(
      "%s: %d conns, %d connected, %d refused, %d closed by the server (last at %.0f ms; last connect at %.0f ms), "
      "%d held, %d closed within 1 s; close after %s: min %.0f p50 %.0f max %.0f ms; probe %zu requests, p50 %.2f ms, p99 %.2f ms, "
      "%d errors\n",
      a.mode.c_str(), a.conns, t.connected, t.refused, t.closed, t.last_close_ms, t.last_connect_ms, t.held, fast,
      slow ? "first byte" : "connect", percentile(t.close_ms, 0), percentile(t.close_ms, 0.5), cmax,
      probe.lat_ms.size(), percentile(probe.lat_ms, 0.5), p99, probe.errors);
  std::printf(
      "RESULT mode=%s conns=%d connected=%d refused=%d closed_by_server=%d closed_within_1s=%d held=%d close_ms_min=%.0f "
      "close_ms_p50=%.0f close_ms_max=%.0f probe_requests=%zu probe_p50_ms=%.2f probe_p99_ms=%.2f probe_errors=%d "
      "errors=%d\n",
      a.mode.c_str(), a.conns, t.connected, t.refused, t.closed, fast, t.held, percentile(t.close_ms, 0),
      percentile(t.close_ms, 0.5), cmax, probe.lat_ms.size(), percentile(probe.lat_ms, 0.5), p99, probe.errors, errors);
  return errors ? 1 : 0;
}
