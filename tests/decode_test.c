/* SPDX-License-Identifier: MIT */
/* decode_test.c — the decoding options of runtime/session/beam.c (repetition
 * penalty, random top-k sampling, forced target prefix, re-ranking) against
 * naive references on random first-order logit tables, with no device: the
 * "model" gives each row logits keyed by its last token.  The session-level
 * wiring and the coverage penalty are tested on a real model in
 * decode_session_test.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beam.h"

enum { V = 8, EOS = 3, BOS = 0, MAX_STEPS = 16, MAX_BATCH = 4, MAX_BEAM = 3 };

/* logits[s][last][v]: sentence s's next-token logits after token `last`
 * (last = V: the first step). */
static float g_logits[MAX_BATCH][V + 1][V];
static uint64_t g_lcg = 987654321;

static double rnd(void) {
    g_lcg = g_lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_lcg >> 11) * 0x1.0p-53;
}

static void random_tables(void) {
    for (int s = 0; s < MAX_BATCH; s++)
        for (int a = 0; a <= V; a++)
            for (int v = 0; v < V; v++) g_logits[s][a][v] = (float)(6.0 * rnd() - 3.0);
}

typedef struct fixture {
    nmt_beam b;
    void *mem;
    float *lp; /* (MAX_BATCH * MAX_BEAM, V) */
} fixture;

static fixture *make(void) {
    fixture *f = calloc(1, sizeof *f);
    nmt_arena a;
    nmt_beam probe;
    nmt_arena_init_measure(&a);
    assert_int_equal(nmt_beam_plan(&probe, &a, MAX_BATCH, MAX_BEAM, MAX_STEPS), NMT_OK);
    assert_int_equal(nmt_beam_plan_vocab(&probe, &a, V), NMT_OK);
    assert_int_equal(nmt_beam_plan_token_lp(&probe, &a), NMT_OK);
    const size_t need = nmt_arena_required(&a);
    f->mem = aligned_alloc(NMT_ARENA_ALIGN, (need + NMT_ARENA_ALIGN) / NMT_ARENA_ALIGN * NMT_ARENA_ALIGN);
    nmt_arena_init(&a, f->mem, need);
    assert_int_equal(nmt_beam_plan(&f->b, &a, MAX_BATCH, MAX_BEAM, MAX_STEPS), NMT_OK);
    assert_int_equal(nmt_beam_plan_vocab(&f->b, &a, V), NMT_OK);
    assert_int_equal(nmt_beam_plan_token_lp(&f->b, &a), NMT_OK);
    assert_int_equal(a.high, need); /* planning is exact */
    f->lp = calloc((size_t)MAX_BATCH * MAX_BEAM * V, sizeof(float));
    return f;
}

static void destroy(fixture *f) {
    free(f->mem);
    free(f->lp);
    free(f);
}

/* log-softmax of z into out (floats, as the device path gives them) */
static void log_softmax(const double *z, float *out) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
    for (int v = 0; v < V; v++) out[v] = (float)(z[v] - mx - log(sum));
}

/* What a search's options are in a run. */
typedef struct run_opts {
    uint32_t n, K, max_len;
    float rep;                 /* 1: off */
    int sampling;
    uint32_t topk;
    float temp;
    uint64_t seed;
    const int32_t *const *prefix;
    const uint32_t *prefix_len;
    const uint32_t *table;     /* (n) which table sentence i uses; NULL: its own */
} run_opts;

static void run(fixture *f, const run_opts *o) {
    nmt_beam *b = &f->b;
    uint32_t ml[MAX_BATCH];
    for (uint32_t i = 0; i < o->n; i++) ml[i] = o->max_len;
    assert_int_equal(nmt_beam_start(b, o->n, o->K, V, EOS, BOS, 0.0f, ml), NMT_OK);
    nmt_beam_set_prefix(b, o->prefix, o->prefix_len);
    nmt_beam_set_repetition(b, o->rep);
    if (o->sampling) assert_int_equal(nmt_beam_set_sampling(b, o->topk, o->temp, o->seed), NMT_OK);
    for (uint32_t t = 0; t < b->max_steps; t++) {
        for (uint32_t r = 0; r < o->n * o->K; r++) {
            const uint32_t s = o->table ? o->table[r / o->K] : r / o->K;
            const uint32_t last = t == 0 ? V : (uint32_t)b->hist[(size_t)r * b->max_steps + t - 1];
            double z[V];
            for (int v = 0; v < V; v++) z[v] = g_logits[s][last < V ? last : V][v];
            if (o->rep != 1.0f) {
                for (int v = 0; v < V; v++) f->lp[r * V + v] = (float)z[v]; /* raw logits */
            } else {
                log_softmax(z, f->lp + r * V);
            }
        }
        if (o->rep != 1.0f) nmt_beam_logprobs(b, t, f->lp);
        if (nmt_beam_advance(b, t, f->lp)) return;
    }
    fail_msg("search did not finish");
}

/* The step distribution of the naive references: table s after hist[0, t),
 * the CTRL rule on each distinct earlier token when rep != 1. */
static void naive_step(uint32_t s, const int32_t *hist, uint32_t t, float rep, float *lp) {
    double z[V];
    const uint32_t last = t == 0 ? V : (uint32_t)hist[t - 1];
    for (int v = 0; v < V; v++) z[v] = g_logits[s][last][v];
    if (rep != 1.0f)
        for (int v = 0; v < V; v++) {
            int seen = 0;
            for (uint32_t j = 0; j < t; j++) seen |= hist[j] == v;
            if (seen) z[v] = z[v] < 0 ? z[v] * rep : z[v] / rep;
        }
    if (rep != 1.0f) { /* as the runtime: penalised floats, softmax in double */
        float zf[V];
        for (int v = 0; v < V; v++) zf[v] = (float)z[v];
        for (int v = 0; v < V; v++) z[v] = zf[v];
    }
    log_softmax(z, lp);
}

/* ---- repetition penalty ------------------------------------------------- */

/* Greedy with a penalty equals a naive greedy that recomputes the penalised
 * distribution from the whole history each step; beam 3's hypotheses carry
 * the naive penalised log-probability of their own tokens. */
static void test_repetition_against_naive(void **state) {
    (void)state;
    fixture *f = make();
    static const float reps[] = {1.2f, 2.0f, 0.7f, 5.0f};
    for (int trial = 0; trial < 100; trial++) {
        random_tables();
        const float rep = reps[trial % 4];
        run_opts o = {.n = 1, .K = 1, .max_len = 4 + (uint32_t)(trial % 8), .rep = rep};
        run(f, &o);
        int32_t want[MAX_STEPS];
        uint32_t len = 0;
        double lp_sum = 0;
        for (uint32_t t = 0;; t++) {
            float lp[V];
            naive_step(0, want, t, rep, lp);
            int best = EOS;
            if (t < o.max_len)
                for (int v = 0; v < V; v++)
                    if (lp[v] > lp[best] || (lp[v] == lp[best] && v < best)) best = v;
            lp_sum += lp[best];
            if (best == EOS) break;
            want[len++] = best;
        }
        const nmt_hyp *h = nmt_beam_result(&f->b, 0, 0);
        assert_non_null(h);
        assert_int_equal(h->len, len);
        assert_memory_equal(h->tokens, want, sizeof(int32_t) * len);
        assert_float_equal(h->logprob, lp_sum, 1e-4);

        o.K = 3;
        run(f, &o);
        for (uint32_t r = 0; r < nmt_beam_n_results(&f->b, 0); r++) {
            h = nmt_beam_result(&f->b, 0, r);
            double sum = 0;
            for (uint32_t t = 0; t <= h->len; t++) {
                float lp[V];
                naive_step(0, h->tokens, t, rep, lp);
                sum += lp[t < h->len ? h->tokens[t] : EOS];
                /* each token's own log-probability, EOS's last */
                assert_float_equal(h->token_lp[t], lp[t < h->len ? h->tokens[t] : EOS], 1e-4);
            }
            assert_float_equal(h->logprob, sum, 1e-4);
        }
    }
    destroy(f);
}

/* Hand case: logits after A = {A: 2, B: 1.9, ...}: without the penalty
 * greedy repeats A; with 1.2, A's logit 2 becomes 1.67 < 1.9 and B wins;
 * a negative logit is multiplied (made more negative), not divided. */
static void test_repetition_rule(void **state) {
    (void)state;
    fixture *f = make();
    enum { A = 1, B = 2 };
    for (int a = 0; a <= V; a++)
        for (int v = 0; v < V; v++) g_logits[0][a][v] = -5.0f;
    g_logits[0][V][A] = 3.0f;
    g_logits[0][A][A] = 2.0f;
    g_logits[0][A][B] = 1.9f;
    g_logits[0][B][EOS] = 3.0f;
    g_logits[0][A][EOS] = -0.5f;
    run_opts o = {.n = 1, .K = 1, .max_len = 3, .rep = 1.0f};
    run(f, &o);
    const nmt_hyp *h = nmt_beam_result(&f->b, 0, 0);
    assert_int_equal(h->len, 3); /* A A A, then forced EOS */
    o.rep = 1.2f;
    run(f, &o);
    h = nmt_beam_result(&f->b, 0, 0);
    assert_int_equal(h->len, 2);
    assert_int_equal(h->tokens[0], A);
    assert_int_equal(h->tokens[1], B);
    /* step 1's penalised log-probability of B: logits A 2/1.2, B 1.9, EOS -0.5, others -5 */
    double z[V];
    for (int v = 0; v < V; v++) z[v] = -5.0;
    z[A] = 2.0 / 1.2;
    z[B] = 1.9;
    z[EOS] = -0.5;
    float lp1[V];
    log_softmax(z, lp1);
    float lp0[V], lp2[V];
    double z0[V], z2[V];
    for (int v = 0; v < V; v++) z0[v] = g_logits[0][V][v], z2[v] = g_logits[0][B][v];
    log_softmax(z0, lp0);
    z2[A] = -5.0 * 1.2; /* negative: multiplied */
    z2[B] = -5.0 * 1.2;
    log_softmax(z2, lp2);
    assert_float_equal(h->logprob, (double)lp0[A] + lp1[B] + lp2[EOS], 1e-5);
    destroy(f);
}

/* ---- sampling ------------------------------------------------------------ */

/* The runtime's splitmix64 stream, written out again. */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Naive sampler of one sentence on table s: every step (but the forced
 * EOS at max_len) sorts the tokens by probability, keeps the topk best,
 * and picks by the cumulative weights p^(1/T) against one uniform draw. */
static uint32_t naive_sample(uint32_t s, uint32_t max_len, uint32_t topk, float temp, uint64_t seed, int32_t *out,
                             double *logprob) {
    uint64_t st = mix(seed);
    uint32_t len = 0;
    *logprob = 0;
    for (uint32_t t = 0;; t++) {
        float lp[V];
        naive_step(s, out, t, 1.0f, lp);
        int tok = EOS;
        if (t < max_len) {
            int order[V];
            for (int v = 0; v < V; v++) order[v] = v;
            for (int i = 1; i < V; i++) /* insertion sort: lp desc, id asc */
                for (int j = i; j > 0 && lp[order[j]] > lp[order[j - 1]]; j--) {
                    int x = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = x;
                }
            const int k = topk == 0 || topk > V ? V : (int)topk;
            double total = 0, cum = 0;
            for (int i = 0; i < k; i++) total += exp(((double)lp[order[i]] - lp[order[0]]) / temp);
            st += 0x9E3779B97F4A7C15ull;
            const double u = (double)(mix(st) >> 11) * 0x1.0p-53 * total;
            tok = order[k - 1];
            for (int i = 0; i < k; i++) {
                cum += exp(((double)lp[order[i]] - lp[order[0]]) / temp);
                if (cum > u) {
                    tok = order[i];
                    break;
                }
            }
        }
        *logprob += lp[tok];
        if (tok == EOS) return len;
        out[len++] = tok;
    }
}

static void test_sampling_against_naive(void **state) {
    (void)state;
    fixture *f = make();
    static const uint32_t topks[] = {0, 1, 2, 5};
    static const float temps[] = {1.0f, 0.5f, 2.0f};
    for (int trial = 0; trial < 120; trial++) {
        random_tables();
        run_opts o = {.n = 3, .K = 1, .max_len = 10, .rep = 1.0f, .sampling = 1, .topk = topks[trial % 4],
                      .temp = temps[trial % 3], .seed = 1000u + (uint64_t)trial * 7919u};
        run(f, &o);
        for (uint32_t i = 0; i < 3; i++) {
            int32_t want[MAX_STEPS];
            double lp;
            const uint32_t len = naive_sample(i, o.max_len, o.topk, o.temp, o.seed + i, want, &lp);
            const nmt_hyp *h = nmt_beam_result(&f->b, i, 0);
            assert_non_null(h);
            assert_int_equal(h->len, len);
            assert_memory_equal(h->tokens, want, sizeof(int32_t) * len);
            assert_float_equal(h->logprob, lp, 1e-4); /* the model's scores: T does not change them */
        }
    }
    destroy(f);
}

/* Sentence i of a batch with seed S = the same sentence alone with seed
 * S + i; top-k 1 is greedy; another seed gives another sample. */
static void test_sampling_batch_independent(void **state) {
    (void)state;
    fixture *f = make(), *g = make();
    random_tables();
    run_opts o = {.n = 4, .K = 1, .max_len = 12, .rep = 1.0f, .sampling = 1, .topk = 0, .temp = 1.5f, .seed = 42};
    run(f, &o);
    int differs = 0;
    for (uint32_t i = 0; i < 4; i++) {
        const uint32_t tab[1] = {i};
        run_opts one = o;
        one.n = 1;
        one.seed = o.seed + i;
        one.table = tab;
        run(g, &one);
        const nmt_hyp *x = nmt_beam_result(&f->b, i, 0), *y = nmt_beam_result(&g->b, 0, 0);
        assert_int_equal(x->len, y->len);
        assert_memory_equal(x->tokens, y->tokens, sizeof(int32_t) * x->len);
        assert_float_equal(x->logprob, y->logprob, 0);
        one.seed += 1000;
        run(g, &one);
        y = nmt_beam_result(&g->b, 0, 0);
        differs |= x->len != y->len || memcmp(x->tokens, y->tokens, sizeof(int32_t) * x->len) != 0;
    }
    assert_true(differs);
    /* top-k 1: greedy */
    o.topk = 1;
    run(f, &o);
    run_opts greedy = {.n = 4, .K = 1, .max_len = 12, .rep = 1.0f};
    run(g, &greedy);
    for (uint32_t i = 0; i < 4; i++) {
        const nmt_hyp *x = nmt_beam_result(&f->b, i, 0), *y = nmt_beam_result(&g->b, i, 0);
        assert_int_equal(x->len, y->len);
        assert_memory_equal(x->tokens, y->tokens, sizeof(int32_t) * x->len);
    }
    /* sampling needs K = 1 */
    uint32_t ml[1] = {4};
    assert_int_equal(nmt_beam_start(&f->b, 1, 2, V, EOS, BOS, 0.0f, ml), NMT_OK);
    assert_int_equal(nmt_beam_set_sampling(&f->b, 0, 1.0f, 1), NMT_ERR_LIMIT_EXCEEDED);
    assert_int_equal(nmt_beam_start(&f->b, 1, 1, V, EOS, BOS, 0.0f, ml), NMT_OK);
    assert_int_equal(nmt_beam_set_sampling(&f->b, 0, 0.0f, 1), NMT_ERR_LIMIT_EXCEEDED);
    destroy(g);
    destroy(f);
}

/* The first token's frequencies over 6000 seeds follow p^(1/T) normalised
 * (a check that does not mirror the implementation): T = 1 and T = 0.5,
 * and top-k 2 never draws outside the two most probable. */
static void test_sampling_frequencies(void **state) {
    (void)state;
    fixture *f = make();
    random_tables();
    float lp[V];
    double z[V];
    for (int v = 0; v < V; v++) z[v] = g_logits[0][V][v];
    log_softmax(z, lp);
    static const float temps[] = {1.0f, 0.5f};
    for (int k = 0; k < 3; k++) {
        const float T = k == 2 ? 1.0f : temps[k];
        const uint32_t topk = k == 2 ? 2 : 0;
        int count[V] = {0};
        const int N = 6000;
        for (int i = 0; i < N; i++) {
            run_opts o = {.n = 1, .K = 1, .max_len = 1, .rep = 1.0f, .sampling = 1, .topk = topk, .temp = T,
                          .seed = (uint64_t)i * 1000003u};
            run(f, &o);
            const nmt_hyp *h = nmt_beam_result(&f->b, 0, 0);
            count[h->len ? h->tokens[0] : EOS]++;
        }
        int first = 0, second = -1;
        for (int v = 1; v < V; v++)
            if (lp[v] > lp[first]) first = v;
        for (int v = 0; v < V; v++)
            if (v != first && (second < 0 || lp[v] > lp[second])) second = v;
        double w[V], total = 0;
        for (int v = 0; v < V; v++) {
            w[v] = (topk == 2 && v != first && v != second) ? 0.0 : exp(lp[v] / T);
            total += w[v];
        }
        for (int v = 0; v < V; v++) assert_float_equal((double)count[v] / N, w[v] / total, 0.025);
    }
    destroy(f);
}

/* ---- forced prefix ------------------------------------------------------- */

/* Greedy with a prefix = the prefix, then a naive greedy from there; beam
 * 3's hypotheses all start with it and count its log-probabilities; an
 * empty prefix changes nothing; sentences without a prefix are unchanged. */
static void test_prefix_against_naive(void **state) {
    (void)state;
    fixture *f = make(), *g = make();
    for (int trial = 0; trial < 100; trial++) {
        random_tables();
        int32_t pre[2][4];
        for (int j = 0; j < 4; j++) {
            pre[0][j] = (int32_t)(rnd() * V);
            if (pre[0][j] == EOS) pre[0][j] = EOS + 1;
        }
        const uint32_t plen[2] = {1 + (uint32_t)(trial % 4), 0};
        const int32_t *pp[2] = {pre[0], NULL};
        run_opts o = {.n = 2, .K = 1, .max_len = 9, .rep = 1.0f, .prefix = pp, .prefix_len = plen};
        run(f, &o);
        int32_t want[MAX_STEPS];
        uint32_t len = 0;
        double lp_sum = 0;
        for (uint32_t t = 0;; t++) {
            float lp[V];
            naive_step(0, want, t, 1.0f, lp);
            int best = EOS;
            if (t < plen[0]) best = pre[0][t];
            else if (t < o.max_len)
                for (int v = 0; v < V; v++)
                    if (lp[v] > lp[best] || (lp[v] == lp[best] && v < best)) best = v;
            lp_sum += lp[best];
            if (best == EOS) break;
            want[len++] = best;
        }
        const nmt_hyp *h = nmt_beam_result(&f->b, 0, 0);
        assert_int_equal(h->len, len);
        assert_memory_equal(h->tokens, want, sizeof(int32_t) * len);
        assert_float_equal(h->logprob, lp_sum, 1e-4);
        /* sentence 1 (no prefix) as in a search without prefixes */
        run_opts plain = {.n = 2, .K = 1, .max_len = 9, .rep = 1.0f};
        run(g, &plain);
        const nmt_hyp *x = nmt_beam_result(&f->b, 1, 0), *y = nmt_beam_result(&g->b, 1, 0);
        assert_int_equal(x->len, y->len);
        assert_memory_equal(x->tokens, y->tokens, sizeof(int32_t) * x->len);
        o.K = 3;
        run(f, &o);
        assert_true(nmt_beam_n_results(&f->b, 0) >= 1);
        for (uint32_t r = 0; r < nmt_beam_n_results(&f->b, 0); r++) {
            h = nmt_beam_result(&f->b, 0, r);
            assert_true(h->len >= plen[0]);
            assert_memory_equal(h->tokens, pre[0], sizeof(int32_t) * plen[0]);
            double sum = 0;
            for (uint32_t t = 0; t <= h->len; t++) {
                float lp[V];
                naive_step(0, h->tokens, t, 1.0f, lp);
                sum += lp[t < h->len ? h->tokens[t] : EOS];
            }
            assert_float_equal(h->logprob, sum, 1e-4);
        }
        /* the prefix with sampling: forced, then drawn */
        o.K = 1;
        o.sampling = 1;
        o.topk = 0;
        o.temp = 1.0f;
        o.seed = (uint64_t)trial;
        run(f, &o);
        h = nmt_beam_result(&f->b, 0, 0);
        assert_true(h->len >= plen[0]);
        assert_memory_equal(h->tokens, pre[0], sizeof(int32_t) * plen[0]);
    }
    destroy(g);
    destroy(f);
}

/* ---- re-ranking ---------------------------------------------------------- */

static void test_resort(void **state) {
    (void)state;
    fixture *f = make();
    random_tables();
    run_opts o = {.n = 1, .K = 3, .max_len = 6, .rep = 1.0f};
    run(f, &o);
    const uint32_t n = nmt_beam_n_results(&f->b, 0);
    assert_true(n >= 2);
    nmt_hyp *last = &f->b.fin[n - 1];
    const float lp = last->logprob;
    last->score = 1.0f; /* better than every log-probability */
    nmt_beam_resort(&f->b, 0);
    assert_float_equal(nmt_beam_result(&f->b, 0, 0)->logprob, lp, 0);
    for (uint32_t r = 1; r < n; r++)
        assert_true(nmt_beam_result(&f->b, 0, r - 1)->score >= nmt_beam_result(&f->b, 0, r)->score);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repetition_against_naive),
        cmocka_unit_test(test_repetition_rule),
        cmocka_unit_test(test_sampling_against_naive),
        cmocka_unit_test(test_sampling_batch_independent),
        cmocka_unit_test(test_sampling_frequencies),
        cmocka_unit_test(test_prefix_against_naive),
        cmocka_unit_test(test_resort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
