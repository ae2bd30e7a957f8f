// tests/app/app_process.h: test helpers for running the lionet binary: find_binary(), Process
// (a child, lionet or another program, with stdout+stderr on one pipe, read line by line),
// TempConf (a scratch conf dir), free_port(), connect_to(), sh() and curl() (bounded curl:
// status and body), file_bytes(), kReady and kConf.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../common/poll_until.h"

extern char** environ;

namespace lionet::app::testing {
namespace fs = std::filesystem;

// The line lionet logs once its scheduler runs: a test waits for it before it connects.
inline constexpr const char* kReady = "scheduler 'lionet' running";
// The shipped conf/ of the source tree.
inline const fs::path kConf = fs::path(LIONET_SOURCE_DIR) / "conf";

// The whole content of a file ("" if it cannot be read).
inline std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline fs::path find_binary() {
  if (const char* env = std::getenv("TEST_LIONET_BINARY")) return env;
  fs::path build = fs::read_symlink("/proc/self/exe").parent_path().parent_path();
  for (const auto& p : {build / "lionet", build / "bin" / "lionet", build / "app" / "lionet"}) {
    if (fs::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

// A running lionet process with stdout+stderr on one pipe. Every wait is bounded (default 60 s)
// so a hung binary fails the test instead of hanging it.
class Process {
 public:
  // env_extra: "KEY=value" entries added to this process's environment; cwd: "" = ours.
  explicit Process(std::vector<std::string> args, std::vector<std::string> env_extra = {}, std::string cwd = {})
      : Process(find_binary(), std::move(args), std::move(env_extra), std::move(cwd)) {}
  // Another program (a third-party peer the test runs): started() is false if it cannot be.
  Process(fs::path binary, std::vector<std::string> args, std::vector<std::string> env_extra = {},
          std::string cwd = {}) {
    binary_ = std::move(binary);
    if (binary_.empty() || ::access(binary_.c_str(), X_OK) != 0) return;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    std::vector<char*> argv{const_cast<char*>(binary_.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) envp.push_back(*e);
    for (auto& e : env_extra) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, binary_.c_str(), &fa, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    fd_ = fds[0];
  }
  ~Process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const fs::path& binary() const { return binary_; }

  // Reads output until it contains `needle` after position `from` (true), or end of output /
  // the timeout (false).
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(60),
                std::size_t from = 0) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (output_.find(needle, from) != std::string::npos) return true;
      if (fd_ < 0) return false;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) {
        ::close(fd_);
        fd_ = -1;
      } else {
        output_.append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  void signal(int sig) { ::kill(pid_, sig); }
  // Reads the rest of the output and returns the exit code (-1 if killed by a signal, -2 if it
  // did not exit within the timeout: it is then killed).
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    wait_for("\x01never\x01", timeout);
    int status = 0;
    if (fd_ >= 0) {  // still running past the timeout
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return -2;
    }
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& output() const { return output_; }

 private:
  fs::path binary_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
};

#define REQUIRE_BINARY(p) \
  ASSERT_TRUE((p).started()) << "lionet binary not found near the test binary (build it, or set TEST_LIONET_BINARY)"

class TempConf {
 public:
  TempConf() {
    dir_ = fs::temp_directory_path() / ("lionet-app-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempConf() { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

// poll_until (tests/common/poll_until.h): every 20 ms until true, 2 s (scaled under a
// sanitizer): for what a server records a moment after the client already has its answer.
using lionet::test::poll_until;

// A port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back, close), and
// never one this process was given before: the kernel may hand the same port to two binds in
// a row once the first socket is closed (AppPackage's four ports once held two equal ones).
inline int free_port() {
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard<std::mutex> g(mu);
  for (;;) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    const int port = ntohs(a.sin_port);
    if (given.insert(port).second) return port;
  }
}
// Runs a shell command; returns its stdout, sets *rc to its exit status.
inline std::string sh(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int st = ::pclose(f);
  if (rc) *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

struct Curl {
  int status = 0;
  std::string body;
};
// curl with a 10 s bound; the status code is written after the body.
inline Curl curl(const std::string& args) {
  std::string out = sh("curl -sS --max-time 10 -w '\\n%{http_code}' " + args + " 2>&1");
  Curl c;
  auto nl = out.rfind('\n');
  if (nl == std::string::npos) return c;
  c.status = std::atoi(out.c_str() + nl + 1);
  c.body = out.substr(0, nl);
  return c;
}

// A TCP connection to 127.0.0.1:port (5 s receive timeout), from `source` when given (another
// loopback address, e.g. "127.0.0.2", for address rules); -1 if it cannot be made.
inline int connect_to(int port, const char* source = nullptr) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (source) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    if (::bind(s, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(s);
      return -1;
    }
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}
}  // namespace lionet::app::testing
