// libFuzzer target for what a static-file answer reads from a client's request (lionet/http/
// detail/static_conditional.cc and http/date.h): Range (parse_range), If-None-Match
// (etag_matches), Accept-Encoding (accepts_encoding) and If-Modified-Since (parse_http_date).
// The input's first 8 bytes give the file size, the rest is the field value. Checks:
//   - parse_range: kOk only for a non-empty range inside the file (off < size, len >= 1,
//     off + len <= size, no wrap-around); "first-last" and "first-" that start inside a
//     non-empty file (numbers of up to 19 digits, its limit) are satisfied as RFC 9110 14.1.2
//     says; the same verdict and range with "bytes=" in another case and with spaces around.
//   - etag_matches, for an ETag as the server makes them: "*" alone and the ETag itself always
//     match; appending ", <etag>" or ",W/<etag>" to any list makes it match; a list without '*'
//     that does not contain the ETag's bytes never matches.
//   - accepts_encoding: a coding named with q=0 alone is refused, "gzip" alone is accepted.
//   - parse_http_date: a date it returns formats back to the same text (the day name aside; a
//     leap second as the next second), which parses to the same time: nothing rolled over.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "lionet/http/date.h"
#include "lionet/http/detail/static_files.h"

namespace {
using lionet::http::detail::accepts_encoding;
using lionet::http::detail::etag_matches;
using lionet::http::detail::parse_range;
using lionet::http::detail::RangeResult;

void check_range(std::string_view value, uint64_t size) {
  uint64_t off = 0, len = 0;
  const RangeResult r = parse_range(value, size, off, len);
  if (r == RangeResult::kOk) {
    if (len == 0 || off >= size || len > size - off) std::abort();  // inside, non-empty
  }
  // The unit name is case-insensitive and optional whitespace around the value is ignored.
  if (value.size() >= 6 && std::string_view(value.substr(0, 6)) == "bytes=") {
    std::string upper = "BYTES=" + std::string(value.substr(6));
    uint64_t off2 = 0, len2 = 0;
    if (parse_range(upper, size, off2, len2) != r) std::abort();
    if (r == RangeResult::kOk && (off2 != off || len2 != len)) std::abort();
    std::string spaced = " \t" + std::string(value) + " ";
    if (parse_range(spaced, size, off2, len2) != r) std::abort();
    if (r == RangeResult::kOk && (off2 != off || len2 != len)) std::abort();
  }
}

void check_plain_ranges(uint64_t size, uint64_t a, uint64_t b) {
  // "bytes=a-" and "bytes=a-b" (a <= b) with a inside a non-empty file are satisfiable.
  if (size == 0) return;
  a %= size;
  constexpr uint64_t kMaxDigits19 = 9'999'999'999'999'999'999ull;  // parse_range reads at most 19 digits
  if (a > kMaxDigits19) a %= kMaxDigits19;
  if (b > kMaxDigits19) b %= kMaxDigits19;
  uint64_t off = 0, len = 0;
  std::string open = "bytes=" + std::to_string(a) + "-";
  if (parse_range(open, size, off, len) != RangeResult::kOk || off != a || len != size - a) std::abort();
  if (b < a) std::swap(a, b);
  std::string closed = "bytes=" + std::to_string(a) + "-" + std::to_string(b);
  if (a < size) {
    if (parse_range(closed, size, off, len) != RangeResult::kOk || off != a) std::abort();
    const uint64_t last = b >= size ? size - 1 : b;
    if (len != last - a + 1) std::abort();
  }
}

// The ETag is one the server makes ("<hex>-<hex>" in quotes: no comma, space or "W/"); the list
// is whatever the client sent.
bool our_etag(std::string_view etag) {
  if (etag.size() < 3 || etag.front() != '"' || etag.back() != '"') return false;
  for (char c : etag.substr(1, etag.size() - 2))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-')) return false;
  return true;
}

void check_etag(std::string_view list, std::string_view etag) {
  if (!etag_matches("*", etag) || !etag_matches(etag, etag)) std::abort();
  if (!etag_matches(std::string(list) + ", " + std::string(etag), etag)) std::abort();
  if (!etag_matches(std::string(list) + ",W/" + std::string(etag), etag)) std::abort();  // weak comparison
  if (list.find('*') == std::string_view::npos && list.find(etag) == std::string_view::npos && etag_matches(list, etag))
    std::abort();
}

void check_date(std::string_view value) {
  if (auto t = lionet::http::parse_http_date(value)) {
    const std::string again = lionet::http::format_http_date(*t);
    if (again.size() != 29) std::abort();
    auto t2 = lionet::http::parse_http_date(again);
    if (!t2 || *t2 != *t) std::abort();
    // No roll-over: the date read is the date written (the day name aside), but for a leap
    // second, read as the next second.
    if (value.substr(23, 2) != "60" && again.substr(4) != value.substr(4)) std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16) return 0;
  uint64_t file_size = 0, extra = 0;
  std::memcpy(&file_size, data, 8);
  std::memcpy(&extra, data + 8, 8);
  // Mostly small sizes (where clamping happens), sometimes any 64-bit value.
  if (!(file_size & 1)) file_size = (file_size >> 1) % 100000;
  const std::string_view value(reinterpret_cast<const char*>(data) + 16, size - 16);

  check_range(value, file_size);
  check_plain_ranges(file_size, extra, extra >> 17);

  // If-None-Match: the value split into a list and an ETag at its first '|'.
  const size_t bar = value.find('|');
  if (bar != std::string_view::npos && our_etag(value.substr(bar + 1)))
    check_etag(value.substr(0, bar), value.substr(bar + 1));
  else check_etag(value.substr(0, bar), "\"400-18ec9974eb5c0f35\"");

  // Accept-Encoding: never crashes; the fixed cases hold whatever the value.
  (void)accepts_encoding(value, "gzip");
  (void)accepts_encoding(value, "br");
  if (accepts_encoding("gzip;q=0", "gzip") || !accepts_encoding("gzip", "gzip")) std::abort();

  check_date(value);
  return 0;
}
