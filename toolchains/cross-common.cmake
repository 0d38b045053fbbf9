# SPDX-License-Identifier: MIT
# Shared part of the Debian multiarch cross toolchains (included by
# aarch64-linux-gnu.cmake and arm-linux-gnueabihf.cmake, which set
# NMT_CROSS_TRIPLE, NMT_CROSS_DEBARCH and NMT_CROSS_QEMU).
#
# Compilers: ${NMT_CROSS_TRIPLE}-gcc (Debian's gcc-<triple>), or clang with
# --target when NMT_CROSS_CLANG=ON (clang uses the same GNU binutils, headers
# and libraries).  Libraries and headers come from the multiarch directories
# /usr/lib/<triple> and /usr/include/<triple>, where the ARM builds of the
# OpenCL ICD loader, CLBlast and cmocka are installed beside the native ones
# (scripts/cross-setup.sh).
#
# Tests and build-time programs run under qemu-user
# (CMAKE_CROSSCOMPILING_EMULATOR) with:
#   -L /               the ARM glibc of the multiarch packages; NOT
#                      /usr/<triple>, which mixes two glibc builds and hangs PoCL
#   OCL_ICD_VENDORS    the .icd file (not its directory: a directory does not
#                      work for armhf under qemu) naming the ARM PoCL that
#                      cross-setup.sh unpacked privately
#   LD_LIBRARY_PATH    that PoCL's libraries (root/usr/lib/<triple> and root/lib/<triple>:
#                      zlib1g, libtinfo6 and liblzma5 unpack into /lib) (harmless to the host: qemu-*-static
#                      is static, and host programs skip foreign-arch libraries)
# The PoCL directory is $NMT_CROSS_DIR/<debarch> (default
# ~/.cache/nmt-edge-cross/<debarch>), read when CMake configures.
set(CMAKE_SYSTEM_NAME Linux)

option(NMT_CROSS_CLANG "Cross-compile with clang --target instead of <triple>-gcc" OFF)
if(NMT_CROSS_CLANG)
  set(CMAKE_C_COMPILER clang)
  set(CMAKE_C_COMPILER_TARGET ${NMT_CROSS_TRIPLE})
  set(CMAKE_CXX_COMPILER clang++)
  set(CMAKE_CXX_COMPILER_TARGET ${NMT_CROSS_TRIPLE})
  # the GNU cross binutils (ld, ar, nm) of gcc-<triple>
  set(CMAKE_AR ${NMT_CROSS_TRIPLE}-ar CACHE FILEPATH "")
  set(CMAKE_NM ${NMT_CROSS_TRIPLE}-nm CACHE FILEPATH "")
  set(CMAKE_RANLIB ${NMT_CROSS_TRIPLE}-ranlib CACHE FILEPATH "")
else()
  set(CMAKE_C_COMPILER ${NMT_CROSS_TRIPLE}-gcc)
  set(CMAKE_CXX_COMPILER ${NMT_CROSS_TRIPLE}-g++)
endif()
set(CMAKE_LIBRARY_ARCHITECTURE ${NMT_CROSS_TRIPLE})

# Debian multiarch: target libraries live in /usr/lib/<triple> (found through
# CMAKE_LIBRARY_ARCHITECTURE under the normal prefixes), never host ones.
set(CMAKE_FIND_ROOT_PATH /usr/${NMT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

find_program(NMT_QEMU ${NMT_CROSS_QEMU})
if(DEFINED ENV{NMT_CROSS_DIR})
  set(_nmt_cross_dir "$ENV{NMT_CROSS_DIR}/${NMT_CROSS_DEBARCH}")
else()
  set(_nmt_cross_dir "$ENV{HOME}/.cache/nmt-edge-cross/${NMT_CROSS_DEBARCH}")
endif()
if(NMT_QEMU)
  set(_nmt_emu ${NMT_QEMU} -L /)
  if(EXISTS "${_nmt_cross_dir}/pocl.icd")
    set(_nmt_emu env "OCL_ICD_VENDORS=${_nmt_cross_dir}/pocl.icd"
        "LD_LIBRARY_PATH=${_nmt_cross_dir}/root/usr/lib/${NMT_CROSS_TRIPLE}:${_nmt_cross_dir}/root/lib/${NMT_CROSS_TRIPLE}" ${_nmt_emu})
  else()
    message(WARNING "No ARM PoCL in ${_nmt_cross_dir} (run scripts/cross-setup.sh ${NMT_CROSS_DEBARCH}): "
                    "tests that need an OpenCL device will fail under qemu")
  endif()
  set(CMAKE_CROSSCOMPILING_EMULATOR ${_nmt_emu})
else()
  message(WARNING "${NMT_CROSS_QEMU} not found: cross-built tests cannot run on this machine")
endif()
