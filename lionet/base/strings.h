// lionet/base/strings.h: two string helpers for hot paths.
// - StringHash: a transparent hash for maps keyed by std::string, so that a lookup by
//   std::string_view (with std::equal_to<> as the map's key-equal) builds no std::string: no
//   copy, and no allocation for a key longer than the short-string buffer.
// - equals_literal(s, "GET"): s == a string literal by its size and a memcmp of constant size,
//   which the compiler expands inline (string_view's operator== calls compare() out of line,
//   ~45 instructions: a method or a pseudo-header name per request adds up).
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <string_view>

namespace lionet {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <std::size_t N>
inline bool equals_literal(std::string_view s, const char (&lit)[N]) noexcept {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

}  // namespace lionet
