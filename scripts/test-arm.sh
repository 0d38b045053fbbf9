#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-arm.sh — cross-compiles nmt-edge for ARM and runs the test suite under
# qemu-user on this x86-64 machine (docs/CROSS.md).
#
#   bash scripts/test-arm.sh [arm64|armhf] [ctest args...]
#   e.g. bash scripts/test-arm.sh arm64                 the whole suite
#        bash scripts/test-arm.sh armhf -R '^format_'   some tests
#        NMT_ARM_TESTS="format_test cli_test" bash scripts/test-arm.sh armhf
#                                    exactly these tests (.ci/run's subsets):
#                                    each name must be a test of the build
#
# arm64 also builds examples/ against the installed cross build (below).
# Build directory build-<arch> (NMT_ARM_BUILD_DIR overrides); PoCL's kernel
# cache persists in <build>/pocl-cache (PoCL's JIT is slow under emulation:
# the first run compiles every kernel, later runs reuse them).
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
# Release (-O3), as a board's product build is, with the benchmarks
# (NMT_BUILD_BENCH=ON): GCC 12's -O3 vectorizer is where Debian's aarch64
# cross compiler once stopped with an internal compiler error
# (docs/CROSS.md, "Release builds"), so every C file of the project goes
# through it here.  Warnings are errors on both architectures
# (NMT_ARM_WERROR=OFF overrides).
# The shared library, the /usr prefix and the multiarch library directory
# (GNUInstallDirs does not choose it when cross-compiling) are for the Debian
# packages below (docs/INTEGRATION.md); the programs and tests link the
# static library in either case, and the shared build adds the test
# shared_exports.
build=${NMT_ARM_BUILD_DIR:-build-$arch}
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$tc" -DCMAKE_BUILD_TYPE=Release -DNMT_BUILD_BENCH=ON \
      -DNMT_WERROR="${NMT_ARM_WERROR:-ON}" \
      -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$triple"
cmake --build "$build" -j"$(nproc)"
# The Debian packages of this architecture: one cpack call on the build
# (seconds; Depends written out, no dpkg-shlibdeps), and each package's
# Architecture must be the toolchain's.  Not installed or linted here.
if ! command -v file > /dev/null; then   # CPack's DEB generator reads file(1)'s verdicts
  source scripts/apt-lib.sh
  apt_get install -y -qq --no-install-recommends file
fi
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB > cpack.log) || { cat "$build/cpack.log" >&2; exit 1; }
n=0
for f in "$build"/*.deb; do
  a=$(dpkg-deb -f "$f" Architecture)
  [ "$a" = "$arch" ] || { echo "test-arm: $f has Architecture '$a', expected $arch" >&2; exit 1; }
  echo "test-arm: $(basename "$f"): Architecture $a, Depends: $(dpkg-deb -f "$f" Depends)"
  n=$((n + 1))
done
[ $n -eq 4 ] || { echo "test-arm: expected 4 packages in $build, found $n" >&2; exit 1; }
# arm64: examples/ built out of tree against the *installed* cross build, as
# a board's developer would (docs/INTEGRATION.md, "Cross-compiling against
# the package"): the install goes to a temporary prefix, examples/ is
# configured with the same toolchain file and CMAKE_PREFIX_PATH
# (find_package(nmt_edge)), and both examples are compiled with the cross gcc
# and pkg-config (PKG_CONFIG_LIBDIR: the prefix's and the multiarch .pc
# files, as Debian's <triple>-pkg-config wrapper sets it; no sysroot: the ARM
# libraries are multiarch-installed in /).  Each result must be an AArch64
# ELF executable, and each tokenize (no OpenCL) must give the native pieces
# under qemu-user with the installed shared library.  translate_lines on the
# bundled model under qemu only with NMT_ARM_EXAMPLE_TRANSLATE=1: PoCL's JIT
# of its kernels under emulation takes about 3 minutes on a cold cache (13 s
# warm).  Temporary directories only; the build directory is not written (but for
# that PoCL cache).
if [ "$arch" = arm64 ]; then
  t0=$SECONDS
  ex=$(mktemp -d)
  trap 'rm -rf "$ex"' EXIT
  cmake --install "$build" --prefix "$ex/prefix" > /dev/null
  flags="-Wall -Wextra -Werror"
  cmake -S examples -B "$ex/cmake" -DCMAKE_TOOLCHAIN_FILE="$PWD/$tc" -DCMAKE_PREFIX_PATH="$ex/prefix" \
        -DCMAKE_C_FLAGS="$flags" > /dev/null
  cmake --build "$ex/cmake" > /dev/null
  pc_dirs="$ex/prefix/lib/$triple/pkgconfig:/usr/lib/$triple/pkgconfig:/usr/share/pkgconfig"
  pc=$(PKG_CONFIG_LIBDIR="$pc_dirs" pkg-config --cflags --libs nmt-edge)
  mkdir -p "$ex/pc"
  for e in translate_lines tokenize; do
    # shellcheck disable=SC2086
    "$triple-gcc" $flags "examples/$e.c" $pc -o "$ex/pc/$e"
  done
  for exe in "$ex"/cmake/translate_lines "$ex"/cmake/tokenize "$ex"/pc/translate_lines "$ex"/pc/tokenize; do
    m=$(LC_ALL=C readelf -h "$exe" | sed -n 's/^ *Machine: *//p')
    [ "$m" = AArch64 ] || { echo "test-arm: $exe is not an AArch64 executable (readelf: '$m')" >&2; exit 1; }
  done
  for dir in "$ex/cmake" "$ex/pc"; do
    got=$(echo "Hello world" | LD_LIBRARY_PATH="$ex/prefix/lib/$triple" qemu-aarch64-static -L / "$dir/tokenize" models/en-de.nmt)
    [[ $got == "▁H/511 ell/800 o/359 ▁world/5136" ]] ||
      { echo "test-arm: $dir/tokenize under qemu printed '$got'" >&2; exit 1; }
  done
  echo "test-arm: examples/ built against the installed arm64 package with CMake and pkg-config: AArch64 ELF; tokenize runs ($((SECONDS - t0)) s)"
  if [ "${NMT_ARM_EXAMPLE_TRANSLATE:-0}" = 1 ]; then
    t0=$SECONDS
    cross_dir=${NMT_CROSS_DIR:-$HOME/.cache/nmt-edge-cross}/$arch
    text="This package contains the development files for the library."
    got=$(echo "$text" | env OCL_ICD_VENDORS="$cross_dir/pocl.icd" POCL_CACHE_DIR="$(cd "$build" && pwd)/pocl-cache" \
          LD_LIBRARY_PATH="$ex/prefix/lib/$triple:$cross_dir/root/usr/lib/$triple:$cross_dir/root/lib/$triple" \
          qemu-aarch64-static -L / "$ex/pc/translate_lines" models/en-de.nmt 2> "$ex/err") ||
      { cat "$ex/err" >&2; exit 1; }
    [[ $got == *Paket* ]] || { echo "test-arm: translate_lines under qemu printed '$got'" >&2; exit 1; }
    echo "test-arm: translate_lines (arm64) under qemu: $got ($((SECONDS - t0)) s)"
  fi
fi
# NMT_ARM_TESTS: a list of test names, each of which must exist (a renamed
# test must not drop out of CI's subset unnoticed)
if [ -n "${NMT_ARM_TESTS:-}" ]; then
  all=$(ctest --test-dir "$build" -N | sed -n 's/^ *Test *#[0-9]*: //p')
  names=()
  for t in $NMT_ARM_TESTS; do
    grep -qxF "$t" <<< "$all" ||
      { echo "test-arm: NMT_ARM_TESTS names '$t', which is not a test of $build" >&2; exit 1; }
    names+=("$t")
  done
  set -- -R "^($(IFS='|'; echo "${names[*]}"))\$" "$@"
fi
# PoCL keeps one pthread per core; under qemu two tests at a time is the sweet spot
ctest --test-dir "$build" --output-on-failure -j2 "$@"
