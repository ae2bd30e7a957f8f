// lionet/http/field_block.h: field blocks as Response keeps its headers and trailers
// ("Name: value\r\n" lines, each validated when written). FieldBlock: header fields validated
// once and appended to many responses in one copy (Response::add_fields). for_each_line: walking
// a block, for http/ and the protocol layers above it (http2/ turns blocks into HPACK fields).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace lionet::http {

// Header fields built once and added to many responses (a static file's ETag, Last-Modified
// and type; a route's fixed CORS or cache fields): add() checks each name and value as
// Response::add_header does, so Response::add_fields appends the whole block without checking
// it again, one copy for all its fields.
class FieldBlock {
 public:
  // Appends "name: value". False, and nothing added, for an invalid name or a value containing
  // CR, LF, NUL or another control byte but HTAB (the add_header rule).
  bool add(std::string_view name, std::string_view value);
  bool empty() const noexcept { return text_.empty(); }
  void clear() noexcept { text_.clear(); }
  // The "Name: value\r\n" lines.
  std::string_view text() const noexcept { return text_; }

 private:
  std::string text_;
};

// Calls f(line_begin, line_end, name, value) for each "Name: value\r\n" line of block (offsets
// into block, line_end past the CRLF); stops when f returns false. The block is one Response or
// FieldBlock wrote: a name has no ':' and a value no CR, so a line ends at its first CR.
template <class F>
void for_each_line(std::string_view block, F f) {
  const char* const base = block.data();
  const char* const end = base + block.size();
  const char* p = base;
  while (p < end) {
    const auto* cr = static_cast<const char*>(std::memchr(p, '\r', static_cast<std::size_t>(end - p)));
    if (cr == nullptr || cr + 1 >= end || cr[1] != '\n') break;
    const std::size_t len = static_cast<std::size_t>(cr - p);
    const auto* colon = static_cast<const char*>(std::memchr(p, ':', len));
    std::string_view name(p, colon ? static_cast<std::size_t>(colon - p) : len);
    std::string_view value;
    if (colon && colon + 2 <= cr) value = std::string_view(colon + 2, static_cast<std::size_t>(cr - colon - 2));
    if (!f(static_cast<std::size_t>(p - base), static_cast<std::size_t>(cr + 2 - base), name, value)) return;
    p = cr + 2;
  }
}

}  // namespace lionet::http
