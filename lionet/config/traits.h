// lionet/config/traits.h: the ONE conversion trait between YAML and C++ values.
//
// Owns: ConfigTraits<T> (from_yaml / to_yaml) for bool, integers, floating point, std::string,
// std::chrono durations, std::optional, std::vector/list/set/unordered_set and
// std::map/unordered_map with std::string keys, nested arbitrarily; ConversionError; the
// helpers decode()/encode() and read_field()/expect_keys() for user structs, and
// LIONET_DECLARE_CONFIG_TRAITS to declare a trait defined in a .cc.
// Must not: know about ConfigVar or the registry (they sit on top of this file).
//
// A user type becomes configurable by specialising the trait once. A struct lists its fields
// once with config::Fields (fields.h), which does the key check, the reads and the writes
// below from that one list; by hand it reads:
//
//   template <> struct lionet::config::ConfigTraits<Endpoint> {
//     static Endpoint from_yaml(const YAML::Node& n) {
//       config::expect_keys(n, {"host", "port"});      // unknown field -> error at its line
//       Endpoint e;
//       config::read_field(n, "host", e.host);          // optional: keeps the default
//       e.port = config::required_field<int>(n, "port");
//       return e;
//     }
//     static YAML::Node to_yaml(const Endpoint& e) {
//       YAML::Node n; n["host"] = e.host; n["port"] = e.port; return n;
//     }
//   };
//
// from_yaml reports a bad value by throwing ConversionError (conversion_error(node, msg) does
// it with the node's position); any other exception is wrapped with the node's position.
// Durations accept an integer in the duration's own unit or a number with a suffix
// (ns, us, ms, s, m, h; e.g. "250ms", "1.5s"); a value that is not a whole number of the
// target unit is rejected.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <optional>
#include <ratio>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace lionet::config {

// A value that does not fit its type. mark() is the offending node's position (0-based, as
// yaml-cpp gives it); path() is the part below the config var (e.g. "[2].port") built up by
// the containers on the way out.
class ConversionError : public std::runtime_error {
 public:
  ConversionError(const YAML::Mark& mark, std::string reason);
  const YAML::Mark& mark() const noexcept { return mark_; }
  const std::string& path() const noexcept { return path_; }
  const std::string& reason() const noexcept { return reason_; }
  void prepend_path(std::string_view segment);

 private:
  YAML::Mark mark_;
  std::string path_;
  std::string reason_;
};

[[noreturn]] void conversion_error(const YAML::Node& node, std::string reason);
// A bad value in a struct's field: the error points at the field's line (or the struct's, when
// the field is absent) and names it in the key path (".field"), as container elements are named.
[[noreturn]] void field_error(const YAML::Node& n, const char* field, std::string reason);

// Primary template: deliberately undefined. "incomplete type ConfigTraits<X>" means X needs a
// specialisation (see the top of this file).
template <class T, class Enable = void>
struct ConfigTraits;

namespace detail {
// Non-template scalar parsers (traits.cc): each throws ConversionError naming what it expected.
int64_t parse_signed(const YAML::Node& n, int64_t min, int64_t max);
uint64_t parse_unsigned(const YAML::Node& n, uint64_t max);
double parse_double(const YAML::Node& n);
bool parse_bool(const YAML::Node& n);
std::string parse_string(const YAML::Node& n);
// Returns nanoseconds; a bare number is in units of unit_ns nanoseconds.
int64_t parse_duration_ns(const YAML::Node& n, int64_t unit_ns, const char* unit_name);
std::string format_duration(int64_t count, int64_t unit_ns);
void expect_sequence(const YAML::Node& n);
void expect_mapping(const YAML::Node& n);
// expect_keys() with the allowed keys in a span (fields.h gathers them from its lists).
void expect_keys(const YAML::Node& n, std::span<const std::string_view> allowed);
}  // namespace detail

// Decodes n as T, wrapping any non-ConversionError exception with n's position.
template <class T>
T decode(const YAML::Node& n) {
  try {
    return ConfigTraits<T>::from_yaml(n);
  } catch (const ConversionError&) {
    throw;
  } catch (const YAML::Exception& e) {
    throw ConversionError(e.mark.is_null() ? n.Mark() : e.mark, e.msg);
  } catch (const std::exception& e) {
    throw ConversionError(n.Mark(), e.what());
  }
}

template <class T>
YAML::Node encode(const T& v) {
  return ConfigTraits<T>::to_yaml(v);
}

// ---- scalars ----
template <>
struct ConfigTraits<bool> {
  static bool from_yaml(const YAML::Node& n) { return detail::parse_bool(n); }
  static YAML::Node to_yaml(bool v) { return YAML::Node(v); }
};

template <class T>
struct ConfigTraits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static T from_yaml(const YAML::Node& n) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(detail::parse_signed(n, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    } else {
      return static_cast<T>(detail::parse_unsigned(n, std::numeric_limits<T>::max()));
    }
  }
  static YAML::Node to_yaml(T v) {
    // Through int64/uint64 so that char-sized integers print as numbers.
    if constexpr (std::is_signed_v<T>) return YAML::Node(static_cast<int64_t>(v));
    else return YAML::Node(static_cast<uint64_t>(v));
  }
};

template <class T>
struct ConfigTraits<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static T from_yaml(const YAML::Node& n) { return static_cast<T>(detail::parse_double(n)); }
  static YAML::Node to_yaml(T v) { return YAML::Node(static_cast<double>(v)); }
};

template <>
struct ConfigTraits<std::string> {
  static std::string from_yaml(const YAML::Node& n) { return detail::parse_string(n); }
  static YAML::Node to_yaml(const std::string& v) { return YAML::Node(v); }
};

template <class Rep, class Period>
struct ConfigTraits<std::chrono::duration<Rep, Period>> {
  using D = std::chrono::duration<Rep, Period>;
  static constexpr int64_t kUnitNs = std::chrono::duration_cast<std::chrono::nanoseconds>(D(1)).count();
  static_assert(kUnitNs >= 1, "durations finer than a nanosecond are not supported");
  static D from_yaml(const YAML::Node& n) {
    return D(static_cast<Rep>(detail::parse_duration_ns(n, kUnitNs, unit_name()) / kUnitNs));
  }
  static YAML::Node to_yaml(const D& d) {
    return YAML::Node(detail::format_duration(static_cast<int64_t>(d.count()), kUnitNs));
  }
  static const char* unit_name() {
    switch (kUnitNs) {
      case 1: return "nanoseconds";
      case 1000: return "microseconds";
      case 1000000: return "milliseconds";
      case 1000000000: return "seconds";
      case 60000000000: return "minutes";
      case 3600000000000: return "hours";
      default: return "units";
    }
  }
};

template <class T>
struct ConfigTraits<std::optional<T>> {
  static std::optional<T> from_yaml(const YAML::Node& n) {
    if (!n.IsDefined() || n.IsNull()) return std::nullopt;
    return decode<T>(n);
  }
  static YAML::Node to_yaml(const std::optional<T>& v) { return v ? encode(*v) : YAML::Node(YAML::NodeType::Null); }
};

// ---- containers ----
namespace detail {
template <class C>
C decode_sequence(const YAML::Node& n) {
  expect_sequence(n);
  C out;
  std::size_t i = 0;
  for (const auto& item : n) {
    try {
      out.insert(out.end(), decode<typename C::value_type>(item));
    } catch (ConversionError& e) {
      e.prepend_path("[" + std::to_string(i) + "]");
      throw;
    }
    ++i;
  }
  return out;
}
template <class C>
YAML::Node encode_sequence(const C& c) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& v : c) n.push_back(encode(v));
  return n;
}
template <class M>
M decode_map(const YAML::Node& n) {
  expect_mapping(n);
  M out;
  for (const auto& kv : n) {
    std::string key = parse_string(kv.first);
    try {
      out.insert_or_assign(key, decode<typename M::mapped_type>(kv.second));
    } catch (ConversionError& e) {
      e.prepend_path("." + key);
      throw;
    }
  }
  return out;
}
// Unordered containers are written in sorted order, so dumps are stable and diffable.
template <class M>
YAML::Node encode_map(const M& m) {
  YAML::Node n(YAML::NodeType::Map);
  std::vector<const typename M::value_type*> items;
  for (const auto& kv : m) items.push_back(&kv);
  std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (auto* kv : items) n[kv->first] = encode(kv->second);
  return n;
}
template <class S>
YAML::Node encode_unordered_set(const S& s) {
  if constexpr (std::totally_ordered<typename S::value_type>) {
    std::vector<typename S::value_type> sorted(s.begin(), s.end());
    std::sort(sorted.begin(), sorted.end());
    return encode_sequence(sorted);
  } else {
    return encode_sequence(s);
  }
}
}  // namespace detail

template <class T, class A>
struct ConfigTraits<std::vector<T, A>> {
  static std::vector<T, A> from_yaml(const YAML::Node& n) { return detail::decode_sequence<std::vector<T, A>>(n); }
  static YAML::Node to_yaml(const std::vector<T, A>& v) { return detail::encode_sequence(v); }
};
template <class T, class A>
struct ConfigTraits<std::list<T, A>> {
  static std::list<T, A> from_yaml(const YAML::Node& n) { return detail::decode_sequence<std::list<T, A>>(n); }
  static YAML::Node to_yaml(const std::list<T, A>& v) { return detail::encode_sequence(v); }
};
template <class T, class C, class A>
struct ConfigTraits<std::set<T, C, A>> {
  static std::set<T, C, A> from_yaml(const YAML::Node& n) { return detail::decode_sequence<std::set<T, C, A>>(n); }
  static YAML::Node to_yaml(const std::set<T, C, A>& v) { return detail::encode_sequence(v); }
};
template <class T, class H, class E, class A>
struct ConfigTraits<std::unordered_set<T, H, E, A>> {
  using S = std::unordered_set<T, H, E, A>;
  static S from_yaml(const YAML::Node& n) { return detail::decode_sequence<S>(n); }
  static YAML::Node to_yaml(const S& v) { return detail::encode_unordered_set(v); }
};
template <class V, class C, class A>
struct ConfigTraits<std::map<std::string, V, C, A>> {
  using M = std::map<std::string, V, C, A>;
  static M from_yaml(const YAML::Node& n) { return detail::decode_map<M>(n); }
  static YAML::Node to_yaml(const M& m) { return detail::encode_map(m); }
};
template <class V, class H, class E, class A>
struct ConfigTraits<std::unordered_map<std::string, V, H, E, A>> {
  using M = std::unordered_map<std::string, V, H, E, A>;
  static M from_yaml(const YAML::Node& n) { return detail::decode_map<M>(n); }
  static YAML::Node to_yaml(const M& m) { return detail::encode_map(m); }
};

// ---- helpers for user structs ----

// Throws unless n is a mapping whose keys are all in `allowed` (the error points at the
// first unknown key and lists the allowed ones).
void expect_keys(const YAML::Node& n, std::initializer_list<std::string_view> allowed);

// If mapping n has `key`, decodes it into out (errors get ".key" in their path); otherwise
// leaves out unchanged (its default).
template <class T>
void read_field(const YAML::Node& n, const char* key, T& out) {
  detail::expect_mapping(n);
  const YAML::Node v = n[key];
  if (!v.IsDefined()) return;
  try {
    out = decode<T>(v);
  } catch (ConversionError& e) {
    e.prepend_path(std::string(".") + key);
    throw;
  }
}

template <class T>
T required_field(const YAML::Node& n, const char* key) {
  detail::expect_mapping(n);
  if (!n[key].IsDefined()) conversion_error(n, std::string("missing required field '") + key + "'");
  T out{};
  read_field(n, key, out);
  return out;
}
}  // namespace lionet::config

// Declares ConfigTraits<Type> whose from_yaml/to_yaml a .cc defines. At global scope, in the
// header of Type: LIONET_DECLARE_CONFIG_TRAITS(lionet::app::TlsConfig);
#define LIONET_DECLARE_CONFIG_TRAITS(...)              \
  template <>                                          \
  struct lionet::config::ConfigTraits<__VA_ARGS__> {   \
    static __VA_ARGS__ from_yaml(const YAML::Node& n); \
    static YAML::Node to_yaml(const __VA_ARGS__& v);   \
  }
