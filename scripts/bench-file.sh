#!/usr/bin/env bash
# scripts/bench-file.sh: file IO benchmark, LioNet's bench_file_io side by side with fio.
#
# 1. Builds the release preset's bench_file_io (skip with --no-build).
# 2. Creates (or reuses) the 1 GiB file $DIR/lionet-bench-1g.dat on the real disk (not
#    tmpfs: O_DIRECT must reach the device) with bench_file_io itself.
# 3. 4 KiB random reads, O_DIRECT, queue depth 1 / 4 / 32, engines libaio and io_uring:
#    bench/reference/fio/randread.sh FILE ENGINE QD SECS and `bench_file_io -w QD -b 4096
#    --direct --rw randread --engine ENGINE` (QD fibers, one request each in flight) on the
#    same file, alternately, RUNS times; LioNet's op count is sized from fio's last figure so
#    both run about SECS seconds. Both are pinned to the same CPU (taskset -c $CPU).
# 4. The earlier report's job: `bench_file_io -w 4 -n 1000 -b 4096 -batch 1|4 --engine libaio
#    --direct --rw mixed` vs bench/reference/fio/seed-randrw.sh DIR 1|4 (read+write IOPS).
# 5. Hooked ::pread of page-cache-resident 4 KiB blocks vs the plain syscall (--hook-bench),
#    after the reference `warm`.
# Prints a markdown table (medians, ratio LioNet/fio, target >= 0.9x met or missed), and with
# --write puts it into bench/RESULTS.md between <!-- file:begin --> and <!-- file:end -->.
#
# Usage: scripts/bench-file.sh [--write] [--no-build] [--quick]
#   --quick: RUNS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), DIR (/var/tmp/lionet-bench), RUNS (3), SECS (5),
#   CPU (1), JOBS (2), REF_DIR (bench/reference), REF_OUT (/tmp/lionet-ref, for `warm`).
# Last line: RESULT libaio_qd1_ratio=.. ... uring_qd32_ratio=.. seed_b1_ratio=.. seed_b4_ratio=..
#   hook_ratio=.. errors=N
BENCH="file"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
bench_defaults RUNS=3 SECS=5 CPU=1 DIR=/var/tmp/lionet-bench
bench_need fio
randread=$(ref_file fio/randread.sh)
seed_randrw=$(ref_file fio/seed-randrw.sh)
bench_build bench_file_io
bench=$(bench_bin bench_file_io)
mkdir -p "$DIR"
fs=$(stat -f -c %T "$DIR")
[ "$fs" = tmpfs ] && echo "bench-file: warning: $DIR is on tmpfs; O_DIRECT will not reach a disk" >&2
file="$DIR/lionet-bench-1g.dat"
"$bench" -w 1 -n 1 -b 4096 -d "$DIR" --engine threadpool --direct --rw randread >/dev/null  # creates the file

bench_start
pin="taskset -c $CPU"
errors=0

declare -A ratio
rows=""
for eng in libaio io_uring; do
  for qd in 1 4 32; do
    : >"$tmp/fio" ; : >"$tmp/ln"
    last=20000
    for r in $(seq "$RUNS"); do
      f=$($pin bash "$randread" "$file" "$eng" "$qd" "$SECS" | awk '{print $1}')
      echo "$f" >>"$tmp/fio"
      last=${f%.*}
      n=$(( (last * SECS) / qd )); [ "$n" -lt 1000 ] && n=1000
      out=$($pin "$bench" -w "$qd" -n "$n" -b 4096 -d "$DIR" --engine "$eng" --direct --rw randread --threads 1)
      echo "$out" | grep '^RESULT' | field read_iops >>"$tmp/ln"
      e=$(echo "$out" | grep '^RESULT' | field errors); errors=$((errors + ${e:-1}))
    done
    fm=$(median <"$tmp/fio"); lm=$(median <"$tmp/ln")
    rt=$(awk -v a="$lm" -v b="$fm" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    key="$( [ "$eng" = io_uring ] && echo uring || echo libaio )_qd${qd}_ratio"
    ratio[$key]=$rt
    met=$(awk -v r="$rt" 'BEGIN {print (r >= 0.9 ? "met" : "**missed**")}')
    rows+="| $eng | $qd | $(printf '%.0f' "$lm") | $(printf '%.0f' "$fm") | ${rt}x | $met |"$'\n'
    echo "randread $eng qd$qd: lionet $lm fio $fm ratio $rt" >&2
  done
done

# ---- the earlier report's job ----
seed_rows=""
for b in 1 4; do
  : >"$tmp/fio" ; : >"$tmp/ln"
  for r in $(seq "$RUNS"); do
    rm -f "$DIR"/seed.*
    f=$($pin bash "$seed_randrw" "$DIR" "$b")
    echo "$f" | awk '{print $2 + $5}' >>"$tmp/fio"
    out=$($pin "$bench" -w 4 -n 1000 -b 4096 -batch "$b" -d "$DIR" --engine libaio --direct --rw mixed --threads 1)
    echo "$out" | grep '^RESULT' | awk '{for(i=1;i<=NF;i++){split($i,kv,"="); v[kv[1]]=kv[2]}} END {print v["read_iops"]+v["write_iops"]}' >>"$tmp/ln"
    e=$(echo "$out" | grep '^RESULT' | field errors); errors=$((errors + ${e:-1}))
  done
  rm -f "$DIR"/seed.*
  fm=$(median <"$tmp/fio"); lm=$(median <"$tmp/ln")
  rt=$(awk -v a="$lm" -v b="$fm" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
  ratio[seed_b${b}_ratio]=$rt
  old=$([ "$b" = 1 ] && echo 2663 || echo 5004)
  seed_rows+="| -w 4 -n 1000 -b 4096 -batch $b, randrw | $(printf '%.0f' "$lm") | $(printf '%.0f' "$fm") | ${rt}x | $old |"$'\n'
  echo "seed batch $b: lionet $lm fio $fm ratio $rt" >&2
done

# ---- hooked page-cache reads ----
# The VM returns guest pages left free for ~2 s to the host (NOTES.md): touch memory first.
bench_warm
hout=$($pin "$bench" --hook-bench -n 200000 -d "$DIR")
hres=$(echo "$hout" | grep '^RESULT')
hooked=$(echo "$hres" | field hooked_ns); plain=$(echo "$hres" | field plain_ns); offl=$(echo "$hres" | field offload_ns)
hratio=$(echo "$hres" | field ratio)
e=$(echo "$hres" | field errors); errors=$((errors + ${e:-1}))
rm -f "$DIR/lionet-bench-cache-64m.dat"

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "## File IO (bench_file_io vs fio)"
  echo
  echo "\`scripts/bench-file.sh\`, $(date -u +%Y-%m-%d), $(nproc) vCPU, kernel $(uname -r), $fs at $DIR; both pinned to CPU $CPU;"
  echo "$RUNS alternating runs of about ${SECS} s each, medians; load average before/after: $load_before / $load_after."
  echo
  echo "4 KiB random reads, O_DIRECT, one 1 GiB file (the same file for both). LioNet: \`bench_file_io -w QD -b 4096"
  echo "--direct --rw randread --engine E --threads 1\` (QD fibers on one worker, one request each in flight)."
  echo
  echo "| engine | queue depth | LioNet IOPS | fio IOPS | ratio | target >= 0.9x |"
  echo "|---|---|---|---|---|---|"
  printf '%s' "$rows"
  echo
  echo "The earlier report's libaio job (read + write IOPS; fio: \`bench/reference/fio/seed-randrw.sh DIR BATCH\`, 4 jobs):"
  echo
  echo "| job | LioNet IOPS | fio IOPS | ratio | earlier LioNet |"
  echo "|---|---|---|---|---|"
  printf '%s' "$seed_rows"
  echo
  echo "Hooked \`::pread\` of 4 KiB page-cache hits in a fiber: ${hooked} ns/op, plain syscall ${plain} ns/op"
  echo "(${hratio}x), always offloaded ${offl} ns/op: the RWF_NOWAIT fast path is why hooked reads cost about what"
  echo "a plain read costs. Errors over all runs: $errors."
} >"$tmp/section.md"
bench_section "$tmp/section.md"
line="RESULT"
for k in libaio_qd1_ratio libaio_qd4_ratio libaio_qd32_ratio uring_qd1_ratio uring_qd4_ratio uring_qd32_ratio seed_b1_ratio seed_b4_ratio; do
  line+=" $k=${ratio[$k]}"
done
bench_result "$line hook_ratio=$hratio errors=$errors"
