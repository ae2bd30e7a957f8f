// lionet/net/address_rules.cc: AddressRules and IpKey (see address_rules.h).
#include "lionet/net/address_rules.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace lionet {

IpKey IpKey::of(const Address& a) noexcept {
  IpKey k;
  if (a.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
    k.bytes[10] = k.bytes[11] = 0xff;
    std::memcpy(k.bytes.data() + 12, &in->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr());
    std::memcpy(k.bytes.data(), &in6->sin6_addr, 16);
  } else {
    k.unix_domain = true;
  }
  return k;
}

std::size_t IpKey::hash() const noexcept {
  uint64_t hi, lo;
  std::memcpy(&hi, bytes.data(), 8);
  std::memcpy(&lo, bytes.data() + 8, 8);
  // Two multiply-xorshift rounds (splitmix64's finalizer): the low bits of an IPv4 key (the
  // last octet) spread over the whole word.
  uint64_t x = hi * 0x9e3779b97f4a7c15ULL ^ lo ^ static_cast<uint64_t>(unix_domain);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<std::size_t>(x ^ (x >> 31));
}

std::string IpKey::to_string() const {
  if (unix_domain) return "unix";
  char buf[INET6_ADDRSTRLEN] = {};
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(bytes.data(), kMapped, 12) == 0) inet_ntop(AF_INET, bytes.data() + 12, buf, sizeof buf);
  else inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  return buf;
}

bool AddressRules::parse_range(std::string_view entry, Range& out, std::string& error) {
  out = Range{};
  if (entry == "all") {
    out.all = true;
    return true;
  }
  std::string_view host = entry;
  std::optional<unsigned> prefix;
  if (const auto slash = entry.find('/'); slash != std::string_view::npos) {
    host = entry.substr(0, slash);
    const std::string_view p = entry.substr(slash + 1);
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size()) {
      error = "the prefix length after '/' is not a number";
      return false;
    }
    prefix = v;
  }
  const std::string h(host);
  bool v4 = false;
  if (inet_pton(AF_INET, h.c_str(), out.bytes.data() + 12) == 1) {
    v4 = true;
    out.bytes[10] = out.bytes[11] = 0xff;
  } else if (inet_pton(AF_INET6, h.c_str(), out.bytes.data()) != 1) {
    error = "not an IPv4 or IPv6 address, a CIDR range or 'all'";
    return false;
  }
  const unsigned max = v4 ? 32 : 128;
  if (prefix && *prefix > max) {
    error = "prefix /" + std::to_string(*prefix) + " is longer than " + std::to_string(max) + " bits";
    return false;
  }
  out.prefix = (v4 ? 96 : 0) + prefix.value_or(max);
  for (unsigned bit = out.prefix; bit < 128; ++bit) {
    if (out.bytes[bit / 8] & (0x80u >> (bit % 8))) {
      error = "host bits set after the /" + std::to_string(prefix.value_or(max)) + " prefix";
      return false;
    }
  }
  return true;
}

std::string AddressRules::check_entry(std::string_view entry) {
  Range r;
  std::string error;
  return parse_range(entry, r, error) ? std::string() : error;
}

AddressRules AddressRules::parse(const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
  AddressRules rules;
  auto fill = [](const char* name, const std::vector<std::string>& in, std::vector<Range>& out) {
    for (std::size_t i = 0; i < in.size(); ++i) {
      Range r;
      std::string error;
      if (!parse_range(in[i], r, error))
        throw std::invalid_argument(std::string(name) + "[" + std::to_string(i) + "]: '" + in[i] + "': " + error);
      out.push_back(r);
    }
  };
  fill("allow", allow, rules.allow_);
  fill("deny", deny, rules.deny_);
  return rules;
}

bool AddressRules::matches(const std::vector<Range>& list, const IpKey& key) noexcept {
  for (const Range& r : list) {
    if (r.all) return true;
    if (key.is_unix()) continue;
    const unsigned full = r.prefix / 8, rest = r.prefix % 8;
    if (std::memcmp(r.bytes.data(), key.bytes.data(), full) != 0) continue;
    if (rest && ((r.bytes[full] ^ key.bytes[full]) & static_cast<uint8_t>(0xff00u >> rest))) continue;
    return true;
  }
  return false;
}

bool AddressRules::admits(const Address& peer) const noexcept {
  if (empty()) return true;
  const IpKey key = IpKey::of(peer);
  if (matches(deny_, key)) return false;
  return allow_.empty() || matches(allow_, key);
}

}  // namespace lionet
