#!/usr/bin/env bash
# The shim on a slow disk: tests/integration/cuda_scenarios (THREADS threads of cudaMalloc/cudaFree
# pairs) recorded with every write of the trace delayed by MS ms (tests/integration/apps/
# slow_writes.cpp, preloaded ahead of the shim), under this build's shim and, when given, another
# build's, one after the other. Prints each run's wall, user and system seconds, the trace's bytes
# per event and its late events (gpumemshim stats).
#   bash bench/slow_disk.sh BUILD_DIR [BASELINE_BUILD_DIR] [MS] [THREADS] [ITERATIONS]
#   (default: no baseline, 500 ms, 8 threads, 20000)
set -euo pipefail
build=${1:?build folder}
base=${2:-}
ms=${3:-500}
threads=${4:-8}
iterations=${5:-20000}
slow=$build/tests/integration/libslow_writes.so
[ -f "$slow" ] || { echo "missing $slow (build the tests)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "| shim | wall s | user s | sys s | bytes/event | late events |"
echo "|---|---:|---:|---:|---:|---:|"
for b in "$build" ${base:+"$base"}; do
  rm -f "$dir"/t.*.trace
  times=$(env LD_LIBRARY_PATH="$b/tests/fakecuda" LD_PRELOAD="$slow $b/lib/libgpumemshim.so" \
    SLOW_WRITES_MS="$ms" GPUMEMSHIM_OUTPUT="$dir/t.%p.trace" /usr/bin/time -f "%e %U %S" \
    "$b/tests/integration/cuda_scenarios" threads "$threads" "$iterations" 2>&1 >/dev/null | tail -1)
  stats=$("$build/bin/gpumemshim" stats "$dir"/t.*.trace)
  per_event=$(awk '/bytes per event/ {print $4}' <<<"$stats")
  late=$(awk '/late events/ {print $3}' <<<"$stats")
  read -r wall user sys <<<"$times"
  echo "| $b | $wall | $user | $sys | $per_event | ${late:-0} |"
done
echo "($threads threads x $iterations pairs, every trace write delayed $ms ms)"
