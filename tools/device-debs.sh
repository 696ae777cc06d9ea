#!/usr/bin/env bash
# Downloads into .debs/ the Debian packages that building gpumemshim needs on a machine without apt
# (the device machine: tests/gpu/run_all.sh and bench/device_build.sh unpack them into a prefix).
# The -dev packages, their runtime libraries and pkgconf; about 4 MB. Run where apt works:
#   bash tools/device-debs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libunwind-dev libunwind8 libdw-dev libdw1 libelf-dev libelf1 zlib1g-dev liblzma-dev libbz2-dev
          liblz4-dev liblz4-1 libzstd-dev libzstd1 libxxhash-dev libxxhash0
          libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev libbenchmark-dev libbenchmark1debian
          pkgconf pkgconf-bin libpkgconf3)
mkdir -p .debs
cd .debs
# apt's note that root downloads unsandboxed is left out; its errors, and its exit status, are not.
apt-get download "${packages[@]}" 2> >(grep -v '^W: Download is performed unsandboxed' >&2)
echo "device-debs: $(ls ./*.deb | wc -l) packages in .debs ($(du -sh . | cut -f1))"
