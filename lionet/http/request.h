// lionet/http/request.h: lionet::http::Request, what a handler sees of one request: the parsed
// head (views into the connection's input buffer), the body as a blocking-style reader, and
// the path parameters the Router matched.
//
// Owns: nothing of the bytes. Every string_view a Request returns stays valid until the handler
// (and the `after` middleware) return; copy what must live longer. Must not be kept past the
// handler: the server reuses one Request object per connection.
//
// Body: read_body() reads the decoded body (Content-Length or chunked) in the connection's
// fiber. The first call answers `Expect: 100-continue` with "100 Continue" (so a handler that
// rejects a request without reading its body never invites the upload). Errors: EMSGSIZE
// (body over max_body_bytes: the server answers 413), EBADMSG (malformed chunked framing: 400),
// ETIMEDOUT (body_timeout passed: 408), ECONNABORTED (the client closed mid-body), or the
// stream's own error. After any error the server answers with that status (if the handler has
// not) and closes the connection. A body the handler leaves unread is read and discarded by the
// server (up to ServerOptions::drain_body_max, else the connection is closed).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lionet/base/result.h"
#include "lionet/base/strings.h"
#include "lionet/http/request_parser.h"
#include "lionet/http/url.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"
#include "lionet/net/stream.h"

namespace lionet::http {

namespace detail {
// The connection side of a request body (implemented by the server's connection).
class BodySource {
 public:
  virtual Result<size_t> read_body(void* buf, size_t n) = 0;
  virtual bool body_complete() const noexcept = 0;
  // The connection can be handed to another protocol after a 101 (HTTP/1.1's; not HTTP/2's).
  virtual bool can_take_over() const noexcept { return false; }

 protected:
  ~BodySource() = default;
};
}  // namespace detail

// What the server knows of the connection a request came on (serve_connection's caller fills
// it; all fields optional).
struct ConnectionInfo {
  ConnectionInfo() = default;
  ConnectionInfo(Socket* s, bool is_tls) noexcept : socket(s), tls(is_tls) {}
  ConnectionInfo(const ConnectionInfo&) = delete;
  ConnectionInfo& operator=(const ConnectionInfo&) = delete;

  Socket* socket = nullptr;  // the TCP/Unix socket under the stream (addresses are read lazily)
  bool tls = false;  // the stream is TLS
  const Stream* stream = nullptr;  // the stream requests come on (its verified peer certificate)

  // The peer's address: getpeername once per connection, then the copy (a proxy asks on every
  // request). Any fiber of the connection (HTTP/2 streams run at once): whoever first gets
  // the address publishes it; racing callers read it themselves meanwhile.
  Result<Address> peer_address() const {
    if (peer_state_.load(std::memory_order_acquire) == 2) return peer_;
    if (!socket) return errno_error(ENOTCONN);
    auto a = socket->peer_address();
    int expected = 0;
    if (a && peer_state_.compare_exchange_strong(expected, 1, std::memory_order_relaxed)) {
      peer_ = *a;
      peer_state_.store(2, std::memory_order_release);
    }
    return a;
  }

 private:
  mutable std::atomic<int> peer_state_{0};  // 0 unknown, 1 being stored, 2 peer_ is valid
  mutable Address peer_;
};

class Request {
 public:
  static constexpr size_t kMaxParams = 8;
  struct Param {
    std::string_view name, value;
  };

  Request() = default;
  // For servers, tests and tools: a request over a parsed head and an optional body source.
  explicit Request(const RequestHead* head, detail::BodySource* body = nullptr) noexcept : head_(head), body_(body) {}
  void reset(const RequestHead* head, detail::BodySource* body) noexcept {
    head_ = head;
    body_ = body;
    nparams_ = 0;
    route_pattern_ = {};
    hint_router_ = hint_route_ = nullptr;
  }

  std::string_view method() const noexcept { return head_->method; }
  bool is_head() const noexcept { return equals_literal(head_->method, "HEAD"); }
  std::string_view target() const noexcept { return head_->target; }
  // Path as sent (percent-encoding kept; see path_decode() in router.h to decode).
  std::string_view path() const noexcept { return head_->path; }
  std::string_view query() const noexcept { return head_->query; }
  // The decoded value of query parameter `name` (the first, '+' as a space), or nullopt;
  // query_params(): every pair, decoded, in order (url.h).
  std::optional<std::string> query_param(std::string_view name) const { return http::query_param(query(), name); }
  std::vector<std::pair<std::string, std::string>> query_params() const { return http::query_params(query()); }
  std::string_view host() const noexcept { return head_->host; }
  int version_minor() const noexcept { return head_->version_minor; }
  const HeaderList& headers() const noexcept { return head_->headers; }
  std::string_view header(std::string_view name) const noexcept { return head_->headers.get(name); }
  // What the client asked for (the server may still close).
  bool keep_alive() const noexcept { return head_->keep_alive; }
  bool expects_continue() const noexcept { return head_->expect_continue; }
  const RequestHead& head() const noexcept { return *head_; }

  bool has_body() const noexcept { return head_->body_kind != BodyKind::kNone; }
  bool chunked() const noexcept { return head_->body_kind == BodyKind::kChunked; }
  // Content-Length of the body (nullopt for chunked; 0 for no body).
  std::optional<uint64_t> content_length() const noexcept {
    if (head_->body_kind == BodyKind::kChunked) return std::nullopt;
    return head_->body_kind == BodyKind::kContentLength ? head_->content_length : 0;
  }
  // Up to n decoded body bytes; 0 at the end of the body. See the top of the file.
  Result<size_t> read_body(void* buf, size_t n) {
    if (!body_ || !has_body()) return size_t{0};
    return body_->read_body(buf, n);
  }
  // Appends the rest of the body to out (bounded by max_body_bytes). Returns the bytes appended.
  Result<size_t> read_body(std::string& out);
  bool body_complete() const noexcept { return !body_ || !has_body() || body_->body_complete(); }
  // Whether a 101 with Response::take_over() can hand this connection to another protocol
  // (takeover.h): an HTTP/1.1 request on an HTTP/1.1 connection. False over HTTP/2 (RFC 8441
  // is not supported), for HTTP/1.0 and for a Request made without a server.
  bool can_take_over() const noexcept { return body_ && head_->version_minor >= 1 && body_->can_take_over(); }

  // Path parameters set by the Router ("{topic}" -> param("topic")); "" if absent. A prefix
  // route's remainder is param("**").
  std::string_view param(std::string_view name) const noexcept {
    for (size_t i = 0; i < nparams_; ++i)
      if (params_[i].name == name) return params_[i].value;
    return {};
  }
  size_t param_count() const noexcept { return nparams_; }
  const Param& param_at(size_t i) const noexcept { return params_[i]; }
  // The pattern of the route that matched ("" before routing or when none did).
  std::string_view route_pattern() const noexcept { return route_pattern_; }

  // The client's address (getpeername on first use; ENOTCONN when the server was not told
  // the socket, e.g. serve_connection over a bare Stream), this side's address, and whether
  // the connection is TLS.
  Result<Address> peer_address() const {
    if (!conn_) return errno_error(ENOTCONN);
    return conn_->peer_address();
  }
  Result<Address> local_address() const {
    if (!conn_ || !conn_->socket) return errno_error(ENOTCONN);
    return conn_->socket->local_address();
  }
  bool is_tls() const noexcept { return conn_ && conn_->tls; }
  // The client certificate the TLS handshake verified (https servers asking for one:
  // SslOptions::verify_peer), else nullptr. Borrowed, valid during the handler.
  x509_st* peer_certificate() const noexcept {
    return conn_ && conn_->stream ? conn_->stream->verified_peer_certificate() : nullptr;
  }
  void set_connection_info(const ConnectionInfo* info) noexcept { conn_ = info; }

  // For the Router.
  bool add_param(std::string_view name, std::string_view value) noexcept {
    if (nparams_ == kMaxParams) return false;
    params_[nparams_++] = {name, value};
    return true;
  }
  void clear_params() noexcept { nparams_ = 0; }
  void set_route_pattern(std::string_view p) noexcept { route_pattern_ = p; }
  // The route `router` found for this request before it was dispatched (Router::runs_inline),
  // so dispatching does not look it up again; null when none was kept.
  void set_route_hint(const void* router, const void* route) noexcept {
    hint_router_ = router;
    hint_route_ = route;
  }
  const void* route_hint(const void* router) const noexcept { return hint_router_ == router ? hint_route_ : nullptr; }

 private:
  const RequestHead* head_ = nullptr;
  detail::BodySource* body_ = nullptr;
  const ConnectionInfo* conn_ = nullptr;
  std::array<Param, kMaxParams> params_{};
  size_t nparams_ = 0;
  std::string_view route_pattern_;
  const void* hint_router_ = nullptr;
  const void* hint_route_ = nullptr;
};
}  // namespace lionet::http
