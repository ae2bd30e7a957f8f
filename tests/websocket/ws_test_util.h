// Shared helpers of the websocket/ tests: a raw WebSocket client over a plain socket (for bytes
// no well-behaved client sends), a recorder of how server-side sockets ended, and the Python
// `websockets` peer (tests/websocket/ws_peer.py) as a child process.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/sanitizers.h"
#include "../http/http_test_util.h"
#include "lionet/net/socket.h"
#include "lionet/websocket/frame.h"
#include "lionet/websocket/socket.h"

extern char** environ;

namespace lionet::websocket::test {
using namespace std::chrono_literals;
using http::test::shell;

inline Duration scaled(Duration d) { return std::chrono::duration_cast<Duration>(d * lionet::test::kSlowdown); }

// One frame as a client sends it (masked with a fixed key) or with `masked` false.
inline std::string client_frame(bool fin, uint8_t opcode, std::string_view payload, bool masked = true,
                                uint8_t rsv = 0) {
  constexpr uint32_t kKey = 0x5A3C96E1;
  uint8_t h[kMaxHeaderSize];
  size_t n = write_frame_header(h, fin, static_cast<Opcode>(opcode), payload.size(), masked, kKey);
  h[0] |= rsv;
  std::string out(reinterpret_cast<char*>(h), n);
  std::string p(payload);
  if (masked) apply_mask(p.data(), p.size(), kKey, 0);
  return out + p;
}

// A frame the server sent, as read off the wire.
struct RawFrame {
  bool ok = false;  // a whole frame was read
  uint8_t opcode = 0;
  bool fin = false;
  std::string payload;
  uint16_t close_code() const {
    return payload.size() >= 2 ? static_cast<uint16_t>((uint8_t(payload[0]) << 8) | uint8_t(payload[1])) : 0;
  }
};

// A WebSocket client made of a plain socket (usable from the test's thread): handshake, raw
// bytes out, server frames in.
class RawWs {
 public:
  explicit RawWs(uint16_t port) {
    sock_ = lionet::Socket::connect_to(Address::ipv4_loopback(port), Deadline::after(5s)).value();
  }
  // Sends the opening handshake for `path` (with `headers`, "Name: value\r\n" lines, and
  // `extra` bytes after the head in the same write) and reads the response head; returns it.
  std::string handshake(const std::string& path, const std::string& extra = {}, const std::string& headers = {}) {
    std::string req = "GET " + path +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
                      headers + "\r\n" + extra;
    send(req);
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 16384) {
      if (!read_exact(&c, 1)) break;
      head.push_back(c);
    }
    return head;
  }
  bool send(std::string_view s) { return sock_.write(s.data(), s.size(), Deadline::after(5s)).ok(); }
  bool read_exact(char* p, size_t n, Duration limit = 5s) {
    TimePoint end = now() + scaled(limit);
    size_t got = 0;
    while (got < n) {
      auto r = sock_.read(p + got, n - got, Deadline::at(end));
      if (!r || *r == 0) return false;
      got += *r;
    }
    return true;
  }
  RawFrame read_frame(Duration limit = 5s) {
    RawFrame f;
    uint8_t h[10];
    if (!read_exact(reinterpret_cast<char*>(h), 2, limit)) return f;
    f.fin = h[0] & 0x80;
    f.opcode = h[0] & 0x0F;
    uint64_t len = h[1] & 0x7F;
    if (len == 126) {
      if (!read_exact(reinterpret_cast<char*>(h + 2), 2, limit)) return f;
      len = (uint64_t{h[2]} << 8) | h[3];
    } else if (len == 127) {
      if (!read_exact(reinterpret_cast<char*>(h + 2), 8, limit)) return f;
      len = 0;
      for (int i = 2; i < 10; ++i) len = (len << 8) | h[i];
    }
    if (len > (64u << 20)) return f;
    f.payload.resize(len);
    if (len && !read_exact(f.payload.data(), len, limit)) return f;
    f.ok = true;
    return f;
  }
  // True if the server ends the stream (after anything it still sends) within limit.
  bool sees_end_of_stream(Duration limit = 5s) {
    char buf[4096];
    TimePoint end = now() + scaled(limit);
    while (now() < end) {
      auto r = sock_.read(buf, sizeof buf, Deadline::at(end));
      if (!r) return r.error() != std::errc::timed_out;
      if (*r == 0) return true;
    }
    return false;
  }
  lionet::Socket& socket() { return sock_; }

 private:
  lionet::Socket sock_;
};

// How the server-side sockets of a test ended: handlers call add() when their socket is over.
class Endings {
 public:
  void add(uint16_t code, std::string_view reason) {
    std::lock_guard<std::mutex> g(mu_);
    codes_.push_back(code);
    reasons_.emplace_back(reason);
  }
  // Waits (bounded) until n endings were recorded; returns the codes.
  std::vector<uint16_t> wait_for(size_t n, Duration limit = 10s) {
    TimePoint end = now() + scaled(limit);
    for (;;) {
      {
        std::lock_guard<std::mutex> g(mu_);
        if (codes_.size() >= n || now() >= end) return codes_;
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  std::string reason(size_t i) {
    std::lock_guard<std::mutex> g(mu_);
    return i < reasons_.size() ? reasons_[i] : std::string();
  }

 private:
  std::mutex mu_;
  std::vector<uint16_t> codes_;
  std::vector<std::string> reasons_;
};

// Python `websockets` 13.1 in the venv scripts/install-deps.sh makes (CMake cache variable
// LIONET_TEST_PYTHON). A test that needs it fails when it is missing: a skipped interop test
// would pass CI having proved nothing.
inline std::string python() { return LIONET_TEST_PYTHON; }
inline std::string python_websockets_missing() {
  int st = -1;
  const std::string out = shell("'" + python() +
                                    "' -c 'import websockets, websockets.sync.client, websockets.sync.server; "
                                    "print(websockets.__version__)' 2>&1",
                                &st);
  if (st == 0) return {};
  return "Python websockets is not importable by " + python() +
         " (run scripts/install-deps.sh, or set the CMake "
         "cache variable LIONET_TEST_PYTHON): " +
         out;
}
// Node with the npm package ws under LIONET_TEST_NODE_PATH (install-deps' prefix). A test
// that needs it fails when it is missing, as for Python.
inline std::vector<std::string> node_command(const std::string& script) {
  return {"/usr/bin/env", std::string("NODE_PATH=") + LIONET_TEST_NODE_PATH, LIONET_TEST_NODE, script};
}
inline std::string node_ws_missing() {
  int st = -1;
  const std::string out = shell(
      std::string("NODE_PATH='") + LIONET_TEST_NODE_PATH + "' '" + LIONET_TEST_NODE + "' -e \"require('ws')\" 2>&1",
      &st);
  if (st == 0) return {};
  return std::string("Node's ws is not loadable by ") + LIONET_TEST_NODE + " with NODE_PATH=" + LIONET_TEST_NODE_PATH +
         " (run scripts/install-deps.sh, or set LIONET_TEST_NODE / LIONET_TEST_NODE_PATH): " + out;
}
// One literal each (LIONET_SOURCE_DIR is a string literal): GCC 12 warned falsely
// (-Warray-bounds, a memcpy "out of the bounds" of the temporary) on std::string(dir) + "...".
inline std::string node_peer_script() { return LIONET_SOURCE_DIR "/tests/websocket/ws_peer.js"; }
inline std::string peer_script() { return LIONET_SOURCE_DIR "/tests/websocket/ws_peer.py"; }

// A child process with stdout and stderr to a file; killed (by its pid) at destruction.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    char tmpl[] = "/tmp/lionet-ws-peer-XXXXXX";
    int fd = mkstemp(tmpl);
    out_ = tmpl;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fd);
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unlink(out_.c_str());
  }
  // Waits (bounded) for the exit; its status, or -1 on timeout (then it is killed).
  int wait(Duration limit) {
    TimePoint end = now() + scaled(limit);
    while (now() < end) {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(10ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    exited_ = true;
    return -1;
  }
  std::string output() const {
    std::ifstream f(out_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Waits (bounded) for a line "PORT <n>" in the output; 0 if none came.
  uint16_t wait_for_port(Duration limit = 10s) {
    TimePoint end = now() + scaled(limit);
    while (now() < end) {
      std::string out = output();
      size_t p = out.find("PORT ");
      if (p != std::string::npos && out.find('\n', p) != std::string::npos)
        return static_cast<uint16_t>(std::stoi(out.substr(p + 5)));
      std::this_thread::sleep_for(10ms);
    }
    return 0;
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string out_;
};
}  // namespace lionet::websocket::test
