#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sanitize.sh — the whole test suite under AddressSanitizer + UndefinedBehavior-
# Sanitizer (+ LeakSanitizer), in build-asan/.
#
#   bash scripts/sanitize.sh [ctest args...]      e.g.  -R fault_test
#
# clang (gcc 12 with -fsanitize reports false -Wformat-truncation errors that
# -Werror turns fatal).  Every UBSan report aborts the test (-fno-sanitize-recover).  LSan
# suppressions (tests/sanitizers/lsan.supp) cover only the OpenCL driver's
# own libraries (libpocl, libLLVM, libclang-cpp).  The runtime library is
# instrumented like everything else; the no_allocator_symbols check still
# applies (instrumentation adds __asan_* imports, never malloc).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/apt-lib.sh
need_clang
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Instrumented code and cold kernel builds: kernels_test and grad_test took
# 10-12 min each on a shared 2-core machine (measured before each was split
# into three programs: kernels_test, kernels_gemm_test, kernels_attn_test;
# grad_test, grad_attn_test, grad_exact_test), so a per-test limit of 30 min.
# The tests share PoCL's kernel cache with the native build (build/, which CI
# and scripts/test.sh fill first): PoCL's compiler is not instrumented and its
# output is the same, but under ASan (every malloc traced, see below)
# compiling took most of this part's time. kernels_gemm_test: 21 s with the
# shared cache against 748-1191 s cold (docs/RELIABILITY.md).
mkdir -p build/pocl-cache
cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DNMT_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNMT_TEST_TIMEOUT=1800 -DNMT_TEST_POCL_CACHE_DIR="$PWD/build/pocl-cache" \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-asan -j"$(nproc)"
# fast_unwind_on_malloc=1 (ASan's default; 0 until 2026-11-30): the full
# unwinder walks DWARF tables for every malloc and free, and PoCL's LLVM
# makes millions of them. On a 2-core VM without AVX-512 fault_test took
# 1,777 s of the 1,800 s limit that way, 349 s with this (the sweep's
# translate case 81 s -> 13 s). The reason for 0 was leak stacks that
# stopped at operator new, out of the suppressions' reach; no test reports
# a leak with 1 now but train_mpi_test, whose Open MPI leaks need the full
# unwinder: it appends fast_unwind_on_malloc=0 itself (tests/CMakeLists.txt;
# docs/RELIABILITY.md, "Sanitizers").
# intercept_tls_get_addr=0: the __tls_get_addr interceptor of clang <= 16's
# runtime takes a dynamic TLS block whose start happens to be at offset 16
# of a page for a pre-2.25 glibc header and reads garbage bounds from it;
# LSan's stop-the-world tracer then dies at exit ("Tracer caught signal 11")
# after a test has passed. PoCL's dlopen'ed libraries use dynamic TLS.
# fault_test tries every 5th k here (NMT_FAULT_STRIDE; 5 is prime to the
# 2 and 3 error codes each call cycles through, so every code is still
# injected): every k it took 804 s of this part's 931 s in a fresh clone's
# run on a 2-core VM without AVX-512 (2026-12-07), the critical path of the
# part, and the native suite tries every k for the statuses
# (docs/RELIABILITY.md, "OpenCL fault injection").
export NMT_FAULT_STRIDE=${NMT_FAULT_STRIDE:-5}
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:intercept_tls_get_addr=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" "$@"
