// lionet/config/validator.h: validators for ConfigVar<T>.
//
// A validator is any callable `std::optional<std::string>(const T&)`: nullopt accepts the
// value, a string rejects it and says why ("must be in [1, 1024]"). The registry puts the
// file, line, column and key in front of that reason. Helpers:
//   config::range(lo, hi)                 lo <= v <= hi (any arithmetic or duration T)
//   config::at_least(lo) / at_most(hi)
//   config::one_of({"epoll", "io_uring"}) v equals one of the listed values
//   config::check(pred, "must be a power of two")  an arbitrary predicate and its message
//   config::all(v1, v2, ...)              every validator in turn, first rejection wins
// Must not: depend on yaml-cpp or the registry.
#pragma once

#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace lionet::config {

template <class T>
using Validator = std::function<std::optional<std::string>(const T&)>;

namespace detail {
template <class T>
std::string to_text(const T& v) {
  if constexpr (requires(std::ostream & os) { os << v; }) {
    std::ostringstream os;
    os << v;
    return os.str();
  } else if constexpr (requires { v.count(); }) {
    return std::to_string(v.count());
  } else {
    return "?";
  }
}
}  // namespace detail

template <class L, class H>
struct Range {
  L lo;
  H hi;
  template <class T>
  std::optional<std::string> operator()(const T& v) const {
    if (v < lo || hi < v) {
      return "must be in [" + detail::to_text(lo) + ", " + detail::to_text(hi) + "], got " + detail::to_text(v);
    }
    return std::nullopt;
  }
};
template <class L, class H>
Range<L, H> range(L lo, H hi) {
  return {lo, hi};
}

template <class L>
struct AtLeast {
  L lo;
  template <class T>
  std::optional<std::string> operator()(const T& v) const {
    if (v < lo) return "must be >= " + detail::to_text(lo) + ", got " + detail::to_text(v);
    return std::nullopt;
  }
};
template <class L>
AtLeast<L> at_least(L lo) {
  return {lo};
}

template <class H>
struct AtMost {
  H hi;
  template <class T>
  std::optional<std::string> operator()(const T& v) const {
    if (hi < v) return "must be <= " + detail::to_text(hi) + ", got " + detail::to_text(v);
    return std::nullopt;
  }
};
template <class H>
AtMost<H> at_most(H hi) {
  return {hi};
}

template <class V>
struct OneOf {
  std::vector<V> allowed;
  template <class T>
  std::optional<std::string> operator()(const T& v) const {
    for (const auto& a : allowed) {
      if (a == v) return std::nullopt;
    }
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + detail::to_text(a);
    return "must be one of [" + list + "], got " + detail::to_text(v);
  }
};
inline OneOf<std::string> one_of(std::initializer_list<const char*> allowed) {
  return {std::vector<std::string>(allowed.begin(), allowed.end())};
}
template <class V>
OneOf<V> one_of(std::initializer_list<V> allowed) {
  return {std::vector<V>(allowed)};
}

template <class P>
struct Check {
  P pred;
  std::string message;
  template <class T>
  std::optional<std::string> operator()(const T& v) const {
    if (pred(v)) return std::nullopt;
    return message;
  }
};
template <class P>
Check<P> check(P pred, std::string message) {
  return {std::move(pred), std::move(message)};
}

template <class... Vs>
struct All {
  std::tuple<Vs...> vs;
  template <class T>
  std::optional<std::string> operator()(const T& v) const {
    std::optional<std::string> err;
    std::apply([&](const auto&... each) { ((err ? void() : void(err = each(v))), ...); }, vs);
    return err;
  }
};
template <class... Vs>
All<Vs...> all(Vs... vs) {
  return {std::tuple<Vs...>(std::move(vs)...)};
}
}  // namespace lionet::config
