// lionet/http/field_block.h: walking a field block as Response keeps its headers and trailers
// ("Name: value\r\n" lines, each written by Response after validation). For http/ and the
// protocol layers above it (http2/ turns the blocks into HPACK field lists).
#pragma once

#include <cstddef>
#include <string_view>

namespace lionet::http {

// Calls f(line_begin, line_end, name, value) for each "Name: value\r\n" line of block (offsets
// into block, line_end past the CRLF); stops when f returns false.
template <class F>
void for_each_line(std::string_view block, F f) {
  std::size_t pos = 0;
  while (pos < block.size()) {
    std::size_t end = block.find("\r\n", pos);
    if (end == std::string_view::npos) break;
    std::string_view line = block.substr(pos, end - pos);
    std::size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    std::string_view value = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string_view();
    if (!f(pos, end + 2, name, value)) return;
    pos = end + 2;
  }
}

}  // namespace lionet::http
