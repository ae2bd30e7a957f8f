// lionet/http/url.h: the small URL helpers HTTP code needs: percent-decoding and splitting an
// "http(s)://host[:port]/path?query" URL (for the Client).
//
// Owns: parsing only; no normalisation or security decisions (the static-file handler makes
// its own, stricter, checks on decoded paths).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lionet::http {

// "%2F" -> "/", "+" is kept as '+'. nullopt for a malformed escape ("%4", "%zz").
// plus_as_space: decode '+' as ' ' (query strings in form encoding).
std::optional<std::string> percent_decode(std::string_view s, bool plus_as_space = false);

// Query strings ("a=1&b=x%20y&flag"): pairs split on '&', name and value on the first '='
// (a pair without one has an empty value; empty pairs are skipped), each percent-decoded with
// '+' as a space (form encoding).
// The decoded value of the first pair whose decoded name is `name`; nullopt if there is none
// (or its value has a malformed escape).
std::optional<std::string> query_param(std::string_view query, std::string_view name);
// Every pair, decoded, in order (a pair with a malformed escape is left out).
std::vector<std::pair<std::string, std::string>> query_params(std::string_view query);

struct Url {
  std::string scheme;  // "http" or "https" (lower case)
  std::string host;  // without brackets for IPv6
  uint16_t port = 0;  // explicit or the scheme's default
  std::string target;  // path and query ("/" if the URL had none)
  std::string authority;  // host[:port] as the Host header wants it
};
// nullopt for other schemes, a missing host, a bad port or userinfo.
std::optional<Url> parse_url(std::string_view url);
}  // namespace lionet::http
