// tests/config/config_types_test.cc: every supported value type converts from YAML, back to
// YAML (dump round trip), and rejects what does not fit with the offending key and position.
#include <gtest/gtest.h>

#include <chrono>
#include <list>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lionet/config/registry.h"
#include "tests/config/config_test_util.h"

namespace {
struct Endpoint {
  std::string host = "localhost";
  int port = 0;
  bool operator==(const Endpoint&) const = default;
};
}  // namespace

template <>
struct lionet::config::ConfigTraits<Endpoint> {
  static Endpoint from_yaml(const YAML::Node& n) {
    expect_keys(n, {"host", "port"});
    Endpoint e;
    read_field(n, "host", e.host);
    e.port = required_field<int>(n, "port");
    return e;
  }
  static YAML::Node to_yaml(const Endpoint& e) {
    YAML::Node n;
    n["host"] = e.host;
    n["port"] = e.port;
    return n;
  }
};

namespace lionet::config {
namespace {
using namespace std::chrono_literals;

using namespace lionet::config_test;

struct AllTypes {
  explicit AllTypes(Registry& r)
      : b(r.define<bool>("t.b", false, "a bool")),
        i8(r.define<int8_t>("t.i8", 0, "an int8")),
        u64(r.define<uint64_t>("t.u64", 0, "a uint64")),
        d(r.define<double>("t.d", 0.0, "a double")),
        s(r.define<std::string>("t.s", "x", "a string")),
        ms(r.define<std::chrono::milliseconds>("t.ms", 10ms, "a duration")),
        opt(r.define<std::optional<int>>("t.opt", std::nullopt, "an optional")),
        vec(r.define<std::vector<int>>("t.vec", {}, "a vector")),
        lst(r.define<std::list<std::string>>("t.lst", {}, "a list")),
        set(r.define<std::set<int>>("t.set", {}, "a set")),
        uset(r.define<std::unordered_set<std::string>>("t.uset", {}, "an unordered set")),
        map(r.define<std::map<std::string, double>>("t.map", {}, "a map")),
        umap(r.define<std::unordered_map<std::string, int>>("t.umap", {}, "an unordered map")),
        nested(r.define<std::map<std::string, std::vector<std::set<int>>>>("t.nested", {}, "nested containers")),
        ep(r.define<Endpoint>("t.endpoint", Endpoint{}, "a user struct")),
        eps(r.define<std::unordered_map<std::string, std::vector<Endpoint>>>("t.endpoints", {}, "structs nested")) {}
  std::shared_ptr<ConfigVar<bool>> b;
  std::shared_ptr<ConfigVar<int8_t>> i8;
  std::shared_ptr<ConfigVar<uint64_t>> u64;
  std::shared_ptr<ConfigVar<double>> d;
  std::shared_ptr<ConfigVar<std::string>> s;
  std::shared_ptr<ConfigVar<std::chrono::milliseconds>> ms;
  std::shared_ptr<ConfigVar<std::optional<int>>> opt;
  std::shared_ptr<ConfigVar<std::vector<int>>> vec;
  std::shared_ptr<ConfigVar<std::list<std::string>>> lst;
  std::shared_ptr<ConfigVar<std::set<int>>> set;
  std::shared_ptr<ConfigVar<std::unordered_set<std::string>>> uset;
  std::shared_ptr<ConfigVar<std::map<std::string, double>>> map;
  std::shared_ptr<ConfigVar<std::unordered_map<std::string, int>>> umap;
  std::shared_ptr<ConfigVar<std::map<std::string, std::vector<std::set<int>>>>> nested;
  std::shared_ptr<ConfigVar<Endpoint>> ep;
  std::shared_ptr<ConfigVar<std::unordered_map<std::string, std::vector<Endpoint>>>> eps;
};

constexpr const char* kAllTypesYaml = R"(
t:
  b: yes
  i8: -128
  u64: 18446744073709551615
  d: 2.5
  s: hello world
  ms: 1.5s
  opt: 7
  vec: [1, 2, 3]
  lst: [a, b]
  set: [3, 1, 3]
  uset: [x, y]
  map: {pi: 3.14, e: 2.72}
  umap: {one: 1}
  nested:
    primes: [[2, 3], [5, 7, 5]]
  endpoint: {host: example.org, port: 443}
  endpoints:
    eu: [{port: 80}, {host: b, port: 81}]
)";

TEST(ConfigTypes, ScalarsContainersNestedAndUserStruct) {
  Registry r;
  AllTypes t(r);
  auto report = r.load_string(kAllTypesYaml, "all.yml", kNoEnv);
  EXPECT_TRUE(report.unknown_keys.empty());
  EXPECT_EQ(report.changed.size(), 16u);
  EXPECT_TRUE(t.b->value());
  EXPECT_EQ(t.i8->value(), -128);
  EXPECT_EQ(t.u64->value(), UINT64_MAX);
  EXPECT_DOUBLE_EQ(t.d->value(), 2.5);
  EXPECT_EQ(t.s->value(), "hello world");
  EXPECT_EQ(t.ms->value(), 1500ms);
  EXPECT_EQ(t.opt->value(), 7);
  EXPECT_EQ(t.vec->value(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t.lst->value(), (std::list<std::string>{"a", "b"}));
  EXPECT_EQ(t.set->value(), (std::set<int>{1, 3}));
  EXPECT_EQ(t.uset->value(), (std::unordered_set<std::string>{"x", "y"}));
  EXPECT_EQ(t.map->value(), (std::map<std::string, double>{{"pi", 3.14}, {"e", 2.72}}));
  EXPECT_EQ(t.umap->value().at("one"), 1);
  EXPECT_EQ(t.nested->value().at("primes"), (std::vector<std::set<int>>{{2, 3}, {5, 7}}));
  EXPECT_EQ(t.ep->value(), (Endpoint{"example.org", 443}));
  EXPECT_EQ(t.eps->value().at("eu"), (std::vector<Endpoint>{{"localhost", 80}, {"b", 81}}));
}

TEST(ConfigTypes, DumpRoundTripsAndShowsDescriptions) {
  Registry a;
  AllTypes ta(a);
  a.load_string(kAllTypesYaml, "all.yml", kNoEnv);
  std::string dumped = a.dump();
  EXPECT_NE(dumped.find("# a user struct\n  endpoint:"), std::string::npos) << dumped;

  Registry b;
  AllTypes tb(b);
  auto report = b.load_string(dumped, "dump.yml", kNoEnv);
  EXPECT_TRUE(report.unknown_keys.empty());
  EXPECT_EQ(tb.eps->value(), ta.eps->value());
  EXPECT_EQ(tb.nested->value(), ta.nested->value());
  EXPECT_EQ(tb.ms->value(), 1500ms);
  EXPECT_EQ(tb.u64->value(), UINT64_MAX);
  EXPECT_EQ(b.dump(), dumped);
  // Loading the dump onto the registry it came from changes nothing.
  EXPECT_TRUE(a.load_string(dumped, "dump.yml", kNoEnv).changed.empty());
}

TEST(ConfigTypes, DefaultsAreKeptForKeysNotInTheFile) {
  Registry r;
  AllTypes t(r);
  r.load_string("t: {vec: [9]}", "partial.yml", kNoEnv);
  EXPECT_EQ(t.vec->value(), std::vector<int>{9});
  EXPECT_EQ(t.s->value(), "x");
  EXPECT_EQ(t.ms->value(), 10ms);
  EXPECT_EQ(t.opt->value(), std::nullopt);
}

TEST(ConfigTypes, StrictScalarConversion) {
  Registry r;
  AllTypes t(r);
  EXPECT_EQ(load_error(r, "t:\n  i8: 128\n"), "bad.yml:2:7: key 't.i8': expected an integer in [-128, 127], got '128'");
  EXPECT_EQ(load_error(r, "t:\n  u64: -1\n"), "bad.yml:2:8: key 't.u64': expected a non-negative integer, got '-1'");
  EXPECT_EQ(load_error(r, "t:\n  vec: [1, 2x]\n"), "bad.yml:2:12: key 't.vec[1]': expected an integer, got '2x'");
  EXPECT_EQ(load_error(r, "t:\n  b: maybe\n"),
            "bad.yml:2:6: key 't.b': expected a boolean (true/false, yes/no, on/off), got 'maybe'");
  EXPECT_EQ(load_error(r, "t:\n  s: [a]\n"), "bad.yml:2:6: key 't.s': expected a string, got a sequence");
  EXPECT_EQ(load_error(r, "t:\n  ms: 1500us\n"),
            "bad.yml:2:7: key 't.ms': '1500us' is not a whole number of milliseconds");
  EXPECT_EQ(load_error(r, "t:\n  ms: soon\n"),
            "bad.yml:2:7: key 't.ms': expected a duration (a whole number of milliseconds, or a number with a unit: "
            "ns, us, ms, s, m, h), got 'soon'");
}

TEST(ConfigTypes, ErrorsInsideNestedContainersAndStructsNameThePath) {
  Registry r;
  AllTypes t(r);
  EXPECT_EQ(load_error(r, "t:\n  nested:\n    primes: [[2], [3, x]]\n"),
            "bad.yml:3:23: key 't.nested.primes[1][1]': expected an integer, got 'x'");
  EXPECT_EQ(load_error(r, "t:\n  endpoints:\n    eu:\n      - {host: a, port: http}\n"),
            "bad.yml:4:25: key 't.endpoints.eu[0].port': expected an integer, got 'http'");
  EXPECT_EQ(load_error(r, "t:\n  endpoint: {host: a}\n"),
            "bad.yml:2:13: key 't.endpoint': missing required field 'port'");
  EXPECT_EQ(load_error(r, "t:\n  endpoint: {port: 1, hots: a}\n"),
            "bad.yml:2:23: key 't.endpoint': unknown field 'hots' (expected one of: host, port)");
}

TEST(ConfigTypes, SyntaxErrorNamesFileLineAndColumn) {
  Registry r;
  AllTypes t(r);
  std::string err = load_error(r, "t:\n  vec: [1, 2\n  s: x\n");
  EXPECT_TRUE(err.starts_with("bad.yml:")) << err;
  EXPECT_NE(err.find("YAML syntax error"), std::string::npos) << err;
  try {
    r.load_string("t:\n  vec: [1, 2\n  s: x\n", "bad.yml", kNoEnv);
  } catch (const ConfigError& e) {
    EXPECT_GE(e.line(), 2);
    EXPECT_GT(e.column(), 0);
    EXPECT_EQ(e.source(), "bad.yml");
  }
}

TEST(ConfigTypes, SectionThatIsNotAMappingIsAnError) {
  Registry r;
  AllTypes t(r);
  EXPECT_EQ(load_error(r, "t: 5\n"), "bad.yml:1:4: key 't': expected a mapping (this section holds config keys)");
  EXPECT_EQ(load_error(r, "- 1\n"), "bad.yml:1:1: the top level of a config file must be a mapping");
}

TEST(ConfigTypes, DefineRejectsBadNamesAndCollisions) {
  Registry r;
  r.define<int>("a.b", 1, "x");
  EXPECT_THROW(r.define<int>("a.b", 1, "again"), std::logic_error);
  EXPECT_THROW(r.define<int>("a", 1, "hides a.b"), std::logic_error);
  EXPECT_THROW(r.define<int>("a.b.c", 1, "under a.b"), std::logic_error);
  EXPECT_THROW(r.define<int>("A.b", 1, "upper case"), std::logic_error);
  EXPECT_THROW(r.define<int>("a..c", 1, "empty segment"), std::logic_error);
  r.define<int>("x.y_z", 1, "x");
  EXPECT_THROW(r.define<int>("x_y.z", 1, "same env var LIONET_X_Y_Z"), std::logic_error);
  EXPECT_THROW(r.define<int>("r.v", 0, "bad default", range(1, 2)), std::logic_error);
  EXPECT_NE(r.find<int>("a.b"), nullptr);
  EXPECT_EQ(r.find<int>("a.nope"), nullptr);
  EXPECT_THROW(r.find<double>("a.b"), std::logic_error);
}
}  // namespace
}  // namespace lionet::config
