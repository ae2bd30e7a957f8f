// lionet/http/detail/date_cache.cc: date_line() (see date_cache.h). Formats by hand: strftime's
// %a/%b follow the locale, and HTTP needs the English names whatever the process locale is.
#include "lionet/http/detail/date_cache.h"

#include <time.h>

#include <cstdio>

namespace lionet::http::detail {
namespace {
struct DateCache {
  time_t second = -1;
  char line[48];
  int len = 0;
};
thread_local DateCache t_date;
}  // namespace

std::string_view date_line() noexcept {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  DateCache& c = t_date;
  time_t t = ::time(nullptr);  // vDSO: no system call
  if (t != c.second) {
    struct tm tm;
    gmtime_r(&t, &tm);
    c.len = std::snprintf(c.line, sizeof c.line, "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", kDays[tm.tm_wday],
                          tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    c.second = t;
  }
  return {c.line, static_cast<size_t>(c.len)};
}
}  // namespace lionet::http::detail
