// tests/config/config_registry_test.cc: loading behaviour a user notices: validation errors,
// atomic loads, listeners with old/new values, environment overrides, the unknown-keys warning,
// directory order, and reading while reloading.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lionet/config/registry.h"
#include "lionet/log/log.h"
#include "tests/config/config_test_util.h"

namespace lionet::config {
namespace {
namespace fs = std::filesystem;
using namespace lionet::config_test;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("lionet-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(ConfigValidation, RangeRejectsWithFileLineColumnKeyAndReason) {
  Registry r;
  auto threads = r.define<int>("scheduler.threads", 1, "workers", range(1, 1024));
  TempDir dir;
  auto file = dir.write("server.yml", "# comment\nscheduler:\n  threads: 0\n");
  try {
    r.load_file(file, kNoEnv);
    FAIL() << "threads: 0 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              file.string() + ":3:12: key 'scheduler.threads': invalid value: must be in [1, 1024], got 0");
    EXPECT_EQ(e.source(), file.string());
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.column(), 12);
    EXPECT_EQ(e.key(), "scheduler.threads");
  }
  EXPECT_EQ(threads->value(), 1);
}

TEST(ConfigValidation, PredicatesAndCombinedValidators) {
  Registry r;
  auto cap =
      r.define<std::size_t>("q.capacity", 256, "queue",
                            all(range(std::size_t{2}, std::size_t{4096}),
                                check([](std::size_t v) { return (v & (v - 1)) == 0; }, "must be a power of two")));
  auto backend = r.define<std::string>("io.backend", "epoll", "backend", one_of({"epoll", "io_uring"}));
  EXPECT_THROW(r.load_string("q: {capacity: 100}", "a.yml", kNoEnv), ConfigError);
  try {
    r.load_string("q: {capacity: 100}", "a.yml", kNoEnv);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.reason(), "invalid value: must be a power of two");
  }
  try {
    r.load_string("io: {backend: kqueue}", "a.yml", kNoEnv);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.reason(), "invalid value: must be one of [epoll, io_uring], got kqueue");
  }
  r.load_string("q: {capacity: 1024}\nio: {backend: io_uring}", "a.yml", kNoEnv);
  EXPECT_EQ(cap->value(), 1024u);
  EXPECT_EQ(backend->value(), "io_uring");
  // set() validates too.
  EXPECT_THROW(cap->set(3), std::invalid_argument);
  EXPECT_EQ(cap->value(), 1024u);
}

TEST(ConfigValidation, ABadValueLeavesEveryVarUnchanged) {
  Registry r;
  auto a = r.define<int>("s.a", 1, "a");
  auto b = r.define<int>("s.b", 2, "b", range(0, 10));
  int calls = 0;
  a->add_listener([&](int, int) { ++calls; });
  TempDir dir;
  dir.write("1.yml", "s: {a: 5}\n");
  dir.write("2.yml", "s: {b: 50}\n");
  EXPECT_THROW(r.load_dir(dir.path(), kNoEnv), ConfigError);
  EXPECT_EQ(a->value(), 1);
  EXPECT_EQ(b->value(), 2);
  EXPECT_EQ(calls, 0);
}

TEST(ConfigListeners, FireWithOldAndNewValueOnlyOnChange) {
  Registry r;
  auto v = r.define<std::vector<int>>("x.list", {1}, "a list");
  std::vector<std::pair<std::vector<int>, std::vector<int>>> seen;
  auto id = v->add_listener([&](const auto& o, const auto& n) { seen.emplace_back(o, n); });
  r.load_string("x: {list: [1, 2]}", "a.yml", kNoEnv);
  r.load_string("x: {list: [1, 2]}", "a.yml", kNoEnv);  // same value: no call
  v->set({3});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, std::vector<int>{1});
  EXPECT_EQ(seen[0].second, (std::vector<int>{1, 2}));
  EXPECT_EQ(seen[1].first, (std::vector<int>{1, 2}));
  EXPECT_EQ(seen[1].second, std::vector<int>{3});
  v->remove_listener(id);
  v->set({4});
  EXPECT_EQ(seen.size(), 2u);
}

TEST(ConfigListeners, SeeTheNewValueAndMaySafelyRemoveThemselves) {
  Registry r;
  auto v = r.define<int>("x.n", 0, "n");
  int observed = -1;
  uint64_t id = 0;
  id = v->add_listener([&](int, int) {
    observed = v->value();
    v->remove_listener(id);  // from inside its own call: must not deadlock
  });
  v->set(5);
  v->set(6);
  EXPECT_EQ(observed, 5);
}

TEST(ConfigListeners, SettingTheVarFromItsOwnListenerIsRefused) {
  Registry r;
  auto v = r.define<int>("x.n", 0, "n");
  v->add_listener([&](int, int now) { v->set(now + 1); });  // throws, logged, value stays
  v->set(1);
  EXPECT_EQ(v->value(), 1);
}

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvVar() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(ConfigEnvironment, OverridesFilesWithNestedNamesFlattened) {
  Registry r("LNTEST_");
  auto stack = r.define<std::size_t>("fiber.stack_size", 131072, "stack");
  auto list = r.define<std::map<std::string, int>>("srv.http.ports", {}, "ports");
  EXPECT_EQ(stack->env_name(), "LNTEST_FIBER_STACK_SIZE");
  EXPECT_EQ(list->env_name(), "LNTEST_SRV_HTTP_PORTS");
  EnvVar e1("LNTEST_FIBER_STACK_SIZE", "65536");
  EnvVar e2("LNTEST_SRV_HTTP_PORTS", "{main: 80, tls: 443}");
  auto report = r.load_string("fiber: {stack_size: 262144}", "a.yml", {.warn_unknown = false});
  EXPECT_EQ(stack->value(), 65536u);
  EXPECT_EQ(list->value(), (std::map<std::string, int>{{"main", 80}, {"tls", 443}}));
  EXPECT_TRUE(report.unknown_keys.empty());
}

TEST(ConfigEnvironment, BadValueNamesTheVariable) {
  Registry r("LNTEST_");
  auto stack =
      r.define<std::size_t>("fiber.stack_size", 131072, "stack", range(std::size_t{4096}, std::size_t{1} << 26));
  EnvVar e("LNTEST_FIBER_STACK_SIZE", "12");
  try {
    r.apply_environment({.warn_unknown = false});
    FAIL();
  } catch (const ConfigError& err) {
    EXPECT_EQ(std::string(err.what()),
              "environment variable LNTEST_FIBER_STACK_SIZE:1:1: key 'fiber.stack_size': invalid value: must be in "
              "[4096, 67108864], got 12");
  }
  EXPECT_EQ(stack->value(), 131072u);
}

TEST(ConfigUnknownKeys, ReportedTogetherWithPositionsAndOneWarning) {
  Registry r("LNTEST_");
  r.define<int>("scheduler.threads", 1, "workers");
  EnvVar e("LNTEST_SCHEDULER_THREDS", "2");
  // Capture the config logger's output.
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  sink->set_pattern("%l %v");
  auto lg = log::get("config");
  lg->sinks().push_back(sink);
  auto report = r.load_string("scheduler:\n  threads: 2\n  treads: 3\nschedular: {x: 1}\n", "s.yml");
  lg->sinks().pop_back();

  ASSERT_EQ(report.unknown_keys.size(), 3u);
  EXPECT_EQ(report.unknown_keys[0].key, "scheduler.treads");
  EXPECT_EQ(report.unknown_keys[0].line, 3);
  EXPECT_EQ(report.unknown_keys[0].column, 3);
  EXPECT_EQ(report.unknown_keys[1].key, "schedular");
  EXPECT_EQ(report.unknown_keys[2].key, "LNTEST_SCHEDULER_THREDS");
  EXPECT_EQ(report.unknown_keys[2].source, "environment");
  EXPECT_EQ(captured.str(),
            "warning 3 unknown config keys ignored: scheduler.treads (s.yml:3:3), schedular (s.yml:4:1), "
            "LNTEST_SCHEDULER_THREDS (environment)\n");
  EXPECT_EQ(r.find<int>("scheduler.threads")->value(), 2);  // the known key still applied
}

TEST(ConfigLoadDir, ReadsYamlFilesInNameOrderLaterWins) {
  Registry r;
  auto v = r.define<std::string>("a.v", "default", "v");
  auto w = r.define<int>("a.w", 0, "w");
  TempDir dir;
  dir.write("20-second.yaml", "a: {v: second}\n");
  dir.write("10-first.yml", "a: {v: first, w: 1}\n");
  dir.write("30-ignored.txt", "a: {v: not yaml by name}\n");
  dir.write("00-empty.yml", "");
  auto report = r.load_dir(dir.path(), kNoEnv);
  EXPECT_EQ(v->value(), "second");
  EXPECT_EQ(w->value(), 1);
  ASSERT_EQ(report.sources.size(), 3u);
  EXPECT_EQ(fs::path(report.sources[0]).filename(), "00-empty.yml");
  EXPECT_EQ(fs::path(report.sources[1]).filename(), "10-first.yml");
  EXPECT_EQ(fs::path(report.sources[2]).filename(), "20-second.yaml");
  // load_path picks dir or file.
  r.load_path(dir.path() / "10-first.yml", kNoEnv);
  EXPECT_EQ(v->value(), "first");
}

TEST(ConfigLoadDir, MissingFileIsAClearError) {
  Registry r;
  try {
    r.load_file("/nonexistent/lionet.yml", kNoEnv);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/lionet.yml: cannot open the file");
  }
}

// Readers on 3 threads see only complete values (one of the two loaded vectors) while a writer
// reloads 1,000 times; a torn or freed value would fail the check or trip ASan.
TEST(ConfigThreads, ReadersSeeWholeValuesDuringReloads) {
  Registry r;
  const std::vector<std::string> a(64, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  const std::vector<std::string> b(32, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  auto v = r.define<std::vector<std::string>>("x.v", a, "v");
  YAML::Node na, nb;
  na["x"]["v"] = a;
  nb["x"]["v"] = b;
  const std::string ya = YAML::Dump(na), yb = YAML::Dump(nb);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!done.load(std::memory_order_acquire)) {
        auto snap = v->snapshot();
        if (*snap != a && *snap != b) bad.fetch_add(1);
        if (auto copy = v->value(); copy != a && copy != b) bad.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 1000; ++i) r.load_string(i % 2 ? ya : yb, "x.yml", kNoEnv);
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(v->value(), a);
}
TEST(ConfigEnvironment, IgnoredPrefixesAreNeitherAppliedNorReported) {
  Registry r("LNTEST_");
  r.ignore_environment("LNTEST_WERROR");
  auto threads = r.define<int>("scheduler.threads", 1, "workers");
  EnvVar werror("LNTEST_WERROR", "ON");
  EnvVar other("LNTEST_SCHEDULER_THREADS", "3");
  auto report = r.apply_environment({.warn_unknown = false});
  EXPECT_EQ(threads->value(), 3);
  EXPECT_TRUE(report.unknown_keys.empty());
  EXPECT_THROW(r.define<bool>("werror", false, "a var whose variable is ignored"), std::logic_error);
}

TEST(ConfigEnvironment, TheGlobalRegistryIgnoresTheBuildsWerrorSwitch) {
  EnvVar werror("LIONET_WERROR", "ON");
  auto report = Registry::global().apply_environment({.warn_unknown = false});
  for (const auto& k : report.unknown_keys) EXPECT_NE(k.key, "LIONET_WERROR");
}

}  // namespace
}  // namespace lionet::config
