# SPDX-License-Identifier: MIT
# Shared libnmtedge (issue 20; docs/INTEGRATION.md "Shared library").
# Included at the end of CMakeLists.txt.  With BUILD_SHARED_LIBS=ON the
# build makes libnmtedge.so.<SOVERSION> beside the static libnmtedge.a, from
# the same objects (compiled once, position-independent):
#   - SONAME libnmtedge.so.<major>.<minor> while the major version is 0 (every
#     0.x minor may change the ABI, as the CMake package's SameMinorVersion
#     says), libnmtedge.so.<major> from 1.0 on;
#   - only the NMT_API functions of include/nmt_edge.h are exported: the
#     runtime compiles with hidden visibility (C_VISIBILITY_PRESET hidden) and
#     NMT_API marks the public functions visibility("default"); the test
#     shared_exports (tests/check_exports.cmake) compares the .so's dynamic
#     symbols with the header's NMT_API functions and its SONAME;
#   - the installed CMake package's nmt_edge::nmtedge is then the shared
#     library and nmt_edge::nmtedge_static the static one (both installed).
# Every program of the project (nmt-edge, nmt-edge-convert, nmt-edge-train,
# nmt-edge-tune, the benchmarks and the tests) keeps linking the static
# target nmtedge: they use internal interfaces (runtime/*/*.h, tools/) that the
# shared library hides.  Static stays the default (BUILD_SHARED_LIBS OFF):
# every add_library of the project names its type, so the option changes
# nothing else.
option(BUILD_SHARED_LIBS "Also build libnmtedge as a shared library (the programs keep linking the static one)" OFF)

if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(NMT_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(NMT_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

if(BUILD_SHARED_LIBS)
  set_target_properties(nmtedge PROPERTIES EXPORT_NAME nmtedge_static)
  # The static library's objects (its layers' OBJECT libraries, compiled
  # position-independent when BUILD_SHARED_LIBS is on), linked once more
  # into the shared one: no second compile.
  add_library(nmtedge_shared SHARED ${NMT_RUNTIME_OBJECTS})
  # the dev component installs both libraries: building the shared one
  # (scripts/test-install.sh builds only it) archives the static one too
  add_dependencies(nmtedge_shared nmtedge)
  set_target_properties(nmtedge_shared PROPERTIES
    OUTPUT_NAME nmtedge EXPORT_NAME nmtedge LINKER_LANGUAGE C
    VERSION ${PROJECT_VERSION} SOVERSION ${NMT_SOVERSION})
  target_include_directories(nmtedge_shared PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # OpenCL, CLBlast and libm are the .so's own DT_NEEDED entries: a program
  # that uses the shared library links libnmtedge alone.
  target_link_libraries(nmtedge_shared PRIVATE OpenCL::OpenCL ${MATH_LIB})
  if(NMT_WITH_CLBLAST AND CLBLAST_LIB)
    target_link_libraries(nmtedge_shared PRIVATE ${CLBLAST_LIB})
  endif()
  if(NOT NMT_FUZZ)
    target_link_options(nmtedge_shared PRIVATE LINKER:--no-undefined LINKER:--as-needed)
  endif()
  install(TARGETS nmtedge_shared EXPORT nmt_edgeTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev)
  if(NMT_BUILD_TESTS)
    add_test(NAME shared_exports
             COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DREADELF=${CMAKE_READELF}
                     -DLIB=$<TARGET_FILE:nmtedge_shared> -DSONAME=libnmtedge.so.${NMT_SOVERSION}
                     -DHEADER=${CMAKE_SOURCE_DIR}/include/nmt_edge.h
                     -P ${CMAKE_SOURCE_DIR}/tests/check_exports.cmake)
  endif()
endif()
