// Tests of lionet/http/request_parser.h and chunked_decoder.h: valid heads, every limit with its
// status, malformed input, smuggling cases, every split point, pipelined requests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lionet/http/chunked_decoder.h"
#include "lionet/http/request_parser.h"

namespace lionet::http {
namespace {
using State = RequestParser::State;

struct Parsed {
  State state;
  int status = 0;
  size_t head_size = 0;
};

// Keeps the last input alive: the parser's views point into it.
Parsed parse_all(RequestParser& p, const std::string& s) {
  static std::string kept;
  kept = s;
  p.reset();
  State st = p.parse(kept.data(), kept.size());
  return {st, p.error_status(), p.head_size()};
}

int status_of(const std::string& s, ParserLimits limits = {}) {
  RequestParser p(limits);
  Parsed r = parse_all(p, s);
  if (r.state == State::kDone) return 200;
  if (r.state == State::kNeedMore) return 0;
  return r.status;
}

TEST(RequestParser, ParsesASimpleGet) {
  RequestParser p;
  std::string s = "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\nX-Empty:\r\n\r\n";
  ASSERT_EQ(p.parse(s.data(), s.size()), State::kDone);
  const RequestHead& h = p.head();
  EXPECT_EQ(p.head_size(), s.size());
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/a/b?x=1&y=2");
  EXPECT_EQ(h.path, "/a/b");
  EXPECT_EQ(h.query, "x=1&y=2");
  EXPECT_EQ(h.host, "example.com");
  EXPECT_EQ(h.version_minor, 1);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_EQ(h.body_kind, BodyKind::kNone);
  ASSERT_EQ(h.headers.size(), 3u);
  EXPECT_EQ(h.headers.get("user-agent"), "t");
  EXPECT_EQ(h.headers.get("USER-AGENT"), "t");
  EXPECT_TRUE(h.headers.has("x-empty"));
  EXPECT_EQ(h.headers.get("x-empty"), "");
  // Views point into the input (no copy of header bytes).
  EXPECT_GE(h.headers.get("host").data(), s.data());
  EXPECT_LT(h.headers.get("host").data(), s.data() + s.size());
}

TEST(RequestParser, TrimsOptionalWhitespaceAroundValues) {
  RequestParser p;
  std::string s = "GET / HTTP/1.1\r\nHost:\t h \t\r\nX-A:  a b  \r\n\r\n";
  ASSERT_EQ(p.parse(s.data(), s.size()), State::kDone);
  EXPECT_EQ(p.head().headers.get("host"), "h");
  EXPECT_EQ(p.head().headers.get("x-a"), "a b");
}

TEST(RequestParser, KeepAliveFollowsVersionAndConnection) {
  RequestParser p;
  struct Case {
    std::string req;
    bool keep;
  } cases[] = {
      {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false},
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nConnection: upgrade, Keep-Alive\r\n\r\n", true},
  };
  for (const auto& c : cases) {
    ASSERT_EQ(parse_all(p, c.req).state, State::kDone) << c.req;
    EXPECT_EQ(p.head().keep_alive, c.keep) << c.req;
  }
}

TEST(RequestParser, BodyFraming) {
  RequestParser p;
  ASSERT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n").state, State::kDone);
  EXPECT_EQ(p.head().body_kind, BodyKind::kContentLength);
  EXPECT_EQ(p.head().content_length, 42u);
  ASSERT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n").state, State::kDone);
  EXPECT_EQ(p.head().body_kind, BodyKind::kNone);
  ASSERT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n").state, State::kDone);
  EXPECT_EQ(p.head().body_kind, BodyKind::kChunked);
  // Repeated identical Content-Length is one value (RFC 9110 8.6).
  ASSERT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").state,
            State::kDone);
  EXPECT_EQ(p.head().content_length, 5u);
}

TEST(RequestParser, ExpectContinue) {
  RequestParser p;
  ASSERT_EQ(parse_all(p, "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n").state,
            State::kDone);
  EXPECT_TRUE(p.head().expect_continue);
  EXPECT_EQ(status_of("PUT / HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\n\r\n"), 417);
  // HTTP/1.0 ignores Expect (RFC 9110 10.1.1).
  ASSERT_EQ(parse_all(p, "PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").state, State::kDone);
  EXPECT_FALSE(p.head().expect_continue);
}

TEST(RequestParser, TargetForms) {
  RequestParser p;
  ASSERT_EQ(parse_all(p, "GET http://Example.com:8080/x/y?q HTTP/1.1\r\nHost: other\r\n\r\n").state, State::kDone);
  EXPECT_TRUE(p.head().absolute_form);
  EXPECT_EQ(p.head().host, "Example.com:8080");  // the target's authority wins over Host
  EXPECT_EQ(p.head().path, "/x/y");
  EXPECT_EQ(p.head().query, "q");
  ASSERT_EQ(parse_all(p, "GET https://h HTTP/1.1\r\nHost: h\r\n\r\n").state, State::kDone);
  EXPECT_EQ(p.head().path, "/");
  ASSERT_EQ(parse_all(p, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").state, State::kDone);
  EXPECT_EQ(p.head().path, "*");
  ASSERT_EQ(parse_all(p, "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n").state, State::kDone);
  EXPECT_EQ(p.head().host, "h:443");
  EXPECT_EQ(status_of("GET * HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET ftp://h/x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET http://user@h/x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

TEST(RequestParser, SkipsAFewEmptyLinesBeforeTheRequest) {
  EXPECT_EQ(status_of("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 200);
  EXPECT_EQ(status_of("\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

TEST(RequestParser, VersionErrors) {
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/0.9\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/3\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), 200);  // 1.x served as 1.1
  EXPECT_EQ(status_of("GET / HTTP/1.1x\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / http/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /\r\n\r\n"), 400);
}

TEST(RequestParser, MalformedInputIs400) {
  const char* bad[] = {
      "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",  // double space
      "GET / HTTP/1.1 \r\nHost: h\r\n\r\n",  // trailing space
      "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",  // method not a token
      " GET / HTTP/1.1\r\nHost: h\r\n\r\n",  // leading space
      "GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n",  // control in target
      "GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n",  // non-ASCII in target
      "GET / HTTP/1.1\nHost: h\r\n\r\n",  // bare LF
      "GET / HTTP/1.1\r\nHost: h\n\r\n",  // bare LF in a field
      "GET / HTTP/1.1\r\nHost: h\r\n\n",  // bare LF ends the head
      "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n",  // bare CR
      "GET / HTTP/1.1\r\nHost : h\r\n\r\n",  // space before colon
      "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b\r\n\r\n",  // obs-fold
      "GET / HTTP/1.1\r\n Host: h\r\n\r\n",  // whitespace before first field
      "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\n: empty-name\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x00b\r\n\r\n",  // NUL in a value
      "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n",  // DEL in a value
      "GET / HTTP/1.1\r\n\r\n",  // HTTP/1.1 without Host
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",  // two Hosts
      "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",  // bad Host
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n",
  };
  for (std::string s : bad) {
    EXPECT_EQ(status_of(s), 400) << s;
  }
  // Strings with an embedded NUL need an explicit length.
  std::string nul("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n", 36);
  EXPECT_EQ(status_of(nul), 400);
}

TEST(RequestParser, SmugglingCasesAreRejected) {
  struct Case {
    const char* req;
    int status;
  } cases[] = {
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\x0b"
       "chunked\r\n\r\n",
       400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n", 400},
  };
  for (const auto& c : cases) {
    RequestParser p;
    Parsed r = parse_all(p, c.req);
    EXPECT_EQ(r.state, State::kError) << c.req;
    EXPECT_EQ(r.status, c.status) << c.req;
    EXPECT_FALSE(p.head().keep_alive) << c.req;
  }
}

TEST(RequestParser, LimitsAnswerTheirStatus) {
  ParserLimits l;
  l.max_request_line = 64;
  l.max_header_bytes = 128;
  l.max_headers = 4;
  l.max_body_bytes = 1000;
  std::string long_target = "GET /" + std::string(100, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n";
  EXPECT_EQ(status_of(long_target, l), 414);
  // Detected before the line ends (no buffering past the limit).
  EXPECT_EQ(status_of("GET /" + std::string(100, 'a'), l), 414);
  EXPECT_EQ(status_of("GET /" + std::string(40, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", l), 200);
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
  EXPECT_EQ(status_of(many, l), 431);
  std::string big = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(150, 'v') + "\r\n\r\n";
  EXPECT_EQ(status_of(big, l), 431);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(150, 'v'), l), 431);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1001\r\n\r\n", l), 413);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n", l), 200);
}

// A Content-Length over max_body_bytes refuses a head that is whole and otherwise valid: the
// head stays readable (a route may word the 413), unlike the heads other errors cut short.
TEST(RequestParser, ContentLengthOverTheLimitKeepsTheWholeHead) {
  ParserLimits l;
  l.max_body_bytes = 1000;
  RequestParser p(l);
  const std::string s = "POST /t/x?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 1001\r\n\r\nbody";
  Parsed r = parse_all(p, s);
  EXPECT_EQ(r.state, State::kError);
  EXPECT_EQ(r.status, 413);
  ASSERT_TRUE(p.head_complete());
  EXPECT_EQ(r.head_size, s.size() - 4);
  EXPECT_EQ(p.head().method, "POST");
  EXPECT_EQ(p.head().path, "/t/x");
  EXPECT_EQ(p.head().query, "a=1");
  EXPECT_EQ(p.head().host, "h");
  EXPECT_EQ(p.head().headers.get("content-length"), "1001");
  EXPECT_EQ(p.head().body_kind, BodyKind::kContentLength);
  EXPECT_EQ(p.head().content_length, 1001u);
  EXPECT_FALSE(p.head().keep_alive);
  // Views follow the bytes when they move, as after kDone.
  const std::string moved = s;
  p.rebind(moved.data());
  EXPECT_EQ(p.head().path.data(), moved.data() + 5);
  // Still 413 without Host, but that head is not valid: not complete. Nor are heads refused by
  // other rules, and reset() forgets it.
  EXPECT_EQ(parse_all(p, "POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n").status, 413);
  EXPECT_FALSE(p.head_complete());
  EXPECT_EQ(parse_all(p, "POST / HTTP/1.0\r\nContent-Length: 1001\r\n\r\n").status, 413);
  EXPECT_TRUE(p.head_complete());
  EXPECT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").status, 400);
  EXPECT_FALSE(p.head_complete());
  EXPECT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n").status, 400);
  EXPECT_FALSE(p.head_complete());
  EXPECT_EQ(parse_all(p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n").state, State::kDone);
  EXPECT_FALSE(p.head_complete());
}

TEST(RequestParser, EverySplitPointGivesTheSameResult) {
  std::string s =
      "POST http://h:1/p/q?z=%20 HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nX-Long: " + std::string(300, 'x') +
      "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  for (size_t split = 0; split <= s.size(); ++split) {
    // The bytes live in a buffer that is re-allocated between calls (as the server may do).
    RequestParser p;
    std::string first = s.substr(0, split);
    ASSERT_EQ(p.parse(first.data(), first.size()), split == s.size() ? State::kDone : State::kNeedMore) << split;
    std::string whole = s;
    ASSERT_EQ(p.parse(whole.data(), whole.size()), State::kDone) << split;
    EXPECT_EQ(p.head().path, "/p/q");
    EXPECT_EQ(p.head().query, "z=%20");
    EXPECT_EQ(p.head().headers.get("x-long").size(), 300u);
    EXPECT_EQ(p.head().body_kind, BodyKind::kChunked);
    EXPECT_FALSE(p.head().keep_alive);
    EXPECT_EQ(p.head_size(), s.size());
  }
  // One byte at a time.
  RequestParser p;
  State st = State::kNeedMore;
  for (size_t n = 1; n <= s.size(); ++n) st = p.parse(s.data(), n);
  EXPECT_EQ(st, State::kDone);
}

TEST(RequestParser, PipelinedRequestsParseOneAfterAnother) {
  std::string s =
      "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\nPOST /3 HTTP/1.1\r\nHost: "
      "h\r\nContent-Length: 3\r\n\r\nabcGET /4 HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestParser p;
  std::vector<std::string> paths;
  size_t pos = 0;
  while (pos < s.size()) {
    p.reset();
    ASSERT_EQ(p.parse(s.data() + pos, s.size() - pos), State::kDone);
    paths.emplace_back(p.head().path);
    pos += p.head_size() + (p.head().body_kind == BodyKind::kContentLength ? p.head().content_length : 0);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"/1", "/2", "/3", "/4"}));
}

TEST(RequestParser, RebindFollowsMovedBytes) {
  std::string s = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestParser p;
  ASSERT_EQ(p.parse(s.data(), s.size()), State::kDone);
  std::string copy = s;
  s.assign(s.size(), '#');
  p.rebind(copy.data());
  EXPECT_EQ(p.head().path, "/x");
  EXPECT_EQ(p.head().headers.get("host"), "h");
}

// ---- ChunkedDecoder ----

struct Decoded {
  ChunkedDecoder::Status status;
  std::string body;
  size_t consumed = 0;
  int error = 0;
};

Decoded decode_all(const std::string& in, size_t step = SIZE_MAX, ChunkedDecoder::Limits limits = {}) {
  ChunkedDecoder d(limits);
  Decoded r;
  size_t avail = std::min(step, in.size());
  size_t pos = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    auto s = d.next(in.data() + pos, avail - pos);
    r.body.append(s.data, s.data_size);
    pos += s.consumed;
    if (d.done() || d.failed()) break;
    if (s.consumed == 0) {
      if (avail == in.size()) break;
      avail = std::min(in.size(), avail + step);
    }
  }
  r.status = d.status();
  r.consumed = pos;
  r.error = d.error_status();
  return r;
}

TEST(ChunkedDecoder, DecodesChunksExtensionsAndTrailers) {
  std::string in =
      "5\r\nhello\r\n6;name=value;q=\"a \\\" b\"\r\n world\r\nA\r\n0123456789\r\n0;last\r\nX-Sum: 1\r\nY: "
      "2\r\n\r\nNEXT";
  for (size_t step : {SIZE_MAX, size_t{1}, size_t{2}, size_t{7}}) {
    Decoded r = decode_all(in, step);
    EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone) << step;
    EXPECT_EQ(r.body, "hello world0123456789") << step;
    EXPECT_EQ(in.substr(r.consumed), "NEXT") << step;
  }
}

TEST(ChunkedDecoder, UpperAndLowerHexAndLeadingZeros) {
  Decoded r = decode_all("000b\r\nhello world\r\n0\r\n\r\n");
  EXPECT_EQ(r.body, "hello world");
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kDone);
  std::string big(0x1f, 'z');
  r = decode_all("1F\r\n" + big + "\r\n0\r\n\r\n");
  EXPECT_EQ(r.body, big);
}

TEST(ChunkedDecoder, RejectsMalformedFraming) {
  const char* bad[] = {
      "\r\nhello\r\n0\r\n\r\n",  // no size
      "x\r\n",  // not hex
      "-5\r\nhello\r\n0\r\n\r\n",  // sign
      "0x5\r\nhello\r\n0\r\n\r\n",  // 0x prefix
      " 5\r\nhello\r\n0\r\n\r\n",  // leading space
      "5 \r\nhello\r\n0\r\n\r\n",  // trailing space without ';'
      "5\nhello\r\n0\r\n\r\n",  // bare LF
      "5\rhello\r\n0\r\n\r\n",  // bare CR
      "5\r\nhelloX\r\n0\r\n\r\n",  // data longer than the size
      "5\r\nhello\n0\r\n\r\n",  // data not followed by CRLF
      "5;a\x01\r\nhello\r\n0\r\n\r\n",  // control in an extension
      "5;\"open\r\nhello\r\n0\r\n\r\n",  // unterminated quote (CR inside)
      "0\r\n bad: fold\r\n\r\n",  // obs-fold trailer
      "0\r\nNoColon\r\n\r\n",  // trailer without ':'
      "0\r\nX: a\r\n\n",  // bare LF at the end
      "10000000000000000\r\n",  // 17 hex digits
  };
  for (const char* b : bad) {
    Decoded r = decode_all(b);
    EXPECT_EQ(r.status, ChunkedDecoder::Status::kError) << b;
    EXPECT_EQ(r.error, 400) << b;
  }
}

TEST(ChunkedDecoder, BodyLimitIs413AndLinesAreBounded) {
  ChunkedDecoder::Limits l;
  l.max_body = 10;
  EXPECT_EQ(decode_all("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", SIZE_MAX, l).status, ChunkedDecoder::Status::kDone);
  Decoded r = decode_all("5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n", SIZE_MAX, l);
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kError);
  EXPECT_EQ(r.error, 413);
  r = decode_all("FFFFFFFFFFFFFFFF\r\n", SIZE_MAX, {});
  EXPECT_EQ(r.status, ChunkedDecoder::Status::kNeedMore);  // legal size, data pending
  ChunkedDecoder::Limits small;
  small.max_line = 16;
  small.max_trailer_bytes = 16;
  EXPECT_EQ(decode_all("5;" + std::string(40, 'e') + "\r\nhello\r\n0\r\n\r\n", SIZE_MAX, small).error, 400);
  EXPECT_EQ(decode_all("0\r\nX: " + std::string(40, 't') + "\r\n\r\n", SIZE_MAX, small).error, 400);
}

TEST(ChunkedDecoder, CopyingDecodeFillsSmallOutputs) {
  std::string in = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  ChunkedDecoder d;
  std::string out;
  size_t pos = 0;
  char tmp[3];
  for (int guard = 0; guard < 1000 && !d.done(); ++guard) {
    auto cs = d.decode(in.data() + pos, in.size() - pos, tmp, sizeof tmp);
    out.append(tmp, cs.produced);
    pos += cs.consumed;
    ASSERT_FALSE(d.failed());
  }
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, "hello world");
  EXPECT_EQ(pos, in.size());
  EXPECT_EQ(d.body_size(), 11u);
}
}  // namespace
}  // namespace lionet::http
