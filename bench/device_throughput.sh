#!/usr/bin/env bash
# The analyzer throughput comparison of docs/benchmarks.md ("2.0 against 3.x") in one device call:
# builds this checkout's CLI and a baseline source tree's (bench/device_build.sh), then runs
# bench/analyzer_throughput.sh on each CPU list given, this build reading TRACE (format 3) and its
# 2.0 rewrite, the baseline the 2.0 rewrite.
#   bash bench/device_throughput.sh BASE_SRC TRACE [CORES...]      (default CORES: 8-9)
# BASE_SRC: e.g. `git archive 6aea423 | tar -x -C build-base-src`, carried with .debs and the
# trace (bench/shim_trace.sh makes one). GMS_ROUNDS: rounds per CPU list (default 31);
# GMS_ONE_CORE: the one-core runs' CPU (default: none, the multi-core runs alone);
# GPUMEMSHIM_READ_THREADS passes through (0: the reader alone, as a side-by-side baseline).
# Builds go to /tmp/gms-throughput, kept for the next call while the machine stays warm.
set -euo pipefail
base_src=${1:?baseline source tree}
trace=${2:?format 3 trace}
shift 2
[ $# -gt 0 ] || set -- 8-9
here=$(cd "$(dirname "$0")/.." && pwd)
out=/tmp/gms-throughput
mkdir -p "$out"
cat /proc/loadavg
if [ ! -x "$out/base/bin/gpumemshim" ] || [ ! -f "$out/env" ]; then
  start=$(date +%s)
  GMS_TARGETS=gpumemshim_cli bash "$here/bench/device_build.sh" "$here" "$out/new" \
    -DGPUMEMSHIM_BUILD_TESTS=OFF >"$out/env"
  GMS_TARGETS=gpumemshim_cli bash "$here/bench/device_build.sh" "$base_src" "$out/base" \
    -DGPUMEMSHIM_BUILD_TESTS=OFF >/dev/null
  echo "built in $(($(date +%s) - start)) s"
fi
eval "$(cat "$out/env")"
for cores in "$@"; do
  echo "== cores $cores${GPUMEMSHIM_READ_THREADS:+, GPUMEMSHIM_READ_THREADS=$GPUMEMSHIM_READ_THREADS}"
  GPUMEMSHIM_BENCH_DIR=$out/traces GPUMEMSHIM_BENCH_ROUNDS=${GMS_ROUNDS:-31} \
    GPUMEMSHIM_BASELINE=$out/base/bin/gpumemshim GPUMEMSHIM_BASELINE_FORMAT2=1 \
    GPUMEMSHIM_BENCH_CORE=${GMS_ONE_CORE:-} GPUMEMSHIM_BENCH_CORES=$cores \
    bash "$here/bench/analyzer_throughput.sh" "$out/new" "$trace"
done
cat /proc/loadavg
