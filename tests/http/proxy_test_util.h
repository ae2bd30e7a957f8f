// Shared harness of the proxy tests (proxy_test.cc, proxy_fault_test.cc): one scheduler for a
// test's every server on 127.0.0.1 ephemeral ports: LioNet http::Server upstreams with a
// handler the test writes, raw TCP upstreams (a function per accepted connection, for
// upstreams that misbehave), and the front: an http::Server whose handler is a Proxy.
// Requests are counted on the upstream side (what reached it), connections by the upstream's
// accept count.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "http_test_util.h"
#include "lionet/http/headers.h"
#include "lionet/http/proxy.h"
#include "lionet/http/server.h"
#include "lionet/io/io_manager.h"
#include "lionet/net/socket.h"
#include "lionet/net/socket_stream.h"
#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"

namespace lionet::http::test {

inline std::string loopback(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// Options proxying to these upstreams (weight 1 each), the rest as default.
inline ProxyOptions to(std::initializer_list<std::string> addresses) {
  ProxyOptions o;
  for (const auto& a : addresses) o.upstreams.push_back({a});
  return o;
}

// A port on 127.0.0.1 nothing listens on (bound, then closed): connecting is refused.
inline uint16_t closed_port() {
  Socket s = Socket::listen_on(Address::ipv4_loopback(0));
  uint16_t p = s.local_address().value().port();
  s.close();
  return p;
}

// Reads from s until a head ("\r\n\r\n") is in buf; false at end of stream or error. The head
// is buf[0, *head_end) and what followed it stays in buf.
inline bool read_head(Stream& s, std::string& buf, size_t* head_end = nullptr) {
  char tmp[4096];
  for (;;) {
    if (size_t p = buf.find("\r\n\r\n"); p != std::string::npos) {
      if (head_end) *head_end = p + 4;
      return true;
    }
    auto r = s.read(tmp, sizeof tmp);
    if (!r || *r == 0) return false;
    buf.append(tmp, *r);
  }
}

// The values of every line "name: value" of text (case-insensitive name), in order.
inline std::vector<std::string> field_values(std::string_view text, std::string_view name) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty()) break;  // the end of a head
    size_t colon = line.find(':');
    if (colon != std::string_view::npos && iequals(line.substr(0, colon), name)) {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      out.emplace_back(v);
    }
    pos = eol + 1;
  }
  return out;
}

// An upstream's answer naming everything it received: "METHOD target\n", one "name: value\n"
// per field as received, "\n", then the body. Headers X-Upstream (its name) and X-Chunked
// (whether the body came chunked).
inline Handler mirror(std::string name) {
  return [name = std::move(name)](Request& q, Response& s) {
    std::string body;
    if (!q.read_body(body)) return;
    std::string out(q.method());
    out.append(" ").append(q.target()).append("\n");
    for (const auto& f : q.headers()) out.append(f.name).append(": ").append(f.value).append("\n");
    out.append("\n").append(body);
    s.set_header("X-Upstream", name);
    s.set_header("X-Chunked", q.chunked() ? "1" : "0");
    s.reply(200, out, "text/plain");
  };
}

class ProxyHarness {
 public:
  struct HttpUpstream {
    std::string name;
    std::unique_ptr<Server> server;
    std::atomic<int> requests{0};  // heads that reached the handler
    uint16_t port = 0;
    std::string address() const { return loopback(port); }
    uint64_t connections() const { return server->tcp().accepted(); }
  };
  struct RawUpstream;
  using RawFn = std::function<void(SocketStream&, RawUpstream&)>;
  struct RawUpstream {
    std::unique_ptr<TcpServer> server;
    std::atomic<int> requests{0};  // counted by the RawFn
    uint16_t port = 0;
    std::string address() const { return loopback(port); }
    uint64_t connections() const { return server->accepted(); }
  };

  explicit ProxyHarness(int threads = 2) : sched_({.threads = threads, .name = "proxyt"}), io_(sched_) {}
  ~ProxyHarness() { shutdown(); }
  ProxyHarness(const ProxyHarness&) = delete;
  ProxyHarness& operator=(const ProxyHarness&) = delete;

  // A LioNet HTTP upstream serving h (each request counted first).
  HttpUpstream& http_upstream(std::string name, Handler h, ServerOptions o = {}) {
    auto u = std::make_unique<HttpUpstream>();
    u->name = std::move(name);
    HttpUpstream* raw = u.get();
    u->server = std::make_unique<Server>(
        io_,
        [raw, h = std::move(h)](Request& q, Response& s) {
          raw->requests.fetch_add(1);
          h(q, s);
        },
        std::move(o));
    u->server->listen(Address::ipv4_loopback(0));
    u->server->start();
    u->port = u->server->addresses()[0].port();
    http_.push_back(std::move(u));
    return *raw;
  }
  HttpUpstream& mirror_upstream(std::string name, ServerOptions o = {}) {
    return http_upstream(name, mirror(name), std::move(o));
  }

  // A raw TCP upstream: fn serves each accepted connection.
  RawUpstream& raw_upstream(RawFn fn) {
    auto u = std::make_unique<RawUpstream>();
    RawUpstream* raw = u.get();
    u->server = std::make_unique<TcpServer>(io_, [raw, fn = std::move(fn)](SocketStream& s) { fn(s, *raw); });
    u->server->listen(Address::ipv4_loopback(0));
    u->server->start();
    u->port = u->server->addresses()[0].port();
    raw_.push_back(std::move(u));
    return *raw;
  }

  // The front server with a Proxy of o as its only handler (every path goes to the proxy).
  Proxy& front(ProxyOptions o, ServerOptions so = {}) {
    proxy_ = std::make_unique<Proxy>(std::move(o));
    front_ = std::make_unique<Server>(io_, proxy_->handler(), std::move(so));
    front_->listen(Address::ipv4_loopback(0));
    front_->start();
    return *proxy_;
  }
  uint16_t port() const { return front_->addresses()[0].port(); }
  std::string url(std::string_view path) const { return "http://" + loopback(port()) + std::string(path); }
  Proxy& proxy() { return *proxy_; }
  Server& front_server() { return *front_; }
  Scheduler& sched() { return sched_; }
  template <class F>
  auto run(F&& f) {
    return sched_.spawn(std::forward<F>(f)).join();
  }

  // Front first (its connections use the proxy), then the proxy, the upstreams, the scheduler.
  void shutdown() {
    if (front_) front_->stop(1s);
    if (proxy_) proxy_->stop();
    for (auto& u : http_) u->server->stop(1s);
    for (auto& u : raw_) u->server->stop(1s);
    front_.reset();
    proxy_.reset();
    http_.clear();
    raw_.clear();
    sched_.stop();
  }

 private:
  Scheduler sched_;
  IOManager io_;
  std::vector<std::unique_ptr<HttpUpstream>> http_;
  std::vector<std::unique_ptr<RawUpstream>> raw_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<Server> front_;
};

// Waits (polling every 5 ms) until pred() holds or limit passes; returns pred().
template <class P>
bool eventually(P pred, Duration limit = std::chrono::seconds(3)) {
  const TimePoint end = now() + limit;
  while (!pred() && now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return pred();
}

inline double ms_since(TimePoint t0) { return std::chrono::duration<double, std::milli>(now() - t0).count(); }
}  // namespace lionet::http::test
