// lionet/app/proxy_route.cc: proxy route YAML and ProxyOptions (see proxy_route.h).
#include "lionet/app/proxy_route.h"

#include <charconv>
#include <stdexcept>

#include "lionet/ssl/ssl_context.h"

namespace lionet::config {
template <>
struct ConfigTraits<app::ProxyHealthConfig> {
  static app::ProxyHealthConfig from_yaml(const YAML::Node& n) {
    expect_keys(n, {"path", "interval", "timeout", "expect", "fails", "passes"});
    app::ProxyHealthConfig h;
    read_field(n, "path", h.path);
    read_field(n, "interval", h.interval);
    read_field(n, "timeout", h.timeout);
    read_field(n, "expect", h.expect);
    read_field(n, "fails", h.fails);
    read_field(n, "passes", h.passes);
    if (h.path.empty() || h.path[0] != '/') conversion_error(n["path"], "a health check path starts with '/'");
    if (h.interval.count() < 10 || h.interval.count() > 3600000) conversion_error(n["interval"], "must be in 10ms..3600000ms");
    if (h.timeout.count() < 1 || h.timeout.count() > 600000) conversion_error(n["timeout"], "must be in 1ms..600000ms");
    if (h.expect.size() > 3 || h.expect.find_first_not_of("0123456789") != std::string::npos)
      conversion_error(n["expect"], "a status or its first digits: \"200\", \"2\" (any 2xx), \"\" (any)");
    if (h.fails < 1 || h.fails > 100) conversion_error(n["fails"], "must be in 1..100");
    if (h.passes < 1 || h.passes > 100) conversion_error(n["passes"], "must be in 1..100");
    return h;
  }
  static YAML::Node to_yaml(const app::ProxyHealthConfig& h) {
    YAML::Node n;
    n["path"] = h.path;
    n["interval"] = encode(h.interval);
    n["timeout"] = encode(h.timeout);
    n["expect"] = h.expect;
    n["fails"] = h.fails;
    n["passes"] = h.passes;
    return n;
  }
};
template <>
struct ConfigTraits<app::ProxyUpstreamTlsConfig> {
  static app::ProxyUpstreamTlsConfig from_yaml(const YAML::Node& n) {
    expect_keys(n, {"verify", "ca_file"});
    app::ProxyUpstreamTlsConfig t;
    read_field(n, "verify", t.verify);
    read_field(n, "ca_file", t.ca_file);
    return t;
  }
  static YAML::Node to_yaml(const app::ProxyUpstreamTlsConfig& t) {
    YAML::Node n;
    n["verify"] = t.verify;
    n["ca_file"] = t.ca_file;
    return n;
  }
};
}  // namespace lionet::config

namespace lionet::app {
namespace {
using config::conversion_error;
using config::read_field;

}  // namespace

ProxyRouteConfig read_proxy_route(const YAML::Node& n) {
  ProxyRouteConfig p;
  p.upstreams = config::required_field<std::vector<std::string>>(n, "upstreams");
  http::ProxyOptions parsed;  // the upstream list as http/ checks it
  for (const auto& u : p.upstreams) {
    auto up = http::parse_proxy_upstream(u);
    if (!up) conversion_error(n["upstreams"], "'" + u + "': expected host:port, optionally followed by weight=1..1000");
    parsed.upstreams.push_back(std::move(*up));
  }
  if (std::string why = http::proxy_options_problem(parsed); !why.empty()) conversion_error(n["upstreams"], why);
  read_field(n, "balance", p.balance);
  if (p.balance != "round_robin" && p.balance != "least_conn" && p.balance != "hash")
    conversion_error(n["balance"], "unknown balance '" + p.balance + "' (expected round_robin, least_conn or hash)");
  read_field(n, "hash_key", p.hash_key);
  if (p.hash_key.empty()) conversion_error(n["hash_key"], "ip, or a request header's name");
  read_field(n, "strip_prefix", p.strip_prefix);
  read_field(n, "add_prefix", p.add_prefix);
  if (!p.add_prefix.empty() && (p.add_prefix[0] != '/' || p.add_prefix.back() == '/'))
    conversion_error(n["add_prefix"], "starts with '/' and does not end with one (\"/v2\")");
  read_field(n, "host", p.host);
  read_field(n, "via", p.via);
  read_field(n, "connect_timeout", p.connect_timeout);
  read_field(n, "send_timeout", p.send_timeout);
  read_field(n, "read_timeout", p.read_timeout);
  read_field(n, "try_timeout", p.try_timeout);
  read_field(n, "max_tries", p.max_tries);
  read_field(n, "max_fails", p.max_fails);
  read_field(n, "fail_timeout", p.fail_timeout);
  read_field(n, "keepalive", p.keepalive);
  read_field(n, "keepalive_timeout", p.keepalive_timeout);
  read_field(n, "keepalive_requests", p.keepalive_requests);
  read_field(n, "buffer_size", p.buffer_size);
  read_field(n, "tunnel_idle_timeout", p.tunnel_idle_timeout);
  read_field(n, "errors", p.errors);
  read_field(n, "upstream_tls", p.upstream_tls);
  read_field(n, "health_check", p.health_check);
  for (const char* k : {"connect_timeout", "send_timeout", "read_timeout", "tunnel_idle_timeout"}) {
    const YAML::Node v = n[k];
    if (v && config::decode<std::chrono::milliseconds>(v).count() <= 0) conversion_error(v, "must be positive");
  }
  if (p.try_timeout.count() < 0) conversion_error(n["try_timeout"], "must be 0 (no bound) or positive");
  if (p.fail_timeout.count() < 0) conversion_error(n["fail_timeout"], "must not be negative");
  if (p.max_tries > 64) conversion_error(n["max_tries"], "must be in 0..64");
  if (p.keepalive > 100000) conversion_error(n["keepalive"], "must be in 0..100000");
  if (p.buffer_size < 1024 || p.buffer_size > (16u << 20)) conversion_error(n["buffer_size"], "must be in 1024..16777216");
  if (p.errors != "text" && p.errors != "json") conversion_error(n["errors"], "must be text or json");
  bool https = false;
  for (const auto& u : p.upstreams) https |= u.starts_with("https://");
  if (p.upstream_tls && !https) conversion_error(n["upstream_tls"], "no upstream is https://");
  return p;
}

void write_proxy_route(YAML::Node& n, const ProxyRouteConfig& p) {
  using config::encode;
  n["upstreams"] = p.upstreams;
  n["balance"] = p.balance;
  n["hash_key"] = p.hash_key;
  n["strip_prefix"] = p.strip_prefix;
  n["add_prefix"] = p.add_prefix;
  n["host"] = p.host;
  n["via"] = p.via;
  n["connect_timeout"] = encode(p.connect_timeout);
  n["send_timeout"] = encode(p.send_timeout);
  n["read_timeout"] = encode(p.read_timeout);
  n["try_timeout"] = encode(p.try_timeout);
  n["max_tries"] = p.max_tries;
  n["max_fails"] = p.max_fails;
  n["fail_timeout"] = encode(p.fail_timeout);
  n["keepalive"] = p.keepalive;
  n["keepalive_timeout"] = encode(p.keepalive_timeout);
  n["keepalive_requests"] = p.keepalive_requests;
  n["buffer_size"] = p.buffer_size;
  n["tunnel_idle_timeout"] = encode(p.tunnel_idle_timeout);
  n["errors"] = p.errors;
  if (p.upstream_tls) n["upstream_tls"] = encode(*p.upstream_tls);
  if (p.health_check) n["health_check"] = encode(*p.health_check);
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
