#!/bin/bash
# nginx/run.sh - nginx as the reference of LioNet's HTTP benchmarks (static files, hello).
#
# What it stands for: the production static-file server, configured plainly (nginx.conf.in):
# one worker, sendfile on, tcp_nopush, access_log off, unlimited keep-alive, 127.0.0.1 only.
# It runs in the foreground, pinned to one CPU, until it is killed (SIGTERM or SIGINT); the
# process that runs this script becomes nginx's master, so its PID and children are nginx's.
#
# Usage: [H2=1] [PROXY=host:port] run.sh ROOT_DIR HTTP_PORT [HTTPS_PORT CERT KEY] [CPU]
#   PROXY=h:p   a reverse proxy instead (proxy.conf.in): every request to h:p over a keep-alive
#               pool of 64; ROOT_DIR is then unused
#   H2=1        HTTP/2 (`listen ... http2`): h2c with prior knowledge on HTTP_PORT (nginx 1.22
#               then speaks only HTTP/2 there), h2 by ALPN on HTTPS_PORT
#   ROOT_DIR    document root (its files must be readable by the worker user, e.g. nobody)
#   HTTP_PORT   plain HTTP port
#   HTTPS_PORT CERT KEY  also serve HTTPS on that port (empty strings: no HTTPS)
#   CPU         the CPU to pin nginx to (default 0)
# Needs the Debian package nginx-light (or any nginx >= 1.19.5 with the ssl module).
set -euo pipefail
usage() { echo "usage: run.sh ROOT_DIR HTTP_PORT [HTTPS_PORT CERT KEY] [CPU]" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 2 ] || usage
root=$(cd "$1" && pwd) || usage
port=$2 tls_port=${3:-} cert=${4:-} key=${5:-} cpu=${6:-0}
command -v nginx >/dev/null || { echo "run.sh: nginx is not installed (Debian package nginx-light)" >&2; exit 1; }

# Run directories of instances that have exited (nginx removes its pid file when it stops).
base=${TMPDIR:-/tmp}
for old in "$base"/lionet-ref-nginx.*; do
  [ -d "$old" ] || continue
  if [ -f "$old/nginx.pid" ] && kill -0 "$(cat "$old/nginx.pid" 2>/dev/null)" 2>/dev/null; then continue; fi
  [ -n "$(find "$old" -maxdepth 0 -mmin +1)" ] && rm -rf "$old"
done

http2=""
[ "${H2:-0}" = 1 ] && http2=" http2"
dir=$(mktemp -d "$base/lionet-ref-nginx.XXXXXX")
chmod 755 "$dir"
mkdir -p "$dir/temp" "$dir/conf.d"
fill() {
  sed -e "s|@RUN_DIR@|$dir|g" -e "s|@ROOT@|$root|g" -e "s|@PORT@|$port|g" \
      -e "s|@TLS_PORT@|$tls_port|g" -e "s|@CERT@|$cert|g" -e "s|@KEY@|$key|g" -e "s|@HTTP2@|$http2|g" "$1"
}
if [ -n "$tls_port" ]; then
  [ -f "$cert" ] && [ -f "$key" ] || { echo "run.sh: HTTPS needs CERT and KEY files" >&2; exit 2; }
  cert=$(realpath "$cert") key=$(realpath "$key")
  fill "$here/tls-server.conf.in" >"$dir/conf.d/tls.conf"
fi
if [ -n "${PROXY:-}" ]; then
  fill "$here/proxy.conf.in" | sed -e "s|@PROXY@|$PROXY|g" >"$dir/nginx.conf"
else
  fill "$here/nginx.conf.in" >"$dir/nginx.conf"
fi
exec taskset -c "$cpu" nginx -e "$dir/error.log" -p "$dir/" -c "$dir/nginx.conf"
