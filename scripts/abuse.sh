#!/usr/bin/env bash
# scripts/abuse.sh: connection flood and slowloris against an HTTP server (issue 10).
#
# Starts the server pinned to CPU 0 (by default build/release/bin/lionet on a temp conf: one
# HTTP server on 127.0.0.1, 1 worker, max_connections 10000, header_timeout 3s, idle_timeout
# 10s, /healthz) and runs bench/abuse_client pinned to CPU 1, ROUNDS times (default 2):
#   flood      20,000 connections at once: at most 10,000 held, the excess closed within 1 s
#              of connecting, the keep-alive probe (GET every 10 ms) answered with p99 < 100 ms
#              and no error, fresh connections served again once the flood is over;
#   slowloris  2,000 clients sending one header byte every 5 s: each cut off between 2.7 s and
#              5 s after connecting (header_timeout 3 s, +2 s grace), both probes as above.
# Samples the server's RSS (VmRSS) and open fds (/proc/PID/fd) before, every 0.2 s (peak) and
# after each round. Fails if a scenario fails, if fds are not released after a round, if RSS
# after the last round is > 10% above RSS after round 1 (a leak), if (lionet) RSS after the
# last round is above 1.5x RSS before the first plus CACHES_KB (memory not given back after the
# flood: lionet's memory.trim_* returns it), if the peak exceeds 32 KiB per held connection, or
# if the server exits non-zero on SIGTERM.
#
# Usage: scripts/abuse.sh [--no-build] [--server lionet|proxy|hello|'CMD with {port}']
#   lionet  the binary (default);  proxy  the same binary and conf, the probe (/app/healthz)
#   going through a `type: proxy` route to a second server of the same process (the flood and
#   the slowloris land on the proxy's front);  hello  build/release/bench/http_hello_server with
#   the same limit and header timeout (GET /hello as the probe path);  CMD  any server command,
#   {port} replaced by the port (set PROBE_PATH, LIMIT and HEADER_TIMEOUT_MS to what it enforces).
# Env: BUILD_DIR (build/release), ROUNDS (2), FLOOD_CONNS (20000), SLOW_CONNS (2000),
#      LIONET_BUILD_LOCK (/tmp/lionet-build.lock: builds in the shared tree take turns).
# Last line: RESULT flood_held=.. flood_excess_closed_ms=.. flood_p99_ms=.. slow_cut=..
#            slow_close_ms_min/p50/max=.. slow_p99_ms=.. rss_*_kb=.. fds_*=.. errors=N
set -euo pipefail
cd "$(dirname "$0")/.."
build=1 server=lionet
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) build=0 ;;
    --server) server=${2:?--server needs an argument}; shift ;;
    *) echo "usage: $0 [--no-build] [--server lionet|proxy|hello|CMD]" >&2; exit 2 ;;
  esac
  shift
done
BUILD_DIR=${BUILD_DIR:-build/release} ROUNDS=${ROUNDS:-2}
FLOOD_CONNS=${FLOOD_CONNS:-20000} SLOW_CONNS=${SLOW_CONNS:-2000}
LIMIT=${LIMIT:-10000} HEADER_TIMEOUT_MS=${HEADER_TIMEOUT_MS:-3000} CACHES_KB=${CACHES_KB:-4096}
lock=${LIONET_BUILD_LOCK:-/tmp/lionet-build.lock}
if [ "$build" -eq 1 ]; then
  [ -f "$BUILD_DIR/build.ninja" ] || flock "$lock" cmake --preset release >/dev/null
  flock "$lock" cmake --build --preset release --target lionet_app abuse_client http_hello_server >/dev/null
fi
client=$BUILD_DIR/bench/abuse_client

# File descriptors: the server needs LIMIT + a few, the client FLOOD_CONNS + probes (it spreads
# them over processes past its hard limit). Raise the hard limit if allowed (root with
# CAP_SYS_RESOURCE), else use what there is.
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $((FLOOD_CONNS + 5000)) ]; then
  want=$((FLOOD_CONNS + 5000))
  prlimit --pid $$ --nofile="$want:$want" 2>/dev/null || ulimit -n "$want" 2>/dev/null ||
    echo "abuse: RLIMIT_NOFILE hard limit stays $(ulimit -Hn) (cannot raise it here); the client spreads over processes"
fi
ulimit -Sn "$(ulimit -Hn)"
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $((LIMIT + 100)) ]; then
  echo "abuse: RLIMIT_NOFILE hard limit $(ulimit -Hn) is below the server's connection limit $LIMIT"; exit 2
fi

tmp=$(mktemp -d /tmp/lionet-abuse.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
path=${PROBE_PATH:-/healthz}
case $server in
  lionet|proxy)
    proxied=""
    if [ "$server" = proxy ]; then
      back=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
      proxied=", {path: /app, type: proxy, strip_prefix: true, upstreams: ['127.0.0.1:$back']}"
      path=${PROBE_PATH:-/app/healthz}
    fi
    cat > "$tmp/server.yml" <<EOF
scheduler: {threads: 1}
log: {loggers: [{name: root, level: warn}]}
memory: {trim_interval: 1000ms}
servers:
  - {name: web, type: http, listen: ["127.0.0.1:$port"], max_connections: $LIMIT,
     header_timeout: ${HEADER_TIMEOUT_MS}ms, idle_timeout: 10s, routes: [{path: /healthz, type: health}$proxied]}
EOF
    if [ "$server" = proxy ]; then
      echo "  - {name: back, type: http, listen: [\"127.0.0.1:$back\"], routes: [{path: /healthz, type: health}]}" \
        >> "$tmp/server.yml"
    fi
    cmd="$BUILD_DIR/bin/lionet -c $tmp" ;;
  hello)
    cmd="$BUILD_DIR/bench/http_hello_server $port --threads 1 --max-connections $LIMIT --header-timeout-ms $HEADER_TIMEOUT_MS"
    path=${PROBE_PATH:-/hello} ;;
  *) cmd=${server//\{port\}/$port} ;;
esac
taskset -c 0 bash -c "exec $cmd" > "$tmp/server.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
up=0
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port$path" && { up=1; break; }; sleep 0.1; done
[ "$up" = 1 ] || { echo "abuse: the server does not answer http://127.0.0.1:$port$path: $cmd"; cat "$tmp/server.log"; exit 1; }

rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }
sampler() { local pr=0 pf=0 r f
  while kill -0 "$pid" 2>/dev/null; do r=$(rss) f=$(fds)
    [ "$r" -gt "$pr" ] && pr=$r; [ "$f" -gt "$pf" ] && pf=$f
    echo "$pr $pf" > "$tmp/peak.new" && mv "$tmp/peak.new" "$tmp/peak"; sleep 0.2; done; }
rss0=$(rss) fds0=$(fds)
sampler & sampler_pid=$!
errors=0
echo "abuse: server '$cmd' (pid $pid, CPU 0), port $port, probe $path; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  taskset -c 1 "$client" flood 127.0.0.1 "$port" --conns "$FLOOD_CONNS" --limit "$LIMIT" --secs 6 --path "$path" \
    | tee "$tmp/flood.$round" || errors=$((errors + 1))
  sleep 1  # the held idle connections were closed by header_timeout inside the client's 6 s
  taskset -c 1 "$client" slowloris 127.0.0.1 "$port" --conns "$SLOW_CONNS" --interval-ms 5000 \
    --timeout-ms "$HEADER_TIMEOUT_MS" --secs 15 --path "$path" | tee "$tmp/slow.$round" || errors=$((errors + 1))
  sleep 2.5  # lionet's memory trimmer looks every second (memory.trim_interval above)
  echo "$(rss) $(fds)" > "$tmp/after.$round"
  read -r r f < "$tmp/after.$round"
  if [ "$f" -gt $((fds0 + 16)) ]; then echo "abuse: round $round: fds not released: $fds0 before, $f after"; errors=$((errors + 1)); fi
done
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
read -r peak_rss peak_fds < "$tmp/peak"
read -r rss1 _ < "$tmp/after.1"
read -r rssN fdsN < "$tmp/after.$ROUNDS"
kill -TERM "$pid"
status=0; wait "$pid" || status=$?
trap 'rm -rf "$tmp"' EXIT
[ "$status" -eq 0 ] || { echo "abuse: server exited with status $status on SIGTERM"; tail "$tmp/server.log"; errors=$((errors + 1)); }
if [ "$rssN" -gt $((rss1 * 11 / 10)) ]; then echo "abuse: RSS grew between rounds: $rss1 kB -> $rssN kB"; errors=$((errors + 1)); fi
if [ "$peak_rss" -gt $((rss0 + LIMIT * 32)) ]; then echo "abuse: peak RSS $peak_rss kB for $LIMIT connections"; errors=$((errors + 1)); fi
# Memory comes back once the flood is over (lionet: memory.trim_*): within 1.5x of RSS before
# it, plus what stays cached on purpose (CACHES_KB: 64 warm fiber stacks per pool, the worker's
# stack and object caches; 4 MiB by default).
if { [ "$server" = lionet ] || [ "$server" = proxy ]; } && [ "$rssN" -gt $((rss0 * 3 / 2 + CACHES_KB)) ]; then
  echo "abuse: RSS after the flood $rssN kB > 1.5 x $rss0 kB before + $CACHES_KB kB of caches"; errors=$((errors + 1))
fi

kv() { grep '^RESULT' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'; }
printf '\n| round | scenario | connected | closed by server (answered / reset) | held | closed <1 s | excess closed by | close after connect min / p50 / max | keep-alive probe p50 / p99 / max, errors | fresh probe ok / failed |\n'
printf '|---|---|---:|---|---:|---:|---:|---|---|---|\n'
for round in $(seq "$ROUNDS"); do
  for s in flood slow; do
    f=$tmp/$s.$round
    ex=$(kv "$f" excess_closed_ms); [ "$s" = slow ] && ex=-
    [ "$ex" != - ] && ex="$ex ms"
    printf '| %s | %s | %s | %s (%s / %s) | %s | %s | %s | %s / %s / %s ms | %s / %s / %s ms, %s | %s / %s |\n' "$round" "$s" \
      "$(kv "$f" connected)" "$(kv "$f" closed_by_server)" "$(kv "$f" answered)" "$(kv "$f" reset)" "$(kv "$f" held)" \
      "$(kv "$f" closed_within_1s)" "$ex" "$(kv "$f" close_ms_min)" "$(kv "$f" close_ms_p50)" "$(kv "$f" close_ms_max)" \
      "$(kv "$f" probe_p50_ms)" "$(kv "$f" probe_p99_ms)" "$(kv "$f" probe_max_ms)" "$(kv "$f" probe_errors)" \
      "$(kv "$f" fresh_ok)" "$(kv "$f" fresh_failed)"
  done
done
printf '\nServer RSS: %s kB before, %s kB peak, %s kB after round 1, %s kB after round %s. Open fds: %s before, %s peak, %s after.\n' \
  "$rss0" "$peak_rss" "$rss1" "$rssN" "$ROUNDS" "$fds0" "$peak_fds" "$fdsN"
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
F=$tmp/flood.$ROUNDS S=$tmp/slow.$ROUNDS
echo "RESULT server=$server flood_held=$(kv "$F" held) flood_closed=$(kv "$F" closed_by_server) flood_excess_closed_ms=$(kv "$F" excess_closed_ms) flood_p99_ms=$(kv "$F" probe_p99_ms) slow_cut=$(kv "$S" closed_by_server) slow_close_ms_min=$(kv "$S" close_ms_min) slow_close_ms_p50=$(kv "$S" close_ms_p50) slow_close_ms_max=$(kv "$S" close_ms_max) slow_p99_ms=$(kv "$S" probe_p99_ms) rss_before_kb=$rss0 rss_peak_kb=$peak_rss rss_round1_kb=$rss1 rss_after_kb=$rssN fds_before=$fds0 fds_peak=$peak_fds fds_after=$fdsN errors=$errors"
[ "$errors" -eq 0 ]
