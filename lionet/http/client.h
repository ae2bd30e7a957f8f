// lionet/http/client.h: lionet::http::Client, a blocking-style HTTP/1.1 client for fibers (and
// plain threads): keep-alive connection pool per host, Content-Length and chunked bodies both
// ways, timeouts, HTTPS through SslStream.
//
//   lionet::http::Client client;
//   auto r = client.get("http://127.0.0.1:8080/hello");
//   if (r && r->status == 200) use(r->body);
//   ClientRequest q{.method = "PUT", .url = "http://h/x", .body = data};
//   auto s = client.request(q);
//
// Owns: an IdlePool (idle_pool.h) per scheme://host:port (at most max_idle_per_host, closed
// after idle_timeout, one older than 500 ms peeked for a close before reuse), the response parser (status line, headers, body framing: Content-Length,
// chunked through ChunkedDecoder, or until close). Must not: pipeline (one request in flight
// per connection), or throw on the request path (errors are Results: errno codes, EPROTO for a
// malformed response, EMSGSIZE for limits, ETIMEDOUT).
// Retry: a request on a reused connection that fails before any response byte arrives (the
// server closed the idle connection meanwhile) is sent once more on a new connection, unless
// its body comes from a writer (which cannot be replayed).
// Concurrency: any number of fibers may call request() on one Client at once; over HTTP/1.1
// each takes its own connection. The pool lock is a std::mutex held only around map and
// vector operations (never across a park).
// HTTP/2 (lionet::http2::enable(ClientOptions&) installs it): https:// connections offer "h2"
// by ALPN (unless the context lists its own ALPN protocols) and, when the server picks it,
// carry every request to that host at once, one stream each, over one connection; http://
// uses h2c with prior knowledge when ClientOptions::h2c is set. ClientResponse::protocol tells
// which version answered. A request refused by the server's GOAWAY or REFUSED_STREAM (it was
// not processed) is sent once more on a new connection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/http/idle_pool.h"
#include "lionet/http/response.h"
#include "lionet/http/url.h"
#include "lionet/net/stream.h"

namespace lionet {
class SslContext;
}

namespace lionet::http {

struct ClientOptions;
struct ClientRequest;
struct ClientResponse;

// A connection that carries many exchanges at once (HTTP/2). The seam through which http2/
// serves Client without http/ depending on it.
class MultiplexedConnection {
 public:
  virtual ~MultiplexedConnection() = default;
  // One exchange; any number of fibers (or threads) at once. On failure *unprocessed tells
  // whether the server is known not to have acted on the request (safe to send again).
  virtual Result<ClientResponse> exchange(const Url& url, const ClientRequest& req, TimePoint deadline,
                                          bool* unprocessed) = 0;
  // False once no new exchange can start on it (GOAWAY received, connection failed).
  virtual bool open() const noexcept = 0;
  virtual void close() noexcept = 0;
};
// Wraps a connected stream (TLS with "h2" chosen, or plain TCP for h2c) into a connection.
using ClientProtocol =
    std::function<std::unique_ptr<MultiplexedConnection>(std::unique_ptr<Stream>, const ClientOptions&)>;

struct ClientOptions {
  Duration connect_timeout = std::chrono::seconds(10);
  // The whole exchange: sending the request and reading the complete response.
  Duration request_timeout = std::chrono::seconds(30);
  // Idle pooled connections older than this are closed instead of reused.
  Duration idle_timeout = std::chrono::seconds(30);
  std::size_t max_idle_per_host = 16;
  std::size_t max_response_head_bytes = 64 * 1024;
  uint64_t max_body_bytes = 256u << 20;
  // For https:// URLs (a client context; nullptr = https fails with EPROTONOSUPPORT).
  std::shared_ptr<SslContext> tls{};
  std::string user_agent = "lionet";
  // HTTP/2, installed by lionet::http2::enable(ClientOptions&); empty = HTTP/1.1 only.
  ClientProtocol http2{};
  // With http2 installed: http:// URLs use HTTP/2 with prior knowledge (h2c) instead of 1.1.
  bool h2c = false;
};

struct ClientRequest {
  std::string method = "GET";
  std::string url{};
  std::vector<std::pair<std::string, std::string>> headers{};  // Host/Content-Length/TE are added
  std::string body{};  // sent with Content-Length (unless body_writer is set)
  // A streamed body: chunked unless body_length is set. Not replayed on retry.
  BodyWriterFn body_writer{};
  std::optional<uint64_t> body_length{};
  // Over HTTP/2 a body_writer's output is gathered in memory (at most max_body_bytes) and
  // then sent as the request's DATA frames.
  // This request's whole deadline (connect, send, response), instead of
  // ClientOptions::request_timeout. Either way a DeadlineScope of the calling fiber that ends
  // earlier bounds it (sched/cancel.h), and a cancel of the fiber ends it (ECANCELED).
  std::optional<Duration> timeout{};
};

// Errors of the client's own (beside errno values): kResponseTimeout is the deadline passing
// after the connection was made (it compares equal to std::errc::timed_out).
enum class ClientErrc { kResponseTimeout = 1 };
std::error_code make_error_code(ClientErrc e) noexcept;

struct ClientResponse {
  int status = 0;
  std::string reason;
  int version_minor = 1;
  std::string protocol = "HTTP/1.1";  // "HTTP/1.0", "HTTP/1.1" or "HTTP/2"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Trailer fields after the body (HTTP/2; the HTTP/1.1 client reads and drops them).
  std::vector<std::pair<std::string, std::string>> trailers;
  bool chunked = false;  // the body came chunked
  bool reused_connection = false;
  // First value of a header (case-insensitive) or "".
  std::string_view header(std::string_view name) const noexcept;
};

namespace detail {
// Methods whose requests carry a Content-Length even with an empty body (both clients).
inline bool method_has_body_by_default(std::string_view m) noexcept {
  return m == "POST" || m == "PUT" || m == "PATCH";
}
}  // namespace detail

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result<ClientResponse> request(const ClientRequest& req);
  Result<ClientResponse> get(std::string_view url);
  Result<ClientResponse> head(std::string_view url);
  Result<ClientResponse> post(std::string_view url, std::string body,
                              std::string_view content_type = "application/octet-stream");

  // Idle pooled connections right now (all hosts; HTTP/1.1 only).
  std::size_t idle_connections() const;
  // HTTP/2 connections open right now (all hosts).
  std::size_t http2_connections() const;
  void close_idle();
  const ClientOptions& options() const noexcept { return options_; }

 private:
  struct Exchange;

  // The keep-alive pool of `key` (scheme://host:port), made on first use.
  std::shared_ptr<IdlePool> pool(const std::string& key);
  // *fd: the socket under the stream (for the pool's idle peek).
  Result<std::unique_ptr<Stream>> connect(const Url& url, TimePoint deadline, int* fd = nullptr);
  // The HTTP/2 connection to url's host, connecting if there is none (one connect at a time
  // per host: the fibers that ask meanwhile wait for it). Null with *h1 set: the server chose
  // HTTP/1.1 by ALPN, and *h1 is that connection.
  Result<std::shared_ptr<MultiplexedConnection>> http2_connection(const Url& url, const std::string& key,
                                                                  TimePoint deadline,
                                                                  std::unique_ptr<PooledConnection>* h1);
  Result<ClientResponse> http1_request(const Url& url, const std::string& key, const ClientRequest& req,
                                       TimePoint deadline, std::unique_ptr<PooledConnection> first);
  // One attempt on `stream`. *any_response_byte tells the caller whether a retry is safe.
  Result<ClientResponse> exchange(Stream& stream, const Url& url, const ClientRequest& req, TimePoint deadline,
                                  bool* keep_alive, bool* any_response_byte);

  const ClientOptions options_;
  mutable std::mutex mu_;  // protects pools_, h2_ and h1_only_; never held across a park
  std::unordered_map<std::string, std::shared_ptr<IdlePool>> pools_;
  struct H2Host;
  std::unordered_map<std::string, std::shared_ptr<H2Host>> h2_;
  std::unordered_map<std::string, bool> h1_only_;  // https hosts whose ALPN chose HTTP/1.1
};
}  // namespace lionet::http
