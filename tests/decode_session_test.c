/* SPDX-License-Identifier: MIT */
/* decode_session_test.c — the decoding options of nmt_decode_opts on a
 * small random Transformer, each against a naive reference built from the
 * model's own teacher-forced outputs (nmt_session_forced, one position at a
 * time through the KV cache, as the search runs):
 *   coverage penalty  the n-best list equals the plain search's, each score
 *                     + beta * sum_j log(min(sum_p row_p[j], 1)) from its
 *                     alignment rows, re-sorted;
 *   repetition        every greedy token is the argmax of the CTRL-penalised
 *                     logits of its history, and the score sums them;
 *   sampling          reproducible for a seed, independent of the batch
 *                     (sentence i with seed S = it alone with seed S + i),
 *                     top-k 1 = greedy;
 *   prefix            results start with it, continue greedily (argmax of
 *                     the forced log-probabilities), and score as
 *                     nmt_session_score scores them;
 *   optional plans    per-token log-probabilities and the sampling scratch
 *                     cost exactly their buffers, only when asked for;
 *   device top-k      the same results, bit for bit, as the search over
 *                     every log-probability;
 *   chained steps     the same results, bit for bit, as steps each
 *                     ranked on the host before the next (greedy and beam);
 * and the statuses of bad values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_model.h"
#include "session_internal.h"
#include "test_util.h"

typedef nmt_test_dev_env env;

#define VOCAB 29
#define NSENT 4
#define MAXT 8
static const int32_t src0[] = {5, 9, 11, 4}, src1[] = {7}, src2[] = {12, 3, 8, 20, 6, 15, 10, 4}, src3[] = {6, 13};
static const int32_t *const srcs[NSENT] = {src0, src1, src2, src3};
static const uint32_t src_lens[NSENT] = {4, 1, 8, 2};
static const nmt_limits limits = {.max_src_len = 9, .max_tgt_len = MAXT, .max_batch = NSENT, .max_beam = 3};

typedef struct model {
    void *image, *arena;
    size_t size;
    nmt_session *s;
} model;

/* A session with or without the optional plans (alignments, per-token
 * log-probabilities, sampling scratch); the arena prediction is exact. */
static void open_model_with(env *e, int align, int token_lp, int sampling, model *m) {
    memset(m, 0, sizeof *m);
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_ff = 48;
    rc.src_vocab = rc.tgt_vocab = VOCAB;
    rc.seed = 77;
    assert_int_equal(nmt_random_transformer_image(&rc, &m->image, &m->size), NMT_OK);
    const nmt_session_params p = {.model_data = m->image, .model_size = m->size, .limits = limits,
                                  .alignment = align, .token_logprobs = token_lp, .sampling = sampling};
    size_t need;
    assert_int_equal(nmt_session_arena_size(&p, &need, NULL), NMT_OK);
    m->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, nmt_test_round_up(need, NMT_ARENA_ALIGNMENT));
    nmt_test_assert_ok(e->dev, nmt_session_create(e->dev, &p, m->arena, need, &m->s));
    assert_int_equal(nmt_session_arena_used(m->s), need);
}

static void open_model(env *e, int align, model *m) { open_model_with(e, align, 1, 1, m); }

static void close_model(model *m) {
    nmt_session_destroy(m->s);
    free(m->arena);
    free(m->image);
}

/* A copy of one result. */
typedef struct hyp {
    int32_t tok[MAXT + 1];
    float lps[MAXT + 1]; /* nmt_session_result_token_logprobs */
    uint32_t len;
    float score, logprob;
} hyp;

static void get(const model *m, uint32_t i, uint32_t r, hyp *h) {
    const int32_t *t;
    assert_int_equal(nmt_session_result(m->s, i, r, &t, &h->len, &h->score, &h->logprob), NMT_OK);
    memcpy(h->tok, t, sizeof(int32_t) * h->len);
    uint32_t n;
    assert_int_equal(nmt_session_result_token_logprobs(m->s, i, r, NULL, 0, &n), NMT_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n, h->len + 1);
    assert_int_equal(nmt_session_result_token_logprobs(m->s, i, r, h->lps, MAXT + 1, &n), NMT_OK);
    double sum = 0;
    for (uint32_t p = 0; p < n; p++) sum += h->lps[p];
    assert_float_equal(sum, h->logprob, 1e-4);
}

static void same_tokens(const hyp *a, const hyp *b) {
    assert_int_equal(a->len, b->len);
    assert_memory_equal(a->tok, b->tok, sizeof(int32_t) * a->len);
}

/* The model's V outputs at every position of (src_i, tgt) into rows[p]. */
typedef struct forced_rows {
    float rows[MAXT + 1][VOCAB];
} forced_rows;

static void keep_row(void *user, uint32_t i, uint32_t p, int32_t label, const float *row) {
    (void)i;
    (void)label;
    memcpy(((forced_rows *)user)->rows[p], row, sizeof(float) * VOCAB);
}

static void forced(env *e, model *m, uint32_t i, const hyp *h, int log_softmax, forced_rows *out) {
    const int32_t *tp[1] = {h->tok};
    const nmt_batch src = {srcs + i, src_lens + i, 1}, tgt = {tp, &h->len, 1};
    nmt_test_assert_ok(e->dev, nmt_session_forced(m->s, &src, &tgt, 1, log_softmax, keep_row, out));
}

/* ---- coverage penalty ---------------------------------------------------- */

static void test_coverage_penalty(void **state) {
    env *e = *state;
    model m;
    open_model(e, 1, &m);
    const nmt_batch src = {srcs, src_lens, NSENT};
    static const float betas[] = {0.2f, 1.0f, 5.0f};
    int reordered = 0;
    for (int k = 0; k < 3; k++) {
        const float beta = betas[k];
        nmt_decode_opts o = {.beam = 3, .n_best = 3, .max_len = MAXT, .alpha = 0.6f, .alpha_set = 1};
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
        hyp plain[NSENT][3];
        uint32_t n[NSENT];
        for (uint32_t i = 0; i < NSENT; i++) {
            n[i] = nmt_session_n_results(m.s, i);
            for (uint32_t r = 0; r < n[i]; r++) {
                get(&m, i, r, &plain[i][r]);
                /* the naive penalty from the alignment rows */
                float soft[(MAXT + 1) * 10];
                uint32_t tl, cols;
                assert_int_equal(nmt_session_result_alignment(m.s, i, r, soft, sizeof soft / sizeof soft[0], &tl, &cols),
                                 NMT_OK);
                double cp = 0;
                for (uint32_t j = 0; j + 1 < cols; j++) {
                    double c = 0;
                    for (uint32_t p = 0; p < tl; p++) c += soft[p * cols + j];
                    cp += log(fmax(fmin(c, 1.0), 1e-6));
                }
                plain[i][r].score += (float)(beta * cp);
            }
            for (uint32_t a = 1; a < n[i]; a++) /* stable sort, best first */
                for (uint32_t b = a; b > 0 && plain[i][b].score > plain[i][b - 1].score; b--) {
                    hyp x = plain[i][b];
                    plain[i][b] = plain[i][b - 1];
                    plain[i][b - 1] = x;
                    reordered = 1;
                }
        }
        o.coverage_penalty = beta;
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
        for (uint32_t i = 0; i < NSENT; i++) {
            assert_int_equal(nmt_session_n_results(m.s, i), n[i]);
            for (uint32_t r = 0; r < n[i]; r++) {
                hyp h;
                get(&m, i, r, &h);
                same_tokens(&h, &plain[i][r]);
                assert_float_equal(h.score, plain[i][r].score, 1e-4);
                assert_float_equal(h.logprob, plain[i][r].logprob, 1e-5);
            }
        }
    }
    assert_true(reordered); /* the penalty changed some ranking: the test can see a missing re-sort */
    nmt_decode_opts bad = {.beam = 2, .coverage_penalty = -1.0f};
    assert_int_equal(nmt_session_translate(m.s, &src, &bad), NMT_ERR_INVALID_ARGUMENT);
    bad.coverage_penalty = NAN;
    assert_int_equal(nmt_session_translate(m.s, &src, &bad), NMT_ERR_INVALID_ARGUMENT);
    close_model(&m);
    /* without alignments there is no attention to cover */
    open_model(e, 0, &m);
    const nmt_decode_opts o = {.beam = 2, .coverage_penalty = 0.5f};
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_NO_ALIGNMENTS);
    close_model(&m);
}

/* ---- repetition penalty -------------------------------------------------- */

static void test_repetition_penalty(void **state) {
    env *e = *state;
    model m;
    open_model(e, 0, &m);
    const nmt_batch src = {srcs, src_lens, NSENT};
    static const float pens[] = {1.5f, 3.0f, 0.8f};
    int changed = 0;
    nmt_decode_opts o = {.beam = 1, .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    hyp base[NSENT];
    for (uint32_t i = 0; i < NSENT; i++) get(&m, i, 0, &base[i]);
    for (int k = 0; k < 3; k++) {
        o.repetition_penalty = pens[k];
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
        for (uint32_t i = 0; i < NSENT; i++) {
            hyp h;
            get(&m, i, 0, &h);
            changed |= h.len != base[i].len || memcmp(h.tok, base[i].tok, sizeof(int32_t) * h.len) != 0;
            forced_rows fr;
            forced(e, &m, i, &h, 0, &fr); /* raw logits */
            double sum = 0;
            for (uint32_t p = 0; p <= h.len; p++) {
                double z[VOCAB], mx = -INFINITY, se = 0;
                for (int v = 0; v < VOCAB; v++) {
                    z[v] = fr.rows[p][v];
                    int seen = 0;
                    for (uint32_t j = 0; j < p; j++) seen |= h.tok[j] == v;
                    if (seen) z[v] = z[v] < 0 ? z[v] * pens[k] : z[v] / pens[k];
                    mx = fmax(mx, z[v]);
                }
                for (int v = 0; v < VOCAB; v++) se += exp(z[v] - mx);
                const int32_t y = p < h.len ? h.tok[p] : (int32_t)m.s->info.eos_id;
                if (p < h.len || h.len < MAXT) /* greedy: the chosen token is the argmax */
                    for (int v = 0; v < VOCAB; v++) assert_true(z[y] >= z[v] - 1e-4);
                sum += z[y] - mx - log(se);
            }
            assert_float_equal(h.logprob, sum, 1e-3);
        }
    }
    assert_true(changed);
    o.repetition_penalty = -1.0f;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_INVALID_ARGUMENT);
    o.repetition_penalty = INFINITY;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_INVALID_ARGUMENT);
    close_model(&m);
}

/* ---- sampling ------------------------------------------------------------ */

static void test_sampling(void **state) {
    env *e = *state;
    model m;
    open_model(e, 0, &m);
    const nmt_batch src = {srcs, src_lens, NSENT};
    nmt_decode_opts o = {.sampling = 1, .sampling_topk = 0, .sampling_temperature = 1.5f, .seed = 7,
                         .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    hyp all[NSENT], again[NSENT];
    for (uint32_t i = 0; i < NSENT; i++) get(&m, i, 0, &all[i]);
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    for (uint32_t i = 0; i < NSENT; i++) get(&m, i, 0, &again[i]), same_tokens(&all[i], &again[i]);
    int differs = 0;
    for (uint32_t i = 0; i < NSENT; i++) { /* alone, with seed + i */
        const nmt_batch one = {srcs + i, src_lens + i, 1};
        nmt_decode_opts oi = o;
        oi.seed = o.seed + i;
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &one, &oi));
        hyp h;
        get(&m, 0, 0, &h);
        same_tokens(&h, &all[i]);
        assert_float_equal(h.logprob, all[i].logprob, 1e-4);
        /* the score is the model's log-probability of the sample */
        forced_rows fr;
        forced(e, &m, i, &h, 1, &fr);
        double sum = 0;
        for (uint32_t p = 0; p <= h.len; p++) sum += fr.rows[p][p < h.len ? h.tok[p] : (int32_t)m.s->info.eos_id];
        assert_float_equal(h.logprob, sum, 1e-3);
        oi.seed += 12345;
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &one, &oi));
        get(&m, 0, 0, &h);
        differs |= h.len != all[i].len || memcmp(h.tok, all[i].tok, sizeof(int32_t) * h.len) != 0;
    }
    assert_true(differs);
    /* top-k 1 is greedy */
    o.sampling_topk = 1;
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    for (uint32_t i = 0; i < NSENT; i++) get(&m, i, 0, &all[i]);
    const nmt_decode_opts g = {.beam = 1, .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &g));
    for (uint32_t i = 0; i < NSENT; i++) get(&m, i, 0, &again[i]), same_tokens(&all[i], &again[i]);
    /* bad values */
    o.beam = 2;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_INVALID_ARGUMENT);
    o.beam = 1;
    o.sampling_temperature = -1.0f;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_INVALID_ARGUMENT);
    close_model(&m);
}

/* ---- forced prefix ------------------------------------------------------- */

static void test_prefix(void **state) {
    env *e = *state;
    model m;
    open_model(e, 0, &m);
    const nmt_batch src = {srcs, src_lens, NSENT};
    static const int32_t p0[] = {17, 17, 5}, p2[] = {25};
    const int32_t *pre[NSENT] = {p0, NULL, p2, NULL};
    const uint32_t plen[NSENT] = {3, 0, 1, 0};
    for (uint32_t beam = 1; beam <= 3; beam += 2) {
        nmt_decode_opts o = {.beam = beam, .n_best = beam, .max_len = MAXT};
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
        hyp plain[NSENT];
        for (uint32_t i = 0; i < NSENT; i++) get(&m, i, 0, &plain[i]);
        o.prefix = pre;
        o.prefix_len = plen;
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
        hyp res[NSENT][3]; /* copied first: scoring ends the results */
        uint32_t n[NSENT];
        for (uint32_t i = 0; i < NSENT; i++) {
            n[i] = nmt_session_n_results(m.s, i);
            assert_true(n[i] >= 1);
            for (uint32_t r = 0; r < n[i]; r++) get(&m, i, r, &res[i][r]);
        }
        for (uint32_t i = 0; i < NSENT; i++) {
            if (plen[i] == 0) same_tokens(&res[i][0], &plain[i]); /* no prefix: as without */
            for (uint32_t r = 0; r < n[i]; r++) {
                const hyp h = res[i][r];
                assert_true(h.len >= plen[i]);
                if (plen[i]) assert_memory_equal(h.tok, pre[i], sizeof(int32_t) * plen[i]);
                float lp;
                const int32_t *tp[1] = {h.tok};
                const nmt_batch s1 = {srcs + i, src_lens + i, 1}, t1 = {tp, &h.len, 1};
                nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &s1, &t1, &lp));
                assert_float_equal(h.logprob, lp, 1e-3);
                if (beam > 1) continue;
                forced_rows fr; /* greedy after the prefix */
                forced(e, &m, i, &h, 1, &fr);
                for (uint32_t p = 0; p <= h.len; p++) /* per-token log-probabilities */
                    assert_float_equal(h.lps[p], fr.rows[p][p < h.len ? h.tok[p] : (int32_t)m.s->info.eos_id], 1e-4);
                for (uint32_t p = plen[i]; p <= h.len; p++) {
                    if (p == h.len && h.len == MAXT) break; /* EOS forced by the limit */
                    const int32_t y = p < h.len ? h.tok[p] : (int32_t)m.s->info.eos_id;
                    for (int v = 0; v < VOCAB; v++) assert_true(fr.rows[p][y] >= fr.rows[p][v] - 1e-4);
                }
            }
        }
    }
    /* bad prefixes */
    static const int32_t bad_tok[] = {VOCAB};
    static const int32_t longp[MAXT + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int32_t *bp[NSENT] = {bad_tok, NULL, NULL, NULL};
    uint32_t bl[NSENT] = {1, 0, 0, 0};
    nmt_decode_opts o = {.beam = 1, .prefix = bp, .prefix_len = bl};
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_TOKEN_OUT_OF_RANGE);
    bp[0] = longp;
    bl[0] = MAXT + 1;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_INPUT_TOO_LONG);
    bl[0] = MAXT; /* exactly the limit: the prefix, then EOS */
    nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &o));
    hyp h;
    get(&m, 0, 0, &h);
    assert_int_equal(h.len, MAXT);
    const char *texts[1] = {"x"};
    const size_t tl[1] = {1};
    o.prefix_text = texts;
    o.prefix_text_len = tl;
    assert_int_equal(nmt_session_translate(m.s, &src, &o), NMT_ERR_INVALID_ARGUMENT);
    close_model(&m);
}

/* ---- optional plans -------------------------------------------------------- */

/* Per-token log-probabilities and the sampling scratch cost arena memory
 * only when the session asks for them (exactly their buffers: 3 * R * T
 * floats; V candidates of 8 bytes + a 64-bit state per sentence), a session
 * without them refuses those requests with NMT_ERR_LIMIT_EXCEEDED, and its
 * searches give the same results. */
static void test_optional_plans(void **state) {
    env *e = *state;
    model full, bare, lp_only;
    open_model_with(e, 0, 1, 1, &full);
    open_model_with(e, 0, 0, 0, &bare);
    open_model_with(e, 0, 1, 0, &lp_only);
    const size_t a_full = nmt_session_arena_used(full.s), a_bare = nmt_session_arena_used(bare.s),
                 a_lp = nmt_session_arena_used(lp_only.s);
    const size_t R = (size_t)limits.max_batch * limits.max_beam, T = MAXT + 1;
    const size_t lp_bytes = 3 * R * T * sizeof(float), samp_bytes = VOCAB * 8 + (size_t)limits.max_batch * 8;
    assert_true(a_lp - a_bare >= lp_bytes && a_lp - a_bare < lp_bytes + 3 * 64); /* alignment padding */
    assert_true(a_full - a_lp >= samp_bytes && a_full - a_lp < samp_bytes + 2 * 64);
    assert_null(bare.s->beam.lp_hist);
    assert_null(bare.s->beam.pool);
    const nmt_batch src = {srcs, src_lens, NSENT};
    const nmt_decode_opts o = {.beam = 3, .n_best = 2, .max_len = MAXT};
    nmt_test_assert_ok(e->dev, nmt_session_translate(full.s, &src, &o));
    nmt_test_assert_ok(e->dev, nmt_session_translate(bare.s, &src, &o));
    for (uint32_t i = 0; i < NSENT; i++) {
        assert_int_equal(nmt_session_n_results(bare.s, i), nmt_session_n_results(full.s, i));
        for (uint32_t r = 0; r < nmt_session_n_results(full.s, i); r++) {
            hyp h;
            get(&full, i, r, &h);
            const int32_t *t;
            uint32_t len, n = 99;
            float score, logprob, lp[MAXT + 1];
            assert_int_equal(nmt_session_result(bare.s, i, r, &t, &len, &score, &logprob), NMT_OK);
            assert_int_equal(len, h.len);
            assert_memory_equal(t, h.tok, sizeof(int32_t) * len);
            assert_true(score == h.score && logprob == h.logprob);
            assert_int_equal(nmt_session_result_token_logprobs(bare.s, i, r, lp, MAXT + 1, &n),
                             NMT_ERR_LIMIT_EXCEEDED);
        }
    }
    const nmt_decode_opts so = {.sampling = 1, .seed = 3, .max_len = MAXT};
    assert_int_equal(nmt_session_translate(bare.s, &src, &so), NMT_ERR_LIMIT_EXCEEDED);
    assert_int_equal(nmt_session_translate(lp_only.s, &src, &so), NMT_ERR_LIMIT_EXCEEDED);
    nmt_test_assert_ok(e->dev, nmt_session_translate(full.s, &src, &so));
    close_model(&lp_only);
    close_model(&bare);
    close_model(&full);
}

/* ---- device top-k ----------------------------------------------------------- */

/* The search reading k candidates per row (cl/topk.cl) gives the results of
 * the search reading every log-probability (the same session with the
 * kernel taken away), bit for bit: greedy, beam 3 with 3-best lists, a
 * minimum length, alignments on. */
static void test_device_topk(void **state) {
    env *e = *state;
    model m;
    open_model(e, 1, &m);
    assert_non_null(m.s->ops.k_topk); /* the default path of this device */
    const nmt_batch src = {srcs, src_lens, NSENT};
    const nmt_decode_opts opts[] = {
        {.beam = 1, .max_len = MAXT},
        {.beam = 3, .n_best = 3, .max_len = MAXT, .alpha = 0.6f, .alpha_set = 1},
        {.beam = 3, .n_best = 2, .max_len = MAXT, .min_len = 3},
    };
    for (size_t c = 0; c < NMT_ARRAY_LEN(opts); c++) {
        hyp top[NSENT][3], full[NSENT][3];
        uint32_t n[NSENT];
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &opts[c]));
        for (uint32_t i = 0; i < NSENT; i++) {
            n[i] = nmt_session_n_results(m.s, i);
            for (uint32_t r = 0; r < n[i]; r++) get(&m, i, r, &top[i][r]);
        }
        const cl_kernel k = m.s->ops.k_topk;
        m.s->ops.k_topk = NULL;
        nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, &src, &opts[c]));
        m.s->ops.k_topk = k;
        for (uint32_t i = 0; i < NSENT; i++) {
            assert_int_equal(nmt_session_n_results(m.s, i), n[i]);
            for (uint32_t r = 0; r < n[i]; r++) {
                get(&m, i, r, &full[i][r]);
                same_tokens(&top[i][r], &full[i][r]);
                assert_true(top[i][r].score == full[i][r].score && top[i][r].logprob == full[i][r].logprob);
                assert_memory_equal(top[i][r].lps, full[i][r].lps, sizeof(float) * (full[i][r].len + 1));
            }
        }
    }
    close_model(&m);
}

/* Steps chained on the device (session.c decode_chained: the device
 * writes each step's inputs — at beam 1 the top-k kernel, wider
 * beam_advance and the K|V table's permutation — and the host ranks a step
 * behind) against the same session ranking every step before the next
 * (chain_steps cleared), bit for bit, n-best lists too: beams 1, 2 and 3,
 * batches of 4 and 1, the default and shorter length limits, a minimum
 * length (EOS barred, k = 2K + 1), a minimum length reaching the limit,
 * and a length penalty.  The chained path must have run. */
static void test_chained_steps(void **state) {
    env *e = *state;
    model m;
    open_model(e, 0, &m);
    const nmt_batch all = {srcs, src_lens, NSENT}, one = {srcs + 2, src_lens + 2, 1};
    const nmt_batch *batches[] = {&all, &one};
    const nmt_decode_opts opts[] = {
        {.beam = 1},
        {.beam = 1, .max_len = 2},
        {.beam = 1, .max_len = MAXT, .min_len = 3},
        {.beam = 1, .max_len = 5, .min_len = 5},
        {.beam = 3, .n_best = 3, .max_len = MAXT},
        {.beam = 3, .n_best = 2, .max_len = MAXT, .min_len = 3, .alpha = 1.0f, .alpha_set = 1},
        {.beam = 2, .n_best = 2, .max_len = 4, .min_len = 4, .alpha = 0.0f, .alpha_set = 1},
        {.beam = 3, .n_best = 1},
    };
    for (size_t bi = 0; bi < NMT_ARRAY_LEN(batches); bi++)
        for (size_t c = 0; c < NMT_ARRAY_LEN(opts); c++) {
            const nmt_batch *src = batches[bi];
            hyp chained[NSENT][3], host[NSENT][3];
            uint32_t n[NSENT];
            m.s->steps_chained = 0;
            nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, src, &opts[c]));
            assert_true(m.s->steps_chained > 0);
            for (uint32_t i = 0; i < src->n; i++) {
                n[i] = nmt_session_n_results(m.s, i);
                assert_true(n[i] >= 1 && n[i] <= opts[c].n_best + (opts[c].n_best == 0));
                for (uint32_t r = 0; r < n[i]; r++) get(&m, i, r, &chained[i][r]);
            }
            m.s->chain_steps = 0;
            m.s->steps_chained = 0;
            nmt_test_assert_ok(e->dev, nmt_session_translate(m.s, src, &opts[c]));
            m.s->chain_steps = 1;
            assert_int_equal(m.s->steps_chained, 0);
            for (uint32_t i = 0; i < src->n; i++) {
                assert_int_equal(nmt_session_n_results(m.s, i), n[i]);
                for (uint32_t r = 0; r < n[i]; r++) {
                    get(&m, i, r, &host[i][r]);
                    same_tokens(&chained[i][r], &host[i][r]);
                    assert_true(chained[i][r].score == host[i][r].score &&
                                chained[i][r].logprob == host[i][r].logprob);
                    assert_memory_equal(chained[i][r].lps, host[i][r].lps, sizeof(float) * (host[i][r].len + 1));
                    if (opts[c].min_len)
                        assert_true(host[i][r].len >= NMT_MIN(opts[c].min_len, opts[c].max_len));
                }
            }
        }
    close_model(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optional_plans),
        cmocka_unit_test(test_device_topk),
        cmocka_unit_test(test_chained_steps),
        cmocka_unit_test(test_coverage_penalty),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_prefix),
    };
    return cmocka_run_group_tests(tests, nmt_test_dev_setup, nmt_test_dev_teardown);
}
