// lionet/websocket/client.h: websocket::connect(), the client side: resolves and connects (TCP,
// and TLS for wss:// through an ssl::SslContext, as http::Client does), sends the opening
// handshake, checks the server's 101, and returns a Socket that masks every frame.
//
//   websocket::ClientOptions o;
//   o.tls = lionet::SslContext::client({.ca_file = "ca.pem"});   // for wss://
//   auto ws = websocket::connect("wss://example.test:8443/chat", o);
//   if (!ws) return ws.error();
//   (*ws)->send_text("hello");
//   auto reply = (*ws)->receive();
//
// Owns: URL handling (ws://, wss://; default ports 80 and 443), the request head (Host,
// Upgrade, Connection, Sec-WebSocket-Key/Version, subprotocols, the caller's extra headers),
// and the response checks (RFC 6455 4.1): status 101, Upgrade: websocket, Connection: upgrade,
// Sec-WebSocket-Accept matching our key, a subprotocol only from those offered, no extension
// (none is offered). Must not: follow redirects or retry (a failed handshake is the caller's
// decision), or throw (errors are Results).
//
// Errors: EINVAL (not a ws:// or wss:// URL), the resolver's and connect's errors,
// EPROTONOSUPPORT (wss:// without ClientOptions::tls), EPROTO (TLS failure, or a response that
// breaks the rules above; ConnectInfo says which), EMSGSIZE (a response head over 16 KiB),
// ETIMEDOUT (handshake_timeout passed).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lionet/base/result.h"
#include "lionet/websocket/options.h"
#include "lionet/websocket/socket.h"

namespace lionet {
class SslContext;
}

namespace lionet::websocket {

// Filled by assignment (o.tls = ...; o.max_frame_size = ...): a designated initializer cannot
// name the fields of the Options base, and gcc's -Wmissing-field-initializers flags the base
// it leaves out (ClientOptions{.tls = t}).
struct ClientOptions : Options {
  // For wss:// URLs: a client context (verification as configured there: SslOptions::ca_file,
  // verify_peer, server_name); nullptr = wss:// fails with EPROTONOSUPPORT. The host name of
  // the URL is sent as SNI and checked against the certificate.
  std::shared_ptr<SslContext> tls{};
  // Extra request header fields (Origin, Authorization, Cookie, ...).
  std::vector<std::pair<std::string, std::string>> headers{};
};

// What the server answered, for a caller that wants to say why a handshake failed.
struct ConnectInfo {
  int status = 0;  // the response's status (0 if none was read)
  std::string failure;  // "" on success, else which rule the response broke
};

Result<std::unique_ptr<Socket>> connect(std::string_view url, const ClientOptions& options = {},
                                        ConnectInfo* info = nullptr);
}  // namespace lionet::websocket
