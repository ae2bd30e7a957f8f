#!/usr/bin/env bash
# scripts/bench-tls.sh: the TLS benchmark, side by side with the libevent+OpenSSL reference of
# bench/reference.
#
# 1. Builds the release preset's bench_ssl_server and bench_ssl_client (skip: --no-build), and
#    the reference tls_echo_server and tls_echo_client into $REF_OUT.
# 2. Makes the certificate with scripts/make-test-cert.sh (once, in $CERT_DIR).
# 3. bench_ssl_server --threads 1 vs the reference tls_echo_server (server on CPU 0, the
#    reference tls_echo_client on CPU 1, RUNS interleaved runs of SECS s): 47 B x 100 and 200
#    connections, 64 KiB x 10, full and resumed handshakes.
# 4. Runs the project's bench_ssl_client (CPU 1) with the earlier report's parameters
#    (200 x 500 x 47 B; 10 x 200 x 64 KiB; 50 x 200 x 64 KiB) against bench_ssl_server and the
#    reference tls_echo_server (CPU 0), interleaved, RUNS runs each.
# 5. Runs testssl once against bench_ssl_server (default configuration) and records the count
#    of findings per severity and the HIGH/CRITICAL ones (skip: --no-testssl).
# Prints the tables; with --write puts them between <!-- tls:begin --> and <!-- tls:end --> of
# bench/RESULTS.md (scripts/write-results-section.py).
# Usage: scripts/bench-tls.sh [--write] [--no-build] [--quick] [--no-testssl]
#   --quick: RUNS=1 SECS=1 unless set (a smoke run; figures indicative only).
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (4), CERT_DIR
#   (/tmp/lionet-bench-tls), REF_DIR (bench/reference), REF_OUT (/tmp/lionet-ref).
# Last line: RESULT case1_ratio=.. ... client1_ratio=.. testssl_high=N errors=N
BENCH="tls"
# shellcheck source-path=SCRIPTDIR source=lib/bench.sh
source "$(dirname "$0")/lib/bench.sh"
bench_parse "--write --no-build --quick --no-testssl" "$@"
bench_defaults RUNS=3 SECS=4 CERT_DIR=/tmp/lionet-bench-tls
bench_build bench_ssl_server bench_ssl_client
server=$(bench_bin bench_ssl_server)
client=$(bench_bin bench_ssl_client)
ref_server=$(ref tls_echo_server)
ref_client=$(ref tls_echo_client)
scripts/make-test-cert.sh "$CERT_DIR" >/dev/null
cert=$CERT_DIR/cert.pem key=$CERT_DIR/key.pem
bench_start

# ---- 3. the reference client against both servers ----
# hs_run SERVER_TEMPLATE "CLIENT ARGS" -> QPS, or handshakes/s for -m hs (0 on errors)
hs_run() {
  local out
  port=$(free_port)
  start_server "$(fill "$1")" "$port"
  # shellcheck disable=SC2086  # $2: the client's arguments, one word each
  out=$(taskset -c 1 "$ref_client" -p "$port" $2 -d "$SECS" 2>&1 | grep '^RESULT' || true)
  stop_server
  if [ "$(echo "$out" | field errors)" != 0 ]; then echo 0; return; fi
  case "$2" in *"-m hs"*) echo "$out" | field hs_per_s ;; *) echo "$out" | field qps ;; esac
}
echo "== bench_ssl_server vs the reference tls_echo_server (reference tls_echo_client) =="
summary="RESULT" i=0
for args in "-c 100 -s 47" "-c 200 -s 47" "-c 10 -s 65536" "-m hs -c 50 -s 47" "-m hs -R -c 50 -s 47"; do
  m=(); r=(); i=$((i + 1))
  for _ in $(seq "$RUNS"); do
    r+=("$(hs_run "$ref_server -p {port} -c {cert} -k {key}" "$args")")
    m+=("$(hs_run "$server {port} {cert} {key} --threads 1" "$args")")
  done
  mm=$(printf '%s\n' "${m[@]}" | median) rr=$(printf '%s\n' "${r[@]}" | median)
  printf '%-22s yours=%-8s reference=%-8s ratio=%s  (runs: %s | %s)\n' "[$args]" "$mm" "$rr" \
    "$(ratio "$mm" "$rr")" "${m[*]}" "${r[*]}" | tee -a "$tmp/cmp.txt"
  summary="$summary case${i}_ratio=$(ratio "$mm" "$rr")"
done
echo "$summary" | tee -a "$tmp/cmp.txt"

# ---- 4. bench_ssl_client against both servers ----
# one SERVER_TEMPLATE CONNS REQS SIZE -> the RESULT line of bench_ssl_client
one() {
  port=$(free_port)
  start_server "$(fill "$1")" "$port"
  taskset -c 1 "$client" 127.0.0.1 "$port" "$2" "$3" "$4" 2>&1 | grep '^RESULT' || echo "RESULT errors=1"
  stop_server
}
: > "$tmp/client.txt"
for p in "200 500 47" "10 200 65536" "50 200 65536"; do
  for _ in $(seq "$RUNS"); do
    # shellcheck disable=SC2086  # $p: connections, requests, size
    echo "ref $p $(one "$ref_server -p {port} -c {cert} -k {key}" $p)" >> "$tmp/client.txt"
    # shellcheck disable=SC2086
    echo "ours $p $(one "$server {port} {cert} {key} --threads 1" $p)" >> "$tmp/client.txt"
  done
done
cat "$tmp/client.txt"

# ---- 5. testssl ----
: > "$tmp/testssl.txt"
if ! bench_opt --no-testssl && command -v testssl >/dev/null; then
  port=$(free_port)
  start_server "$server $port $cert $key --threads 1" "$port"
  timeout 1200 testssl --quiet --color 0 --warnings batch --jsonfile "$tmp/testssl.json" "127.0.0.1:$port" >/dev/null 2>&1 || true
  stop_server
  python3 - "$tmp/testssl.json" > "$tmp/testssl.txt" <<'PYEOF' || echo "testssl: no JSON output" > "$tmp/testssl.txt"
import json, sys, collections
items = json.load(open(sys.argv[1]))
c = collections.Counter(i.get("severity", "?") for i in items)
print("testssl severities: " + ", ".join(f"{k} {c[k]}" for k in ("CRITICAL", "HIGH", "MEDIUM", "LOW", "WARN") ))
for i in items:
    if i.get("severity") in ("HIGH", "CRITICAL", "MEDIUM"):
        print(f"- {i['severity']} {i['id']}: {i.get('finding','')}")
# A self-signed test certificate always fails these two; they say nothing of the TLS setup.
inherent = {"cert_chain_of_trust", "cert_revocation"}
n = sum(1 for i in items if i.get("severity") in ("HIGH", "CRITICAL") and i["id"] not in inherent)
print(f"HIGH/CRITICAL other than the self-signed certificate's chain of trust and revocation: {n}")
print(f"HIGHCOUNT={n}")
PYEOF
fi
cat "$tmp/testssl.txt"

python3 - "$tmp" "$(bench_commit lionet/ssl lionet/net bench/bench_ssl_server.cc bench/bench_ssl_client.cc)" \
  "$load_before" "$RUNS" "$SECS" <<'PYEOF'
import os, re, sys, statistics
tmp, commit, load, runs, secs = sys.argv[1:6]
def kv(s): return dict(t.split("=", 1) for t in s.split() if "=" in t)
out = ["## TLS (lionet/ssl): bench_ssl_server vs libevent+OpenSSL (bench/reference)", "",
       f"Produced by `scripts/bench-tls.sh --write` at commit {commit}; load average before: {load}.",
       f"Server pinned to CPU 0 with 1 worker, client on CPU 1, {runs} interleaved runs, medians.", "",
       "### Reference client tls_echo_client (QPS, or handshakes/s for -m hs)", "",
       "| Case | LioNet | Reference | Ratio | Runs (LioNet / ref) |", "|---|---:|---:|---:|---|"]
summary = {}
for line in open(os.path.join(tmp, "cmp.txt")):
    m = re.match(r"\[(.*?)\]\s+yours=(\S+)\s+reference=(\S+)\s+ratio=(\S+)\s+\(runs: (.*)\)", line)
    if m:
        out.append(f"| `{m.group(1)}` | {m.group(2)} | {m.group(3)} | {m.group(4)} | {m.group(5).replace(' | ', ' / ')} |")
    if line.startswith("RESULT"):
        summary.update({k: float(v) for k, v in kv(line).items()})
out += ["", "### bench_ssl_client (connections x requests x bytes, all connections at once, handshakes included)", "",
        "| Parameters | Server | QPS | MB/s | Handshakes/s | Elapsed ms | Errors |", "|---|---|---:|---:|---:|---:|---:|"]
rows, errors = {}, 0
for line in open(os.path.join(tmp, "client.txt")):
    who, c, r, s, rest = line.split(" ", 4)
    d = kv(rest); errors += int(float(d.get("errors", 1)))
    rows.setdefault((c, r, s), {}).setdefault(who, []).append(d)
for i, ((c, r, s), by) in enumerate(rows.items(), 1):
    med = {}
    for who in ("ours", "ref"):
        ds = by.get(who, [])
        f = lambda k: statistics.median(float(d.get(k, 0)) for d in ds) if ds else 0
        med[who] = f("qps")
        out.append(f"| {c} x {r} x {s} B | {'LioNet' if who == 'ours' else 'libevent ref'} | {f('qps'):.0f} | {f('mbps'):.1f} | {f('hs_per_s'):.0f} | {f('elapsed_ms'):.0f} | {sum(int(float(d.get('errors', 1))) for d in ds)} |")
    summary[f"client{i}_ratio"] = med["ours"] / med["ref"] if med["ref"] else 0
ts = open(os.path.join(tmp, "testssl.txt")).read().strip()
high = 0
for l in ts.splitlines():
    if l.startswith("HIGHCOUNT="): high = int(l.split("=")[1])
out += ["", "### testssl (default configuration)", ""] + ([l for l in ts.splitlines() if not l.startswith("HIGHCOUNT")] or ["not run"])
open(os.path.join(tmp, "section.md"), "w").write("\n".join(out) + "\n")
zero = sum(1 for k, v in summary.items() if k.endswith("_ratio") and v == 0)
open(os.path.join(tmp, "result.txt"), "w").write("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in sorted(summary.items()))
    + f" testssl_high={high} errors={errors + zero}\n")
PYEOF
bench_section "$tmp/section.md"
bench_result "$(cat "$tmp/result.txt")"
