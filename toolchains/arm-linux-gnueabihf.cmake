# SPDX-License-Identifier: MIT
# Cross-compile for 32-bit ARM (ARMv7 hard-float) Linux boards with Debian's
# gcc-arm-linux-gnueabihf (or clang: -DNMT_CROSS_CLANG=ON).  See docs/CROSS.md.
#   bash scripts/cross-setup.sh armhf
#   cmake -S . -B build-armhf -DCMAKE_TOOLCHAIN_FILE=toolchains/arm-linux-gnueabihf.cmake -DCMAKE_BUILD_TYPE=Release
# or all of it: bash scripts/test-arm.sh armhf
set(CMAKE_SYSTEM_PROCESSOR arm)
set(NMT_CROSS_TRIPLE arm-linux-gnueabihf)
set(NMT_CROSS_DEBARCH armhf)
set(NMT_CROSS_QEMU qemu-arm-static)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
