/* SPDX-License-Identifier: MIT */
/* kernels_beam_test.c — beam steps chained on the device (issue 22;
 * cl/beam.cl, runtime/ops/ops_beam.c):
 *   beam_advance      against the host's beam (runtime/session/beam.c,
 *                     nmt_beam_advance_topk) fed the same candidate tables
 *                     step after step: every row's next token, score (bits)
 *                     and back-pointer, and every sentence's done flag and
 *                     finished count, with the device keeping its own state
 *                     and scores from step to step.  Beams 1 to 8, a
 *                     minimum length, per-sentence length limits, tables
 *                     with tied, -inf and NaN log-probabilities, missing
 *                     (-1) and out-of-range ids, EOS among the candidates;
 *   kv_table_permute  against the host permutation of the Transformer's
 *                     table: entries (p, r < rows) of positions p <
 *                     positions from (p, back[r]), everything else
 *                     untouched;
 * and the statuses of bad arguments. */
#include "ops_common.h"

#include "beam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state) {
    if (kernels_setup(state) != 0) return -1;
    env *e = *state;
    const nmt_status st = nmt_ops_enable_beam(&e->ops);
    if (st != NMT_OK) {
        fprintf(stderr, "nmt_ops_enable_beam: %s\n", nmt_status_str(st));
        return -1;
    }
    return 0;
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* A search of n sentences with K beams over a vocabulary of V, run by the
 * host and by the kernel side by side for `steps` steps on random tables
 * of k candidates a row (k = 2K + 1 while EOS is barred, else 2K). */
static void run_search(env *e, uint32_t n, uint32_t K, uint32_t V, uint32_t min_len, uint32_t steps, uint64_t seed) {
    enum { MAXN = 6, MAXK = 8, MAXC = 17, MAXT = 12 };
    assert_true(n <= MAXN && K <= MAXK && steps <= MAXT);
    nmt_test_rng rng = nmt_test_rng_make(seed);
    const uint32_t eos = 1, rows = n * K;
    uint32_t max_len[MAXN];
    for (uint32_t i = 0; i < n; i++) max_len[i] = 2 + (i * 3 + (uint32_t)seed) % (steps - 2);
    static unsigned char mem[1 << 20];
    nmt_arena a;
    nmt_arena_init(&a, mem, sizeof mem);
    nmt_beam b;
    assert_int_equal(nmt_beam_plan(&b, &a, MAXN, MAXK, MAXT + 1), NMT_OK);
    assert_int_equal(nmt_beam_start(&b, n, K, V, eos, 2, 0.6f, max_len), NMT_OK);
    nmt_beam_constrain(&b, min_len, 0);

    /* the device's state: sentences (done, finished, limit), tokens, scores, back-pointers */
    int32_t st_h[3 * MAXN];
    for (uint32_t i = 0; i < n; i++) {
        st_h[3 * i] = 0;
        st_h[3 * i + 1] = 0;
        st_h[3 * i + 2] = (int32_t)max_len[i];
    }
    const size_t soff = 3, toff = 5, coff = 7, boff = 2;
    int32_t tok_h[5 + MAXN * MAXK] = {99, 99, 99, 99, 99}; /* before the rows: never written */
    float score_h[3 + MAXN * MAXK] = {0};
    for (uint32_t r = 0; r < rows; r++) {
        tok_h[toff + r] = b.next_tok[r];
        score_h[soff + r] = b.score[r];
    }
    int32_t state_h[1 + 3 * MAXN];
    state_h[0] = 0;
    memcpy(state_h + 1, st_h, sizeof(int32_t) * 3 * n);
    cl_mem dstate = nmt_test_upload_i32(e->dev, state_h, 1 + 3 * n);
    cl_mem dtok = nmt_test_upload_i32(e->dev, tok_h, toff + rows);
    cl_mem dscore = nmt_test_upload_f32(e->dev, score_h, soff + rows);
    int32_t back0[2 + MAXN * MAXK];
    for (size_t i = 0; i < boff + rows; i++) back0[i] = -7;
    cl_mem dback = nmt_test_upload_i32(e->dev, back0, boff + rows);
    uint32_t cand[7 + MAXN * MAXK * (2 * MAXC + 1)];
    cl_mem dcand = nmt_test_buffer(e->dev, sizeof cand, NULL);

    for (uint32_t t = 0; t < steps; t++) {
        const uint32_t k = 2 * K + (t < min_len ? 1 : 0);
        float *lp = (float *)(cand + coff);
        int32_t *id = (int32_t *)(cand + coff + (size_t)rows * k);
        float *eos_lp = (float *)(cand + coff + 2 * (size_t)rows * k);
        for (uint32_t r = 0; r < rows; r++) {
            for (uint32_t i = 0; i < k; i++) { /* distinct ids, some EOS, some ties */
                int32_t v;
                int dup;
                do {
                    v = (int32_t)(nmt_test_rng_next(&rng) % V);
                    dup = 0;
                    for (uint32_t j = 0; j < i; j++) dup |= id[r * k + j] == v;
                } while (dup);
                const uint32_t u = (uint32_t)(nmt_test_rng_next(&rng) % 40);
                id[r * k + i] = u == 0 ? -1 : u == 1 ? (int32_t)(V + 3) : u < 6 ? (int32_t)eos : v;
                if (u >= 2 && u < 6) /* EOS at most once a row */
                    for (uint32_t j = 0; j < i; j++)
                        if (id[r * k + j] == (int32_t)eos) id[r * k + i] = v;
                float x = -(float)(nmt_test_rng_next(&rng) % 8) * 0.25f; /* ties */
                if (u == 7) x = -INFINITY;
                if (u == 8) x = NAN;
                lp[r * k + i] = x;
            }
            eos_lp[r] = -(float)(nmt_test_rng_next(&rng) % 8) * 0.5f;
        }
        const size_t words = coff + (size_t)rows * (2 * k + 1);
        nmt_test_assert_ok(e->dev, nmt_device_write(e->dev, dcand, 0, words * sizeof(uint32_t), cand));
        const nmt_beam_step bs = {.cand = B(dcand, coff), .state = B(dstate, 1), .tok = B(dtok, toff),
                                  .score = B(dscore, soff), .back = B(dback, boff), .rows = rows, .k = k, .K = K,
                                  .V = V, .eos = eos, .t = t, .min_len = min_len};
        nmt_test_assert_ok(e->dev, nmt_op_beam_advance(&e->ops, &bs));
        nmt_beam_advance_topk(&b, t, lp, id, k, eos_lp);

        int32_t got_tok[5 + MAXN * MAXK], got_back[2 + MAXN * MAXK], got_state[1 + 3 * MAXN];
        float got_score[3 + MAXN * MAXK];
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dtok, 0, sizeof(int32_t) * (toff + rows), got_tok));
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dscore, 0, sizeof(float) * (soff + rows), got_score));
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dback, 0, sizeof(int32_t) * (boff + rows), got_back));
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dstate, 0, sizeof(int32_t) * (1 + 3 * n), got_state));
        for (uint32_t r = 0; r < rows; r++) {
            char what[96];
            snprintf(what, sizeof what, "n=%u K=%u min_len=%u seed=%llu step %u row %u", n, K, min_len,
                     (unsigned long long)seed, t, r);
            if (got_tok[toff + r] != b.next_tok[r])
                fail_msg("%s: token %d, the host's %d", what, (int)got_tok[toff + r], (int)b.next_tok[r]);
            if (got_back[boff + r] != b.back[r])
                fail_msg("%s: back %d, the host's %d", what, (int)got_back[boff + r], (int)b.back[r]);
            if (bits(got_score[soff + r]) != bits(b.score[r]))
                fail_msg("%s: score %g, the host's %g", what, got_score[soff + r], b.score[r]);
        }
        for (uint32_t i = 0; i < n; i++) {
            assert_int_equal(got_state[1 + 3 * i], b.done[i]);
            assert_int_equal(got_state[1 + 3 * i + 1], (int32_t)b.n_fin[i]);
            assert_int_equal(got_state[1 + 3 * i + 2], (int32_t)max_len[i]);
        }
        assert_int_equal(got_state[0], 0);
        for (size_t i = 0; i < toff; i++) assert_int_equal(got_tok[i], 99);
        for (size_t i = 0; i < boff; i++) assert_int_equal(got_back[i], -7);
    }
    for (uint32_t i = 0; i < n; i++) assert_int_equal(b.done[i], 1); /* every sentence reached its limit */
    nmt_test_release(dcand);
    nmt_test_release(dback);
    nmt_test_release(dscore);
    nmt_test_release(dtok);
    nmt_test_release(dstate);
}

static void test_beam_advance(void **state) {
    env *e = *state;
    const uint32_t beams[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < NMT_ARRAY_LEN(beams); i++) {
        run_search(e, 5, beams[i], 40, 0, 10, 1 + i);
        run_search(e, 3, beams[i], 40, 3, 10, 11 + i);   /* EOS barred at first */
        run_search(e, 6, beams[i], 20, 2, 12, 21 + i);   /* a small vocabulary (k <= 17 distinct ids) */
        run_search(e, 1, beams[i], 1000, 0, 9, 31 + i);  /* one sentence */
    }
}

/* The table's positions [0, positions) of ld ints, rows [0, rows) permuted. */
static void run_permute(env *e, uint32_t P, uint32_t ld, uint32_t positions, uint32_t rows, uint64_t seed) {
    nmt_test_rng rng = nmt_test_rng_make(seed);
    const size_t off = 3, total = off + (size_t)P * ld;
    int32_t *tab = malloc(sizeof(int32_t) * total), *want = malloc(sizeof(int32_t) * total);
    int32_t *back = malloc(sizeof(int32_t) * (1 + rows)), *got = malloc(sizeof(int32_t) * total);
    for (size_t i = 0; i < total; i++) tab[i] = (int32_t)(nmt_test_rng_next(&rng) % ld);
    back[0] = -1;
    for (uint32_t r = 0; r < rows; r++) back[1 + r] = (int32_t)(nmt_test_rng_next(&rng) % ld);
    memcpy(want, tab, sizeof(int32_t) * total);
    for (uint32_t p = 0; p < positions; p++)
        for (uint32_t r = 0; r < rows; r++) want[off + (size_t)p * ld + r] = tab[off + (size_t)p * ld + back[1 + r]];
    cl_mem dt = nmt_test_upload_i32(e->dev, tab, total), db = nmt_test_upload_i32(e->dev, back, 1 + rows);
    nmt_test_assert_ok(e->dev, nmt_op_kv_table_permute(&e->ops, B(dt, off), ld, positions, B(db, 1), rows));
    nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dt, 0, sizeof(int32_t) * total, got));
    assert_memory_equal(got, want, sizeof(int32_t) * total);
    nmt_test_release(db);
    nmt_test_release(dt);
    free(got);
    free(back);
    free(want);
    free(tab);
}

static void test_kv_table_permute(void **state) {
    env *e = *state;
    run_permute(e, 9, 16, 9, 16, 1);    /* every row and position */
    run_permute(e, 12, 64, 5, 40, 2);   /* fewer rows, later positions untouched */
    run_permute(e, 4, 200, 4, 199, 3);  /* more rows than a work-group */
    run_permute(e, 3, 1, 2, 1, 4);      /* one row */
}

static void test_beam_bad_args(void **state) {
    env *e = *state;
    cl_mem d = nmt_test_buffer(e->dev, 4096, NULL);
    const nmt_beam_step ok = {.cand = B(d, 0), .state = B(d, 0), .tok = B(d, 0), .score = B(d, 0), .back = B(d, 0),
                              .rows = 4, .k = 4, .K = 2, .V = 10, .eos = 1};
    nmt_beam_step b = ok;
    b.K = 0;
    assert_int_equal(nmt_op_beam_advance(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = ok;
    b.K = NMT_BEAM_DEVICE_MAX + 1;
    b.rows = 2 * b.K;
    assert_int_equal(nmt_op_beam_advance(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = ok;
    b.rows = 5; /* not whole sentences */
    assert_int_equal(nmt_op_beam_advance(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = ok;
    b.k = NMT_TOPK_MAX + 1;
    assert_int_equal(nmt_op_beam_advance(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = ok;
    b.back = NONE;
    assert_int_equal(nmt_op_beam_advance(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = ok;
    b.rows = 0;
    assert_int_equal(nmt_op_beam_advance(&e->ops, &b), NMT_OK); /* nothing to do */
    assert_int_equal(nmt_op_beam_advance(&e->ops, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_kv_table_permute(&e->ops, B(d, 0), 4, 2, B(d, 0), 5), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_kv_table_permute(&e->ops, NONE, 4, 2, B(d, 0), 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_kv_table_permute(&e->ops, B(d, 0), 4, 0, B(d, 0), 4), NMT_OK);
    const uint32_t huge = (uint32_t)(e->dev->info.local_mem_bytes ? e->dev->info.local_mem_bytes : 32768);
    assert_false(nmt_ops_kv_permute_fits(&e->ops, huge));
    assert_true(nmt_ops_kv_permute_fits(&e->ops, 64));
    assert_int_equal(nmt_op_kv_table_permute(&e->ops, B(d, 0), huge, 1, B(d, 0), 4), NMT_ERR_UNSUPPORTED);
    nmt_ops bare = e->ops; /* ops without the kernels */
    bare.k_beam_advance = bare.k_kv_permute = NULL;
    assert_int_equal(nmt_op_beam_advance(&bare, &ok), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_kv_table_permute(&bare, B(d, 0), 4, 2, B(d, 0), 4), NMT_ERR_INVALID_ARGUMENT);
    assert_false(nmt_ops_kv_permute_fits(&bare, 64));
    assert_int_equal(nmt_ops_enable_beam(&e->ops), NMT_OK); /* twice: nothing new */
    nmt_test_release(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_beam_advance),
        cmocka_unit_test(test_kv_table_permute),
        cmocka_unit_test(test_beam_bad_args),
    };
    return cmocka_run_group_tests(tests, setup, ops_teardown);
}
