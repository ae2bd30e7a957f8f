// lionet/base/metrics.cc: the Prometheus text exposition format (see metrics.h).
#include "lionet/base/metrics.h"

#include <fmt/format.h>

namespace lionet {

void PrometheusWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusWriter::labels(const Labels& labels, std::string_view extra_key, std::string_view extra_value) {
  if (labels.empty() && extra_key.empty()) return;
  out_ += '{';
  bool first = true;
  auto put = [&](std::string_view k, std::string_view v) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    for (char c : v) {  // escaping per the text format: backslash, quote, newline
      if (c == '\\') out_ += "\\\\";
      else if (c == '"') out_ += "\\\"";
      else if (c == '\n') out_ += "\\n";
      else out_ += c;
    }
    out_ += '"';
  };
  for (const auto& [k, v] : labels) put(k, v);
  if (!extra_key.empty()) put(extra_key, extra_value);
  out_ += '}';
}

void PrometheusWriter::sample(std::string_view name, const Labels& l, double value) {
  out_ += name;
  labels(l);
  fmt::format_to(std::back_inserter(out_), " {}\n", value);
}

void PrometheusWriter::sample(std::string_view name, const Labels& l, uint64_t value) {
  out_ += name;
  labels(l);
  fmt::format_to(std::back_inserter(out_), " {}\n", value);
}

void PrometheusWriter::histogram(std::string_view name, const Labels& l, const Histogram::Snapshot& h) {
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.buckets.size(); ++i) {
    cumulative += h.buckets[i];
    out_ += name;
    out_ += "_bucket";
    labels(l, "le", i < Histogram::kBounds.size() ? fmt::format("{}", Histogram::kBounds[i]) : "+Inf");
    fmt::format_to(std::back_inserter(out_), " {}\n", cumulative);
  }
  out_ += name;
  out_ += "_sum";
  labels(l);
  fmt::format_to(std::back_inserter(out_), " {}\n", h.sum_seconds);
  out_ += name;
  out_ += "_count";
  labels(l);
  fmt::format_to(std::back_inserter(out_), " {}\n", cumulative);
}
}  // namespace lionet
