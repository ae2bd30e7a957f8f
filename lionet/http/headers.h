// lionet/http/headers.h: header fields as views, ASCII case-insensitive comparison, and the
// comma-list token test HTTP uses for Connection / Transfer-Encoding / Expect.
//
// Owns: HeaderField, HeaderList, iequals(), has_token(), is_hop_by_hop(). Must not own header bytes: a
// HeaderList of a parsed request holds string_views into the connection's input buffer, valid
// until the request has been answered (the buffer never moves while a request is handled).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace lionet::http {

// ASCII-only, locale-free (header names are tokens; RFC 9110 section 5.1).
inline char ascii_lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }
// Copies n bytes from src to dst with A-Z lowercased, eight bytes at a time (HTTP/2 field
// names: ~1 instruction a byte instead of ~5).
inline void ascii_lower_copy(char* dst, const char* src, size_t n) noexcept {
  constexpr uint64_t k01 = 0x0101010101010101ULL;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, src + i, 8);
    const uint64_t low7 = w & (0x7f * k01);
    const uint64_t above_z = low7 + (0x80 - 'Z' - 1) * k01;  // high bit: byte > 'Z' (7 bits)
    const uint64_t from_a = low7 + (0x80 - 'A') * k01;  // high bit: byte >= 'A'
    const uint64_t upper = ~w & (from_a ^ above_z) & (0x80 * k01);  // ASCII and in A..Z
    w |= upper >> 2;  // 0x80 >> 2 = 0x20
    std::memcpy(dst + i, &w, 8);
  }
  for (; i < n; ++i) dst[i] = ascii_lower(src[i]);
}

inline bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// True if the comma-separated list `value` holds `token` (case-insensitive, optional
// whitespace around elements): has_token("keep-alive, Upgrade", "upgrade") == true.
bool has_token(std::string_view value, std::string_view token) noexcept;
// Strips leading and trailing SP / HTAB.
std::string_view trim_ows(std::string_view s) noexcept;

// Calls f(element) for each non-empty element of a comma-separated list (RFC 9110 5.6.1: OWS
// around elements trimmed, empty elements skipped), stopping when f returns false. Returns
// whether it went through the whole list. The one list walk of has_token, the request
// parser's Transfer-Encoding and the router's methods.
template <class F>
bool for_each_element(std::string_view list, F&& f) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view e = trim_ows(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (!e.empty() && !f(e)) return false;
  }
  return true;
}
// The connection-specific fields of RFC 9110 7.6.1 (case-insensitive): Connection,
// Proxy-Connection, Keep-Alive, TE, Transfer-Encoding, Upgrade. A proxy never forwards them
// (nor the fields a Connection header names) and HTTP/2 never carries them (RFC 9113 8.2.2).
// The one list: the proxy, the HTTP/2 server and the HTTP/2 client all ask it.
bool is_hop_by_hop(std::string_view name) noexcept;

struct HeaderField {
  std::string_view name;  // as sent (case preserved)
  std::string_view value;  // leading/trailing whitespace removed
};

// The fields of one message in arrival order. Lookups are linear: requests carry ~5-20
// fields, and a linear scan over a contiguous vector beats hashing at that size.
class HeaderList {
 public:
  // The first field named `name` (case-insensitive), or an empty view. Use find() to tell an
  // empty value from an absent field.
  std::string_view get(std::string_view name) const noexcept {
    const HeaderField* f = find(name);
    return f ? f->value : std::string_view();
  }
  const HeaderField* find(std::string_view name) const noexcept {
    for (const auto& f : fields_)
      if (iequals(f.name, name)) return &f;
    return nullptr;
  }
  bool has(std::string_view name) const noexcept { return find(name) != nullptr; }
  size_t count(std::string_view name) const noexcept {
    size_t n = 0;
    for (const auto& f : fields_) n += iequals(f.name, name);
    return n;
  }
  size_t size() const noexcept { return fields_.size(); }
  bool empty() const noexcept { return fields_.empty(); }
  const HeaderField& operator[](size_t i) const noexcept { return fields_[i]; }
  auto begin() const noexcept { return fields_.begin(); }
  auto end() const noexcept { return fields_.end(); }

  // For parsers: clear() keeps the capacity (no allocation per request once warm).
  void clear() noexcept { fields_.clear(); }
  void add(std::string_view name, std::string_view value) { fields_.push_back({name, value}); }
  void reserve(size_t n) { fields_.reserve(n); }
  // Empties the list and gives its storage back if it holds room for more than `keep` fields
  // (a head kept for reuse must not keep one odd head's peak for good).
  void trim(size_t keep) noexcept {
    fields_.clear();
    if (fields_.capacity() > keep) std::vector<HeaderField>().swap(fields_);
  }

 private:
  std::vector<HeaderField> fields_;
};
}  // namespace lionet::http
