// lionet/app/proxy_route.h: the fields of a `type: proxy` route (YAML), and their translation
// into lionet::http::ProxyOptions.
//
// Owns: ProxyRouteConfig (defaults are the documented ones: conf/REFERENCE.md is generated from
// them), its YAML field list (keys on the route's own mapping, beside path and type) and its
// reading (bad values are errors at their line). Must not: resolve or connect to anything (the
// Proxy does that when the runtime builds the route).
//
//   - {path: /app, type: proxy, upstreams: ["127.0.0.1:9001", "127.0.0.1:9002 weight=2"],
//      strip_prefix: true, read_timeout: 30s, health_check: {path: /health, interval: 5s}}
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "lionet/config/fields.h"
#include "lionet/http/proxy.h"

namespace lionet::app {

struct ProxyHealthConfig {
  std::string path = "/";
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds timeout{2000};
  std::string expect = "2";  // status prefix: "200", "2" (any 2xx), "" (any answer)
  unsigned fails = 1;
  unsigned passes = 1;
  bool operator==(const ProxyHealthConfig&) const = default;
};

struct ProxyUpstreamTlsConfig {
  bool verify = true;  // verify the upstream's certificate and name
  std::string ca_file;  // PEM; empty: the system trust store
  bool operator==(const ProxyUpstreamTlsConfig&) const = default;
};

struct ProxyRouteConfig {
  std::vector<std::string> upstreams;  // "host:port[ weight=N]", http:// or https:// prefix allowed
  std::string balance = "round_robin";  // round_robin | least_conn | hash
  std::string hash_key = "ip";  // hash: ip, or a request header's name
  bool strip_prefix = false;  // remove the route's path before passing the path on
  std::string add_prefix;  // put in front of the path passed on
  std::string host;  // Host sent upstream; "" passes the client's
  bool via = false;  // add Via both ways
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds send_timeout{60000};  // each write upstream
  std::chrono::milliseconds read_timeout{60000};  // each read from the upstream
  std::chrono::milliseconds try_timeout{0};  // all tries of a request; 0: no bound
  unsigned max_tries = 0;  // 0: every upstream once
  unsigned max_fails = 1;  // 0: passive health off
  std::chrono::milliseconds fail_timeout{10000};
  std::size_t keepalive = 64;  // idle connections kept per upstream
  std::chrono::milliseconds keepalive_timeout{60000};
  std::size_t keepalive_requests = 1000;  // per upstream connection; 0: no limit
  std::size_t buffer_size = 16384;
  std::chrono::milliseconds tunnel_idle_timeout{600000};
  std::string errors = "text";  // text | json (502/504 bodies)
  std::optional<ProxyUpstreamTlsConfig> upstream_tls;
  std::optional<ProxyHealthConfig> health_check;
  bool operator==(const ProxyRouteConfig&) const = default;
};

// The proxy keys of a route mapping, in the order they are written. RouteConfig checks the
// route's keys against them and writes them (after its own) for a proxy route.
const config::Fields<ProxyRouteConfig>& proxy_route_fields();
// Reads and checks the proxy keys of a route mapping (the caller has checked the key set).
ProxyRouteConfig read_proxy_route(const YAML::Node& route);
// For the Proxy: route_path is stripped when strip_prefix. Throws std::invalid_argument (bad
// upstream, TLS file) naming the problem.
http::ProxyOptions proxy_options(const ProxyRouteConfig& p, const std::string& route_path);
}  // namespace lionet::app
