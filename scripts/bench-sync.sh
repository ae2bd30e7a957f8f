#!/usr/bin/env bash
# scripts/bench-sync.sh: builds the release preset, runs build/release/bench/sync_bench and
# prints a markdown table: each LioNet sync figure beside its reference from the same run
# (Boost.Fiber channels and mutex, std::mutex) and their ratio; optionally Go's unbuffered
# channel ping-pong from bench/reference/go (when `go` is installed).
#
# Usage: scripts/bench-sync.sh [--write] [--no-build] [--no-go] [sync_bench flags...]
#   --write     also (re)write the sync section of bench/RESULTS.md, between the markers
#               <!-- sync:begin --> and <!-- sync:end --> (everything else is kept; the
#               file is created with just this section if absent).
#   --no-build  use the existing $BUILD_DIR/bench/sync_bench as is.
#   --no-go     skip the Go reference.
#   other flags go to sync_bench, e.g. --benchmark_filter=Chan --benchmark_min_time=1
# Environment: BUILD_DIR (default build/release), JOBS (build parallelism, default 2),
#   REF_DIR (default bench/reference of the repository).
# The last line printed is the benchmark's RESULT line (plus go_chan_pingpong_ns and
# ratio_vs_go when Go ran).
BENCH="sync"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --no-go ..." "$@"
bench_build sync_bench
bin=$(bench_bin sync_bench)
bench_start

set +e
# Defaults first (later flags win): 5 repetitions, randomly interleaved across benchmarks so
# that load from other processes on this shared machine hits LioNet and references alike;
# sync_bench's RESULT line keeps each benchmark's fastest repetition.
"$bin" --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 \
  ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} | tee "$tmp/console.txt"
rc=${PIPESTATUS[0]}
set -e
result=$(sed 's/\x1b\[[0-9;]*m//g' "$tmp/console.txt" | grep '^RESULT ' | tail -1 || true)
[ -n "$result" ] || result="RESULT errors=1 note=sync_bench_exited_without_result_rc_$rc"

# Go's unbuffered channel ping-pong (one goroutine pair, GOMAXPROCS=1): ns per round trip.
go_ns=""
if ! bench_opt --no-go && bench_have_go && [ -d "$REF_DIR/go" ]; then
  go_out=$(cd "$REF_DIR/go" && { timeout 300 go test -run '^$' -bench 'UnbufferedChanPingPong' -cpu 1 2>&1 || true; })
  echo "$go_out" | grep -E '^Benchmark' || true
  go_ns=$(echo "$go_out" | awk '/^BenchmarkUnbufferedChanPingPong/ {print $3; exit}')
fi

cpu=$(bench_cpu)
commit=$(bench_commit lionet/sync bench/sync_bench.cc)

python3 - "$result" "$go_ns" "$tmp/section.md" "$tmp/result.txt" <<PYEOF
import sys
result, go_ns, out_path, result_out = sys.argv[1:5]
kv = dict(t.split("=", 1) for t in result.split()[1:] if "=" in t)
def num(k):
    try:
        v = float(kv[k])
        return v if v >= 0 else None
    except (KeyError, ValueError):
        return None
def fmt(v, d=1):
    return "n/a" if v is None else f"{v:.{d}f}"
def ratio(ref, ours):
    return "n/a" if ref is None or not ours else f"{ref / ours:.2f}x"
go = float(go_ns) if go_ns else None
rows = [
    ("Unbuffered channel ping-pong, round trip, 1 worker", "chan_pingpong_ns", "Boost.Fiber unbuffered_channel", "boost_chan_pingpong_ns"),
    ("Buffered channel (64), ns per value, 1 worker", "chan_buffered_ns", "Boost.Fiber buffered_channel", "boost_chan_buffered_ns"),
    ("Channel try_send+try_recv, one fiber, no switch", "chan_noswitch_ns", "Boost.Fiber buffered_channel try_push+try_pop", "boost_chan_noswitch_ns"),
    ("Mutex lock+unlock, uncontended", "mutex_uncontended_ns", "boost::fibers::mutex", "boost_mutex_uncontended_ns"),
    ("Mutex lock+unlock, uncontended", "mutex_uncontended_ns", "std::mutex", "std_mutex_uncontended_ns"),
    ("Mutex contended, 4 fibers, 1 worker, yield inside (per lock+unlock)", "mutex_contended_1w_ns", "boost::fibers::mutex, same shape", "boost_mutex_contended_1w_ns"),
    ("Mutex contended, 4 fibers, 2 workers (per lock+unlock)", "mutex_contended_2w_ns", "std::mutex, 2 threads", "std_mutex_contended_2t_ns"),
    ("JoinHandle::cancel to the parked fiber running, across workers, p50", "cancel_p50_ns", "Event::set to the waiter running, p50", "wake_p50_ns"),
    ("JoinHandle::cancel to the parked fiber running, across workers, p99", "cancel_p99_ns", "Event::set to the waiter running, p99", "wake_p99_ns"),
]
lines = [
    "## Sync (lionet/sync): channels and mutex",
    "",
    "Produced by \`scripts/bench-sync.sh --write\` (bench/sync_bench.cc) at commit $commit on $(nproc) x $cpu;"
    " load average before the run: $load_before. Wall-clock ns per operation, fastest of 5 randomly interleaved"
    " repetitions; ratio = reference / LioNet"
    " (above 1 means LioNet is faster). Absolute figures drift on this shared VM; ratios from the same run hold.",
    "",
    "| Operation | LioNet ns | Reference | Reference ns | Ratio |",
    "|---|---:|---|---:|---:|",
]
for label, k, ref_label, rk in rows:
    ours, ref = num(k), num(rk)
    lines.append(f"| {label} | {fmt(ours, 2 if 'uncontended' in k else 1)} | {ref_label} | {fmt(ref, 2 if 'uncontended' in rk else 1)} | {ratio(ref, ours)} |")
if go is not None:
    lines.append(f"| Unbuffered channel ping-pong, round trip | {fmt(num('chan_pingpong_ns'))} | Go chan (GOMAXPROCS=1, separate process) | {fmt(go)} | {ratio(go, num('chan_pingpong_ns'))} |")
lines += ["", f"errors={kv.get('errors', '?')}"]
open(out_path, "w").write("\n".join(lines) + "\n")
extra = ""
if go is not None:
    pp = num("chan_pingpong_ns")
    extra = f" go_chan_pingpong_ns={go:.1f} ratio_vs_go={(go / pp) if pp else 0:.2f}"
# Keep errors= last.
parts = result.split()
err = [p for p in parts if p.startswith("errors=")]
body = [p for p in parts if not p.startswith("errors=")]
open(result_out, "w").write(" ".join(body) + extra + (" " + err[-1] if err else " errors=1") + "\n")
PYEOF
bench_section "$tmp/section.md"
bench_result "$(cat "$tmp/result.txt")"
