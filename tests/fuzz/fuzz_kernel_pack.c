/* SPDX-License-Identifier: MIT */
/* fuzz_kernel_pack.c — the kernel pack reader (runtime/device/kernel_pack.c,
 * docs/FORMAT.md "Kernel packs") on arbitrary bytes: nmt_kpack_parse with
 * and without the binaries' CRCs, and the entry accessor.  No device: the
 * device side (identity, program lookup) runs only on images the parser
 * accepted, and kernel_pack_test drives it with every bad pack.
 *
 * The CRCs guard every byte, so fuzz_kernel_pack_crcfix.c builds this file
 * with NMT_FUZZ_FIX_CRC=1: the input is resealed first (nmt_kpack_seal:
 * binary, table and header CRCs wherever the fields point), so mutations
 * reach the structural checks behind the checksums; sealing arbitrary bytes
 * must itself stay inside the input.
 *
 * Invariants (abort() on violation):
 *   - the status is one of OK, KERNEL_PACK_CORRUPT, KERNEL_PACK_VERSION,
 *     and `why` is a NUL-terminated line, empty exactly on success;
 *   - accepted with the binaries' CRCs => accepted without them, same header;
 *   - an accepted image: file_size == size, at most 256 programs, every
 *     entry's name a non-empty NUL-terminated stem (or stems joined by +), its options
 *     NUL-terminated, its binary non-empty, 64-aligned, after the table,
 *     inside the input and after the previous one; a second parse agrees. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_pack.h"
#include "nmt_edge.h"

#ifndef NMT_FUZZ_FIX_CRC
#define NMT_FUZZ_FIX_CRC 0
#endif

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_kernel_pack: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void check_accepted(const uint8_t *d, size_t size, const nmt_kpack_header *h) {
    CHECK(h->file_size == size);
    CHECK(h->n_programs <= NMT_KPACK_MAX_PROGRAMS);
    uint64_t prev = NMT_KPACK_HEADER_SIZE + (uint64_t)h->n_programs * NMT_KPACK_ENTRY_SIZE;
    CHECK(prev <= size);
    for (uint32_t i = 0; i < h->n_programs; i++) {
        nmt_kpack_entry e;
        nmt_kpack_entry_at(d, i, &e);
        CHECK(memchr(e.name, '\0', sizeof e.name) != NULL && e.name[0] != '\0');
        CHECK(strchr(e.name, '/') == NULL && strchr(e.name, '.') == NULL);
        CHECK(memchr(e.options, '\0', sizeof e.options) != NULL);
        CHECK(e.size > 0 && e.offset % NMT_KPACK_ALIGN == 0 && e.offset >= prev);
        CHECK(e.offset <= size && e.size <= size - e.offset);
        prev = e.offset + e.size;
    }
    CHECK(prev == size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *d = malloc(size ? size : 1);
    CHECK(d != NULL);
    if (size) memcpy(d, data, size);
    if (NMT_FUZZ_FIX_CRC) nmt_kpack_seal(d, size);

    nmt_kpack_header h1, h0;
    char why1[256], why0[256];
    const nmt_status s1 = nmt_kpack_parse(size ? d : NULL, size, 1, &h1, why1, sizeof why1);
    const nmt_status s0 = nmt_kpack_parse(size ? d : NULL, size, 0, &h0, why0, sizeof why0);
    CHECK(s1 == NMT_OK || s1 == NMT_ERR_KERNEL_PACK_CORRUPT || s1 == NMT_ERR_KERNEL_PACK_VERSION);
    CHECK(s0 == NMT_OK || s0 == NMT_ERR_KERNEL_PACK_CORRUPT || s0 == NMT_ERR_KERNEL_PACK_VERSION);
    CHECK(memchr(why1, '\0', sizeof why1) != NULL && memchr(why0, '\0', sizeof why0) != NULL);
    CHECK((s1 == NMT_OK) == (why1[0] == '\0'));
    CHECK((s0 == NMT_OK) == (why0[0] == '\0'));
    if (s1 == NMT_OK) {
        CHECK(s0 == NMT_OK);
        CHECK(memcmp(&h0, &h1, sizeof h0) == 0);
    }
    if (s0 == NMT_OK) {
        check_accepted(d, size, &h0);
        nmt_kpack_header again;
        CHECK(nmt_kpack_parse(d, size, 0, &again, NULL, 0) == NMT_OK);
        CHECK(memcmp(&again, &h0, sizeof again) == 0);
    }
    free(d);
    return 0;
}
