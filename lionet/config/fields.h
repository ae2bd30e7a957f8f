// lionet/config/fields.h: a struct's YAML fields listed ONCE, for its ConfigTraits.
//
// Owns: Field<S> (a key and a pointer to a member of S, or a nested section), Fields<S> (an
// ordered list of them: read from a mapping, written to one) and expect_keys() over one or more
// lists. Must not: validate values (the trait does that after reading) or know about ConfigVar
// or the registry.
//
// Without it a struct's keys are written three times (expect_keys, read_field, n["key"] = ...);
// with it the list is the only place, and the trait keeps only its checks:
//
//   const config::Fields<Endpoint> kEndpointFields = {
//       {"host", &Endpoint::host},                      // optional: absent keeps the default
//       {"port", &Endpoint::port, config::kRequired},   // absent: "missing required field 'port'"
//       {"tags", &Endpoint::tags, config::kOmitEmpty},  // not written while empty
//   };
//   Endpoint ConfigTraits<Endpoint>::from_yaml(const YAML::Node& n) {
//     Endpoint e = kEndpointFields.decode(n);  // unknown key -> error at its line, naming it
//     if (e.port < 1 || e.port > 65535) conversion_error(n["port"], "must be in 1..65535");
//     return e;
//   }
//   YAML::Node ConfigTraits<Endpoint>::to_yaml(const Endpoint& e) { return kEndpointFields.encode(e); }
//
// Reading is read_field()/required_field() per entry (errors get ".key" in their path, as
// before). Writing goes in list order, so the list's order is the dump's; an empty std::optional
// member is not written at all. A struct whose keys depend on another field (a route's type)
// splits them into several lists: expect_keys(n, a, b, ...) accepts the keys of all of them,
// Fields::read() reads one without the key check, and the trait writes the lists that apply.
// A section entry {"flush", kFlushFields} reads the nested mapping `flush:` into members of
// the same struct (errors get ".flush.key") and writes it only when it has a key to show.
//
// A list is built at start-up, not at compile time: make it a namespace-scope const in the .cc
// that defines the trait, and do not decode such a struct from another file's static
// initialiser. A section entry points to its list, which must outlive it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lionet/config/traits.h"

namespace lionet::config {

// A field's options, or'ed together (kRequired | kOmitEmpty is allowed).
inline constexpr unsigned kOptional = 0;  // absent: the member keeps its default
inline constexpr unsigned kRequired = 1;  // absent: "missing required field '<key>'"
inline constexpr unsigned kOmitEmpty = 2;  // written only when !empty() (strings, containers)

template <class S>
class Fields;

namespace detail {
template <class T>
inline constexpr bool kIsOptional = false;
template <class T>
inline constexpr bool kIsOptional<std::optional<T>> = true;
}  // namespace detail

template <class S>
class Field {
 public:
  // A member read and written through ConfigTraits<T>.
  template <class T>
  Field(const char* key, T S::*member, unsigned options = kOptional)
      : key_(key),
        options_(options),
        member_(reinterpret_cast<Erased>(member)),
        read_(&read_member<T>),
        write_(&write_member<T>) {}
  // A nested mapping `key:` whose keys are other members of S.
  Field(const char* key, const Fields<S>& section)
      : key_(key), section_(&section), read_(&read_section), write_(&write_section) {}
  Field(const char* key, const Fields<S>&& section) = delete;  // the list must outlive this one

  const char* key() const { return key_; }
  void read(const YAML::Node& n, S& s) const { read_(*this, n, s); }
  void write(YAML::Node& n, const S& s) const { write_(*this, n, s); }

 private:
  // Any pointer to a data member converts to another and back unchanged (reinterpret_cast
  // between pointers to data members, [expr.reinterpret.cast]); char aligns least.
  using Erased = char S::*;

  template <class T>
  static void read_member(const Field& f, const YAML::Node& n, S& s) {
    T& out = s.*reinterpret_cast<T S::*>(f.member_);
    if (f.options_ & kRequired) {
      out = required_field<T>(n, f.key_);
    } else {
      read_field(n, f.key_, out);
    }
  }
  template <class T>
  static void write_member(const Field& f, YAML::Node& n, const S& s) {
    const T& v = s.*reinterpret_cast<T S::*>(f.member_);
    if constexpr (detail::kIsOptional<T>) {
      if (v) n[f.key_] = encode(*v);
    } else {
      if constexpr (requires { v.empty(); }) {
        if ((f.options_ & kOmitEmpty) && v.empty()) return;
      }
      n[f.key_] = encode(v);
    }
  }
  static void read_section(const Field& f, const YAML::Node& n, S& s) {
    detail::expect_mapping(n);
    const YAML::Node sub = n[f.key_];
    if (!sub.IsDefined()) return;
    try {
      expect_keys(sub, *f.section_);
      f.section_->read(sub, s);
    } catch (ConversionError& e) {
      e.prepend_path(std::string(".") + f.key_);
      throw;
    }
  }
  static void write_section(const Field& f, YAML::Node& n, const S& s) {
    YAML::Node sub(YAML::NodeType::Map);
    f.section_->write(sub, s);
    if (sub.size() != 0) n[f.key_] = sub;
  }

  const char* key_;
  unsigned options_ = kOptional;
  Erased member_ = nullptr;
  const Fields<S>* section_ = nullptr;
  void (*read_)(const Field&, const YAML::Node&, S&);
  void (*write_)(const Field&, YAML::Node&, const S&);
};

template <class S>
class Fields {
 public:
  Fields(std::initializer_list<Field<S>> fields) : fields_(fields) {}

  // Reads every field present in mapping n into s; n's other keys are not checked.
  void read(const YAML::Node& n, S& s) const {
    for (const Field<S>& f : fields_) f.read(n, s);
  }
  // expect_keys(n, *this), then every field into a default S.
  S decode(const YAML::Node& n) const {
    expect_keys(n, *this);
    S s{};
    read(n, s);
    return s;
  }
  // Writes every field into mapping n, in list order.
  void write(YAML::Node& n, const S& s) const {
    for (const Field<S>& f : fields_) f.write(n, s);
  }
  // A new mapping with every field ({} when none is written).
  YAML::Node encode(const S& s) const {
    YAML::Node n(YAML::NodeType::Map);
    write(n, s);
    return n;
  }

  auto begin() const { return fields_.begin(); }
  auto end() const { return fields_.end(); }

 private:
  std::vector<Field<S>> fields_;
};

// Throws unless n is a mapping whose keys are all keys of the lists (the error points at the
// first unknown key and lists the allowed ones, in list order).
template <class... S>
void expect_keys(const YAML::Node& n, const Fields<S>&... lists) {
  std::vector<std::string_view> keys;
  auto add = [&keys](const auto& list) {
    for (const auto& f : list) keys.push_back(f.key());
  };
  (add(lists), ...);
  detail::expect_keys(n, keys);
}
}  // namespace lionet::config
