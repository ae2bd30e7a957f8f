#!/usr/bin/env bash
# scripts/bench-http2.sh: HTTP/2 (lionet/http2) side by side with h2o, nghttpd and nginx, all
# driven by h2load (Debian nghttp2-client). h2o (Debian h2o 2.2.5) is the HTTP/2 server
# engineers point to; nghttpd (Debian nghttp2-server) is libnghttp2's own example server, the
# floor of a server built on that library; nginx is the production static-file server.
# Issue 44's targets (1 KiB static; req/s ratios against h2o, and against nghttpd):
#   1. h2 and h2c, h2load -c 16 -m 10 and -c 100 -m 10: >= 1.0x h2o, >= 1.2x nghttpd.
#   2. 64 KiB (-c 16 -m 10) and 1 MiB (-c 16 -m 1), h2c and h2: >= 1.0x h2o.
#   3. The hello handler (bench/http_hello_server, no file), h2c -c 16 -m 10: >= 1.2x h2o's
#      1 KiB file in the same round.
#   4. 10,000 idle h2c connections held after the SETTINGS exchange: server RSS per connection,
#      no worse than 20.1 KiB (nginx the same way).
# Also per row: the server's CPU time per request (user + system from /proc, over the h2load
# run: LioNet's and h2o's), the figure that stays when the client is the bottleneck.
# LioNet: bench/http_file_server --mode auto --threads 1 --http2 (and its TLS port); h2o:
# bench/reference/h2o/run.sh (1 thread, file.dir); nghttpd: `nghttpd [--no-tls] -d ROOT`
# (1 thread); nginx: bench/reference/nginx/run.sh with H2=1 (1 worker, sendfile). Each pinned to
# CPU 0, h2load on CPU 1; RUNS interleaved rounds of SECS s; medians. A run with failed or
# errored requests counts as 0 and as an error.
# With --write, the tables go into bench/RESULTS.md between <!-- http2:begin --> / <!-- http2:end -->.
#
# Usage: scripts/bench-http2.sh [--write] [--no-build] [--quick] [--no-nginx]
#   --quick: RUNS=1 SECS=1 IDLE=2000 unless set (a smoke run; figures indicative only).
#   --no-nginx: leave nginx out (its column shows "-").
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), IDLE (10000),
#   REF_DIR (bench/reference). Needs h2load, h2o, nghttpd, nginx, python3.
# Last line: RESULT h2_1k_c16_h2o_ratio=.. h2c_1k_c16_h2o_ratio=.. ... hello_h2o_ratio=..
#   h2c_1k_c16_nghttpd_ratio=.. ... idle_kib_per_conn=.. nginx_idle_kib_per_conn=.. errors=N
BENCH="http2"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick --no-nginx" "$@"
[ "$quick" = 1 ] && IDLE=${IDLE:-2000}
bench_defaults RUNS=3 SECS=5 IDLE=10000
bench_need h2load h2o nghttpd python3
use_nginx=1
bench_opt --no-nginx && use_nginx=0
[ "$use_nginx" = 1 ] && bench_need nginx
bench_build http_file_server http_hello_server
files=$(bench_bin http_file_server)
hello=$(bench_bin http_hello_server)
nginx_run=$(ref_file nginx/run.sh)
h2o_run=$(ref_file h2o/run.sh)
bench_start
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"
head -c 1024 /dev/urandom >"$root/1k.bin"; head -c 65536 /dev/urandom >"$root/64k.bin"
head -c 1048576 /dev/urandom >"$root/1m.bin"; chmod 644 "$root"/*.bin
read -r cert key < <(scripts/make-test-cert.sh "$tmp/tls")
chmod 644 "$key"  # nginx's worker reads it after dropping privileges
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
errors=0

# h2run URL CONNS STREAMS -> "req/s us_cpu_per_request" of the server ($SERVER_PID); req/s 0
# when any request failed or errored
h2run() {
  local out bad c0 c1 n rps
  c0=$(cpu_ticks "$SERVER_PID")
  out=$(taskset -c 1 h2load -c "$2" -m "$3" -D "$SECS" --warm-up-time=1 "$1" 2>&1)
  c1=$(cpu_ticks "$SERVER_PID")
  bad=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) failed, \([0-9]*\) errored.*/\1 \2/p')
  n=$(echo "$out" | sed -n 's/^requests: \([0-9]*\) total.*/\1/p')
  rps=$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
  if [ -z "$bad" ] || [ "$bad" != "0 0" ] || [ -z "$rps" ]; then echo "0 0"; return; fi
  # The ticks cover the warm-up second too: CPU over every request the run made (warm-up ones
  # are at the same rate), so per request is ticks / (req/s x (SECS + 1)).
  awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v r="$rps" -v s="$SECS" \
    'BEGIN { printf "%s %.2f\n", r, t / hz * 1e6 / (r * (s + 1)) }'
}
# start NAME SCHEME: starts LioNet's file server, its hello server, h2o, nghttpd or nginx;
# sets $url_base for SCHEME (h2: TLS, h2c: prior knowledge)
start() {
  port=$(free_port); tport=$(free_port)
  case "$1" in
    lionet) start_server "$files $root $port --mode auto --threads 1 --http2 --tls-port $tport --cert $cert --key $key" "$port" ;;
    hello) start_server "$hello $port --threads 1 --http2" "$port" ;;
    # h2o's first process forks the server: a session of its own, stopped as a whole (one()).
    h2o) setsid "$h2o_run" "$root" "$port" "$tport" "$cert" "$key" 0 >/dev/null 2>&1 & SERVER_PID=$!
         wait_port "$port" || true; wait_port "$tport" || true ;;
    nghttpd) if [ "$2" = h2 ]; then start_server "nghttpd -d $root $tport $key $cert" "$tport"
             else start_server "nghttpd --no-tls -d $root $port" "$port"; fi ;;
    nginx) H2=1 "$nginx_run" "$root" "$port" "$tport" "$cert" "$key" >/dev/null 2>&1 & SERVER_PID=$!
           wait_port "$port" || true ;;
  esac
  if [ "$2" = h2 ]; then url_base="https://127.0.0.1:$tport"; else url_base="http://127.0.0.1:$port"; fi
}
one() {  # SERVER SCHEME PATH CONNS STREAMS -> "req/s cpu_us"
  start "$1" "$2"
  h2run "$url_base/$3" "$4" "$5"
  [ "$1" = h2o ] && kill -TERM -- "-$SERVER_PID" 2>/dev/null
  stop_server
}
med() { printf '%s\n' "$@" | median; }

servers="lionet h2o nghttpd"
[ "$use_nginx" = 1 ] && servers="$servers nginx"
rows=()
summary="RESULT"
declare -A rps cpu  # "<server>|<key>" -> the runs' figures, space-separated
for cfg in "h2c:1k.bin:16:10:h2c_1k_c16" "h2:1k.bin:16:10:h2_1k_c16" "h2c:1k.bin:100:10:h2c_1k_c100" \
           "h2:1k.bin:100:10:h2_1k_c100" "h2c:64k.bin:16:10:h2c_64k" "h2:64k.bin:16:10:h2_64k" \
           "h2c:1m.bin:16:1:h2c_1m" "h2:1m.bin:16:1:h2_1m"; do
  IFS=: read -r scheme path conns streams key_ <<<"$cfg"
  for _ in $(seq "$RUNS"); do
    for srv in $servers; do
      read -r r c < <(one "$srv" "$scheme" "$path" "$conns" "$streams")
      rps["$srv|$key_"]+="$r "; cpu["$srv|$key_"]+="$c "
      [ "${r%.*}" = 0 ] && errors=$((errors + 1))
    done
    if [ "$key_" = h2c_1k_c16 ]; then  # the hello handler, in the same rounds as h2o's 1 KiB file
      read -r r c < <(one hello h2c hello 16 10)
      rps["hello|$key_"]+="$r "; cpu["hello|$key_"]+="$c "
      [ "${r%.*}" = 0 ] && errors=$((errors + 1))
    fi
  done
  # shellcheck disable=SC2086  # the runs are space-separated on purpose
  {
    lm=$(med ${rps[lionet|$key_]}); hm=$(med ${rps[h2o|$key_]}); gm=$(med ${rps[nghttpd|$key_]})
    lc=$(med ${cpu[lionet|$key_]}); hc=$(med ${cpu[h2o|$key_]})
    nm="-"; [ "$use_nginx" = 1 ] && nm=$(med ${rps[nginx|$key_]})
  }
  rh=$(ratio "$lm" "$hm"); rg=$(ratio "$lm" "$gm")
  echo "$key_: lionet=$lm h2o=$hm nghttpd=$gm nginx=$nm vs_h2o=$rh vs_nghttpd=$rg cpu_us lionet=$lc h2o=$hc"
  rows+=("| $scheme | $path | -c $conns -m $streams | $lm | $hm | $gm | $nm | **$rh** | $rg | $lc / $hc | ${rps[lionet|$key_]}/ ${rps[h2o|$key_]}|")
  summary="$summary ${key_}_h2o_ratio=$rh ${key_}_nghttpd_ratio=$rg"
  if [ "$key_" = h2c_1k_c16 ]; then
    # shellcheck disable=SC2086
    hl=$(med ${rps[hello|$key_]}); hlc=$(med ${cpu[hello|$key_]})
    rhl=$(ratio "$hl" "$hm")
    echo "hello: lionet=$hl vs h2o 1k=$hm ratio=$rhl cpu_us=$hlc"
    hello_row="| h2c | hello handler (h2o: 1k.bin) | -c 16 -m 10 | $hl | $hm | $gm | - | **$rhl** | $(ratio "$hl" "$gm") | $hlc / $hc | ${rps[hello|$key_]}/ ${rps[h2o|$key_]}|"
    summary="$summary hello_h2o_ratio=$rhl"
  fi
done
rows+=("$hello_row")

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
  start "$1" h2c
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
li=$(idle_kib hello); ni=-
[ "$use_nginx" = 1 ] && ni=$(idle_kib nginx)
echo "idle: lionet=${li} KiB/conn nginx=${ni} KiB/conn ($IDLE connections)"
[ "${li%.*}" = 0 ] && [ "$li" = 0 ] && errors=$((errors + 1))
summary="$summary idle_kib_per_conn=$li nginx_idle_kib_per_conn=$ni"

commit=$(bench_commit lionet/http lionet/http2 lionet/net bench)
{
  echo "## HTTP/2 (lionet/http2) vs h2o, nghttpd and nginx, h2load"
  echo
  echo "Produced by \`scripts/bench-http2.sh --write\` at commit $commit on $(bench_cpu); load average before: $load_before."
  echo "\`bench/http_file_server --mode auto --threads 1 --http2\` (and \`bench/http_hello_server --http2\`), h2o 2.2.5"
  echo "(bench/reference/h2o/run.sh: 1 thread, \`file.dir\`), nghttpd (libnghttp2's example server, 1 thread) and nginx"
  echo "(bench/reference/nginx/run.sh with H2=1: 1 worker, sendfile), each pinned to CPU 0; \`h2load -D $SECS"
  echo "--warm-up-time=1\` on CPU 1; $RUNS interleaved rounds, medians. CPU us/req: the server's user + system time per"
  echo "request (/proc), LioNet / h2o. Targets (issue 44): 1 KiB >= 1.0x h2o and >= 1.2x nghttpd; 64 KiB and 1 MiB >= 1.0x"
  echo "h2o; hello >= 1.2x h2o's 1 KiB file; idle connection no worse than 20.1 KiB of RSS."
  echo
  echo "| Protocol | File | h2load | LioNet req/s | h2o req/s | nghttpd req/s | nginx req/s | vs h2o | vs nghttpd | CPU us/req | runs (LioNet / h2o) |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Idle h2c connections ($IDLE, preface + SETTINGS exchanged, then silent): LioNet (http_hello_server) $li KiB of RSS"
  echo "per connection, nginx $ni KiB (RSS of master + worker after minus before, divided by the connections)."
} >"$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "$summary errors=$errors"
