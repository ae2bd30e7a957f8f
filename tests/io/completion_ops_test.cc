// IOManager's completion-based socket calls (io_manager.h: recv, send, recvmsg, sendmsg,
// accept, connect; protocol 9 of io_manager.cc), on the io_uring backend; and on epoll, that
// they are refused (completion_io() false, -ENOTSUP), so callers keep the readiness path.
//
// Raw fds and raw syscalls, as io_manager_test.cc, so nothing here depends on hook/.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "io_test_util.h"
#include "lionet/io/io_manager.h"
#include "lionet/sched/scheduler.h"

namespace {
using namespace std::chrono_literals;
using namespace lionet::io_test;  // sys_read, sys_write, sys_close, Pair, make_socketpair, await_waiters

struct OpsRig {
  lionet::Scheduler sched;
  lionet::IOManager io;
  OpsRig(int threads, const std::string& backend, bool ops = true)
      : sched({.threads = threads, .name = "ops-test"}),
        io(sched, {.backend = backend, .uring_socket_ops = ops, .uring_shared_ring_ops = true}) {}
  // With several workers this is one single-issuer ring per worker (the default,
  // uring_ring_per_worker); uring_shared_ring_ops only matters on a kernel without them.
  ~OpsRig() { sched.stop(); }
  void close(int fd) {
    io.cancel(fd);
    sys_close(fd);
  }
  void close(const Pair& p) {
    close(p.a);
    close(p.b);
  }
};

// A TCP listener on 127.0.0.1 (non-blocking, as net::Socket makes them); its port in *port.
int tcp_listener(uint16_t* port) {
  const int fd = static_cast<int>(::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 64), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

// n fibers, each blocked in a one-byte recv on fd (deadline 60 s); each returns recv's result.
std::vector<lionet::JoinHandle<int64_t>> spawn_readers(OpsRig& rig, int fd, int n) {
  std::vector<lionet::JoinHandle<int64_t>> hs;
  for (int i = 0; i < n; ++i)
    hs.push_back(rig.sched.spawn([&rig, fd] {
      char c;
      return rig.io.recv(fd, &c, 1, 0, lionet::now() + 60s);
    }));
  return hs;
}

// What a hooked close() does in a fiber: cancel(fd), then close. Returns the calls still
// waiting on fd when cancel() returned (0: every operation had ended).
int cancel_and_close_in_fiber(OpsRig& rig, int fd) {
  return rig.sched
      .spawn([&] {
        rig.io.cancel(fd);
        const int waiting = rig.io.waiting(fd);
        sys_close(fd);
        return waiting;
      })
      .join();
}

// The peer `fd` of a closed socket reads the end of stream within a second: the file was
// really closed, not held open by an operation in flight.
void expect_end_of_stream(int fd) {
  char c;
  long r = -1;
  for (int i = 0; i < 1000 && (r = sys_read(fd, &c, 1)) < 0 && errno == EAGAIN; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(r, 0) << "the peer must see the end of stream: the file was really closed";
}

class CompletionOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpsRig probe(1, "io_uring");
    if (std::string(probe.io.backend()) != "io_uring") GTEST_SKIP() << "io_uring unavailable here";
  }
};

TEST(CompletionOpsRefused, EpollAndReadinessOnlyUringSayNoAndReturnEnotsup) {
  OpsRig rig(1, "epoll");
  EXPECT_FALSE(rig.io.completion_io());
  Pair p = make_socketpair();
  char c;
  EXPECT_EQ(rig.sched.spawn([&] { return rig.io.recv(p.a, &c, 1, 0, std::nullopt); }).join(), -ENOTSUP);
  rig.close(p);
  OpsRig off(1, "io_uring", /*ops=*/false);
  EXPECT_FALSE(off.io.completion_io()) << "io.uring_socket_ops: false must turn them off";
}

// The defaults: one worker (a single-issuer ring) uses the operations; several workers get a
// single-issuer ring each (io_manager.cc protocol 10) and use them too; several workers that
// share one ring (uring_ring_per_worker off) wait for readiness unless
// io.uring_shared_ring_ops asks for the operations.
TEST_F(CompletionOpsTest, SeveralWorkersUseThemOnTheirOwnRingsOrWhenAskedTo) {
  utsname u{};
  ASSERT_EQ(::uname(&u), 0);
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(u.release, "%d.%d", &major, &minor), 2);
  const bool single_issuer = major > 6 || (major == 6 && minor >= 1);  // older: one shared ring
  if (single_issuer) {
    lionet::Scheduler one({.threads = 1, .name = "ops-test"});
    lionet::IOManager one_io(one, {.backend = "io_uring"});
    EXPECT_TRUE(one_io.completion_io()) << "one worker, a single-issuer ring";
    EXPECT_FALSE(one_io.per_worker());
    one.stop();
  }
  lionet::Scheduler two({.threads = 2, .name = "ops-test"});
  if (single_issuer) {
    lionet::IOManager own(two, {.backend = "io_uring"});
    EXPECT_TRUE(own.completion_io()) << "a single-issuer ring per worker uses the operations";
    EXPECT_TRUE(own.per_worker());
  }
  {
    lionet::IOManager shared(two, {.backend = "io_uring", .uring_ring_per_worker = false});
    EXPECT_FALSE(shared.completion_io()) << "a shared ring waits for readiness by default";
    EXPECT_FALSE(shared.per_worker());
  }
  {
    lionet::IOManager asked(two,
                            {.backend = "io_uring", .uring_ring_per_worker = false, .uring_shared_ring_ops = true});
    EXPECT_TRUE(asked.completion_io());
  }
  {
    lionet::IOManager epoll(two, {.backend = "epoll"});
    EXPECT_FALSE(epoll.per_worker()) << "epoll: one set, one poller at a time";
  }
  two.stop();
}

// One ring per worker: calls parked in different workers' rings on one fd. Data wakes the one
// that takes it; cancel(fd) from a fiber reaches every ring, waits for both completions, and
// the close that follows really closes (no ring keeps the file).
TEST_F(CompletionOpsTest, CallsInTwoWorkersRingsAreCancelledInBoth) {
  OpsRig rig(2, "io_uring");
  if (!rig.io.per_worker()) GTEST_SKIP() << "no single-issuer rings here (Linux < 6.1)";
  for (int round = 0; round < 10; ++round) {
    Pair p = make_socketpair();
    std::atomic<int> spinner_worker{-1}, reader_worker{-1};
    std::atomic<bool> release{false};
    // The spinner holds its worker (no scheduling point) until the reader parked on the other
    // one; then it parks its own recv there: one call in each worker's ring.
    auto spinner = rig.sched.spawn([&] {
      spinner_worker = lionet::this_fiber::worker_index();
      while (!release.load()) {
      }  // no scheduling point: nothing else runs on this worker meanwhile
      char c;
      return rig.io.recv(p.a, &c, 1, 0, lionet::now() + 60s);
    });
    while (spinner_worker.load() < 0) std::this_thread::sleep_for(100us);
    auto reader = rig.sched.spawn([&] {
      reader_worker = lionet::this_fiber::worker_index();
      char c;
      return rig.io.recv(p.a, &c, 1, 0, lionet::now() + 60s);
    });
    ASSERT_TRUE(await_waiters(rig.io, p.a, 1));
    release = true;
    ASSERT_TRUE(await_waiters(rig.io, p.a, 2));
    EXPECT_NE(spinner_worker.load(), reader_worker.load()) << "the calls went to one worker's ring";
    if (round % 2 == 0) {
      // One byte: exactly one of the two calls gets it; the other is cancelled below.
      ASSERT_EQ(sys_write(p.b, "x", 1), 1);
      for (int i = 0; i < 10000 && rig.io.waiting(p.a) != 1; ++i) std::this_thread::sleep_for(100us);
      EXPECT_EQ(rig.io.waiting(p.a), 1);
    }
    EXPECT_EQ(cancel_and_close_in_fiber(rig, p.a), 0);
    const int64_t a = spinner.join(), b = reader.join();
    if (round % 2 == 0) {
      EXPECT_TRUE((a == 1 && b == -ECANCELED) || (a == -ECANCELED && b == 1)) << a << " " << b;
    } else {
      EXPECT_EQ(a, -ECANCELED);
      EXPECT_EQ(b, -ECANCELED);
    }
    expect_end_of_stream(p.b);
    rig.close(p.b);
  }
}

// A plain thread's calls into a per-worker IOManager (cancel from outside any fiber, as a
// socket closed by the main thread): queued for the rings' workers, who are woken for them.
TEST_F(CompletionOpsTest, APlainThreadsCancelReachesEveryWorkersRing) {
  OpsRig rig(2, "io_uring");
  constexpr int kReaders = 8;
  Pair p = make_socketpair();
  std::vector<lionet::JoinHandle<int64_t>> hs = spawn_readers(rig, p.a, kReaders);
  ASSERT_TRUE(await_waiters(rig.io, p.a, kReaders));
  rig.io.cancel(p.a);  // a plain thread: does not wait for the ops, the workers reap them
  for (auto& h : hs) EXPECT_EQ(h.join(), -ECANCELED);
  EXPECT_EQ(rig.io.waiting(p.a), 0);
  rig.close(p);
}

TEST_F(CompletionOpsTest, RecvParksUntilDataThenReturnsIt) {
  OpsRig rig(1, "io_uring");
  ASSERT_TRUE(rig.io.completion_io());
  Pair p = make_socketpair();
  auto reader = rig.sched.spawn([&] {
    char buf[16] = {};
    const int64_t r = rig.io.recv(p.a, buf, sizeof buf, 0, lionet::now() + 10s);
    return r > 0 ? std::string(buf, static_cast<size_t>(r)) : "error " + std::to_string(r);
  });
  ASSERT_TRUE(await_waiters(rig.io, p.a, 1)) << "the recv never parked";
  ASSERT_EQ(sys_write(p.b, "hello", 5), 5);
  EXPECT_EQ(reader.join(), "hello");
  EXPECT_EQ(rig.io.waiting(p.a), 0);
  rig.close(p);
}

TEST_F(CompletionOpsTest, RecvOfDataAlreadyThereAndEndOfStream) {
  OpsRig rig(1, "io_uring");
  Pair p = make_socketpair();
  ASSERT_EQ(sys_write(p.b, "abc", 3), 3);
  ::shutdown(p.b, SHUT_WR);
  auto r = rig.sched.spawn([&] {
    char buf[8];
    const int64_t first = rig.io.recv(p.a, buf, sizeof buf, 0, lionet::now() + 10s);
    const int64_t second = rig.io.recv(p.a, buf, sizeof buf, 0, lionet::now() + 10s);
    return std::to_string(first) + "," + std::to_string(second);
  });
  EXPECT_EQ(r.join(), "3,0");
  rig.close(p);
}

TEST_F(CompletionOpsTest, DeadlineEndsARecvWithEtimedoutWithinBounds) {
  OpsRig rig(1, "io_uring");
  Pair p = make_socketpair();
  auto r = rig.sched.spawn([&] {
    char c;
    const auto t0 = lionet::now();
    const int64_t res = rig.io.recv(p.a, &c, 1, 0, t0 + 50ms);
    return std::make_pair(res, lionet::now() - t0);
  });
  auto [res, took] = r.join();
  EXPECT_EQ(res, -ETIMEDOUT);
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 2s);
  // The socket still works afterwards: nothing of the cancelled call is left in the kernel.
  auto again = rig.sched.spawn([&] {
    char c = 0;
    return rig.io.recv(p.a, &c, 1, 0, lionet::now() + 10s) == 1 ? c : '?';
  });
  ASSERT_TRUE(await_waiters(rig.io, p.a, 1));
  ASSERT_EQ(sys_write(p.b, "k", 1), 1);
  EXPECT_EQ(again.join(), 'k');
  rig.close(p);
}

TEST_F(CompletionOpsTest, PastDeadlineStillTakesDataThatIsThere) {
  OpsRig rig(1, "io_uring");
  Pair p = make_socketpair();
  ASSERT_EQ(sys_write(p.b, "x", 1), 1);
  EXPECT_EQ(rig.sched
                .spawn([&] {
                  char c;
                  return rig.io.recv(p.a, &c, 1, 0, lionet::now() - 1s);
                })
                .join(),
            1);
  EXPECT_EQ(rig.sched
                .spawn([&] {
                  char c;
                  return rig.io.recv(p.a, &c, 1, 0, lionet::now() - 1s);
                })
                .join(),
            -ETIMEDOUT);
  rig.close(p);
}

// cancel(fd) (what a hooked close does first) wakes every call in flight on fd with ECANCELED,
// and returns only after their completions were dispatched: once it returns, close() really
// closes (the peer sees the end of stream), since no operation holds the file any more.
TEST_F(CompletionOpsTest, CancelEndsEveryCallInFlightAndNoneOutlivesTheClose) {
  for (int round = 0; round < 20; ++round) {
    OpsRig rig(2, "io_uring");
    Pair p = make_socketpair();
    constexpr int kReaders = 3;
    std::vector<lionet::JoinHandle<int64_t>> hs = spawn_readers(rig, p.a, kReaders);
    ASSERT_TRUE(await_waiters(rig.io, p.a, kReaders));
    EXPECT_EQ(cancel_and_close_in_fiber(rig, p.a), 0);
    for (auto& h : hs) EXPECT_EQ(h.join(), -ECANCELED);
    expect_end_of_stream(p.b);
    rig.close(p.b);
  }
}

TEST_F(CompletionOpsTest, SendParksWhileTheBufferIsFullAndCompletesWhenDrained) {
  OpsRig rig(2, "io_uring");
  Pair p = make_socketpair();
  static char junk[65536];
  while (sys_write(p.a, junk, sizeof junk) > 0) {
  }
  auto sender = rig.sched.spawn([&] { return rig.io.send(p.a, "tail", 4, MSG_NOSIGNAL, lionet::now() + 10s); });
  ASSERT_TRUE(await_waiters(rig.io, p.a, 1));
  std::string got;
  char buf[65536];
  for (int i = 0; i < 100000 && got.find("tail") == std::string::npos; ++i) {
    const long r = sys_read(p.b, buf, sizeof buf);
    if (r > 0) got.append(buf + (r >= 4 ? r - 4 : 0), buf + r);  // keeps the last bytes of each read
    else std::this_thread::sleep_for(100us);
  }
  EXPECT_EQ(sender.join(), 4);
  EXPECT_NE(got.find("tail"), std::string::npos);
  rig.close(p);
}

TEST_F(CompletionOpsTest, SendmsgAndRecvmsgMoveEveryIovec) {
  OpsRig rig(1, "io_uring");
  Pair p = make_socketpair();
  auto r = rig.sched.spawn([&] {
    char x[3], y[4];
    iovec in[2] = {{x, sizeof x}, {y, sizeof y}};
    msghdr m{};
    m.msg_iov = in;
    m.msg_iovlen = 2;
    const int64_t n = rig.io.recvmsg(p.a, &m, MSG_WAITALL, lionet::now() + 10s);
    return n == 7 ? std::string(x, 3) + "|" + std::string(y, 4) : "error " + std::to_string(n);
  });
  ASSERT_TRUE(await_waiters(rig.io, p.a, 1));
  auto w = rig.sched.spawn([&] {
    iovec out[2] = {{const_cast<char*>("abc"), 3}, {const_cast<char*>("defg"), 4}};
    msghdr m{};
    m.msg_iov = out;
    m.msg_iovlen = 2;
    return rig.io.sendmsg(p.b, &m, MSG_NOSIGNAL, lionet::now() + 10s);
  });
  EXPECT_EQ(w.join(), 7);
  EXPECT_EQ(r.join(), "abc|defg");
  rig.close(p);
}

TEST_F(CompletionOpsTest, AcceptAndConnectOverLoopbackAndRefusedConnect) {
  OpsRig rig(2, "io_uring");
  uint16_t port = 0;
  const int lfd = tcp_listener(&port);
  auto acceptor = rig.sched.spawn([&] {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int64_t fd =
        rig.io.accept(lfd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC, lionet::now() + 10s);
    if (fd < 0) return std::string("accept error ") + std::to_string(fd);
    const long flags = ::syscall(SYS_fcntl, static_cast<int>(fd), F_GETFL);  // the kernel's, not the hooks' view
    char buf[8] = {};
    const int64_t n = rig.io.recv(static_cast<int>(fd), buf, sizeof buf, 0, lionet::now() + 10s);
    rig.close(static_cast<int>(fd));
    return std::string(ss.ss_family == AF_INET ? "inet " : "? ") + ((flags & O_NONBLOCK) ? "nonblock " : "blocking ") +
           std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  });
  ASSERT_TRUE(await_waiters(rig.io, lfd, 1)) << "accept never parked";
  auto client = rig.sched.spawn([&] {
    const int fd = static_cast<int>(::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int64_t r = rig.io.connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a, lionet::now() + 10s);
    if (r == 0) r = rig.io.send(fd, "hi", 2, MSG_NOSIGNAL, lionet::now() + 10s);
    rig.close(fd);
    return r;
  });
  EXPECT_EQ(client.join(), 2);
  EXPECT_EQ(acceptor.join(), "inet nonblock hi");
  rig.close(lfd);  // the port is free now: a connect to it is refused
  auto refused = rig.sched.spawn([&] {
    const int fd = static_cast<int>(::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int64_t r = rig.io.connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a, lionet::now() + 10s);
    rig.close(fd);
    return r;
  });
  EXPECT_EQ(refused.join(), -ECONNREFUSED);
}

// Scheduler::stop with a fiber parked in a kernel call forever: after the stop grace the
// driver's cancel_all() ends it with ECANCELED, the fiber returns, and stop() finishes.
TEST_F(CompletionOpsTest, StopCancelsACallThatWouldNeverComplete) {
  lionet::Scheduler sched({.threads = 1, .stop_io_grace = 50ms});
  lionet::IOManager io(sched, {.backend = "io_uring", .uring_shared_ring_ops = true});
  Pair p = make_socketpair();
  std::atomic<int64_t> result{1};
  sched
      .spawn([&] {
        char c;
        result = io.recv(p.a, &c, 1, 0, std::nullopt);
      })
      .detach();
  ASSERT_TRUE(await_waiters(io, p.a, 1));
  sched.stop();
  EXPECT_EQ(result.load(), -ECANCELED);
  io.cancel(p.a);
  io.cancel(p.b);
  sys_close(p.a);
  sys_close(p.b);
}

// ~IOManager with a call still in flight (the scheduler keeps running): the call ends with
// ECANCELED (reaped by the destructor itself) and the fiber goes on with the scheduler's own
// driver.
TEST_F(CompletionOpsTest, DestroyedWithACallInFlightEndsItWithEcanceled) {
  lionet::Scheduler sched({.threads = 2, .io = {.backend = "epoll"}});
  Pair p = make_socketpair();
  std::atomic<int64_t> result{1};
  lionet::JoinHandle<void> h;
  {
    lionet::IOManager io(sched, {.backend = "io_uring", .uring_shared_ring_ops = true});
    h = sched.spawn([&] {
      char c;
      result = io.recv(p.a, &c, 1, 0, lionet::now() + 60s);
    });
    ASSERT_TRUE(await_waiters(io, p.a, 1));
  }
  h.join();
  EXPECT_EQ(result.load(), -ECANCELED);
  sched.stop();
  sys_close(p.a);
  sys_close(p.b);
}

// Many fibers ping-ponging through kernel calls on two workers: every byte arrives in order,
// whichever worker a completion is dispatched on.
TEST_F(CompletionOpsTest, ThousandSocketpairsPingPongThroughKernelCalls) {
  OpsRig rig(2, "io_uring");
  constexpr int kPairs = 1000, kRounds = 20;
  std::vector<Pair> pairs(kPairs);
  for (auto& p : pairs) p = make_socketpair();
  std::atomic<int> bad{0};
  std::vector<lionet::JoinHandle<void>> hs;
  for (auto& p : pairs) {
    hs.push_back(rig.sched.spawn([&rig, &bad, p] {  // echo side
      for (int i = 0; i < kRounds; ++i) {
        char c;
        if (rig.io.recv(p.b, &c, 1, 0, lionet::now() + 30s) != 1 ||
            rig.io.send(p.b, &c, 1, MSG_NOSIGNAL, lionet::now() + 30s) != 1)
          ++bad;
      }
    }));
    hs.push_back(rig.sched.spawn([&rig, &bad, p] {  // client side
      for (int i = 0; i < kRounds; ++i) {
        char c = static_cast<char>('a' + i), back = 0;
        if (rig.io.send(p.a, &c, 1, MSG_NOSIGNAL, lionet::now() + 30s) != 1 ||
            rig.io.recv(p.a, &back, 1, 0, lionet::now() + 30s) != 1 || back != c)
          ++bad;
      }
    }));
  }
  for (auto& h : hs) h.join();
  EXPECT_EQ(bad.load(), 0);
  for (auto& p : pairs) {
    rig.close(p);
  }
}
}  // namespace
