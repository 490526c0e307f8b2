#!/usr/bin/env bash
# Instructions per run of each sub-agent benchmark variant under callgrind: a 3,000-run process
# minus a 1,000-run process, / 2,000, so start-up, warm-up and the schema compilation cancel.
# Deterministic (no clock, no scheduler noise), unlike the CPU-time figures of the benchmark.
#
#   bench/subagents-instructions.sh BINARY   (the bench binary `cargo bench -p agentloop
#                                             --bench subagents --no-run` prints)
set -euo pipefail
BIN="$1"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
total() {
  SUBAGENTS_PROFILE="$1" SUBAGENTS_PROFILE_RUNS="$2" valgrind --tool=callgrind \
    --callgrind-out-file="$SCRATCH/cg" "$BIN" > /dev/null 2> "$SCRATCH/err"
  grep -o 'Collected : [0-9]*' "$SCRATCH/err" | awk '{print $3}'
}
for listener in "" "+listener"; do
  declare -A per_run=()
  for variant in plain task alone; do
    a="$(total "$variant$listener" 1000)"
    b="$(total "$variant$listener" 3000)"
    per_run[$variant]=$(( (b - a) / 2000 ))
  done
  added=$(( per_run[task] - per_run[plain] ))
  echo "${listener:-no listener}: plain ${per_run[plain]} | task ${per_run[task]} | alone ${per_run[alone]} instructions per run; added by the child $added = $(awk "BEGIN{printf \"%.3f\", $added / ${per_run[alone]}}") x the child run alone"
done
