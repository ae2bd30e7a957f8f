// lionet/http/response_head.cc: parse_response_head (see response_head.h).
#include "lionet/http/response_head.h"

#include <array>
#include <charconv>
#include <cstdint>

#include "lionet/http/detail/chars.h"

namespace lionet::http {
namespace {
// One table load per byte classifies it for both rules: what the parser refuses (whitespace in
// a name; CR, LF, NUL anywhere) and what Response::add_header would (a name byte outside
// tchar, a value byte outside field-value), OR-ed over a name or value with no branch per byte.
enum : unsigned char { kBadInName = 1, kBadInValue = 2, kNotTchar = 4, kNotFieldChar = 8 };
constexpr std::array<unsigned char, 256> make_classes() {
  std::array<unsigned char, 256> t{};
  for (int c = 0; c < 256; ++c) {
    if (!detail::kTchar[c]) t[c] |= kNotTchar;
    if (!detail::kFieldChar[c]) t[c] |= kNotFieldChar;
  }
  for (unsigned char c : {' ', '\t'}) t[c] |= kBadInName;
  for (unsigned char c : {'\r', '\n', '\0'}) t[c] |= kBadInName | kBadInValue;
  return t;
}
constexpr std::array<unsigned char, 256> kClass = make_classes();
unsigned char classes_of(std::string_view s) noexcept {
  unsigned char acc = 0;
  for (char c : s) acc |= kClass[static_cast<unsigned char>(c)];
  return acc;
}
// classes_of for a value, whose value bits only count: whole words of plain bytes skipped.
unsigned char value_classes_of(std::string_view s) noexcept { return classes_of(s.substr(detail::plain_prefix(s))); }
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
  // The reason phrase (RFC 9112 4: HTAB, SP, VCHAR, obs-text) holds no CR, LF or NUL: a bare
  // LF there is a line end to another parser, and the Client hands the reason to applications.
  if (classes_of(line) & kBadInValue) return HeadParse::kError;
  out.status = code;
  out.reason = trim_ows(line.substr(12));
  out.headers.clear();
  bool close = false, keep = false, valid = true;
  for (size_t pos = eol + 2; pos < h.size();) {
    size_t e = h.find("\r\n", pos);
    std::string_view f = h.substr(pos, e - pos);
    size_t colon = f.find(':');
    if (colon == std::string_view::npos || colon == 0) return HeadParse::kError;
    std::string_view name = f.substr(0, colon);
    const unsigned char in_name = classes_of(name);
    if (in_name & kBadInName) return HeadParse::kError;
    std::string_view value = trim_ows(f.substr(colon + 1));
    const unsigned char in_value = value_classes_of(value);
    if (in_value & kBadInValue) return HeadParse::kError;
    if ((in_name & kNotTchar) || (in_value & kNotFieldChar)) valid = false;
    out.headers.add(name, value);
    if (iequals(name, "connection")) {
      close |= has_token(value, "close");
      keep |= has_token(value, "keep-alive");
    }
    pos = e + 2;
  }
  out.keep_alive = !close && (out.version_minor >= 1 || keep);
  out.valid_fields = valid;
  return HeadParse::kDone;
}
}  // namespace lionet::http
