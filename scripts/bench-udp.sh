#!/usr/bin/env bash
# scripts/bench-udp.sh: the UDP echo benchmark, LioNet's UdpSocket beside the hand-written
# recvmmsg/sendmmsg server of bench/reference/udp.
#
# 1. Builds the release preset's udp_echo_server (unless --no-build; BUILD_DIR picks the build).
# 2. Builds udp_echo_ref and udp_echo_client of bench/reference into $REF_OUT.
# 3. Throughput: 256 B datagrams, WINDOW (64) in flight, SECS s per run, server pinned to CPU 0
#    (LioNet with 1 worker), the reference udp_echo_client on CPU 1; RUNS interleaved rounds of
#    LioNet --batch (recv_many/send_many), LioNet single (recv_from/send_to), the reference.
#    Medians of echoes received per second.
# 4. Loss: the same client sending RATE datagrams/s (20,000 unless set: the reference loses none
#    there on this machine; at 50,000 both lose ~34 of 600k) to LioNet --batch and
#    to the reference, RUNS interleaved runs; loss = datagrams that never came back (summed).
# 5. Syslog ingest (bench/syslog_ingest: lionet::syslog::Server into the store, and --ref, a
#    recvmmsg + write(2) loop into a plain file, both batching up to 256 messages): MESSAGES
#    (1,000,000) RFC 5424 datagrams from one sendmmsg thread on CPU 1, the receiver on CPU 0,
#    with the store's flush policy none and every_batch (the reference: no fdatasync / one per
#    batch); RUNS interleaved runs, medians of messages stored per second and receiver CPU per
#    message.
# Prints a markdown table, and with --write puts it into bench/RESULTS.md between
# <!-- udp:begin --> and <!-- udp:end -->.
#
# Usage: scripts/bench-udp.sh [--write] [--no-build] [--quick]
#   --quick: RUNS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (4), WINDOW (64),
#   RATE (20000), MESSAGES (1000000), BACKEND (epoll or io_uring; epoll), REF_DIR, REF_OUT
#   (/tmp/lionet-ref).
# Last line: RESULT udp_batch_pps=.. udp_single_pps=.. ref_pps=.. ratio_batch=.. ratio_single=..
#   loss=.. ref_loss=.. rate=.. batch_us=.. single_us=.. ref_us=.. syslog_none_per_s=..
#   syslog_every_batch_per_s=.. syslog_ref_none_per_s=.. syslog_ref_every_batch_per_s=..
#   errors=N   (target: ratio_batch >= 0.95, loss 0; *_us: server CPU microseconds per echoed
#   datagram)
BENCH="udp"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
bench_defaults RUNS=3 SECS=4 WINDOW=64 RATE=20000 MESSAGES=1000000 BACKEND=epoll

command -v gcc >/dev/null && command -v make >/dev/null || bench_die "missing Debian packages: build-essential"
bench_need taskset python3

bench_build udp_echo_server syslog_ingest
server=$(bench_bin udp_echo_server)
ingest=$(bench_bin syslog_ingest)
cli=$(ref udp_echo_client)
refsrv=$(ref udp_echo_ref)
bench_start

# wait_udp PORT: waits up to 10 s for an echo from 127.0.0.1:PORT (UDP has no connect to try).
wait_udp() {
  python3 - "$1" <<'PYEOF'
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.1)
for _ in range(100):
    try:
        s.sendto(b"lionet-bench-probe", ("127.0.0.1", int(sys.argv[1])))
        s.recvfrom(64)
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PYEOF
}

# start_udp_server COMMAND PORT: COMMAND pinned to CPU 0 in the background; waits for an echo.
start_udp_server() {
  taskset -c 0 bash -c "exec $1" >/dev/null 2>&1 &
  SERVER_PID=$!
  wait_udp "$2" || echo "bench-$BENCH: the server did not echo on port $2: $1" >&2
}

hz=$(getconf CLK_TCK)

# one SERVER_TEMPLATE [rate]: one client run of SECS s against a fresh server -> the client's
# RESULT line with srv_us= appended (server CPU time per echoed datagram, in microseconds: the
# one-thread client often limits packets/s before the server does, see bench/reference/README.md)
one() {
  local out load=(-w "$WINDOW") c0 c1
  [ "${2:-}" = rate ] && load=(-r "$RATE")
  port=$(free_port)
  start_udp_server "$(fill "$1")" "$port"
  c0=$(cpu_ticks "$SERVER_PID")
  out=$(taskset -c 1 "$cli" -p "$port" -s 256 -d "$SECS" "${load[@]}" 2>&1 | grep '^RESULT' || true)
  c1=$(cpu_ticks "$SERVER_PID")
  stop_server
  out=${out:-RESULT errors=1}
  echo "$out srv_us=$(awk -v t="$((c1 - c0))" -v hz="$hz" -v n="$(num "$out" received)" \
    'BEGIN { if (n > 0) printf "%.3f", t / hz * 1e6 / n; else print 0 }')"
}
med() { printf '%s\n' "$@" | median; }
# num LINE KEY: the integer KEY= of LINE, 0 if absent
num() { local v; v=$(echo "$1" | field "$2"); echo "${v%%.*}" | sed 's/^$/0/'; }
errors=0
# pps_of LINE: the pps of a clean run, else 0 (counted as an error below)
pps_of() {
  if [ "$(echo "$1" | field errors)" = 0 ]; then echo "$1" | field pps; else echo 0; fi
}

# ---- 3. throughput, interleaved ----
echo "== UDP echo, 256 B, window $WINDOW, $RUNS x $SECS s, backend $BACKEND =="
b=(); s=(); r=(); bu=(); su=(); ru=()
for _ in $(seq "$RUNS"); do
  l=$(one "$refsrv -p {port}"); r+=("$(pps_of "$l")"); ru+=("$(echo "$l" | field srv_us)")
  l=$(one "$server {port} --batch --backend $BACKEND"); b+=("$(pps_of "$l")"); bu+=("$(echo "$l" | field srv_us)")
  l=$(one "$server {port} --backend $BACKEND"); s+=("$(pps_of "$l")"); su+=("$(echo "$l" | field srv_us)")
done
for v in "${b[@]}" "${s[@]}" "${r[@]}"; do [ "$v" != 0 ] || errors=$((errors + 1)); done
bb=$(med "${b[@]}") ss=$(med "${s[@]}") rr=$(med "${r[@]}")
bbu=$(med "${bu[@]}") ssu=$(med "${su[@]}") rru=$(med "${ru[@]}")
echo "batch=$bb single=$ss ref=$rr (runs: ${b[*]} | ${s[*]} | ${r[*]})"
echo "server us/datagram: batch=$bbu single=$ssu ref=$rru"

# ---- 4. loss at RATE ----
echo "== loss at $RATE datagrams/s =="
bl=0 rl=0 bsent=0 rsent=0
for _ in $(seq "$RUNS"); do
  lr=$(one "$refsrv -p {port}" rate)
  lb=$(one "$server {port} --batch --backend $BACKEND" rate)
  for line in "$lr" "$lb"; do [ "$(echo "$line" | field errors)" = 0 ] || errors=$((errors + 1)); done
  rl=$((rl + $(num "$lr" lost))) rsent=$((rsent + $(num "$lr" sent)))
  bl=$((bl + $(num "$lb" lost))) bsent=$((bsent + $(num "$lb" sent)))
done
echo "LioNet batch: lost $bl of $bsent; reference: lost $rl of $rsent"

# ---- 5. syslog ingest ----
echo "== syslog ingest, $MESSAGES messages, $RUNS runs =="
declare -A ing ingu
for _ in $(seq "$RUNS"); do
  for mode in lionet ref; do
    for flush in none every_batch; do
      arg=(); [ "$mode" = ref ] && arg=(--ref)
      l=$("$ingest" "${arg[@]}" --flush "$flush" --messages "$MESSAGES" --backend "$BACKEND" 2>&1 | grep '^RESULT' || true)
      if [ -z "$l" ] || [ "$(echo "$l" | field errors)" != 0 ]; then errors=$((errors + 1)); fi
      ing[$mode.$flush]="${ing[$mode.$flush]:-} $(echo "$l" | field stored_per_s)"
      ingu[$mode.$flush]="${ingu[$mode.$flush]:-} $(echo "$l" | field receiver_us)"
    done
  done
done
# shellcheck disable=SC2086
for k in lionet.none lionet.every_batch ref.none ref.every_batch; do
  declare "m_${k/./_}=$(med ${ing[$k]})" "u_${k/./_}=$(med ${ingu[$k]})"
done
echo "lionet none=$m_lionet_none every_batch=$m_lionet_every_batch; ref none=$m_ref_none every_batch=$m_ref_every_batch"

# ---- table ----
rb=$(ratio "$bb" "$rr") rs=$(ratio "$ss" "$rr")
{
  echo "## UDP echo (lionet/net UdpSocket): udp_echo_server vs bench/reference/udp"
  echo
  echo "Produced by \`scripts/bench-udp.sh --write\` at commit $(bench_commit lionet/net bench/udp_echo_server.cc bench/reference/udp)" \
    "on $(bench_cpu); load average before: $load_before. Backend $BACKEND."
  echo "256-byte datagrams, server pinned to CPU 0 (LioNet: 1 worker), \`udp_echo_client\` on CPU 1 with $WINDOW datagrams"
  echo "in flight (sendmmsg/recvmmsg), $RUNS interleaved runs of $SECS s per row, medians of echoes per second."
  echo "Ratio = packets/s / the reference's packets/s in the same rounds (0.9-1.1 reads as equal); target: batched >= 0.95."
  echo
  echo "Server CPU = the server process's user + system time per echoed datagram (clock ticks of /proc, median):"
  echo "when the client is the limit, packets/s read alike and this column tells the servers apart."
  echo
  echo "| Server | Packets/s (median) | Runs | vs reference | Server CPU us/datagram |"
  echo "|---|---:|---|---:|---:|"
  echo "| udp_echo_ref: recvmmsg/sendmmsg loop, 64 per call (reference) | $rr | ${r[*]} | 1.000 | $rru |"
  echo "| LioNet udp_echo_server --batch: recv_many/send_many | $bb | ${b[*]} | $rb | $bbu |"
  echo "| LioNet udp_echo_server: recv_from/send_to | $ss | ${s[*]} | $rs | $ssu |"
  echo
  echo "Loss at $RATE datagrams/s ($RUNS runs of $SECS s each): LioNet --batch lost $bl of $bsent, the reference lost $rl of $rsent."
  echo
  echo "### Syslog ingest (lionet/syslog) into the store"
  echo
  echo "\`bench/syslog_ingest\`: $MESSAGES RFC 5424 datagrams (~90 B) from one sendmmsg thread on CPU 1; the receiver on"
  echo "CPU 0: LioNet's \`syslog::Server\` (1 worker, batch_max 256, into a topic of the store with the flush policy"
  echo "shown) or the reference (recvmmsg into a plain file with one write(2) per batch of up to 256, fdatasync per batch"
  echo "for every_batch). Messages stored per second from the first send to the last store (with nothing dropped this is"
  echo "the sender's pace: on loopback the sender's CPU also runs the receive path), and the receiver's CPU per message"
  echo "(process CPU minus the sender thread's). $RUNS interleaved runs, medians."
  echo
  echo "| Receiver | flush | stored/s | receiver CPU us/message | vs reference |"
  echo "|---|---|---:|---:|---:|"
  echo "| reference: recvmmsg + write | none | $m_ref_none | $u_ref_none | 1.000 |"
  echo "| LioNet syslog::Server | none | $m_lionet_none | $u_lionet_none | $(ratio "$m_lionet_none" "$m_ref_none") |"
  echo "| reference: recvmmsg + write + fdatasync | every_batch | $m_ref_every_batch | $u_ref_every_batch | 1.000 |"
  echo "| LioNet syslog::Server | every_batch | $m_lionet_every_batch | $u_lionet_every_batch | $(ratio "$m_lionet_every_batch" "$m_ref_every_batch") |"
} > "$tmp/section.md"
bench_section "$tmp/section.md"
bench_result "RESULT udp_batch_pps=$bb udp_single_pps=$ss ref_pps=$rr ratio_batch=$rb ratio_single=$rs loss=$bl ref_loss=$rl rate=$RATE batch_us=$bbu single_us=$ssu ref_us=$rru syslog_none_per_s=$m_lionet_none syslog_every_batch_per_s=$m_lionet_every_batch syslog_ref_none_per_s=$m_ref_none syslog_ref_every_batch_per_s=$m_ref_every_batch errors=$errors"
