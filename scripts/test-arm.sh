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
  arm64) tc=toolchains/aarch64-linux-gnu.cmake ;;
  armhf) tc=toolchains/arm-linux-gnueabihf.cmake ;;
  *) echo "test-arm: unknown architecture $arch (arm64 or armhf)" >&2; exit 2 ;;
esac
bash scripts/setup.sh
bash scripts/cross-setup.sh "$arch"
# Warnings are errors on both architectures (NMT_ARM_WERROR=OFF overrides).
cmake -S . -B "build-$arch" -DCMAKE_TOOLCHAIN_FILE="$tc" -DNMT_WERROR="${NMT_ARM_WERROR:-ON}"
cmake --build "build-$arch" -j"$(nproc)"
# PoCL keeps one pthread per core; under qemu two tests at a time is the sweet spot
ctest --test-dir "build-$arch" --output-on-failure -j2 "$@"
