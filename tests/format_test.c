/* SPDX-License-Identifier: MIT */
/* format_test.c — the .nmt reader (runtime/model/format.c): CRC-32 and
 * half-precision conversion, the dtype table, metadata/tensor lookups,
 * every malformed-file fixture in tests/fixtures/bad/ with its exact status,
 * argument and prefix checks, the tensor-count limit, single-bit flips, and
 * the worked Python example of docs/FORMAT.md byte for byte.
 *
 * Writer round trips are in format_writer_test.c, the random Transformer
 * generator in format_random_test.c; shared helpers in format_common.c. */
#include "format_common.h"
#include "random_model.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NMT_TEST_FIXTURES
#error "NMT_TEST_FIXTURES must name the tests/fixtures directory"
#endif
#define BAD_DIR NMT_TEST_FIXTURES "/bad"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static uint32_t float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Reference bit-at-a-time CRC-32 (zlib polynomial). */
static uint32_t crc32_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* ------------------------------------------------------------------------ */
/* CRC-32 and half floats                                                   */
/* ------------------------------------------------------------------------ */

static void test_crc32(void **state) {
    (void)state;
    assert_int_equal(nmt_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(nmt_crc32(0, "", 0), 0u);
    assert_int_equal(nmt_crc32(0, "The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
    /* chaining */
    assert_int_equal(nmt_crc32(nmt_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    /* the sliced loop against the bitwise definition, every length and
     * alignment around the 8-byte blocks */
    uint8_t buf[300];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 24);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += (n < 40 ? 1 : 37))
            assert_int_equal(nmt_crc32(0, buf + off, n), crc32_bitwise(buf + off, n));
}

static void test_half(void **state) {
    (void)state;
    static const struct {
        uint16_t h;
        float f;
    } exact[] = {
        {0x0000, 0.0f},         {0x3c00, 1.0f},      {0xc000, -2.0f},      {0x3800, 0.5f},
        {0x3555, 0.333251953125f}, {0x7bff, 65504.0f}, {0xfbff, -65504.0f}, {0x0400, 0x1p-14f},
        {0x0001, 0x1p-24f},     {0x03ff, 0x3ffp-24f}, {0x8001, -0x1p-24f}, {0x7c00, INFINITY},
        {0xfc00, -INFINITY},    {0x3c01, 1.0009765625f},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        assert_int_equal(float_to_bits(nmt_half_to_float(exact[i].h)), float_to_bits(exact[i].f));
        assert_int_equal(nmt_float_to_half(exact[i].f), exact[i].h);
    }
    assert_int_equal(float_to_bits(nmt_half_to_float(0x8000)), 0x80000000u); /* -0 */
    assert_int_equal(nmt_float_to_half(-0.0f), 0x8000);
    /* rounding: ties to even, overflow to infinity, underflow to zero */
    assert_int_equal(nmt_float_to_half(1.0f + 0x1p-11f), 0x3c00);      /* tie, even is down */
    assert_int_equal(nmt_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);  /* tie, even is up */
    assert_int_equal(nmt_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    assert_int_equal(nmt_float_to_half(65519.0f), 0x7bff);
    assert_int_equal(nmt_float_to_half(65520.0f), 0x7c00);
    assert_int_equal(nmt_float_to_half(1e10f), 0x7c00);
    assert_int_equal(nmt_float_to_half(-1e10f), 0xfc00);
    assert_int_equal(nmt_float_to_half(0x1p-25f), 0x0000);             /* tie to even (0) */
    assert_int_equal(nmt_float_to_half(0x1p-25f + 0x1p-40f), 0x0001);
    assert_int_equal(nmt_float_to_half(3 * 0x1p-25f), 0x0002);         /* 1.5 ulp: tie to even 2 */
    assert_int_equal(nmt_float_to_half(5 * 0x1p-25f), 0x0002);         /* 2.5 ulp: tie to even 2 */
    assert_int_equal(nmt_float_to_half(-5 * 0x1p-25f), 0x8002);
    assert_int_equal(nmt_float_to_half(0x1p-24f * 2.75f), 0x0003);
    assert_int_equal(nmt_float_to_half(0x3ffp-24f + 0x1p-25f), 0x0400); /* tie to even: up to 2^-14 */
    assert_int_equal(nmt_float_to_half(0x1p-14f - 0x1p-26f), 0x0400);  /* rounds up into normals */
    assert_int_equal(nmt_float_to_half(1e-30f), 0x0000);
    /* NaN stays NaN, sign kept */
    uint16_t hn = nmt_float_to_half(NAN);
    assert_int_equal(hn & 0x7c00, 0x7c00);
    assert_true((hn & 0x3ff) != 0);
    assert_true(isnan(nmt_half_to_float(0x7e00)));
    assert_true(isnan(nmt_half_to_float(0xfc01)));
    /* every non-NaN half survives half -> float -> half */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;
        assert_int_equal(nmt_float_to_half(nmt_half_to_float((uint16_t)h)), h);
    }
}

static void test_dtype_table(void **state) {
    (void)state;
    assert_int_equal(nmt_dtype_table[NMT_DTYPE_F32].bytes, 4);
    assert_int_equal(nmt_dtype_table[NMT_DTYPE_F16].bytes, 2);
    assert_int_equal(nmt_dtype_table[NMT_DTYPE_I8].bytes, 1);
    assert_int_equal(nmt_dtype_table[NMT_DTYPE_U8].bytes, 1);
    assert_string_equal(nmt_dtype_table[NMT_DTYPE_F32].name, "fp32");
    assert_string_equal(nmt_dtype_table[NMT_DTYPE_F16].name, "fp16");
    assert_string_equal(nmt_dtype_table[NMT_DTYPE_I8].name, "int8");
    assert_string_equal(nmt_dtype_table[NMT_DTYPE_U8].name, "u8");
}

/* ------------------------------------------------------------------------ */
/* Lookups                                                                  */
/* ------------------------------------------------------------------------ */

static void test_getters(void **state) {
    (void)state;
    size_t size;
    uint8_t *img = roundtrip_image(&size);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 0), NMT_OK);
    int64_t i = 99;
    double d = 99;
    char s[16];

    /* missing keys */
    assert_int_equal(nmt_file_get_i64(&f, "nope", &i), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_f64(&f, "nope", &d), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_str(&f, "nope", s, sizeof s), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_i64(&f, "", &i), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_i64(&f, "d_mode", &i), NMT_ERR_MODEL_ARCH);    /* prefix */
    assert_int_equal(nmt_file_get_i64(&f, "d_model_x", &i), NMT_ERR_MODEL_ARCH); /* extension */
    /* wrong types */
    assert_int_equal(nmt_file_get_f64(&f, "d_model", &d), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_str(&f, "d_model", s, sizeof s), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_i64(&f, "ln_eps", &i), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_i64(&f, "arch", &i), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_i64_or(&f, "arch", 5, &i), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_f64_or(&f, "arch", 5, &d), NMT_ERR_MODEL_ARCH);
    assert_int_equal(nmt_file_get_str_or(&f, "d_model", "x", s, sizeof s), NMT_ERR_MODEL_ARCH);
    /* defaults */
    assert_int_equal(nmt_file_get_i64_or(&f, "gate_reduction", 4, &i), NMT_OK);
    assert_int_equal(i, 4);
    assert_int_equal(nmt_file_get_i64_or(&f, "d_model", 4, &i), NMT_OK);
    assert_int_equal(i, 512);
    assert_int_equal(nmt_file_get_f64_or(&f, "embed_scale", 0.25, &d), NMT_OK);
    assert_true(d == 0.25);
    assert_int_equal(nmt_file_get_str_or(&f, "norm", "post", s, sizeof s), NMT_OK);
    assert_string_equal(s, "post");
    strcpy(s, "kept");
    assert_int_equal(nmt_file_get_str_or(&f, "norm", NULL, s, sizeof s), NMT_OK);
    assert_string_equal(s, "kept");
    assert_int_equal(nmt_file_get_str_or(&f, "norm", "much too long a default", s, sizeof s),
                     NMT_ERR_INVALID_ARGUMENT);
    /* string capacity: "transformer" needs 12 bytes */
    char small[12];
    assert_int_equal(nmt_file_get_str(&f, "arch", small, 11), NMT_ERR_MODEL_CORRUPT);
    assert_int_equal(nmt_file_get_str(&f, "arch", small, 12), NMT_OK);
    assert_string_equal(small, "transformer");
    /* bad arguments */
    assert_int_equal(nmt_file_get_i64(NULL, "d_model", &i), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_file_get_i64(&f, NULL, &i), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_file_get_i64(&f, "d_model", NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_file_get_str(&f, "arch", s, 0), NMT_ERR_INVALID_ARGUMENT);
    free(img);
}

static void test_find_expect(void **state) {
    (void)state;
    size_t size;
    uint8_t *img = roundtrip_image(&size);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 0), NMT_OK);
    nmt_tensor_view v;

    assert_int_equal(nmt_file_expect(&f, "f32", 2, (const uint32_t[]){2, 3}, &v), NMT_OK);
    assert_int_equal(v.n_elements, 6);
    assert_int_equal(nmt_file_expect(&f, "i8", 2, (const uint32_t[]){3, 5}, &v), NMT_OK);
    assert_int_equal(nmt_file_expect(&f, "f16", 1, (const uint32_t[]){4}, &v), NMT_OK);
    assert_int_equal(nmt_file_expect(&f, "f32", 2, (const uint32_t[]){3, 2}, &v), NMT_ERR_MODEL_TENSOR_SHAPE);
    assert_int_equal(nmt_file_expect(&f, "f32", 1, (const uint32_t[]){6}, &v), NMT_ERR_MODEL_TENSOR_SHAPE);
    assert_int_equal(nmt_file_expect(&f, "f32", 3, (const uint32_t[]){2, 3, 1}, &v), NMT_ERR_MODEL_TENSOR_SHAPE);
    assert_int_equal(nmt_file_expect(&f, "f16", 1, (const uint32_t[]){5}, &v), NMT_ERR_MODEL_TENSOR_SHAPE);
    /* a blob is not a weight */
    assert_int_equal(nmt_file_expect(&f, "tokenizer.src", 1, (const uint32_t[]){7}, &v),
                     NMT_ERR_MODEL_TENSOR_SHAPE);
    assert_int_equal(nmt_file_expect(&f, "absent", 1, (const uint32_t[]){7}, &v), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_int_equal(nmt_file_expect(&f, "f32", 0, (const uint32_t[]){1}, &v), NMT_ERR_INVALID_ARGUMENT);

    assert_int_equal(nmt_file_find(&f, "absent", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_int_equal(nmt_file_find(&f, "f3", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_int_equal(nmt_file_find(&f, "f32x", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_int_equal(nmt_file_find(&f, "", &v), NMT_ERR_MODEL_MISSING_TENSOR);
    char longname[200];
    memset(longname, 'f', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(nmt_file_find(&f, longname, &v), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_int_equal(nmt_file_find(&f, NULL, &v), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_file_find(&f, "tokenizer.src", &v), NMT_OK);
    free(img);
}

/* ------------------------------------------------------------------------ */
/* Malformed files                                                          */
/* ------------------------------------------------------------------------ */

/* Keep in step with tests/make_bad_fixtures.c and tests/fixtures/bad/README.md. */
static const struct {
    const char *file;
    nmt_status status;
} bad_fixtures[] = {
    {"empty.nmt", NMT_ERR_MODEL_TRUNCATED},
    {"short_header.nmt", NMT_ERR_MODEL_TRUNCATED},
    {"bad_magic.nmt", NMT_ERR_MODEL_BAD_MAGIC},
    {"version2.nmt", NMT_ERR_MODEL_VERSION},
    {"header_crc.nmt", NMT_ERR_MODEL_CHECKSUM},
    {"truncated.nmt", NMT_ERR_MODEL_TRUNCATED},
    {"file_size_huge.nmt", NMT_ERR_MODEL_TRUNCATED},
    {"trailing_garbage.nmt", NMT_ERR_MODEL_CORRUPT},
    {"header_size.nmt", NMT_ERR_MODEL_CORRUPT},
    {"header_reserved.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_offset_low.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_offset_overflow.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_overlaps_table.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_after_table.nmt", NMT_ERR_MODEL_CORRUPT},
    {"table_past_eof.nmt", NMT_ERR_MODEL_CORRUPT},
    {"too_many_tensors.nmt", NMT_ERR_MODEL_CORRUPT},
    {"table_offset_overflow.nmt", NMT_ERR_MODEL_CORRUPT},
    {"data_offset_misaligned.nmt", NMT_ERR_MODEL_CORRUPT},
    {"data_offset_in_table.nmt", NMT_ERR_MODEL_CORRUPT},
    {"data_offset_past_eof.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_crc.nmt", NMT_ERR_MODEL_CHECKSUM},
    {"table_crc.nmt", NMT_ERR_MODEL_CHECKSUM},
    {"data_crc.nmt", NMT_ERR_MODEL_CHECKSUM},
    {"offset_beyond_eof.nmt", NMT_ERR_MODEL_CORRUPT},
    {"offset_overflow.nmt", NMT_ERR_MODEL_CORRUPT},
    {"misaligned_offset.nmt", NMT_ERR_MODEL_CORRUPT},
    {"offset_below_data.nmt", NMT_ERR_MODEL_CORRUPT},
    {"overlap.nmt", NMT_ERR_MODEL_CORRUPT},
    {"ndim0.nmt", NMT_ERR_MODEL_CORRUPT},
    {"ndim5.nmt", NMT_ERR_MODEL_CORRUPT},
    {"unknown_dtype.nmt", NMT_ERR_MODEL_CORRUPT},
    {"nbytes_mismatch.nmt", NMT_ERR_MODEL_CORRUPT},
    {"i8_without_scales.nmt", NMT_ERR_MODEL_CORRUPT},
    {"shape_overflow.nmt", NMT_ERR_MODEL_CORRUPT},
    {"zero_dim.nmt", NMT_ERR_MODEL_CORRUPT},
    {"unused_dim_nonzero.nmt", NMT_ERR_MODEL_CORRUPT},
    {"u8_ndim2.nmt", NMT_ERR_MODEL_CORRUPT},
    {"unterminated_name.nmt", NMT_ERR_MODEL_CORRUPT},
    {"name_not_padded.nmt", NMT_ERR_MODEL_CORRUPT},
    {"empty_name.nmt", NMT_ERR_MODEL_CORRUPT},
    {"duplicate_name.nmt", NMT_ERR_MODEL_CORRUPT},
    {"entry_reserved.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_key_len0.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_key_len64.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_count_overflow.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_i64_count2.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_bad_type.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_reserved.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_key_nul.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_key_padding.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_str_nul.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_leftover.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_overrun.nmt", NMT_ERR_MODEL_CORRUPT},
    {"meta_duplicate_key.nmt", NMT_ERR_MODEL_CORRUPT},
};

static nmt_status open_fixture(const char *file, int verify_data) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", BAD_DIR, file);
    size_t size;
    uint8_t *b = slurp(path, &size);
    nmt_file f;
    memset(&f, 0xAB, sizeof f);
    nmt_status st = nmt_file_open(&f, size ? b : NULL, size, verify_data);
    if (st != NMT_OK) {
        /* a failed open leaves a zeroed handle */
        assert_null(f.data);
        assert_int_equal(f.h.n_tensors, 0);
    }
    free(b);
    return st;
}

static void test_bad_fixtures(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_fixtures / sizeof bad_fixtures[0]; i++) {
        nmt_status st = open_fixture(bad_fixtures[i].file, 1);
        if (st != bad_fixtures[i].status)
            fail_msg("%s: got %d (%s), expected %d (%s)", bad_fixtures[i].file, (int)st, nmt_status_str(st),
                     (int)bad_fixtures[i].status, nmt_status_str(bad_fixtures[i].status));
    }
    /* tensor data CRCs are only checked on request */
    assert_int_equal(open_fixture("data_crc.nmt", 0), NMT_OK);
    assert_int_equal(open_fixture("data_crc.nmt", 1), NMT_ERR_MODEL_CHECKSUM);
}

/* Every .nmt file in fixtures/bad is in the table above. */
static void test_bad_fixtures_listed(void **state) {
    (void)state;
    DIR *dp = opendir(BAD_DIR);
    assert_non_null(dp);
    size_t n_files = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 4, ".nmt") != 0) continue;
        n_files++;
        int listed = 0;
        for (size_t i = 0; i < sizeof bad_fixtures / sizeof bad_fixtures[0]; i++)
            listed |= strcmp(bad_fixtures[i].file, de->d_name) == 0;
        if (!listed) fail_msg("fixture %s is not in format_test.c's table", de->d_name);
    }
    closedir(dp);
    assert_int_equal(n_files, sizeof bad_fixtures / sizeof bad_fixtures[0]);
}

static void test_open_arguments(void **state) {
    (void)state;
    size_t size;
    uint8_t *img = roundtrip_image(&size);
    nmt_file f;
    assert_int_equal(nmt_file_open(NULL, img, size, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_file_open(&f, NULL, size, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_file_open(&f, NULL, 0, 0), NMT_ERR_MODEL_TRUNCATED); /* empty mapped file */
    assert_int_equal(nmt_file_open(&f, img, 127, 0), NMT_ERR_MODEL_TRUNCATED);
    /* every proper prefix is truncated */
    for (size_t n = 0; n < size; n++) assert_int_equal(nmt_file_open(&f, img, n, 1), NMT_ERR_MODEL_TRUNCATED);
    /* the image must be 8-aligned (it is where every typed view comes from) */
    uint8_t *shifted = (uint8_t *)malloc(size + 8);
    assert_non_null(shifted);
    memcpy(shifted + 4, img, size);
    assert_int_equal(nmt_file_open(&f, shifted + 4, size, 0), NMT_ERR_INVALID_ARGUMENT);
    memcpy(shifted + 8, img, size);
    assert_int_equal(nmt_file_open(&f, shifted + 8, size, 1), NMT_OK);
    free(shifted);
    free(img);
}

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* An image with no metadata and n one-byte U8 tensors "t<i>", encoded here
 * independently of nmt_writer. */
static uint8_t *many_tensors(uint32_t n, size_t *size) {
    uint64_t table = 128, data = (table + 128u * n + 63) / 64 * 64;
    *size = (size_t)(data + 64u * (n - 1) + 1);
    uint8_t *b = (uint8_t *)calloc(1, *size);
    assert_non_null(b);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = b + table + 128u * i;
        snprintf((char *)e, 80, "t%u", i);
        uint64_t off = data + 64u * i;
        b[off] = (uint8_t)i;
        wr32(e + 80, NMT_DTYPE_U8);
        wr32(e + 84, 1);
        wr32(e + 88, 1);
        wr64(e + 104, off);
        wr64(e + 112, 1);
        wr32(e + 120, nmt_crc32(0, b + off, 1));
    }
    memcpy(b, "NMTEDGE\x1a", 8);
    wr32(b + 8, 1);
    wr32(b + 12, 128);
    wr64(b + 16, *size);
    wr64(b + 24, 128); /* empty metadata region at 128 */
    wr64(b + 40, table);
    wr32(b + 48, n);
    wr64(b + 56, data);
    wr32(b + 64, nmt_crc32(0, "", 0));
    wr32(b + 68, nmt_crc32(0, b + table, 128u * n));
    wr32(b + 124, nmt_crc32(0, b, 124));
    return b;
}

/* The reader accepts at most 16384 tensors; the writer enforces the same. */
static void test_tensor_limit(void **state) {
    (void)state;
    size_t size;
    nmt_file f;
    nmt_tensor_view v;
    uint8_t *b = many_tensors(NMTW_MAX_TENSORS, &size);
    assert_int_equal(nmt_file_open(&f, b, size, 1), NMT_OK);
    assert_int_equal(f.h.n_tensors, 16384);
    assert_int_equal(nmt_file_find(&f, "t16383", &v), NMT_OK);
    assert_int_equal(*(const uint8_t *)v.data, 16383 & 0xff);
    /* a duplicate name far from its twin */
    memcpy(b + 128 + 128u * 9999, "t17\0", 4);
    wr32(b + 68, nmt_crc32(0, b + 128, 128u * NMTW_MAX_TENSORS));
    wr32(b + 124, nmt_crc32(0, b, 124));
    assert_int_equal(nmt_file_open(&f, b, size, 0), NMT_ERR_MODEL_CORRUPT);
    free(b);
    b = many_tensors(NMTW_MAX_TENSORS + 1, &size);
    assert_int_equal(nmt_file_open(&f, b, size, 0), NMT_ERR_MODEL_CORRUPT);
    free(b);

    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    char name[16];
    for (uint32_t i = 0; i < NMTW_MAX_TENSORS; i++) {
        snprintf(name, sizeof name, "t%u", i);
        assert_int_equal(nmtw_add_blob(w, name, "x", 1), NMT_OK);
    }
    assert_int_equal(nmtw_add_blob(w, "one_more", "x", 1), NMT_ERR_INVALID_ARGUMENT);
    nmtw_destroy(w);
}

/* Every single-bit flip is caught (with verify_data), except in the padding
 * between regions, which no CRC covers and the reader ignores. */
static void test_bit_flips(void **state) {
    (void)state;
    size_t size;
    uint8_t *img = roundtrip_image(&size);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    uint8_t *covered = (uint8_t *)calloc(1, size);
    assert_non_null(covered);
    memset(covered, 1, 128);
    memset(covered + f.h.meta_offset, 1, (size_t)f.h.meta_size);
    memset(covered + f.h.table_offset, 1, 128u * f.h.n_tensors);
    for (uint32_t k = 0; k < f.h.n_tensors; k++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, k, &v), NMT_OK);
        memset(covered + ((const uint8_t *)v.data - img), 1, (size_t)v.nbytes);
    }
    size_t gaps = 0;
    for (size_t i = 0; i < size; i++) {
        gaps += !covered[i];
        for (int bit = 0; bit < 8; bit++) {
            img[i] ^= (uint8_t)(1u << bit);
            nmt_status st = nmt_file_open(&f, img, size, 1);
            img[i] ^= (uint8_t)(1u << bit);
            if (covered[i] && st == NMT_OK) fail_msg("flip of bit %d at byte %zu not detected", bit, i);
            if (!covered[i] && st != NMT_OK) fail_msg("flip in padding at byte %zu rejected (%d)", i, (int)st);
        }
    }
    assert_true(gaps > 0);
    free(covered);
    free(img);
}

/* The worked example of docs/FORMAT.md: its Python writer (stdlib struct +
 * zlib) produces a 971-byte file with zlib.crc32 0x18aa11c0.  Our writer,
 * given the same content, must produce exactly those bytes. */
static void test_python_example(void **state) {
    (void)state;
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    static const float wv[6] = {0.5f, -1.0f, 0.25f, 2.0f, 0.0f, -3.0f};
    static const uint16_t hv[3] = {0x3c00, 0xc000, 0x3800};          /* 1, -2, 0.5 */
    static const int8_t qv[6] = {64, -127, 32, 85, 0, -127};          /* round(w / s) */
    const float sc[2] = {(float)(1.0 / 127), (float)(3.0 / 127)};     /* max|row| / 127 */
    assert_int_equal(nmtw_set_str(w, "arch", "example"), NMT_OK);
    assert_int_equal(nmtw_set_i64(w, "d_model", 3), NMT_OK);
    assert_int_equal(nmtw_set_f64(w, "ln_eps", 1e-5), NMT_OK);
    assert_int_equal(nmtw_add_f32(w, "w", 2, (const uint32_t[]){2, 3}, wv), NMT_OK);
    assert_int_equal(nmtw_add_tensor(w, "h", NMT_DTYPE_F16, 1, (const uint32_t[]){3}, hv, NULL), NMT_OK);
    assert_int_equal(nmtw_add_tensor(w, "q", NMT_DTYPE_I8, 2, (const uint32_t[]){2, 3}, qv, sc), NMT_OK);
    assert_int_equal(nmtw_add_blob(w, "tokenizer.src", "spm-model\x00\x01", 11), NMT_OK);
    void *img;
    size_t size;
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    assert_int_equal(size, 971);
    assert_int_equal(nmt_crc32(0, img, size), 0x18aa11c0u);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    assert_int_equal(f.h.meta_size, 72);
    assert_int_equal(f.h.table_offset, 200);
    assert_int_equal(f.h.data_offset, 768);
    free(img);
    nmtw_destroy(w);
}

/* ------------------------------------------------------------------------ */
/* Refusals that say why (nmt_model_explain, issue 21 item 10)              */
/* ------------------------------------------------------------------------ */

/* The status and the exact reason nmt_model_explain gives for a variant,
 * and the same status from nmt_model_inspect. */
static void expect_why(const model_change *c, nmt_status want, const char *why_want) {
    size_t n = 0;
    uint8_t *img = model_variant(c, &n);
    char why[NMT_MODEL_WHY_BYTES];
    nmt_model_info info;
    assert_int_equal(nmt_model_explain(img, n, why, sizeof why), want);
    assert_int_equal(nmt_model_inspect(img, n, &info), want);
    assert_string_equal(why, why_want);
    free(img);
}

static void test_explain(void **state) {
    (void)state;
    expect_why(&(model_change){0}, NMT_OK, "");
    expect_why(&(model_change){.drop = "dec.0.ffn.fc2.bias"}, NMT_ERR_MODEL_MISSING_TENSOR,
               "the model lacks tensor 'dec.0.ffn.fc2.bias' (shape [32])");
    expect_why(&(model_change){.reshape = "enc.1.ffn.fc1.weight", .rows = 64, .cols = 31},
               NMT_ERR_MODEL_TENSOR_SHAPE, "tensor 'enc.1.ffn.fc1.weight' has shape [64, 31], expected [64, 32]");
    expect_why(&(model_change){.as_u8 = "src_embed"}, NMT_ERR_MODEL_TENSOR_SHAPE,
               "tensor 'src_embed' is u8, expected fp32, fp16 or int8");
    expect_why(&(model_change){.meta_key = "bos_id", .meta_i64 = 9999}, NMT_ERR_MODEL_ARCH,
               "unsupported hyper-parameters of arch 'transformer': bos_id 9999 must be < tgt_vocab 64");
    expect_why(&(model_change){.meta_key = "d_model", .meta_i64 = 0}, NMT_ERR_MODEL_ARCH,
               "unsupported hyper-parameter: d_model = 0, expected an integer in [2, 1048576]");
    expect_why(&(model_change){.meta_key = "norm", .meta_str = "mid"}, NMT_ERR_MODEL_ARCH,
               "unsupported hyper-parameter: norm = 'mid', expected one of post, pre");
    expect_why(&(model_change){.meta_key = "norm", .meta_i64 = 1}, NMT_ERR_MODEL_ARCH,
               "metadata key 'norm' is an integer (i64), expected a string");
    expect_why(&(model_change){.meta_key = "arch", .meta_str = "rnn"}, NMT_ERR_MODEL_ARCH,
               "unsupported model architecture: arch 'rnn' (this runtime knows transformer, mgsa, phrase, banmt)");
    expect_why(&(model_change){.meta_drop = "d_ff"}, NMT_ERR_MODEL_ARCH,
               "unsupported model: hyper-parameter 'd_ff' is missing (required)");
    expect_why(&(model_change){.meta_drop = "arch"}, NMT_ERR_MODEL_ARCH,
               "metadata key 'arch' is missing (required)");
    /* the embedded tokenizers' form (their contents are parsed by sessions) */
    expect_why(&(model_change){.add_f32 = "tokenizer.src"}, NMT_ERR_MODEL_TENSOR_SHAPE,
               "tensor 'tokenizer.src' must be 1-D u8 bytes (an embedded SentencePiece model)");
    expect_why(&(model_change){.add_blob = "tokenizer.tgt"}, NMT_ERR_MODEL_MISSING_TENSOR,
               "tensor 'tokenizer.tgt' without 'tokenizer.src'");
    expect_why(&(model_change){.meta_key = "enc_branches", .meta_str = "global sideways"}, NMT_ERR_MODEL_ARCH,
               "unsupported hyper-parameters of arch 'transformer': enc_branches 'global sideways': expected 1 to "
               "8 of global, fw, bw, local:K");

    /* a damaged tensor: its name and both CRCs */
    size_t n = 0;
    uint8_t *img = model_variant(&(model_change){0}, &n);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, n, 1), NMT_OK);
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(&f, "enc.0.ffn.fc1.weight", &v), NMT_OK);
    char want[200];
    const uint32_t stored = nmt_crc32(0, v.data, (size_t)v.nbytes);
    ((uint8_t *)(uintptr_t)v.data)[5] ^= 0x10;
    snprintf(want, sizeof want,
             "tensor 'enc.0.ffn.fc1.weight': CRC-32 0x%08x stored, 0x%08x computed (the data are damaged)", stored,
             nmt_crc32(0, v.data, (size_t)v.nbytes));
    char why[NMT_MODEL_WHY_BYTES];
    assert_int_equal(nmt_model_explain(img, n, why, sizeof why), NMT_ERR_MODEL_CHECKSUM);
    assert_string_equal(why, want);
    /* a short buffer is cut, never overrun; NULL is fine */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    assert_int_equal(nmt_model_explain(img, n, tiny, 6), NMT_ERR_MODEL_CHECKSUM);
    assert_string_equal(tiny, "tenso");
    assert_int_equal(tiny[6], 'x');
    assert_int_equal(nmt_model_explain(img, n, NULL, 0), NMT_ERR_MODEL_CHECKSUM);
    /* truncated: both sizes */
    assert_int_equal(nmt_model_explain(img, 100, why, sizeof why), NMT_ERR_MODEL_TRUNCATED);
    assert_string_equal(why, "the file has 100 bytes, less than the 128-byte header");
    free(img);
}

/* ---- issue 55 item 5: floats checked as the type they are used as -------- */

/* The random Transformer with metadata `key` set to the f64 `v`: the status
 * and reason of nmt_model_explain. */
static void expect_f64_why(const char *key, double v, nmt_status want, const char *why_want) {
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmt_random_transformer_add(w, &c), NMT_OK);
    assert_int_equal(nmtw_set_f64(w, key, v), NMT_OK);
    void *img = NULL;
    size_t n = 0;
    assert_int_equal(nmtw_write_memory(w, &img, &n), NMT_OK);
    nmtw_destroy(w);
    char why[NMT_MODEL_WHY_BYTES];
    memset(why, 'x', sizeof why);
    if (nmt_model_explain(img, n, why, sizeof why) != want || strcmp(why, why_want) != 0)
        fail_msg("%s = %g: status %d, \"%s\"; want %d, \"%s\"", key, v, nmt_model_explain(img, n, NULL, 0), why,
                 want, why_want);
    free(img);
}

static void test_nonfinite_meta(void **state) {
    (void)state;
    const char *unbounded = "expected a number finite as f32 (|x| <= 3.40282e+38)";
    char want[256];
    static const struct {
        double v;
        const char *shown;
    } bad_scale[] = {
        {1e300, "1e+300"}, {-1e39, "-1e+39"}, {3.5e38, "3.5e+38"}, {INFINITY, "inf"}, {-INFINITY, "-inf"},
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(bad_scale); i++) {
        snprintf(want, sizeof want, "unsupported hyper-parameter: embed_scale = %s, %s", bad_scale[i].shown,
                 unbounded);
        expect_f64_why("embed_scale", bad_scale[i].v, NMT_ERR_MODEL_ARCH, want);
    }
    snprintf(want, sizeof want, "unsupported hyper-parameter: embed_scale = %g, %s", (double)NAN, unbounded);
    expect_f64_why("embed_scale", NAN, NMT_ERR_MODEL_ARCH, want);
    /* inside (0, 1) as a double, at its edge as a float: 1e-300 is 0, 1 - 1e-12 is 1 */
    expect_f64_why("ln_eps", 1e-300, NMT_ERR_MODEL_ARCH,
                   "unsupported hyper-parameter: ln_eps = 1e-300, expected a number in (0, 1)");
    expect_f64_why("ln_eps", 1.0 - 1e-12, NMT_ERR_MODEL_ARCH,
                   "unsupported hyper-parameter: ln_eps = 1, expected a number in (0, 1)");
    expect_f64_why("ln_eps", 1e300, NMT_ERR_MODEL_ARCH,
                   "unsupported hyper-parameter: ln_eps = 1e+300, expected a number in (0, 1)");
    /* the largest floats and the smallest epsilon are fine */
    expect_f64_why("embed_scale", 3.4e38, NMT_OK, "");
    expect_f64_why("embed_scale", -3.4e38, NMT_OK, "");
    expect_f64_why("ln_eps", 1e-40, NMT_OK, ""); /* a float subnormal, still > 0 */

    /* int8 row scales: f32 in the file, finite */
    static const float bad[] = {INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bad); i++) {
        nmtw_writer *w = nmtw_create();
        assert_non_null(w);
        const float scales[3] = {0.5f, bad[i], 0.25f};
        assert_int_equal(nmtw_add_tensor(w, "q", NMT_DTYPE_I8, 2, (const uint32_t[]){3, 5}, T_I8, scales), NMT_OK);
        void *img = NULL;
        size_t n = 0;
        assert_int_equal(nmtw_write_memory(w, &img, &n), NMT_OK);
        nmtw_destroy(w);
        nmt_file f;
        char why[256];
        assert_int_equal(nmt_file_open_why(&f, img, n, 0, why, sizeof why), NMT_ERR_MODEL_CORRUPT);
        snprintf(want, sizeof want, "tensor 'q': the int8 scale of row 1 is %g (not finite)", (double)bad[i]);
        assert_string_equal(why, want);
        free(img);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explain),
        cmocka_unit_test(test_nonfinite_meta),
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_half),
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_find_expect),
        cmocka_unit_test(test_bad_fixtures),
        cmocka_unit_test(test_bad_fixtures_listed),
        cmocka_unit_test(test_open_arguments),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_tensor_limit),
        cmocka_unit_test(test_python_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
