// lionet/http/url.cc: percent_decode() and parse_url() (see url.h).
#include "lionet/http/url.h"

#include <charconv>

#include "lionet/http/detail/chars.h"
#include "lionet/http/headers.h"

namespace lionet::http {

std::optional<std::string> percent_decode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    // The run of bytes that stay as they are, appended at once (a path is mostly such bytes).
    size_t j = i;
    while (j < s.size() && s[j] != '%' && (s[j] != '+' || !plus_as_space)) ++j;
    out.append(s.data() + i, j - i);
    if (j == s.size()) break;
    if (s[j] == '+') {
      out.push_back(' ');
      i = j + 1;
      continue;
    }
    if (j + 2 >= s.size()) return std::nullopt;
    int hi = detail::hex_value(s[j + 1]), lo = detail::hex_value(s[j + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i = j + 3;
  }
  return out;
}

std::optional<Url> parse_url(std::string_view url) {
  Url u;
  size_t rest;
  if (url.size() >= 7 && iequals(url.substr(0, 7), "http://")) {
    u.scheme = "http";
    u.port = 80;
    rest = 7;
  } else if (url.size() >= 8 && iequals(url.substr(0, 8), "https://")) {
    u.scheme = "https";
    u.port = 443;
    rest = 8;
  } else {
    return std::nullopt;
  }
  size_t auth_end = url.find_first_of("/?#", rest);
  if (auth_end == std::string_view::npos) auth_end = url.size();
  std::string_view auth = url.substr(rest, auth_end - rest);
  if (auth.empty() || auth.find('@') != std::string_view::npos) return std::nullopt;
  u.authority = std::string(auth);
  std::string_view host = auth, port;
  if (auth.front() == '[') {
    size_t close = auth.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = auth.substr(1, close - 1);
    std::string_view after = auth.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;
      port = after.substr(1);
    }
  } else if (size_t colon = auth.rfind(':'); colon != std::string_view::npos) {
    host = auth.substr(0, colon);
    port = auth.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  u.host = std::string(host);
  if (!port.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535) return std::nullopt;
    u.port = static_cast<uint16_t>(v);
  }
  std::string_view target = url.substr(auth_end);
  if (size_t hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  u.target.clear();
  if (target.empty() || target.front() != '/') u.target = '/';
  u.target += target;
  return u;
}
namespace {
// Calls f(raw name, raw value) for each non-empty pair; stops when f returns false.
template <class F>
void for_each_pair(std::string_view query, F&& f) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (!f(name, value)) return;
  }
}
}  // namespace

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  std::optional<std::string> out;
  for_each_pair(query, [&](std::string_view n, std::string_view v) {
    // Names are compared decoded, but most are plain: no allocation for those.
    const bool plain = n.find_first_of("%+") == std::string_view::npos;
    if (plain ? n != name : percent_decode(n, true) != name) return true;
    out = percent_decode(v, true);
    return false;
  });
  return out;
}

std::vector<std::pair<std::string, std::string>> query_params(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  for_each_pair(query, [&](std::string_view n, std::string_view v) {
    auto dn = percent_decode(n, true);
    auto dv = percent_decode(v, true);
    if (dn && dv) out.emplace_back(std::move(*dn), std::move(*dv));
    return true;
  });
  return out;
}
}  // namespace lionet::http
