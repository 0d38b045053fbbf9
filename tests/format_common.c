/* SPDX-License-Identifier: MIT */
/* format_common.c — helpers shared by the .nmt format tests (see
 * format_common.h). */
#include "format_common.h"
#include "family_writer.h"
#include "random_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t *slurp(const char *path, size_t *size) {
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

const float T_F32[2 * 3] = {0.125f, -0.25f, 3.5f, 1e-30f, -1e30f, 0.0f};
const uint16_t T_F16[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};
const int8_t T_I8[3 * 5] = {-127, -1, 0, 1, 127, 5, 6, 7, 8, 9, -10, -20, -30, -40, -50};
const float T_SCALES[3] = {0.5f, 0.0078125f, 2.0f};
const uint8_t T_BLOB[7] = {0x00, 0xff, 'p', 'i', 'e', 0x00, 0x80};
const float T_F32_4D[1 * 2 * 1 * 3] = {1, 2, 3, 4, 5, 6};

nmtw_writer *roundtrip_writer(void) {
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

uint8_t *roundtrip_image(size_t *size) {
    nmtw_writer *w = roundtrip_writer();
    void *img;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    assert_int_equal(nmtw_file_size(w), *size);
    nmtw_destroy(w);
    return (uint8_t *)img;
}

uint8_t *model_variant(const model_change *c, size_t *size) {
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    void *good = NULL;
    size_t good_n = 0;
    assert_int_equal(nmt_random_transformer_image(&rc, &good, &good_n), NMT_OK);
    uint8_t *img = image_variant(good, good_n, c, size);
    free(good);
    return img;
}

uint8_t *image_variant(const void *good, size_t good_n, const model_change *c, size_t *size) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, good, good_n, 1), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    for (uint32_t i = 0; i < f.h.n_meta; i++) {
        nmt_meta_view m;
        assert_int_equal(nmt_file_meta_at(&f, i, &m), NMT_OK);
        if (c->meta_drop && strcmp(m.key, c->meta_drop) == 0) continue;
        if (c->meta_key && strcmp(m.key, c->meta_key) == 0) {
            if (c->meta_str) assert_int_equal(nmtw_set_str(w, m.key, c->meta_str), NMT_OK);
            else if (c->meta_is_f64) assert_int_equal(nmtw_set_f64(w, m.key, c->meta_f64), NMT_OK);
            else assert_int_equal(nmtw_set_i64(w, m.key, c->meta_i64), NMT_OK);
            continue;
        }
        char str[1024];
        if (m.type == NMT_META_I64) assert_int_equal(nmtw_set_i64(w, m.key, m.i64), NMT_OK);
        else if (m.type == NMT_META_F64) assert_int_equal(nmtw_set_f64(w, m.key, m.f64), NMT_OK);
        else {
            assert_true(m.str_len < sizeof str);
            memcpy(str, m.str, m.str_len);
            str[m.str_len] = '\0';
            assert_int_equal(nmtw_set_str(w, m.key, str), NMT_OK);
        }
    }
    int found_set = 0;
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        if (c->drop && strcmp(v.name, c->drop) == 0) continue;
        if (c->reshape && strcmp(v.name, c->reshape) == 0) {
            float *z = calloc((size_t)c->rows * c->cols, sizeof *z);
            assert_non_null(z);
            const uint32_t shape[2] = {c->rows, c->cols};
            assert_int_equal(nmtw_add_f32(w, v.name, 2, shape, z), NMT_OK);
            free(z);
            continue;
        }
        if (c->as_u8 && strcmp(v.name, c->as_u8) == 0) {
            assert_int_equal(nmtw_add_blob(w, v.name, v.data, (uint32_t)v.nbytes), NMT_OK);
            continue;
        }
        if (c->set_f32 && strcmp(v.name, c->set_f32) == 0) {
            assert_int_equal(v.dtype, NMT_DTYPE_F32);
            assert_true(c->set_index < v.n_elements);
            float *d = malloc((size_t)v.nbytes);
            assert_non_null(d);
            memcpy(d, v.data, (size_t)v.nbytes);
            d[c->set_index] = c->set_value;
            assert_int_equal(nmtw_add_tensor(w, v.name, NMT_DTYPE_F32, v.ndim, v.shape, d, NULL), NMT_OK);
            free(d);
            found_set = 1;
            continue;
        }
        assert_int_equal(nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, v.scales), NMT_OK);
    }
    assert_true(c->set_f32 == NULL || found_set);
    if (c->add_f32) assert_int_equal(nmtw_add_f32(w, c->add_f32, 1, (const uint32_t[]){2}, (const float[]){1, 2}), NMT_OK);
    if (c->add_blob)
        assert_int_equal(nmtw_add_blob(w, c->add_blob, c->blob_data ? c->blob_data : "spm",
                                       c->blob_data ? c->blob_size : 3),
                         NMT_OK);
    void *img = NULL;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    nmtw_destroy(w);
    return (uint8_t *)img;
}

void *requantize(const struct nmt_family *fam, const void *cfg, const void *img, size_t size, int q8,
                 size_t *out_size) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, fam, cfg), NMT_OK);
    for (uint32_t i = 0; i < f.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&f, i, &v), NMT_OK);
        if (v.ndim != 2 || v.dtype != NMT_DTYPE_F32) {
            assert_int_equal(nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, v.scales), NMT_OK);
            continue;
        }
        const uint32_t rows = v.shape[0], cols = v.shape[1];
        const float *x = v.data;
        int8_t *q = malloc((size_t)rows * cols);
        float *sc = malloc(sizeof(float) * rows), *deq = malloc(sizeof(float) * (size_t)rows * cols);
        assert_true(q && sc && deq);
        for (uint32_t r = 0; r < rows; r++) {
            float mx = 0;
            for (uint32_t c = 0; c < cols; c++) mx = fmaxf(mx, fabsf(x[(size_t)r * cols + c]));
            sc[r] = mx > 0 ? mx / 127.0f : 1.0f;
            for (uint32_t c = 0; c < cols; c++) {
                const size_t j = (size_t)r * cols + c;
                q[j] = (int8_t)lrintf(x[j] / sc[r]);
                deq[j] = (float)q[j] * sc[r];
            }
        }
        assert_int_equal(q8 ? nmtw_add_tensor(w, v.name, NMT_DTYPE_I8, 2, v.shape, q, sc)
                            : nmtw_add_f32(w, v.name, 2, v.shape, deq),
                         NMT_OK);
        free(q);
        free(sc);
        free(deq);
    }
    void *out;
    assert_int_equal(nmtw_write_memory(w, &out, out_size), NMT_OK);
    nmtw_destroy(w);
    return out;
}
