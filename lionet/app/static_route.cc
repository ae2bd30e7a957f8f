// lionet/app/static_route.cc: a static route's checks (see static_route.h).
#include "lionet/app/static_route.h"

#include <charconv>
#include <string>

#include "lionet/http/static_files.h"

namespace lionet::app {
using config::conversion_error;
using config::field_error;

void check_static_route(const YAML::Node& n, const RouteConfig& r) {
  if (!r.try_files.empty() && r.type != "static")
    field_error(n, "try_files", "only a static route takes try_files (this one is " + r.type + ")");
  for (std::size_t i = 0; i < r.try_files.size(); ++i) {
    const std::string& e = r.try_files[i];
    const bool last = i + 1 == r.try_files.size();
    if (e.starts_with('=') || e.starts_with('@')) {
      if (!last) field_error(n, "try_files", "'" + e + "' may only be the last entry (the fallback)");
      if (i == 0) field_error(n, "try_files", "'" + e + "' needs a file candidate before it (\"$uri\", ...)");
      if (e[0] == '@' && !valid_route_name(std::string_view(e).substr(1)))
        field_error(n, "try_files", "'" + e + "' is not @ and a route name");
      if (e[0] == '=') {
        int code = 0;
        const auto [p, ec] = std::from_chars(e.data() + 1, e.data() + e.size(), code);
        if (ec != std::errc() || p != e.data() + e.size() || code < 200 || code > 599)
          field_error(n, "try_files", "'" + e + "' is not an HTTP status (=200 .. =599)");
      }
    } else if (std::string why = http::try_files_candidate_error(e); !why.empty()) {
      field_error(n, "try_files", why);
    }
  }
  if (r.type == "static" && r.root.empty()) conversion_error(n, "a static route needs a root directory");
  if (!http::parse_file_mode(r.mode)) {  // the static handler's own parser: one list of modes
    std::string modes;
    for (auto m : http::kFileModes) modes.append(modes.empty() ? "" : ", ").append(http::file_mode_name(m));
    field_error(n, "mode", "unknown file mode '" + r.mode + "' (expected one of " + modes + ")");
  }
  if (r.memory_max > r.sendfile_min) conversion_error(n, "memory_max must not exceed sendfile_min");
  if (r.chunk_size < 512 || r.chunk_size > 16 * 1024 * 1024) {
    field_error(n, "chunk_size", "must be in 512..16777216");
  }
  if (r.open_file_cache > 1000000) field_error(n, "open_file_cache", "must be in 0..1000000");
  if (r.open_file_cache_valid.count() < 0 || r.open_file_cache_valid.count() > 3600000) {
    field_error(n, "open_file_cache_valid", "must be in 0ms..3600000ms");
  }
  for (size_t i = 0; i < r.precompressed.size(); ++i) {
    const std::string& e = r.precompressed[i];
    if (e != "br" && e != "gzip" && e != "zstd") {
      field_error(n, "precompressed", "unknown encoding '" + e + "' (expected br, gzip or zstd)");
    }
    for (size_t j = 0; j < i; ++j)
      if (r.precompressed[j] == e) field_error(n, "precompressed", "encoding '" + e + "' listed twice");
  }
}

}  // namespace lionet::app
