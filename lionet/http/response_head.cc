// lionet/http/response_head.cc: parse_response_head (see response_head.h).
#include "lionet/http/response_head.h"

#include <array>
#include <charconv>

namespace lionet::http {
namespace {
// Bytes a field name (bit 1) or value (bit 2) may not hold here: one table load per byte.
constexpr std::array<unsigned char, 256> make_bad() {
  std::array<unsigned char, 256> t{};
  for (unsigned char c : {' ', '\t'}) t[c] |= 1;
  for (unsigned char c : {'\r', '\n', '\0'}) t[c] |= 3;
  return t;
}
constexpr std::array<unsigned char, 256> kBad = make_bad();
bool holds(std::string_view s, unsigned char bit) noexcept {
  for (char c : s)
    if (kBad[static_cast<unsigned char>(c)] & bit) return true;
  return false;
}
}  // namespace

HeadParse parse_response_head(std::string_view buf, ResponseHead& out, std::size_t scan_from) {
  size_t end = buf.find("\r\n\r\n", scan_from > 3 ? scan_from - 3 : 0);
  if (end == std::string_view::npos) return HeadParse::kNeedMore;
  out.size = end + 4;
  std::string_view h = buf.substr(0, end + 2);  // every line with its CRLF
  size_t eol = h.find("\r\n");
  std::string_view line = h.substr(0, eol);
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || (line[7] != '0' && line[7] != '1') || line[8] != ' ')
    return HeadParse::kError;
  out.version_minor = line[7] - '0';
  int code = 0;
  auto [p, ec] = std::from_chars(line.data() + 9, line.data() + 12, code);
  if (ec != std::errc() || p != line.data() + 12 || code < 100) return HeadParse::kError;
  if (line.size() > 12 && line[12] != ' ') return HeadParse::kError;
  out.status = code;
  out.reason = trim_ows(line.substr(12));
  out.headers.clear();
  bool close = false, keep = false;
  for (size_t pos = eol + 2; pos < h.size();) {
    size_t e = h.find("\r\n", pos);
    std::string_view f = h.substr(pos, e - pos);
    size_t colon = f.find(':');
    if (colon == std::string_view::npos || colon == 0) return HeadParse::kError;
    std::string_view name = f.substr(0, colon);
    if (holds(name, 1)) return HeadParse::kError;
    std::string_view value = trim_ows(f.substr(colon + 1));
    if (holds(value, 2)) return HeadParse::kError;
    out.headers.add(name, value);
    if (iequals(name, "connection")) {
      close |= has_token(value, "close");
      keep |= has_token(value, "keep-alive");
    }
    pos = e + 2;
  }
  out.keep_alive = !close && (out.version_minor >= 1 || keep);
  return HeadParse::kDone;
}
}  // namespace lionet::http
