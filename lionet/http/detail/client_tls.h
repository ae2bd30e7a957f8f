// lionet/http/detail/client_tls.h: the one place the client reaches into ssl/ (tls.cc), so
// that client.cc does not include OpenSSL headers. Internal to http/.
#pragma once

#include <memory>
#include <string>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/net/socket.h"
#include "lionet/net/stream.h"

namespace lionet {
class SslContext;
}

namespace lionet::http::detail {
// A TLS client stream over s, handshake done (SNI and host check = host). EPROTONOSUPPORT
// without a context; the handshake's own errors (EPROTO, ETIMEDOUT) otherwise. offer_h2: ALPN
// offers "h2" then "http/1.1" unless the context has an ALPN list of its own.
Result<std::unique_ptr<Stream>> client_tls_stream(const std::shared_ptr<SslContext>& ctx, Socket&& s,
                                                  const std::string& host, TimePoint deadline, bool offer_h2);
}  // namespace lionet::http::detail
