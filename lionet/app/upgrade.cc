// lionet/app/upgrade.cc: see upgrade.h for the handover protocol.
#include "lionet/app/upgrade.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "lionet/log/log.h"

extern char** environ;

namespace lionet::app {
namespace {
constexpr int kFirstFd = 3;  // where inherited listeners start, as with systemd

// Reads one '\n'-terminated message into `line` within `timeout`. false: end of stream, an
// error or the timeout (errno = ETIMEDOUT then).
bool read_line(int fd, std::string& buffered, std::string& line, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto nl = buffered.find('\n'); nl != std::string::npos) {
      line = buffered.substr(0, nl);
      buffered.erase(0, nl + 1);
      return true;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // the deadline check above ends it
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errno = n == 0 ? EPIPE : errno;
      return false;
    }
    buffered.append(buf, static_cast<std::size_t>(n));
  }
}

bool write_line(int fd, const std::string& msg) {
  const std::string s = msg + "\n";
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

bool dropped_from_env(const char* entry) {
  for (const char* name : {"LISTEN_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES=", "LIONET_LISTEN_FDS=",
                           "LIONET_LISTEN_FDNAMES=", "LIONET_UPGRADE_FD="})
    if (std::strncmp(entry, name, std::strlen(name)) == 0) return true;
  return false;
}
}  // namespace

BinaryUpgrade::BinaryUpgrade(int argc, char** argv) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  exe_ = ec ? std::string(argc > 0 ? argv[0] : "lionet") : exe.string();
  for (int i = 0; i < argc; ++i) argv_.emplace_back(argv[i]);
}

BinaryUpgrade::Outcome BinaryUpgrade::run(const std::vector<Listener>& listeners,
                                          const std::function<void()>& hand_over, std::chrono::milliseconds timeout) {
  auto lg = log::get("app");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    LIONET_LOG_ERROR(lg, "upgrade: socketpair: {}", std::strerror(errno));
    return Outcome::kFailed;
  }
  // Copies above every number the new process's layout uses, so that dup2 onto 3.. cannot
  // overwrite a source before it is copied.
  const int n = static_cast<int>(listeners.size());
  std::vector<int> srcs;
  for (const auto& l : listeners) srcs.push_back(l.fd);
  srcs.push_back(sv[1]);
  std::vector<int> high;
  for (int src : srcs) high.push_back(::fcntl(src, F_DUPFD_CLOEXEC, kFirstFd + n + 1));
  std::string names;
  for (const auto& l : listeners) (names.empty() ? names : names += ':') += l.name;
  std::vector<std::string> env_own = {"LIONET_LISTEN_FDS=" + std::to_string(n), "LIONET_LISTEN_FDNAMES=" + names,
                                      "LIONET_UPGRADE_FD=" + std::to_string(kFirstFd + n)};
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (!dropped_from_env(*e)) envp.push_back(*e);
  for (auto& e : env_own) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : argv_) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int i = 0; i <= n; ++i) posix_spawn_file_actions_adddup2(&fa, high[static_cast<std::size_t>(i)], kFirstFd + i);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Nothing else of this process reaches the new one (log files that spdlog opened without
  // O_CLOEXEC would otherwise stay open there for good, rotated or not).
  posix_spawn_file_actions_addclosefrom_np(&fa, kFirstFd + n + 1);
#endif
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, exe_.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  for (int fd : high) ::close(fd);
  ::close(sv[1]);
  const int ch = sv[0];
  if (err != 0) {
    ::close(ch);
    LIONET_LOG_ERROR(lg, "upgrade: cannot start {}: {}; still serving", exe_, std::strerror(err));
    return Outcome::kFailed;
  }
  new_pid_ = pid;
  LIONET_LOG_INFO(lg, "upgrade: started {} (pid {}) with {} listening socket(s)", exe_, pid, n);

  bool released = false;
  Outcome out = Outcome::kFailed;
  std::string buffered, line;
  for (;;) {
    if (!read_line(ch, buffered, line, timeout)) {
      const bool timed_out = errno == ETIMEDOUT;
      if (timed_out) ::kill(pid, SIGTERM);
      int status = 0;
      // After end of stream the new process is exiting (or exec'd a program that closed the fd).
      if (::waitpid(pid, &status, timed_out ? 0 : WNOHANG) == pid && WIFEXITED(status))
        LIONET_LOG_ERROR(lg, "upgrade: the new process (pid {}) exited with status {}", pid, WEXITSTATUS(status));
      if (released) {
        LIONET_LOG_CRITICAL(lg, "upgrade: the new process failed after this one handed over: exiting");
        out = Outcome::kFailedAfterRelease;
      } else {
        LIONET_LOG_ERROR(lg, "upgrade: the new process {}; still serving",
                         timed_out ? "did not answer in time (sent SIGTERM)" : "went away before it was ready");
      }
      break;
    }
    if (line == "RELEASE" && !released) {
      LIONET_LOG_INFO(lg, "upgrade: the new process needs the store: stop accepting, drain, close the store");
      hand_over();
      released = true;
      if (!write_line(ch, "RELEASED")) continue;  // it went away: the next read says so
    } else if (line == "READY") {
      LIONET_LOG_INFO(lg, "upgrade: the new process (pid {}) is serving", pid);
      if (!released) hand_over();
      out = Outcome::kHandedOver;
      break;
    }
  }
  ::close(ch);
  return out;
}

UpgradeChannel UpgradeChannel::from_environment() {
  UpgradeChannel c;
  if (const char* v = std::getenv("LIONET_UPGRADE_FD")) {
    const int fd = std::atoi(v);
    if (fd >= kFirstFd && ::fcntl(fd, F_GETFD) >= 0) {
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      c.fd_ = fd;
    }
    ::unsetenv("LIONET_UPGRADE_FD");
  }
  return c;
}

UpgradeChannel::UpgradeChannel(UpgradeChannel&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
UpgradeChannel& UpgradeChannel::operator=(UpgradeChannel&& o) noexcept {
  std::swap(fd_, o.fd_);
  return *this;
}
UpgradeChannel::~UpgradeChannel() {
  if (fd_ >= 0) ::close(fd_);
}

void UpgradeChannel::release_store(std::chrono::milliseconds timeout) {
  if (fd_ < 0) return;
  std::string buffered, line;
  if (!write_line(fd_, "RELEASE") || !read_line(fd_, buffered, line, timeout) || line != "RELEASED")
    throw std::runtime_error(std::string("upgrade: the old process did not release the store: ") +
                             std::strerror(errno));
}

void UpgradeChannel::ready() {
  if (fd_ < 0) return;
  (void)write_line(fd_, "READY");
  ::close(fd_);
  fd_ = -1;
}
}  // namespace lionet::app
