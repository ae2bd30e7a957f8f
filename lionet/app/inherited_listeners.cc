// lionet/app/inherited_listeners.cc: see inherited_listeners.h.
#include "lionet/app/inherited_listeners.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace lionet::app {
namespace {
constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  for (;;) {
    const auto at = s.find(sep);
    out.emplace_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return Address(reinterpret_cast<const sockaddr*>(&ss), len).to_string();
}

bool is_stream_listener(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return false;
  len = sizeof listening;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening;
}
}  // namespace

InheritedListeners InheritedListeners::from_environment() {
  InheritedListeners out;
  int count = 0;
  std::string names;
  const std::string pid = env("LISTEN_PID");
  if (!pid.empty() && std::atoi(pid.c_str()) == static_cast<int>(::getpid())) {
    count = std::atoi(env("LISTEN_FDS").c_str());
    names = env("LISTEN_FDNAMES");
    out.source_ = "systemd socket activation";
  } else if (!env("LIONET_LISTEN_FDS").empty()) {
    count = std::atoi(env("LIONET_LISTEN_FDS").c_str());
    names = env("LIONET_LISTEN_FDNAMES");
    out.source_ = "binary upgrade";
  }
  for (const char* v : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "LIONET_LISTEN_FDS", "LIONET_LISTEN_FDNAMES"})
    ::unsetenv(v);
  const auto name_list = split(names, ':');
  for (int i = 0; i < count && i < 1024; ++i) {
    const int fd = kFirstFd + i;
    Fd f;
    f.fd = fd;
    f.name = i < static_cast<int>(name_list.size()) ? name_list[i] : "";
    if (!is_stream_listener(fd)) {  // a datagram socket, or nothing there: not ours to use
      if (::fcntl(fd, F_GETFD) >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      continue;
    }
    f.address = local_address(fd);
    out.fds_.push_back(std::move(f));
  }
  return out;
}

int InheritedListeners::take(const std::string& server, const Address& address) {
  const std::string want = address.to_string();
  auto claim = [](Fd& f) {
    f.claimed = true;
    return f.fd;
  };
  for (auto& f : fds_)
    if (!f.claimed && f.name == server && f.address == want) return claim(f);
  for (auto& f : fds_)
    if (!f.claimed && f.name == server) return claim(f);
  for (auto& f : fds_)
    if (!f.claimed && f.address == want) return claim(f);
  return -1;
}

std::vector<std::string> InheritedListeners::close_unclaimed() {
  std::vector<std::string> out;
  for (auto& f : fds_) {
    if (f.claimed) continue;
    ::close(f.fd);
    f.claimed = true;
    out.push_back((f.name.empty() ? "(unnamed)" : f.name) + " " + f.address);
  }
  return out;
}
}  // namespace lionet::app
