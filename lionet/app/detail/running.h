// lionet/app/detail/running.h: the objects behind lionet::app::Runtime, shared by runtime.cc
// (build, start, stop) and routes.cc (routes, instrumentation, /metrics).
//
// Owns: Pool, ServerMetrics, Running, Runtime::Impl (which owns the access logs, one per file).
// Must not be included outside app/.
// Member order matters: each struct's members are destroyed bottom-up, so a server goes before
// the router its handler points into, and servers before the store and pools they use.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lionet/app/auth_route.h"
#include "lionet/app/runtime.h"
#include "lionet/app/storage_api.h"
#include "lionet/base/metrics.h"
#include "lionet/http/access_log.h"
#include "lionet/http/proxy.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http2/server.h"
#include "lionet/io/io_manager.h"
#include "lionet/kafka/server.h"
#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"
#include "lionet/storage/store.h"
#include "lionet/syslog/server.h"

namespace lionet {
class SslContext;
}

namespace lionet::app {

// A named worker pool of `workers:` ("main" = scheduler.*).
struct Pool {
  std::string name;
  std::unique_ptr<Scheduler> sched;  // with its own IO driver (SchedulerOptions::io)
  const char* backend() const {
    const IOManager* io = IOManager::of(*sched);
    return io ? io->backend() : "none";
  }
};

// Per-server counters for /metrics (relaxed: statistics only, see base/metrics.h).
struct ServerMetrics {
  Counter status[5];  // responses by class 1xx..5xx, as the handlers set them
  Histogram latency;  // handler time: head parsed -> handler returned (body writers excluded)
  Counter bytes_in;  // bytes read from clients (TLS: plaintext)
  Counter bytes_out;  // bytes written to clients (TLS: plaintext)
};

// An https server's TLS context as it is now: swapped by Runtime::reload_tls (`watch: true`),
// read by each new connection's handshake.
struct TlsSlot {
  std::shared_ptr<SslContext> get() const {
    std::lock_guard<std::mutex> lk(mu);
    return ctx;
  }
  void set(std::shared_ptr<SslContext> c) {
    std::lock_guard<std::mutex> lk(mu);
    ctx = std::move(c);
  }
  mutable std::mutex mu;
  std::shared_ptr<SslContext> ctx;
};

struct Running {
  ServerConfig cfg;
  Pool* pool = nullptr;
  ServerMetrics m;
  http2::Stats h2;  // its HTTP/2 connections (http, https)
  bool started = false;
  std::unique_ptr<http::Router> router;  // http(s); the server below points into it
  std::unique_ptr<http::Server> http;  // http(s)
  std::unique_ptr<TcpServer> tcp;  // echo
  std::shared_ptr<TlsSlot> tls;  // https
  std::unique_ptr<syslog::Server> syslog;  // syslog (no listener() of its own)
  std::unique_ptr<kafka::Server> kafka;  // kafka
  // Its proxy routes (path -> proxy), for health checks and /metrics; the router's handlers
  // hold them too.
  std::vector<std::pair<std::string, std::shared_ptr<http::Proxy>>> proxies;
  // Its routes with `auth:` (reloads, /metrics); the router's handlers hold the authenticators too.
  std::vector<AuthRoute> auths;
  TcpServer& listener() const { return http ? http->tcp() : kafka ? kafka->tcp() : *tcp; }  // http(s), echo, kafka
  bool has_listener() const { return http || tcp || kafka; }
};

struct Runtime::Impl {
  explicit Impl(const AppConfig& c);
  ~Impl();
  Pool& pool(const std::string& name);  // creates it on first use
  void open_store();
  // The access log of c.access_log's file: made on first use, then shared by every server
  // naming that file (check_servers made sure they agree on its settings). Throws StartupError.
  std::shared_ptr<http::AccessLog> access_log(const ServerConfig& c);
  bool shutdown(std::chrono::milliseconds drain);

  const AppConfig& config;
  const std::chrono::steady_clock::time_point started_at;
  std::vector<std::unique_ptr<Pool>> pools;
  std::unique_ptr<storage::Store> store;
  StorageApiStats storage_stats;
  // access_log_key(path) -> the log; the servers hold it too, so it outlives them either way.
  // Filled by the constructor; cleared by shutdown() under access_logs_mu, which reopen (a
  // SIGHUP may come during a shutdown) and /metrics also take. Held for no IO.
  std::map<std::string, std::shared_ptr<http::AccessLog>> access_logs;
  mutable std::mutex access_logs_mu;
  // Every static route's files (shared with its handler), for `watch: true`'s invalidation.
  std::vector<Runtime::StaticRoute> static_routes;
  std::vector<std::unique_ptr<Running>> servers;  // last: destroyed first
  std::mutex stop_mu;
  bool stopped = false;  // under stop_mu

  // Memory trimmer (memory.trim_*): a plain thread, so that malloc_trim never holds a worker.
  void start_trimmer();
  void stop_trimmer();
  std::thread trimmer;
  std::mutex trim_mu;
  std::condition_variable trim_cv;
  bool trim_stop = false;  // under trim_mu
  std::atomic<uint64_t> trims{0};
};

// routes.cc
std::unique_ptr<http::Router> build_router(Runtime::Impl& im, Running& server);
// Counts responses by class and handler latency into m.
http::Handler instrument(http::Handler inner, ServerMetrics& m);
// Wraps every connection (in TLS first when tls is set) in a CountingStream over m.
http::StreamFactory counting_factory(std::shared_ptr<TlsSlot> tls, ServerMetrics& m);
std::string render_metrics(const Runtime::Impl& im);
}  // namespace lionet::app
