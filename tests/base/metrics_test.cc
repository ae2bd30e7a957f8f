// tests/base/metrics_test.cc: Counter, Histogram and the Prometheus text a scraper reads.
#include "lionet/base/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace lionet {
namespace {

TEST(Metrics, CounterAddsFromManyThreads) {
  Counter c;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) c.add();
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(c.value(), 400000u);
}

TEST(Metrics, HistogramBucketsAreCumulativeInTheText) {
  Histogram h;
  h.observe_ns(50'000);  // 50 us -> first bucket (le 0.0001)
  h.observe_ns(2'000'000);  // 2 ms  -> le 0.0025
  h.observe_ns(20'000'000'000);  // 20 s  -> +Inf only
  PrometheusWriter w;
  w.family("lionet_http_request_seconds", "histogram", "Request latency.");
  w.histogram("lionet_http_request_seconds", {{"server", "web"}}, h.snapshot());
  const std::string& t = w.text();
  EXPECT_NE(t.find("# TYPE lionet_http_request_seconds histogram\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_bucket{server=\"web\",le=\"0.0001\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_bucket{server=\"web\",le=\"0.001\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_bucket{server=\"web\",le=\"0.0025\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_bucket{server=\"web\",le=\"10\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_bucket{server=\"web\",le=\"+Inf\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_count{server=\"web\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lionet_http_request_seconds_sum{server=\"web\"} 20.00205\n"), std::string::npos) << t;
}

TEST(Metrics, LabelValuesAreEscaped) {
  PrometheusWriter w;
  w.sample("x_total", {{"path", "a\"b\\c\nd"}}, uint64_t{7});
  EXPECT_EQ(w.text(), "x_total{path=\"a\\\"b\\\\c\\nd\"} 7\n");
}
}  // namespace
}  // namespace lionet
