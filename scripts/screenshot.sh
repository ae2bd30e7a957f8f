#!/usr/bin/env bash
# scripts/screenshot.sh: loads a page in headless Chromium (Debian `chromium`) and saves a
# screenshot, so a person can look at what a browser gets from a LioNet server; then prints
# the HTTP/2 counters of /metrics (a browser uses h2 over HTTPS: the page and its assets
# should show up as streams there).
#
# Usage: scripts/screenshot.sh [URL] [OUT.png]
#   URL      default https://127.0.0.1:8443/ (the shipped conf's HTTPS server, as `make run`
#            starts it). Self-signed certificates are accepted (--ignore-certificate-errors).
#   OUT.png  default screenshot.png
# Environment: METRICS_URL (default http://127.0.0.1:8080/metrics; "" to skip), WINDOW
#   (default 1000,700).
# If nothing answers at the default URL and build/app/bin/lionet exists (`make run` builds it),
# the binary is started on the shipped conf/ for the screenshot and stopped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
url=${1:-https://127.0.0.1:8443/}
out=${2:-screenshot.png}
metrics=${METRICS_URL-http://127.0.0.1:8080/metrics}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "screenshot.sh: chromium is not installed (apt-get install chromium; scripts/install-deps.sh does)" >&2
  exit 2
fi

answers() { curl -sk -o /dev/null --max-time 2 "$1"; }
started=""
if ! answers "$url"; then
  if [ $# -eq 0 ] && [ -x build/app/bin/lionet ]; then
    build/app/bin/lionet -c conf >/tmp/lionet-screenshot.log 2>&1 &
    started=$!
    for _ in $(seq 50); do answers "$url" && break; sleep 0.1; done
  fi
  if ! answers "$url"; then
    echo "screenshot.sh: nothing answers at $url (start the server first: make run)" >&2
    [ -n "$started" ] && kill "$started"
    exit 1
  fi
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"; [ -n "$started" ] && kill "$started" 2>/dev/null || true' EXIT
flags=(--headless=new --disable-gpu --disable-dev-shm-usage --ignore-certificate-errors --no-first-run
       --user-data-dir="$profile" --window-size="${WINDOW:-1000,700}" --screenshot="$out")
[ "$(id -u)" = 0 ] && flags+=(--no-sandbox)  # Chromium refuses to run as root with its sandbox
rm -f "$out"
timeout 60 "$browser" "${flags[@]}" "$url" >"$profile/chromium.log" 2>&1 || true
if [ ! -s "$out" ]; then
  echo "screenshot.sh: chromium wrote no screenshot; its output:" >&2
  cat "$profile/chromium.log" >&2
  exit 1
fi
echo "screenshot: $out ($(stat -c %s "$out") bytes) of $url"
if [ -n "$metrics" ] && curl -s --max-time 5 "$metrics" >"$profile/metrics" 2>/dev/null; then
  grep -E '^lionet_http2_(connections|streams)_total' "$profile/metrics" || true
fi
