// lionet/websocket/server.cc: websocket::accept() (see server.h).
#include "lionet/websocket/server.h"

#include <memory>
#include <string>
#include <vector>

#include "lionet/http/headers.h"
#include "lionet/http/takeover.h"
#include "lionet/log/log.h"
#include "lionet/websocket/detail/log.h"
#include "lionet/websocket/deflate.h"
#include "lionet/websocket/handshake.h"

namespace lionet::websocket {
namespace {
using detail::ws_log;

struct Route {
  RequestSocketHandler fn;
  Options options;
  bool uses_request = true;  // false: accept(SocketHandler): the HTTP input buffer goes at once
};

void refuse(http::Response& res, int status, std::string_view why) {
  LIONET_LOG_DEBUG(ws_log(), "refused a WebSocket handshake: {} {}", status, why);
  res.reply(status, std::string(why) + "\n");
}

// Checks the request; on failure fills res and returns false.
bool check_request(const http::Request& req, http::Response& res) {
  if (!req.can_take_over()) {
    if (req.version_minor() == 0) {
      refuse(res, 400, "a WebSocket handshake needs HTTP/1.1");
    } else {
      refuse(res, 501, "WebSocket needs HTTP/1.1 here: RFC 8441 (WebSocket over HTTP/2) is not supported");
    }
    return false;
  }
  if (req.method() != "GET") {
    refuse(res, 405, "a WebSocket handshake is a GET request");
    res.set_header("Allow", "GET");
    return false;
  }
  const http::HeaderList& h = req.headers();
  bool upgrade = false, connection = false;
  for (const auto& f : h) {
    if (http::iequals(f.name, "Upgrade") && http::has_token(f.value, "websocket")) upgrade = true;
    if (http::iequals(f.name, "Connection") && http::has_token(f.value, "upgrade")) connection = true;
  }
  if (!upgrade || !connection) {
    refuse(res, 426, "this resource speaks WebSocket: send Upgrade: websocket and Connection: Upgrade");
    res.set_header("Upgrade", "websocket");
    res.set_header("Connection", "Upgrade");
    return false;
  }
  if (h.get("Sec-WebSocket-Version") != "13") {
    refuse(res, 426, "unsupported Sec-WebSocket-Version (13 is spoken)");
    res.set_header("Sec-WebSocket-Version", "13");
    return false;
  }
  if (h.count("Sec-WebSocket-Key") != 1 || !valid_client_key(h.get("Sec-WebSocket-Key"))) {
    refuse(res, 400, "Sec-WebSocket-Key must be the base64 of 16 bytes");
    return false;
  }
  return true;
}

void run(const Route& route, const std::string& subprotocol, std::optional<DeflateParams> deflate, http::Takeover& t) {
  Socket ws(t.stream, Role::kServer, route.options, t.buffered, subprotocol, deflate);  // copies buffered
  ws.set_server_stopping(t.stopping);  // 1001 at the start of the server's drain
  std::string target(t.request.target());  // for the logs below
  // A handler that never sees the Request lets the connection's HTTP input buffer go now: an
  // idle WebSocket then holds only its own buffers (4 KiB less per connection by default).
  if (!route.uses_request) t.release_input();
  try {
    route.fn(ws, t.request);
  } catch (const std::exception& e) {
    LIONET_LOG_ERROR(ws_log(), "WebSocket handler for {} threw: {}", target, e.what());
    (void)ws.close(close_code::kInternalError, "internal error");
    return;
  } catch (...) {
    LIONET_LOG_ERROR(ws_log(), "WebSocket handler for {} threw a non-std exception", target);
    (void)ws.close(close_code::kInternalError, "internal error");
    return;
  }
  (void)ws.close(close_code::kNormal);  // returns at once if the connection is already over
}

http::Handler make(std::shared_ptr<const Route> route) {
  return [route = std::move(route)](http::Request& req, http::Response& res) {
    if (!check_request(req, res)) return;
    std::string subprotocol;
    if (!route->options.subprotocols.empty()) {
      std::vector<std::string_view> offered;
      for (const auto& f : req.headers())
        if (http::iequals(f.name, "Sec-WebSocket-Protocol")) offered.push_back(f.value);
      subprotocol = choose_subprotocol(route->options.subprotocols, offered);
    }
    std::optional<DeflateParams> deflate;
    std::string extensions;
    if (route->options.deflate.enabled) {
      std::vector<std::string_view> offers;
      for (const auto& f : req.headers())
        if (http::iequals(f.name, "Sec-WebSocket-Extensions")) offers.push_back(f.value);
      deflate = negotiate_deflate(offers, route->options.deflate, &extensions);
    }
    res.set_status(101);
    res.set_header("Upgrade", "websocket");
    res.set_header("Connection", "Upgrade");
    res.set_header("Sec-WebSocket-Accept", accept_key(req.header("Sec-WebSocket-Key")));
    if (!subprotocol.empty()) res.set_header("Sec-WebSocket-Protocol", subprotocol);
    if (deflate) res.set_header("Sec-WebSocket-Extensions", extensions);
    res.take_over([route, subprotocol = std::move(subprotocol), deflate](http::Takeover& t) {
      run(*route, subprotocol, deflate, t);
    });
  };
}
}  // namespace

http::Handler accept(SocketHandler fn, Options options) {
  return make(std::make_shared<const Route>(Route{[fn = std::move(fn)](Socket& ws, const http::Request&) { fn(ws); },
                                                  std::move(options), /*uses_request=*/false}));
}

http::Handler accept(RequestSocketHandler fn, Options options) {
  return make(std::make_shared<const Route>(Route{std::move(fn), std::move(options)}));
}
}  // namespace lionet::websocket
