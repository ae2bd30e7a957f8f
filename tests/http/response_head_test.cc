// parse_response_head, the HTTP/1 response-head parser the Client, the Proxy and
// websocket::connect share: what it refuses, and its valid_fields verdict, which lets the proxy
// relay fields without checking their bytes a second time.
#include "lionet/http/response_head.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lionet/http/response.h"

using lionet::http::HeadParse;
using lionet::http::parse_response_head;
using lionet::http::Response;
using lionet::http::ResponseHead;

namespace {
HeadParse parse(std::string_view text, ResponseHead& h) { return parse_response_head(text, h); }
}  // namespace

TEST(ResponseHead, ParsesStatusFieldsAndKeepAlive) {
  ResponseHead h;
  const std::string text =
      "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 04:53:08 GMT\r\nContent-Type:  text/plain \r\n"
      "Content-Length: 5\r\n\r\nhello";
  ASSERT_EQ(parse(text, h), HeadParse::kDone);
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.reason, "OK");
  EXPECT_EQ(h.size, text.size() - 5);
  ASSERT_EQ(h.headers.size(), 3u);
  EXPECT_EQ(h.headers.get("content-type"), "text/plain");  // OWS trimmed
  EXPECT_TRUE(h.keep_alive);
  EXPECT_TRUE(h.valid_fields);
  EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", h), HeadParse::kNeedMore);
  ASSERT_EQ(parse("HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n", h), HeadParse::kDone);
  EXPECT_TRUE(h.keep_alive);
  ASSERT_EQ(parse("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", h), HeadParse::kDone);
  EXPECT_FALSE(h.keep_alive);
}

TEST(ResponseHead, RefusesWhitespaceInNamesAndCrLfNulAnywhere) {
  ResponseHead h;
  for (std::string_view bad : {
           std::string_view("HTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nX-Tab\t: v\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nX-A: v\r\n folded\r\n\r\n"),  // obs-fold
           std::string_view("HTTP/1.1 200 OK\r\nX-Cr: a\rb\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nX-Lf: a\nb\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nX-Nul: a\0b\r\n\r\n", 31),
           std::string_view("HTTP/1.1 200 OK\r\nX-Nul: 0123456789\0abcdef\r\n\r\n", 45),
           std::string_view("HTTP/1.1 200 OK\r\nX-Cr: 0123456789ab\rcdef\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\n: no name\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nno colon\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\nX-Injected: 1\r\n\r\n"),  // a bare LF in the reason
           std::string_view("HTTP/1.1 100 Conti\rnue\r\n\r\n"),
           std::string_view("HTTP/1.1 200 O\0K\r\n\r\n", 20),
           std::string_view("HTTP/2.0 200 OK\r\n\r\n"),
           std::string_view("HTTP/1.1 20x OK\r\n\r\n"),
       }) {
    EXPECT_EQ(parse(bad, h), HeadParse::kError) << bad;
  }
}

// The reason phrase may hold HTAB, SP, VCHAR and obs-text (RFC 9112 4): only CR, LF and NUL
// are refused there.
TEST(ResponseHead, AReasonWithHtabAndObsTextIsAccepted) {
  ResponseHead h;
  ASSERT_EQ(parse("HTTP/1.1 200 O\tK \xe9\r\nX-A: 1\r\n\r\n", h), HeadParse::kDone);
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.reason, "O\tK \xe9");
  ASSERT_EQ(h.headers.size(), 1u);
}

// valid_fields is true exactly when Response::add_header would take every field as it is.
TEST(ResponseHead, ValidFieldsAgreesWithAddHeader) {
  const std::vector<std::pair<std::string_view, std::string_view>> fields = {
      {"ETag", "\"1f-2a\""},
      {"X-Empty", ""},
      {"X-Tab", "a\tb"},
      {"X(paren)", "v"},
      {"X-Ctl", "a\x01z"},
      {"X-Del", "a\x7fz"},
      {"X-Obs", "caf\xe9"},
      {"X~ok!#$%&'*+.^_`|", "v"},
      // Values of 8 bytes and more are checked a word at a time: an odd byte in any word.
      {"X-Long", "application/octet-stream; charset=x"},
      {"X-Long-Ctl", "0123456789abcdef\x01"},
      {"X-Long-Del",
       "01234567\x7f"
       "9abcdef"},
      {"X-Long-Tab", "01234567\t89abcdef"},
      {"X-Long-Obs", "01234567\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9"},
      {"X-Long-Esc", "abcdefgh\x1b[0m"},
  };
  for (const auto& [name, value] : fields) {
    std::string text = "HTTP/1.1 200 OK\r\n";
    text.append(name).append(": ").append(value).append("\r\n\r\n");
    ResponseHead h;
    ASSERT_EQ(parse(text, h), HeadParse::kDone) << name;
    Response r;
    EXPECT_EQ(h.valid_fields, r.add_header(name, value)) << name << ": " << value;
  }
  // One odd field among good ones is enough to say no.
  ResponseHead h;
  ASSERT_EQ(parse("HTTP/1.1 200 OK\r\nA: 1\r\nX(p): 2\r\nB: 3\r\n\r\n", h), HeadParse::kDone);
  EXPECT_FALSE(h.valid_fields);
  ASSERT_EQ(parse("HTTP/1.1 200 OK\r\nA: 1\r\nB: 3\r\n\r\n", h), HeadParse::kDone);
  EXPECT_TRUE(h.valid_fields);  // a reused head does not keep an earlier verdict
}
