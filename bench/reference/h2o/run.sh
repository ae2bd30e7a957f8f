#!/bin/bash
# h2o/run.sh - h2o as the reference of LioNet's HTTP/2 benchmarks (static files).
#
# What it stands for: the HTTP/2 server engineers point to (Debian package h2o, 2.2.5 on
# Debian 12), configured plainly: one thread, `file.dir` on ROOT_DIR, no access log, 127.0.0.1
# only; h2c (prior knowledge) and HTTP/1.1 on HTTP_PORT, h2 by ALPN on HTTPS_PORT. It runs in
# the foreground, pinned to one CPU, until it is killed (SIGTERM or SIGINT); the process that
# runs this script becomes h2o's first process, which forks the server (and, with HTTPS, the
# server forks its key process): start it with setsid and stop the whole process group.
#
# Usage: run.sh ROOT_DIR HTTP_PORT [HTTPS_PORT CERT KEY] [CPU]
#   CPU   the CPU to pin h2o to (default 0)
set -euo pipefail
usage() { echo "usage: run.sh ROOT_DIR HTTP_PORT [HTTPS_PORT CERT KEY] [CPU]" >&2; exit 2; }
[ $# -ge 2 ] || usage
root=$(cd "$1" && pwd) || usage
port=$2 tls_port=${3:-} cert=${4:-} key=${5:-} cpu=${6:-0}
command -v h2o >/dev/null || { echo "run.sh: h2o is not installed (Debian package h2o)" >&2; exit 1; }
base=${TMPDIR:-/tmp}
for old in "$base"/lionet-ref-h2o.*; do  # configurations of instances that have exited
  [ -d "$old" ] && [ -n "$(find "$old" -maxdepth 0 -mmin +1)" ] && rm -rf "$old"
done
dir=$(mktemp -d "$base/lionet-ref-h2o.XXXXXX")
{
  echo "num-threads: 1"
  echo "listen:"
  echo "  host: 127.0.0.1"
  echo "  port: $port"
  if [ -n "$tls_port" ]; then
    [ -f "$cert" ] && [ -f "$key" ] || { echo "run.sh: HTTPS needs CERT and KEY files" >&2; exit 2; }
    echo "listen:"
    echo "  host: 127.0.0.1"
    echo "  port: $tls_port"
    echo "  ssl:"
    echo "    certificate-file: $(realpath "$cert")"
    echo "    key-file: $(realpath "$key")"
  fi
  echo "hosts:"
  echo "  default:"
  echo "    paths:"
  echo "      /:"
  echo "        file.dir: $root"
} >"$dir/h2o.conf"
exec taskset -c "$cpu" h2o -c "$dir/h2o.conf"
