// lionet/http/detail/chars.h: the RFC 9110 / 9112 character classes the parsers share
// (tchar, field-vchar, hex digits) as constexpr tables, and append_hex. Internal to http/.
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lionet::http::detail {

constexpr std::array<bool, 256> make_tchar() {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
// field-value bytes: HTAB, SP, VCHAR, obs-text. CR, LF, NUL and the other controls are not.
constexpr std::array<bool, 256> make_field_char() {
  std::array<bool, 256> t{};
  t['\t'] = true;
  for (int c = 0x20; c <= 0x7e; ++c) t[c] = true;
  for (int c = 0x80; c <= 0xff; ++c) t[c] = true;
  return t;
}
// request-target bytes: visible ASCII only (no SP, no controls, no obs-text: a conforming
// client percent-encodes everything else).
constexpr std::array<bool, 256> make_target_char() {
  std::array<bool, 256> t{};
  for (int c = 0x21; c <= 0x7e; ++c) t[c] = true;
  return t;
}
inline constexpr std::array<bool, 256> kTchar = make_tchar();
inline constexpr std::array<bool, 256> kFieldChar = make_field_char();
inline constexpr std::array<bool, 256> kTargetChar = make_target_char();

// Appends every piece with one size change: a head built field by field pays the string's
// bookkeeping (capacity check, terminator) once per line instead of once per piece. No piece
// may view `out` itself (the resize may move it).
template <class... Piece>
void append_all(std::string& out, const Piece&... pieces) {
  const std::string_view views[] = {std::string_view(pieces)...};
  std::size_t n = 0;
  for (std::string_view v : views) n += v.size();
  std::size_t at = out.size();
  out.resize(at + n);
  for (std::string_view v : views) {
    v.copy(out.data() + at, v.size());
    at += v.size();
  }
}

inline bool is_tchar(char c) noexcept { return kTchar[static_cast<unsigned char>(c)]; }
inline bool is_field_char(char c) noexcept { return kFieldChar[static_cast<unsigned char>(c)]; }
inline bool is_target_char(char c) noexcept { return kTargetChar[static_cast<unsigned char>(c)]; }
// True when none of the eight bytes at p is below 0x20 or is 0x7F (DEL): eight field-value
// bytes without HTAB, checked at once (the "has less than" and "has zero" word tricks).
inline bool plain8(const char* p) noexcept {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  uint64_t x;
  std::memcpy(&x, p, 8);
  const uint64_t below = (x - kOnes * 0x20) & ~x & kHighs;
  const uint64_t y = x ^ (kOnes * 0x7f);
  const uint64_t del = (y - kOnes) & ~y & kHighs;
  return (below | del) == 0;
}
// How many leading bytes of s lie in whole plain8 words: a value checker skips them and looks at
// the rest byte by byte.
inline std::size_t plain_prefix(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i + 8 <= s.size() && plain8(s.data() + i)) i += 8;
  return i;
}
inline int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends v in lower-case hex, no prefix (chunk sizes, ETags).
inline void append_hex(std::string& out, uint64_t v) {
  char d[16];
  auto r = std::to_chars(d, d + sizeof d, v, 16);
  out.append(d, r.ptr);
}

}  // namespace lionet::http::detail
