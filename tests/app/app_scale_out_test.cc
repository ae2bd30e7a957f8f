// Scaling out on one host (README "Scaling out"): servers[].reuse_port lets several lionet
// processes listen on one port, the kernel spreading new connections over them; when one
// stops, the others take every new connection. Without the key a second process is refused
// the port with a clear error, and the key is refused on servers that write to the store.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <string>

#include "app_process.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;

// A configuration directory `name` under conf whose http server on `port` serves
// /who.txt = name (its own page directory) and the storage API (its own data directory).
std::string instance(TempConf& conf, const std::string& name, int port, bool reuse_port) {
  const fs::path dir = fs::path(conf.path()) / name;
  fs::create_directories(dir / "www");
  conf.write(name + "/www/who.txt", name);
  conf.write(name + "/server.yml",
             "scheduler: {threads: 1}\n"
             "storage: {data_dir: " +
                 (dir / "data").string() +
                 "}\n"
                 "servers:\n"
                 "  - name: web\n    type: http\n"
                 "    listen: ['127.0.0.1:" +
                 std::to_string(port) + "']\n" + (reuse_port ? "    reuse_port: true\n" : "") +
                 "    routes:\n"
                 "      - {path: /topics, type: storage}\n"
                 "      - {path: /, type: static, root: " +
                 (dir / "www").string() + "}\n");
  return dir.string();
}

// `n` requests for /who.txt, each on a new connection; returns how many each instance answered
// ("a", "b") and how many failed ("error").
std::map<std::string, int> ask(int port, int n) {
  const std::string out = sh("for i in $(seq " + std::to_string(n) +
                             "); do curl -s --max-time 5 "
                             "http://127.0.0.1:" +
                             std::to_string(port) + "/who.txt || printf error; echo; done");
  std::map<std::string, int> count;
  std::size_t pos = 0;
  while (pos < out.size()) {
    const std::size_t eol = out.find('\n', pos);
    const std::string line = out.substr(pos, eol - pos);
    ++count[line == "a" || line == "b" ? line : "error"];
    pos = eol == std::string::npos ? out.size() : eol + 1;
  }
  return count;
}

TEST(AppScaleOut, TwoProcessesWithReusePortShareOnePortAndTheSurvivorTakesItAll) {
  TempConf conf;
  const int port = free_port();
  Process a({"-c", instance(conf, "a", port, true)});
  REQUIRE_BINARY(a);
  ASSERT_TRUE(a.wait_for(kReady)) << a.output();
  Process b({"-c", instance(conf, "b", port, true)});
  ASSERT_TRUE(b.wait_for(kReady)) << b.output();

  // The kernel hashes each connection's addresses onto one of the two listeners: with 200
  // connections from changing source ports both get some (all to one: p = 2^-199).
  auto got = ask(port, 200);
  EXPECT_EQ(got["error"], 0);
  EXPECT_GT(got["a"], 0);
  EXPECT_GT(got["b"], 0);
  EXPECT_EQ(got["a"] + got["b"], 200);

  // One stops (drains and closes its listener); every new connection goes to the other.
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait(), 0) << a.output();
  got = ask(port, 50);
  EXPECT_EQ(got["b"], 50) << "a: " << got["a"] << " errors: " << got["error"];

  b.signal(SIGTERM);
  EXPECT_EQ(b.wait(), 0) << b.output();
}

TEST(AppScaleOut, WithoutReusePortASecondProcessIsRefusedThePort) {
  TempConf conf;
  const int port = free_port();
  Process a({"-c", instance(conf, "a", port, false)});
  REQUIRE_BINARY(a);
  ASSERT_TRUE(a.wait_for(kReady)) << a.output();
  Process b({"-c", instance(conf, "b", port, false)});
  EXPECT_EQ(b.wait(), 1) << b.output();
  EXPECT_NE(b.output().find("Address already in use"), std::string::npos) << b.output();
  EXPECT_NE(b.output().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << b.output();
  EXPECT_EQ(ask(port, 5)["a"], 5);  // the first one is not disturbed
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait(), 0) << a.output();
}

// Two processes sharing a port must not share a data directory: the second is refused it.
TEST(AppScaleOut, ASecondProcessOnTheSameDataDirIsRefusedIt) {
  TempConf conf;
  const int port = free_port();
  const std::string dir_a = instance(conf, "a", port, true);
  Process a({"-c", dir_a});
  REQUIRE_BINARY(a);
  ASSERT_TRUE(a.wait_for(kReady)) << a.output();
  // b's configuration, but with a's data_dir.
  const std::string dir_b = instance(conf, "b", port, true);
  conf.write("b/zz-data.yml", "storage: {data_dir: " + dir_a + "/data}\n");
  Process b({"-c", dir_b});
  EXPECT_EQ(b.wait(), 1) << b.output();
  EXPECT_NE(b.output().find("is in use by another process"), std::string::npos) << b.output();
  EXPECT_EQ(ask(port, 5)["a"], 5);
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait(), 0) << a.output();
}

TEST(AppScaleOut, ReusePortOnAServerThatWritesTheStoreIsRefusedNamingTheKey) {
  TempConf conf;
  conf.write("server.yml", "storage: {data_dir: " + conf.path() +
                               "/data}\n"
                               "servers:\n"
                               "  - {name: k, type: kafka, listen: ['127.0.0.1:" +
                               std::to_string(free_port()) + "'], reuse_port: true}\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  EXPECT_NE(p.wait(), 0) << p.output();
  EXPECT_NE(p.output().find("reuse_port"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("applies to http, https and echo servers only"), std::string::npos) << p.output();
}
}  // namespace
}  // namespace lionet::app
