// lionet/http/mime.cc: mime_type_for() (see mime.h).
#include "lionet/http/mime.h"

#include "lionet/http/headers.h"

namespace lionet::http {
namespace {
struct MimeEntry {
  std::string_view ext, type;
};
// Linear scan: ~35 entries compared by length first is faster than hashing a lowered copy.
constexpr MimeEntry kTable[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"bmp", "image/bmp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"map", "application/json"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
};
}  // namespace

std::string_view mime_type_for(std::string_view path) noexcept {
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == name.size()) return "application/octet-stream";
  std::string_view ext = name.substr(dot + 1);
  for (const auto& e : kTable)
    if (e.ext.size() == ext.size() && iequals(e.ext, ext)) return e.type;
  return "application/octet-stream";
}

}  // namespace lionet::http
