// Shared helpers of the http/ tests: a scheduler + IOManager, a Server on 127.0.0.1:0, a raw
// client socket (usable from the test's plain thread), and curl from the shell.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/io/io_manager.h"
#include "lionet/net/socket.h"
#include "lionet/sched/scheduler.h"

namespace lionet::http::test {
using namespace std::chrono_literals;

#if defined(LIONET_TSAN) || defined(LIONET_ASAN)
inline constexpr int kScale = 4;  // sanitizers: fewer iterations, wider time bounds
#else
inline constexpr int kScale = 1;
#endif

// A running server with its own scheduler (2 workers).
class TestServer {
 public:
  explicit TestServer(Handler h, ServerOptions o = {}, int threads = 2)
      : sched_({.threads = threads, .name = "httpt"}), io_(sched_), server_(io_, std::move(h), std::move(o)) {}
  ~TestServer() {
    server_.stop(1s);
    sched_.stop();
  }
  void start() {
    server_.listen(Address::ipv4_loopback(0));
    server_.start();
  }
  uint16_t port() const { return server_.addresses()[0].port(); }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port()) + path; }
  Server& server() { return server_; }
  Scheduler& sched() { return sched_; }
  // Runs f in a fiber of this scheduler and returns its result.
  template <class F>
  auto run(F&& f) {
    return sched_.spawn(std::forward<F>(f)).join();
  }

 private:
  Scheduler sched_;
  IOManager io_;
  Server server_;
};

// A raw client connection (plain-thread use: Socket falls back to poll).
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    sock_ = Socket::connect_to(Address::ipv4_loopback(port), Deadline::after(5s)).value();
  }
  bool send(std::string_view s) { return sock_.write(s.data(), s.size(), Deadline::after(5s)).ok(); }
  // Reads until `n` complete responses have been seen or the peer closes / `limit` passes.
  // Counting is by "HTTP/1.1 " at a response start; good for bodies without that text.
  std::string read_until_closed(Duration limit = 5s) {
    std::string out;
    char buf[4096];
    TimePoint end = now() + limit;
    for (;;) {
      if (now() >= end) break;
      auto r = sock_.read(buf, sizeof buf, Deadline::at(end));
      if (!r || *r == 0) break;
      out.append(buf, *r);
    }
    return out;
  }
  // Reads until the text contains `needle` `times` times (or closes / times out).
  std::string read_until(std::string_view needle, int times = 1, Duration limit = 5s) {
    std::string out;
    char buf[4096];
    TimePoint end = now() + limit;
    auto count = [&] {
      int c = 0;
      for (size_t p = out.find(needle); p != std::string::npos; p = out.find(needle, p + 1)) ++c;
      return c;
    };
    while (count() < times && now() < end) {
      auto r = sock_.read(buf, sizeof buf, Deadline::at(end));
      if (!r || *r == 0) break;
      out.append(buf, *r);
    }
    return out;
  }
  // True if the server closed the connection within limit (reads to end of stream).
  bool closed_within(Duration limit) {
    char buf[4096];
    TimePoint end = now() + limit;
    while (now() < end) {
      auto r = sock_.read(buf, sizeof buf, Deadline::at(end));
      if (!r) return r.error() != std::errc::timed_out;
      if (*r == 0) return true;
    }
    return false;
  }
  Socket& socket() { return sock_; }

 private:
  Socket sock_;
};

// Runs a shell command, returns its stdout and sets *status to its exit code.
inline std::string shell(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// Writes (replaces) a file with `data`.
inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}
// The whole content of a file ("" if it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A self-signed certificate for localhost / 127.0.0.1 (openssl), made once per test binary.
struct SelfSignedCert {
  std::string dir, cert, key;
  bool ok = false;
  SelfSignedCert() {
    char tmpl[] = "/tmp/lionet-cert-XXXXXX";
    dir = mkdtemp(tmpl);
    cert = dir + "/cert.pem";
    key = dir + "/key.pem";
    int st = -1;
    shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
              " -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null",
          &st);
    ok = st == 0;
  }
  ~SelfSignedCert() { shell("rm -rf " + dir); }
};
inline const SelfSignedCert& self_signed_cert() {
  static SelfSignedCert c;
  return c;
}

// n bytes of lowercase letters in a long cycle (a shifted body shows): test payloads.
inline std::string pattern(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed + i / 251) % 26);
  return s;
}

// A handler answering with the first `size` bytes of the file at `path` (Response::set_file:
// the sendfile path, or the TLS one); the fd is closed once the bytes are out.
inline Handler file_handler(std::string path, uint64_t size) {
  return [path = std::move(path), size](Request&, Response& s) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    auto keep = std::shared_ptr<int>(new int(fd), [](int* p) {
      ::close(*p);
      delete p;
    });
    s.set_file(fd, 0, size, keep);
  };
}

// Handlers in flight right now and the most seen at once. sleeper(d, body) is a handler that
// holds a slot for d (this_fiber::sleep_for), then answers 200 with body: requests that run
// concurrently show up as max > 1.
struct InFlight {
  std::atomic<int> now{0}, max{0};
  Handler sleeper(Duration d, std::string body) {
    return [this, d, body = std::move(body)](Request&, Response& s) {
      int in = ++now;
      int seen = max.load();
      while (in > seen && !max.compare_exchange_weak(seen, in)) {
      }
      this_fiber::sleep_for(d);
      --now;
      s.reply(200, body);
    };
  }
};

inline bool have_curl() {
  int st = -1;
  shell("curl --version >/dev/null 2>&1", &st);
  return st == 0;
}
}  // namespace lionet::http::test
