#!/usr/bin/env bash
# Analyzer throughput (DESIGN.md §9: >= 20 M events/s on one core, <= 8 bytes/event): generates
# realistic traces with bench/gen_trace and times `gpumemshim report --format json` on each, pinned
# to one core (--jobs 1: the target's figure), then on two cores with the default --jobs (the
# replay on a thread of its own, what one big trace gets on a workstation). Prints one table row
# per trace size, all measured in this one run.
#
#   bash bench/analyzer_throughput.sh [BUILD_DIR] [EVENTS...]     (default: build 50000000)
#   GPUMEMSHIM_BENCH_DIR=/big/disk ...   where the traces go (default: a temp dir, removed after)
set -euo pipefail

build=${1:-build}
shift || true
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(50000000)
cli="$build/bin/gpumemshim"
gen="$build/bench/gen_trace"
for tool in "$cli" "$gen" /usr/bin/time taskset; do
  [ -x "$tool" ] || command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 2; }
done

elapsed() {  # /usr/bin/time -v output -> seconds
  awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
              for (i = 1; i <= n; ++i) s = s * 60 + p[i]; print s}' "$1"
}

dir=${GPUMEMSHIM_BENCH_DIR:-$(mktemp -d)}
[ -n "${GPUMEMSHIM_BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT

printf '| events | trace bytes | seconds | M events/s | peak RSS MiB | RSS bytes/event | 2 cores s | 2 cores M events/s |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for n in "${sizes[@]}"; do
  # format 2.0 in the ordered flushes of today's shim (a cached gen.N.v2.trace has the thread
  # batches of older shims, gen.N.trace is 1.1: neither is reused)
  trace="$dir/gen.$n.v2o.trace"
  [ -s "$trace" ] || "$gen" "$trace" "$n" 2>/dev/null
  /usr/bin/time -v -o "$dir/time.txt" taskset -c 0 "$cli" report --format json --jobs 1 --quiet \
    -o /dev/null "$trace"
  secs=$(elapsed "$dir/time.txt")
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
  two=0
  if [ "$(nproc)" -ge 2 ]; then
    /usr/bin/time -v -o "$dir/time2.txt" taskset -c 0,1 "$cli" report --format json --quiet \
      -o /dev/null "$trace"
    two=$(elapsed "$dir/time2.txt")
  fi
  bytes=$(stat -L -c %s "$trace")
  awk -v n="$n" -v b="$bytes" -v s="$secs" -v r="$rss_kb" -v t="$two" 'BEGIN {
    printf "| %d | %d | %.2f | %.2f | %.0f | %.1f | %s | %s |\n", n, b, s, n / s / 1e6, r / 1024, r * 1024 / n,
      (t > 0 ? sprintf("%.2f", t) : "-"), (t > 0 ? sprintf("%.2f", n / t / 1e6) : "-") }'
done
