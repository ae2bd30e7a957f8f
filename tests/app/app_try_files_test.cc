// The lionet binary's try_files on static routes (conf: `try_files: [..., "@name"]` and named
// routes): a single-page app whose client-side routes fall back to its index.html, a site whose
// missing pages (and every POST) fall back to a named route that no URL reaches, "=410", and
// --check naming the file and line of a try_files that names no route.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app_process.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;

constexpr const char* kIndex = "<!doctype html><title>spa</title><div id=app></div>";

class AppTryFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    http_ = free_port();
    const std::string www = conf_.path() + "/www";
    fs::create_directories(www + "/assets");
    fs::create_directories(www + "/docs");
    std::ofstream(www + "/index.html") << kIndex;
    std::ofstream(www + "/assets/app.js") << "console.log('app')";
    std::ofstream(www + "/about.html") << "about page";
    std::ofstream(www + "/docs/index.html") << "docs index";
    conf_.write("server.yml",
                "scheduler: {threads: 2}\n"
                "storage: {data_dir: " +
                    conf_.path() +
                    "/data}\n"
                    "servers:\n"
                    "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                    std::to_string(http_) +
                    "']\n"
                    "    routes:\n"
                    "      - {path: /app, type: static, root: " +
                    www +
                    ", try_files: ['$uri', '$uri/', '/index.html', '@api']}\n"
                    "      - {path: /site, type: static, root: " +
                    www +
                    ", try_files: ['$uri', '$uri.html', '@backend']}\n"
                    "      - {path: /strict, type: static, root: " +
                    www +
                    ", try_files: ['$uri', '=410']}\n"
                    "      - {name: api, type: static, root: " +
                    www +
                    ", try_files: ['/docs/', '@backend']}\n"
                    "      - {name: backend, type: hello}\n");
    proc_ = std::make_unique<Process>(std::vector<std::string>{"-c", conf_.path()});
    REQUIRE_BINARY(*proc_);
    ASSERT_TRUE(proc_->wait_for(kReady)) << proc_->output();
  }
  void TearDown() override {
    if (proc_ && proc_->started()) {
      proc_->signal(SIGTERM);
      EXPECT_EQ(proc_->wait(), 0) << proc_->output();
    }
  }
  std::string url(const std::string& path) const { return "'http://127.0.0.1:" + std::to_string(http_) + path + "'"; }

  TempConf conf_;
  int http_ = 0;
  std::unique_ptr<Process> proc_;
};

TEST_F(AppTryFiles, ASinglePageAppFallsBackToItsIndexAndANamedRoute) {
  // Client-side routes: the SPA's index.html, as a browser loading a deep link needs.
  for (const char* p : {"/app/users/42", "/app/settings/profile", "/app/", "/app"}) {
    const Curl c = curl(url(p));
    EXPECT_EQ(c.status, 200) << p;
    EXPECT_EQ(c.body, kIndex) << p;
  }
  EXPECT_EQ(curl(url("/app/assets/app.js")).body, "console.log('app')");  // real files first
  EXPECT_EQ(curl(url("/app/docs")).body, "docs index");  // "$uri/": the index
  const std::string head = sh("curl -sS -I --max-time 10 " + url("/app/users/42"));
  EXPECT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/html"), std::string::npos) << head;
  // A POST cannot be a file: it goes to @api (a static route without a path), whose own
  // try_files ends in @backend (hello): the request is handed on unchanged, twice.
  const Curl post = curl("-X POST -d x=1 " + url("/app/users/42"));
  EXPECT_EQ(post.status, 200);
  EXPECT_EQ(post.body, "hello world");

  // Missing pages of /site go to the named hello route; real ones and "$uri.html" are served.
  EXPECT_EQ(curl(url("/site/about")).body, "about page");
  EXPECT_EQ(curl(url("/site/about.html")).body, "about page");
  const Curl app = curl(url("/site/api/v1/users?page=2"));
  EXPECT_EQ(app.status, 200);
  EXPECT_EQ(app.body, "hello world");

  // A named route has no URL.
  EXPECT_EQ(curl(url("/backend")).status, 404);
  EXPECT_EQ(curl(url("/api")).status, 404);

  // "=410": the status, as the server's usual answer for it.
  const Curl gone = curl(url("/strict/nothing"));
  EXPECT_EQ(gone.status, 410);
  EXPECT_EQ(gone.body, "Gone\n");
  EXPECT_EQ(curl(url("/strict/about.html")).status, 200);
  EXPECT_EQ(curl("-X POST " + url("/strict/about.html")).status, 405);  // no @name: GET, HEAD only

  // Traversal is refused before any candidate or fallback.
  const Curl up = curl("--path-as-is " + url("/site/%2e%2e/%2e%2e/etc/passwd"));
  EXPECT_EQ(up.status, 404);
}

TEST(AppTryFilesConfig, CheckNamesTheFileAndLineOfAnUnknownFallback) {
  TempConf conf;
  conf.write("server.yml",
             "servers:\n"
             "  - name: web\n"
             "    type: http\n"
             "    listen: ['127.0.0.1:1']\n"
             "    routes:\n"
             "      - path: /\n"
             "        type: static\n"
             "        root: /tmp\n"
             "        try_files: ['$uri', '/index.html', '@app']\n"
             "      - {name: api, type: hello}\n");
  Process p({"-c", conf.path(), "--check"});
  REQUIRE_BINARY(p);
  EXPECT_EQ(p.wait(), 1);
  EXPECT_NE(p.output().find("server.yml:9:20: key 'servers[0].routes[0].try_files': no route named 'app' in this "
                            "server (named: api)"),
            std::string::npos)
      << p.output();
}

}  // namespace
}  // namespace lionet::app
