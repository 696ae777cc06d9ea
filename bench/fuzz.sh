#!/usr/bin/env bash
# The fuzzing figure of docs/benchmarks.md ("Fuzzing"): tests/fuzz/run.sh for 10 million
# executions in all (the issue's bar), at nice 10 so that it can share a machine, then the totals:
# executions, crashes, time, executions per second, the corpus grown. Exits 1 on any crash, leak,
# timeout or out-of-memory (run.sh keeps the inputs).
#
#   bash bench/fuzz.sh [--runs N] [--workers W] [run.sh options...]   (default: 10000000, 1 worker)
#   bash bench/fuzz.sh > fuzz.log 2>&1 &      the run takes hours on one core: progress is in the
#                                             worker logs run.sh names at the start
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10000000 workers=1 rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done

# ASan keeps no allocation and free stacks: 15 % more executions a second, the same checks. A crash
# input replayed with BUILD_DIR/bin/trace_fuzzer INPUT (default options) reports them in full.
export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "compiler: $( (clang++ --version 2>/dev/null || echo "none here: a prebuilt fuzzer") | head -1)"
echo "command: bash bench/fuzz.sh --runs $runs --workers $workers ${rest[*]} (ASAN_OPTIONS=$ASAN_OPTIONS)"
start=$(date +%s)
status=0
nice -n 10 bash tests/fuzz/run.sh --runs "$runs" --workers "$workers" "${rest[@]}" || status=$?
echo "wall time: $(($(date +%s) - start)) s; run.sh exit status $status"
exit "$status"
