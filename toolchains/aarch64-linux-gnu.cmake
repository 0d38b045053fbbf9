# SPDX-License-Identifier: MIT
# Cross-compile for 64-bit ARM Linux boards with Debian's gcc-aarch64-linux-gnu
# (or clang: -DNMT_CROSS_CLANG=ON).  Set-up and test run: docs/CROSS.md.
#   bash scripts/cross-setup.sh arm64
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release
#         (a product build; -DNMT_BUILD_BENCH=ON adds the benchmarks; docs/CROSS.md, "Release builds")
#   cmake --build build-arm64 && ctest --test-dir build-arm64      (under qemu-user)
# or all of it: bash scripts/test-arm.sh arm64
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(NMT_CROSS_TRIPLE aarch64-linux-gnu)
set(NMT_CROSS_DEBARCH arm64)
set(NMT_CROSS_QEMU qemu-aarch64-static)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
