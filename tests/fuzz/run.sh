#!/usr/bin/env bash
# Builds the fuzz target (the `fuzz` preset: clang, libFuzzer, ASan+UBSan) when needed and fuzzes
# the trace reader and the analysis, starting from a fresh copy of the generated seeds, for a
# number of executions and/or seconds, on one or more workers. Prints the executions, the crashes,
# the rate and the corpus; exits 1 on any crash, leak, timeout or out-of-memory (the inputs that
# caused them are kept in the artifacts directory).
#
#   tests/fuzz/run.sh [--runs N] [--time SECONDS] [--workers W] [--build-dir DIR]
#                     [--artifacts DIR] [--keep-corpus DIR] [--prebuilt] [-- LIBFUZZER_FLAGS...]
#
#   --runs N        executions in all, shared out among the workers (default 20000)
#   --time SECONDS  stop each worker after this long (default: no limit; with --runs, whichever
#                   comes first)
#   --workers W     fuzzing processes at once, sharing one corpus (default 1)
#   --build-dir     the fuzz build tree (default build-fuzz, configured with the preset if absent)
#   --artifacts     where crashing inputs go (default BUILD_DIR/fuzz/artifacts)
#   --keep-corpus   copy the corpus the run grew there (default: it is deleted)
#   --prebuilt      use BUILD_DIR/bin/trace_fuzzer and BUILD_DIR/fuzz/seeds as they are (a fuzzer
#                   built on another machine, carried to one without clang)
#
# A crash reproduces with BUILD_DIR/bin/trace_fuzzer ARTIFACT (one execution, full report).
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=20000 seconds=0 workers=1 build_dir=build-fuzz artifacts="" keep_corpus="" prebuilt=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --time) seconds=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --artifacts) artifacts=$2; shift 2 ;;
    --keep-corpus) keep_corpus=$2; shift 2 ;;
    --prebuilt) prebuilt=1; shift ;;
    --) shift; break ;;
    *) echo "run.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
extra=("$@")
[ "$workers" -ge 1 ] || { echo "run.sh: --workers must be at least 1" >&2; exit 2; }
artifacts=${artifacts:-$build_dir/fuzz/artifacts}

if [ "$prebuilt" = 1 ]; then
  :  # a fuzzer built elsewhere (a machine without clang): its binary and seeds as they are
elif [ ! -f "$build_dir/CMakeCache.txt" ]; then
  if [ "$build_dir" = build-fuzz ]; then
    cmake --preset fuzz >/dev/null
  else
    cmake --preset fuzz -B "$build_dir" >/dev/null
  fi
fi
[ "$prebuilt" = 1 ] || cmake --build "$build_dir" --target trace_fuzzer fuzz_seeds >/dev/null
fuzzer=$build_dir/bin/trace_fuzzer
seeds=$build_dir/fuzz/seeds

# Work in memory when /dev/shm is there: the corpus, the workers' logs and the trace file each
# worker writes per input (TMPDIR).
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
work=$(mktemp -d "$shm/gpumemshim-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$artifacts"
cp "$seeds"/*.trace "$work/corpus/"
# Room to grow past the largest seed by a few records, rounded up to a KiB.
largest=$(stat -c %s "$seeds"/*.trace | sort -n | tail -1)
max_len=$(((largest + 1023) / 1024 * 1024))

flags=(-max_len="$max_len" -dict=tests/fuzz/trace.dict -timeout=10 -rss_limit_mb=2048
       -print_final_stats=1 -artifact_prefix="$artifacts/")
[ "$seconds" -gt 0 ] && flags+=(-max_total_time="$seconds")
per_worker=$(((runs + workers - 1) / workers))
[ "$runs" -gt 0 ] && flags+=(-runs="$per_worker")

export TMPDIR=$work
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
echo "fuzzing: $workers worker(s), ${runs} executions$([ "$seconds" -gt 0 ] && echo ", at most ${seconds} s"), -max_len=$max_len, $(ls "$work/corpus" | wc -l) seeds"
echo "logs: $work/worker-*.log (removed at the end)"
start=$(date +%s)
pids=()
for w in $(seq 1 "$workers"); do
  "$fuzzer" "${flags[@]}" -seed="$w" "${extra[@]}" "$work/corpus" >"$work/worker-$w.log" 2>&1 &
  pids+=($!)
done
status=()
for w in $(seq 1 "$workers"); do
  rc=0
  wait "${pids[$((w - 1))]}" || rc=$?
  status+=("$rc")
done
elapsed=$(($(date +%s) - start))

# Each worker stops at its first crash, leak, timeout or out-of-memory.
error='ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|^SUMMARY: |runtime error: '
executions=0 crashes=0
for w in $(seq 1 "$workers"); do
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/worker-$w.log" | tail -1)
  executions=$((executions + ${n:-0}))
  if grep -q -E "$error" "$work/worker-$w.log"; then crashes=$((crashes + 1)); fi
done
corpus_units=$(ls "$work/corpus" | wc -l)
corpus_kib=$(($(find "$work/corpus" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}') / 1024))
rate=$((executions / (elapsed > 0 ? elapsed : 1)))
echo "executions: $executions  crashes: $crashes  time: ${elapsed} s  exec/s: $rate" \
  "($workers worker(s))  corpus: $corpus_units units, ${corpus_kib} KiB"
if [ -n "$keep_corpus" ]; then
  mkdir -p "$keep_corpus"
  find "$work/corpus" -type f -exec cp -t "$keep_corpus/" {} +
fi

failed=0
for w in $(seq 1 "$workers"); do
  [ "${status[$((w - 1))]}" = 0 ] && ! grep -q -E "$error" "$work/worker-$w.log" && continue
  failed=$((failed + 1))
  echo "== worker $w (exit status ${status[$((w - 1))]}):"
  # From the first error report on (else the end of the log): what happened, and to which input.
  awk -v re="$error" 'found || $0 ~ re { found = 1; print }' "$work/worker-$w.log" | head -60 |
    grep . || tail -20 "$work/worker-$w.log"
done
if [ "$failed" -gt 0 ]; then
  echo "run.sh: FAILED: $failed worker(s) stopped on an error; the inputs are in $artifacts/" >&2
  exit 1
fi
