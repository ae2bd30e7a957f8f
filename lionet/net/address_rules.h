// lionet/net/address_rules.h: lionet::AddressRules, allow / deny lists of addresses and CIDR
// ranges (nginx's `allow` / `deny`), and lionet::IpKey, an address without its port, for
// per-client tables.
//
//   auto rules = lionet::AddressRules::parse({"10.0.0.0/8", "::1"}, {"10.1.2.3"});   // throws
//   rules.admits(peer);   // false for 10.1.2.3, 192.0.2.1; true for 10.9.9.9, ::1
//
// Owns: the entry syntax and the matching rule. Must not: allocate or lock in admits().
//
// Entries: an IPv4 or IPv6 address ("127.0.0.1", "::1"), a CIDR range ("10.0.0.0/8",
// "fd00::/8"), or "all" (every address, Unix-domain peers included). A range's host bits must
// be zero ("10.0.0.1/8" is an error, as nginx warns: it is almost always a typo).
//
// The rule: an address matching any `deny` entry is refused; otherwise, where `allow` is not
// empty, only an address matching one of its entries is admitted; with both empty, every
// address is. (nginx evaluates one list in order, first match wins; here deny always wins,
// which is what `deny` lines placed first give in nginx.) An IPv4-mapped IPv6 peer
// (::ffff:10.1.2.3, what a dual-stack [::] listener sees for an IPv4 client) matches IPv4
// entries as its IPv4 address. A Unix-domain peer matches only "all".
//
// Cost: admits() compares against each entry in turn (a few nanoseconds each); lists are
// expected to be short (tens of entries).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/net/address.h"

namespace lionet {

// An IP address without its port, IPv4 kept as IPv4-mapped IPv6: the key of per-client
// tables (connections per address, rate limits, failed logins). Unix-domain peers all share
// one key (all bytes zero, is_unix() true).
struct IpKey {
  std::array<uint8_t, 16> bytes{};
  bool unix_domain = false;

  static IpKey of(const Address& a) noexcept;
  bool is_unix() const noexcept { return unix_domain; }
  friend bool operator==(const IpKey&, const IpKey&) = default;
  std::size_t hash() const noexcept;
  // "10.1.2.3", "::1", "unix": for logs.
  std::string to_string() const;
};

struct IpKeyHash {
  std::size_t operator()(const IpKey& k) const noexcept { return k.hash(); }
};

class AddressRules {
 public:
  // Every address admitted.
  AddressRules() = default;
  // Throws std::invalid_argument naming the entry and what is wrong with it
  // ("allow[2]: '10.0.0.1/8': host bits set after the /8 prefix").
  static AddressRules parse(const std::vector<std::string>& allow, const std::vector<std::string>& deny);
  // One entry's syntax: empty on success, else what is wrong (no list or index in it).
  static std::string check_entry(std::string_view entry);

  bool admits(const Address& peer) const noexcept;
  // No entries at all: admits() is always true.
  bool empty() const noexcept { return allow_.empty() && deny_.empty(); }

 private:
  struct Range {
    std::array<uint8_t, 16> bytes{};  // IPv4 as ::ffff:a.b.c.d
    unsigned prefix = 0;  // in IPv6 bits (an IPv4 /8 is /104)
    bool all = false;
  };
  static bool parse_range(std::string_view entry, Range& out, std::string& error);
  static bool matches(const std::vector<Range>& list, const IpKey& key) noexcept;
  std::vector<Range> allow_, deny_;
};

}  // namespace lionet
