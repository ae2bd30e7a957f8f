// lionet/app/runtime.cc: building, starting and stopping what the lionet binary runs (see
// runtime.h for the start-up and shutdown protocols). Routes and /metrics: app/routes.cc.
#include "lionet/app/runtime.h"

#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <thread>

#include "lionet/app/detail/running.h"
#include "lionet/app/inherited_listeners.h"
#include "lionet/app/self_signed.h"
#include "lionet/http2/server.h"
#include "lionet/log/log.h"
#include "lionet/net/address.h"
#include "lionet/ssl/ssl_context.h"

namespace lionet::app {
namespace {

// The causes come from library errors that start with "lionet: " on their own; main() prints
// one "lionet: cannot start: ..." line, so the inner prefixes go.
[[noreturn]] void fail(std::string what) {
  for (std::size_t at; (at = what.find("lionet: ")) != std::string::npos;) what.erase(at, 8);
  throw StartupError(what);
}

Address resolve_listen(const std::string& server, const std::string& text) {
  if (auto a = Address::parse(text)) return a.value();
  auto r = Address::lookup(text);
  if (!r || r.value().empty())
    fail("server '" + server + "': listen '" + text + "': not an address (host:port, [v6]:port or unix:/path)");
  return r.value().front();
}

http::ServerOptions http_options(const ServerConfig& c, http2::Stats* h2_stats) {
  http::ServerOptions o;
  o.limits.max_request_line = c.max_request_line;
  o.limits.max_header_bytes = c.max_header_bytes;
  o.limits.max_headers = c.max_headers;
  o.limits.max_body_bytes = c.max_body_bytes;
  o.keepalive_timeout = c.idle_timeout;
  o.header_timeout = c.header_timeout;
  o.body_timeout = c.body_timeout;
  o.write_timeout = c.write_timeout;
  o.max_keepalive_requests = c.max_keepalive_requests;
  o.handler_timeout = c.handler_timeout;
  o.cancel_on_disconnect = c.cancel_on_disconnect;
  o.drain_body_max = c.drain_body_max;
  o.server_name = c.server_name;
  o.input_buffer = c.input_buffer;
  o.tcp.drain_silent_grace = c.drain_silent_grace;
  o.tcp.max_connections = c.max_connections;
  o.tcp.max_connections_per_address = c.max_connections_per_address;
  o.tcp.reuse_port = c.reuse_port;
  o.tcp.name = c.name;
  if (c.http2) {
    http2::Options h2;
    h2.max_concurrent_streams = c.http2_max_concurrent_streams;
    h2.initial_window_size = c.http2_initial_window_size;
    h2.max_frame_size = c.http2_max_frame_size;
    h2.max_header_list_size = c.http2_max_header_list_size;
    h2.max_requests = c.http2_max_requests;
    h2.reset_burst = c.http2_reset_burst;
    h2.resets_per_second = c.http2_resets_per_second;
    h2.max_continuations = c.http2_max_continuations;
    h2.max_empty_frames = c.http2_max_empty_frames;
    h2.max_outbound_ack = c.http2_max_outbound_ack;
    h2.stats = h2_stats;
    http2::enable(o, h2);
  }
  return o;
}

SslOptions tls_options(const ServerConfig& c) {
  const TlsConfig& t = *c.tls;
  SslOptions o;
  o.certificates = {{t.cert, t.key}};
  o.min_version = t.min_version;
  o.alpn = t.alpn;
  // HTTP/2 is offered first on every TLS server that has it (unless the list names h2 itself).
  if (c.http2 && std::find(o.alpn.begin(), o.alpn.end(), "h2") == o.alpn.end()) o.alpn.insert(o.alpn.begin(), "h2");
  if (!c.http2) std::erase(o.alpn, "h2");
  o.handshake_timeout = t.handshake_timeout;
  if (c.type == "kafka") o.alpn.clear();  // Kafka clients send no ALPN
  if (t.verify_client != "off") {  // client certificates for routes with auth.client_cert
    o.verify_peer = true;
    o.peer_certificate_optional = t.verify_client == "optional";
    o.ca_file = t.client_ca;
  }
  return o;
}

std::shared_ptr<SslContext> tls_context(const ServerConfig& c) {
  const TlsConfig& t = *c.tls;
  namespace fs = std::filesystem;
  if (t.generate_self_signed && !fs::exists(t.cert) && !fs::exists(t.key)) {
    if (std::string err = ensure_self_signed(t.cert, t.key); !err.empty()) fail("server '" + c.name + "': " + err);
    LIONET_LOG_INFO(log::get("app"), "server '{}': generated a self-signed certificate {} (key {})", c.name, t.cert,
                    t.key);
  }
  try {
    return SslContext::server(tls_options(c));
  } catch (const std::exception& e) {
    fail("server '" + c.name + "': " + e.what());
  }
}

// A kafka server's SASL settings: the users file read and its credentials derived (the
// passwords dropped), the ACLs.
std::shared_ptr<const kafka::SaslConfig> kafka_sasl(const ServerConfig& c) {
  const KafkaSaslConfig& s = *c.sasl;
  auto cfg = std::make_shared<kafka::SaslConfig>();
  for (const std::string& m : s.mechanisms) cfg->mechanisms.push_back(*kafka::parse_mechanism(m));  // checked at load
  std::string err;
  cfg->users = kafka::SaslUsers::load(s.users, err);
  if (!cfg->users) fail("server '" + c.name + "': " + err);
  std::map<std::string, kafka::Permissions> acl;
  for (const auto& [user, a] : s.acls) acl[user] = {a.produce, a.consume, a.groups};
  cfg->acl = kafka::Acl(acl);
  LIONET_LOG_INFO(log::get("app"), "server '{}': SASL with {} user(s) from {}{}", c.name, cfg->users->size(), s.users,
                  s.acls.empty() ? "" : ", with per-user permissions");
  return cfg;
}

// The echo protocol: bytes back as they come, until the client closes or idles past idle_timeout.
TcpServer::Handler echo_handler(ServerMetrics& m, Duration idle) {
  return [&m, idle](SocketStream& s) {
    s.set_timeouts(idle, idle);
    char buf[16 * 1024];
    for (;;) {
      auto n = s.read(buf, sizeof buf);
      if (!n.ok() || n.value() == 0) return;
      m.bytes_in.add(n.value());
      if (!s.write(buf, n.value()).ok()) return;
      m.bytes_out.add(n.value());
    }
  };
}
}  // namespace

Runtime::Runtime(const AppConfig& config, RuntimeHooks hooks) : impl_(std::make_unique<Impl>(config)) {
  Impl& im = *impl_;
  im.pool("main");
  const auto servers = config.servers->value();
  bool want_store = false;
  for (const auto& s : servers)
    for (const auto& r : s.routes) want_store |= r.type == "storage";
  for (const auto& s : servers) want_store |= s.type == "syslog" || s.type == "kafka";
  if (want_store) {
    if (hooks.before_store) {
      try {
        hooks.before_store();
      } catch (const std::exception& e) {
        fail(std::string("storage: ") + e.what());
      }
    }
    im.open_store();
  }
  // The listener of server `name` on `a`: a socket handed to this process, else -1 (bind).
  auto inherited = [&hooks](const std::string& name, const Address& a) {
    return hooks.inherited ? hooks.inherited->take(name, a) : -1;
  };
  for (std::size_t i = 0; i < servers.size(); ++i) {
    auto run = std::make_unique<Running>();
    run->cfg = servers[i];
    if (run->cfg.name.empty()) run->cfg.name = run->cfg.type + "-" + std::to_string(i);
    const ServerConfig& sc = run->cfg;
    run->pool = &im.pool(sc.workers);
    Scheduler& io = *run->pool->sched;  // serves through the scheduler's own IO driver
    if (sc.type == "syslog") {
      syslog::ServerOptions o;
      o.name = sc.name;
      o.topic = sc.topic;
      o.key_by_app = sc.key == "app";
      o.batch_max = sc.batch_max;
      o.linger = sc.linger;
      o.max_message_size = sc.max_message_size;
      o.recv_buffer = static_cast<int>(sc.recv_buffer);
      o.max_connections = sc.max_connections;
      o.max_connections_per_address = sc.max_connections_per_address;
      o.admit = AddressRules::parse(sc.allow, sc.deny);  // checked at load
      o.idle_timeout = sc.idle_timeout;
      try {
        run->syslog = std::make_unique<syslog::Server>(io, *im.store, o);
        for (const auto& l : sc.listen) {
          const auto split = split_syslog_listen(l);  // checked at load
          if (!split) fail("server '" + sc.name + "': listen '" + l + "': needs udp:// or tcp://");
          const Address a = resolve_listen(sc.name, std::string(split->second));
          if (split->first == "udp") run->syslog->listen_udp(a);
          else if (const int fd = inherited(sc.name, a); fd >= 0) run->syslog->adopt_tcp(fd);
          else run->syslog->listen_tcp(a);
        }
      } catch (const StartupError&) {
        throw;
      } catch (const std::exception& e) {
        fail("server '" + sc.name + "': " + e.what());
      }
      im.servers.push_back(std::move(run));
      continue;
    }
    if (sc.type == "kafka") {
      kafka::ServerOptions o;
      o.name = sc.name;
      o.broker.advertised_host = sc.advertised_host;
      o.broker.advertised_port = static_cast<int32_t>(sc.advertised_port);
      o.max_request_size = sc.max_request_size;
      o.broker.groups.min_session_timeout = sc.group_min_session_timeout;
      o.broker.groups.max_session_timeout = sc.group_max_session_timeout;
      o.broker.groups.offset_metadata_max_bytes = sc.offset_metadata_max_bytes;
      o.max_connections = sc.max_connections;
      o.max_connections_per_address = sc.max_connections_per_address;
      o.admit = AddressRules::parse(sc.allow, sc.deny);
      o.idle_timeout = sc.idle_timeout;
      if (sc.tls) {
        run->tls = std::make_shared<TlsSlot>();
        run->tls->set(tls_context(sc));
        o.tls = [slot = run->tls] { return slot->get(); };
      }
      if (sc.sasl) o.broker.sasl = kafka_sasl(sc);
      try {
        run->kafka = std::make_unique<kafka::Server>(io, *im.store, o);
      } catch (const std::exception& e) {
        fail("server '" + sc.name + "': " + e.what());
      }
    } else if (sc.type == "echo") {
      TcpServerOptions o;
      o.max_connections = sc.max_connections;
      o.max_connections_per_address = sc.max_connections_per_address;
      o.admit = AddressRules::parse(sc.allow, sc.deny);
      o.drain_silent_grace = sc.drain_silent_grace;
      o.reuse_port = sc.reuse_port;
      o.name = sc.name;
      run->tcp = std::make_unique<TcpServer>(io, echo_handler(run->m, sc.idle_timeout), o);
    } else {
      run->router = build_router(im, *run);
      http::ServerOptions ho = http_options(sc, &run->h2);
      ho.refusal = run->router->refusal_handler();  // routes word their refusals (storage: JSON)
      ho.runs_inline = run->router->inline_predicate();  // HTTP/2: nonblocking routes on the session's fiber
      if (sc.access_log) ho.access_log = im.access_log(sc);
      // The server's own address rules come before routing: a refused client learns nothing
      // of which paths exist.
      http::Handler routed = run->router->handler();
      if (!sc.allow.empty() || !sc.deny.empty()) {
        Running::Access& a = run->access_of("");
        a.has_rules = true;
        routed = http::with_address_rules(std::move(routed), AddressRules::parse(sc.allow, sc.deny), &a.denied);
      }
      run->http = std::make_unique<http::Server>(io, instrument(std::move(routed), run->m), std::move(ho));
      if (sc.type == "https") {
        run->tls = std::make_shared<TlsSlot>();
        run->tls->set(tls_context(sc));
      }
      run->http->set_stream_factory(counting_factory(run->tls, run->m), run->tls != nullptr);
    }
    for (const auto& l : sc.listen) {
      Address a = resolve_listen(sc.name, l);
      try {
        if (const int fd = inherited(sc.name, a); fd >= 0) run->listener().adopt(fd);
        else run->listener().listen(a);
      } catch (const std::exception& e) {
        fail("server '" + sc.name + "': " + e.what());
      }
    }
    im.servers.push_back(std::move(run));
  }
}

Runtime::~Runtime() = default;  // Impl's destructor stops whatever still runs

void Runtime::start() {
  for (auto& s : impl_->servers) {
    if (s->http) {
      for (auto& [path, proxy] : s->proxies) proxy->start_health_checks(*s->pool->sched);
      s->http->start();
    } else if (s->syslog) {
      try {
        s->syslog->start();
      } catch (const std::exception& e) {
        fail("server '" + s->cfg.name + "': " + e.what());
      }
    } else if (s->kafka) {
      s->kafka->start();
    } else {
      s->tcp->start();
    }
    s->started = true;
  }
  impl_->start_trimmer();
  impl_->start_status_sampler();  // only with a debug route
}

bool Runtime::stop(std::chrono::milliseconds drain) { return impl_->shutdown(drain); }

std::size_t Runtime::reopen_access_logs() {
  std::lock_guard<std::mutex> lk(impl_->access_logs_mu);
  for (auto& [path, log] : impl_->access_logs) log->reopen();  // returns at once: the writer reopens
  return impl_->access_logs.size();
}

std::vector<Runtime::ListeningSocket> Runtime::listening_sockets() const {
  std::vector<ListeningSocket> out;
  for (const auto& s : impl_->servers) {
    std::vector<TcpServer*> tcp;
    if (s->has_listener()) tcp.push_back(&s->listener());
    if (s->syslog) tcp = s->syslog->tcp_servers();
    for (TcpServer* t : tcp)
      for (int fd : t->listening_fds()) out.push_back({s->cfg.name, fd});
  }
  return out;
}

void Runtime::stop_accepting_keep_sockets() {
  for (const auto& s : impl_->servers) {
    if (!s->started) continue;
    if (s->has_listener()) s->listener().stop_accepting_keep_sockets();
    if (s->syslog)
      for (TcpServer* t : s->syslog->tcp_servers()) t->stop_accepting_keep_sockets();
  }
}

Runtime::Load Runtime::load() const {
  Load l;
  for (const auto& s : impl_->servers) {
    if (s->has_listener()) l.connections += s->listener().connections();
    for (const auto& c : s->m.status) l.requests += c.value();
  }
  return l;
}

Scheduler& Runtime::main_scheduler() const { return *impl_->pool("main").sched; }
const char* Runtime::main_io_backend() const { return impl_->pool("main").backend(); }

std::vector<std::string> Runtime::tls_files() const {
  std::vector<std::string> out;
  for (const auto& s : impl_->servers) {
    if (!s->tls) continue;
    out.push_back(s->cfg.tls->cert);
    out.push_back(s->cfg.tls->key);
  }
  return out;
}

std::size_t Runtime::reload_tls(const std::vector<std::string>& changed) {
  auto lg = log::get("app");
  std::size_t reloaded = 0;
  for (const auto& s : impl_->servers) {
    if (!s->tls) continue;
    const TlsConfig& t = *s->cfg.tls;
    if (std::find(changed.begin(), changed.end(), t.cert) == changed.end() &&
        std::find(changed.begin(), changed.end(), t.key) == changed.end())
      continue;
    try {
      s->tls->set(SslContext::server(tls_options(s->cfg)));
      ++reloaded;
      LIONET_LOG_INFO(lg, "server '{}': certificate {} (key {}) reloaded: new connections use it", s->cfg.name, t.cert,
                      t.key);
    } catch (const std::exception& e) {
      LIONET_LOG_ERROR(lg,
                       "server '{}': the changed certificate {} (key {}) was not loaded, keeping the running one: {}",
                       s->cfg.name, t.cert, t.key, e.what());
    }
  }
  return reloaded;
}

const std::vector<Runtime::StaticRoute>& Runtime::static_routes() const { return impl_->static_routes; }

std::vector<std::string> Runtime::credential_files() const {
  std::vector<std::string> out;
  for (const auto& s : impl_->servers)
    for (const auto& a : s->auths)
      if (std::string f = auth_file(a.config); !f.empty() && std::find(out.begin(), out.end(), f) == out.end())
        out.push_back(f);
  return out;
}

std::size_t Runtime::reload_credentials(const std::vector<std::string>& changed) {
  auto lg = log::get("app");
  std::size_t reloaded = 0;
  for (const auto& s : impl_->servers) {
    for (const auto& a : s->auths) {
      const std::string f = auth_file(a.config);
      if (f.empty() || std::find(changed.begin(), changed.end(), f) == changed.end()) continue;
      if (std::string err = reload_auth(a); !err.empty()) {
        LIONET_LOG_ERROR(lg, "server '{}': route {}: credentials not reloaded, keeping the running ones: {}",
                         s->cfg.name, a.route, err);
        continue;
      }
      ++reloaded;
      LIONET_LOG_INFO(lg, "server '{}': route {}: credentials reloaded from {}", s->cfg.name, a.route, f);
    }
  }
  return reloaded;
}

std::vector<std::string> Runtime::describe() const {
  std::vector<std::string> out;
  for (const auto& s : impl_->servers) {
    std::string line = s->cfg.name + " (" + s->cfg.type + ") on";
    if (s->syslog) {
      for (const auto& a : s->syslog->addresses()) (line += ' ') += a;
    } else {
      for (const auto& a : s->listener().addresses()) (line += ' ') += a.to_string();
    }
    line += ", workers '" + s->cfg.workers + "' (" + std::to_string(s->pool->sched->threads()) + " thread(s), " +
            s->pool->backend() + ")";
    out.push_back(std::move(line));
  }
  return out;
}

// ------------------------------------------------------------------------------- Impl

Runtime::Impl::Impl(const AppConfig& c) : config(c), started_at(std::chrono::steady_clock::now()) {}

// Also runs when the constructor threw half-way (members built so far are torn down in order).
Runtime::Impl::~Impl() { shutdown(std::chrono::milliseconds(0)); }

// Memory after a burst of connections: their buffers and fibers' objects are freed, but glibc
// keeps freed memory in its arenas (one per thread that allocated, up to 8 per CPU), so a
// 10,000-connection flood left ~75 MB resident for good. Every memory.trim_interval this thread
// looks at the servers' counters; once memory.trim_after_closed connections have closed since
// the last trim and at most half of the peak it saw is still open (a drop, not steady churn),
// it returns the pages of the fiber stacks the pools keep warm beyond 64 (Scheduler::trim_stacks)
// and calls malloc_trim(0), which returns the arenas' free pages (madvise) to the system.
void Runtime::Impl::start_trimmer() {
  const auto interval = config.memory_trim_interval->value();
  if (interval.count() == 0 || trimmer.joinable()) return;
  const uint64_t after_closed = config.memory_trim_after_closed->value();
  trimmer = std::thread([this, interval, after_closed] {
    pthread_setname_np(pthread_self(), "lionet-trim");
    uint64_t closed_at_trim = 0;
    std::size_t peak = 0;
    std::unique_lock<std::mutex> lk(trim_mu);
    while (!trim_cv.wait_for(lk, interval, [&] { return trim_stop; })) {
      uint64_t opened = 0;
      std::size_t live = 0;
      for (const auto& s : servers) {
        if (!s->has_listener()) continue;
        const TcpServer& t = s->listener();
        opened += t.accepted() + t.rejected();
        live += t.connections();
      }
      const uint64_t closed = opened - std::min<uint64_t>(opened, live);
      peak = std::max(peak, live);
      if (closed - closed_at_trim >= after_closed && live <= peak / 2) {
        for (const auto& p : pools) p->sched->trim_stacks();  // the connections' fiber stacks
        malloc_trim(0);
        trims.fetch_add(1, std::memory_order_relaxed);
        closed_at_trim = closed;
        peak = live;
      }
    }
  });
}

void Runtime::Impl::stop_trimmer() {
  {
    std::lock_guard<std::mutex> lk(trim_mu);
    trim_stop = true;
  }
  trim_cv.notify_all();
  if (trimmer.joinable()) trimmer.join();
}

bool Runtime::Impl::shutdown(std::chrono::milliseconds drain) {
  std::lock_guard<std::mutex> lk(stop_mu);
  if (stopped) return true;
  stopped = true;
  stop_trimmer();  // it reads `servers`, cleared below
  stop_status_sampler();  // so does this one
  auto lg = log::get("app");
  // 1-2: every server at once, so no listener stays open while another drains.
  std::vector<std::thread> stoppers;
  std::atomic<bool> all_drained{true};
  for (auto& s : servers) {
    if (!s->started) continue;
    stoppers.emplace_back([&s = *s, drain, &all_drained] {
      const bool ok = s.http     ? s.http->stop(drain)
                      : s.syslog ? s.syslog->stop(drain)
                      : s.kafka  ? s.kafka->stop(drain)
                                 : s.tcp->stop(drain);
      if (!ok) all_drained.store(false, std::memory_order_relaxed);
    });
  }
  for (auto& t : stoppers) t.join();
  if (!all_drained.load())
    LIONET_LOG_WARN(lg, "shutdown: connections still open after {} ms were closed", drain.count());
  servers.clear();
  // 3: nothing appends any more.
  if (store) {
    if (auto r = store->flush(); !r) LIONET_LOG_ERROR(lg, "shutdown: storage flush failed: {}", r.error().message());
    store.reset();
  }
  // The servers' references went with them: each log writes out what it holds and closes.
  std::map<std::string, std::shared_ptr<http::AccessLog>> logs;
  {
    std::lock_guard<std::mutex> lk(access_logs_mu);
    logs.swap(access_logs);
  }
  logs.clear();
  // 4.
  for (auto& p : pools) p->sched->stop();
  for (auto& p : pools) p->sched.reset();  // its IO driver goes with it
  pools.clear();
  return all_drained.load();
}

Pool& Runtime::Impl::pool(const std::string& name) {
  for (auto& p : pools)
    if (p->name == name) return *p;
  auto p = std::make_unique<Pool>();
  p->name = name;
  SchedulerOptions so = pool_scheduler_options(config, name);
  so.io = pool_io_options(config, name);
  p->sched = std::make_unique<Scheduler>(std::move(so));
  pools.push_back(std::move(p));
  return *pools.back();
}

std::shared_ptr<http::AccessLog> Runtime::Impl::access_log(const ServerConfig& c) {
  const AccessLogConfig& a = *c.access_log;
  auto& log = access_logs[access_log_key(a.path)];
  if (log) return log;
  http::AccessLogOptions o;
  o.path = a.path;
  o.format = http::parse_access_log_format(a.format).value_or(http::AccessLogFormat::kCombined);  // validated
  o.buffer_bytes = a.buffer_bytes;
  o.flush_interval = a.flush_interval;
  try {
    log = std::make_shared<http::AccessLog>(std::move(o));
  } catch (const std::exception& e) {
    access_logs.erase(access_log_key(a.path));
    fail("server '" + c.name + "': " + e.what());
  }
  return log;
}

void Runtime::Impl::open_store() {
  const storage::StoreOptions o = store_options(config.storage);
  auto r = storage::Store::open(o);
  if (!r && r.error() == std::error_code(EBUSY, std::system_category()))
    fail("storage: data_dir '" + o.data_dir +
         "' is in use by another process (its lock is held); "
         "give each lionet process its own data_dir");
  if (!r) fail("storage: cannot open data_dir '" + o.data_dir + "': " + r.error().message());
  store = std::move(r.value());
}
}  // namespace lionet::app
