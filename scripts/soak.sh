#!/usr/bin/env bash
# scripts/soak.sh: the lionet binary under mixed load for a while, watched for leaks and losses.
#
# Runs build/release/bin/lionet on a temp conf (HTTP with static files + storage + metrics,
# HTTPS, echo; random ports on 127.0.0.1, 2 workers) and, all at once for MINUTES:
#   wrk on a static file (HTTP, 32 connections), wrk on HTTPS (16 connections),
#   bench_client on echo (50 connections, 256 B), and scripts/soak_storage.py appending records.
# Every second it samples the server's RSS, open fds and live fibers (/metrics) into
# $OUT/samples.tsv. Afterwards: SIGTERM (exit 0 expected), a restart on the same data, and a
# check that every record the appender saw acknowledged reads back.
# Fails (exit 1) if any client saw an error (wrk socket errors or non-2xx, echo errors, storage
# errors), if RSS or open fds at the end exceed their value after warm-up (the first quarter,
# at least 15 s) by more than 10%, if the server did not exit 0, or if any acknowledged record
# is missing or different.
# Usage: scripts/soak.sh [minutes (default 10; CI's make test runs 1.5)] [--no-build]
# Environment: BUILD_DIR (build/release), OUT (a temp dir, kept on failure).
# Last line: RESULT minutes=M http_requests=N https_requests=N echo_requests=N appended=N
#            rss_start_kb=.. rss_end_kb=.. fds_start=.. fds_end=.. missing=N errors=N
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=10 build=1
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    ''|*[!0-9.]*) echo "usage: $0 [minutes] [--no-build]" >&2; exit 2 ;;
    *) minutes=$a ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build/release}
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target lionet_app bench_client >/dev/null
fi
bin=$BUILD_DIR/bin/lionet echo_client=$BUILD_DIR/bench/bench_client
for b in "$bin" "$echo_client"; do [ -x "$b" ] || { echo "soak: $b not built" >&2; exit 1; }; done
command -v wrk >/dev/null || { echo "soak: wrk missing (scripts/install-deps.sh)" >&2; exit 1; }

secs=$(python3 -c "print(max(20, int(float('$minutes') * 60)))")
warm=$(( secs / 4 > 15 ? secs / 4 : 15 ))
OUT=${OUT:-$(mktemp -d /tmp/lionet-soak.XXXXXX)}
mkdir -p "$OUT/conf" "$OUT/www"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(free_port) https=$(free_port) echo_port=$(free_port)
head -c 16384 /dev/urandom > "$OUT/www/page.bin"
cat > "$OUT/conf/server.yml" <<EOF
scheduler: {threads: 2}
app: {shutdown_timeout: 10000ms}
storage: {data_dir: $OUT/data, flush: {policy: every_batch}}
servers:
  - {name: web, type: http, listen: ["127.0.0.1:$http"], routes: [
      {path: /, type: static, root: $OUT/www, mode: auto},
      {path: /topics, type: storage}, {path: /metrics, type: metrics}]}
  - {name: tls, type: https, listen: ["127.0.0.1:$https"],
     tls: {cert: $OUT/tls/cert.pem, key: $OUT/tls/key.pem, generate_self_signed: true},
     routes: [{path: /, type: static, root: $OUT/www, mode: auto}]}
  - {name: echo, type: echo, listen: ["127.0.0.1:$echo_port"]}
EOF
cat > "$OUT/conf/log.yml" <<EOF
log: {loggers: [{name: root, level: warn}]}
EOF

start_server() {
  "$bin" -c "$OUT/conf" >> "$OUT/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$http/metrics" && return 0
    sleep 0.1
  done
  echo "soak: server did not come up" >&2; cat "$OUT/server.log" >&2; exit 1
}
start_server
trap 'kill -9 $pid 2>/dev/null || true' EXIT

echo "soak: ${secs}s of load (warm-up ${warm}s), output in $OUT"
wrk -t1 -c32 -d"${secs}s" --timeout 5s "http://127.0.0.1:$http/page.bin" > "$OUT/wrk-http.txt" 2>&1 &
w1=$!
wrk -t1 -c16 -d"${secs}s" --timeout 5s "https://127.0.0.1:$https/page.bin" > "$OUT/wrk-https.txt" 2>&1 &
w2=$!
"$echo_client" -h 127.0.0.1 -p "$echo_port" -c 50 -s 256 -d "$secs" > "$OUT/echo.txt" 2>&1 &
e1=$!
python3 scripts/soak_storage.py append "$http" soak "$secs" "$OUT/acked.tsv" > "$OUT/append.txt" 2>&1 &
a1=$!

printf 't\trss_kb\tfds\tfibers\n' > "$OUT/samples.tsv"
for t in $(seq "$secs"); do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
  fds=$(ls "/proc/$pid/fd" | wc -l)
  fibers=$(curl -s --max-time 2 "http://127.0.0.1:$http/metrics" | awk '/^lionet_fibers_alive\{pool="main"\}/ {print $2}')
  printf '%s\t%s\t%s\t%s\n' "$t" "$rss" "$fds" "${fibers:-?}" >> "$OUT/samples.tsv"
  sleep 1
done
rc=0
wait $w1 || rc=1; wait $w2 || rc=1; wait $e1 || rc=1; wait $a1 || rc=1

kill -TERM $pid
server_rc=0; wait $pid || server_rc=$?
start_server
python3 scripts/soak_storage.py verify "$http" soak "$OUT/acked.tsv" > "$OUT/verify.txt" 2>&1 || rc=1
kill -TERM $pid; wait $pid || true
trap - EXIT

# ---- judge
errors=0
wrk_req() { awk '/requests in/ {print $1}' "$1"; }
for f in wrk-http wrk-https; do
  if grep -qE 'Socket errors|Non-2xx' "$OUT/$f.txt" || [ -z "$(wrk_req "$OUT/$f.txt")" ]; then
    echo "soak: $f saw errors:"; cat "$OUT/$f.txt"; errors=$((errors + 1))
  fi
done
kv() { grep '^RESULT' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }
echo_err=$(kv "$OUT/echo.txt" errors); app_err=$(kv "$OUT/append.txt" errors)
[ "${echo_err:-1}" = 0 ] || { echo "soak: echo client errors=${echo_err:-?}"; tail -3 "$OUT/echo.txt"; errors=$((errors + 1)); }
[ "${app_err:-1}" = 0 ] || { echo "soak: storage appender errors=${app_err:-?}"; tail -5 "$OUT/append.txt"; errors=$((errors + 1)); }
missing=$(kv "$OUT/verify.txt" missing); wrong=$(kv "$OUT/verify.txt" wrong)
[ "${missing:-1}" = 0 ] && [ "${wrong:-1}" = 0 ] || { echo "soak: records lost:"; cat "$OUT/verify.txt"; errors=$((errors + 1)); }
[ "$server_rc" = 0 ] || { echo "soak: server exited $server_rc on SIGTERM"; tail -20 "$OUT/server.log"; errors=$((errors + 1)); }
# Growth: the largest value in the 5 s after warm-up vs the largest in the last 5 s.
read -r rss0 fds0 rss1 fds1 < <(awk -v w="$warm" -v n="$secs" 'NR > 1 {
    if ($1 > w && $1 <= w + 5) { if ($2 > r0) r0 = $2; if ($3 > f0) f0 = $3 }
    if ($1 > n - 5) { if ($2 > r1) r1 = $2; if ($3 > f1) f1 = $3 } }
  END { print r0 + 0, f0 + 0, r1 + 0, f1 + 0 }' "$OUT/samples.tsv")
grow() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(b > a * 1.10) }'; }
if grow "$rss0" "$rss1"; then echo "soak: RSS grew after warm-up: ${rss0} kB -> ${rss1} kB (> 10%)"; errors=$((errors + 1)); fi
if grow "$fds0" "$fds1"; then echo "soak: open fds grew after warm-up: ${fds0} -> ${fds1} (> 10%)"; errors=$((errors + 1)); fi

http_n=$(wrk_req "$OUT/wrk-http.txt"); https_n=$(wrk_req "$OUT/wrk-https.txt")
echo_n=$(kv "$OUT/echo.txt" requests); app_n=$(kv "$OUT/append.txt" appended); found=$(kv "$OUT/verify.txt" found)
[ "$rc" -eq 0 ] || errors=$((errors + 1))
printf '| what | value |\n|---|---|\n'
printf '| duration | %ss (warm-up %ss) |\n' "$secs" "$warm"
printf '| HTTP / HTTPS requests (wrk) | %s / %s |\n' "${http_n:-0}" "${https_n:-0}"
printf '| echo requests | %s |\n' "${echo_n:-0}"
printf '| records appended / verified after restart | %s / %s |\n' "${app_n:-0}" "${found:-0}"
printf '| RSS after warm-up / at end | %s kB / %s kB |\n' "$rss0" "$rss1"
printf '| open fds after warm-up / at end | %s / %s |\n' "$fds0" "$fds1"
if [ "$errors" -eq 0 ]; then rm -rf "$OUT"; else echo "soak: kept $OUT"; fi
echo "RESULT minutes=$minutes http_requests=${http_n:-0} https_requests=${https_n:-0} echo_requests=${echo_n:-0} appended=${app_n:-0} rss_start_kb=$rss0 rss_end_kb=$rss1 fds_start=$fds0 fds_end=$fds1 missing=${missing:-?} errors=$errors"
[ "$errors" -eq 0 ]
