/* SPDX-License-Identifier: MIT */
/* beam_test.c — beam search (runtime/session/beam.c) against hand-built
 * distributions whose best hypotheses are known, with no device involved:
 * the "model" is a table of next-token probabilities keyed by the prefix;
 * and the search fed each row's top-k candidates against the search fed
 * the whole distribution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beam.h"

enum { PAD = 0, A = 1, B = 2, EOS = 3, V = 4 };

/* Prefix -> distribution over {PAD, A, B, EOS}.  Greedy takes A (0.5) then
 * EOS (0.4): p = 0.20.  The best sequence is B EOS: 0.4 * 0.95 = 0.38. */
static void toy_dist(const int32_t *prefix, uint32_t t, double *p) {
    p[PAD] = 0.0;
    if (t == 0) {
        p[A] = 0.5; p[B] = 0.4; p[EOS] = 0.1;
    } else if (prefix[t - 1] == A) {
        p[A] = 0.3; p[B] = 0.3; p[EOS] = 0.4;
    } else if (prefix[t - 1] == B) {
        p[A] = 0.03; p[B] = 0.02; p[EOS] = 0.95;
    } else {
        p[A] = 0.25; p[B] = 0.25; p[EOS] = 0.5;
    }
}

/* A second sentence whose distribution prefers long outputs: A A A ... */
static void long_dist(const int32_t *prefix, uint32_t t, double *p) {
    (void)prefix;
    p[PAD] = 0.0;
    p[A] = t < 3 ? 0.9 : 0.2;
    p[B] = 0.05;
    p[EOS] = t < 3 ? 0.05 : 0.75;
}

typedef void (*dist_fn)(const int32_t *prefix, uint32_t t, double *p);

typedef struct fixture {
    nmt_beam b;
    void *mem;
    float *lp;
} fixture;

static fixture *make(uint32_t batch, uint32_t beam, uint32_t steps) {
    fixture *f = calloc(1, sizeof *f);
    nmt_arena a;
    nmt_arena_init_measure(&a);
    nmt_beam probe;
    assert_int_equal(nmt_beam_plan(&probe, &a, batch, beam, steps), NMT_OK);
    size_t need = nmt_arena_required(&a);
    f->mem = aligned_alloc(NMT_ARENA_ALIGN, (need + NMT_ARENA_ALIGN) / NMT_ARENA_ALIGN * NMT_ARENA_ALIGN);
    nmt_arena_init(&a, f->mem, need);
    assert_int_equal(nmt_beam_plan(&f->b, &a, batch, beam, steps), NMT_OK);
    assert_int_equal(a.high, need); /* planning is exact */
    f->lp = calloc((size_t)batch * beam * V, sizeof(float));
    return f;
}

static void destroy(fixture *f) {
    free(f->mem);
    free(f->lp);
    free(f);
}

/* Run the search with one distribution per sentence. */
static void run(fixture *f, uint32_t n, uint32_t K, float alpha, const uint32_t *max_len,
                dist_fn const *dists) {
    nmt_beam *b = &f->b;
    assert_int_equal(nmt_beam_start(b, n, K, V, EOS, PAD, alpha, max_len), NMT_OK);
    for (uint32_t t = 0; t < b->max_steps; t++) {
        for (uint32_t r = 0; r < n * K; r++) {
            double p[V];
            dists[r / K](b->hist + (size_t)r * b->max_steps, t, p);
            for (int v = 0; v < V; v++) f->lp[r * V + v] = p[v] > 0 ? (float)log(p[v]) : -INFINITY;
        }
        if (nmt_beam_advance(b, t, f->lp)) return;
    }
    fail_msg("search did not finish within max_steps");
}

static void expect_hyp(const nmt_beam *b, uint32_t i, uint32_t rank, const int32_t *toks, uint32_t len,
                       double prob, float alpha) {
    const nmt_hyp *h = nmt_beam_result(b, i, rank);
    assert_non_null(h);
    assert_int_equal(h->len, len);
    for (uint32_t j = 0; j < len; j++) assert_int_equal(h->tokens[j], toks[j]);
    assert_float_equal(h->logprob, log(prob), 1e-5);
    assert_float_equal(h->score, log(prob) / pow((5.0 + len + 1) / 6.0, alpha), 1e-5);
}

static void test_greedy_takes_local_best(void **state) {
    (void)state;
    fixture *f = make(1, 4, 8);
    uint32_t ml[1] = {6};
    dist_fn d[1] = {toy_dist};
    run(f, 1, 1, 0.0f, ml, d);
    static const int32_t a[] = {A};
    expect_hyp(&f->b, 0, 0, a, 1, 0.5 * 0.4, 0.0f);
    assert_int_equal(nmt_beam_n_results(&f->b, 0), 1);
    destroy(f);
}

static void test_beam_finds_global_best(void **state) {
    (void)state;
    fixture *f = make(1, 4, 8);
    uint32_t ml[1] = {6};
    dist_fn d[1] = {toy_dist};
    run(f, 1, 2, 0.0f, ml, d);
    static const int32_t b1[] = {B}, a1[] = {A};
    expect_hyp(&f->b, 0, 0, b1, 1, 0.4 * 0.95, 0.0f);
    expect_hyp(&f->b, 0, 1, a1, 1, 0.5 * 0.4, 0.0f);
    destroy(f);
}

static void test_beam3_nbest_order(void **state) {
    (void)state;
    fixture *f = make(1, 4, 8);
    uint32_t ml[1] = {6};
    dist_fn d[1] = {toy_dist};
    run(f, 1, 3, 0.0f, ml, d);
    /* t=0: EOS (0.1) is rank 2 < K=3 -> finished "" with p 0.1.  Live: A, B.
     * t=1: candidates B EOS .38, A EOS .2, A A .15, A B .15 ... -> finish
     * B, A: three finished -> done. */
    static const int32_t b1[] = {B}, a1[] = {A};
    expect_hyp(&f->b, 0, 0, b1, 1, 0.38, 0.0f);
    expect_hyp(&f->b, 0, 1, a1, 1, 0.20, 0.0f);
    expect_hyp(&f->b, 0, 2, NULL, 0, 0.10, 0.0f);
    assert_null(nmt_beam_result(&f->b, 0, 3));
    destroy(f);
}

static void test_length_penalty_ranks_by_normalised_score(void **state) {
    (void)state;
    fixture *f = make(1, 4, 8);
    uint32_t ml[1] = {6};
    dist_fn d[1] = {toy_dist};
    const float alpha = 0.6f;
    run(f, 1, 3, alpha, ml, d);
    /* normalised: B EOS: ln .38 / ((5+2)/6)^.6 = -0.881; "": ln .1 / 1 = -2.30 */
    const nmt_hyp *h0 = nmt_beam_result(&f->b, 0, 0), *h2 = nmt_beam_result(&f->b, 0, 2);
    assert_true(h0->score >= nmt_beam_result(&f->b, 0, 1)->score);
    assert_true(nmt_beam_result(&f->b, 0, 1)->score >= h2->score);
    assert_float_equal(h0->score, log(0.38) / pow(7.0 / 6.0, 0.6), 1e-5);
    destroy(f);
}

static void test_max_len_forces_eos(void **state) {
    (void)state;
    fixture *f = make(1, 2, 8);
    uint32_t ml[1] = {2};
    dist_fn d[1] = {long_dist};
    run(f, 1, 1, 0.0f, ml, d);
    /* greedy wants A A A ..., stopped after 2 tokens with a forced EOS */
    static const int32_t aa[] = {A, A};
    expect_hyp(&f->b, 0, 0, aa, 2, 0.9 * 0.9 * 0.05, 0.0f);
    destroy(f);
}

static void test_batch_sentences_are_independent(void **state) {
    (void)state;
    fixture *f = make(3, 2, 10);
    uint32_t ml[3] = {6, 8, 6};
    dist_fn d[3] = {toy_dist, long_dist, toy_dist};
    run(f, 3, 2, 0.0f, ml, d);
    static const int32_t b1[] = {B}, aaa[] = {A, A, A};
    expect_hyp(&f->b, 0, 0, b1, 1, 0.38, 0.0f);
    expect_hyp(&f->b, 1, 0, aaa, 3, 0.9 * 0.9 * 0.9 * 0.75, 0.0f);
    expect_hyp(&f->b, 2, 0, b1, 1, 0.38, 0.0f);
    /* the same results as running each sentence alone */
    fixture *g = make(1, 2, 10);
    dist_fn d1[1] = {long_dist};
    uint32_t ml1[1] = {8};
    run(g, 1, 2, 0.0f, ml1, d1);
    for (uint32_t r = 0; r < 2; r++) {
        const nmt_hyp *x = nmt_beam_result(&f->b, 1, r), *y = nmt_beam_result(&g->b, 0, r);
        assert_int_equal(x->len, y->len);
        assert_memory_equal(x->tokens, y->tokens, sizeof(int32_t) * x->len);
        assert_float_equal(x->logprob, y->logprob, 0);
    }
    destroy(g);
    destroy(f);
}

static void test_start_rejects_bad_limits(void **state) {
    (void)state;
    fixture *f = make(2, 2, 4);
    uint32_t ml[3] = {1, 1, 1};
    assert_int_equal(nmt_beam_start(&f->b, 3, 1, V, EOS, PAD, 0, ml), NMT_ERR_LIMIT_EXCEEDED);
    assert_int_equal(nmt_beam_start(&f->b, 1, 3, V, EOS, PAD, 0, ml), NMT_ERR_LIMIT_EXCEEDED);
    assert_int_equal(nmt_beam_start(&f->b, 1, 1, V, V, PAD, 0, ml), NMT_ERR_LIMIT_EXCEEDED);
    uint32_t too_long[1] = {4}; /* needs 5 steps */
    assert_int_equal(nmt_beam_start(&f->b, 1, 1, V, EOS, PAD, 0, too_long), NMT_ERR_LIMIT_EXCEEDED);
    destroy(f);
}

/* Run with constraints (min_len, no_repeat) after nmt_beam_start. */
static void run_constrained(fixture *f, uint32_t K, uint32_t max_len, uint32_t min_len, uint32_t no_repeat,
                            dist_fn d) {
    nmt_beam *b = &f->b;
    uint32_t ml[1] = {max_len};
    assert_int_equal(nmt_beam_start(b, 1, K, V, EOS, PAD, 0.0f, ml), NMT_OK);
    nmt_beam_constrain(b, min_len, no_repeat);
    for (uint32_t t = 0; t < b->max_steps; t++) {
        for (uint32_t r = 0; r < K; r++) {
            double p[V];
            d(b->hist + (size_t)r * b->max_steps, t, p);
            for (int v = 0; v < V; v++) f->lp[r * V + v] = p[v] > 0 ? (float)log(p[v]) : -INFINITY;
        }
        if (nmt_beam_advance(b, t, f->lp)) return;
    }
    fail_msg("search did not finish within max_steps");
}

/* min_len: greedy A, then EOS (0.4) is refused at step 1 and the tie
 * A / B (0.3) goes to the lower id; at step 2 EOS is allowed. */
static void test_min_len(void **state) {
    (void)state;
    fixture *f = make(1, 4, 8);
    run_constrained(f, 1, 6, 2, 0, toy_dist);
    static const int32_t a[] = {A, A};
    expect_hyp(&f->b, 0, 0, a, 2, 0.5 * 0.3 * 0.4, 0.0f);
    /* the length limit wins over min_len: EOS forced at max_len 1 */
    run_constrained(f, 1, 1, 5, 0, toy_dist);
    static const int32_t b1[] = {A};
    expect_hyp(&f->b, 0, 0, b1, 1, 0.5 * 0.4, 0.0f);
    destroy(f);
}

/* no_repeat: long_dist wants A A A ...; bigrams: A A, then A again would
 * repeat "A A", so B (tied with EOS, lower id), then EOS; unigrams: A, B
 * (A used), then only EOS is left. */
static void test_no_repeat_ngram(void **state) {
    (void)state;
    fixture *f = make(1, 4, 8);
    run_constrained(f, 1, 6, 0, 2, long_dist);
    static const int32_t two[] = {A, A, B};
    expect_hyp(&f->b, 0, 0, two, 3, 0.9 * 0.9 * 0.05 * 0.75, 0.0f);
    run_constrained(f, 1, 6, 0, 1, long_dist);
    static const int32_t one[] = {A, B};
    expect_hyp(&f->b, 0, 0, one, 2, 0.9 * 0.05 * 0.05, 0.0f);
    destroy(f);
}

/* Only A is possible and both constraints forbid everything after it:
 * the hypothesis ends there (EOS allowed as the last resort). */
static void only_a(const int32_t *prefix, uint32_t t, double *p) {
    (void)prefix;
    (void)t;
    p[PAD] = p[B] = p[EOS] = 0.0;
    p[A] = 1.0;
}

static void test_constraints_leave_nothing(void **state) {
    (void)state;
    fixture *f = make(1, 2, 8);
    run_constrained(f, 2, 6, 4, 1, only_a);
    const nmt_hyp *h = nmt_beam_result(&f->b, 0, 0);
    assert_non_null(h);
    assert_int_equal(h->len, 1);
    assert_int_equal(h->tokens[0], A);
    destroy(f);
}

/* Random first-order tables (the next token depends on the last one): greedy
 * with constraints equals a naive greedy with the same rules, and beam 3's
 * finished hypotheses all obey them. */
static double g_table[V + 1][V];
static void table_dist(const int32_t *prefix, uint32_t t, double *p) {
    const int last = t == 0 ? V : prefix[t - 1];
    for (int v = 0; v < V; v++) p[v] = g_table[last][v];
}

static int repeats(const int32_t *h, uint32_t len, uint32_t n) {
    for (uint32_t i = 0; i + n <= len; i++)
        for (uint32_t j = i + 1; j + n <= len; j++)
            if (memcmp(h + i, h + j, sizeof(int32_t) * n) == 0) return 1;
    return 0;
}

static void test_constraints_against_naive(void **state) {
    (void)state;
    fixture *f = make(1, 3, 12);
    uint64_t seed = 12345;
    for (int trial = 0; trial < 200; trial++) {
        for (int a = 0; a <= V; a++) {
            double sum = 0;
            for (int v = 0; v < V; v++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                g_table[a][v] = v == PAD ? 0.0 : 0.05 + (double)(seed >> 40) / (double)(1ull << 24);
                sum += g_table[a][v];
            }
            for (int v = 0; v < V; v++) g_table[a][v] /= sum;
        }
        const uint32_t max_len = 3 + (uint32_t)(trial % 6), min_len = (uint32_t)(trial % 4),
                       no_repeat = (uint32_t)(trial % 3);
        run_constrained(f, 1, max_len, min_len, no_repeat, table_dist);
        /* naive greedy: the best allowed token each step, lowest id on ties */
        int32_t want[16];
        uint32_t len = 0;
        double lp = 0;
        for (uint32_t t = 0;; t++) {
            double p[V];
            table_dist(want, t, p);
            int best = -1;
            for (int v = 0; v < V; v++) {
                if (p[v] <= 0 || (t < min_len && t < max_len && v == EOS) || (t >= max_len && v != EOS)) continue;
                int banned = 0;
                if (no_repeat && t + 1 >= no_repeat && v != EOS) {
                    want[t] = v;
                    banned = repeats(want, t + 1, no_repeat);
                }
                if (!banned && (best < 0 || (float)log(p[v]) > (float)log(p[best]))) best = v;
            }
            if (best < 0) best = EOS; /* nothing allowed: end here */
            lp += (float)log(p[best]);
            if (best == EOS) break;
            want[len++] = best;
        }
        const nmt_hyp *h = nmt_beam_result(&f->b, 0, 0);
        assert_non_null(h);
        assert_int_equal(h->len, len);
        assert_memory_equal(h->tokens, want, sizeof(int32_t) * len);
        assert_float_equal(h->logprob, lp, 1e-4);
        run_constrained(f, 3, max_len, min_len, no_repeat, table_dist);
        for (uint32_t r = 0; r < nmt_beam_n_results(&f->b, 0); r++) {
            h = nmt_beam_result(&f->b, 0, r);
            if (no_repeat) assert_false(repeats(h->tokens, h->len, no_repeat));
            /* shorter than min_len only when the constraints leave nothing else:
             * with unigrams banned, A and B (PAD has p = 0) give 2 tokens at most */
            uint32_t reach = min_len < max_len ? min_len : max_len;
            if (no_repeat == 1 && reach > 2) reach = 2;
            assert_true(h->len >= reach);
            assert_true(h->len <= max_len);
        }
    }
    destroy(f);
}

/* ---- top-k input (nmt_beam_advance_topk) ---------------------------------- */

#define TV 37u    /* vocabulary of the top-k cases */
#define TSTEPS 9u

static uint64_t mixh(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A row's log-probabilities from its sentence and history alone; logits on
 * a coarse grid so that equal log-probabilities (ties) are common. */
static void row_lp(uint32_t sent, const int32_t *hist, uint32_t t, float *lp) {
    uint64_t h = mixh(sent + 1);
    for (uint32_t j = 0; j < t; j++) h = mixh(h ^ (uint64_t)(hist[j] + 7));
    float z[TV], mx = -INFINITY;
    for (uint32_t v = 0; v < TV; v++) {
        h = mixh(h + v);
        z[v] = (float)(h % 9) * 0.5f;
        mx = z[v] > mx ? z[v] : mx;
    }
    double sum = 0;
    for (uint32_t v = 0; v < TV; v++) sum += exp((double)z[v] - mx);
    const float lse = mx + (float)log(sum);
    for (uint32_t v = 0; v < TV; v++) lp[v] = z[v] - lse;
}

static nmt_beam *plan_topk_beam(void **mem, uint32_t batch, uint32_t beam) {
    nmt_arena a;
    nmt_beam probe;
    nmt_arena_init_measure(&a);
    assert_int_equal(nmt_beam_plan(&probe, &a, batch, beam, TSTEPS), NMT_OK);
    assert_int_equal(nmt_beam_plan_token_lp(&probe, &a), NMT_OK);
    const size_t need = nmt_arena_required(&a) + sizeof(nmt_beam);
    *mem = aligned_alloc(NMT_ARENA_ALIGN, (need + NMT_ARENA_ALIGN) / NMT_ARENA_ALIGN * NMT_ARENA_ALIGN);
    nmt_beam *b = calloc(1, sizeof *b);
    nmt_arena_init(&a, *mem, need);
    assert_int_equal(nmt_beam_plan(b, &a, batch, beam, TSTEPS), NMT_OK);
    assert_int_equal(nmt_beam_plan_token_lp(b, &a), NMT_OK);
    return b;
}

/* The naive top-k of one row: every id with a non-NaN key score + lp,
 * sorted by key descending then id ascending, the first k (id -1 beyond);
 * a dead row (score -inf) has none. */
static void naive_topk(float score, const float *lp, uint32_t k, float *out_lp, int32_t *out_id) {
    uint32_t n = 0;
    int32_t ids[TV];
    if (score > -INFINITY)
        for (uint32_t v = 0; v < TV; v++)
            if (score + lp[v] == score + lp[v]) ids[n++] = (int32_t)v;
    for (uint32_t i = 1; i < n; i++) { /* insertion sort, stable on ids */
        const int32_t x = ids[i];
        uint32_t j = i;
        while (j > 0 && score + lp[x] > score + lp[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = x;
    }
    for (uint32_t i = 0; i < k; i++) {
        out_id[i] = i < n ? ids[i] : -1;
        out_lp[i] = i < n ? lp[ids[i]] : -INFINITY;
    }
}

/* The search given only each row's nmt_beam_topk_width best candidates
 * equals the search over the whole distribution, step by step (tokens,
 * back-pointers, scores) and in its results, bit for bit: beams 1-5, a
 * batch whose sentences end at different steps, ties everywhere, min_len
 * (EOS barred: one candidate more), and the widths of the options that
 * need the whole distribution (0). */
static void test_topk_equals_full(void **state) {
    (void)state;
    enum { N = 3 };
    static const uint32_t beams[] = {1, 2, 4, 5};
    for (size_t bi = 0; bi < sizeof beams / sizeof beams[0]; bi++)
        for (uint32_t min_len = 0; min_len <= 3; min_len += 3) {
            const uint32_t K = beams[bi], R = N * K;
            void *m1, *m2;
            nmt_beam *full = plan_topk_beam(&m1, N, K), *top = plan_topk_beam(&m2, N, K);
            const uint32_t ml[N] = {TSTEPS - 1, 3, 5};
            assert_int_equal(nmt_beam_start(full, N, K, TV, EOS, PAD, 0.6f, ml), NMT_OK);
            assert_int_equal(nmt_beam_start(top, N, K, TV, EOS, PAD, 0.6f, ml), NMT_OK);
            nmt_beam_constrain(full, min_len, 0);
            nmt_beam_constrain(top, min_len, 0);
            float lp[N * 5 * TV], klp[N * 5 * 12], eos[N * 5];
            int32_t kid[N * 5 * 12];
            int done = 0;
            for (uint32_t t = 0; t < TSTEPS && !done; t++) {
                const uint32_t k = nmt_beam_topk_width(top, t);
                assert_int_equal(k, 2 * K + (t < min_len ? 1 : 0));
                for (uint32_t r = 0; r < R; r++) {
                    row_lp(r / K, full->hist + (size_t)r * TSTEPS, t, lp + (size_t)r * TV);
                    naive_topk(top->score[r], lp + (size_t)r * TV, k, klp + (size_t)r * k, kid + (size_t)r * k);
                    eos[r] = lp[(size_t)r * TV + EOS];
                }
                done = nmt_beam_advance(full, t, lp);
                assert_int_equal(nmt_beam_advance_topk(top, t, klp, kid, k, eos), done);
                assert_memory_equal(top->next_tok, full->next_tok, sizeof(int32_t) * R);
                assert_memory_equal(top->back, full->back, sizeof(int32_t) * R);
                assert_memory_equal(top->score, full->score, sizeof(float) * R);
            }
            assert_true(done);
            for (uint32_t i = 0; i < N; i++) {
                assert_int_equal(nmt_beam_n_results(top, i), nmt_beam_n_results(full, i));
                for (uint32_t r = 0; r < nmt_beam_n_results(full, i); r++) {
                    const nmt_hyp *a = nmt_beam_result(full, i, r), *c = nmt_beam_result(top, i, r);
                    assert_int_equal(c->len, a->len);
                    assert_memory_equal(c->tokens, a->tokens, sizeof(int32_t) * a->len);
                    assert_memory_equal(c->token_lp, a->token_lp, sizeof(float) * (a->len + 1));
                    assert_true(c->score == a->score && c->logprob == a->logprob);
                }
            }
            /* options that need every log-probability */
            nmt_beam_constrain(top, 0, 2);
            assert_int_equal(nmt_beam_topk_width(top, 0), 0);
            nmt_beam_constrain(top, 0, 0);
            nmt_beam_set_repetition(top, 1.2f);
            assert_int_equal(nmt_beam_topk_width(top, 0), 0);
            nmt_beam_set_repetition(top, 1.0f);
            const int32_t p0[1] = {A}, *pp[N] = {p0, p0, p0};
            const uint32_t pl[N] = {0, 1, 0};
            nmt_beam_set_prefix(top, pp, pl);
            assert_int_equal(nmt_beam_topk_width(top, 0), 0);
            assert_int_equal(nmt_beam_topk_width(top, 1), 2 * K);
            free(full);
            free(top);
            free(m1);
            free(m2);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_takes_local_best),
        cmocka_unit_test(test_beam_finds_global_best),
        cmocka_unit_test(test_beam3_nbest_order),
        cmocka_unit_test(test_length_penalty_ranks_by_normalised_score),
        cmocka_unit_test(test_max_len_forces_eos),
        cmocka_unit_test(test_batch_sentences_are_independent),
        cmocka_unit_test(test_start_rejects_bad_limits),
        cmocka_unit_test(test_min_len),
        cmocka_unit_test(test_no_repeat_ngram),
        cmocka_unit_test(test_constraints_leave_nothing),
        cmocka_unit_test(test_constraints_against_naive),
        cmocka_unit_test(test_topk_equals_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
