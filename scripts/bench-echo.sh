#!/usr/bin/env bash
# scripts/bench-echo.sh: the echo benchmark, side by side with ../shared/peers.
#
# 1. Builds the release preset's bench_server and bench_client.
# 2. Builds the echo peers (epoll reference, peer echo_client, Go, Boost.Asio) into
#    $PEERS_OUT. Needs build-essential and libboost-dev; Go needs `go` (Debian golang-go):
#    if it is missing and we are root, golang-go is installed with apt-get, otherwise the Go
#    column is skipped with a note.
# 3. Runs ../shared/peers/compare/echo.sh for bench_server with the epoll backend and with
#    io_uring (each: LioNet vs the epoll reference vs Go, 256 B, 100 and 1000 connections,
#    1 worker, server on CPU 0, peer echo_client on CPU 1, RUNS interleaved runs of SECS s).
# 4. Runs Boost.Asio interleaved with the reference and LioNet (same shape).
# 5. Checks the clients: bench_client and the peer echo_client against the epoll reference,
#    interleaved, 100 connections; their ratio should be ~1 (within noise).
# Prints a markdown table (server, connections, median QPS, runs, ratio to the epoll
# reference from the same script run), and with --write puts it into bench/RESULTS.md between
# <!-- echo:begin --> and <!-- echo:end --> (created if absent; the rest is kept).
#
# Usage: scripts/bench-echo.sh [--write] [--no-build]
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (4), PEERS_OUT
#   (/tmp/lionet-peers), PEERS (../shared/peers).
# Last line: RESULT c100_ratio=.. c1000_ratio=.. uring_c100_ratio=.. ... errors=N
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
export RUNS=${RUNS:-3} SECS=${SECS:-4} PEERS_OUT=${PEERS_OUT:-/tmp/lionet-peers}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}
[ -x "$PEERS/compare/echo.sh" ] || { echo "bench-echo: $PEERS/compare/echo.sh not found" >&2; exit 1; }

# ---- dependencies ----
missing=()
command -v gcc >/dev/null && command -v g++ >/dev/null && command -v make >/dev/null || missing+=(build-essential)
[ -f /usr/include/boost/asio.hpp ] || missing+=(libboost-dev)  # headers only (any libboost1.*-dev)
[ ${#missing[@]} -eq 0 ] || { echo "bench-echo: missing Debian packages: ${missing[*]}" >&2; exit 1; }
PATH=$PATH:/usr/local/go/bin
have_go=1
if ! command -v go >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench-echo: installing golang-go for the Go peer" >&2
    apt-get install -y golang-go >/dev/null 2>&1 || have_go=0
  else
    have_go=0
  fi
  command -v go >/dev/null || have_go=0
fi
go_note=""
[ "$have_go" = 1 ] || go_note="Go was not installed (golang-go), so the Go column is missing."

# ---- build ----
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$JOBS" --target bench_server bench_client
fi
server="$BUILD_DIR/bench/bench_server"
client="$BUILD_DIR/bench/bench_client"
for b in "$server" "$client"; do [ -x "$b" ] || { echo "bench-echo: $b not built" >&2; exit 1; }; done
peers=(epoll_echo_server echo_client asio_echo_server)
[ "$have_go" = 1 ] && peers+=(go_echo_server)
for p in "${peers[@]}"; do
  make -s -C "$PEERS" OUT="$PEERS_OUT" "$PEERS_OUT/$p" || { echo "bench-echo: peer $p did not build" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- 3. compare/echo.sh, once per backend (needs Go: it runs the Go peer itself) ----
for backend in epoll io_uring; do
  if [ "$have_go" = 1 ]; then
    echo "== compare/echo.sh, LioNet backend $backend =="
    "$PEERS/compare/echo.sh" "$server {port} --threads 1 --backend $backend" | tee "$tmp/cmp-$backend.txt"
  fi
done

# ---- 4 and 5: our own interleaved runs with the same helpers ----
source "$PEERS/compare/lib.sh"
cli=$PEERS_OUT/echo_client; ref=$PEERS_OUT/epoll_echo_server; asio=$PEERS_OUT/asio_echo_server
# one run: SERVER_TEMPLATE CONNS [CLIENT] -> qps (0 on errors)
one() { port=$(free_port); start_server "$(fill "$1")" "$port"
  local out
  if [ "${3:-peer}" = ours ]; then
    out=$(taskset -c 1 "$client" -h 127.0.0.1 -p "$port" -c "$2" -s 256 -d "$SECS" 2>&1 | grep '^RESULT')
  else
    out=$(taskset -c 1 "$cli" -p "$port" -c "$2" -s 256 -d "$SECS" 2>&1 | grep '^RESULT')
  fi
  stop_server
  [ "$(echo "$out" | field errors)" = 0 ] && echo "$out" | field qps || echo 0; }
med() { printf '%s\n' "$@" | median; }
: > "$tmp/extra.txt"
for conns in 100 1000; do
  m=(); r=(); a=(); u=()
  for _ in $(seq "$RUNS"); do
    r+=($(one "$ref -p {port}" $conns)); m+=($(one "$server {port} --threads 1" $conns))
    a+=($(one "$asio {port}" $conns))
    [ "$have_go" = 1 ] || u+=($(one "$server {port} --threads 1 --backend io_uring" $conns))
  done
  echo "asio conns=$conns yours=$(med "${m[@]}") ref=$(med "${r[@]}") asio=$(med "${a[@]}") uring=$( [ ${#u[@]} -gt 0 ] && med "${u[@]}" || echo -) runs: ${m[*]} | ${r[*]} | ${a[*]} | ${u[*]:-}" | tee -a "$tmp/extra.txt"
done
pc=(); oc=()
for _ in $(seq "$RUNS"); do
  pc+=($(one "$ref -p {port}" 100 peer)); oc+=($(one "$ref -p {port}" 100 ours))
done
echo "clients conns=100 peer_client=$(med "${pc[@]}") bench_client=$(med "${oc[@]}") runs: ${pc[*]} | ${oc[*]}" | tee -a "$tmp/extra.txt"

# ---- table ----
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
git diff --quiet HEAD -- lionet/net lionet/io bench/bench_server.cc 2>/dev/null || commit="$commit+dirty"
python3 - "$tmp" "$commit" "$cpu" "$load_before" "$RUNS" "$SECS" "$go_note" <<'PYEOF'
import os, re, sys
tmp, commit, cpu, load, runs, secs, go_note = sys.argv[1:8]
def kv(line):
    return dict(t.split("=", 1) for t in line.split() if "=" in t)
def runs_of(line, idx):
    m = re.search(r"\(runs: (.*)\)", line) or re.search(r"runs: (.*)$", line)
    parts = [p.strip() for p in m.group(1).split("|")] if m else []
    return parts[idx] if idx < len(parts) else ""
rows = []  # (conns, server, qps, runs, ref, ratio)
summary = {}
for backend in ("epoll", "io_uring"):
    p = os.path.join(tmp, f"cmp-{backend}.txt")
    if not os.path.exists(p):
        continue
    for line in open(p):
        if not line.startswith("conns="):
            continue
        d = kv(line)
        c = d["conns"]
        ours, ref, go = float(d["yours"]), float(d["epoll_ref"]), float(d["go"])
        if backend == "epoll":
            rows.append((c, 0, "epoll reference (peers, 1 thread)", ref, runs_of(line, 1), ref))
            rows.append((c, 4, "Go net (peers, pinned to CPU 0)", go, runs_of(line, 2), ref))
        rows.append((c, 1 if backend == "epoll" else 2, f"LioNet bench_server, 1 worker, {backend}", ours, runs_of(line, 0), ref))
        key = "" if backend == "epoll" else "uring_"
        summary[f"{key}c{c}_ratio"] = ours / ref if ref else 0
        summary[f"{key}c{c}_vs_go"] = ours / go if go else 0
extra = open(os.path.join(tmp, "extra.txt")).read().splitlines()
client_line = ""
for line in extra:
    d = kv(line)
    if line.startswith("asio"):
        c = d["conns"]
        ours, ref, asio = float(d["yours"]), float(d["ref"]), float(d["asio"])
        parts = line.split("runs: ")[1].split("|")
        rows.append((c, 5, "Boost.Asio (peers, 1 io_context thread)", asio, parts[2].strip(), ref))
        rows.append((c, 6, "LioNet epoll, rerun beside Asio", ours, parts[0].strip(), ref))
        summary[f"c{c}_vs_asio"] = ours / asio if asio else 0
        if d.get("uring", "-") != "-":
            u = float(d["uring"])
            rows.append((c, 2, "LioNet bench_server, 1 worker, io_uring", u, parts[3].strip(), ref))
            summary[f"uring_c{c}_ratio"] = u / ref if ref else 0
        if f"c{c}_ratio" not in summary:
            rows.append((c, 0, "epoll reference (peers, 1 thread)", ref, parts[1].strip(), ref))
            rows.append((c, 1, "LioNet bench_server, 1 worker, epoll", ours, parts[0].strip(), ref))
            summary[f"c{c}_ratio"] = ours / ref if ref else 0
    elif line.startswith("clients"):
        pc, oc = float(d["peer_client"]), float(d["bench_client"])
        summary["client_ratio"] = oc / pc if pc else 0
        client_line = (f"Client check (epoll reference server, 100 connections): peer echo_client {pc:.0f} QPS, "
                       f"LioNet bench_client {oc:.0f} QPS, ratio {oc / pc if pc else 0:.3f} (runs: {line.split('runs: ')[1]}).")
rows.sort()
out = [
    "## Echo (lionet/net): bench_server vs ../shared/peers",
    "",
    f"Produced by `scripts/bench-echo.sh --write` at commit {commit} on {cpu}; load average before: {load}.",
    f"256-byte ping-pong, server pinned to CPU 0 with 1 worker, peer `echo_client` on CPU 1, {runs} interleaved",
    f"runs of {secs} s per row, medians. Ratio = QPS / epoll reference QPS measured in the same comparison",
    "(0.9-1.1 reads as equal). The \"rerun beside Asio\" row is LioNet again in the Asio comparison.",
    "",
    "| Server | Connections | QPS (median) | Runs | vs epoll ref |",
    "|---|---:|---:|---|---:|",
]
for c, _, name, qps, rr, ref in rows:
    out.append(f"| {name} | {c} | {qps:.0f} | {rr} | {qps / ref if ref else 0:.3f} |")
out.append("")
if client_line:
    out.append(client_line)
if go_note:
    out.append(go_note)
open(os.path.join(tmp, "section.md"), "w").write("\n".join(out) + "\n")
errs = sum(1 for k, v in summary.items() if k.endswith("_ratio") and v == 0)
res = "RESULT " + " ".join(f"{k}={v:.3f}" for k, v in sorted(summary.items())) + f" errors={errs}"
open(os.path.join(tmp, "result.txt"), "w").write(res + "\n")
PYEOF
echo
cat "$tmp/section.md"
if [ "$write" -eq 1 ]; then
  "$(dirname "$0")/write-results-section.py" echo "$tmp/section.md" bench/RESULTS.md
  echo "bench-echo: wrote the echo section of bench/RESULTS.md"
fi
echo
cat "$tmp/result.txt"
grep -q ' errors=0$' "$tmp/result.txt"
