#!/usr/bin/env bash
# Installs the Debian 12 packages LioNet needs to build, test and benchmark.
# Usage: scripts/install-deps.sh [--run | --bench]
#   --run    only what building and running the lionet binary needs (make run)
#   (none)   that and the test tooling (make test)
#   --bench  that and the benchmark references' tools (make bench-report)
# Idempotent: asks dpkg first and prints nothing when every package is present.
set -euo pipefail

# What building and running the lionet binary needs (`make run`, --run).
RUN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost-context-dev   # fiber switch (fcontext)
  libyaml-cpp-dev libspdlog-dev libfmt-dev
  liburing-dev libaio-dev   # io/ and file/ backends
  libssl-dev             # ssl/ (TLS), the self-signed certificate of the shipped conf/
  libnghttp2-dev         # http2/ (frames, HPACK, stream states)
  libdw-dev libunwind-dev  # fiber/: stacks in fiber dumps (libdw names frames, libunwind walks them)
  libgoogle-perftools4   # app/: the pprof route (gperftools' libprofiler, loaded with dlopen)
  zlib1g-dev             # websocket/ permessage-deflate; kafka/ gzip batches
  liblz4-dev             # kafka/: lz4-compressed record batches
  libzstd-dev            # kafka/: zstd-compressed record batches
  libsnappy-dev          # kafka/: snappy-compressed record batches
  libsystemd-dev         # app/: sd_notify readiness, watchdog, socket activation (LIONET_WITH_SYSTEMD)
  libcrypt-dev           # http/auth.cc: bcrypt htpasswd entries checked by libxcrypt's crypt_rn
)

# What building and running the tests needs besides (`make test`, the default).
TEST_PACKAGES=(
  mold                   # linker of the test programs (CMakeLists.txt LIONET_LINKER; GNU ld without it)
  libboost-fiber-dev     # benchmark peer only (the bench/ targets build with the tests)
  libwslay-dev           # benchmark reference only: bench/websocket_frame_bench.cc
  libgtest-dev libgmock-dev libbenchmark-dev
  python3                   # benchmark table scripts, the hook tests' HTTP server
  python3-venv              # the test venv (below): Python websockets for the websocket tests
  nodejs                    # Node `ws` (below), the websocket tests' second third-party peer
  libboost-dev libevent-dev   # building the benchmark reference programs
  # Third-party blocking clients and servers that the hook tests run against (127.0.0.1 only)
  redis-server libhiredis-dev libcurl4-openssl-dev
  postgresql libpq5 libpq-dev  # libpq tests and examples/deadlines: the tests run their own server (initdb, private port)
  mariadb-server libmariadb-dev  # MariaDB C client test: the test runs its own mariadbd (private datadir and port)
  openssl curl             # ssl/ and http/ interop tests (s_client, curl), test certificates
  apache2-utils            # htpasswd -B: the bcrypt htpasswd files of the HTTP authentication tests
  gzip brotli zstd         # precompressed static files (tests make .gz/.br/.zst siblings)
  nghttp2-client           # http2/ interop tests (nghttp, h2load)
  chromium                 # headless browser test of the shipped page over h2 (scripts/screenshot.sh)
  golang-go                # builds h2spec (below) and the Go references in bench/reference; go tool pprof (tests/app pprof)
  gdb                      # tests/gdb: scripts/gdb/lionet.py on a core file and a live process
  wrk netcat-openbsd       # app/ end-to-end tests: load during SIGTERM, echo
  nginx-light              # the proxy tests' third-party upstream (run by the test, private port), bench reference
  clang libclang-rt-14-dev # libFuzzer targets (HTTP parser, chunked decoder, config, segment recovery)
  kcat                     # kafka/ interop tests: a librdkafka producer and consumer (plaintext and SASL_SSL)
  librdkafka-dev           # kafka/ consumer-group test and bench/kafka (librdkafka's C and C++ API)
  systemd                  # systemd-socket-activate: the socket-activation test (no systemd as PID 1 needed)
  dpkg-dev fakeroot lintian  # make package (dpkg-shlibdeps, dpkg-deb) and its test, lintian on the .deb
)

# Benchmark-only tools (references and load generators), installed with --bench.
BENCH_PACKAGES=(
  fio                   # file IO reference (nginx, the HTTP reference, is a test package)
  h2o nghttp2-server    # HTTP/2 references of scripts/bench-http2.sh (h2o; nghttpd, libnghttp2's own server)
  testssl.sh            # TLS configuration audit run by the TLS benchmark script
  gnuplot-nox           # benchmark report charts
  openjdk-17-jre-headless maven  # scripts/bench-kafka.sh --with-kafka: the Apache Kafka reference broker
)
PACKAGES=("${RUN_PACKAGES[@]}")
case "${1:-}" in
  --run) ;;
  --bench) PACKAGES+=("${TEST_PACKAGES[@]}" "${BENCH_PACKAGES[@]}") ;;
  "") PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "install-deps: unknown option $1 (--run | --bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
install_missing() {
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Server packages are installed for the tests, which start their own instances on private ports:
# none may start (or stay enabled) as a side effect. policy-rc.d is Debian's switch that makes
# invoke-rc.d refuse every service start during this install; enabled units are disabled after.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null && $SUDO chmod +x "$policy" && added_policy=1
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[ "$added_policy" -eq 1 ] && $SUDO rm -f "$policy"
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  for pkg_unit in redis-server:redis-server postgresql:postgresql mariadb-server:mariadb nginx-light:nginx h2o:h2o; do
    # only the services of packages this run installed: never one the user had already
    [[ " ${missing[*]} " == *" ${pkg_unit%%:*} "* ]] && $SUDO systemctl disable --now "${pkg_unit##*:}" >/dev/null 2>&1 || true
  done
fi
}
[ ${#missing[@]} -eq 0 ] || install_missing

# h2spec, the HTTP/2 conformance tester the http2 tests run (tests and benchmarks only): built
# with Debian's Go from the module in tests/tools/h2spec, which pins dependencies that Go 1.19
# can build (`go install ...h2spec@latest` cannot).
if [ "${1:-}" != "--run" ] && ! command -v h2spec >/dev/null; then
  echo "install-deps: building h2spec (tests/tools/h2spec)"
  here=$(cd "$(dirname "$0")/.." && pwd)
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  tmpbin=$(mktemp -d)
  (cd "$here/tests/tools/h2spec" && GOFLAGS=-mod=mod GOPATH="${GOPATH:-$HOME/go}" go build -o "$tmpbin/h2spec" \
    github.com/summerwind/h2spec/cmd/h2spec) && $SUDO install -m 755 "$tmpbin/h2spec" /usr/local/bin/h2spec
  rm -rf "$tmpbin"
fi

# Test-only third-party peers of tests/websocket and tests/app, installed into a prefix this script owns
# (never into the system's Python: Debian 12 refuses pip there, PEP 668). The tests find them at
# these paths through the CMake cache variables LIONET_TEST_PYTHON and LIONET_TEST_NODE_PATH
# (tests/CMakeLists.txt), whose defaults are these paths. Each is checked first, so a run with
# everything present costs three interpreter starts and no network.
TEST_PREFIX=/opt/lionet-test
WEBSOCKETS_VERSION=13.1   # Python websockets: ws_peer.py uses its sync API (13.x)
AIOHTTP_VERSION=3.12.15   # Python aiohttp: tests/app/proxy_upstream.py's upstream (app proxy tests)
KAFKA_PYTHON_VERSION=3.0.12  # kafka-python: tests/kafka/kafka_python_check.py (idempotent producer by default), kafka_python_sasl_check.py (SASL_SSL)
NODE_WS_VERSION=8.18.0    # Node ws: ws_peer.js
if [ "${1:-}" != "--run" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  venv=$TEST_PREFIX/venv
  if ! "$venv/bin/python3" -c "import websockets, sys; sys.exit(websockets.__version__ != '$WEBSOCKETS_VERSION')" 2>/dev/null; then
    echo "install-deps: installing Python websockets $WEBSOCKETS_VERSION into $venv"
    # Debian's interpreter by its path (a pyenv or conda python3 earlier on PATH is not what
    # python3-venv was installed for).
    "$venv/bin/python3" -c '' 2>/dev/null || $SUDO /usr/bin/python3 -m venv --clear "$venv"
    $SUDO "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "websockets==$WEBSOCKETS_VERSION"
  fi
  if ! "$venv/bin/python3" -c "import aiohttp, sys; sys.exit(aiohttp.__version__ != '$AIOHTTP_VERSION')" 2>/dev/null; then
    echo "install-deps: installing Python aiohttp $AIOHTTP_VERSION into $venv"
    $SUDO "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "aiohttp==$AIOHTTP_VERSION"
  fi
  if ! "$venv/bin/python3" -c "import importlib.metadata as m, sys; sys.exit(m.version('kafka-python') != '$KAFKA_PYTHON_VERSION')" 2>/dev/null; then
    echo "install-deps: installing kafka-python $KAFKA_PYTHON_VERSION into $venv"
    $SUDO "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "kafka-python==$KAFKA_PYTHON_VERSION"
  fi
  node_prefix=$TEST_PREFIX/node
  if ! [ "$(node -p "require('$node_prefix/node_modules/ws/package.json').version" 2>/dev/null)" = "$NODE_WS_VERSION" ]; then
    echo "install-deps: installing Node ws $NODE_WS_VERSION into $node_prefix"
    # Debian's nodejs has npm as a package of its own; NodeSource's nodejs ships it inside.
    if ! command -v npm >/dev/null; then
      $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
    fi
    $SUDO mkdir -p "$node_prefix"
    $SUDO npm install --silent --no-audit --no-fund --prefix "$node_prefix" "ws@$NODE_WS_VERSION" >/dev/null
  fi
fi
