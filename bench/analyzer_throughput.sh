#!/usr/bin/env bash
# Analyzer throughput (DESIGN.md §9: >= 20 M events/s on one core, <= 8 bytes/event): generates
# realistic traces with bench/gen_trace and times `gpumemshim report --format json` on each, pinned
# to one core. Prints one table row per trace size, all measured in this one run.
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

dir=${GPUMEMSHIM_BENCH_DIR:-$(mktemp -d)}
[ -n "${GPUMEMSHIM_BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT

printf '| events | trace bytes | seconds | M events/s | peak RSS MiB | RSS bytes/event |\n'
printf '|---:|---:|---:|---:|---:|---:|\n'
for n in "${sizes[@]}"; do
  trace="$dir/gen.$n.trace"
  [ -s "$trace" ] || "$gen" "$trace" "$n" 2>/dev/null
  /usr/bin/time -v -o "$dir/time.txt" taskset -c 0 "$cli" report --format json --jobs 1 --quiet \
    -o /dev/null "$trace"
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
                     for (i = 1; i <= n; ++i) s = s * 60 + p[i]; print s}' "$dir/time.txt")
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
  bytes=$(stat -c %s "$trace")
  awk -v n="$n" -v b="$bytes" -v s="$secs" -v r="$rss_kb" 'BEGIN {
    printf "| %d | %d | %.2f | %.2f | %.0f | %.1f |\n", n, b, s, n / s / 1e6, r / 1024, r * 1024 / n }'
done
