#!/usr/bin/env bash
# scripts/bench-report.sh: the whole benchmark report (`make bench-report`).
#
# Builds the release preset once, installs the references' tools (scripts/install-deps.sh
# --bench: fio, nginx, testssl.sh, Go, gnuplot), then runs every benchmark script with --write,
# one after another on an otherwise idle machine, each refreshing its own section of
# bench/RESULTS.md with LioNet, the reference from the same run and their ratio:
#   fiber (fiber_bench vs raw Boost.Context and Boost.Fiber), many-fibers (vs Go), sync (vs
#   Boost.Fiber, Go), contention (vs its Go twin), echo (vs the reference epoll server, Go,
#   Asio), echo-workers (io_uring vs epoll on 2 workers), file (bench_file_io vs fio), tls (vs the
#   libevent+OpenSSL peer, testssl), http (static files vs nginx and Go), http-hello (vs
#   nginx), storage (bench_storage vs logbench);
# then draws the charts (scripts/bench-charts.py -> bench/charts/*.png).
# A script that fails is reported and the others still run; the exit status is 1 if any failed.
# Takes about 45-60 minutes on the 2-core VMs. Usage: scripts/bench-report.sh [--only a,b,...]
# Last line: RESULT sections=N failed=N charts=N errors=N
set -uo pipefail
cd "$(dirname "$0")/.."
only=""
[ "${1:-}" = "--only" ] && only=",${2:-},"
scripts/install-deps.sh --bench
cmake --preset release >/dev/null && cmake --build --preset release -j "$(nproc)" >/dev/null || { echo "bench-report: build failed" >&2; exit 1; }
ran=0 failed=0
for s in fiber many-fibers sync contention echo echo-workers file tls http http-hello storage; do
  [ -n "$only" ] && [[ "$only" != *",$s,"* ]] && continue
  echo "== bench-$s =="
  if "scripts/bench-$s.sh" --write --no-build > "build/release/bench-$s.log" 2>&1; then
    tail -1 "build/release/bench-$s.log"
  else
    echo "bench-report: bench-$s FAILED (build/release/bench-$s.log):"; tail -5 "build/release/bench-$s.log"
    failed=$((failed + 1))
  fi
  ran=$((ran + 1))
done
charts_line=$(python3 scripts/bench-charts.py | tail -1)
echo "$charts_line"
charts=$(echo "$charts_line" | sed -n 's/.*charts=\([0-9]*\).*/\1/p')
cerr=$(echo "$charts_line" | sed -n 's/.*errors=\([0-9]*\).*/\1/p')
echo "RESULT sections=$ran failed=$failed charts=${charts:-0} errors=$((failed + ${cerr:-1}))"
[ "$failed" -eq 0 ] && [ "${cerr:-1}" -eq 0 ]
