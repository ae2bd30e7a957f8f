#!/usr/bin/env bash
# Writes conf/REFERENCE.md from the config vars the lionet binary defines
# (`lionet --print-reference`). tests/app fails when the committed file is stale.
# Usage: scripts/gen-config-reference.sh [path/to/lionet]   (default: build/release/bin/lionet)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/bin/lionet}
[ -x "$bin" ] || { echo "gen-config-reference: $bin not built (make build)" >&2; exit 1; }
"$bin" --print-reference > conf/REFERENCE.md.tmp
mv conf/REFERENCE.md.tmp conf/REFERENCE.md
echo "wrote conf/REFERENCE.md"
