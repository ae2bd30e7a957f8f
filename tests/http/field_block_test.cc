// FieldBlock (fields checked once, added to many responses in one copy), the field-block walk
// HTTP/2 turns into HPACK fields, and the eight-bytes-at-a-time lowercasing of field names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lionet/http/field_block.h"
#include "lionet/http/headers.h"
#include "lionet/http/response.h"

using lionet::http::FieldBlock;
using lionet::http::Response;

TEST(FieldBlock, AddsWhatAddHeaderAcceptsAndRefusesWhatItRefuses) {
  FieldBlock b;
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.add("ETag", "\"1f-2a\""));
  EXPECT_TRUE(b.add("X-Empty", ""));
  EXPECT_TRUE(b.add("X-Tab", "a\tb"));
  EXPECT_FALSE(b.add("Bad Name", "v"));  // a space is not a token character
  EXPECT_FALSE(b.add("", "v"));
  EXPECT_FALSE(b.add("X-Split", "a\r\nInjected: 1"));  // response splitting
  EXPECT_FALSE(b.add("X-Nul", std::string_view("a\0b", 3)));
  EXPECT_EQ(b.text(), "ETag: \"1f-2a\"\r\nX-Empty: \r\nX-Tab: a\tb\r\n");

  // The same rules as Response::add_header, field for field.
  Response r;
  for (auto [n, v] : std::vector<std::pair<std::string_view, std::string_view>>{
           {"ETag", "\"1f-2a\""}, {"Bad Name", "v"}, {"X-Split", "a\r\nb"}, {"X-Del", "\x7f"}, {"X-Obs", "\xe9"}}) {
    FieldBlock one;
    EXPECT_EQ(one.add(n, v), r.add_header(n, v)) << n;
  }
}

TEST(FieldBlock, AddFieldsAppendsTheBlockAfterTheFieldsAlreadySet) {
  FieldBlock b;
  ASSERT_TRUE(b.add("Content-Type", "text/css"));
  ASSERT_TRUE(b.add("Accept-Ranges", "bytes"));
  Response r;
  ASSERT_TRUE(r.add_header("Vary", "Accept-Encoding"));
  r.add_fields(b);
  r.add_fields(b);  // a block is not used up
  EXPECT_EQ(r.header_block(),
            "Vary: Accept-Encoding\r\nContent-Type: text/css\r\nAccept-Ranges: bytes\r\n"
            "Content-Type: text/css\r\nAccept-Ranges: bytes\r\n");
  EXPECT_EQ(r.header("content-type"), "text/css");
  EXPECT_EQ(r.remove_header("Accept-Ranges"), 2u);
  EXPECT_EQ(r.header_block(), "Vary: Accept-Encoding\r\nContent-Type: text/css\r\nContent-Type: text/css\r\n");
}

TEST(FieldBlock, ForEachLineGivesEachNameValueAndTheLineOffsets) {
  Response r;
  ASSERT_TRUE(r.add_header("A", "1"));
  ASSERT_TRUE(r.add_header("Long-Name", "x: y"));  // a colon in a value
  ASSERT_TRUE(r.add_header("E", ""));
  std::string_view block = r.header_block();
  std::vector<std::string> seen;
  lionet::http::for_each_line(block, [&](size_t b, size_t e, std::string_view n, std::string_view v) {
    seen.push_back(std::string(n) + "=" + std::string(v) + "@" + std::string(block.substr(b, e - b)));
    return true;
  });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], "A=1@A: 1\r\n");
  EXPECT_EQ(seen[1], "Long-Name=x: y@Long-Name: x: y\r\n");
  EXPECT_EQ(seen[2], "E=@E: \r\n");
  int calls = 0;
  lionet::http::for_each_line(block, [&](size_t, size_t, std::string_view, std::string_view) { return ++calls < 2; });
  EXPECT_EQ(calls, 2);  // stops when told
}

TEST(FieldBlock, LowerCopyLowersOnlyAToZForEveryByteAndLength) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (size_t start = 0; start < 16; ++start) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{15}, size_t{17}, all.size() - 16}) {
      std::string src = all.substr(start, n);
      std::string got(n + 2, '#');  // the bytes past n stay untouched
      lionet::http::ascii_lower_copy(got.data(), src.data(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], lionet::http::ascii_lower(src[i])) << "byte " << int(src[i]);
      EXPECT_EQ(got.substr(n), "##");
    }
  }
  char name[] = "Content-Type-And-More";
  lionet::http::ascii_lower_copy(name, name, sizeof name - 1);  // in place
  EXPECT_STREQ(name, "content-type-and-more");
}
