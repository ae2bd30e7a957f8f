#!/usr/bin/env bash
# scripts/bench-storage.sh: bench/bench_storage (lionet::storage::Log) beside the raw reference
# logbench of bench/reference (plain write() of length+CRC+payload frames, read()/pread()).
#
# 1. Builds the release preset's bench_storage (unless --no-build) and the reference logbench
#    and warm into $REF_OUT.
# 2. Runs warm (touches and frees 1.25 GiB: page-cache figures on these VMs swing ~10x with the
#    host's memory balloon otherwise), then bench_storage (JSON).
# 3. Runs warm again, then logbench with the same record sizes (full run, REPS reps; QUICK=1:
#    only the 1 / 100 / 1000-record write configs via ONLY=, no durable/mixed reference rows).
# 4. Prints one table: per row LioNet MB/s, ns per message, bytes allocated per message, the
#    flush policy, the reference's figure from this run and the ratio, Takhin's figure and the
#    issue's target; with --write puts it into bench/RESULTS.md (section "storage").
# Mapping: BM_Append/S/N <-> logbench "write S B x batch 1"; BM_AppendBatch/S/B <-> "write S B x
# batch B" (B = 100, 1000; logbench has no batch of 10); BM_Read/S/N <-> "read-per-record-pread"
# (one record per read, as BM_Read); BM_Mixed <-> "mixed 50/50 append + random pread";
# BM_AppendDurable / BM_AppendBatchDurable (flush every_batch) <-> "write+fdatasync/batch".
#
# Usage: scripts/bench-storage.sh [--write] [--no-build]
# Environment: BUILD_DIR (build/release), JOBS (2), MIN_TIME (2, bench_storage seconds per
#   row: at 0.5 s the rows writing 1 MB batches read 0.2-0.3x of the reference, at 2 s 0.94-1.17x;
#   the short runs measure the VM's first touch of new page-cache memory), REPS (1, logbench reps), QUICK (0), DIR (/tmp/lionet-bench-storage: the log files;
#   needs ~2 GiB free), REF_DIR (bench/reference), REF_OUT (/tmp/lionet-ref).
# Last line: RESULT append_1k_mbs=.. batch100_1k_ratio=.. batch1000_1k_ratio=.. read_1k_ratio=..
#   mixed_us=.. ... errors=N  (errors: failed benchmark rows or missing reference rows).
BENCH="storage"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build" "$@"
bench_defaults MIN_TIME=2 REPS=1 QUICK=0 DIR=/tmp/lionet-bench-storage
bench_build bench_storage
bench=$(bench_bin bench_storage)
logbench=$(ref logbench)
warm=$(ref warm)
bench_start
# shellcheck disable=SC2016  # expanded at exit
bench_at_exit 'rm -rf "$DIR/ref"'
mkdir -p "$DIR"

echo "== bench_storage (min_time $MIN_TIME s per row) =="
"$warm"
"$bench" --dir "$DIR" --benchmark_min_time="$MIN_TIME" --benchmark_format=console \
  --benchmark_out="$tmp/ours.json" --benchmark_out_format=json | tee "$tmp/ours.txt"

# shellcheck disable=SC2153  # REPS: set by bench_defaults
echo "== logbench (reference, reps $REPS${QUICK:+, quick=$QUICK}) =="
mkdir -p "$DIR/ref"
if [ "$QUICK" = 1 ]; then
  : > "$tmp/ref.txt"
  for rs in 100 1024 10240; do
    for bs in 1 100 1000; do
      "$warm"
      ONLY="$rs,$bs" "$logbench" "$DIR/ref" "$REPS" | grep -v '^  rep ' | tee -a "$tmp/ref.txt"
    done
  done
else
  "$warm"
  "$logbench" "$DIR/ref" "$REPS" | tee "$tmp/ref.txt"
fi

cpu=$(bench_cpu)
commit=$(bench_commit lionet/storage bench/bench_storage.cc)
python3 - "$tmp" "$commit" "$cpu" "$load_before" "$MIN_TIME" "$REPS" "$QUICK" <<'PYEOF'
import json, os, re, sys
tmp, commit, cpu, load, min_time, reps, quick = sys.argv[1:8]
ours = {}
errors = 0
for b in json.load(open(os.path.join(tmp, "ours.json")))["benchmarks"]:
    name = re.sub(r"/real_time$", "", b["name"])
    if b.get("error_occurred"):
        errors += 1
        continue
    ours[name] = b
ref_write, ref_read, ref_stream, ref_sync = {}, {}, {}, {}
ref_mixed = None
for line in open(os.path.join(tmp, "ref.txt")):
    m = re.match(r"write\s+(\d+)B x batch\s+(\d+)\s+([\d.]+)", line)
    if m: ref_write[(int(m[1]), int(m[2]))] = float(m[3])
    m = re.match(r"\s+read-per-record-pread\(hot\)\s+(\d+)B\s+([\d.]+)", line)
    if m: ref_read[int(m[1])] = float(m[2])
    m = re.match(r"\s+read-stream\(1MiB,hot\)\s+(\d+)B\s+([\d.]+)", line)
    if m: ref_stream[int(m[1])] = float(m[2])
    m = re.match(r"write\+fdatasync/batch\s+(\d+)B x\s+(\d+)\s+([\d.]+)", line)
    if m: ref_sync[(int(m[1]), int(m[2]))] = float(m[3])
    m = re.match(r"mixed 50/50 append \+ random pread\s+([\d.]+)", line)
    if m: ref_mixed = float(m[1])
TAKHIN = {("append", 1024): 105, ("batch", 1024, 100): 874, ("batch", 1024, 1000): 1400,
          ("batch", 10240, 100): 2000, ("read", 1024): 100}
rows, summary = [], {}
def mbs(b): return b["bytes_per_second"] / 1e6
def fmt(x, nd=0): return "-" if x is None else f"{x:.{nd}f}"
def add(name, ref, ref_desc, takhin, target_desc, met):
    b = ours[name]
    ns = b["sec_per_msg"] * 1e9 if "sec_per_msg" in b else None
    mine = mbs(b)
    ratio = mine / ref if ref else None
    rows.append(f"| `{name}` | {b.get('label', '').replace('flush=', '')} | {fmt(mine)} | {fmt(ns)} | "
                f"{fmt(b.get('alloc_bytes_per_msg'), 2)} | {fmt(ref)} {ref_desc} | {fmt(ratio, 2)} | "
                f"{fmt(takhin)} | {target_desc} | {'' if met is None else ('yes' if met else '**no**')} |")
    return mine, ratio
for s in (100, 1024, 10240):
    for n in (100, 1000, 10000):
        name = f"BM_Append/{s}/{n}"
        if name not in ours: continue
        ref = ref_write.get((s, 1))
        tk = TAKHIN.get(("append", s))
        mine = mbs(ours[name])
        add(name, ref, "(write x1)", tk, ">= 3x Takhin" if tk else "", (mine >= 3 * tk) if tk else None)
        if s == 1024 and n == 1000: summary["append_1k_mbs"] = mine; summary["append_1k_vs_takhin"] = mine / 105
for s in (100, 1024, 10240):
    for bsz in (10, 100, 1000):
        name = f"BM_AppendBatch/{s}/{bsz}"
        if name not in ours: continue
        ref = ref_write.get((s, bsz))
        ratio = mbs(ours[name]) / ref if ref else None
        _, r = add(name, ref, f"(write x{bsz})" if ref else "", TAKHIN.get(("batch", s, bsz)),
                   ">= 0.8x ref" if ref else "", (ratio >= 0.8) if ratio else None)
        if s == 1024 and ref: summary[f"batch{bsz}_1k_ratio"] = ratio
for s in (100, 1024, 10240):
    for n in (100, 1000, 10000):
        name = f"BM_Read/{s}/{n}"
        if name not in ours: continue
        ref = ref_read.get(s)
        ratio = mbs(ours[name]) / ref if ref else None
        add(name, ref, "(pread/record)", TAKHIN.get(("read", s)), ">= 0.8x ref", (ratio >= 0.8) if ratio else None)
        if s == 1024 and n == 10000 and ratio: summary["read_1k_ratio"] = ratio
if "BM_Mixed" in ours:
    b = ours["BM_Mixed"]
    us = b["real_time"] / 1e3 if b.get("time_unit") == "ns" else b["real_time"]
    summary["mixed_us"] = us
    ratio = ref_mixed / us if ref_mixed else None
    rows.append(f"| `BM_Mixed` (us/op) | none | {us:.2f} us/op | {us * 1e3:.0f} | {b.get('alloc_bytes_per_msg', 0):.2f} | "
                f"{fmt(ref_mixed, 2)} us/op | {fmt(ratio, 2)} (ref/ours) | 23 us/op | <= 5 us/op | {'yes' if us <= 5 else '**no**'} |")
for name, key in (("BM_AppendDurable/1024/100", (1024, 1)), ("BM_AppendBatchDurable/1024/100", (1024, 100)),
                  ("BM_AppendBatchDurable/1024/1000", (1024, 1000)), ("BM_AppendBatchDurable/10240/100", (10240, 100))):
    if name in ours:
        add(name, ref_sync.get(key), f"(write+fdatasync x{key[1]})" if ref_sync.get(key) else "", None, "", None)
crc = {}
for n in (1024, 65536):
    for impl, label in ((0, "3way"), (1, "simple"), (2, "boost")):
        b = ours.get(f"BM_Crc32c/{impl}/{n}")
        if b: crc[(label, n)] = b["bytes_per_second"] / 1e9
if not ref_write: errors += 1
out = [
    "## Storage (lionet/storage): bench_storage vs bench/reference logbench",
    "",
    f"Produced by `scripts/bench-storage.sh --write` at commit {commit} on {cpu}; load average before: {load}.",
    f"bench_storage rows: Google Benchmark, wall-clock time, min_time {min_time} s; logbench: {reps} rep(s)"
    + (" (QUICK: write configs only)" if quick == "1" else "") + ". `warm` (touch and free 1.25 GiB) ran before each",
    "program: page-cache figures on these VMs swing ~10x with the host's memory balloon otherwise.",
    "MB/s = 1e6 payload (value) bytes per second, as logbench counts. Flush: `none` = page cache only (like the",
    "reference: survives kill -9, not power loss); `every_batch` = fdatasync before the append returns.",
    "Ratio = LioNet / reference from this run. Takhin = the figures in its report (issue 8); targets from issue 8.",
    "",
    "| Benchmark | Flush | LioNet MB/s | ns/msg | alloc B/msg | Reference MB/s | Ratio | Takhin MB/s | Target | Met |",
    "|---|---|---:|---:|---:|---|---:|---:|---|---|",
] + rows + [""]
if crc:
    out.append("CRC-32C (GB/s, 1 KiB / 64 KiB): " + ", ".join(
        f"{l} {crc.get((l, 1024), 0):.1f} / {crc.get((l, 65536), 0):.1f}" for l in ("3way", "simple", "boost"))
        + " (3way = LioNet's crc32c(), simple = one-stream SSE4.2 loop as in logbench, boost = Boost.CRC fallback).")
    summary["crc_3way_vs_simple_64k"] = crc.get(("3way", 65536), 0) / max(crc.get(("simple", 65536), 1e-9), 1e-9)
if ref_stream:
    out.append("Reference streaming reads (1 MiB read() + CRC per record), for scale: " +
               ", ".join(f"{s} B {v:.0f} MB/s" for s, v in sorted(ref_stream.items())) + ".")
open(os.path.join(tmp, "section.md"), "w").write("\n".join(out) + "\n")
res = "RESULT " + " ".join(f"{k}={v:.3f}" for k, v in sorted(summary.items())) + f" errors={errors}"
open(os.path.join(tmp, "result.txt"), "w").write(res + "\n")
PYEOF
bench_section "$tmp/section.md"
bench_result "$(cat "$tmp/result.txt")"
