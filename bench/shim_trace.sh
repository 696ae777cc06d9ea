#!/usr/bin/env bash
# Records a trace the way users get one: the fake-CUDA program tests/integration/cuda_scenarios
# (THREADS threads of cudaMalloc/cudaFree pairs, ITERATIONS each) under the shim with its default
# stacks, written to OUT (format 3). For bench/analyzer_throughput.sh, which takes it as a trace.
#   bash bench/shim_trace.sh BUILD_DIR OUT [THREADS] [ITERATIONS]    (default: 16 threads, 320000)
set -euo pipefail
build=${1:?build folder}
out=${2:?output trace}
threads=${3:-16}
iterations=${4:-320000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
LD_LIBRARY_PATH=$build/tests/fakecuda LD_PRELOAD=$build/lib/libgpumemshim.so \
  GPUMEMSHIM_OUTPUT="$dir/t.%p.trace" "$build/tests/integration/cuda_scenarios" threads "$threads" \
  "$iterations" >/dev/null
mv "$dir"/t.*.trace "$out"
