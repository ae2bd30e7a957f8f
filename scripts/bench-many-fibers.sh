#!/usr/bin/env bash
# scripts/bench-many-fibers.sh: a million parked fibers (bench/many_fibers), parked on an Event
# and, in turn, on one unbuffered Channel (as the goroutines are), beside a million parked
# goroutines (bench/go/many_goroutines.go, when `go` is installed), in one run, rounds
# interleaved; prints a markdown table of the medians and their ratios.
#
# Usage: scripts/bench-many-fibers.sh [--write] [--no-build] [--no-go] [--rounds R] [N]
#   --write     also (re)write the many-fibers section of bench/RESULTS.md.
#   --no-build  use the existing $BUILD_DIR/bench/many_fibers as is.
#   --no-go     skip the Go peer.
#   --rounds R  interleaved rounds (default 3).
#   N           fibers (default 1000000).
# Environment: BUILD_DIR (default build/release), JOBS (build parallelism, default 2).
# Needs about 5 GiB of free memory at N = 1,000,000 (each side in turn).
# Last line: RESULT fibers=N rss_bytes_per_fiber=... maps=... spawn_seconds=... parked_seconds=...
#            channel_rss_bytes_per_fiber=... channel_parked_seconds=...
#            go_rss_bytes_per_fiber=... go_parked_seconds=... errors=N
BENCH="many-fibers"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --no-go ..." "$@"
rounds=3 n=1000000
set -- ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"}
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) [ $# -ge 2 ] || bench_usage "[--rounds R] [N]"; rounds=$2; shift ;;
    [0-9]*) n=$1 ;;
    *) echo "bench-many-fibers: unknown argument $1" >&2; bench_usage "[--rounds R] [N]" ;;
  esac
  shift
done
bench_build many_fibers
bin=$(bench_bin many_fibers)
bench_start

gobin=""
if ! bench_opt --no-go && bench_have_go; then
  (cd "$tmp" && go build -o "$tmp/many_goroutines" "$REPO/bench/go/many_goroutines.go") &&
    gobin="$tmp/many_goroutines" || echo "bench-many-fibers: the Go peer did not build; LioNet only" >&2
fi

errors=0
for r in $(seq "$rounds"); do
  echo "== round $r: lionet (load $(cut -d' ' -f1 /proc/loadavg))"
  "$bin" "$n" | tee -a "$tmp/lionet.txt" || errors=$((errors + 1))
  echo "== round $r: lionet on a Channel (load $(cut -d' ' -f1 /proc/loadavg))"
  "$bin" "$n" --wait channel | tee -a "$tmp/channel.txt" || errors=$((errors + 1))
  if [ -n "$gobin" ]; then
    echo "== round $r: go"
    "$gobin" "$n" | tee -a "$tmp/go.txt" || errors=$((errors + 1))
  fi
done

python3 - "$tmp" "$n" "$rounds" "$errors" "$load_before" <<'PYEOF'
import os, statistics, sys
tmp, n, rounds, errors, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def results(name):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        if line.startswith("RESULT "):
            kv = dict(f.split("=", 1) for f in line.split()[1:])
            out.append(kv)
    return out

def med(rows, key):
    vals = [float(r[key]) for r in rows if key in r]
    return statistics.median(vals) if vals else None

lio, chan, go = results("lionet.txt"), results("channel.txt"), results("go.txt")
errors += sum(int(r.get("errors", 1)) for r in lio + chan + go)
keys = [("rss_bytes_per_fiber", "RSS per parked fiber (bytes)", "{:.0f}"),
        ("maps", "kernel mappings while parked", "{:.0f}"),
        ("spawn_seconds", "spawn calls (s)", "{:.3f}"),
        ("parked_seconds", "until all parked (s)", "{:.3f}"),
        ("release_seconds", "release + join all (s)", "{:.3f}")]
guard = lio[0].get("stack_guard", "?") if lio else "?"
lines = [f"### A million parked fibers (`scripts/bench-many-fibers.sh`)", "",
         f"{n:,} fibers on 2 workers, each parked on one shared Event, and in turn in `recv()` on one "
         f"unbuffered Channel (LioNet, default options: 128 KiB stacks, {guard}), beside {n:,} goroutines "
         f"parked on one channel (GOMAXPROCS=2); medians of {rounds} interleaved rounds; load before: {load}; "
         f"kernel {os.uname().release}; vm.max_map_count {open('/proc/sys/vm/max_map_count').read().strip()}.", "",
         "| figure | LioNet, Event | LioNet, Channel | Go | Event / Go | Channel / Go |",
         "|---|---:|---:|---:|---:|---:|"]
def show(v, fmt):
    return fmt.format(v) if v is not None else "-"
def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"
for key, label, fmt in keys:
    a, c, b = med(lio, key), med(chan, key), med(go, key)
    lines.append(f"| {label} | {show(a, fmt)} | {show(c, fmt)} | {show(b, fmt)} | {ratio(a, b)} | {ratio(c, b)} |")
def verdict(ok):
    return "met" if ok else "**missed**"
rss, maps, sp, pk = med(lio, "rss_bytes_per_fiber"), med(lio, "maps"), med(lio, "spawn_seconds"), med(lio, "parked_seconds")
crss, cpk = med(chan, "rss_bytes_per_fiber"), med(chan, "parked_seconds")
done = all(int(r.get("completed", 0)) == n for r in lio + chan) and bool(lio)
if rss is not None:
    lines += ["", f"Targets: {n:,} fibers complete on the default map count: {verdict(done)}; RSS per parked fiber "
              f"<= 4,608 B: {verdict(rss <= 4608)}; kernel mappings < 10,000: {verdict(maps < 10000)}; spawn <= 1.0 s: "
              f"{verdict(sp <= 1.0)} for the spawn calls ({sp:.2f} s), {verdict(pk <= 1.0)} until every fiber has "
              f"parked ({pk:.2f} s: each fiber's first stack page is a fresh page of memory, about 1.3-1.8 us of the "
              f"kernel's time each on these VMs even when faulted in by batch, fiber/README.md)."]
if cpk is not None:
    lines += ["", f"On one Channel: until all parked <= 2.0 s: {verdict(cpk <= 2.0)} ({cpk:.2f} s); RSS per parked "
              f"fiber <= 4,608 B: {verdict(crss is not None and crss <= 4608)}."]
open(os.path.join(tmp, "section.md"), "w").write("\n".join(lines) + "\n")
def fmtv(v, f="{:.3f}"):
    return f.format(v) if v is not None else "na"
open(os.path.join(tmp, "result.txt"), "w").write(f"RESULT fibers={n} rss_bytes_per_fiber={fmtv(med(lio, 'rss_bytes_per_fiber'), '{:.0f}')} "
      f"maps={fmtv(med(lio, 'maps'), '{:.0f}')} spawn_seconds={fmtv(med(lio, 'spawn_seconds'))} "
      f"parked_seconds={fmtv(med(lio, 'parked_seconds'))} "
      f"channel_rss_bytes_per_fiber={fmtv(crss, '{:.0f}')} channel_parked_seconds={fmtv(cpk)} "
      f"go_rss_bytes_per_fiber={fmtv(med(go, 'rss_bytes_per_fiber'), '{:.0f}')} "
      f"go_parked_seconds={fmtv(med(go, 'parked_seconds'))} errors={errors}\n")
PYEOF
bench_section "$tmp/section.md"
bench_result "$(cat "$tmp/result.txt")"
