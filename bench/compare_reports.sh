#!/usr/bin/env bash
# Two builds of the analyzer side by side on the same traces: seconds per `report --format json`
# (one core, --jobs 1; the better of two runs each, alternating) and whether both wrote the same JSON.
#
#   bash bench/compare_reports.sh OLD_CLI NEW_CLI TRACE...
set -uo pipefail
old=${1:?old gpumemshim}
new=${2:?new gpumemshim}
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
secs() {  # CLI TRACE OUT -> elapsed seconds
  /usr/bin/time -f %e -o "$tmp/t" taskset -c 0 "$1" report --format json --jobs 1 --quiet -o "$3" "$2" \
    >/dev/null 2>&1
  cat "$tmp/t"
}
printf '| trace | bytes | old s | new s | new/old | same JSON |\n|---|---:|---:|---:|---:|---|\n'
for trace in "$@"; do
  o1=$(secs "$old" "$trace" "$tmp/old.json"); n1=$(secs "$new" "$trace" "$tmp/new.json")
  o2=$(secs "$old" "$trace" "$tmp/old.json"); n2=$(secs "$new" "$trace" "$tmp/new.json")
  same=no
  cmp -s "$tmp/old.json" "$tmp/new.json" && same=yes
  awk -v t="$(basename "$trace")" -v b="$(stat -c %s "$trace")" -v o1="$o1" -v o2="$o2" -v n1="$n1" \
      -v n2="$n2" -v s="$same" 'BEGIN { o = o1 < o2 ? o1 : o2; n = n1 < n2 ? n1 : n2;
      printf "| %s | %d | %.2f | %.2f | %.2f | %s |\n", t, b, o, n, (o > 0 ? n / o : 0), s }'
done
