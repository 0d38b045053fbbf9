# Cross-compile for 32-bit ARM (hard-float) Linux boards with Debian's
# gcc-arm-linux-gnueabihf.  See aarch64-linux-gnu.cmake for the set-up.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(NMT_CROSS_TRIPLE arm-linux-gnueabihf)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
