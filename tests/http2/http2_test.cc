// HTTP/2 tests: the same Router served over h2c (prior knowledge) and h2 (TLS, ALPN), checked
// with the clients people use: curl (--http2-prior-knowledge, --http2) and nghttp
// (nghttp2-client), started here against servers on 127.0.0.1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "../http/http_test_util.h"
#include "lionet/http/router.h"
#include "lionet/http2/server.h"
#include "lionet/ssl/ssl_context.h"

namespace lionet::http {
namespace {
using test::shell;
using test::TestServer;
using namespace std::chrono_literals;

bool have(const char* tool) {
  int st = -1;
  shell(std::string("command -v ") + tool + " >/dev/null 2>&1", &st);
  return st == 0;
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/lionet-h2-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { shell("rm -rf " + path); }
};

// A self-signed certificate for localhost / 127.0.0.1, made once per test binary.
struct Cert {
  TempDir dir;
  std::string cert = dir.path + "/cert.pem", key = dir.path + "/key.pem";
  bool ok = false;
  Cert() {
    int st = -1;
    shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
              " -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null",
          &st);
    ok = st == 0;
  }
};
const Cert& cert() {
  static Cert c;
  return c;
}

class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have("curl")) GTEST_SKIP() << "curl is not installed (scripts/install-deps.sh installs it)";
    data_ = pattern(3 << 20);
    file_ = dir_.path + "/data.bin";
    std::ofstream(file_, std::ios::binary) << data_;
    router_.get("/hello", [](Request& q, Response& s) { s.reply(200, q.is_tls() ? "hello tls\n" : "hello\n"); });
    router_.get("/slow", [this](Request&, Response& s) {
      int now_in = ++in_flight_;
      int seen = max_in_flight_.load();
      while (now_in > seen && !max_in_flight_.compare_exchange_weak(seen, now_in)) {
      }
      this_fiber::sleep_for(200ms);
      --in_flight_;
      s.reply(200, "slow\n");
    });
    router_.post("/echo", [](Request& q, Response& s) {
      std::string body;
      if (!q.read_body(body)) {
        s.reply(400, "body failed\n");
        return;
      }
      s.set_status(200);
      s.set_content_type("application/octet-stream");
      s.set_body(std::move(body));
    });
    router_.post("/slow-reader", [this](Request& q, Response& s) {
      // Reads its upload slowly; the client must be held back by flow control, so the
      // bytes waiting in the server stay within the stream's window.
      char buf[16384];
      uint64_t total = 0;
      for (;;) {
        auto r = q.read_body(buf, sizeof buf);
        if (!r) {
          s.reply(500, "read failed\n");
          return;
        }
        if (*r == 0) break;
        total += *r;
        this_fiber::sleep_for(1ms);
      }
      uploaded_ = total;
      s.reply(200, std::to_string(total) + "\n");
    });
    router_.post("/careless", [](Request& q, Response& s) {
      std::string body;
      (void)q.read_body(body);
      s.reply(200, "ok\n");
    });
    router_.get("/stream", [](Request&, Response& s) {
      s.set_body_writer([](BodyWriter& w) -> Result<void> {
        for (int i = 0; i < 200; ++i)
          if (auto r = w.write(std::string(1000, static_cast<char>('0' + i % 10))); !r) return r;
        return {};
      });
    });
    router_.get("/file", [this](Request&, Response& s) {
      int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
      auto keep = std::shared_ptr<int>(new int(fd), [](int* p) {
        ::close(*p);
        delete p;
      });
      s.set_file(fd, 0, data_.size(), keep);
    });
  }
  void start(bool tls) {
    ServerOptions o;
    http2::enable(o);
    server_ = std::make_unique<TestServer>(router_.handler(), o);
    if (tls) {
      if (!cert().ok) GTEST_SKIP() << "openssl could not make a certificate";
      SslOptions so;
      so.certificates = {{cert().cert, cert().key}};
      so.alpn = {"h2", "http/1.1"};
      server_->server().enable_tls(SslContext::server(so));
    }
    server_->start();
    base_ = (tls ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(server_->port());
    curl_ = tls ? "curl -s --http2 --cacert " + cert().cert + " --resolve localhost:" +
                      std::to_string(server_->port()) + ":127.0.0.1 "
                : "curl -s --http2-prior-knowledge ";
  }
  std::string url(const std::string& path) const { return base_ + path; }
  // curl's "%{http_version} %{http_code}" for a request, body to `out` (or /dev/null).
  std::string curl(const std::string& args, const std::string& out = "/dev/null") {
    return shell(curl_ + "-o " + out + " -w '%{http_version} %{http_code}' " + args);
  }

  TempDir dir_;
  std::string data_, file_, base_, curl_;
  Router router_;
  std::unique_ptr<TestServer> server_;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
  std::atomic<uint64_t> uploaded_{0};
};

TEST_F(Http2Test, H2cWithPriorKnowledgeAndHttp11OnTheSamePort) {
  start(false);
  std::string out = dir_.path + "/hello";
  EXPECT_EQ(curl(base_ + "/hello", out), "2 200");
  EXPECT_EQ(read_file(out), "hello\n");
  // The same listener still speaks HTTP/1.1 to a client that does not know better.
  EXPECT_EQ(shell("curl -s -o /dev/null -w '%{http_version} %{http_code}' " + base_ + "/hello"), "1.1 200");
  EXPECT_EQ(curl(base_ + "/missing"), "2 404");
}

TEST_F(Http2Test, H2OverTlsIsChosenByAlpn) {
  start(true);
  std::string out = dir_.path + "/hello";
  EXPECT_EQ(curl(url("/hello"), out), "2 200");
  EXPECT_EQ(read_file(out), "hello tls\n");
  std::string http11 = shell("curl -s --http1.1 --cacert " + cert().cert + " --resolve localhost:" +
                             std::to_string(server_->port()) + ":127.0.0.1 -o /dev/null -w '%{http_version}' " +
                             url("/hello"));
  EXPECT_EQ(http11, "1.1");
}

TEST_F(Http2Test, LargeFileAndWriterBodiesArriveByteForByte) {
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "h2" : "h2c");
    start(tls);
    std::string out = dir_.path + "/file.out";
    EXPECT_EQ(curl(url("/file"), out), "2 200");
    EXPECT_TRUE(read_file(out) == data_) << "the 3 MiB file differs";
    EXPECT_EQ(curl(url("/stream"), out), "2 200");
    std::string got = read_file(out);
    ASSERT_EQ(got.size(), 200000u);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(got[static_cast<size_t>(i) * 1000], '0' + i % 10);
    // HEAD: the length, no body.
    std::string head = shell(curl_ + "-I " + url("/file"));
    EXPECT_NE(head.find("content-length: " + std::to_string(data_.size())), std::string::npos) << head;
    server_.reset();
  }
}

TEST_F(Http2Test, UploadIsEchoedAndASlowReaderGetsEveryByte) {
  start(false);
  std::string in = dir_.path + "/up.bin", out = dir_.path + "/up.out";
  { std::ofstream(in, std::ios::binary) << data_; }
  EXPECT_EQ(curl("--data-binary @" + in + " " + url("/echo"), out), "2 200");
  EXPECT_TRUE(read_file(out) == data_) << "the echoed 3 MiB body differs";
  // 3 MiB read 16 KiB per ms: the client can only be as fast as the handler reads.
  EXPECT_EQ(curl("--data-binary @" + in + " " + url("/slow-reader"), out), "2 200");
  EXPECT_EQ(read_file(out), std::to_string(data_.size()) + "\n");
  EXPECT_EQ(uploaded_.load(), data_.size());
}

TEST_F(Http2Test, StreamsOfOneConnectionRunTheirHandlersConcurrently) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  start(false);
  // nghttp -m 40: the same request 40 times over ONE connection, all streams at once.
  int st = -1;
  std::string out = shell("nghttp -n -s -m 40 " + url("/slow") + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(server_->server().stats().requests.load(), 40u);
  // Each handler sleeps 200 ms: run one after another they would never overlap.
  EXPECT_GE(max_in_flight_.load(), 20) << out;
}

TEST_F(Http2Test, ABodyOverTheLimitIs413AndTheConnectionServesOn) {
  ServerOptions o;
  o.limits.max_body_bytes = 1 << 20;
  http2::enable(o);
  server_ = std::make_unique<TestServer>(router_.handler(), o);
  server_->start();
  base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  curl_ = "curl -s --http2-prior-knowledge ";
  std::string in = dir_.path + "/up.bin";
  { std::ofstream(in, std::ios::binary) << data_; }  // 3 MiB
  // With a Content-Length: refused before the handler runs.
  EXPECT_EQ(curl("--data-binary @" + in + " " + url("/echo")), "2 413");
  // Without one (streamed): the handler's read fails with EMSGSIZE; a handler that answers
  // 200 anyway is overruled with 413, one that answers an error keeps it.
  EXPECT_EQ(curl("-H 'Content-Length:' --data-binary @" + in + " " + url("/careless")), "2 413");
  EXPECT_EQ(curl("-H 'Content-Length:' --data-binary @" + in + " " + url("/slow-reader")), "2 500");
  EXPECT_EQ(curl(url("/hello")), "2 200");
}

// Garbage after the preface is a connection error (GOAWAY); other connections are served.
TEST_F(Http2Test, GarbageAfterThePrefaceGetsGoawayAndOthersAreServed) {
  start(false);
  test::RawClient c(server_->port());
  std::string bad = std::string(kHttp2Preface) + std::string("\x00\x00\x04\x09\x00\x00\x00\x00\x00zzzz", 13);
  ASSERT_TRUE(c.send(bad));
  std::string got = c.read_until_closed(2s);
  // The server's SETTINGS, then a GOAWAY frame (type 7) before it closes.
  bool goaway = false;
  for (size_t i = 0; i + 9 <= got.size();) {
    size_t len = (static_cast<uint8_t>(got[i]) << 16) | (static_cast<uint8_t>(got[i + 1]) << 8) | static_cast<uint8_t>(got[i + 2]);
    if (got[i + 3] == 7) goaway = true;
    i += 9 + len;
  }
  EXPECT_TRUE(goaway) << got.size() << " bytes back";
  EXPECT_EQ(curl(url("/hello")), "2 200");
}

// h2spec (RFC 9113 and RFC 7541 conformance, 145 cases) against h2c and against h2 over TLS.
// scripts/install-deps.sh builds it (tests/tools/h2spec); without it this test fails.
TEST_F(Http2Test, H2specPassesEveryCaseOverH2cAndTls) {
  ASSERT_TRUE(have("h2spec")) << "h2spec is not installed: run scripts/install-deps.sh";
  const std::string h2spec = "h2spec";
  router_.get("/", [](Request&, Response& s) { s.reply(200, std::string(2000, 'x')); });
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "h2" : "h2c");
    start(tls);
    int st = -1;
    std::string out = shell(h2spec + " -h 127.0.0.1 -p " + std::to_string(server_->port()) + (tls ? " -t -k" : "") +
                                " -o 5 2>&1",
                            &st);
    size_t at = out.find(" tests, ");
    std::string summary = at == std::string::npos ? out : out.substr(out.rfind('\n', at) + 1);
    EXPECT_EQ(st, 0) << summary;
    EXPECT_NE(summary.find(" passed, 0 skipped, 0 failed"), std::string::npos) << out;
    server_.reset();
  }
}

}  // namespace
}  // namespace lionet::http
