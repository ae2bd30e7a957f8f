// lionet/websocket/client.cc: websocket::connect() (see client.h).
#include "lionet/websocket/client.h"

#include "lionet/http/connect.h"
#include "lionet/http/headers.h"
#include "lionet/http/response_head.h"
#include "lionet/http/url.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/websocket/deflate.h"
#include "lionet/websocket/handshake.h"

namespace lionet::websocket {
namespace {
constexpr size_t kMaxResponseHead = 16 * 1024;

bool arm(Stream& s, TimePoint deadline) {
  const Duration left = deadline - now();
  if (left <= Duration::zero()) return false;
  s.set_timeouts(left, left);
  return true;
}

Result<std::unique_ptr<Stream>> open_stream(const http::Url& url, const ClientOptions& o, TimePoint deadline) {
  http::ConnectOptions co;
  co.tls = url.scheme == "https";
  co.tls_context = o.tls;
  co.host = url.host;
  co.alpn = http::Alpn::kHttp11;  // WebSocket's handshake is HTTP/1.1: never let ALPN pick h2
  co.connect_deadline = deadline;
  co.deadline = deadline;
  return http::connect_stream(url.host, url.port, co);
}

// The response head's fields a client checks (views into the head).
struct Handshake {
  bool upgrade = false, connection = false;
  std::string_view accept, protocol;
  std::vector<std::string_view> extensions;  // every Sec-WebSocket-Extensions value
};

Handshake handshake_fields(const http::HeaderList& headers) {
  Handshake h;
  for (const auto& [name, value] : headers) {
    if (http::iequals(name, "Upgrade")) h.upgrade = h.upgrade || http::has_token(value, "websocket");
    if (http::iequals(name, "Connection")) h.connection = h.connection || http::has_token(value, "upgrade");
    if (http::iequals(name, "Sec-WebSocket-Accept")) h.accept = value;
    if (http::iequals(name, "Sec-WebSocket-Protocol")) h.protocol = value;
    if (http::iequals(name, "Sec-WebSocket-Extensions")) h.extensions.push_back(value);
  }
  return h;
}

std::string request_head(const http::Url& url, const ClientOptions& o, const std::string& key) {
  std::string r;
  r.reserve(256);
  r.append("GET ").append(url.target).append(" HTTP/1.1\r\nHost: ").append(url.authority);
  r.append("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ").append(key);
  r.append("\r\nSec-WebSocket-Version: 13\r\n");
  if (!o.subprotocols.empty()) {
    r.append("Sec-WebSocket-Protocol: ");
    for (size_t i = 0; i < o.subprotocols.size(); ++i) r.append(i ? ", " : "").append(o.subprotocols[i]);
    r.append("\r\n");
  }
  if (o.deflate.enabled) r.append("Sec-WebSocket-Extensions: ").append(deflate_offer(o.deflate)).append("\r\n");
  for (const auto& [n, v] : o.headers) r.append(n).append(": ").append(v).append("\r\n");
  r.append("\r\n");
  return r;
}

bool has_crlf(std::string_view s) noexcept { return s.find_first_of("\r\n") != std::string_view::npos; }
}  // namespace

Result<std::unique_ptr<Socket>> connect(std::string_view url, const ClientOptions& o, ConnectInfo* info) {
  ConnectInfo scratch;
  ConnectInfo& ci = info ? *info : scratch;
  ci = {};
  auto failed = [&](const char* why) -> std::error_code {
    ci.failure = why;
    return errno_error(EPROTO);
  };
  std::string as_http;
  if (url.size() >= 5 && http::iequals(url.substr(0, 5), "ws://")) {
    as_http.append("http://").append(url.substr(5));
  } else if (url.size() >= 6 && http::iequals(url.substr(0, 6), "wss://")) {
    as_http.append("https://").append(url.substr(6));
  } else {
    return errno_error(EINVAL);
  }
  auto u = http::parse_url(as_http);
  if (!u) return errno_error(EINVAL);
  for (const auto& [n, v] : o.headers)
    if (has_crlf(n) || has_crlf(v)) return errno_error(EINVAL);  // no header injection
  const TimePoint deadline = now() + o.handshake_timeout;
  auto opened = open_stream(*u, o, deadline);
  if (!opened) {
    if (opened.error() == std::errc::protocol_error) ci.failure = "TLS handshake failed";
    return opened.error();
  }
  std::unique_ptr<Stream> stream = std::move(*opened);
  if (!arm(*stream, deadline)) return errno_error(ETIMEDOUT);
  const std::string key = make_client_key();
  const std::string req = request_head(*u, o, key);
  if (auto r = stream->write(req); !r) return r.error();

  // The head, parsed by http/'s response parser (RFC 9112's rules: no obs-fold, no nameless
  // field); the handshake is HTTP/1.1 only (RFC 6455 4.1).
  std::string in;
  http::ResponseHead rh;
  http::HeadParse st;
  size_t scanned = 0;  // bytes of `in` known to hold no blank line
  while ((st = http::parse_response_head(in, rh, scanned)) == http::HeadParse::kNeedMore) {
    if (in.size() >= kMaxResponseHead) return errno_error(EMSGSIZE);
    scanned = in.size();
    char buf[4096];
    if (!arm(*stream, deadline)) return errno_error(ETIMEDOUT);
    auto r = stream->read(buf, sizeof buf);
    if (!r) return r.error();
    if (*r == 0) return failed("connection closed before the response head");
    in.append(buf, *r);
  }
  if (st == http::HeadParse::kError || rh.version_minor != 1) return failed("malformed response head");
  const size_t head_end = rh.size;
  ci.status = rh.status;
  const Handshake h = handshake_fields(rh.headers);
  if (rh.status != 101) return failed("the server did not answer 101 Switching Protocols");
  if (!h.upgrade) return failed("response without Upgrade: websocket");
  if (!h.connection) return failed("response without Connection: upgrade");
  if (h.accept != accept_key(key)) return failed("Sec-WebSocket-Accept does not match the key");
  const char* why = "";
  auto ext = accept_deflate_response(h.extensions, o.deflate, &why);
  if (!ext) return failed(why);
  std::string protocol(h.protocol);
  if (!protocol.empty()) {
    bool offered = false;
    for (const auto& p : o.subprotocols) offered = offered || p == protocol;
    if (!offered) return failed("the server chose a subprotocol that was not offered");
  }
  const Options& socket_options = o;
  std::optional<DeflateParams> deflate;
  if (ext->accepted) deflate = ext->params;
  return std::make_unique<Socket>(std::move(stream), Role::kClient, socket_options,
                                  std::string_view(in).substr(head_end), std::move(protocol), deflate);
}
}  // namespace lionet::websocket
