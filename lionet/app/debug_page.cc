// lionet/app/debug_page.cc: the `debug` route (see debug_page.h): its sampler thread, status.json
// and the page. The page's text is at the end of the file.
#include "lionet/app/debug_page.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lionet/app/config_binding.h"
#include "lionet/app/detail/running.h"
#include "lionet/base/utf8.h"
#include "lionet/sched/fiber_dump.h"

#ifndef LIONET_VERSION
#define LIONET_VERSION "unknown"
#endif

namespace lionet::app {

double histogram_quantile(const std::array<uint64_t, Histogram::kBounds.size() + 1>& buckets, double q) {
  uint64_t total = 0;
  for (uint64_t n : buckets) total += n;
  if (total == 0) return std::numeric_limits<double>::quiet_NaN();
  const double rank = q * static_cast<double>(total);
  double below = 0;  // observations in the buckets before i
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const double in = static_cast<double>(buckets[i]);
    if (in > 0 && below + in >= rank) {
      if (i == Histogram::kBounds.size()) return Histogram::kBounds.back();  // above 10 s: no upper bound
      const double lo = i == 0 ? 0.0 : Histogram::kBounds[i - 1];
      const double hi = Histogram::kBounds[i];
      return lo + (hi - lo) * (rank - below) / in;
    }
    below += in;
  }
  return Histogram::kBounds.back();  // not reached: rank <= total
}

namespace {

// What a server counts as requests: http(s) responses from handlers, kafka requests, syslog
// messages; an echo server has none (nullopt).
std::optional<uint64_t> requests_of(const Running& s) {
  if (s.http) {
    uint64_t n = 0;
    for (const auto& c : s.m.status) n += c.value();
    return n;
  }
  if (s.kafka) return s.kafka->broker().stats().requests;
  if (s.syslog) return s.syslog->stats().received;
  return std::nullopt;
}

std::size_t connections_of(const Running& s) {
  if (s.has_listener()) return s.listener().connections();
  std::size_t n = 0;
  if (s.syslog)
    for (TcpServer* t : s.syslog->tcp_servers()) n += t->connections();
  return n;
}

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One sample: the deltas since the previous one over the time that really passed (the wait
// may run late), into the next slot of the ring.
void sample(Runtime::Impl& im) {
  StatusHistory& h = *im.status;
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::max(seconds_between(h.prev_at, now), 1e-3);
  std::vector<StatusHistory::Point> points(im.servers.size());
  for (std::size_t i = 0; i < im.servers.size(); ++i) {
    const Running& s = *im.servers[i];
    StatusHistory::Previous& prev = h.prev_servers[i];
    StatusHistory::Point& p = points[i];
    const uint64_t requests = requests_of(s).value_or(0);
    p.rps = static_cast<float>(static_cast<double>(requests - std::min(requests, prev.requests)) / dt);
    prev.requests = requests;
    p.p50_ms = p.p99_ms = std::numeric_limits<float>::quiet_NaN();
    if (s.http) {
      const Histogram::Snapshot now_latency = s.m.latency.snapshot();
      std::array<uint64_t, Histogram::kBounds.size() + 1> delta{};
      for (std::size_t b = 0; b < delta.size(); ++b)
        delta[b] = now_latency.buckets[b] - std::min(now_latency.buckets[b], prev.latency.buckets[b]);
      p.p50_ms = static_cast<float>(histogram_quantile(delta, 0.50) * 1e3);
      p.p99_ms = static_cast<float>(histogram_quantile(delta, 0.99) * 1e3);
      prev.latency = now_latency;
    }
  }
  std::vector<StatusHistory::PoolRates> rates(im.pools.size());
  for (std::size_t i = 0; i < im.pools.size(); ++i) {
    const SchedulerStats st = im.pools[i]->sched->stats();
    const SchedulerStats& prev = h.prev_pools[i];
    auto rate = [dt](uint64_t now_v, uint64_t prev_v) {
      return static_cast<double>(now_v - std::min(now_v, prev_v)) / dt;
    };
    rates[i] = {rate(st.switches, prev.switches), rate(st.fiber_parks, prev.fiber_parks),
                rate(st.fibers_created, prev.fibers_created), rate(st.steals, prev.steals),
                rate(st.worker_sleeps, prev.worker_sleeps)};
    h.prev_pools[i] = st;
  }
  h.prev_at = now;
  std::lock_guard<std::mutex> lk(h.mu);
  h.t[h.next] = seconds_between(im.started_at, now);
  for (std::size_t i = 0; i < points.size(); ++i) h.servers[i][h.next] = points[i];
  h.pools = std::move(rates);
  h.next = (h.next + 1) % StatusHistory::kSamples;
  h.count = std::min(h.count + 1, StatusHistory::kSamples);
}

// ------------------------------------------------------------------ status.json

void append_number(std::string& out, double v, const char* format = "%.3f") {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  out += buf;
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

// `"key": ` (the comma before it is the caller's).
void key(std::string& out, std::string_view k) {
  append_string(out, k);
  out += ": ";
}

std::vector<std::string> listen_addresses(const Running& s) {
  if (s.syslog) return s.syslog->addresses();
  std::vector<std::string> out;
  for (const auto& a : s.listener().addresses()) out.push_back(a.to_string());
  return out;
}

// The ring oldest first, copied under its lock (held for nothing else: a fiber dump below may
// take most of a second with 100,000 fibers, and the sampler must not wait for it).
struct HistoryCopy {
  std::vector<double> t;
  std::vector<std::vector<StatusHistory::Point>> servers;
  std::vector<StatusHistory::PoolRates> pools;
};
HistoryCopy copy_history(const StatusHistory& h) {
  HistoryCopy c;
  std::lock_guard<std::mutex> lk(h.mu);
  const std::size_t oldest = (h.next + StatusHistory::kSamples - h.count) % StatusHistory::kSamples;
  for (std::size_t k = 0; k < h.count; ++k) c.t.push_back(h.t[(oldest + k) % StatusHistory::kSamples]);
  for (const auto& ring : h.servers) {
    auto& v = c.servers.emplace_back();
    for (std::size_t k = 0; k < h.count; ++k) v.push_back(ring[(oldest + k) % StatusHistory::kSamples]);
  }
  c.pools = h.pools;
  return c;
}

std::string status_json(const Runtime::Impl& im, const StatusHistory& history, bool fibers) {
  const HistoryCopy h = copy_history(history);
  std::string out = "{";
  key(out, "version");
  append_string(out, LIONET_VERSION);
  out += ", ";
  key(out, "pid");
  out += std::to_string(::getpid());
  out += ", ";
  key(out, "uptime_s");
  append_number(out, seconds_between(im.started_at, std::chrono::steady_clock::now()), "%.1f");
  out += ", ";
  key(out, "interval_s");
  out += std::to_string(StatusHistory::kInterval.count());
  out += ",\n";
  key(out, "servers");
  out += "[";
  for (std::size_t i = 0; i < im.servers.size(); ++i) {
    const Running& s = *im.servers[i];
    out += i ? ",\n  {" : "\n  {";
    key(out, "name");
    append_string(out, s.cfg.name);
    out += ", ";
    key(out, "type");
    append_string(out, s.cfg.type);
    out += ", ";
    key(out, "listen");
    out += "[";
    bool first = true;
    for (const auto& a : listen_addresses(s)) {
      if (!first) out += ", ";
      first = false;
      append_string(out, a);
    }
    out += "], ";
    key(out, "connections");
    out += std::to_string(connections_of(s));
    out += ", ";
    key(out, "requests");
    if (auto r = requests_of(s)) out += std::to_string(*r);
    else out += "null";
    // The latest second's, as the charts' last points.
    const StatusHistory::Point* last = i < h.servers.size() && !h.t.empty() ? &h.servers[i].back() : nullptr;
    out += ", ";
    key(out, "requests_per_s");
    append_number(out, last && requests_of(s) ? last->rps : NAN, "%.1f");
    out += ", ";
    key(out, "p50_ms");
    append_number(out, last && s.http ? last->p50_ms : NAN);
    out += ", ";
    key(out, "p99_ms");
    append_number(out, last && s.http ? last->p99_ms : NAN);
    out += "}";
  }
  out += "],\n";
  key(out, "pools");
  out += "[";
  for (std::size_t i = 0; i < im.pools.size(); ++i) {
    const Pool& p = *im.pools[i];
    const SchedulerStats st = p.sched->stats();
    const StatusHistory::PoolRates r = i < h.pools.size() ? h.pools[i] : StatusHistory::PoolRates{};
    const bool have = i < h.pools.size();
    out += i ? ",\n  {" : "\n  {";
    key(out, "name");
    append_string(out, p.name);
    out += ", ";
    key(out, "io_backend");
    append_string(out, p.backend());
    auto field = [&](std::string_view k, uint64_t v) {
      out += ", ";
      key(out, k);
      out += std::to_string(v);
    };
    auto rate = [&](std::string_view k, double v) {
      out += ", ";
      key(out, k);
      append_number(out, have ? v : NAN, "%.1f");
    };
    field("threads", static_cast<uint64_t>(st.threads));
    field("fibers_alive", st.fibers_alive);
    field("fibers_created", st.fibers_created);
    field("switches", st.switches);
    rate("fibers_created_per_s", r.created);
    rate("switches_per_s", r.switches);
    rate("parks_per_s", r.parks);
    rate("steals_per_s", r.steals);
    rate("worker_sleeps_per_s", r.worker_sleeps);
    field("stacks_mapped", st.stacks_mapped);
    field("stacks_cached", st.stacks_cached);
    out += "}";
  }
  out += "],\n";
  // history: oldest first; one time axis for every server (they are sampled together).
  key(out, "history");
  out += "{";
  key(out, "t");
  out += "[";
  for (std::size_t k = 0; k < h.t.size(); ++k) {
    if (k) out += ',';
    append_number(out, h.t[k], "%.2f");
  }
  out += "],\n  ";
  key(out, "servers");
  out += "{";
  for (std::size_t i = 0; i < im.servers.size() && i < h.servers.size(); ++i) {
    const Running& s = *im.servers[i];
    if (i) out += ",";
    out += "\n   ";
    key(out, s.cfg.name);
    out += "{";
    auto series = [&](std::string_view k, float StatusHistory::Point::*m, const char* format) {
      key(out, k);
      out += "[";
      for (std::size_t j = 0; j < h.servers[i].size(); ++j) {
        if (j) out += ',';
        append_number(out, h.servers[i][j].*m, format);
      }
      out += "]";
    };
    if (requests_of(s)) series("requests_per_s", &StatusHistory::Point::rps, "%.1f");
    if (s.http) {
      out += ",\n    ";
      series("p50_ms", &StatusHistory::Point::p50_ms, "%.3f");
      out += ",\n    ";
      series("p99_ms", &StatusHistory::Point::p99_ms, "%.3f");
    }
    out += "}";
  }
  out += "}}";
  if (fibers) {
    out += ",\n";
    key(out, "fibers");
    out += "[";
    const FiberDumpOptions options = fiber_dump_options(im.config);
    for (std::size_t i = 0; i < im.pools.size(); ++i) {
      out += i ? ",\n  {" : "\n  {";
      key(out, "pool");
      append_string(out, im.pools[i]->name);
      out += ", ";
      key(out, "dump");
      append_string(out, dump_fibers(*im.pools[i]->sched, options));
      out += "}";
    }
    out += "]";
  }
  out += "}\n";
  return out;
}
}  // namespace

void Runtime::Impl::start_status_sampler() {
  if (!status || status_sampler.joinable()) return;
  StatusHistory& h = *status;
  {
    std::lock_guard<std::mutex> lk(h.mu);
    h.servers.assign(servers.size(), {});
  }
  h.prev_at = std::chrono::steady_clock::now();
  h.prev_servers.assign(servers.size(), {});
  for (std::size_t i = 0; i < servers.size(); ++i) {
    h.prev_servers[i].requests = requests_of(*servers[i]).value_or(0);
    h.prev_servers[i].latency = servers[i]->m.latency.snapshot();
  }
  h.prev_pools.clear();
  for (const auto& p : pools) h.prev_pools.push_back(p->sched->stats());
  status_sampler = std::thread([this] {
    pthread_setname_np(pthread_self(), "lionet-status");
    std::unique_lock<std::mutex> lk(status_mu);
    auto next = std::chrono::steady_clock::now() + StatusHistory::kInterval;
    // Against a fixed schedule, so that a late wake-up does not shift every later sample.
    while (!status_cv.wait_until(lk, next, [&] { return status_stop; })) {
      sample(*this);
      next += StatusHistory::kInterval;
      const auto now = std::chrono::steady_clock::now();
      if (next < now) next = now + StatusHistory::kInterval;  // suspended or starved: start over
    }
  });
}

void Runtime::Impl::stop_status_sampler() {
  {
    std::lock_guard<std::mutex> lk(status_mu);
    status_stop = true;
  }
  status_cv.notify_all();
  if (status_sampler.joinable()) status_sampler.join();
}

http::Handler debug_handler(Runtime::Impl& im, bool allow_remote) {
  if (!im.status) im.status = std::make_shared<StatusHistory>();
  return [&im, allow_remote, history = im.status](http::Request& req, http::Response& res) {
    if (!allow_remote) {
      auto peer = req.peer_address();
      if (!peer.ok() || !peer.value().is_loopback()) {
        res.reply(403, "the status page is served to loopback clients only (allow_remote: true to change)\n");
        return;
      }
    }
    res.set_header("Cache-Control", "no-store");
    const std::string_view rest = req.param("**");
    if (rest.empty() && !req.path().ends_with('/')) {
      // <path> itself: the page's relative URLs (status.json) need the slash.
      std::string to(req.path());
      to += '/';
      res.set_header("Location", to);
      res.reply(301, "see " + to + "\n");
    } else if (rest.empty() || rest == "index.html") {
      res.set_body_view(debug_page_html());
      res.set_content_type("text/html; charset=utf-8");
      res.set_status(200);
    } else if (rest == "status.json") {
      const auto f = req.query_param("fibers");
      res.reply(200, status_json(im, *history, f && *f != "0"), "application/json");
    } else {
      res.reply(404, "the debug route serves <path>/ (the page) and <path>/status.json[?fibers=1]\n");
    }
  };
}

// ------------------------------------------------------------------ the page
//
// Everything inline: no request leaves for another origin or another file. The script fetches
// status.json every second (with ?fibers=1 every 5th time and on "refresh": a dump walks every
// fiber's stack), fills the tables, and draws each chart on its canvas: the last 1, 2 or 5
// minutes (the shortest that holds the history), requests/s on a linear axis from 0, latency
// on a log axis by decades; a gap where a second had no request (no percentile). For tests and
// people alike each chart says how many points it drew (canvas data-points) and
// <body data-updates> counts the refreshes.
std::string_view debug_page_html() {
  static constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>lionet status</title>
<style>
:root { --fg: #1f2937; --muted: #6b7280; --line: #e5e7eb; --panel: #f8fafc; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #fff; }
header { display: flex; flex-wrap: wrap; gap: 0 1.2em; align-items: baseline; padding: 10px 16px;
         border-bottom: 1px solid var(--line); background: var(--panel); }
h1 { font-size: 18px; margin: 0; }
h2 { font-size: 15px; margin: 18px 0 6px; }
h3 { font-size: 13px; margin: 10px 0 4px; }
main { padding: 0 16px 24px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { font-size: 12px; font-weight: 600; color: var(--muted); }
th.l, td.l { text-align: left; }
.note, #state, #proc, #fibers-at { color: var(--muted); font-size: 12px; }
#state.stale { color: #b91c1c; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; padding: 6px 8px; border: 1px solid var(--line); border-radius: 4px; background: var(--panel); }
figcaption { font-size: 12px; color: var(--muted); }
figcaption b { color: var(--fg); }
.key { display: inline-block; width: 12px; height: 3px; margin: 0 3px 2px 8px; vertical-align: middle; }
canvas { display: block; width: 440px; height: 150px; margin-top: 4px; }
pre { margin: 2px 0 6px 16px; font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre; }
summary { cursor: pointer; font: 12px/1.6 ui-monospace, "DejaVu Sans Mono", monospace; }
button { font-size: 12px; }
</style>
</head>
<body data-updates="0">
<header><h1>lionet status</h1><span id="proc"></span><span id="state">loading status.json&hellip;</span></header>
<main>
<h2>Servers</h2>
<table id="servers">
<thead><tr><th class="l">server</th><th class="l">type</th><th class="l">listening on</th><th>connections</th>
<th>requests</th><th>requests/s</th><th>p50 ms</th><th>p99 ms</th></tr></thead>
<tbody></tbody>
</table>
<p class="note">Requests/s and percentiles are over the last second; percentiles are interpolated inside the
buckets of the latency histogram /metrics shows (100 &micro;s .. 10 s, 2-2.5&times; apart). This page's own
requests count too. Requests: http(s) responses, kafka requests, syslog messages.</p>
<h2>History <span class="note">(up to the last 5 minutes, one point per second)</span></h2>
<div class="charts" id="charts"></div>
<h2>Worker pools</h2>
<table id="pools">
<thead><tr><th class="l">pool</th><th class="l">io</th><th>threads</th><th>fibers alive</th><th>fibers created</th>
<th>created/s</th><th>switches/s</th><th>parks/s</th><th>steals/s</th><th>worker sleeps/s</th>
<th>stacks mapped</th><th>stacks cached</th></tr></thead>
<tbody></tbody>
</table>
<h2>Fibers <button id="refresh-fibers" type="button">refresh</button> <span id="fibers-at"></span></h2>
<p class="note">Grouped by state, wait and call stack, as the fiber dump prints them (a debug_fibers route,
SIGQUIT); open a group for its stack and fibers. Taken every 5 s.</p>
<div id="fibers"></div>
</main>
<script>
"use strict";
const SPAN = 300;          // seconds the charts show
const FIBERS_EVERY = 5;    // refreshes between fiber dumps
const COLORS = { rps: "#2563eb", p50: "#059669", p99: "#dc2626" };
let updates = 0, fibersDue = 0;
const openGroups = new Set();  // "pool\ngroup" of the fiber groups a person opened

function el(tag, props, children) {
  const e = document.createElement(tag);
  if (props) for (const [k, v] of Object.entries(props)) {
    if (k === "data") Object.assign(e.dataset, v); else e[k] = v;
  }
  for (const c of children || []) e.append(c);
  return e;
}
const dash = "\u2013";
function num(v, digits) { return v === null || v === undefined ? dash : Number(v).toFixed(digits); }
function int(v) { return v === null || v === undefined ? dash : Number(v).toLocaleString("en-US"); }
function duration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + (d || h || m ? m + "m " : "") + (s % 60) + "s";
}
function axisLabel(v) {
  if (v === 0) return "0";
  if (v >= 10000) return (v / 1000).toFixed(0) + "k";
  if (v >= 1000) return (v / 1000).toFixed(1) + "k";
  if (v >= 10) return v.toFixed(0);
  if (v >= 1) return v.toFixed(1);
  if (v >= 0.1) return v.toFixed(2);
  return String(Number(v.toPrecision(2)));
}
// The smallest of 1, 2, 5 x 10^k at least v (a grid step).
function niceStep(v) {
  if (!(v > 0)) return 1;
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * e * 1.000001) return m * e;
  return 10 * e;
}

// A table row per id (kept across refreshes), its cells found by data-k.
function fillRow(tbody, id, cells) {
  let tr = Array.from(tbody.rows).find(r => r.dataset.id === id);
  if (!tr) {
    tr = el("tr", { data: { id } });
    for (const [k, , left] of cells) tr.append(el("td", { className: left ? "l" : "", data: { k } }));
    tbody.append(tr);
  }
  for (const [k, text] of cells) tr.querySelector('td[data-k="' + k + '"]').textContent = text;
}

// series: [{values, color}] aligned with t (seconds since start); now: the latest time. x spans
// the last 1, 2 or 5 minutes, the shortest that holds the history (a process up for seconds is
// not one spike at the right edge); y is linear from 0, or with log: true by decades (a p99 of
// 50 ms and a p50 of 0.05 ms both stay visible).
function draw(canvas, t, now, series, log) {
  const dpr = window.devicePixelRatio || 1, W = canvas.clientWidth, H = canvas.clientHeight;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
  }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.fillStyle = "#ffffff";
  g.fillRect(0, 0, W, H);
  const L = 44, R = 10, T = 8, B = 18, pw = W - L - R, ph = H - T - B;
  const span = [60, 120, SPAN].find(s => t.length === 0 || now - t[0] <= s) || SPAN;
  const shown = (v, i) => v !== null && now - t[i] <= span && (!log || v > 0);
  let max = 0, min = Infinity;
  for (const s of series)
    s.values.forEach((v, i) => {
      if (!shown(v, i)) return;
      max = Math.max(max, v);
      if (v > 0) min = Math.min(min, v);
    });
  let ticks = [], frac;  // grid values; value -> 0..1 up the plot
  if (log) {
    const lo = Math.floor(Math.log10(min === Infinity ? 0.01 : min));
    const hi = Math.max(Math.ceil(Math.log10(max > 0 ? max : 1)), lo + 1);
    for (let e = lo; e <= hi; e++) ticks.push(Math.pow(10, e));
    frac = v => (Math.log10(v) - lo) / (hi - lo);
  } else {
    const step = niceStep(max / 4), n = Math.max(1, Math.ceil(max / step - 1e-9));
    for (let i = 0; i <= n; i++) ticks.push(i * step);
    frac = v => v / (n * step);
  }
  g.font = "10px system-ui, sans-serif";
  g.lineWidth = 1;
  g.strokeStyle = "#e5e7eb";
  g.fillStyle = "#6b7280";
  g.textAlign = "right";
  g.textBaseline = "middle";
  for (const v of ticks) {
    const y = Math.round(T + ph - ph * frac(v)) + 0.5;
    g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
    g.fillText(axisLabel(v), L - 5, y);
  }
  g.textAlign = "center";
  g.textBaseline = "top";
  const every = span === SPAN ? 60 : span / 6;
  for (let ago = span; ago >= 0; ago -= every)
    g.fillText(ago === 0 ? "now" : span === SPAN ? "-" + ago / 60 + "m" : "-" + ago + "s",
               L + pw * (1 - ago / span), T + ph + 4);
  const x = ti => L + pw * (1 - (now - ti) / span), y = v => T + ph - ph * frac(v);
  let points = 0;
  for (const s of series) {
    g.strokeStyle = g.fillStyle = s.color;
    g.lineWidth = 1.5;
    g.beginPath();
    let pen = false;
    for (let i = 0; i < t.length; i++) {
      const v = s.values[i];
      if (!shown(v, i)) { pen = false; continue; }
      const px = x(t[i]), py = y(v);
      const alone = !pen && (i + 1 >= t.length || !shown(s.values[i + 1], i + 1));
      if (alone) g.fillRect(px - 1.5, py - 1.5, 3, 3);  // a lone second: a dot, no line
      if (pen) g.lineTo(px, py); else g.moveTo(px, py);
      pen = true;
      points++;
    }
    g.stroke();
  }
  canvas.dataset.points = points;
  canvas.dataset.span = span;
}

function chart(id, title, keys) {
  let fig = document.querySelector('figure[data-chart="' + CSS.escape(id) + '"]');
  if (!fig) {
    const caption = el("figcaption", null, [el("b", { textContent: title })]);
    for (const [name, color] of keys)
      caption.append(el("span", { className: "key", style: "background:" + color }), name);
    fig = el("figure", { data: { chart: id } }, [caption, el("canvas", { data: { chart: id } })]);
    document.getElementById("charts").append(fig);
  }
  return fig.querySelector("canvas");
}

function renderServers(s) {
  const tbody = document.querySelector("#servers tbody");
  for (const v of s.servers)
    fillRow(tbody, v.name, [
      ["name", v.name, true], ["type", v.type, true], ["listen", v.listen.join(" "), true],
      ["connections", int(v.connections)], ["requests", int(v.requests)],
      ["requests_per_s", num(v.requests_per_s, 1)], ["p50_ms", num(v.p50_ms, 3)], ["p99_ms", num(v.p99_ms, 3)],
    ]);
  const h = s.history, now = s.uptime_s;
  for (const v of s.servers) {
    const series = h.servers[v.name];
    if (!series) continue;
    if (series.requests_per_s)
      draw(chart(v.name + "/rps", v.name + ": requests/s", [["per second", COLORS.rps]]), h.t, now,
           [{ values: series.requests_per_s, color: COLORS.rps }], false);
    if (series.p50_ms)
      draw(chart(v.name + "/latency", v.name + ": latency, ms (log)", [["p50", COLORS.p50], ["p99", COLORS.p99]]),
           h.t, now, [{ values: series.p99_ms, color: COLORS.p99 }, { values: series.p50_ms, color: COLORS.p50 }], true);
  }
}

function renderPools(s) {
  const tbody = document.querySelector("#pools tbody");
  for (const p of s.pools)
    fillRow(tbody, p.name, [
      ["name", p.name, true], ["io_backend", p.io_backend, true], ["threads", int(p.threads)],
      ["fibers_alive", int(p.fibers_alive)], ["fibers_created", int(p.fibers_created)],
      ["fibers_created_per_s", num(p.fibers_created_per_s, 1)], ["switches_per_s", num(p.switches_per_s, 1)],
      ["parks_per_s", num(p.parks_per_s, 1)], ["steals_per_s", num(p.steals_per_s, 1)],
      ["worker_sleeps_per_s", num(p.worker_sleeps_per_s, 1)], ["stacks_mapped", int(p.stacks_mapped)],
      ["stacks_cached", int(p.stacks_cached)],
    ]);
}

// A dump is blocks separated by blank lines: the scheduler's header, then one block per group
// whose first line is "N fibers: state, waiting ... (up to T)", then its stack, then its fibers.
function renderFibers(s) {
  const box = document.getElementById("fibers");
  box.querySelectorAll("details[open]").forEach(d => openGroups.add(d.dataset.key));
  box.querySelectorAll("details:not([open])").forEach(d => openGroups.delete(d.dataset.key));
  const parts = [];
  for (const f of s.fibers) {
    parts.push(el("h3", { textContent: "pool " + f.pool }));
    for (const block of f.dump.split(/\n\s*\n/)) {
      if (!block.trim()) continue;
      const nl = block.indexOf("\n"), first = nl < 0 ? block : block.slice(0, nl);
      if (!/^\d+ fibers?: /.test(first)) { parts.push(el("pre", { textContent: block })); continue; }
      const key = f.pool + "\n" + first.replace(/ \((up to )?[^()]*\)$/, "") + "\n" + block.split("\n")[1];
      const d = el("details", { data: { key } }, [el("summary", { textContent: first }),
                                                   el("pre", { textContent: nl < 0 ? "" : block.slice(nl + 1) })]);
      d.open = openGroups.has(key);
      parts.push(d);
    }
  }
  box.replaceChildren(...parts);
  document.getElementById("fibers-at").textContent = "taken " + new Date().toLocaleTimeString();
}

async function refresh() {
  const withFibers = fibersDue <= 0;
  try {
    const r = await fetch("status.json" + (withFibers ? "?fibers=1" : ""), { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    const s = await r.json();
    document.getElementById("proc").textContent =
      "pid " + s.pid + " \u00b7 up " + duration(s.uptime_s) + " \u00b7 lionet " + s.version;
    renderServers(s);
    renderPools(s);
    if (s.fibers) { renderFibers(s); fibersDue = FIBERS_EVERY; }
    fibersDue--;
    document.body.dataset.updates = ++updates;
    const state = document.getElementById("state");
    state.textContent = "updated " + new Date().toLocaleTimeString() + " (every second)";
    state.className = "";
  } catch (e) {
    const state = document.getElementById("state");
    state.textContent = "no answer (" + e.message + "), retrying every second";
    state.className = "stale";
  }
  setTimeout(refresh, 1000);
}
document.getElementById("refresh-fibers").addEventListener("click", () => { fibersDue = 0; });
refresh();
</script>
</body>
</html>
)html";
  return kPage;
}

}  // namespace lionet::app
