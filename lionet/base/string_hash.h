// lionet/base/string_hash.h: a transparent hash for maps keyed by std::string, so that a lookup
// by std::string_view (with std::equal_to<> as the map's key-equal) builds no std::string: no
// copy, and no allocation for a key longer than the short-string buffer.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace lionet {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace lionet
