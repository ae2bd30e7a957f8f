// `watch: true` (lionet/app/watch.h) in the lionet binary: a configuration edit reloads as
// SIGHUP does (a broken edit keeps the running configuration, logged once); a certificate
// rotated by rename reaches new TLS connections (openssl s_client) within 2 s while a
// connection made before keeps working; a static file changed on disk is served anew at once
// although open_file_cache_valid would keep the cached copy for a minute (and without watch it
// does: the control run).
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../common/sanitizers.h"
#include "app_process.h"
#include "lionet/net/address.h"
#include "lionet/net/socket.h"
#include "lionet/ssl/ssl_context.h"
#include "lionet/ssl/ssl_stream.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;
using namespace std::chrono_literals;

const auto kWithin = std::chrono::milliseconds(static_cast<int>(2000 * test::kSlowdown));

void put(const fs::path& p, const std::string& text) {
  fs::path tmp = p;
  tmp += ".part";
  std::ofstream(tmp, std::ios::binary) << text;
  fs::rename(tmp, p);  // whole files only: the server never reads half of one
}

// A self-signed EC certificate for CN=<cn> as dir/<name>.cert.pem and dir/<name>.key.pem.
bool make_cert(const fs::path& dir, const std::string& name, const std::string& cn) {
  int rc = -1;
  sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=" + cn + " -keyout " +
         (dir / (name + ".key.pem")).string() + " -out " + (dir / (name + ".cert.pem")).string() + " 2>/dev/null",
     &rc);
  return rc == 0;
}

// The subject CN a new TLS connection to port sees (openssl s_client), "" if none.
std::string served_cn(int port) {
  std::string out = sh("timeout 5 openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                       " </dev/null 2>/dev/null | openssl x509 -noout -subject 2>/dev/null");
  auto at = out.find("CN");
  if (at == std::string::npos) return "";
  auto eq = out.find('=', at);
  std::string cn = out.substr(eq + 1);
  while (!cn.empty() && (cn.back() == '\n' || cn.back() == ' ')) cn.pop_back();
  while (!cn.empty() && cn.front() == ' ') cn.erase(cn.begin());
  return cn;
}

// Polls f() until it returns want or `within` passes; returns the last value.
template <class F>
std::string wait_value(F f, const std::string& want, std::chrono::milliseconds within) {
  const auto end = std::chrono::steady_clock::now() + within;
  std::string v;
  for (;;) {
    v = f();
    if (v == want || std::chrono::steady_clock::now() >= end) return v;
    std::this_thread::sleep_for(50ms);
  }
}

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = hay.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

class AppWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = conf_.path();
    fs::create_directories(root_ / "conf");
    fs::create_directories(root_ / "www" / "sub");
    fs::create_directories(root_ / "tls");
    http_ = free_port();
    https_ = free_port();
  }
  void write_conf(bool watch, const std::string& shutdown = "5000ms") {
    const std::string r = root_.string();
    put(root_ / "conf" / "server.yml",
        std::string("scheduler: {threads: 2}\n") + "app: {shutdown_timeout: " + shutdown + "}\n" +
            "watch: " + (watch ? "true" : "false") + "\n" + "servers:\n" + "  - name: web\n    type: http\n" +
            "    listen: ['127.0.0.1:" + std::to_string(http_) + "']\n" + "    routes:\n" +
            "      - {path: /, type: static, root: " + r + "/www, mode: memory, open_file_cache_valid: 60s}\n" +
            "      - {path: /healthz, type: health}\n" + "  - name: tls\n    type: https\n" +
            "    listen: ['127.0.0.1:" + std::to_string(https_) + "']\n" + "    tls: {cert: " + r +
            "/tls/cert.pem, key: " + r + "/tls/key.pem}\n" + "    routes:\n" +
            "      - {path: /healthz, type: health}\n");
  }
  std::string url(const std::string& p) const { return "http://127.0.0.1:" + std::to_string(http_) + p; }

  TempConf conf_;
  fs::path root_;
  int http_ = 0, https_ = 0;
};

TEST_F(AppWatch, AConfigurationEditReloadsAsSighupAndABrokenOneKeepsTheRunningConfigLoggedOnce) {
  ASSERT_TRUE(make_cert(root_ / "tls", "a", "a.test"));
  fs::rename(root_ / "tls" / "a.cert.pem", root_ / "tls" / "cert.pem");
  fs::rename(root_ / "tls" / "a.key.pem", root_ / "tls" / "key.pem");
  write_conf(true);
  Process p({"-c", (root_ / "conf").string()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  ASSERT_TRUE(p.wait_for("watch: following")) << p.output();

  write_conf(true, "7000ms");  // one key changed
  ASSERT_TRUE(p.wait_for("reloaded: 1 key(s) changed", 10s)) << p.output();
  EXPECT_NE(p.output().find("watch: " + (root_ / "conf").string() + " changed: reloading as on SIGHUP"),
            std::string::npos)
      << p.output();

  // A broken edit (an unterminated flow map on line 2): the error names file and line, once.
  put(root_ / "conf" / "server.yml", "scheduler: {threads: 2}\napp: {shutdown_timeout: 5000ms\n");
  ASSERT_TRUE(p.wait_for("reload rejected, keeping the running configuration", 10s)) << p.output();
  std::this_thread::sleep_for(1s);  // anything repeated would be logged by now
  const std::string out = p.output();
  EXPECT_EQ(count_of(out, "reload rejected"), 1u) << out;
  EXPECT_NE(out.find("server.yml:"), std::string::npos) << "no file:line in the error: " << out;
  // Still serving, with the configuration it had.
  EXPECT_EQ(curl(url("/healthz")).status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

TEST_F(AppWatch, ARotatedCertificateReachesNewConnectionsWhileAnOpenOneKeepsWorking) {
  ASSERT_TRUE(make_cert(root_ / "tls", "a", "a.test"));
  ASSERT_TRUE(make_cert(root_ / "tls", "b", "b.test"));
  fs::copy_file(root_ / "tls" / "a.cert.pem", root_ / "tls" / "cert.pem");
  fs::copy_file(root_ / "tls" / "a.key.pem", root_ / "tls" / "key.pem");
  write_conf(true);
  Process p({"-c", (root_ / "conf").string()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for(kReady)) << p.output();
  ASSERT_TRUE(p.wait_for("watch: following")) << p.output();
  ASSERT_EQ(served_cn(https_), "a.test") << p.output();

  // A connection made before the rotation.
  auto ctx = SslContext::client({});
  auto sock = Socket::connect_to(Address::parse("127.0.0.1:" + std::to_string(https_)).value());
  ASSERT_TRUE(sock.ok()) << sock.error().message();
  SslStream old_conn(ctx, std::move(*sock));
  old_conn.set_timeouts(10s, 10s);
  ASSERT_TRUE(old_conn.handshake().ok());
  auto ask = [&] {
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    if (!old_conn.write(req.data(), req.size()).ok()) return std::string("write failed");
    char buf[512];
    auto n = old_conn.read(buf, sizeof buf);
    return n.ok() ? std::string(buf, *n) : "read failed: " + n.error().message();
  };
  ASSERT_NE(ask().find("200 OK"), std::string::npos);

  // Renewal as tools do it: new files written beside, renamed over (key first, then cert).
  fs::copy_file(root_ / "tls" / "b.key.pem", root_ / "tls" / "key.pem.new");
  fs::copy_file(root_ / "tls" / "b.cert.pem", root_ / "tls" / "cert.pem.new");
  fs::rename(root_ / "tls" / "key.pem.new", root_ / "tls" / "key.pem");
  fs::rename(root_ / "tls" / "cert.pem.new", root_ / "tls" / "cert.pem");
  EXPECT_EQ(wait_value([&] { return served_cn(https_); }, "b.test", kWithin), "b.test") << p.output();
  EXPECT_TRUE(p.wait_for("server 'tls': certificate", 10s)) << p.output();
  // The connection made before still works, on its old certificate.
  EXPECT_NE(ask().find("200 OK"), std::string::npos);
  X509* peer = SSL_get1_peer_certificate(old_conn.native());
  ASSERT_NE(peer, nullptr);
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(peer), subject, sizeof subject);
  X509_free(peer);
  EXPECT_NE(std::string(subject).find("a.test"), std::string::npos) << subject;

  // A bad pair (a certificate without its key): the running one stays, and why is logged.
  fs::copy_file(root_ / "tls" / "a.cert.pem", root_ / "tls" / "cert.pem.new");
  fs::rename(root_ / "tls" / "cert.pem.new", root_ / "tls" / "cert.pem");
  ASSERT_TRUE(p.wait_for("was not loaded, keeping the running one", 10s)) << p.output();
  EXPECT_EQ(served_cn(https_), "b.test");
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.output();
}

// The same edit with and without watch: with open_file_cache_valid 60s the cached copy would be
// served for a minute; the watcher drops it at once.
TEST_F(AppWatch, AChangedStaticFileIsServedAnewAtOnceDespiteTheOpenFileCache) {
  ASSERT_TRUE(make_cert(root_ / "tls", "a", "a.test"));
  fs::rename(root_ / "tls" / "a.cert.pem", root_ / "tls" / "cert.pem");
  fs::rename(root_ / "tls" / "a.key.pem", root_ / "tls" / "key.pem");
  for (bool watch : {false, true}) {
    SCOPED_TRACE(watch ? "watch: true" : "watch: false");
    put(root_ / "www" / "page.txt", "version 1");
    put(root_ / "www" / "sub" / "deep.txt", "deep 1");
    write_conf(watch);
    Process p({"-c", (root_ / "conf").string()});
    REQUIRE_BINARY(p);
    ASSERT_TRUE(p.wait_for(kReady)) << p.output();
    if (watch) {
      ASSERT_TRUE(p.wait_for("watch: following")) << p.output();
    }
    ASSERT_EQ(curl(url("/page.txt")).body, "version 1");
    ASSERT_EQ(curl(url("/sub/deep.txt")).body, "deep 1");
    // Written in place (same inode), and renamed over (a new inode), in a subdirectory too.
    { std::ofstream(root_ / "www" / "page.txt", std::ios::binary | std::ios::trunc) << "version 2"; }
    put(root_ / "www" / "sub" / "deep.txt", "deep 2");
    // A directory made after the start is watched too.
    fs::create_directories(root_ / "www" / "later");
    std::this_thread::sleep_for(400ms);  // past the watcher's debounce, so the directory is watched
    put(root_ / "www" / "later" / "new.txt", "new 1");
    ASSERT_EQ(curl(url("/later/new.txt")).body, "new 1");
    put(root_ / "www" / "later" / "new.txt", "new 2");
    if (watch) {
      EXPECT_EQ(wait_value([&] { return curl(url("/page.txt")).body; }, "version 2", kWithin), "version 2");
      EXPECT_EQ(wait_value([&] { return curl(url("/sub/deep.txt")).body; }, "deep 2", kWithin), "deep 2");
      EXPECT_EQ(wait_value([&] { return curl(url("/later/new.txt")).body; }, "new 2", kWithin), "new 2");
    } else {  // the control: the cache keeps serving what it read (within open_file_cache_valid)
      std::this_thread::sleep_for(kWithin);
      EXPECT_EQ(curl(url("/page.txt")).body, "version 1");
      EXPECT_EQ(curl(url("/sub/deep.txt")).body, "deep 1");
      EXPECT_EQ(curl(url("/later/new.txt")).body, "new 1");
    }
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(), 0) << p.output();
    fs::remove_all(root_ / "www" / "later");
  }
}
}  // namespace
}  // namespace lionet::app
