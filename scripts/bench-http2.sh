#!/usr/bin/env bash
# scripts/bench-http2.sh: HTTP/2 (lionet/http2) side by side with nginx, both driven by h2load
# (Debian nghttp2-client). Issue 20's targets:
#   1. 1 KiB static, h2load -c 16 -m 10, over h2 (TLS, ALPN) and h2c: >= 1.1x nginx req/s.
#   2. 1 MiB static, -c 16 -m 1, h2 and h2c: >= 1.0x nginx (req/s of the same file = MB/s).
#   3. The hello handler (bench/http_hello_server, no file), h2c -c 100 -m 10: >= 1.2x nginx's
#      1 KiB file.
#   4. 10,000 idle h2c connections held after the SETTINGS exchange: server RSS per connection
#      (<= 24 KiB), nginx the same way.
# LioNet: bench/http_file_server --mode auto --threads 1 --http2 (and its TLS port); nginx:
# bench/reference/nginx/run.sh with H2=1 (1 worker, sendfile, `listen ... http2`). Both pinned
# to CPU 0, h2load on CPU 1; RUNS interleaved runs of SECS s; medians. A run with failed or
# errored requests counts as 0 and as an error.
# With --write, the tables go into bench/RESULTS.md between <!-- http2:begin --> / <!-- http2:end -->.
#
# Usage: scripts/bench-http2.sh [--write] [--no-build] [--quick]
#   --quick: RUNS=1 SECS=1 IDLE=2000 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), IDLE (10000),
#   REF_DIR (bench/reference). Needs h2load, nginx, python3.
# Last line: RESULT h2_1k_ratio=.. h2c_1k_ratio=.. h2_1m_ratio=.. h2c_1m_ratio=.. hello_ratio=..
#   idle_kib_per_conn=.. nginx_idle_kib_per_conn=.. errors=N
BENCH="http2"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
[ "$quick" = 1 ] && IDLE=${IDLE:-2000}
bench_defaults RUNS=3 SECS=5 IDLE=10000
bench_need h2load nginx python3
bench_build http_file_server http_hello_server
files=$(bench_bin http_file_server)
hello=$(bench_bin http_hello_server)
nginx_run=$(ref_file nginx/run.sh)
bench_start
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"
head -c 1024 /dev/urandom >"$root/1k.bin"; head -c 1048576 /dev/urandom >"$root/1m.bin"; chmod 644 "$root"/*.bin
read -r cert key < <(scripts/make-test-cert.sh "$tmp/tls")
chmod 644 "$key"  # nginx's worker reads it after dropping privileges
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
errors=0

# h2rps URL CONNS STREAMS -> requests/s, or 0 when any request failed or errored
h2rps() {
  local out
  out=$(taskset -c 1 h2load -c "$2" -m "$3" -D "$SECS" --warm-up-time=1 "$1" 2>&1)
  local bad
  bad=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) failed, \([0-9]*\) errored.*/\1 \2/p')
  if [ -z "$bad" ] || [ "$bad" != "0 0" ]; then echo 0; return; fi
  echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p'
}
# start NAME: starts LioNet's file server, its hello server or nginx (h2) on $port / $tport
start() {
  port=$(free_port); tport=$(free_port)
  case "$1" in
    lionet) start_server "$files $root $port --mode auto --threads 1 --http2 --tls-port $tport --cert $cert --key $key" "$port" ;;
    hello) start_server "$hello $port --threads 1 --http2" "$port" ;;
    nginx) H2=1 "$nginx_run" "$root" "$port" "$tport" "$cert" "$key" >/dev/null 2>&1 & SERVER_PID=$!
           wait_port "$port" || true ;;
  esac
}
one() {  # SERVER SCHEME PATH CONNS STREAMS
  start "$1"
  local url
  if [ "$2" = h2 ]; then url="https://127.0.0.1:$tport/$3"; else url="http://127.0.0.1:$port/$3"; fi
  h2rps "$url" "$4" "$5"
  stop_server
}
med() { printf '%s\n' "$@" | median; }

rows=()
summary="RESULT"
for cfg in "h2:1k.bin:16:10:h2_1k" "h2c:1k.bin:16:10:h2c_1k" "h2:1m.bin:16:1:h2_1m" "h2c:1m.bin:16:1:h2c_1m" \
           "h2c:hello:100:10:hello"; do
  IFS=: read -r scheme path conns streams key_ <<<"$cfg"
  m=(); n=()
  for _ in $(seq "$RUNS"); do
    if [ "$path" = hello ]; then
      n+=("$(one nginx h2c 1k.bin "$conns" "$streams")"); m+=("$(one hello h2c hello "$conns" "$streams")")
    else
      n+=("$(one nginx "$scheme" "$path" "$conns" "$streams")"); m+=("$(one lionet "$scheme" "$path" "$conns" "$streams")")
    fi
  done
  for v in "${m[@]}" "${n[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  mm=$(med "${m[@]}"); nn=$(med "${n[@]}"); r=$(ratio "$mm" "$nn")
  what=$path; [ "$path" = hello ] && what="hello handler (nginx: 1k.bin)"
  echo "$key_: lionet=$mm nginx=$nn ratio=$r (runs: ${m[*]} / ${n[*]})"
  rows+=("| $scheme | $what | -c $conns -m $streams | $mm | $nn | $r | ${m[*]} / ${n[*]} |")
  summary="$summary ${key_}_ratio=$r"
done

# ---- idle connections: RSS per connection ------------------------------------------------
# idle_kib SERVER -> KiB of server RSS per idle h2c connection (IDLE of them, after SETTINGS)
rss_kb() {  # PID and its children (nginx: master + worker)
  local t=0 p
  for p in $1 $(pgrep -P "$1" 2>/dev/null || true); do
    [ -r "/proc/$p/status" ] && t=$((t + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")))
  done
  echo "$t"
}
idle_kib() {
  start "$1"
  local before after
  sleep 0.5
  before=$(rss_kb "$SERVER_PID")
  after=$(taskset -c 1 python3 - "$port" "$IDLE" "$SERVER_PID" <<'PYEOF'
import os, resource, socket, sys, time
port, n, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
ack = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(preface)
    socks.append(s)
for s in socks:  # the server's SETTINGS, then our ACK: the exchange is done
    s.settimeout(10)
    got = s.recv(4096)
    if len(got) < 9 or got[3] != 4:
        print("0"); sys.exit(0)
    s.sendall(ack)
time.sleep(1.0)
def rss(p):
    try:
        with open(f"/proc/{p}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    except OSError:
        return 0
kids = os.popen(f"pgrep -P {pid}").read().split()
print(sum(rss(p) for p in [pid] + kids))
PYEOF
)
  stop_server
  if [ "${after:-0}" = 0 ]; then echo 0; return; fi
  awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN { printf "%.1f\n", (a - b) / n }'
}
li=$(idle_kib hello); ni=$(idle_kib nginx)
echo "idle: lionet=${li} KiB/conn nginx=${ni} KiB/conn ($IDLE connections)"
[ "${li%.*}" = 0 ] && [ "$li" = 0 ] && errors=$((errors + 1))
summary="$summary idle_kib_per_conn=$li nginx_idle_kib_per_conn=$ni"

commit=$(bench_commit lionet/http lionet/http2 lionet/net bench)
{
  echo "## HTTP/2 (lionet/http2) vs nginx, h2load"
  echo
  echo "Produced by \`scripts/bench-http2.sh --write\` at commit $commit on $(bench_cpu); load average before: $load_before."
  echo "\`bench/http_file_server --mode auto --threads 1 --http2\` (and \`bench/http_hello_server --http2\`) and nginx"
  echo "(bench/reference/nginx/run.sh with H2=1: 1 worker, sendfile, \`listen ... http2\`), each pinned to CPU 0;"
  echo "\`h2load -D $SECS --warm-up-time=1\` on CPU 1; $RUNS interleaved runs, medians. Targets (issue 20): 1 KiB >= 1.1x,"
  echo "1 MiB >= 1.0x, hello >= 1.2x nginx; idle connection <= 24 KiB of RSS."
  echo
  echo "| Protocol | File | h2load | LioNet req/s | nginx req/s | ratio | runs (LioNet / nginx) |"
  echo "|---|---|---|---:|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Idle h2c connections ($IDLE, preface + SETTINGS exchanged, then silent): LioNet (http_hello_server) $li KiB of RSS"
  echo "per connection, nginx $ni KiB (RSS of master + worker after minus before, divided by the connections)."
} >"$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "$summary errors=$errors"
