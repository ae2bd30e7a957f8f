#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzz.cc, clang, ASan+UBSan) and runs each for a
# fixed time over its corpus tests/corpus/<target>/ (new inputs go to a scratch copy, so the
# committed corpus changes only by hand). Fails on any crash, leak or sanitizer report, leaving
# the input in build/<preset>/artifacts/.
# FUZZ_PRESET picks the build: `asan` (default: the build `make test-asan` already made, -O1,
# whose tests share these objects) or `fuzz` (-O2 and nothing else: more runs per second, for
# long sessions).
# Targets run FUZZ_JOBS at a time (default: one per CPU), each a single-threaded libFuzzer
# process with the whole time to itself: on 2 CPUs, the 14 targets x 30 s (make test's
# FUZZ_SECONDS) take about 3.5 minutes, not 7, and each target still gets its 30 s of one CPU.
# Usage: scripts/fuzz.sh [seconds per target (default 60)] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}; shift || true
jobs=${FUZZ_JOBS:-$(nproc)}
preset=${FUZZ_PRESET:-asan}
out=build/$preset
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" --target lionet_fuzz_targets
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$out"/fuzz/*_fuzz; do targets+=("$(basename "$f")"); done
fi
mkdir -p "$out/artifacts"

# One target: its scratch corpus, its run, its verdict in $out/<t>.status.
run_one() {
  local t=$1 work=$out/corpus/$1
  rm -rf "$work"; mkdir -p "$work"
  [ -d "tests/corpus/$t" ] && cp -r "tests/corpus/$t/." "$work/"
  echo "fuzz: $t for ${secs}s ($(ls "$work" | wc -l) corpus inputs)"
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$out/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$out/artifacts/$t-" "$work" >"$out/$t.log" 2>&1; then
    echo "fuzz: $t OK ($(grep -E 'stat::number_of_executed_units' "$out/$t.log" | awk '{print $2}') runs)"
    echo ok >"$out/$t.status"
  else
    echo "fuzz: $t FAILED"; echo failed >"$out/$t.status"
  fi
}

rm -f "$out"/*.status
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  run_one "$t" &
  running=$((running + 1))
done
wait

failed=0
for t in "${targets[@]}"; do
  if [ "$(cat "$out/$t.status" 2>/dev/null)" != ok ]; then
    echo "fuzz: $t FAILED: last lines of $out/$t.log"; tail -40 "$out/$t.log"; failed=1
  fi
done
[ $failed -eq 0 ] && echo "fuzz: all ${#targets[@]} targets passed" || exit 1
