#!/bin/bash
# fio/randread.sh - fio's 4 KiB O_DIRECT random-read figure, the reference of
# scripts/bench-file.sh for bench_file_io (same file, engine and queue depth).
# Usage: randread.sh FILE [libaio|io_uring] [QD] [SECS]   (defaults libaio, 1, 6)
#   FILE is created at 1 GiB (layout.fio) if it does not exist.
# Prints one line: "<IOPS> IOPS  <MB/s> MB/s"  (the job is randread.fio)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export REF_FILE=${1:?usage: randread.sh FILE [libaio|io_uring] [QD] [SECS]}
export REF_ENGINE=${2:-libaio} REF_QD=${3:-1} REF_SECS=${4:-6}
[ -f "$REF_FILE" ] || fio "$here/layout.fio" >/dev/null
fio --output-format=json "$here/randread.fio" | python3 "$here/summary.py" read
