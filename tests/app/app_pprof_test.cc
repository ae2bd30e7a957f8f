// The `pprof` route (lionet/app/pprof.h) as its users use it: `go tool pprof -top` fetches a
// CPU profile over HTTP while this process burns CPU in a function with a known name, which
// must be among the top 3 entries; a second profile meanwhile gets 409; bad `seconds` 400; a
// non-loopback-only route serves loopback only (checked by the 403 path's absence here: the
// client is on 127.0.0.1). go comes from Debian's golang-go (scripts/install-deps.sh).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "../common/sanitizers.h"
#include "app_process.h"
#include "lionet/app/pprof.h"
#include "lionet/http/client.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::atomic<bool> g_burn{false};
std::atomic<uint64_t> g_sink{0};

// The function the profile must show (noinline: a frame of its own, with this name).
[[gnu::noinline]] void pprof_test_burns_cpu_in_a_known_function() {
  uint64_t x = 88172645463325252ULL;
  while (g_burn.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 100000; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    g_sink.fetch_add(x & 1, std::memory_order_relaxed);
  }
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(("timeout 120 " + cmd + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

class Pprof : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!lionet::app::pprof_unavailable_reason().empty())
      FAIL() << lionet::app::pprof_unavailable_reason() << " (scripts/install-deps.sh installs it)";
    router_.prefix("GET,POST", "/debug/pprof", lionet::app::pprof_handler({}));
    server_.listen(lionet::Address::ipv4_loopback(0));
    server_.start();
  }
  void TearDown() override {
    server_.stop(std::chrono::seconds(1));
    sched_.stop();
  }
  std::string url(const std::string& q) const {
    return "http://127.0.0.1:" + std::to_string(server_.addresses()[0].port()) + "/debug/pprof/profile" + q;
  }
  lionet::Scheduler sched_{{.threads = 2, .name = "pprof"}};
  lionet::IOManager io_{sched_};
  lionet::http::Router router_;
  lionet::http::Server server_{
      io_, [this](lionet::http::Request& q, lionet::http::Response& s) { router_.handler()(q, s); }};
};

TEST_F(Pprof, GoToolPprofShowsTheFunctionBurningCpuInItsTop3) {
  lionet::app::testing::TempConf tmp;  // a scratch directory for the profile pprof saves
  g_burn = true;
  std::thread burner(pprof_test_burns_cpu_in_a_known_function);
  // PPROF_TMPDIR: where pprof saves the fetched profile. HOME stays: recent Go builds its tools
  // on first use and caches them there.
  // -symbolize=remote: the names come from the route's own /symbol (symbolz), as they do for a
  // server on another machine; pprof's local look-up of a sanitizer build's binary finds none.
  const std::string out = run("env PPROF_TMPDIR='" + tmp.path() +
                              "' go tool pprof -symbolize=remote -top -nodecount=10 '" + url("?seconds=2") + "'");
  g_burn = false;
  burner.join();
  std::istringstream lines(out);
  std::string line;
  // The table starts after the header line "flat  flat%   sum%        cum   cum%".
  bool table = false;
  int rank = 0, found_at = 0;
  while (std::getline(lines, line)) {
    if (line.find("flat%") != std::string::npos) {
      table = true;
      continue;
    }
    if (!table || line.empty()) continue;
    ++rank;
    if (line.find("pprof_test_burns_cpu_in_a_known_function") != std::string::npos && found_at == 0) found_at = rank;
  }
  std::printf("[pprof] the burning function is entry %d of go tool pprof -top\n", found_at);
  EXPECT_GE(found_at, 1) << out;
  EXPECT_LE(found_at, 3) << out;
}

TEST_F(Pprof, OneProfileAtATimeAndSecondsAreChecked) {
  lionet::http::Client client;
  auto first = std::async(std::launch::async,
                          [&] { return sched_.spawn([&] { return client.get(url("?seconds=1")); }).join(); });
  std::this_thread::sleep_for(300ms);
  auto second = sched_.spawn([&] { return client.get(url("?seconds=1")); }).join();
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_EQ(second->status, 409) << second->body;
  auto r = first.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_GT(r->body.size(), 16u);  // a profile: header words and the process's mappings
  EXPECT_NE(r->body.find("r-xp"), std::string::npos) << "the process's mappings end a gperftools profile";
  for (const char* bad : {"?seconds=0", "?seconds=601", "?seconds=abc"}) {
    auto b = sched_.spawn([&] { return client.get(url(bad)); }).join();
    ASSERT_TRUE(b) << b.error().message();
    EXPECT_EQ(b->status, 400) << bad << ": " << b->body;
  }
}

}  // namespace
