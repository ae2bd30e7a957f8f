// lionet/app/server_config.cc: YAML <-> the workers:/servers: structs, and the rules that span
// several entries. Defaults come from the structs, so docs and code cannot drift apart.
#include "lionet/app/server_config.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "lionet/app/static_route.h"
#include "lionet/app/websocket_route.h"
#include "lionet/config/fields.h"
#include "lionet/http/static_files.h"
#include "lionet/kafka/sasl.h"
#include "lionet/net/address.h"
#include "lionet/net/address_rules.h"

namespace lionet::app {
namespace {
const std::set<std::string> kServerTypes = {"http", "https", "echo", "syslog", "kafka"};
const std::set<std::string> kRouteTypes = {"static",       "storage", "metrics", "health",    "debug",
                                           "debug_fibers", "pprof",   "hello",   "websocket", "proxy"};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& v : s) out += (out.empty() ? "" : ", ") + v;
  return out;
}

std::string at(std::size_t i, const ServerConfig& s) {
  return "servers[" + std::to_string(i) + "]" + (s.name.empty() ? "" : " (" + s.name + ")");
}
}  // namespace

std::optional<std::pair<std::string_view, std::string_view>> split_syslog_listen(std::string_view text) {
  for (std::string_view p : {"udp", "tcp"}) {
    if (text.size() > p.size() + 3 && text.substr(0, p.size()) == p && text.substr(p.size(), 3) == "://")
      return std::make_pair(p, text.substr(p.size() + 3));
  }
  return std::nullopt;
}

TryFiles split_try_files(const std::vector<std::string>& entries) {
  TryFiles t;
  t.candidates = entries;
  if (!entries.empty() && (entries.back().starts_with('=') || entries.back().starts_with('@'))) {
    const std::string& last = entries.back();
    if (last[0] == '@') {
      t.route = last.substr(1);
    } else {
      t.status = std::atoi(last.c_str() + 1);  // checked at load: 200..599
    }
    t.candidates.pop_back();
  }
  return t;
}

void check_address_rules(const YAML::Node& n, const std::vector<std::string>& allow,
                         const std::vector<std::string>& deny) {
  for (const char* list : {"allow", "deny"}) {
    const auto& entries = list[0] == 'a' ? allow : deny;
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (std::string e = AddressRules::check_entry(entries[i]); !e.empty())
        config::field_error(n, list, "entry " + std::to_string(i) + ", '" + entries[i] + "': " + e);
  }
}

bool valid_route_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

std::string access_log_key(const std::string& path) {
  return path == "stdout" ? path : std::filesystem::path(path).lexically_normal().string();
}

std::optional<std::string> check_servers(const std::vector<ServerConfig>& servers,
                                         const std::map<std::string, WorkerPoolConfig>& pools) {
  std::map<std::string, std::size_t> used;  // canonical listen address -> server index
  std::map<std::string, std::size_t> access_logs;  // access_log_key -> first server writing it
  std::set<std::string> names;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const ServerConfig& s = servers[i];
    const std::string key = "servers[" + std::to_string(i) + "]";
    if (!s.name.empty() && !names.insert(s.name).second) return key + ".name: '" + s.name + "' is used twice";
    if (s.workers != "main" && !pools.contains(s.workers)) {
      std::string known = "main";
      for (const auto& [n, p] : pools) known += ", " + n;
      return key + ".workers: no worker pool named '" + s.workers + "' (defined: " + known + ")";
    }
    if (s.type == "https" && !s.tls) return key + ".tls: an https server needs tls.cert and tls.key";
    if (s.type != "https" && s.type != "kafka" && s.tls)
      return key + ".tls: only https and kafka servers take a tls section";
    if (s.sasl && s.type != "kafka") return key + ".sasl: only a kafka server takes a sasl section";
    if (s.sasl) {
      if (!s.tls && !s.sasl->allow_plaintext_sasl)
        return key +
               ".sasl: SASL without tls would send passwords (PLAIN) and SCRAM exchanges in the clear: add a tls "
               "section (a SASL_SSL listener), or say sasl.allow_plaintext_sasl: true (SASL_PLAINTEXT)";
      if (std::string e = kafka::SaslUsers::check_file(s.sasl->users); !e.empty()) return key + ".sasl.users: " + e;
    }
    if (s.type == "echo" && !s.routes.empty()) return key + ".routes: an echo server has no routes";
    if (s.access_log) {
      if (s.type == "echo" || s.type == "syslog" || s.type == "kafka")
        return key + ".access_log: only http and https servers write an access log";
      auto [it, fresh] = access_logs.emplace(access_log_key(s.access_log->path), i);
      const AccessLogConfig& first = *servers[it->second].access_log;  // the path may be spelt otherwise
      if (!fresh && (first.format != s.access_log->format || first.buffer_bytes != s.access_log->buffer_bytes ||
                     first.flush_interval != s.access_log->flush_interval)) {
        return key + ".access_log: '" + s.access_log->path + "' is also the access log of " +
               at(it->second, servers[it->second]) +
               " with other settings; servers sharing a file share one log: give it the same format, buffer_bytes "
               "and flush_interval";
      }
    }
    if ((s.type == "syslog" || s.type == "kafka") && !s.routes.empty())
      return key + ".routes: a " + s.type + " server has no routes";
    for (std::size_t j = 0; j < s.listen.size(); ++j) {
      const std::string lkey = key + ".listen[" + std::to_string(j) + "]";
      std::string_view text = s.listen[j], proto = "tcp";
      if (s.type == "syslog") {
        const auto split = split_syslog_listen(text);
        if (!split) return lkey + ": '" + s.listen[j] + "' needs udp:// or tcp:// before host:port";
        proto = split->first;
        text = split->second;
      }
      auto a = Address::parse(text);
      if (!a) return lkey + ": '" + s.listen[j] + "' is not host:port (" + a.error().message() + ")";
      auto [it, fresh] = used.emplace(std::string(proto) + " " + a->to_string(), i);
      if (!fresh) return lkey + ": " + s.listen[j] + " is already used by " + at(it->second, servers[it->second]);
    }
    for (std::size_t j = 0; j < s.routes.size(); ++j) {
      const RouteConfig& r = s.routes[j];
      if (!r.auth || !r.auth->client_cert) continue;
      const std::string rkey = key + ".routes[" + std::to_string(j) + "].auth.client_cert";
      if (s.type != "https") return rkey + ": client certificates need an https server (this one is " + s.type + ")";
      if (s.tls->verify_client == "off")
        return rkey +
               ": the server asks for no client certificate: set tls.verify_client (optional or require) "
               "and tls.client_ca";
    }
    std::set<std::string> paths;
    for (std::size_t j = 0; j < s.routes.size(); ++j) {
      if (s.routes[j].path.empty()) continue;  // a named route: no URL
      if (!paths.insert(s.routes[j].path).second) {
        return key + ".routes[" + std::to_string(j) + "].path: '" + s.routes[j].path + "' is routed twice";
      }
    }
  }
  return std::nullopt;
}
}  // namespace lionet::app

namespace lionet::config {
namespace {
// A bad value in routes[j].field of the server node n (a rule across the server's routes):
// the error points at that field's line, keyed "servers[i].routes[j].field".
[[noreturn]] void route_error(const YAML::Node& n, std::size_t j, const char* field, std::string reason) {
  const YAML::Node r = n["routes"][j];
  const YAML::Node f = r[field];
  ConversionError e(f ? f.Mark() : r.Mark(), std::move(reason));
  e.prepend_path(std::string(".") + field);
  e.prepend_path("[" + std::to_string(j) + "]");
  e.prepend_path(".routes");
  throw e;
}

// One server's route names: unique, and every try_files "@name" names another of its routes,
// without a loop (a -> b -> a would hand a request around for ever).
void check_route_names(const YAML::Node& n, const std::vector<app::RouteConfig>& routes) {
  std::map<std::string, std::size_t> by_name;
  for (std::size_t j = 0; j < routes.size(); ++j) {
    if (routes[j].name.empty()) continue;
    auto [it, fresh] = by_name.emplace(routes[j].name, j);
    if (!fresh) {
      route_error(n, j, "name",
                  "'" + routes[j].name + "' also names routes[" + std::to_string(it->second) +
                      "]; route names are unique within a server");
    }
  }
  auto fallback_of = [&](std::size_t j) { return app::split_try_files(routes[j].try_files).route; };
  for (std::size_t j = 0; j < routes.size(); ++j) {
    std::string target = fallback_of(j);
    if (target.empty()) continue;
    if (!by_name.contains(target)) {
      std::string known;
      for (const auto& [name, k] : by_name) known += (known.empty() ? "" : ", ") + name;
      route_error(n, j, "try_files",
                  "no route named '" + target + "' in this server (named: " + (known.empty() ? "none" : known) + ")");
    }
    std::string chain = routes[j].name.empty() ? "routes[" + std::to_string(j) + "]" : routes[j].name;
    std::set<std::size_t> seen = {j};
    while (!target.empty()) {
      const std::size_t k = by_name.at(target);
      chain += " -> @" + target;
      if (k == j) route_error(n, j, "try_files", "a fallback loop: " + chain);
      if (!seen.insert(k).second) break;  // a loop j leads into: reported at a route in it
      target = fallback_of(k);
      if (!target.empty() && !by_name.contains(target)) break;  // reported at that route
    }
  }
}
}  // namespace
using app::AccessLogConfig;
using app::KafkaAclConfig;
using app::KafkaSaslConfig;
using app::RateLimitConfig;
using app::RouteConfig;
using app::ServerConfig;
using app::TlsConfig;
using app::WorkerPoolConfig;

namespace {
using W = WorkerPoolConfig;
using R = RouteConfig;
using S = ServerConfig;

const Fields<WorkerPoolConfig> kWorkerPoolFields = {
    {"threads", &W::threads},
    {"stack_size", &W::stack_size},
    {"max_stack_memory", &W::max_stack_memory},
    {"io_backend", &W::io_backend},
};

// A route's keys, in the order they are written: its own, then its type's (static; debug,
// debug_fibers and pprof; websocket; proxy: only that list is written). Every list but the
// proxy's is read for every route; read_proxy_route reads the proxy's, for a proxy route.
const Fields<RouteConfig> kRouteFields = {
    {"path", &R::path, kOmitEmpty},   {"name", &R::name, kOmitEmpty},
    {"type", &R::type, kRequired},    {"timeout", &R::timeout},
    {"allow", &R::allow, kOmitEmpty}, {"deny", &R::deny, kOmitEmpty},
    {"rate_limit", &R::rate_limit},   {"auth", &R::auth},
};
const Fields<RateLimitConfig> kRateLimitFields = {
    {"rate", &RateLimitConfig::rate, kRequired}, {"burst", &RateLimitConfig::burst},
    {"nodelay", &RateLimitConfig::nodelay},      {"key", &RateLimitConfig::key},
    {"max_keys", &RateLimitConfig::max_keys},    {"status", &RateLimitConfig::status},
};
const Fields<RouteConfig> kStaticRouteFields = {
    {"try_files", &R::try_files, kOmitEmpty},
    {"root", &R::root},
    {"mode", &R::mode},
    {"memory_max", &R::memory_max},
    {"sendfile_min", &R::sendfile_min},
    {"chunk_size", &R::chunk_size},
    {"cache_bytes", &R::cache_bytes},
    {"open_file_cache", &R::open_file_cache},
    {"open_file_cache_valid", &R::open_file_cache_valid},
    {"precompressed", &R::precompressed},
    {"follow_symlinks_outside_root", &R::follow_symlinks_outside_root},
    {"index", &R::index},
};
const Fields<RouteConfig> kDebugFibersRouteFields = {{"allow_remote", &R::allow_remote},
                                                     {"max_seconds", &R::max_seconds}};
const Fields<RouteConfig> kWebSocketRouteFields = {
    {"handler", &R::handler},
    {"max_message_size", &R::max_message_size},
    {"ping_interval", &R::ping_interval},
    {"send_queue_bytes", &R::send_queue_bytes},
    {"deflate", &R::deflate},
};

const Fields<TlsConfig> kTlsFields = {
    {"cert", &TlsConfig::cert, kRequired},
    {"key", &TlsConfig::key, kRequired},
    {"generate_self_signed", &TlsConfig::generate_self_signed},
    {"min_version", &TlsConfig::min_version},
    {"alpn", &TlsConfig::alpn},
    {"handshake_timeout", &TlsConfig::handshake_timeout},
    {"verify_client", &TlsConfig::verify_client},
    {"client_ca", &TlsConfig::client_ca, kOmitEmpty},
};

const Fields<KafkaAclConfig> kKafkaAclFields = {
    {"produce", &KafkaAclConfig::produce},
    {"consume", &KafkaAclConfig::consume},
    {"groups", &KafkaAclConfig::groups},
};

const Fields<KafkaSaslConfig> kKafkaSaslFields = {
    {"mechanisms", &KafkaSaslConfig::mechanisms},
    {"users", &KafkaSaslConfig::users, kRequired},
    {"allow_plaintext_sasl", &KafkaSaslConfig::allow_plaintext_sasl},
    {"acls", &KafkaSaslConfig::acls, kOmitEmpty},
};

const Fields<AccessLogConfig> kAccessLogFields = {
    {"path", &AccessLogConfig::path, kRequired},
    {"format", &AccessLogConfig::format},
    {"buffer_bytes", &AccessLogConfig::buffer_bytes},
    {"flush_interval", &AccessLogConfig::flush_interval},
};

// A server's keys, in the order they are written: every type's, syslog's and kafka's (written
// for that type only; every list is read for every server), then its sections.
const Fields<ServerConfig> kServerFields = {
    {"name", &S::name},
    {"type", &S::type, kRequired},
    {"listen", &S::listen, kRequired},
    {"workers", &S::workers},
    {"max_connections", &S::max_connections},
    {"max_connections_per_address", &S::max_connections_per_address},
    {"allow", &S::allow, kOmitEmpty},
    {"deny", &S::deny, kOmitEmpty},
    {"reuse_port", &S::reuse_port},
    {"idle_timeout", &S::idle_timeout},
    {"header_timeout", &S::header_timeout},
    {"body_timeout", &S::body_timeout},
    {"write_timeout", &S::write_timeout},
    {"max_keepalive_requests", &S::max_keepalive_requests},
    {"handler_timeout", &S::handler_timeout},
    {"cancel_on_disconnect", &S::cancel_on_disconnect},
    {"drain_body_max", &S::drain_body_max},
    {"server_name", &S::server_name},
    {"input_buffer", &S::input_buffer},
    {"drain_silent_grace", &S::drain_silent_grace},
    {"max_request_line", &S::max_request_line},
    {"max_header_bytes", &S::max_header_bytes},
    {"max_headers", &S::max_headers},
    {"max_body_bytes", &S::max_body_bytes},
    {"http2", &S::http2},
    {"http2_max_concurrent_streams", &S::http2_max_concurrent_streams},
    {"http2_initial_window_size", &S::http2_initial_window_size},
    {"http2_max_frame_size", &S::http2_max_frame_size},
    {"http2_max_header_list_size", &S::http2_max_header_list_size},
    {"http2_max_requests", &S::http2_max_requests},
    {"http2_reset_burst", &S::http2_reset_burst},
    {"http2_resets_per_second", &S::http2_resets_per_second},
    {"http2_max_continuations", &S::http2_max_continuations},
    {"http2_max_empty_frames", &S::http2_max_empty_frames},
    {"http2_max_outbound_ack", &S::http2_max_outbound_ack},
};
const Fields<ServerConfig> kSyslogServerFields = {
    {"topic", &S::topic},
    {"key", &S::key},
    {"batch_max", &S::batch_max},
    {"linger", &S::linger},
    {"max_message_size", &S::max_message_size},
    {"recv_buffer", &S::recv_buffer},
};
const Fields<ServerConfig> kKafkaServerFields = {
    {"advertised_host", &S::advertised_host},
    {"advertised_port", &S::advertised_port},
    {"max_request_size", &S::max_request_size},
    {"group_min_session_timeout", &S::group_min_session_timeout},
    {"group_max_session_timeout", &S::group_max_session_timeout},
    {"offset_metadata_max_bytes", &S::offset_metadata_max_bytes},
};
const Fields<ServerConfig> kServerSectionFields = {
    {"tls", &S::tls},
    {"sasl", &S::sasl},
    {"access_log", &S::access_log},
    {"routes", &S::routes, kOmitEmpty},
};
}  // namespace

WorkerPoolConfig ConfigTraits<WorkerPoolConfig>::from_yaml(const YAML::Node& n) {
  WorkerPoolConfig w = kWorkerPoolFields.decode(n);
  if (w.max_stack_memory && *w.max_stack_memory != 0 && *w.max_stack_memory < 64 * 1024)
    field_error(n, "max_stack_memory", "must be 0 (no limit) or at least 65536");
  if (w.threads && (*w.threads < 0 || *w.threads > 1024)) field_error(n, "threads", "must be in 0..1024");
  if (w.stack_size && (*w.stack_size < 16 * 1024 || *w.stack_size > 64 * 1024 * 1024)) {
    field_error(n, "stack_size", "must be in 16384..67108864");
  }
  if (w.io_backend && *w.io_backend != "auto" && *w.io_backend != "epoll" && *w.io_backend != "io_uring") {
    field_error(n, "io_backend", "must be auto, epoll or io_uring, got '" + *w.io_backend + "'");
  }
  return w;
}
YAML::Node ConfigTraits<WorkerPoolConfig>::to_yaml(const WorkerPoolConfig& w) { return kWorkerPoolFields.encode(w); }

RateLimitConfig ConfigTraits<RateLimitConfig>::from_yaml(const YAML::Node& n) {
  RateLimitConfig c = kRateLimitFields.decode(n);
  if (!(c.rate > 0) || c.rate > 1e9) field_error(n, "rate", "requests per second per key: above 0, at most 1e9");
  if (c.burst > 100000000) field_error(n, "burst", "must be in 0..100000000");
  if (c.key != "address" && (!c.key.starts_with("header:") || c.key.size() == 7))
    field_error(n, "key", "must be address or header:NAME (e.g. header:X-Api-Key), got '" + c.key + "'");
  if (c.max_keys < 1 || c.max_keys > (1u << 24)) field_error(n, "max_keys", "must be in 1..16777216");
  if (c.status < 400 || c.status > 599) field_error(n, "status", "must be in 400..599");
  return c;
}
YAML::Node ConfigTraits<RateLimitConfig>::to_yaml(const RateLimitConfig& c) { return kRateLimitFields.encode(c); }

RouteConfig ConfigTraits<RouteConfig>::from_yaml(const YAML::Node& n) {
  expect_keys(n, kRouteFields, app::static_route_fields(), kDebugFibersRouteFields, app::websocket_route_fields(),
              app::proxy_route_fields());
  RouteConfig r;
  for (const auto* fields :
       {&kRouteFields, &app::static_route_fields(), &kDebugFibersRouteFields, &app::websocket_route_fields()})
    fields->read(n, r);
  if (n["path"] && (r.path.empty() || r.path[0] != '/')) field_error(n, "path", "a route path starts with '/'");
  if (n["name"] && !app::valid_route_name(r.name))
    field_error(n, "name", "a route name is letters, digits, '_', '-' and '.' (\"@name\" in try_files refers to it)");
  if (r.path.empty() && r.name.empty())
    conversion_error(n, "a route needs a path, or a name (a named route is reached only as a try_files fallback)");
  if (!app::kRouteTypes.contains(r.type)) {
    field_error(n, "type", "unknown route type '" + r.type + "' (expected one of " + app::join(app::kRouteTypes) + ")");
  }
  if (r.type == "proxy") r.proxy = app::read_proxy_route(n);
  app::check_address_rules(n, r.allow, r.deny);
  if (r.type == "storage" && !r.name.empty())
    field_error(n, "name", "a storage route cannot be named: it is several routes under its path, not one handler");
  app::check_static_route(n, r);
  app::check_websocket_route(n, r);
  if (n["max_seconds"] && (r.max_seconds < 1 || r.max_seconds > 86400))
    field_error(n, "max_seconds", "the longest CPU profile, in seconds: 1..86400");
  return r;
}
YAML::Node ConfigTraits<RouteConfig>::to_yaml(const RouteConfig& r) {
  YAML::Node n = kRouteFields.encode(r);
  if (r.type == "static") app::static_route_fields().write(n, r);
  if (r.type == "debug" || r.type == "debug_fibers" || r.type == "pprof") kDebugFibersRouteFields.write(n, r);
  if (r.type == "websocket") app::websocket_route_fields().write(n, r);
  if (r.type == "proxy") app::proxy_route_fields().write(n, r.proxy);
  return n;
}

TlsConfig ConfigTraits<TlsConfig>::from_yaml(const YAML::Node& n) {
  TlsConfig t = kTlsFields.decode(n);
  if (t.min_version != "TLS1.2" && t.min_version != "TLS1.3") {
    field_error(n, "min_version", "must be TLS1.2 or TLS1.3, got '" + t.min_version + "'");
  }
  if (t.handshake_timeout.count() <= 0) field_error(n, "handshake_timeout", "must be positive");
  if (t.verify_client != "off" && t.verify_client != "optional" && t.verify_client != "require")
    field_error(n, "verify_client", "must be off, optional or require, got '" + t.verify_client + "'");
  if (t.verify_client != "off" && t.client_ca.empty())
    field_error(n, "client_ca", "verify_client " + t.verify_client + " needs client_ca (the CA certificates, PEM)");
  return t;
}
YAML::Node ConfigTraits<TlsConfig>::to_yaml(const TlsConfig& t) { return kTlsFields.encode(t); }

KafkaAclConfig ConfigTraits<KafkaAclConfig>::from_yaml(const YAML::Node& n) {
  KafkaAclConfig a = kKafkaAclFields.decode(n);
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {
      {"produce", &a.produce}, {"consume", &a.consume}, {"groups", &a.groups}};
  for (const auto& [k, list] : lists)
    for (const std::string& p : *list)
      if (p.empty() || p.find('*') < p.size() - 1)
        field_error(n, k, "'" + p + "': a pattern is a name, \"*\", or a prefix ending in '*'");
  return a;
}
YAML::Node ConfigTraits<KafkaAclConfig>::to_yaml(const KafkaAclConfig& a) { return kKafkaAclFields.encode(a); }

KafkaSaslConfig ConfigTraits<KafkaSaslConfig>::from_yaml(const YAML::Node& n) {
  KafkaSaslConfig c = kKafkaSaslFields.decode(n);
  if (c.mechanisms.empty()) field_error(n, "mechanisms", "needs at least one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512");
  std::set<std::string> seen;
  for (const std::string& m : c.mechanisms) {
    if (!kafka::parse_mechanism(m))
      field_error(n, "mechanisms",
                  "unknown SASL mechanism '" + m + "' (expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)");
    if (!seen.insert(m).second) field_error(n, "mechanisms", "'" + m + "' is given twice");
  }
  if (c.users.empty()) field_error(n, "users", "needs the path of a name:password file (mode 0600)");
  return c;
}
YAML::Node ConfigTraits<KafkaSaslConfig>::to_yaml(const KafkaSaslConfig& c) { return kKafkaSaslFields.encode(c); }

AccessLogConfig ConfigTraits<AccessLogConfig>::from_yaml(const YAML::Node& n) {
  AccessLogConfig a = kAccessLogFields.decode(n);
  if (a.path.empty()) field_error(n, "path", "needs stdout or a file path");
  if (!http::parse_access_log_format(a.format)) {
    field_error(n, "format", "unknown access log format '" + a.format + "' (expected combined or json)");
  }
  if (a.buffer_bytes < 4096 || a.buffer_bytes > (std::size_t{1} << 30)) {
    field_error(n, "buffer_bytes", "must be in 4096..1073741824");
  }
  if (a.flush_interval.count() < 1 || a.flush_interval.count() > 3600000) {
    field_error(n, "flush_interval", "must be in 1ms..3600000ms");
  }
  return a;
}
YAML::Node ConfigTraits<AccessLogConfig>::to_yaml(const AccessLogConfig& a) { return kAccessLogFields.encode(a); }

ServerConfig ConfigTraits<ServerConfig>::from_yaml(const YAML::Node& n) {
  expect_keys(n, kServerFields, kSyslogServerFields, kKafkaServerFields, kServerSectionFields);
  ServerConfig s;
  for (const auto* fields : {&kServerFields, &kSyslogServerFields, &kKafkaServerFields, &kServerSectionFields})
    fields->read(n, s);
  if (!app::kServerTypes.contains(s.type)) {
    field_error(n, "type",
                "unknown server type '" + s.type + "' (expected one of " + app::join(app::kServerTypes) + ")");
  }
  if (s.listen.empty()) field_error(n, "listen", "needs at least one host:port");
  // kafka and syslog write to this process's store: two processes behind one port would each
  // hold half of a topic (and a Kafka client would see one broker's data change under it).
  if (s.reuse_port && s.type != "http" && s.type != "https" && s.type != "echo")
    field_error(
        n, "reuse_port",
        "applies to http, https and echo servers only (a " + s.type + " server writes to this process's own store)");
  if (s.type == "kafka" && !n["idle_timeout"]) s.idle_timeout = std::chrono::milliseconds(600000);
  if (s.advertised_port > 65535) field_error(n, "advertised_port", "must be in 0..65535 (0: the listen port)");
  if (s.max_request_size < 1024 || s.max_request_size > (std::size_t{1} << 30))
    field_error(n, "max_request_size", "must be in 1024..1073741824");
  if (s.group_min_session_timeout.count() < 1 || s.group_min_session_timeout.count() > 3600000)
    field_error(n, "group_min_session_timeout", "must be in 1ms..3600000ms");
  if (s.group_max_session_timeout.count() < 1 || s.group_max_session_timeout.count() > 86400000)
    field_error(n, "group_max_session_timeout", "must be in 1ms..86400000ms");
  if (s.group_max_session_timeout < s.group_min_session_timeout)
    field_error(n, "group_max_session_timeout", "must be at least group_min_session_timeout");
  if (s.offset_metadata_max_bytes > 32767)
    field_error(n, "offset_metadata_max_bytes", "must be in 0..32767 (a Kafka string's length)");
  check_route_names(n, s.routes);
  app::check_address_rules(n, s.allow, s.deny);
  if (s.max_connections_per_address > 1000000)
    field_error(n, "max_connections_per_address", "must be in 0..1000000 (0: no limit)");
  for (std::size_t i = 0; i < s.routes.size(); ++i)
    if (s.routes[i].timeout.count() < 0) field_error(n["routes"][i], "timeout", "must be 0 (none) or positive");
  if (s.max_connections < 1 || s.max_connections > 1000000) {
    field_error(n, "max_connections", "must be in 1..1000000");
  }
  for (const char* k : {"idle_timeout", "header_timeout", "body_timeout", "write_timeout"}) {
    if (n[k] && decode<std::chrono::milliseconds>(n[k]).count() <= 0) field_error(n, k, "must be positive");
  }
  if (s.handler_timeout.count() < 0) field_error(n, "handler_timeout", "must be 0 (none) or positive");
  if (s.drain_silent_grace.count() < 0) field_error(n, "drain_silent_grace", "must not be negative");
  if (s.input_buffer < 512 || s.input_buffer > s.max_header_bytes + s.max_request_line)
    field_error(n, "input_buffer", "must be in 512..max_header_bytes + max_request_line");
  if (s.server_name.find_first_of("\r\n") != std::string::npos)
    field_error(n, "server_name", "must not contain a line break");
  if (s.key != "host" && s.key != "app") field_error(n, "key", "must be host or app, got '" + s.key + "'");
  if (s.batch_max < 1 || s.batch_max > 65536) field_error(n, "batch_max", "must be in 1..65536");
  if (s.linger.count() < 0 || s.linger.count() > 1000) field_error(n, "linger", "must be in 0ms..1000ms");
  if (s.max_message_size < 480 || s.max_message_size > (1u << 20)) {
    field_error(n, "max_message_size", "must be in 480..1048576");
  }
  if (s.recv_buffer < 4096 || s.recv_buffer > (std::size_t{1} << 28)) {
    field_error(n, "recv_buffer", "must be in 4096..268435456");
  }
  if (s.max_request_line < 64) field_error(n, "max_request_line", "must be at least 64");
  if (s.max_header_bytes < 256) field_error(n, "max_header_bytes", "must be at least 256");
  if (s.max_headers < 1) field_error(n, "max_headers", "must be at least 1");
  if (s.http2_max_concurrent_streams < 1) field_error(n, "http2_max_concurrent_streams", "must be at least 1");
  if (s.http2_initial_window_size < 1 || s.http2_initial_window_size > 2147483647u) {
    field_error(n, "http2_initial_window_size", "must be in 1..2147483647 (RFC 9113 6.5.2)");
  }
  if (s.http2_max_frame_size < 16384 || s.http2_max_frame_size > 16777215u) {
    field_error(n, "http2_max_frame_size", "must be in 16384..16777215 (RFC 9113 6.5.2)");
  }
  if (s.http2_max_header_list_size < 256) field_error(n, "http2_max_header_list_size", "must be at least 256");
  for (const char* k :
       {"http2_max_requests", "http2_reset_burst", "http2_max_continuations", "http2_max_outbound_ack"}) {
    if (n[k] && decode<uint32_t>(n[k]) < 1) field_error(n, k, "must be at least 1");
  }
  return s;
}
YAML::Node ConfigTraits<ServerConfig>::to_yaml(const ServerConfig& s) {
  YAML::Node n = kServerFields.encode(s);
  if (s.type == "syslog") kSyslogServerFields.write(n, s);
  if (s.type == "kafka") kKafkaServerFields.write(n, s);
  kServerSectionFields.write(n, s);
  return n;
}
}  // namespace lionet::config

namespace lionet::app {
const config::Fields<RouteConfig>& static_route_fields() { return config::kStaticRouteFields; }
const config::Fields<RouteConfig>& websocket_route_fields() { return config::kWebSocketRouteFields; }
}  // namespace lionet::app
