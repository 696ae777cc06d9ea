#!/usr/bin/env bash
# The main job: install dependencies, build, record a leaky program and analyze its trace.
# Uses the real GPU when one is there, otherwise the project's fake CUDA.
#   bash tools/demo.sh [--no-torch]
# --no-torch (or GPUMEMSHIM_INSTALL_TORCH=0): no LibTorch download (about 1 GB); the demo needs no
# torch, only the PyTorch bridge does.
set -euo pipefail
cd "$(dirname "$0")/.."
install_args=()
for arg in "$@"; do
  case "$arg" in
    --no-torch) install_args+=(--no-torch) ;;
    *) echo "demo: unknown option '$arg' (usage: demo.sh [--no-torch])" >&2; exit 2 ;;
  esac
done
echo "== installing what the build needs (tools/install-deps.sh: it says what and how big first)"
bash tools/install-deps.sh "${install_args[@]}"
echo "== building (tools/build.sh: Release, in build/)"
bash tools/build.sh
out=build/demo
rm -rf "$out" && mkdir -p "$out"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null; then
  echo "== GPU found: building the demo with nvcc (static cudart)"
  nvcc -g -x cu examples/leaky_app.cpp -o "$out/leaky_app"
  app=$out/leaky_app
else
  echo "== no GPU: the demo runs on the project's fake CUDA (build/tests/fakecuda)"
  export LD_LIBRARY_PATH=$PWD/build/tests/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  app=build/examples/leaky_app
fi
echo "== gpumemshim record -- $app"
build/bin/gpumemshim record -o "$out/demo.%p.trace" -- "$app"
echo "== gpumemshim report"
build/bin/gpumemshim report "$out"/demo.*.trace
echo "== gpumemshim check (exit 1 means: leak found, as planted)"
set +e
build/bin/gpumemshim check "$out"/demo.*.trace >/dev/null
rc=$?
set -e
echo "check exit code: $rc"
[ "$rc" = 1 ]
