#!/usr/bin/env bash
# Installs what building and testing gpumemshim needs on Debian 12 (run as root or with sudo).
set -euo pipefail
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
packages=(cmake ninja-build g++ pkg-config libunwind-dev libdw-dev libelf-dev libcli11-dev
          nlohmann-json3-dev libfmt-dev libzstd-dev libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev valgrind
          python3 python3-pytest
          clang libclang-rt-14-dev  # the fuzz target (tests/fuzz): libFuzzer and clang's sanitizers
          python3-zstandard  # tests/integration/trace_records.py reads format 3's zstd blocks
          chromium)  # headless screenshot of the HTML report in tests/integration/test_viewers.py
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian's python3-pytest and python3-zstandard serve /usr/bin/python3; another python3 first on
# PATH (pyenv) gets them from PyPI.
for module in pytest zstandard; do
  python3 -c "import $module" 2>/dev/null ||
    python3 -m pip install -q "$module" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "$module"
done
# LibTorch for building the PyTorch bridge (torch_hooks/ is built when CMake finds it here): PyPI's
# wheel without its dependencies is enough for the headers and libraries. Best effort: without it
# the bridge is skipped and everything else builds and tests.
torch_dir=/opt/gms-torch
if [ ! -f "$torch_dir/torch/include/c10/cuda/CUDACachingAllocator.h" ]; then
  $sudo mkdir -p "$torch_dir"
  pip_torch=(python3 -m pip install -q --no-deps --target "$torch_dir" torch==2.11.0)
  $sudo "${pip_torch[@]}" 2>/dev/null || $sudo "${pip_torch[@]}" --break-system-packages 2>/dev/null ||
    echo "install-deps: torch==2.11.0 not installed: the PyTorch bridge will not be built"
fi
