// scripts/gdb/lionet.py as an operator uses it: gdb --batch on a core file of a program whose
// fibers are parked in functions with known names, and attached to the same program live.
// `lionet fibers` must list those fibers, `lionet bt all` / `lionet bt ID` must show the
// functions they wait in. Release build only (tests/CMakeLists.txt): gdb under a sanitizer's
// runtime adds nothing this test checks.
//
// The core: the target aborts with RLIMIT_CORE raised, in a directory of its own. Where the
// machine's kernel.core_pattern sends cores elsewhere (a pipe to systemd-coredump or apport),
// no file appears; the test then writes the core with gdb's own gcore from the live target and
// says so in its output: either way gdb reads a core file.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kScript = std::string(LIONET_SOURCE_DIR) + "/scripts/gdb/lionet.py";

// Runs a shell command, returns its stdout+stderr (bounded by `timeout` seconds).
std::string run(const std::string& cmd, int timeout_s = 120) {
  const std::string full = "timeout " + std::to_string(timeout_s) + " " + cmd + " 2>&1";
  std::string out;
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return "popen failed";
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/lionet-gdb-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// The target, started in `dir`; its pid once it printed READY.
struct Target {
  pid_t pid = -1;
  FILE* out = nullptr;
  Target(const fs::path& dir, const char* mode) {
    const std::string cmd = "cd '" + dir.string() + "' && exec '" + LIONET_GDB_TARGET + "' " + mode;
    out = ::popen(cmd.c_str(), "r");
  }
  // Reads the READY line (the target prints it once its fibers are parked).
  bool ready() {
    char line[256];
    if (!out || !std::fgets(line, sizeof line, out)) return false;
    if (std::sscanf(line, "READY %d", &pid) != 1) {
      std::fprintf(stderr, "target said: %s", line);
      return false;
    }
    return true;
  }
  int finish() {
    const int st = out ? ::pclose(out) : -1;
    out = nullptr;
    return st;
  }
  ~Target() {
    if (pid > 0) ::kill(pid, SIGKILL);
    if (out) ::pclose(out);
  }
};

std::string gdb_batch(const std::string& target_args) {
  return run("gdb --nx --batch -ex 'set pagination off' -ex 'source " + kScript +
             "' -ex 'lionet fibers' -ex 'lionet bt all' " + target_args);
}

// What both runs must show: seven fibers parked where the target put them.
void expect_fibers_and_frames(const std::string& out) {
  EXPECT_NE(out.find("7 fibers"), std::string::npos) << out;
  int recv = 0;
  for (std::size_t p = out.find("\"gdb-recv\": parked, waiting channel recv"); p != std::string::npos;
       p = out.find("\"gdb-recv\": parked, waiting channel recv", p + 1))
    ++recv;
  EXPECT_EQ(recv, 10) << "5 in the list, 5 in the backtraces\n" << out;
  EXPECT_NE(out.find("\"gdb-sleeper\": parked, waiting sleep timer"), std::string::npos) << out;
  EXPECT_NE(out.find("\"gdb-event\": parked, waiting event"), std::string::npos) << out;
  // The frames: each fiber's own function, under its header.
  const std::regex recv_bt("\"gdb-recv\"[^\\n]*\\n(    #[^\\n]*\\n)*    #[^\\n]*gdb_target_waits_in_channel_recv");
  const std::regex sleep_bt("\"gdb-sleeper\"[^\\n]*\\n(    #[^\\n]*\\n)*    #[^\\n]*gdb_target_sleeps_in_a_long_nap");
  const std::regex event_bt("\"gdb-event\"[^\\n]*\\n(    #[^\\n]*\\n)*    #[^\\n]*gdb_target_waits_for_an_event");
  EXPECT_TRUE(std::regex_search(out, recv_bt)) << out;
  EXPECT_TRUE(std::regex_search(out, sleep_bt)) << out;
  EXPECT_TRUE(std::regex_search(out, event_bt)) << out;
  EXPECT_EQ(out.find("Python Exception"), std::string::npos) << out;
}

TEST(GdbExtension, ListsFibersAndTheirBacktracesInACoreFile) {
  TempDir dir;
  std::string core;
  std::string how;
  {
    Target t(dir.path, "abort");
    ASSERT_TRUE(t.ready());
    t.finish();  // it aborted
    t.pid = -1;
    for (const auto& e : fs::directory_iterator(dir.path))
      if (e.path().filename().string().starts_with("core")) core = e.path();
    how = "core written by the kernel on abort()";
  }
  if (core.empty()) {
    // kernel.core_pattern sends cores elsewhere here: have gdb write one from the live target.
    Target t(dir.path, "wait");
    ASSERT_TRUE(t.ready());
    core = (dir.path / "gcore").string();
    const std::string g =
        run("gdb --nx --batch -p " + std::to_string(t.pid) + " -ex 'generate-core-file " + core + "'");
    ASSERT_TRUE(fs::exists(core)) << g;
    how = "kernel.core_pattern (" + run("cat /proc/sys/kernel/core_pattern") +
          ") keeps no file here: core written by gcore";
  }
  std::printf("[gdb] %s\n", how.c_str());
  const std::string out = gdb_batch(std::string(LIONET_GDB_TARGET) + " " + core);
  expect_fibers_and_frames(out);
}

TEST(GdbExtension, ListsFibersAndTheirBacktracesInALiveProcessAndBtOfOneFiber) {
  TempDir dir;
  Target t(dir.path, "wait");
  ASSERT_TRUE(t.ready());
  const std::string out = gdb_batch("-p " + std::to_string(t.pid));
  expect_fibers_and_frames(out);
  // One fiber by id: the sleeper's.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("fiber ([0-9]+) \"gdb-sleeper\""))) << out;
  const std::string one = run("gdb --nx --batch -ex 'source " + kScript + "' -ex 'lionet bt " + m[1].str() + "' -p " +
                              std::to_string(t.pid));
  EXPECT_NE(one.find("gdb_target_sleeps_in_a_long_nap"), std::string::npos) << one;
  EXPECT_EQ(one.find("gdb-recv"), std::string::npos) << one;
  // gdb detached: the target still runs and stops cleanly.
  ::kill(t.pid, SIGTERM);
  t.pid = -1;
  const int st = t.finish();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

}  // namespace
