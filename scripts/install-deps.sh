#!/usr/bin/env bash
# Installs the Debian 12 packages LioNet needs to build, test and benchmark.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds the benchmark references' tools)
# Idempotent: asks dpkg first and prints nothing when every package is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost-context-dev   # fiber switch (fcontext)
  libboost-fiber-dev     # benchmark peer only
  libyaml-cpp-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  liburing-dev libaio-dev   # io/ and file/ backends
  python3                   # benchmark table scripts
  libboost-dev libevent-dev libssl-dev   # building the ../shared/peers reference programs
  # Third-party blocking clients and servers that the hook tests run against (127.0.0.1 only)
  redis-server libhiredis-dev libcurl4-openssl-dev
  openssl curl             # ssl/ and http/ interop tests (s_client, curl), test certificates
  wrk netcat-openbsd       # app/ end-to-end tests: load during SIGTERM, echo
  clang libclang-rt-14-dev # libFuzzer targets (HTTP parser, chunked decoder, config, segment recovery)
)

# Benchmark-only tools (references and load generators), installed with --bench.
BENCH_PACKAGES=(
  fio nginx-light       # file IO and HTTP references
  testssl.sh            # TLS configuration audit run by the TLS benchmark script
  golang-go             # Go peers in ../shared/peers
  gnuplot-nox           # benchmark report charts
)
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=("${BENCH_PACKAGES[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
