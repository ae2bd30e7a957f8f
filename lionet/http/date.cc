// lionet/http/date.cc: HTTP dates (see date.h).
#include "lionet/http/date.h"

#include <charconv>
#include <cstdio>
#include <cstring>

namespace lionet::http {
namespace {
constexpr size_t kImfLen = 29;

// Writes the 29 characters of t's IMF-fixdate at out (no NUL).
void format_imf(time_t t, char* out) noexcept {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];  // room for any int (-Wformat-truncation); a date is 29
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday], tm.tm_mday,
                kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  std::memcpy(out, buf, kImfLen);
}

struct DateLine {
  time_t second = -1;
  char line[6 + kImfLen + 2] = {'D', 'a', 't', 'e', ':', ' '};  // "Date: " + date + "\r\n"
};
thread_local DateLine t_date;
}  // namespace

std::string format_http_date(time_t t) {
  char buf[kImfLen];
  format_imf(t, buf);
  return std::string(buf, kImfLen);
}

std::optional<time_t> parse_http_date(std::string_view s) {
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  // "Sun, 06 Nov 1994 08:49:37 GMT"
  if (s.size() != kImfLen || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
      s[19] != ':' || s[22] != ':' || s.substr(25) != " GMT")
    return std::nullopt;
  auto num = [&](size_t pos, size_t len, int& out) {  // digits only: from_chars takes a '-'
    if (s[pos] < '0' || s[pos] > '9') return false;
    auto r = std::from_chars(s.data() + pos, s.data() + pos + len, out);
    return r.ec == std::errc() && r.ptr == s.data() + pos + len;
  };
  struct tm tm {};
  int year;
  size_t m = kMonths.find(s.substr(8, 3));
  if (m == std::string_view::npos || m % 3 != 0) return std::nullopt;
  if (!num(5, 2, tm.tm_mday) || !num(12, 4, year) || !num(17, 2, tm.tm_hour) || !num(20, 2, tm.tm_min) ||
      !num(23, 2, tm.tm_sec))
    return std::nullopt;
  tm.tm_mon = static_cast<int>(m / 3);
  tm.tm_year = year - 1900;
  // A date that is not one ("31 Feb", hour 24, minute 60) is not a date: timegm would roll it
  // over into a later one (RFC 9110 13.1.3: an invalid If-Modified-Since is ignored). A leap
  // second (:60) is taken as the second after :59.
  const bool leap = tm.tm_sec == 60;
  if (leap) tm.tm_sec = 59;
  const struct tm want = tm;
  const time_t t = timegm(&tm);
  if (tm.tm_mday != want.tm_mday || tm.tm_mon != want.tm_mon || tm.tm_year != want.tm_year ||
      tm.tm_hour != want.tm_hour || tm.tm_min != want.tm_min || tm.tm_sec != want.tm_sec)
    return std::nullopt;
  return leap ? t + 1 : t;
}

std::string_view date_line() noexcept {
  DateLine& c = t_date;
  time_t t = ::time(nullptr);  // vDSO: no system call
  if (t != c.second) {
    format_imf(t, c.line + 6);
    c.line[6 + kImfLen] = '\r';
    c.line[6 + kImfLen + 1] = '\n';
    c.second = t;
  }
  return {c.line, 6 + kImfLen + 2};
}
}  // namespace lionet::http
