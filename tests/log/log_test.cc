// tests/log/log_test.cc: what a user of lionet::log notices: levels filter, a new level takes
// effect on an existing logger, rotating files are written and rotated, async loggers keep
// order, unconfigured loggers follow root, and %* prints the fiber id (0 outside fibers).
#include "lionet/log/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lionet/sched/scheduler.h"

namespace lionet::log {
namespace {
namespace fs = std::filesystem;

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lionet-log-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    configure({});  // back to the default root, releasing the files
    fs::remove_all(dir_);
  }

  // One logger writing "<level>|<fiber id>|<message>" lines to a file.
  LoggerOptions file_logger(const std::string& name, Level level, bool async = false, std::size_t max_size = 1 << 20,
                            std::size_t max_files = 2) {
    LoggerOptions o;
    o.name = name;
    o.level = level;
    o.pattern = "%l|%*|%v";
    o.async = async;
    SinkOptions s;
    s.type = SinkOptions::Type::kRotatingFile;
    s.path = (dir_ / (name + ".log")).string();
    s.max_size = max_size;
    s.max_files = max_files;
    o.sinks = {s};
    return o;
  }

  std::vector<std::string> lines(const std::string& file) {
    flush_all();
    std::ifstream in(dir_ / file);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

  fs::path dir_;
};

TEST_F(LogTest, LevelFiltersMessages) {
  configure({.loggers = {file_logger("app", Level::kWarn)}});
  auto lg = get("app");
  LIONET_LOG_DEBUG(lg, "debug {}", 1);
  LIONET_LOG_INFO(lg, "info {}", 2);
  LIONET_LOG_WARN(lg, "warn {}", 3);
  LIONET_LOG_ERROR(lg, "error {}", 4);
  EXPECT_EQ(lines("app.log"), (std::vector<std::string>{"warning|0|warn 3", "error|0|error 4"}));
}

TEST_F(LogTest, ArgumentsAreNotEvaluatedBelowTheLevel) {
  configure({.loggers = {file_logger("app", Level::kInfo)}});
  int evaluated = 0;
  LIONET_LOG_DEBUG(get("app"), "{}", ++evaluated);
  EXPECT_EQ(evaluated, 0);
}

TEST_F(LogTest, ReconfiguredLevelAppliesToACachedLogger) {
  configure({.loggers = {file_logger("app", Level::kInfo)}});
  auto lg = get("app");  // cached, as code is told to do
  LIONET_LOG_DEBUG(lg, "hidden");
  configure({.loggers = {file_logger("app", Level::kDebug)}});
  EXPECT_EQ(get("app"), lg);
  LIONET_LOG_DEBUG(lg, "shown");
  set_level("app", Level::kError);
  LIONET_LOG_WARN(lg, "hidden again");
  EXPECT_EQ(lines("app.log"), (std::vector<std::string>{"debug|0|shown"}));
}

TEST_F(LogTest, RotatingFileSinkWritesAndRotates) {
  configure({.loggers = {file_logger("rot", Level::kInfo, false, 4096, 2)}});
  auto lg = get("rot");
  const std::string payload(100, 'x');
  for (int i = 0; i < 200; ++i) LIONET_LOG_INFO(lg, "{} {}", i, payload);  // ~21 KB
  flush_all();
  ASSERT_TRUE(fs::exists(dir_ / "rot.log"));
  EXPECT_TRUE(fs::exists(dir_ / "rot.1.log"));
  EXPECT_TRUE(fs::exists(dir_ / "rot.2.log"));
  EXPECT_FALSE(fs::exists(dir_ / "rot.3.log"));  // max_files = 2
  EXPECT_LE(fs::file_size(dir_ / "rot.log"), 4096u);
  auto last = lines("rot.log");
  ASSERT_FALSE(last.empty());
  EXPECT_EQ(last.back(), "info|0|199 " + payload);
}

TEST_F(LogTest, UnconfiguredLoggerFollowsRoot) {
  auto lg = get("not-in-config");
  LoggerOptions root = file_logger("root", Level::kWarn);
  configure({.loggers = {root}});
  LIONET_LOG_INFO(lg, "below root's level");
  LIONET_LOG_WARN(lg, "to root's file");
  root.level = Level::kInfo;
  configure({.loggers = {root}});
  LIONET_LOG_INFO(lg, "now info passes");
  EXPECT_EQ(lines("root.log"), (std::vector<std::string>{"warning|0|to root's file", "info|0|now info passes"}));
}

TEST_F(LogTest, AsyncLoggerKeepsOrderAndFlushIsABarrier) {
  configure({.loggers = {file_logger("async", Level::kInfo, /*async=*/true)}});
  auto lg = get("async");
  for (int i = 0; i < 1000; ++i) LIONET_LOG_INFO(lg, "{}", i);
  auto got = lines("async.log");  // flush_all() returns after everything above is written
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[i], "info|0|" + std::to_string(i));
  // Switching to synchronous at run time keeps the same logger and loses nothing.
  configure({.loggers = {file_logger("async", Level::kInfo, /*async=*/false)}});
  LIONET_LOG_INFO(lg, "sync now");
  EXPECT_EQ(lines("async.log").back(), "info|0|sync now");
}

TEST_F(LogTest, BadOptionsThrowAndChangeNothing) {
  configure({.loggers = {file_logger("app", Level::kInfo)}});
  LoggerOptions bad = file_logger("app", Level::kTrace);
  bad.sinks[0].path = "/proc/no/such/dir/x.log";
  EXPECT_ANY_THROW(configure({.loggers = {bad}}));
  EXPECT_THROW(configure({.loggers = {file_logger("a", Level::kInfo), file_logger("a", Level::kInfo)}}),
               std::invalid_argument);
  LIONET_LOG_DEBUG(get("app"), "still info");
  LIONET_LOG_INFO(get("app"), "still writing");
  EXPECT_EQ(lines("app.log"), (std::vector<std::string>{"info|0|still writing"}));
}

TEST_F(LogTest, DefaultPatternShowsThreadAndFiberId) {
  EXPECT_NE(std::string(kDefaultPattern).find("F%*"), std::string::npos);
  LoggerOptions o = file_logger("dflt", Level::kInfo);
  o.pattern = kDefaultPattern;
  configure({.loggers = {o}});
  LIONET_LOG_INFO(get("dflt"), "hello");
  auto got = lines("dflt.log");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].find("[info] [dflt] [T"), std::string::npos) << got[0];
  EXPECT_NE(got[0].find(" F0] hello"), std::string::npos) << got[0];
}

TEST_F(LogTest, FiberIdInsideAFiberSyncAndAsync) {
  configure({.loggers = {file_logger("sync", Level::kInfo), file_logger("async", Level::kInfo, true)}});
  Scheduler sched(SchedulerOptions{.threads = 2});
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(sched
                      .spawn([] {
                        uint64_t id = this_fiber::id();
                        LIONET_LOG_INFO(get("sync"), "{}", id);
                        LIONET_LOG_INFO(get("async"), "{}", id);
                        return id;
                      })
                      .join());
  }
  sched.stop();
  for (const char* file : {"sync.log", "async.log"}) {
    auto got = lines(file);
    ASSERT_EQ(got.size(), 4u) << file;
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_NE(ids[i], 0u);
      EXPECT_EQ(got[i], "info|" + std::to_string(ids[i]) + "|" + std::to_string(ids[i])) << file;
    }
  }
}
}  // namespace
}  // namespace lionet::log
