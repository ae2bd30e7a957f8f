#!/usr/bin/env bash
# scripts/abuse.sh: connection flood and slowloris against the lionet binary (issue 10).
#
# Starts build/release/bin/lionet on a temp conf (one HTTP server on 127.0.0.1, 1 worker,
# max_connections 10000, header_timeout 3000ms) and runs bench/abuse_client twice, server on
# CPU 0 and client on CPU 1:
#   flood      20,000 connections at once: at most 10,000 held, the excess closed promptly, a
#              keep-alive probe (GET /healthz every 10 ms) keeps succeeding with p99 < 100 ms;
#   slowloris  2,000 clients sending one header byte every 5 s: each cut off at the 3 s header
#              timeout (+2 s grace), the probe as above.
# Both run twice. Samples the server's RSS and open fds before, at the peak and after; fails if
# a scenario fails, if fds are not released, if RSS after round 2 is > 10% above RSS after
# round 1 (a leak), or if the peak exceeds 32 KiB per held connection.
# Usage: scripts/abuse.sh [--no-build]   Env: BUILD_DIR (build/release), FLOOD_CONNS, SLOW_CONNS.
# Last line (figures of round 2): RESULT flood_held=.. flood_closed=.. flood_p99_ms=.. slow_cut=.. slow_close_ms_max=..
#            slow_p99_ms=.. rss_before_kb=.. rss_peak_kb=.. rss_after_kb=.. errors=N
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
[ "${1:-}" = "--no-build" ] && build=0
BUILD_DIR=${BUILD_DIR:-build/release}
FLOOD_CONNS=${FLOOD_CONNS:-20000} SLOW_CONNS=${SLOW_CONNS:-2000}
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target lionet_app abuse_client >/dev/null
fi
bin=$BUILD_DIR/bin/lionet client=$BUILD_DIR/bench/abuse_client
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
tmp=$(mktemp -d /tmp/lionet-abuse.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$tmp/server.yml" <<EOF
scheduler: {threads: 1}
log: {loggers: [{name: root, level: warn}]}
servers:
  - {name: web, type: http, listen: ["127.0.0.1:$port"], max_connections: 10000,
     header_timeout: 3000ms, idle_timeout: 30000ms, routes: [{path: /healthz, type: health}]}
EOF
taskset -c 0 "$bin" -c "$tmp" > "$tmp/server.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }
peak_rss=0 peak_fds=0
sample() { while kill -0 "$pid" 2>/dev/null; do r=$(rss); f=$(fds)
  [ "$r" -gt "$peak_rss" ] && peak_rss=$r; [ "$f" -gt "$peak_fds" ] && peak_fds=$f
  echo "$peak_rss $peak_fds" > "$tmp/peak"; sleep 0.2; done; }
rss0=$(rss) fds0=$(fds)
sample & sampler=$!
errors=0
# Two rounds: memory after the second must not exceed memory after the first by > 10% (fiber
# stacks and buffers are pooled up to the high-water mark, so "after" is not "before").
for round in 1 2; do
  taskset -c 1 "$client" flood 127.0.0.1 "$port" --conns "$FLOOD_CONNS" --limit 10000 --secs 6 | tee "$tmp/flood.txt" || errors=$((errors + 1))
  sleep 1  # header_timeout (3 s) has closed the held idle connections
  taskset -c 1 "$client" slowloris 127.0.0.1 "$port" --conns "$SLOW_CONNS" --interval-ms 5000 --timeout-ms 3000 --secs 15 | tee "$tmp/slow.txt" || errors=$((errors + 1))
  sleep 1
  [ "$round" = 1 ] && rss_mid=$(rss)
done
rss1=$(rss) fds1=$(fds)
kill "$sampler" 2>/dev/null || true
read -r peak_rss peak_fds < "$tmp/peak"
kill -TERM $pid; wait $pid || { echo "abuse: server exited non-zero"; tail "$tmp/server.log"; errors=$((errors + 1)); }
trap 'rm -rf "$tmp"' EXIT
if [ "$fds1" -gt $((fds0 + 16)) ]; then echo "abuse: fds not released: $fds0 before, $fds1 after"; errors=$((errors + 1)); fi
if [ "$rss1" -gt $(( rss_mid * 11 / 10 )) ]; then echo "abuse: RSS grew between rounds: $rss_mid kB -> $rss1 kB"; errors=$((errors + 1)); fi
# Bounded: at most 32 KiB of RSS per connection held at the peak (10,000 held).
if [ "$peak_rss" -gt $(( rss0 + 10000 * 32 )) ]; then echo "abuse: peak RSS $peak_rss kB for 10,000 connections"; errors=$((errors + 1)); fi
kv() { grep '^RESULT' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }
printf '\n| scenario | connections | closed by server | closed within 1 s | held | close time min / p50 / max | probe p50 / p99 | probe errors |\n|---|---:|---:|---:|---:|---|---|---:|\n'
for s in flood slow; do
  f="$tmp/$s.txt"
  printf '| %s | %s | %s | %s | %s | %s / %s / %s ms | %s / %s ms | %s |\n' "$s" "$(kv "$f" connected)" "$(kv "$f" closed_by_server)" \
    "$(kv "$f" closed_within_1s)" "$(kv "$f" held)" "$(kv "$f" close_ms_min)" "$(kv "$f" close_ms_p50)" "$(kv "$f" close_ms_max)" \
    "$(kv "$f" probe_p50_ms)" "$(kv "$f" probe_p99_ms)" "$(kv "$f" probe_errors)"
done
printf '\nServer RSS %s kB before, %s kB peak, %s kB after round 1, %s kB after round 2; open fds %s before, %s peak, %s after.\n' \
  "$rss0" "$peak_rss" "$rss_mid" "$rss1" "$fds0" "$peak_fds" "$fds1"
echo "RESULT flood_held=$(kv "$tmp/flood.txt" held) flood_closed=$(kv "$tmp/flood.txt" closed_by_server) flood_p99_ms=$(kv "$tmp/flood.txt" probe_p99_ms) slow_cut=$(kv "$tmp/slow.txt" closed_by_server) slow_close_ms_max=$(kv "$tmp/slow.txt" close_ms_max) slow_p99_ms=$(kv "$tmp/slow.txt" probe_p99_ms) rss_before_kb=$rss0 rss_peak_kb=$peak_rss rss_round1_kb=$rss_mid rss_after_kb=$rss1 errors=$errors"
[ "$errors" -eq 0 ]
