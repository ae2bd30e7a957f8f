// lionet/http/headers.cc: has_token(), trim_ows() and is_hop_by_hop() (see headers.h).
#include "lionet/http/headers.h"

namespace lionet::http {

bool is_hop_by_hop(std::string_view n) noexcept {
  switch (n.size()) {  // one comparison at most for the fields every message carries
    case 2: return iequals(n, "te");
    case 7: return iequals(n, "upgrade");
    case 10: return iequals(n, "connection") || iequals(n, "keep-alive");
    case 16: return iequals(n, "proxy-connection");
    case 17: return iequals(n, "transfer-encoding");
    default: return false;
  }
}

bool has_token(std::string_view value, std::string_view token) noexcept {
  return !for_each_element(value, [&](std::string_view e) { return !iequals(e, token); });
}

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace lionet::http
