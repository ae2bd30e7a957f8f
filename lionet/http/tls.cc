// lionet/http/tls.cc: HTTPS glue: the server's TLS stream factory and the client side's TLS
// handshake (for connect.cc), both over lionet::SslStream (ssl/). The only http/ file that includes ssl/ headers.
#include <openssl/ssl.h>

#include <utility>

#include "lionet/http/detail/client_tls.h"
#include "lionet/http/server.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/ssl/ssl_stream.h"

namespace lionet::http {

StreamFactory tls_stream_factory(std::shared_ptr<SslContext> ctx) {
  return [ctx = std::move(ctx)](SocketStream& s) -> std::unique_ptr<Stream> {
    auto tls = std::make_unique<SslStream>(ctx, s.socket());
    if (!tls->handshake()) return nullptr;  // bounded by the context's handshake_timeout
    return tls;
  };
}

StreamFactory tls_stream_factory(std::function<std::shared_ptr<SslContext>()> current) {
  return [current = std::move(current)](SocketStream& s) -> std::unique_ptr<Stream> {
    std::shared_ptr<SslContext> ctx = current();
    if (!ctx) return nullptr;
    auto tls = std::make_unique<SslStream>(std::move(ctx), s.socket());
    if (!tls->handshake()) return nullptr;
    return tls;
  };
}

void Server::enable_tls(std::shared_ptr<SslContext> ctx) {
  set_stream_factory(tls_stream_factory(std::move(ctx)), true);
}

namespace detail {
Result<std::unique_ptr<Stream>> client_tls_stream(const std::shared_ptr<SslContext>& ctx, Socket&& s,
                                                  const std::string& host, TimePoint deadline, Alpn alpn) {
  if (!ctx) return errno_error(EPROTONOSUPPORT);
  auto tls = std::make_unique<SslStream>(ctx, std::move(s));
  tls->set_server_name(host);
  if (alpn == Alpn::kH2First && ctx->options().alpn.empty()) {
    static constexpr unsigned char kH2First[] = "\x02h2\x08http/1.1";
    if (SSL_set_alpn_protos(tls->native(), kH2First, sizeof kH2First - 1) != 0) return errno_error(ENOMEM);
  } else if (alpn == Alpn::kHttp11) {
    static constexpr unsigned char kHttp11[] = "\x08http/1.1";
    if (SSL_set_alpn_protos(tls->native(), kHttp11, sizeof kHttp11 - 1) != 0) return errno_error(ENOMEM);
  }
  Duration left = deadline - now();
  if (left <= Duration::zero()) return errno_error(ETIMEDOUT);
  tls->set_timeouts(left, left);
  if (auto r = tls->handshake(); !r) return r.error();
  return std::unique_ptr<Stream>(std::move(tls));
}
}  // namespace detail
}  // namespace lionet::http
