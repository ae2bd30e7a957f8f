// The `debug` route (lionet/app/debug_page.h) as a person uses it: headless Chromium opens the
// status page while a load runs against the same server, and the page's numbers must move and
// its charts be drawn (tests/app/status_page_check.py over the DevTools protocol; the
// screenshot is left beside this test binary, its path printed). Also: status.json parses and
// holds every server, pool and a history; the page needs nothing from elsewhere; <path> without
// the slash redirects; percentiles come out of histogram buckets as documented; only loopback
// peers count as loopback (the route's 403 for others, which a test on 127.0.0.1 cannot reach).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "../common/sanitizers.h"
#include "app_process.h"
#include "lionet/app/debug_page.h"

namespace lionet::app {
namespace {
namespace fs = std::filesystem;
using namespace lionet::app::testing;
using namespace std::chrono_literals;

using Buckets = std::array<uint64_t, Histogram::kBounds.size() + 1>;

TEST(DebugPage, PercentilesAreInterpolatedInsideTheirHistogramBucket) {
  EXPECT_TRUE(std::isnan(histogram_quantile(Buckets{}, 0.5)));
  Buckets fast{};
  fast[0] = 100;  // 100 requests under 100 us: spread evenly over 0..100 us
  EXPECT_NEAR(histogram_quantile(fast, 0.50), 50e-6, 1e-12);
  EXPECT_NEAR(histogram_quantile(fast, 0.99), 99e-6, 1e-12);
  Buckets mixed{};
  mixed[0] = 50;  // half under 100 us
  mixed[5] = 50;  // half in 2.5 ms .. 5 ms
  EXPECT_NEAR(histogram_quantile(mixed, 0.50), 100e-6, 1e-12);
  EXPECT_NEAR(histogram_quantile(mixed, 0.99), 2.5e-3 + 2.5e-3 * 49.0 / 50.0, 1e-12);
  Buckets slow{};
  slow[Histogram::kBounds.size()] = 10;  // above 10 s: no upper bound, 10 s is said
  EXPECT_EQ(histogram_quantile(slow, 0.99), 10.0);
}

// "key": value of the first occurrence of key after `from` (NaN: absent or null).
double json_number(const std::string& doc, const std::string& key, std::size_t from = 0) {
  const auto at = doc.find("\"" + key + "\": ", from);
  if (at == std::string::npos) return NAN;
  const char* p = doc.c_str() + at + key.size() + 4;
  if (std::string_view(p, 4) == "null") return NAN;
  return std::atof(p);
}

class AppStatusPage : public ::testing::Test {
 protected:
  void start() {
    http_ = free_port();
    echo_ = free_port();
    conf_.write("server.yml",
                "scheduler: {threads: 2}\n"
                "servers:\n"
                "  - name: web\n    type: http\n    listen: ['127.0.0.1:" +
                    std::to_string(http_) +
                    "']\n"
                    "    routes:\n"
                    "      - {path: /debug, type: debug}\n"
                    "      - {path: /debug/fibers, type: debug_fibers}\n"
                    "      - {path: /debug/pprof, type: pprof}\n"
                    "      - {path: /hello, type: hello}\n"
                    "  - name: echo\n    type: echo\n    listen: ['127.0.0.1:" +
                    std::to_string(echo_) + "']\n");
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
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(http_) + path; }

  TempConf conf_;
  std::unique_ptr<Process> proc_;
  int http_ = 0, echo_ = 0;
};

TEST_F(AppStatusPage, StatusJsonHoldsEveryServerPoolAndTheLastSecondsAndParses) {
  ASSERT_NO_FATAL_FAILURE(start());
  for (int i = 0; i < 20; ++i) ASSERT_EQ(curl(url("/hello")).status, 200);
  // Two samples (one per second) after the requests: the history has them.
  std::string doc;
  ASSERT_TRUE(poll_until(
      [&] {
        doc = curl(url("/debug/status.json")).body;
        const auto t = doc.find("\"t\": [");
        return t != std::string::npos && doc.find(',', t) < doc.find(']', t);
      },
      5000ms))
      << doc;
  // A JSON parser agrees it is JSON, and reads the figures a person sees.
  const std::string file = conf_.path() + "/status.json";
  std::ofstream(file) << doc;
  int rc = -1;
  const std::string parsed =
      sh(std::string(LIONET_TEST_PYTHON) +
             " -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "w=d[\"servers\"][0]; print(w[\"name\"], w[\"requests\"], len(d[\"history\"][\"t\"]), "
             "len(d[\"history\"][\"servers\"][\"web\"][\"p99_ms\"]), d[\"pools\"][0][\"name\"], "
             "d[\"servers\"][1][\"requests\"], \"fibers\" in d)' " +
             file + " 2>&1",
         &rc);
  ASSERT_EQ(rc, 0) << parsed << doc;
  std::istringstream f(parsed);
  std::string name, pool, echo_requests, has_fibers;
  long requests = 0, samples = 0, p99_samples = 0;
  f >> name >> requests >> samples >> p99_samples >> pool >> echo_requests >> has_fibers;
  EXPECT_EQ(name, "web");
  EXPECT_GE(requests, 20) << doc;  // the hellos, and the status.json requests before this one
  EXPECT_GE(samples, 2);
  EXPECT_EQ(p99_samples, samples);
  EXPECT_EQ(pool, "main");
  EXPECT_EQ(echo_requests, "None") << "an echo server counts no requests";
  EXPECT_EQ(has_fibers, "False") << "fiber dumps only when asked";
  for (const char* k :
       {"\"version\"", "\"pid\"", "\"uptime_s\"", "\"connections\"", "\"requests_per_s\"", "\"p50_ms\"", "\"p99_ms\"",
        "\"listen\"", "\"threads\"", "\"fibers_alive\"", "\"switches_per_s\"", "\"parks_per_s\"", "\"history\""})
    EXPECT_NE(doc.find(k), std::string::npos) << k << "\n" << doc;
  EXPECT_GE(json_number(doc, "threads"), 2) << doc;
  EXPECT_GE(json_number(doc, "fibers_alive"), 1) << doc;

  // ?fibers=1: each pool's dump, with the group its acceptor waits in.
  const Curl with = curl(url("/debug/status.json?fibers=1"));
  ASSERT_EQ(with.status, 200);
  EXPECT_NE(with.body.find("\"fibers\": ["), std::string::npos) << with.body;
  EXPECT_NE(with.body.find("\"dump\": \"scheduler \\\""), std::string::npos) << with.body;
  EXPECT_NE(with.body.find(": parked, waiting"), std::string::npos) << with.body;
}

TEST_F(AppStatusPage, ThePageIsOneSelfContainedDocument) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string head = sh("curl -sS --max-time 10 -D - -o /dev/null " + url("/debug/"));
  EXPECT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  EXPECT_NE(head.find("text/html"), std::string::npos) << head;
  const Curl page = curl(url("/debug/"));
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("getContext(\"2d\")"), std::string::npos);  // its charts: drawn by its own script
  EXPECT_NE(page.body.find("fetch(\"status.json\""), std::string::npos);
  // Nothing from elsewhere: no external script, style sheet, image, font or URL.
  for (const char* k : {"src=", "href=", "<link", "@import", "url(", "http://", "https://"})
    EXPECT_EQ(page.body.find(k), std::string::npos) << k;
  // <path> itself redirects to <path>/ (its relative status.json must resolve below it).
  const std::string redirect = sh("curl -sS --max-time 10 -D - -o /dev/null " + url("/debug"));
  EXPECT_NE(redirect.find("HTTP/1.1 301"), std::string::npos) << redirect;
  EXPECT_NE(redirect.find("Location: /debug/"), std::string::npos) << redirect;
  EXPECT_EQ(curl(url("/debug/nope")).status, 404);
  // The routes below it keep theirs (as in the shipped conf).
  const Curl fibers = curl(url("/debug/fibers"));
  EXPECT_EQ(fibers.status, 200);
  EXPECT_NE(fibers.body.find("LioNet fiber dump"), std::string::npos) << fibers.body;
  const Curl symbols = curl(url("/debug/pprof/symbol"));
  EXPECT_EQ(symbols.status, 200);
  EXPECT_EQ(symbols.body, "num_symbols: 1\n");
}

TEST_F(AppStatusPage, ChromiumShowsTheNumbersMoveWhileALoadRuns) {
  int rc = -1;
  sh("command -v chromium >/dev/null 2>&1", &rc);
  ASSERT_EQ(rc, 0) << "chromium is not installed (scripts/install-deps.sh installs it)";
  ASSERT_NO_FATAL_FAILURE(start());
  // Left for a person to look at, beside the test binary (the build tree).
  const fs::path png = fs::read_symlink("/proc/self/exe").parent_path() / "app_status_page.png";
  fs::remove(png);
  const std::string out =
      sh(std::string(LIONET_TEST_PYTHON) + " " + LIONET_SOURCE_DIR + "/tests/app/status_page_check.py " +
             url("/debug/") + " " + url("/hello") + " 4 " + png.string() + " web 2>&1",
         &rc);
  ASSERT_EQ(rc, 0) << out;
  std::printf("[app] status page: %s\n[app] screenshot: %s\n", out.c_str(), png.c_str());
  EXPECT_NE(out.find("\"ok\": true"), std::string::npos) << out;
  EXPECT_NE(out.find("\"error\": \"\""), std::string::npos) << out;
  const double load = json_number(out, "load_requests");
  const double before = json_number(out, "before_requests"), during = json_number(out, "during_requests"),
               after = json_number(out, "after_requests");
  ASSERT_GE(load, 200) << "the load itself was too slow to show anything: " << out;
  // The request count moves while the load runs and has every load request once it is over.
  EXPECT_GT(during, before + 100) << out;
  EXPECT_GE(after, before + load) << out;
  // The rate shown 2 s into the load has risen with it. (Not compared with the load's average:
  // one second of a machine busy with other work showed 220/s where the average was 6,000/s.)
  EXPECT_GT(json_number(out, "during_requests_per_s"), std::max(50.0, json_number(out, "before_requests_per_s")))
      << out;
  EXPECT_FALSE(std::isnan(json_number(out, "during_p99_ms"))) << out;
  // The charts were drawn: points and their lines' pixels (a blank canvas has none).
  EXPECT_GE(json_number(out, "rps_points"), 5) << out;
  EXPECT_GT(json_number(out, "rps_pixels"), 20) << out;
  EXPECT_GE(json_number(out, "latency_points"), 5) << out;
  EXPECT_GT(json_number(out, "latency_pixels"), 20) << out;
  EXPECT_GE(json_number(out, "fiber_groups"), 1) << out;
  ASSERT_TRUE(fs::exists(png)) << out;
  EXPECT_GT(fs::file_size(png), 20000u) << "the screenshot looks blank";
}

}  // namespace
}  // namespace lionet::app
