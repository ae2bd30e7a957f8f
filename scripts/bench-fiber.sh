#!/usr/bin/env bash
# scripts/bench-fiber.sh: builds the release preset, runs build/release/bench/fiber_bench and
# prints a markdown table: each LioNet figure beside its reference from the same run
# (Boost.Fiber; raw Boost.Context for the switch), speed-up over one thread, and ratios.
#
# Usage: scripts/bench-fiber.sh [--write] [--no-build] [fiber_bench flags...]
#   --write     also (re)write the fiber section of bench/RESULTS.md, between the markers
#               <!-- fiber:begin --> and <!-- fiber:end --> (other sections are kept).
#   --no-build  use the existing build/release/bench/fiber_bench as is.
#   other flags go to fiber_bench, e.g. --benchmark_filter=Switch --benchmark_min_time=1
# Environment: BUILD_DIR (default build/release), JOBS (build parallelism, default 2).
# Needs python3 (JSON parsing). The last line printed is the benchmark's RESULT line; the exit
# status is fiber_bench's (1 also if that line lacks errors=0).
BENCH="fiber"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build ..." "$@"
bench_build fiber_bench
bin=$(bench_bin fiber_bench)
bench_start

set +e
"$bin" --benchmark_out="$tmp/out.json" --benchmark_out_format=json ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} | tee "$tmp/console.txt"
rc=${PIPESTATUS[0]}
set -e

result=$(grep '^RESULT ' "$tmp/console.txt" | tail -1 || true)
[ -n "$result" ] || result="RESULT errors=1 note=fiber_bench_exited_without_result_rc_$rc"

# The machine, as the table's caption.
cpu=$(bench_cpu)
compiler=$(grep -m1 '^CMAKE_CXX_COMPILER:' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null | cut -d= -f2- || true)
compiler_version=$("${compiler:-c++}" --version 2>/dev/null | head -1 || echo unknown)
boost=$(sed -n 's/^#define BOOST_LIB_VERSION "\(.*\)"/\1/p' /usr/include/boost/version.hpp 2>/dev/null | tr _ . || true)
gbench=$(dpkg-query -W -f='${Version}' libbenchmark-dev 2>/dev/null || echo unknown)
commit=$(bench_commit lionet bench)

BF_NPROC=$(nproc) BF_KERNEL=$(uname -r) BF_DATE=$(date -u +%Y-%m-%d)
export BF_NPROC BF_CPU="$cpu" BF_KERNEL BF_COMPILER="$compiler_version" BF_BOOST="$boost" \
  BF_GBENCH="$gbench" BF_COMMIT="$commit" BF_LOAD="$load_before" BF_DATE
python3 - "$tmp/out.json" "$tmp/section.md" "$result" <<'PYEOF'
import json, os, re, sys

json_path, out_path, result_line = sys.argv[1:4]
try:
    data = json.load(open(json_path))
except Exception as e:  # the benchmark died before writing its JSON
    data = {"benchmarks": []}

scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
ns = {}
for b in data.get("benchmarks", []):
    if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
        continue
    ops = b.get("ops")
    if not ops:
        continue
    name = re.sub(r"/(manual_time|real_time)$", "", b["name"])
    ns[name] = b["real_time"] * scale.get(b.get("time_unit", "ns"), 1.0) / ops

def f(v):
    if v is None:
        return "–"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

rows = []
pairs = [("BM_FiberCreation", "BM_BoostFiberCreation", "Boost.Fiber create+join"),
         ("BM_FiberSpawnJoin", "BM_BoostFiberCreation", "Boost.Fiber create+join"),
         ("BM_FiberSwitch", "BM_BoostFiberSwitch", "Boost.Fiber yield")]
lines = ["| benchmark | LioNet ns/op | speed-up vs 1 thread | reference | reference ns/op | ratio (ref/LioNet) |",
         "|---|---:|---:|---|---:|---:|"]
for mine, ref, ref_label in pairs:
    for n in (10, 1000, 3000):
        for t in (1, 2, 4, 8, 16):
            key = f"{mine}/{n}/threads:{t}"
            rkey = f"{ref}/{n}/threads:{t}"
            v, r = ns.get(key), ns.get(rkey)
            if v is None and r is None:
                continue
            base = ns.get(f"{mine}/{n}/threads:1")
            speed = ratio(base, v)
            lines.append(f"| {key} | {f(v)} | {f(speed) + 'x' if speed else '–'} | {ref_label} | {f(r)} | "
                         f"{f(ratio(r, v)) + 'x' if ratio(r, v) else '–'} |")
for t in (1, 2, 4, 8, 16):
    key, rkey = f"BM_FiberCpuBound/threads:{t}", f"BM_ThreadsCpuBound/threads:{t}"
    v, r = ns.get(key), ns.get(rkey)
    if v is None and r is None:
        continue
    speed = ratio(ns.get("BM_FiberCpuBound/threads:1"), v)
    rspeed = ratio(ns.get("BM_ThreadsCpuBound/threads:1"), r)
    lines.append(f"| {key} (ns per ~2.6 us slice) | {f(v)} | {f(speed) + 'x' if speed else '–'} | "
                 f"std::threads, same work{f' ({f(rspeed)}x vs 1 thread)' if rspeed else ''} | {f(r)} | "
                 f"{f(ratio(r, v)) + 'x' if ratio(r, v) else '–'} |")

raw = [(k, ns.get(k)) for k in ("BM_RawFcontextRoundTrip", "BM_RawLionetRoundTrip", "BM_RawFiberRoundTrip",
                                 "BM_RawCallccRoundTrip")]
raw_lines = ["| reference | ns per round trip (2 switches) | ns per switch |", "|---|---:|---:|"]
for k, v in raw:
    if v is not None:
        raw_lines.append(f"| {k} | {f(v)} | {f(v / 2)} |")
noreg = ns.get("BM_FiberSpawnJoinNoRegistry/1000/threads:1")
if noreg is not None:
    raw_lines.append(f"| BM_FiberSpawnJoinNoRegistry/1000/threads:1 (fiber_registry off) | {f(noreg)} ns per fiber | – |")
extra = ns.get("BM_BoostFiberCreationDefaultStack/1000/threads:1")
if extra is not None:
    raw_lines.append(f"| BM_BoostFiberCreationDefaultStack/1000/threads:1 (malloc'd stacks) | {f(extra)} ns per fiber | – |")

kv = dict(p.split("=", 1) for p in result_line.split()[1:] if "=" in p)
def num(k):
    try:
        return float(kv[k])
    except (KeyError, ValueError):
        return None
targets = []
def target(label, value, ok, goal):
    if value is None:
        targets.append(f"- {label}: not measured ({goal})")
    else:
        targets.append(f"- {label}: {value} — {'met' if ok else 'MISSED'} ({goal})")
sw, rh, cr, sj = num("switch_ns"), num("raw_half_roundtrip_ns"), num("create_ns"), num("spawn_join_ns")
sw10, bcr, reg = num("switch10_ns"), num("boost_fiber_create_ns"), num("registry_cost_pct")
target("yield, ring of 10, 1 worker", None if sw10 is None or rh is None else f"{sw10:.2f} ns = {sw10 / rh:.2f}x half a raw fcontext round trip ({rh:.2f} ns)",
       sw10 is not None and rh is not None and sw10 <= 2.0 * rh, "target <= 2.0x")
target("yield, ring of 1000, 1 worker", None if sw is None or rh is None else f"{sw:.2f} ns = {sw / rh:.2f}x",
       sw is not None and rh is not None and sw <= 3.5 * rh, "target <= 3.5x")
target("spawn + run + join from a fiber", None if sj is None else f"{sj:.1f} ns", sj is not None and sj <= 90, "target <= 90 ns")
target("spawn + run + join vs Boost.Fiber (pooled stacks)", None if sj is None or bcr is None else f"{bcr / sj:.2f}x",
       sj is not None and bcr is not None and bcr / sj >= 2, "target >= 2x")
target("spawn + run + exit, detached", None if cr is None else f"{cr:.1f} ns", cr is not None and cr <= 50, "target <= 50 ns")
target("fiber registry on (the default) on spawn + run + join", None if reg is None else f"+{reg:.1f}%",
       reg is not None and reg <= 5, "target <= 5%")
m2, m16 = num("mt2_speedup"), num("mt16_vs_mt2")
tr2, tr16 = num("threads_ref_mt2_speedup"), num("threads_ref_mt16_vs_mt2")
target("CPU-bound throughput, 2 threads vs 1",
       None if m2 is None else f"{m2:.2f}x (plain std::threads on the same work, same run: {tr2 if tr2 is not None else '–'}x)",
       m2 is not None and m2 >= 1.8, "target >= 1.8x")
target("CPU-bound throughput, 16 threads vs 2",
       None if m16 is None else f"{m16:.2f}x (std::threads, same run: {tr16 if tr16 is not None else '–'}x)",
       m16 is not None and m16 >= 0.9, "target >= 0.9x")

e = os.environ
machine = (f"Machine: {e['BF_NPROC']} CPUs ({e['BF_CPU']}), kernel {e['BF_KERNEL']}, {e['BF_COMPILER']}, "
           f"Boost {e['BF_BOOST']}, Google Benchmark {e['BF_GBENCH']}; LioNet commit {e['BF_COMMIT']}; "
           f"load average before the run: {e['BF_LOAD']}. Generated by `scripts/bench-fiber.sh` on {e['BF_DATE']}.")
notes = ("ns/op is wall time per fiber (creation rows), per switch (switch rows) or per slice (CPU-bound rows). "
         "Boost.Fiber runs round_robin on 1 thread and work_stealing (suspend=true, one child process per thread count) "
         "on more, with pooled_fixedsize_stack stacks of 128 KiB (mutex-guarded when threads > 1). "
         "Absolute times drift on these shared 2-core VMs; the ratios, measured side by side, are the figures that hold.")
section = "\n".join([
    "## Fiber scheduler (`bench/fiber_bench`)", "", machine, "", notes, "",
    *lines, "", *raw_lines, "", "Targets (issue 18):", "", *targets, "", "```", result_line, "```", ""])
open(out_path, "w").write(section)
PYEOF
bench_section "$tmp/section.md"
bench_result "$result" && [ "$rc" -eq 0 ]
