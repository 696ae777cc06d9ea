#!/usr/bin/env bash
# The analyzer on traces the shim itself writes (figures: docs/benchmarks.md "Real traces"): the
# fake-CUDA program tests/integration/cuda_scenarios recorded under the shim with 1, 4, 16, 64 and
# 256 threads of cudaMalloc/cudaFree pairs, on an idle machine and with every core busy (one spin
# loop per core while it records), the shape of a PyTorch process (`torchlike`: a main thread, an
# autograd thread, four pinned-memory loader workers) and 64 threads x 100 k pairs. For each trace:
# bytes per event, the order window (the most events the reader held at once) also in flush
# intervals' worth of events (the trace's events per 50 ms), the read path, `report --format json`
# on one core (--jobs 1, taskset) and on every core, and the analyzer's peak RSS. A last row, for
# comparison, is bench/gen_trace's synthetic trace of as many events as 64 x 100 k (the analyzer
# throughput benchmark's trace).
#
#   bash bench/real_traces.sh BUILD_DIR [BASELINE_BUILD_DIR]
#       With a baseline, each workload is also recorded with the baseline's shim and analyzed with
#       its CLI, in the same run, one after the other (a side-by-side comparison).
#   bash bench/real_traces.sh --huge EVENTS BUILD_DIR
#       One trace of EVENTS events (2 threads of pairs) streamed to disk, then analyzed on one core:
#       the analyzer's peak RSS against the trace's length.
#   GPUMEMSHIM_BENCH_DIR=/big/disk   where the traces go (default: a temp dir, removed after)
#   GPUMEMSHIM_BENCH_EVENTS=N        events per thread-count workload (default 3200000)
#   GPUMEMSHIM_BENCH_ROUNDS=N        analyzer runs per trace, the median shown (default 3)
set -euo pipefail

huge=0
if [ "${1:-}" = --huge ]; then
  huge=${2:?events}
  shift 2
fi
build=${1:?build folder}
base=${2:-}
events=${GPUMEMSHIM_BENCH_EVENTS:-3200000}
rounds=${GPUMEMSHIM_BENCH_ROUNDS:-3}
cores=$(nproc)
dir=${GPUMEMSHIM_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ -n "${GPUMEMSHIM_BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT
for tool in /usr/bin/time taskset; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 2; }
done

spinners=()
spin_all_cores() {
  for ((i = 0; i < cores; ++i)); do
    sh -c 'while :; do :; done' &
    spinners+=($!)
  done
}
stop_spinning() {
  [ ${#spinners[@]} -eq 0 ] || kill "${spinners[@]}" 2>/dev/null || true
  wait "${spinners[@]}" 2>/dev/null || true
  spinners=()
}
trap 'stop_spinning; exit 130' INT TERM

record() {  # build trace load args... -> records the scenario into trace
  local b=$1 out=$2 load=$3
  shift 3
  rm -f "$dir"/rec.*.trace
  [ "$load" = busy ] && spin_all_cores
  LD_LIBRARY_PATH=$b/tests/fakecuda LD_PRELOAD=$b/lib/libgpumemshim.so \
    GPUMEMSHIM_OUTPUT="$dir/rec.%p.trace" "$b/tests/integration/cuda_scenarios" "$@" \
    >/dev/null 2>&1 || { stop_spinning; return 1; }
  stop_spinning
  mv "$dir"/rec.*.trace "$out"
}

field() {  # stats-text name -> the value after the name
  awk -v n="$2" 'index($0, "  " n) == 1 {sub("^  " n " *", ""); print; exit}' <<<"$1"
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

analyze() {  # build trace -> "seconds_one_core rss_kib seconds_all_cores" (medians)
  local cli=$1/bin/gpumemshim t=$2 one=() rss=() all=() out
  for ((r = 0; r < rounds; ++r)); do
    out=$( { taskset -c 0 /usr/bin/time -f '%e %M' "$cli" report --format json --jobs 1 "$t" \
      >/dev/null; } 2>&1 | tail -1)
    one+=("${out% *}")
    rss+=("${out#* }")
    out=$( { /usr/bin/time -f '%e' "$cli" report --format json "$t" >/dev/null; } 2>&1 | tail -1)
    all+=("$out")
  done
  echo "$(median "${one[@]}") $(median "${rss[@]}") $(median "${all[@]}")"
}

row() {  # label load build trace
  local label=$1 load=$2 b=$3 t=$4 stats n dur window read late a one rss all
  stats=$("$b/bin/gpumemshim" stats "$t")
  n=$(field "$stats" events)
  dur=$(field "$stats" duration | awk '{print $1}')
  window=$(field "$stats" "order window" | awk '{print $1}')
  read=$(field "$stats" read)
  read=${read:-?}
  late=$(field "$stats" "late events" | awk '{print $1}')
  read -r one rss all <<<"$(analyze "$b" "$t")"
  awk -v l="$label" -v ld="$load" -v b="$b" -v n="$n" -v sz="$(stat -c %s "$t")" -v d="$dur" \
    -v w="$window" -v rd="$read" -v lt="${late:-0}" -v o="$one" -v r="$rss" -v a="$all" 'BEGIN {
      per_flush = d > 0 ? n / d * 0.05 : n
      printf "| %s | %s | %s | %d | %.2f | %d | %.1f | %s, %d late | %.2f | %.1f | %.1f | %.0f |\n",
        l, ld, b, n, sz / n, w, w / per_flush, rd, lt, o, n / o / 1e6, n / a / 1e6, r / 1024 }'
}

if [ "$huge" != 0 ]; then
  pairs=$((huge / 4))
  t="$dir/huge.trace"
  start=$(date +%s)
  record "$build" "$t" idle threads 2 "$pairs"
  echo "recorded $(stat -c %s "$t") bytes in $(($(date +%s) - start)) s"
  "$build/bin/gpumemshim" stats "$t" | grep -E 'events|bytes per event|order window|read|late|integrity'
  out=$( { taskset -c 0 /usr/bin/time -f '%e %M' "$build/bin/gpumemshim" report --format json \
    --jobs 1 "$t" >"$dir/huge.json"; } 2>&1 | tail -1)
  echo "report --jobs 1 on one core: ${out% *} s, peak RSS $((${out#* } / 1024)) MiB"
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]
print("allocations", s["allocations"], "frees", s["frees"], "leaked bytes", s["leaked_bytes"])' \
    "$dir/huge.json"
  exit 0
fi

echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
printf '| workload | recorded | build | events | bytes/event | order window | in flush intervals | read | 1 core s | 1 core M events/s | %s cores M events/s | peak RSS MiB |\n' "$cores"
printf '|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n'
builds=("$build")
[ -n "$base" ] && builds+=("$base")
workloads=()
for th in 1 4 16 64 256; do
  workloads+=("threads-$th:threads $th $((events / 2 / th))")
done
workloads+=("torchlike:torchlike $((events / 1200)) 4" "64x100k:threads 64 100000")
for w in "${workloads[@]}"; do
  label=${w%%:*}
  read -r -a args <<<"${w#*:}"
  loads=(idle busy)
  [ "$label" = 64x100k ] && loads=(idle)
  for load in "${loads[@]}"; do
    for b in "${builds[@]}"; do
      t="$dir/$label.$load.$(basename "$(dirname "$b")").trace"
      if record "$b" "$t" "$load" "${args[@]}"; then
        row "$label" "$load" "$b" "$t"
      else  # an older build's cuda_scenarios may lack the workload
        echo "| $label | $load | $b | (not in this build's cuda_scenarios) |"
      fi
      rm -f "$t"
    done
  done
done
t="$dir/synthetic.trace"
"$build/bench/gen_trace" "$t" 12800000 >/dev/null
row synthetic generated "$build" "$t"
