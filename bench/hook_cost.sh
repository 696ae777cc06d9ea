#!/usr/bin/env bash
# Hook cost per cudaMalloc+cudaFree pair on the fake CUDA: bare, shim without stacks, shim with
# native stacks, in one run, printed as a table of ns/pair and overhead.
set -euo pipefail
build=${1:-build}
bench=$build/bench/hook_cost
shim=$build/lib/libgpumemshim.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export LD_LIBRARY_PATH=$build/tests/fakecuda
run() {  # name, extra env...
  local name=$1; shift
  env "$@" "$bench" --benchmark_format=json --benchmark_min_time=0.5 \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true >"$out/$name.json"
}
run bare
run nostacks LD_PRELOAD=$shim GPUMEMSHIM_STACKS=none GPUMEMSHIM_OUTPUT=$out/a.%p.trace
run native LD_PRELOAD=$shim GPUMEMSHIM_STACKS=native GPUMEMSHIM_OUTPUT=$out/b.%p.trace
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
res = {}
for name in ("bare", "nostacks", "native"):
    for b in json.load(open(f"{d}/{name}.json"))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            res[(name, b["run_name"])] = b["real_time"]
print(f"{'stack depth':>12} {'bare ns':>9} {'shim, no stacks':>16} {'shim, native stack':>19} {'hook cost no stack':>19} {'hook cost with stack':>21}")
for depth in (1, 30):
    key = f"BM_MallocFreePair/{depth}"
    b, n, s = (res[(x, key)] for x in ("bare", "nostacks", "native"))
    print(f"{depth:>12} {b:>9.0f} {n:>16.0f} {s:>19.0f} {n - b:>16.0f} ns {s - b:>18.0f} ns")
PY
