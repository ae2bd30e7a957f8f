// lionet/app/server_config.h: the `workers:` and `servers:` sections of the lionet binary's
// configuration, as plain structs with their YAML conversion.
//
// Owns: WorkerPoolConfig, RouteConfig, TlsConfig, AccessLogConfig, ServerConfig, their
// ConfigTraits (unknown fields and bad values are errors at their line, and so are a server's
// route names: unique, and every try_files "@name" naming one of them, without a loop), and
// check_servers() for the rules that span several entries (duplicate listen addresses, pools
// that do not exist, https without a certificate, one access log file given two settings). Must not:
// start anything (app/runtime.cc turns these into running servers).
//
// YAML shape (conf/server.yml documents every field):
//   workers:                       # named schedulers; "main" always exists (scheduler.* keys)
//     io: {threads: 1, stack_size: 131072, io_backend: epoll}
//   servers:
//     - name: web
//       type: http                 # http | https | echo | syslog | kafka
//       listen: ["127.0.0.1:8080"]
//       workers: main
//       routes:
//         - {path: /, type: static, root: examples/www, mode: auto}
//         - {path: /topics, type: storage}
//         - {path: /metrics, type: metrics}
//         - {path: /app, type: proxy, upstreams: ["127.0.0.1:9001"], strip_prefix: true}
//         - {path: /app, type: static, root: spa, try_files: ["$uri", "/index.html", "@api"]}
//         - {name: api, type: hello}        # named, no path: only a fallback reaches it
//       access_log: {path: var/log/access.log, format: combined}   # http(s); absent = none
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lionet/app/auth_route.h"
#include "lionet/app/proxy_route.h"
#include "lionet/config/traits.h"
#include "lionet/http/access_log.h"

namespace lionet::app {

// A named scheduler (with its IOManager). Unset fields take the scheduler.*/fiber.*/io.* values.
struct WorkerPoolConfig {
  std::optional<int> threads;  // worker threads; 0 = one per CPU
  std::optional<std::size_t> stack_size;  // usable stack bytes per fiber
  std::optional<std::size_t> max_stack_memory;  // stack address space at most (0 = no limit)
  std::optional<std::string> io_backend;  // epoll | io_uring
  bool operator==(const WorkerPoolConfig&) const = default;
};

// A route's rate_limit (lionet/http/access.h RateLimitOptions, nginx's limit_req).
struct RateLimitConfig {
  double rate = 0;  // requests per second per key (required, > 0)
  std::size_t burst = 0;  // requests above the rate queued (or served at once with nodelay)
  bool nodelay = false;
  std::string key = "address";  // address | "header:NAME"
  std::size_t max_keys = 65536;  // keys remembered at most (1..16777216)
  int status = 429;  // the answer to a refused request (400..599)
  bool operator==(const RateLimitConfig&) const = default;
};

// One route of an http(s) server. type decides which other fields apply.
struct RouteConfig {
  std::string path;  // "/static" (prefix for static/storage), exact for the others;
      // empty: a named route, reachable only as a try_files fallback
  std::string name;  // unique within the server; "" = unnamed (then path is required)
  std::string type;  // static | storage | metrics | health | debug | debug_fibers | pprof | hello | websocket | proxy
  // The handler's deadline (http/handler_limits.h with_timeout: 504 past it); 0 = the server's.
  std::chrono::milliseconds timeout{0};
  // Any type: address rules after the server's (net/address_rules.h; 403), and a rate limit.
  std::vector<std::string> allow, deny;
  std::optional<RateLimitConfig> rate_limit;
  // HTTP authentication (auth_route.h, http/auth.h): basic, bearer or client_cert; absent = none.
  std::optional<AuthConfig> auth;
  // static:
  std::string root;  // directory served
  std::string mode = "auto";  // memory | chunk | sendfile | auto
  std::size_t memory_max = 256 * 1024;  // AUTO: files below this from memory
  std::size_t sendfile_min = 256 * 1024;  // AUTO: files from this size by sendfile
  std::size_t chunk_size = 64 * 1024;  // CHUNK: bytes per chunk
  std::size_t cache_bytes = 64 * 1024 * 1024;  // MEMORY: total bytes cached per route
  std::size_t open_file_cache = 1000;  // resolved files kept open (0 = none)
  std::chrono::milliseconds open_file_cache_valid{0};  // 0 = check with a stat per request
  std::vector<std::string> precompressed;  // br | gzip | zstd siblings, in preference order
  bool follow_symlinks_outside_root = false;
  std::string index = "index.html";
  // nginx's try_files: file candidates ("$uri", "$uri/", "$uri.html", "/index.html"), the last
  // entry optionally "=CODE" (a status) or "@name" (that route of the server gets the request).
  std::vector<std::string> try_files;
  // debug, debug_fibers and pprof:
  bool allow_remote = false;  // serve the status page / fiber dump / CPU profiles to non-loopback peers too
  std::size_t max_seconds = 600;  // pprof: the longest profile a request may ask for (seconds)
  // websocket (lionet/websocket): what the route does with each connection, and its limits.
  std::string handler = "echo";  // echo: every message back as it came
  std::size_t max_message_size = 16 << 20;  // a larger message: closed with 1009
  std::chrono::milliseconds ping_interval{30000};  // keepalive ping after this long silent (0: none)
  std::size_t send_queue_bytes = 1 << 20;  // messages queued by try_send/broadcast at most
  bool deflate = false;  // accept permessage-deflate (~256 KiB per connection)
  // proxy (lionet/http/proxy.h): upstreams, balancing, timeouts, pool, health (proxy_route.h).
  ProxyRouteConfig proxy;
  bool operator==(const RouteConfig&) const = default;
};

struct TlsConfig {
  std::string cert;  // PEM certificate chain
  std::string key;  // PEM private key
  // Generate a self-signed certificate at cert/key on start-up when both are missing (for
  // `make run`); never overwrites existing files.
  bool generate_self_signed = false;
  std::string min_version = "TLS1.2";
  std::vector<std::string> alpn = {"http/1.1"};
  std::chrono::milliseconds handshake_timeout{10000};
  // Client certificates (routes with auth.client_cert): off (none asked for), optional (asked
  // for; a sent one must verify against client_ca, a missing one leaves the route to refuse)
  // or require (the handshake fails without a verified one).
  std::string verify_client = "off";
  std::string client_ca;  // PEM CA certificates client certificates are verified against
  bool operator==(const TlsConfig&) const = default;
};

// servers[].sasl.acls.<user> (kafka): lionet::kafka::Permissions, topic and group patterns
// ("name", "*", "prefix*").
struct KafkaAclConfig {
  std::vector<std::string> produce;  // topics it may produce to
  std::vector<std::string> consume;  // topics it may fetch from and commit offsets of
  std::vector<std::string> groups;  // consumer groups it may join, commit and fetch offsets in
  bool operator==(const KafkaAclConfig&) const = default;
};

// servers[].sasl (kafka): lionet::kafka::SaslConfig. Checked by check_servers (--check): the
// users file (mode 0600 or stricter, every line), and tls unless allow_plaintext_sasl.
struct KafkaSaslConfig {
  std::vector<std::string> mechanisms = {"SCRAM-SHA-256", "SCRAM-SHA-512"};  // PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
  std::string users;  // `name:password` lines (kafka/sasl.h); credentials derived at start
  bool allow_plaintext_sasl = false;  // SASL without tls (passwords or proofs in the clear)
  std::map<std::string, KafkaAclConfig> acls;  // user (or "*") -> permissions; empty: all
  bool operator==(const KafkaSaslConfig&) const = default;
};

// servers[].access_log (http, https): lionet::http::AccessLogOptions. Servers naming the same
// path share one log (and must give it the same settings).
struct AccessLogConfig {
  std::string path;  // "stdout" or a file (parent directories are created)
  std::string format = "combined";  // combined | json
  std::size_t buffer_bytes = http::AccessLogOptions{}.buffer_bytes;  // 4096..1073741824
  std::chrono::milliseconds flush_interval =  // 1ms..3600000ms
      std::chrono::duration_cast<std::chrono::milliseconds>(http::AccessLogOptions{}.flush_interval);
  bool operator==(const AccessLogConfig&) const = default;
};

struct ServerConfig {
  std::string name;
  std::string type;  // http | https | echo | syslog | kafka
  std::vector<std::string> listen;  // "host:port" ("[::1]:port" for IPv6); syslog: udp:// or tcp://
  std::string workers = "main";  // worker pool (see `workers:`)
  std::size_t max_connections = 10000;  // beyond it new connections are closed at once
  std::size_t max_connections_per_address = 0;  // from one client address at once; 0 = no limit
  // Who may come in (net/address_rules.h): http(s) answer 403, other types close at accept.
  std::vector<std::string> allow, deny;
  bool reuse_port = false;  // SO_REUSEPORT on its TCP listeners: several processes share a port
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive / echo idle
  std::chrono::milliseconds header_timeout{10000};  // whole request head
  std::chrono::milliseconds body_timeout{30000};  // whole request body
  std::chrono::milliseconds write_timeout{60000};  // each response write (http)
  std::size_t max_keepalive_requests = 0;  // requests per connection (http); 0 = no limit
  // http: every handler's deadline (504 past it); 0 = none. A route's `timeout` applies inside.
  std::chrono::milliseconds handler_timeout{0};
  bool cancel_on_disconnect = true;  // http: a client that goes away cancels its handler (499)
  std::size_t drain_body_max = 1u << 20;  // http: unread body bytes discarded to keep a connection
  std::string server_name = "lionet";  // http: the Server header ("" = none)
  std::size_t input_buffer = 4096;  // http: initial input buffer per connection
  // A connection that sent nothing this long after accept is closed by a drain (http, echo).
  std::chrono::milliseconds drain_silent_grace{1000};
  std::size_t max_request_line = 8192;
  std::size_t max_header_bytes = 65536;
  std::size_t max_headers = 100;
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  // HTTP/2 beside HTTP/1.1 (http, https): h2 by ALPN on https (offered before http/1.1), h2c
  // with prior knowledge on http. The http2_* fields are its SETTINGS (lionet/http2/server.h).
  bool http2 = true;
  uint32_t http2_max_concurrent_streams = 128;
  uint32_t http2_initial_window_size = 65536;
  uint32_t http2_max_frame_size = 16384;
  uint32_t http2_max_header_list_size = 32768;
  uint32_t http2_max_requests = 100000;  // streams per connection over its life
  uint32_t http2_reset_burst = 1000;  // rapid reset: RST_STREAM token bucket
  uint32_t http2_resets_per_second = 33;
  uint32_t http2_max_continuations = 8;  // CONTINUATION frames after one HEADERS
  uint32_t http2_max_empty_frames = 1000;  // empty DATA frames per connection
  uint32_t http2_max_outbound_ack = 1000;  // SETTINGS/PING ACKs queued unsent
  // syslog (lionet/syslog/server.h): listen entries are "udp://host:port" / "tcp://host:port".
  std::string topic = "syslog";  // storage topic the messages go to
  std::string key = "host";  // record key: host | app
  std::size_t batch_max = 256;  // records per append at most (1..65536)
  std::chrono::milliseconds linger{5};  // UDP: wait this long for a batch to fill (0..1000ms)
  std::size_t max_message_size = 8192;  // bytes of one message kept (480..1048576)
  std::size_t recv_buffer = 4 << 20;  // UDP SO_RCVBUF (4096..268435456)
  // kafka (lionet/kafka/server.h); its idle_timeout defaults to 600000ms (Kafka's).
  std::string advertised_host;  // told to clients by Metadata; "" = the first listen host
  uint32_t advertised_port = 0;  // 0 = the first listen address's port
  std::size_t max_request_size = 100 << 20;  // one request frame at most (1024..1073741824)
  // Consumer groups (lionet/kafka/group_coordinator.h GroupOptions): the session timeouts a
  // JoinGroup may ask for, and the longest metadata string of a committed offset.
  std::chrono::milliseconds group_min_session_timeout{6000};  // 1ms..3600000ms
  std::chrono::milliseconds group_max_session_timeout{1800000};  // 1ms..86400000ms, >= the min
  std::size_t offset_metadata_max_bytes = 4096;  // 0..32767
  std::optional<TlsConfig> tls;  // required for https; kafka: optional (SSL / SASL_SSL listener)
  std::optional<KafkaSaslConfig> sasl;  // kafka only: SASL authentication (and permissions)
  std::optional<AccessLogConfig> access_log;  // http(s); absent = no access log
  std::vector<RouteConfig> routes;  // http(s) only
  bool operator==(const ServerConfig&) const = default;
};

// A static route's try_files, split: the file candidates, and the last entry's fallback
// ("=CODE": status, "@name": route; neither: status 0 and route "").
struct TryFiles {
  std::vector<std::string> candidates;
  int status = 0;
  std::string route;
};
TryFiles split_try_files(const std::vector<std::string>& entries);

// Cross-entry rules. Returns nullopt, or one message that names the key
// ("servers[1].listen[0]: 127.0.0.1:8080 is already used by servers[0] (web)").
std::optional<std::string> check_servers(const std::vector<ServerConfig>& servers,
                                         const std::map<std::string, WorkerPoolConfig>& pools);
// The file an access_log.path names, for sharing: "stdout", or the path lexically normalised
// ("var/log/../log/a.log" and "var/log/a.log" are one log).
std::string access_log_key(const std::string& path);
// allow / deny entries (net/address_rules.h): a field_error at the list naming the entry.
void check_address_rules(const YAML::Node& n, const std::vector<std::string>& allow,
                         const std::vector<std::string>& deny);
// A syslog listen entry: {"udp" or "tcp", "host:port"}, nullopt without one of the two schemes.
std::optional<std::pair<std::string_view, std::string_view>> split_syslog_listen(std::string_view text);
}  // namespace lionet::app

LIONET_DECLARE_CONFIG_TRAITS(lionet::app::WorkerPoolConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::RateLimitConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::RouteConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::TlsConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::KafkaAclConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::KafkaSaslConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::AccessLogConfig);
LIONET_DECLARE_CONFIG_TRAITS(lionet::app::ServerConfig);
