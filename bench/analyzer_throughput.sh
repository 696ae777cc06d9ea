#!/usr/bin/env bash
# Analyzer throughput and memory per event (targets and figures: docs/benchmarks.md): generates
# realistic traces with bench/gen_trace and times `gpumemshim report --format json` on each, pinned
# to one core (--jobs 1: the target's figure), then on several cores (two unless
# GPUMEMSHIM_BENCH_CORES says which) with the default --jobs: the replay on a thread of its own,
# format 3's blocks decompressed by the reader or read threads (the analyzer's plan_threads), what
# one big trace gets on a workstation. Prints one table row
# per trace size and build, all measured in this one run.
#
#   bash bench/analyzer_throughput.sh [BUILD_DIR] [EVENTS|TRACE...]     (default: build 50000000)
# An argument that is a file is a 3.0 trace the shim recorded (bench/shim_trace.sh makes one), read
# as it is and, for a 2.0 baseline, as the same records in a 2.0 file (bench/trace_to_v2.py).
#   GPUMEMSHIM_BENCH_DIR=/big/disk ...   where the traces go (default: a temp dir, removed after)
#   GPUMEMSHIM_BENCH_ROUNDS=N ...        rounds per measurement: the best and the median are shown
#   GPUMEMSHIM_BENCH_CORE=C ...          the one core's CPU (default 0; empty: no one-core runs)
#   GPUMEMSHIM_BENCH_CORES=LIST ...      the several cores' CPUs, a taskset list (default 0,1)
#   GPUMEMSHIM_BASELINE=/other/bin/gpumemshim ...  another build's CLI, timed in the same rounds,
#                                        interleaved with this one's (a side-by-side comparison on a
#                                        machine whose speed drifts)
#   GPUMEMSHIM_BASELINE_FORMAT2=1 ...    the baseline reads the same events as a 2.0 trace (a build
#                                        from before format 3), and this build reads both traces
set -euo pipefail

build=${1:-build}
shift || true
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(50000000)
rounds=${GPUMEMSHIM_BENCH_ROUNDS:-1}
core=${GPUMEMSHIM_BENCH_CORE-0}
cores=${GPUMEMSHIM_BENCH_CORES:-0,1}  # a taskset CPU list
ncores=$(taskset -c "$cores" nproc)
# Each run: a CLI and the trace kind it reads (v3: format 3.0, v2o: 2.0 in the shim's ordered
# flushes).
clis=("$build/bin/gpumemshim")
kinds=(v3)
names=("$build")
if [ -n "${GPUMEMSHIM_BASELINE:-}" ]; then
  if [ "${GPUMEMSHIM_BASELINE_FORMAT2:-0}" = 1 ]; then
    clis+=("$build/bin/gpumemshim")
    kinds+=(v2o)
    names+=("$build, 2.0 trace")
  fi
  clis+=("$GPUMEMSHIM_BASELINE")
  kinds+=("$([ "${GPUMEMSHIM_BASELINE_FORMAT2:-0}" = 1 ] && echo v2o || echo v3)")
  names+=("baseline $GPUMEMSHIM_BASELINE")
fi
gen="$build/bench/gen_trace"
needed=("${clis[@]}" /usr/bin/time taskset)
for n in "${sizes[@]}"; do [ -f "$n" ] || needed+=("$gen"); done  # recorded traces need no generator
for tool in "${needed[@]}"; do
  [ -x "$tool" ] || command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 2; }
done

# Times one run to the microsecond (/usr/bin/time's elapsed has 10 ms steps, 3 % of a 0.3 s read:
# the size of the difference the comparisons look for) and keeps /usr/bin/time's accounting of it
# in $dir/time.txt. Prints "wall_s cpu_s".
timed() {
  local t0=$EPOCHREALTIME
  /usr/bin/time -v -o "$dir/time.txt" "$@"
  local t1=$EPOCHREALTIME
  awk -v a="$t0" -v b="$t1" -F': ' '/User time/ {u = $2} /System time/ {s = $2}
    END {printf "%.6f %.2f\n", b - a, u + s}' "$dir/time.txt"
}
best_median() {  # seconds... -> "best median"
  printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[1], a[int((NR + 1) / 2)]}'
}

dir=${GPUMEMSHIM_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ -n "${GPUMEMSHIM_BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT

printf '| events | build | trace bytes | seconds (best) | median | M events/s (best) | peak RSS MiB | RSS bytes/event | %s cores s (best) | median | CPU s (median) | %s cores M events/s (best) |\n' "$ncores" "$ncores"
printf '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for n in "${sizes[@]}"; do
  # format 3.0 in the shim's ordered flushes (the name differs from those of the older kinds,
  # gen.N.v2o.trace of format 2.0 among them, so that a cached trace of another kind is not reused)
  declare -A trace=() bytes=()
  for kind in $(printf '%s\n' "${kinds[@]}" | sort -u); do
    if [ -f "$n" ]; then  # a recorded trace
      trace[$kind]=$n
      if [ "$kind" = v2o ]; then
        trace[$kind]="$dir/$(basename "$n").v2.trace"
        [ -s "${trace[$kind]}" ] || python3 "$(dirname "$0")/trace_to_v2.py" "$n" "${trace[$kind]}"
      fi
    else
      trace[$kind]="$dir/gen.$n.$kind.trace"
      [ -s "${trace[$kind]}" ] || "$gen" "${trace[$kind]}" "$n" $([ "$kind" = v2o ] && echo --format-2) 2>/dev/null
    fi
    bytes[$kind]=$(stat -L -c %s "${trace[$kind]}")
  done
  if [ -f "$n" ]; then
    n=$("${clis[0]}" stats "$n" | awk '$1 == "events" {print $2}')
  fi
  declare -A one=() two=() cpu=() rss=()
  for ((r = 0; r < rounds; ++r)); do
    for i in "${!clis[@]}"; do
      if [ -n "$core" ]; then
        read -r wall _ <<<"$(timed taskset -c "$core" "${clis[$i]}" report --format json --jobs 1 \
          --quiet -o /dev/null "${trace[${kinds[$i]}]}")"
        one[$i]="${one[$i]:-} $wall"
        rss[$i]=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
      fi
      if [ "$ncores" -ge 2 ]; then
        read -r wall used <<<"$(timed taskset -c "$cores" "${clis[$i]}" report --format json --quiet \
          -o /dev/null "${trace[${kinds[$i]}]}")"
        two[$i]="${two[$i]:-} $wall"
        cpu[$i]="${cpu[$i]:-} $used"
      fi
    done
  done
  for i in "${!clis[@]}"; do
    best=0 median=0
    [ -n "${one[$i]:-}" ] && read -r best median <<<"$(best_median ${one[$i]})"
    t=0 tm=0 c=0
    if [ -n "${two[$i]:-}" ]; then
      read -r t tm <<<"$(best_median ${two[$i]})"
      read -r _ c <<<"$(best_median ${cpu[$i]})"
    fi
    awk -v n="$n" -v name="${names[$i]}" -v b="${bytes[${kinds[$i]}]}" -v s="$best" -v m="$median" -v r="${rss[$i]:-0}" \
      -v t="$t" -v tm="$tm" -v c="$c" 'BEGIN {
      multi = t > 0
      one = s > 0
      printf "| %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, name, b,
        (one ? sprintf("%.3f", s) : "-"), (one ? sprintf("%.3f", m) : "-"), (one ? sprintf("%.2f", n / s / 1e6) : "-"),
        (one ? sprintf("%.0f", r / 1024) : "-"), (one ? sprintf("%.1f", r * 1024 / n) : "-"),
        (multi ? sprintf("%.3f", t) : "-"), (multi ? sprintf("%.3f", tm) : "-"),
        (multi ? sprintf("%.2f", c) : "-"), (multi ? sprintf("%.2f", n / t / 1e6) : "-") }'
  done
  # Against each other build or trace, the median of the rounds' ratios: each round's runs follow
  # each other, so a machine whose speed drifts between rounds moves both sides of a ratio alike.
  for ((i = 1; i < ${#clis[@]}; ++i)); do
    for mode in one two; do
      declare -n times=$mode
      [ -n "${times[0]:-}" ] || continue
      paste <(printf '%s\n' ${times[0]}) <(printf '%s\n' ${times[$i]}) | awk '{print $1 / $2}' | sort -n |
        awk -v what="${names[0]} / ${names[$i]}, $([ $mode = one ] && echo "one core" || echo "$ncores cores")" \
          '{r[NR] = $1} END {printf "%s: %.3f (the median of %d rounds, each its own ratio; %.3f-%.3f)\n", what, r[int((NR + 1) / 2)], NR, r[1], r[NR]}'
      unset -n times
    done
  done
  unset one two cpu rss trace bytes
done
