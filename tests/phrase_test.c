/* SPDX-License-Identifier: MIT */
/* phrase_test.c — the phrase-based attention family (arch "phrase", issue
 * 16) in the session: for every method x structure (ConvKV, QueryK;
 * homogeneous, heterogeneous) in the encoder self-, decoder self- and
 * cross-attention, incremental decoding (window state, K|V and segment
 * caches, beam reorder) gives the teacher-forced scores, and the segment
 * caches read through the beam's K|V table equal them gathered; unigram-only
 * configurations equal the Transformer on the same weights; int8 models
 * run; bad configurations are NMT_ERR_MODEL_ARCH with the reason.
 * Sentences of 1, 2, 3 and 8 source tokens (+ EOS) and 1 to 5 target
 * tokens cover no phrase, exactly one and several of each size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_common.h"
#include "family_writer.h"
#include "format_common.h"
#include "random_model.h"
#include "ref_model.h"
#include "test_util.h"
#include "transformer_cfg.h"

typedef nmt_test_dev_env env;

#define VOCAB 29

/* A small random Transformer's configuration (d 32, 4 heads, 2 + 2
 * layers), parsed as the runtime parses it; then the phrase keys. */
static nmt_status ph_cfg(nmt_tf_cfg *c, const char *enc, const char *dec, const char *cross) {
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_ff = 48;
    rc.src_vocab = rc.tgt_vocab = VOCAB;
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&rc, &img, &size), NMT_OK);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, c), NMT_OK);
    free(img);
    if (enc == NULL) return NMT_OK;
    snprintf(c->ph_text[NMT_PH_ENC], NMT_PH_TEXT, "%s", enc);
    snprintf(c->ph_text[NMT_PH_DEC], NMT_PH_TEXT, "%s", dec);
    snprintf(c->ph_text[NMT_PH_CROSS], NMT_PH_TEXT, "%s", cross);
    return nmt_tf_finish(c, ~0ull, NULL, 0);
}

/* A random model of `fam`, int8 (every 2-D tensor quantized per row) when q8. */
static void *write_model(const nmt_family *fam, const nmt_tf_cfg *c, uint64_t seed, int q8, size_t *size) {
    void *img = family_image(fam, c, seed, size);
    if (!q8) return img;
    size_t out_size;
    void *out = requantize(fam, c, img, *size, 1, &out_size);
    free(img);
    *size = out_size;
    return out;
}

static const nmt_limits ph_limits = {.max_src_len = 9, .max_tgt_len = 7, .max_batch = 4, .max_beam = 3};

#define NSENT 4
static const int32_t src0[] = {5, 9, 11, 4}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4}, src3[] = {6, 13};
static const int32_t tgt0[] = {4, 6, 8}, tgt1[] = {9, 9, 10, 11, 3}, tgt2[] = {13}, tgt3[] = {5, 7};
static const int32_t *const srcs[NSENT] = {src0, src1, src2, src3};
static const uint32_t src_lens[NSENT] = {4, 1, 8, 2};
static const int32_t *const tgts[NSENT] = {tgt0, tgt1, tgt2, tgt3};
static const uint32_t tgt_lens[NSENT] = {3, 5, 1, 2};

/* enc, dec, cross */
static const char *const configs[][3] = {
    {"convkv:homo:211", "convkv:homo:211", "convkv:homo:211"},
    {"convkv:hetero:123", "convkv:hetero:123", "convkv:hetero:12"},
    {"queryk:homo:211", "queryk:homo:22", "queryk:homo:1003"},
    {"queryk:hetero:12", "queryk:hetero:123", "queryk:hetero:123"},
    {"convkv:hetero:12", "queryk:homo:121", "none"},
    {"none", "convkv:homo:13", "queryk:hetero:13"},
    {"queryk:inter:12", "queryk:inter:12", "queryk:inter:12"},
    {"convkv:inter:12", "convkv:inter:12", "convkv:inter:12"},
    {"queryk:inter:12", "convkv:hetero:12", "convkv:inter:12"},
    {"convkv:homo:22", "queryk:inter:12", "none"},
};

/* The session's teacher-forced scores of a padded batch equal the
 * double-precision reference's, written from the formulas
 * (tests/ref_model.c), for every configuration. */
static void test_score_equals_reference(void **state) {
    env *e = *state;
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    for (size_t k = 0; k < NMT_ARRAY_LEN(configs); k++)
        for (int norm = 0; norm < 2; norm++) {
            nmt_tf_cfg c;
            assert_int_equal(ph_cfg(&c, NULL, NULL, NULL), NMT_OK);
            c.pre_norm = norm;
            for (int i = 0; i < 3; i++) snprintf(c.ph_text[i], NMT_PH_TEXT, "%s", configs[k][i]);
            assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
            size_t size;
            test_model m;
            void *img = write_model(&nmt_family_phrase, &c, 80 + k, 0, &size);
            test_model_open(e->dev, img, size, &ph_limits, &m);
            const nmt_file f = m.file;
            float lp[NSENT];
            nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp));
            for (uint32_t i = 0; i < NSENT; i++) {
                const double want = ref_model_score(&f, srcs[i], src_lens[i], tgts[i], tgt_lens[i]);
                if (fabs(lp[i] - want) > 1e-3 * fmax(1.0, fabs(want)))
                    fail_msg("%s | %s | %s %s-norm sentence %u: %.6f, reference %.6f", configs[k][0], configs[k][1],
                             configs[k][2], norm ? "pre" : "post", i, lp[i], want);
            }
            test_model_close(&m);
        }
}

/* Greedy and beam 3 (the caches' and windows' reorder): each result's
 * log-probability summed over incremental steps equals its teacher-forced
 * score, for every configuration, fp32 and int8. */
static void test_incremental_equals_forced(void **state) {
    env *e = *state;
    for (size_t k = 0; k < NMT_ARRAY_LEN(configs); k++)
        for (int q8 = 0; q8 <= 1; q8++) {
            nmt_tf_cfg c;
            assert_int_equal(ph_cfg(&c, configs[k][0], configs[k][1], configs[k][2]), NMT_OK);
            size_t size;
            test_model m;
            void *img_ = write_model(&nmt_family_phrase, &c, 60 + k, q8, &size);
            /* int8: the int8 weights' kernel, exact as fp32 is; int8 x int8
             * quantizes activations, whose rounding the two paths' last-bit
             * differences can flip (kernels_i8dot_test bounds it) */
            if (q8) setenv("NMT_EDGE_NO_I8DOT", "1", 1);
            test_model_open(e->dev, img_, size, &ph_limits, &m);
            unsetenv("NMT_EDGE_NO_I8DOT");
            nmt_model_info info;
            nmt_session_model_info(m.s, &info);
            assert_string_equal(info.arch, "phrase");
            char want[200];
            snprintf(want, sizeof want, "ph_enc %s; ph_dec %s; ph_cross %s", configs[k][0], configs[k][1],
                     configs[k][2]);
            assert_string_equal(info.family_config, want);
            nmt_batch src = {srcs, src_lens, NSENT};
            char what[160];
            snprintf(what, sizeof what, "%s | %s | %s %s", configs[k][0], configs[k][1], configs[k][2],
                     q8 ? "int8" : "fp32");
            check_incremental_equals_forced(e->dev, m.s, &src, 3, 2, 6, what);
            /* the decoder caches read through the beam's K|V table equal
             * them gathered on every reorder (and trimming changes nothing) */
            if (!q8) check_trim_equals_full(e->dev, m.s, &src, 3, what);
            test_model_close(&m);
        }
}

/* Only unigram keys (homogeneous all-unigram heads, heterogeneous unigram
 * only): the Transformer on the same weights; any n-gram changes the
 * scores. */
static void test_unigram_equals_transformer(void **state) {
    env *e = *state;
    static const char *const uni[][3] = {
        {"convkv:homo:4", "convkv:homo:4", "convkv:homo:4"},
        {"queryk:hetero:1", "queryk:hetero:1", "queryk:hetero:1"},
        {"convkv:hetero:1", "queryk:homo:4", "none"},
    };
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    nmt_tf_cfg t;
    assert_int_equal(ph_cfg(&t, NULL, NULL, NULL), NMT_OK);
    size_t size;
    test_model m;
    float base[NSENT], lp[NSENT];
    void *img_ = write_model(&nmt_family_transformer, &t, 5, 0, &size);
        test_model_open(e->dev, img_, size, &ph_limits, &m);
    nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, base));
    test_model_close(&m);
    for (size_t k = 0; k < NMT_ARRAY_LEN(uni); k++) {
        nmt_tf_cfg c;
        assert_int_equal(ph_cfg(&c, uni[k][0], uni[k][1], uni[k][2]), NMT_OK);
        img_ = write_model(&nmt_family_phrase, &c, 5, 0, &size);
        test_model_open(e->dev, img_, size, &ph_limits, &m);
        nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp));
        for (uint32_t i = 0; i < NSENT; i++) assert_float_equal(lp[i], base[i], 1e-4 * fmax(1.0, fabs(base[i])));
        test_model_close(&m);
    }
    /* one bigram head in one kind: different scores */
    for (int kind = 0; kind < 3; kind++) {
        nmt_tf_cfg c;
        const char *v[3] = {"none", "none", "none"};
        v[kind] = "convkv:homo:31";
        assert_int_equal(ph_cfg(&c, v[0], v[1], v[2]), NMT_OK);
        img_ = write_model(&nmt_family_phrase, &c, 5, 0, &size);
        test_model_open(e->dev, img_, size, &ph_limits, &m);
        nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp));
        int differ = 0;
        for (uint32_t i = 0; i < NSENT; i++) differ |= fabsf(lp[i] - base[i]) > 1e-4f;
        assert_true(differ);
        test_model_close(&m);
    }
}

/* Configurations the family refuses, each NMT_ERR_MODEL_ARCH with the key
 * named. */
static void test_bad_configs(void **state) {
    (void)state;
    static const char *const bad[] = {
        "convkv",            /* no structure */
        "convkv:homo:",      /* no heads */
        "convkv:homo:31",    /* 4 heads: fine, see below */
        "convkv:homo:22x",   /* not a digit */
        "convkv:homo:5",     /* 5 heads of 4 */
        "convkv:homo:3",     /* 3 heads of 4 */
        "queryk:hetero:21",  /* not ascending from 1 */
        "queryk:hetero:23",  /* no unigram */
        "queryk:hetero:11",  /* repeated */
        "queryk:hetero:12345", /* more than 4 segments */
        "convkv:homo:10101", /* more than 4 n-gram sizes? no: 3 sizes, 3 heads */
        "attn:homo:4",       /* unknown method */
        "convkv:inter:123",  /* interleaved: unigram and bigram only */
        "convkv:interleaved:12", /* unknown structure */
    };
    const int ok[] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t k = 0; k < NMT_ARRAY_LEN(bad); k++)
        for (int kind = 0; kind < 3; kind++) {
            nmt_tf_cfg c;
            const char *v[3] = {"none", "none", "none"};
            v[kind] = bad[k];
            char why[NMT_FAMILY_WHY_BYTES] = "";
            assert_int_equal(ph_cfg(&c, NULL, NULL, NULL), NMT_OK);
            for (int i = 0; i < 3; i++) snprintf(c.ph_text[i], NMT_PH_TEXT, "%s", v[i]);
            const nmt_status s = nmt_tf_finish(&c, ~0ull, why, sizeof why);
            if (ok[k]) {
                assert_int_equal(s, NMT_OK);
                continue;
            }
            if (s != NMT_ERR_MODEL_ARCH) fail_msg("'%s' as kind %d: status %d", bad[k], kind, (int)s);
            static const char *const keys[3] = {"ph_enc", "ph_dec", "ph_cross"};
            assert_non_null(strstr(why, keys[kind]));
        }
    /* HySAN branches with phrase attention */
    nmt_tf_cfg c;
    assert_int_equal(ph_cfg(&c, NULL, NULL, NULL), NMT_OK);
    snprintf(c.enc_br_text, sizeof c.enc_br_text, "global local:2");
    for (int i = 0; i < 3; i++) snprintf(c.ph_text[i], NMT_PH_TEXT, "convkv:homo:22");
    char why[NMT_FAMILY_WHY_BYTES] = "";
    assert_int_equal(nmt_tf_finish(&c, ~0ull, why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_non_null(strstr(why, "enc_branches"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_unigram_equals_transformer),
        cmocka_unit_test(test_score_equals_reference),
        cmocka_unit_test(test_incremental_equals_forced),
    };
    return cmocka_run_group_tests(tests, nmt_test_dev_setup, nmt_test_dev_teardown);
}
