// lionet/http/detail/date_cache.h: the "Date: <IMF-fixdate>\r\n" response line, formatted at
// most once per second per thread (RFC 9110 5.6.7). Internal to http/.
#pragma once

#include <string_view>

namespace lionet::http::detail {
// Valid until the calling thread's next call (a fiber must not hold it across a park).
std::string_view date_line() noexcept;
}  // namespace lionet::http::detail
