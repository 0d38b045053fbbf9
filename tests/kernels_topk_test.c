/* SPDX-License-Identifier: MIT */
/* kernels_topk_test.c — the beam's device top-k (issue 22):
 * nmt_op_topk_logprobs (runtime/ops/ops_topk.c, cl/topk.cl) against a naive
 * host top-k over nmt_op_log_softmax's output of the same rows.  Its
 * log-probabilities must be log_softmax's bit for bit (the beam's scores
 * stay what they were), and close to a double-precision log-softmax; its
 * ids the k largest keys score[r] + lp, ties to the lower id (defined by
 * the kernel and checked here on rows of many equal logits), NaN keys never,
 * missing entries -inf / -1; a dead row (score -inf) gives nothing; the EOS
 * log-probability of every live row.  Rows of 1 to 32,000 logits, k from 1
 * to ops.topk_max (NMT_TOPK_MAX where local memory allows), -inf and NaN logits, operands at offsets, and the
 * statuses of bad arguments.  nmt_op_topk_pick (greedy steps chained on the
 * device): each live row's next token and score are the first allowed
 * entry of that ranking, EOS skipped when barred. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state) {
    if (kernels_setup(state) != 0) return -1;
    env *e = *state;
    const nmt_status st = nmt_ops_enable_topk(&e->ops);
    if (st != NMT_OK) {
        fprintf(stderr, "nmt_ops_enable_topk: %s\n", nmt_status_str(st));
        return -1;
    }
    fprintf(stderr, "topk: reduce_wg %zu, topk_max %u, %s reductions\n", e->ops.reduce_wg, e->ops.topk_max,
            e->ops.subgroups ? "subgroup" : "work-group");
    return 0;
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The naive ranking of one row of log-probabilities: ids with a non-NaN
 * key, by key descending then id ascending. */
static uint32_t naive_rank(float score, const float *lp, uint32_t n, int32_t *ids) {
    uint32_t m = 0;
    for (uint32_t v = 0; v < n; v++) {
        const float key = score + lp[v];
        if (key == key) ids[m++] = (int32_t)v;
    }
    for (uint32_t i = 1; i < m; i++) { /* insertion sort: stable, ids stay ascending among equals */
        const int32_t x = ids[i];
        const float kx = score + lp[x];
        uint32_t j = i;
        while (j > 0 && kx > score + lp[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = x;
    }
    return m;
}

enum { LOGITS_RANDOM, LOGITS_TIES, LOGITS_SPECIAL };

/* One launch: rows of n logits (stride ld, at offset 5), scores at offset
 * 3 (row 1 dead when rows > 2), k candidates, EOS id eos.  pick 0: the
 * plain kernel, which leaves the scores as they are; 1 or 2
 * (nmt_op_topk_pick, 2 with EOS barred; row 0's EOS logit then the largest
 * when eos < n): every live row's next token (at offset 2 of its buffer)
 * and new score against the naive ranking's first allowed entry among the
 * k best, dead rows untouched. */
static void run_topk_pick(env *e, uint32_t rows, uint32_t n, uint32_t ld, uint32_t k, uint32_t eos, int kind,
                          uint64_t seed, uint32_t pick) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const size_t xoff = 5, total = xoff + (size_t)rows * ld, soff = 3, ooff = 7;
    float *x = host_block(&r, total, xoff, rows, n, ld, -8.0f, 8.0f);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t c = 0; c < n; c++) {
            float *v = &x[xoff + (size_t)i * ld + c];
            if (kind == LOGITS_TIES) *v = floorf(*v) * 0.5f; /* 32 distinct values */
        }
    if (pick && eos < n) x[xoff + eos] = 9.0f; /* row 0 ranks EOS first */
    if (kind == LOGITS_SPECIAL) {
        for (uint32_t c = 0; c < n; c += 3) x[xoff + c] = -INFINITY; /* row 0: masked logits */
        if (rows > 2) x[xoff + 2 * (size_t)ld + n / 2] = NAN;       /* row 2: a NaN logit */
        if (rows > 3)
            for (uint32_t c = 0; c < n; c++) x[xoff + 3 * (size_t)ld + c] = -INFINITY; /* row 3: nothing finite */
    }
    float *score = malloc(sizeof(float) * (soff + rows));
    for (uint32_t i = 0; i < rows; i++) score[soff + i] = nmt_test_rng_uniform(&r, -20.0f, 0.0f);
    if (kind == LOGITS_TIES && rows > 0) score[soff] = 0.0f;
    if (rows > 2) score[soff + 1] = -INFINITY;
    const size_t words = ooff + (size_t)rows * (2 * k + 1);
    cl_mem dx = nmt_test_upload_f32(e->dev, x, total);
    cl_mem dl = nmt_test_upload_f32(e->dev, x, total);
    cl_mem ds = nmt_test_upload_f32(e->dev, score, soff + rows);
    cl_mem dout = nmt_test_buffer(e->dev, words * sizeof(uint32_t), NULL);
    const size_t toff = 2;
    int32_t *tok = malloc(sizeof(int32_t) * (toff + rows));
    for (size_t i = 0; i < toff + rows; i++) tok[i] = 12345; /* what a dead row keeps */
    cl_mem dtok = nmt_test_upload_i32(e->dev, tok, toff + rows);
    if (pick)
        nmt_test_assert_ok(e->dev, nmt_op_topk_pick(&e->ops, B(dx, xoff), rows, n, ld, B(ds, soff), k, eos,
                                                    B(dout, ooff), pick == 2, B(dtok, toff)));
    else
        nmt_test_assert_ok(e->dev, nmt_op_topk_logprobs(&e->ops, B(dx, xoff), rows, n, ld, B(ds, soff), k, eos,
                                                        B(dout, ooff)));
    float *score_after = download(e, ds, soff + rows);
    int32_t *tok_after = malloc(sizeof(int32_t) * (toff + rows));
    nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dtok, 0, sizeof(int32_t) * (toff + rows), tok_after));
    nmt_test_assert_ok(e->dev, nmt_op_log_softmax(&e->ops, B(dl, xoff), rows, n, ld));
    float *lsm = download(e, dl, total);
    uint32_t *out = malloc(words * sizeof(uint32_t));
    nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dout, 0, words * sizeof(uint32_t), out));
    /* the logits are not written */
    float *back = download(e, dx, total);
    assert_memory_equal(back, x, total * sizeof(float));
    int32_t *ids = malloc(sizeof(int32_t) * n);
    for (uint32_t i = 0; i < rows; i++) {
        const float *lp = lsm + xoff + (size_t)i * ld, s = score[soff + i];
        const uint32_t *o_lp = out + ooff + (size_t)i * k, *o_id = out + ooff + (size_t)rows * k + (size_t)i * k;
        const uint32_t o_eos = out[ooff + 2 * (size_t)rows * k + i];
        char what[128];
        snprintf(what, sizeof what, "topk rows=%u n=%u ld=%u k=%u kind=%d row %u", rows, n, ld, k, kind, i);
        if (!(s > -INFINITY)) { /* dead: nothing */
            for (uint32_t j = 0; j < k; j++)
                if ((int32_t)o_id[j] != -1 || o_lp[j] != bits(-INFINITY)) fail_msg("%s: entry %u of a dead row", what, j);
            if (o_eos != bits(-INFINITY)) fail_msg("%s: EOS of a dead row", what);
            if (tok_after[toff + i] != 12345 || bits(score_after[soff + i]) != bits(s))
                fail_msg("%s: a dead row's token or score written", what);
            continue;
        }
        /* log_softmax leaves a row without a finite entry as it is: lse 0 */
        const uint32_t m = naive_rank(s, lp, n, ids);
        assert_true(m <= n);
        if (pick) { /* the beam's choice at beam 1: the first allowed of the k best */
            int32_t want = (int32_t)eos;
            float want_score = -INFINITY;
            for (uint32_t j = 0; j < k && j < m; j++)
                if (s + lp[ids[j]] > -INFINITY && (pick == 1 || ids[j] != (int32_t)eos)) {
                    want = ids[j];
                    want_score = s + lp[ids[j]];
                    break;
                }
            if (tok_after[toff + i] != want)
                fail_msg("%s pick %u: next token %d, want %d", what, pick, (int)tok_after[toff + i], (int)want);
            if (bits(score_after[soff + i]) != bits(want_score))
                fail_msg("%s pick %u: score %g, want %g", what, pick, score_after[soff + i], want_score);
            if (i == 0 && eos < n && pick == 1 && m > 0 && s + lp[eos] > -INFINITY) assert_int_equal(want, (int32_t)eos);
        } else if (bits(score_after[soff + i]) != bits(s)) {
            fail_msg("%s: the plain kernel wrote a score", what);
        }
        for (uint32_t j = 0; j < k; j++) {
            const int32_t want = j < m && j < n ? ids[j] : -1; /* m <= n: j < n tells GCC so */
            if ((int32_t)o_id[j] != want) fail_msg("%s: rank %u is id %d, want %d", what, j, (int)o_id[j], (int)want);
            const uint32_t want_lp = want >= 0 ? bits(lp[want]) : bits(-INFINITY);
            if (o_lp[j] != want_lp) fail_msg("%s: rank %u lp bits %08x, log_softmax's %08x", what, j, o_lp[j], want_lp);
        }
        if (eos < n && o_eos != bits(lp[eos])) fail_msg("%s: EOS lp differs from log_softmax's", what);
        if (kind == LOGITS_RANDOM) { /* and log_softmax is right: a double reference */
            const float *z = x + xoff + (size_t)i * ld;
            double mx = -INFINITY, sum = 0;
            for (uint32_t c = 0; c < n; c++) mx = z[c] > mx ? z[c] : mx;
            for (uint32_t c = 0; c < n; c++) sum += exp((double)z[c] - mx);
            for (uint32_t j = 0; j < k && j < n; j++) {
                float got;
                memcpy(&got, &o_lp[j], sizeof got);
                const double ref = z[o_id[j]] - mx - log(sum);
                if (fabs(got - ref) > 1e-5 * (1 + fabs(ref))) fail_msg("%s: lp %g, reference %g", what, got, ref);
            }
        }
        if (kind == LOGITS_TIES && m > k && k > 1) { /* equal keys among the chosen: lower id first */
            for (uint32_t j = 1; j < k; j++)
                if (o_lp[j] == o_lp[j - 1]) assert_true(o_id[j] > o_id[j - 1]);
        }
    }
    for (uint32_t i = 0; i < toff; i++) assert_int_equal(tok_after[i], 12345); /* outside the rows */
    if (!pick)
        for (uint32_t i = 0; i < rows; i++) assert_int_equal(tok_after[toff + i], 12345);
    free(tok_after);
    free(tok);
    free(score_after);
    nmt_test_release(dtok);
    free(ids);
    free(back);
    free(out);
    free(lsm);
    free(score);
    free(x);
    nmt_test_release(dout);
    nmt_test_release(ds);
    nmt_test_release(dl);
    nmt_test_release(dx);
}

static void run_topk(env *e, uint32_t rows, uint32_t n, uint32_t ld, uint32_t k, uint32_t eos, int kind,
                     uint64_t seed) {
    run_topk_pick(e, rows, n, ld, k, eos, kind, seed, 0);
}

static void test_topk_random(void **state) {
    env *e = *state;
    run_topk(e, 6, 1001, 1010, 9, 2, LOGITS_RANDOM, 1);
    run_topk(e, 4, 32000, 32000, 9, 2, LOGITS_RANDOM, 2); /* a base-shape vocabulary */
    run_topk(e, 3, 8000, 8000, 1, 2, LOGITS_RANDOM, 3);   /* greedy: k = 2 * 1, or 1 */
    run_topk(e, 5, 300, 301, e->ops.topk_max, 7, LOGITS_RANDOM, 4);
}

static void test_topk_ties(void **state) {
    env *e = *state;
    run_topk(e, 4, 997, 997, 9, 2, LOGITS_TIES, 5);
    run_topk(e, 3, 64, 64, e->ops.topk_max, 0, LOGITS_TIES, 6);
}

static void test_topk_special(void **state) {
    env *e = *state;
    run_topk(e, 5, 37, 40, 9, 2, LOGITS_SPECIAL, 7);  /* -inf, NaN, nothing finite, a dead row */
    run_topk(e, 4, 5, 5, 9, 4, LOGITS_SPECIAL, 8);    /* fewer logits than k: missing entries */
    run_topk(e, 2, 1, 1, 3, 0, LOGITS_RANDOM, 9);     /* one logit: lp 0 */
    run_topk(e, 3, 20, 20, 4, 25, LOGITS_RANDOM, 10); /* EOS id beyond the row: -inf */
}

/* Greedy steps chained on the device: the next token and score written
 * (k = 2, or 3 while EOS is barred), EOS ranked first in row 0, ties,
 * -inf and NaN logits, a row without a finite entry, dead rows. */
static void test_topk_pick(void **state) {
    env *e = *state;
    for (uint32_t pick = 1; pick <= 2; pick++) {
        run_topk_pick(e, 6, 1001, 1010, 1 + pick, 2, LOGITS_RANDOM, 11, pick);
        run_topk_pick(e, 3, 8000, 8000, 1 + pick, 0, LOGITS_RANDOM, 12, pick);
        run_topk_pick(e, 4, 997, 997, 1 + pick, 2, LOGITS_TIES, 13, pick);
        run_topk_pick(e, 5, 37, 40, 1 + pick, 2, LOGITS_SPECIAL, 14, pick);
        run_topk_pick(e, 4, 2, 2, 1 + pick, 1, LOGITS_RANDOM, 15, pick); /* two logits, one of them EOS */
        run_topk_pick(e, 3, 20, 20, 9, 25, LOGITS_RANDOM, 16, pick);     /* EOS id beyond the row */
    }
}

/* The cases above on the portable reductions when the fixture's use
 * subgroups (issue 23): the same naive ranking, log_softmax's bits. */
static void topk_cases(env *e) {
    run_topk(e, 6, 1001, 1010, 9, 2, LOGITS_RANDOM, 1);
    run_topk(e, 4, 32000, 32000, 9, 2, LOGITS_RANDOM, 2);
    run_topk(e, 4, 997, 997, 9, 2, LOGITS_TIES, 5);
    run_topk(e, 5, 37, 40, 9, 2, LOGITS_SPECIAL, 7);
    run_topk(e, 4, 5, 5, 9, 4, LOGITS_SPECIAL, 8);
}

static void test_topk_portable(void **state) {
    env *e = *state;
    check_reduce_path(e);
    if (!with_ops_mode(e, NMT_SG_OFF, 1, topk_cases)) fprintf(stderr, "subgroup reductions not available: portable only\n");
}

static void test_topk_bad_args(void **state) {
    env *e = *state;
    cl_mem d = nmt_test_buffer(e->dev, 4096, NULL);
    assert_int_equal(nmt_op_topk_logprobs(&e->ops, B(d, 0), 2, 10, 10, B(d, 0), 0, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT); /* k = 0 */
    assert_int_equal(nmt_op_topk_logprobs(&e->ops, B(d, 0), 2, 10, 10, B(d, 0), e->ops.topk_max + 1, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_topk_logprobs(&e->ops, B(d, 0), 2, 10, 9, B(d, 0), 3, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT); /* ld < n */
    assert_int_equal(nmt_op_topk_logprobs(&e->ops, B(d, 0), 2, 0, 10, B(d, 0), 3, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT); /* n = 0 */
    assert_int_equal(nmt_op_topk_logprobs(&e->ops, NONE, 2, 10, 10, B(d, 0), 3, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_topk_logprobs(&e->ops, B(d, 0), 0, 10, 10, B(d, 0), 3, 2, B(d, 0)), NMT_OK); /* no rows */
    nmt_ops bare = e->ops; /* ops without the kernel */
    bare.k_topk = NULL;
    assert_int_equal(nmt_op_topk_logprobs(&bare, B(d, 0), 2, 10, 10, B(d, 0), 3, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_topk_logprobs(NULL, B(d, 0), 2, 10, 10, B(d, 0), 3, 2, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_topk_pick(&e->ops, B(d, 0), 2, 10, 10, B(d, 0), 3, 2, B(d, 0), 1, NONE),
                     NMT_ERR_INVALID_ARGUMENT); /* pick without a token buffer */
    assert_int_equal(nmt_op_topk_pick(&e->ops, B(d, 0), 2, 10, 10, B(d, 0), 0, 2, B(d, 0), 0, B(d, 0)),
                     NMT_ERR_INVALID_ARGUMENT); /* k = 0 */
    assert_int_equal(nmt_ops_enable_topk(&e->ops), NMT_OK); /* twice: nothing new */
    nmt_test_release(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_random),
        cmocka_unit_test(test_topk_ties),
        cmocka_unit_test(test_topk_special),
        cmocka_unit_test(test_topk_pick),
        cmocka_unit_test(test_topk_portable),
        cmocka_unit_test(test_topk_bad_args),
    };
    return cmocka_run_group_tests(tests, setup, ops_teardown);
}
