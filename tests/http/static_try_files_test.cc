// StaticFiles' try_files (nginx's): candidates tried in order ("$uri", "$uri.html"), "$uri/"
// served through the directory's index without a redirect, a fixed "/index.html" for a
// single-page app, fallback_status (=404, =410), a fallback handler that gets the request
// unchanged (and every method but GET/HEAD), a path that tries to leave the root still refused
// (a symlink candidate skipped, ".." answered 404 without the fallback), and a try_files hit
// going through the usual machinery: HEAD, 304, Range, precompressed, the open-file cache.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "http_test_util.h"
#include "lionet/http/client.h"
#include "lionet/http/router.h"
#include "lionet/http/static_files.h"

namespace lionet::http {
namespace {
using test::TestServer;
using test::write_file;

constexpr const char* kIndex = "<!doctype html><title>spa</title>";

// A root (index.html, page.html, both + both.html, docs/index.html, nodir/, style.css, a
// symlink to a secret beside the root), StaticFiles mounted at /spa for every method, and a
// server over it.
struct TryFilesFixture {
  std::string dir, root;
  std::unique_ptr<StaticFiles> files;
  Router router;
  std::unique_ptr<TestServer> srv;

  TryFilesFixture() {
    char tmpl[] = "/tmp/lionet-try-files-XXXXXX";
    dir = ::mkdtemp(tmpl);
    root = dir + "/root";
    ::mkdir(root.c_str(), 0755);
    write_file(dir + "/secret.txt", "TOP SECRET outside the root");
    write_file(root + "/index.html", kIndex);
    write_file(root + "/page.html", "page dot html");
    write_file(root + "/both", "both, no extension");
    write_file(root + "/both.html", "both dot html");
    write_file(root + "/style.css", "body{}");
    ::mkdir((root + "/docs").c_str(), 0755);
    write_file(root + "/docs/index.html", "docs index");
    ::mkdir((root + "/nodir").c_str(), 0755);  // a directory without an index file
    EXPECT_EQ(::symlink((dir + "/secret.txt").c_str(), (root + "/evil").c_str()), 0);
    EXPECT_EQ(::symlink("../secret.txt", (root + "/evil.html").c_str()), 0);
  }
  void start(StaticOptions o) {
    o.root = root;
    files = std::make_unique<StaticFiles>(std::move(o));
    router.prefix("*", "/spa", files->handler());
    srv = std::make_unique<TestServer>(router.handler());
    srv->start();
  }
  ~TryFilesFixture() {
    srv.reset();
    files.reset();
    test::shell("rm -rf " + dir);
  }
  Result<ClientResponse> req(Client& c, const std::string& path, std::string method = "GET",
                             std::vector<std::pair<std::string, std::string>> headers = {}) {
    ClientRequest rq;
    rq.method = std::move(method);
    rq.url = srv->url(path);
    rq.headers = std::move(headers);
    return c.request(rq);
  }
};

StaticOptions try_files(std::vector<std::string> candidates) {
  StaticOptions o;
  o.try_files = std::move(candidates);
  return o;
}

TEST(TryFiles, CandidatesAreTriedInOrder) {
  TryFilesFixture f;
  f.start(try_files({"$uri", "$uri.html"}));
  f.srv->run([&] {
    Client c;
    EXPECT_EQ(f.req(c, "/spa/page")->body, "page dot html");  // "$uri" missing, "$uri.html" exists
    EXPECT_EQ(f.req(c, "/spa/page.html")->body, "page dot html");
    EXPECT_EQ(f.req(c, "/spa/both")->body, "both, no extension");  // the first that exists wins
    auto r = f.req(c, "/spa/page");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->header("Content-Type"), "text/html; charset=utf-8");  // the served file's type
    auto miss = f.req(c, "/spa/nothing");
    EXPECT_EQ(miss->status, 404);
    EXPECT_EQ(miss->body, "not found\n");  // no fallback given: a missing file's answer
  });
  TryFilesFixture g;
  g.start(try_files({"$uri.html", "$uri"}));
  g.srv->run([&] {
    Client c;
    EXPECT_EQ(g.req(c, "/spa/both")->body, "both dot html");
  });
}

TEST(TryFiles, DirectoryCandidateServesItsIndexWithoutARedirect) {
  TryFilesFixture f;
  f.start(try_files({"$uri", "$uri/"}));
  f.srv->run([&] {
    Client c;
    auto r = f.req(c, "/spa/docs");  // "$uri" is a directory: skipped; "$uri/" has an index
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "docs index");
    EXPECT_EQ(f.req(c, "/spa/docs/")->body, "docs index");  // "$uri" ends in '/': its index
    EXPECT_EQ(f.req(c, "/spa/")->body, kIndex);  // the root's index
    EXPECT_EQ(f.req(c, "/spa/nodir")->status, 404);  // a directory without an index
    EXPECT_EQ(f.req(c, "/spa/docs/index.html")->body, "docs index");
  });
}

TEST(TryFiles, ASinglePageAppFallsBackToAFixedFile) {
  TryFilesFixture f;
  f.start(try_files({"$uri", "$uri/", "/index.html"}));
  f.srv->run([&] {
    Client c;
    for (const char* p : {"/spa/app/users/42", "/spa/settings", "/spa/nodir", "/spa/a%20b"}) {
      auto r = f.req(c, p);
      ASSERT_TRUE(r.ok()) << p;
      EXPECT_EQ(r->status, 200) << p;
      EXPECT_EQ(r->body, kIndex) << p;
      EXPECT_EQ(r->header("Content-Type"), "text/html; charset=utf-8") << p;
    }
    EXPECT_EQ(f.req(c, "/spa/style.css")->body, "body{}");  // real files still win
    EXPECT_EQ(f.req(c, "/spa/docs")->body, "docs index");
  });
  // The fixed file is an entry of the open-file cache like any other.
  auto before = f.files->stats();
  f.srv->run([&] {
    Client c;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(f.req(c, "/spa/route")->body, kIndex);
  });
  auto after = f.files->stats();
  EXPECT_GE(after.open_cache_hits - before.open_cache_hits, 3u);
}

TEST(TryFiles, FallbackStatusAnswersWhenNothingExists) {
  TryFilesFixture f;
  StaticOptions o = try_files({"$uri"});
  o.fallback_status = 410;
  f.start(o);
  f.srv->run([&] {
    Client c;
    auto r = f.req(c, "/spa/gone");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 410);
    EXPECT_EQ(r->body, "Gone\n");
    EXPECT_EQ(f.req(c, "/spa/page.html")->status, 200);
    auto post = f.req(c, "/spa/page.html", "POST");  // no fallback handler: 405 as ever
    EXPECT_EQ(post->status, 405);
    EXPECT_EQ(post->header("Allow"), "GET, HEAD");
  });
  TryFilesFixture g;
  StaticOptions n = try_files({"$uri"});
  n.fallback_status = 404;
  g.start(n);
  g.srv->run([&] {
    Client c;
    auto r = g.req(c, "/spa/missing");
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->body, "not found\n");
  });
}

TEST(TryFiles, FallbackHandlerGetsTheOriginalRequest) {
  TryFilesFixture f;
  std::mutex mu;
  std::vector<std::string> seen;  // "METHOD path?query body"
  StaticOptions o = try_files({"$uri", "$uri.html"});
  o.fallback = [&](Request& q, Response& s) {
    std::string body;
    EXPECT_TRUE(q.read_body(body).ok());  // the body is still unread: the app's to take
    {
      std::lock_guard lk(mu);
      seen.push_back(std::string(q.method()) + " " + std::string(q.path()) + "?" + std::string(q.query()) + " " + body);
    }
    s.reply(200, "from the app\n");
  };
  f.start(o);
  f.srv->run([&] {
    Client c;
    auto r = f.req(c, "/spa/api/users?id=7");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body, "from the app\n");
    EXPECT_EQ(f.req(c, "/spa/page")->body, "page dot html");  // a hit never reaches the app
    ClientRequest post;
    post.method = "POST";
    post.url = f.srv->url("/spa/page.html");  // the file exists, but a file cannot be POSTed
    post.body = "x=1";
    EXPECT_EQ(c.request(post)->body, "from the app\n");
    EXPECT_EQ(f.req(c, "/spa/page.html", "DELETE")->body, "from the app\n");
    EXPECT_EQ(f.req(c, "/spa/nothing", "HEAD")->status, 200);  // HEAD: the app answers it too
  });
  std::lock_guard lk(mu);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], "GET /spa/api/users?id=7 ");
  EXPECT_EQ(seen[1], "POST /spa/page.html? x=1");
  EXPECT_EQ(seen[2], "DELETE /spa/page.html? ");
  EXPECT_EQ(seen[3], "HEAD /spa/nothing? ");
}

TEST(TryFiles, TraversalIsStillRefused) {
  TryFilesFixture f;
  std::atomic<int> fallbacks{0};
  StaticOptions o = try_files({"$uri", "$uri.html"});
  o.fallback = [&](Request&, Response& s) {
    fallbacks.fetch_add(1);
    s.reply(200, "app\n");
  };
  f.start(o);
  f.srv->run([&] {
    Client c;
    // A symlink out of the root is a candidate that cannot be opened: skipped, never served.
    for (const char* p : {"/spa/evil", "/spa/evil.html", "/spa/evil%2ehtml"}) {
      auto r = f.req(c, p);
      ASSERT_TRUE(r.ok()) << p;
      EXPECT_EQ(r->body.find("SECRET"), std::string::npos) << p;
      EXPECT_EQ(r->body, "app\n") << p;
    }
    // Paths refused before any candidate: 404, and the fallback is not asked either.
    for (const char* p : {"/spa/..%2fsecret.txt", "/spa/%2e%2e/secret.txt", "/spa/docs/../../secret.txt", "/spa/a%00b",
                          "/spa/docs%5c..%5c..%5csecret.txt"}) {
      auto r = f.req(c, p);
      ASSERT_TRUE(r.ok()) << p;
      EXPECT_EQ(r->status, 404) << p;
      EXPECT_EQ(r->body.find("SECRET"), std::string::npos) << p;
    }
  });
  EXPECT_EQ(fallbacks.load(), 3);
  // Candidates that could leave the root are refused when the handler is made.
  for (const char* bad : {"/../secret.txt", "$uri/../x", "relative/$uri", "", "/a//./b", "$uri\\..\\x"}) {
    StaticOptions b;
    b.root = f.root;
    b.try_files = {"$uri", bad};
    EXPECT_THROW(StaticFiles{b}, std::runtime_error) << bad;
  }
  StaticOptions s;
  s.root = f.root;
  s.try_files = {"$uri"};
  s.fallback_status = 99;
  EXPECT_THROW(StaticFiles{s}, std::runtime_error);
  s.fallback_status = 600;
  EXPECT_THROW(StaticFiles{s}, std::runtime_error);
}

TEST(TryFiles, HeadConditionalAndRangeThroughAHit) {
  TryFilesFixture f;
  StaticOptions o = try_files({"$uri", "/index.html"});
  o.precompressed = {"gzip"};
  f.start(o);
  write_file(f.root + "/index.html.gz", "GZIPPED-BYTES");  // newer than index.html or as new
  f.srv->run([&] {
    Client c;
    auto head = f.req(c, "/spa/some/route", "HEAD");
    ASSERT_TRUE(head.ok());
    EXPECT_EQ(head->status, 200);
    EXPECT_EQ(head->body, "");
    EXPECT_EQ(head->header("Content-Length"), std::to_string(std::string_view(kIndex).size()));
    const std::string etag(head->header("ETag"));
    ASSERT_FALSE(etag.empty());
    auto nm = f.req(c, "/spa/another/route", "GET", {{"If-None-Match", etag}});
    EXPECT_EQ(nm->status, 304);
    EXPECT_EQ(nm->body, "");
    auto ims = f.req(c, "/spa/x", "GET", {{"If-Modified-Since", std::string(head->header("Last-Modified"))}});
    EXPECT_EQ(ims->status, 304);
    auto range = f.req(c, "/spa/deep/link", "GET", {{"Range", "bytes=0-8"}});
    EXPECT_EQ(range->status, 206);
    EXPECT_EQ(range->body, "<!doctype");
    EXPECT_EQ(range->header("Content-Range"), "bytes 0-8/" + std::to_string(std::string_view(kIndex).size()));
    auto gz = f.req(c, "/spa/route", "GET", {{"Accept-Encoding", "gzip"}});
    EXPECT_EQ(gz->header("Content-Encoding"), "gzip");
    EXPECT_EQ(gz->body, "GZIPPED-BYTES");
    EXPECT_EQ(gz->header("Vary"), "Accept-Encoding");
  });
}

}  // namespace
}  // namespace lionet::http
