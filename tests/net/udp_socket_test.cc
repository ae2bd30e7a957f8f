// Tests of lionet/net/udp_socket.h, once per IO backend: datagrams between fibers on 127.0.0.1
// and ::1, truncation, zero-length datagrams, deadlines, batches (recv_many / send_many),
// ICMP errors on a connected socket, the close protocol, and many sockets on one worker.
// Every loop is bounded; every wait has a deadline.
#include "lionet/net/udp_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "lionet/sync/wait_group.h"
#include "net_test_util.h"

namespace lionet {
namespace {
using test::BackendTest;
using test::Runtime;
using namespace std::chrono_literals;

class UdpSocketTest : public BackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, UdpSocketTest, ::testing::ValuesIn(test::kBackends));

UdpSocket bound(const Address& a) { return UdpSocket::bind_to(a).value(); }

// A Datagram over a std::string used as its buffer.
Datagram slot(std::string& s) { return Datagram{.buffer = std::span<char>(s.data(), s.size())}; }

std::string text(const Datagram& d) { return std::string(d.buffer.data(), d.length); }

// prefix + n, built by appending (g++ 12 -O3 reports a false -Wrestrict for "lit" + std::string).
std::string tagged(const char* prefix, size_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// Round trip through an echo fiber: recv_from, send_to back to the sender, on v4 and v6.
void round_trip(Runtime& rt, const Address& where) {
  UdpSocket server = bound(where);
  Address addr = server.local_address().value();
  EXPECT_NE(addr.port(), 0);
  auto echo = rt.sched().spawn([&] {
    std::string buf(2048, '\0');
    for (int i = 0; i < 3; ++i) {
      Datagram d = slot(buf);
      auto r = server.recv_from(d, Deadline::after(5s));
      ASSERT_TRUE(r.ok()) << r.error().message();
      EXPECT_EQ(d.peer.family(), where.family());
      ASSERT_TRUE(server.send_to(d.buffer.data(), d.length, d.peer).ok());
    }
  });
  UdpSocket client = UdpSocket::open(where.family()).value();
  Address client_addr = where;
  client_addr.set_port(0);
  ASSERT_TRUE(client.bind(client_addr).ok());
  for (int i = 0; i < 3; ++i) {
    std::string msg = tagged("ping ", static_cast<size_t>(i));
    msg += test::pattern(100u * static_cast<unsigned>(i));
    ASSERT_TRUE(client.send_to(msg.data(), msg.size(), addr).ok());
    std::string buf(2048, '\0');
    Datagram d = slot(buf);
    auto r = client.recv_from(d, Deadline::after(5s));
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(text(d), msg);
    EXPECT_FALSE(d.truncated);
    EXPECT_EQ(d.full_length, msg.size());
    EXPECT_EQ(d.peer, addr);
  }
  echo.join();
}

TEST_P(UdpSocketTest, RoundTripOverIPv4) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  rt.run([&] { round_trip(rt, Address::ipv4_loopback(0)); });
}

TEST_P(UdpSocketTest, RoundTripOverIPv6) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  auto probe = UdpSocket::bind_to(Address::ipv6_loopback(0));
  if (!probe) GTEST_SKIP() << "no IPv6 loopback here: " << probe.error().message();
  probe->close();
  rt.run([&] { round_trip(rt, Address::ipv6_loopback(0)); });
}

TEST_P(UdpSocketTest, ALongDatagramIsCutToTheBufferAndFlaggedTruncated) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket a = bound(Address::ipv4_loopback(0)), b = bound(Address::ipv4_loopback(0));
    Address to = b.local_address().value();
    std::string big = test::pattern(1000), small = "fits";
    ASSERT_TRUE(a.send_to(big.data(), big.size(), to).ok());
    ASSERT_TRUE(a.send_to(small.data(), small.size(), to).ok());
    std::string buf(100, '\0');
    Datagram d = slot(buf);
    ASSERT_TRUE(b.recv_from(d, Deadline::after(5s)).ok());
    EXPECT_TRUE(d.truncated);
    EXPECT_EQ(d.length, 100u);
    EXPECT_EQ(d.full_length, 1000u);
    EXPECT_EQ(text(d), big.substr(0, 100));
    // The tail is gone: the next datagram is the next one sent, whole.
    ASSERT_TRUE(b.recv_from(d, Deadline::after(5s)).ok());
    EXPECT_FALSE(d.truncated);
    EXPECT_EQ(text(d), "fits");
    // The same through recv_many: a truncated slot beside a whole one.
    ASSERT_TRUE(a.send_to(big.data(), big.size(), to).ok());
    ASSERT_TRUE(a.send_to(small.data(), small.size(), to).ok());
    this_fiber::sleep_for(20ms);  // both queued before the batch
    std::string b1(10, '\0'), b2(10, '\0');
    std::array<Datagram, 2> slots{slot(b1), slot(b2)};
    auto n = b.recv_many(slots, Deadline::after(5s));
    ASSERT_TRUE(n.ok()) << n.error().message();
    ASSERT_EQ(*n, 2u);
    EXPECT_TRUE(slots[0].truncated);
    EXPECT_EQ(slots[0].full_length, 1000u);
    EXPECT_EQ(slots[0].length, 10u);
    EXPECT_FALSE(slots[1].truncated);
    EXPECT_EQ(text(slots[1]), "fits");
  });
}

TEST_P(UdpSocketTest, ZeroLengthDatagramsAreDeliveredAsSuch) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket a = bound(Address::ipv4_loopback(0)), b = bound(Address::ipv4_loopback(0));
    Address to = b.local_address().value(), from = a.local_address().value();
    ASSERT_TRUE(a.send_to("", 0, to).ok());
    ASSERT_TRUE(a.send_to("x", 1, to).ok());
    ASSERT_TRUE(a.send_to(nullptr, 0, to).ok());
    std::string buf(16, '\0');
    Datagram d = slot(buf);
    ASSERT_TRUE(b.recv_from(d, Deadline::after(5s)).ok());
    EXPECT_EQ(d.length, 0u);
    EXPECT_EQ(d.full_length, 0u);
    EXPECT_FALSE(d.truncated);
    EXPECT_EQ(d.peer, from);
    ASSERT_TRUE(b.recv_from(d, Deadline::after(5s)).ok());
    EXPECT_EQ(text(d), "x");
    // Into an empty buffer too: a zero-length datagram fits, it is not truncated.
    Datagram empty{};
    ASSERT_TRUE(b.recv_from(empty, Deadline::after(5s)).ok());
    EXPECT_EQ(empty.length, 0u);
    EXPECT_FALSE(empty.truncated);
    // And a non-empty one into an empty buffer is.
    ASSERT_TRUE(a.send_to("yz", 2, to).ok());
    ASSERT_TRUE(b.recv_from(empty, Deadline::after(5s)).ok());
    EXPECT_TRUE(empty.truncated);
    EXPECT_EQ(empty.full_length, 2u);
  });
}

TEST_P(UdpSocketTest, DeadlinesTimeOutAndTheSocketStaysUsable) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket a = bound(Address::ipv4_loopback(0)), b = bound(Address::ipv4_loopback(0));
    Address to = b.local_address().value();
    std::string buf(64, '\0');
    Datagram d = slot(buf);
    // A per-call deadline.
    auto t0 = now();
    EXPECT_EQ(b.recv_from(d, Deadline::after(50ms)).error(), std::errc::timed_out);
    EXPECT_GE(now() - t0, 45ms);
    EXPECT_LT(now() - t0, 2s);
    // The socket's own timeout (Deadline() = it), for single and batch calls.
    b.set_read_timeout(30ms);
    EXPECT_EQ(b.recv(d).error(), std::errc::timed_out);
    std::array<Datagram, 4> slots{slot(buf), slot(buf), slot(buf), slot(buf)};
    t0 = now();
    EXPECT_EQ(b.recv_many(slots).error(), std::errc::timed_out);
    EXPECT_GE(now() - t0, 25ms);
    // Deadline::never() overrides the socket's timeout; the datagram that comes later is read.
    auto sender = rt.sched().spawn([&] {
      this_fiber::sleep_for(60ms);
      ASSERT_TRUE(a.send_to("late", 4, to).ok());
    });
    ASSERT_TRUE(b.recv_from(d, Deadline::never()).ok());
    EXPECT_EQ(text(d), "late");
    sender.join();
    // Still usable after all those timeouts.
    ASSERT_TRUE(a.send_to("again", 5, to).ok());
    ASSERT_TRUE(b.recv_from(d).ok());
    EXPECT_EQ(text(d), "again");
  });
}

// Send 3, recv_many of 8 returns the 3 (in order, with their senders), without waiting for 8.
TEST_P(UdpSocketTest, RecvManyReturnsAPartialBatchAtOnce) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket a = bound(Address::ipv4_loopback(0)), b = bound(Address::ipv4_loopback(0));
    Address to = b.local_address().value(), from = a.local_address().value();
    for (int i = 0; i < 3; ++i) {
      std::string m = tagged("dgram", static_cast<size_t>(i));
      ASSERT_TRUE(a.send_to(m.data(), m.size(), to).ok());
    }
    this_fiber::sleep_for(20ms);  // all 3 queued (loopback delivers synchronously anyway)
    std::vector<std::string> bufs(8, std::string(32, '\0'));
    std::vector<Datagram> slots;
    for (auto& s : bufs) slots.push_back(slot(s));
    auto t0 = now();
    auto n = b.recv_many(slots, Deadline::after(5s));
    ASSERT_TRUE(n.ok()) << n.error().message();
    EXPECT_LT(now() - t0, 1s);
    ASSERT_EQ(*n, 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(text(slots[i]), tagged("dgram", i));
      EXPECT_EQ(slots[i].peer, from);
    }
    // A batch that starts empty waits for the first datagram, then returns what is there.
    auto sender = rt.sched().spawn([&] {
      this_fiber::sleep_for(30ms);
      ASSERT_TRUE(a.send_to("one", 3, to).ok());
    });
    n = b.recv_many(slots, Deadline::after(5s));
    ASSERT_TRUE(n.ok()) << n.error().message();
    EXPECT_EQ(*n, 1u);
    EXPECT_EQ(text(slots[0]), "one");
    sender.join();
    // An empty span: 0 at once.
    EXPECT_EQ(b.recv_many({}).value(), 0u);
  });
}

// Batches after a short one and after a full one: nothing may be lost or delayed, whether the
// datagrams arrive while no one reads or while the reader waits.
TEST_P(UdpSocketTest, RecvManyAfterAShortBatchSeesEverythingThatArrives) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket a = bound(Address::ipv4_loopback(0)), b = bound(Address::ipv4_loopback(0));
    Address to = b.local_address().value();
    std::vector<std::string> bufs(4, std::string(16, '\0'));
    std::vector<Datagram> slots;
    for (auto& s : bufs) slots.push_back(slot(s));
    auto batch = [&](std::initializer_list<const char*> send, size_t want) {
      for (const char* m : send) ASSERT_TRUE(a.send_to(m, std::strlen(m), to).ok());
      this_fiber::sleep_for(10ms);
      auto t0 = now();
      auto n = b.recv_many(slots, Deadline::after(2s));
      ASSERT_TRUE(n.ok()) << n.error().message();
      EXPECT_EQ(*n, want);
      EXPECT_LT(now() - t0, 1s);
    };
    batch({"1"}, 1);  // short: the queue is empty now
    batch({"2", "3"}, 2);  // arrived while nobody read
    batch({"4", "5", "6", "7"}, 4);  // full
    batch({"8"}, 1);
    auto sender = rt.sched().spawn([&] {
      this_fiber::sleep_for(30ms);
      ASSERT_TRUE(a.send_to("9", 1, to).ok());
    });
    auto n = b.recv_many(slots, Deadline::after(2s));  // arrives while the reader waits
    ASSERT_TRUE(n.ok()) << n.error().message();
    EXPECT_EQ(text(slots[0]), "9");
    sender.join();
  });
}

// send_many of more than kMaxBatch datagrams to two peers, zero-length ones included; a
// malformed one (length > buffer) stops the batch before it and is then reported as EINVAL.
TEST_P(UdpSocketTest, SendManySendsEveryDatagramInOrder) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket a = bound(Address::ipv4_loopback(0));
    UdpSocket r1 = UdpSocket::bind_to(Address::ipv4_loopback(0), {.recv_buffer = 1 << 20}).value();
    UdpSocket r2 = UdpSocket::bind_to(Address::ipv4_loopback(0), {.recv_buffer = 1 << 20}).value();
    const size_t count = UdpSocket::kMaxBatch * 2 + 5;
    std::vector<std::string> payloads;
    std::vector<Datagram> out;
    payloads.reserve(count);
    for (size_t i = 0; i < count; ++i) payloads.push_back(i % 10 == 9 ? std::string() : tagged("m", i));
    for (size_t i = 0; i < count; ++i) {
      Datagram d = slot(payloads[i]);
      d.length = payloads[i].size();
      d.peer = (i % 2 ? r2 : r1).local_address().value();
      out.push_back(d);
    }
    auto n = a.send_many(out, Deadline::after(5s));
    ASSERT_TRUE(n.ok()) << n.error().message();
    EXPECT_EQ(*n, count);
    std::string buf(64, '\0');
    for (size_t i = 0; i < count; ++i) {
      Datagram d = slot(buf);
      ASSERT_TRUE((i % 2 ? r2 : r1).recv_from(d, Deadline::after(5s)).ok()) << i;
      EXPECT_EQ(text(d), payloads[i]) << i;
    }
    // length > buffer: the two before it go, then it is an error of its own.
    std::string ok1 = "a", ok2 = "b", bad = "c";
    std::array<Datagram, 3> mixed{slot(ok1), slot(ok2), slot(bad)};
    for (auto& d : mixed) d.length = 1, d.peer = r1.local_address().value();
    mixed[2].length = 2;
    EXPECT_EQ(a.send_many(mixed, Deadline::after(5s)).value(), 2u);
    EXPECT_EQ(a.send_many(std::span(mixed).subspan(2)).error(), std::errc::invalid_argument);
    for (const char* want : {"a", "b"}) {
      Datagram d = slot(buf);
      ASSERT_TRUE(r1.recv_from(d, Deadline::after(5s)).ok());
      EXPECT_EQ(text(d), want);
    }
  });
}

// A connected socket whose peer port has nobody: the ICMP port unreachable comes back as
// ECONNREFUSED from the next call (recv here), and the socket stays usable.
TEST_P(UdpSocketTest, AConnectedSocketReportsAClosedPortAsConnectionRefused) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    Address dead;
    {
      UdpSocket gone = bound(Address::ipv4_loopback(0));
      dead = gone.local_address().value();
    }  // closed: nothing listens on that port now
    UdpSocket c = UdpSocket::open(AF_INET).value();
    ASSERT_TRUE(c.connect(dead).ok());
    EXPECT_EQ(c.peer_address().value(), dead);
    ASSERT_TRUE(c.send("hello", 5).ok());
    std::string buf(16, '\0');
    Datagram d = slot(buf);
    auto r = c.recv(d, Deadline::after(5s));
    EXPECT_EQ(r.error(), std::errc::connection_refused) << r.error().message();
    // The error was reported once; with a live peer at that address later, traffic flows.
    UdpSocket peer = UdpSocket::bind_to(dead).value();
    ASSERT_TRUE(c.send("again", 5).ok());
    Datagram p = slot(buf);
    ASSERT_TRUE(peer.recv_from(p, Deadline::after(5s)).ok());
    EXPECT_EQ(text(p), "again");
    ASSERT_TRUE(peer.send_to("back", 4, p.peer).ok());
    ASSERT_TRUE(c.recv(d, Deadline::after(5s)).ok());
    EXPECT_EQ(text(d), "back");
    // And the batch calls report it too.
    peer.close();
    std::array<Datagram, 4> slots{slot(buf), slot(buf), slot(buf), slot(buf)};
    ASSERT_TRUE(c.send("x", 1).ok());
    EXPECT_EQ(c.recv_many(slots, Deadline::after(5s)).error(), std::errc::connection_refused);
  });
}

// One worker: a spawned fiber runs until it parks, so after the yields the readers are waiting.
TEST_P(UdpSocketTest, CloseWhileAnotherFiberWaitsWakesItWithCanceled) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    UdpSocket s = bound(Address::ipv4_loopback(0));
    std::atomic<int> started{0};
    std::error_code one_err, many_err;
    auto reader = rt.sched().spawn([&] {
      std::string buf(16, '\0');
      Datagram d = slot(buf);
      ++started;
      auto r = s.recv_from(d);  // nothing comes, no timeout: waits
      one_err = r.ok() ? std::error_code() : r.error();
    });
    auto batcher = rt.sched().spawn([&] {
      std::string buf(16, '\0');
      std::array<Datagram, 2> slots{slot(buf), slot(buf)};
      ++started;
      auto r = s.recv_many(slots);
      many_err = r.ok() ? std::error_code() : r.error();
    });
    for (int i = 0; i < 100 && started < 2; ++i) this_fiber::yield();
    ASSERT_EQ(started, 2);
    this_fiber::yield();
    int fd = s.fd();
    auto t0 = now();
    s.close();
    reader.join();
    batcher.join();
    EXPECT_LT(now() - t0, 2s);
    EXPECT_EQ(one_err, std::errc::operation_canceled) << one_err.message();
    EXPECT_EQ(many_err, std::errc::operation_canceled) << many_err.message();
    EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // really closed once the waiters left
    std::string buf(4, '\0');
    Datagram d = slot(buf);
    EXPECT_EQ(s.recv_from(d).error(), std::errc::bad_file_descriptor);
    EXPECT_EQ(s.send_to("x", 1, Address::ipv4_loopback(9)).error(), std::errc::bad_file_descriptor);
    EXPECT_FALSE(s.is_open());
  });
}

// 64 fibers on one worker, each with its own socket, ping-pong with one echo fiber: every
// fiber parks in recv while the others run; all complete.
TEST_P(UdpSocketTest, ManyFibersOnOneWorkerEachWithItsOwnSocket) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  const int fibers = 64, rounds = 50 / test::kScale + 1;
  rt.run([&] {
    UdpSocket echo = UdpSocket::bind_to(Address::ipv4_loopback(0), {.recv_buffer = 1 << 20}).value();
    Address to = echo.local_address().value();
    std::atomic<int> echoed{0};
    auto server = rt.sched().spawn([&] {
      std::vector<std::string> bufs(16, std::string(64, '\0'));
      std::vector<Datagram> slots;
      for (auto& b : bufs) slots.push_back(slot(b));
      while (echoed < fibers * rounds) {
        auto n = echo.recv_many(slots, Deadline::after(10s));
        ASSERT_TRUE(n.ok()) << n.error().message();
        auto sent = echo.send_many(std::span(slots).first(*n), Deadline::after(10s));
        ASSERT_TRUE(sent.ok()) << sent.error().message();
        ASSERT_EQ(*sent, *n);
        echoed += static_cast<int>(*n);
      }
    });
    WaitGroup wg(fibers);
    std::atomic<int> ok{0};
    for (int f = 0; f < fibers; ++f) {
      rt.sched()
          .spawn([&, f] {
            UdpSocket c = UdpSocket::open(AF_INET).value();
            if (c.connect(to).ok()) {
              std::string buf(64, '\0');
              int good = 0;
              for (int i = 0; i < rounds; ++i) {
                std::string m = tagged("", static_cast<size_t>(f));
                m += tagged(":", static_cast<size_t>(i));
                Datagram d = slot(buf);
                if (!c.send(m.data(), m.size(), Deadline::after(10s)).ok()) break;
                if (!c.recv(d, Deadline::after(10s)).ok() || text(d) != m) break;
                ++good;
              }
              if (good == rounds) ++ok;
            }
            wg.done();
          })
          .detach();
    }
    ASSERT_TRUE(wg.wait_for(60s));
    EXPECT_EQ(ok, fibers);
    server.join();
  });
}

// From a plain thread (no IOManager) the calls wait in poll(2), with the same results.
TEST(UdpSocketPlainThread, WorksWithoutAScheduler) {
  UdpSocket a = bound(Address::ipv4_loopback(0)), b = bound(Address::ipv4_loopback(0));
  Address to = b.local_address().value();
  std::string buf(16, '\0');
  Datagram d = slot(buf);
  EXPECT_EQ(b.recv_from(d, Deadline::after(30ms)).error(), std::errc::timed_out);
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    (void)a.send_to("thread", 6, to);
  });
  ASSERT_TRUE(b.recv_from(d, Deadline::after(5s)).ok());
  EXPECT_EQ(text(d), "thread");
  t.join();
}

// SO_REUSEPORT: two sockets bound to one port (one per worker in a server).
TEST(UdpSocketOptions, ReusePortBindsTwoSocketsToOnePort) {
  UdpSocket a = UdpSocket::bind_to(Address::ipv4_loopback(0), {.reuse_port = true}).value();
  Address addr = a.local_address().value();
  auto b = UdpSocket::bind_to(addr, {.reuse_port = true});
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->local_address().value(), addr);
  EXPECT_EQ(b->get_option(SOL_SOCKET, SO_REUSEPORT).value(), 1);
  // Without the option the port is taken.
  EXPECT_EQ(UdpSocket::bind_to(addr).error(), std::errc::address_in_use);
}
}  // namespace
}  // namespace lionet
