/* SPDX-License-Identifier: MIT */
/* make_bad_fixtures.c — generates the malformed model files in
 * tests/fixtures/bad/ that tests/format_test.c feeds to nmt_file_open().
 *
 *   make_bad_fixtures OUTDIR          write every fixture into OUTDIR
 *   make_bad_fixtures --check DIR     exit 1 unless DIR holds exactly the
 *                                     bytes this program would write
 *
 * Every fixture is a small valid file (written by nmt_writer) with exactly
 * one defect; CRCs are recomputed after the defect unless the defect *is* a
 * CRC, so each file exercises one rule.  Before writing, the generator opens
 * each fixture with nmt_file_open() and refuses to write one whose status is
 * not the expected one.  Keep the table below, the table in format_test.c
 * and tests/fixtures/bad/README.md in step.
 */
#include "format.h"
#include "nmt_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct img {
    uint8_t *b;
    size_t n;
} img;

static uint32_t get32(const img *m, uint64_t off) {
    const uint8_t *p = m->b + off;
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get64(const img *m, uint64_t off) { return get32(m, off) | ((uint64_t)get32(m, off + 4) << 32); }
static void put16(img *m, uint64_t off, uint16_t v) {
    m->b[off] = (uint8_t)v;
    m->b[off + 1] = (uint8_t)(v >> 8);
}
static void put32(img *m, uint64_t off, uint32_t v) {
    for (int i = 0; i < 4; i++) m->b[off + (uint64_t)i] = (uint8_t)(v >> (8 * i));
}
static void put64(img *m, uint64_t off, uint64_t v) {
    for (int i = 0; i < 8; i++) m->b[off + (uint64_t)i] = (uint8_t)(v >> (8 * i));
}

/* Header fields (offsets per format.h). */
#define H_FILE_SIZE 16
#define H_META_OFF 24
#define H_META_SIZE 32
#define H_TABLE_OFF 40
#define H_N_TENSORS 48
#define H_N_META 52
#define H_DATA_OFF 56
#define H_META_CRC 64
#define H_TABLE_CRC 68
#define H_CRC 124
/* Entry fields. */
#define E_DTYPE 80
#define E_NDIM 84
#define E_SHAPE 88
#define E_OFFSET 104
#define E_NBYTES 112
#define E_CRC 120
#define E_RESERVED 124

static int in_bounds(const img *m, uint64_t off, uint64_t len) { return off <= m->n && len <= m->n - off; }

static uint64_t entry(const img *m, uint32_t i) { return get64(m, H_TABLE_OFF) + (uint64_t)i * NMT_TENSOR_ENTRY_SIZE; }

/* Offset of metadata record i (walks the records of the base layout). */
static uint64_t meta_rec(const img *m, uint32_t i) {
    uint64_t p = get64(m, H_META_OFF);
    for (uint32_t k = 0; k < i; k++) {
        uint32_t key_len = (uint32_t)m->b[p] | ((uint32_t)m->b[p + 1] << 8);
        uint32_t type = m->b[p + 2];
        uint64_t vlen = type == NMT_META_STR ? get32(m, p + 4) : 8;
        p += 8 + ((key_len + 7u) & ~7u) + ((vlen + 7u) & ~(uint64_t)7u);
    }
    return p;
}

static void fix_header_crc(img *m) { put32(m, H_CRC, nmt_crc32(0, m->b, 124)); }

/* Recompute every CRC that can be computed (regions in bounds). */
static void fix_all(img *m) {
    uint64_t table = get64(m, H_TABLE_OFF);
    uint64_t nt = get32(m, H_N_TENSORS);
    if (in_bounds(m, table, nt * NMT_TENSOR_ENTRY_SIZE)) {
        for (uint32_t i = 0; i < nt; i++) {
            uint64_t e = entry(m, i), off = get64(m, e + E_OFFSET), nb = get64(m, e + E_NBYTES);
            if (in_bounds(m, off, nb)) put32(m, e + E_CRC, nmt_crc32(0, m->b + off, (size_t)nb));
        }
        put32(m, H_TABLE_CRC, nmt_crc32(0, m->b + table, (size_t)(nt * NMT_TENSOR_ENTRY_SIZE)));
    }
    uint64_t mo = get64(m, H_META_OFF), ms = get64(m, H_META_SIZE);
    if (in_bounds(m, mo, ms)) put32(m, H_META_CRC, nmt_crc32(0, m->b + mo, (size_t)ms));
    fix_header_crc(m);
}

/* ------------------------------------------------------------------------ */
/* The base file: 3 metadata records, one tensor of each dtype              */
/*   meta 0 "name" str "base", meta 1 "n" i64 7, meta 2 "x" f64 0.5         */
/*   tensor 0 "a" F32 [2,3], 1 "b" F16 [4], 2 "c" I8 [2,3], 3 "blob" U8 [5] */
/* ------------------------------------------------------------------------ */

static img make_base(void) {
    nmtw_writer *w = nmtw_create();
    static const float a[6] = {0.125f, 0.25f, 0.375f, 0.5f, 0.625f, 0.75f};
    static const uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x7bff};
    static const int8_t q[6] = {-127, 0, 127, 1, 2, 3};
    static const float sc[2] = {0.5f, 0.25f};
    img m = {NULL, 0};
    void *data;
    size_t size;
    if (w == NULL || nmtw_set_str(w, "name", "base") || nmtw_set_i64(w, "n", 7) || nmtw_set_f64(w, "x", 0.5) ||
        nmtw_add_tensor(w, "a", NMT_DTYPE_F32, 2, (const uint32_t[]){2, 3}, a, NULL) ||
        nmtw_add_tensor(w, "b", NMT_DTYPE_F16, 1, (const uint32_t[]){4}, h, NULL) ||
        nmtw_add_tensor(w, "c", NMT_DTYPE_I8, 2, (const uint32_t[]){2, 3}, q, sc) ||
        nmtw_add_blob(w, "blob", "hello", 5) || nmtw_write_memory(w, &data, &size)) {
        fprintf(stderr, "make_bad_fixtures: cannot build the base file\n");
        exit(1);
    }
    nmtw_destroy(w);
    m.b = (uint8_t *)data;
    m.n = size;
    return m;
}

/* ------------------------------------------------------------------------ */
/* Defects                                                                  */
/* ------------------------------------------------------------------------ */

static void d_empty(img *m) { m->n = 0; }
static void d_short_header(img *m) { m->n = 100; }
static void d_bad_magic(img *m) { m->b[0] = 'X'; fix_all(m); }
static void d_version2(img *m) { put32(m, 8, 2); fix_all(m); }
static void d_header_crc(img *m) { m->b[H_CRC] ^= 0x01; }
static void d_truncated(img *m) { m->n -= 16; }
static void d_trailing_garbage(img *m) {
    uint8_t *b = (uint8_t *)realloc(m->b, m->n + 8);
    if (b == NULL) exit(1);
    memset(b + m->n, 0xAA, 8);
    m->b = b;
    m->n += 8;
}
static void d_file_size_huge(img *m) { put64(m, H_FILE_SIZE, UINT64_MAX); fix_all(m); }
static void d_header_size(img *m) { put32(m, 12, 64); fix_all(m); }
static void d_header_reserved(img *m) { m->b[100] = 1; fix_all(m); }
static void d_meta_offset_low(img *m) { put64(m, H_META_OFF, 64); fix_all(m); }
static void d_meta_overlaps_table(img *m) { put64(m, H_META_SIZE, get64(m, H_META_SIZE) + 8); fix_all(m); }
static void d_meta_offset_overflow(img *m) { put64(m, H_META_OFF, UINT64_MAX - 7); fix_all(m); }
static void d_table_past_eof(img *m) { put32(m, H_N_TENSORS, 1000); fix_all(m); }
static void d_too_many_tensors(img *m) { put32(m, H_N_TENSORS, 16385); fix_all(m); }
static void d_table_offset_overflow(img *m) { put64(m, H_TABLE_OFF, UINT64_MAX - 63); fix_all(m); }
static void d_data_offset_misaligned(img *m) { put64(m, H_DATA_OFF, get64(m, H_DATA_OFF) + 8); fix_all(m); }
static void d_data_offset_in_table(img *m) { put64(m, H_DATA_OFF, get64(m, H_DATA_OFF) - 64); fix_all(m); }
static void d_data_offset_past_eof(img *m) { put64(m, H_DATA_OFF, (get64(m, H_FILE_SIZE) + 127) & ~(uint64_t)63); fix_all(m); }

/* Table moved in front of the metadata: both still parse, only the region
 * order is wrong. */
static void d_meta_after_table(img *m) {
    uint64_t mo = get64(m, H_META_OFF), ms = get64(m, H_META_SIZE), to = get64(m, H_TABLE_OFF);
    uint64_t ts = (uint64_t)get32(m, H_N_TENSORS) * NMT_TENSOR_ENTRY_SIZE;
    uint8_t *meta = (uint8_t *)malloc((size_t)ms);
    if (meta == NULL) exit(1);
    memcpy(meta, m->b + mo, (size_t)ms);
    memmove(m->b + mo, m->b + to, (size_t)ts);
    memcpy(m->b + mo + ts, meta, (size_t)ms);
    free(meta);
    put64(m, H_TABLE_OFF, mo);
    put64(m, H_META_OFF, mo + ts);
    fix_all(m);
}

static void d_meta_crc(img *m) { m->b[meta_rec(m, 0) + 16] ^= 0x01; /* "base" -> "case" */ }
static void d_table_crc(img *m) { m->b[entry(m, 0) + E_CRC] ^= 0x01; }
static void d_data_crc(img *m) { m->b[get64(m, entry(m, 0) + E_OFFSET)] ^= 0x01; }

static void d_offset_beyond_eof(img *m) {
    put64(m, entry(m, 3) + E_OFFSET, ((get64(m, H_FILE_SIZE) + 63) & ~(uint64_t)63) + 64);
    fix_all(m);
}
static void d_offset_overflow(img *m) { put64(m, entry(m, 3) + E_OFFSET, UINT64_MAX - 63); fix_all(m); }
static void d_misaligned_offset(img *m) { put64(m, entry(m, 1) + E_OFFSET, get64(m, entry(m, 1) + E_OFFSET) + 8); fix_all(m); }
static void d_offset_below_data(img *m) { put64(m, entry(m, 0) + E_OFFSET, get64(m, H_DATA_OFF) - 64); fix_all(m); }
static void d_overlap(img *m) { put64(m, entry(m, 1) + E_OFFSET, get64(m, entry(m, 0) + E_OFFSET)); fix_all(m); }
static void d_ndim0(img *m) { put32(m, entry(m, 0) + E_NDIM, 0); fix_all(m); }
static void d_ndim5(img *m) { put32(m, entry(m, 0) + E_NDIM, 5); fix_all(m); }
static void d_unknown_dtype(img *m) { put32(m, entry(m, 0) + E_DTYPE, NMT_DTYPE_COUNT_); fix_all(m); }
static void d_nbytes_mismatch(img *m) { put64(m, entry(m, 0) + E_NBYTES, 20); fix_all(m); }
static void d_i8_without_scales(img *m) { put64(m, entry(m, 2) + E_NBYTES, 6); fix_all(m); }
static void d_shape_overflow(img *m) {
    uint64_t e = entry(m, 0);
    put32(m, e + E_NDIM, 4);
    for (int d = 0; d < 4; d++) put32(m, e + E_SHAPE + 4u * (uint64_t)d, UINT32_MAX);
    fix_all(m);
}
static void d_zero_dim(img *m) { put32(m, entry(m, 0) + E_SHAPE + 4, 0); fix_all(m); }
static void d_unused_dim_nonzero(img *m) { put32(m, entry(m, 0) + E_SHAPE + 12, 1); fix_all(m); }
static void d_u8_ndim2(img *m) {
    put32(m, entry(m, 3) + E_NDIM, 2);
    put32(m, entry(m, 3) + E_SHAPE + 4, 1);
    fix_all(m);
}
static void d_unterminated_name(img *m) { memset(m->b + entry(m, 0), 'A', NMT_TENSOR_NAME_MAX); fix_all(m); }
static void d_name_not_padded(img *m) { m->b[entry(m, 0) + 40] = 'x'; fix_all(m); }
static void d_empty_name(img *m) { m->b[entry(m, 0)] = 0; fix_all(m); }
static void d_duplicate_name(img *m) { m->b[entry(m, 1)] = 'a'; fix_all(m); }
static void d_entry_reserved(img *m) { put32(m, entry(m, 0) + E_RESERVED, 1); fix_all(m); }

static void d_meta_key_len0(img *m) { put16(m, meta_rec(m, 1), 0); fix_all(m); }
static void d_meta_key_len64(img *m) { put16(m, meta_rec(m, 1), 64); fix_all(m); }
static void d_meta_count_overflow(img *m) { put32(m, meta_rec(m, 0) + 4, UINT32_MAX); fix_all(m); }
static void d_meta_i64_count2(img *m) { put32(m, meta_rec(m, 1) + 4, 2); fix_all(m); }
static void d_meta_bad_type(img *m) { m->b[meta_rec(m, 1) + 2] = 4; fix_all(m); }
static void d_meta_reserved(img *m) { m->b[meta_rec(m, 1) + 3] = 1; fix_all(m); }
static void d_meta_key_nul(img *m) { m->b[meta_rec(m, 0) + 9] = 0; /* "name" -> "n\0me" */ fix_all(m); }
static void d_meta_key_padding(img *m) { m->b[meta_rec(m, 0) + 8 + 5] = ' '; fix_all(m); }
static void d_meta_str_nul(img *m) { m->b[meta_rec(m, 0) + 17] = 0; fix_all(m); }
static void d_meta_leftover(img *m) { put32(m, H_N_META, get32(m, H_N_META) - 1); fix_all(m); }
static void d_meta_overrun(img *m) { put32(m, H_N_META, get32(m, H_N_META) + 1); fix_all(m); }
static void d_meta_duplicate_key(img *m) { m->b[meta_rec(m, 2) + 8] = 'n'; /* "x" -> "n" */ fix_all(m); }

typedef struct fixture {
    const char *name;
    void (*defect)(img *);
    nmt_status status;
    int verify_data;
} fixture;

#define F(n, st) {#n ".nmt", d_##n, NMT_ERR_MODEL_##st, 1}
static const fixture fixtures[] = {
    F(empty, TRUNCATED),
    F(short_header, TRUNCATED),
    F(bad_magic, BAD_MAGIC),
    F(version2, VERSION),
    F(header_crc, CHECKSUM),
    F(truncated, TRUNCATED),
    F(file_size_huge, TRUNCATED),
    F(trailing_garbage, CORRUPT),
    F(header_size, CORRUPT),
    F(header_reserved, CORRUPT),
    F(meta_offset_low, CORRUPT),
    F(meta_offset_overflow, CORRUPT),
    F(meta_overlaps_table, CORRUPT),
    F(meta_after_table, CORRUPT),
    F(table_past_eof, CORRUPT),
    F(too_many_tensors, CORRUPT),
    F(table_offset_overflow, CORRUPT),
    F(data_offset_misaligned, CORRUPT),
    F(data_offset_in_table, CORRUPT),
    F(data_offset_past_eof, CORRUPT),
    F(meta_crc, CHECKSUM),
    F(table_crc, CHECKSUM),
    F(data_crc, CHECKSUM),
    F(offset_beyond_eof, CORRUPT),
    F(offset_overflow, CORRUPT),
    F(misaligned_offset, CORRUPT),
    F(offset_below_data, CORRUPT),
    F(overlap, CORRUPT),
    F(ndim0, CORRUPT),
    F(ndim5, CORRUPT),
    F(unknown_dtype, CORRUPT),
    F(nbytes_mismatch, CORRUPT),
    F(i8_without_scales, CORRUPT),
    F(shape_overflow, CORRUPT),
    F(zero_dim, CORRUPT),
    F(unused_dim_nonzero, CORRUPT),
    F(u8_ndim2, CORRUPT),
    F(unterminated_name, CORRUPT),
    F(name_not_padded, CORRUPT),
    F(empty_name, CORRUPT),
    F(duplicate_name, CORRUPT),
    F(entry_reserved, CORRUPT),
    F(meta_key_len0, CORRUPT),
    F(meta_key_len64, CORRUPT),
    F(meta_count_overflow, CORRUPT),
    F(meta_i64_count2, CORRUPT),
    F(meta_bad_type, CORRUPT),
    F(meta_reserved, CORRUPT),
    F(meta_key_nul, CORRUPT),
    F(meta_key_padding, CORRUPT),
    F(meta_str_nul, CORRUPT),
    F(meta_leftover, CORRUPT),
    F(meta_overrun, CORRUPT),
    F(meta_duplicate_key, CORRUPT),
};

static int write_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (fp == NULL) return 0;
    int ok = (n == 0 || fwrite(b, 1, n, fp) == n);
    if (fclose(fp) != 0) ok = 0;
    return ok;
}

/* 1 if the file at path holds exactly b[0..n). */
static int same_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) return 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) ok = fgetc(fp) == b[i];
    if (ok) ok = fgetc(fp) == EOF;
    fclose(fp);
    return ok;
}

int main(int argc, char **argv) {
    int check = argc == 3 && strcmp(argv[1], "--check") == 0;
    if (argc != 2 && !check) {
        fprintf(stderr, "usage: make_bad_fixtures OUTDIR | --check DIR\n");
        return 2;
    }
    const char *dir = argv[argc - 1];
    img base = make_base();
    int failures = 0;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        const fixture *fx = &fixtures[i];
        img m = {(uint8_t *)malloc(base.n), base.n};
        if (m.b == NULL) return 1;
        memcpy(m.b, base.b, base.n);
        fx->defect(&m);

        nmt_file f;
        nmt_status st = nmt_file_open(&f, m.n ? m.b : NULL, m.n, fx->verify_data);
        if (st != fx->status) {
            fprintf(stderr, "%s: nmt_file_open gives %d (%s), expected %d (%s)\n", fx->name, (int)st,
                    nmt_status_str(st), (int)fx->status, nmt_status_str(fx->status));
            failures++;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, fx->name);
        if (check) {
            if (!same_bytes(path, m.b, m.n)) {
                fprintf(stderr, "%s differs from the generator's output; rerun make_bad_fixtures %s\n", path, dir);
                failures++;
            }
        } else if (st == fx->status && !write_bytes(path, m.b, m.n)) {
            fprintf(stderr, "cannot write %s\n", path);
            failures++;
        }
        free(m.b);
    }
    free(base.b);
    if (!check && failures == 0)
        printf("wrote %zu fixtures to %s\n", sizeof fixtures / sizeof fixtures[0], dir);
    return failures ? 1 : 0;
}
