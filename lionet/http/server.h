// lionet/http/server.h: the HTTP/1.1 server: serve_connection() (one connection over any
// lionet::Stream, so HTTP never knows TCP from TLS) and lionet::http::Server (a TcpServer whose
// connections run serve_connection, optionally wrapped by a stream factory such as TLS).
//
//   lionet::http::Router router;
//   router.get("/hello", [](auto& req, auto& res) { res.reply(200, "hello world"); });
//   lionet::http::Server server(io, router.handler(), {});
//   server.listen(lionet::Address::parse("127.0.0.1:8080").value());
//   server.start();
//   ...
//   server.stop(std::chrono::seconds(5));
//
// Owns: the per-connection request loop (read, parse, handle, respond, keep-alive), the
// timeouts, and error answers. Must not: read configuration (ServerOptions is filled by app/),
// throw on the request path, or copy header bytes.
//
// Connection loop (serve_connection), per request:
//   1. Wait for the first byte: keepalive_timeout on an idle kept-alive connection (expiry
//      closes silently); on a new connection header_timeout runs from the start.
//   2. Read until the head is complete. header_timeout bounds the WHOLE head from its first
//      byte (slowloris-safe: trickling bytes does not extend it); expiry answers 408 and closes.
//      Limits and grammar errors answer 400/413/414/417/431/501/505 and close. A head refused
//      whole (a Content-Length over max_body_bytes: 413) is first offered to
//      ServerOptions::refusal, which may word the answer; the body is never read either way.
//   3. Run the handler (in this fiber). The head's views stay valid: the input buffer is never
//      moved or grown until the request is done (body bytes are read into its tail or straight
//      into the handler's buffer). body_timeout bounds the whole body from the end of the head.
//      handler_timeout bounds the handler (504 past it); a client that hangs up meanwhile
//      cancels it (cancel_on_disconnect: logged 499, closed).
//   4. Send the response: head and body in one writev for memory bodies; head then sendfile
//      for files; the writer with its first chunk in one writev. Then its access log line, if
//      ServerOptions::access_log is set (also for the answers to refused heads, before their
//      lingering close; a handler's request whose client went away mid-body is logged 499).
//   5. Discard an unread body (up to drain_body_max) to keep the connection; otherwise close.
//      Pipelined requests already in the buffer are parsed without another read.
//   Keep-alive ends on: the client's wish (version + Connection), Response::set_close(),
//   max_keepalive_requests, a server that is stopping, or any error.
// Closing after an error with unread input uses a bounded lingering close (shutdown the write
// side, discard input for up to 1 s / 256 KiB) so the client reads our answer instead of a reset.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/http/request.h"
#include "lionet/http/request_parser.h"
#include "lionet/http/response.h"
#include "lionet/net/address.h"
#include "lionet/net/socket_stream.h"
#include "lionet/net/stream.h"
#include "lionet/net/tcp_server.h"

namespace lionet {
class IOManager;
class SslContext;
}  // namespace lionet

namespace lionet::http {

class AccessLog;

// A handler runs in the connection's fiber and may block (read a file, call a Client, lock a
// lionet::Mutex). It must not keep Request or Response past its return.
using Handler = std::function<void(Request&, Response&)>;

// Marks h as a handler that never waits on the network, on a lock another fiber holds or on a
// timer (answers from memory; static files, whose open/stat/read of a local file is the short
// wait nginx also makes in its event loop). A Router remembers the mark per route (Router::runs_inline); HTTP/2 then answers such
// a route's bodiless requests on the connection's own fiber, in the same turn as it read them,
// instead of spawning a fiber per stream (ServerOptions::runs_inline). A marked handler that
// waits after all holds up its connection's other streams while it waits. Calling the result
// calls h.
Handler nonblocking(Handler h);
// Whether h was made by nonblocking().
bool is_nonblocking(const Handler& h) noexcept;

// Words the answer to a request the server refuses after reading its whole head (today only a
// Content-Length over limits.max_body_bytes: status 413, reason "Content-Length over the
// limit"), e.g. in the format of the route it was meant for (Router::refusal_handler()). Runs in
// the connection's fiber like a handler; the body is never read (read_body() fails: EMSGSIZE).
// The response is kept only if it has that very status (a refusal cannot become a success);
// otherwise, or if it throws, the server sends its own plain-text answer. Either way it goes
// out with Connection: close and the connection closes as after the server's own answer.
using RefusalHandler = std::function<void(Request&, Response&, int status, std::string_view reason)>;

struct ServerOptions;
struct ServerStats;

// After a handler ran on a request whose body broke a limit or its framing (413 over
// max_body_bytes, 408 too slow, 400 malformed; its reads failed with EMSGSIZE, ETIMEDOUT or
// EBADMSG): its response stands only if it has that very status with a memory body (its own
// wording, as for a RefusalHandler); anything else it set is replaced by the status and
// error_text(status, why). The one rule of HTTP/1 and HTTP/2.
void overrule_for_body_error(Response& res, int status, std::string_view why);

// A connection handed to another protocol over the same handler (ServerOptions::http2).
struct ProtocolHandoff {
  Stream& stream;
  std::string_view prefix;  // bytes already read from the stream: the protocol reads them first
  const Handler& handler;
  const ServerOptions& options;
  const std::atomic<bool>* stopping;  // may be null; true once the server is stopping
  ServerStats* stats;  // may be null
  const ConnectionInfo* info;  // may be null
};
using ProtocolServer = std::function<void(const ProtocolHandoff&)>;

// Ends a connection without losing the last answer: unread input at close() makes the kernel
// send a reset, which can destroy what we wrote before the client reads it. Half-closes
// (unless `write_shut`: done already), then reads and drops what the client still sends, for
// up to 1 s / 256 KiB, into buf[0..cap). Needs the stream to itself (it sets its timeouts).
void lingering_close(Stream& stream, void* buf, std::size_t cap, std::optional<Duration> write_timeout,
                     bool write_shut = false) noexcept;

// The HTTP/2 connection preface (RFC 9113 3.4) a client with prior knowledge starts with.
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct ServerOptions {
  // Request line, header and body limits. YAML (per server, app/server_config.h):
  // servers[].max_request_line, max_header_bytes, max_headers, max_body_bytes.
  ParserLimits limits{};
  // Idle time allowed between requests of a kept-alive connection. YAML: servers[].idle_timeout
  Duration keepalive_timeout = std::chrono::seconds(60);
  // Whole request head, from its first byte (from accept for the first request).
  // YAML: servers[].header_timeout
  Duration header_timeout = std::chrono::seconds(10);
  // Whole request body, from the end of the head. YAML: servers[].body_timeout
  Duration body_timeout = std::chrono::seconds(30);
  // Each response write (one writev / sendfile call as a whole). YAML: servers[].write_timeout
  Duration write_timeout = std::chrono::seconds(60);
  // Requests served on one connection before it is closed; 0 = no limit.
  // YAML: servers[].max_keepalive_requests
  std::size_t max_keepalive_requests = 0;
  // Unread request body bytes the server reads and discards to keep a connection alive; a
  // larger unread body closes the connection instead. No YAML key yet.
  std::size_t drain_body_max = 1u << 20;
  // The Server header ("" = none). No YAML key yet.
  std::string server_name = "lionet";
  // Initial input buffer per connection (grows up to the limits while a head is read).
  // No YAML key yet.
  std::size_t input_buffer = 4096;
  // Every handler runs under this deadline (http/handler_limits.h run_bounded: its blocking
  // calls fail with ETIMEDOUT past it, sched/cancel.h); a handler that has not answered by then
  // gets 504 instead, logged so. Zero: none (the default). A route's own `timeout`
  // (with_timeout) applies inside it. YAML: servers[].handler_timeout
  Duration handler_timeout = Duration::zero();
  // A client that goes away while its handler runs (HTTP/1.1: the connection closed or reset,
  // seen by http/handler_limits.h's DisconnectWatch once the handler has run 20 ms; HTTP/2: a
  // RST_STREAM or the connection lost) cancels the handler (sched/cancel.h): its blocking calls
  // end with ECANCELED, and the request is logged 499. YAML: servers[].cancel_on_disconnect
  bool cancel_on_disconnect = true;
  // Answers to refused requests (see RefusalHandler); empty = the server's plain text always.
  RefusalHandler refusal{};
  // Whether a request (its head read, no body) may run its handler on the connection's fiber
  // because the handler never waits (nonblocking()). HTTP/2 asks it per stream: yes = the
  // handler runs right after the frames that carried the request are read, and its answer
  // goes out in the same write as the others of that read; no (or empty, the default) = a
  // fiber of its own per stream, so a slow handler holds up no other stream. HTTP/1.1 always
  // runs handlers on the connection's fiber. Router::inline_predicate() answers from the route
  // the request matches; the lionet binary installs it.
  std::function<bool(Request&)> runs_inline{};
  // HTTP/2 over the same handler, installed by lionet/http2 (http2::enable(options)); empty =
  // HTTP/1.1 only. It serves the connection, in its fiber, instead of the HTTP/1.1 loop when
  // the stream's application_protocol() is "h2" (TLS ALPN), or when a new connection's first
  // bytes are the HTTP/2 preface (h2c with prior knowledge; `Upgrade: h2c` is not offered).
  ProtocolServer http2{};
  // Listener options: tcp.max_connections is YAML servers[].max_connections, tcp.reuse_port
  // servers[].reuse_port; the others as in TcpServerOptions.
  TcpServerOptions tcp{};
  // The access log (access_log.h): one line per response, HTTP/1.1 and HTTP/2 alike, the
  // answers the server itself gives to refused requests included (README "Access log"). Null =
  // none (the default). Several servers may share one. Lines name the server by tcp.name
  // (JSON "server") unless it is TcpServerOptions' default "tcp". YAML: servers[].access_log
  std::shared_ptr<AccessLog> access_log{};
};

// Counters of one Server (relaxed atomics: statistics only).
struct ServerStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> errors{0};  // requests answered 4xx/5xx by the server itself (parse, limits)
  std::atomic<uint64_t> timeouts{0};
};

// Serves one connection until it ends (see the loop above). `stopping`, if given, makes every
// response after it becomes true carry Connection: close. `stats` and `info` may be null
// (info feeds Request::peer_address() / is_tls()).
void serve_connection(Stream& stream, const Handler& handler, const ServerOptions& options,
                      const std::atomic<bool>* stopping = nullptr, ServerStats* stats = nullptr,
                      const ConnectionInfo* info = nullptr);

// Wraps an accepted connection's stream (e.g. in TLS, including the handshake). Runs in the
// connection's fiber. Returns the stream to serve, or nullptr to drop the connection.
using StreamFactory = std::function<std::unique_ptr<Stream>(SocketStream&)>;
// The HTTPS factory: an SslStream over the accepted socket, handshake done (tls.cc).
StreamFactory tls_stream_factory(std::shared_ptr<SslContext> ctx);
// The same with the context asked for per connection (certificate rotation: make `current`
// return a new context; connections made before keep the one they started with). `current`
// runs in the connection's fiber, concurrently on every worker; null drops the connection.
StreamFactory tls_stream_factory(std::function<std::shared_ptr<SslContext>()> current);

class Server {
 public:
  // Serves on sched's workers, its IO through the scheduler's driver (SchedulerOptions::io).
  Server(Scheduler& sched, Handler handler, ServerOptions options = {});
  // The same on io.scheduler() (kept for code that made its own IOManager).
  Server(IOManager& io, Handler handler, ServerOptions options = {});
  ~Server() = default;  // tcp_ (the last member) stops first
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Before start(): every accepted connection is passed through f. `tls`: the streams it
  // returns are TLS (Request::is_tls), e.g. a wrapper around tls_stream_factory's.
  void set_stream_factory(StreamFactory f, bool tls = false);

  // Before start(): serve HTTPS with this server context (a TLS handshake per connection in
  // its fiber, bounded by the context's handshake_timeout; a failed handshake drops the
  // connection). Same as set_stream_factory(tls_stream_factory(ctx)).
  void enable_tls(std::shared_ptr<SslContext> ctx);

  // As TcpServer: listen() throws std::system_error naming the address; start() once.
  void listen(const Address& local);
  void start();
  // Stops accepting; kept-alive connections end after their current request (Connection:
  // close) or at their next read; true if all ended within drain.
  bool stop(Duration drain);

  std::vector<Address> addresses() const { return tcp_.addresses(); }
  TcpServer& tcp() noexcept { return tcp_; }
  const ServerOptions& options() const noexcept { return options_; }
  const ServerStats& stats() const noexcept { return stats_; }

 private:
  void serve(SocketStream& s);

  const ServerOptions options_;
  Handler handler_;
  StreamFactory factory_;
  bool tls_ = false;  // factory_ is the TLS one (Request::is_tls)
  std::atomic<bool> stopping_{false};  // release by stop(), acquire by connections
  ServerStats stats_;
  TcpServer tcp_;  // last: its fibers use the members above until stop()/destruction
};
}  // namespace lionet::http
