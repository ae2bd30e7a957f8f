// lionet/base/utf8.h: UTF-8 checks and the JSON string escaping shared by the writers of JSON
// text (http/'s access log, syslog/'s stored values), which write bytes that are not valid
// UTF-8 as \u00XX so that any input makes valid JSON.
#pragma once

#include <cstddef>
#include <string_view>

namespace lionet {

// Length of the valid UTF-8 sequence starting at s[i] (1..4 bytes: no overlong forms, no
// UTF-16 surrogates, nothing above U+10FFFF), or 0 if the bytes there start none. i < s.size().
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const std::size_t left = s.size() - i;
  auto cont = [&](std::size_t k) { return (b(i + k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(i + 1) > 0x9F) return 0;  // UTF-16 surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(i + 1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// Appends s as the contents of a JSON string (no quotes): '"' and '\\' escaped, control bytes
// (< 0x20) and bytes that start no valid UTF-8 sequence as \u00XX (upper-case hex), valid
// UTF-8 as it is. Out: anything with append(const char*, size_t) (std::string, a raw writer).
template <class Out>
void append_json_escaped(Out& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      const std::size_t n = c < 0x80 ? 1 : utf8_sequence(s, i);
      if (n) {
        i += n;
        continue;
      }
    }
    out.append(s.data() + run, i - run);
    if (c == '"' || c == '\\') {
      const char esc[2] = {'\\', static_cast<char>(c)};
      out.append(esc, 2);
    } else {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, 6);
    }
    run = ++i;
  }
  out.append(s.data() + run, s.size() - run);
}
}  // namespace lionet
