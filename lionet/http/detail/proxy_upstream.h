// lionet/http/detail/proxy_upstream.h: the reverse proxy's upstreams as its two files share
// them (internal to http/): proxy_upstream.cc owns them (parsing, balancing, failures, health
// checks, the reaper, statistics); proxy.cc runs the exchange over one (proxy.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "lionet/base/log_limiter.h"
#include "lionet/base/result.h"
#include "lionet/http/idle_pool.h"
#include "lionet/http/proxy.h"
#include "lionet/http/response_head.h"
#include "lionet/net/address.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/cond_var.h"
#include "lionet/sync/mutex.h"

namespace lionet::http {

const std::shared_ptr<spdlog::logger>& proxy_log();

// The address of a, appended: IPv4 dotted, IPv6 bare or, with bracket_v6, as `"[...]"` (the
// Forwarded header's quoting); "unix" / "unknown" for other families.
void append_ip(std::string& out, const Address& a, bool bracket_v6);

// A connection to an upstream with the buffer its exchanges use (pooled together).
struct UpConn : PooledConnection {
  std::unique_ptr<char[]> buf;
  std::size_t cap = 0;
  std::string head;  // request head scratch (capacity kept)
  ResponseHead response;  // the response head's fields (capacity kept: no allocation per request)
  std::size_t requests = 0;
};

struct Proxy::Upstream {
  explicit Upstream(const IdlePoolOptions& o) : pool(o) {}
  std::string address;  // as configured
  std::string host;  // for SNI and a missing Host
  bool tls = false;
  std::vector<Address> addrs;
  unsigned weight = 1;
  size_t index = 0;

  IdlePool pool;  // its keep-alive connections (max_idle, idle_timeout)

  std::mutex mu;  // fails, fail_start
  unsigned fails = 0;
  TimePoint fail_start{};
  std::atomic<int64_t> down_until{0};  // passive: marked down until then (ticks)
  std::atomic<bool> check_down{false};  // active: the last health checks failed
  std::atomic<std::size_t> active{0};
  Counter requests, failures, connects;
  Histogram latency;
  LogLimiter log_limit;  // failure lines: one per second per upstream

  bool up(TimePoint t) const noexcept {
    return !check_down.load(std::memory_order_relaxed) && down_until.load(std::memory_order_relaxed) <= ticks(t);
  }
};

struct Proxy::Health {
  Mutex mu;
  CondVar cv;
  bool stop = false;
  std::vector<JoinHandle<void>> fibers;
};

// Counts a failure of u; after max_fails within fail_timeout it is marked down for
// fail_timeout (never the only upstream).
void mark_failure(Proxy::Upstream& u, const ProxyOptions& o, std::size_t upstream_count);

// A new connection to u (TLS with SNI when it is https), bounded by connect_timeout and
// deadline, with a buffer of buffer_size.
Result<std::unique_ptr<UpConn>> connect_upstream(Proxy::Upstream& u, const ProxyOptions& o, TimePoint deadline);

// A kept-alive connection to u, or null (IdlePool::take).
inline std::unique_ptr<UpConn> take_idle(Proxy::Upstream& u) {
  return std::unique_ptr<UpConn>(static_cast<UpConn*>(u.pool.take().release()));
}

}  // namespace lionet::http
