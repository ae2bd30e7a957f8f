#!/usr/bin/env bash
# scripts/bench-echo-workers.sh: the echo server on several workers, io_uring against epoll
# (issue 43): the same bench_server binary with --backend io_uring (one single-issuer ring per
# worker, io.uring_ring_per_worker) and with --backend epoll, 2 workers over both CPUs (not
# pinned), the reference echo_client on CPU 1, 256 B, 100 and 1,000 connections, ROUNDS
# interleaved rounds of SECS s (io_uring, epoll, io_uring, epoll, ...); prints the medians,
# each side's runs and io_uring / epoll, and with --write puts the table into bench/RESULTS.md
# between <!-- echo-workers:begin --> and <!-- echo-workers:end -->.
#
# Usage: scripts/bench-echo-workers.sh [--write] [--no-build] [--quick]
#   --quick: ROUNDS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), ROUNDS (5), SECS (4), WORKERS (2), REF_DIR
#   (bench/reference), REF_OUT (/tmp/lionet-ref).
# Last line: RESULT workers=W c100_ratio=.. c1000_ratio=.. (io_uring / epoll QPS) errors=N
BENCH="echo-workers"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
[ ${#BENCH_ARGS[@]} -eq 0 ] || bench_usage ""
if [ "$quick" = 1 ]; then
  : "${ROUNDS:=1}" "${SECS:=1}"
fi
: "${ROUNDS:=5}" "${SECS:=4}" "${WORKERS:=2}"

bench_build bench_server
server=$(bench_bin bench_server)
cli=$(ref echo_client)
bench_start

# one BACKEND CONNS: one run -> QPS (0 on client errors)
one() {
  local out port
  port=$(free_port)
  start_server "$server $port --threads $WORKERS --backend $1" "$port" any  # not pinned: both CPUs
  out=$(taskset -c 1 "$cli" -p "$port" -c "$2" -s 256 -d "$SECS" 2>&1 | grep '^RESULT' || true)
  stop_server
  if [ "$(echo "$out" | field errors)" = 0 ]; then echo "$out" | field qps; else echo 0; fi
}

errors=0
result="RESULT workers=$WORKERS"
rows=""
for conns in 100 1000; do
  u=() e=()
  for r in $(seq "$ROUNDS"); do
    echo "== $conns connections, round $r (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    u+=("$(one io_uring "$conns")")
    e+=("$(one epoll "$conns")")
  done
  for q in "${u[@]}" "${e[@]}"; do [ "$q" != 0 ] || errors=$((errors + 1)); done
  um=$(printf '%s\n' "${u[@]}" | median) em=$(printf '%s\n' "${e[@]}" | median)
  rt=$(ratio "$um" "$em")
  printf 'conns=%s io_uring=%s epoll=%s ratio=%s (runs: %s | %s)\n' "$conns" "$um" "$em" "$rt" "${u[*]}" "${e[*]}"
  rows+="| $conns | $(printf '%.0f' "$um") | $(printf '%.0f' "$em") | **$rt** | ${u[*]} | ${e[*]} |"$'\n'
  result+=" c${conns}_ratio=$rt"
done

{
  echo "### Echo on $WORKERS workers: io_uring against epoll (\`scripts/bench-echo-workers.sh\`)"
  echo
  echo "The same bench_server with \`--backend io_uring\` (one single-issuer ring per worker) and \`--backend epoll\`,"
  echo "$WORKERS workers over both CPUs (not pinned), the reference \`echo_client\` on CPU 1, 256 B, $ROUNDS interleaved"
  echo "rounds of $SECS s, medians. Commit $(bench_commit lionet/io lionet/sched lionet/net bench/bench_server.cc) on $(bench_cpu); load before: $load_before."
  echo
  echo "| connections | io_uring QPS | epoll QPS | io_uring / epoll | io_uring runs | epoll runs |"
  echo "|---:|---:|---:|---:|---|---|"
  printf '%s' "$rows"
  echo
  echo "Target (issue 43): io_uring >= 1.05x epoll at 100 and 1,000 connections."
} > "$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "$result errors=$errors"
