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
# With main, the flushes the calling thread made in the flusher's place (flush_for_the_flusher,
# make_room: the flusher was late, which under callgrind's one-thread-at-a-time scheduling depends
# on the wall clock) are left out of the hook's count and shown apart, per pair.
count() {  # pairs depth env... -> "instructions instructions_in_flushes"
  local pairs=$1 depth=$2; shift 2
  local only=() flushes=0
  [ "${GPUMEMSHIM_HOOK_THREAD:-all}" = main ] && only=(--toggle-collect='*pairs_at_depth*')
  env "$@" valgrind --tool=callgrind "${only[@]}" --callgrind-out-file="$out/cg" "$app" "$pairs" "$depth" \
    >/dev/null 2>"$out/log"
  if [ ${#only[@]} -gt 0 ]; then
    flushes=$(callgrind_annotate --inclusive=yes "$out/cg" 2>/dev/null |
      awk '/flush_for_the_flusher\(\)|make_room\(/ {gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0} END {print m + 0}')
  fi
  echo "$(grep -oP 'Collected : \K[0-9]+' "$out/log") $flushes"
}
flush_share=0
per_pair() {  # depth env...
  local depth=$1; shift
  local a af b bf
  read -r a af <<<"$(count $n "$depth" "$@")"
  read -r b bf <<<"$(count $((2 * n)) "$depth" "$@")"
  flush_share=$(((bf - af) / n))
  echo $(((b - bf - a + af) / n))
}
printf '%12s %10s %18s %22s %16s %20s\n' "stack depth" "bare" "shim, no stacks" "shim, native stack" "hook, no stack" "hook, with stack"
for depth in 1 30; do
  bare=$(per_pair $depth)
  nostack=$(per_pair $depth LD_PRELOAD=$shim GPUMEMSHIM_STACKS=none GPUMEMSHIM_OUTPUT=$out/a.%p.trace)
  flushed=$flush_share
  stack=$(per_pair $depth LD_PRELOAD=$shim GPUMEMSHIM_STACKS=native GPUMEMSHIM_OUTPUT=$out/b.%p.trace)
  printf '%12s %10s %18s %22s %16s %20s' $depth $bare $nostack $stack $((nostack - bare)) $((stack - bare))
  [ "${GPUMEMSHIM_HOOK_THREAD:-all}" = main ] && printf '   (+%s, +%s in flushes)' $flushed $flush_share
  echo
done
echo "(instructions per cudaMalloc+cudaFree pair, callgrind, N=$n vs $((2 * n)) pairs)"
