#!/usr/bin/env bash
# scripts/bench-http-hello.sh: the dynamic "hello" handler (bench/http_hello_server, GET /hello ->
# "hello world" from a Router handler) side by side with nginx serving a 1 KiB static file
# (bench/reference/nginx/run.sh: 1 worker, sendfile, access_log off). Issue 7's target: hello
# >= 1.2x nginx's 1 KiB requests/s.
#
# Both servers pinned to CPU 0 with 1 worker; wrk -t1 on CPU 1; keep-alive with 16 and 100
# connections, and Connection: close with 16; RUNS interleaved runs of SECS s; medians.
# Then "access log on vs off": hello keep-alive with 16 connections, once with
# `--access-log $tmp/access.log` (combined, lionet/http/access_log.h's defaults) and once without,
# RUNS interleaved runs each (which goes first alternates), medians; target access_log_ratio
# (on / off) >= 0.95. A run with the log on that leaves no line in the file counts as an error.
# Then "Basic auth on vs off": the same, with `--basic-auth $tmp/users.htpasswd` (an `htpasswd -B`
# file, cost 5, the default) and wrk sending the right Authorization on every request, against
# the server without auth; target basic_auth_ratio (on / off) >= 0.9 (bcrypt runs once, then the
# verified-credential cache answers). A run whose answers are not 200 counts as an error.
# A run with socket errors or non-2xx answers counts as 0 (and as an error).
# Prints a markdown table and, with --write, puts it into bench/RESULTS.md between
# <!-- http-hello:begin --> and <!-- http-hello:end -->.
#
# Usage: scripts/bench-http-hello.sh [--write] [--no-build] [--quick]
#   --quick: RUNS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (5), REF_DIR (bench/reference).
#   Needs wrk and nginx.
# Last line: RESULT ka16_ratio=.. ka100_ratio=.. close16_ratio=.. access_log_ratio=.. basic_auth_off=..
#   basic_auth_on=.. basic_auth_ratio=.. errors=N
BENCH="http-hello"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
bench_defaults RUNS=3 SECS=5
bench_need wrk nginx htpasswd
bench_build http_hello_server
server=$(bench_bin http_hello_server)
nginx_run=$(ref_file nginx/run.sh)
bench_start
chmod 755 "$tmp"  # nginx workers run as an unprivileged user
root=$tmp/www; mkdir -p "$root"; chmod 755 "$root"; head -c 1024 /dev/urandom >"$root/1k.bin"; chmod 644 "$root/1k.bin"
errors=0
htpasswd -cbB "$tmp/users.htpasswd" bench 'bench-Pass' 2>/dev/null
auth_header="Authorization: Basic $(printf %s 'bench:bench-Pass' | base64 -w0)"

# wrk_rps URL CONNS [close|auth] -> requests/s, or 0 with errors
wrk_rps() {
  local hdr=() out
  [ "${3:-}" = close ] && hdr=(-H "Connection: close")
  [ "${3:-}" = auth ] && hdr=(-H "$auth_header")
  out=$(taskset -c 1 wrk -t1 -c"$2" -d"$SECS"s "${hdr[@]}" "$1" 2>&1)
  if echo "$out" | grep -q -E "Socket errors|Non-2xx"; then echo 0; return; fi
  local rps
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  echo "${rps:-0}"
}
one() {  # which conns mode
  port=$(free_port)
  if [ "$1" = nginx ]; then
    "$nginx_run" "$root" "$port" >/dev/null 2>&1 & SERVER_PID=$!; wait_port "$port" || true
    wrk_rps "http://127.0.0.1:$port/1k.bin" "$2" "$3"
  elif [ "$1" = hello-auth ]; then
    start_server "$server $port --threads 1 --basic-auth $tmp/users.htpasswd" "$port"
    wrk_rps "http://127.0.0.1:$port/hello" "$2" auth
  elif [ "$1" = hello-log ]; then
    rm -f "$tmp/access.log"
    start_server "$server $port --threads 1 --access-log $tmp/access.log" "$port"
    wrk_rps "http://127.0.0.1:$port/hello" "$2" "$3"
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
  for _ in $(seq "$RUNS"); do n+=("$(one nginx "$conns" "$mode")"); m+=("$(one hello "$conns" "$mode")"); done
  for v in "${m[@]}" "${n[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
  mm=$(med "${m[@]}"); nn=$(med "${n[@]}"); r=$(ratio "$mm" "$nn")
  label=$([ "$mode" = ka ] && echo "keep-alive" || echo "Connection: close")
  rows+=("| $label | $conns | $mm | $nn | $r | ${m[*]} / ${n[*]} |")
  summary="$summary ${mode}${conns}_ratio=$r"
  echo "$label conns=$conns hello=$mm nginx_1k=$nn ratio=$r (runs: ${m[*]} | ${n[*]})"
done
# Access log on vs off (the same server, keep-alive, 16 connections).
on=(); off=()
log_on_run() {
  on+=("$(one hello-log 16 ka)")
  # stop_server waited for the exit: the log has written out every line it held.
  if [ ! -s "$tmp/access.log" ]; then
    echo "bench-$BENCH: the run with the access log on left no line in $tmp/access.log" >&2
    errors=$((errors + 1))
  fi
}
for i in $(seq "$RUNS"); do
  # Which goes first alternates (off on, on off, ...): a machine that speeds up or slows down
  # during the series favours neither side.
  if [ $((i % 2)) = 1 ]; then off+=("$(one hello 16 ka)"); log_on_run; else log_on_run; off+=("$(one hello 16 ka)"); fi
done
for v in "${on[@]}" "${off[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
lon=$(med "${on[@]}"); loff=$(med "${off[@]}"); lr=$(ratio "$lon" "$loff")
log_row="| keep-alive | 16 | $loff | $lon | $lr | ${off[*]} / ${on[*]} |"
summary="$summary access_log_ratio=$lr"
echo "access log keep-alive conns=16 off=$loff on=$lon ratio=$lr (runs: ${off[*]} | ${on[*]})"
rm -f "$tmp/access.log"
# Basic auth on vs off (the same server, keep-alive, 16 connections; the order alternates).
aon=(); aoff=()
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then aoff+=("$(one hello 16 ka)"); aon+=("$(one hello-auth 16 ka)")
  else aon+=("$(one hello-auth 16 ka)"); aoff+=("$(one hello 16 ka)"); fi
done
for v in "${aon[@]}" "${aoff[@]}"; do [ "${v%.*}" = 0 ] && errors=$((errors + 1)); done
aonm=$(med "${aon[@]}"); aoffm=$(med "${aoff[@]}"); ar=$(ratio "$aonm" "$aoffm")
auth_row="| keep-alive | 16 | $aoffm | $aonm | $ar | ${aoff[*]} / ${aon[*]} |"
summary="$summary basic_auth_off=$aoffm basic_auth_on=$aonm basic_auth_ratio=$ar"
echo "basic auth keep-alive conns=16 off=$aoffm on=$aonm ratio=$ar (runs: ${aoff[*]} | ${aon[*]})"

commit=$(bench_commit lionet/http lionet/net bench/http_hello_server.cc)
cpu=$(bench_cpu)
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
  echo
  echo "Access log on vs off: the same hello server with \`--access-log\` (combined format, written by the"
  echo "log's own thread to a file under /tmp) and without; $RUNS interleaved runs of $SECS s (which goes first alternates), medians. Target: ratio >= 0.95."
  echo
  echo "| Mode | Connections | log off req/s | log on req/s | ratio (on / off) | runs (off / on) |"
  echo "|---|---:|---:|---:|---:|---|"
  echo "$log_row"
  echo
  echo "Basic auth on vs off: the same hello server with \`--basic-auth\` (lionet/http/auth.h, an \`htpasswd -B\` file,"
  echo "wrk sending the right credentials on every request: one bcrypt, then the verified-credential cache) and without;"
  echo "$RUNS interleaved runs of $SECS s (which goes first alternates), medians. Target: ratio >= 0.9."
  echo
  echo "| Mode | Connections | auth off req/s | auth on req/s | ratio (on / off) | runs (off / on) |"
  echo "|---|---:|---:|---:|---:|---|"
  echo "$auth_row"
} >"$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "$summary errors=$errors"
