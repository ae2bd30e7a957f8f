#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzz.cc, clang, ASan+UBSan: the `fuzz` preset) and
# runs each for a fixed time over its corpus tests/corpus/<target>/ (new inputs go to a scratch
# copy, so the committed corpus changes only by hand). Fails on the first crash, leak or
# sanitizer report, leaving the input in build/fuzz/artifacts/.
# Usage: scripts/fuzz.sh [seconds per target (default 60)] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}; shift || true
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in build/fuzz/fuzz/*_fuzz; do targets+=("$(basename "$f")"); done
fi
mkdir -p build/fuzz/artifacts
failed=0
for t in "${targets[@]}"; do
  work=build/fuzz/corpus/$t
  rm -rf "$work"; mkdir -p "$work"
  [ -d "tests/corpus/$t" ] && cp -r "tests/corpus/$t/." "$work/"
  echo "fuzz: $t for ${secs}s ($(ls "$work" | wc -l) corpus inputs)"
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "build/fuzz/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="build/fuzz/artifacts/$t-" "$work" >"build/fuzz/$t.log" 2>&1; then
    echo "fuzz: $t OK ($(grep -E 'stat::number_of_executed_units' "build/fuzz/$t.log" | awk '{print $2}') runs)"
  else
    echo "fuzz: $t FAILED"; tail -40 "build/fuzz/$t.log"; failed=1
  fi
done
[ $failed -eq 0 ] && echo "fuzz: all targets passed" || exit 1
