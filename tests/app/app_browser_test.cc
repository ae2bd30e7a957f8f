// tests/app/app_browser_test.cc: a real browser against the lionet binary. Headless Chromium
// (Debian chromium), driven by scripts/screenshot.sh, loads the shipped page
// (examples/www: index.html, its style sheet and its logo) over https:// from a server with a
// self-signed certificate on 127.0.0.1; the screenshot must show a rendered page and /metrics
// must show that the page and its assets came over HTTP/2 (ALPN h2), none over HTTP/1.1, and
// none missing.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/app/app_process.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;

long long browser_metric(const std::string& page, const std::string& name) {
  std::size_t at = page.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atoll(page.c_str() + at + name.size() + 2);
}

TEST(AppBrowser, ChromiumLoadsTheShippedPageAndItsAssetsOverH2) {
  int rc = -1;
  sh("command -v chromium >/dev/null 2>&1", &rc);
  if (rc != 0) GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  TempConf conf;
  const int http = free_port(), https = free_port();
  const std::string src = LIONET_SOURCE_DIR;
  conf.write("server.yml",
             "scheduler: {threads: 2}\n"
             "servers:\n"
             "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                 std::to_string(http) +
                 "']\n"
                 "    routes:\n      - {path: /metrics, type: metrics}\n"
                 "  - name: tls\n    type: https\n    listen: ['127.0.0.1:" +
                 std::to_string(https) +
                 "']\n"
                 "    tls: {cert: " +
                 conf.path() + "/cert.pem, key: " + conf.path() +
                 "/key.pem, generate_self_signed: true}\n"
                 "    routes:\n      - {path: /, type: static, root: " +
                 src + "/examples/www, mode: auto}\n");
  Process p({"-c", conf.path()});
  REQUIRE_BINARY(p);
  ASSERT_TRUE(p.wait_for("scheduler 'lionet' running")) << p.output();

  const std::string png = conf.path() + "/page.png";
  std::string out = sh("METRICS_URL= " + src + "/scripts/screenshot.sh https://127.0.0.1:" + std::to_string(https) +
                           "/ " + png + " 2>&1",
                       &rc);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream f(png, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GE(bytes.size(), 8u) << out;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  // A blank page compresses to a few KiB; the rendered text and logo are far more.
  EXPECT_GT(bytes.size(), 20000u) << "the screenshot looks blank";

  auto m = curl("http://127.0.0.1:" + std::to_string(http) + "/metrics");
  ASSERT_EQ(m.status, 200);
  const long long streams = browser_metric(m.body, "lionet_http2_streams_total{server=\"tls\",type=\"https\"}");
  const long long ok = browser_metric(m.body, "lionet_http_requests_total{server=\"tls\",class=\"2xx\"}");
  // index.html, style.css and lionet.svg at least (Chromium may also prefetch).
  EXPECT_GE(streams, 3) << m.body;
  EXPECT_GE(browser_metric(m.body, "lionet_http2_connections_total{server=\"tls\",type=\"https\"}"), 1) << m.body;
  EXPECT_EQ(ok, streams) << "every request the browser made came over HTTP/2\n" << m.body;
  EXPECT_EQ(browser_metric(m.body, "lionet_http_requests_total{server=\"tls\",class=\"4xx\"}"), 0)
      << "an asset was missing";
}

}  // namespace
}  // namespace lionet::app
