// lionet/syslog/message.h and framing.h: RFC 5424 and RFC 3164 messages as real senders write
// them (the RFCs' own examples, util-linux logger's output), every malformed shape stored raw,
// the JSON value, and RFC 6587 framing cut at every byte.
#include "lionet/syslog/message.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>
#include <vector>

#include "lionet/syslog/framing.h"

namespace lionet::syslog {
namespace {

constexpr int64_t kNow = 1764104737000;  // 2025-11-25T21:05:37Z

TEST(SyslogParse, Rfc5424AsLoggerSendsIt) {
  const auto m = parse(
      "<13>1 2026-11-25T21:05:37.126865+00:00 vm myapp - - [timeQuality tzKnown=\"1\" isSynced=\"0\"] hello world\n",
      kNow);
  EXPECT_EQ(m.format, Format::kRfc5424);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(m.facility, 1);
  EXPECT_EQ(m.severity, 5);
  ASSERT_TRUE(m.timestamp_ms);
  EXPECT_EQ(*m.timestamp_ms, 1795640737126);  // 2026-11-25T21:05:37.126Z
  EXPECT_EQ(m.host, "vm");
  EXPECT_EQ(m.app, "myapp");
  EXPECT_EQ(m.procid, "");
  EXPECT_EQ(m.msgid, "");
  EXPECT_EQ(m.structured_data, "[timeQuality tzKnown=\"1\" isSynced=\"0\"]");
  EXPECT_EQ(m.msg, "hello world");
}

TEST(SyslogParse, Rfc5424ExamplesFromTheRfc) {
  // RFC 5424 6.5 example 1: no SD, a BOM before MSG, a zone-less... (Z) timestamp.
  auto m = parse("<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - \xEF\xBB\xBF'su root' failed", kNow);
  EXPECT_EQ(m.format, Format::kRfc5424);
  EXPECT_EQ(m.facility, 4);
  EXPECT_EQ(m.severity, 2);
  EXPECT_EQ(*m.timestamp_ms, 1065910455003);
  EXPECT_EQ(m.msgid, "ID47");
  EXPECT_EQ(m.msg, "'su root' failed");
  // Example 2: an offset, a procid, no MSG.
  m = parse("<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - ", kNow);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(*m.timestamp_ms, 1061727255000);  // 12:14:15.000 UTC
  EXPECT_EQ(m.procid, "8710");
  EXPECT_EQ(m.msg, "");
  // Example 4: structured data with an escaped quote and bracket, then MSG.
  m = parse(
      R"(<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="App\"li\]cation"][b@1 x="y"] An application event)",
      kNow);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(m.structured_data, R"([exampleSDID@32473 iut="3" eventSource="App\"li\]cation"][b@1 x="y"])");
  EXPECT_EQ(m.msg, "An application event");
  // Nil timestamp and fields.
  m = parse("<0>1 - - - - - -", kNow);
  EXPECT_FALSE(m.malformed);
  EXPECT_FALSE(m.timestamp_ms);
  EXPECT_EQ(m.host, "");
  EXPECT_EQ(m.facility, 0);
}

TEST(SyslogParse, Rfc3164AsLoggerAndOldDaemonsSendIt) {
  std::tm tm{};
  auto m = parse("<13>Nov 25 21:05:37 vm myapp: hello bsd", kNow);
  EXPECT_EQ(m.format, Format::kRfc3164);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(m.host, "vm");
  EXPECT_EQ(m.app, "myapp");
  EXPECT_EQ(m.msg, "hello bsd");
  ASSERT_TRUE(m.timestamp_ms);
  // Local time, this year.
  tm.tm_year = 2025 - 1900, tm.tm_mon = 10, tm.tm_mday = 25, tm.tm_hour = 21, tm.tm_min = 5, tm.tm_sec = 37;
  tm.tm_isdst = -1;
  EXPECT_EQ(*m.timestamp_ms, static_cast<int64_t>(std::mktime(&tm)) * 1000);

  m = parse("<34>Oct  1 22:14:15 mymachine su[230]: 'su root' failed for lonvick on /dev/pts/8", kNow);
  EXPECT_EQ(m.host, "mymachine");
  EXPECT_EQ(m.app, "su");
  EXPECT_EQ(m.procid, "230");
  EXPECT_EQ(m.msg, "'su root' failed for lonvick on /dev/pts/8");

  // No host name (local senders): the first word is the tag.
  m = parse("<30>Nov 25 21:05:37 cron[99]: job done", kNow);
  EXPECT_EQ(m.host, "");
  EXPECT_EQ(m.app, "cron");
  EXPECT_EQ(m.procid, "99");
  EXPECT_EQ(m.msg, "job done");

  // A December stamp read early in January is last year's.
  const int64_t jan2 = 1767312000000;  // 2026-01-02T00:00:00Z
  m = parse("<13>Dec 31 23:00:00 h a: x", jan2);
  ASSERT_TRUE(m.timestamp_ms);
  EXPECT_LT(*m.timestamp_ms, jan2);
  EXPECT_GT(*m.timestamp_ms, jan2 - 3 * 86400000LL);

  // Without a timestamp it is still RFC 3164 (kept whole as MSG).
  m = parse("<13>just text", kNow);
  EXPECT_EQ(m.format, Format::kRfc3164);
  EXPECT_FALSE(m.malformed);
  EXPECT_FALSE(m.timestamp_ms);
  EXPECT_EQ(m.msg, "just text");
}

TEST(SyslogParse, MalformedInputIsKeptWholeAndFlagged) {
  for (std::string bad : {"no pri at all", "<>1 x", "<192>1 - - - - - -", "<01>x", "<1234>x", "<13",
                          "<13>1 2003-10-11 host app - - - msg",  // timestamp without 'T'
                          "<13>1 2003-10-11T22:14:15.0000001Z h a - - -",  // 7 fraction digits
                          "<13>1 - host app - - [unterminated sd",  // SD never closed
                          "<13>1 - host app - -",  // no SD field
                          "<13>1 - host app - - -x",  // SD then not a space
                          ""}) {
    const auto m = parse(bad, kNow);
    EXPECT_TRUE(m.malformed) << bad;
    EXPECT_EQ(m.format, Format::kRaw) << bad;
    EXPECT_EQ(m.msg, bad) << bad;
    EXPECT_EQ(m.facility, -1) << bad;
  }
}

TEST(SyslogJson, ValuesParseAndCarryEveryFieldEscaped) {
  std::string out;
  to_json(parse("<13>1 - h\"x a - - - line\n2 \"q\" \xff end", kNow), "127.0.0.1", false, out);
  EXPECT_EQ(
      out,
      R"({"format":"rfc5424","facility":1,"severity":5,"host":"h\"x","app":"a","msg":"line\u000A2 \"q\" \u00FF end","peer":"127.0.0.1"})");
  out.clear();
  to_json(parse("garbage\x01", kNow), "", true, out);
  EXPECT_EQ(out, R"({"format":"raw","malformed":true,"msg":"garbage\u0001","truncated":true})");
  EXPECT_EQ(record_key(parse("<13>1 - host app - - -", kNow), false), "host");
  EXPECT_EQ(record_key(parse("<13>1 - host app - - -", kNow), true), "app");
  EXPECT_EQ(record_key(parse("<13>1 - - app - - -", kNow), false), "app");
  EXPECT_EQ(record_key(parse("junk", kNow), false), "");
}

// Every message of a stream, fed whole and cut at every byte.
std::vector<std::string> frames(const std::string& stream, std::size_t max, std::size_t cut, bool* bad = nullptr) {
  StreamFramer f(max);
  std::vector<std::string> out;
  auto on = [&](std::string_view m, bool t) { out.push_back(std::string(m) + (t ? "|T" : "")); };
  if (cut == 0) {
    f.feed(stream, on);
  } else {
    for (std::size_t i = 0; i < stream.size(); i += cut) f.feed(std::string_view(stream).substr(i, cut), on);
  }
  f.finish(on);
  if (bad) *bad = f.bad();
  return out;
}

TEST(SyslogFraming, OctetCountingAndLineFramingCutAtEveryByte) {
  const std::string stream = "11 <13>1 - - -\n<13>1 line two\n\n4 a\nbc<14>no newline at the end";
  const std::vector<std::string> want = {"<13>1 - - -", "<13>1 line two", "a\nbc", "<14>no newline at the end"};
  for (std::size_t cut = 0; cut <= 7; ++cut) EXPECT_EQ(frames(stream, 1000, cut), want) << "cut " << cut;
}

TEST(SyslogFraming, LongMessagesAreCutFlaggedAndTheirRestSkipped) {
  const std::string big(3000, 'x');
  const std::string stream = "3000 " + big + big + "\nnext\n";
  const std::vector<std::string> want = {std::string(1000, 'x') + "|T", std::string(1000, 'x') + "|T", "next"};
  for (std::size_t cut : {0, 1, 999, 1000, 1001}) EXPECT_EQ(frames(stream, 1000, cut), want) << "cut " << cut;
}

TEST(SyslogFraming, ALengthThatIsNotDigitsAndASpaceStopsTheStream) {
  bool bad = false;
  auto got = frames("3 abc12x45 hello", 1000, 0, &bad);
  EXPECT_TRUE(bad);
  EXPECT_EQ(got, std::vector<std::string>{"abc"});
  got = frames("1234567890 x", 1000, 0, &bad);  // 10 digits: more than any message may be
  EXPECT_TRUE(bad);
}
}  // namespace
}  // namespace lionet::syslog
