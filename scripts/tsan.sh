#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tsan.sh — the tests that run the library on several threads under
# ThreadSanitizer, in build-tsan/ (issue 56: include/nmt_edge.h "Threads").
#
#   bash scripts/tsan.sh [ctest args...]      default: -R '^threads_test$'
#
# clang, as scripts/sanitize.sh.  The OpenCL driver (PoCL and its LLVM) is
# not instrumented: ThreadSanitizer sees the library's and the test's own
# memory accesses and their synchronisation, which is what the contract is
# about (one device handle per thread; nothing shared but the read-only
# model image and the program-cache directory).  Every report fails the test
# (halt_on_error); tests/sanitizers/tsan.supp names what is suppressed and why.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/apt-lib.sh
need_clang
mkdir -p build/pocl-cache
cmake -S . -B build-tsan -DCMAKE_C_COMPILER=clang -DNMT_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNMT_TEST_TIMEOUT=1800 -DNMT_TEST_POCL_CACHE_DIR="$PWD/build/pocl-cache" \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
cmake --build build-tsan -j"$(nproc)" --target threads_test stream_test
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
if [ $# -eq 0 ]; then set -- -R '^(threads_test|stream_test)$'; fi
ctest --test-dir build-tsan --output-on-failure -j"$(nproc)" "$@"
