#!/usr/bin/env bash
# Installs what building and testing gpumemshim needs on Debian 12 (run as root or with sudo),
# saying first what it installs and how big it is.
#   bash tools/install-deps.sh [--no-torch]
# --no-torch (or GPUMEMSHIM_INSTALL_TORCH=0): no LibTorch, so no PyTorch bridge; everything else
# builds and tests.
set -euo pipefail
torch=${GPUMEMSHIM_INSTALL_TORCH:-1}
for arg in "$@"; do
  case "$arg" in
    --no-torch) torch=0 ;;
    *) echo "install-deps: unknown option '$arg' (usage: install-deps.sh [--no-torch])" >&2; exit 2 ;;
  esac
done
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
packages=(cmake ninja-build g++ pkg-config git libunwind-dev libdw-dev libelf-dev libcli11-dev
          nlohmann-json3-dev libfmt-dev liblz4-dev libzstd-dev libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev valgrind
          python3 python3-pytest
          python3-venv  # tests/install: the wheel installed into a fresh venv
          clang libclang-rt-14-dev  # the fuzz target (tests/fuzz): libFuzzer and clang's sanitizers
          python3-zstandard  # tests/integration/trace_records.py reads the zstd blocks of 3.0-3.2 traces
          chromium)  # headless screenshot of the HTML report in tests/integration/test_viewers.py
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: Debian packages to install: ${missing[*]}"
  $sudo apt-get update -qq
  # apt's own figures for these and what they pull in (clang and chromium are the big ones).
  LANG=C $sudo apt-get install --assume-no "${missing[@]}" 2>/dev/null |
    grep -E '^(Need to get|After this operation)' | sed 's/^/install-deps:   /' || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "install-deps: the Debian packages are all installed"
fi
# Debian's python3-pytest and python3-zstandard serve /usr/bin/python3; another python3 first on
# PATH (pyenv) gets them from PyPI.
for module in pytest zstandard; do
  python3 -c "import $module" 2>/dev/null || {
    echo "install-deps: $module from PyPI for $(command -v python3) (a few MB)"
    python3 -m pip install -q "$module" 2>/dev/null ||
      python3 -m pip install -q --break-system-packages "$module"
  }
done
# LibTorch for building the PyTorch bridge (torch_hooks/ is built when CMake finds it here): PyPI's
# wheel without its dependencies is enough for the headers and libraries. Best effort: without it
# the bridge is skipped and everything else builds and tests.
torch_dir=/opt/gms-torch
if [ -f "$torch_dir/torch/include/c10/cuda/CUDACachingAllocator.h" ]; then
  echo "install-deps: LibTorch is in $torch_dir"
elif [ "$torch" = 0 ]; then
  echo "install-deps: no LibTorch (--no-torch): the PyTorch bridge will not be built"
else
  echo "install-deps: LibTorch for the PyTorch bridge: torch==2.11.0 from PyPI into $torch_dir," \
       "roughly 1 GB to download and 1.2 GB on disk (--no-torch skips it)"
  $sudo mkdir -p "$torch_dir"
  pip_torch=(python3 -m pip install -q --no-deps --target "$torch_dir" torch==2.11.0)
  $sudo "${pip_torch[@]}" 2>/dev/null || $sudo "${pip_torch[@]}" --break-system-packages 2>/dev/null ||
    echo "install-deps: torch==2.11.0 not installed: the PyTorch bridge will not be built"
fi
