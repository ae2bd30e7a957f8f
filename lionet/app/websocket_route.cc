// lionet/app/websocket_route.cc: a websocket route's checks (see websocket_route.h).
#include "lionet/app/websocket_route.h"

#include <string>

namespace lionet::app {
using config::field_error;

void check_websocket_route(const YAML::Node& n, const RouteConfig& r) {
  if (r.type == "websocket") {
    if (r.send_queue_bytes < 1024 || r.send_queue_bytes > (std::size_t{1} << 30))
      field_error(n, "send_queue_bytes", "must be in 1024..1073741824");
    if (r.handler != "echo") field_error(n, "handler", "unknown websocket handler '" + r.handler + "' (expected echo)");
    if (r.max_message_size < 1 || r.max_message_size > (std::size_t{1} << 30))
      field_error(n, "max_message_size", "must be in 1..1073741824");
    if (r.ping_interval.count() < 0 || r.ping_interval.count() > 3600000)
      field_error(n, "ping_interval", "must be in 0ms..3600000ms (0: no keepalive pings)");
  }
}

}  // namespace lionet::app
