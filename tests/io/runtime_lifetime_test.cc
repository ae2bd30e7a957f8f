// One runtime, as a user meets it: a Scheduler comes with its IO driver (no other object), a
// scheduler without one says so once, and no order of destruction hangs or crashes: a
// scheduler destroyed with fibers still parked, an IOManager destroyed while fibers wait on it
// or before the sockets that used it, sockets and an http::Client that outlive their scheduler.
// Runs in the ASan and TSan builds too (label io).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lionet/http/client.h"
#include "lionet/http/server.h"
#include "lionet/io/io_manager.h"
#include "lionet/net/socket.h"
#include "lionet/net/tcp_server.h"
#include "lionet/sched/scheduler.h"
#include "lionet/sync/channel.h"
#include "lionet/sync/event.h"

namespace lionet {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Pair {
  Socket listener, client, server;
};
Pair make_pair() {
  Pair p;
  p.listener = Socket::listen_on(Address::ipv4_loopback(0));
  p.client = Socket::connect_to(p.listener.local_address().value()).value();
  p.server = p.listener.accept(nullptr, Deadline::after(5s)).value();
  return p;
}

// README's minimal server: a Scheduler and a TcpServer, nothing else.
TEST(DefaultRuntime, SchedulerAndTcpServerAloneServeBlockingStyleConnections) {
  Scheduler sched({.threads = 1});
  ASSERT_NE(sched.own_driver(), nullptr);
  EXPECT_STREQ(IOManager::of(sched)->backend(), "epoll");  // "auto" on Linux
  TcpServer server(sched, [](SocketStream& s) {
    char buf[256];
    for (;;) {
      auto n = s.read(buf, sizeof buf);
      if (!n || *n == 0) return;
      if (!s.write(buf, *n)) return;
    }
  });
  server.listen(Address::ipv4_loopback(0));
  server.start();
  const Address addr = server.addresses()[0];
  // 50 clients on the same single worker, each waiting 100 ms before it writes: served together.
  const auto t0 = Clock::now();
  std::atomic<int> echoed{0};
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < 50; ++i) {
    hs.push_back(sched.spawn([&, i] {
      auto c = Socket::connect_to(addr, Deadline::after(5s));
      if (!c) return;
      this_fiber::sleep_for(100ms);
      const std::string msg = "hi " + std::to_string(i);
      if (!c->write(msg.data(), msg.size(), Deadline::after(5s))) return;
      std::string got(msg.size(), '\0');
      std::size_t n = 0;
      while (n < got.size()) {
        auto r = c->read(got.data() + n, got.size() - n, Deadline::after(5s));
        if (!r || *r == 0) return;
        n += *r;
      }
      if (got == msg) echoed.fetch_add(1);
    }));
  }
  for (auto& h : hs) h.join();
  EXPECT_EQ(echoed.load(), 50);
  EXPECT_LT(seconds_since(t0), 2.5) << "served one after another (50 x 100 ms = 5 s)";
  server.stop(1s);
}

// io.backend "none": a blocking hooked call runs as libc, and the first one says so, once.
TEST(DefaultRuntime, WithoutAnIoDriverTheFirstBlockingCallWarnsOnceNamingCallAndFiber) {
  Scheduler sched({.threads = 1, .name = "no-io", .io = {.backend = "none"}});
  EXPECT_EQ(sched.driver(), nullptr);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_EQ(::write(fds[1], "ab", 2), 2);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const long got = sched
                       .spawn(
                           [&] {
                             char c[1];
                             long n = ::read(fds[0], c, 1);
                             n += ::read(fds[0], c, 1);  // a second call: no second line
                             return n;
                           },
                           {.name = "blocking-reader"})
                       .join();
  const std::string out = testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
  EXPECT_EQ(got, 2);
  EXPECT_NE(out.find("read() in fiber"), std::string::npos) << out;
  EXPECT_NE(out.find("blocking-reader"), std::string::npos) << out;
  EXPECT_NE(out.find("scheduler 'no-io' has no IO driver"), std::string::npos) << out;
  EXPECT_EQ(out.find("read() in fiber"), out.rfind("read() in fiber")) << "warned more than once: " << out;
  ::close(fds[0]);
  ::close(fds[1]);
}

// The trap of every earlier release: destroyed without stop() while fibers wait on sockets.
TEST(Lifetimes, SchedulerDestroyedWithFibersWaitingOnIoReturnsAndTheyEndWithEcanceled) {
  auto pair = std::make_shared<Pair>();
  std::atomic<int> result{-1};
  const auto t0 = Clock::now();
  {
    Scheduler sched({.threads = 2, .stop_io_grace = 100ms});
    pair = std::make_shared<Pair>(sched.spawn([] { return make_pair(); }).join());
    sched
        .spawn([&] {
          char c;
          auto r = pair->server.read(&c, 1);  // nobody writes
          result.store(r ? 0 : r.error().value());
        })
        .detach();
    std::this_thread::sleep_for(50ms);
  }  // ~Scheduler: stop() cancels the IO wait once every worker has idled 100 ms
  EXPECT_EQ(result.load(), ECANCELED);
  EXPECT_LT(seconds_since(t0), 5.0);
  pair.reset();  // closed after their scheduler and its driver are gone: plain closes
}

TEST(Lifetimes, IoManagerDestroyedWhileFibersWaitOnItThenSchedulerDestroyedWithoutStop) {
  std::atomic<int> result{-1};
  const auto t0 = Clock::now();
  {
    Scheduler sched({.threads = 1});
    Pair p = sched.spawn([] { return make_pair(); }).join();
    IOManager io(sched);  // replaces the scheduler's own driver
    sched
        .spawn([&] {
          char c;
          auto r = p.server.read(&c, 1, Deadline::after(30s));
          result.store(r ? 0 : r.error().value());
        })
        .detach();
    std::this_thread::sleep_for(50ms);
  }  // ~IOManager first (its waiter sees ECANCELED), then ~Scheduler: no hang
  EXPECT_EQ(result.load(), ECANCELED);
  EXPECT_LT(seconds_since(t0), 5.0);
}

// Waits whose deadline passes just as their IOManager is destroyed: a fiber whose timer won
// comes back to unlink itself from the fd's wait list, and ~IOManager must not free the fd
// table before it has (ASan saw that fiber lock a freed entry). Every wait ends with ETIMEDOUT
// or ECANCELED, whichever came first, and nothing touches freed memory (the ASan build).
TEST(Lifetimes, WaitsTimingOutWhileTheirIoManagerIsDestroyedEndCleanly) {
  Scheduler sched({.threads = 2});
  constexpr int kFibers = 16;
  int fds[kFibers][2];
  for (auto& f : fds) ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f), 0);
  int timed_out = 0, cancelled = 0;
  for (int round = 0; round < 150; ++round) {
    std::vector<JoinHandle<int>> waits;
    std::atomic<int> returned[kFibers] = {};  // outlives io: its destructor wakes the fibers
    {
      IOManager io(sched, {.backend = "epoll"});
      const auto deadline = now() + std::chrono::microseconds(3000 + (round % 7) * 300);
      for (int i = 0; i < kFibers; ++i)
        waits.push_back(sched.spawn([&io, &returned, i, fd = fds[i][0], deadline] {
          const int r = io.wait_readable(fd, deadline);
          returned[i].store(1);
          return r;
        }));
      // Every fiber parked on io (or already back from it): none calls into a destroyed one.
      const auto give_up = now() + 10s;
      for (int i = 0; i < kFibers; ++i)
        while (io.waiting(fds[i][0]) < 1 && returned[i].load() == 0) {
          ASSERT_LT(now(), give_up);
          std::this_thread::yield();
        }
      std::this_thread::sleep_until(deadline - std::chrono::microseconds((round % 5) * 100));
    }
    for (auto& w : waits) {
      const int r = w.join();
      ASSERT_TRUE(r == ETIMEDOUT || r == ECANCELED) << r;
      (r == ETIMEDOUT ? timed_out : cancelled)++;
    }
  }
  for (auto& f : fds) {
    ::close(f[0]);
    ::close(f[1]);
  }
  sched.stop();
  // Both outcomes occurred, so the destruction did meet waits on both sides of their deadline.
  EXPECT_GT(timed_out, 0);
  EXPECT_GT(cancelled, 0);
}

TEST(Lifetimes, SocketsThatWaitedOnADestroyedIoManagerCloseSafely) {
  Scheduler sched({.threads = 1, .io = {.backend = "none"}});
  auto io = std::make_unique<IOManager>(sched);
  Pair p = sched
               .spawn([] {
                 Pair q = make_pair();
                 char c;
                 EXPECT_FALSE(q.server.read(&c, 1, Deadline::after(20ms)));  // waited here: remembered
                 return q;
               })
               .join();
  io.reset();
  p.server.close();  // plain close: no registration left to forget, nothing to crash on
  p.client.close();
  EXPECT_FALSE(p.server.is_open());
  sched.stop();
}

// A fiber parked forever in a wait that ignores cancellation (inside a CancelShield): stop()
// cancels it in vain, reports it and returns.
TEST(Lifetimes, FibersParkedForeverAreAbandonedAfterStopTimeoutAndReported) {
  // Outlives the abandoned fiber, whose wait node stays linked in it: never destroyed.
  static Event* never = new Event;
  const auto t0 = Clock::now();
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  {
    Scheduler sched({.threads = 1, .name = "stuck", .stop_io_grace = 50ms, .stop_timeout = 200ms});
    sched
        .spawn(
            [] {
              CancelShield shield;
              never->wait();
            },
            {.name = "waits-forever"})
        .detach();
    std::this_thread::sleep_for(20ms);
  }
  const std::string out = testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_NE(out.find("scheduler 'stuck': stop() gave up on 1 fiber(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("waits-forever"), std::string::npos) << "the dump names the fiber: " << out;
}

// Scheduler::stop() cancels what is parked for good (sched/cancel.h): 10,000 fibers in
// Channel::recv, sleep_for(1h) and hooked reads all end within stop_io_grace plus 0.5 s, and
// none is abandoned.
TEST(Lifetimes, StopCancelsFibersParkedForeverInsteadOfAbandoningThem) {
#if defined(LIONET_TSAN) || defined(LIONET_ASAN)
  // TSan counts every fiber as a thread and dies past 8128 of them: 3,000 there.
  constexpr int kEach = 3000 / 3;
  constexpr double kSlack = 5.0;  // sanitizers: everything is slower
#else
  constexpr int kEach = 10000 / 3;
  constexpr double kSlack = 0.5;
#endif
  static auto* ch = new Channel<int>(0);  // outlives the scheduler whatever happens
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::atomic<int> ended{0};
  testing::internal::CaptureStderr();
  Clock::time_point stop_at;
  {
    Scheduler sched({.threads = 2, .name = "parked", .stop_io_grace = 200ms, .stop_timeout = 30s});
    for (int i = 0; i < kEach; ++i) {
      sched.spawn_detached([&] {
        (void)ch->recv();
        ++ended;
      });
      sched.spawn_detached([&] {
        lionet::this_fiber::sleep_for(1h);
        ++ended;
      });
      sched.spawn_detached([&, fd = sv[0]] {
        char c;
        (void)::recv(fd, &c, 1, 0);  // hooked: parks on the socket
        ++ended;
      });
    }
    while (sched.stats().fiber_parks < static_cast<uint64_t>(3 * kEach)) std::this_thread::sleep_for(5ms);
    stop_at = Clock::now();
    sched.stop();
    EXPECT_LT(seconds_since(stop_at), 0.2 + kSlack);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(ended.load(), 3 * kEach);
  EXPECT_EQ(err.find("gave up"), std::string::npos) << err;
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(Lifetimes, HttpClientOutlivesTheServerAndTheSchedulerItWasUsedWith) {
  auto client = std::make_unique<http::Client>();
  {
    Scheduler sched({.threads = 2});
    http::Server server(sched, [](http::Request&, http::Response& res) { res.reply(200, "pooled"); });
    server.listen(Address::ipv4_loopback(0));
    server.start();
    const std::string url = "http://" + server.addresses()[0].to_string() + "/";
    const std::string body = sched
                                 .spawn([&] {
                                   auto r = client->get(url);  // leaves a kept-alive connection in the pool
                                   return r ? r->body : std::string("error");
                                 })
                                 .join();
    EXPECT_EQ(body, "pooled");
    server.stop(1s);
  }
  client.reset();  // closes the pooled connection after its scheduler and driver are gone
}
}  // namespace
}  // namespace lionet
