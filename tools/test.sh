#!/usr/bin/env bash
# Builds and runs the whole test suite with CTest: the Release build, then the same tests in the
# AddressSanitizer+UBSan and ThreadSanitizer builds (the shim runs inside other people's processes),
# then a brief fuzz run of the trace reader and the analysis (tests/fuzz/run.sh: clang's libFuzzer
# with ASan+UBSan). GPUMEMSHIM_SANITIZERS=0 skips the sanitizer builds and the fuzz run for a quick
# local run; GPUMEMSHIM_FUZZ=0 skips the fuzz run alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
ctest --test-dir build --output-on-failure -j2
if [ "${GPUMEMSHIM_SANITIZERS:-1}" != 0 ]; then
  for preset in asan tsan; do
    echo "== $preset build"
    [ -f "build-$preset/CMakeCache.txt" ] || cmake --preset "$preset" >/dev/null
    cmake --build "build-$preset"
    ctest --test-dir "build-$preset" --output-on-failure -j2
  done
fi
if [ "${GPUMEMSHIM_SANITIZERS:-1}" != 0 ] && [ "${GPUMEMSHIM_FUZZ:-1}" != 0 ]; then
  echo "== fuzz"
  bash tests/fuzz/run.sh --runs 40000 --time 90 --workers 2
fi
