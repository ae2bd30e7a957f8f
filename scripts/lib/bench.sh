# shellcheck shell=bash
# scripts/lib/bench.sh: what the benchmark scripts (scripts/bench-*.sh) have in common.
# Sourced, never run. A script sets BENCH (its name: messages, and its section of
# bench/RESULTS.md) and sources this file, which turns on `set -euo pipefail`, moves to the
# repository root and installs an exit trap; then typically:
#
#   bench_parse "--write --no-build --quick" "$@"  # the flags it takes ("..." = keep the rest)
#   bench_defaults RUNS=3 SECS=4                  # the environment wins; --quick: RUNS=SECS=1
#   bench_build bench_server bench_client         # cmake release preset, unless --no-build
#   server=$(bench_bin bench_server)              # absolute path, or stop if not built
#   cli=$(ref echo_client)                        # a reference program, built on demand
#   bench_start                                   # $tmp (removed at exit) and $load_before
#   ... measure, write "$tmp/section.md" ...
#   bench_section "$tmp/section.md"               # print it; with --write into bench/RESULTS.md
#   bench_result "RESULT ... errors=N"            # the last line; fails unless errors=0
#
# Environment read here: BUILD_DIR (build/release), JOBS (2, build parallelism), REF_DIR (the
# reference programs' sources, bench/reference of this repository), REF_OUT (where they are
# built: /tmp/lionet-ref; /tmp/lionet-ref-<checksum of REF_DIR> for another REF_DIR).
# Variables set: REPO, write, build, quick (0/1), BENCH_ARGS (arguments kept by "..."), tmp,
# load_before, SERVER_PID (the server start_server started).
# A script that stops with a non-zero status before bench_result ends with `RESULT errors=1`.
set -euo pipefail

: "${BENCH:?set BENCH (the benchmark name) before sourcing scripts/lib/bench.sh}"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
BUILD_DIR=${BUILD_DIR:-build/release}
JOBS=${JOBS:-2}
REF_DIR=$(realpath -m "${REF_DIR:-$REPO/bench/reference}")
if [ -z "${REF_OUT:-}" ]; then
  # Another REF_DIR gets its own output directory: make would take the other's builds as fresh.
  REF_OUT=/tmp/lionet-ref
  [ "$REF_DIR" = "$REPO/bench/reference" ] || REF_OUT=/tmp/lionet-ref-$(printf '%s' "$REF_DIR" | cksum | cut -d' ' -f1)
fi
REF_OUT=$(realpath -m "$REF_OUT")
export REF_DIR REF_OUT
write=0 build=1 quick=0
BENCH_ARGS=()
declare -A BENCH_OPTS=()
BENCH_FLAGS=""
BENCH_AT_EXIT=""
BENCH_RESULT_PRINTED=0
tmp=""
SERVER_PID=""

# ---- messages, arguments, defaults ----------------------------------------------------------

bench_die() { echo "bench-$BENCH: $*" >&2; exit 1; }

# bench_usage [EXTRA]: the usage line from the flags given to bench_parse; exits 2.
bench_usage() {
  local f line="usage: scripts/bench-$BENCH.sh"
  for f in $BENCH_FLAGS; do
    [ "$f" = ... ] || line+=" [$f]"
  done
  if [ -n "${1:-}" ]; then line+=" $1"; elif [[ " $BENCH_FLAGS " == *" ... "* ]]; then line+=" [ARGS...]"; fi
  echo "$line" >&2
  exit 2
}

# bench_parse "FLAGS" ARGS...: FLAGS lists the switches the script takes. --write, --no-build and
# --quick set write=1, build=0, quick=1; any other listed switch is asked with bench_opt. With
# "..." in FLAGS, other arguments are kept in BENCH_ARGS; without it they are a usage error.
bench_parse() {
  BENCH_FLAGS=$1
  shift
  local a
  for a in "$@"; do
    if [[ "$a" == --* && " $BENCH_FLAGS " == *" $a "* ]]; then
      case "$a" in
        --write) write=1 ;;
        --no-build) build=0 ;;
        --quick) quick=1 ;;
        *) BENCH_OPTS[$a]=1 ;;
      esac
    elif [[ " $BENCH_FLAGS " == *" ... "* ]]; then
      BENCH_ARGS+=("$a")
    else
      bench_usage ""
    fi
  done
}

# bench_opt FLAG: true if the script-specific switch FLAG was given.
bench_opt() { [ -n "${BENCH_OPTS[$1]:-}" ]; }

# bench_defaults NAME=VALUE...: sets and exports each NAME not already set in the environment.
# With --quick, RUNS and SECS default to 1 instead.
bench_defaults() {
  local kv name value
  for kv in "$@"; do
    name=${kv%%=*} value=${kv#*=}
    if [ "$quick" = 1 ] && { [ "$name" = RUNS ] || [ "$name" = SECS ]; }; then value=1; fi
    [ -n "${!name:-}" ] || printf -v "$name" '%s' "$value"
    export "${name?}"
  done
}

# bench_need COMMAND...: stops with a message unless every COMMAND is installed.
bench_need() {
  local c missing=()
  for c in "$@"; do command -v "$c" >/dev/null || missing+=("$c"); done
  [ ${#missing[@]} -eq 0 ] || bench_die "needs ${missing[*]} (scripts/install-deps.sh --bench)"
}

# ---- building -------------------------------------------------------------------------------

# bench_build TARGET...: configures and builds the release preset's TARGETs (not with --no-build).
bench_build() {
  [ "$build" = 1 ] || return 0
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$JOBS" --target "$@"
}

# bench_bin NAME: the absolute path of $BUILD_DIR/bench/NAME; stops if it is not built.
bench_bin() {
  local p=$BUILD_DIR/bench/$1
  [[ "$p" == /* ]] || p=$REPO/$p
  [ -x "$p" ] || bench_die "$p is not built (run without --no-build)"
  echo "$p"
}

# ref NAME: builds the reference program NAME of $REF_DIR into $REF_OUT (make decides whether
# it is stale) and prints its path. One of: epoll_echo_server echo_client go_echo_server
# asio_echo_server tls_echo_server tls_echo_client go_static_server logbench warm udp_echo_ref
# udp_echo_client go_websocket_server.
ref() {
  [ -f "$REF_DIR/Makefile" ] || bench_die "no reference programs at $REF_DIR (set REF_DIR)"
  make -s -C "$REF_DIR" OUT="$REF_OUT" "$REF_OUT/$1" >&2 || bench_die "reference program $1 did not build"
  echo "$REF_OUT/$1"
}

# ref_file PATH: $REF_DIR/PATH (a script such as nginx/run.sh or fio/randread.sh); stops if absent.
ref_file() {
  [ -f "$REF_DIR/$1" ] || bench_die "$REF_DIR/$1 not found (set REF_DIR)"
  echo "$REF_DIR/$1"
}

# bench_have_go: true if `go` can be run (also from /usr/local/go/bin, added to PATH).
bench_have_go() {
  [[ ":$PATH:" == *":/usr/local/go/bin:"* ]] || PATH=$PATH:/usr/local/go/bin
  command -v go >/dev/null
}

# bench_get_go: bench_have_go, after installing Debian's golang-go if it is missing and we are root.
bench_get_go() {
  bench_have_go && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench-$BENCH: installing golang-go for the Go reference" >&2
    apt-get install -y golang-go >/dev/null 2>&1 || true
  fi
  bench_have_go
}

# bench_warm: runs the reference `warm` (touches and frees 1.25 GiB) if it builds. Page-cache
# figures on these VMs swing ~10x otherwise: memory the guest left free goes back to the host.
bench_warm() {
  local w
  if w=$(ref warm 2>/dev/null); then "$w" >/dev/null 2>&1 || true; fi
}

# ---- measuring ------------------------------------------------------------------------------

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT: waits up to 10 s for 127.0.0.1:PORT to accept a connection.
wait_port() {
  local _
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

# median: the median of the numbers on stdin, one per line (the lower middle one of an even
# count, so always a measured value); 0 for none.
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : 0) }'; }

# ratio A B: A / B with three decimals; 0 when B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 != 0) printf "%.3f\n", a / b; else print 0 }'; }

# fill TEMPLATE: TEMPLATE with {port} {cert} {key} {root} replaced by those variables.
fill() {
  local t=$1 p='{port}' c='{cert}' k='{key}' r='{root}'
  t=${t//"$p"/${port:-}}
  t=${t//"$c"/${cert:-}}
  t=${t//"$k"/${key:-}}
  t=${t//"$r"/${root:-}}
  echo "$t"
}

# start_server COMMAND PORT [CPUS]: runs COMMAND (split into words) pinned to CPUS (a taskset
# list, default 0; "any": not pinned) in the background, its output discarded, and waits for
# PORT; sets SERVER_PID.
start_server() {
  if [ "${3:-0}" = any ]; then
    bash -c "exec $1" >/dev/null 2>&1 &
  else
    taskset -c "${3:-0}" bash -c "exec $1" >/dev/null 2>&1 &
  fi
  SERVER_PID=$!
  wait_port "$2" || echo "bench-$BENCH: the server did not listen on port $2: $1" >&2
}

# stop_server: SIGTERM to SERVER_PID (the servers stop gracefully on it) and waits for it.
stop_server() {
  [ -n "${SERVER_PID:-}" ] || return 0
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# descendants PID: PID and every process below it (nginx's worker, h2o's server under its launcher)
descendants() {
  local c
  echo "$1"
  for c in $(pgrep -P "$1" 2>/dev/null || true); do descendants "$c"; done
}

# cpu_ticks PID: user + system CPU time of PID and its descendants so far, in clock ticks (a
# process that is gone counts 0)
cpu_ticks() {
  local t=0 p v
  for p in $(descendants "$1"); do
    v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }' || true)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

# field KEY: the number after " KEY=" on the (last) line of stdin that has it.
field() { sed -n "s/.*[ ]$1=\([0-9.]*\).*/\1/p" | tail -n 1; }

# ---- the run's context ----------------------------------------------------------------------

bench_loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
bench_cpu() { grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'; }

# bench_commit [PATH...]: the short commit, with "+dirty" if PATHs (default: all) differ from it.
bench_commit() {
  local c
  c=$(git rev-parse --short HEAD 2>/dev/null || echo none)
  git diff --quiet HEAD -- "$@" 2>/dev/null || c="$c+dirty"
  echo "$c"
}

# bench_start: makes the scratch directory $tmp (removed at exit) and records $load_before.
bench_start() {
  tmp=$(mktemp -d)
  # shellcheck disable=SC2034  # read by the scripts
  load_before=$(bench_loadavg)
}

# bench_at_exit COMMAND: one more command for the exit trap (before $tmp is removed).
bench_at_exit() { BENCH_AT_EXIT+="$1"$'\n'; }

bench_cleanup() {
  local status=$?
  set +e
  stop_server
  [ -z "$BENCH_AT_EXIT" ] || eval "$BENCH_AT_EXIT"
  [ -z "$tmp" ] || rm -rf "$tmp"
  [ "$status" -eq 0 ] || [ "$BENCH_RESULT_PRINTED" = 1 ] || echo "RESULT errors=1"
  exit "$status"
}
trap bench_cleanup EXIT

# ---- output ---------------------------------------------------------------------------------

# bench_section FILE: prints the markdown section; with --write it replaces the script's section
# of bench/RESULTS.md (between <!-- BENCH:begin --> and <!-- BENCH:end -->; the rest is kept).
bench_section() {
  echo
  cat "$1"
  if [ "$write" = 1 ]; then
    python3 scripts/write-results-section.py "$BENCH" "$1" bench/RESULTS.md
    echo "bench-$BENCH: wrote the $BENCH section of bench/RESULTS.md"
  fi
}

# bench_result LINE: prints the RESULT line as the last line; fails unless it ends in errors=0.
bench_result() {
  echo
  echo "$1"
  BENCH_RESULT_PRINTED=1
  [[ "$1" == *" errors=0" ]]
}
