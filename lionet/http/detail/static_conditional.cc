// lionet/http/detail/static_conditional.cc: StaticFiles' conditional-request parsers (declared
// in detail/static_files.h): If-None-Match against an ETag (etag_matches), a single byte Range
// (parse_range) and Accept-Encoding's choice of a precompressed sibling (accepts_encoding,
// q-values). Owns no state: respond() in http/static_files.cc applies them (304, 206/416,
// Content-Encoding); the ETag and Last-Modified strings are made with the cache entry
// (http/static_cache.cc). Here, not in http/, as it implements only a detail/ header.
#include <algorithm>
#include <charconv>
#include <optional>

#include "lionet/http/detail/static_files.h"
#include "lionet/http/headers.h"

namespace lionet::http::detail {

bool etag_matches(std::string_view list, std::string_view etag) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = trim_ows(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item == "*") return true;
    if (item.size() > 2 && (item[0] == 'W' || item[0] == 'w') && item[1] == '/') item.remove_prefix(2);
    if (item == etag) return true;
  }
  return false;
}

RangeResult parse_range(std::string_view h, uint64_t size, uint64_t& off, uint64_t& len) {
  h = trim_ows(h);
  if (h.size() < 6 || !iequals(h.substr(0, 6), "bytes=")) return RangeResult::kNone;
  std::string_view spec = trim_ows(h.substr(6));
  if (spec.empty() || spec.find(',') != std::string_view::npos) return RangeResult::kNone;
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return RangeResult::kNone;
  std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
  auto parse = [](std::string_view t, uint64_t& v) {
    if (t.empty() || t.size() > 19) return false;
    auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
  };
  uint64_t first = 0, last = 0;
  if (a.empty()) {  // suffix: the last n bytes
    if (!parse(b, last)) return RangeResult::kNone;
    if (last == 0 || size == 0) return RangeResult::kUnsatisfiable;
    len = std::min(last, size);
    off = size - len;
    return RangeResult::kOk;
  }
  if (!parse(a, first)) return RangeResult::kNone;
  if (b.empty()) {
    last = size ? size - 1 : 0;
  } else {
    if (!parse(b, last) || last < first) return RangeResult::kNone;
    if (size && last >= size) last = size - 1;
  }
  if (first >= size) return RangeResult::kUnsatisfiable;
  off = first;
  len = last - first + 1;
  return RangeResult::kOk;
}

namespace {

// A qvalue ("1", "0.5", "0.000") is above zero; a malformed one counts as zero.
bool qvalue_positive(std::string_view v) {
  v = trim_ows(v);
  if (v.empty() || v.size() > 5 || (v[0] != '0' && v[0] != '1')) return false;
  if (v.size() > 1 && v[1] != '.') return false;
  for (size_t i = 2; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return false;
  if (v[0] == '1') return true;
  return v.find_first_of("123456789", 2) != std::string_view::npos;
}

}  // namespace

bool accepts_encoding(std::string_view header, std::string_view coding) {
  std::optional<bool> star;
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    size_t semi = item.find(';');
    std::string_view name = trim_ows(item.substr(0, semi));
    bool positive = true;
    while (semi != std::string_view::npos) {
      item.remove_prefix(semi + 1);
      semi = item.find(';');
      std::string_view param = trim_ows(item.substr(0, semi));
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=')
        positive = qvalue_positive(param.substr(2));
    }
    if (iequals(name, coding) || (coding == "gzip" && iequals(name, "x-gzip"))) return positive;
    if (name == "*") star = positive;
  }
  return star.value_or(false);
}

}  // namespace lionet::http::detail
