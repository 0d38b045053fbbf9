/* SPDX-License-Identifier: MIT */
/* fuzz_file.c — model files that are not what they were (issue 21):
 *
 *   non-regular files: nmt_map_file and nmt_model_inspect_file refuse a
 *     device (/dev/null, /dev/zero) and a directory with NMT_ERR_IO and
 *     errno ENODEV / EISDIR, before reading; the input, written to a
 *     regular file, inspects exactly as the same bytes in memory do;
 *   a shrinking file: the SentencePiece fixture is written to a file,
 *     mapped, and a tokenizer created over the mapping; the file is then
 *     truncated at an input-chosen length and the input's text encoded and
 *     decoded.  The result must equal that of a tokenizer over a heap copy:
 *     a tokenizer keeps nothing of the bytes it was created from (reading
 *     the cut pages would be SIGBUS).
 *
 * Input layout: bytes 0..3 the truncation length (little-endian, modulo
 * the fixture's size), the rest the text. */
#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nmt_edge.h"
#include "platform.h"

#ifndef NMT_FUZZ_SPM_MODEL
#error "NMT_FUZZ_SPM_MODEL must name a SentencePiece .model fixture"
#endif

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_file: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define MAX_TEXT 1024u

static char g_path[64];   /* this process's scratch file */
static uint8_t *g_spm;    /* the fixture, on the heap */
static size_t g_spm_size;

static void remove_scratch(void) {
    if (g_path[0]) unlink(g_path);
}

static void init(void) {
    if (g_spm != NULL) return;
    nmt_mapping m;
    CHECK(nmt_map_file(NMT_FUZZ_SPM_MODEL, &m) == NMT_OK && m.size > 0);
    g_spm = malloc(m.size);
    CHECK(g_spm != NULL);
    memcpy(g_spm, m.data, m.size);
    g_spm_size = m.size;
    nmt_unmap_file(&m);
    snprintf(g_path, sizeof g_path, "/tmp/nmt-fuzz-file-XXXXXX");
    int fd = mkstemp(g_path);
    CHECK(fd >= 0);
    close(fd);
    atexit(remove_scratch);
}

static void write_scratch(const void *data, size_t size) {
    FILE *f = fopen(g_path, "wb");
    CHECK(f != NULL);
    CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
}

static void non_regular(const uint8_t *data, size_t size) {
    static const char *const devices[] = {"/dev/null", "/dev/zero"};
    nmt_mapping m;
    for (size_t i = 0; i < 2; i++) {
        errno = 0;
        CHECK(nmt_map_file(devices[i], &m) == NMT_ERR_IO && errno == ENODEV && m.data == NULL);
    }
    errno = 0;
    CHECK(nmt_map_file("/", &m) == NMT_ERR_IO && errno == EISDIR);
    nmt_model_info a, b;
    CHECK(nmt_model_inspect_file("/dev/zero", &a) == NMT_ERR_IO);
    write_scratch(data, size);
    CHECK(nmt_model_inspect_file(g_path, &a) == nmt_model_inspect(size ? data : NULL, size, &b));
}

/* Encode + decode `text` with t into ids/out; returns the status pair. */
static nmt_status run(nmt_tokenizer *t, const char *text, size_t n, int32_t *ids, uint32_t *n_ids,
                      char *out, size_t cap, size_t *len) {
    const int32_t *p;
    nmt_status st = nmt_tokenizer_encode(t, text, n, &p, n_ids);
    if (st != NMT_OK) return st;
    memcpy(ids, p, *n_ids * sizeof *p);
    return nmt_tokenizer_decode(t, ids, *n_ids, out, cap, len);
}

static void shrinking(uint32_t cut, const char *text, size_t n) {
    size_t need;
    CHECK(nmt_tokenizer_arena_size(g_spm, g_spm_size, MAX_TEXT, &need) == NMT_OK);
    void *arena_ref = aligned_alloc(64, (need + 63) / 64 * 64);
    void *arena_map = aligned_alloc(64, (need + 63) / 64 * 64);
    CHECK(arena_ref != NULL && arena_map != NULL);
    nmt_tokenizer *ref, *live;
    CHECK(nmt_tokenizer_create(g_spm, g_spm_size, MAX_TEXT, arena_ref, need, &ref) == NMT_OK);
    write_scratch(g_spm, g_spm_size);
    nmt_mapping m;
    CHECK(nmt_map_file(g_path, &m) == NMT_OK && m.size == g_spm_size);
    CHECK(nmt_tokenizer_create(m.data, m.size, MAX_TEXT, arena_map, need, &live) == NMT_OK);
    CHECK(truncate(g_path, (off_t)(cut % g_spm_size)) == 0);

    int32_t ids_a[4 * MAX_TEXT + 16], ids_b[4 * MAX_TEXT + 16];
    static char out_a[64 * MAX_TEXT], out_b[64 * MAX_TEXT];
    uint32_t na = 0, nb = 0;
    size_t la = 0, lb = 0;
    const nmt_status sa = run(ref, text, n, ids_a, &na, out_a, sizeof out_a, &la);
    const nmt_status sb = run(live, text, n, ids_b, &nb, out_b, sizeof out_b, &lb);
    CHECK(sa == sb && na == nb && la == lb);
    if (sa == NMT_OK) {
        CHECK(memcmp(ids_a, ids_b, na * sizeof *ids_a) == 0);
        CHECK(memcmp(out_a, out_b, la) == 0);
    }
    nmt_unmap_file(&m);
    free(arena_ref);
    free(arena_map);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    non_regular(data, size);
    if (size < 4) return 0;
    const uint32_t cut = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                         (uint32_t)data[3] << 24;
    size_t n = size - 4;
    if (n > MAX_TEXT) n = MAX_TEXT;
    shrinking(cut, (const char *)data + 4, n);
    return 0;
}
