#!/usr/bin/env bash
# scripts/bench-proxy.sh: the lionet binary's `type: proxy` route (lionet/http/proxy.h) side by
# side with nginx's proxy_pass (bench/reference/nginx/proxy.conf.in: keepalive 64 to the
# upstream), both in front of the same upstream: bench/http_file_server (1 worker) serving
# 1 KiB and 1 MiB files. Issue 23's targets: 1 KiB requests/s >= 1.15x nginx at 16 and 100
# connections, 1 MiB MB/s >= 1.0x, and the latency the proxy hop adds at 1 connection (p50 and
# p99 through the proxy minus direct to the upstream) at most nginx's.
#
# The proxies run with 1 worker pinned to CPU 0; the upstream and `wrk -t1` share CPU 1 (the
# same for both proxies). Beside them, the throughput rows run the ceiling of this layout:
# bench/reference/http/proxy_floor.c, a C proxy that does the least any proxy can per request
# (see its header); its ratio to nginx is the most any proxy could show here. RUNS interleaved runs of SECS s (which proxy goes first alternates),
# medians. A run with socket errors or non-2xx answers counts as 0 (and as an error). The latency
# is also taken with lionet's `scheduler.idle_poll_us: POLL_US` (off by default): the worker
# polls that long before sleeping, so the upstream's reply skips a cross-CPU wake-up.
# Prints a markdown table and, with --write, puts it into bench/RESULTS.md between
# <!-- proxy:begin --> and <!-- proxy:end -->.
#
# Usage: scripts/bench-proxy.sh [--write] [--no-build] [--quick]
#   --quick: RUNS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), POLL_US (50), REF_DIR (bench/reference),
#   BACKEND (lionet's io.backend: epoll or io_uring; epoll). Needs wrk, nginx and a C compiler.
# Last line: RESULT ka16_ratio=.. ka100_ratio=.. mib_ratio=.. floor_ka16_ratio=.. floor_ka100_ratio=..
#   floor_mib_ratio=.. and per row (ka16, ka100, mib) KEY_cpu_us=.. nginx_KEY_cpu_us=.. floor_KEY_cpu_us=..
#   KEY_cpu_ratio=.. (nginx / LioNet CPU per request on CPU 0) KEY_cpu1_us=.. nginx_KEY_cpu1_us=..
#   floor_KEY_cpu1_us=.. (CPU 1, wrk and the upstream, per request) KEY_user_us=.. nginx_KEY_user_us=..
#   floor_KEY_user_us=.. (CPU 0's user-space part of KEY_cpu_us)
#   p50_added_us=.. nginx_p50_added_us=.. p99_added_us=.. nginx_p99_added_us=..
#   poll_p50_added_us=.. poll_p99_added_us=.. errors=N (floor_*: proxy_floor / nginx)
BENCH="proxy"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
bench_defaults RUNS=3 SECS=5 POLL_US=50 BACKEND=epoll
bench_need wrk nginx
bench_build http_file_server lionet_app
upstream_bin=$(bench_bin http_file_server)
lionet=$BUILD_DIR/bin/lionet
[[ "$lionet" == /* ]] || lionet=$REPO/$lionet
[ -x "$lionet" ] || bench_die "$lionet is not built (run without --no-build)"
nginx_run=$(ref_file nginx/run.sh)
floor_bin=$(ref proxy_floor)
bench_start
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"
head -c 1024 /dev/urandom >"$root/1k.bin"; head -c 1048576 /dev/urandom >"$root/1m.bin"; chmod 644 "$root"/*.bin
errors=0
bench_warm

# The upstream, for the whole run: CPU 1, beside wrk.
uport=$(free_port)
taskset -c 1 "$upstream_bin" "$root" "$uport" --threads 1 >/dev/null 2>&1 &
UPSTREAM_PID=$!
bench_at_exit 'kill $UPSTREAM_PID 2>/dev/null; wait $UPSTREAM_PID 2>/dev/null'
wait_port "$uport" || bench_die "the upstream did not listen on $uport"

# wrk_out URL CONNS [--latency]: wrk's output, or "" when it had socket errors or non-2xx.
wrk_out() {
  local out
  out=$(taskset -c 1 wrk -t1 -c"$2" -d"$SECS"s ${3:-} "$1" 2>&1)
  if echo "$out" | grep -q -E "Socket errors|Non-2xx"; then echo ""; return; fi
  echo "$out"
}
rps_of() { awk '/Requests\/sec/ {print $2}' <<<"$1"; }
# us_of PERCENT OUTPUT: a --latency percentile in microseconds.
us_of() {
  awk -v p="$1%" '$1 == p { v = $2; u = 1;
      if (v ~ /us$/) { sub(/us$/, "", v) } else if (v ~ /ms$/) { sub(/ms$/, "", v); u = 1000 } else if (v ~ /s$/) { sub(/s$/, "", v); u = 1000000 }
      printf "%.1f\n", v * u }' <<<"$2"
}
start_proxy() {  # lionet|nginx|floor [IDLE_POLL_US] -> sets port, SERVER_PID
  port=$(free_port)
  if [ "$1" = floor ]; then
    start_server "$floor_bin -p $port -u $uport" "$port"
  elif [ "$1" = nginx ]; then
    PROXY="127.0.0.1:$uport" "$nginx_run" "$root" "$port" >/dev/null 2>&1 &
    SERVER_PID=$!
    wait_port "$port" || echo "bench-$BENCH: nginx did not listen on $port" >&2
  else
    cat >"$tmp/proxy.yml" <<EOF
scheduler: {threads: 1, idle_poll_us: ${2:-0}}
io: {backend: $BACKEND}
log: {loggers: [{name: root, level: warn}]}
servers:
  - name: proxy
    type: http
    listen: ["127.0.0.1:$port"]
    routes:
      - {path: /, type: proxy, upstreams: ["127.0.0.1:$uport"], keepalive: 64, keepalive_requests: 0}
EOF
    start_server "$lionet -c $tmp/proxy.yml" "$port"
  fi
}
# busy_ticks: the busy clock ticks of CPU 0 and CPU 1 (user, nice, system, irq, softirq, steal),
# then CPU 0's user-space ticks (user, nice).
busy_ticks() {
  awk '/^cpu[01] / { printf "%d ", $2 + $3 + $4 + $7 + $8 + $9 } /^cpu0 / { u = $2 + $3 } END { printf "%d ", u }' /proc/stat
}
hz=$(getconf CLK_TCK)
# one PROXY FILE CONNS -> "requests/s cpu0_us cpu1_us user0_us" (0 0 0 0 on errors): the CPU
# time of CPU 0 (the proxy's alone, with the kernel's work for its sends) and of CPU 1 (wrk and
# the upstream) per request, in microseconds, and the user-space part of CPU 0's.
one() {
  start_proxy "$1"
  local out rps a b n
  a=($(busy_ticks))
  out=$(wrk_out "http://127.0.0.1:$port/$2" "$3")
  b=($(busy_ticks))
  rps=$(rps_of "$out")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  stop_server
  if [ -z "$rps" ] || [ -z "$n" ] || [ "$n" = 0 ]; then echo "0 0 0 0"; return; fi
  awk -v r="$rps" -v n="$n" -v c0=$((b[0] - a[0])) -v c1=$((b[1] - a[1])) -v u0=$((b[2] - a[2])) -v hz="$hz" \
    'BEGIN { printf "%s %.1f %.1f %.1f\n", r, c0 * 1e6 / hz / n, c1 * 1e6 / hz / n, u0 * 1e6 / hz / n }'
}
med() { printf '%s\n' "$@" | median; }
rows=()
summary="RESULT"
for cfg in "1k.bin:16:ka16" "1k.bin:100:ka100" "1m.bin:16:mib"; do
  IFS=: read -r file conns key <<<"$cfg"
  l=(); n=(); f=(); l0=(); n0=(); f0=(); l1=(); n1=(); f1=(); lu=(); nu=(); fu=()
  # run WHO X: one run of WHO; its requests/s into array X, its CPU 0 and CPU 1 us/request into
  # X0 and X1, CPU 0's user-space part into Xu (not for a run with errors).
  run() {
    local -n rps_to=$2 cpu0_to=${2}0 cpu1_to=${2}1 user0_to=${2}u
    local v
    read -r -a v <<<"$(one "$1" "$file" "$conns")"
    rps_to+=("${v[0]}")
    [ "${v[0]%.*}" = 0 ] && return
    cpu0_to+=("${v[1]}"); cpu1_to+=("${v[2]}"); user0_to+=("${v[3]}")
  }
  for i in $(seq "$RUNS"); do
    if [ $((i % 2)) = 1 ]; then
      run nginx n; run lionet l; run floor f
    else
      run floor f; run lionet l; run nginx n
    fi
  done
  for v in "${l[@]}" "${n[@]}" "${f[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  lm=$(med "${l[@]}"); nm=$(med "${n[@]}"); fm=$(med "${f[@]}"); r=$(ratio "$lm" "$nm"); fr=$(ratio "$fm" "$nm")
  lcm=$(med "${l0[@]}"); ncm=$(med "${n0[@]}"); fcm=$(med "${f0[@]}")
  l1m=$(med "${l1[@]}"); n1m=$(med "${n1[@]}"); f1m=$(med "${f1[@]}")
  lum=$(med "${lu[@]}"); num=$(med "${nu[@]}"); fum=$(med "${fu[@]}")
  cr=$(ratio "$ncm" "$lcm")  # > 1: LioNet uses less CPU per request than nginx
  if [ "$file" = 1m.bin ]; then
    mb() { awk -v r="$1" 'BEGIN { printf "%.0f", r * 1.048576 }'; }
    lmb=$(mb "$lm"); nmb=$(mb "$nm"); fmb=$(mb "$fm")
    rows+=("| 1 MiB | $conns | $lmb MB/s | $nmb MB/s | $r | $fmb MB/s | $fr | $lcm / $ncm / $fcm | $lum / $num / $fum | $cr | $l1m / $n1m / $f1m | ${l[*]} / ${n[*]} / ${f[*]} req/s |")
    echo "1m conns=$conns lionet=$lmb MB/s nginx=$nmb MB/s ratio=$r floor=$fmb MB/s floor/nginx=$fr (req/s runs: ${l[*]} | ${n[*]} | ${f[*]})"
  else
    rows+=("| 1 KiB | $conns | $lm req/s | $nm req/s | $r | $fm req/s | $fr | $lcm / $ncm / $fcm | $lum / $num / $fum | $cr | $l1m / $n1m / $f1m | ${l[*]} / ${n[*]} / ${f[*]} |")
    echo "1k conns=$conns lionet=$lm nginx=$nm ratio=$r floor=$fm floor/nginx=$fr (runs: ${l[*]} | ${n[*]} | ${f[*]})"
  fi
  echo "   CPU per request (us): CPU 0 lionet=$lcm nginx=$ncm floor=$fcm (nginx/lionet=$cr; user space $lum / $num / $fum); CPU 1 (wrk + upstream) lionet=$l1m nginx=$n1m floor=$f1m"
  summary="$summary ${key}_ratio=$r floor_${key}_ratio=$fr ${key}_cpu_us=$lcm nginx_${key}_cpu_us=$ncm floor_${key}_cpu_us=$fcm ${key}_cpu_ratio=$cr ${key}_cpu1_us=$l1m nginx_${key}_cpu1_us=$n1m floor_${key}_cpu1_us=$f1m ${key}_user_us=$lum nginx_${key}_user_us=$num floor_${key}_user_us=$fum"
done

# Added latency at 1 connection: p50/p99 direct to the upstream, through lionet, through nginx.
declare -A p50 p99
for who in direct lionet lionet_poll nginx; do p50[$who]=""; p99[$who]=""; done
lat_run() {
  local who=$1 out url
  if [ "$who" = direct ]; then
    url="http://127.0.0.1:$uport/1k.bin"
  else
    if [ "$who" = lionet_poll ]; then start_proxy lionet "$POLL_US"; else start_proxy "$who"; fi
    url="http://127.0.0.1:$port/1k.bin"
  fi
  out=$(wrk_out "$url" 1 --latency)
  [ "$who" = direct ] || stop_server
  if [ -z "$out" ]; then errors=$((errors + 1)); return; fi
  p50[$who]+="$(us_of 50 "$out") "; p99[$who]+="$(us_of 99 "$out") "
}
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then lat_run direct; lat_run lionet; lat_run lionet_poll; lat_run nginx
  else lat_run nginx; lat_run lionet_poll; lat_run lionet; lat_run direct; fi
done
m50() { med ${p50[$1]}; }
m99() { med ${p99[$1]}; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", a - b }'; }
la50=$(sub "$(m50 lionet)" "$(m50 direct)"); na50=$(sub "$(m50 nginx)" "$(m50 direct)")
la99=$(sub "$(m99 lionet)" "$(m99 direct)"); na99=$(sub "$(m99 nginx)" "$(m99 direct)")
pa50=$(sub "$(m50 lionet_poll)" "$(m50 direct)"); pa99=$(sub "$(m99 lionet_poll)" "$(m99 direct)")
echo "latency at 1 connection (us): direct p50=$(m50 direct) p99=$(m99 direct); lionet p50=$(m50 lionet) p99=$(m99 lionet); nginx p50=$(m50 nginx) p99=$(m99 nginx)"
echo "added by the hop (us): lionet p50=$la50 p99=$la99; lionet with idle_poll_us=$POLL_US p50=$pa50 p99=$pa99; nginx p50=$na50 p99=$na99"
summary="$summary p50_added_us=$la50 nginx_p50_added_us=$na50 p99_added_us=$la99 nginx_p99_added_us=$na99"
summary="$summary poll_p50_added_us=$pa50 poll_p99_added_us=$pa99"

commit=$(bench_commit lionet/http lionet/net lionet/app lionet/sched bench/http_file_server.cc)
cpu=$(bench_cpu)
{
  echo "## Reverse proxy (lionet/http/proxy.h) vs nginx proxy_pass"
  echo
  echo "Produced by \`scripts/bench-proxy.sh --write\` at commit $commit on $cpu; load average before: $load_before."
  echo "The lionet binary with one \`type: proxy\` route (1 worker, \`keepalive: 64, keepalive_requests: 0\`, \`io.backend: $BACKEND\`) and nginx (1 worker,"
  echo "\`proxy_pass\` to an upstream block with \`keepalive 64\`, HTTP/1.1 upstream, buffering at its defaults), each"
  echo "pinned to CPU 0, in front of the same upstream (\`bench/http_file_server\`, 1 worker) that shares CPU 1 with"
  echo "\`wrk -t1\`; $RUNS interleaved runs of $SECS s, medians. Targets: 1 KiB >= 1.15x, 1 MiB >= 1.0x, added latency <= nginx's."
  echo "\"C floor\" is \`bench/reference/http/proxy_floor.c\` in the same place: the least work any proxy can do per"
  echo "request (one upstream connection per client connection, the request forwarded unchanged, no timeouts, pool or"
  echo "error handling), so \"floor / nginx\" is the most any proxy could show in this layout, where wrk and the upstream"
  echo "share one CPU."
  echo
  echo "\"CPU 0 us/req\" is the proxy's CPU (CPU 0 holds it alone; the kernel's work for its sends included) per"
  echo "request, medians, LioNet / nginx / floor; \"of it, user space\" is the part CPU 0 spent outside the kernel"
  echo "(the rest is the kernel's: the proxy's reads, writes and waits, and the wake-ups its sends cause on CPU 1,"
  echo "which cost more the more often CPU 1 sleeps); \"nginx / LioNet CPU\" above 1 means LioNet spends less. \"CPU 1 us/req\" is what wrk and the upstream spend per request, in the same order: while CPU 1 is saturated and"
  echo "spends about the same per request whichever proxy is in front, CPU 1 sets requests/s and no proxy, not even"
  echo "the floor, can move the ratio far from 1.0."
  echo
  echo "| Body | Connections | LioNet proxy | nginx proxy_pass | LioNet / nginx | C floor | floor / nginx | CPU 0 us/req | of it, user space | nginx / LioNet CPU | CPU 1 us/req | runs (LioNet / nginx / floor) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Latency at 1 connection (1 KiB, wrk --latency), microseconds; \"added\" is through the proxy minus direct."
  echo
  echo "| | p50 | p99 | added p50 | added p99 |"
  echo "|---|---:|---:|---:|---:|"
  echo "| direct to the upstream | $(m50 direct) | $(m99 direct) | | |"
  echo "| through LioNet | $(m50 lionet) | $(m99 lionet) | $la50 | $la99 |"
  echo "| through LioNet, \`scheduler.idle_poll_us: $POLL_US\` | $(m50 lionet_poll) | $(m99 lionet_poll) | $pa50 | $pa99 |"
  echo "| through nginx | $(m50 nginx) | $(m99 nginx) | $na50 | $na99 |"
} >"$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "$summary errors=$errors"
