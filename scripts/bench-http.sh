#!/usr/bin/env bash
# scripts/bench-http.sh: issue 7's static-file benchmarks.
#   1. ../shared/peers/compare/http.sh against bench/http_file_server (--mode auto, 1 worker,
#      CPU 0) vs nginx (1 worker, CPU 0, sendfile), wrk -t1 on CPU 1, keep-alive, 16 and 100
#      connections: 1 KiB / 64 KiB / 1 MiB / 10 MiB requests/s.
#   2. Connection: close (compare/http.sh has no such option, so run here the same way):
#      1 KiB and 64 KiB, 16 connections, LioNet auto vs nginx, with server CPU per request
#      (utime+stime from /proc of the server and its children), because wrk saturates first.
#   3. Per mode: LioNet memory 1 KiB, chunk 1 MiB, sendfile 1 MiB / 10 MiB vs the Go net/http
#      server's same mode (GOMAXPROCS=1) and vs nginx (CHUNK target >= 0.8x nginx MB/s at 1 MiB).
#   4. bench/B2-FileTransfer with nginx as its --ref over the same files.
# All LioNet/nginx/Go runs interleaved, RUNS runs of SECS s each, medians. A run with socket
# errors or non-2xx answers counts as 0 and as an error.
# With --write, the tables go into bench/RESULTS.md between <!-- http:begin --> / <!-- http:end -->.
#
# Usage: scripts/bench-http.sh [--write] [--no-build] [--quick]
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), PEERS (../shared/peers).
# --quick: RUNS=1 SECS=1 and B2 --quick (a smoke run; figures indicative only).
# Last line: RESULT ka16_1k_ratio=.. ka16_64k_ratio=.. ... close16_1k_ratio=.. errors=N
set -euo pipefail
cd "$(dirname "$0")/.."
write=0
build=1
quick=0
for a in "$@"; do
  case "$a" in
    --write) write=1 ;;
    --no-build) build=0 ;;
    --quick) quick=1 ;;
    *) echo "usage: $0 [--write] [--no-build] [--quick]" >&2; exit 2 ;;
  esac
done
if [ "$quick" -eq 1 ]; then export RUNS=${RUNS:-1} SECS=${SECS:-1}; fi
BUILD_DIR=${BUILD_DIR:-build/release}
JOBS=${JOBS:-2}
export RUNS=${RUNS:-3} SECS=${SECS:-5}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}
command -v wrk >/dev/null && command -v nginx >/dev/null || { echo "bench-http: needs wrk and nginx" >&2; exit 1; }
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$JOBS" --target http_file_server B2-FileTransfer
fi
server=$(realpath "$BUILD_DIR/bench/http_file_server")
b2=$(realpath "$BUILD_DIR/bench/B2-FileTransfer")
[ -x "$server" ] && [ -x "$b2" ] || { echo "bench-http: $server or $b2 not built" >&2; exit 1; }
source "$PEERS/compare/lib.sh"
gosrv=$(peer go_static_server)
tmp=$(mktemp -d)
trap 'stop_server 2>/dev/null || true; rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"
for f in 1k:1024 64k:65536 1m:1048576 10m:10485760; do head -c "${f##*:}" /dev/urandom >"$root/${f%%:*}.bin"; done
chmod 644 "$root"/*.bin
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
errors=0
summary="RESULT"
sections=()
[ -x "$PEERS_OUT/warm" ] && "$PEERS_OUT/warm" >/dev/null 2>&1 || true

# ---- 1. compare/http.sh, keep-alive, 16 and 100 connections -----------------------------
ka_rows=()
for conns in 16 100; do
  out=$("$PEERS/compare/http.sh" "$server {root} {port} --mode auto --threads 1" "$conns" 2>&1) || true
  echo "$out"
  while read -r f rest; do
    case "$f" in 1k|64k|1m|10m) ;; *) continue ;; esac
    mine=$(echo "$rest" | sed -n 's/.*yours=\([0-9.]*\).*/\1/p'); ref=$(echo "$rest" | sed -n 's/.*nginx=\([0-9.]*\).*/\1/p')
    r=$(echo "$rest" | sed -n 's/.*ratio=\([0-9.]*\).*/\1/p'); runs=$(echo "$rest" | sed -n 's/.*(runs: \(.*\))/\1/p' | sed 's/ | / \/ /')
    [ "${mine%.*}" = 0 ] || [ -z "$mine" ] && errors=$((errors + 1))
    ka_rows+=("| keep-alive | $conns | $f | $mine | $ref | $r | $runs |")
    summary="$summary ka${conns}_${f}_ratio=$r"
  done <<<"$out"
done

# ---- helpers for our own interleaved runs ------------------------------------------------
# cpu_ticks PID: utime+stime of PID and its direct children (nginx master + worker).
cpu_ticks() {
  local t=0 p
  for p in $1 $(pgrep -P "$1" 2>/dev/null || true); do
    [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat)))
  done
  echo "$t"
}
# wrk_run URL CONNS [close] -> "req/s MB/s requests" (0 0 0 with errors)
wrk_run() {
  local hdr=() out
  [ "${3:-}" = close ] && hdr=(-H "Connection: close")
  out=$(taskset -c 1 wrk -t1 -c"$2" -d"$SECS"s "${hdr[@]}" "$1" 2>&1)
  if echo "$out" | grep -q -E "Socket errors|Non-2xx"; then echo "0 0 0"; return; fi
  local rps reqs mb
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  mb=$(echo "$out" | awk '/Transfer\/sec/ {v=$2; u=substr(v, length(v)-1); n=v+0; if (u=="GB") n*=1024; else if (u=="KB") n/=1024; else if (u!="MB") n/=1048576; printf "%.1f", n*1.048576}')
  echo "$rps ${mb:-0} ${reqs:-0}"
}
# one KIND PATH CONNS MODE -> "req/s MB/s us_cpu_per_req"; KIND: nginx | go | lionet:<mode>
one() {
  local kind=$1 path=$2 conns=$3 mode=$4 url
  port=$(free_port)
  case "$kind" in
    nginx) "$PEERS/nginx/run.sh" "$root" "$port" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$port"; url="http://127.0.0.1:$port/$path" ;;
    go) GOMAXPROCS=1 taskset -c 0 "$gosrv" "127.0.0.1:$port" "$root" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$port"; url="http://127.0.0.1:$port/$path" ;;
    lionet:*) start_server "$server $root $port --mode ${kind#lionet:} --threads 1" "$port"; url="http://127.0.0.1:$port/$path" ;;
  esac
  local before after res
  before=$(cpu_ticks "$SERVER_PID")
  res=$(wrk_run "$url" "$conns" "$mode")
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  set -- $res
  local hz; hz=$(getconf CLK_TCK)
  local us; us=$(python3 -c "import sys; t,n,hz=map(float,sys.argv[1:]); print(f'{t/hz*1e6/n:.1f}' if n else '0')" "$((after - before))" "$3" "$hz")
  echo "$1 $2 $us"
}
col() { printf '%s\n' "$@" | median; }

# ---- 2. Connection: close ------------------------------------------------------------------
close_rows=()
for f in 1k 64k; do
  m_rps=(); m_cpu=(); n_rps=(); n_cpu=()
  for _ in $(seq "$RUNS"); do
    set -- $(one nginx $f.bin 16 close); n_rps+=("$1"); n_cpu+=("$3")
    set -- $(one lionet:auto $f.bin 16 close); m_rps+=("$1"); m_cpu+=("$3")
  done
  for v in "${m_rps[@]}" "${n_rps[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  mm=$(col "${m_rps[@]}"); nn=$(col "${n_rps[@]}"); r=$(ratio "$mm" "$nn")
  mc=$(col "${m_cpu[@]}"); nc=$(col "${n_cpu[@]}")
  close_rows+=("| Connection: close | 16 | $f | $mm | $nn | $r | $mc | $nc | ${m_rps[*]} / ${n_rps[*]} |")
  summary="$summary close16_${f}_ratio=$r"
  echo "close $f lionet=$mm nginx=$nn ratio=$r cpu_us/req lionet=$mc nginx=$nc"
done

# ---- 3. per mode vs Go and nginx -----------------------------------------------------------
mode_rows=()
for cfg in "memory:mem:1k" "chunk:chunk:64k" "chunk:chunk:1m" "sendfile:sendfile:1m" "sendfile:sendfile:10m"; do
  IFS=: read -r lmode gmode f <<<"$cfg"
  l=(); g=(); n=(); lc=(); nc=()
  for _ in $(seq "$RUNS"); do
    set -- $(one nginx $f.bin 16 ka); n+=("$2"); nc+=("$3")
    set -- $(one go "$gmode/$f.bin" 16 ka); g+=("$2")
    set -- $(one "lionet:$lmode" $f.bin 16 ka); l+=("$2"); lc+=("$3")
  done
  for v in "${l[@]}" "${g[@]}" "${n[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  lm=$(col "${l[@]}"); gm=$(col "${g[@]}"); nm=$(col "${n[@]}")
  rg=$(ratio "$lm" "$gm"); rn=$(ratio "$lm" "$nm")
  mode_rows+=("| $lmode | $f | $lm | $gm | $rg | $nm | $rn | $(col "${lc[@]}") | $(col "${nc[@]}") |")
  summary="$summary ${lmode}_${f}_vs_go=$rg ${lmode}_${f}_vs_nginx=$rn"
  echo "$lmode $f MB/s lionet=$lm go=$gm (x$rg) nginx=$nm (x$rn)"
done

# ---- 4. B2-FileTransfer, nginx as the reference over the same files ------------------------
b2root=$tmp/b2; mkdir -p "$b2root"; chmod 755 "$b2root"
port=$(free_port)
"$PEERS/nginx/run.sh" "$b2root" "$port" "" "" "" 0 >/dev/null 2>&1 & SERVER_PID=$!
b2args=(--root "$b2root" --ref "http://127.0.0.1:$port")
[ "$quick" -eq 1 ] && b2args+=(--quick --max-seconds 0.5)
wait_port "$port" || true
b2out=$(taskset -c 1 "$b2" "${b2args[@]}" 2>&1) || errors=$((errors + 1))
stop_server
echo "$b2out"
b2table=$(echo "$b2out" | grep '^|' || true)
b2result=$(echo "$b2out" | grep '^RESULT' || true)
b2err=$(echo "$b2result" | sed -n 's/.*errors=\([0-9]*\).*/\1/p'); errors=$((errors + ${b2err:-1}))

commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
git diff --quiet HEAD -- lionet/http lionet/net bench/http_file_server.cc bench/B2-FileTransfer.cc 2>/dev/null || commit="$commit+dirty"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
note=""
[ "$quick" -eq 1 ] && note=" **Smoke run (--quick: RUNS=$RUNS, SECS=$SECS): indicative only.**"
{
  echo "## HTTP static files (lionet/http StaticFiles) vs nginx and Go net/http"
  echo
  echo "Produced by \`scripts/bench-http.sh --write\` at commit $commit on $cpu; load average before: $load_before.$note"
  echo "\`bench/http_file_server\` (1 worker) and the references each pinned to CPU 0; \`wrk -t1\` on CPU 1;"
  echo "$RUNS interleaved runs of $SECS s, medians. nginx: 1 worker, sendfile on. Go: \`go_static_server\`, GOMAXPROCS=1."
  echo "Targets (issue 7): 1 KiB and 64 KiB >= 1.0x nginx req/s (keep-alive and close); 1/10 MiB SENDFILE >= 0.95x"
  echo "nginx; CHUNK >= 0.8x nginx at 1 MiB; every mode ahead of Go's same mode."
  echo
  echo "### Requests/s, mode auto (compare/http.sh and Connection: close)"
  echo
  echo "| Connection | Conns | File | LioNet req/s | nginx req/s | ratio | runs (LioNet / nginx) |"
  echo "|---|---:|---|---:|---:|---:|---|"
  printf '%s\n' "${ka_rows[@]}"
  echo
  echo "| Connection | Conns | File | LioNet req/s | nginx req/s | ratio | LioNet CPU us/req | nginx CPU us/req | runs |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${close_rows[@]}"
  echo
  echo "### MB/s per mode, keep-alive, 16 connections"
  echo
  echo "| LioNet mode | File | LioNet MB/s | Go MB/s | vs Go | nginx MB/s | vs nginx | LioNet CPU us/req | nginx CPU us/req |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${mode_rows[@]}"
  echo
  echo "### B2-FileTransfer (one keep-alive connection, sequential GETs; ref = nginx on the same files)"
  echo
  echo "The ref column is the same \`lionet::http::Client\` loop against nginx: it measures client + server together."
  echo "(In a smoke check, curl fetched 200 x 16 KiB on one connection in the same 0.03 s from both servers, so a"
  echo "large B2 ratio at small sizes says more about the Client with nginx than about the servers.)"
  echo
  echo "$b2table"
  echo
  echo "\`$b2result\`"
} >"$tmp/section.md"
echo
cat "$tmp/section.md"
if [ "$write" -eq 1 ]; then
  "$(dirname "$0")/write-results-section.py" http "$tmp/section.md" bench/RESULTS.md
  echo "bench-http: wrote the http section of bench/RESULTS.md"
fi
echo
echo "$summary errors=$errors"
[ "$errors" -eq 0 ]
