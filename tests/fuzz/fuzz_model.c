/* SPDX-License-Identifier: MIT */
/* fuzz_model.c — the .nmt model loader on arbitrary bytes: nmt_file_open
 * (header, metadata, tensor table, data CRCs), the metadata and tensor
 * accessors, nmt_model_inspect (architecture parsing, required tensors) and
 * nmt_session_arena_size (planning; no device).
 *
 * Every CRC-32 in the format guards its bytes, so random mutations almost
 * always stop at NMT_ERR_MODEL_CHECKSUM.  fuzz_model_crcfix.c builds this
 * file with NMT_FUZZ_FIX_CRC=1: the input's CRCs are recomputed first
 * (tensor data, table, metadata, then the header, wherever the fields point
 * inside the input), so the fuzzer reaches the structural checks behind them.
 *
 * Invariants (abort() on violation, which both libFuzzer and the replay
 * runner report):
 *   - statuses are the loader's documented ones;
 *   - nmt_model_inspect fails with nmt_file_open's status when that fails;
 *   - every tensor view of an accepted file lies inside the input;
 *   - an accepted summary matches the input (size, tensor count, strings
 *     NUL-terminated) and is the same on a second call;
 *   - planning a session of an accepted model fails only for its limits or
 *     its embedded tokenizers' contents, never for the model's structure
 *     (regressions/model_crcfix/: a `tokenizer.src` of the wrong dtype,
 *     once accepted by inspect and refused by planning). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "nmt_edge.h"

#ifndef NMT_FUZZ_FIX_CRC
#define NMT_FUZZ_FIX_CRC 0
#endif

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_model: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                           \
        }                                                                      \
    } while (0)

static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* [off, off + n) inside [0, size) without overflow. */
static int in_range(uint64_t off, uint64_t n, size_t size) { return off <= size && n <= size - off; }

static void fix_crcs(uint8_t *d, size_t size) {
    if (size < NMT_FILE_HEADER_SIZE) return;
    const uint64_t meta_off = rd64(d + 24), meta_size = rd64(d + 32), table_off = rd64(d + 40);
    const uint32_t n_tensors = rd32(d + 48);
    const uint64_t table_bytes = (uint64_t)n_tensors * NMT_TENSOR_ENTRY_SIZE;
    if (in_range(table_off, table_bytes, size)) {
        for (uint32_t i = 0; i < n_tensors; i++) {
            uint8_t *e = d + table_off + (uint64_t)i * NMT_TENSOR_ENTRY_SIZE;
            const uint64_t off = rd64(e + 104), nbytes = rd64(e + 112);
            if (in_range(off, nbytes, size) && !(off < table_off + table_bytes && off + nbytes > table_off))
                wr32(e + 120, nmt_crc32(0, d + off, (size_t)nbytes));
        }
        wr32(d + 68, nmt_crc32(0, d + table_off, (size_t)table_bytes));
    }
    if (in_range(meta_off, meta_size, size)) wr32(d + 64, nmt_crc32(0, d + meta_off, (size_t)meta_size));
    wr32(d + 124, nmt_crc32(0, d, 124));
}

static int is_loader_status(nmt_status s) {
    switch (s) {
    case NMT_OK:
    case NMT_ERR_INVALID_ARGUMENT:
    case NMT_ERR_MODEL_TRUNCATED:
    case NMT_ERR_MODEL_BAD_MAGIC:
    case NMT_ERR_MODEL_VERSION:
    case NMT_ERR_MODEL_CHECKSUM:
    case NMT_ERR_MODEL_CORRUPT:
        return 1;
    default:
        return 0;
    }
}

static int is_model_status(nmt_status s) {
    return is_loader_status(s) || s == NMT_ERR_MODEL_ARCH || s == NMT_ERR_MODEL_MISSING_TENSOR ||
           s == NMT_ERR_MODEL_TENSOR_SHAPE;
}

static int nul_terminated(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

static void check_file(const nmt_file *f, const uint8_t *data, size_t size) {
    CHECK(f->h.n_tensors <= size / NMT_TENSOR_ENTRY_SIZE);
    for (uint32_t i = 0; i < f->h.n_tensors; i++) {
        nmt_tensor_view v;
        CHECK(nmt_file_tensor_at(f, i, &v) == NMT_OK);
        CHECK(v.dtype < NMT_DTYPE_COUNT_ && v.ndim >= 1 && v.ndim <= NMT_MAX_DIMS);
        const uint8_t *p = v.data;
        CHECK(p >= data && in_range((uint64_t)(p - data), v.nbytes, size));
        CHECK(v.n_elements * nmt_dtype_table[v.dtype].bytes <= v.nbytes);
        if (v.scales) {
            const uint8_t *sc = (const uint8_t *)v.scales;
            CHECK(sc >= data && in_range((uint64_t)(sc - data), (uint64_t)v.shape[0] * 4, size));
        }
        nmt_tensor_view w;
        CHECK(nmt_file_find(f, v.name, &w) == NMT_OK && w.data == v.data);
    }
    char buf[64];
    int64_t i64;
    double f64;
    static const char *const keys[] = {"arch", "d_model", "n_heads", "enc_branches", "ln_eps", "x"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        nmt_status s = nmt_file_get_str(f, keys[k], buf, sizeof buf);
        if (s == NMT_OK) CHECK(nul_terminated(buf, sizeof buf));
        (void)nmt_file_get_i64(f, keys[k], &i64);
        (void)nmt_file_get_f64(f, keys[k], &f64);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *img = data;
    uint8_t *copy = NULL;
    if (NMT_FUZZ_FIX_CRC) {
        copy = malloc(size ? size : 1);
        if (copy == NULL) return 0;
        memcpy(copy, data, size);
        fix_crcs(copy, size);
        img = copy;
    }

    nmt_file f;
    nmt_status so = nmt_file_open(&f, img, size, 1);
    CHECK(is_loader_status(so));
    if (so == NMT_OK) check_file(&f, img, size);

    nmt_model_info a, b;
    nmt_status si = nmt_model_inspect(img, size, &a);
    CHECK(is_model_status(si));
    if (so != NMT_OK) CHECK(si == so);
    if (si == NMT_OK) {
        CHECK(a.file_size == size && a.n_tensors == f.h.n_tensors && a.format_version == NMT_FILE_VERSION);
        CHECK(nul_terminated(a.arch, sizeof a.arch) && nul_terminated(a.norm, sizeof a.norm));
        CHECK(nul_terminated(a.enc_branches, sizeof a.enc_branches));
        CHECK(nul_terminated(a.dec_branches, sizeof a.dec_branches));
        CHECK(nul_terminated(a.fusion, sizeof a.fusion) && nul_terminated(a.dtype, sizeof a.dtype));
        CHECK(a.d_model > 0 && a.n_heads > 0 && a.src_vocab > 0 && a.tgt_vocab > 0);
        CHECK(a.bos_id < a.tgt_vocab && a.eos_id < a.tgt_vocab);
        CHECK(nmt_model_inspect(img, size, &b) == NMT_OK && memcmp(&a, &b, sizeof a) == 0);

        nmt_session_params p;
        memset(&p, 0, sizeof p);
        p.model_data = img;
        p.model_size = size;
        p.limits.max_src_len = 16;
        p.limits.max_beam = 2;
        size_t arena = 0;
        uint64_t dev_bytes = 0;
        nmt_status sa = nmt_session_arena_size(&p, &arena, &dev_bytes);
        /* what inspect accepted, planning accepts too, but for the limits and
         * the embedded tokenizers' contents, which only planning parses */
        CHECK(sa == NMT_OK || sa == NMT_ERR_INVALID_ARGUMENT || sa == NMT_ERR_ARENA_TOO_SMALL ||
              sa == NMT_ERR_TOKENIZER_MODEL);
        if (sa == NMT_OK) CHECK(arena > 0 && dev_bytes > 0);
    }
    free(copy);
    return 0;
}
