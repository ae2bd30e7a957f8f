// Tests of lionet/ssl/ssl_context.h: start-up errors name the file at fault; options that
// are not valid are refused at start-up.
#include "lionet/ssl/ssl_context.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "ssl_test_util.h"

namespace lionet {
namespace {

std::string server_error(const SslOptions& o) {
  try {
    SslContext::server(o);
  } catch (const SslError& e) {
    return e.what();
  }
  return "";
}

std::string scratch_file(const std::string& name, const std::string& content) {
  std::string p = test::Certs::get().dir + "/" + name;
  std::ofstream(p) << content;
  return p;
}

TEST(SslContextTest, ServerWithValidCertificateStarts) {
  auto ctx = SslContext::server(test::server_options());
  EXPECT_TRUE(ctx->is_server());
  EXPECT_NE(ctx->native(), nullptr);
  EXPECT_EQ(ctx->ktls_enabled(), SslContext::kernel_offers_ktls());
}

TEST(SslContextTest, MissingCertificateFileIsNamed) {
  auto o = test::server_options();
  o.certificates[0].cert_chain_file = "/nonexistent/dir/cert.pem";
  std::string msg = server_error(o);
  EXPECT_NE(msg.find("/nonexistent/dir/cert.pem"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

TEST(SslContextTest, MissingKeyFileIsNamed) {
  auto o = test::server_options();
  o.certificates[0].key_file = "/nonexistent/key.pem";
  std::string msg = server_error(o);
  EXPECT_NE(msg.find("private key /nonexistent/key.pem"), std::string::npos) << msg;
}

TEST(SslContextTest, KeyThatDoesNotMatchTheCertificateNamesBothFiles) {
  auto o = test::server_options();
  o.certificates[0].key_file = test::Certs::get().other.key;
  std::string msg = server_error(o);
  EXPECT_NE(msg.find(test::Certs::get().other.key), std::string::npos) << msg;
  EXPECT_NE(msg.find(test::Certs::get().localhost.cert), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not match"), std::string::npos) << msg;
}

TEST(SslContextTest, GarbageCertificateIsNamed) {
  auto o = test::server_options();
  o.certificates[0].cert_chain_file = scratch_file("garbage.pem", "this is not a certificate\n");
  std::string msg = server_error(o);
  EXPECT_NE(msg.find(o.certificates[0].cert_chain_file), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a valid PEM certificate"), std::string::npos) << msg;
}

TEST(SslContextTest, GarbageKeyIsNamed) {
  auto o = test::server_options();
  o.certificates[0].key_file =
      scratch_file("garbage-key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
  std::string msg = server_error(o);
  EXPECT_NE(msg.find(o.certificates[0].key_file), std::string::npos) << msg;
}

TEST(SslContextTest, DirectoryInsteadOfFileIsNamed) {
  auto o = test::server_options();
  o.certificates[0].cert_chain_file = test::Certs::get().dir;
  std::string msg = server_error(o);
  EXPECT_NE(msg.find(test::Certs::get().dir + ": not a regular file"), std::string::npos) << msg;
}

TEST(SslContextTest, UnreadableFileIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: every file is readable";
  auto o = test::server_options();
  std::string p = scratch_file("unreadable.pem", "x");
  ::chmod(p.c_str(), 0);
  o.certificates[0].key_file = p;
  std::string msg = server_error(o);
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot be read"), std::string::npos) << msg;
}

TEST(SslContextTest, ServerWithoutCertificateIsRefused) {
  EXPECT_NE(server_error(SslOptions{}).find("no certificate"), std::string::npos);
}

TEST(SslContextTest, BadVersionAndCipherOptionsAreRefused) {
  auto o = test::server_options();
  o.min_version = "SSL3";
  EXPECT_NE(server_error(o).find("min_version \"SSL3\""), std::string::npos);
  o = test::server_options();
  o.ciphers = "NO-SUCH-CIPHER";
  EXPECT_NE(server_error(o).find("NO-SUCH-CIPHER"), std::string::npos);
  o = test::server_options();
  o.alpn = {""};
  EXPECT_NE(server_error(o).find("ALPN"), std::string::npos);
}

TEST(SslContextTest, ClientWithMissingCaFileIsNamed) {
  auto o = test::client_options();
  o.ca_file = "/nonexistent/ca.pem";
  try {
    SslContext::client(o);
    FAIL() << "no exception";
  } catch (const SslError& e) {
    EXPECT_NE(std::string(e.what()).find("CA file /nonexistent/ca.pem"), std::string::npos) << e.what();
  }
}
}  // namespace
}  // namespace lionet
