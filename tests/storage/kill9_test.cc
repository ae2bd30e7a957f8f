// tests/storage/kill9_test.cc: kill -9 torture. A child process appends with flush policy
// every_batch and reports each acknowledged end offset on a pipe; the parent SIGKILLs it at a
// random moment, reopens the log and checks that every acknowledged record is present and
// intact (and nothing partial is visible), 50 times (12 under sanitizers).
//
// How the child runs: the parent fork()s and immediately exec()s this same test binary
// (/proc/self/exe) with LIONET_STORAGE_KILL9_DIR and LIONET_STORAGE_KILL9_FD in its
// environment and --gtest_filter=StorageKill9Child.*; a static initializer below registers
// that child test only when the variables are set, so normal runs and ctest discovery never
// see it. exec right after fork keeps the child clean of the parent's threads and locks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lionet/storage/log.h"
#include "tests/storage/storage_test_util.h"

extern char** environ;

namespace lionet::storage {
namespace {

LogOptions kill9_options() {
  LogOptions o;
  o.segment_bytes = 16384;  // rolls happen under the kills too
  o.index_interval_bytes = 512;
  o.flush_policy = FlushPolicy::kEveryBatch;
  return o;
}

// The child: append until killed (bounded: 20000 batches or 30 s), report every ack.
void child_main(const std::string& dir, int fd) {
  auto log = Log::open(dir, kill9_options());
  if (!log) std::_Exit(2);
  std::vector<std::string> keys, values;
  std::vector<Record> recs;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 20000 && std::chrono::steady_clock::now() < deadline; i++) {
    const int64_t first = (*log)->end_offset();
    const int n = 1 + i % 3;
    keys.clear();
    values.clear();
    recs.clear();
    for (int k = 0; k < n; k++) {
      keys.push_back(test::key_for(first + k));
      values.push_back(test::value_for(first + k));
    }
    for (int k = 0; k < n; k++) recs.push_back(Record{keys[k], values[k], 1000 + first + k});
    auto r = (*log)->append_batch(recs);
    if (!r || *r != first) std::_Exit(3);
    const int64_t acked = first + n;
    if (::write(fd, &acked, sizeof acked) != sizeof acked) std::_Exit(4);
  }
  std::_Exit(0);
}

const bool kChildRegistered = [] {
  const char* dir = std::getenv("LIONET_STORAGE_KILL9_DIR");
  const char* fd = std::getenv("LIONET_STORAGE_KILL9_FD");
  if (!dir || !fd) return false;
  std::string d = dir;
  int f = std::atoi(fd);
  testing::RegisterTest("StorageKill9Child", "AppendUntilKilled", nullptr, nullptr, __FILE__, __LINE__,
                        [d, f]() -> testing::Test* {
                          child_main(d, f);
                          return nullptr;
                        });
  return true;
}();

// Starts the child; returns its pid and the read end of its ack pipe.
pid_t spawn_child(const std::string& dir, int* read_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  // Everything exec needs is built before fork (only async-signal-safe calls after it).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; e++) env_strings.emplace_back(*e);
  env_strings.push_back("LIONET_STORAGE_KILL9_DIR=" + dir);
  env_strings.push_back("LIONET_STORAGE_KILL9_FD=" + std::to_string(fds[1]));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=StorageKill9Child.*";
  std::string exe = "/proc/self/exe";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::fcntl(fds[1], F_SETFD, 0);  // the write end survives exec
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execve(exe.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(devnull);
  ::close(fds[1]);
  *read_fd = fds[0];
  return pid;
}

// Reads one ack (8 bytes) with a timeout; false at EOF or timeout.
bool read_ack(int fd, int64_t* ack, int timeout_ms) {
  std::size_t got = 0;
  char* p = reinterpret_cast<char*>(ack);
  while (got < sizeof *ack) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    ssize_t n = ::read(fd, p + got, sizeof *ack - got);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

TEST(StorageKill9, EveryAcknowledgedRecordSurvivesSigkill) {
  test::TempDir d;
  std::mt19937 rng(99);
  const int kills = 50 / test::kSanitizerDivisor;  // 50 kills (12 under sanitizers)
  int64_t acked = 0;
  for (int round = 0; round < kills; round++) {
    int fd = -1;
    pid_t pid = spawn_child(d.path(), &fd);
    ASSERT_GT(pid, 0);
    // Kill after a random number of acks (0..40), plus a random few hundred microseconds so
    // the kill lands anywhere in an append: encode, write, fdatasync, or the ack itself.
    const int wait_acks = static_cast<int>(rng() % 41);
    int64_t ack = 0;
    for (int i = 0; i < wait_acks; i++) {
      ASSERT_TRUE(read_ack(fd, &ack, 20000)) << "child stopped acknowledging (round " << round << ")";
      acked = std::max(acked, ack);
    }
    const auto spin = std::chrono::microseconds(rng() % 2000);
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < spin) {
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    while (read_ack(fd, &ack, 1000)) acked = std::max(acked, ack);  // acks written before death
    ::close(fd);
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "child failed (round " << round << ")";
    }
    auto log = Log::open(d.path(), kill9_options());
    ASSERT_TRUE(log.ok()) << log.error().message();
    const int64_t end = (*log)->end_offset();
    ASSERT_GE(end, acked) << "acknowledged records lost in round " << round;
    ASSERT_EQ(test::verify_range(**log, 0, end), end) << "round " << round;
  }
  EXPECT_GT(acked, 0);
}

}  // namespace
}  // namespace lionet::storage
