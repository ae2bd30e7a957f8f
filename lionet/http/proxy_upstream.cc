// lionet/http/proxy_upstream.cc: the reverse proxy's upstreams (nginx's split: the upstream
// module beside the proxy module): the upstream list parsed from ProxyOptions, balancing
// (pick: smooth weighted round robin, least connections, hash), passive failure marking,
// connecting, active health checks, the reaper of idle connections, statistics. The exchange
// over an upstream is proxy.cc; keep-alive pooling is idle_pool.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <stdexcept>

#include "lionet/http/connect.h"
#include "lionet/http/detail/proxy_upstream.h"
#include "lionet/http/response_head.h"
#include "lionet/log/log.h"
#include "lionet/sched/cancel.h"

namespace lionet::http {
namespace {
// The host:port of an upstream address (scheme and a trailing '/' dropped); empty if it has a
// path or nothing. *tls: it is https://.
std::string_view host_port_of(std::string_view a, bool* tls) {
  *tls = a.starts_with("https://");
  if (*tls) a.remove_prefix(8);
  else if (a.starts_with("http://")) a.remove_prefix(7);
  if (!a.empty() && a.back() == '/') a.remove_suffix(1);
  if (a.find('/') != std::string_view::npos) return {};
  return a;
}
}  // namespace

std::optional<ProxyUpstream> parse_proxy_upstream(std::string_view text) {
  ProxyUpstream u;
  const std::size_t sp = text.find(' ');
  u.address = std::string(text.substr(0, sp));
  if (sp != std::string_view::npos) {
    std::string_view rest = text.substr(sp);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!rest.starts_with("weight=")) return std::nullopt;
    rest.remove_prefix(7);
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), u.weight);
    if (ec != std::errc() || p != rest.data() + rest.size() || u.weight < 1 || u.weight > 1000) return std::nullopt;
  }
  bool tls = false;
  if (host_port_of(u.address, &tls).empty()) return std::nullopt;
  return u;
}

std::string proxy_options_problem(const ProxyOptions& o) {
  if (o.upstreams.empty()) return "no upstreams";
  if (o.upstreams.size() > kMaxProxyUpstreams) return "more than 64 upstreams";
  if (o.buffer_size < 1024) return "buffer_size below 1024";
  for (const auto& u : o.upstreams) {
    if (u.weight < 1 || u.weight > 1000) return "upstream " + u.address + ": weight must be 1..1000";
    bool tls = false;
    if (host_port_of(u.address, &tls).empty()) return "upstream '" + u.address + "': expected host:port";
  }
  return {};
}

const std::shared_ptr<spdlog::logger>& proxy_log() {
  static const auto lg = log::get("proxy");
  return lg;
}

void append_ip(std::string& out, const Address& a, bool bracket_v6) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.family() == AF_INET) {  // by hand: glibc's inet_ntop formats IPv4 with sprintf
    const auto* b =
        reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr())->sin_addr);
    std::size_t n = 0;  // into text, then one append: four small appends cost four times the bookkeeping
    for (int i = 0; i < 4; ++i) {
      const unsigned v = b[i];
      if (i) text[n++] = '.';
      if (v >= 100) text[n++] = static_cast<char>('0' + v / 100);
      if (v >= 10) text[n++] = static_cast<char>('0' + v / 10 % 10);
      text[n++] = static_cast<char>('0' + v % 10);
    }
    out.append(text, n);
  } else if (a.family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr())->sin6_addr, text, sizeof text);
    if (bracket_v6) out.append("\"[").append(text).append("]\"");
    else out.append(text);
  } else {
    out.append(bracket_v6 ? "unknown" : "unix");
  }
}

Proxy::Proxy(ProxyOptions options) : options_(std::move(options)), health_(std::make_unique<Health>()) {
  if (std::string why = proxy_options_problem(options_); !why.empty()) throw std::invalid_argument("proxy: " + why);
  for (const auto& cfg : options_.upstreams) {
    auto u = std::make_unique<Upstream>(
        IdlePoolOptions{.max_idle = options_.max_idle, .idle_timeout = options_.idle_timeout});
    u->address = cfg.address;
    u->index = upstreams_.size();
    u->weight = cfg.weight;
    const std::string_view a = host_port_of(cfg.address, &u->tls);  // not empty: checked above
    if (u->tls && !options_.tls)
      throw std::invalid_argument("proxy: upstream " + cfg.address + " is https but no TLS client context is set");
    auto addrs = Address::lookup(a);
    if (!addrs || addrs->empty())
      throw std::invalid_argument("proxy: upstream '" + cfg.address +
                                  "': " + (addrs ? std::string("no address") : addrs.error().message()));
    u->addrs = std::move(*addrs);
    size_t colon = a.rfind(':');
    u->host = std::string(a.substr(0, colon));
    if (u->host.size() > 2 && u->host.front() == '[') u->host = u->host.substr(1, u->host.size() - 2);
    upstreams_.push_back(std::move(u));
  }
  // Smooth weighted round robin (nginx's), unrolled once into an order the requests walk.
  std::vector<int64_t> current(upstreams_.size(), 0);
  int64_t total = 0;
  for (const auto& u : upstreams_) total += u->weight;
  for (int64_t step = 0; step < total; ++step) {
    size_t best = 0;
    for (size_t i = 0; i < upstreams_.size(); ++i) {
      current[i] += upstreams_[i]->weight;
      if (current[i] > current[best]) best = i;
    }
    current[best] -= total;
    order_.push_back(static_cast<uint16_t>(best));
  }
}

Proxy::~Proxy() { stop(); }

Proxy::Upstream* Proxy::pick(const Request& req, uint64_t tried) {
  const TimePoint t = coarse_now();  // against down_until: a tick longer down does not matter
  auto usable = [&](size_t i) { return !((tried >> i) & 1) && upstreams_[i]->up(t); };
  const size_t n = order_.size();
  if (options_.balance == ProxyBalance::kLeastConn) {
    const size_t m = upstreams_.size();
    const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % m;
    Upstream* best = nullptr;
    for (size_t k = 0; k < m; ++k) {
      size_t i = (start + k) % m;
      if (!usable(i)) continue;
      Upstream* u = upstreams_[i].get();
      if (!best || u->active.load(std::memory_order_relaxed) * best->weight <
                       best->active.load(std::memory_order_relaxed) * u->weight)
        best = u;
    }
    return best;
  }
  size_t start;
  if (options_.balance == ProxyBalance::kHash) {
    std::string key;
    std::string_view hv = options_.hash_key == "ip" ? std::string_view() : req.header(options_.hash_key);
    if (hv.empty()) {
      if (auto peer = req.peer_address()) append_ip(key, *peer, false);
      hv = key;
    }
    start = std::hash<std::string_view>{}(hv) % n;
  } else {
    start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  }
  for (size_t k = 0; k < n; ++k) {
    size_t i = order_[(start + k) % n];
    if (usable(i)) return upstreams_[i].get();
  }
  return nullptr;
}

void mark_failure(Proxy::Upstream& u, const ProxyOptions& o, std::size_t upstream_count) {
  u.failures.add();
  if (o.max_fails == 0 || upstream_count == 1) return;  // as nginx: a lone upstream is never marked down
  const TimePoint t = now();
  std::lock_guard<std::mutex> lk(u.mu);
  if (u.fails == 0 || t - u.fail_start > o.fail_timeout) {
    u.fails = 0;
    u.fail_start = t;
  }
  if (++u.fails >= o.max_fails) {
    u.down_until.store(ticks(t + o.fail_timeout), std::memory_order_relaxed);
    u.fails = 0;
    LIONET_LOG_WARN(proxy_log(), "upstream {} marked down for {} ms ({} failures)", u.address,
                    std::chrono::duration_cast<std::chrono::milliseconds>(o.fail_timeout).count(), o.max_fails);
  }
}

Result<std::unique_ptr<UpConn>> connect_upstream(Proxy::Upstream& u, const ProxyOptions& o, TimePoint deadline) {
  ConnectOptions co;
  co.tls = u.tls;
  co.tls_context = o.tls;
  co.host = u.host;
  co.connect_deadline = std::min(deadline, now() + o.connect_timeout);
  co.deadline = co.connect_deadline;  // connect_timeout bounds the TLS handshake too
  auto c = std::make_unique<UpConn>();
  auto s = connect_stream(u.addrs, co, &c->fd);
  if (!s) return s.error();
  c->stream = std::move(*s);
  c->cap = o.buffer_size;
  c->buf = std::make_unique<char[]>(c->cap);
  u.connects.add();
  return c;
}

void Proxy::start_health_checks(Scheduler& sched) {
  health_->fibers.push_back(sched.spawn([this] { reap_loop(); }, {.name = "proxy-reaper"}));
  if (!options_.health_check) return;
  for (auto& u : upstreams_) {
    Upstream* up = u.get();
    health_->fibers.push_back(sched.spawn([this, up] { health_loop(*up); }));
  }
}

// Every sweep period: the idle connections past idle_timeout of every upstream are closed, also
// of an upstream no request has used since (IdlePool::take sweeps only when a request comes).
void Proxy::reap_loop() {
  for (;;) {
    {
      std::unique_lock<Mutex> lk(health_->mu);
      if (health_->cv.wait_for(lk, upstreams_.front()->pool.sweep_period(), [&] { return health_->stop; })) return;
      if (this_fiber::cancelled()) return;  // its waits would now end at once (sched/cancel.h)
    }
    for (auto& u : upstreams_) u->pool.sweep();
  }
}

void Proxy::health_loop(Upstream& u) {
  const ProxyHealthCheck& hc = *options_.health_check;
  unsigned bad = 0, good = 0;
  for (;;) {
    {
      std::unique_lock<Mutex> lk(health_->mu);
      if (health_->cv.wait_for(lk, hc.interval, [&] { return health_->stop; })) return;
      if (this_fiber::cancelled()) return;  // its waits would now end at once (sched/cancel.h)
    }
    bool ok = false;
    const TimePoint deadline = now() + hc.timeout;
    ProxyOptions o = options_;
    o.connect_timeout = hc.timeout;
    if (auto c = connect_upstream(u, o, deadline)) {
      UpConn& conn = **c;
      conn.stream->set_timeouts(hc.timeout, hc.timeout);
      std::string h = "GET " + hc.path + " HTTP/1.1\r\nHost: " + u.host + "\r\nConnection: close\r\n\r\n";
      if (conn.stream->write(h)) {
        std::string got;
        ResponseHead rh;
        while (now() < deadline && got.size() < 65536) {
          auto r = conn.stream->read(conn.buf.get(), conn.cap);
          if (!r || *r == 0) break;
          got.append(conn.buf.get(), *r);
          auto st = parse_response_head(got, rh);
          if (st == HeadParse::kError) break;
          if (st == HeadParse::kDone) {
            ok = std::to_string(rh.status).starts_with(hc.expect);
            break;
          }
        }
      }
      conn.stream->close();
    }
    if (ok) {
      bad = 0;
      if (++good >= hc.passes && u.check_down.exchange(false, std::memory_order_relaxed))
        LIONET_LOG_INFO(proxy_log(), "upstream {} passed its health check: up", u.address);
    } else {
      good = 0;
      if (++bad >= hc.fails && !u.check_down.exchange(true, std::memory_order_relaxed))
        LIONET_LOG_WARN(proxy_log(), "upstream {} failed its health check ({}): down", u.address, hc.path);
    }
  }
}

void Proxy::stop() {
  {
    std::lock_guard<Mutex> lk(health_->mu);
    health_->stop = true;
  }
  health_->cv.notify_all();
  CancelShield shield;  // the health fibers use health_
  for (auto& f : health_->fibers) f.join();
  health_->fibers.clear();
  for (auto& u : upstreams_) u->pool.close_all();
}

std::vector<ProxyUpstreamStats> Proxy::stats() const {
  std::vector<ProxyUpstreamStats> out;
  const TimePoint t = now();
  for (const auto& u : upstreams_) {
    ProxyUpstreamStats s;
    s.address = u->address;
    s.requests = u->requests.value();
    s.failures = u->failures.value();
    s.connects = u->connects.value();
    s.idle = u->pool.size();
    s.active = u->active.load(std::memory_order_relaxed);
    s.up = u->up(t);
    s.latency = u->latency.snapshot();
    out.push_back(std::move(s));
  }
  return out;
}
}  // namespace lionet::http
