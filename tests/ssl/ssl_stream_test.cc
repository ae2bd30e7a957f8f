// Tests of lionet/ssl/ssl_stream.h over loopback: handshake + echo on TLS 1.2 and 1.3, 1 MiB
// both ways, writev/sendfile, ALPN, SNI, resumption, close_notify, close() from another fiber.
#include "lionet/ssl/ssl_stream.h"

#include <openssl/x509.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "lionet/sync/event.h"
#include "lionet/sync/wait_group.h"
#include "ssl_test_util.h"

namespace lionet {
namespace {
using namespace std::chrono_literals;
using test::Runtime;

class VersionTest : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Tls, VersionTest, ::testing::Values("TLS1.2", "TLS1.3"));

TEST_P(VersionTest, HandshakeAndEchoWithTheForcedVersion) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options(GetParam()));
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(c.handshake()) << c.last_error();
    EXPECT_STREQ(c.version(), std::string(GetParam()) == "TLS1.2" ? "TLSv1.2" : "TLSv1.3");
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(test::echo_once(c, test::pattern(1 + i * 97, i)));
  });
  server->stop(1s);
}

TEST_P(VersionTest, OneMiBBothWaysWithConcurrentReaderAndWriter) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options(GetParam()));
  const std::string payload = test::pattern(1 << 20, 7);
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(c.handshake());
    // The writer fiber sends 1 MiB while this fiber reads the echo: neither side may stall.
    auto writer = rt.sched().spawn([&] { return c.write(payload.data(), payload.size()); });
    std::string got(payload.size(), '\0');
    auto r = c.read_full(got.data(), got.size());
    auto w = writer.join();
    ASSERT_TRUE(w) << w.error().message();
    EXPECT_EQ(*w, payload.size());
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(*r, payload.size());
    EXPECT_TRUE(got == payload);
  });
  server->stop(1s);
}

TEST(SslStreamTest, WritevOfManySmallPiecesArrivesInOrder) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options());
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    std::vector<std::string> parts;
    for (int i = 0; i < 300; ++i) parts.push_back(test::pattern(static_cast<size_t>(1 + (i * 131) % 900), i));
    parts.push_back(test::pattern(100000, 3));  // a large piece after small ones
    std::vector<iovec> iov;
    std::string all;
    for (auto& p : parts) {
      iov.push_back({p.data(), p.size()});
      all += p;
    }
    auto reader = rt.sched().spawn([&] {
      std::string got(all.size(), '\0');
      auto r = c.read_full(got.data(), got.size());
      if (!r) ADD_FAILURE() << r.error().message() << " " << c.last_error();
      return r && *r == all.size() && got == all;
    });
    auto w = c.writev(iov.data(), static_cast<int>(iov.size()));
    ASSERT_TRUE(w) << w.error().message() << " " << c.last_error();
    EXPECT_EQ(*w, all.size());
    EXPECT_TRUE(reader.join());
  });
  server->stop(1s);
}

TEST(SslStreamTest, SendfileUsesTheCopyFallbackWithoutKtlsAndSendsTheFile) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options());
  const std::string content = test::pattern(300000, 5);
  char path[] = "/tmp/lionet-ssl-sendfile.XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(c.handshake());
    // This kernel has no "tls" ULP (see lionet/ssl/README.md): the fallback must be in use.
    EXPECT_EQ(c.ktls_send(), SslContext::kernel_offers_ktls());
    auto reader = rt.sched().spawn([&] {
      std::string got(content.size() - 1000, '\0');
      auto r = c.read_full(got.data(), got.size());
      return r && got == content.substr(1000);
    });
    auto s = c.sendfile(fd, 1000, content.size());  // asks past the end: stops at the end
    ASSERT_TRUE(s);
    EXPECT_EQ(*s, content.size() - 1000);
    EXPECT_TRUE(reader.join());
  });
  ::close(fd);
  server->stop(1s);
}

TEST(SslStreamTest, AlpnPicksTheServersFirstCommonProtocol) {
  Runtime rt;
  auto so = test::server_options();
  so.alpn = {"h2", "http/1.1"};
  auto sctx = SslContext::server(so);
  std::string server_saw;
  Event server_handshaken;  // the kernel orders the write below before the client's read, but
      // TSan does not see through sockets: say it with an Event
  TcpServer server(rt.io(), [&](SocketStream& s) {
    SslStream tls(sctx, s.socket());
    if (tls.handshake() && !server_handshaken.is_set()) {
      server_saw = std::string(tls.alpn_selected());
      server_handshaken.set();
    }
    test::tls_echo(tls);
  });
  server.listen(Address::ipv4_loopback(0));
  server.start();
  auto co = test::client_options();
  co.alpn = {"http/1.1", "h2"};
  auto cctx = SslContext::client(co);
  auto plain = SslContext::client(test::client_options());
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server.addresses()[0]).value());
    ASSERT_TRUE(c.handshake());
    EXPECT_EQ(c.alpn_selected(), "h2");
    ASSERT_TRUE(test::echo_once(c, "x"));
    server_handshaken.wait();
    EXPECT_EQ(server_saw, "h2");
    SslStream d(plain, Socket::connect_to(server.addresses()[0]).value());
    ASSERT_TRUE(d.handshake());
    EXPECT_EQ(d.alpn_selected(), "");  // the client offered none
  });
  server.stop(1s);
}

std::string peer_common_name(const SslStream& s) {
  X509* cert = SSL_get0_peer_certificate(s.native());
  if (!cert) return "";
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  return cn;
}

TEST(SslStreamTest, SniChoosesTheMatchingCertificate) {
  Runtime rt;
  auto so = test::server_options();
  so.certificates.push_back({test::Certs::get().other.cert, test::Certs::get().other.key});
  auto server = test::start_tls_echo(rt.io(), SslContext::server(so));
  auto other_opts = test::client_options();
  other_opts.ca_file = test::Certs::get().other.cert;
  other_opts.server_name = "other.test";
  auto other = SslContext::client(other_opts);
  auto local = SslContext::client(test::client_options());
  auto unknown_opts = test::client_options();
  unknown_opts.server_name = "unknown.test";
  unknown_opts.ca_file.clear();
  unknown_opts.verify_peer = false;
  auto unknown = SslContext::client(unknown_opts);
  rt.run([&] {
    SslStream a(other, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(a.handshake()) << a.last_error();  // verified against other.test's cert
    EXPECT_EQ(peer_common_name(a), "other.test");
    ASSERT_TRUE(test::echo_once(a, "via other.test"));
    SslStream b(local, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(b.handshake()) << b.last_error();
    EXPECT_EQ(peer_common_name(b), "localhost");
    SslStream c(unknown, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(c.handshake()) << c.last_error();
    EXPECT_EQ(peer_common_name(c), "localhost");  // no match: the default certificate
  });
  server->stop(1s);
}

TEST(SslStreamTest, VerificationFailsAgainstTheWrongCa) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto o = test::client_options();
  o.ca_file = test::Certs::get().other.cert;  // does not sign localhost's certificate
  auto cctx = SslContext::client(o);
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    auto h = c.handshake();
    ASSERT_FALSE(h);
    EXPECT_EQ(h.error(), std::errc::protocol_error);
    EXPECT_NE(c.last_error().find("certificate verify failed"), std::string::npos) << c.last_error();
  });
  server->stop(1s);
}

TEST_P(VersionTest, SecondConnectionResumesTheSession) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options(GetParam()));
  rt.run([&] {
    {
      SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
      ASSERT_TRUE(c.handshake());
      EXPECT_FALSE(c.session_reused());
      ASSERT_TRUE(test::echo_once(c, "first"));  // TLS 1.3 tickets arrive with the echo
      c.close();
    }
    SslStream d(cctx, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(d.handshake());
    EXPECT_TRUE(d.session_reused());
    EXPECT_TRUE(test::echo_once(d, "second"));
  });
  server->stop(1s);
}

TEST(SslStreamTest, CloseNotifyInTheMiddleOfReadingIsEndOfStream) {
  Runtime rt;
  auto sctx = SslContext::server(test::server_options());
  auto cctx = SslContext::client(test::client_options());
  rt.run([&] {
    Socket listener = Socket::listen_on(Address::ipv4_loopback(0));
    auto addr = listener.local_address().value();
    auto client = rt.sched().spawn([&] {
      SslStream c(cctx, Socket::connect_to(addr).value());
      if (!c.handshake() || !c.write("last words")) return false;
      return static_cast<bool>(c.shutdown_write());  // close_notify; the socket stays open
    });
    SslStream s(sctx, listener.accept(nullptr, Deadline::after(5s)).value());
    ASSERT_TRUE(s.handshake());
    std::string got(64, '\0');
    size_t n = 0;
    for (;;) {
      auto r = s.read(got.data() + n, got.size() - n);
      ASSERT_TRUE(r) << r.error().message();
      if (*r == 0) break;
      n += *r;
    }
    EXPECT_EQ(got.substr(0, n), "last words");
    EXPECT_TRUE(client.join());
  });
}

TEST(SslStreamTest, CloseFromAnotherFiberWakesABlockedReadWithEcanceled) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options());
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(c.handshake());
    ASSERT_TRUE(test::echo_once(c, "hi"));
    int fd = c.socket().fd();
    auto reader = rt.sched().spawn([&] {
      char b[16];
      return c.read(b, sizeof b);  // the server sends nothing: parks
    });
    auto end = now() + 10s;
    while (rt.io().waiting(fd) == 0 && now() < end) this_fiber::sleep_for(1ms);  // until parked
    ASSERT_GT(rt.io().waiting(fd), 0);
    c.close();
    auto r = reader.join();
    ASSERT_FALSE(r) << "read returned " << *r;
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
    char b[4];
    auto again = c.read(b, sizeof b);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), std::errc::bad_file_descriptor);
  });
  server->stop(1s);
}

TEST(SslStreamTest, ReadTimeoutIsEtimedoutAndTheStreamStaysUsable) {
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options());
  rt.run([&] {
    SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
    ASSERT_TRUE(c.handshake());
    c.set_timeouts(50ms, std::nullopt);
    char b[8];
    auto t0 = now();
    auto r = c.read(b, sizeof b);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_GE(now() - t0, 45ms);
    EXPECT_TRUE(test::echo_once(c, "still here"));
  });
  server->stop(1s);
}

TEST(SslStreamTest, WorksOnAPlainThreadWithoutScheduler) {
  // Socket's poll(2) fallback: the same stream code outside any fiber.
  Runtime rt;
  auto server = test::start_tls_echo(rt.io(), SslContext::server(test::server_options()));
  auto cctx = SslContext::client(test::client_options());
  SslStream c(cctx, Socket::connect_to(server->addresses()[0]).value());
  ASSERT_TRUE(c.handshake());
  EXPECT_TRUE(test::echo_once(c, test::pattern(70000)));
  c.close();
  server->stop(1s);
}
}  // namespace
}  // namespace lionet
