#!/usr/bin/env bash
# W1 instructions per run under callgrind: a 150-run process minus a 50-run process, / 100, so
# start-up and the warm-up run cancel. Each process gets a fresh agentloop-mock.
#
#   bench/w1-instructions.sh BINARY      (e.g. "$CARGO_TARGET_DIR"/release/agentloop-bench-driver)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RELEASE="${CARGO_TARGET_DIR:-$HERE/../target}/release"
BIN="$1"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
total() {
  "$RELEASE/agentloop-mock" --script "$HERE/scripts/w1.json" --port 0 > "$SCRATCH/mock" 2>/dev/null &
  local mock=$!
  while [ ! -s "$SCRATCH/mock" ]; do sleep 0.1; done
  local base
  base="$(head -1 "$SCRATCH/mock" | awk '{print $3}')"
  valgrind --tool=callgrind --callgrind-out-file="$SCRATCH/cg.$1" \
    "$BIN" --base-url "$base/v1" --workload w1 --runs "$1" > /dev/null 2> "$SCRATCH/err.$1"
  kill "$mock"; wait "$mock" 2>/dev/null || true
  : > "$SCRATCH/mock"
  grep -o 'Collected : [0-9]*' "$SCRATCH/err.$1" | awk '{print $3}'
}
a="$(total 50)"
b="$(total 150)"
echo "$(( (b - a) / 100 )) instructions per W1 run ($BIN)"
