// lionet/http/connect.h: the client side's one way to a server: each address in turn gets a TCP
// connect, and for https the connection is wrapped in TLS (SNI and the host check against
// `host`, ALPN as asked). http::Client, the reverse proxy's upstreams and websocket::connect
// all connect through it.
//
// Owns: the order addresses are tried in and which errors move on to the next one. Must not:
// look names up on a worker (Address::lookup runs getaddrinfo on the offload pool), keep
// anything between calls, or know what is sent over the stream.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "lionet/base/clock.h"
#include "lionet/base/result.h"
#include "lionet/net/address.h"
#include "lionet/net/stream.h"

namespace lionet {
class SslContext;
}

namespace lionet::http {

// What a TLS client offers in ALPN.
enum class Alpn : unsigned char {
  kContext,  // the context's own list (SslOptions::alpn), none if it has none
  kH2First,  // "h2" then "http/1.1", unless the context has a list of its own
  kHttp11,  // "http/1.1" only, whatever the context says (a handshake that must stay HTTP/1)
};

struct ConnectOptions {
  bool tls = false;  // wrap in TLS (an https:// or wss:// URL)
  std::shared_ptr<SslContext> tls_context{};  // required when tls: EPROTONOSUPPORT without
  std::string host{};  // SNI and certificate host check
  Alpn alpn = Alpn::kContext;
  TimePoint connect_deadline{};  // bounds each address's TCP connect
  TimePoint deadline{};  // bounds the TLS handshake (and the whole call)
};

// Tries addrs in order: a refused, unreachable or timed-out connect, or a failed TLS handshake,
// moves on to the next address; the last error is returned when none worked (EHOSTUNREACH for
// an empty list). `fd`, if given, receives the connected socket's fd (owned by the stream).
Result<std::unique_ptr<Stream>> connect_stream(std::span<const Address> addrs, const ConnectOptions& o,
                                               int* fd = nullptr);
// Looks host:port up (on the offload pool), then the same.
Result<std::unique_ptr<Stream>> connect_stream(const std::string& host, int port, const ConnectOptions& o,
                                               int* fd = nullptr);

}  // namespace lionet::http
