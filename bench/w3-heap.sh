#!/usr/bin/env bash
# Where W3's memory goes: runs one W3 workload under heaptrack and prints the heap at its peak
# per session, by the innermost allocating function that is not allocator or container plumbing.
#
#   bench/w3-heap.sh DRIVER K [1|2]     e.g. bench/w3-heap.sh target/release/agentloop-bench-driver 10000 2
#
# Needs heaptrack (heaptrack_print) and the release agentloop-mock in $CARGO_TARGET_DIR (or
# target/). The peak is the process's highest heap, which in W3 is when every session has sent
# its second request: what RSS keeps after the heads are in.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DRIVER="$1"; K="$2"; HTTP="${3:-2}"
TARGET="${CARGO_TARGET_DIR:-$HERE/../target}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
python3 -c "import json, sys; sys.path.insert(0, '$HERE'); import harness; json.dump(harness.w3_script($K), open('$OUT/script.json', 'w'))"
ulimit -n 20000 2>/dev/null || true
coproc MOCK { exec "$TARGET/release/agentloop-mock" --script "$OUT/script.json" --port 0 2>/dev/null; }
read -r line <&"${MOCK[0]}"
trap 'kill "$MOCK_PID" 2>/dev/null; rm -rf "$OUT"' EXIT
heaptrack -o "$OUT/trace" "$DRIVER" --base-url "${line#listening on }/v1" --workload w3 \
  --concurrency "$K" --http "$HTTP" | grep '^{'
heaptrack_print -f "$OUT/trace.zst" --print-peaks 0 --print-allocators 0 --print-temporary 0 \
  --print-leaks 0 -F "$OUT/peak.txt" --flamegraph-cost-type peak | grep 'peak heap'
python3 "$HERE/heap_breakdown.py" "$OUT/peak.txt" "$K"
