// Shared helpers of the ssl/ tests: certificates generated once per test binary (by
// scripts/make-test-cert.sh into a temp dir), a Scheduler + IOManager, contexts, and a TLS
// echo service on a TcpServer (127.0.0.1, ephemeral port).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "lionet/io/io_manager.h"
#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/ssl/ssl_stream.h"

namespace lionet::test {
using namespace std::chrono_literals;

#if defined(LIONET_TSAN) || defined(LIONET_ASAN)
inline constexpr int kScale = 10;  // sanitizers run 5-20x slower: counts divided by this
#else
inline constexpr int kScale = 1;
#endif

struct CertFiles {
  std::string cert, key;
};

// Temp dir with two certificates: "localhost" (the default) and "other.test" (for SNI).
class Certs {
 public:
  static const Certs& get() {
    static Certs c;
    return c;
  }
  CertFiles localhost, other;
  std::string dir;

 private:
  Certs() {
    char tmpl[] = "/tmp/lionet-ssl-test.XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (!d) throw std::runtime_error("mkdtemp failed");
    dir = d;
    localhost = make(dir + "/localhost", "localhost");
    other = make(dir + "/other", "other.test");
  }
  ~Certs() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  static CertFiles make(const std::string& out, const std::string& name) {
    std::string cmd = std::string(LIONET_SOURCE_DIR) + "/scripts/make-test-cert.sh " + out + " " + name + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make-test-cert.sh failed: " + cmd);
    return {out + "/cert.pem", out + "/key.pem"};
  }
};

inline SslOptions server_options() {
  SslOptions o;
  o.certificates = {{Certs::get().localhost.cert, Certs::get().localhost.key}};
  return o;
}

inline SslOptions client_options(const std::string& max_version = "") {
  SslOptions o;
  o.ca_file = Certs::get().localhost.cert;  // verify the self-signed server
  o.server_name = "localhost";
  o.max_version = max_version;
  return o;
}

// A Scheduler with an IOManager attached; stops the scheduler before detaching the manager.
class Runtime {
 public:
  explicit Runtime(int threads = 2) : sched_({.threads = threads}), io_(sched_) {}
  ~Runtime() { sched_.stop(); }
  Scheduler& sched() { return sched_; }
  IOManager& io() { return io_; }
  template <class F>
  auto run(F&& body) {
    return sched_.spawn(std::forward<F>(body)).join();
  }

 private:
  Scheduler sched_;
  IOManager io_;
};

// Echo over TLS: handshake, then write back whatever is read, until end of stream or error.
inline void tls_echo(SslStream& tls) {
  if (!tls.handshake()) return;
  std::unique_ptr<char[]> buf(new char[64 * 1024]);
  for (;;) {
    auto r = tls.read(buf.get(), 64 * 1024);
    if (!r || *r == 0) return;
    if (!tls.write(buf.get(), *r)) return;
  }
}

inline std::unique_ptr<TcpServer> start_tls_echo(IOManager& io, std::shared_ptr<SslContext> ctx) {
  auto server = std::make_unique<TcpServer>(io, [ctx](SocketStream& s) {
    SslStream tls(ctx, s.socket());
    tls_echo(tls);
  });
  server->listen(Address::ipv4_loopback(0));
  server->start();
  return server;
}

inline std::string pattern(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed + i / 251) % 26);
  return s;
}

// One write + read-back of msg over tls; true if the echo matched.
inline bool echo_once(SslStream& tls, const std::string& msg) {
  if (!tls.write(msg.data(), msg.size())) return false;
  std::string got(msg.size(), '\0');
  auto r = tls.read_full(got.data(), got.size());
  return r && *r == msg.size() && got == msg;
}
}  // namespace lionet::test
