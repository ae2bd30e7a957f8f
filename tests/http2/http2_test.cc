// HTTP/2 tests: the same Router served over h2c (prior knowledge) and h2 (TLS, ALPN), checked
// with the clients people use: curl (--http2-prior-knowledge, --http2) and nghttp
// (nghttp2-client), started here against servers on 127.0.0.1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/sanitizers.h"
#include "../http/http_test_util.h"
#include "lionet/http/router.h"
#include "lionet/http/static_files.h"
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

const test::SelfSignedCert& cert() { return test::self_signed_cert(); }

class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have("curl")) GTEST_SKIP() << "curl is not installed (scripts/install-deps.sh installs it)";
    data_ = test::pattern(3 << 20);
    file_ = dir_.path + "/data.bin";
    std::ofstream(file_, std::ios::binary) << data_;
    // Marked nonblocking: answered on the connection's fiber (start() installs the predicate).
    router_.get("/hello",
                nonblocking([](Request& q, Response& s) { s.reply(200, q.is_tls() ? "hello tls\n" : "hello\n"); }));
    router_.get("/inline-throw", nonblocking([](Request&, Response&) { throw std::runtime_error("boom"); }));
    router_.get("/slow", in_flight_.sleeper(200ms, "slow\n"));
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
    router_.post("/slow-sink", [this](Request& q, Response& s) {
      // Reads a large upload 64 KiB at a time, pausing after each read.
      std::unique_ptr<char[]> buf(new char[65536]);
      uint64_t total = 0;
      for (;;) {
        auto r = q.read_body(buf.get(), 65536);
        if (!r) return s.reply(500, "read failed\n");
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
    router_.get("/file", test::file_handler(file_, data_.size()));
    router_.get("/trailers", [](Request&, Response& s) {
      s.set_body(std::string_view("body\n"));
      s.add_trailer("Grpc-Status", "0");
      s.add_trailer("Grpc-Message", "fine");
    });
  }
  void start(bool tls, ServerOptions o = {}) {
    http2::enable(o);
    o.runs_inline = router_.inline_predicate();  // as the lionet binary does
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
    curl_ = tls ? "curl -s --http2 --cacert " + cert().cert +
                      " --resolve localhost:" + std::to_string(server_->port()) + ":127.0.0.1 "
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
  test::InFlight in_flight_;
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
  std::string http11 =
      shell("curl -s --http1.1 --cacert " + cert().cert + " --resolve localhost:" + std::to_string(server_->port()) +
            ":127.0.0.1 -o /dev/null -w '%{http_version}' " + url("/hello"));
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

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

// 100 MiB uploaded to a handler that reads slowly: flow control holds curl back, so the
// server's memory stays bounded by the windows, not by the body.
TEST_F(Http2Test, AHundredMebibyteUploadToASlowReaderKeepsMemoryBounded) {
  ServerOptions o;
  o.limits.max_body_bytes = 1ull << 30;
  start(false, o);
  const uint64_t size = (lionet::test::kTsan || lionet::test::kAsan ? 20ull : 100ull) << 20;
  std::string in = dir_.path + "/big.bin";
  { std::ofstream(in, std::ios::binary); }
  ASSERT_EQ(::truncate(in.c_str(), static_cast<off_t>(size)), 0);  // sparse: no disk used
  const long before = rss_kib();
  std::atomic<long> peak{before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak.load(), rss_kib());
      std::this_thread::sleep_for(5ms);
    }
  });
  std::string out = dir_.path + "/big.out";
  std::string got = curl("-X POST -T " + in + " " + url("/slow-sink"), out);
  done = true;
  sampler.join();
  EXPECT_EQ(got, "2 200");
  EXPECT_EQ(read_file(out), std::to_string(size) + "\n");
  EXPECT_EQ(uploaded_.load(), size);
  // Buffered whole, the body alone would be the upload's size; with flow control what waits
  // is one stream window (64 KiB) plus the read buffers.
  EXPECT_LT(peak.load() - before, 16 * 1024) << "RSS grew by " << (peak.load() - before) << " KiB";
}

// Static files over h2 answer Range, conditional and unsatisfiable requests exactly as over
// HTTP/1.1: same status, same validators, same bytes.
TEST_F(Http2Test, StaticFilesRangeEtagAnd416MatchHttp11) {
  StaticOptions so;
  so.root = dir_.path;
  StaticFiles files(so);
  router_.prefix("GET,HEAD", "/static", files.handler());
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "h2" : "h2c");
    start(tls);
    const std::string http11 = tls ? "curl -s --http1.1 --cacert " + cert().cert +
                                         " --resolve localhost:" + std::to_string(server_->port()) + ":127.0.0.1 "
                                   : "curl -s --http1.1 ";
    const std::string u = url("/static/data.bin");
    // Range: 206, the slice, its Content-Range.
    std::string out = dir_.path + "/range.out";
    EXPECT_EQ(curl("-r 10-99 " + u, out), "2 206");
    EXPECT_EQ(read_file(out), data_.substr(10, 90));
    std::string h2head = shell(curl_ + "-s -D - -o /dev/null -r 10-99 " + u);
    std::string h1head = shell(http11 + "-s -D - -o /dev/null -r 10-99 " + u);
    auto field = [](const std::string& head, const std::string& name) {
      std::string lower = head;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      size_t at = lower.find("\n" + name + ": ");
      if (at == std::string::npos) return std::string();
      size_t from = at + name.size() + 3;
      return head.substr(from, head.find('\r', from) - from);
    };
    EXPECT_EQ(field(h2head, "content-range"), "bytes 10-99/" + std::to_string(data_.size())) << h2head;
    EXPECT_EQ(field(h2head, "content-range"), field(h1head, "content-range"));
    const std::string etag = field(h2head, "etag");
    ASSERT_FALSE(etag.empty()) << h2head;
    EXPECT_EQ(etag, field(h1head, "etag"));
    // If-None-Match with the ETag: 304 and no body, as over HTTP/1.1.
    const std::string out304 = dir_.path + "/304.out";  // curl creates no file for an empty body
    EXPECT_EQ(curl("-H 'If-None-Match: " + etag + "' " + u, out304), "2 304");
    EXPECT_EQ(read_file(out304), "");
    EXPECT_EQ(shell(http11 + "-o /dev/null -w '%{http_code}' -H 'If-None-Match: " + etag + "' " + u), "304");
    // A range past the end: 416 over both.
    EXPECT_EQ(curl("-r 999999999-1000000000 " + u), "2 416");
    EXPECT_EQ(shell(http11 + "-o /dev/null -w '%{http_code}' -r 999999999-1000000000 " + u), "416");
    // The whole file, byte for byte.
    EXPECT_EQ(curl(u, out), "2 200");
    EXPECT_TRUE(read_file(out) == data_);
    server_.reset();
  }
}

// Response trailers arrive as a HEADERS frame that ends the stream, after the DATA.
TEST_F(Http2Test, TrailersArriveAfterTheBodyAsSeenByNghttp) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  start(false);
  int st = -1;
  std::string out = shell("nghttp -v " + url("/trailers") + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  size_t data = out.find("recv DATA frame");
  size_t trailer = out.find("grpc-status: 0");
  ASSERT_NE(data, std::string::npos) << out;
  ASSERT_NE(trailer, std::string::npos) << out;
  EXPECT_GT(trailer, data) << "the trailer came before the body\n" << out;
  EXPECT_NE(out.find("grpc-message: fine"), std::string::npos) << out;
  size_t last_headers = out.rfind("recv HEADERS frame");
  EXPECT_GT(last_headers, data) << out;
  EXPECT_NE(out.find("END_STREAM", last_headers), std::string::npos) << "the trailers end the stream\n" << out;
}

// Stream objects are kept per worker and reused by the next stream of any connection: nothing
// of an earlier exchange (its header, trailers, body, status) shows in a later one's answer on
// another connection.
TEST_F(Http2Test, AStreamReusedByAnotherConnectionCarriesNothingOfTheLastExchange) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  router_.get("/marked", nonblocking([](Request&, Response& s) {
    s.set_status(203);
    s.set_header("X-Left", "behind");
    s.set_body(std::string(3000, 'm'));
    s.add_trailer("Grpc-Status", "7");
  }));
  router_.get("/plain", [](Request&, Response& s) { s.reply(200, "plain\n"); });
  start(false);
  for (int i = 0; i < 10; ++i) {
    int st = -1;
    std::string marked = shell("nghttp -v " + url("/marked") + " " + url("/marked") + " 2>&1", &st);
    ASSERT_EQ(st, 0) << marked;
    ASSERT_NE(marked.find("x-left: behind"), std::string::npos) << marked;
    ASSERT_NE(marked.find("grpc-status: 7"), std::string::npos) << marked;
    for (const char* path : {"/plain", "/hello"}) {
      std::string plain = shell("nghttp -v " + url(path) + " 2>&1", &st);
      ASSERT_EQ(st, 0) << plain;
      EXPECT_NE(plain.find(":status: 200"), std::string::npos) << plain;
      EXPECT_EQ(plain.find("x-left"), std::string::npos) << plain;
      EXPECT_EQ(plain.find("grpc-status"), std::string::npos) << plain;
      EXPECT_EQ(plain.find("mmm"), std::string::npos) << plain;
    }
  }
}

// Each stream of an `nghttp -v` run: the path it asked for and the fields it got back
// ("name: value" as nghttp prints them).
struct Exchange {
  std::string path;
  std::vector<std::string> fields;
  bool has(const std::string& f) const { return std::find(fields.begin(), fields.end(), f) != fields.end(); }
  bool names(const std::string& prefix) const {
    return std::any_of(fields.begin(), fields.end(), [&](const std::string& f) { return f.starts_with(prefix); });
  }
};
std::map<int, Exchange> exchanges(const std::string& out) {
  std::map<int, Exchange> m;
  std::istringstream in(out);
  std::string line;
  int sending = -1;  // the stream whose HEADERS frame nghttp is printing
  while (std::getline(in, line)) {
    if (size_t p = line.find(" frame <"); p != std::string::npos) {
      size_t id = line.find("stream_id=", p);
      sending = line.find("send HEADERS frame") != std::string::npos && id != std::string::npos
                    ? std::atoi(line.c_str() + id + 10)
                    : -1;
      continue;
    }
    if (size_t p = line.find(":path: "); sending >= 0 && p != std::string::npos) {
      m[sending].path = line.substr(p + 7);
      continue;
    }
    if (size_t p = line.find("recv (stream_id="); p != std::string::npos) {
      size_t close = line.find(") ", p);
      if (close != std::string::npos) m[std::atoi(line.c_str() + p + 16)].fields.push_back(line.substr(close + 2));
    }
  }
  return m;
}

// The server converts a response's header block once and reuses the result for the next
// response of the connection whose block is the same bytes: every response must still carry its
// own fields, whether its block repeats the last one's, differs, has an empty value or is too
// large to be remembered.
TEST_F(Http2Test, EveryResponseOfAConnectionCarriesItsOwnFields) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  router_.get("/fa", nonblocking([](Request&, Response& s) {
                s.set_header("X-Kind", "a");
                s.set_header("X-Same", "1");
                s.reply(200, "a");
              }));
  router_.get("/fb", nonblocking([](Request&, Response& s) {
                s.set_header("X-Kind", "bb");
                s.set_header("X-Empty", "");
                s.reply(200, "b");
              }));
  router_.get("/fc", nonblocking([](Request&, Response& s) {
                s.set_header("X-Big", std::string(1100, 'c'));
                s.reply(200, "c");
              }));
  start(false);
  const std::vector<std::string> paths = {"/fa", "/fa", "/fb", "/fb", "/fc", "/fc", "/fa", "/fb"};
  std::string cmd = "nghttp -v";
  for (size_t i = 0; i < paths.size(); ++i)
    cmd += " " + url(paths[i] + "?" + std::to_string(i));  // nghttp drops repeats
  for (int run = 0; run < 3; ++run) {
    int st = -1;
    std::string out = shell(cmd + " 2>&1", &st);
    ASSERT_EQ(st, 0) << out;
    std::map<int, Exchange> ex = exchanges(out);
    size_t seen = 0;
    for (const auto& [id, e] : ex) {
      if (e.path.empty()) continue;
      ++seen;
      ASSERT_TRUE(e.has(":status: 200")) << id << " " << e.path << "\n" << out;
      if (e.path.starts_with("/fa?")) {
        EXPECT_TRUE(e.has("x-kind: a") && e.has("x-same: 1")) << id << "\n" << out;
        EXPECT_FALSE(e.names("x-empty") || e.names("x-big")) << id << "\n" << out;
      } else if (e.path.starts_with("/fb?")) {
        EXPECT_TRUE(e.has("x-kind: bb") && e.has("x-empty: ")) << id << "\n" << out;
        EXPECT_FALSE(e.names("x-same") || e.names("x-big")) << id << "\n" << out;
      } else {
        EXPECT_TRUE(e.has("x-big: " + std::string(1100, 'c'))) << id << "\n" << out;
        EXPECT_FALSE(e.names("x-kind") || e.names("x-same")) << id << "\n" << out;
      }
      EXPECT_TRUE(e.has("content-length: 1")) << id << "\n" << out;
    }
    EXPECT_EQ(seen, paths.size()) << out;
  }
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
  EXPECT_GE(in_flight_.max.load(), 20) << out;
}

// nghttp -s's timing table: per request, when its last byte arrived (ms after the connection was
// made) and its status, keyed by path.
struct NghttpTiming {
  double end_ms;
  int code;
  std::string path;
};
std::vector<NghttpTiming> nghttp_timings(const std::string& out) {
  std::vector<NghttpTiming> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, end, start, process, size, path;
    int code = 0;
    if (!(ls >> id >> end >> start >> process >> code >> size >> path) || end.empty() || end[0] != '+') continue;
    double t = std::stod(end.substr(1));
    if (end.ends_with("us")) t /= 1000;
    else if (!end.ends_with("ms")) t *= 1000;  // seconds
    v.push_back({t, code, path});
  }
  return v;
}

// Requests to a route marked nonblocking are answered on the connection's own fiber, in the turn
// that read them; a slow handler's stream on the same connection holds none of them up.
TEST_F(Http2Test, NonblockingRoutesAreAnsweredWhileASlowStreamOfTheSameConnectionRuns) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  start(false);
  std::string cmd = "nghttp -n -s " + url("/slow");  // one connection for every URL
  for (int i = 0; i < 20; ++i) cmd += " " + url("/hello?" + std::to_string(i));
  int st = -1;
  std::string out = shell(cmd + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  double slow_end = -1;
  int hellos = 0;
  for (const auto& t : nghttp_timings(out)) {
    EXPECT_EQ(t.code, 200) << t.path;
    if (t.path == "/slow") slow_end = t.end_ms;
    else ++hellos;
  }
  ASSERT_EQ(hellos, 20) << out;
  ASSERT_GT(slow_end, 0) << out;
  for (const auto& t : nghttp_timings(out)) {
    if (t.path != "/slow") {
      EXPECT_LT(t.end_ms, slow_end) << t.path << "\n" << out;
    }
  }
  EXPECT_EQ(server_->server().stats().requests.load(), 21u);
}

// A handler marked nonblocking that throws is answered 500 like any other; the connection and
// its next request go on.
TEST_F(Http2Test, ANonblockingHandlerThatThrowsGets500AndTheConnectionServesOn) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  start(false);
  int st = -1;  // nghttp: every URL over one connection
  std::string out = shell("nghttp -n -s " + url("/inline-throw") + " " + url("/hello") + " 2>&1", &st);
  EXPECT_EQ(st, 0) << out;
  auto timings = nghttp_timings(out);
  ASSERT_EQ(timings.size(), 2u) << out;
  for (const auto& t : timings) EXPECT_EQ(t.code, t.path == "/inline-throw" ? 500 : 200) << out;
  EXPECT_EQ(shell(curl_ + "-o /dev/null -w '%{http_code}' " + url("/hello")), "200");
}

// A CHUNK-mode static route is nonblocking, but its body is written by a writer that waits for
// the client's window: that part runs in a fiber of its own, and the bytes arrive whole.
TEST_F(Http2Test, ChunkModeFilesFromANonblockingRouteArriveWhole) {
  if (!have("nghttp")) GTEST_SKIP() << "nghttp is not installed (Debian nghttp2-client)";
  StaticOptions so;
  so.root = dir_.path;
  so.mode = FileMode::kChunk;
  so.chunk_size = 16384;
  StaticFiles files(so);
  ASSERT_TRUE(is_nonblocking(files.handler()));
  router_.prefix("GET,HEAD", "/chunked", files.handler());
  start(false);
  const std::string out = dir_.path + "/chunk.out";
  EXPECT_EQ(curl(url("/chunked/data.bin"), out), "2 200");
  EXPECT_TRUE(read_file(out) == data_) << "the file arrived altered";
  // Eight at once over one connection, their writers interleaved by the peer's windows.
  int st = -1;
  std::string many = shell("nghttp -n -s -m 8 " + url("/chunked/data.bin") + " 2>&1", &st);
  EXPECT_EQ(st, 0) << many;
  auto timings = nghttp_timings(many);
  ASSERT_EQ(timings.size(), 8u) << many;
  for (const auto& t : timings) EXPECT_EQ(t.code, 200) << many;
  if (have("h2load")) {  // the same with h2load, which counts the body bytes
    std::string load = shell("h2load -n 8 -c 1 -m 8 " + url("/chunked/data.bin") + " 2>&1");
    EXPECT_NE(load.find("8 succeeded, 0 failed, 0 errored"), std::string::npos) << load;
    EXPECT_NE(load.find("(" + std::to_string(8 * data_.size()) + ") data"), std::string::npos) << load;
  }
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
  // Without one (streamed): the handler's read fails with EMSGSIZE; whatever it answers but a
  // 413 of its own is overruled with 413, as over HTTP/1.1 (200 here, 500 "read failed" there).
  EXPECT_EQ(curl("-H 'Content-Length:' --data-binary @" + in + " " + url("/careless")), "2 413");
  EXPECT_EQ(curl("-H 'Content-Length:' --data-binary @" + in + " " + url("/slow-reader")), "2 413");
  EXPECT_EQ(curl(url("/hello")), "2 200");
}

// Stopping the server lets a stream in flight finish: its response arrives, then GOAWAY.
TEST_F(Http2Test, GracefulStopAnswersTheStreamsInFlight) {
  start(false);
  std::string got;
  std::thread client([&] { got = curl(url("/slow")); });
  for (int i = 0; i < 200 && in_flight_.now.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(in_flight_.now.load(), 1) << "the request never reached its handler";
  EXPECT_TRUE(server_->server().stop(5s));
  client.join();
  EXPECT_EQ(got, "2 200");
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
    size_t len = (static_cast<uint8_t>(got[i]) << 16) | (static_cast<uint8_t>(got[i + 1]) << 8) |
                 static_cast<uint8_t>(got[i + 2]);
    if (got[i + 3] == 7) goaway = true;
    i += 9 + len;
  }
  EXPECT_TRUE(goaway) << got.size() << " bytes back";
  EXPECT_EQ(curl(url("/hello")), "2 200");
}

// ---- limits against the known HTTP/2 attacks, with frames written by hand ----------------

// One frame: 9-byte header + payload (RFC 9113 4.1).
std::string frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload = {}) {
  std::string f;
  size_t n = payload.size();
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  f += static_cast<char>((stream >> 24) & 0x7f);
  f += static_cast<char>((stream >> 16) & 0xff);
  f += static_cast<char>((stream >> 8) & 0xff);
  f += static_cast<char>(stream & 0xff);
  f.append(payload);
  return f;
}
constexpr uint8_t kData = 0, kHeaders = 1, kRst = 3, kSettings = 4, kPing = 6, kGoaway = 7, kContinuation = 9;
constexpr uint8_t kEndStream = 0x1, kEndHeaders = 0x4;
// HPACK: :method GET (0x82) or POST (0x83), :scheme http (0x86), :path as given (literal,
// not indexed), :authority "a".
std::string request_block(std::string_view path, bool post = false) {
  std::string b;
  b += static_cast<char>(post ? 0x83 : 0x82);
  b += static_cast<char>(0x86);
  b += static_cast<char>(0x04);
  b += static_cast<char>(path.size());
  b.append(path);
  b += std::string("\x01\x01\x61", 3);
  return b;
}
// A POST whose block also carries a `connection` field (literal, not indexed), which HTTP/2
// forbids (RFC 9113 8.2.2): nghttp2 resets the stream as malformed.
std::string malformed_request_block(std::string_view path) {
  return request_block(path, true) + std::string(
                                         "\x00\x0a"
                                         "connection\x01x",
                                         14);
}
struct Frame {
  uint8_t type, flags;
  uint32_t stream;
  std::string payload;
};
std::vector<Frame> frames_of(const std::string& in) {
  std::vector<Frame> out;
  for (size_t i = 0; i + 9 <= in.size();) {
    auto u = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(in[i + k])); };
    size_t len = (u(0) << 16) | (u(1) << 8) | u(2);
    if (i + 9 + len > in.size()) break;
    out.push_back({static_cast<uint8_t>(u(3)), static_cast<uint8_t>(u(4)),
                   ((u(5) & 0x7f) << 24) | (u(6) << 16) | (u(7) << 8) | u(8), in.substr(i + 9, len)});
    i += 9 + len;
  }
  return out;
}
// The error code of the server's GOAWAY, or -1 if it sent none.
long goaway_code(const std::vector<Frame>& fs, uint32_t* last_stream = nullptr) {
  for (const auto& f : fs) {
    if (f.type != kGoaway || f.payload.size() < 8) continue;
    auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(f.payload[k])); };
    if (last_stream) *last_stream = ((b(0) & 0x7f) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
    return static_cast<long>((b(4) << 24) | (b(5) << 16) | (b(6) << 8) | b(7));
  }
  return -1;
}
constexpr long kEnhanceYourCalm = 0xb;
// Frames read until `done(frames)` holds, the peer closes, or `limit` passes.
template <typename Done>
std::vector<Frame> read_frames(test::RawClient& c, Done done, Duration limit = 5s) {
  std::string in;
  const TimePoint end = now() + limit;
  std::vector<Frame> fs;
  while (!done(fs) && now() < end) {
    in += c.read_until_closed(50ms);
    fs = frames_of(in);
  }
  return fs;
}
int count(const std::vector<Frame>& fs, uint8_t type) {
  return static_cast<int>(std::count_if(fs.begin(), fs.end(), [&](const Frame& f) { return f.type == type; }));
}
constexpr long kStreamClosed = 0x5;

class Http2Limits : public Http2Test {
 protected:
  void start_with(http2::Options h2, ServerOptions o = {}) {
    h2.stats = &stats_;
    http2::enable(o, h2);
    server_ = std::make_unique<TestServer>(router_.handler(), o);
    server_->start();
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
    curl_ = "curl -s --http2-prior-knowledge ";
  }
  // A client connection that has sent the preface and its SETTINGS (`settings`: entries).
  std::unique_ptr<test::RawClient> connect(std::string_view settings = {}) {
    auto c = std::make_unique<test::RawClient>(server_->port());
    EXPECT_TRUE(c->send(std::string(kHttp2Preface) + frame(kSettings, 0, 0, settings)));
    return c;
  }
  http2::Stats stats_;
};

TEST_F(Http2Limits, RapidResetGetsGoawayEnhanceYourCalm) {
  start_with({.reset_burst = 20, .resets_per_second = 1});
  auto c = connect();
  std::string burst;
  for (uint32_t id = 1; id < 200; id += 2) {
    burst += frame(kHeaders, kEndHeaders, id, request_block("/hello"));
    burst += frame(kRst, 0, id, std::string("\x00\x00\x00\x08", 4));  // CANCEL
  }
  ASSERT_TRUE(c->send(burst));
  std::string got = c->read_until_closed(3s);
  auto fs = frames_of(got);
  std::string types;
  for (const auto& f : fs) types += std::to_string(f.type) + " ";
  EXPECT_EQ(goaway_code(fs), kEnhanceYourCalm) << got.size() << " bytes: " << types;
  EXPECT_GE(stats_.resets_by_peer.load(), 21u);
  EXPECT_EQ(stats_.goaway_enhance_your_calm.load(), 1u);
  EXPECT_EQ(curl(url("/hello")), "2 200");  // others are served
}

TEST_F(Http2Limits, ContinuationFloodGetsGoawayEnhanceYourCalm) {
  start_with({.max_continuations = 8});
  auto c = connect();
  std::string flood = frame(kHeaders, 0, 1, request_block("/hello").substr(0, 2));
  for (int i = 0; i < 50; ++i) flood += frame(kContinuation, 0, 1);  // empty, never END_HEADERS
  ASSERT_TRUE(c->send(flood));
  std::string got = c->read_until_closed(3s);
  std::string types;
  for (const auto& f : frames_of(got)) types += std::to_string(f.type) + " ";
  EXPECT_EQ(goaway_code(frames_of(got)), kEnhanceYourCalm) << got.size() << " bytes: " << types;
  EXPECT_EQ(curl(url("/hello")), "2 200");
}

TEST_F(Http2Limits, EmptyDataFramesFloodGetsGoawayEnhanceYourCalm) {
  start_with({.max_empty_frames = 50});
  auto c = connect();
  std::string flood = frame(kHeaders, kEndHeaders, 1, request_block("/echo", true));
  for (int i = 0; i < 200; ++i) flood += frame(kData, 0, 1);
  ASSERT_TRUE(c->send(flood));
  EXPECT_EQ(goaway_code(frames_of(c->read_until_closed(3s))), kEnhanceYourCalm);
}

// The same flood on a stream the server has reset (whose DATA it otherwise ignores).
TEST_F(Http2Limits, EmptyDataFramesFloodOnAResetStreamGetsGoawayEnhanceYourCalm) {
  start_with({.max_empty_frames = 50});
  auto c = connect();
  ASSERT_TRUE(c->send(frame(kHeaders, kEndHeaders, 1, malformed_request_block("/echo"))));
  auto fs = read_frames(*c, [](const auto& f) { return count(f, kRst) > 0; });
  ASSERT_EQ(count(fs, kRst), 1);
  std::string flood;
  for (int i = 0; i < 200; ++i) flood += frame(kData, 0, 1);
  ASSERT_TRUE(c->send(flood));
  EXPECT_EQ(goaway_code(frames_of(c->read_until_closed(3s))), kEnhanceYourCalm);
}

TEST_F(Http2Limits, PingFloodFromAClientThatDoesNotReadIsClosed) {
  start_with({.max_outbound_ack = 10});
  auto c = connect();
  std::string flood;
  for (int i = 0; i < 1000; ++i) flood += frame(kPing, 0, 0, "12345678");
  ASSERT_TRUE(c->send(flood));
  EXPECT_TRUE(c->closed_within(3s));
  EXPECT_EQ(curl(url("/hello")), "2 200");
}

TEST_F(Http2Limits, MaxRequestsEndsTheConnectionWithGoawayAfterItsLastStream) {
  start_with({.max_requests = 5});
  auto c = connect();
  std::string reqs;
  for (uint32_t id = 1; id < 20; id += 2)
    reqs += frame(kHeaders, kEndHeaders | kEndStream, id, request_block("/hello"));
  ASSERT_TRUE(c->send(reqs));
  auto fs = frames_of(c->read_until_closed(3s));
  uint32_t last = 0;
  EXPECT_EQ(goaway_code(fs, &last), 0);  // NO_ERROR
  EXPECT_EQ(last, 9u);  // the 5th stream
  int answered = 0;
  for (const auto& f : fs) answered += f.type == kHeaders;
  EXPECT_EQ(answered, 5);
  EXPECT_EQ(server_->server().stats().requests.load(), 5u);
}

TEST_F(Http2Limits, AZeroWindowHeldOpenIsClosedAfterTheWriteTimeout) {
  ServerOptions o;
  o.write_timeout = 300ms;
  start_with({}, o);
  // SETTINGS_INITIAL_WINDOW_SIZE (4) = 0: the server may send no DATA until a WINDOW_UPDATE
  // that never comes.
  auto c = connect(std::string("\x00\x04\x00\x00\x00\x00", 6));
  ASSERT_TRUE(c->send(frame(kHeaders, kEndHeaders | kEndStream, 1, request_block("/file"))));
  EXPECT_TRUE(c->closed_within(5s));
  EXPECT_EQ(stats_.stalled.load(), 1u);
}

TEST_F(Http2Limits, AStreamThatNeverSendsItsBodyIsAnsweredAfterTheBodyTimeout) {
  ServerOptions o;
  o.body_timeout = 300ms;
  start_with({}, o);
  auto c = connect();
  ASSERT_TRUE(c->send(frame(kHeaders, kEndHeaders, 1, request_block("/echo", true))));  // no body follows
  auto fs = frames_of(c->read_until_closed(2s));
  bool answered = false;
  for (const auto& f : fs) answered |= f.type == kHeaders && f.stream == 1;
  EXPECT_TRUE(answered) << "the handler's read never timed out";
}

// RFC 9113 5.1: DATA on a stream the client itself ended is a connection error STREAM_CLOSED,
// however long ago the stream closed (the session keeps no closed stream: nghttp2 would
// ignore the frame once its stream is forgotten, so the layer tells it by the stream ids).
TEST_F(Http2Limits, DataOnAStreamTheClientEndedLongAgoGetsGoawayStreamClosed) {
  start_with({});
  auto c = connect();
  constexpr int kStreams = 300;  // more than the 128 closed streams nghttp2 would remember
  for (int batch = 0; batch < kStreams / 50; ++batch) {  // at most 50 open at once
    std::string reqs;
    for (int i = 0; i < 50; ++i)
      reqs += frame(kHeaders, kEndHeaders | kEndStream, 2 * (batch * 50 + i) + 1, request_block("/hello"));
    ASSERT_TRUE(c->send(reqs));
    auto fs = read_frames(*c, [](const auto& f) { return count(f, kData) >= 50; });
    ASSERT_EQ(count(fs, kData), 50) << "batch " << batch;
  }
  // In three writes, its frame header split over two of them (the layer follows frame
  // boundaries across reads).
  const std::string late = frame(kData, kEndStream, 1, "late");
  for (auto [from, n] : {std::pair<size_t, size_t>{0, 4}, {4, 3}, {7, std::string::npos}}) {
    ASSERT_TRUE(c->send(late.substr(from, n)));
    std::this_thread::sleep_for(20ms);
  }
  auto fs = read_frames(*c, [](const auto& f) { return count(f, kGoaway) > 0; });
  EXPECT_EQ(goaway_code(fs), kStreamClosed);
  EXPECT_TRUE(c->closed_within(3s));
  EXPECT_EQ(curl(url("/hello")), "2 200");  // others are served
}

// RFC 9113 5.1: DATA that crosses the server's own RST_STREAM is ignored, for every stream it
// reset while the client was sending (here nghttp2's resets of malformed requests: a
// `connection` field), and the connection goes on serving.
TEST_F(Http2Limits, DataCrossingTheServersResetsIsIgnoredAndTheConnectionServesOn) {
  start_with({});
  auto c = connect();
  constexpr int kStreams = 200;  // more than the 64 resets the layer once remembered
  std::string reqs;
  for (int i = 0; i < kStreams; ++i)  // HEADERS without END_STREAM: a body is to follow
    reqs += frame(kHeaders, kEndHeaders, 2 * i + 1, malformed_request_block("/echo"));
  ASSERT_TRUE(c->send(reqs));
  auto fs = read_frames(*c, [](const auto& f) { return count(f, kRst) >= kStreams; });
  ASSERT_EQ(count(fs, kRst), kStreams) << "the server did not reset every malformed request";
  std::string late;
  for (int i = 0; i < kStreams; ++i) late += frame(kData, kEndStream, 2 * i + 1, "body");
  late += frame(kHeaders, kEndHeaders | kEndStream, 2 * kStreams + 1, request_block("/hello"));
  ASSERT_TRUE(c->send(late));
  const uint32_t next = 2 * kStreams + 1;
  fs = read_frames(*c, [&](const auto& f) {
    return count(f, kGoaway) > 0 ||
           std::any_of(f.begin(), f.end(), [&](const Frame& x) { return x.type == kData && x.stream == next; });
  });
  EXPECT_EQ(goaway_code(fs), -1) << "the late DATA ended the connection";
  EXPECT_TRUE(std::any_of(fs.begin(), fs.end(), [&](const Frame& x) { return x.type == kHeaders && x.stream == next; }))
      << "the request after the late DATA was not answered";
}

// A client may open streams past the limit before it has read the server's SETTINGS: those
// are refused (RST_STREAM REFUSED_STREAM, no stream ever opened), and DATA that follows them
// in the same packet is ignored; the streams within the limit are answered.
TEST_F(Http2Limits, DataForStreamsRefusedOverTheLimitIsIgnoredInTheSameInput) {
  start_with({.max_concurrent_streams = 4});
  auto c = connect();
  std::string burst;
  for (uint32_t id = 1; id <= 11; id += 2) {  // 6 uploads: 9 and 11 are over the limit
    burst += frame(kHeaders, kEndHeaders, id, request_block("/echo", true));
    burst += frame(kData, 0, id, "part1 ");
  }
  ASSERT_TRUE(c->send(burst));
  auto fs = read_frames(*c, [](const auto& f) { return count(f, kRst) >= 2 || count(f, kGoaway) > 0; });
  ASSERT_EQ(count(fs, kRst), 2) << "streams 9 and 11 were not refused";
  std::string ends;
  for (uint32_t id = 1; id <= 7; id += 2) ends += frame(kData, kEndStream, id, "part2");
  ASSERT_TRUE(c->send(ends));
  fs = read_frames(*c, [](const auto& f) { return count(f, kHeaders) >= 4 || count(f, kGoaway) > 0; });
  EXPECT_EQ(goaway_code(fs), -1) << "DATA after a refused HEADERS ended the connection";
  EXPECT_EQ(count(fs, kHeaders), 4) << "the 4 uploads within the limit were not all answered";
}

// h2spec (RFC 9113 and RFC 7541 conformance, 145 cases) against h2c and against h2 over TLS.
// scripts/install-deps.sh builds it (tests/tools/h2spec); without it this test fails.
// h2spec against a route answered on the connection's fiber (nonblocking) and against one whose
// handler runs in a fiber per stream.
TEST_F(Http2Test, H2specPassesEveryCaseOverH2cAndTls) {
  ASSERT_TRUE(have("h2spec")) << "h2spec is not installed: run scripts/install-deps.sh";
  const std::string h2spec = "h2spec";
  router_.get("/", nonblocking([](Request&, Response& s) { s.reply(200, std::string(2000, 'x')); }));
  router_.get("/fiber", [](Request&, Response& s) { s.reply(200, std::string(2000, 'x')); });
  for (auto [tls, path] : {std::pair{false, "/"}, std::pair{true, "/"}, std::pair{false, "/fiber"}}) {
    SCOPED_TRACE(std::string(tls ? "h2 " : "h2c ") + path);
    start(tls);
    int st = -1;
    std::string out = shell(h2spec + " -h 127.0.0.1 -p " + std::to_string(server_->port()) + " -P " + path +
                                (tls ? " -t -k" : "") + " -o 5 2>&1",
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
