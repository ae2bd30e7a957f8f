// lionet/app/static_route.h: the fields of a `type: static` route (YAML) and their checks,
// beside proxy_route.h and websocket_route.h: one file per route type's configuration.
//
// Owns: the static route's field list (keys on the route's mapping: root, mode, the file-mode
// thresholds, the open-file cache, precompressed siblings, index, try_files) and its checks,
// made through http/'s own parsers (parse_file_mode, try_files_candidate_error), so a value the
// handler would refuse is refused at load, at its line. Must not: open or stat anything (the
// StaticFiles handler does, when the runtime builds the route).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string_view>

#include "lionet/app/server_config.h"
#include "lionet/config/fields.h"

namespace lionet::app {

// The static route's keys, in the order they are written (listed in server_config.cc with
// every other route's).
const config::Fields<RouteConfig>& static_route_fields();
// Checks r's static-route fields (try_files of any route: only a static one may have them);
// throws config::ConversionError at the offending key.
void check_static_route(const YAML::Node& n, const RouteConfig& r);
// A route name: letters, digits, '_', '-' and '.' ("@name" in try_files refers to it).
bool valid_route_name(std::string_view name);

}  // namespace lionet::app
