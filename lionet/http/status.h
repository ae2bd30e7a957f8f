// lionet/http/status.h: HTTP status codes and their reason phrases (RFC 9110 section 15).
//
// Owns: reason_phrase() and the preformatted "HTTP/1.1 NNN Reason\r\n" status lines the
// response writer copies. Must not allocate.
#pragma once

#include <string>
#include <string_view>

namespace lionet::http {

// "OK", "Not Found", ...; "Unknown" for codes without a registered phrase.
std::string_view reason_phrase(int status) noexcept;
// "HTTP/1.1 200 OK\r\n" for registered codes 100-599, else an empty view (the caller formats).
std::string_view status_line(int status) noexcept;
// The server's own plain-text answer body for a refused request: "<reason phrase>: <why>\n"
// ("Content Too Large: request body larger than max_body_bytes\n"), over HTTP/1 and HTTP/2.
std::string error_text(int status, std::string_view why);
// 1xx, 204 and 304 responses never carry a body (RFC 9110 sections 6.4.1, 15.3.5, 15.4.5).
inline bool status_has_body(int status) noexcept { return status >= 200 && status != 204 && status != 304; }
}  // namespace lionet::http
