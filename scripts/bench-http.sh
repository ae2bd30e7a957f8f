#!/usr/bin/env bash
# scripts/bench-http.sh: issue 7's static-file benchmarks, against the references of
# bench/reference (nginx/run.sh, go_static_server).
#   1. Keep-alive: bench/http_file_server (--mode auto, 1 worker, CPU 0) vs nginx (1 worker,
#      CPU 0, sendfile), wrk -t1 on CPU 1, 16 and 100 connections: 1 KiB / 64 KiB / 1 MiB /
#      10 MiB requests/s, and the server's CPU per request (utime+stime from /proc).
#   2. Connection: close: 1 KiB and 64 KiB, 16 connections, LioNet auto vs nginx, with server
#      CPU per request (utime+stime from /proc of the server and its children), because wrk
#      saturates first.
#   2b. HTTPS keep-alive: the same servers with TLS (LioNet's --tls-port, nginx's TLS server, the
#      same certificate), wrk over https, 16 connections: 1 KiB and 1 MiB requests/s.
#   3. Per mode: LioNet memory 1 KiB, chunk 1 MiB, sendfile 1 MiB / 10 MiB vs the Go net/http
#      server's same mode (GOMAXPROCS=1) and vs nginx (CHUNK target >= 0.8x nginx MB/s at 1 MiB).
#   4. bench/B2-FileTransfer with nginx as its --ref over the same files.
# All LioNet/nginx/Go runs interleaved, RUNS runs of SECS s each, medians. A run with socket
# errors or non-2xx answers counts as 0 and as an error.
# With --write, the tables go into bench/RESULTS.md between <!-- http:begin --> / <!-- http:end -->.
#
# Usage: scripts/bench-http.sh [--write] [--no-build] [--quick]
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), REF_DIR
#   (bench/reference), REF_OUT (/tmp/lionet-ref). Needs wrk, nginx and go.
# --quick: RUNS=1 SECS=1 unless set, and B2 --quick (a smoke run; figures indicative only).
# Last line: RESULT ka16_1k_ratio=.. ka16_1k_cpu_us=.. nginx_ka16_1k_cpu_us=.. ka16_64k_ratio=.. ... tls16_1k_ratio=.. tls16_1m_ratio=.. close16_1k_ratio=.. errors=N
BENCH="http"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
bench_defaults RUNS=3 SECS=5
bench_need wrk nginx
bench_build http_file_server B2-FileTransfer
server=$(bench_bin http_file_server)
b2=$(bench_bin B2-FileTransfer)
nginx_run=$(ref_file nginx/run.sh)
bench_have_go || bench_die "needs go (Debian golang-go) for the Go reference"
gosrv=$(ref go_static_server)
bench_start
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"
for f in 1k:1024 64k:65536 1m:1048576 10m:10485760; do head -c "${f##*:}" /dev/urandom >"$root/${f%%:*}.bin"; done
chmod 644 "$root"/*.bin
read -r cert key < <(scripts/make-test-cert.sh "$tmp/tls")
chmod 644 "$key"  # nginx's worker reads it after dropping privileges
errors=0
summary="RESULT"
bench_warm

# ---- helpers for the interleaved runs -----------------------------------------------------
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
  echo "${rps:-0} ${mb:-0} ${reqs:-0}"
}
# one KIND PATH CONNS MODE -> "req/s MB/s us_cpu_per_req"; KIND: nginx | go | lionet:<mode>
one() {
  local kind=$1 path=$2 conns=$3 mode=$4 url
  port=$(free_port)
  case "$kind" in
    nginx) "$nginx_run" "$root" "$port" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$port" || true ;;
    go) GOMAXPROCS=1 taskset -c 0 "$gosrv" "127.0.0.1:$port" "$root" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$port" || true ;;
    lionet:*) start_server "$server $root $port --mode ${kind#lionet:} --threads 1" "$port" ;;
  esac
  url="http://127.0.0.1:$port/$path"
  local before after
  before=$(cpu_ticks "$SERVER_PID")
  local rps mbs reqs us
  read -r rps mbs reqs < <(wrk_run "$url" "$conns" "$mode")
  after=$(cpu_ticks "$SERVER_PID")
  stop_server
  us=$(python3 -c "import sys; t,n,hz=map(float,sys.argv[1:]); print(f'{t/hz*1e6/n:.1f}' if n else '0')" \
    "$((after - before))" "$reqs" "$(getconf CLK_TCK)")
  echo "$rps $mbs $us"
}
col() { printf '%s\n' "$@" | median; }

# ---- 1. keep-alive, 16 and 100 connections, LioNet auto vs nginx --------------------------
ka_rows=()
for conns in 16 100; do
  for f in 1k 64k 1m 10m; do
    m=(); n=(); mcpu=(); ncpu=()
    for _ in $(seq "$RUNS"); do
      read -r rps _ us < <(one nginx "$f.bin" "$conns" ka); n+=("$rps"); ncpu+=("$us")
      read -r rps _ us < <(one lionet:auto "$f.bin" "$conns" ka); m+=("$rps"); mcpu+=("$us")
    done
    for v in "${m[@]}" "${n[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
    mm=$(col "${m[@]}"); nn=$(col "${n[@]}"); r=$(ratio "$mm" "$nn")
    mc=$(col "${mcpu[@]}"); nc=$(col "${ncpu[@]}")
    ka_rows+=("| keep-alive | $conns | $f | $mm | $nn | $r | $mc | $nc | ${m[*]} / ${n[*]} |")
    summary="$summary ka${conns}_${f}_ratio=$r ka${conns}_${f}_cpu_us=$mc nginx_ka${conns}_${f}_cpu_us=$nc"
    printf 'keep-alive conns=%s %-4s lionet=%-9s nginx=%-9s ratio=%s cpu_us/req lionet=%s nginx=%s  (runs: %s | %s)\n' \
      "$conns" "$f" "$mm" "$nn" "$r" "$mc" "$nc" "${m[*]}" "${n[*]}"
  done
done

# ---- 2. Connection: close ------------------------------------------------------------------
close_rows=()
for f in 1k 64k; do
  m_rps=(); m_cpu=(); n_rps=(); n_cpu=()
  for _ in $(seq "$RUNS"); do
    read -r rps _ us < <(one nginx "$f.bin" 16 close); n_rps+=("$rps"); n_cpu+=("$us")
    read -r rps _ us < <(one lionet:auto "$f.bin" 16 close); m_rps+=("$rps"); m_cpu+=("$us")
  done
  for v in "${m_rps[@]}" "${n_rps[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  mm=$(col "${m_rps[@]}"); nn=$(col "${n_rps[@]}"); r=$(ratio "$mm" "$nn")
  mc=$(col "${m_cpu[@]}"); nc=$(col "${n_cpu[@]}")
  close_rows+=("| Connection: close | 16 | $f | $mm | $nn | $r | $mc | $nc | ${m_rps[*]} / ${n_rps[*]} |")
  summary="$summary close16_${f}_ratio=$r"
  echo "close $f lionet=$mm nginx=$nn ratio=$r cpu_us/req lionet=$mc nginx=$nc"
done

# ---- 2b. HTTPS keep-alive ------------------------------------------------------------------
# one_tls KIND PATH CONNS -> req/s over https (0 with errors); KIND: nginx | lionet
one_tls() {
  local port tport rps
  port=$(free_port); tport=$(free_port)
  case "$1" in
    nginx) "$nginx_run" "$root" "$port" "$tport" "$cert" "$key" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$tport" || true ;;
    lionet) start_server "$server $root $port --mode auto --threads 1 --tls-port $tport --cert $cert --key $key" "$tport" ;;
  esac
  read -r rps _ < <(wrk_run "https://127.0.0.1:$tport/$2" "$3" ka)
  stop_server
  echo "$rps"
}
tls_rows=()
for f in 1k 1m; do
  m=(); n=()
  for _ in $(seq "$RUNS"); do
    n+=("$(one_tls nginx "$f.bin" 16)")
    m+=("$(one_tls lionet "$f.bin" 16)")
  done
  for v in "${m[@]}" "${n[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  mm=$(col "${m[@]}"); nn=$(col "${n[@]}"); r=$(ratio "$mm" "$nn")
  tls_rows+=("| HTTPS keep-alive | 16 | $f | $mm | $nn | $r | ${m[*]} / ${n[*]} |")
  summary="$summary tls16_${f}_ratio=$r"
  echo "https keep-alive conns=16 $f lionet=$mm nginx=$nn ratio=$r  (runs: ${m[*]} | ${n[*]})"
done

# ---- 3. per mode vs Go and nginx -----------------------------------------------------------
mode_rows=()
for cfg in "memory:mem:1k" "chunk:chunk:64k" "chunk:chunk:1m" "sendfile:sendfile:1m" "sendfile:sendfile:10m"; do
  IFS=: read -r lmode gmode f <<<"$cfg"
  l=(); g=(); n=(); lc=(); nc=()
  for _ in $(seq "$RUNS"); do
    read -r _ mbs us < <(one nginx "$f.bin" 16 ka); n+=("$mbs"); nc+=("$us")
    read -r _ mbs _ < <(one go "$gmode/$f.bin" 16 ka); g+=("$mbs")
    read -r _ mbs us < <(one "lionet:$lmode" "$f.bin" 16 ka); l+=("$mbs"); lc+=("$us")
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
"$nginx_run" "$b2root" "$port" "" "" "" 0 >/dev/null 2>&1 & SERVER_PID=$!
b2args=(--root "$b2root" --ref "http://127.0.0.1:$port")
[ "$quick" -eq 1 ] && b2args+=(--quick --max-seconds 0.5)
wait_port "$port" || true
b2out=$(taskset -c 1 "$b2" "${b2args[@]}" 2>&1) || errors=$((errors + 1))
stop_server
echo "$b2out"
b2table=$(echo "$b2out" | grep '^|' || true)
b2result=$(echo "$b2out" | grep '^RESULT' || true)
b2err=$(echo "$b2result" | sed -n 's/.*errors=\([0-9]*\).*/\1/p'); errors=$((errors + ${b2err:-1}))

commit=$(bench_commit lionet/http lionet/net bench/http_file_server.cc bench/B2-FileTransfer.cc)
cpu=$(bench_cpu)
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
  echo "### Requests/s, mode auto (keep-alive and Connection: close)"
  echo
  echo "| Connection | Conns | File | LioNet req/s | nginx req/s | ratio | LioNet CPU us/req | nginx CPU us/req | runs (LioNet / nginx) |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${ka_rows[@]}"
  printf '%s\n' "${tls_rows[@]}"
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
bench_section "$tmp/section.md"
bench_result "$summary errors=$errors"
