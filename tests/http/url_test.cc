// percent_decode (static file paths, query strings): runs of plain bytes, %XX escapes, '+' as
// a space only when asked, and malformed escapes refused.
#include <gtest/gtest.h>

#include <string>

#include "lionet/http/url.h"

using lionet::http::percent_decode;

TEST(PercentDecode, DecodesEscapesAmongPlainBytesAndRefusesMalformedOnes) {
  EXPECT_EQ(percent_decode("/1k.bin").value(), "/1k.bin");
  EXPECT_EQ(percent_decode("").value(), "");
  EXPECT_EQ(percent_decode("a%20b%2Fc").value(), "a b/c");
  EXPECT_EQ(percent_decode("%41%42%43").value(), "ABC");
  EXPECT_EQ(percent_decode("%e2%82%AC").value(), "\xe2\x82\xac");  // either case of hex digit
  EXPECT_EQ(percent_decode("x%00y").value(), std::string("x\0y", 3));
  EXPECT_EQ(percent_decode("a+b").value(), "a+b");
  EXPECT_EQ(percent_decode("a+b%2B", true).value(), "a b+");
  EXPECT_FALSE(percent_decode("%"));
  EXPECT_FALSE(percent_decode("ab%4"));
  EXPECT_FALSE(percent_decode("%4g"));
  EXPECT_FALSE(percent_decode("%g4/rest"));
  std::string long_path(300, 'p');
  EXPECT_EQ(percent_decode(long_path + "%7E" + long_path).value(), long_path + "~" + long_path);
}
