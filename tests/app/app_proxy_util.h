// tests/app/app_proxy_util.h: the client side and the misbehaving upstreams of
// app_proxy_test.cc: the body pattern (byte i of a body is i % 256, as proxy_upstream.py
// checks it), ProxyClient (a raw-socket HTTP/1.1 client that reports the framing it read: 1xx,
// chunked, trailers, a body cut short), status_kb() (a process's VmRSS/VmHWM) and BadUpstream
// (a listener that accepts and stays silent, or answers garbage).
#pragma once

#include <netinet/tcp.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../common/sanitizers.h"
#include "app_process.h"

namespace lionet::app::testing {

constexpr uint64_t kMiB = 1 << 20;

// The body pattern both sides use: byte i of a body is i % 256.
inline const std::string& pattern_block() {
  static const std::string b = [] {
    std::string s(65536 + 256, '\0');
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i % 256);
    return s;
  }();
  return b;
}
inline std::string_view pattern_at(uint64_t offset, size_t n) {  // n <= 65536
  return std::string_view(pattern_block()).substr(offset % 256, n);
}

// One response as the client read it off the wire.
struct Reply {
  int status = 0;
  std::vector<int> interim;  // 1xx statuses read before it
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;  // unless a sink took it
  uint64_t body_bytes = 0;
  bool chunked = false;
  bool complete = false;  // its framing's end was read (false: the connection closed first)
  std::string trailers;  // the trailer section of a chunked body, raw

  std::vector<std::string> all(std::string_view name) const {
    std::vector<std::string> v;
    for (const auto& [n, val] : fields)
      if (std::equal(n.begin(), n.end(), name.begin(), name.end(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
        v.push_back(val);
    return v;
  }
  std::string header(std::string_view name) const {
    auto v = all(name);
    return v.empty() ? std::string() : v.front();
  }
  bool has(std::string_view name) const { return !all(name).empty(); }
};

// A blocking HTTP/1.1 client connection (raw socket), each read bounded by timeout.
class ProxyClient {
 public:
  using Sink = std::function<void(const char*, size_t)>;
  explicit ProxyClient(int port,
                       std::chrono::seconds timeout = std::chrono::seconds(static_cast<int>(30 * test::kSlowdown))) {
    fd_ = connect_to(port);
    if (fd_ < 0) return;
    timeval tv{static_cast<time_t>(timeout.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~ProxyClient() { close(); }
  ProxyClient(const ProxyClient&) = delete;
  ProxyClient& operator=(const ProxyClient&) = delete;
  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // n bytes of the pattern starting at body offset `offset`, as one piece or as chunks of
  // `chunk` bytes (chunked framing; the last chunk is the caller's).
  bool send_pattern(uint64_t offset, uint64_t n, size_t chunk = 0) {
    while (n > 0) {
      const size_t piece = static_cast<size_t>(std::min<uint64_t>(n, chunk ? chunk : 65536));
      if (chunk) {
        char size[24];
        std::snprintf(size, sizeof size, "%zx\r\n", piece);
        if (!send(size)) return false;
      }
      for (size_t done = 0; done < piece;) {
        const size_t k = std::min<size_t>(piece - done, 65536);
        if (!send(pattern_at(offset + done, k))) return false;
        done += k;
      }
      if (chunk && !send("\r\n")) return false;
      offset += piece;
      n -= piece;
    }
    return true;
  }

  // Reads one response (after any 1xx). head_request: the request was HEAD (no body follows).
  // sink: takes the body's bytes instead of Reply::body.
  Reply read(bool head_request = false, const Sink& sink = {}) {
    Reply r;
    for (;;) {
      size_t end;
      while ((end = buf_.find("\r\n\r\n", pos_)) == std::string::npos)
        if (!fill()) return r;
      const std::string head = buf_.substr(pos_, end + 4 - pos_);
      pos_ = end + 4;
      r.fields.clear();
      r.status = head.size() > 12 ? std::atoi(head.c_str() + 9) : 0;
      size_t at = head.find("\r\n") + 2;
      while (at < head.size() - 2) {
        const size_t nl = head.find("\r\n", at);
        const std::string line = head.substr(at, nl - at);
        const size_t colon = line.find(':');
        std::string v = colon == std::string::npos ? "" : line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        r.fields.emplace_back(line.substr(0, colon), v);
        at = nl + 2;
      }
      if (r.status >= 100 && r.status < 200 && r.status != 101) {
        r.interim.push_back(r.status);
        continue;
      }
      break;
    }
    auto take = [&](size_t n) {
      r.body_bytes += n;
      if (sink) sink(buf_.data() + pos_, n);
      else r.body.append(buf_, pos_, n);
      pos_ += n;
    };
    if (head_request || r.status == 204 || r.status == 304 || r.status < 200) {
      r.complete = true;
      return r;
    }
    const std::string te = r.header("transfer-encoding");
    if (te.find("chunked") != std::string::npos) {
      r.chunked = true;
      for (;;) {
        size_t nl;
        while ((nl = buf_.find("\r\n", pos_)) == std::string::npos)
          if (!fill()) return r;
        const uint64_t size = std::strtoull(buf_.c_str() + pos_, nullptr, 16);
        pos_ = nl + 2;
        if (size == 0) break;
        for (uint64_t left = size; left > 0;) {
          if (pos_ == buf_.size() && !fill()) return r;
          const size_t k = static_cast<size_t>(std::min<uint64_t>(left, buf_.size() - pos_));
          take(k);
          left -= k;
        }
        while (buf_.size() - pos_ < 2)
          if (!fill()) return r;
        pos_ += 2;
      }
      // Trailer section: fields until an empty line.
      for (;;) {
        size_t nl;
        while ((nl = buf_.find("\r\n", pos_)) == std::string::npos)
          if (!fill()) return r;
        const std::string line = buf_.substr(pos_, nl - pos_);
        pos_ = nl + 2;
        if (line.empty()) break;
        r.trailers.append(line).append("\n");
      }
      r.complete = true;
      return r;
    }
    const std::string cl = r.header("content-length");
    if (!cl.empty()) {
      for (uint64_t left = std::strtoull(cl.c_str(), nullptr, 10); left > 0;) {
        if (pos_ == buf_.size() && !fill()) return r;
        const size_t k = static_cast<size_t>(std::min<uint64_t>(left, buf_.size() - pos_));
        take(k);
        left -= k;
      }
      r.complete = true;
      return r;
    }
    for (;;) {  // delimited by the close
      if (pos_ < buf_.size()) take(buf_.size() - pos_);
      if (!fill()) break;
    }
    r.complete = eof_;
    return r;
  }
  // True when the server closed the connection (end of stream or reset) before sending more.
  bool closed() {
    if (pos_ < buf_.size()) return false;
    return !fill();
  }
  bool eof() const { return eof_; }

 private:
  bool fill() {
    if (fd_ < 0) return false;
    if (pos_ > 0 && pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    } else if (pos_ > (1u << 20)) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    char tmp[256 * 1024];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      eof_ = n == 0;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
};

// A body sink checking the pattern and counting.
struct PatternCheck {
  uint64_t offset = 0;
  uint64_t bad = 0;
  ProxyClient::Sink sink() {
    return [this](const char* p, size_t n) {
      while (n > 0) {
        const size_t k = std::min<size_t>(n, 65536);
        if (std::memcmp(p, pattern_at(offset, k).data(), k) != 0) ++bad;
        offset += k;
        p += k;
        n -= k;
      }
    };
  }
};

// Memory of a process (kB), from /proc/PID/status.
inline uint64_t status_kb(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10);
  return 0;
}

// A listener on 127.0.0.1 misbehaving as an upstream: kSilent accepts and never answers;
// kGarbage answers each connection's first bytes with something that is not HTTP and closes.
class BadUpstream {
 public:
  enum Kind { kSilent, kGarbage };
  explicit BadUpstream(Kind kind) : kind_(kind) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(lfd_, 64);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~BadUpstream() {
    ::shutdown(lfd_, SHUT_RDWR);  // accept() returns
    thread_.join();
    ::close(lfd_);
    for (int fd : held_) ::close(fd);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void run() {
    for (;;) {
      const int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      accepted_.fetch_add(1);
      if (kind_ == kSilent) {
        held_.push_back(fd);
        continue;
      }
      char b[4096];
      (void)::recv(fd, b, sizeof b, 0);
      const std::string junk = "SSH-2.0-OpenSSH_9.2 this is not HTTP\r\n\r\n";
      (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  }
  Kind kind_;
  int lfd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::vector<int> held_;  // the accept thread's only, read after the join
  std::thread thread_;
};
}  // namespace lionet::app::testing
