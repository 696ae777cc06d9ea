#!/usr/bin/env bash
# The shim's overhead on PyTorch training steps as users pay it (figures: docs/benchmarks.md
# "PyTorch step overhead"): each configuration in a fresh process, the order rotated every round,
# ROUNDS rounds; tests/gpu/run_overhead.py says what each configuration is. On a GPU machine (the
# device tool carries .debs for the build):
#   bash bench/torch_overhead.sh OUT_DIR [ROUNDS [STEPS]]
#   GMS_OVERHEAD_KINDS="alloc"                       step kinds (tests/gpu/overhead.py)
#   GMS_OVERHEAD_CONFIGS="record shim-nostack torch"  configurations besides base
#   GPUMEMSHIM_BUILD_DIR=build                        use this build instead of building one (such
#                                                     as tests/gpu/run_all.sh's /tmp/gms-gpu/build)
set -euo pipefail
out=${1:?output folder}
rounds=${2:-10}
steps=${3:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
build=${GPUMEMSHIM_BUILD_DIR:-}
prefix_libs=/tmp/gms-prefix/usr/lib/x86_64-linux-gnu  # where device_build.sh unpacks the .debs
if [ -n "$build" ] && [ -d "$prefix_libs" ]; then
  export LD_LIBRARY_PATH=$prefix_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -z "$build" ]; then
  build=/tmp/gms-overhead-build
  torch_root=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  eval "$(bash "$root/bench/device_build.sh" "$root" "$build" -DGPUMEMSHIM_BUILD_TESTS=OFF \
    -DGPUMEMSHIM_TORCH_ROOT="$torch_root")"
fi
nvidia-smi -L 2>/dev/null | head -1
python3 -c 'import torch; print("torch", torch.__version__)'
python3 "$root/tests/gpu/run_overhead.py" "$build/lib/libgpumemshim.so" "$out/overhead.json" "$rounds" "$steps" |
  tee "$out/overhead.txt"
