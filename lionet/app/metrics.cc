// lionet/app/metrics.cc: what the lionet binary measures of its servers and shows on /metrics:
// the per-server instrumentation (instrument: status classes and latency; counting_factory:
// bytes in and out) and the Prometheus page (render_metrics; PrometheusWriter is
// base/metrics.h's). Owns the page's metric names; the route that serves it is routes.cc.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lionet/app/counting_stream.h"
#include "lionet/app/detail/running.h"
#include "lionet/hook/hook.h"
#include "lionet/http/auth.h"
#include "lionet/http/handler_limits.h"
#include "lionet/sched/fiber_dump.h"
#include "lionet/sched/os_locks.h"
#include "lionet/ssl/ssl_context.h"

namespace lionet::app {
namespace {

const char* const kClass[5] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

// lionet_proxy_*: per server, route and upstream.
void render_proxy_metrics(PrometheusWriter& w, const Runtime::Impl& im) {
  using L = PrometheusWriter::Labels;
  struct Row {
    const std::string* server;
    const std::string* route;
    http::ProxyUpstreamStats s;
  };
  std::vector<Row> rows;
  for (const auto& srv : im.servers)
    for (const auto& [path, proxy] : srv->proxies)
      for (auto& st : proxy->stats()) rows.push_back({&srv->cfg.name, &path, std::move(st)});
  if (rows.empty()) return;
  auto family = [&](const char* name, const char* type, const char* help, auto field) {
    w.family(name, type, help);
    for (const auto& r : rows)
      w.sample(name, L{{"server", *r.server}, {"route", *r.route}, {"upstream", r.s.address}},
               static_cast<uint64_t>(field(r.s)));
  };
  family("lionet_proxy_upstream_requests_total", "counter", "Tries sent to the upstream.",
         [](const http::ProxyUpstreamStats& s) { return s.requests; });
  family("lionet_proxy_upstream_failures_total", "counter",
         "Tries that failed: connect error, reset, timeout or an answer that was not HTTP.",
         [](const http::ProxyUpstreamStats& s) { return s.failures; });
  family("lionet_proxy_upstream_connections_opened_total", "counter", "Connections opened to the upstream.",
         [](const http::ProxyUpstreamStats& s) { return s.connects; });
  family("lionet_proxy_upstream_idle_connections", "gauge", "Kept-alive connections in the upstream's pool.",
         [](const http::ProxyUpstreamStats& s) { return s.idle; });
  family("lionet_proxy_upstream_active", "gauge", "Exchanges with the upstream in flight.",
         [](const http::ProxyUpstreamStats& s) { return s.active; });
  family("lionet_proxy_upstream_up", "gauge",
         "1 while the upstream is used, 0 while marked down (passive or active health).",
         [](const http::ProxyUpstreamStats& s) { return s.up ? 1 : 0; });
  w.family("lionet_proxy_upstream_response_seconds", "histogram",
           "Time from a try's start to the upstream's response head.");
  for (const auto& r : rows)
    w.histogram("lionet_proxy_upstream_response_seconds",
                L{{"server", *r.server}, {"route", *r.route}, {"upstream", r.s.address}}, r.s.latency);
}
// lionet_http_auth_*: per server and route with `auth:`.
void render_auth_metrics(PrometheusWriter& w, const Runtime::Impl& im) {
  using L = PrometheusWriter::Labels;
  bool any = false;
  for (const auto& srv : im.servers) any |= !srv->auths.empty();
  if (!any) return;
  w.family("lionet_http_auth_total", "counter",
           "Requests to routes with auth, by result: success, failure (401/403: missing or wrong credentials) or "
           "braked (429: the address failed too often).");
  for (const auto& srv : im.servers) {
    for (const auto& a : srv->auths) {
      const http::AuthStats& st = a.auth->stats();
      w.sample("lionet_http_auth_total", L{{"server", srv->cfg.name}, {"route", a.route}, {"result", "success"}},
               st.successes.value());
      w.sample("lionet_http_auth_total", L{{"server", srv->cfg.name}, {"route", a.route}, {"result", "failure"}},
               st.failures.value());
      w.sample("lionet_http_auth_total", L{{"server", srv->cfg.name}, {"route", a.route}, {"result", "braked"}},
               st.braked.value());
    }
  }
  w.family("lionet_http_auth_cached_credentials", "gauge", "Verified Basic credentials in the route's cache.");
  for (const auto& srv : im.servers)
    for (const auto& a : srv->auths)
      w.sample("lionet_http_auth_cached_credentials", L{{"server", srv->cfg.name}, {"route", a.route}},
               static_cast<uint64_t>(a.auth->cache().size()));
  w.family("lionet_http_auth_brake_addresses", "gauge",
           "Client addresses the route's brute-force brake tracks (bounded by auth.max_addresses).");
  for (const auto& srv : im.servers)
    for (const auto& a : srv->auths)
      w.sample("lionet_http_auth_brake_addresses", L{{"server", srv->cfg.name}, {"route", a.route}},
               static_cast<uint64_t>(a.auth->brake().size()));
}
}  // namespace

http::Handler instrument(http::Handler inner, ServerMetrics& m) {
  return [inner = std::move(inner), &m](http::Request& q, http::Response& s) {
    const auto t0 = std::chrono::steady_clock::now();
    inner(q, s);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
    m.latency.observe_ns(static_cast<uint64_t>(ns.count()));
    const int c = s.status() / 100;
    if (c >= 1 && c <= 5) m.status[c - 1].add();
  };
}

http::StreamFactory counting_factory(std::shared_ptr<TlsSlot> tls, ServerMetrics& m) {
  if (!tls) {
    return [&m](SocketStream& s) -> std::unique_ptr<Stream> {
      return std::make_unique<CountingStream>(s, m.bytes_in, m.bytes_out);
    };
  }
  auto current = [tls = std::move(tls)] { return tls->get(); };
  return [tls_factory = http::tls_stream_factory(std::move(current)), &m](SocketStream& s) -> std::unique_ptr<Stream> {
    std::unique_ptr<Stream> t = tls_factory(s);
    if (!t) return nullptr;
    return std::make_unique<CountingStream>(std::move(t), m.bytes_in, m.bytes_out);
  };
}

std::string render_metrics(const Runtime::Impl& im) {
  using L = PrometheusWriter::Labels;
  PrometheusWriter w;
  w.family("lionet_uptime_seconds", "gauge", "Seconds since the process started serving.");
  w.sample("lionet_uptime_seconds", {},
           std::chrono::duration<double>(std::chrono::steady_clock::now() - im.started_at).count());
  w.family("lionet_memory_trims_total", "counter",
           "Times free allocator memory was returned to the system after connections dropped (memory.trim_*).");
  w.sample("lionet_memory_trims_total", {}, static_cast<double>(im.trims.load(std::memory_order_relaxed)));
  {
    const hook::RegularFileStats fs = hook::regular_file_stats();
    w.family("lionet_hook_file_calls_total", "counter",
             "Reads and writes of regular files from fibers, by where they ran: worker (RWF_NOWAIT hit), "
             "inline (a write in place, hook.file_inline_write_max), offload (the offload pool, parked).");
    w.sample("lionet_hook_file_calls_total", L{{"path", "worker"}}, static_cast<double>(fs.fast_path));
    w.sample("lionet_hook_file_calls_total", L{{"path", "inline"}}, static_cast<double>(fs.inline_writes));
    w.sample("lionet_hook_file_calls_total", L{{"path", "offload"}}, static_cast<double>(fs.offloaded));
  }

  std::vector<std::pair<std::string, SchedulerStats>> pools;
  for (const auto& p : im.pools)
    if (p->sched) pools.emplace_back(p->name, p->sched->stats());
  auto pool_family = [&](const char* name, const char* type, const char* help, auto field) {
    w.family(name, type, help);
    for (const auto& [n, s] : pools) w.sample(name, L{{"pool", n}}, static_cast<uint64_t>(field(s)));
  };
  pool_family("lionet_worker_threads", "gauge", "Worker threads of the pool.", [](auto& s) { return s.threads; });
  pool_family("lionet_fibers_alive", "gauge", "Fibers spawned and not yet finished.",
              [](auto& s) { return s.fibers_alive; });
  pool_family("lionet_fibers_created_total", "counter", "Fibers spawned.", [](auto& s) { return s.fibers_created; });
  pool_family("lionet_fiber_switches_total", "counter", "Context switches into fibers.",
              [](auto& s) { return s.switches; });
  pool_family("lionet_fiber_steals_total", "counter", "Successful work-steal operations.",
              [](auto& s) { return s.steals; });
  pool_family("lionet_fiber_parks_total", "counter", "Fiber waits that switched out (IO, sync, sleep, join).",
              [](auto& s) { return s.fiber_parks; });
  pool_family("lionet_worker_sleeps_total", "counter", "Times a worker slept for lack of work.",
              [](auto& s) { return s.worker_sleeps; });
  pool_family("lionet_fiber_stacks_mapped", "gauge", "Fiber stacks carved from slab mappings: in use or cached.",
              [](auto& s) { return s.stacks_mapped; });
  pool_family("lionet_fiber_stacks_cached", "gauge", "Fiber stacks mapped but unused, kept for reuse.",
              [](auto& s) { return s.stacks_cached; });
  pool_family("lionet_fiber_stack_reserved_bytes", "gauge",
              "Address space reserved for fiber stacks (virtual; see fiber.max_stack_memory).",
              [](auto& s) { return s.stack_bytes_reserved; });

  // http_only: http(s) servers; otherwise every server with a TcpServer (not syslog).
  auto server_family = [&](const char* name, const char* type, const char* help, auto field, bool http_only) {
    w.family(name, type, help);
    for (const auto& s : im.servers) {
      if (http_only ? !s->http : !s->has_listener()) continue;
      w.sample(name, L{{"server", s->cfg.name}, {"type", s->cfg.type}}, static_cast<uint64_t>(field(*s)));
    }
  };
  server_family(
      "lionet_connections_open", "gauge", "Connections being served.",
      [](const Running& s) { return s.listener().connections(); }, false);
  server_family(
      "lionet_connections_accepted_total", "counter", "Connections accepted.",
      [](const Running& s) { return s.listener().accepted(); }, false);
  server_family(
      "lionet_connections_rejected_total", "counter", "Connections closed at once: over max_connections.",
      [](const Running& s) { return s.listener().rejected(); }, false);
  // Refused at accept (address rules, connections per address): every server with a TCP
  // listener, syslog's TCP listeners summed.
  auto accept_family = [&](const char* name, const char* help, auto field) {
    w.family(name, "counter", help);
    for (const auto& s : im.servers) {
      uint64_t v = 0;
      if (s->has_listener()) {
        v = field(s->listener());
      } else if (s->syslog) {
        for (TcpServer* t : s->syslog->tcp_servers()) v += field(*t);
      } else {
        continue;
      }
      w.sample(name, L{{"server", s->cfg.name}, {"type", s->cfg.type}}, v);
    }
  };
  accept_family("lionet_connections_denied_total",
                "Connections closed at accept: the server's allow/deny refused "
                "the address (http(s) answer 403 instead: lionet_http_access_denied_total).",
                [](const TcpServer& t) { return t.denied(); });
  accept_family("lionet_connections_per_address_rejected_total",
                "Connections closed at accept: their address had max_connections_per_address open.",
                [](const TcpServer& t) { return t.per_address_rejected(); });
  // Per route of http(s) servers that have address rules / a rate limit (route "" = the
  // server's own allow/deny).
  auto access_family = [&](const char* name, const char* help, bool rate, auto field) {
    bool any = false;
    for (const auto& s : im.servers)
      for (const auto& [route, a] : s->access) any |= rate ? a->has_rate_limit : a->has_rules;
    if (!any) return;
    w.family(name, "counter", help);
    for (const auto& s : im.servers)
      for (const auto& [route, a] : s->access)
        if (rate ? a->has_rate_limit : a->has_rules)
          w.sample(name, L{{"server", s->cfg.name}, {"route", route}}, field(*a));
  };
  access_family("lionet_http_access_denied_total", "Requests answered 403 by allow/deny.", false,
                [](const Running::Access& a) { return a.denied.value(); });
  access_family("lionet_http_rate_limited_total", "Requests refused by the route's rate_limit (429 by default).", true,
                [](const Running::Access& a) { return a.rate.refused.value(); });
  access_family("lionet_http_rate_delayed_total", "Requests delayed by the route's rate_limit (within its burst).",
                true, [](const Running::Access& a) { return a.rate.delayed.value(); });
  server_family(
      "lionet_connections_no_fiber_total", "counter",
      "Connections closed at once: no fiber could be spawned (fiber.max_stack_memory).",
      [](const Running& s) { return s.listener().spawn_failures(); }, false);
  server_family(
      "lionet_received_bytes_total", "counter", "Bytes read from clients (TLS: decrypted).",
      [](const Running& s) { return s.m.bytes_in.value(); }, false);
  server_family(
      "lionet_sent_bytes_total", "counter", "Bytes written to clients (TLS: before encryption).",
      [](const Running& s) { return s.m.bytes_out.value(); }, false);
  auto syslog_family = [&](const char* name, const char* help, auto field) {
    bool any = false;
    for (const auto& s : im.servers) any |= s->syslog != nullptr;
    if (!any) return;
    w.family(name, "counter", help);
    for (const auto& s : im.servers)
      if (s->syslog) w.sample(name, L{{"server", s->cfg.name}}, static_cast<uint64_t>(field(*s->syslog)));
  };
  syslog_family("lionet_syslog_received_total", "Syslog messages taken from the sockets.",
                [](const syslog::Server& s) { return s.stats().received; });
  syslog_family("lionet_syslog_stored_total", "Syslog messages appended to the topic (acknowledged by the store).",
                [](const syslog::Server& s) { return s.stats().stored; });
  syslog_family("lionet_syslog_malformed_total", "Syslog messages stored raw: neither RFC 5424 nor RFC 3164.",
                [](const syslog::Server& s) { return s.stats().malformed; });
  syslog_family("lionet_syslog_truncated_total", "Syslog messages stored cut at max_message_size.",
                [](const syslog::Server& s) { return s.stats().truncated; });
  syslog_family("lionet_syslog_lost_total", "Syslog messages whose append failed (disk full, IO error).",
                [](const syslog::Server& s) { return s.stats().lost; });
  syslog_family("lionet_syslog_denied_total", "UDP datagrams dropped: the server's allow/deny refused the sender.",
                [](const syslog::Server& s) { return s.stats().denied; });
  syslog_family("lionet_syslog_kernel_drops_total",
                "UDP datagrams the kernel dropped with the receive buffer full (sk_drops, as SO_RXQ_OVFL counts).",
                [](const syslog::Server& s) { return s.kernel_drops(); });
  auto kafka_family = [&](const char* name, const char* help, auto field) {
    bool any = false;
    for (const auto& s : im.servers) any |= s->kafka != nullptr;
    if (!any) return;
    w.family(name, "counter", help);
    for (const auto& s : im.servers)
      if (s->kafka)
        w.sample(name, L{{"server", s->cfg.name}}, static_cast<uint64_t>(field(s->kafka->broker().stats())));
  };
  kafka_family("lionet_kafka_requests_total", "Kafka requests received.",
               [](const kafka::BrokerStats& b) { return b.requests; });
  kafka_family("lionet_kafka_records_in_total", "Records appended by Kafka Produce requests.",
               [](const kafka::BrokerStats& b) { return b.records_in; });
  kafka_family("lionet_kafka_records_out_total", "Records returned by Kafka Fetch requests.",
               [](const kafka::BrokerStats& b) { return b.records_out; });
  kafka_family("lionet_kafka_duplicates_total", "Idempotent retries acknowledged without an append.",
               [](const kafka::BrokerStats& b) { return b.duplicates; });
  kafka_family("lionet_kafka_malformed_total", "Malformed Kafka requests (each closed its connection).",
               [](const kafka::BrokerStats& b) { return b.malformed; });
  kafka_family("lionet_kafka_group_rebalances_total", "Consumer-group join phases completed (generations made).",
               [](const kafka::BrokerStats& b) { return b.groups.rebalances; });
  kafka_family("lionet_kafka_group_expired_members_total",
               "Consumer-group members removed for a missed session, rebalance or sync deadline.",
               [](const kafka::BrokerStats& b) { return b.groups.expired_members; });
  kafka_family("lionet_kafka_offset_commits_total", "Partitions committed by OffsetCommit requests.",
               [](const kafka::BrokerStats& b) { return b.groups.offset_commits; });
  {  // SASL listeners only
    bool any = false;
    for (const auto& s : im.servers) any |= s->kafka && s->cfg.sasl;
    if (any) {
      w.family("lionet_kafka_sasl_authentications_total", "counter",
               "SASL authentications on Kafka listeners, by mechanism and result (ok, failed).");
      for (const auto& s : im.servers) {
        if (!s->kafka || !s->cfg.sasl) continue;
        const kafka::BrokerStats b = s->kafka->broker().stats();
        for (int m = 0; m < kafka::kSaslMechanismCount; ++m) {
          const std::string mech(kafka::mechanism_name(static_cast<kafka::SaslMechanism>(m)));
          w.sample("lionet_kafka_sasl_authentications_total",
                   L{{"server", s->cfg.name}, {"mechanism", mech}, {"result", "ok"}}, b.sasl_ok[m]);
          w.sample("lionet_kafka_sasl_authentications_total",
                   L{{"server", s->cfg.name}, {"mechanism", mech}, {"result", "failed"}}, b.sasl_failed[m]);
        }
      }
      w.family("lionet_kafka_unauthenticated_requests_total", "counter",
               "Kafka requests other than ApiVersions/SaslHandshake/SaslAuthenticate before authentication (each "
               "closed its connection).");
      for (const auto& s : im.servers)
        if (s->kafka && s->cfg.sasl)
          w.sample("lionet_kafka_unauthenticated_requests_total", L{{"server", s->cfg.name}},
                   s->kafka->broker().stats().unauthenticated);
      w.family("lionet_kafka_authorization_failures_total", "counter",
               "Kafka answers refused by a SASL user's permissions (sasl.acls), by resource: topic "
               "(TOPIC_AUTHORIZATION_FAILED), group (GROUP_AUTHORIZATION_FAILED), cluster (InitProducerId).");
      for (const auto& s : im.servers) {
        if (!s->kafka || !s->cfg.sasl) continue;
        const kafka::BrokerStats b = s->kafka->broker().stats();
        w.sample("lionet_kafka_authorization_failures_total", L{{"server", s->cfg.name}, {"resource", "topic"}},
                 b.topic_denied);
        w.sample("lionet_kafka_authorization_failures_total", L{{"server", s->cfg.name}, {"resource", "group"}},
                 b.group_denied);
        w.sample("lionet_kafka_authorization_failures_total", L{{"server", s->cfg.name}, {"resource", "cluster"}},
                 b.cluster_denied);
      }
    }
  }
  w.family("lionet_http_requests_total", "counter", "HTTP responses from handlers, by status class.");
  for (const auto& s : im.servers) {
    if (!s->http) continue;
    for (int c = 0; c < 5; ++c)
      w.sample("lionet_http_requests_total", L{{"server", s->cfg.name}, {"class", kClass[c]}}, s->m.status[c].value());
  }
  server_family(
      "lionet_http_protocol_errors_total", "counter",
      "Requests the server itself refused (malformed, over a limit, timed out).",
      [](const Running& s) { return s.http->stats().errors.load(std::memory_order_relaxed); }, true);
  server_family(
      "lionet_http_timeouts_total", "counter", "Requests ended by a header/body timeout.",
      [](const Running& s) { return s.http->stats().timeouts.load(std::memory_order_relaxed); }, true);
  auto rel = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  server_family(
      "lionet_http2_connections_total", "counter", "Connections served as HTTP/2 (h2 or h2c).",
      [&](const Running& s) { return rel(s.h2.connections); }, true);
  server_family(
      "lionet_http2_streams_total", "counter", "HTTP/2 streams (requests) opened by clients.",
      [&](const Running& s) { return rel(s.h2.streams); }, true);
  server_family(
      "lionet_http2_streams_reset_by_peer_total", "counter", "RST_STREAM frames received from clients.",
      [&](const Running& s) { return rel(s.h2.resets_by_peer); }, true);
  server_family(
      "lionet_http2_stalled_connections_total", "counter",
      "HTTP/2 connections closed: a response held at a zero flow-control window past the write timeout.",
      [&](const Running& s) { return rel(s.h2.stalled); }, true);
  w.family("lionet_http2_goaways_sent_total", "counter",
           "GOAWAY frames sent, by reason: no_error (stop, idle, max_requests), protocol_error, "
           "enhance_your_calm (a flood limit), other.");
  for (const auto& s : im.servers) {
    if (!s->http) continue;
    const std::pair<const char*, const std::atomic<uint64_t>*> reasons[] = {
        {"no_error", &s->h2.goaway_no_error},
        {"protocol_error", &s->h2.goaway_protocol_error},
        {"enhance_your_calm", &s->h2.goaway_enhance_your_calm},
        {"other", &s->h2.goaway_other}};
    for (const auto& [reason, c] : reasons)
      w.sample("lionet_http2_goaways_sent_total", L{{"server", s->cfg.name}, {"reason", reason}}, rel(*c));
  }
  // Process-wide (http/handler_limits.h): every server, HTTP/1.1 and HTTP/2.
  w.family("lionet_http_handler_timeouts_total", "counter",
           "Handlers answered 504 because their deadline passed (route timeout, server handler_timeout).");
  w.sample("lionet_http_handler_timeouts_total", L{}, rel(http::handler_counters().timeouts));
  w.family("lionet_http_handlers_cancelled_total", "counter",
           "Handlers cancelled because their client went away (cancel_on_disconnect; logged 499).");
  w.sample("lionet_http_handlers_cancelled_total", L{}, rel(http::handler_counters().cancelled));
  w.family("lionet_fiber_os_locks_held_at_switch_total", "counter",
           "Scheduling points a fiber reached holding a pthread mutex (fiber.check_os_locks; each call site is "
           "logged once with its stack).");
  w.sample("lionet_fiber_os_locks_held_at_switch_total", L{}, lionet::os_lock_violations());
  w.family("lionet_http_request_duration_seconds", "histogram", "Handler time per request.");
  for (const auto& s : im.servers)
    if (s->http)
      w.histogram("lionet_http_request_duration_seconds", L{{"server", s->cfg.name}}, s->m.latency.snapshot());

  render_proxy_metrics(w, im);
  render_auth_metrics(w, im);

  std::unique_lock<std::mutex> logs_lk(im.access_logs_mu);
  if (!im.access_logs.empty()) {
    // Per file, not per server: servers naming one file share one log and one buffer.
    auto log_family = [&](const char* name, const char* help, uint64_t http::AccessLogStats::*field) {
      w.family(name, "counter", help);
      for (const auto& [path, log] : im.access_logs) w.sample(name, L{{"path", path}}, log->stats().*field);
    };
    log_family("lionet_access_log_lines_total",
               "Access log lines written to the file (servers naming one file share it).",
               &http::AccessLogStats::lines_written);
    log_family("lionet_access_log_dropped_total",
               "Access log lines lost: the buffer was full (the writer could not keep up) or a write failed.",
               &http::AccessLogStats::lines_dropped);
    log_family("lionet_access_log_write_errors_total", "Failed writes to the access log file.",
               &http::AccessLogStats::write_errors);
  }
  logs_lk.unlock();

  if (im.store) {
    const StorageApiStats& st = im.storage_stats;
    auto one = [&](const char* name, const char* help, const Counter& c) {
      w.family(name, "counter", help);
      w.sample(name, L{}, c.value());
    };
    one("lionet_storage_appends_total", "Acknowledged appends (POSTs).", st.appends);
    one("lionet_storage_appended_records_total", "Records appended.", st.append_records);
    one("lionet_storage_appended_bytes_total", "Key and value bytes appended.", st.append_bytes);
    one("lionet_storage_reads_total", "Record reads (GETs).", st.reads);
    one("lionet_storage_read_records_total", "Records returned by reads.", st.read_records);
    one("lionet_storage_read_bytes_total", "Key and value bytes returned by reads.", st.read_bytes);
    one("lionet_storage_errors_total", "Storage requests answered with an error.", st.errors);
  }
  return w.text();
}
}  // namespace lionet::app
