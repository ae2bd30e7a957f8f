// lionet/http/detail/client_tls.h: the one place the client side reaches into ssl/ (tls.cc), so
// that connect.cc does not include OpenSSL headers. Internal to http/.
#pragma once

#include <memory>
#include <string>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/http/connect.h"
#include "lionet/net/socket.h"
#include "lionet/net/stream.h"

namespace lionet {
class SslContext;
}

namespace lionet::http::detail {
// A TLS client stream over s, handshake done by deadline (SNI and host check = host), ALPN as
// `alpn` says (connect.h). EPROTONOSUPPORT without a context; the handshake's own errors
// (EPROTO, ETIMEDOUT) otherwise.
Result<std::unique_ptr<Stream>> client_tls_stream(const std::shared_ptr<SslContext>& ctx, Socket&& s,
                                                  const std::string& host, TimePoint deadline, Alpn alpn);
}  // namespace lionet::http::detail
