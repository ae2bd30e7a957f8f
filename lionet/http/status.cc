// lionet/http/status.cc: reason phrases and preformatted status lines (see status.h).
#include "lionet/http/status.h"

namespace lionet::http {
namespace {
struct Entry {
  int code;
  std::string_view reason;
  std::string_view line;
};
#define LIONET_STATUS(c, r) \
  { c, r, "HTTP/1.1 " #c " " r "\r\n" }
constexpr Entry kStatuses[] = {
    LIONET_STATUS(100, "Continue"),
    LIONET_STATUS(101, "Switching Protocols"),
    LIONET_STATUS(200, "OK"),
    LIONET_STATUS(201, "Created"),
    LIONET_STATUS(202, "Accepted"),
    LIONET_STATUS(203, "Non-Authoritative Information"),
    LIONET_STATUS(204, "No Content"),
    LIONET_STATUS(205, "Reset Content"),
    LIONET_STATUS(206, "Partial Content"),
    LIONET_STATUS(300, "Multiple Choices"),
    LIONET_STATUS(301, "Moved Permanently"),
    LIONET_STATUS(302, "Found"),
    LIONET_STATUS(303, "See Other"),
    LIONET_STATUS(304, "Not Modified"),
    LIONET_STATUS(307, "Temporary Redirect"),
    LIONET_STATUS(308, "Permanent Redirect"),
    LIONET_STATUS(400, "Bad Request"),
    LIONET_STATUS(401, "Unauthorized"),
    LIONET_STATUS(403, "Forbidden"),
    LIONET_STATUS(404, "Not Found"),
    LIONET_STATUS(405, "Method Not Allowed"),
    LIONET_STATUS(406, "Not Acceptable"),
    LIONET_STATUS(408, "Request Timeout"),
    LIONET_STATUS(409, "Conflict"),
    LIONET_STATUS(410, "Gone"),
    LIONET_STATUS(411, "Length Required"),
    LIONET_STATUS(412, "Precondition Failed"),
    LIONET_STATUS(413, "Content Too Large"),
    LIONET_STATUS(414, "URI Too Long"),
    LIONET_STATUS(415, "Unsupported Media Type"),
    LIONET_STATUS(416, "Range Not Satisfiable"),
    LIONET_STATUS(417, "Expectation Failed"),
    LIONET_STATUS(421, "Misdirected Request"),
    LIONET_STATUS(422, "Unprocessable Content"),
    LIONET_STATUS(426, "Upgrade Required"),
    LIONET_STATUS(428, "Precondition Required"),
    LIONET_STATUS(429, "Too Many Requests"),
    LIONET_STATUS(431, "Request Header Fields Too Large"),
    LIONET_STATUS(500, "Internal Server Error"),
    LIONET_STATUS(501, "Not Implemented"),
    LIONET_STATUS(502, "Bad Gateway"),
    LIONET_STATUS(503, "Service Unavailable"),
    LIONET_STATUS(504, "Gateway Timeout"),
    LIONET_STATUS(505, "HTTP Version Not Supported"),
};
#undef LIONET_STATUS

const Entry* lookup(int status) noexcept {
  if (status == 200) return &kStatuses[2];  // the common case without a search
  for (const auto& e : kStatuses)
    if (e.code == status) return &e;
  return nullptr;
}
}  // namespace

std::string_view reason_phrase(int status) noexcept {
  const Entry* e = lookup(status);
  return e ? e->reason : std::string_view("Unknown");
}

std::string_view status_line(int status) noexcept {
  const Entry* e = lookup(status);
  return e ? e->line : std::string_view();
}
std::string error_text(int status, std::string_view why) {
  std::string s(reason_phrase(status));
  s.append(": ").append(why).append("\n");
  return s;
}
}  // namespace lionet::http
