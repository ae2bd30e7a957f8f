// lionet/app/websocket_route.h: the fields of a `type: websocket` route (YAML) and their
// checks, beside proxy_route.h and static_route.h.
//
// Owns: the websocket route's field list (handler, max_message_size, ping_interval,
// send_queue_bytes, deflate) and its checks. Must not: accept anything (the route's handler
// does, through websocket::accept, when the runtime builds it).
#pragma once

#include <yaml-cpp/yaml.h>

#include "lionet/app/server_config.h"
#include "lionet/config/fields.h"

namespace lionet::app {

// The websocket route's keys, in the order they are written (listed in server_config.cc
// with every other route's).
const config::Fields<RouteConfig>& websocket_route_fields();
// Checks r's websocket fields when r is a websocket route; throws config::ConversionError at
// the offending key.
void check_websocket_route(const YAML::Node& n, const RouteConfig& r);

}  // namespace lionet::app
