/* SPDX-License-Identifier: MIT */
/* banmt_test.c — the BA-NMT family (arch "banmt", issue 17) in the
 * session: forced scores of random models against the double-precision
 * reference (tests/ref_banmt.c) for every history (none / sa / ta / ba,
 * maxout, non-default widths) over a padded batch; incremental (greedy,
 * beam) and teacher-forced decoding agree in fp32 and int8; the histories
 * with their contributions zeroed equal RNNsearch; causality; n-best
 * scores; alignments, of translations and of scored pairs; bad
 * configurations and missing tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "banmt_cfg.h"
#include "family_common.h"
#include "family_writer.h"
#include "format_common.h"
#include "ref_banmt.h"
#include "session_internal.h"
#include "test_util.h"

typedef nmt_test_dev_env env;

#define VOCAB 23
/* U(-0.8, 0.8) weights: peaked enough that a wrong wire shows */
#define SCALE 8.0f

static nmt_status ba_cfg(nmt_ba_cfg *c, int history) {
    memset(c, 0, sizeof *c);
    c->src_vocab = c->tgt_vocab = VOCAB;
    c->emb = 8;
    c->hidden = 12;
    c->history = history;
    c->bos = 1;
    c->eos = 2;
    c->unk = 3;
    return nmt_ba_finish(c, (1ull << 9) | (1ull << 10), NULL, 0); /* computed widths; ids as set */
}

static void *image(const nmt_ba_cfg *c, uint64_t seed, size_t *size) {
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_banmt, c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_banmt, c, seed, SCALE), NMT_OK);
    void *img;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    nmtw_destroy(w);
    return img;
}

static const nmt_limits lim = {.max_src_len = 9, .max_tgt_len = 7, .max_batch = 3, .max_beam = 3};

/* Sentences of lengths 4, 1 and 8 (+ EOS): the shortest is padded by 7. */
#define NSENT 3
static const int32_t src0[] = {5, 9, 11, 4}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4};
static const int32_t tgt0[] = {4, 6, 8}, tgt1[] = {9, 9, 10, 11, 3}, tgt2[] = {13};
static const int32_t *const srcs[NSENT] = {src0, src1, src2};
static const uint32_t src_lens[NSENT] = {4, 1, 8};
static const int32_t *const tgts[NSENT] = {tgt0, tgt1, tgt2};
static const uint32_t tgt_lens[NSENT] = {3, 5, 1};

static const char *const hist_names[] = {"none", "sa", "ta", "ba"};

/* Sum of the label log-probabilities per sentence (nmt_session_forced). */
typedef struct sums {
    double lp[NSENT];
    float rows[NSENT][8][VOCAB]; /* log-probabilities per position */
} sums;
static void add_lp(void *user, uint32_t i, uint32_t p, int32_t label, const float *row) {
    sums *s = user;
    s->lp[i] += row[label];
    memcpy(s->rows[i][p], row, sizeof(float) * VOCAB);
}

static double worst_ref_err;

/* Every history, maxout, other widths: forced scores (teacher-forced and
 * step by step) equal the reference's. */
static void test_score_equals_reference(void **state) {
    env *e = *state;
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    for (int k = 0; k < 7; k++) {
        nmt_ba_cfg c;
        assert_int_equal(ba_cfg(&c, k < 4 ? k : NMT_BA_BA), NMT_OK);
        if (k == 4) c.maxout = 1;
        if (k == 5) c.history = NMT_BA_SA, c.att = 10, c.readout = 6, c.hist = 7;
        if (k == 6) c.history = NMT_BA_TA, c.att = 5, c.readout = 9, c.hist = 14, c.maxout = 1;
        assert_int_equal(nmt_ba_finish(&c, ~0ull, NULL, 0), NMT_OK);
        size_t size;
        void *img = image(&c, 100 + k, &size);
        test_model m;
        test_model_open(e->dev, img, size, &lim, &m);
        nmt_model_info info;
        nmt_session_model_info(m.s, &info);
        assert_string_equal(info.arch, "banmt");
        assert_non_null(strstr(info.family_config, hist_names[c.history]));
        float lp[NSENT];
        nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp));
        sums inc;
        memset(&inc, 0, sizeof inc);
        nmt_test_assert_ok(e->dev, nmt_session_forced(m.s, &src, &tgt, 1, 1, add_lp, &inc));
        for (uint32_t i = 0; i < NSENT; i++) {
            const double want = ref_banmt_score(&m.file, srcs[i], src_lens[i], tgts[i], tgt_lens[i]);
            const double err = fabs(lp[i] - want) / fmax(1.0, fabs(want));
            worst_ref_err = fmax(worst_ref_err, err);
            if (err > 1e-4)
                fail_msg("config %d (%s), sentence %u: %.6f, reference %.6f", k, hist_names[c.history], i, lp[i],
                         want);
            if (fabs(inc.lp[i] - lp[i]) > 1e-4 * fmax(1.0, fabs(want)))
                fail_msg("config %d, sentence %u: step by step %.6f, teacher-forced %.6f", k, i, inc.lp[i], lp[i]);
        }
        test_model_close(&m);
    }
    print_message("banmt: worst relative error against the reference %.3g\n", worst_ref_err);
}

/* Greedy and beams 2 and 3 score their results as teacher-forced scoring
 * does, fp32 and int8 (the beam reorders s, h~ and s~). */
static void test_incremental_equals_forced(void **state) {
    env *e = *state;
    nmt_batch src = {srcs, src_lens, NSENT};
    for (int h = NMT_BA_NONE; h <= NMT_BA_BA; h++)
        for (int q8 = 0; q8 <= 1; q8++) {
            nmt_ba_cfg c;
            assert_int_equal(ba_cfg(&c, h), NMT_OK);
            size_t size, s2;
            void *img = image(&c, 7 + h, &size);
            if (q8) {
                void *i8 = requantize(&nmt_family_banmt, &c, img, size, 1, &s2);
                free(img);
                img = i8;
                size = s2;
            }
            test_model m;
            test_model_open(e->dev, img, size, &lim, &m);
            if (q8) {
                nmt_model_info info;
                nmt_session_model_info(m.s, &info);
                assert_string_equal(info.dtype, "int8");
            }
            char what[32];
            snprintf(what, sizeof what, "%s %s", hist_names[h], q8 ? "int8" : "fp32");
            check_incremental_equals_forced(e->dev, m.s, &src, 3, 1, 6, what);
            test_model_close(&m);
        }
}

/* int8 weights score as the same weights dequantized to fp32. */
static void test_int8_equals_dequantized(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    size_t size, s8, s32;
    void *img = image(&c, 21, &size);
    void *i8 = requantize(&nmt_family_banmt, &c, img, size, 1, &s8);
    void *i32 = requantize(&nmt_family_banmt, &c, img, size, 0, &s32);
    free(img);
    test_model m8, m32;
    test_model_open(e->dev, i8, s8, &lim, &m8);
    test_model_open(e->dev, i32, s32, &lim, &m32);
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    float a[NSENT], b[NSENT];
    nmt_test_assert_ok(e->dev, nmt_session_score(m8.s, &src, &tgt, a));
    nmt_test_assert_ok(e->dev, nmt_session_score(m32.s, &src, &tgt, b));
    for (uint32_t i = 0; i < NSENT; i++) {
        assert_float_equal(a[i], b[i], 1e-4 * fmax(1.0, fabs(b[i])));
        assert_float_equal(b[i], ref_banmt_score(&m32.file, srcs[i], src_lens[i], tgts[i], tgt_lens[i]),
                           1e-4 * fmax(1.0, fabs(b[i])));
    }
    test_model_close(&m8);
    test_model_close(&m32);
}

/* A model of configuration `to` from the tensors of `from` (a history
 * model): tensors of one name copied, the readout's first columns only
 * (RNNsearch's input [y; c; s_i] is a prefix of every history's); with
 * `zero`, the attention's history weights and the readout's history
 * columns are zeros. */
typedef struct derive {
    const nmt_file *from;
    nmtw_writer *w;
    int zero;
    uint32_t from_cat;
} derive;
static nmt_status derive_one(void *ctx, const nmt_tensor_decl *t) {
    derive *d = ctx;
    nmt_tensor_view v;
    assert_int_equal(nmt_file_find(d->from, t->name, &v), NMT_OK);
    const size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    float *buf = malloc(sizeof(float) * n);
    const float *src = v.data;
    if (!strcmp(t->name, "dec.readout.weight")) {
        const uint32_t cols = t->shape[1], keep = d->zero ? 12 * 3 + 8 : cols; /* E + 3H */
        for (uint32_t r = 0; r < t->shape[0]; r++)
            for (uint32_t k = 0; k < cols; k++)
                buf[(size_t)r * cols + k] = k < keep ? src[(size_t)r * d->from_cat + k] : 0.0f;
    } else if (d->zero && !strncmp(t->name, "att.hist_", 9)) {
        memset(buf, 0, sizeof(float) * n);
    } else {
        assert_int_equal(v.n_elements, n);
        memcpy(buf, src, sizeof(float) * n);
    }
    nmt_status s = nmtw_add_f32(d->w, t->name, t->ndim, t->shape, buf);
    free(buf);
    return s;
}
static void *derived(const nmt_ba_cfg *to, const nmt_file *from, uint32_t from_cat, int zero, size_t *size) {
    derive d = {from, nmtw_create(), zero, from_cat};
    assert_int_equal(nmtw_add_hparams(d.w, &nmt_family_banmt, to), NMT_OK);
    assert_int_equal(nmt_ba_catalogue(to, NULL, derive_one, &d), NMT_OK);
    void *img;
    assert_int_equal(nmtw_write_memory(d.w, &img, size), NMT_OK);
    nmtw_destroy(d.w);
    return img;
}

/* SA / TA / BA with V_h, V_s and the readout's history columns zero score
 * and translate as RNNsearch on the other weights; with them the scores
 * differ. */
static void test_zeroed_history_equals_rnnsearch(void **state) {
    env *e = *state;
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    for (int h = NMT_BA_SA; h <= NMT_BA_BA; h++) {
        nmt_ba_cfg c, none;
        assert_int_equal(ba_cfg(&c, h), NMT_OK);
        assert_int_equal(ba_cfg(&none, NMT_BA_NONE), NMT_OK);
        size_t size, sz, sn;
        void *img = image(&c, 50 + h, &size);
        nmt_file f;
        assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
        void *iz = derived(&c, &f, c.cat, 1, &sz), *in = derived(&none, &f, c.cat, 0, &sn);
        test_model mh, mz, mn;
        test_model_open(e->dev, img, size, &lim, &mh);
        test_model_open(e->dev, iz, sz, &lim, &mz);
        test_model_open(e->dev, in, sn, &lim, &mn);
        float a[NSENT], b[NSENT], full[NSENT];
        nmt_test_assert_ok(e->dev, nmt_session_score(mz.s, &src, &tgt, a));
        nmt_test_assert_ok(e->dev, nmt_session_score(mn.s, &src, &tgt, b));
        nmt_test_assert_ok(e->dev, nmt_session_score(mh.s, &src, &tgt, full));
        int differ = 0;
        for (uint32_t i = 0; i < NSENT; i++) {
            assert_float_equal(a[i], b[i], 1e-5 * fmax(1.0, fabs(b[i])));
            differ |= fabsf(full[i] - b[i]) > 1e-3f;
        }
        assert_true(differ);
        const nmt_decode_opts opts = {.beam = 3, .max_len = 6};
        nmt_test_assert_ok(e->dev, nmt_session_translate(mz.s, &src, &opts));
        nmt_test_assert_ok(e->dev, nmt_session_translate(mn.s, &src, &opts));
        for (uint32_t i = 0; i < NSENT; i++) {
            const int32_t *ta, *tb;
            uint32_t la, lb;
            float sa, sb;
            nmt_test_assert_ok(e->dev, nmt_session_result(mz.s, i, 0, &ta, &la, &sa, NULL));
            nmt_test_assert_ok(e->dev, nmt_session_result(mn.s, i, 0, &tb, &lb, &sb, NULL));
            assert_int_equal(la, lb);
            assert_memory_equal(ta, tb, sizeof(int32_t) * la);
            assert_float_equal(sa, sb, 1e-4 * fmax(1.0, fabs(sb)));
        }
        test_model_close(&mh);
        test_model_close(&mz);
        test_model_close(&mn);
    }
}

/* Changing target token k changes no log-probability of positions <= k
 * (teacher-forced and step by step), and changes a later one. */
static void test_causality(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    size_t size;
    test_model m;
    void *img = image(&c, 31, &size);
    test_model_open(e->dev, img, size, &lim, &m);
    static const int32_t a1[] = {9, 9, 10, 11, 3}, b1[] = {9, 9, 17, 11, 3};
    const int32_t *ta[NSENT] = {tgt0, a1, tgt2}, *tb[NSENT] = {tgt0, b1, tgt2};
    nmt_batch src = {srcs, src_lens, NSENT}, A = {ta, tgt_lens, NSENT}, Bb = {tb, tgt_lens, NSENT};
    for (int incr = 0; incr <= 1; incr++) {
        static sums x, y;
        memset(&x, 0, sizeof x);
        memset(&y, 0, sizeof y);
        nmt_test_assert_ok(e->dev, nmt_session_forced(m.s, &src, &A, incr, 1, add_lp, &x));
        nmt_test_assert_ok(e->dev, nmt_session_forced(m.s, &src, &Bb, incr, 1, add_lp, &y));
        for (uint32_t p = 0; p <= 2; p++) assert_memory_equal(x.rows[1][p], y.rows[1][p], sizeof x.rows[1][p]);
        assert_memory_not_equal(x.rows[1][3], y.rows[1][3], sizeof x.rows[1][3]);
        for (uint32_t p = 0; p <= 3; p++) assert_memory_equal(x.rows[0][p], y.rows[0][p], sizeof x.rows[0][p]);
    }
    test_model_close(&m);
}

/* Beam 1 is greedy (each token the argmax of its teacher-forced
 * distribution); every n-best result's log-probability is its forced
 * score. */
static void test_beam_consistent(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    size_t size;
    test_model m;
    void *img = image(&c, 41, &size);
    test_model_open(e->dev, img, size, &lim, &m);
    nmt_batch src = {srcs, src_lens, NSENT};
    nmt_decode_opts opts = {.beam = 1, .max_len = 6};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &opts));
    int32_t toks[NSENT][8];
    const int32_t *tp[NSENT];
    uint32_t lens[NSENT];
    for (uint32_t i = 0; i < NSENT; i++) {
        const int32_t *t;
        nmt_test_assert_ok(e->dev, nmt_session_result(m.s, i, 0, &t, &lens[i], NULL, NULL));
        memcpy(toks[i], t, sizeof(int32_t) * lens[i]);
        tp[i] = toks[i];
    }
    nmt_batch hyp = {tp, lens, NSENT};
    static sums x;
    memset(&x, 0, sizeof x);
    nmt_test_assert_ok(e->dev, nmt_session_forced(m.s, &src, &hyp, 0, 1, add_lp, &x));
    for (uint32_t i = 0; i < NSENT; i++)
        for (uint32_t p = 0; p <= lens[i] && p < 6; p++) {
            const int32_t want = p < lens[i] ? toks[i][p] : (int32_t)c.eos;
            uint32_t best = 0;
            for (uint32_t v = 1; v < VOCAB; v++)
                if (x.rows[i][p][v] > x.rows[i][p][best]) best = v;
            assert_int_equal(best, want);
        }
    opts = (nmt_decode_opts){.beam = 3, .n_best = 3, .max_len = 7, .min_len = 5};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &opts));
    for (uint32_t i = 0; i < NSENT; i++)
        for (uint32_t r = 0; r < nmt_session_n_results(m.s, i); r++) {
            const int32_t *t;
            uint32_t len;
            float lp, forced;
            nmt_test_assert_ok(e->dev, nmt_session_result(m.s, i, r, &t, &len, NULL, &lp));
            const nmt_batch s1 = {&srcs[i], &src_lens[i], 1}, t1 = {&t, &len, 1};
            nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &s1, &t1, &forced));
            /* tight: a history state left behind by a beam reorder moves the
             * scores by about 3e-5 */
            assert_float_equal(lp, forced, 2e-6 * fmax(1.0, fabs(forced)));
        }
    test_model_close(&m);
}

/* Alignments: each result's soft rows are the reference's attention of
 * its tokens. */
static void test_alignments(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    size_t size;
    void *img = image(&c, 61, &size);
    nmt_session_params p = {.model_data = img, .model_size = size, .limits = lim, .alignment = 1};
    size_t bytes;
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_OK);
    void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(bytes, NMT_ARENA_ALIGNMENT));
    nmt_session *s;
    nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &p, arena, bytes, &s));
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    nmt_batch src = {srcs, src_lens, NSENT};
    const nmt_decode_opts opts = {.beam = 3, .max_len = 6};
    nmt_test_assert_ok(e->dev, nmt_session_translate(s, &src, &opts));
    for (uint32_t i = 0; i < NSENT; i++) {
        const int32_t *t;
        uint32_t len, tl, sc;
        nmt_test_assert_ok(e->dev, nmt_session_result(s, i, 0, &t, &len, NULL, NULL));
        float soft[8 * 10];
        nmt_test_assert_ok(e->dev, nmt_session_result_alignment(s, i, 0, soft, 80, &tl, &sc));
        assert_int_equal(tl, len);
        assert_int_equal(sc, src_lens[i] + 1);
        double logits[8 * VOCAB], alpha[8 * 10];
        ref_banmt_logits(&f, srcs[i], src_lens[i], t, len, logits, alpha);
        for (uint32_t r = 0; r < tl * sc; r++) assert_float_equal(soft[r], alpha[r], 1e-4);
    }
    nmt_session_destroy(s);
    free(arena);
    free(img);
}

/* Score with alignments (nmt_session_score on an alignment session): each
 * pair's rows are the reference's attention over the given target under
 * teacher forcing, its links their argmax over the source tokens, and the
 * scores equal those of a session without alignments. */
static void test_score_alignments(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    size_t size;
    void *img = image(&c, 62, &size);
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    const nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    float lp[2][NSENT];
    for (int align = 0; align < 2; align++) {
        test_model m;
        nmt_session_params p = {.model_data = img, .model_size = size, .limits = lim, .alignment = align};
        size_t bytes;
        assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_OK);
        void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(bytes, NMT_ARENA_ALIGNMENT));
        nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &p, arena, bytes, &m.s));
        nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp[align]));
        for (uint32_t i = 0; i < NSENT && align; i++) {
            float soft[8 * 10];
            int32_t hard[8];
            uint32_t tl, sc, tl2;
            nmt_test_assert_ok(e->dev, nmt_session_result_alignment(m.s, i, 0, soft, 80, &tl, &sc));
            nmt_test_assert_ok(e->dev, nmt_session_result_links(m.s, i, 0, hard, 8, &tl2));
            assert_int_equal(tl, tgt_lens[i]);
            assert_int_equal(tl2, tgt_lens[i]);
            assert_int_equal(sc, src_lens[i] + 1);
            double logits[8 * VOCAB], alpha[8 * 10];
            ref_banmt_logits(&f, srcs[i], src_lens[i], tgts[i], tgt_lens[i], logits, alpha);
            for (uint32_t r = 0; r < tl * sc; r++) assert_float_equal(soft[r], alpha[r], 1e-4);
            for (uint32_t q = 0; q < tl; q++) {
                uint32_t best = 0;
                for (uint32_t j = 1; j + 1 < sc; j++)
                    if (soft[q * sc + j] > soft[q * sc + best]) best = j;
                assert_int_equal(hard[q], (int32_t)best);
            }
        }
        nmt_session_destroy(m.s);
        free(arena);
    }
    for (uint32_t i = 0; i < NSENT; i++) assert_float_equal(lp[1][i], lp[0][i], 1e-4);
    free(img);
}

/* Bad hyper-parameters: NMT_ERR_MODEL_ARCH (by hand and from a file); a
 * history's tensor left out: NMT_ERR_MODEL_MISSING_TENSOR, named. */
static void test_bad_configs(void **state) {
    (void)state;
    nmt_ba_cfg c;
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    assert_int_equal(c.att, 12);
    assert_int_equal(c.readout, 8);
    assert_int_equal(c.cat, 8 + 36 + 24);
    char why[256] = "";
    c.bos = VOCAB;
    assert_int_equal(nmt_ba_finish(&c, ~0ull, why, sizeof why), NMT_ERR_MODEL_ARCH);
    assert_string_equal(why, "bos_id 23 must be < tgt_vocab 23");
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    c.unk = 30;
    assert_int_equal(nmt_ba_finish(&c, ~0ull, NULL, 0), NMT_ERR_MODEL_ARCH);
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    c.hidden = NMT_BA_MAX_DIM + 1;
    assert_int_equal(nmt_ba_finish(&c, ~0ull, NULL, 0), NMT_ERR_MODEL_ARCH);
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    c.history = 4;
    assert_int_equal(nmt_ba_finish(&c, ~0ull, NULL, 0), NMT_ERR_MODEL_ARCH);
    /* from files: out-of-range and unknown values */
    static const struct {
        const char *key, *str;
        int64_t v;
    } bad[] = {{"hidden", NULL, 0}, {"att", NULL, 0}, {"maxout", NULL, 2}, {"history", "xa", 0},
               {"eos_id", NULL, VOCAB}, {"emb", NULL, -1}};
    for (size_t k = 0; k < NMT_ARRAY_LEN(bad); k++) {
        assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
        nmtw_writer *w = nmtw_create();
        assert_int_equal(nmtw_add_hparams(w, &nmt_family_banmt, &c), NMT_OK);
        if (bad[k].str) assert_int_equal(nmtw_set_str(w, bad[k].key, bad[k].str), NMT_OK);
        else assert_int_equal(nmtw_set_i64(w, bad[k].key, bad[k].v), NMT_OK);
        assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_banmt, &c, 1, 1.0f), NMT_OK);
        void *img;
        size_t size;
        assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
        nmtw_destroy(w);
        nmt_model_info info;
        if (nmt_model_inspect(img, size, &info) != NMT_ERR_MODEL_ARCH) fail_msg("%s accepted", bad[k].key);
        free(img);
    }
    /* hyper-parameters of ba, tensors of sa: att.hist_t is missing */
    nmt_ba_cfg sa;
    assert_int_equal(ba_cfg(&sa, NMT_BA_SA), NMT_OK);
    assert_int_equal(ba_cfg(&c, NMT_BA_BA), NMT_OK);
    nmtw_writer *w = nmtw_create();
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_banmt, &c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_banmt, &sa, 3, 1.0f), NMT_OK);
    void *img;
    size_t size;
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    nmtw_destroy(w);
    nmt_session_params p = {.model_data = img, .model_size = size, .limits = lim};
    size_t bytes;
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_int_equal(nmt_model_explain(img, size, why, sizeof why), NMT_ERR_MODEL_MISSING_TENSOR);
    assert_non_null(strstr(why, "att.hist_t.weight"));
    free(img);
    /* a random model of the defaults opens and describes itself */
    assert_int_equal(ba_cfg(&c, NMT_BA_NONE), NMT_OK);
    img = image(&c, 5, &size);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_OK);
    assert_string_equal(info.arch, "banmt");
    assert_string_equal(info.family_config, "emb 8; hidden 12; att 12; readout 8; hist 12; history none; maxout 0");
    free(img);
}

int main(void) {
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_bad_configs),
    };
    const struct CMUnitTest dev[] = {
        cmocka_unit_test(test_score_equals_reference),
        cmocka_unit_test(test_incremental_equals_forced),
        cmocka_unit_test(test_int8_equals_dequantized),
        cmocka_unit_test(test_zeroed_history_equals_rnnsearch),
        cmocka_unit_test(test_causality),
        cmocka_unit_test(test_beam_consistent),
        cmocka_unit_test(test_alignments),
        cmocka_unit_test(test_score_alignments),
    };
    int fails = cmocka_run_group_tests(plain, NULL, NULL);
    return fails + cmocka_run_group_tests(dev, nmt_test_dev_setup, nmt_test_dev_teardown);
}
