// lionet/websocket/client.cc: websocket::connect() (see client.h).
#include "lionet/websocket/client.h"

#include <openssl/ssl.h>

#include <charconv>

#include "lionet/http/headers.h"
#include "lionet/http/url.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"
#include "lionet/net/socket_stream.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/ssl/ssl_stream.h"
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
  auto addrs = Address::lookup(url.host + ":" + std::to_string(url.port));
  if (!addrs) return addrs.error();
  std::error_code last = errno_error(EHOSTUNREACH);
  for (const Address& a : *addrs) {
    auto s = lionet::Socket::connect_to(a, Deadline::at(deadline));
    if (!s) {
      last = s.error();
      continue;
    }
    if (url.scheme != "https") return std::unique_ptr<Stream>(new SocketStream(std::move(*s)));
    if (!o.tls) return errno_error(EPROTONOSUPPORT);
    auto tls = std::make_unique<SslStream>(o.tls, std::move(*s));
    tls->set_server_name(url.host);
    // WebSocket's handshake is HTTP/1.1: never let ALPN pick h2.
    static constexpr unsigned char kHttp11[] = "\x08http/1.1";
    if (SSL_set_alpn_protos(tls->native(), kHttp11, sizeof kHttp11 - 1) != 0) return errno_error(ENOMEM);
    if (!arm(*tls, deadline)) return errno_error(ETIMEDOUT);
    if (auto r = tls->handshake(); !r) return r.error();
    return std::unique_ptr<Stream>(std::move(tls));
  }
  return last;
}

// The response head's fields we check (views into the head).
struct ResponseHead {
  int status = 0;
  bool upgrade = false, connection = false;
  std::string_view accept, protocol;
  std::vector<std::string_view> extensions;  // every Sec-WebSocket-Extensions value
};

bool parse_head(std::string_view head, ResponseHead* out) {
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  if (!line.starts_with("HTTP/1.1 ") || line.size() < 12) return false;
  int status = 0;
  auto [p, ec] = std::from_chars(line.data() + 9, line.data() + 12, status);
  if (ec != std::errc() || p != line.data() + 12) return false;
  out->status = status;
  while (eol != std::string_view::npos) {
    head.remove_prefix(eol + 2);
    eol = head.find("\r\n");
    std::string_view field = head.substr(0, eol);
    if (field.empty()) break;
    size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    std::string_view name = field.substr(0, colon), value = http::trim_ows(field.substr(colon + 1));
    if (http::iequals(name, "Upgrade")) out->upgrade = out->upgrade || http::has_token(value, "websocket");
    if (http::iequals(name, "Connection")) out->connection = out->connection || http::has_token(value, "upgrade");
    if (http::iequals(name, "Sec-WebSocket-Accept")) out->accept = value;
    if (http::iequals(name, "Sec-WebSocket-Protocol")) out->protocol = value;
    if (http::iequals(name, "Sec-WebSocket-Extensions")) out->extensions.push_back(value);
  }
  return true;
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

  std::string in;
  size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    if (in.size() >= kMaxResponseHead) return errno_error(EMSGSIZE);
    char buf[4096];
    if (!arm(*stream, deadline)) return errno_error(ETIMEDOUT);
    auto r = stream->read(buf, sizeof buf);
    if (!r) return r.error();
    if (*r == 0) return failed("connection closed before the response head");
    // Search from just before the new bytes: the blank line may straddle two reads.
    const size_t from = in.size() >= 3 ? in.size() - 3 : 0;
    in.append(buf, *r);
    head_end = in.find("\r\n\r\n", from);
  }
  head_end += 4;
  ResponseHead h;
  if (!parse_head(std::string_view(in).substr(0, head_end), &h)) return failed("malformed response head");
  ci.status = h.status;
  if (h.status != 101) return failed("the server did not answer 101 Switching Protocols");
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
