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

// A field value shaped like a date (its separators too) that names no real instant is not a
// date (RFC 9110 13.1.3: an If-Modified-Since that is not a valid HTTP-date is ignored): timegm
// would roll "31 Feb" or hour 99 into a later date, and a client could get a 304 for a date it
// never sent.
TEST(HttpDate, RefusesDatesThatNameNoInstant) {
  for (const char* bad :
       {"Mon, 31 Feb 2025 00:00:00 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, -6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov -994 08:49:37 GMT", "Fri, 99 Dec 9999 99:99:99 GMT", "Sun, 06 Nov 1994+08:49:37 GMT",
        "Sun, 06 Nov 1994 08.49.37 GMT", "Sun,_06_Nov_1994_08:49:37_GMT"}) {
    EXPECT_FALSE(parse_http_date(bad)) << bad;
  }
  // The last day of a leap year's February is one; a leap second is the second after :59.
  EXPECT_TRUE(parse_http_date("Thu, 29 Feb 2024 12:00:00 GMT"));
  EXPECT_EQ(parse_http_date("Sat, 31 Dec 2016 23:59:60 GMT"), parse_http_date("Sun, 01 Jan 2017 00:00:00 GMT"));
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
