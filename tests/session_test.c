/* SPDX-License-Identifier: MIT */
/* session_test.c — the whole Transformer/HySAN session on the OpenCL
 * device against the naive reference (tests/ref_model.c): teacher-forced and
 * incremental (KV cache) logits, scores, greedy and beam translation, arena
 * planning, bad inputs and bad models. */
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

typedef struct model_case {
    const char *name;
    const char *norm, *enc_br, *dec_br, *fusion;
    int shared, tied;
    uint32_t d, heads, ff, layers, vocab;
    /* the keys of other frameworks' models (docs/IMPORT.md); zero: defaults */
    const char *act, *pos;
    uint32_t pos_offset;
    int out_bias, no_src_eos;
    int gate_shared; /* gate shared: one squeeze gate per sub-layer */
} model_case;

static const model_case cases[] = {
    {"vanilla post-norm", "post", "global", "global", "sum", 0, 0, 32, 4, 48, 2, 29, NULL, NULL, 0, 0, 0, 0},
    {"hysan gate pre-norm", "pre", "global fw bw local:1", "global local:2", "gate", 0, 0, 32, 4, 40, 2, 31, NULL, NULL, 0, 0, 0, 0},
    {"hysan concat shared+tied", "post", "global bw local:0", "fw local:1", "concat", 1, 1, 24, 3, 36, 1, 27, NULL, NULL, 0, 0, 0, 0},
    {"hysan sum", "pre", "fw bw", "global fw", "sum", 0, 1, 16, 2, 20, 2, 23, NULL, NULL, 0, 0, 0, 0},
    {"swish sinusoid-2i logits bias (hf-marian)", "post", "global", "global", "sum", 1, 1, 32, 4, 48, 2, 29,
     "swish", "sinusoid-2i", 0, 1, 0, 0},
    {"gelu interleaved, no source EOS (opennmt)", "pre", "global", "global", "sum", 0, 0, 32, 4, 40, 2, 31,
     "gelu", "sinusoid-interleaved", 0, 1, 1, 0},
    {"position offset 2 (fairseq)", "post", "global", "global", "sum", 0, 1, 24, 3, 36, 1, 27, NULL, NULL, 2, 0, 0, 0},
    {"hysan gate shared", "post", "global fw bw local:1", "fw local:2", "gate", 0, 0, 32, 4, 40, 2, 31, NULL, NULL,
     0, 0, 0, 1},
    {"no position terms", "pre", "global", "global", "sum", 0, 0, 16, 2, 20, 2, 23, "swish", "none", 0, 0, 0, 0},
};

typedef struct env {
    nmt_device *dev;
    void *dev_mem;
} env;

static int setup(void **state) {
    env *e = calloc(1, sizeof *e);
    e->dev = nmt_test_device_open(&e->dev_mem);
    if (e->dev == NULL) return -1;
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    nmt_test_device_close(e->dev, e->dev_mem);
    free(e);
    return 0;
}

typedef struct model {
    void *image;
    size_t size;
    nmt_file file;
    nmt_session *s;
    void *arena;
    size_t arena_bytes;
} model;

static void make_image(const model_case *c, uint64_t seed, model *m) {
    nmt_random_transformer_config cfg;
    nmt_random_transformer_defaults(&cfg);
    cfg.d_model = c->d;
    cfg.n_heads = c->heads;
    cfg.d_ff = c->ff;
    cfg.enc_layers = cfg.dec_layers = c->layers;
    cfg.src_vocab = cfg.tgt_vocab = c->vocab;
    cfg.norm = c->norm;
    cfg.enc_branches = c->enc_br;
    cfg.dec_branches = c->dec_br;
    cfg.fusion = c->fusion;
    cfg.gate_reduction = 4;
    cfg.shared_embeddings = c->shared;
    cfg.tied_output = c->tied;
    cfg.ffn_activation = c->act;
    cfg.position_encoding = c->pos;
    cfg.position_offset = c->pos_offset;
    cfg.output_bias = c->out_bias;
    cfg.no_source_eos = c->no_src_eos;
    cfg.gate_shared = c->gate_shared;
    cfg.seed = seed;
    cfg.weight_scale = 2.0f; /* peaky distributions: beam choices matter */
    assert_int_equal(nmt_random_transformer_image(&cfg, &m->image, &m->size), NMT_OK);
    assert_int_equal(nmt_file_open(&m->file, m->image, m->size, 1), NMT_OK);
}

static void open_model(env *e, const model_case *c, uint64_t seed, nmt_limits lim, model *m) {
    memset(m, 0, sizeof *m);
    make_image(c, seed, m);
    nmt_session_params p = {.model_data = m->image, .model_size = m->size, .limits = lim};
    assert_int_equal(nmt_session_arena_size(&p, &m->arena_bytes, NULL), NMT_OK);
    m->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(m->arena_bytes, NMT_ARENA_ALIGNMENT));
    assert_int_equal(nmt_session_create(e->dev, &p, m->arena, m->arena_bytes, &m->s), NMT_OK);
    assert_int_equal(nmt_session_arena_used(m->s), m->arena_bytes);
}

static void close_model(model *m) {
    nmt_session_destroy(m->s);
    free(m->arena);
    free(m->image);
}

/* A deterministic batch of sentences of various lengths. */
#define NSENT 3
static const int32_t src0[] = {5, 9, 11, 4}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10};
static const int32_t tgt0[] = {4, 6, 8}, tgt1[] = {9, 9, 10, 11, 3}, tgt2[] = {13};
static const int32_t *const srcs[NSENT] = {src0, src1, src2};
static const uint32_t src_lens[NSENT] = {4, 1, 7};
static const int32_t *const tgts[NSENT] = {tgt0, tgt1, tgt2};
static const uint32_t tgt_lens[NSENT] = {3, 5, 1};

typedef struct capture {
    uint32_t V;
    float *rows[NSENT]; /* (tgt_len+1, V) */
    int seen[NSENT][8];
} capture;

static void capture_row(void *user, uint32_t i, uint32_t p, int32_t label, const float *row) {
    capture *c = user;
    (void)label;
    memcpy(c->rows[i] + (size_t)p * c->V, row, sizeof(float) * c->V);
    c->seen[i][p]++;
}

static double max_rel_err(const float *got, const double *want, size_t n) {
    double mx = 0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    /* e > mx ? e : mx, not fmax: the same for e >= 0 or NaN, and a double
     * fmax over widened floats is an internal compiler error of Debian 12's
     * aarch64 GCC 12.2 at -O3 (docs/CROSS.md, "Release builds") */
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(got[i] - want[i]);
        mx = e > mx ? e : mx;
    }
    return mx / scale;
}

/* Teacher-forced (whole target) and incremental (KV cache) logits both equal
 * the reference, for every case and every sentence of a padded batch. */
static void test_logits_match_reference(void **state) {
    env *e = *state;
    nmt_limits lim = {.max_src_len = 9, .max_tgt_len = 7, .max_batch = NSENT, .max_beam = 2};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        model m;
        open_model(e, &cases[ci], 100 + ci, lim, &m);
        const uint32_t V = cases[ci].vocab;
        nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
        for (int incremental = 0; incremental <= 1; incremental++) {
            capture cap = {.V = V};
            for (int i = 0; i < NSENT; i++) cap.rows[i] = calloc((tgt_lens[i] + 1) * V, sizeof(float));
            assert_int_equal(nmt_session_forced(m.s, &src, &tgt, incremental, 0, capture_row, &cap), NMT_OK);
            for (int i = 0; i < NSENT; i++) {
                double *ref = calloc((tgt_lens[i] + 1) * V, sizeof(double));
                int rows = ref_model_logits(&m.file, srcs[i], src_lens[i], tgts[i], tgt_lens[i], ref);
                assert_int_equal(rows, tgt_lens[i] + 1);
                for (uint32_t p = 0; p <= tgt_lens[i]; p++) assert_int_equal(cap.seen[i][p], 1);
                double err = max_rel_err(cap.rows[i], ref, (size_t)rows * V);
                if (err > 2e-4)
                    fail_msg("%s, %s, sentence %d: max rel error %.3g", cases[ci].name,
                             incremental ? "incremental" : "teacher-forced", i, err);
                free(ref);
                free(cap.rows[i]);
            }
        }
        close_model(&m);
    }
}

static double ref_logprob(const nmt_file *f, const int32_t *src, uint32_t sl, const int32_t *tgt,
                          uint32_t tl, uint32_t V, uint32_t eos) {
    double *lg = calloc((size_t)(tl + 1) * V, sizeof(double)), total = 0;
    ref_model_logits(f, src, sl, tgt, tl, lg);
    for (uint32_t p = 0; p <= tl; p++) {
        const double *r = lg + (size_t)p * V;
        double mx = -INFINITY, z = 0;
        for (uint32_t v = 0; v < V; v++) mx = fmax(mx, r[v]);
        for (uint32_t v = 0; v < V; v++) z += exp(r[v] - mx);
        uint32_t label = p < tl ? (uint32_t)tgt[p] : eos;
        total += r[label] - mx - log(z);
    }
    free(lg);
    return total;
}

static void test_score_equals_reference(void **state) {
    env *e = *state;
    nmt_limits lim = {.max_src_len = 9, .max_tgt_len = 7, .max_batch = NSENT, .max_beam = 1};
    model m;
    open_model(e, &cases[1], 7, lim, &m);
    nmt_batch src = {srcs, src_lens, NSENT}, tgt = {tgts, tgt_lens, NSENT};
    float lp[NSENT];
    assert_int_equal(nmt_session_score(m.s, &src, &tgt, lp), NMT_OK);
    nmt_model_info info;
    nmt_session_model_info(m.s, &info);
    for (int i = 0; i < NSENT; i++) {
        double want = ref_logprob(&m.file, srcs[i], src_lens[i], tgts[i], tgt_lens[i], info.tgt_vocab,
                                  info.eos_id);
        assert_true(want < 0);
        assert_float_equal(lp[i], want, 1e-3 * fmax(1.0, fabs(want)));
    }
    close_model(&m);
}

/* Greedy (beam 1): every emitted token is the argmax of the reference
 * distribution given the emitted prefix, and the hypothesis ends with the
 * argmax EOS or at the length limit. */
static void test_greedy_is_argmax(void **state) {
    env *e = *state;
    nmt_limits lim = {.max_src_len = 9, .max_tgt_len = 12, .max_batch = NSENT, .max_beam = 1};
    model m;
    open_model(e, &cases[0], 11, lim, &m);
    nmt_model_info info;
    nmt_session_model_info(m.s, &info);
    nmt_batch src = {srcs, src_lens, NSENT};
    nmt_decode_opts o = {.beam = 1, .max_len = 6};
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_OK);
    const uint32_t V = info.tgt_vocab;
    for (int i = 0; i < NSENT; i++) {
        const int32_t *toks;
        uint32_t len;
        float score, logprob;
        assert_int_equal(nmt_session_result(m.s, i, 0, &toks, &len, &score, &logprob), NMT_OK);
        assert_true(len <= 6);
        double *lg = calloc((size_t)(len + 1) * V, sizeof(double));
        ref_model_logits(&m.file, srcs[i], src_lens[i], toks, len, lg);
        for (uint32_t p = 0; p <= len && p < 6; p++) {
            uint32_t best = 0;
            for (uint32_t v = 1; v < V; v++)
                if (lg[(size_t)p * V + v] > lg[(size_t)p * V + best]) best = v;
            uint32_t got = p < len ? (uint32_t)toks[p] : info.eos_id;
            assert_int_equal(got, best);
        }
        double want = ref_logprob(&m.file, srcs[i], src_lens[i], toks, len, V, info.eos_id);
        assert_float_equal(logprob, want, 1e-3 * fmax(1.0, fabs(want)));
        free(lg);
    }
    close_model(&m);
}

/* Beam search through the session: every n-best hypothesis's log-probability
 * equals its forced-decoding score (so the KV-cache reordering is right),
 * ranks are ordered by the GNMT-normalised score, beam >= greedy, and a
 * batch gives the same results as its sentences one by one. */
static void test_beam_consistent(void **state) {
    env *e = *state;
    const uint32_t K = 4;
    nmt_limits lim = {.max_src_len = 9, .max_tgt_len = 10, .max_batch = NSENT, .max_beam = K};
    for (size_t ci = 0; ci < 2; ci++) {
        model m;
        open_model(e, &cases[ci + 1], 21 + ci, lim, &m);
        nmt_batch src = {srcs, src_lens, NSENT};
        nmt_decode_opts o = {.beam = K, .n_best = K, .alpha = 0.6f, .max_len = 8};
        assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_OK);
        int32_t hyp_tok[NSENT][K][12];
        uint32_t hyp_len[NSENT][K];
        float hyp_lp[NSENT][K], hyp_score[NSENT][K];
        for (int i = 0; i < NSENT; i++)
            for (uint32_t r = 0; r < K; r++) {
                const int32_t *t;
                assert_int_equal(nmt_session_result(m.s, i, r, &t, &hyp_len[i][r], &hyp_score[i][r],
                                                    &hyp_lp[i][r]),
                                 NMT_OK);
                assert_true(hyp_len[i][r] <= 8);
                memcpy(hyp_tok[i][r], t, sizeof(int32_t) * hyp_len[i][r]);
                float lp = powf((5.0f + hyp_len[i][r] + 1) / 6.0f, 0.6f);
                assert_float_equal(hyp_score[i][r], hyp_lp[i][r] / lp, 1e-4);
                if (r > 0) assert_true(hyp_score[i][r] <= hyp_score[i][r - 1]);
            }
        assert_int_equal(nmt_session_result(m.s, 0, K, &(const int32_t *){0}, &(uint32_t){0}, NULL, NULL),
                         NMT_ERR_INVALID_ARGUMENT);
        for (uint32_t r = 0; r < K; r++) {
            const int32_t *tp[NSENT];
            uint32_t tl[NSENT];
            for (int i = 0; i < NSENT; i++) tp[i] = hyp_tok[i][r], tl[i] = hyp_len[i][r];
            nmt_batch tgt = {tp, tl, NSENT};
            float sc[NSENT];
            assert_int_equal(nmt_session_score(m.s, &src, &tgt, sc), NMT_OK);
            for (int i = 0; i < NSENT; i++) assert_float_equal(sc[i], hyp_lp[i][r], 2e-3);
        }
        /* one sentence at a time gives the same best hypotheses */
        for (int i = 0; i < NSENT; i++) {
            nmt_batch one = {&srcs[i], &src_lens[i], 1};
            assert_int_equal(nmt_session_translate(m.s, &one, &o), NMT_OK);
            const int32_t *t;
            uint32_t len;
            float lp;
            assert_int_equal(nmt_session_result(m.s, 0, 0, &t, &len, NULL, &lp), NMT_OK);
            assert_int_equal(len, hyp_len[i][0]);
            assert_memory_equal(t, hyp_tok[i][0], sizeof(int32_t) * len);
            assert_float_equal(lp, hyp_lp[i][0], 1e-3);
        }
        /* trailing finished sentences skipping the step change nothing */
        check_trim_equals_full(e->dev, m.s, &src, K, ci ? "hysan" : "vanilla");
        check_trim_equals_full(e->dev, m.s, &src, 1, ci ? "hysan" : "vanilla");
        /* beam search never ends below greedy's normalised score */
        nmt_decode_opts g = {.beam = 1, .alpha = 0.6f, .max_len = 8};
        assert_int_equal(nmt_session_translate(m.s, &src, &g), NMT_OK);
        for (int i = 0; i < NSENT; i++) {
            const int32_t *t;
            uint32_t len;
            float sc;
            assert_int_equal(nmt_session_result(m.s, i, 0, &t, &len, &sc, NULL), NMT_OK);
            assert_true(hyp_score[i][0] >= sc - 1e-4f);
        }
        close_model(&m);
    }
}

static void test_arena_prediction_is_exact(void **state) {
    env *e = *state;
    const nmt_limits lims[] = {
        {.max_src_len = 4, .max_batch = 1, .max_beam = 1},
        {.max_src_len = 16, .max_tgt_len = 5, .max_batch = 3, .max_beam = 5},
        {0}, /* defaults */
    };
    for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
        model m;
        open_model(e, &cases[1], 3, lims[i], &m); /* asserts used == predicted */
        nmt_limits got;
        nmt_session_limits(m.s, &got);
        if (lims[i].max_src_len == 0) {
            assert_int_equal(got.max_src_len, 256);
            assert_int_equal(got.max_tgt_len, 306);
            assert_int_equal(got.max_batch, 1);
            assert_int_equal(got.max_beam, 4);
        }
        close_model(&m);
    }
    /* more limits, more memory */
    model m;
    make_image(&cases[0], 1, &m);
    nmt_session_params p = {.model_data = m.image, .model_size = m.size,
                            .limits = {.max_src_len = 8, .max_batch = 1, .max_beam = 1}};
    size_t small, big;
    uint64_t dsmall, dbig;
    assert_int_equal(nmt_session_arena_size(&p, &small, &dsmall), NMT_OK);
    p.limits.max_batch = 4;
    p.limits.max_beam = 4;
    assert_int_equal(nmt_session_arena_size(&p, &big, &dbig), NMT_OK);
    assert_true(big > small);
    assert_true(dbig > dsmall);
    /* one byte short: a status, nothing created */
    void *mem = aligned_alloc(64, nmt_test_round_up(big, 64));
    nmt_session *s = (nmt_session *)&p;
    assert_int_equal(nmt_session_create(e->dev, &p, mem, big - 1, &s), NMT_ERR_ARENA_TOO_SMALL);
    assert_null(s);
    /* an unaligned arena works with NMT_ARENA_ALIGNMENT - 1 spare bytes */
    void *mem2 = malloc(big + 64);
    assert_int_equal(nmt_session_create(e->dev, &p, (char *)mem2 + 1, big + 63, &s), NMT_OK);
    nmt_session_destroy(s);
    free(mem2);
    free(mem);
    free(m.image);
}

static void test_bad_inputs(void **state) {
    env *e = *state;
    nmt_limits lim = {.max_src_len = 5, .max_tgt_len = 6, .max_batch = 2, .max_beam = 2};
    model m;
    open_model(e, &cases[0], 5, lim, &m);
    const uint32_t V = cases[0].vocab;
    int32_t ok[2] = {3, 4}, neg[2] = {3, -1}, big[2] = {3, (int32_t)V}, longs[6] = {1, 2, 3, 4, 5, 6};
    const int32_t *pp[3];
    uint32_t ll[3];
    nmt_batch b = {pp, ll, 1};
    nmt_decode_opts o = {.beam = 2};

    pp[0] = neg, ll[0] = 2;
    assert_int_equal(nmt_session_translate(m.s, &b, &o), NMT_ERR_TOKEN_OUT_OF_RANGE);
    pp[0] = big;
    assert_int_equal(nmt_session_translate(m.s, &b, &o), NMT_ERR_TOKEN_OUT_OF_RANGE);
    pp[0] = longs, ll[0] = 6;
    assert_int_equal(nmt_session_translate(m.s, &b, &o), NMT_ERR_INPUT_TOO_LONG);
    pp[0] = pp[1] = pp[2] = ok, ll[0] = ll[1] = ll[2] = 2, b.n = 3;
    assert_int_equal(nmt_session_translate(m.s, &b, &o), NMT_ERR_LIMIT_EXCEEDED);
    b.n = 1;
    nmt_decode_opts wide = {.beam = 3};
    assert_int_equal(nmt_session_translate(m.s, &b, &wide), NMT_ERR_LIMIT_EXCEEDED);
    nmt_decode_opts nb = {.beam = 2, .n_best = 3};
    assert_int_equal(nmt_session_translate(m.s, &b, &nb), NMT_ERR_LIMIT_EXCEEDED);
    nmt_decode_opts nan_alpha = {.beam = 2, .alpha = NAN};
    assert_int_equal(nmt_session_translate(m.s, &b, &nan_alpha), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_session_translate(NULL, &b, &o), NMT_ERR_INVALID_ARGUMENT);
    /* target too long / out of range in scoring */
    nmt_batch t = {(const int32_t *const[]){longs}, (const uint32_t[]){6}, 1};
    float sc;
    pp[0] = ok, ll[0] = 2;
    t.lens = (const uint32_t[]){7};
    int32_t long_t[7] = {1, 1, 1, 1, 1, 1, 1};
    t.tokens = (const int32_t *const[]){long_t};
    assert_int_equal(nmt_session_score(m.s, &b, &t, &sc), NMT_ERR_INPUT_TOO_LONG);
    t.tokens = (const int32_t *const[]){big};
    t.lens = (const uint32_t[]){2};
    assert_int_equal(nmt_session_score(m.s, &b, &t, &sc), NMT_ERR_TOKEN_OUT_OF_RANGE);

    /* the session still works after every rejected call; an empty sentence
     * translates, the empty batch is a no-op */
    int32_t dummy = 0;
    pp[0] = &dummy, ll[0] = 0;
    assert_int_equal(nmt_session_translate(m.s, &b, &o), NMT_OK);
    const int32_t *toks;
    uint32_t len;
    assert_int_equal(nmt_session_result(m.s, 0, 0, &toks, &len, NULL, NULL), NMT_OK);
    assert_true(len <= 50);
    b.n = 0;
    assert_int_equal(nmt_session_translate(m.s, &b, &o), NMT_OK);
    assert_int_equal(nmt_session_result(m.s, 0, 0, &toks, &len, NULL, NULL), NMT_ERR_INVALID_ARGUMENT);
    close_model(&m);
}

/* Models the transformer family must refuse, each with its status. */
static void test_bad_models(void **state) {
    env *e = *state;
    (void)e;
    nmt_model_info info;
    struct {
        const char *enc, *dec;
        uint32_t d, heads;
        nmt_status want;
    } bad[] = {
        {"global", "bw", 16, 2, NMT_ERR_MODEL_ARCH},       /* decoder cannot look ahead */
        {"global nonsense", "global", 16, 2, NMT_ERR_MODEL_ARCH},
        {"local:x", "global", 16, 2, NMT_ERR_MODEL_ARCH},
        {"global", "global", 18, 4, NMT_ERR_MODEL_ARCH},   /* heads do not divide d */
        {"global", "global", 16, 2, NMT_OK},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nmt_random_transformer_config cfg;
        nmt_random_transformer_defaults(&cfg);
        cfg.enc_branches = bad[i].enc;
        cfg.dec_branches = bad[i].dec;
        cfg.d_model = bad[i].d;
        cfg.n_heads = bad[i].heads;
        void *img;
        size_t size;
        assert_int_equal(nmt_random_transformer_image(&cfg, &img, &size), NMT_OK);
        assert_int_equal(nmt_model_inspect(img, size, &info), bad[i].want);
        free(img);
    }
    /* an architecture nobody implements */
    nmtw_writer *w = nmtw_create();
    assert_int_equal(nmtw_set_str(w, "arch", "rnn-from-the-future"), NMT_OK);
    void *img;
    size_t size;
    assert_int_equal(nmtw_write_memory(w, &img, &size), NMT_OK);
    assert_int_equal(nmt_model_inspect(img, size, &info), NMT_ERR_MODEL_ARCH);
    free(img);
    nmtw_destroy(w);
    /* no file / not a model */
    assert_int_equal(nmt_model_inspect_file("/nonexistent/model.nmt", &info), NMT_ERR_IO);
    assert_int_equal(nmt_model_inspect("hello world, not a model at all.", 32, &info),
                     NMT_ERR_MODEL_TRUNCATED);
}

static void test_inspect_reports_model(void **state) {
    (void)state;
    model m;
    make_image(&cases[1], 1, &m);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect(m.image, m.size, &info), NMT_OK);
    assert_string_equal(info.arch, "transformer");
    assert_int_equal(info.d_model, 32);
    assert_int_equal(info.n_heads, 4);
    assert_string_equal(info.enc_branches, "global fw bw local:1");
    assert_string_equal(info.dec_branches, "global local:2");
    assert_string_equal(info.fusion, "gate");
    assert_string_equal(info.norm, "pre");
    assert_string_equal(info.dtype, "fp32");
    assert_int_equal(info.file_size, m.size);
    /* parameters: count them from the file independently */
    uint64_t n = 0;
    for (uint32_t i = 0; i < m.file.h.n_tensors; i++) {
        nmt_tensor_view v;
        assert_int_equal(nmt_file_tensor_at(&m.file, i, &v), NMT_OK);
        n += v.n_elements;
    }
    assert_int_equal(info.n_params, n);
    assert_int_equal(info.weight_bytes, n * 4);
    free(m.image);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect_reports_model),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_logits_match_reference),
        cmocka_unit_test(test_score_equals_reference),
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_beam_consistent),
        cmocka_unit_test(test_arena_prediction_is_exact),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
