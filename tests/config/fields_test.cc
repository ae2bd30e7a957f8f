// tests/config/fields_test.cc: a struct whose YAML fields are listed once (config/fields.h)
// refuses unknown and missing keys with the key's path, keeps defaults for absent keys, writes
// what it reads (in list order, without empty optionals) and reads back what it wrote.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "lionet/config/fields.h"
#include "lionet/config/registry.h"
#include "tests/config/config_test_util.h"

namespace {
struct Backend {
  std::string host;
  int port = 80;
  std::optional<int> weight;
  std::vector<std::string> tags;
  // The section `retry: {count, backoff}`.
  std::optional<int> retry_count;
  std::optional<std::chrono::milliseconds> retry_backoff;
  bool operator==(const Backend&) const = default;
};

using lionet::config::Fields;
using lionet::config::kOmitEmpty;
using lionet::config::kRequired;

const Fields<Backend> kRetryFields = {
    {"count", &Backend::retry_count},
    {"backoff", &Backend::retry_backoff},
};
const Fields<Backend> kBackendFields = {
    {"host", &Backend::host, kRequired},  {"port", &Backend::port}, {"weight", &Backend::weight},
    {"tags", &Backend::tags, kOmitEmpty}, {"retry", kRetryFields},
};
}  // namespace

template <>
struct lionet::config::ConfigTraits<Backend> {
  static Backend from_yaml(const YAML::Node& n) {
    Backend b = kBackendFields.decode(n);
    if (b.port < 1 || b.port > 65535) conversion_error(n["port"], "must be in 1..65535");
    return b;
  }
  static YAML::Node to_yaml(const Backend& b) { return kBackendFields.encode(b); }
};

namespace lionet::config {
namespace {
using namespace std::chrono_literals;

using namespace lionet::config_test;

std::string dump(const YAML::Node& n) {
  YAML::Emitter out;
  out << n;
  return out.c_str();
}

TEST(ConfigFields, UnknownKeyIsRefusedAndNamed) {
  Registry r;
  auto backend = r.define<Backend>("t.backend", Backend{"a"}, "a struct with a field list");
  EXPECT_EQ(load_error(r, "t:\n  backend: {host: a, prot: 1}\n"),
            "bad.yml:2:22: key 't.backend': unknown field 'prot' (expected one of: host, port, weight, tags, retry)");
  EXPECT_EQ(load_error(r, "t:\n  backend: {host: a, retry: {count: 1, wait: 2s}}\n"),
            "bad.yml:2:40: key 't.backend.retry': unknown field 'wait' (expected one of: count, backoff)");
  EXPECT_EQ(backend->value(), Backend{"a"});
}

TEST(ConfigFields, MissingRequiredFieldIsRefused) {
  Registry r;
  r.define<Backend>("t.backend", Backend{"a"}, "a struct with a field list");
  EXPECT_EQ(load_error(r, "t:\n  backend: {port: 8080}\n"),
            "bad.yml:2:12: key 't.backend': missing required field 'host'");
}

TEST(ConfigFields, BadValueNamesItsFieldInTheKey) {
  Registry r;
  r.define<Backend>("t.backend", Backend{"a"}, "a struct with a field list");
  EXPECT_EQ(load_error(r, "t:\n  backend: {host: a, port: http}\n"),
            "bad.yml:2:28: key 't.backend.port': expected an integer, got 'http'");
  EXPECT_EQ(load_error(r, "t:\n  backend: {host: a, retry: {count: x}}\n"),
            "bad.yml:2:37: key 't.backend.retry.count': expected an integer, got 'x'");
  // The trait's own check runs on the values read.
  EXPECT_EQ(load_error(r, "t:\n  backend: {host: a, port: 0}\n"), "bad.yml:2:28: key 't.backend': must be in 1..65535");
}

TEST(ConfigFields, AbsentOptionalFieldsKeepTheirDefaults) {
  Registry r;
  auto backend = r.define<Backend>("t.backend", Backend{"a"}, "a struct with a field list");
  r.load_string("t:\n  backend: {host: b}\n", "ok.yml", kNoEnv);
  const Backend b = backend->value();
  EXPECT_EQ(b.host, "b");
  EXPECT_EQ(b.port, 80);
  EXPECT_EQ(b.weight, std::nullopt);
  EXPECT_TRUE(b.tags.empty());
  EXPECT_EQ(b.retry_count, std::nullopt);
  EXPECT_EQ(b.retry_backoff, std::nullopt);
}

TEST(ConfigFields, WhatIsWrittenReadsBackEqualInListOrder) {
  const Backend full{"db.example", 5432, 3, {"eu", "primary"}, 2, 250ms};
  const YAML::Node n = encode(full);
  EXPECT_EQ(
      dump(n),
      "host: db.example\nport: 5432\nweight: 3\ntags:\n  - eu\n  - primary\nretry:\n  count: 2\n  backoff: 250ms");
  EXPECT_EQ(decode<Backend>(n), full);
  EXPECT_EQ(decode<Backend>(YAML::Load(dump(n))), full);
}

TEST(ConfigFields, EmptyOptionalIsNotWritten) {
  Backend b{"a"};
  EXPECT_EQ(dump(encode(b)), "host: a\nport: 80");  // no weight, no empty tags, no empty retry section
  b.retry_backoff = 1s;
  EXPECT_EQ(dump(encode(b)), "host: a\nport: 80\nretry:\n  backoff: 1000ms");
  EXPECT_EQ(decode<Backend>(encode(b)), b);
}

TEST(ConfigFields, SeveralListsCanShareOneMapping) {
  const Fields<Backend> kAddress = {{"host", &Backend::host}, {"port", &Backend::port}};
  const Fields<Backend> kExtra = {{"weight", &Backend::weight}};
  const YAML::Node n = YAML::Load("{host: a, weight: 2}");
  expect_keys(n, kAddress, kExtra);  // every key belongs to one of the lists
  Backend b;
  kAddress.read(n, b);  // reads only its own keys
  EXPECT_EQ(b.host, "a");
  EXPECT_EQ(b.weight, std::nullopt);
  kExtra.read(n, b);
  EXPECT_EQ(b.weight, 2);
  try {
    expect_keys(YAML::Load("{host: a, tags: [x]}"), kAddress, kExtra);
    ADD_FAILURE() << "tags is in neither list";
  } catch (const ConversionError& e) {
    EXPECT_EQ(e.reason(), "unknown field 'tags' (expected one of: host, port, weight)");
  }
}
}  // namespace
}  // namespace lionet::config
