# Shared part of the Debian multiarch cross toolchains: compilers named by
# NMT_CROSS_TRIPLE, libraries and headers from /usr/lib/<triple> and
# /usr/include, programs from the host.
set(CMAKE_C_COMPILER ${NMT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${NMT_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${NMT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH /usr/${NMT_CROSS_TRIPLE} /usr/lib/${NMT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
string(REPLACE "-linux-gnu" "" _nmt_qemu_arch "${NMT_CROSS_TRIPLE}")
string(REPLACE "-linux-gnueabihf" "" _nmt_qemu_arch "${_nmt_qemu_arch}")
find_program(NMT_QEMU qemu-${_nmt_qemu_arch}-static)
if(NMT_QEMU)
  # -L / : the ARM glibc from the multiarch packages (not /usr/<triple>, which
  # mixes two glibc builds).
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NMT_QEMU} -L /)
endif()
