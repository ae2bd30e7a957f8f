// StaticFiles tests: byte-exact bodies for the sizes in every mode over HTTP and HTTPS
// (project Client), HEAD, conditional GET (304), Range (206/416, multi-range -> 200), MEMORY
// invalidation when the file changes, directory index and 301, 405, MIME types, and curl for
// range / HEAD / conditional GET. The attack-path list lives in static_security_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_util.h"
#include "lionet/http/client.h"
#include "lionet/http/mime.h"
#include "lionet/http/router.h"
#include "lionet/http/server.h"
#include "lionet/http/static_files.h"
#include "lionet/ssl/ssl_context.h"

namespace lionet::http {
namespace {
using test::TestServer;
using test::write_file;

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

struct Size {
  const char* name;
  size_t bytes;
};
constexpr Size kSizes[] = {{"0", 0},
                           {"1", 1},
                           {"16k", 16 << 10},
                           {"64k-1", (64 << 10) - 1},
                           {"64k", 64 << 10},
                           {"64k+1", (64 << 10) + 1},
                           {"1m-1", (1 << 20) - 1},
                           {"1m", 1 << 20},
                           {"1m+1", (1 << 20) + 1},
                           {"10m", 10 << 20}};
constexpr const char* kModes[] = {"memory", "chunk", "sendfile", "auto"};

// Files, certificate and two servers (HTTP, HTTPS) shared by the whole suite: the 10 MiB file
// is written once.
struct Suite {
  std::string dir, root, cert, key;
  std::vector<std::string> data;  // by kSizes index
  Router router;
  std::vector<std::unique_ptr<StaticFiles>> files;  // by kModes index
  std::unique_ptr<TestServer> http, https;
  bool tls_ok = false;

  Suite() {
    char tmpl[] = "/tmp/lionet-static-XXXXXX";
    dir = mkdtemp(tmpl);
    root = dir + "/root";
    ::mkdir(root.c_str(), 0755);
    for (size_t i = 0; i < std::size(kSizes); ++i) {
      data.push_back(pattern(kSizes[i].bytes, static_cast<unsigned>(i)));
      write_file(root + "/f" + kSizes[i].name + ".bin", data.back());
    }
    ::mkdir((root + "/dir").c_str(), 0755);
    write_file(root + "/dir/index.html", "<h1>index</h1>");
    ::mkdir((root + "/empty").c_str(), 0755);
    write_file(root + "/style.css", "body{}");
    write_file(root + "/with space+plus.txt", "spaced");
    write_file(root + "/a-name-longer-than-sixteen-bytes.js", "long");
    for (size_t m = 0; m < std::size(kModes); ++m) {
      StaticOptions o;
      o.root = root;
      o.mode = *parse_file_mode(kModes[m]);
      o.chunk_size = 16 << 10;  // several chunks for the mid sizes
      files.push_back(std::make_unique<StaticFiles>(o));
      router.prefix("*", std::string("/") + kModes[m], files.back()->handler());
    }
    cert = dir + "/cert.pem";
    key = dir + "/key.pem";
    int st = -1;
    test::shell("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " + cert +
                    " -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null",
                &st);
    tls_ok = st == 0;
    http = std::make_unique<TestServer>(router.handler());
    http->start();
    if (tls_ok) {
      SslOptions so;
      so.certificates = {{cert, key}};
      https = std::make_unique<TestServer>(router.handler());
      https->server().enable_tls(SslContext::server(so));
      https->start();
    }
  }
  ~Suite() {
    http.reset();
    https.reset();
    test::shell("rm -rf " + dir);
  }
  std::string url(const std::string& path, bool tls = false) const {
    return tls ? "https://localhost:" + std::to_string(https->port()) + path : http->url(path);
  }
  std::shared_ptr<SslContext> client_tls() const {
    SslOptions so;
    so.ca_file = cert;
    so.verify_peer = true;
    return SslContext::client(so);
  }
};

Suite& suite() {
  static Suite s;
  return s;
}

void check_all_sizes(bool tls) {
  Suite& s = suite();
  s.http->run([&] {
    ClientOptions co;
    if (tls) co.tls = s.client_tls();
    Client c(co);
    for (const char* mode : kModes) {
      for (size_t i = 0; i < std::size(kSizes); ++i) {
        std::string path = std::string("/") + mode + "/f" + kSizes[i].name + ".bin";
        auto r = c.get(s.url(path, tls));
        ASSERT_TRUE(r) << path << ": " << r.error().message();
        EXPECT_EQ(r->status, 200) << path;
        EXPECT_EQ(r->body.size(), s.data[i].size()) << path;
        EXPECT_TRUE(r->body == s.data[i]) << path << " bytes differ";
        EXPECT_EQ(r->header("Content-Type"), "application/octet-stream");
        // AUTO's defaults leave no CHUNK range (memory_max == sendfile_min): Content-Length always.
        bool chunked_expected = std::string_view(mode) == "chunk";
        EXPECT_EQ(r->chunked, chunked_expected) << path;
        if (!chunked_expected) {
          EXPECT_EQ(r->header("Content-Length"), std::to_string(kSizes[i].bytes)) << path;
        }
      }
    }
  });
}

TEST(StaticFiles, EverySizeEveryModeHttp) { check_all_sizes(false); }

TEST(StaticFiles, EverySizeEveryModeHttps) {
  if (!suite().tls_ok) GTEST_SKIP() << "openssl could not make a certificate";
  check_all_sizes(true);
}

TEST(StaticFiles, ParseModeAndMime) {
  EXPECT_EQ(parse_file_mode("memory"), FileMode::kMemory);
  EXPECT_EQ(parse_file_mode("chunk"), FileMode::kChunk);
  EXPECT_EQ(parse_file_mode("sendfile"), FileMode::kSendfile);
  EXPECT_EQ(parse_file_mode("auto"), FileMode::kAuto);
  EXPECT_FALSE(parse_file_mode("Memory"));
  EXPECT_FALSE(parse_file_mode(""));
  EXPECT_EQ(mime_type_for("a/index.HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(mime_type_for("x.png"), "image/png");
  EXPECT_EQ(mime_type_for("x.tar.gz"), "application/gzip");
  EXPECT_EQ(mime_type_for("noext"), "application/octet-stream");
  EXPECT_EQ(mime_type_for("dir.d/noext"), "application/octet-stream");
}

TEST(StaticFiles, ConstructorRejectsBadRoot) {
  StaticOptions o;
  o.root = "/nonexistent/lionet-static";
  try {
    StaticFiles f(o);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("static root '/nonexistent/lionet-static': ", 0), 0u) << e.what();
  }
  o.root = suite().root + "/style.css";  // a file, not a directory
  EXPECT_THROW(StaticFiles{o}, std::runtime_error);
}

TEST(StaticFiles, HeadConditionalRangeInEveryMode) {
  Suite& s = suite();
  const std::string& d = s.data[7];  // 1 MiB
  s.http->run([&] {
    Client c;
    for (const char* mode : kModes) {
      std::string u = s.url(std::string("/") + mode + "/f1m.bin");
      ClientRequest head;
      head.method = "HEAD";
      head.url = u;
      auto h = c.request(head);
      ASSERT_TRUE(h);
      EXPECT_EQ(h->status, 200);
      EXPECT_TRUE(h->body.empty());
      std::string etag(h->header("ETag")), lm(h->header("Last-Modified"));
      ASSERT_FALSE(etag.empty());
      ASSERT_FALSE(lm.empty());
      EXPECT_EQ(h->header("Accept-Ranges"), "bytes");

      ClientRequest q;
      q.url = u;
      q.headers = {{"If-None-Match", etag}};
      auto r = c.request(q);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 304) << mode;
      EXPECT_TRUE(r->body.empty());
      EXPECT_EQ(r->header("ETag"), etag);
      q.headers = {{"If-None-Match", "\"other\", W/" + etag}};
      EXPECT_EQ(c.request(q)->status, 304) << "weak match in a list";
      q.headers = {{"If-None-Match", "\"other\""}};
      r = c.request(q);
      EXPECT_EQ(r->status, 200);
      EXPECT_TRUE(r->body == d);
      q.headers = {{"If-Modified-Since", lm}};
      EXPECT_EQ(c.request(q)->status, 304) << mode;
      q.headers = {{"If-Modified-Since", "Thu, 01 Jan 1970 00:00:01 GMT"}};
      EXPECT_EQ(c.request(q)->status, 200);
      // If-None-Match takes precedence over If-Modified-Since.
      q.headers = {{"If-None-Match", "\"other\""}, {"If-Modified-Since", lm}};
      EXPECT_EQ(c.request(q)->status, 200);

      auto range = [&](const std::string& spec) {
        ClientRequest rq;
        rq.url = u;
        rq.headers = {{"Range", spec}};
        return c.request(rq).value();
      };
      auto rr = range("bytes=10-19");
      EXPECT_EQ(rr.status, 206) << mode;
      EXPECT_EQ(rr.body, d.substr(10, 10));
      EXPECT_EQ(rr.header("Content-Range"), "bytes 10-19/1048576");
      rr = range("bytes=-5");
      EXPECT_EQ(rr.status, 206);
      EXPECT_EQ(rr.body, d.substr(d.size() - 5));
      rr = range("bytes=1048570-");
      EXPECT_EQ(rr.status, 206);
      EXPECT_EQ(rr.body, d.substr(1048570));
      rr = range("bytes=1048000-99999999");  // end clamped to the size
      EXPECT_EQ(rr.status, 206);
      EXPECT_EQ(rr.header("Content-Range"), "bytes 1048000-1048575/1048576");
      EXPECT_TRUE(rr.body == d.substr(1048000));
      rr = range("bytes=1048576-");
      EXPECT_EQ(rr.status, 416) << mode;
      EXPECT_EQ(rr.header("Content-Range"), "bytes */1048576");
      rr = range("bytes=-0");
      EXPECT_EQ(rr.status, 416);
      rr = range("bytes=0-1,5-6");  // several ranges: ignored, full body
      EXPECT_EQ(rr.status, 200);
      EXPECT_TRUE(rr.body == d);
      rr = range("bytes=abc");  // malformed: ignored
      EXPECT_EQ(rr.status, 200);
      // If-Range with a stale validator: the full body.
      ClientRequest ir;
      ir.url = u;
      ir.headers = {{"Range", "bytes=0-9"}, {"If-Range", "\"stale\""}};
      EXPECT_EQ(c.request(ir)->status, 200);
      ir.headers = {{"Range", "bytes=0-9"}, {"If-Range", etag}};
      EXPECT_EQ(c.request(ir)->status, 206);
    }
    // Range on an empty file is unsatisfiable.
    ClientRequest z;
    z.url = s.url("/memory/f0.bin");
    z.headers = {{"Range", "bytes=0-"}};
    auto zr = c.request(z);
    EXPECT_EQ(zr->status, 416);
    EXPECT_EQ(zr->header("Content-Range"), "bytes */0");
  });
}

TEST(StaticFiles, DirectoriesIndexRedirectAndMethods) {
  Suite& s = suite();
  s.http->run([&] {
    Client c;
    auto r = c.get(s.url("/auto/dir"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 301);
    EXPECT_EQ(r->header("Location"), "/auto/dir/");
    r = c.get(s.url("/auto/dir?x=1"));
    EXPECT_EQ(r->header("Location"), "/auto/dir/?x=1");
    r = c.get(s.url("/auto"));  // the mount point itself is a directory too
    EXPECT_EQ(r->status, 301);
    EXPECT_EQ(r->header("Location"), "/auto/");
    r = c.get(s.url("/auto/dir/"));
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "<h1>index</h1>");
    EXPECT_EQ(r->header("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(c.get(s.url("/auto/empty/"))->status, 404);  // no index, no listing
    EXPECT_EQ(c.get(s.url("/auto/missing.txt"))->status, 404);
    EXPECT_EQ(c.get(s.url("/auto/style.css"))->header("Content-Type"), "text/css; charset=utf-8");
    auto p = c.post(s.url("/auto/style.css"), "x", "text/plain");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, 405);
    EXPECT_EQ(p->header("Allow"), "GET, HEAD");
  });
}

// A path is looked up as sent when it has no '%' (no decoded copy), decoded when it has: both
// find their file, from disk and then from the cache, in every mode.
TEST(StaticFiles, EncodedAndLongNamesAreServedFromDiskAndFromTheCache) {
  Suite& s = suite();
  s.http->run([&] {
    Client c;
    for (const char* mode : kModes) {
      for (int round = 0; round < 2; ++round) {  // the second finds the cached entry
        std::string m = std::string("/") + mode;
        auto r = c.get(s.url(m + "/with%20space+plus.txt"));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200) << mode << " round " << round;
        EXPECT_EQ(r->body, "spaced") << mode;
        r = c.get(s.url(m + "/with%20space%2Bplus.txt"));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->body, "spaced") << mode;
        r = c.get(s.url(m + "/a-name-longer-than-sixteen-bytes.js"));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200) << mode << " round " << round;
        EXPECT_EQ(r->body, "long") << mode;
        EXPECT_EQ(c.get(s.url(m + "/with%20space+plus.txt%"))->status, 404) << mode;  // a broken escape
        EXPECT_EQ(c.get(s.url(m + "/a-name-longer-than-sixteen-bytes.jsx"))->status, 404) << mode;
      }
    }
  });
}

TEST(StaticFiles, MemoryCacheInvalidatedWhenFileChanges) {
  Suite& s = suite();
  std::string path = s.root + "/changing.txt";
  write_file(path, "version one");
  s.http->run([&] {
    Client c;
    auto before = s.files[0]->stats();
    EXPECT_EQ(c.get(s.url("/memory/changing.txt"))->body, "version one");
    EXPECT_EQ(c.get(s.url("/memory/changing.txt"))->body, "version one");
    auto mid = s.files[0]->stats();
    EXPECT_EQ(mid.memory_misses - before.memory_misses, 1u);
    EXPECT_EQ(mid.memory_hits - before.memory_hits, 1u);
    // Same size, new content: the mtime (ns) differs; force it in case the clock is coarse.
    write_file(path, "version two");
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1234567890, 5}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0);
    EXPECT_EQ(c.get(s.url("/memory/changing.txt"))->body, "version two");
    // Size change.
    write_file(path, "version three, longer");
    EXPECT_EQ(c.get(s.url("/memory/changing.txt"))->body, "version three, longer");
    // Replaced by a new inode (rename over it, as deploy tools do), mtime forced equal.
    write_file(path + ".new", "version four!!!!!!!!!");
    ASSERT_EQ(::utimensat(AT_FDCWD, (path + ".new").c_str(), ts, 0), 0);
    ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);
    EXPECT_EQ(c.get(s.url("/memory/changing.txt"))->body, "version four!!!!!!!!!");
    EXPECT_EQ(s.files[0]->stats().memory_misses - mid.memory_misses, 3u);
  });
}

// Several connections on two workers read a MEMORY file while it is replaced (rename over it,
// as deploy tools do) with other complete versions: every body is one whole version, never a
// mix, and the cache is shared safely (run under TSan in CI).
TEST(StaticFiles, ConcurrentReadersWhileFileIsReplaced) {
  Suite& s = suite();
  std::string path = s.root + "/swapped.bin";
  std::vector<std::string> versions;
  for (unsigned v = 0; v < 4; ++v) versions.push_back(pattern(20000 + v * 1000, 100 + v));
  write_file(path, versions[0]);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, ok{0};
  std::thread writer([&] {
    for (int i = 1; i < 40 && !done.load(); ++i) {
      write_file(path + ".tmp", versions[static_cast<size_t>(i) % versions.size()]);
      ::rename((path + ".tmp").c_str(), path.c_str());
      std::this_thread::yield();
    }
  });
  std::vector<JoinHandle<void>> readers;
  for (int f = 0; f < 4; ++f)
    readers.push_back(s.http->sched().spawn([&] {
      Client c;
      for (int i = 0; i < 50 / test::kScale; ++i) {
        auto r = c.get(s.url("/memory/swapped.bin"));
        bool match = false;
        if (r && r->status == 200)
          for (const auto& v : versions) match |= r->body == v;
        (match ? ok : bad).fetch_add(1);
      }
    }));
  for (auto& h : readers) h.join();
  done = true;
  writer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(ok.load(), 4 * (50 / test::kScale));
}

TEST(StaticFiles, MemoryCacheIsBoundedLru) {
  Suite& s = suite();
  StaticOptions o;
  o.root = s.root;
  o.mode = FileMode::kMemory;
  o.cache_bytes = 40 << 10;  // holds the 16 KiB file twice at most; the 64 KiB one never
  StaticFiles f(o);
  Router r;
  r.prefix("GET", "/", f.handler());
  TestServer srv(r.handler());
  srv.start();
  srv.run([&] {
    Client c;
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(c.get(srv.url("/f64k.bin"))->body == s.data[4]);
    EXPECT_EQ(f.stats().memory_misses, 3u) << "a file over cache_bytes is never cached";
    EXPECT_EQ(f.stats().memory_hits, 0u);
    EXPECT_TRUE(c.get(srv.url("/f16k.bin"))->body == s.data[2]);
    EXPECT_TRUE(c.get(srv.url("/f16k.bin"))->body == s.data[2]);
    EXPECT_EQ(f.stats().memory_hits, 1u);
  });
}

TEST(StaticFiles, CurlRangeHeadConditional) {
  if (!test::have_curl()) GTEST_SKIP() << "curl not installed";
  Suite& s = suite();
  std::string u = s.url("/sendfile/f16k.bin");
  int st = -1;
  std::string body = test::shell("curl -s --http1.1 -r 100-199 " + u, &st);
  EXPECT_EQ(st, 0);
  EXPECT_EQ(body, s.data[2].substr(100, 100));
  std::string head = test::shell("curl -s --http1.1 -I " + s.url("/chunk/f16k.bin"));
  EXPECT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  EXPECT_NE(head.find("ETag: \""), std::string::npos) << head;
  std::string code =
      test::shell("curl -s --http1.1 -o /dev/null -w '%{http_code}' -z 'Sun, 01 Jan 2090 00:00:00 GMT' " + u);
  EXPECT_EQ(code, "304");
  std::string etag;
  size_t p = head.find("ETag: ");
  if (p != std::string::npos) etag = head.substr(p + 6, head.find('\r', p) - p - 6);
  code = test::shell("curl -s --http1.1 -o /dev/null -w '%{http_code}' -H 'If-None-Match: " + etag + "' " + u);
  EXPECT_EQ(code, "304");
  if (s.tls_ok) {
    std::string tu = s.url("/auto/f1m.bin", true);
    std::string got =
        test::shell("curl -s --http1.1 --cacert " + s.cert + " --resolve localhost:" + std::to_string(s.https->port()) +
                    ":127.0.0.1 -r 1000-1999 " + tu);
    EXPECT_EQ(got, s.data[7].substr(1000, 1000));
  }
}
}  // namespace
}  // namespace lionet::http
