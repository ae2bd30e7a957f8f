// Tests of lionet/net/address_rules.h: entry syntax, the deny-then-allow rule, IPv4-mapped
// peers, Unix-domain peers, IpKey.
#include "lionet/net/address_rules.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <unordered_set>

namespace lionet {
namespace {

Address at(const char* text) {
  auto a = Address::parse(text);
  EXPECT_TRUE(a.ok()) << text;
  return a.value();
}

TEST(AddressRules, EmptyRulesAdmitEveryone) {
  AddressRules r;
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.admits(at("192.0.2.1:1")));
  EXPECT_TRUE(r.admits(at("unix:/tmp/x")));
}

TEST(AddressRules, AllowListAdmitsOnlyItsRangesIPv4AndIPv6) {
  auto r = AddressRules::parse({"10.0.0.0/8", "192.0.2.7", "fd00::/8", "2001:db8::1"}, {});
  EXPECT_TRUE(r.admits(at("10.255.1.2:80")));
  EXPECT_TRUE(r.admits(at("192.0.2.7:80")));
  EXPECT_FALSE(r.admits(at("192.0.2.8:80")));
  EXPECT_FALSE(r.admits(at("11.0.0.1:80")));
  EXPECT_TRUE(r.admits(at("[fd12:3456::1]:80")));
  EXPECT_FALSE(r.admits(at("[fe80::1]:80")));
  EXPECT_TRUE(r.admits(at("[2001:db8::1]:80")));
  EXPECT_FALSE(r.admits(at("[2001:db8::2]:80")));
}

TEST(AddressRules, DenyWinsOverAllow) {
  auto r = AddressRules::parse({"127.0.0.0/8"}, {"127.0.0.2"});
  EXPECT_TRUE(r.admits(at("127.0.0.1:1")));
  EXPECT_FALSE(r.admits(at("127.0.0.2:1")));
  EXPECT_TRUE(r.admits(at("127.0.0.3:1")));
  auto only_deny = AddressRules::parse({}, {"127.0.0.2/32", "::1"});
  EXPECT_TRUE(only_deny.admits(at("127.0.0.1:1")));
  EXPECT_FALSE(only_deny.admits(at("127.0.0.2:1")));
  EXPECT_FALSE(only_deny.admits(at("[::1]:1")));
  EXPECT_TRUE(only_deny.admits(at("192.0.2.1:1")));
}

TEST(AddressRules, AnIPv4MappedPeerMatchesIPv4Entries) {
  auto r = AddressRules::parse({"10.0.0.0/8"}, {"10.0.0.5"});
  EXPECT_TRUE(r.admits(at("[::ffff:10.1.2.3]:80")));
  EXPECT_FALSE(r.admits(at("[::ffff:10.0.0.5]:80")));
  EXPECT_FALSE(r.admits(at("[::ffff:11.1.2.3]:80")));
}

TEST(AddressRules, AllMatchesEveryAddressAndUnixPeersOnlyMatchAll) {
  auto deny_all = AddressRules::parse({"127.0.0.1"}, {"all"});
  EXPECT_FALSE(deny_all.admits(at("127.0.0.1:1")));
  EXPECT_FALSE(deny_all.admits(at("unix:/tmp/x")));
  auto allow_ip = AddressRules::parse({"0.0.0.0/0", "::/0"}, {});
  EXPECT_TRUE(allow_ip.admits(at("203.0.113.9:1")));
  EXPECT_TRUE(allow_ip.admits(at("[2001:db8::9]:1")));
  EXPECT_FALSE(allow_ip.admits(at("unix:/tmp/x")));
  EXPECT_TRUE(AddressRules::parse({"all"}, {}).admits(at("unix:/tmp/x")));
}

TEST(AddressRules, OddPrefixLengthsMatchBitByBit) {
  auto r = AddressRules::parse({"192.0.2.128/25", "2001:db8:8000::/33"}, {});
  EXPECT_TRUE(r.admits(at("192.0.2.200:1")));
  EXPECT_FALSE(r.admits(at("192.0.2.127:1")));
  EXPECT_TRUE(r.admits(at("[2001:db8:8000::1]:1")));
  EXPECT_FALSE(r.admits(at("[2001:db8:7fff::1]:1")));
}

TEST(AddressRules, BadEntriesAreRejectedNamingTheListIndexAndReason) {
  auto message = [](std::vector<std::string> allow, std::vector<std::string> deny) -> std::string {
    try {
      (void)AddressRules::parse(allow, deny);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message({"10.0.0.1/8"}, {}), "allow[0]: '10.0.0.1/8': host bits set after the /8 prefix");
  EXPECT_EQ(message({"10.0.0.0/8"}, {"::1", "10.0.0.0/33"}),
            "deny[1]: '10.0.0.0/33': prefix /33 is longer than 32 bits");
  EXPECT_NE(message({"localhost"}, {}).find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(message({"10.0.0.0/"}, {}).find("not a number"), std::string::npos);
  EXPECT_NE(message({"10.0.0.0/x"}, {}).find("not a number"), std::string::npos);
  EXPECT_NE(message({"::1/129"}, {}).find("longer than 128"), std::string::npos);
  EXPECT_EQ(AddressRules::check_entry("fd00::/8"), "");
  EXPECT_NE(AddressRules::check_entry("1.2.3"), "");
}

TEST(IpKey, IgnoresThePortAndFoldsMappedIPv4) {
  EXPECT_EQ(IpKey::of(at("10.1.2.3:1")), IpKey::of(at("10.1.2.3:2")));
  EXPECT_EQ(IpKey::of(at("10.1.2.3:1")), IpKey::of(at("[::ffff:10.1.2.3]:2")));
  EXPECT_NE(IpKey::of(at("10.1.2.3:1")), IpKey::of(at("10.1.2.4:1")));
  EXPECT_EQ(IpKey::of(at("10.1.2.3:1")).to_string(), "10.1.2.3");
  EXPECT_EQ(IpKey::of(at("[2001:db8::1]:1")).to_string(), "2001:db8::1");
  EXPECT_EQ(IpKey::of(at("unix:/tmp/a")).to_string(), "unix");
  std::unordered_set<std::size_t> hashes;
  for (int i = 0; i < 256; ++i)
    hashes.insert(IpKey::of(at(("10.0.0." + std::to_string(i) + ":1").c_str())).hash() % 16);
  EXPECT_EQ(hashes.size(), 16u);  // the last octet alone spreads keys over every shard
}

}  // namespace
}  // namespace lionet
