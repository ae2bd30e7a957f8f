// Interop with a real client: `openssl s_client` against an SslStream server, TLS 1.2 and 1.3,
// certificate verified, and resumption (-sess_out, then -sess_in reports "Reused"). Skipped,
// visibly, where the openssl binary is missing.
#include <gtest/gtest.h>
#include <stdio.h>

#include <array>
#include <string>

#include "ssl_test_util.h"

namespace lionet {
namespace {
using namespace std::chrono_literals;

bool have_openssl() { return std::system("openssl version >/dev/null 2>&1") == 0; }

// Runs cmd in a shell (from this plain thread), returns stdout+stderr.
std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

class SClientTest : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Tls, SClientTest, ::testing::Values("-tls1_2", "-tls1_3"));

TEST_P(SClientTest, HandshakeVerifyAndResumption) {
  if (!have_openssl()) GTEST_SKIP() << "no openssl binary: s_client interop not tested";
  test::Runtime rt;
  auto ctx = SslContext::server(test::server_options());
  // Greets, sends close_notify, then waits for the client's end of stream.
  TcpServer server(rt.io(), [ctx](SocketStream& s) {
    SslStream tls(ctx, s.socket());
    tls.set_timeouts(10s, 10s);
    if (!tls.handshake()) return;
    if (!tls.write(std::string("hello from lionet, ") + tls.version() +
                   (tls.session_reused() ? " resumed\n" : " new\n")))
      return;
    (void)tls.shutdown_write();
    char b[256];
    while (auto r = tls.read(b, sizeof b)) {
      if (*r == 0) break;
    }
  });
  server.listen(Address::ipv4_loopback(0));
  server.start();
  const std::string version = GetParam();
  const std::string sess = test::Certs::get().dir + "/sess" + version + ".pem";
  const std::string base = "timeout 20 openssl s_client -connect " + server.addresses()[0].to_string() +
                           " -servername localhost -verify_return_error -CAfile " + test::Certs::get().localhost.cert +
                           " " + version + " -ign_eof </dev/null";
  const char* expect_version = version == "-tls1_2" ? "TLSv1.2" : "TLSv1.3";

  std::string first = run(base + " -sess_out " + sess);
  EXPECT_NE(first.find("hello from lionet, " + std::string(expect_version) + " new"), std::string::npos) << first;
  EXPECT_NE(first.find("New, " + std::string(expect_version)), std::string::npos) << first;
  EXPECT_NE(first.find("Verify return code: 0 (ok)"), std::string::npos) << first;

  std::string second = run(base + " -sess_in " + sess);
  EXPECT_NE(second.find("Reused, " + std::string(expect_version)), std::string::npos) << second;
  EXPECT_NE(second.find("hello from lionet, " + std::string(expect_version) + " resumed"), std::string::npos) << second;
  server.stop(1s);
}
}  // namespace
}  // namespace lionet
