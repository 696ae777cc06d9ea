#!/usr/bin/env bash
# Wall time of a fake-CUDA program (tests/integration/cuda_scenarios: THREADS threads of
# cudaMalloc/cudaFree pairs) bare, under this build's shim and under another build's, in
# interleaved rounds (a side-by-side comparison on a machine whose speed drifts). Prints the median
# and best seconds of each and the shims' overhead over bare.
#   bash bench/shim_overhead.sh BUILD_DIR BASELINE_BUILD_DIR [ROUNDS] [THREADS] [ITERATIONS]
set -euo pipefail
build=${1:?build folder}
base=${2:?baseline build folder}
rounds=${3:-7}
threads=${4:-16}
iterations=${5:-50000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # build shim(0/1) -> seconds
  local b=$1 preload=() start end
  [ "$2" = 1 ] && preload=(LD_PRELOAD="$b/lib/libgpumemshim.so" GPUMEMSHIM_OUTPUT="$dir/t.%p.trace")
  start=$(date +%s.%N)
  env LD_LIBRARY_PATH="$b/tests/fakecuda" "${preload[@]}" "$b/tests/integration/cuda_scenarios" threads \
    "$threads" "$iterations" >/dev/null
  end=$(date +%s.%N)
  rm -f "$dir"/t.*.trace
  awk -v s="$start" -v e="$end" 'BEGIN {printf "%.4f", e - s}'
}
declare -A t=()
for ((r = 0; r < rounds; ++r)); do
  t[bare]+=" $(run "$build" 0)"
  t[base]+=" $(run "$base" 1)"
  t[this]+=" $(run "$build" 1)"
done
stat() { printf '%s\n' $1 | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)], a[1]}'; }
read -r bare_med bare_best <<<"$(stat "${t[bare]}")"
printf '| run | median s | best s | overhead (median) |\n|---|---:|---:|---:|\n'
for k in bare base this; do
  read -r med best <<<"$(stat "${t[$k]}")"
  name=$([ $k = base ] && echo "shim of $base" || ([ $k = this ] && echo "shim of $build" || echo bare))
  awk -v n="$name" -v m="$med" -v b="$best" -v z="$bare_med" \
    'BEGIN {printf "| %s | %.3f | %.3f | %+.1f %% |\n", n, m, b, (m / z - 1) * 100}'
done
echo "($threads threads x $iterations pairs, $rounds interleaved rounds)"
