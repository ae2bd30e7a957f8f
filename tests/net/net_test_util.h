// Shared helpers of the net/ tests: a scheduler + IOManager per test, the backends to run
// each suite on, and a connected socket pair on 127.0.0.1 (ephemeral port).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "lionet/io/io_manager.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"
#include "lionet/sched/scheduler.h"

namespace lionet::test {
#if defined(LIONET_TSAN) || defined(LIONET_ASAN)
inline constexpr int kScale = 10;  // sanitizers run 5-20x slower: counts divided by this
#else
inline constexpr int kScale = 1;
#endif

using namespace std::chrono_literals;

inline const char* kBackends[] = {"epoll", "io_uring"};

// A Scheduler with an IOManager attached; stops the scheduler before detaching the manager.
class Runtime {
 public:
  Runtime(int threads, const std::string& backend)
      // Shared-ring operations on: with io_uring, these tests cover net::Socket over the
      // completion-based calls with one worker and with several.
      : sched_({.threads = threads}),
        io_(sched_, IOManagerOptions{.backend = backend, .uring_shared_ring_ops = true}) {}
  ~Runtime() { sched_.stop(); }
  Scheduler& sched() { return sched_; }
  IOManager& io() { return io_; }
  // Runs body() in a fiber and waits for it (rethrowing its exception: gtest sees failures).
  template <class F>
  auto run(F&& body) {
    return sched_.spawn(std::forward<F>(body)).join();
  }

 private:
  Scheduler sched_;
  IOManager io_;
};

// Parameterised on the backend name; skips io_uring where it fell back to epoll.
class BackendTest : public ::testing::TestWithParam<const char*> {
 protected:
  void require_backend(Runtime& rt) {
    if (std::string(rt.io().backend()) != GetParam()) GTEST_SKIP() << GetParam() << " unavailable here";
  }
};

struct Pair {
  Socket listener, client, server;
};

// A listener on 127.0.0.1:0, a client connected to it, and the accepted server side.
// Call from a fiber (or a plain thread).
inline Pair make_pair_sockets() {
  Pair p;
  p.listener = Socket::listen_on(Address::ipv4_loopback(0));
  Address addr = p.listener.local_address().value();
  p.client = Socket::connect_to(addr).value();
  p.server = p.listener.accept(nullptr, Deadline::after(5s)).value();
  return p;
}

inline std::string pattern(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed + i / 251) % 26);
  return s;
}

// An unlinked temporary file holding `content` (for sendfile tests); -1 on failure. The
// caller closes it.
inline int temp_file_with(const std::string& content) {
  char path[] = "/tmp/lionet-net-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  ::unlink(path);
  if (::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}
}  // namespace lionet::test
