// lionet/app/debug_page.h: the `debug` route type: a status page a person looks at. One HTML
// page with no external assets (inline CSS and JavaScript; its charts are drawn on <canvas> by
// its own script) showing each server's connections, requests per second and latency
// percentiles, the worker pools, and the fiber groups with their stacks, refreshed every second
// from a JSON document beside it. The shipped conf has it at /debug on its loopback listener:
//
//   GET <path>/                  the page (GET <path> redirects there, so relative URLs work)
//   GET <path>/status.json       servers, pools, the last 5 minutes of per-second history;
//   GET <path>/status.json?fibers=1   the same plus each pool's fiber dump with stacks
//
// Loopback clients only unless the route says allow_remote: true (the fiber dump shows the
// program's functions; the numbers, its load).
//
// Where the numbers come from (nothing is measured twice): the per-server counters and latency
// histograms /metrics shows (detail/running.h ServerMetrics), TcpServer's connection counts,
// Scheduler::stats(), and dump_fibers() (sched/fiber_dump.h). Rates and percentiles are over
// one-second intervals, taken by a sampler thread the runtime starts when a debug route exists
// (Runtime::Impl::start_status_sampler) into a bounded ring (StatusHistory, detail/running.h).
//
// Owns: the page's text, status.json's format, histogram_quantile. Must not: do
// any work per request beyond copying the ring and reading counters (a dump only when asked).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "lionet/base/metrics.h"

namespace lionet::app {

// The q-quantile (0 < q < 1) of the observations counted in `buckets` (Histogram's bounds,
// not cumulative: the counts of one interval, e.g. the difference of two snapshots), in
// seconds; NaN when they hold none. As Prometheus' histogram_quantile: the rank q * count
// falls into one bucket, and the value is interpolated linearly between that bucket's lower
// and upper bound (the first bucket's lower bound is 0), i.e. the observations are taken as
// spread evenly inside their bucket. The last bucket (above 10 s) has no upper bound: a rank
// there gives 10 s. Histogram's bounds are 2-2.5x apart, so the result is known only within
// its bucket: a server whose every request takes 20 us reads p50 = 50 us and p99 = 99 us
// (everything below 100 us is one bucket).
double histogram_quantile(const std::array<uint64_t, Histogram::kBounds.size() + 1>& buckets, double q);

// The page (HTML with its CSS and script inline), a constant.
std::string_view debug_page_html();

}  // namespace lionet::app
