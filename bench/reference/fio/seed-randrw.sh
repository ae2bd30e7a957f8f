#!/bin/bash
# fio/seed-randrw.sh - the earlier report's libaio job as fio runs it (seed-randrw.fio: 4 jobs
# of 4 KiB random read+write, O_DIRECT), the reference of scripts/bench-file.sh for
# bench_file_io --rw mixed.
# Usage: seed-randrw.sh DIR [BATCH]   (BATCH: queue depth and submit batch, default 1)
# Prints one line: "read <IOPS> IOPS  write <IOPS> IOPS"
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export REF_DIR=${1:?usage: seed-randrw.sh DIR [BATCH]} REF_BATCH=${2:-1}
fio --output-format=json "$here/seed-randrw.fio" | python3 "$here/summary.py" rw
