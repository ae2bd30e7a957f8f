// lionet/http/response_head.h: the parser of an HTTP/1.x response head, shared by every client
// side of HTTP/1: the Client (client.cc), the Proxy (proxy.cc) and websocket::connect (its
// 101 answer).
//
// Owns: nothing of the bytes: the reason and the fields are views into the caller's buffer,
// valid while it is. Must not: accept obs-fold, a field without a name, CR, LF or NUL in the
// status line or a field, a status outside 100..999, or a version other than HTTP/1.0 and
// HTTP/1.1.
#pragma once

#include <cstddef>
#include <string_view>

#include "lionet/http/headers.h"

namespace lionet::http {

struct ResponseHead {
  int status = 0;
  int version_minor = 1;
  std::string_view reason;
  HeaderList headers;
  std::size_t size = 0;  // bytes of the head, final CRLF CRLF included
  // The peer lets the connection be reused (RFC 9112 9.3), as the request parser decides it for
  // requests: HTTP/1.1 unless a Connection field says "close", HTTP/1.0 only when one says
  // "keep-alive" and none "close" (every Connection field counts, repeated or not).
  bool keep_alive = true;
  // Every field name is a token and every value holds only field-value bytes (HTAB, SP, VCHAR,
  // obs-text): what Response::add_header checks, so a relay may append the fields with
  // Response::add_checked_header. (The parser itself refuses only what it must: whitespace in
  // a name, CR, LF or NUL anywhere.)
  bool valid_fields = true;
};

enum class HeadParse : unsigned char { kNeedMore, kDone, kError };

// Parses the head at the start of buf. kNeedMore: no blank line yet (the caller reads more,
// bounding the total itself). `scan_from`: bytes of buf already known to hold no blank line.
HeadParse parse_response_head(std::string_view buf, ResponseHead& out, std::size_t scan_from = 0);
}  // namespace lionet::http
