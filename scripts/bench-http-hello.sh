#!/usr/bin/env bash
# scripts/bench-http-hello.sh: the dynamic "hello" handler (bench/http_hello_server, GET /hello ->
# "hello world" from a Router handler) side by side with nginx serving a 1 KiB static file
# (../shared/peers/nginx/run.sh: 1 worker, sendfile, access_log off). Issue 7's target: hello
# >= 1.2x nginx's 1 KiB requests/s.
#
# Both servers pinned to CPU 0 with 1 worker; wrk -t1 on CPU 1; keep-alive with 16 and 100
# connections, and Connection: close with 16; RUNS interleaved runs of SECS s; medians.
# A run with socket errors or non-2xx answers counts as 0 (and as an error).
# Prints a markdown table and, with --write, puts it into bench/RESULTS.md between
# <!-- http-hello:begin --> and <!-- http-hello:end -->.
#
# Usage: scripts/bench-http-hello.sh [--write] [--no-build]
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), PEERS (../shared/peers).
# Last line: RESULT ka16_ratio=.. ka100_ratio=.. close16_ratio=.. errors=N
set -euo pipefail
cd "$(dirname "$0")/.."
write=0
build=1
for a in "$@"; do
  case "$a" in
    --write) write=1 ;;
    --no-build) build=0 ;;
    *) echo "usage: $0 [--write] [--no-build]" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build/release}
JOBS=${JOBS:-2}
export RUNS=${RUNS:-3} SECS=${SECS:-5}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}
command -v wrk >/dev/null && command -v nginx >/dev/null || { echo "bench-http-hello: needs wrk and nginx" >&2; exit 1; }
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$JOBS" --target http_hello_server
fi
server="$BUILD_DIR/bench/http_hello_server"
[ -x "$server" ] || { echo "bench-http-hello: $server not built" >&2; exit 1; }
source "$PEERS/compare/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"; head -c 1024 /dev/urandom >"$root/1k.bin"; chmod 644 "$root/1k.bin"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
errors=0

# wrk_rps URL CONNS [close] -> requests/s, or 0 with errors
wrk_rps() {
  local hdr=() out
  [ "${3:-}" = close ] && hdr=(-H "Connection: close")
  out=$(taskset -c 1 wrk -t1 -c"$2" -d"$SECS"s "${hdr[@]}" "$1" 2>&1)
  if echo "$out" | grep -q -E "Socket errors|Non-2xx"; then echo 0; return; fi
  echo "$out" | awk '/Requests\/sec/ {print $2}'
}
one() {  # which conns mode
  port=$(free_port)
  if [ "$1" = nginx ]; then
    "$PEERS/nginx/run.sh" "$root" "$port" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$port"
    wrk_rps "http://127.0.0.1:$port/1k.bin" "$2" "$3"
  else
    start_server "$server $port --threads 1" "$port"
    wrk_rps "http://127.0.0.1:$port/hello" "$2" "$3"
  fi
  stop_server
}
med() { printf '%s\n' "$@" | median; }
rows=()
summary="RESULT"
for cfg in "ka:16" "ka:100" "close:16"; do
  mode=${cfg%%:*}; conns=${cfg##*:}
  m=(); n=()
  for _ in $(seq "$RUNS"); do n+=($(one nginx "$conns" "$mode")); m+=($(one hello "$conns" "$mode")); done
  for v in "${m[@]}" "${n[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  mm=$(med "${m[@]}"); nn=$(med "${n[@]}"); r=$(ratio "$mm" "$nn")
  label=$([ "$mode" = ka ] && echo "keep-alive" || echo "Connection: close")
  rows+=("| $label | $conns | $mm | $nn | $r | ${m[*]} / ${n[*]} |")
  summary="$summary ${mode/ka/ka}${conns}_ratio=$r"
  echo "$label conns=$conns hello=$mm nginx_1k=$nn ratio=$r (runs: ${m[*]} | ${n[*]})"
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
git diff --quiet HEAD -- lionet/http lionet/net bench/http_hello_server.cc 2>/dev/null || commit="$commit+dirty"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
  echo "## HTTP hello handler (lionet/http) vs nginx 1 KiB static"
  echo
  echo "Produced by \`scripts/bench-http-hello.sh --write\` at commit $commit on $cpu; load average before: $load_before."
  echo "\`bench/http_hello_server\` (Router handler, 11-byte body from memory) and nginx (1 worker, 1 KiB file),"
  echo "each pinned to CPU 0; \`wrk -t1\` on CPU 1; $RUNS interleaved runs of $SECS s, medians. Target: ratio >= 1.2."
  echo
  echo "| Mode | Connections | hello req/s | nginx 1 KiB req/s | ratio | runs (hello / nginx) |"
  echo "|---|---:|---:|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
} >"$tmp/section.md"
echo
cat "$tmp/section.md"
if [ "$write" -eq 1 ]; then
  "$(dirname "$0")/write-results-section.py" http-hello "$tmp/section.md" bench/RESULTS.md
  echo "bench-http-hello: wrote the http-hello section of bench/RESULTS.md"
fi
echo
echo "$summary errors=$errors"
[ "$errors" -eq 0 ]
