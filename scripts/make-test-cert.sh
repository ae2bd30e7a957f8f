#!/bin/bash
# Makes a self-signed RSA-2048 certificate for tests, benchmarks and `make run`.
# Usage: scripts/make-test-cert.sh OUT_DIR [HOST_NAME]
#   Writes OUT_DIR/cert.pem and OUT_DIR/key.pem (mode 600) for HOST_NAME (default localhost):
#   CN=HOST_NAME, subjectAltName DNS:HOST_NAME (+ IP:127.0.0.1 for localhost), 1 year (testssl rates longer validity HIGH).
# Idempotent: if both files exist it does nothing (never overwrites); one without the other is
# an error. Prints the two paths.
set -euo pipefail
out=${1:?usage: make-test-cert.sh OUT_DIR [HOST_NAME]}
name=${2:-localhost}
cert=$out/cert.pem key=$out/key.pem
if [ -f "$cert" ] && [ -f "$key" ]; then echo "$cert $key"; exit 0; fi
if [ -f "$cert" ] || [ -f "$key" ]; then
  echo "make-test-cert.sh: only one of $cert and $key exists; remove it or provide both" >&2; exit 1
fi
mkdir -p "$out"
san="DNS:$name"
[ "$name" = localhost ] && san="$san,IP:127.0.0.1"
tmp=$(mktemp -d "$out/.mkcert.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 365 -subj "/CN=$name" \
  -addext "subjectAltName=$san" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" >/dev/null 2>&1 ||
  { echo "make-test-cert.sh: openssl req failed" >&2; exit 1; }
chmod 600 "$tmp/key.pem"
# Rename the key last: a concurrent caller sees either nothing or both files complete.
mv "$tmp/cert.pem" "$cert"
mv "$tmp/key.pem" "$key"
echo "$cert $key"
