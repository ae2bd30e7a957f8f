#!/usr/bin/env bash
# scripts/bench-echo.sh: the echo benchmark, side by side with the reference programs of
# bench/reference.
#
# 1. Builds the release preset's bench_server and bench_client.
# 2. Builds the echo references (epoll_echo_server, echo_client, Boost.Asio, Go) into $REF_OUT.
#    Needs build-essential and libboost-dev; Go needs `go` (Debian golang-go): if it is missing
#    and we are root, golang-go is installed with apt-get, otherwise the Go column is skipped
#    with a note.
# 3. For bench_server with the epoll backend and with io_uring: LioNet vs the epoll reference vs
#    Go, 256 B, 100 and 1000 connections, 1 worker, server on CPU 0, the reference echo_client on
#    CPU 1, RUNS interleaved runs of SECS s (needs Go; without it io_uring runs in step 4).
#    Beside the io_uring backend, the completion-based io_uring reference (uring_echo_server).
# 4. Runs Boost.Asio interleaved with the epoll reference and LioNet (same shape).
# 5. Checks the clients: bench_client and the reference echo_client against the epoll
#    reference, interleaved, 100 connections; their ratio should be ~1 (within noise).
# Prints a markdown table (server, connections, median QPS, runs, ratio to the epoll
# reference from the same script run), and with --write puts it into bench/RESULTS.md between
# <!-- echo:begin --> and <!-- echo:end --> (created if absent; the rest is kept).
#
# Usage: scripts/bench-echo.sh [--write] [--no-build] [--quick]
#   --quick: RUNS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (4), REF_DIR
#   (bench/reference), REF_OUT (/tmp/lionet-ref).
# Last line: RESULT c100_ratio=.. c1000_ratio=.. uring_c100_ratio=.. uring_ref_c100_ratio=.. ... errors=N
BENCH="echo"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick" "$@"
bench_defaults RUNS=3 SECS=4

# ---- dependencies ----
missing=()
command -v gcc >/dev/null && command -v g++ >/dev/null && command -v make >/dev/null || missing+=(build-essential)
[ -f /usr/include/boost/asio.hpp ] || missing+=(libboost-dev)  # headers only (any libboost1.*-dev)
[ ${#missing[@]} -eq 0 ] || bench_die "missing Debian packages: ${missing[*]}"
have_go=1
bench_get_go || have_go=0
go_note=""
[ "$have_go" = 1 ] || go_note="Go was not installed (golang-go), so the Go column is missing."

# ---- build ----
bench_build bench_server bench_client
server=$(bench_bin bench_server)
client=$(bench_bin bench_client)
cli=$(ref echo_client)
epoll_ref=$(ref epoll_echo_server)
uring_ref=$(ref uring_echo_server)
asio=$(ref asio_echo_server)
gosrv=""
[ "$have_go" = 1 ] && gosrv=$(ref go_echo_server)
bench_start

# one SERVER_TEMPLATE CONNS [ours]: one run of SECS s, 256 B, the reference echo_client (or
# bench_client with "ours") on CPU 1 -> QPS (0 on errors)
one() {
  local out
  port=$(free_port)
  start_server "$(fill "$1")" "$port"
  if [ "${3:-ref}" = ours ]; then
    out=$(taskset -c 1 "$client" -h 127.0.0.1 -p "$port" -c "$2" -s 256 -d "$SECS" 2>&1 | grep '^RESULT' || true)
  else
    out=$(taskset -c 1 "$cli" -p "$port" -c "$2" -s 256 -d "$SECS" 2>&1 | grep '^RESULT' || true)
  fi
  stop_server
  if [ "$(echo "$out" | field errors)" = 0 ]; then echo "$out" | field qps; else echo 0; fi
}
med() { printf '%s\n' "$@" | median; }

# ---- 3. LioNet vs the epoll reference vs Go, once per backend ----
for backend in epoll io_uring; do
  [ "$have_go" = 1 ] || continue
  echo "== LioNet backend $backend vs the epoll reference and Go =="
  for conns in 100 1000; do
    m=(); r=(); g=(); q=()
    for _ in $(seq "$RUNS"); do
      r+=("$(one "$epoll_ref -p {port}" "$conns")")
      m+=("$(one "$server {port} --threads 1 --backend $backend" "$conns")")
      g+=("$(one "$gosrv 127.0.0.1:{port}" "$conns")")
      # Beside the io_uring backend: what io_uring gives here with no runtime in the way.
      [ "$backend" = io_uring ] && q+=("$(one "$uring_ref -p {port}" "$conns")")
    done
    mm=$(med "${m[@]}") rr=$(med "${r[@]}") gg=$(med "${g[@]}") qq=-
    [ ${#q[@]} -eq 0 ] || qq=$(med "${q[@]}")
    printf 'conns=%-5s yours=%-8s epoll_ref=%-8s go=%-8s uring_ref=%-8s yours/ref=%s yours/go=%s  (runs: %s | %s | %s | %s)\n' \
      "$conns" "$mm" "$rr" "$gg" "$qq" "$(ratio "$mm" "$rr")" "$(ratio "$mm" "$gg")" "${m[*]}" "${r[*]}" "${g[*]}" "${q[*]:-}"
  done | tee "$tmp/cmp-$backend.txt"
done

# ---- 4 and 5: Boost.Asio, and the client check ----
: > "$tmp/extra.txt"
for conns in 100 1000; do
  m=(); r=(); a=(); u=()
  for _ in $(seq "$RUNS"); do
    r+=("$(one "$epoll_ref -p {port}" "$conns")"); m+=("$(one "$server {port} --threads 1" "$conns")")
    a+=("$(one "$asio {port}" "$conns")")
    [ "$have_go" = 1 ] || u+=("$(one "$server {port} --threads 1 --backend io_uring" "$conns")")
  done
  uring=-
  [ ${#u[@]} -eq 0 ] || uring=$(med "${u[@]}")
  echo "asio conns=$conns yours=$(med "${m[@]}") ref=$(med "${r[@]}") asio=$(med "${a[@]}") uring=$uring runs: ${m[*]} | ${r[*]} | ${a[*]} | ${u[*]:-}" | tee -a "$tmp/extra.txt"
done
pc=(); oc=()
for _ in $(seq "$RUNS"); do
  pc+=("$(one "$epoll_ref -p {port}" 100 ref)"); oc+=("$(one "$epoll_ref -p {port}" 100 ours)")
done
echo "clients conns=100 peer_client=$(med "${pc[@]}") bench_client=$(med "${oc[@]}") runs: ${pc[*]} | ${oc[*]}" | tee -a "$tmp/extra.txt"

# ---- table ----
python3 - "$tmp" "$(bench_commit lionet/net lionet/io bench/bench_server.cc)" "$(bench_cpu)" "$load_before" \
  "$RUNS" "$SECS" "$go_note" <<'PYEOF'
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
            rows.append((c, 0, "epoll reference (reference, 1 thread)", ref, runs_of(line, 1), ref))
            rows.append((c, 4, "Go net (reference, pinned to CPU 0)", go, runs_of(line, 2), ref))
        rows.append((c, 1 if backend == "epoll" else 2, f"LioNet bench_server, 1 worker, {backend}", ours, runs_of(line, 0), ref))
        if d.get("uring_ref", "-") != "-":
            q = float(d["uring_ref"])
            rows.append((c, 3, "io_uring reference (reference, completion-based, 1 thread)", q, runs_of(line, 3), ref))
            summary[f"uring_ref_c{c}_ratio"] = q / ref if ref else 0
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
        rows.append((c, 5, "Boost.Asio (reference, 1 io_context thread)", asio, parts[2].strip(), ref))
        rows.append((c, 6, "LioNet epoll, rerun beside Asio", ours, parts[0].strip(), ref))
        summary[f"c{c}_vs_asio"] = ours / asio if asio else 0
        if d.get("uring", "-") != "-":
            u = float(d["uring"])
            rows.append((c, 2, "LioNet bench_server, 1 worker, io_uring", u, parts[3].strip(), ref))
            summary[f"uring_c{c}_ratio"] = u / ref if ref else 0
        if f"c{c}_ratio" not in summary:
            rows.append((c, 0, "epoll reference (reference, 1 thread)", ref, parts[1].strip(), ref))
            rows.append((c, 1, "LioNet bench_server, 1 worker, epoll", ours, parts[0].strip(), ref))
            summary[f"c{c}_ratio"] = ours / ref if ref else 0
    elif line.startswith("clients"):
        pc, oc = float(d["peer_client"]), float(d["bench_client"])
        summary["client_ratio"] = oc / pc if pc else 0
        client_line = (f"Client check (epoll reference server, 100 connections): reference echo_client {pc:.0f} QPS, "
                       f"LioNet bench_client {oc:.0f} QPS, ratio {oc / pc if pc else 0:.3f} (runs: {line.split('runs: ')[1]}).")
rows.sort()
out = [
    "## Echo (lionet/net): bench_server vs bench/reference",
    "",
    f"Produced by `scripts/bench-echo.sh --write` at commit {commit} on {cpu}; load average before: {load}.",
    f"256-byte ping-pong, server pinned to CPU 0 with 1 worker, reference `echo_client` on CPU 1, {runs} interleaved",
    f"runs of {secs} s per row, medians. Ratio = QPS / epoll reference QPS measured in the same comparison",
    "(0.9-1.1 reads as equal). The \"rerun beside Asio\" row is LioNet again in the Asio comparison. The io_uring",
    "reference (bench/reference/echo/uring_echo_server.c: recv and send SQEs, multishot accept, one",
    "io_uring_enter per loop, SINGLE_ISSUER + DEFER_TASKRUN) runs in the io_uring backend's comparison.",
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
bench_section "$tmp/section.md"
bench_result "$(cat "$tmp/result.txt")"
