# SPDX-License-Identifier: MIT
# Debian packages with CPack (issue 20; docs/INTEGRATION.md "Debian packages").
# Included at the end of CMakeLists.txt, after cmake/nmt_shared.cmake.  The
# install() rules name four components, one package each:
#   bin    nmt-edge            the nmt-edge program (the runtime linked in statically)
#   lib    libnmtedge<SOVER>   the shared library (BUILD_SHARED_LIBS=ON), e.g. libnmtedge1
#                              for SONAME libnmtedge.so.1 (Debian's library package naming)
#   dev    libnmtedge-dev      nmt_edge.h, libnmtedge.a, the libnmtedge.so link, the CMake
#                              package and nmt-edge.pc
#   tools  nmt-edge-tools      nmt-edge-train, nmt-edge-convert, nmt-edge-tune
# Build them (scripts/test-deb.sh does, then installs, uses, lints and removes them):
#   cmake -S . -B build-deb -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr -DNMT_BUILD_TESTS=OFF
#   cmake --build build-deb && (cd build-deb && cpack -G DEB)
# The Architecture is dpkg's natively and the toolchain's NMT_CROSS_DEBARCH
# (arm64, armhf) when cross-compiling.  Depends: dpkg-shlibdeps natively
# (libc6, ocl-icd-libopencl1 | libopencl1, libclblast1 from their shlibs
# files); cross-compiled packages get the same list written out (NMT_DEB_DEPENDS)
# and need -DCMAKE_INSTALL_LIBDIR=lib/<triple> for the multiarch library
# directory (scripts/test-arm.sh passes it; GNUInstallDirs picks it natively).
# Each package carries /usr/share/doc/<package>/{copyright,changelog.Debian.gz}
# and its lintian overrides; those files are EXCLUDE_FROM_ALL, so a plain
# `cmake --install` does not install them.
set(NMT_DEB_MAINTAINER "nmt-edge maintainers <maintainers@users.noreply.a-seed-10b26263.example>"
    CACHE STRING "Maintainer field of the Debian packages")
set(NMT_DEB_RELEASE 1 CACHE STRING "Debian revision of the packages (version ${PROJECT_VERSION}-<this>)")

set(NMT_DEB_LIB_PACKAGE libnmtedge${NMT_SOVERSION})
set(NMT_DEB_VERSION ${PROJECT_VERSION}-${NMT_DEB_RELEASE})
set(NMT_DEB_PACKAGES nmt-edge libnmtedge-dev nmt-edge-tools)
set(CPACK_COMPONENTS_ALL bin dev tools)
if(BUILD_SHARED_LIBS)
  list(APPEND NMT_DEB_PACKAGES ${NMT_DEB_LIB_PACKAGE})
  list(APPEND CPACK_COMPONENTS_ALL lib)
endif()

# --- /usr/share/doc/<package>/ and lintian overrides -------------------------
# The changelog's date: SOURCE_DATE_EPOCH when set (scripts/test-deb.sh sets
# the last commit's), else the configure time.
string(TIMESTAMP NMT_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(_deb_dir ${CMAKE_BINARY_DIR}/deb)
configure_file(${CMAKE_SOURCE_DIR}/cmake/deb/changelog.in ${_deb_dir}/changelog @ONLY)
find_program(NMT_GZIP gzip)
if(NMT_GZIP)
  execute_process(COMMAND ${NMT_GZIP} -9 -n -c ${_deb_dir}/changelog
                  OUTPUT_FILE ${_deb_dir}/changelog.Debian.gz RESULT_VARIABLE _rc)
endif()
foreach(_pkg IN LISTS NMT_DEB_PACKAGES)
  if(_pkg STREQUAL "nmt-edge")
    set(_comp bin)
  elseif(_pkg STREQUAL "libnmtedge-dev")
    set(_comp dev)
  elseif(_pkg STREQUAL "nmt-edge-tools")
    set(_comp tools)
  else()
    set(_comp lib)
  endif()
  install(FILES ${CMAKE_SOURCE_DIR}/cmake/deb/copyright ${_deb_dir}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_pkg} COMPONENT ${_comp} EXCLUDE_FROM_ALL)
  set(_ovr ${CMAKE_SOURCE_DIR}/cmake/deb/${_comp}.lintian-overrides)
  if(EXISTS ${_ovr})
    install(FILES ${_ovr} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${_pkg}
            COMPONENT ${_comp} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# --- CPack ------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nmt-edge)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${NMT_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${NMT_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SOURCE nmt-edge)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
if(DEFINED NMT_CROSS_DEBARCH)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${NMT_CROSS_DEBARCH})
endif()

# Dependencies on Debian's packages.  Natively dpkg-shlibdeps reads them from
# the binaries (what they link: libOpenCL.so.1, libclblast.so.1, libm, libc);
# cross-compiled, dpkg-shlibdeps cannot read the foreign binaries reliably, so
# the same list is written out.
set(_deps "libc6 (>= 2.34), ocl-icd-libopencl1 | libopencl1")
set(_dev_deps "ocl-icd-opencl-dev | opencl-dev")
if(NMT_WITH_CLBLAST AND CLBLAST_LIB)
  string(APPEND _deps ", libclblast1")
  string(APPEND _dev_deps ", libclblast-dev")
endif()
set(NMT_DEB_DEPENDS "${_deps}" CACHE STRING "Depends of the cross-compiled packages (dpkg-shlibdeps natively)")
if(CMAKE_CROSSCOMPILING)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  foreach(_c BIN LIB TOOLS)
    set(CPACK_DEBIAN_${_c}_PACKAGE_DEPENDS "${NMT_DEB_DEPENDS}")
  endforeach()
else()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_BIN_PACKAGE_NAME nmt-edge)
set(CPACK_DEBIAN_BIN_PACKAGE_SECTION science)
# an OpenCL driver to run on (PoCL runs on any CPU)
set(CPACK_DEBIAN_BIN_PACKAGE_RECOMMENDS "pocl-opencl-icd | opencl-icd")
set(CPACK_COMPONENT_BIN_DESCRIPTION
"allocation-free neural machine translation on OpenCL devices
nmt-edge translates text with Transformer, HySAN, MG-SA and phrase
attention models (.nmt files) on any OpenCL 1.2 device: desktop and
mobile GPUs, FPGAs, or the CPU through PoCL.  After its session is
created, translating performs no heap allocation.

This package contains the nmt-edge program (translate, score, inspect
models and devices).")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${NMT_DEB_LIB_PACKAGE})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# ldconfig through dpkg's trigger (lintian: lacks-ldconfig-trigger).  CPack
# 3.25 also writes a postinst/postrm calling ldconfig for every library under
# /usr/lib (lintian warns maintscript-calls-ldconfig; overridden with the
# reason in cmake/deb/lib.lintian-overrides).
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/cmake/deb/triggers)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_COMPONENT_LIB_DESCRIPTION
"allocation-free neural machine translation runtime (shared library)
libnmtedge runs Transformer, HySAN, MG-SA and phrase attention
translation models (.nmt files) on any OpenCL 1.2 device from a
caller-provided memory arena, with no heap allocation after a session
is created.

This package contains the shared library.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libnmtedge-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
if(BUILD_SHARED_LIBS)
  set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${NMT_DEB_LIB_PACKAGE} (= ${NMT_DEB_VERSION}), ${_dev_deps}")
else()
  set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_dev_deps}")
endif()
set(CPACK_COMPONENT_DEV_DESCRIPTION
"allocation-free neural machine translation runtime (development files)
libnmtedge runs Transformer, HySAN, MG-SA and phrase attention
translation models (.nmt files) on any OpenCL 1.2 device from a
caller-provided memory arena, with no heap allocation after a session
is created.

This package contains the header nmt_edge.h, the static library, the
CMake package (find_package(nmt_edge CONFIG)) and the pkg-config file
nmt-edge.pc.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME nmt-edge-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION science)
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "pocl-opencl-icd | opencl-icd")
# nmt-edge-convert import runs /usr/share/nmt-edge/import/*.py (docs/IMPORT.md)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "python3, python3-numpy")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
"train, convert and tune models for nmt-edge
nmt-edge translates text with Transformer, HySAN, MG-SA and phrase
attention models on any OpenCL 1.2 device.

This package contains its workstation tools: nmt-edge-train (trains
models on an OpenCL device), nmt-edge-convert (writes .nmt models from
other formats, or random ones; its import of Hugging Face Marian models
needs python3 and python3-numpy) and nmt-edge-tune (measures kernel
parameters for a device).")

include(CPack)
