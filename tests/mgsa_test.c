/* SPDX-License-Identifier: MIT */
/* mgsa_test.c — the MG-SA family (arch "mgsa", issue 15) in the session:
 * n-gram phrase heads with max-pooling against the double-precision
 * reference (tests/ref_model.c) over a padded batch; all-word heads equal
 * the Transformer on the same weights bit for bit; incremental and
 * teacher-forced decoding agree; bad configurations are NMT_ERR_MODEL_ARCH. */
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

/* The configuration of a small random Transformer (d 32, 4 heads, 2 + 2
 * layers, post-norm), parsed as the runtime parses it. */
static void base_cfg(nmt_tf_cfg *c) {
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
}


/* An MG-SA configuration: the base with these layers, heads and phrase
 * interaction (NMT_MG_REC_*). */
static nmt_status mg_cfg(nmt_tf_cfg *c, const char *layers, const char *heads, int rec) {
    base_cfg(c);
    snprintf(c->mg_layers_text, sizeof c->mg_layers_text, "%s", layers);
    snprintf(c->mg_heads_text, sizeof c->mg_heads_text, "%s", heads);
    c->mg_interact = rec;
    c->mg_chunk = 8;
    c->mg_fallback = 2;
    return nmt_tf_finish(c, ~0ull, NULL, 0);
}


static const nmt_limits mg_limits = {.max_src_len = 9, .max_tgt_len = 7, .max_batch = 3, .max_beam = 2};

/* Sentences of lengths 4, 1 and 8 (+ EOS): phrase counts differ per
 * sentence, the shortest is padded by 7 positions. */
#define NSENT 3
static const int32_t src0[] = {5, 9, 11, 4}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4};
static const int32_t tgt0[] = {4, 6, 8}, tgt1[] = {9, 9, 10, 11, 3}, tgt2[] = {13};
static const int32_t *const srcs[NSENT] = {src0, src1, src2};
static const uint32_t src_lens[NSENT] = {4, 1, 8};
static const int32_t *const tgts[NSENT] = {tgt0, tgt1, tgt2};
static const uint32_t tgt_lens[NSENT] = {3, 5, 1};

static double ref_logprob(const nmt_file *f, uint32_t i) {
    return ref_model_score(f, srcs[i], src_lens[i], tgts[i], tgt_lens[i]);
}

/* Phrase heads of several granularities in one or both layers: the
 * session's scores equal the reference's, and the phrase path changes
 * them (the Transformer on the same weights scores differently). */
static void test_score_equals_reference(void **state) {
    env *e = *state;
    static const char *const configs[][4] = {
        {"1", "word word ngram:2 ngram:3", "none", "max"},
        {"1 2", "ngram:2 ngram:2 word ngram:4", "none", "max"},
        {"2", "ngram:3 ngram:3 ngram:3 ngram:3", "none", "max"},
        {"1", "word word ngram:2 ngram:3", "lstm", "max"},
        {"1 2", "ngram:2 ngram:2 word ngram:4", "lstm", "max"},
        {"1", "word word ngram:2 ngram:3", "onlstm", "max"},
        {"2", "ngram:3 ngram:3 ngram:3 ngram:3", "onlstm", "max"},
        {"1", "word word ngram:2 ngram:3", "none", "san"},
        {"1 2", "ngram:2 ngram:2 word ngram:4", "onlstm", "san"},
        {"1", "word word ngram:2 ngram:3", "none", "lstm"},
        {"1 2", "ngram:3 ngram:3 word ngram:4", "lstm", "lstm"},
    };
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    for (size_t k = 0; k < NMT_ARRAY_LEN(configs); k++) {
        nmt_tf_cfg c;
        const int rec = !strcmp(configs[k][2], "lstm")     ? NMT_MG_REC_LSTM
                        : !strcmp(configs[k][2], "onlstm") ? NMT_MG_REC_ONLSTM
                                                           : NMT_MG_REC_NONE;
        assert_int_equal(mg_cfg(&c, configs[k][0], configs[k][1], rec), NMT_OK);
        if (rec == NMT_MG_REC_ONLSTM) c.mg_chunk = k == 5 ? 4 : 2; /* d 32: 16 and 8 master units */
        c.mg_compose = !strcmp(configs[k][3], "san")    ? NMT_MG_COM_SAN
                       : !strcmp(configs[k][3], "lstm") ? NMT_MG_COM_LSTM
                                                        : NMT_MG_COM_MAX;
        assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
        size_t size;
        void *img = family_image(&nmt_family_mgsa, &c, 40 + k, &size);
        test_model m;
        test_model_open(e->dev, img, size, &mg_limits, &m);
        nmt_model_info info;
        nmt_session_model_info(m.s, &info);
        assert_string_equal(info.arch, "mgsa");
        char want_cfg[400];
        snprintf(want_cfg, sizeof want_cfg, "mg_layers %s; mg_heads %s; mg_compose %s; mg_interact %s",
                 configs[k][0], configs[k][1], configs[k][3], configs[k][2]);
        if (rec == NMT_MG_REC_ONLSTM)
            snprintf(want_cfg + strlen(want_cfg), sizeof want_cfg - strlen(want_cfg), "; mg_chunk %u", c.mg_chunk);
        assert_string_equal(info.family_config, want_cfg);
        float lp[NSENT], lp_tf[NSENT];
        nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp));
        for (uint32_t i = 0; i < NSENT; i++) {
            const double want = ref_logprob(&m.file, i);
            if (fabs(lp[i] - want) > 1e-3 * fmax(1.0, fabs(want)))
                fail_msg("%s / %s / %s / %s, sentence %u: %.6f, reference %.6f", configs[k][0], configs[k][1],
                         configs[k][3], configs[k][2], i, lp[i], want);
        }
        test_model_close(&m);
        /* the same weights read as a Transformer */
        nmt_tf_cfg t;
        base_cfg(&t);
        img = family_image(&nmt_family_transformer, &t, 40 + k, &size);
        test_model_open(e->dev, img, size, &mg_limits, &m);
        nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp_tf));
        int differ = 0;
        for (uint32_t i = 0; i < NSENT; i++) differ |= fabsf(lp[i] - lp_tf[i]) > 1e-4f;
        assert_true(differ);
        test_model_close(&m);
    }
}

/* Every head a word head: the Transformer on the same weights, bit for bit
 * (scores and greedy translations). */
static void test_all_word_equals_transformer(void **state) {
    env *e = *state;
    nmt_tf_cfg c, t;
    assert_int_equal(mg_cfg(&c, "1 2", "word word word word", 0), NMT_OK);
    base_cfg(&t);
    size_t s1, s2;
    test_model m1, m2;
    void *i1 = family_image(&nmt_family_mgsa, &c, 7, &s1), *i2 = family_image(&nmt_family_transformer, &t, 7, &s2);
    test_model_open(e->dev, i1, s1, &mg_limits, &m1);
    test_model_open(e->dev, i2, s2, &mg_limits, &m2);
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    float a[NSENT], b[NSENT];
    nmt_test_assert_ok(e->dev, nmt_session_score(m1.s, &src, &tgt, a));
    nmt_test_assert_ok(e->dev, nmt_session_score(m2.s, &src, &tgt, b));
    assert_memory_equal(a, b, sizeof a);
    test_model_close(&m1);
    test_model_close(&m2);
}

/* Teacher-forced and incremental decoding give the same logits (the
 * decoder is the Transformer's; the encoder output is shared). */
static void test_incremental_equals_forced(void **state) {
    env *e = *state;
    nmt_tf_cfg c;
    assert_int_equal(mg_cfg(&c, "1", "word ngram:2 ngram:2 ngram:3", NMT_MG_REC_LSTM), NMT_OK);
    size_t size;
    test_model m;
    void *img = family_image(&nmt_family_mgsa, &c, 9, &size);
    test_model_open(e->dev, img, size, &mg_limits, &m);
    nmt_batch src = {srcs, src_lens, NSENT};
    /* greedy and beam 2 (the KV-cache reorder too) */
    check_incremental_equals_forced(e->dev, m.s, &src, 2, 1, 6, "mgsa");
    test_model_close(&m);
}

/* img (of configuration cfg) with every 2-D tensor stored int8 (per-row scales: q8 != 0) or as
 * the same int8 values dequantized to fp32 (q8 == 0), so both models hold
 * exactly the same weights. */

/* int8 weights (the phrase groups take row slices of the fused q|k|v
 * weight with their scales; the LSTM interaction's products read int8
 * W_ih / W_hh) score as the same weights in fp32. */
static void test_int8_equals_dequantized(void **state) {
    env *e = *state;
    for (int rec = NMT_MG_REC_NONE; rec <= NMT_MG_REC_ONLSTM; rec++) {
        nmt_tf_cfg c;
        assert_int_equal(mg_cfg(&c, "1 2", "ngram:2 word ngram:3 ngram:3", rec), NMT_OK);
        /* the composition's weights int8 too */
        c.mg_compose = rec == NMT_MG_REC_LSTM ? NMT_MG_COM_SAN : rec == NMT_MG_REC_ONLSTM ? NMT_MG_COM_LSTM : 0;
        size_t size, s8, s32;
        void *img = family_image(&nmt_family_mgsa, &c, 21, &size);
        void *i8 = requantize(&nmt_family_mgsa, &c, img, size, 1, &s8), *i32 = requantize(&nmt_family_mgsa, &c, img, size, 0, &s32);
        free(img);
        test_model m8, m32;
        setenv("NMT_EDGE_NO_I8DOT", "1", 1); /* the int8 weights' kernel (int8 x int8: kernels_i8dot_test) */
        test_model_open(e->dev, i8, s8, &mg_limits, &m8);
        unsetenv("NMT_EDGE_NO_I8DOT");
        test_model_open(e->dev, i32, s32, &mg_limits, &m32);
        nmt_model_info info;
        nmt_session_model_info(m8.s, &info);
        assert_string_equal(info.dtype, "int8");
        nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
        float a[NSENT], b[NSENT];
        nmt_test_assert_ok(e->dev, nmt_session_score(m8.s, &src, &tgt, a));
        nmt_test_assert_ok(e->dev, nmt_session_score(m32.s, &src, &tgt, b));
        for (uint32_t i = 0; i < NSENT; i++) assert_float_equal(a[i], b[i], 1e-4 * fmax(1.0, fabs(b[i])));
        test_model_close(&m8);
        test_model_close(&m32);
    }
}

/* Bad MG-SA configurations: NMT_ERR_MODEL_ARCH from the shared parser,
 * whether written by hand or read from a file. */
static void test_bad_configs(void **state) {
    (void)state;
    static const char *const bad[][2] = {
        {"1", "word word ngram:2"},              /* 3 partitions for 4 heads */
        {"1", "word word ngram:2 ngram:3 word"}, /* 5 */
        {"1", "word word ngram:1 ngram:3"},      /* n < 2: that is a word head */
        {"1", "word word ngram:65 ngram:3"},     /* n > 64 */
        {"1", "word word phrase ngram:3"},
        {"1", "word word ngram: ngram:3"},
        {"0", "word word ngram:2 ngram:3"},      /* layers are 1-based */
        {"3", "word word ngram:2 ngram:3"},      /* 2 encoder layers */
        {"x", "word word ngram:2 ngram:3"},
    };
    for (size_t k = 0; k < NMT_ARRAY_LEN(bad); k++) {
        nmt_tf_cfg c;
        if (mg_cfg(&c, bad[k][0], bad[k][1], 0) != NMT_ERR_MODEL_ARCH)
            fail_msg("layers '%s' heads '%s' accepted", bad[k][0], bad[k][1]);
    }
    /* phrase heads with HySAN branches are not defined */
    nmt_tf_cfg c;
    base_cfg(&c);
    snprintf(c.enc_br_text, sizeof c.enc_br_text, "global fw");
    snprintf(c.mg_layers_text, sizeof c.mg_layers_text, "1");
    snprintf(c.mg_heads_text, sizeof c.mg_heads_text, "word word ngram:2 ngram:3");
    assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_ERR_MODEL_ARCH);
    /* from a file: the loader rejects what the writer was given */
    assert_int_equal(mg_cfg(&c, "1", "word word ngram:2 ngram:3", 0), NMT_OK);
    snprintf(c.mg_heads_text, sizeof c.mg_heads_text, "word ngram:2");
    size_t size;
    void *img = family_image(&nmt_family_mgsa, &c, 3, &size);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_ERR_MODEL_ARCH);
    free(img);
    /* an LSTM interaction without its tensors (hyper-parameters of lstm,
     * tensors of none): the tensor is named as missing */
    nmt_tf_cfg none;
    assert_int_equal(mg_cfg(&none, "1", "word word ngram:2 ngram:3", NMT_MG_REC_NONE), NMT_OK);
    assert_int_equal(mg_cfg(&c, "1", "word word ngram:2 ngram:3", NMT_MG_REC_LSTM), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_mgsa, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_mgsa, &none, 3, 1.0f), NMT_OK);
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    nmtw_destroy(w);
    nmt_session_params p = {.model_data = img, .model_size = size,
                            .limits = {.max_src_len = 9, .max_tgt_len = 7, .max_batch = 1, .max_beam = 1}};
    size_t bytes;
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_ERR_MODEL_MISSING_TENSOR);
    char why[256] = "";
    assert_int_equal(nmt_model_explain(img, size, why, sizeof why), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_non_null(strstr(why, "enc.0.self_attn.phrase_lstm.ih.weight"));
    free(img);
    /* an ON-LSTM chunk that does not divide d_model, named */
    assert_int_equal(mg_cfg(&c, "1", "word word ngram:2 ngram:3", NMT_MG_REC_ONLSTM), NMT_OK);
    c.mg_chunk = 3;
    char why2[256] = "";
    assert_int_equal(nmt_tf_finish(&c, ~0ull, why2, sizeof why2), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why2, "mg_chunk 3 must divide d_model 32 (mg_interact onlstm)");
    /* syntax heads: max-pooling only; a fallback below 2 is a word head */
    assert_int_equal(mg_cfg(&c, "1", "syntax word word syntax", 0), NMT_OK);
    c.mg_compose = NMT_MG_COM_SAN;
    assert_int_equal(nmt_tf_finish(&c, ~0ull, why2, sizeof why2), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why2, "mg_compose san works on n-gram heads only (mg_heads 'syntax word word syntax': "
                              "syntax heads take max)");
    c.mg_compose = NMT_MG_COM_LSTM;
    assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_ERR_MODEL_ARCH);
    assert_int_equal(mg_cfg(&c, "1", "syntax word word syntax", 0), NMT_OK);
    assert_int_equal(c.mg_n_groups, 3);
    /* canonical spellings are written back */
    assert_int_equal(mg_cfg(&c, " 2,1 ", "word,ngram:2  ngram:2 word", 0), NMT_OK);
    assert_string_equal(c.mg_layers_text, "1 2");
    assert_string_equal(c.mg_heads_text, "word ngram:2 ngram:2 word");
    assert_int_equal(c.mg_n_groups, 3);
    assert_int_equal(c.mg_mask, 3);
}

/* ---- issue 55 item 10: a family's own lists present but empty ------------- */

/* A valid random model of `arch` with string metadata `key` set to `value`:
 * nmt_model_explain's status and reason. */
static nmt_status explain_with(const char *arch, const char *key, const char *value, char *why, size_t cap) {
    char w_why[600] = "";
    nmt_random_model m;
    assert_int_equal(nmt_random_model_init(&m, arch, w_why, sizeof w_why), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    if (nmt_random_model_build(&m, w, w_why, sizeof w_why) != NMT_OK) fail_msg("%s: %s", arch, w_why);
    assert_int_equal(nmtw_set_str(w, key, value), NMT_OK);
    void *img = NULL;
    size_t size = 0;
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    nmtw_destroy(w);
    nmt_status s = nmt_model_explain(img, size, why, cap);
    free(img);
    return s;
}

static void test_empty_lists(void **state) {
    (void)state;
    char why[NMT_MODEL_WHY_BYTES], want[NMT_MODEL_WHY_BYTES];
    /* the class: every text hyper-parameter of every family, present and empty */
    unsigned n_text = 0;
    for (uint32_t i = 0; nmt_family_at(i) != NULL; i++) {
        const nmt_family *fam = nmt_family_at(i);
        for (uint32_t k = 0; k < fam->n_hparams; k++) {
            const nmt_hparam *hp = &fam->hparams[k];
            if (hp->type != NMT_HP_TEXT) continue;
            n_text++;
            snprintf(want, sizeof want, "unsupported hyper-parameter: %s = '', expected a non-empty string of at "
                     "most %zu bytes", hp->key, hp->text_cap - 1);
            if (explain_with(fam->arch, hp->key, "", why, sizeof why) != NMT_ERR_MODEL_ARCH || strcmp(why, want))
                fail_msg("arch %s, %s = '': \"%s\"", fam->arch, hp->key, why);
            /* blanks only: refused too (by the family's parser) */
            if (explain_with(fam->arch, hp->key, "  ", why, sizeof why) != NMT_ERR_MODEL_ARCH)
                fail_msg("arch %s, %s = '  ' accepted", fam->arch, hp->key);
            char quoted[128];
            snprintf(quoted, sizeof quoted, "%s '  '", hp->key);
            if (strstr(why, quoted) == NULL) fail_msg("arch %s, %s = '  ': \"%s\"", fam->arch, hp->key, why);
        }
    }
    assert_true(n_text >= 2 + 2 + 2 + 3); /* branches of transformer; + mg lists; + phrase lists */
    /* a few in full */
    assert_int_equal(explain_with("mgsa", "mg_layers", "", why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "unsupported hyper-parameter: mg_layers = '', expected a non-empty string of at most "
                             "159 bytes");
    assert_int_equal(explain_with("phrase", "ph_enc", "", why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "unsupported hyper-parameter: ph_enc = '', expected a non-empty string of at most "
                             "31 bytes");
    assert_int_equal(explain_with("mgsa", "mg_layers", " ", why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "unsupported hyper-parameters of arch 'mgsa': mg_layers ' ', mg_heads 'word word ngram:2 "
                             "ngram:3': expected encoder layers in [1, 2] and one of word | ngram:N (N 2-64) | syntax "
                             "for each of the 4 heads, and a global-only encoder (enc_branches 'global')");
    /* the lists as written load */
    assert_int_equal(explain_with("mgsa", "mg_layers", "1 2", why, sizeof why), NMT_OK);
    assert_int_equal(explain_with("phrase", "ph_dec", "none", why, sizeof why), NMT_OK);
}

/* Scores of a batch on m with these spans (NULL: none). */
static void score_with(env *e, test_model *m, const nmt_batch *src, const nmt_batch *tgt, const nmt_span *const *sp,
                       const uint32_t *nsp, float *lp) {
    nmt_test_assert_ok(e->dev, nmt_session_set_spans(m->s, sp, nsp, src->n));
    nmt_test_assert_ok(e->dev, nmt_session_score(m->s, src, tgt, lp));
}

/* Syntax heads take the caller's phrase spans (nmt_session_set_spans):
 * spans that form an n-gram partition give exactly the ngram:n model on
 * the same weights (the catalogues are the same), a sentence without
 * spans gets mg_syntax_fallback n-grams, other spans change the scores
 * and decode consistently; bad spans are NMT_ERR_INVALID_SPANS for any
 * model and are consumed. */
static void test_syntax_spans(void **state) {
    env *e = *state;
    nmt_tf_cfg cs, c2, c3;
    assert_int_equal(mg_cfg(&cs, "1 2", "word word syntax syntax", 0), NMT_OK);
    assert_string_equal(cs.mg_heads_text, "word word syntax syntax");
    assert_int_equal(cs.mg_n_groups, 2);
    assert_int_equal(mg_cfg(&c2, "1 2", "word word ngram:2 ngram:2", 0), NMT_OK);
    assert_int_equal(mg_cfg(&c3, "1 2", "word word ngram:3 ngram:3", 0), NMT_OK);
    size_t size;
    test_model ms, m2, m3;
    void *img = family_image(&nmt_family_mgsa, &cs, 77, &size);
    test_model_open(e->dev, img, size, &mg_limits, &ms);
    nmt_model_info info;
    nmt_session_model_info(ms.s, &info);
    assert_non_null(strstr(info.family_config, "mg_heads word word syntax syntax;"));
    assert_non_null(strstr(info.family_config, "; mg_syntax_fallback 2"));
    img = family_image(&nmt_family_mgsa, &c2, 77, &size);
    test_model_open(e->dev, img, size, &mg_limits, &m2);
    img = family_image(&nmt_family_mgsa, &c3, 77, &size);
    test_model_open(e->dev, img, size, &mg_limits, &m3);

    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    float a[NSENT], b[NSENT], c[NSENT];
    /* no spans: the fallback 2-grams */
    score_with(e, &ms, &src, &tgt, NULL, NULL, a);
    score_with(e, &m2, &src, &tgt, NULL, NULL, b);
    assert_memory_equal(a, b, sizeof a);
    /* the 2-gram partition given as spans (lengths 4 and 8: the EOS alone;
     * sentence 1 without spans) */
    static const nmt_span s0[] = {{0, 2}, {2, 2}}, s2[] = {{0, 2}, {2, 2}, {4, 2}, {6, 2}};
    const nmt_span *const sp2[NSENT] = {s0, NULL, s2};
    const uint32_t n2[NSENT] = {2, 0, 4};
    score_with(e, &ms, &src, &tgt, sp2, n2, a);
    assert_memory_equal(a, b, sizeof a);
    /* 3-gram spans over sentences of 6 and 3 tokens = the ngram:3 test_model */
    static const int32_t t6[] = {5, 9, 11, 4, 7, 12}, t3[] = {8, 6, 13};
    const int32_t *const src3[2] = {t6, t3};
    const uint32_t len3[2] = {6, 3};
    const int32_t *const tg3[2] = {tgt0, tgt1};
    const uint32_t tl3[2] = {3, 5};
    nmt_batch sb3 = {src3, len3, 2}, tb3 = {tg3, tl3, 2};
    static const nmt_span q6[] = {{0, 3}, {3, 3}}, q3[] = {{0, 3}};
    const nmt_span *const sp3[2] = {q6, q3};
    const uint32_t n3[2] = {2, 1};
    score_with(e, &ms, &sb3, &tb3, sp3, n3, a);
    score_with(e, &m3, &sb3, &tb3, NULL, NULL, c);
    assert_memory_equal(a, c, sizeof(float) * 2);
    /* other spans (tokens 0 and 3+ of sentence 0 and 0, 5-7 of sentence 2
     * in no span: phrases of their own) change the scores, and a greedy
     * translation with them scores the same teacher-forced with them */
    static const nmt_span o0[] = {{1, 2}}, o2[] = {{1, 4}};
    const nmt_span *const spo[NSENT] = {o0, NULL, o2};
    const uint32_t no[NSENT] = {1, 0, 1};
    score_with(e, &ms, &src, &tgt, spo, no, a);
    assert_true(a[0] != b[0] && a[2] != b[2]);
    assert_memory_equal(&a[1], &b[1], sizeof(float)); /* no spans: unchanged */
    const nmt_decode_opts opts = {.beam = 1, .max_len = 6};
    nmt_test_assert_ok(e->dev, nmt_session_set_spans(ms.s, spo, no, NSENT));
    nmt_test_assert_ok(e->dev, nmt_session_translate(ms.s, &src, &opts));
    int32_t toks[NSENT][8];
    uint32_t lens[NSENT];
    float incr[NSENT], forced[NSENT];
    for (uint32_t i = 0; i < NSENT; i++) {
        const int32_t *t;
        float score;
        nmt_test_assert_ok(e->dev, nmt_session_result(ms.s, i, 0, &t, &lens[i], &score, &incr[i]));
        memcpy(toks[i], t, sizeof(int32_t) * lens[i]);
    }
    const int32_t *tp[NSENT] = {toks[0], toks[1], toks[2]};
    nmt_batch hyp = {tp, lens, NSENT};
    score_with(e, &ms, &src, &hyp, spo, no, forced);
    for (uint32_t i = 0; i < NSENT; i++) assert_float_equal(incr[i], forced[i], 1e-4 * fmax(1.0, fabs(forced[i])));

    /* bad spans: empty, past the sentence, overlapping, descending, a
     * batch of another size; the call fails and the spans are consumed */
    static const nmt_span empty[] = {{1, 0}}, past[] = {{3, 2}}, overlap[] = {{0, 2}, {1, 2}},
                          desc[] = {{2, 1}, {0, 1}};
    const nmt_span *const bad[4] = {empty, past, overlap, desc};
    const uint32_t nbad[4] = {1, 1, 2, 2};
    test_model *both[2] = {&ms, &m2}; /* checked whatever the test_model */
    for (int k = 0; k < 4; k++)
        for (int mi = 0; mi < 2; mi++) {
            const nmt_span *const sp[NSENT] = {bad[k], NULL, NULL};
            const uint32_t ns[NSENT] = {nbad[k], 0, 0};
            nmt_test_assert_ok(e->dev, nmt_session_set_spans(both[mi]->s, sp, ns, NSENT));
            assert_int_equal(nmt_session_score(both[mi]->s, &src, &tgt, c), NMT_ERR_INVALID_SPANS);
            nmt_test_assert_ok(e->dev, nmt_session_score(both[mi]->s, &src, &tgt, c)); /* consumed */
            assert_memory_equal(c, b, sizeof c);
        }
    nmt_test_assert_ok(e->dev, nmt_session_set_spans(ms.s, sp2, n2, 2)); /* 2 != 3 sentences */
    assert_int_equal(nmt_session_translate(ms.s, &src, &opts), NMT_ERR_INVALID_SPANS);
    assert_int_equal(nmt_session_set_spans(ms.s, sp2, NULL, NSENT), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_set_spans(NULL, NULL, NULL, 0), NMT_ERR_INVALID_ARGUMENT);
    /* a model without syntax heads ignores valid spans */
    score_with(e, &m2, &src, &tgt, spo, no, c);
    assert_memory_equal(c, b, sizeof c);
    test_model_close(&ms);
    test_model_close(&m2);
    test_model_close(&m3);
}

int main(void) {
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_empty_lists),
    };
    const struct CMUnitTest dev[] = {
        cmocka_unit_test(test_score_equals_reference),
        cmocka_unit_test(test_syntax_spans),
        cmocka_unit_test(test_all_word_equals_transformer),
        cmocka_unit_test(test_incremental_equals_forced),
        cmocka_unit_test(test_int8_equals_dequantized),
    };
    int fails = cmocka_run_group_tests(plain, NULL, NULL);
    return fails + cmocka_run_group_tests(dev, nmt_test_dev_setup, nmt_test_dev_teardown);
}
