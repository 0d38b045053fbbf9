/* SPDX-License-Identifier: MIT */
/* format_writer_test.c — the .nmt writer (writer/nmt_writer.c) through the
 * reader (runtime/model/format.c): a round trip of every metadata type and every
 * dtype with the exact layout (alignment, padding, offsets, CRCs), the
 * atomic write to a file, and the writer's refusals of invalid content.
 * Shared helpers are in format_common.c. */
#include "format_common.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_writer_file),
        cmocka_unit_test(test_writer_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
