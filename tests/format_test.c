/* format_test.c — the .nmt reader (runtime/format.c), the writer
 * (convert/nmt_writer.c) and the random Transformer generator
 * (convert/random_model.c): round trips, every malformed-file fixture in
 * tests/fixtures/bad/ with its exact status, metadata/tensor lookups, CRC-32
 * and half-precision conversion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format.h"
#include "nmt_writer.h"
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

/* Whole file into a malloc'd buffer (malloc memory is suitably aligned). */
static uint8_t *slurp(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    assert_true(n >= 0);
    rewind(fp);
    uint8_t *b = (uint8_t *)malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *size = (size_t)n;
    return b;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Entries of a directory other than . and .. */
static int count_entries(const char *dir) {
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) n++;
    closedir(dp);
    return n;
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

/* The content used by the round-trip tests: every metadata type and every
 * dtype. */
static const float T_F32[2 * 3] = {0.125f, -0.25f, 3.5f, 1e-30f, -1e30f, 0.0f};
static const uint16_t T_F16[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
static const int8_t T_I8[3 * 5] = {-127, -1, 0, 1, 127, 5, 6, 7, 8, 9, -10, -20, -30, -40, -50};
static const float T_SCALES[3] = {0.5f, 0.0078125f, 2.0f};
static const uint8_t T_BLOB[7] = {0x00, 0xff, 'p', 'i', 'e', 0x00, 0x80};
static const float T_F32_4D[1 * 2 * 1 * 3] = {1, 2, 3, 4, 5, 6};

static nmtw_writer *roundtrip_writer(void) {
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_set_str(w, "arch", "transformer"), NMT_OK);
    assert_int_equal(nmtw_set_i64(w, "d_model", 512), NMT_OK);
    assert_int_equal(nmtw_set_i64(w, "neg", INT64_MIN), NMT_OK);
    assert_int_equal(nmtw_set_f64(w, "ln_eps", 1e-5), NMT_OK);
    assert_int_equal(nmtw_set_f64(w, "minus_tenth", -0.1), NMT_OK);
    assert_int_equal(nmtw_set_str(w, "empty", ""), NMT_OK);
    assert_int_equal(nmtw_set_str(w, "utf8", "K\xc3\xb6ln \xe2\x86\x92 Z\xc3\xbcrich"), NMT_OK);
    assert_int_equal(nmtw_set_str(w, "k1234567", "exactly-8"), NMT_OK); /* key of 8: no key padding */
    assert_int_equal(nmtw_add_tensor(w, "f32", NMT_DTYPE_F32, 2, (const uint32_t[]){2, 3}, T_F32, NULL), NMT_OK);
    assert_int_equal(nmtw_add_tensor(w, "f16", NMT_DTYPE_F16, 1, (const uint32_t[]){4}, T_F16, NULL), NMT_OK);
    assert_int_equal(nmtw_add_tensor(w, "i8", NMT_DTYPE_I8, 2, (const uint32_t[]){3, 5}, T_I8, T_SCALES), NMT_OK);
    assert_int_equal(nmtw_add_blob(w, "tokenizer.src", T_BLOB, sizeof T_BLOB), NMT_OK);
    assert_int_equal(nmtw_add_f32(w, "enc.0.four_d", 4, (const uint32_t[]){1, 2, 1, 3}, T_F32_4D), NMT_OK);
    return w;
}

static uint8_t *roundtrip_image(size_t *size) {
    nmtw_writer *w = roundtrip_writer();
    void *img;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    assert_int_equal(nmtw_file_size(w), *size);
    nmtw_destroy(w);
    return (uint8_t *)img;
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
/* Round trip                                                               */
/* ------------------------------------------------------------------------ */

static void test_roundtrip(void **state) {
    (void)state;
    size_t size;
    uint8_t *img = roundtrip_image(&size);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    assert_ptr_equal(f.data, img);
    assert_int_equal(f.size, size);
    assert_int_equal(f.h.version, 1);
    assert_int_equal(f.h.header_size, 128);
    assert_int_equal(f.h.file_size, size);
    assert_int_equal(f.h.n_meta, 8);
    assert_int_equal(f.h.n_tensors, 5);
    assert_int_equal(f.h.meta_offset, 128);
    assert_int_equal(f.h.table_offset, f.h.meta_offset + f.h.meta_size);
    assert_int_equal(f.h.data_offset % 64, 0);
    assert_memory_equal(img, "NMTEDGE\x1a", 8);
    /* meta_size = sum of records: 8 + pad8(key) + pad8(value) */
    assert_int_equal(f.h.meta_size, (8 + 8 + 16) + (8 + 8 + 8) + (8 + 8 + 8) + (8 + 8 + 8) + (8 + 16 + 8) +
                                        (8 + 8 + 0) + (8 + 8 + 24) + (8 + 8 + 16));

    int64_t i;
    double d;
    char s[64];
    assert_int_equal(nmt_file_get_i64(&f, "d_model", &i), NMT_OK);
    assert_int_equal(i, 512);
    assert_int_equal(nmt_file_get_i64(&f, "neg", &i), NMT_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(nmt_file_get_f64(&f, "ln_eps", &d), NMT_OK);
    assert_true(d == 1e-5);
    assert_int_equal(nmt_file_get_f64(&f, "minus_tenth", &d), NMT_OK);
    assert_true(d == -0.1);
    assert_int_equal(nmt_file_get_str(&f, "arch", s, sizeof s), NMT_OK);
    assert_string_equal(s, "transformer");
    assert_int_equal(nmt_file_get_str(&f, "empty", s, sizeof s), NMT_OK);
    assert_string_equal(s, "");
    assert_int_equal(nmt_file_get_str(&f, "utf8", s, sizeof s), NMT_OK);
    assert_string_equal(s, "K\xc3\xb6ln \xe2\x86\x92 Z\xc3\xbcrich");
    assert_int_equal(nmt_file_get_str(&f, "k1234567", s, sizeof s), NMT_OK);
    assert_string_equal(s, "exactly-8");

    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(&f, "f32", &v), NMT_OK);
    assert_string_equal(v.name, "f32");
    assert_int_equal(v.dtype, NMT_DTYPE_F32);
    assert_int_equal(v.ndim, 2);
    assert_int_equal(v.shape[0], 2);
    assert_int_equal(v.shape[1], 3);
    assert_int_equal(v.shape[2], 0);
    assert_int_equal(v.n_elements, 6);
    assert_int_equal(v.nbytes, 24);
    assert_null(v.scales);
    assert_memory_equal(v.data, T_F32, sizeof T_F32);
    assert_int_equal(((const uint8_t *)v.data - img) % 64, 0);

    assert_int_equal(nmt_file_find(&f, "f16", &v), NMT_OK);
    assert_int_equal(v.dtype, NMT_DTYPE_F16);
    assert_int_equal(v.n_elements, 4);
    assert_int_equal(v.nbytes, 8);
    assert_null(v.scales);
    assert_memory_equal(v.data, T_F16, sizeof T_F16);

    assert_int_equal(nmt_file_find(&f, "i8", &v), NMT_OK);
    assert_int_equal(v.dtype, NMT_DTYPE_I8);
    assert_int_equal(v.n_elements, 15);
    assert_int_equal(v.nbytes, 16 + 12); /* align4(15) + 3 scales */
    assert_memory_equal(v.data, T_I8, sizeof T_I8);
    assert_int_equal(((const uint8_t *)v.data)[15], 0); /* padding */
    assert_non_null(v.scales);
    assert_ptr_equal((const uint8_t *)v.scales, (const uint8_t *)v.data + 16);
    assert_memory_equal(v.scales, T_SCALES, sizeof T_SCALES);
    assert_true(v.scales[1] == 0.0078125f);

    assert_int_equal(nmt_file_find(&f, "tokenizer.src", &v), NMT_OK);
    assert_int_equal(v.dtype, NMT_DTYPE_U8);
    assert_int_equal(v.ndim, 1);
    assert_int_equal(v.shape[0], 7);
    assert_int_equal(v.n_elements, 7);
    assert_int_equal(v.nbytes, 7);
    assert_null(v.scales);
    assert_memory_equal(v.data, T_BLOB, sizeof T_BLOB);

    assert_int_equal(nmt_file_find(&f, "enc.0.four_d", &v), NMT_OK);
    assert_int_equal(v.ndim, 4);
    assert_int_equal(v.shape[0], 1);
    assert_int_equal(v.shape[1], 2);
    assert_int_equal(v.shape[2], 1);
    assert_int_equal(v.shape[3], 3);
    assert_memory_equal(v.data, T_F32_4D, sizeof T_F32_4D);

    /* tensor_at walks the table in insertion order, data ascending */
    static const char *const names[5] = {"f32", "f16", "i8", "tokenizer.src", "enc.0.four_d"};
    uint64_t prev_end = f.h.data_offset;
    for (uint32_t k = 0; k < 5; k++) {
        assert_int_equal(nmt_file_tensor_at(&f, k, &v), NMT_OK);
        assert_string_equal(v.name, names[k]);
        uint64_t off = (uint64_t)((const uint8_t *)v.data - img);
        assert_int_equal(off % 64, 0);
        assert_true(off >= prev_end && off - prev_end < 64);
        prev_end = off + v.nbytes;
        /* stored CRC = CRC of the data bytes */
        const uint8_t *e = img + f.h.table_offset + 128u * k;
        assert_int_equal(rd32(e + 120), nmt_crc32(0, v.data, (size_t)v.nbytes));
    }
    assert_int_equal(prev_end, size); /* file ends with the last tensor */
    assert_int_equal(nmt_file_tensor_at(&f, 5, &v), NMT_ERR_INVALID_ARGUMENT);

    /* header CRCs */
    assert_int_equal(rd32(img + 124), nmt_crc32(0, img, 124));
    assert_int_equal(rd32(img + 64), nmt_crc32(0, img + f.h.meta_offset, (size_t)f.h.meta_size));
    assert_int_equal(rd32(img + 68), nmt_crc32(0, img + f.h.table_offset, 128u * 5));
    free(img);
}

/* The writer is deterministic and its file output equals its memory output. */
static void test_writer_file(void **state) {
    (void)state;
    size_t size;
    uint8_t *img = roundtrip_image(&size);
    size_t size2;
    uint8_t *img2 = roundtrip_image(&size2);
    assert_int_equal(size, size2);
    assert_memory_equal(img, img2, size);
    free(img2);

    char dir[] = "/tmp/nmt_format_test_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/model.nmt", dir);

    /* an existing file is replaced */
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("old contents", fp);
    fclose(fp);
    nmtw_writer *w = roundtrip_writer();
    assert_int_equal(nmtw_write_file(w, path), NMT_OK);
    uint8_t *disk = slurp(path, &size2);
    assert_int_equal(size2, size);
    assert_memory_equal(disk, img, size);
    free(disk);

    /* no temporary file is left behind */
    assert_int_equal(count_entries(dir), 1);

    /* failure: directory does not exist -> IO, nothing created */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/model.nmt", dir);
    assert_int_equal(nmtw_write_file(w, bad), NMT_ERR_IO);
    assert_int_equal(access(bad, F_OK), -1);

    /* failure: the target is a directory -> rename fails; the temporary
     * file is removed and the directory left as it was */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(nmtw_write_file(w, sub), NMT_ERR_IO);
    assert_int_equal(count_entries(dir), 2);
    assert_int_equal(count_entries(sub), 0);
    assert_int_equal(rmdir(sub), 0);

    assert_int_equal(nmtw_write_file(w, NULL), NMT_ERR_INVALID_ARGUMENT);
    nmtw_destroy(w);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    free(img);
}

static void test_writer_rejects(void **state) {
    (void)state;
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    static const float x[4] = {1, 2, 3, 4};
    static const int8_t q[4] = {1, 2, 3, 4};
    static const float sc[2] = {1, 1};
    char name[100];

    /* names: 1..79 bytes, unique */
    memset(name, 'n', sizeof name);
    name[79] = '\0';
    assert_int_equal(nmtw_add_f32(w, name, 1, (const uint32_t[]){4}, x), NMT_OK);
    name[79] = 'n';
    name[80] = '\0';
    assert_int_equal(nmtw_add_f32(w, name, 1, (const uint32_t[]){4}, x), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_f32(w, "", 1, (const uint32_t[]){4}, x), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_f32(w, "t", 1, (const uint32_t[]){4}, x), NMT_OK);
    assert_int_equal(nmtw_add_f32(w, "t", 1, (const uint32_t[]){4}, x), NMT_ERR_INVALID_ARGUMENT);
    /* shapes and dtypes */
    assert_int_equal(nmtw_add_f32(w, "z", 0, (const uint32_t[]){4}, x), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_f32(w, "z", 5, (const uint32_t[]){1, 1, 1, 1, 4}, x), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_f32(w, "z", 2, (const uint32_t[]){4, 0}, x), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_tensor(w, "z", NMT_DTYPE_COUNT_, 1, (const uint32_t[]){4}, x, NULL),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_tensor(w, "z", NMT_DTYPE_F32, 1, (const uint32_t[]){4}, x, sc),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_tensor(w, "z", NMT_DTYPE_I8, 2, (const uint32_t[]){2, 2}, q, NULL),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_tensor(w, "z", NMT_DTYPE_U8, 2, (const uint32_t[]){2, 2}, q, NULL),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_add_tensor(w, "z", NMT_DTYPE_I8, 2, (const uint32_t[]){2, 2}, q, sc), NMT_OK);
    assert_int_equal(nmtw_tensor_count(w), 3);

    /* keys: 1..63 bytes; setting again replaces in place */
    memset(name, 'k', sizeof name);
    name[63] = '\0';
    assert_int_equal(nmtw_set_i64(w, name, 1), NMT_OK);
    name[63] = 'k';
    name[64] = '\0';
    assert_int_equal(nmtw_set_i64(w, name, 1), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_set_i64(w, "", 1), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_set_str(w, "key", NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmtw_set_i64(w, "a", 1), NMT_OK);
    assert_int_equal(nmtw_set_i64(w, "b", 2), NMT_OK);
    assert_int_equal(nmtw_set_str(w, "a", "now a string"), NMT_OK);
    assert_int_equal(nmtw_set_f64(w, "b", 2.5), NMT_OK);
    assert_int_equal(nmtw_meta_count(w), 3);

    void *img;
    size_t size;
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    char s[32];
    double d;
    assert_int_equal(nmt_file_get_str(&f, "a", s, sizeof s), NMT_OK);
    assert_string_equal(s, "now a string");
    assert_int_equal(nmt_file_get_f64(&f, "b", &d), NMT_OK);
    assert_true(d == 2.5);
    /* order of first setting kept: the 63-byte key, then a, then b */
    const uint8_t *m = (const uint8_t *)img + 128;
    assert_int_equal(m[0], 63);
    assert_int_equal(m[8 + 64 + 8], 1); /* key_len of "a" */
    assert_int_equal(m[8 + 64 + 8 + 8], 'a');
    assert_int_equal(nmtw_write_buffer(w, img, size - 1), NMT_ERR_INVALID_ARGUMENT);
    free(img);
    nmtw_destroy(w);
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
/* Random Transformer                                                       */
/* ------------------------------------------------------------------------ */

static void expect2(const nmt_file *f, const char *name, uint32_t d0, uint32_t d1) {
    nmt_tensor_view v;
    nmt_status st = nmt_file_expect(f, name, 2, (const uint32_t[]){d0, d1}, &v);
    if (st != NMT_OK) fail_msg("%s [%u, %u]: status %d", name, d0, d1, (int)st);
    assert_int_equal(v.dtype, NMT_DTYPE_F32);
}

static void expect1(const nmt_file *f, const char *name, uint32_t d0) {
    nmt_tensor_view v;
    nmt_status st = nmt_file_expect(f, name, 1, (const uint32_t[]){d0}, &v);
    if (st != NMT_OK) fail_msg("%s [%u]: status %d", name, d0, (int)st);
}

static void expect_absent(const nmt_file *f, const char *name) {
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(f, name, &v), NMT_ERR_MODEL_MISSING_TENSOR);
}

static void expect_linear(const nmt_file *f, const char *prefix, uint32_t out, uint32_t in) {
    char n[128];
    snprintf(n, sizeof n, "%s.weight", prefix);
    expect2(f, n, out, in);
    snprintf(n, sizeof n, "%s.bias", prefix);
    expect1(f, n, out);
}

/* Checks every tensor of docs/ARCHITECTURES.md for `c`, and that there is
 * nothing else.  n_enc_br / n_dec_br are the branch counts. */
static void check_transformer(const nmt_file *f, const nmt_random_transformer_config *c, uint32_t n_enc_br,
                              uint32_t n_dec_br) {
    uint32_t d = c->d_model, r = c->gate_reduction;
    int pre = strcmp(c->norm, "pre") == 0;
    int concat = strcmp(c->fusion, "concat") == 0, gate = strcmp(c->fusion, "gate") == 0;
    uint32_t count = 1;
    expect2(f, "src_embed", c->src_vocab, d);
    if (c->shared_embeddings) {
        expect_absent(f, "tgt_embed");
    } else {
        expect2(f, "tgt_embed", c->tgt_vocab, d);
        count++;
    }
    if (c->tied_output) {
        expect_absent(f, "out_proj");
    } else {
        expect2(f, "out_proj", c->tgt_vocab, d);
        count++;
    }

    char p[96];
    for (int side = 0; side < 2; side++) {
        const char *st = side ? "dec" : "enc";
        uint32_t layers = side ? c->dec_layers : c->enc_layers;
        uint32_t nb = side ? n_dec_br : n_enc_br;
        for (uint32_t l = 0; l < layers; l++) {
            static const char *const qkvo[4] = {"q", "k", "v", "o"};
            for (int i = 0; i < 4; i++) {
                snprintf(p, sizeof p, "%s.%u.self_attn.%s", st, l, qkvo[i]);
                expect_linear(f, p, d, (i == 3 && concat) ? nb * d : d);
                count += 2;
            }
            for (uint32_t b = 0; b <= 8; b++) {
                if (gate && nb > 1 && b < nb) {
                    snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1", st, l, b);
                    expect_linear(f, p, d / r, d);
                    snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc2", st, l, b);
                    expect_linear(f, p, d, d / r);
                    count += 4;
                } else {
                    snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1.weight", st, l, b);
                    expect_absent(f, p);
                }
            }
            if (side) {
                for (int i = 0; i < 4; i++) {
                    snprintf(p, sizeof p, "dec.%u.cross_attn.%s", l, qkvo[i]);
                    expect_linear(f, p, d, d);
                    count += 2;
                }
            }
            for (int k = 1; k <= (side ? 3 : 2); k++) {
                snprintf(p, sizeof p, "%s.%u.ln%d.weight", st, l, k);
                expect1(f, p, d);
                snprintf(p, sizeof p, "%s.%u.ln%d.bias", st, l, k);
                expect1(f, p, d);
                count += 2;
            }
            snprintf(p, sizeof p, "%s.%u.ffn.fc1", st, l);
            expect_linear(f, p, c->d_ff, d);
            snprintf(p, sizeof p, "%s.%u.ffn.fc2", st, l);
            expect_linear(f, p, d, c->d_ff);
            count += 4;
        }
        snprintf(p, sizeof p, "%s.ln.weight", st);
        if (pre) {
            expect1(f, p, d);
            snprintf(p, sizeof p, "%s.ln.bias", st);
            expect1(f, p, d);
            count += 2;
        } else {
            expect_absent(f, p);
        }
    }
    assert_int_equal(f->h.n_tensors, count);

    /* metadata */
    int64_t i;
    double x;
    char s[96];
    static const struct {
        const char *key;
        size_t off;
    } u32_keys[] = {
        {"d_model", offsetof(nmt_random_transformer_config, d_model)},
        {"n_heads", offsetof(nmt_random_transformer_config, n_heads)},
        {"d_ff", offsetof(nmt_random_transformer_config, d_ff)},
        {"enc_layers", offsetof(nmt_random_transformer_config, enc_layers)},
        {"dec_layers", offsetof(nmt_random_transformer_config, dec_layers)},
        {"src_vocab", offsetof(nmt_random_transformer_config, src_vocab)},
        {"tgt_vocab", offsetof(nmt_random_transformer_config, tgt_vocab)},
        {"gate_reduction", offsetof(nmt_random_transformer_config, gate_reduction)},
        {"bos_id", offsetof(nmt_random_transformer_config, bos_id)},
        {"eos_id", offsetof(nmt_random_transformer_config, eos_id)},
        {"pad_id", offsetof(nmt_random_transformer_config, pad_id)},
        {"unk_id", offsetof(nmt_random_transformer_config, unk_id)},
    };
    for (size_t k = 0; k < sizeof u32_keys / sizeof u32_keys[0]; k++) {
        uint32_t want;
        memcpy(&want, (const char *)c + u32_keys[k].off, sizeof want);
        assert_int_equal(nmt_file_get_i64(f, u32_keys[k].key, &i), NMT_OK);
        assert_int_equal(i, want);
    }
    assert_int_equal(nmt_file_get_i64(f, "shared_embeddings", &i), NMT_OK);
    assert_int_equal(i, c->shared_embeddings);
    assert_int_equal(nmt_file_get_i64(f, "tied_output", &i), NMT_OK);
    assert_int_equal(i, c->tied_output);
    assert_int_equal(nmt_file_get_str(f, "arch", s, sizeof s), NMT_OK);
    assert_string_equal(s, "transformer");
    assert_int_equal(nmt_file_get_str(f, "norm", s, sizeof s), NMT_OK);
    assert_string_equal(s, c->norm);
    assert_int_equal(nmt_file_get_str(f, "enc_branches", s, sizeof s), NMT_OK);
    assert_string_equal(s, c->enc_branches);
    assert_int_equal(nmt_file_get_str(f, "dec_branches", s, sizeof s), NMT_OK);
    assert_string_equal(s, c->dec_branches);
    assert_int_equal(nmt_file_get_str(f, "fusion", s, sizeof s), NMT_OK);
    assert_string_equal(s, c->fusion);
    /* written through the family's table: the runtime's binary32 values */
    assert_int_equal(nmt_file_get_f64(f, "ln_eps", &x), NMT_OK);
    assert_true(x == (double)(float)c->ln_eps);
    assert_int_equal(nmt_file_get_f64(f, "embed_scale", &x), NMT_OK);
    if (c->embed_scale > 0) assert_true(x == (double)(float)c->embed_scale);
    else assert_true(x == (double)sqrtf((float)c->d_model)); /* the family's default, written out */
}

/* Values of a tensor lie in [lo, hi] and are not all equal. */
static void check_range(const nmt_file *f, const char *name, float lo, float hi) {
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(f, name, &v), NMT_OK);
    assert_int_equal(v.dtype, NMT_DTYPE_F32);
    const float *x = (const float *)v.data;
    float mn = x[0], mx = x[0];
    for (uint64_t i = 0; i < v.n_elements; i++) {
        if (!(x[i] >= lo && x[i] <= hi)) fail_msg("%s[%llu] = %g outside [%g, %g]", name, (unsigned long long)i,
                                                  (double)x[i], (double)lo, (double)hi);
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
    }
    assert_true(mx - mn > (hi - lo) * 0.25f);
}

static uint8_t *random_image(const nmt_random_transformer_config *c, size_t *size, nmt_file *f) {
    void *img;
    assert_int_equal(nmt_random_transformer_image(c, &img, size), NMT_OK);
    assert_int_equal(nmt_file_open(f, img, *size, 1), NMT_OK);
    return (uint8_t *)img;
}

static void test_random_default(void **state) {
    (void)state;
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    assert_int_equal(c.d_model, 32);
    assert_string_equal(c.norm, "post");
    size_t size;
    nmt_file f;
    uint8_t *img = random_image(&c, &size, &f);
    check_transformer(&f, &c, 1, 1);
    assert_int_equal(f.h.n_tensors, 3 + 2 * 16 + 2 * 26);
    /* initialisation */
    check_range(&f, "enc.0.ln1.weight", 0.95f, 1.05f);
    check_range(&f, "enc.0.ln1.bias", -0.05f, 0.05f);
    check_range(&f, "dec.1.ln3.weight", 0.95f, 1.05f);
    float b32 = 1.0f / sqrtf(32.0f), b64 = 1.0f / sqrtf(64.0f);
    check_range(&f, "src_embed", -b32, b32);
    check_range(&f, "enc.0.self_attn.q.weight", -b32, b32);
    check_range(&f, "enc.0.self_attn.q.bias", -b32, b32);
    check_range(&f, "enc.1.ffn.fc2.weight", -b64, b64);
    check_range(&f, "dec.0.cross_attn.v.weight", -b32, b32);

    /* reproducible; the seed matters; the file path gives the same bytes */
    size_t size2;
    nmt_file f2;
    uint8_t *img2 = random_image(&c, &size2, &f2);
    assert_int_equal(size, size2);
    assert_memory_equal(img, img2, size);
    free(img2);
    c.seed = 2;
    img2 = random_image(&c, &size2, &f2);
    assert_int_equal(size, size2);
    assert_memory_not_equal(img, img2, size);
    free(img2);
    c.seed = 1;
    char dir[] = "/tmp/nmt_format_rand_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/random.nmt", dir);
    assert_int_equal(nmt_random_transformer_write(&c, path), NMT_OK);
    img2 = slurp(path, &size2);
    assert_int_equal(size2, size);
    assert_memory_equal(img, img2, size);
    free(img2);
    unlink(path);
    rmdir(dir);
    free(img);
}

static void test_random_hysan(void **state) {
    (void)state;
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    c.d_model = 16;
    c.n_heads = 2;
    c.d_ff = 24;
    c.enc_layers = 1;
    c.dec_layers = 2;
    c.src_vocab = c.tgt_vocab = 50;
    c.norm = "pre";
    c.enc_branches = "global fw  bw local:3";
    c.dec_branches = " global local:2 ";
    c.fusion = "gate";
    c.gate_reduction = 4;
    c.shared_embeddings = 1;
    c.tied_output = 1;
    c.embed_scale = 2.0;
    c.weight_scale = 0.5f;
    size_t size;
    nmt_file f;
    uint8_t *img = random_image(&c, &size, &f);
    check_transformer(&f, &c, 4, 2);
    assert_int_equal(f.h.n_tensors, 1 + (16 + 16) + 2 * (26 + 8) + 4);
    check_range(&f, "enc.0.self_attn.gate.3.fc2.weight", -0.5f / 2.0f, 0.5f / 2.0f); /* fan_in d/r = 4 */
    free(img);

    /* concat: o.weight is [d, n_branches * d]; no gates */
    c.fusion = "concat";
    c.norm = "post";
    c.shared_embeddings = 0;
    c.tgt_vocab = 40;
    img = random_image(&c, &size, &f);
    check_transformer(&f, &c, 4, 2);
    free(img);

    /* gate with a single branch: no gate tensors */
    c.fusion = "gate";
    c.enc_branches = "local:1";
    c.dec_branches = "fw";
    img = random_image(&c, &size, &f);
    check_transformer(&f, &c, 1, 1);
    free(img);
}

static void test_random_invalid(void **state) {
    (void)state;
    nmt_random_transformer_config c;
    void *img = NULL;
    size_t size;
    static const char *const bad_fusion[] = {"", "Sum", "mean"};
    for (size_t i = 0; i < 3; i++) {
        nmt_random_transformer_defaults(&c);
        c.fusion = bad_fusion[i];
        assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    }
    nmt_random_transformer_defaults(&c);
    c.norm = "mid";
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    nmt_random_transformer_defaults(&c);
    c.enc_branches = "  ";
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    nmt_random_transformer_defaults(&c);
    c.dec_branches = "global global global global global global global global global";
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    nmt_random_transformer_defaults(&c);
    c.fusion = "gate";
    c.enc_branches = "global fw";
    c.gate_reduction = 3; /* 32 % 3 != 0 */
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    c.gate_reduction = 0;
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    c.enc_branches = "global"; /* one branch: no gate, r irrelevant */
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_OK);
    free(img);
    nmt_random_transformer_defaults(&c);
    c.d_model = 0;
    assert_int_equal(nmt_random_transformer_image(&c, &img, &size), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_random_count_branches("global fw bw local:3"), 4);
    assert_int_equal(nmt_random_count_branches(" a\tb "), 2);
    assert_int_equal(nmt_random_count_branches(""), 0);
    assert_int_equal(nmt_random_count_branches(NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_half),
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_writer_file),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_find_expect),
        cmocka_unit_test(test_bad_fixtures),
        cmocka_unit_test(test_bad_fixtures_listed),
        cmocka_unit_test(test_open_arguments),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_tensor_limit),
        cmocka_unit_test(test_python_example),
        cmocka_unit_test(test_random_default),
        cmocka_unit_test(test_random_hysan),
        cmocka_unit_test(test_random_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
