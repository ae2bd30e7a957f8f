// HTTPS tests: the same Server over lionet::SslStream (Server::enable_tls), checked with curl
// --cacert and with the project's Client (verifying the certificate): memory, chunked writer
// and sendfile (the TLS path) bodies, keep-alive reuse, and a plain-TCP client refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "http_test_util.h"
#include "lionet/http/client.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/ssl/ssl_context.h"

namespace lionet::http {
namespace {
using test::TestServer;

const test::SelfSignedCert& cert() { return test::self_signed_cert(); }

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cert().ok) GTEST_SKIP() << "openssl could not make a certificate";
    data_ = test::pattern(1 << 20);
    char tmpl[] = "/tmp/lionet-https-file-XXXXXX";
    int fd = mkstemp(tmpl);
    file_ = tmpl;
    ASSERT_EQ(::write(fd, data_.data(), data_.size()), static_cast<ssize_t>(data_.size()));
    ::close(fd);
    router_.get("/hello", [](Request& q, Response& s) { s.reply(200, q.is_tls() ? "hello tls" : "not tls"); });
    router_.get("/stream", [](Request&, Response& s) {
      s.set_body_writer([](BodyWriter& w) -> Result<void> {
        for (int i = 0; i < 10; ++i)
          if (auto r = w.write(std::string(1000, static_cast<char>('0' + i))); !r) return r;
        return {};
      });
    });
    router_.get("/file", test::file_handler(file_, data_.size()));
    SslOptions so;
    so.certificates = {{cert().cert, cert().key}};
    so.alpn = {"http/1.1"};
    server_ = std::make_unique<TestServer>(router_.handler());
    server_->server().enable_tls(SslContext::server(so));
    server_->start();
  }
  void TearDown() override {
    server_.reset();
    if (!file_.empty()) ::unlink(file_.c_str());
  }
  std::string url(const std::string& path) { return "https://localhost:" + std::to_string(server_->port()) + path; }

  Router router_;
  std::unique_ptr<TestServer> server_;
  std::string data_, file_;
};

TEST_F(HttpsTest, CurlWithCaCert) {
  if (!test::have_curl()) GTEST_SKIP() << "curl not installed";
  std::string base = "curl -s --http1.1 --cacert " + cert().cert +
                     " --resolve localhost:" + std::to_string(server_->port()) + ":127.0.0.1 ";
  int st = -1;
  EXPECT_EQ(test::shell(base + url("/hello"), &st), "hello tls");
  EXPECT_EQ(st, 0);
  EXPECT_EQ(test::shell(base + url("/stream")).size(), 10000u);
  std::string got = test::shell(base + url("/file"));
  EXPECT_TRUE(got == data_) << got.size();
  std::string connects =
      test::shell(base + "-o /dev/null -o /dev/null -w '%{num_connects}\\n' " + url("/hello") + " " + url("/hello"));
  EXPECT_EQ(connects, "1\n0\n");
  // Without the CA, curl refuses the self-signed certificate.
  test::shell(
      "curl -s --http1.1 --resolve localhost:" + std::to_string(server_->port()) + ":127.0.0.1 " + url("/hello"), &st);
  EXPECT_NE(st, 0);
}

TEST_F(HttpsTest, ClientVerifiesAndReusesConnections) {
  server_->run([&] {
    ClientOptions co;
    SslOptions so;
    so.ca_file = cert().cert;
    so.verify_peer = true;
    co.tls = SslContext::client(so);
    Client c(co);
    auto r = c.get(url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello tls");
    r = c.get(url("/stream"));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->chunked);
    EXPECT_EQ(r->body.size(), 10000u);
    EXPECT_TRUE(r->reused_connection);
    r = c.get(url("/file"));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->body == data_);
    // A client without TLS configured cannot reach https URLs.
    Client plain;
    EXPECT_EQ(plain.get(url("/hello")).error(), std::errc::protocol_not_supported);
  });
}
}  // namespace
}  // namespace lionet::http
