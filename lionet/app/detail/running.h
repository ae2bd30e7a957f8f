// lionet/app/detail/running.h: the objects behind lionet::app::Runtime, shared by runtime.cc
// (build, start, stop), routes.cc (routes), metrics.cc (instrumentation, /metrics) and
// debug_page.cc (the status page).
//
// Owns: Pool, ServerMetrics, Running, StatusHistory, Runtime::Impl (which owns the access logs,
// one per file).
// Must not be included outside app/.
// Member order matters: each struct's members are destroyed bottom-up, so a server goes before
// the router its handler points into, and servers before the store and pools they use.
#pragma once

#include <array>
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
#include "lionet/http/access.h"
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
  // Refusals of its address rules and rate limits (http, https), by route ("" = the server's
  // own lists; a named route without a path: "@name"), for /metrics. Filled before serving.
  struct Access {
    Counter denied;  // 403: address rules
    http::RateLimitCounters rate;  // rate_limit: refused (429), delayed
    bool has_rules = false, has_rate_limit = false;
  };
  std::map<std::string, std::unique_ptr<Access>> access;
  Access& access_of(const std::string& route) {
    auto& a = access[route];
    if (!a) a = std::make_unique<Access>();
    return *a;
  }
  // Its routes with `auth:` (reloads, /metrics); the router's handlers hold the authenticators too.
  std::vector<AuthRoute> auths;
  TcpServer& listener() const { return http ? http->tcp() : kafka ? kafka->tcp() : *tcp; }  // http(s), echo, kafka
  bool has_listener() const { return http || tcp || kafka; }
};

// What the `debug` route's page charts (app/debug_page.h): one sample per second of every
// server's request rate and latency percentiles, the last kSamples of them. A ring, so that
// memory is fixed whatever the uptime: kSamples = 300 is the 5 minutes the page draws, at
// 3 floats per server per sample (3.6 KB per server), and status.json carries all of it on each
// refresh (~5 KB of numbers per server). Filled by the sampler thread
// (Runtime::Impl::start_status_sampler), read by the route's handlers; next, count, t, servers
// and pools are under mu, held only to copy numbers (never across IO or a park).
struct StatusHistory {
  static constexpr std::size_t kSamples = 300;
  static constexpr std::chrono::seconds kInterval{1};
  struct Point {
    float rps = 0;  // requests (http: responses; kafka: requests; syslog: messages) per second
    float p50_ms = 0, p99_ms = 0;  // http(s) only; NaN: no request ended in that interval
  };
  // The latest rates of a pool (over the last interval).
  struct PoolRates {
    double switches = 0, parks = 0, created = 0, steals = 0, worker_sleeps = 0;
  };

  mutable std::mutex mu;
  std::size_t next = 0;  // the slot the next sample goes to
  std::size_t count = 0;  // samples held, <= kSamples; the oldest is at (next - count) mod kSamples
  std::array<double, kSamples> t{};  // seconds since the runtime started
  std::vector<std::array<Point, kSamples>> servers;  // indexed like Runtime::Impl::servers
  std::vector<PoolRates> pools;  // indexed like Runtime::Impl::pools

  // The sampler thread's own: the cumulative readings of the previous sample, for deltas.
  struct Previous {
    uint64_t requests = 0;
    Histogram::Snapshot latency;
  };
  std::chrono::steady_clock::time_point prev_at;
  std::vector<Previous> prev_servers;
  std::vector<SchedulerStats> prev_pools;
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

  // The `debug` route's history: made when the first debug route is built (none otherwise),
  // sampled by a plain thread from start() until shutdown() (it reads `servers` and `pools`).
  // A thread like the trimmer's, not a fiber: the samples keep their one-second rhythm when the
  // pools are saturated, which is when a person looks. debug_page.cc.
  void start_status_sampler();
  void stop_status_sampler();
  std::shared_ptr<StatusHistory> status;
  std::thread status_sampler;
  std::mutex status_mu;
  std::condition_variable status_cv;
  bool status_stop = false;  // under status_mu
};

// routes.cc
std::unique_ptr<http::Router> build_router(Runtime::Impl& im, Running& server);
// Counts responses by class and handler latency into m.
http::Handler instrument(http::Handler inner, ServerMetrics& m);
// Wraps every connection (in TLS first when tls is set) in a CountingStream over m.
http::StreamFactory counting_factory(std::shared_ptr<TlsSlot> tls, ServerMetrics& m);
std::string render_metrics(const Runtime::Impl& im);
// debug_page.cc: the `debug` route's handler (a prefix route: the page and status.json).
http::Handler debug_handler(Runtime::Impl& im, bool allow_remote);
}  // namespace lionet::app
