// Tests of the reverse proxy's option checks (lionet/http/proxy.h): the one parser of a YAML
// upstream line and the one list of limits, which the Proxy constructor throws and app/ reports
// at the config's key.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "lionet/http/proxy.h"

namespace lionet::http {
namespace {

TEST(ProxyOptionsCheck, ParsesAnUpstreamLineWithAndWithoutAWeight) {
  auto a = parse_proxy_upstream("127.0.0.1:8080");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->address, "127.0.0.1:8080");
  EXPECT_EQ(a->weight, 1u);
  auto b = parse_proxy_upstream("https://backend:443   weight=7");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->address, "https://backend:443");
  EXPECT_EQ(b->weight, 7u);
  EXPECT_TRUE(parse_proxy_upstream("[::1]:80/"));
}

TEST(ProxyOptionsCheck, RefusesMalformedUpstreamLines) {
  for (const char* bad :
       {"", "http://", "h:1/path", "h:1 weight=0", "h:1 weight=1001", "h:1 weight=2x", "h:1 w=2", "h:1 weight="}) {
    EXPECT_FALSE(parse_proxy_upstream(bad)) << bad;
  }
}

TEST(ProxyOptionsCheck, NamesTheFirstLimitBrokenAndTheConstructorThrowsIt) {
  ProxyOptions o;
  EXPECT_EQ(proxy_options_problem(o), "no upstreams");
  for (int i = 0; i < 65; ++i) o.upstreams.push_back({"127.0.0.1:" + std::to_string(1000 + i), 1});
  EXPECT_EQ(proxy_options_problem(o), "more than 64 upstreams");
  o.upstreams.resize(2);
  o.upstreams[1].weight = 0;
  EXPECT_EQ(proxy_options_problem(o), "upstream 127.0.0.1:1001: weight must be 1..1000");
  o.upstreams[1] = {"127.0.0.1:1001/x", 1};
  EXPECT_EQ(proxy_options_problem(o), "upstream '127.0.0.1:1001/x': expected host:port");
  o.upstreams[1] = {"127.0.0.1:1001", 1};
  o.buffer_size = 100;
  EXPECT_EQ(proxy_options_problem(o), "buffer_size below 1024");
  try {
    Proxy p(o);
    FAIL() << "a buffer_size of 100 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "proxy: buffer_size below 1024");
  }
  o.buffer_size = 16384;
  EXPECT_EQ(proxy_options_problem(o), "");
}

}  // namespace
}  // namespace lionet::http
