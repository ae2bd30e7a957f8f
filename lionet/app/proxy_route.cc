// lionet/app/proxy_route.cc: proxy route YAML and ProxyOptions (see proxy_route.h).
#include "lionet/app/proxy_route.h"

#include <charconv>
#include <stdexcept>

#include "lionet/ssl/ssl_context.h"

namespace lionet::config {
namespace {
using app::ProxyHealthConfig;
using app::ProxyUpstreamTlsConfig;
const Fields<ProxyHealthConfig> kHealthFields = {
    {"path", &ProxyHealthConfig::path},       {"interval", &ProxyHealthConfig::interval},
    {"timeout", &ProxyHealthConfig::timeout}, {"expect", &ProxyHealthConfig::expect},
    {"fails", &ProxyHealthConfig::fails},     {"passes", &ProxyHealthConfig::passes},
};
const Fields<ProxyUpstreamTlsConfig> kUpstreamTlsFields = {
    {"verify", &ProxyUpstreamTlsConfig::verify},
    {"ca_file", &ProxyUpstreamTlsConfig::ca_file},
};
}  // namespace

template <>
struct ConfigTraits<ProxyHealthConfig> {
  static ProxyHealthConfig from_yaml(const YAML::Node& n) {
    ProxyHealthConfig h = kHealthFields.decode(n);
    if (h.path.empty() || h.path[0] != '/') conversion_error(n["path"], "a health check path starts with '/'");
    if (h.interval.count() < 10 || h.interval.count() > 3600000)
      conversion_error(n["interval"], "must be in 10ms..3600000ms");
    if (h.timeout.count() < 1 || h.timeout.count() > 600000) conversion_error(n["timeout"], "must be in 1ms..600000ms");
    if (h.expect.size() > 3 || h.expect.find_first_not_of("0123456789") != std::string::npos)
      conversion_error(n["expect"], "a status or its first digits: \"200\", \"2\" (any 2xx), \"\" (any)");
    if (h.fails < 1 || h.fails > 100) conversion_error(n["fails"], "must be in 1..100");
    if (h.passes < 1 || h.passes > 100) conversion_error(n["passes"], "must be in 1..100");
    return h;
  }
  static YAML::Node to_yaml(const ProxyHealthConfig& h) { return kHealthFields.encode(h); }
};
template <>
struct ConfigTraits<ProxyUpstreamTlsConfig> {
  static ProxyUpstreamTlsConfig from_yaml(const YAML::Node& n) { return kUpstreamTlsFields.decode(n); }
  static YAML::Node to_yaml(const ProxyUpstreamTlsConfig& t) { return kUpstreamTlsFields.encode(t); }
};
}  // namespace lionet::config

namespace lionet::app {
namespace {
using config::conversion_error;
using P = ProxyRouteConfig;

const config::Fields<ProxyRouteConfig> kProxyRouteFields = {
    {"upstreams", &P::upstreams, config::kRequired},
    {"balance", &P::balance},
    {"hash_key", &P::hash_key},
    {"strip_prefix", &P::strip_prefix},
    {"add_prefix", &P::add_prefix},
    {"host", &P::host},
    {"via", &P::via},
    {"connect_timeout", &P::connect_timeout},
    {"send_timeout", &P::send_timeout},
    {"read_timeout", &P::read_timeout},
    {"try_timeout", &P::try_timeout},
    {"max_tries", &P::max_tries},
    {"max_fails", &P::max_fails},
    {"fail_timeout", &P::fail_timeout},
    {"keepalive", &P::keepalive},
    {"keepalive_timeout", &P::keepalive_timeout},
    {"keepalive_requests", &P::keepalive_requests},
    {"buffer_size", &P::buffer_size},
    {"tunnel_idle_timeout", &P::tunnel_idle_timeout},
    {"errors", &P::errors},
    {"upstream_tls", &P::upstream_tls},
    {"health_check", &P::health_check},
};
}  // namespace

const config::Fields<ProxyRouteConfig>& proxy_route_fields() { return kProxyRouteFields; }

ProxyRouteConfig read_proxy_route(const YAML::Node& n) {
  ProxyRouteConfig p;
  kProxyRouteFields.read(n, p);
  http::ProxyOptions parsed;  // the upstream list as http/ checks it
  for (const auto& u : p.upstreams) {
    auto up = http::parse_proxy_upstream(u);
    if (!up) conversion_error(n["upstreams"], "'" + u + "': expected host:port, optionally followed by weight=1..1000");
    parsed.upstreams.push_back(std::move(*up));
  }
  if (std::string why = http::proxy_options_problem(parsed); !why.empty()) conversion_error(n["upstreams"], why);
  if (p.balance != "round_robin" && p.balance != "least_conn" && p.balance != "hash")
    conversion_error(n["balance"], "unknown balance '" + p.balance + "' (expected round_robin, least_conn or hash)");
  if (p.hash_key.empty()) conversion_error(n["hash_key"], "ip, or a request header's name");
  if (!p.add_prefix.empty() && (p.add_prefix[0] != '/' || p.add_prefix.back() == '/'))
    conversion_error(n["add_prefix"], "starts with '/' and does not end with one (\"/v2\")");
  for (const char* k : {"connect_timeout", "send_timeout", "read_timeout", "tunnel_idle_timeout"}) {
    const YAML::Node v = n[k];
    if (v && config::decode<std::chrono::milliseconds>(v).count() <= 0) conversion_error(v, "must be positive");
  }
  if (p.try_timeout.count() < 0) conversion_error(n["try_timeout"], "must be 0 (no bound) or positive");
  if (p.fail_timeout.count() < 0) conversion_error(n["fail_timeout"], "must not be negative");
  if (p.max_tries > 64) conversion_error(n["max_tries"], "must be in 0..64");
  if (p.keepalive > 100000) conversion_error(n["keepalive"], "must be in 0..100000");
  if (p.buffer_size < 1024 || p.buffer_size > (16u << 20))
    conversion_error(n["buffer_size"], "must be in 1024..16777216");
  if (p.errors != "text" && p.errors != "json") conversion_error(n["errors"], "must be text or json");
  bool https = false;
  for (const auto& u : p.upstreams) https |= u.starts_with("https://");
  if (p.upstream_tls && !https) conversion_error(n["upstream_tls"], "no upstream is https://");
  return p;
}

http::ProxyOptions proxy_options(const ProxyRouteConfig& p, const std::string& route_path) {
  http::ProxyOptions o;
  bool https = false;
  for (const auto& u : p.upstreams) {
    http::ProxyUpstream up = http::parse_proxy_upstream(u).value();  // checked at load
    https |= up.address.starts_with("https://");
    o.upstreams.push_back(std::move(up));
  }
  o.balance = p.balance == "least_conn" ? http::ProxyBalance::kLeastConn
              : p.balance == "hash"     ? http::ProxyBalance::kHash
                                        : http::ProxyBalance::kRoundRobin;
  o.hash_key = p.hash_key;
  if (p.strip_prefix && route_path != "/") o.strip_prefix = route_path;
  o.add_prefix = p.add_prefix;
  if (!p.host.empty()) o.host = p.host;
  o.via = p.via;
  o.connect_timeout = p.connect_timeout;
  o.send_timeout = p.send_timeout;
  o.read_timeout = p.read_timeout;
  o.try_timeout = p.try_timeout;
  o.max_tries = p.max_tries;
  o.max_fails = p.max_fails;
  o.fail_timeout = p.fail_timeout;
  o.max_idle = p.keepalive;
  o.idle_timeout = p.keepalive_timeout;
  o.max_requests_per_connection = p.keepalive_requests;
  o.buffer_size = p.buffer_size;
  o.tunnel_idle_timeout = p.tunnel_idle_timeout;
  o.json_errors = p.errors == "json";
  if (https) {
    SslOptions so;
    const ProxyUpstreamTlsConfig t = p.upstream_tls.value_or(ProxyUpstreamTlsConfig{});
    so.verify_peer = t.verify;
    so.ca_file = t.ca_file;
    try {
      o.tls = SslContext::client(so);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("upstream_tls: ") + e.what());
    }
  }
  if (p.health_check) {
    http::ProxyHealthCheck h;
    h.path = p.health_check->path;
    h.interval = p.health_check->interval;
    h.timeout = p.health_check->timeout;
    h.expect = p.health_check->expect;
    h.fails = p.health_check->fails;
    h.passes = p.health_check->passes;
    o.health_check = h;
  }
  return o;
}
}  // namespace lionet::app
