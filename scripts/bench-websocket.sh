#!/usr/bin/env bash
# scripts/bench-websocket.sh: the WebSocket benchmark of issue 21, LioNet's websocket::accept()
# (bench/websocket_echo_server) beside gorilla/websocket (bench/reference/websocket, Go).
#
# 1. Builds the release preset's websocket_echo_server and websocket_load (unless --no-build;
#    BUILD_DIR picks the build), and go_websocket_server of bench/reference into $REF_OUT
#    (needs `go`: Debian golang-go, installed with apt-get if missing and we are root; its one
#    dependency, gorilla/websocket v1.5.3, is fetched once through the Go module proxy and
#    checked against bench/reference/websocket/go_websocket_server/go.sum).
# 2. Every server is pinned to CPU 0 (LioNet: 1 worker, backend BACKEND; Go: GOMAXPROCS=1), a
#    fresh one per measurement; the load client, pinned to CPU 1, is for the echo rows
#    bench/reference/websocket/ws_echo_client.c (ECHO_CLIENT=c, the default: plain C, epoll,
#    one write of a prebuilt masked frame and one read per message, so that the client is not
#    what sets the pace) or bench/websocket_load (ECHO_CLIENT=lionet: LioNet's own
#    websocket::connect, one fiber per connection, 1 worker, which measured ~0.99 of its CPU
#    busy against both servers), and bench/websocket_load for broadcast and idle. RUNS interleaved
#    rounds (LioNet, then Go, for each measurement), medians:
#    a. echo: CONNS (100) connections, each with 1 message in flight, 64 B and 16 KiB binary
#       messages, SECS s: messages/s, round-trip p50/p99, the client's CPU share (of its one
#       CPU: near 1.0 would mean the client set the pace) and the server's CPU per message.
#    b. broadcast: BCAST (10,000) connections to /broadcast, ROUNDS (5) trigger messages of 64 B,
#       each sent on one connection and written by the server to every connection (LioNet twice:
#       with websocket::broadcast(), and with a Socket::send loop): delivery
#       time of every connection from the trigger's send, p50/p99/max per round, median over
#       the rounds, and the client's CPU share from the send to the last delivery.
#    The echo and broadcast rows also run bench/reference/websocket/ws_floor_server.c, a C
#    server doing the least any server can per message (see its header), in the same place
#    and with the same clients: its figures are the ceiling of this machine and layout.
#    c. idle: IDLE (10,000) connections opened and held HOLD (3) s; the server's VmRSS
#       (/proc/PID/status) before the first connection and while all are held, divided by the
#       connections.
# Prints a markdown table, and with --write puts it into bench/RESULTS.md between
# <!-- websocket:begin --> and <!-- websocket:end -->.
#
# Usage: scripts/bench-websocket.sh [--write] [--no-build] [--quick]
#   --quick: a smoke run: RUNS=1 SECS=1 CONNS=10 BCAST=200 ROUNDS=2 IDLE=200 HOLD=1 unless set
#   (figures meaningless).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (4), CONNS (100), BCAST
#   (10000), ROUNDS (5), IDLE (10000), HOLD (3), BACKEND (epoll or io_uring; epoll), ECHO_CLIENT
#   (c or lionet; c), REF_DIR,
#   REF_OUT (/tmp/lionet-ref), GO (the toolchain bench/reference/Makefile builds with: `go` on
#   PATH unless set, e.g. GO=/usr/bin/go for Debian's; the table names its version).
# Last line: RESULT echo64_ratio=.. echo16k_ratio=.. echo64_msgs=.. go_echo64_msgs=..
#   echo16k_msgs=.. go_echo16k_msgs=.. client_cpu_max=.. bcast_p99_ms=.. bcast_send_p99_ms=..
#   go_bcast_p99_ms=.. idle_bytes_per_conn=.. go_idle_bytes_per_conn=.. floor_echo64_ratio=..
#   floor_echo16k_ratio=.. floor_bcast_p99_ms=.. errors=N (floor_*: ws_floor_server, ratios to Go)
#   (targets: echo64_ratio >= 1.3, echo16k_ratio >= 1.0, bcast_p99_ms <= 50 (broadcast()),
#   idle_bytes_per_conn <= 16384, errors 0)
BENCH="websocket"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
if [ "$quick" = 1 ]; then
  : "${CONNS:=10}" "${BCAST:=200}" "${ROUNDS:=2}" "${IDLE:=200}" "${HOLD:=1}"
fi
bench_defaults RUNS=3 SECS=4 CONNS=100 BCAST=10000 ROUNDS=5 IDLE=10000 HOLD=3 BACKEND=epoll ECHO_CLIENT=c

command -v gcc >/dev/null && command -v make >/dev/null || bench_die "missing Debian packages: build-essential"
bench_need taskset python3
bench_get_go || bench_die "needs go (Debian golang-go) for the gorilla/websocket reference"

bench_build websocket_echo_server websocket_load
server=$(bench_bin websocket_echo_server)
load=$(bench_bin websocket_load)
gosrv=$(ref go_websocket_server)
floorsrv=$(ref ws_floor_server)
case "$ECHO_CLIENT" in
  c) echo_load=$(ref ws_echo_client) ;;
  lionet) echo_load="$load echo" ;;
  *) bench_die "ECHO_CLIENT is c or lionet" ;;
esac
bench_start

ours_tpl="$server {port} --threads 1 --backend $BACKEND"
ours_send_tpl="$ours_tpl --broadcast send"  # /broadcast with a Socket::send loop, not broadcast()
go_tpl="env GOMAXPROCS=1 $gosrv 127.0.0.1:{port}"
floor_tpl="$floorsrv -p {port}"
hz=$(getconf CLK_TCK)
errors=0

# rss_kb PID: VmRSS of PID in KiB (0 if it is gone)
rss_kb() {
  local v
  v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true)
  echo "${v:-0}"
}
# clean LINE: true if LINE is a RESULT line with errors=0
clean() { [ -n "$1" ] && [ "$(echo "$1" | field errors)" = 0 ]; }
# num LINE KEY: KEY= of LINE, 0 if absent
num() { local v; v=$(echo "$1" | field "$2"); echo "${v:-0}"; }
med() { printf '%s\n' "$@" | median; }
# keep ARRAY VALUE: appends VALUE to the array named ARRAY
keep() { local -n a=$1; a+=("$2"); }

# echo_run TEMPLATE SIZE -> "msgs_per_s p50_us p99_us client_cpu srv_us" (zeros and an error
# counted if the client saw any)
echo_run() {
  local out c0 c1
  port=$(free_port)
  start_server "$(fill "$1")" "$port"
  c0=$(cpu_ticks "$SERVER_PID")
  out=$(taskset -c 1 $echo_load -p "$port" -c "$CONNS" -s "$2" -d "$SECS" 2>&1 | grep '^RESULT' || true)
  c1=$(cpu_ticks "$SERVER_PID")
  stop_server
  echo "$1 size=$2: ${out:-no RESULT line}" >> "$tmp/log.txt"
  if ! clean "$out"; then echo "0 0 0 0 0"; return; fi
  echo "$(num "$out" msgs_per_s) $(num "$out" p50_us) $(num "$out" p99_us) $(num "$out" client_cpu)" \
    "$(awk -v t="$((c1 - c0))" -v hz="$hz" -v n="$(num "$out" messages)" \
      'BEGIN { if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print 0 }')"
}

# bcast_run TEMPLATE -> "p50_ms p99_ms max_ms client_cpu"
bcast_run() {
  local out
  port=$(free_port)
  start_server "$(fill "$1")" "$port"
  out=$(taskset -c 1 "$load" broadcast -p "$port" -c "$BCAST" -s 64 -k "$ROUNDS" 2>&1 | grep '^RESULT' || true)
  stop_server
  echo "$1 broadcast: ${out:-no RESULT line}" >> "$tmp/log.txt"
  if ! clean "$out"; then echo "0 0 0 0"; return; fi
  echo "$(num "$out" p50_ms) $(num "$out" p99_ms) $(num "$out" max_ms) $(num "$out" client_cpu)"
}

# idle_run TEMPLATE -> bytes of server RSS per held connection (0 on errors)
idle_run() {
  local out before after held="" _
  port=$(free_port)
  start_server "$(fill "$1")" "$port"
  sleep 0.5
  before=$(rss_kb "$SERVER_PID")
  taskset -c 1 "$load" idle -p "$port" -c "$IDLE" -d "$HOLD" > "$tmp/idle.out" 2>&1 &
  local cpid=$!
  for _ in $(seq 1200); do  # up to 120 s for the connections to open
    held=$(sed -n 's/^HOLDING conns=\([0-9]*\).*/\1/p' "$tmp/idle.out")
    [ -z "$held" ] && kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 0.2  # the server's last accepted connections reach their handler
  after=$(rss_kb "$SERVER_PID")
  wait "$cpid" || true
  stop_server
  out=$(grep '^RESULT' "$tmp/idle.out" || true)
  echo "$1 idle: before=${before} KiB after=${after} KiB held=${held:-?}: ${out:-no RESULT line}" >> "$tmp/log.txt"
  if ! clean "$out" || [ -z "$held" ] || [ "$held" = 0 ]; then echo 0; return; fi
  awk -v a="$after" -v b="$before" -v n="$held" 'BEGIN { printf "%.0f\n", (a - b) * 1024 / n }'
}

: > "$tmp/log.txt"
declare -a e64 g64 e16 g16 l64 lg64 l16 lg16 c64 cg64 c16 cg16 s64 sg64 s16 sg16 \
  bp50 bp99 bmax bcpu sp50 sp99 smax scpu gp50 gp99 gmax gcpu idl gidl f64 f16 fp99
for run in $(seq "$RUNS"); do
  echo "== run $run of $RUNS: echo $CONNS conns x 64 B and 16 KiB ($SECS s), broadcast to $BCAST, $IDLE idle =="
  for size in 64 16384; do
    read -r m p50 p99 cpu us <<< "$(echo_run "$ours_tpl" "$size")"
    # (scalars named apart from the arrays below: go_p99 is not gp99, the broadcast's array)
    read -r go_m go_p50 go_p99 go_cpu go_us <<< "$(echo_run "$go_tpl" "$size")"
    read -r fl_m _ _ fl_cpu fl_us <<< "$(echo_run "$floor_tpl" "$size")"
    echo "echo $size B: lionet $m msg/s (p50 $p50 us, p99 $p99 us, client cpu $cpu, server $us us/msg)" \
      "| go $go_m msg/s (p50 $go_p50 us, p99 $go_p99 us, client cpu $go_cpu, server $go_us us/msg)" \
      "| floor $fl_m msg/s (client cpu $fl_cpu, server $fl_us us/msg)"
    s=$([ "$size" = 64 ] && echo 64 || echo 16)
    keep "e$s" "$m"; keep "g$s" "$go_m"; keep "l$s" "$p99"; keep "lg$s" "$go_p99"
    keep "c$s" "$cpu"; keep "cg$s" "$go_cpu"; keep "s$s" "$us"; keep "sg$s" "$go_us"; keep "f$s" "$fl_m"
    for v in "$m" "$go_m" "$fl_m"; do [ "$v" != 0 ] || errors=$((errors + 1)); done
  done
  read -r p50 p99 mx cpu <<< "$(bcast_run "$ours_tpl")"
  read -r q50 q99 qmx qcpu <<< "$(bcast_run "$go_tpl")"
  read -r t50 t99 tmx tcpu <<< "$(bcast_run "$ours_send_tpl")"
  read -r _ f99 _ _ <<< "$(bcast_run "$floor_tpl")"
  echo "broadcast to $BCAST: lionet broadcast() p50 $p50 p99 $p99 max $mx ms (client cpu $cpu)" \
    "| go p50 $q50 p99 $q99 max $qmx ms (client cpu $qcpu) | lionet send loop p50 $t50 p99 $t99 max $tmx ms (client cpu $tcpu)" \
    "| floor p99 $f99 ms"
  bp50+=("$p50"); bp99+=("$p99"); bmax+=("$mx"); bcpu+=("$cpu")
  gp50+=("$q50"); gp99+=("$q99"); gmax+=("$qmx"); gcpu+=("$qcpu")
  sp50+=("$t50"); sp99+=("$t99"); smax+=("$tmx"); scpu+=("$tcpu"); fp99+=("$f99")
  for v in "$p99" "$q99" "$t99" "$f99"; do [ "$v" != 0 ] || errors=$((errors + 1)); done
  i=$(idle_run "$ours_tpl") gi=$(idle_run "$go_tpl")
  echo "idle $IDLE: lionet $i B/conn | go $gi B/conn"
  idl+=("$i"); gidl+=("$gi")
  for v in "$i" "$gi"; do [ "$v" != 0 ] || errors=$((errors + 1)); done
done
sed 's/^/  /' "$tmp/log.txt"

m64=$(med "${e64[@]}") mg64=$(med "${g64[@]}") m16=$(med "${e16[@]}") mg16=$(med "${g16[@]}")
r64=$(ratio "$m64" "$mg64") r16=$(ratio "$m16" "$mg16")
cpu_max=$(printf '%s\n' "${c64[@]}" "${cg64[@]}" "${c16[@]}" "${cg16[@]}" | sort -n | tail -n 1)
b99=$(med "${bp99[@]}") g99=$(med "${gp99[@]}") s99=$(med "${sp99[@]}")
mi=$(med "${idl[@]}") mgi=$(med "${gidl[@]}")
mf64=$(med "${f64[@]}") mf16=$(med "${f16[@]}") f99=$(med "${fp99[@]}")
rf64=$(ratio "$mf64" "$mg64") rf16=$(ratio "$mf16" "$mg16")
kib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1024 }'; }
ok() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { r = (op == ">=") ? (v >= t) : (v <= t); print (r ? "yes" : "**no**") }'; }
{
  echo "## WebSocket (lionet/websocket): websocket_echo_server vs gorilla/websocket"
  echo
  echo "Produced by \`scripts/bench-websocket.sh --write\` at commit $(bench_commit lionet/websocket lionet/http lionet/sched bench/websocket_echo_server.cc bench/websocket_load.cc bench/reference/websocket)" \
    "on $(bench_cpu); load average before: $load_before. Backend $BACKEND; Go: $("${GO:-go}" version | cut -d' ' -f3)."
  echo "Servers pinned to CPU 0: LioNet \`websocket_echo_server\` (1 worker, \`websocket::accept\` with default Options, no"
  echo "compression) and \`go_websocket_server\` (bench/reference/websocket/go_websocket_server: gorilla/websocket v1.5.3, a goroutine per"
  if [ "$ECHO_CLIENT" = c ]; then
    echo "connection, GOMAXPROCS=1). The echo load client, for both, is \`bench/reference/websocket/ws_echo_client.c\` (plain C,"
    echo "epoll, one write of a prebuilt masked frame and one read per message), pinned to CPU 1; broadcast and idle use"
    echo "\`bench/websocket_load\` (LioNet's \`websocket::connect\`, a fiber per connection). The echo client's CPU share (its user + system time over the run, of"
  else
    echo "connection, GOMAXPROCS=1). The load client, for both, is \`bench/websocket_load\`: LioNet's own \`websocket::connect\`,"
    echo "a fiber per connection on one worker, pinned to CPU 1. Its CPU share (its user + system time over the run, of"
  fi
  echo "that one CPU) is in the echo rows: near 1.0 would mean the client, not the server, set the pace; then the server"
  echo "CPU per message (/proc ticks) is the figure that tells the servers apart. $RUNS interleaved runs (LioNet, then Go,"
  echo "per measurement, a fresh server each), medians."
  echo
  echo "| Measurement | LioNet | Go (gorilla) | LioNet / Go | Target | Met | LioNet runs | Go runs |"
  echo "|---|---:|---:|---:|---|---|---|---|"
  echo "| echo, $CONNS conns x 64 B, messages/s | $m64 | $mg64 | $r64 | >= 1.3x | $(ok "$r64" 1.3 '>=') | ${e64[*]} | ${g64[*]} |"
  echo "| echo, $CONNS conns x 16 KiB, messages/s | $m16 | $mg16 | $r16 | >= 1.0x | $(ok "$r16" 1.0 '>=') | ${e16[*]} | ${g16[*]} |"
  echo "| echo 64 B: round trip p99, us | $(med "${l64[@]}") | $(med "${lg64[@]}") | | | | ${l64[*]} | ${lg64[*]} |"
  echo "| echo 16 KiB: round trip p99, us | $(med "${l16[@]}") | $(med "${lg16[@]}") | | | | ${l16[*]} | ${lg16[*]} |"
  echo "| echo 64 B: server CPU us/message | $(med "${s64[@]}") | $(med "${sg64[@]}") | | | | ${s64[*]} | ${sg64[*]} |"
  echo "| echo 16 KiB: server CPU us/message | $(med "${s16[@]}") | $(med "${sg16[@]}") | | | | ${s16[*]} | ${sg16[*]} |"
  echo "| echo 64 B: load client CPU share | $(med "${c64[@]}") | $(med "${cg64[@]}") | | < 1 | | ${c64[*]} | ${cg64[*]} |"
  echo "| echo 16 KiB: load client CPU share | $(med "${c16[@]}") | $(med "${cg16[@]}") | | < 1 | | ${c16[*]} | ${cg16[*]} |"
  echo "| echo 64 B, C floor (ws_floor_server), messages/s; its ratio to Go is the ceiling | $mf64 | $mg64 | $rf64 | | | ${f64[*]} | |"
  echo "| echo 16 KiB, C floor, messages/s | $mf16 | $mg16 | $rf16 | | | ${f16[*]} | |"
  echo "| broadcast 64 B to $BCAST clients, \`websocket::broadcast()\`: p99 delivery, ms | $b99 | $g99 | | <= 50 ms | $(ok "$b99" 50 '<=') | ${bp99[*]} | ${gp99[*]} |"
  echo "| the same, p50 / max delivery, ms | $(med "${bp50[@]}") / $(med "${bmax[@]}") | $(med "${gp50[@]}") / $(med "${gmax[@]}") | | | | | |"
  echo "| broadcast, LioNet with a \`Socket::send\` loop instead: p99 delivery, ms | $s99 | $g99 | | <= 50 ms | $(ok "$s99" 50 '<=') | ${sp99[*]} | ${gp99[*]} |"
  echo "| the same, p50 / max delivery, ms | $(med "${sp50[@]}") / $(med "${smax[@]}") | $(med "${gp50[@]}") / $(med "${gmax[@]}") | | | | | |"
  echo "| broadcast, C floor (ws_floor_server: one write(2) per connection in a loop): p99 delivery, ms | $f99 | $g99 | | <= 50 ms | $(ok "$f99" 50 '<=') | ${fp99[*]} | ${gp99[*]} |"
  echo "| $IDLE idle connections: server RSS per connection, KiB | $(kib "$mi") | $(kib "$mgi") | | <= 16 KiB | $(ok "$mi" 16384 '<=') | ${idl[*]} (B) | ${gidl[*]} (B) |"
  echo
  echo "C floor: \`bench/reference/websocket/ws_floor_server.c\`, in LioNet's place with the same clients: one thread,"
  echo "level-triggered epoll, one read and one write per message and nothing a real server needs (no UTF-8 check,"
  echo "fragments, limits or close handshake): what the kernel's loopback TCP path allows on this machine."
  echo
  echo "Broadcast: $ROUNDS trigger messages per run, each sent by the client on one connection and written by the server to"
  echo "every connection of the room (LioNet: \`websocket::broadcast()\`, one frame queued on every socket, or one"
  echo "\`Socket::send\` per socket in a loop; Go: one \`WriteMessage\` per conn in a loop under the room's lock);"
  echo "a connection's delivery time runs from just before the trigger's send to its \`receive()\` returning in the client,"
  echo "so it includes the client waking and reading $BCAST sockets on its one CPU (the client's CPU share from a trigger's"
  echo "send to its last delivery: LioNet $(med "${bcpu[@]}") / send loop $(med "${scpu[@]}"), Go $(med "${gcpu[@]}"); near 1.0 would mean the client set the"
  echo "pace). Figures are the median over the runs of each run's median"
  echo "over its rounds. Idle: VmRSS of the server before the first connection and while all $IDLE are held (HOLD=$HOLD s),"
  echo "difference over the connections."
} > "$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "RESULT echo64_ratio=$r64 echo16k_ratio=$r16 echo64_msgs=$m64 go_echo64_msgs=$mg64 echo16k_msgs=$m16 go_echo16k_msgs=$mg16 client_cpu_max=${cpu_max:-0} bcast_p99_ms=$b99 bcast_send_p99_ms=$s99 go_bcast_p99_ms=$g99 idle_bytes_per_conn=$mi go_idle_bytes_per_conn=$mgi floor_echo64_ratio=$rf64 floor_echo16k_ratio=$rf16 floor_bcast_p99_ms=$f99 errors=$errors"
