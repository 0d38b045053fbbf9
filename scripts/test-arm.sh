#!/usr/bin/env bash
# test-arm.sh — cross-compiles nmt-edge for ARM and runs the test suite under
# qemu-user on this x86-64 machine (docs/CROSS.md).
#
#   bash scripts/test-arm.sh [arm64|armhf] [ctest args...]
#   e.g. bash scripts/test-arm.sh arm64                 the whole suite
#        bash scripts/test-arm.sh armhf -L arm-ci       the CI subset
#
# Build directory build-<arch>; PoCL's kernel cache persists in
# build-<arch>/pocl-cache (PoCL's JIT is slow under emulation: the first run
# compiles every kernel, later runs reuse them).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-arm64}
shift || true
case "$arch" in
  arm64) tc=toolchains/aarch64-linux-gnu.cmake triple=aarch64-linux-gnu ;;
  armhf) tc=toolchains/arm-linux-gnueabihf.cmake triple=arm-linux-gnueabihf ;;
  *) echo "test-arm: unknown architecture $arch (arm64 or armhf)" >&2; exit 2 ;;
esac
bash scripts/setup.sh
bash scripts/cross-setup.sh "$arch"
# Warnings are errors on both architectures (NMT_ARM_WERROR=OFF overrides).
# The shared library, the /usr prefix and the multiarch library directory
# (GNUInstallDirs does not choose it when cross-compiling) are for the Debian
# packages below (docs/INTEGRATION.md); the programs and tests link the
# static library in either case, and the shared build adds the test
# shared_exports.
cmake -S . -B "build-$arch" -DCMAKE_TOOLCHAIN_FILE="$tc" -DNMT_WERROR="${NMT_ARM_WERROR:-ON}" \
      -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$triple"
cmake --build "build-$arch" -j"$(nproc)"
# The Debian packages of this architecture: one cpack call on the build
# (seconds; Depends written out, no dpkg-shlibdeps), and each package's
# Architecture must be the toolchain's.  Not installed or linted here.
if ! command -v file > /dev/null; then   # CPack's DEB generator reads file(1)'s verdicts
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends file
fi
rm -f "build-$arch"/*.deb
(cd "build-$arch" && cpack -G DEB > cpack.log) || { cat "build-$arch/cpack.log" >&2; exit 1; }
n=0
for f in "build-$arch"/*.deb; do
  a=$(dpkg-deb -f "$f" Architecture)
  [ "$a" = "$arch" ] || { echo "test-arm: $f has Architecture '$a', expected $arch" >&2; exit 1; }
  echo "test-arm: $(basename "$f"): Architecture $a, Depends: $(dpkg-deb -f "$f" Depends)"
  n=$((n + 1))
done
[ $n -eq 4 ] || { echo "test-arm: expected 4 packages in build-$arch, found $n" >&2; exit 1; }
# PoCL keeps one pthread per core; under qemu two tests at a time is the sweet spot
ctest --test-dir "build-$arch" --output-on-failure -j2 "$@"
