// lionet/config/traits.cc: the non-template scalar parsers behind ConfigTraits.
// They are strict on purpose: "12abc", "1.5" for an int, "-1" for an unsigned and a mapping
// where a scalar belongs are errors, never silently truncated or defaulted.
#include "lionet/config/traits.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace lionet::config {

ConversionError::ConversionError(const YAML::Mark& mark, std::string reason)
    : std::runtime_error(reason), mark_(mark), reason_(std::move(reason)) {}

void ConversionError::prepend_path(std::string_view segment) { path_.insert(0, segment); }

void conversion_error(const YAML::Node& node, std::string reason) {
  throw ConversionError(node.IsDefined() ? node.Mark() : YAML::Mark::null_mark(), std::move(reason));
}

namespace detail {
namespace {
const char* kind_of(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Map: return "a mapping";
    default: return "a scalar";
  }
}

const std::string& scalar_or_throw(const YAML::Node& n, const char* expected) {
  if (!n.IsDefined() || !n.IsScalar()) conversion_error(n, std::string("expected ") + expected + ", got " + kind_of(n));
  return n.Scalar();
}

[[noreturn]] void bad_scalar(const YAML::Node& n, const std::string& expected) {
  conversion_error(n, "expected " + expected + ", got '" + n.Scalar() + "'");
}

// Integer text: decimal, 0x hex, 0o/0 octal are what YAML 1.2 allows; we take decimal and
// 0x hex (the forms people write), plus '_' separators are not accepted to stay unambiguous.
bool parse_u64(std::string_view s, uint64_t& out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

int64_t parse_signed(const YAML::Node& n, int64_t min, int64_t max) {
  const std::string& s = scalar_or_throw(n, "an integer");
  std::string_view v = s;
  bool neg = false;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  uint64_t mag = 0;
  // Not a number at all: just that (the type's own range, e.g. [-2147483648, 2147483647], is
  // not the key's documented one, which the key's validator reports for numbers).
  if (!parse_u64(v, mag)) bad_scalar(n, "an integer");
  std::string range = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (neg) {
    if (mag > static_cast<uint64_t>(max) + 1 || -static_cast<__int128>(mag) < min) bad_scalar(n, range);
    return static_cast<int64_t>(-static_cast<__int128>(mag));
  }
  if (mag > static_cast<uint64_t>(max)) bad_scalar(n, range);
  return static_cast<int64_t>(mag);
}

uint64_t parse_unsigned(const YAML::Node& n, uint64_t max) {
  const std::string& s = scalar_or_throw(n, "a non-negative integer");
  std::string_view v = s;
  if (!v.empty() && v[0] == '+') v.remove_prefix(1);
  uint64_t out = 0;
  if (!parse_u64(v, out)) bad_scalar(n, "a non-negative integer");
  if (out > max) bad_scalar(n, "an integer in [0, " + std::to_string(max) + "]");
  return out;
}

double parse_double(const YAML::Node& n) {
  const std::string& s = scalar_or_throw(n, "a number");
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == ".inf" || lower == "+.inf") return HUGE_VAL;
  if (lower == "-.inf") return -HUGE_VAL;
  if (lower == ".nan") return std::nan("");
  errno = 0;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) bad_scalar(n, "a number");
  return d;
}

bool parse_bool(const YAML::Node& n) {
  const std::string& s = scalar_or_throw(n, "a boolean");
  std::string v = s;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
  if (v == "false" || v == "no" || v == "off" || v == "0") return false;
  bad_scalar(n, "a boolean (true/false, yes/no, on/off)");
}

std::string parse_string(const YAML::Node& n) {
  if (n.IsDefined() && n.IsNull()) return std::string();
  return scalar_or_throw(n, "a string");
}

int64_t parse_duration_ns(const YAML::Node& n, int64_t unit_ns, const char* unit_name) {
  const std::string& s = scalar_or_throw(n, "a duration");
  std::string expected =
      std::string("a duration (a whole number of ") + unit_name + ", or a number with a unit: ns, us, ms, s, m, h)";
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '-' || s[i] == '+'))
    ++i;
  std::string number = s.substr(0, i);
  std::string suffix = s.substr(i);
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
  long double mult;
  if (suffix.empty()) mult = static_cast<long double>(unit_ns);
  else if (suffix == "ns") mult = 1;
  else if (suffix == "us") mult = 1e3L;
  else if (suffix == "ms") mult = 1e6L;
  else if (suffix == "s") mult = 1e9L;
  else if (suffix == "m" || suffix == "min") mult = 60e9L;
  else if (suffix == "h") mult = 3600e9L;
  else bad_scalar(n, expected);
  char* end = nullptr;
  long double v = number.empty() ? 0 : std::strtold(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size()) bad_scalar(n, expected);
  long double ns = v * mult;
  if (!(std::fabs(ns) < 9.2e18L)) bad_scalar(n, expected);
  long double units = ns / static_cast<long double>(unit_ns);
  if (units != std::floor(units)) {
    conversion_error(n, std::string("'") + s + "' is not a whole number of " + unit_name);
  }
  return static_cast<int64_t>(std::llround(ns));
}

std::string format_duration(int64_t count, int64_t unit_ns) {
  switch (unit_ns) {
    case 1: return std::to_string(count) + "ns";
    case 1000: return std::to_string(count) + "us";
    case 1000000: return std::to_string(count) + "ms";
    case 1000000000: return std::to_string(count) + "s";
    case 60000000000: return std::to_string(count) + "m";
    case 3600000000000: return std::to_string(count) + "h";
    default: return std::to_string(count * unit_ns) + "ns";
  }
}

void expect_sequence(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsSequence()) conversion_error(n, std::string("expected a sequence, got ") + kind_of(n));
}

void expect_mapping(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsMap()) conversion_error(n, std::string("expected a mapping, got ") + kind_of(n));
}

void expect_keys(const YAML::Node& n, std::span<const std::string_view> allowed) {
  expect_mapping(n);
  for (const auto& kv : n) {
    std::string key = parse_string(kv.first);
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string list;
    for (auto a : allowed) {
      if (!list.empty()) list += ", ";
      list += a;
    }
    conversion_error(kv.first, "unknown field '" + key + "' (expected one of: " + list + ")");
  }
}
}  // namespace detail

void expect_keys(const YAML::Node& n, std::initializer_list<std::string_view> allowed) {
  detail::expect_keys(n, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}
void field_error(const YAML::Node& n, const char* field, std::string reason) {
  const YAML::Node f = n[field];
  ConversionError e(f ? f.Mark() : n.Mark(), std::move(reason));
  e.prepend_path(std::string(".") + field);
  throw e;
}

}  // namespace lionet::config
