#!/usr/bin/env bash
# Builds and runs the whole test suite (unit, fake-CUDA integration) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
ctest --test-dir build --output-on-failure -j2
