// lionet/base/metrics.h: counters and latency histograms that layers (http/, storage/, net/)
// update on their hot paths and app/ renders as Prometheus text (/metrics).
//
// Owns: Counter, Histogram (fixed bucket bounds), PrometheusWriter (the text exposition format,
// version 0.0.4). Must not: allocate or lock on update, know any layer's names.
//
// Cost: an update is one relaxed fetch_add (Histogram: two — bucket and sum; snapshot() adds up
// the buckets for `count` — on cache lines shared by every thread that records into it).
// Relaxed is enough: each value is independent, a scrape is allowed to see a request counted in
// `count` but not yet in `sum`, and nothing is ordered by these counters. With 2-8 workers the
// shared lines cost ~10-40 ns per update under contention; a layer that records millions of
// events per second per core should keep per-worker copies and add them up when scraped.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lionet {

class Counter {
 public:
  void add(uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// Latency histogram with Prometheus' cumulative buckets (le = upper bound, seconds).
// Bounds: 100 us .. 10 s, roughly x2.5 apart, plus +Inf.
class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,   0.025,   0.05,   0.1,   1.0,    10.0};
  void observe_ns(uint64_t ns) noexcept {
    const double s = static_cast<double>(ns) * 1e-9;
    std::size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  struct Snapshot {
    std::array<uint64_t, kBounds.size() + 1> buckets{};  // not cumulative; last = above 10 s
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  Snapshot snapshot() const noexcept {
    Snapshot s;
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
      s.count += s.buckets[i];
    }
    s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

// Builds one scrape. Each metric family is written once (HELP and TYPE lines) followed by its
// samples; labels are {key="value"} with value escaping per the format.
class PrometheusWriter {
 public:
  using Labels = std::vector<std::pair<std::string_view, std::string>>;
  // Writes "# HELP" / "# TYPE" for a family; call before its samples.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const Labels& labels, double value);
  void sample(std::string_view name, const Labels& labels, uint64_t value);
  // A whole histogram family member: name_bucket{le=...}, name_sum, name_count.
  void histogram(std::string_view name, const Labels& labels, const Histogram::Snapshot& h);
  const std::string& text() const noexcept { return out_; }

 private:
  void labels(const Labels& labels, std::string_view extra_key = {}, std::string_view extra_value = {});
  std::string out_;
};
}  // namespace lionet
