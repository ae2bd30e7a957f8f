// lionet/http2/client.h: HTTP/2 for lionet::http::Client.
//
//   lionet::http::ClientOptions o;
//   o.tls = client_context;          // https:// offers "h2" by ALPN, falls back to HTTP/1.1
//   o.h2c = true;                    // http:// too, with prior knowledge (optional)
//   lionet::http2::enable(o);
//   lionet::http::Client client(o);  // requests from many fibers share one connection per host
//   auto r = client.get("https://127.0.0.1:8443/");   // r->protocol == "HTTP/2"
//
// A connection carries every request to its host at once, one stream each (up to the
// server's SETTINGS_MAX_CONCURRENT_STREAMS in flight; nghttp2 holds the rest until a stream
// closes). There is no reader fiber: the fibers waiting for their responses take turns
// reading the connection (one at a time, the others wait on a condition variable), so an
// idle connection costs no fiber and the client works from plain threads too. Responses are
// gathered whole (at most ClientOptions::max_body_bytes each; over it the stream is reset and
// the request fails with EMSGSIZE); flow-control windows are given back as DATA arrives.
#pragma once

#include <memory>

#include "lionet/http/client.h"

namespace lionet::http2 {

// Installs HTTP/2 into `options` (ClientOptions::http2).
void enable(http::ClientOptions& options);

// An HTTP/2 client connection over `stream` (connected; TLS with "h2" chosen, or plain TCP
// for h2c). The connection preface and SETTINGS go out with the first request.
std::unique_ptr<http::MultiplexedConnection> client_connection(std::unique_ptr<Stream> stream,
                                                               const http::ClientOptions& options);

}  // namespace lionet::http2
