/* SPDX-License-Identifier: MIT */
/* align_test.c — attention alignments (nmt_session_params.alignment,
 * nmt_session_result_alignment / _links; docs/RUNTIME.md "Alignments") on
 * small random models of every family that runs through the Transformer's
 * forward (Transformer/HySAN, MG-SA, phrase attention with a token
 * cross-attention): the soft rows equal the double-precision reference's
 * cross-attention probabilities (tests/ref_model.c) of the hypothesis's own
 * tokens, for greedy and for every n-best hypothesis of a beam (so the
 * walk back along the beam's back-pointers is right); rows sum to 1; the
 * hard links are the rows' argmax over the source tokens; batch 1 and
 * batch 4, beam 1 and greedy give the same alignments; nmt_session_score
 * gives a pair's alignment under teacher forcing (equal to translate's for
 * the model's own greedy output, to the reference's attention for any
 * target, batch 1 equal to batch 4); the arena and device
 * predictions stay exact with alignments on and cost nothing when off;
 * bad requests give their statuses. */
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
#include "random_model.h"
#include "ref_model.h"
#include "session_internal.h"
#include "test_util.h"
#include "transformer_cfg.h"

typedef nmt_test_dev_env env;

#define VOCAB 29
#define NSENT 4
#define MAXT 8 /* max_len of every translation here */
static const int32_t src0[] = {5, 9, 11, 4}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4}, src3[] = {6, 13};
static const int32_t *const srcs[NSENT] = {src0, src1, src2, src3};
static const uint32_t src_lens[NSENT] = {4, 1, 8, 2};
static const nmt_limits limits = {.max_src_len = 9, .max_tgt_len = MAXT, .max_batch = NSENT, .max_beam = 3};

/* A small random model: the Transformer (d 32, 4 heads, 2 + 2 layers,
 * post-norm), MG-SA phrase heads in encoder layer 1, or phrase attention
 * with `cross` as its cross-attention ("none": the Transformer's). */
enum { FAM_TF, FAM_MGSA, FAM_PHRASE };
static void *model_image(int fam, const char *cross, uint64_t seed, size_t *size) {
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_ff = 48;
    rc.src_vocab = rc.tgt_vocab = VOCAB;
    void *img;
    size_t sz;
    assert_int_equal(nmt_random_transformer_image(&rc, &img, &sz), NMT_OK);
    nmt_file f;
    nmt_tf_cfg c;
    assert_int_equal(nmt_file_open(&f, img, sz, 1), NMT_OK);
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    free(img);
    const nmt_family *family = &nmt_family_transformer;
    if (fam == FAM_MGSA) {
        family = &nmt_family_mgsa;
        snprintf(c.mg_layers_text, sizeof c.mg_layers_text, "1");
        snprintf(c.mg_heads_text, sizeof c.mg_heads_text, "word ngram:2 word ngram:3");
        c.mg_chunk = 8;
        c.mg_fallback = 2;
    } else if (fam == FAM_PHRASE) {
        family = &nmt_family_phrase;
        snprintf(c.ph_text[NMT_PH_ENC], NMT_PH_TEXT, "convkv:homo:211");
        snprintf(c.ph_text[NMT_PH_DEC], NMT_PH_TEXT, "queryk:homo:121");
        snprintf(c.ph_text[NMT_PH_CROSS], NMT_PH_TEXT, "%s", cross);
    }
    if (fam != FAM_TF) assert_int_equal(nmt_tf_finish(&c, ~0ull, NULL, 0), NMT_OK);
    return family_image(family, &c, seed, size);
}

typedef struct model {
    void *image, *arena;
    size_t size, arena_bytes;
    uint64_t device_bytes;
    nmt_file file;
    nmt_session *s;
} model;

static nmt_session_params params(const model *m, nmt_limits lim, int align, uint32_t layer, uint32_t head) {
    nmt_session_params p = {.model_data = m->image, .model_size = m->size, .limits = lim, .alignment = align,
                            .align_layer = layer, .align_head = head};
    return p;
}

/* A session over m->image; the arena and device bytes are exactly the
 * prediction's. */
static void open_session(env *e, model *m, nmt_limits lim, int align, uint32_t layer, uint32_t head) {
    const nmt_session_params p = params(m, lim, align, layer, head);
    assert_int_equal(nmt_session_arena_size(&p, &m->arena_bytes, &m->device_bytes), NMT_OK);
    m->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(m->arena_bytes, NMT_ARENA_ALIGNMENT));
    assert_non_null(m->arena);
    nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &p, m->arena, m->arena_bytes, &m->s));
    assert_int_equal(nmt_session_arena_used(m->s), m->arena_bytes);
    assert_int_equal(m->s->pc.device_bytes, m->device_bytes);
}

static void close_session(model *m) {
    nmt_session_destroy(m->s);
    free(m->arena);
    m->s = NULL;
    m->arena = NULL;
}

static void open_model(env *e, int fam, uint64_t seed, nmt_limits lim, uint32_t layer, uint32_t head, model *m) {
    memset(m, 0, sizeof *m);
    m->image = model_image(fam, "none", seed, &m->size);
    assert_int_equal(nmt_file_open(&m->file, m->image, m->size, 1), NMT_OK);
    open_session(e, m, lim, 1, layer, head);
}

static void close_model(model *m) {
    close_session(m);
    free(m->image);
}

/* One hypothesis's alignments as the API gives them. */
typedef struct align {
    int32_t tok[MAXT];
    uint32_t len, cols;
    float soft[MAXT * 10];
    int32_t hard[MAXT];
} align;

static void read_align(const model *m, uint32_t i, uint32_t rank, align *a) {
    const int32_t *t;
    assert_int_equal(nmt_session_result(m->s, i, rank, &t, &a->len, NULL, NULL), NMT_OK);
    assert_true(a->len <= MAXT);
    memcpy(a->tok, t, sizeof(int32_t) * a->len);
    uint32_t len, cols, len2;
    assert_int_equal(nmt_session_result_alignment(m->s, i, rank, a->soft, NMT_ARRAY_LEN(a->soft), &len, &cols),
                     NMT_OK);
    assert_int_equal(nmt_session_result_links(m->s, i, rank, a->hard, MAXT, &len2), NMT_OK);
    assert_int_equal(len, a->len);
    assert_int_equal(len2, a->len);
    assert_int_equal(cols, src_lens[i] + 1);
    a->cols = cols;
}

/* a's rows sum to 1, its links are their argmax over the source tokens,
 * and it equals the reference's cross-attention of its own tokens (layer,
 * head as the session's); returns the largest difference. */
static double check_against_reference(const model *m, uint32_t i, const align *a, uint32_t layer, uint32_t head) {
    const uint32_t S = src_lens[i] + 1;
    double *ref = malloc(sizeof(double) * (a->len + 1) * S);
    ref_model_cross_attention(&m->file, srcs[i], src_lens[i], a->tok, a->len, layer, head, ref);
    double worst = 0;
    for (uint32_t p = 0; p < a->len; p++) {
        const float *row = a->soft + (size_t)p * S;
        const double *want = ref + (size_t)p * S;
        double sum = 0;
        int32_t best = 0;
        for (uint32_t j = 0; j < S; j++) {
            sum += row[j];
            worst = fmax(worst, fabs(row[j] - want[j]));
            if (j + 1 < S && want[j] > want[best]) best = (int32_t)j;
        }
        assert_float_equal(sum, 1.0, 1e-5);
        /* the link is the row's argmax, and the reference's (up to rounding on near-ties) */
        assert_true(a->hard[p] >= 0 && (uint32_t)a->hard[p] + 1 < S);
        for (uint32_t j = 0; j + 1 < S; j++) assert_true(row[a->hard[p]] >= row[j]);
        assert_true(want[a->hard[p]] >= want[best] - 1e-4);
    }
    free(ref);
    assert_true(worst < 1e-5);
    return worst;
}

static const int32_t *const *batch_of(uint32_t i) { return &srcs[i]; }

/* Greedy decoding, every family: soft rows equal the reference's
 * cross-attention of the last layer averaged over heads; hard links its
 * argmax.  Also layer 1 and one head (the layer/head options). */
static void test_greedy_matches_reference(void **state) {
    env *e = *state;
    const int fams[3] = {FAM_TF, FAM_MGSA, FAM_PHRASE};
    const uint32_t sel[3][2] = {{0, 0}, {1, 0}, {2, 3}}; /* layer, head */
    double worst = 0;
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 3; k++) {
            model m;
            open_model(e, fams[f], 40 + f, limits, sel[k][0], sel[k][1], &m);
            const nmt_batch src = {srcs, src_lens, NSENT};
            const nmt_decode_opts o = {.beam = 1, .max_len = MAXT};
            nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
            for (uint32_t i = 0; i < NSENT; i++) {
                align a;
                read_align(&m, i, 0, &a);
                worst = fmax(worst, check_against_reference(&m, i, &a, sel[k][0], sel[k][1]));
            }
            close_model(&m);
        }
    printf("greedy: largest |soft - reference| %.3g\n", worst);
}

/* Beam search: every n-best hypothesis's soft alignment equals the
 * reference of its own tokens (the walk along the back-pointers picks its
 * own row at each step), batch 4 equals batch 1, beam 1 equals a greedy
 * session's. */
static void test_beam_batch_invariant(void **state) {
    env *e = *state;
    const uint32_t K = 3;
    model m;
    open_model(e, FAM_TF, 7, limits, 0, 0, &m);
    const nmt_batch src = {srcs, src_lens, NSENT};
    const nmt_decode_opts o = {.beam = K, .n_best = K, .max_len = MAXT};
    static align all[NSENT][3];
    uint32_t nres[NSENT];
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    double worst = 0;
    for (uint32_t i = 0; i < NSENT; i++) {
        nres[i] = nmt_session_n_results(m.s, i);
        assert_true(nres[i] >= 1);
        for (uint32_t r = 0; r < nres[i]; r++) {
            read_align(&m, i, r, &all[i][r]);
            worst = fmax(worst, check_against_reference(&m, i, &all[i][r], 0, 0));
        }
    }
    printf("beam %u: largest |soft - reference| %.3g\n", K, worst);
    /* batch 1: the same hypotheses, the same alignments */
    for (uint32_t i = 0; i < NSENT; i++) {
        const nmt_batch one = {batch_of(i), &src_lens[i], 1};
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &one, &o));
        assert_int_equal(nmt_session_n_results(m.s, 0), nres[i]);
        for (uint32_t r = 0; r < nres[i]; r++) {
            align a;
            const int32_t *t;
            assert_int_equal(nmt_session_result(m.s, 0, r, &t, &a.len, NULL, NULL), NMT_OK);
            uint32_t len, cols;
            assert_int_equal(nmt_session_result_alignment(m.s, 0, r, a.soft, NMT_ARRAY_LEN(a.soft), &len, &cols),
                             NMT_OK);
            assert_int_equal(nmt_session_result_links(m.s, 0, r, a.hard, MAXT, &len), NMT_OK);
            assert_int_equal(a.len, all[i][r].len);
            assert_memory_equal(t, all[i][r].tok, sizeof(int32_t) * a.len);
            assert_memory_equal(a.hard, all[i][r].hard, sizeof(int32_t) * a.len);
            for (uint32_t e2 = 0; e2 < a.len * cols; e2++) assert_float_equal(a.soft[e2], all[i][r].soft[e2], 1e-5);
        }
    }
    /* beam 1 here equals a greedy session (max_beam 1) */
    const nmt_decode_opts g = {.beam = 1, .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &g));
    align b1[NSENT];
    for (uint32_t i = 0; i < NSENT; i++) read_align(&m, i, 0, &b1[i]);
    close_session(&m);
    nmt_limits gl = limits;
    gl.max_beam = 1;
    open_session(e, &m, gl, 1, 0, 0);
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &g));
    for (uint32_t i = 0; i < NSENT; i++) {
        align a;
        read_align(&m, i, 0, &a);
        assert_int_equal(a.len, b1[i].len);
        assert_memory_equal(a.tok, b1[i].tok, sizeof(int32_t) * a.len);
        assert_memory_equal(a.hard, b1[i].hard, sizeof(int32_t) * a.len);
        for (uint32_t e2 = 0; e2 < a.len * a.cols; e2++) assert_float_equal(a.soft[e2], b1[i].soft[e2], 1e-5);
    }
    close_model(&m);
}

/* Score's alignment of pair i as the API gives it (result (i, 0) after
 * nmt_session_score), its reference tokens in a->tok. */
static void read_scored(const model *m, uint32_t i, uint32_t src_len, const int32_t *tok, uint32_t n, align *a) {
    uint32_t len, cols, len2;
    assert_true(n <= MAXT);
    memcpy(a->tok, tok, sizeof(int32_t) * n);
    a->len = n;
    assert_int_equal(nmt_session_result_alignment(m->s, i, 0, a->soft, NMT_ARRAY_LEN(a->soft), &len, &cols), NMT_OK);
    assert_int_equal(nmt_session_result_links(m->s, i, 0, a->hard, MAXT, &len2), NMT_OK);
    assert_int_equal(len, n);
    assert_int_equal(len2, n);
    assert_int_equal(cols, src_len + 1);
    a->cols = cols;
}

static void assert_same_align(const align *a, const align *b) {
    assert_int_equal(a->len, b->len);
    assert_int_equal(a->cols, b->cols);
    assert_memory_equal(a->hard, b->hard, sizeof(int32_t) * a->len);
    for (uint32_t k = 0; k < a->len * a->cols; k++) assert_float_equal(a->soft[k], b->soft[k], 1e-5);
}

/* nmt_session_score with alignments, every family: scoring the model's own
 * greedy output gives translate's alignment (the same tokens, the same
 * attention) and its log-probability; scoring other references gives the
 * reference's cross-attention of those tokens (teacher forcing), the same
 * in batch 4 and batch 1, and the same scores as a session without
 * alignments (which decodes the whole target at once). */
static void test_score_alignment(void **state) {
    env *e = *state;
    const int fams[3] = {FAM_TF, FAM_MGSA, FAM_PHRASE};
    const uint32_t sel[2][2] = {{0, 0}, {1, 3}}; /* layer, head */
    static const int32_t r0[] = {3, 17, 8}, r1[] = {21}, r2[] = {4, 4, 9, 28, 12, 6, 5}, r3[] = {0};
    const int32_t *const refs[NSENT] = {r0, r1, r2, r3};
    const uint32_t ref_lens[NSENT] = {3, 1, 7, 0}; /* an empty reference too */
    const nmt_batch src = {srcs, src_lens, NSENT}, ref = {refs, ref_lens, NSENT};
    double worst = 0;
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 2; k++) {
            model m;
            open_model(e, fams[f], 70 + f, limits, sel[k][0], sel[k][1], &m);
            /* the model's own greedy output */
            const nmt_decode_opts o = {.beam = 1, .max_len = MAXT};
            nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
            align g[NSENT];
            float g_lp[NSENT], lp[NSENT], lp_full[NSENT];
            const int32_t *own[NSENT];
            uint32_t own_len[NSENT];
            for (uint32_t i = 0; i < NSENT; i++) {
                read_align(&m, i, 0, &g[i]);
                float score;
                const int32_t *t;
                assert_int_equal(nmt_session_result(m.s, i, 0, &t, &own_len[i], &score, &g_lp[i]), NMT_OK);
                own[i] = g[i].tok;
            }
            const nmt_batch own_b = {own, own_len, NSENT};
            nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &own_b, lp));
            for (uint32_t i = 0; i < NSENT; i++) {
                align a;
                read_scored(&m, i, src_lens[i], g[i].tok, g[i].len, &a);
                assert_same_align(&a, &g[i]);
                assert_float_equal(lp[i], g_lp[i], 1e-4);
            }
            /* given references: the reference model's attention over them; batch 1 = batch 4 */
            nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &ref, lp));
            align all[NSENT];
            for (uint32_t i = 0; i < NSENT; i++) {
                read_scored(&m, i, src_lens[i], refs[i], ref_lens[i], &all[i]);
                worst = fmax(worst, check_against_reference(&m, i, &all[i], sel[k][0], sel[k][1]));
            }
            for (uint32_t i = 0; i < NSENT; i++) {
                const nmt_batch s1 = {batch_of(i), &src_lens[i], 1}, t1 = {&refs[i], &ref_lens[i], 1};
                float lp1;
                nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &s1, &t1, &lp1));
                align a;
                read_scored(&m, 0, src_lens[i], refs[i], ref_lens[i], &a);
                assert_same_align(&a, &all[i]);
                assert_float_equal(lp1, lp[i], 1e-4);
            }
            /* the scores equal those of a session without alignments */
            close_session(&m);
            open_session(e, &m, limits, 0, 0, 0);
            nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &ref, lp_full));
            for (uint32_t i = 0; i < NSENT; i++) assert_float_equal(lp_full[i], lp[i], 1e-4);
            close_model(&m);
        }
    printf("score: largest |soft - reference| %.3g\n", worst);
}

/* The arena and device predictions stay exact with alignments (open_session
 * asserts it); alignments cost exactly their buffers, and nothing when off. */
static void test_arena_exact(void **state) {
    env *e = *state;
    const nmt_limits lims[] = {limits, {.max_src_len = 16, .max_tgt_len = 5, .max_batch = 3, .max_beam = 5}, {0}};
    for (size_t k = 0; k < NMT_ARRAY_LEN(lims); k++) {
        model on, off;
        open_model(e, FAM_TF, 3, lims[k], 0, 0, &on);
        off = on;
        off.arena = NULL;
        open_session(e, &off, lims[k], 0, 0, 0);
        nmt_limits L;
        nmt_session_limits(on.s, &L);
        const uint64_t R = (uint64_t)L.max_batch * L.max_beam, sc = L.max_src_len + 1, T = L.max_tgt_len + 1;
        assert_int_equal(on.device_bytes - off.device_bytes, R * sc * sizeof(float));
        const uint64_t host = T * R * sc * sizeof(float) + T * R * sizeof(int32_t);
        assert_true(on.arena_bytes - off.arena_bytes >= host);
        assert_true(on.arena_bytes - off.arena_bytes < host + 3 * 64 + 64); /* alignment padding, a list node */
        assert_null(off.s->h_align);
        close_session(&off);
        close_model(&on);
    }
}

/* Statuses: no alignments asked (NMT_ERR_NO_ALIGNMENTS), small buffers
 * (NMT_ERR_BUFFER_TOO_SMALL with the sizes), bad layer or head, phrase
 * cross-attention (NMT_ERR_UNSUPPORTED), results that do not exist. */
static void test_bad_requests(void **state) {
    env *e = *state;
    model m;
    open_model(e, FAM_TF, 5, limits, 0, 0, &m);
    const nmt_batch src = {srcs, src_lens, NSENT};
    const nmt_decode_opts o = {.beam = 2, .n_best = 2, .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    uint32_t len = 99, cols = 99;
    const int32_t *t;
    uint32_t tl;
    assert_int_equal(nmt_session_result(m.s, 2, 0, &t, &tl, NULL, NULL), NMT_OK);
    if (tl > 0) {
        float small[1];
        assert_int_equal(nmt_session_result_alignment(m.s, 2, 0, NULL, 0, &len, &cols), NMT_ERR_BUFFER_TOO_SMALL);
        assert_int_equal(len, tl);
        assert_int_equal(cols, src_lens[2] + 1);
        if (tl * cols > 1)
            assert_int_equal(nmt_session_result_alignment(m.s, 2, 0, small, 1, &len, &cols), NMT_ERR_BUFFER_TOO_SMALL);
        assert_int_equal(nmt_session_result_links(m.s, 2, 0, NULL, 0, &len), NMT_ERR_BUFFER_TOO_SMALL);
        assert_int_equal(len, tl);
    }
    int32_t hard[MAXT];
    assert_int_equal(nmt_session_result_links(m.s, NSENT, 0, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_links(m.s, 0, 2, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_links(m.s, 0, 0, NULL, 4, &len), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_links(NULL, 0, 0, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    /* scoring leaves no translations; its pairs are results (i, 0) of the alignment calls only */
    float lp[NSENT];
    assert_int_equal(nmt_session_score(m.s, &src, &src, lp), NMT_OK);
    assert_int_equal(nmt_session_result(m.s, 0, 0, &t, &tl, NULL, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_links(m.s, 0, 0, hard, MAXT, &len), NMT_OK);
    assert_int_equal(len, src_lens[0]);
    assert_int_equal(nmt_session_result_links(m.s, 0, 1, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_links(m.s, NSENT, 0, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_alignment(m.s, 2, 0, NULL, 0, &len, &cols), NMT_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(len, src_lens[2]);
    assert_int_equal(cols, src_lens[2] + 1);
    /* a translate call after it: its results again, the pairs gone */
    const nmt_batch two = {srcs, src_lens, 2};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &two, &o));
    assert_int_equal(nmt_session_result_links(m.s, 2, 0, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_result_links(m.s, 1, 1, hard, MAXT, &len), NMT_OK);
    /* an empty batch scored: no pairs */
    const nmt_batch none = {srcs, src_lens, 0};
    assert_int_equal(nmt_session_score(m.s, &none, &none, lp), NMT_OK);
    assert_int_equal(nmt_session_result_links(m.s, 0, 0, hard, MAXT, &len), NMT_ERR_INVALID_ARGUMENT);
    close_session(&m);
    /* a session without alignments */
    open_session(e, &m, limits, 0, 0, 0);
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    assert_int_equal(nmt_session_result_links(m.s, 0, 0, hard, MAXT, &len), NMT_ERR_NO_ALIGNMENTS);
    assert_int_equal(nmt_session_score(m.s, &src, &src, lp), NMT_OK);
    assert_int_equal(nmt_session_result_links(m.s, 0, 0, hard, MAXT, &len), NMT_ERR_NO_ALIGNMENTS);
    float soft[100];
    assert_int_equal(nmt_session_result_alignment(m.s, 0, 0, soft, 100, &len, &cols), NMT_ERR_NO_ALIGNMENTS);
    assert_string_equal(nmt_status_str(NMT_ERR_NO_ALIGNMENTS), "session created without alignments");
    close_session(&m);
    /* layer or head beyond the model (2 layers, 4 heads) */
    size_t bytes;
    nmt_session_params p = params(&m, limits, 1, 3, 0);
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_ERR_INVALID_ARGUMENT);
    p = params(&m, limits, 1, 0, 5);
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_ERR_INVALID_ARGUMENT);
    p = params(&m, limits, 0, 3, 5); /* ignored without alignments */
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_OK);
    free(m.image);
    /* phrase cross-attention: keys are n-grams, no alignments */
    m.image = model_image(FAM_PHRASE, "convkv:homo:211", 9, &m.size);
    p = params(&m, limits, 1, 0, 0);
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_ERR_UNSUPPORTED);
    p.alignment = 0;
    assert_int_equal(nmt_session_arena_size(&p, &bytes, NULL), NMT_OK);
    void *arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(bytes, NMT_ARENA_ALIGNMENT));
    p.alignment = 1;
    nmt_session *s = (nmt_session *)&p;
    assert_int_equal(nmt_session_create(e->dev, &p, arena, bytes, &s), NMT_ERR_UNSUPPORTED);
    assert_null(s);
    free(arena);
    free(m.image);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_reference),
        cmocka_unit_test(test_beam_batch_invariant),
        cmocka_unit_test(test_score_alignment),
        cmocka_unit_test(test_arena_exact),
        cmocka_unit_test(test_bad_requests),
    };
    return cmocka_run_group_tests(tests, nmt_test_dev_setup, nmt_test_dev_teardown);
}
