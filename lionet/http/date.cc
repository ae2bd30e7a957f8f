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
  if (s.size() != kImfLen || s[3] != ',' || s.substr(26) != "GMT") return std::nullopt;
  auto num = [&](size_t pos, size_t len, int& out) {
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
  return timegm(&tm);
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
