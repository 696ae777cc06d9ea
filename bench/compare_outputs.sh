#!/usr/bin/env bash
# Every output of two builds of the CLI over the same traces, compared byte for byte: a refactoring
# of the analyzer must change none of them. Per trace: report (text, JSON, HTML), check (its text,
# exit code, JUnit and SARIF, with a leak limit and with a growth limit), stats, both exports, and
# diff against the previous trace (text, JSON with a regression limit); per folder holding several
# traces, the multi-process report, check and Chrome export. Exit codes and stderr are compared too.
#
#   bash bench/compare_outputs.sh OLD_CLI NEW_CLI DIR...     (every *.trace under each DIR)
#
# A corpus: the integration tests' traces (python3 -m pytest tests/integration --basetemp=DIR, with
# GPUMEMSHIM_BUILD_DIR set) and a few bench/gen_trace traces of each kind (--torch, --no-steps,
# --twin-stacks, --format-1, --thread-batches).
set -uo pipefail
old=$(realpath "${1:?usage: compare_outputs.sh OLD_CLI NEW_CLI DIR...}")
new=$(realpath "${2:?new CLI}")
shift 2
[ $# -gt 0 ] || { echo "compare_outputs.sh: no trace folder given" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mapfile -t traces < <(find "$@" -name '*.trace' -type f | sort)
mapfile -t groups < <(find "$@" -name '*.trace' -type f -printf '%h\n' | sort | uniq -d)

outputs_of_one() {  # CLI TRACE PREVIOUS_TRACE, in the output folder
  local cli=$1 t=$2 prev=$3
  "$cli" report "$t" --quiet >text.out 2>text.err; echo $? >text.rc
  "$cli" report "$t" --quiet --format json -o r.json >/dev/null 2>json.err; echo $? >json.rc
  "$cli" report "$t" --quiet --format html -o r.html >/dev/null 2>html.err; echo $? >html.rc
  "$cli" check "$t" --max-leak-bytes 0 --junit j.xml --sarif s.sarif >check.out 2>check.err
  echo $? >check.rc
  "$cli" check "$t" --max-leak-bytes 1000000000000 --max-growth-bytes-per-step 0 --junit j2.xml \
    --sarif s2.sarif >check2.out 2>check2.err
  echo $? >check2.rc
  "$cli" stats "$t" >stats.out 2>stats.err; echo $? >stats.rc
  "$cli" export "$t" --to chrome -o chrome.json >/dev/null 2>chrome.err; echo $? >chrome.rc
  "$cli" export "$t" --to memory-viz -o mv.pickle >/dev/null 2>mv.err; echo $? >mv.rc
  [ -n "$prev" ] || return 0
  "$cli" diff "$prev" "$t" >diff.out 2>diff.err; echo $? >diff.rc
  "$cli" diff "$prev" "$t" --format json --fail-on-regression 5 >diffj.out 2>diffj.err
  echo $? >diffj.rc
}

outputs_of_group() {  # CLI TRACE..., in the output folder
  local cli=$1
  shift
  "$cli" report "$@" --quiet >text.out 2>text.err; echo $? >text.rc
  "$cli" report "$@" --quiet --format json -o r.json >/dev/null 2>json.err; echo $? >json.rc
  "$cli" report "$@" --quiet --format html -o r.html >/dev/null 2>html.err; echo $? >html.rc
  "$cli" check "$@" --max-leak-bytes 0 --junit j.xml --sarif s.sarif >check.out 2>check.err
  echo $? >check.rc
  "$cli" export "$@" --to chrome -o chrome.json >/dev/null 2>chrome.err; echo $? >chrome.rc
}

all_outputs() {  # CLI DIR
  local cli=$1 dir=$2 i=0 t prev="" g
  for t in "${traces[@]}"; do
    i=$((i + 1))
    mkdir -p "$dir/$i"
    (cd "$dir/$i" && outputs_of_one "$cli" "$t" "$prev")
    prev=$t
  done
  i=0
  for g in "${groups[@]}"; do
    i=$((i + 1))
    mkdir -p "$dir/group$i"
    mapfile -t members < <(find "$g" -maxdepth 1 -name '*.trace' -type f | sort)
    (cd "$dir/group$i" && outputs_of_group "$cli" "${members[@]}")
  done
  # stderr may name the CLI
  find "$dir" -name '*.err' -exec sed -i "s|$cli|CLI|g" {} +
}

all_outputs "$old" "$out/old" &
all_outputs "$new" "$out/new"
wait
files=$(find "$out/old" -type f | wc -l)
if diff -r "$out/old" "$out/new" >"$out/diff.txt"; then
  echo "same: ${#traces[@]} traces, ${#groups[@]} multi-trace folders, $files outputs"
  exit 0
fi
echo "DIFFERENT: $(grep -c '^diff \|^Only ' "$out/diff.txt") of $files outputs"
grep '^diff \|^Only ' "$out/diff.txt" | sed "s|$out/||g" | head -20
head -c 3000 "$out/diff.txt"
exit 1
