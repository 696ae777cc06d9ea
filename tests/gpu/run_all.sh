#!/usr/bin/env bash
# Runs on the H200 device machine (no apt there): unpacks the carried Debian -dev packages into a
# prefix, builds gpumemshim, runs every scenario of tests/gpu/ under the shim and checks the
# reports. Usage (device tool, repo root, carry .debs): bash tests/gpu/run_all.sh "$OUT"
set -uo pipefail
out=${1:?output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=/tmp/gms-prefix
work=/tmp/gms-gpu
rm -rf "$work" && mkdir -p "$prefix" "$work"
debs=${GMS_DEBS:-$root/.debs}
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
arch=x86_64-linux-gnu
export LD_LIBRARY_PATH=$prefix/usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_SYSROOT_DIR=$prefix
export PKG_CONFIG_LIBDIR=$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/share/pkgconfig
log=$out/gpu-log.txt
exec > >(tee "$log") 2>&1
echo "== $(date -u +%FT%TZ) $(nvidia-smi -L | head -1)"
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
nvcc --version | tail -1
torch_root=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null)
cmake -S "$root" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${torch_root:+-DGPUMEMSHIM_TORCH_ROOT=$torch_root} \
  -DGPUMEMSHIM_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$prefix/usr" \
  -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkgconf" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
echo "== built"
export GPUMEMSHIM_BUILD_DIR=$work/build
ls "$work/build/lib"
# GMS_GPU_CHECKS: which scripts run (default all): runtime (check_gpu.py), torch (check_torch.py),
# frameworks (check_frameworks.py: JAX, CuPy, cuBLAS + NCCL), integrity (check_integrity.py: VMM
# map-then-release, _exit and killed processes; last, because it also checks every trace the others
# left).
rc=0
for c in ${GMS_GPU_CHECKS:-runtime torch frameworks integrity}; do
  case $c in
    runtime) python3 "$root/tests/gpu/check_gpu.py" "$work" "$out" || rc=1 ;;
    torch) python3 "$root/tests/gpu/check_torch.py" "$work" "$out" || rc=1 ;;
    frameworks) python3 "$root/tests/gpu/check_frameworks.py" "$work" "$out" || rc=1 ;;
    integrity) python3 "$root/tests/gpu/check_integrity.py" "$work" "$out" || rc=1 ;;
  esac
done
cp "$work/overhead.json" "$out/" 2>/dev/null
tar -czf "$out/gpu-reports.tar.gz" -C "$work" reports traces 2>/dev/null
ls -la "$out"
exit $rc
