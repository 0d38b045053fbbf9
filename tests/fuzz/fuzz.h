/* SPDX-License-Identifier: MIT */
/* fuzz.h — the libFuzzer entry point every tests/fuzz/fuzz_*.c defines.
 * Built two ways by tests/fuzz/CMakeLists.txt:
 *   NMT_FUZZ=ON (clang):  -fsanitize=fuzzer,address,undefined, libFuzzer's main
 *   otherwise:            replay_main.c runs the harness once per file of the
 *                         seed corpus and the regression inputs (ctest)
 * A harness aborts (abort()) when an invariant fails, so both ways catch it. */
#ifndef NMT_FUZZ_H
#define NMT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
