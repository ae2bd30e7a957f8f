// lionet/syslog/message.cc: parse() and to_json() (see message.h).
#include "lionet/syslog/message.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "lionet/base/utf8.h"

namespace lionet::syslog {
namespace {

bool digit(char c) noexcept { return c >= '0' && c <= '9'; }

// n digits at s[at..] as a number; -1 if any is not a digit or s is too short.
int digits(std::string_view s, std::size_t at, std::size_t n) noexcept {
  if (at + n > s.size()) return -1;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!digit(s[at + i])) return -1;
    v = v * 10 + (s[at + i] - '0');
  }
  return v;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "<PRI>": the value and the bytes it took, or -1.
int parse_pri(std::string_view s, std::size_t& len) noexcept {
  if (s.size() < 3 || s[0] != '<') return -1;
  std::size_t i = 1;
  int v = 0;
  while (i < s.size() && i <= 3 && digit(s[i])) v = v * 10 + (s[i++] - '0');
  if (i == 1 || i >= s.size() || s[i] != '>') return -1;
  if (i > 2 && s[1] == '0') return -1;  // leading zero ("<01>")
  if (v > 191) return -1;
  len = i + 1;
  return v;
}

// The next SP-terminated token of printable ASCII (1..max bytes) at s[at..]; advances at past
// the token and its SP. nullopt when out of shape.
std::optional<std::string_view> token(std::string_view s, std::size_t& at, std::size_t max) {
  const std::size_t begin = at;
  while (at < s.size() && s[at] != ' ') {
    const auto c = static_cast<unsigned char>(s[at]);
    if (c < 33 || c > 126) return std::nullopt;
    ++at;
  }
  const std::size_t n = at - begin;
  if (n == 0 || n > max || at >= s.size()) return std::nullopt;  // empty, too long, or no SP after
  ++at;
  return s.substr(begin, n);
}

std::string_view nil(std::string_view v) noexcept { return v == "-" ? std::string_view() : v; }

// RFC 3339 as RFC 5424 restricts it; ms since the epoch, or nullopt.
std::optional<int64_t> parse_rfc3339(std::string_view t) {
  // 2003-10-11T22:14:15[.003]Z|+hh:mm
  const int y = digits(t, 0, 4), mo = digits(t, 5, 2), d = digits(t, 8, 2);
  const int h = digits(t, 11, 2), mi = digits(t, 14, 2), sec = digits(t, 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60 ||
      t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' || t[16] != ':')
    return std::nullopt;
  std::size_t at = 19;
  int ms = 0;
  if (at < t.size() && t[at] == '.') {
    std::size_t n = 0;
    ++at;
    while (at < t.size() && digit(t[at])) {
      if (n < 3) ms = ms * 10 + (t[at] - '0');
      ++n;
      ++at;
    }
    if (n == 0 || n > 6) return std::nullopt;
    for (std::size_t k = n; k < 3; ++k) ms *= 10;
  }
  int offset_min = 0;
  if (at < t.size() && (t[at] == 'Z' || t[at] == 'z')) {
    ++at;
  } else if (at < t.size() && (t[at] == '+' || t[at] == '-')) {
    const int oh = digits(t, at + 1, 2), om = digits(t, at + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || at + 3 >= t.size() || t[at + 3] != ':') return std::nullopt;
    offset_min = (t[at] == '-' ? -1 : 1) * (oh * 60 + om);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != t.size()) return std::nullopt;
  const int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const int64_t secs = days * 86400 + h * 3600 + mi * 60 + std::min(sec, 59) - int64_t{offset_min} * 60;
  return secs * 1000 + ms;
}

// STRUCTURED-DATA at s[at..]: "-" or one or more [...] elements; advances at past it. false
// when out of shape.
bool skip_sd(std::string_view s, std::size_t& at) noexcept {
  if (at < s.size() && s[at] == '-') {
    ++at;
    return true;
  }
  if (at >= s.size() || s[at] != '[') return false;
  while (at < s.size() && s[at] == '[') {
    ++at;
    bool in_value = false;
    for (;;) {
      if (at >= s.size()) return false;
      const char c = s[at];
      if (in_value) {
        if (c == '\\' && at + 1 < s.size()) {
          at += 2;
          continue;
        }
        if (c == '"') in_value = false;
        ++at;
        continue;
      }
      if (c == '"') {
        in_value = true;
        ++at;
        continue;
      }
      if (c == ']') {
        ++at;
        break;
      }
      ++at;
    }
  }
  return true;
}

constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// "Mmm dd hh:mm:ss " (dd may be " d" or "d"); the bytes it took (SP included), or 0.
std::size_t parse_3164_time(std::string_view s, int& mon, int& day, int& h, int& mi, int& sec) noexcept {
  if (s.size() < 15) return 0;
  mon = -1;
  for (int i = 0; i < 12; ++i)
    if (s.substr(0, 3) == kMonths[i]) mon = i;
  if (mon < 0 || s[3] != ' ') return 0;
  std::size_t at = 4;
  if (s[at] == ' ') ++at;  // "Nov  5"
  day = 0;
  std::size_t nd = 0;
  while (at < s.size() && digit(s[at]) && nd < 2) day = day * 10 + (s[at++] - '0'), ++nd;
  if (nd == 0 || day < 1 || day > 31 || at >= s.size() || s[at] != ' ') return 0;
  ++at;
  h = digits(s, at, 2);
  mi = digits(s, at + 3, 2);
  sec = digits(s, at + 6, 2);
  if (h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60 || at + 8 > s.size() || s[at + 2] != ':' ||
      s[at + 5] != ':')
    return 0;
  at += 8;
  if (at < s.size() && s[at] != ' ') return 0;
  return at < s.size() ? at + 1 : at;
}

// Local time (this host's zone) of a year-less RFC 3164 stamp, in the year nearest now_ms.
int64_t local_3164_ms(int mon, int day, int h, int mi, int sec, int64_t now_ms) {
  const std::time_t now = static_cast<std::time_t>(now_ms / 1000);
  struct tm now_tm;
  localtime_r(&now, &now_tm);
  int64_t best = 0, best_dist = -1;
  for (int dy = -1; dy <= 1; ++dy) {
    struct tm t {};
    t.tm_year = now_tm.tm_year + dy;
    t.tm_mon = mon;
    t.tm_mday = day;
    t.tm_hour = h;
    t.tm_min = mi;
    t.tm_sec = std::min(sec, 59);
    t.tm_isdst = -1;
    const std::time_t v = mktime(&t);
    if (v == static_cast<std::time_t>(-1)) continue;
    const int64_t ms = static_cast<int64_t>(v) * 1000;
    const int64_t dist = ms > now_ms ? ms - now_ms : now_ms - ms;
    if (best_dist < 0 || dist < best_dist) best = ms, best_dist = dist;
  }
  return best;
}

Message malformed(std::string_view input) {
  Message m;
  m.malformed = true;
  m.msg = input;
  return m;
}

void json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  append_json_escaped(out, s);
  out.push_back('"');
}

void field(std::string& out, std::string_view name, std::string_view v) {
  if (v.empty()) return;
  out.append(",\"").append(name).append("\":");
  json_string(out, v);
}
}  // namespace

const char* to_string(Format f) noexcept {
  switch (f) {
    case Format::kRfc5424: return "rfc5424";
    case Format::kRfc3164: return "rfc3164";
    case Format::kRaw: break;
  }
  return "raw";
}

Message parse(std::string_view input, int64_t now_ms) {
  while (!input.empty() && (input.back() == '\n' || input.back() == '\r' || input.back() == '\0'))
    input.remove_suffix(1);
  std::size_t at = 0;
  const int pri = parse_pri(input, at);
  if (pri < 0) return malformed(input);
  Message m;
  m.facility = pri / 8;
  m.severity = pri % 8;
  if (input.size() >= at + 2 && input[at] == '1' && input[at + 1] == ' ') {  // RFC 5424
    at += 2;
    auto ts = token(input, at, 48);
    auto host = ts ? token(input, at, 255) : std::nullopt;
    auto app = host ? token(input, at, 48) : std::nullopt;
    auto procid = app ? token(input, at, 128) : std::nullopt;
    auto msgid = procid ? token(input, at, 32) : std::nullopt;
    if (!msgid) return malformed(input);
    if (*ts != "-") {
      m.timestamp_ms = parse_rfc3339(*ts);
      if (!m.timestamp_ms) return malformed(input);
    }
    const std::size_t sd_begin = at;
    if (!skip_sd(input, at)) return malformed(input);
    const std::string_view sd = input.substr(sd_begin, at - sd_begin);
    if (at < input.size()) {
      if (input[at] != ' ') return malformed(input);
      ++at;
    }
    std::string_view msg = input.substr(at);
    if (msg.starts_with("\xEF\xBB\xBF")) msg.remove_prefix(3);
    m.format = Format::kRfc5424;
    m.host = nil(*host);
    m.app = nil(*app);
    m.procid = nil(*procid);
    m.msgid = nil(*msgid);
    m.structured_data = nil(sd);
    m.msg = msg;
    return m;
  }
  // RFC 3164.
  m.format = Format::kRfc3164;
  std::string_view rest = input.substr(at);
  int mon = 0, day = 0, h = 0, mi = 0, sec = 0;
  const std::size_t tlen = parse_3164_time(rest, mon, day, h, mi, sec);
  if (tlen == 0) {  // no timestamp: all of it is MSG (RFC 3164 4.3.3)
    m.msg = rest;
    return m;
  }
  m.timestamp_ms = local_3164_ms(mon, day, h, mi, sec, now_ms);
  rest.remove_prefix(tlen);
  // HOSTNAME SP, unless the next word is already the tag ("app:" or "app[pid]:").
  std::size_t sp = rest.find(' ');
  std::string_view first = rest.substr(0, sp);
  const bool first_is_tag = !first.empty() && (first.back() == ':' || first.find('[') != std::string_view::npos);
  if (!first_is_tag && sp != std::string_view::npos && !first.empty()) {
    m.host = first;
    rest.remove_prefix(sp + 1);
  }
  // TAG: up to 32 alphanumeric-ish bytes ending at '[', ':' or SP.
  std::size_t t = 0;
  while (t < rest.size() && t < 48 && rest[t] != '[' && rest[t] != ':' && rest[t] != ' ') ++t;
  if (t > 0 && t < rest.size() && (rest[t] == '[' || rest[t] == ':')) {
    m.app = rest.substr(0, t);
    std::size_t after = t;
    if (rest[t] == '[') {
      const std::size_t close = rest.find(']', t);
      if (close != std::string_view::npos && close - t <= 129) {
        m.procid = rest.substr(t + 1, close - t - 1);
        after = close + 1;
      }
    }
    if (after < rest.size() && rest[after] == ':') ++after;
    if (after < rest.size() && rest[after] == ' ') ++after;
    rest.remove_prefix(after);
  }
  m.msg = rest;
  return m;
}

void to_json(const Message& m, std::string_view peer, bool truncated, std::string& out) {
  out.append("{\"format\":\"").append(to_string(m.format)).push_back('"');
  if (m.malformed) out.append(",\"malformed\":true");
  if (m.facility >= 0) {  // 0..23 and 0..7: no snprintf (a fifth of this function's cost)
    char buf[40] = ",\"facility\":";
    std::size_t n = 12;
    if (m.facility >= 10) buf[n++] = static_cast<char>('0' + m.facility / 10);
    buf[n++] = static_cast<char>('0' + m.facility % 10);
    std::memcpy(buf + n, ",\"severity\":", 12);
    n += 12;
    buf[n++] = static_cast<char>('0' + m.severity);
    out.append(buf, n);
  }
  field(out, "host", m.host);
  field(out, "app", m.app);
  field(out, "procid", m.procid);
  field(out, "msgid", m.msgid);
  field(out, "sd", m.structured_data);
  out.append(",\"msg\":");
  json_string(out, m.msg);
  field(out, "peer", peer);
  if (truncated) out.append(",\"truncated\":true");
  out.push_back('}');
}

std::string_view record_key(const Message& m, bool by_app) noexcept {
  if (by_app && !m.app.empty()) return m.app;
  return m.host.empty() ? m.app : m.host;
}
}  // namespace lionet::syslog
