// lionet/http/proxy.h: lionet::http::Proxy, a reverse proxy as an ordinary handler (nginx's
// proxy_pass): upstream pools with keep-alive connections, balancing, passive and active
// health, retries, streaming bodies both ways, and Upgrade tunnels.
//
//   http::ProxyOptions o;
//   o.upstreams = {{"127.0.0.1:9001"}, {"127.0.0.1:9002", 2}};   // weight 2
//   o.strip_prefix = "/app";                                        // "/app/x" -> "/x"
//   auto proxy = std::make_shared<http::Proxy>(o);
//   router.prefix("*", "/app", proxy->handler());
//   proxy->start_health_checks(sched);    // the idle-connection reaper, health checks if set
//
// Owns: one pool of idle upstream connections per upstream, sharded by worker (a worker pushes
// to and pops from its own shard under that shard's lock, held for a vector push/pop only, and
// looks into the others only when its own is empty: no lock shared by all workers, none held
// across a park), the balancing state (lock-free), the per-upstream health and statistics, and the
// active health-check fibers. Must not: buffer a whole body (memory per exchange is one
// buffer_size buffer, which travels with the pooled connection), pass a hop-by-hop header, or
// let a request framed one way by the client reach the upstream framed another way.
//
// One exchange (in the client connection's fiber):
//   1. Pick an upstream (round_robin: smooth weighted order precomputed; least_conn: fewest
//      exchanges in flight per weight; hash: client IP or a header, over the weighted order),
//      skipping the ones marked down. All down: 502 at once.
//   2. Take an idle connection of that upstream (or connect, connect_timeout). Send the head:
//      the method, the path (strip_prefix removed, add_prefix put in front) and query, the
//      client's fields minus the hop-by-hop ones (Connection, Keep-Alive, Proxy-Connection,
//      TE, Trailer, Transfer-Encoding, Upgrade, Expect, and every field Connection names),
//      Host (the client's, or `host`), X-Forwarded-For/-Proto/-Host and Forwarded (RFC 7239)
//      appended, Via if asked. The body is re-framed, never passed raw: Content-Length as the
//      client's, chunked re-encoded chunk by chunk (so CL.TE / TE.CL / duplicate-length tricks,
//      already refused by the server's parser, cannot reach the upstream differently framed).
//      A chunked body's first byte is read before step 1, so one malformed from its first
//      chunk-size line is refused without the upstream seeing anything.
//      Each write is bounded by send_timeout. An upstream that stops reading (it answered
//      early, say 413, and closed) is still read: its answer is relayed, the connection dropped.
//   3. Read the response head (each read bounded by read_timeout; interim 1xx skipped, 101
//      kept for an Upgrade). Fields go to the client minus hop-by-hop ones, Date and Server
//      (the server adds its own); repeated fields (Set-Cookie) stay separate. The body streams
//      through: Content-Length kept, chunked and close-delimited bodies re-chunked to the
//      client (close-delimited to an HTTP/1.0 client). Trailers of a chunked upstream body are
//      dropped (RFC 9112 7.1.2 lets a proxy drop them). A body that fits the first read goes
//      out with the head in one write.
//   4. The connection goes back to its pool when the body ended cleanly and the upstream did
//      not ask to close (and max_requests_per_connection is not reached); otherwise it is
//      closed. A client that goes away mid-upload or mid-response: the upstream connection is
//      closed, never pooled.
// Failures: connect errors are retried on another upstream for every method (the request was
// not sent); a reset, end of stream or timeout before any response byte is retried only for
// idempotent methods (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) whose body has not been read from
// the client yet; at most max_tries tries within try_timeout. An upstream that closes or resets
// while the body is being sent may have answered already (a 413 for an upload it refuses by its
// head): that answer is read and relayed, and the connection is not reused. Answers: 502 (no
// upstream answered, or the answer was not HTTP), 504 (read_timeout passed before the response
// head).
// After the head has gone to the client, an upstream failure closes the client connection (a
// Content-Length body is then short, a chunked one has no last chunk: never a truncated
// response that looks complete). Passive health as nginx: max_fails failures within
// fail_timeout mark an upstream down for fail_timeout (0 = never). Active health
// (health_check): a fiber per upstream sends GET path every interval and marks it up or down by
// the status.
// Upgrade: a request with `Connection: upgrade` and `Upgrade` (HTTP/1.1) is sent with them;
// a 101 from the upstream is passed on and the connection becomes a two-way byte tunnel
// (takeover.h), each direction ended by end of stream or tunnel_idle_timeout of silence both
// ways. Any other answer is relayed as usual.
// Concurrency: handler() may run on every worker at once; start_health_checks() once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/metrics.h"
#include "lionet/http/server.h"

namespace lionet {
class Scheduler;
class SslContext;
}  // namespace lionet

namespace lionet::http {
struct ResponseHead;

struct ProxyUpstream {
  // "host:port", "http://host:port" or "https://host:port" (TLS through ProxyOptions::tls).
  std::string address{};
  unsigned weight = 1;  // 1..1000
};

struct ProxyHealthCheck {
  std::string path = "/";  // GET target
  Duration interval = std::chrono::seconds(5);
  Duration timeout = std::chrono::seconds(2);  // connect + whole answer
  // The answer's status is healthy if it starts with this ("200", "2" = any 2xx, "" = any).
  std::string expect = "2";
  unsigned fails = 1;  // consecutive bad checks to mark down
  unsigned passes = 1;  // consecutive good checks to mark up again
};

enum class ProxyBalance : uint8_t { kRoundRobin, kLeastConn, kHash };

struct ProxyOptions {
  std::vector<ProxyUpstream> upstreams{};
  ProxyBalance balance = ProxyBalance::kRoundRobin;
  // kHash: "ip" (the client's address) or the name of a request header (absent: as "ip").
  std::string hash_key = "ip";
  // Removed from the front of the path when it is there ("/app": "/app/x" -> "/x", "/app" ->
  // "/"); then add_prefix is put in front ("/v2": "/x" -> "/v2/x").
  std::string strip_prefix{};
  std::string add_prefix{};
  // Host sent upstream; nullopt passes the client's (the upstream's address without one).
  std::optional<std::string> host{};
  bool via = false;  // add "Via: 1.1 <via_name>" both ways
  std::string via_name = "lionet";
  Duration connect_timeout = std::chrono::seconds(5);
  Duration send_timeout = std::chrono::seconds(60);  // each write upstream
  Duration read_timeout = std::chrono::seconds(60);  // each read from the upstream
  // All tries of one request; 0 = no bound. Also caps each read and write of a try to what is
  // left of it when the try starts.
  Duration try_timeout = Duration::zero();
  unsigned max_tries = 0;  // 0 = each upstream once
  unsigned max_fails = 1;  // 0 = passive health off
  Duration fail_timeout = std::chrono::seconds(10);
  std::size_t max_idle = 64;  // idle connections kept per upstream
  // An idle connection older than this is closed at the next request to its upstream (there is
  // no timer: an upstream without traffic keeps its pooled connections until then).
  Duration idle_timeout = std::chrono::seconds(60);
  std::size_t max_requests_per_connection = 1000;  // 0 = no limit
  std::size_t buffer_size = 16384;  // per exchange, each direction's copy buffer
  Duration tunnel_idle_timeout = std::chrono::seconds(600);
  std::shared_ptr<SslContext> tls{};  // client context for https:// upstreams
  std::optional<ProxyHealthCheck> health_check{};
  bool json_errors = false;  // 502/504 bodies as {"error": "..."} instead of plain text
};

// One upstream's figures (relaxed: statistics only).
struct ProxyUpstreamStats {
  std::string address;
  uint64_t requests = 0;  // tries sent to it
  uint64_t failures = 0;  // tries that failed (connect, reset, timeout, bad answer)
  uint64_t connects = 0;  // connections opened to it
  std::size_t idle = 0;  // pooled now
  std::size_t active = 0;  // exchanges in flight now
  bool up = true;
  Histogram::Snapshot latency;  // try start -> response head
};

inline constexpr std::size_t kMaxProxyUpstreams = 64;  // tried upstreams are a bit mask

// "host:port", "http://host:port" or "https://host:port", optionally followed by spaces and
// "weight=N" (1..1000), as the YAML writes an upstream; nullopt if it is not that.
std::optional<ProxyUpstream> parse_proxy_upstream(std::string_view text);

// What is wrong with o's upstream list and sizes before anything is looked up: no upstreams,
// more than kMaxProxyUpstreams, a weight out of 1..1000, an address that is not host:port, a
// buffer_size below 1024; "" when nothing is. The Proxy constructor throws it; app/ reports it
// at the YAML key when the config is loaded.
std::string proxy_options_problem(const ProxyOptions& o);

class Proxy {
 public:
  // Throws std::invalid_argument naming the bad field (proxy_options_problem, https without
  // tls, an address that does not resolve).
  explicit Proxy(ProxyOptions options);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  void handle(Request& req, Response& res);
  // A Handler calling handle() on this proxy (which must outlive every server using it).
  Handler handler() {
    return [this](Request& q, Response& s) { handle(q, s); };
  }

  // Starts the background fibers on sched: the reaper, which closes pooled connections idle
  // past idle_timeout also while no request comes (without it they are swept only by the next
  // request to their upstream), and a health-check fiber per upstream if options().health_check.
  void start_health_checks(Scheduler& sched);
  // Stops them and waits for them to end; closes the idle connections. Idempotent.
  void stop();

  std::vector<ProxyUpstreamStats> stats() const;
  const ProxyOptions& options() const noexcept { return options_; }

  struct Upstream;  // detail/proxy_upstream.h
  struct Exchange;  // proxy.cc

 private:
  Upstream* pick(const Request& req, uint64_t tried_mask);
  // Sets res from the upstream's head and arranges its body; false if the head cannot be
  // relayed (a bad length, an invalid field).
  bool relay(Request& req, Response& res, const std::shared_ptr<Exchange>& ex, const ResponseHead& rh, bool upgrade);
  void health_loop(Upstream& u);
  void reap_loop();

  const ProxyOptions options_;
  std::vector<std::unique_ptr<Upstream>> upstreams_;
  std::vector<uint16_t> order_;  // smooth weighted round-robin order (indexes into upstreams_)
  std::atomic<uint64_t> next_{0};
  struct Health;
  std::unique_ptr<Health> health_;
};
}  // namespace lionet::http
