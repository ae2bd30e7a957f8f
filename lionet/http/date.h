// lionet/http/date.h: HTTP dates (RFC 9110 5.6.7): IMF-fixdate formatted and parsed, and the
// "Date: ...\r\n" response line the HTTP/1 and HTTP/2 servers send, formatted at most once per
// second per thread. Locale independent: strftime's %a/%b follow the process locale.
#pragma once

#include <time.h>

#include <optional>
#include <string>
#include <string_view>

namespace lionet::http {

// "Sun, 06 Nov 1994 08:49:37 GMT" (always 29 characters).
std::string format_http_date(time_t t);
// IMF-fixdate only (what every client sends: RFC 9110 5.6.7 lets a recipient ignore the two
// obsolete forms), its separators and a real instant ("31 Feb", 24:00 and 08:60 are not; a
// leap second :60 is the second after :59); nullopt otherwise. The day name is not checked.
std::optional<time_t> parse_http_date(std::string_view s);
// "Date: <IMF-fixdate of now>\r\n". Valid until the calling thread's next call (a fiber must not
// hold it across a park).
std::string_view date_line() noexcept;

}  // namespace lionet::http
