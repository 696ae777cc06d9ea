#!/usr/bin/env bash
# Instructions the shim adds per cudaMalloc+cudaFree pair on the fake CUDA, counted by callgrind
# (repeatable, unlike timings on a shared machine). Per-pair cost = (I(2N) - I(N)) / N, so start-up
# and exit cancel out. Prints a table: bare, shim without stacks, shim with native stacks.
set -euo pipefail
build=${1:-build}
app=$build/bench/alloc_pairs
shim=$build/lib/libgpumemshim.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export LD_LIBRARY_PATH=$build/tests/fakecuda
n=2000
# GPUMEMSHIM_HOOK_THREAD=main counts only inside the application's allocation loop: what the hook
# costs the caller, leaving out the shim's flusher and its exit flush (the trace's compression and
# writes, whose share in a callgrind run depends on how its serialized threads take turns);
# default: everything, every thread.
count() {  # pairs depth env...
  local pairs=$1 depth=$2; shift 2
  local only=()
  [ "${GPUMEMSHIM_HOOK_THREAD:-all}" = main ] && only=(--toggle-collect='*pairs_at_depth*')
  env "$@" valgrind --tool=callgrind "${only[@]}" --callgrind-out-file="$out/cg" "$app" "$pairs" "$depth" \
    >/dev/null 2>"$out/log"
  grep -oP 'Collected : \K[0-9]+' "$out/log"
}
per_pair() {  # depth env...
  local depth=$1; shift
  local a b
  a=$(count $n "$depth" "$@")
  b=$(count $((2 * n)) "$depth" "$@")
  echo $(((b - a) / n))
}
printf '%12s %10s %18s %22s %16s %20s\n' "stack depth" "bare" "shim, no stacks" "shim, native stack" "hook, no stack" "hook, with stack"
for depth in 1 30; do
  bare=$(per_pair $depth)
  nostack=$(per_pair $depth LD_PRELOAD=$shim GPUMEMSHIM_STACKS=none GPUMEMSHIM_OUTPUT=$out/a.%p.trace)
  stack=$(per_pair $depth LD_PRELOAD=$shim GPUMEMSHIM_STACKS=native GPUMEMSHIM_OUTPUT=$out/b.%p.trace)
  printf '%12s %10s %18s %22s %16s %20s\n' $depth $bare $nostack $stack $((nostack - bare)) $((stack - bare))
done
echo "(instructions per cudaMalloc+cudaFree pair, callgrind, N=$n vs $((2 * n)) pairs)"
