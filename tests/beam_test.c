/* beam_test.c — beam search (runtime/beam.c) against hand-built
 * distributions whose best hypotheses are known, with no device involved:
 * the "model" is a table of next-token probabilities keyed by the prefix. */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_takes_local_best),
        cmocka_unit_test(test_beam_finds_global_best),
        cmocka_unit_test(test_beam3_nbest_order),
        cmocka_unit_test(test_length_penalty_ranks_by_normalised_score),
        cmocka_unit_test(test_max_len_forces_eos),
        cmocka_unit_test(test_batch_sentences_are_independent),
        cmocka_unit_test(test_start_rejects_bad_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
