// Tests of lionet/net/address.h: parsing, formatting, lookup.
#include "lionet/net/address.h"

#include <gtest/gtest.h>

#include "net_test_util.h"

namespace lionet {
namespace {

TEST(Address, ParsesAndFormatsIPv4) {
  auto a = Address::parse("127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_EQ(a->port(), 8080);
  EXPECT_EQ(a->to_string(), "127.0.0.1:8080");
  EXPECT_EQ(*a, Address::ipv4_loopback(8080));
  EXPECT_EQ(Address::parse(":80")->to_string(), "0.0.0.0:80");
  EXPECT_EQ(Address::parse("0.0.0.0:0")->port(), 0);
}

TEST(Address, ParsesAndFormatsIPv6) {
  auto a = Address::parse("[::1]:443");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->family(), AF_INET6);
  EXPECT_EQ(a->port(), 443);
  EXPECT_EQ(a->to_string(), "[::1]:443");
  EXPECT_EQ(*a, Address::ipv6_loopback(443));
  EXPECT_EQ(Address::parse("[fe80::1:2]:1")->to_string(), "[fe80::1:2]:1");
}

TEST(Address, OnlyPeersOnThisHostAreLoopback) {
  for (const char* a : {"127.0.0.1:80", "127.8.9.10:1", "[::1]:80", "[::ffff:127.0.0.1]:80", "unix:/tmp/x.sock"})
    EXPECT_TRUE(Address::parse(a).value().is_loopback()) << a;
  for (const char* a : {"10.0.0.1:80", "192.168.1.20:8080", "128.0.0.1:80", "[2001:db8::1]:80", "[::ffff:10.0.0.1]:80"})
    EXPECT_FALSE(Address::parse(a).value().is_loopback()) << a;
}

TEST(Address, ParsesUnixPathsAndAbstractNames) {
  auto a = Address::parse("unix:/tmp/lionet.sock");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->family(), AF_UNIX);
  EXPECT_EQ(a->port(), 0);
  EXPECT_EQ(a->to_string(), "unix:/tmp/lionet.sock");
  auto b = Address::parse("unix:@lionet-abstract");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->to_string(), "unix:@lionet-abstract");
}

TEST(Address, RejectsMalformedInput) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:8x", "[::1",
                          "[::1]", "[::1]80", "::1:80", "localhost:80", "1.2.3.4.5:80", "unix:", "[127.0.0.1]:80x"}) {
    auto r = Address::parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error(), std::errc::invalid_argument) << bad;
    }
  }
  std::string long_path = "unix:/" + std::string(200, 'x');
  EXPECT_FALSE(Address::parse(long_path).ok());
  EXPECT_THROW(Address::parse("nope").value(), std::system_error);
}

TEST(Address, PortCanBeChanged) {
  Address a = Address::parse("10.0.0.1:1").value();
  a.set_port(65535);
  EXPECT_EQ(a.to_string(), "10.0.0.1:65535");
  EXPECT_TRUE(Address().empty());
  EXPECT_EQ(Address().to_string(), "");
}

TEST(Address, LookupResolvesLocalhostInAFiber) {
  test::Runtime rt(1, "epoll");
  rt.run([] {
    auto numeric = Address::lookup("127.0.0.1:9");
    ASSERT_TRUE(numeric.ok());
    ASSERT_EQ(numeric->size(), 1u);
    auto r = Address::lookup("localhost:80");
    ASSERT_TRUE(r.ok()) << r.error().message();
    ASSERT_FALSE(r->empty());
    for (const auto& a : *r) {
      EXPECT_TRUE(a.to_string() == "127.0.0.1:80" || a.to_string() == "[::1]:80") << a.to_string();
    }
    auto bad = Address::lookup("no-such-host.invalid:80");
    EXPECT_FALSE(bad.ok());
    EXPECT_FALSE(Address::lookup("missing-port").ok());
  });
}
}  // namespace
}  // namespace lionet
