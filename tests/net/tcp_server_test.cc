// Tests of lionet/net/tcp_server.h, once per IO backend: echo service, connection limit,
// graceful stop (drain, then cancel), EMFILE back-off, an acceptor that shares its worker
// during a connection flood, a listening socket handed over to another server (adopt,
// stop_accepting_keep_sockets).
#include "lionet/net/tcp_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "lionet/sync/wait_group.h"
#include "net_test_util.h"

namespace lionet {
namespace {
using test::Runtime;
using namespace std::chrono_literals;

class TcpServerTest : public test::BackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, TcpServerTest, ::testing::ValuesIn(test::kBackends));

void echo_handler(SocketStream& s) {
  char buf[4096];
  for (;;) {
    auto r = s.read(buf, sizeof buf);
    if (!r || *r == 0) return;
    if (!s.write(buf, *r)) return;
  }
}

// Waits (bounded) until cond() holds, polling every millisecond.
template <class F>
bool eventually(F cond, Duration limit = 10s) {
  auto end = now() + limit;
  while (!cond()) {
    if (now() > end) return false;
    this_fiber::sleep_for(1ms);
  }
  return true;
}

bool echo_once(Socket& c, const std::string& msg) {
  if (!c.write(msg.data(), msg.size(), Deadline::after(5s))) return false;
  std::string got(msg.size(), '\0');
  size_t n = 0;
  while (n < msg.size()) {
    auto r = c.read(got.data() + n, msg.size() - n, Deadline::after(5s));
    if (!r || *r == 0) return false;
    n += *r;
  }
  return got == msg;
}

TEST_P(TcpServerTest, EchoesForManyClientsOnSeveralListeners) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  TcpServer server(rt.io(), echo_handler, {.reuse_port_per_worker = true});
  server.listen(Address::ipv4_loopback(0));
  server.listen(Address::ipv6_loopback(0));
  server.start();
  auto addrs = server.addresses();
  ASSERT_EQ(addrs.size(), 2u);
  rt.run([&] {
    const int clients = 64, rounds = 20;
    std::atomic<int> ok{0};
    WaitGroup wg(clients);
    for (int i = 0; i < clients; ++i) {
      rt.sched()
          .spawn([&, i] {
            auto c = Socket::connect_to(addrs[i % 2], Deadline::after(5s));
            if (c) {
              std::string msg = test::pattern(100 + i, i);
              int good = 0;
              for (int k = 0; k < rounds; ++k) good += echo_once(*c, msg);
              if (good == rounds) ok++;
            }
            wg.done();
          })
          .detach();
    }
    ASSERT_TRUE(wg.wait_for(30s));
    EXPECT_EQ(ok.load(), clients);
  });
  EXPECT_TRUE(server.stop(5s));
  EXPECT_EQ(server.accepted(), 64u);
  EXPECT_EQ(server.connections(), 0u);
}

TEST_P(TcpServerTest, ConnectionsBeyondTheLimitAreClosedAtOnce) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  TcpServer server(rt.io(), echo_handler, {.max_connections = 2});
  server.listen(Address::ipv4_loopback(0));
  server.start();
  Address addr = server.addresses()[0];
  rt.run([&] {
    Socket a = Socket::connect_to(addr).value();
    Socket b = Socket::connect_to(addr).value();
    ASSERT_TRUE(echo_once(a, "a"));  // both admitted and served
    ASSERT_TRUE(echo_once(b, "b"));
    EXPECT_EQ(server.connections(), 2u);
    Socket c = Socket::connect_to(addr).value();  // the kernel completes the handshake...
    char buf[4];
    auto t0 = now();
    auto r = c.read(buf, sizeof buf, Deadline::after(5s));  // ...and the server closes it
    EXPECT_TRUE((r.ok() && *r == 0) || r.error() == std::errc::connection_reset)
        << (r.ok() ? "data" : r.error().message());
    EXPECT_LT(now() - t0, 2s);
    EXPECT_EQ(server.rejected(), 1u);
    // Room again once a connection ends.
    a.close();
    ASSERT_TRUE(eventually([&] { return server.connections() == 1; }));
    Socket d = Socket::connect_to(addr).value();
    EXPECT_TRUE(echo_once(d, "d"));
    EXPECT_TRUE(echo_once(b, "b2"));
  });
  EXPECT_TRUE(server.stop(5s));
}

TEST_P(TcpServerTest, GracefulStopLetsARequestInProgressFinishAndEndsIdleConnections) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  std::atomic<int> in_request{0};
  // Reads one request, "works" 150 ms, writes the response, then waits for the next one.
  auto handler = [&](SocketStream& s) {
    char buf[64];
    for (;;) {
      auto r = s.read(buf, sizeof buf);
      if (!r || *r == 0) return;
      in_request++;
      this_fiber::sleep_for(150ms);
      if (!s.write("response")) return;
    }
  };
  TcpServer server(rt.io(), handler);
  server.listen(Address::ipv4_loopback(0));
  server.start();
  Address addr = server.addresses()[0];
  rt.run([&] {
    Socket idle = Socket::connect_to(addr).value();
    Socket busy = Socket::connect_to(addr).value();
    ASSERT_TRUE(eventually([&] { return server.connections() == 2; }));
    ASSERT_TRUE(busy.write("request", 7).ok());
    ASSERT_TRUE(eventually([&] { return in_request.load() == 1; }));
    auto t0 = now();
    bool drained = false;
    auto stopper = rt.sched().spawn([&] { drained = server.stop(5s); });
    char buf[16];
    auto r = busy.read(buf, sizeof buf, Deadline::after(5s));
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(std::string(buf, *r), "response");
    stopper.join();
    EXPECT_TRUE(drained);
    EXPECT_LT(now() - t0, 3s);
    EXPECT_EQ(server.connections(), 0u);
    r = idle.read(buf, sizeof buf, Deadline::after(5s));  // the idle one was ended
    EXPECT_TRUE(r.ok() && *r == 0);
    // No longer accepting.
    EXPECT_FALSE(Socket::connect_to(addr).ok());
  });
}

// A connection accepted just before stop() whose client has not sent its request yet (a
// binary upgrade hands the listener over while clients connect): its request, sent after
// the drain began, is still read and answered; a connection that stays silent is ended once
// drain_silent_grace has passed, long before the drain deadline.
TEST_P(TcpServerTest, StopStillServesTheFirstRequestOfAFreshConnection) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  TcpServerOptions o;
  o.drain_silent_grace = 300ms;
  TcpServer server(rt.io(), echo_handler, o);
  server.listen(Address::ipv4_loopback(0));
  server.start();
  Address addr = server.addresses()[0];
  rt.run([&] {
    Socket fresh = Socket::connect_to(addr).value();
    auto t0 = now();  // before the silent one is accepted: its grace runs from its accept
    Socket silent = Socket::connect_to(addr).value();
    ASSERT_TRUE(eventually([&] { return server.connections() == 2; }));
    bool drained = false;
    auto stopper = rt.sched().spawn([&] { drained = server.stop(10s); });
    this_fiber::sleep_for(100ms);  // the drain has begun; the request is sent only now
    EXPECT_TRUE(echo_once(fresh, "first request"));
    char buf[16];
    auto r = fresh.read(buf, sizeof buf, Deadline::after(5s));  // then its read side is shut
    EXPECT_TRUE(r.ok() && *r == 0);
    r = silent.read(buf, sizeof buf, Deadline::after(5s));
    EXPECT_TRUE(r.ok() && *r == 0);
    EXPECT_GE(now() - t0, 300ms);  // the silent one was given its grace
    stopper.join();
    EXPECT_TRUE(drained);
    EXPECT_LT(now() - t0, 5s);
    EXPECT_EQ(server.connections(), 0u);
  });
}

TEST_P(TcpServerTest, StopCancelsConnectionsThatOutliveTheDrainDeadline) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  std::atomic<bool> handler_saw_error{false};
  auto stubborn = [&](SocketStream& s) {  // ignores end of stream, writes until it fails
    while (s.write("x").ok()) this_fiber::sleep_for(5ms);
    handler_saw_error = true;
  };
  TcpServer server(rt.io(), stubborn);
  server.listen(Address::ipv4_loopback(0));
  server.start();
  rt.run([&] {
    Socket c = Socket::connect_to(server.addresses()[0]).value();
    ASSERT_TRUE(eventually([&] { return server.connections() == 1; }));
    auto t0 = now();
    EXPECT_FALSE(server.stop(100ms));
    auto took = now() - t0;
    EXPECT_GE(took, 100ms);
    EXPECT_LT(took, 3s);
    EXPECT_TRUE(handler_saw_error.load());
    EXPECT_EQ(server.connections(), 0u);
  });
}

// The acceptor must back off on EMFILE, not spin: CPU time stays far below wall time.
TEST_P(TcpServerTest, AcceptBacksOffOnEmfileAndRecovers) {
#if defined(LIONET_ASAN)
  // The UBSan runtime checks vptrs with a probe that opens a pipe; with every fd taken (what
  // this test does on purpose) the probe fails and UBSan reports a false "invalid vptr".
  GTEST_SKIP() << "not meaningful under ASan/UBSan: the sanitizer runtime itself needs free fds";
#endif
  Runtime rt(1, GetParam());
  require_backend(rt);
  TcpServer server(rt.io(), echo_handler, {.accept_backoff = 20ms});
  server.listen(Address::ipv4_loopback(0));
  Address addr = server.addresses()[0];
  rt.run([&] {
    Socket c = Socket::open(AF_INET).value();  // the client's fd exists before the limit drops
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
    // Lower the soft limit to just above the highest fd in use, then fill every hole below it.
    int top = ::fcntl(0, F_DUPFD, 0);
    int maxfd = top;
    for (int fd = top; fd < top + 4096; ++fd)
      if (::fcntl(fd, F_GETFD) != -1) maxfd = fd;
    ::close(top);
    rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(maxfd + 1);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    std::vector<int> fillers;
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
    // Started only now: io_uring's accept takes the fd limit when it is submitted, so an accept
    // parked in the kernel before the limit dropped would still succeed.
    server.start();
    ASSERT_TRUE(c.connect(addr).ok());  // completes in the backlog; accept4 gets EMFILE
    timespec cpu0{}, cpu1{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    auto t0 = now();
    this_fiber::sleep_for(300ms);  // the window we measure the acceptor's CPU in
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    double cpu_ms = (cpu1.tv_sec - cpu0.tv_sec) * 1e3 + (cpu1.tv_nsec - cpu0.tv_nsec) / 1e6;
    double wall_ms = std::chrono::duration<double, std::milli>(now() - t0).count();
    for (int fd : fillers) ::close(fd);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
    EXPECT_EQ(server.accepted(), 0u);
    EXPECT_LT(cpu_ms, wall_ms * 0.3) << "acceptor spun during EMFILE";
    EXPECT_TRUE(echo_once(c, "after EMFILE"));  // recovered on a later retry
  });
  EXPECT_TRUE(server.stop(5s));
}

// A full backlog must not keep the acceptor on its worker until the backlog is empty: accept4
// succeeds without parking, so before TcpServerOptions::accept_batch one fiber accepted (and
// spawned a handler for) every queued connection in one slice. Found by scripts/abuse.sh: at
// the start of a 20,000-connection flood a keep-alive probe on the same worker waited 65-115
// ms. Here `conns` connections wait in the backlog before start(); a fiber on the same (only)
// worker notes server.accepted() each time it runs: between two of its runs the acceptor may
// take a batch or a few (see the bound in the test; without the yield it took all 1000). Returns the largest gap seen, or -1 if the backend is unavailable or the
// fd limit too low for the test.
long longest_accept_run(const char* backend, TcpServerOptions opts, int conns) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;  // both ends in this process: 2 fds per connection
  ::setrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < static_cast<rlim_t>(2 * conns + 200)) return -1;
  Runtime rt(1, backend);
  if (std::string(rt.io().backend()) != backend) return -1;
  TcpServer server(rt.io(), echo_handler, opts);
  server.listen(Address::ipv4_loopback(0));
  Address addr = server.addresses()[0];
  std::vector<Socket> clients;  // below SOMAXCONN (4096): the kernel queues them all
  for (int i = 0; i < conns; ++i) {  // a plain thread: the kernel completes each handshake
    auto c = Socket::connect_to(addr, Deadline::after(5s));
    EXPECT_TRUE(c.ok()) << i << ": " << c.error().message();
    if (!c.ok()) return 0;
    clients.push_back(std::move(*c));
  }
  server.start();
  uint64_t max_gap = 0, runs = 0;
  rt.run([&] {
    uint64_t prev = 0;
    for (; runs < 1'000'000 && prev < static_cast<uint64_t>(conns); ++runs) {
      uint64_t a = server.accepted();
      max_gap = std::max(max_gap, a - prev);
      prev = a;
      this_fiber::yield();
    }
  });
  EXPECT_EQ(server.accepted(), static_cast<uint64_t>(conns)) << "after " << runs << " runs";
  clients.clear();  // the handlers read end of stream and return
  EXPECT_TRUE(server.stop(5s));
  return static_cast<long>(max_gap);
}

TEST_P(TcpServerTest, AcceptorYieldsToOtherFibersWhileTheBacklogIsFull) {
  ASSERT_GT(TcpServerOptions{}.accept_batch, 0u) << "the default must yield";
  // 64 fits the local run queue (256) with room, so the yield is seen by a yielding fiber too
  // (the default, 512, protects fibers woken by IO; see TcpServerOptions::accept_batch).
  long gap = longest_accept_run(GetParam(), {.accept_batch = 64}, 1000);
  if (gap < 0) GTEST_SKIP() << GetParam() << " unavailable or RLIMIT_NOFILE too low";
  RecordProperty("max_accepts_in_a_row", static_cast<int>(gap));
  // Bound: a few batches. The yielding fiber may queue behind the batch's new connection fibers
  // (and, spilled to the inject queue, be looked at only every 61 ticks): 192 and 256 were seen
  // under ASan with ctest -j2. Without the yield it is all 1000 in one run, so half of that
  // still tells the two apart without failing on a slow machine.
  EXPECT_LT(gap, 500) << "the acceptor kept the worker for " << gap << " accepts in a row (batch 64)";
}
}  // namespace
}  // namespace lionet

namespace lionet {
namespace {
// A server whose pool has no stack left for a new connection's fiber (fiber.max_stack_memory)
// closes that connection at once, counts and logs it, and keeps serving the others; once some
// connections end, new ones are served again.
TEST_P(TcpServerTest, ClosesConnectionsItHasNoFiberForAndKeepsServingOthers) {
  constexpr std::size_t kStack = 128 * 1024;  // sanitizer builds need room
  const std::size_t stride = kStack + static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  constexpr std::size_t kBudget = 24;  // fibers: the acceptor, this test's fiber, 22 connections
  Scheduler sched({.threads = 1, .stack_size = kStack, .max_stack_memory = kBudget * stride});
  {
    IOManager io(sched, IOManagerOptions{.backend = GetParam()});
    if (std::string(io.backend()) != GetParam()) {
      sched.stop();
      GTEST_SKIP() << GetParam() << " unavailable here";
    }
    TcpServer server(io, echo_handler);
    server.listen(Address::ipv4_loopback(0));
    server.start();
    const Address addr = server.addresses()[0];
    sched
        .spawn([&] {
          std::vector<Socket> served;
          int refused = 0;
          for (int i = 0; i < 40 && refused < 3; ++i) {
            auto c = Socket::connect_to(addr, Deadline::after(5s));
            ASSERT_TRUE(c) << "connect " << i;
            if (echo_once(*c, "hello " + std::to_string(i))) {
              served.push_back(std::move(*c));
            } else {
              ++refused;  // closed at once: the client reads end of stream
            }
          }
          EXPECT_EQ(refused, 3);
          EXPECT_EQ(served.size(), kBudget - 2);
          EXPECT_EQ(server.spawn_failures(), 3u);
          for (size_t k = 0; k < served.size(); ++k) EXPECT_TRUE(echo_once(served[k], "still " + std::to_string(k)));
          served.resize(served.size() - 5);  // five clients leave: their fibers end
          ASSERT_TRUE(eventually([&] { return server.connections() == kBudget - 2 - 5; }));
          ASSERT_TRUE(eventually([&] { return sched.alive() <= kBudget - 5; }));
          auto again = Socket::connect_to(addr, Deadline::after(5s));
          ASSERT_TRUE(again);
          EXPECT_TRUE(echo_once(*again, "served again"));
        })
        .join();
    server.stop(1s);
    sched.stop();
  }
}
}  // namespace
}  // namespace lionet

namespace lionet {
namespace {
// A listening socket handed to another server (another process in a binary upgrade, or
// systemd's copy: here a dup in the same process) keeps listening after the first server stops
// with stop_accepting_keep_sockets(): the acceptor parked in its wait is woken without
// shutdown(2), which would have stopped the socket for both (a plain stop() here fails the
// second server's connects: checked when this test was written).
TEST_P(TcpServerTest, AHandedOverListenerKeepsAcceptingAfterTheFirstServerStops) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  TcpServer first(rt.io(), echo_handler);
  first.listen(Address::ipv4_loopback(0));
  first.start();
  const Address addr = first.addresses()[0];
  ASSERT_EQ(first.listening_fds().size(), 1u);
  const int copy = ::fcntl(first.listening_fds()[0], F_DUPFD_CLOEXEC, 0);
  ASSERT_GE(copy, 0);
  TcpServer second(rt.io(), echo_handler);
  second.adopt(copy);
  EXPECT_EQ(second.addresses()[0].to_string(), addr.to_string());
  rt.run([&] {
    auto c = Socket::connect_to(addr, Deadline::after(5s));
    ASSERT_TRUE(c);
    EXPECT_TRUE(echo_once(*c, "served by the first"));
  });
  first.stop_accepting_keep_sockets();  // its acceptor was parked in accept's wait
  EXPECT_TRUE(first.stop(5s));
  EXPECT_EQ(first.accepted(), 1u);
  second.start();
  const int kClients = 20;
  rt.run([&] {
    for (int i = 0; i < kClients; ++i) {
      auto c = Socket::connect_to(addr, Deadline::after(5s));
      ASSERT_TRUE(c) << i;
      EXPECT_TRUE(echo_once(*c, "served by the second")) << i;
    }
  });
  EXPECT_TRUE(second.stop(5s));
  EXPECT_EQ(second.accepted(), static_cast<uint64_t>(kClients));
}

TEST_P(TcpServerTest, AdoptRejectsAnFdThatIsNotAListeningSocket) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  TcpServer server(rt.io(), echo_handler);
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not listening
  EXPECT_THROW(server.adopt(s), std::system_error);
  ::close(s);
}
}  // namespace
}  // namespace lionet
