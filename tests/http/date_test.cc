// Tests of lionet/http/date.h (IMF-fixdate both ways, the cached Date line) and
// http::is_hop_by_hop (headers.h): the pieces the HTTP/1 and HTTP/2 sides share.
#include "lionet/http/date.h"

#include <gtest/gtest.h>
#include <time.h>

#include <string>

#include "lionet/http/headers.h"

namespace lionet::http {
namespace {

TEST(HttpDate, FormatsAndParsesRfc9110sExample) {
  EXPECT_EQ(format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  const time_t t = 1'795'000'000;
  EXPECT_EQ(parse_http_date(format_http_date(t)), t);
}

TEST(HttpDate, RefusesEverythingButImfFixdate) {
  EXPECT_FALSE(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"));  // RFC 850
  EXPECT_FALSE(parse_http_date("Sun Nov  6 08:49:37 1994"));  // asctime
  EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"));
  EXPECT_FALSE(parse_http_date("Sun, 06 Xyz 1994 08:49:37 GMT"));
  EXPECT_FALSE(parse_http_date("Sun, 0x Nov 1994 08:49:37 GMT"));
  EXPECT_FALSE(parse_http_date(""));
}

TEST(HttpDate, TheDateLineIsNowAsAResponseHeader) {
  const time_t before = ::time(nullptr);
  const std::string line(date_line());
  const time_t after = ::time(nullptr);
  ASSERT_EQ(line.size(), 37u) << line;
  EXPECT_EQ(line.substr(0, 6), "Date: ");
  EXPECT_EQ(line.substr(35), "\r\n");
  const auto t = parse_http_date(line.substr(6, 29));
  ASSERT_TRUE(t) << line;
  EXPECT_GE(*t, before);
  EXPECT_LE(*t, after);
}

TEST(HopByHop, TheSixConnectionSpecificFieldsInAnyCase) {
  for (const char* n : {"Connection", "keep-alive", "PROXY-CONNECTION", "TE", "Transfer-Encoding", "upgrade"})
    EXPECT_TRUE(is_hop_by_hop(n)) << n;
  for (const char* n : {"Content-Length", "Trailer", "Host", "tee", "Upgrade-Insecure-Requests", ""})
    EXPECT_FALSE(is_hop_by_hop(n)) << n;
}

}  // namespace
}  // namespace lionet::http
