// lionet/websocket/server.h: websocket::accept(), the server side: an ordinary http::Handler that
// validates the opening handshake, answers 101 and runs the user's function on a Socket in the
// connection's fiber (the connection takeover of http/takeover.h).
//
//   router.get("/chat", websocket::accept([](websocket::Socket& ws) {
//     while (auto m = ws.receive()) ws.send(*m);
//   }));
//
// Owns: the server's handshake rules (RFC 6455 4.2.1-4.2.2) and the answers to requests that
// break them; the Socket's lifetime (it lives for the call of the user's function; when that
// returns, a still-open connection is closed with 1000, or 1011 if the function threw).
// Must not: be known by http/ (the route is just a handler), or accept an extension (none is
// offered back: permessage-deflate is a later step).
//
// Answers to requests that are not a valid upgrade (nothing is taken over; the connection
// stays HTTP and may be kept alive):
//   HTTP/2 request (no takeover there; RFC 8441 unsupported)            501
//   HTTP/1.0 request                                                    400
//   method other than GET                                               405 (Allow: GET)
//   no "Upgrade: websocket" or no "upgrade" token in Connection         426 (Upgrade: websocket)
//   Sec-WebSocket-Version not 13                                        426 (Sec-WebSocket-Version: 13)
//   Sec-WebSocket-Key missing or not base64 of 16 bytes                 400
// A valid request gets 101 with Upgrade, Connection, Sec-WebSocket-Accept and, when one of
// Options::subprotocols was offered, Sec-WebSocket-Protocol.
#pragma once

#include <functional>

#include "lionet/http/request.h"
#include "lionet/http/server.h"
#include "lionet/websocket/options.h"
#include "lionet/websocket/socket.h"

namespace lionet::websocket {

// Runs in the connection's fiber for the life of the WebSocket.
using SocketHandler = std::function<void(Socket&)>;
// The same with the request that opened it (path parameters, headers, peer address); the
// Request and its views are valid until the function returns.
using RequestSocketHandler = std::function<void(Socket&, const http::Request&)>;

http::Handler accept(SocketHandler fn, Options options = {});
http::Handler accept(RequestSocketHandler fn, Options options = {});
}  // namespace lionet::websocket
