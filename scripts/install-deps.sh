#!/usr/bin/env bash
# Installs the Debian 12 packages LioNet needs to build, test and benchmark.
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
)

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
