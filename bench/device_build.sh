#!/usr/bin/env bash
# Builds a gpumemshim source tree on a machine without apt (the device machine): the Debian -dev
# packages carried in .debs are unpacked into a prefix that CMake and pkg-config search.
#   bash bench/device_build.sh SRC BUILD_DIR [CMAKE_ARGS...]
# GMS_DEBS: the folder of .deb files (default: .debs of this checkout); GMS_TARGETS: what to build
# (default: everything). Prints the exports to eval
# for running what was built (LD_LIBRARY_PATH).
set -euo pipefail
src=${1:?source tree}
build=${2:?build folder}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=/tmp/gms-prefix
arch=x86_64-linux-gnu
if [ ! -d "$prefix/usr/lib/$arch" ]; then
  mkdir -p "$prefix"
  for deb in "${GMS_DEBS:-$root/.debs}"/*.deb; do dpkg -x "$deb" "$prefix"; done
fi
export LD_LIBRARY_PATH=$prefix/usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_SYSROOT_DIR=$prefix
export PKG_CONFIG_LIBDIR=$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/share/pkgconfig
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix/usr" \
  -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkgconf" "$@" >"$build.cmake.log" 2>&1 ||
  { cat "$build.cmake.log" >&2; exit 1; }
cmake --build "$build" ${GMS_TARGETS:+--target $GMS_TARGETS} >"$build.build.log" 2>&1 || { tail -40 "$build.build.log" >&2; exit 1; }
echo "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
