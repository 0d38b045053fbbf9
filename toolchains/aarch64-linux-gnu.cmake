# Cross-compile for 64-bit ARM Linux boards with Debian's gcc-aarch64-linux-gnu.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake
# Dependencies (OpenCL ICD loader, CLBlast, cmocka) come from the arm64
# packages installed beside the native ones (dpkg --add-architecture arm64).
# Tests run under qemu-user when it is installed (issue 7 adds the PoCL
# set-up that makes them pass on x86-64).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(NMT_CROSS_TRIPLE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
