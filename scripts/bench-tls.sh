#!/usr/bin/env bash
# scripts/bench-tls.sh: the TLS benchmark, side by side with ../shared/peers (libevent+OpenSSL).
#
# 1. Builds the release preset's bench_ssl_server and bench_ssl_client (skip: --no-build).
# 2. Makes the certificate with scripts/make-test-cert.sh (once, in $CERT_DIR).
# 3. Runs ../shared/peers/compare/tls.sh against bench_ssl_server --threads 1 (server on CPU 0,
#    peer tls_echo_client on CPU 1, RUNS interleaved runs of SECS s): 47 B x 100 and 200
#    connections, 64 KiB x 10, full and resumed handshakes.
# 4. Runs the project's bench_ssl_client (CPU 1) with the earlier report's parameters
#    (200 x 500 x 47 B; 10 x 200 x 64 KiB; 50 x 200 x 64 KiB) against bench_ssl_server and the
#    reference tls_echo_server (CPU 0), interleaved, RUNS runs each.
# 5. Runs testssl once against bench_ssl_server (default configuration) and records the count
#    of findings per severity and the HIGH/CRITICAL ones (skip: --no-testssl).
# Prints the tables; with --write puts them between <!-- tls:begin --> and <!-- tls:end --> of
# bench/RESULTS.md (scripts/write-results-section.py).
# Usage: scripts/bench-tls.sh [--write] [--no-build] [--no-testssl]
# Environment: BUILD_DIR (build/release), JOBS (2), RUNS (3), SECS (4), PEERS_OUT, CERT_DIR.
# Last line: RESULT case1_ratio=.. ... client1_ratio=.. testssl_high=N errors=N
set -euo pipefail
cd "$(dirname "$0")/.."
write=0 build=1 testssl_on=1
for a in "$@"; do
  case "$a" in
    --write) write=1 ;; --no-build) build=0 ;; --no-testssl) testssl_on=0 ;;
    *) echo "usage: $0 [--write] [--no-build] [--no-testssl]" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build/release}
JOBS=${JOBS:-2}
export RUNS=${RUNS:-3} SECS=${SECS:-4} PEERS_OUT=${PEERS_OUT:-/tmp/lionet-peers}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}
CERT_DIR=${CERT_DIR:-/tmp/lionet-bench-tls}
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$JOBS" --target bench_ssl_server bench_ssl_client
fi
server=$BUILD_DIR/bench/bench_ssl_server client=$BUILD_DIR/bench/bench_ssl_client
for b in "$server" "$client"; do [ -x "$b" ] || { echo "bench-tls: $b not built" >&2; exit 1; }; done
scripts/make-test-cert.sh "$CERT_DIR" >/dev/null
cert=$CERT_DIR/cert.pem key=$CERT_DIR/key.pem
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

echo "== compare/tls.sh =="
"$PEERS/compare/tls.sh" "$server {port} {cert} {key} --threads 1" | tee "$tmp/cmp.txt"

source "$PEERS/compare/lib.sh"
ref=$(peer tls_echo_server)
# one SERVER_TEMPLATE CONNS REQS SIZE -> the RESULT line of bench_ssl_client
one() { port=$(free_port); start_server "$(fill "$1")" "$port"
  taskset -c 1 "$client" 127.0.0.1 "$port" "$2" "$3" "$4" 2>&1 | grep '^RESULT' || echo "RESULT errors=1"
  stop_server; }
: > "$tmp/client.txt"
for p in "200 500 47" "10 200 65536" "50 200 65536"; do
  for _ in $(seq "$RUNS"); do
    echo "ref $p $(one "$ref -p {port} -c {cert} -k {key}" $p)" >> "$tmp/client.txt"
    echo "ours $p $(one "$server {port} {cert} {key} --threads 1" $p)" >> "$tmp/client.txt"
  done
done
cat "$tmp/client.txt"

: > "$tmp/testssl.txt"
if [ "$testssl_on" -eq 1 ] && command -v testssl >/dev/null; then
  port=$(free_port); start_server "$server $port $cert $key --threads 1" "$port"
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

commit=$(git rev-parse --short HEAD)
python3 - "$tmp" "$commit" "$load_before" "$RUNS" "$SECS" <<'PYEOF'
import os, re, sys, statistics
tmp, commit, load, runs, secs = sys.argv[1:6]
def kv(s): return dict(t.split("=", 1) for t in s.split() if "=" in t)
out = ["## TLS (lionet/ssl): bench_ssl_server vs libevent+OpenSSL (../shared/peers)", "",
       f"Produced by `scripts/bench-tls.sh --write` at commit {commit}; load average before: {load}.",
       f"Server pinned to CPU 0 with 1 worker, client on CPU 1, {runs} interleaved runs, medians.", "",
       "### compare/tls.sh (peer tls_echo_client; QPS, or handshakes/s for -m hs)", "",
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
echo; cat "$tmp/section.md"
if [ "$write" -eq 1 ]; then scripts/write-results-section.py tls "$tmp/section.md" bench/RESULTS.md; echo "bench-tls: wrote the tls section of bench/RESULTS.md"; fi
echo; cat "$tmp/result.txt"
grep -q ' errors=0$' "$tmp/result.txt"
