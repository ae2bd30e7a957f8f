// Tests of lionet/net/socket.h and socket_stream.h, once per IO backend: blocking-style IO
// between fibers, time limits, and the faults a server meets (peer reset, half-close,
// zero-length reads, a socket closed while another fiber waits on it).
#include "lionet/net/socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "../common/sanitizers.h"
#include "lionet/net/socket_stream.h"
#include "lionet/sync/wait_group.h"
#include "net_test_util.h"

namespace lionet {
namespace {
using test::BackendTest;
using test::Runtime;
using namespace std::chrono_literals;

class SocketTest : public BackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, SocketTest, ::testing::ValuesIn(test::kBackends));

TEST_P(SocketTest, ConnectAcceptReadWriteBetweenFibers) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  rt.run([&] {
    Socket listener = Socket::listen_on(Address::ipv4_loopback(0));
    Address addr = listener.local_address().value();
    EXPECT_EQ(addr.to_string().rfind("127.0.0.1:", 0), 0u);
    // 4 MiB each way: far more than the socket buffers, so both sides park in write and read.
    const std::string payload = test::pattern(4 << 20);
    auto server = rt.sched().spawn([&] {
      Address peer;
      auto s = listener.accept(&peer);
      ASSERT_TRUE(s.ok()) << s.error().message();
      EXPECT_EQ(peer.family(), AF_INET);
      EXPECT_EQ(s->get_option(IPPROTO_TCP, TCP_NODELAY).value(), 1);
      std::vector<char> buf(64 * 1024);
      size_t total = 0;
      while (true) {  // echo until the client half-closes
        auto r = s->read(buf.data(), buf.size());
        ASSERT_TRUE(r.ok()) << r.error().message();
        if (*r == 0) break;
        ASSERT_TRUE(s->write(buf.data(), *r).ok());
        total += *r;
      }
      EXPECT_EQ(total, payload.size());
    });
    auto c = Socket::connect_to(addr);
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->get_option(IPPROTO_TCP, TCP_NODELAY).value(), 1);
    auto writer = rt.sched().spawn([&] {
      // writev over three pieces exercises the partial-write bookkeeping.
      size_t a = payload.size() / 3, b = payload.size() / 2;
      iovec iov[3] = {{const_cast<char*>(payload.data()), a},
                      {const_cast<char*>(payload.data() + a), b - a},
                      {const_cast<char*>(payload.data() + b), payload.size() - b}};
      auto w = c->writev(iov, 3);
      ASSERT_TRUE(w.ok()) << w.error().message();
      EXPECT_EQ(*w, payload.size());
      ASSERT_TRUE(c->shutdown(SHUT_WR).ok());
    });
    std::string got;
    got.reserve(payload.size());
    std::vector<char> buf(100000);
    while (true) {
      auto r = c->read(buf.data(), buf.size());
      ASSERT_TRUE(r.ok()) << r.error().message();
      if (*r == 0) break;
      got.append(buf.data(), *r);
    }
    writer.join();
    server.join();
    EXPECT_TRUE(got == payload) << "echoed bytes differ (" << got.size() << " of " << payload.size() << ")";
  });
}

TEST_P(SocketTest, ReadAndAcceptTimeOutAndTheSocketStaysUsable) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([] {
    auto p = test::make_pair_sockets();
    char buf[16];
    auto t0 = now();
    auto r = p.server.read(buf, sizeof buf, Deadline::after(50ms));
    auto took = now() - t0;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_GE(took, 50ms);
    EXPECT_LT(took, 2s);
    // The socket's own timeout applies when the call gives none.
    p.server.set_read_timeout(30ms);
    t0 = now();
    r = p.server.read(buf, sizeof buf);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_GE(now() - t0, 30ms);
    // Still usable.
    ASSERT_TRUE(p.client.write("ping", 4).ok());
    r = p.server.read(buf, sizeof buf, Deadline::after(5s));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(std::string(buf, *r), "ping");
    // Accept times out too.
    t0 = now();
    auto a = p.listener.accept(nullptr, Deadline::after(40ms));
    EXPECT_EQ(a.error(), std::errc::timed_out);
    EXPECT_GE(now() - t0, 40ms);
  });
}

TEST_P(SocketTest, PeerResetIsAnErrorResultNeverACrash) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([] {
    auto p = test::make_pair_sockets();
    ASSERT_TRUE(p.client.set_linger(true, 0).ok());
    p.client.close();  // RST
    char buf[16];
    auto r = p.server.read(buf, sizeof buf, Deadline::after(5s));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    // Writes after the reset: EPIPE (MSG_NOSIGNAL), no SIGPIPE.
    auto w = p.server.write("x", 1);
    ASSERT_FALSE(w.ok());
    EXPECT_TRUE(w.error() == std::errc::broken_pipe || w.error() == std::errc::connection_reset) << w.error().message();
    // sendfile(2) has no MSG_NOSIGNAL: SIGPIPE must be ignored for the process to survive.
    char path[] = "/tmp/lionet-net-XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    ASSERT_EQ(::write(fd, "0123456789", 10), 10);
    auto sf = p.server.sendfile(fd, 0, 10);
    EXPECT_FALSE(sf.ok());
    ::close(fd);
    struct sigaction sa {};
    ::sigaction(SIGPIPE, nullptr, &sa);
    EXPECT_EQ(sa.sa_handler, SIG_IGN);
  });
}

TEST_P(SocketTest, HalfCloseDeliversEndOfStreamAndTheOtherDirectionStillWorks) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  rt.run([] {
    auto p = test::make_pair_sockets();
    SocketStream client(std::move(p.client)), server(std::move(p.server));
    ASSERT_TRUE(client.write("hello").ok());
    ASSERT_TRUE(client.shutdown_write().ok());
    char buf[32];
    auto r = server.read_full(buf, sizeof buf);  // until end of stream
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(std::string(buf, *r), "hello");
    r = server.read(buf, sizeof buf);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, 0u);  // stays at end of stream
    ASSERT_TRUE(server.write("bye").ok());
    server.close();
    r = client.read_full(buf, sizeof buf);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(std::string(buf, *r), "bye");
  });
}

TEST_P(SocketTest, ZeroLengthReadsReturnAtOnceAndLoseNothing) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([] {
    auto p = test::make_pair_sockets();
    char buf[8];
    auto t0 = now();
    auto r = p.server.read(buf, 0, Deadline::after(5s));  // nothing to read: must not wait
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, 0u);
    iovec empty{buf, 0};
    r = p.server.readv(&empty, 1, Deadline::after(5s));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, 0u);
    EXPECT_LT(now() - t0, 1s);
    ASSERT_TRUE(p.client.write("abc", 3).ok());
    ASSERT_TRUE(p.client.write("", 0).ok());  // zero-length write: a no-op
    r = p.server.read(buf, 0);
    EXPECT_EQ(*r, 0u);
    r = p.server.read(buf, sizeof buf, Deadline::after(5s));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(std::string(buf, *r), "abc");
  });
}

// A TCP read that returns fewer bytes than asked makes the next read wait for readiness first
// (socket.h, read_drained_). Nothing may be lost or delayed by it: bytes that arrive while no
// one reads, bytes that arrive while the reader waits, and a short read on a buffer smaller
// than what is queued (the queue is not drained then: the next read must not wait at all).
TEST_P(SocketTest, ReadsAfterAShortReadSeeEverythingThatArrives) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  rt.run([&] {
    auto p = test::make_pair_sockets();
    char buf[64];
    auto read_str = [&](size_t n) {
      auto r = p.server.read(buf, n, Deadline::after(2s));
      return r.ok() ? std::string(buf, *r) : "error: " + r.error().message();
    };
    ASSERT_TRUE(p.client.write("a", 1).ok());
    EXPECT_EQ(read_str(sizeof buf), "a");  // short: the queue is empty now
    // Arrives while nobody reads: the next read must still return it, not wait for more.
    ASSERT_TRUE(p.client.write("bc", 2).ok());
    this_fiber::sleep_for(20ms);
    auto t0 = now();
    EXPECT_EQ(read_str(sizeof buf), "bc");
    EXPECT_LT(now() - t0, 1s);
    // Arrives while the reader waits.
    auto writer = rt.sched().spawn([&] {
      this_fiber::sleep_for(30ms);
      ASSERT_TRUE(p.client.write("def", 3).ok());
    });
    EXPECT_EQ(read_str(sizeof buf), "def");
    writer.join();
    // A full read (the buffer was the limit) leaves bytes queued: the next read takes them at once.
    ASSERT_TRUE(p.client.write("ghijk", 5).ok());
    this_fiber::sleep_for(20ms);
    EXPECT_EQ(read_str(2), "gh");
    EXPECT_EQ(read_str(sizeof buf), "ijk");
    // An end of stream that arrives with the last bytes (one edge for both) is still reported
    // by the read after the short one: no later edge would say so.
    ASSERT_TRUE(p.client.write("end", 3).ok());
    ASSERT_TRUE(p.client.shutdown(SHUT_WR).ok());
    this_fiber::sleep_for(20ms);
    EXPECT_EQ(read_str(sizeof buf), "end");
    t0 = now();
    EXPECT_EQ(read_str(sizeof buf), "");
    EXPECT_LT(now() - t0, 1s);
  });
}

// One worker: a spawned fiber runs until it parks, so after yield() the reader is waiting.
TEST_P(SocketTest, CloseWhileAnotherFiberWaitsWakesItWithAnError) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([&] {
    auto p = test::make_pair_sockets();
    std::atomic<bool> started{false};
    std::error_code read_err, accept_err;
    auto reader = rt.sched().spawn([&] {
      char buf[8];
      started = true;
      auto r = p.server.read(buf, sizeof buf);  // no data, no timeout: waits
      read_err = r.ok() ? std::error_code() : r.error();
    });
    auto acceptor = rt.sched().spawn([&] {
      auto a = p.listener.accept();
      accept_err = a.ok() ? std::error_code() : a.error();
    });
    for (int i = 0; i < 100 && !started; ++i) this_fiber::yield();
    ASSERT_TRUE(started);
    this_fiber::yield();
    int fd = p.server.fd();
    auto t0 = now();
    p.server.close();
    p.listener.close();
    reader.join();
    acceptor.join();
    EXPECT_LT(now() - t0, 2s);
    EXPECT_EQ(read_err, std::errc::operation_canceled) << read_err.message();
    EXPECT_EQ(accept_err, std::errc::operation_canceled) << accept_err.message();
    EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // the fd is really closed once the waiter left
    // Calls after close: EBADF at once.
    char c;
    EXPECT_EQ(p.server.read(&c, 1).error(), std::errc::bad_file_descriptor);
    EXPECT_FALSE(p.server.is_open());
  });
}

// Stress of the close protocol on two workers: a reader, a writer filling the send buffer and
// a closer race; every call must end with a result, none may hang, ASan must stay quiet.
TEST_P(SocketTest, CloseRacesWithReaderAndWriterOnTwoWorkers) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  const int iterations = 300 / test::kScale;
  rt.run([&] {
    Socket listener = Socket::listen_on(Address::ipv4_loopback(0));
    Address addr = listener.local_address().value();
    std::string chunk = test::pattern(256 * 1024);
    for (int i = 0; i < iterations; ++i) {
      Socket client = Socket::connect_to(addr).value();
      Socket server = listener.accept().value();
      WaitGroup wg(2);
      rt.sched()
          .spawn([&] {
            char buf[64];
            while (server.read(buf, sizeof buf).value_or(0) > 0) {
            }
            wg.done();
          })
          .detach();
      rt.sched()
          .spawn([&] {
            while (server.write(chunk.data(), chunk.size()).ok()) {
            }
            wg.done();
          })
          .detach();
      if (i % 2) this_fiber::yield();
      server.close();
      ASSERT_TRUE(wg.wait_for(10s)) << "a call did not return after close, iteration " << i;
    }
  });
}

TEST_P(SocketTest, UnixDomainSocketsWork) {
  Runtime rt(1, GetParam());
  require_backend(rt);
  rt.run([] {
    std::string name = "unix:@lionet-net-test-" + std::to_string(::getpid());
    Address addr = Address::parse(name).value();
    Socket listener = Socket::listen_on(addr);
    EXPECT_EQ(listener.local_address()->to_string(), name);
    Socket c = Socket::connect_to(addr).value();
    Socket s = listener.accept().value();
    ASSERT_TRUE(c.write("unix", 4).ok());
    char buf[8];
    auto r = s.read(buf, sizeof buf, Deadline::after(5s));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(std::string(buf, *r), "unix");
  });
}

TEST_P(SocketTest, SendfileAndItsCopyFallbackDeliverTheFile) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  rt.run([&] {
    std::string content = test::pattern(300 * 1024 + 7);
    int fd = test::temp_file_with(content);
    ASSERT_GE(fd, 0);
    // A Stream that forwards everything but sendfile, so the base class's copy path runs.
    struct CopyOnly final : Stream {
      explicit CopyOnly(SocketStream& s) : s_(s) {}
      Result<size_t> read(void* b, size_t n) override { return s_.read(b, n); }
      Result<size_t> readv(const iovec* v, int c) override { return s_.readv(v, c); }
      Result<size_t> write(const void* b, size_t n) override { return s_.write(b, n); }
      Result<size_t> writev(const iovec* v, int c) override { return s_.writev(v, c); }
      Result<void> shutdown_write() override { return s_.shutdown_write(); }
      void close() noexcept override { s_.close(); }
      void set_timeouts(std::optional<Duration> r, std::optional<Duration> w) override { s_.set_timeouts(r, w); }
      SocketStream& s_;
    };
    for (bool copy : {false, true}) {
      auto p = test::make_pair_sockets();
      SocketStream out(std::move(p.server));
      CopyOnly copier(out);
      Stream& s = copy ? static_cast<Stream&>(copier) : out;
      auto sender = rt.sched().spawn([&] {
        auto r = s.sendfile(fd, 5, content.size());  // asks past the end: short count
        ASSERT_TRUE(r.ok()) << r.error().message();
        EXPECT_EQ(*r, content.size() - 5);
        s.close();
      });
      SocketStream in(std::move(p.client));
      std::string got(content.size(), '\0');
      auto r = in.read_full(got.data(), got.size());
      sender.join();
      ASSERT_TRUE(r.ok());
      got.resize(*r);
      EXPECT_TRUE(got == content.substr(5)) << (copy ? "copy" : "sendfile") << " delivered " << got.size();
    }
    ::close(fd);
  });
}

// A head written with write_more (MSG_MORE) goes out with the sendfile that follows it: the
// peer reads head + file in order, without waiting for a cork timer, the connection kept open.
TEST_P(SocketTest, WriteMoreThenSendfileArriveTogether) {
  Runtime rt(2, GetParam());
  require_backend(rt);
  rt.run([&] {
    std::string content = test::pattern(100 * 1024);
    int fd = test::temp_file_with(content);
    ASSERT_GE(fd, 0);
    auto p = test::make_pair_sockets();
    SocketStream out(std::move(p.server));
    SocketStream in(std::move(p.client));
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 102400\r\n\r\n";
    TimePoint start = now();
    ASSERT_TRUE(out.write_more(head.data(), head.size()).ok());
    auto sf = out.sendfile(fd, 0, content.size());
    ASSERT_TRUE(sf.ok()) << sf.error().message();
    std::string got(head.size() + content.size(), '\0');
    in.set_timeouts(5s, std::nullopt);
    auto r = in.read_full(got.data(), got.size());
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_TRUE(got == head + content);
    // Nothing was held back for the kernel's 200 ms cork limit (the socket stays open).
    EXPECT_LT(now() - start, std::chrono::milliseconds(static_cast<int>(150 * test::kSlowdown)));
    ::close(fd);
  });
}

TEST(SocketPlainThread, WorksWithoutAScheduler) {
  auto p = test::make_pair_sockets();
  std::thread t([&] {
    char buf[8];
    auto r = p.server.read(buf, sizeof buf, Deadline::after(5s));
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(p.server.write(buf, *r).ok());
  });
  ASSERT_TRUE(p.client.write("thread", 6).ok());
  char buf[8];
  auto r = p.client.read(buf, sizeof buf, Deadline::after(5s));
  t.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::string(buf, *r), "thread");
  EXPECT_EQ(p.client.read(buf, sizeof buf, Deadline::after(20ms)).error(), std::errc::timed_out);
}

TEST(SocketSetup, ListenOnABusyPortThrowsNamingTheAddress) {
  Socket a = Socket::listen_on(Address::ipv4_loopback(0), {.reuse_addr = false});
  Address addr = a.local_address().value();
  try {
    Socket b = Socket::listen_on(addr, {.reuse_addr = false});
    FAIL() << "second bind succeeded";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find(addr.to_string()), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), std::errc::address_in_use);
  }
}
}  // namespace
}  // namespace lionet
