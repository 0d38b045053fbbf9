/* SPDX-License-Identifier: MIT */
/* format_random_test.c — the random Transformer generator
 * (convert/random_model.c): the default and HySAN configurations produce
 * readable .nmt files with every expected tensor, shape and metadata key,
 * values in their ranges, the same bytes in memory and on disk for the same
 * seed, and invalid configurations are refused.  Shared helpers are in
 * format_common.c. */
#include "format_common.h"

#include "random_model.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
        cmocka_unit_test(test_random_default),
        cmocka_unit_test(test_random_hysan),
        cmocka_unit_test(test_random_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
