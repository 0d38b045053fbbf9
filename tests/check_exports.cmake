# SPDX-License-Identifier: MIT
# shared_exports (registered with BUILD_SHARED_LIBS=ON, cmake/nmt_shared.cmake):
# the shared libnmtedge exports exactly the NMT_API functions declared in
# include/nmt_edge.h, and its SONAME is the expected one.
#   cmake -DNM=nm -DREADELF=readelf -DLIB=libnmtedge.so -DSONAME=libnmtedge.so.1
#         -DHEADER=include/nmt_edge.h -P check_exports.cmake
file(READ ${HEADER} header)
# drop preprocessor lines (the #define NMT_API lines themselves)
string(REGEX REPLACE "(^|\n)[ \t]*#[^\n]*" "\\1" header "${header}")
# "NMT_API <return type> <name>(" — declarations may span lines after the "("
string(REGEX MATCHALL "NMT_API[^;(]*[ \t\n*]([A-Za-z_][A-Za-z0-9_]*)[ \t\n]*\\(" decls "${header}")
set(declared "")
foreach(d IN LISTS decls)
  string(REGEX REPLACE ".*[ \t\n*]([A-Za-z_][A-Za-z0-9_]*)[ \t\n]*\\($" "\\1" name "${d}")
  list(APPEND declared ${name})
endforeach()
list(REMOVE_DUPLICATES declared)
list(SORT declared)
list(LENGTH declared n_declared)
if(n_declared LESS 10)
  message(FATAL_ERROR "found only ${n_declared} NMT_API declarations in ${HEADER}: the pattern is broken")
endif()

execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${syms}")
set(exported "")
foreach(line IN LISTS lines)
  # "<address> <type> <name>[@version]"; every defined dynamic symbol counts
  # (functions T, data D/B/R, weak W/V), not only functions
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()
list(REMOVE_DUPLICATES exported)
list(SORT exported)

set(extra ${exported})
list(REMOVE_ITEM extra ${declared})
set(missing ${declared})
if(exported)
  list(REMOVE_ITEM missing ${exported})
endif()
set(fail "")
if(extra)
  string(APPEND fail "exported but not NMT_API in the header: ${extra}\n")
endif()
if(missing)
  string(APPEND fail "NMT_API in the header but not exported: ${missing}\n")
endif()

execute_process(COMMAND ${READELF} -d ${LIB} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT dyn MATCHES "\\(SONAME\\)[^\n]*\\[([^]]*)\\]")
  string(APPEND fail "no SONAME in ${LIB}\n")
elseif(NOT CMAKE_MATCH_1 STREQUAL SONAME)
  string(APPEND fail "SONAME is ${CMAKE_MATCH_1}, expected ${SONAME}\n")
endif()
if(fail)
  message(FATAL_ERROR "${LIB}:\n${fail}")
endif()
list(LENGTH exported n)
message(STATUS "${LIB}: SONAME ${SONAME}; exports the ${n} NMT_API functions of ${HEADER}, nothing else")
