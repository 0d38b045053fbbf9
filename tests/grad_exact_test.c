/* SPDX-License-Identifier: MIT */
/* grad_exact_test.c — the training ops of train/ops/ops_train.h that are not
 * differentials, against naive double references: the TN GEMM of weight
 * gradients (every register block and K chunking), column sums, dropout
 * masks (Philox4x32-10 known answers, reproducibility, rate, counters across
 * 2^32, backward), Adam steps, sum / sum-of-squares reductions with
 * gradient-norm clipping, fill and axpy.  Output buffers start as NaN where
 * they are overwritten; elements outside the output must keep their bits.
 * The fixture and helpers are in ops_common.c. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

/* ---- GEMM TN and column sums (exact references) --------------------------- */

/* M, N, K: with N >= 32 whole vector column blocks; K > 2 * k_chunk in chunks */
static const uint32_t gemm_tn_shapes[][3] = {{1, 1, 1},  {5, 7, 3},   {13, 6, 17},  {4, 4, 0},
                                             {32, 33, 9}, {70, 3, 41}, {9, 70, 600}, {7, 64, 513}};

/* The first n_shapes of gemm_tn_shapes, beta 0 and 1. */
static void run_gemm_tn(env *e, nmt_train_ops *t, uint64_t seed, size_t n_shapes) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t(*shapes)[3] = gemm_tn_shapes;
    for (size_t si = 0; si < n_shapes; si++) {
        for (int beta = 0; beta <= 1; beta++) {
            const uint32_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            const uint32_t lda = M + 2, ldb = N + 1, ldc = N + 3;
            const size_t oa = 3, ob = 5, oc = 1;
            const size_t na = oa + (size_t)(K ? K : 1) * lda, nb = ob + (size_t)(K ? K : 1) * ldb,
                         nc = oc + (size_t)M * ldc;
            float *A = nmt_test_random_f32(&r, na, -1, 1), *Bm = nmt_test_random_f32(&r, nb, -1, 1);
            float *C0 = nmt_test_random_f32(&r, nc, -1, 1);
            if (!beta)
                for (uint32_t m = 0; m < M; m++) nmt_test_fill_const(C0 + oc + (size_t)m * ldc, N, NAN);
            float *want = nmt_test_dup_f32(C0, nc);
            for (uint32_t m = 0; m < M; m++)
                for (uint32_t n = 0; n < N; n++) {
                    double acc = 0;
                    for (uint32_t k = 0; k < K; k++)
                        acc += (double)A[oa + (size_t)k * lda + m] * Bm[ob + (size_t)k * ldb + n];
                    double v = 0.75 * acc + (beta ? (double)C0[oc + (size_t)m * ldc + n] : 0.0);
                    want[oc + (size_t)m * ldc + n] = (float)v;
                }
            cl_mem a = nmt_test_upload_f32(e->dev, A, na), b = nmt_test_upload_f32(e->dev, Bm, nb),
                   c = nmt_test_upload_f32(e->dev, C0, nc);
            nmt_test_assert_ok(e->dev, nmt_op_gemm_tn(t, M, N, K, 0.75f, B(a, oa), lda, B(b, ob), ldb,
                                                      (float)beta, B(c, oc), ldc));
            float *got = download(e, c, nc);
            /* padding columns between rows and the prefix keep their bits */
            for (size_t i = 0; i < nc; i++) {
                int inside = i >= oc && (i - oc) % ldc < N;
                if (!inside) assert_memory_equal(&got[i], &C0[i], sizeof(float));
            }
            nmt_test_assert_close(got, want, nc, EXACT_TOL);
            free(A);
            free(Bm);
            free(C0);
            free(want);
            free(got);
            nmt_test_release(a);
            nmt_test_release(b);
            nmt_test_release(c);
        }
    }
}

/* The device's parameters, then other register blocks and K chunks. */
static void test_gemm_tn(void **state) {
    env *e = *state;
    run_gemm_tn(e, &e->t, 11, NMT_ARRAY_LEN(gemm_tn_shapes));
    static const uint32_t sets[][4] = {{4, 4, 4, 0}, {3, 8, 8, 5}, {5, 20, 16, 64}, {1, 32, 16, 100}, {8, 1, 1, 7}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(sets); i++) {
        nmt_train_ops t;
        nmt_test_assert_ok(e->dev, nmt_train_ops_init_gemm(&t, e->dev, sets[i][0], sets[i][1], sets[i][2]));
        assert_int_equal(t.gemm_vw, sets[i][1] % sets[i][2] == 0 ? sets[i][2] : 1u);
        t.k_chunk = sets[i][3];
        run_gemm_tn(e, &t, 20 + i, NMT_ARRAY_LEN(gemm_tn_shapes));
        nmt_train_ops_release(&t);
    }
    nmt_train_ops t;
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 0, 4, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 4, 33, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 4, 4, 3), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 9, 4, 4), NMT_ERR_INVALID_ARGUMENT);
}

/* On a CLBlast device the weight-gradient products go to CLBlast (when the
 * build links it).  PoCL JITs CLBlast's kernels slowly: the first four
 * shapes only (K = 0 among them, which stays on our kernel). */
static void test_gemm_tn_clblast(void **state) {
    (void)state;
    env ce;
    open_clblast_env(&ce, 1);
    run_gemm_tn(&ce, &ce.t, 30, 4);
    close_env(&ce);
}

static void test_col_sum(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(12);
    static const uint32_t shapes[][2] = {{1, 1}, {7, 5}, {130, 33}, {0, 4}, {9, 48}}; /* 48: whole float16 blocks */
    for (size_t si = 0; si < NMT_ARRAY_LEN(shapes); si++) {
        for (int beta = 0; beta <= 1; beta++) {
            const uint32_t rows = shapes[si][0], cols = shapes[si][1], ld = cols + 2;
            const size_t nx = 1 + (size_t)(rows ? rows : 1) * ld;
            float *X = nmt_test_random_f32(&r, nx, -1, 1);
            float *O = nmt_test_random_f32(&r, cols + 2, -1, 1);
            if (!beta) nmt_test_fill_const(O + 1, cols, NAN);
            float *want = nmt_test_dup_f32(O, cols + 2);
            for (uint32_t c = 0; c < cols; c++) {
                double s = 0;
                for (uint32_t i = 0; i < rows; i++) s += X[1 + (size_t)i * ld + c];
                want[1 + c] = (float)(-2.0 * s + (beta ? O[1 + c] : 0.0));
            }
            cl_mem x = nmt_test_upload_f32(e->dev, X, nx), o = nmt_test_upload_f32(e->dev, O, cols + 2);
            nmt_test_assert_ok(e->dev, nmt_op_col_sum(&e->t, rows, cols, -2.0f, B(x, 1), ld, (float)beta, B(o, 1)));
            float *got = download(e, o, cols + 2);
            assert_memory_equal(&got[0], &O[0], sizeof(float));
            assert_memory_equal(&got[cols + 1], &O[cols + 1], sizeof(float));
            nmt_test_assert_close(got + 1, want + 1, cols, EXACT_TOL);
            free(X);
            free(O);
            free(want);
            free(got);
            nmt_test_release(x);
            nmt_test_release(o);
        }
    }
}

/* ---- dropout --------------------------------------------------------------- */

/* Philox4x32-10, as documented in cl/elementwise_bwd.cl. */
static uint32_t philox_word(uint64_t seed, uint64_t e) {
    const uint64_t ctr = e >> 2;
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int i = 0; i < 10; i++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    const uint32_t w[4] = {c0, c1, c2, c3};
    return w[e & 3];
}

static void test_philox_known_answer(void **state) {
    (void)state;
    /* Random123's published known-answer vectors for philox4x32_10:
     * ctr = key = 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8 (word e & 3 of
     * counter e >> 2, so elements 0..3 of seed 0) */
    assert_int_equal(philox_word(0, 0), 0x6627e8d5u);
    assert_int_equal(philox_word(0, 1), 0xe169c58du);
    assert_int_equal(philox_word(0, 2), 0xbc57ac4cu);
    assert_int_equal(philox_word(0, 3), 0x9b00dbd8u);
}

static void test_dropout(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(91);
    const uint32_t n = 20000;
    const float p = 0.3f;
    const uint64_t seed = 0x123456789abcdefull, off = 1000;
    float *X = nmt_test_random_f32(&r, n, 0.5f, 1.5f);  /* nonzero: zeros in out are drops */
    cl_mem x = nmt_test_upload_f32(e->dev, X, n);
    cl_mem o1 = nmt_test_buffer_f32_fill(e->dev, n, NAN), o2 = nmt_test_buffer_f32_fill(e->dev, n, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(x, 0), B(o1, 0), n, p, seed, off));
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(x, 0), B(o2, 0), n, p, seed, off));
    float *a = download(e, o1, n), *b = download(e, o2, n);
    assert_memory_equal(a, b, n * sizeof(float));  /* reproducible from (seed, offset) */

    const uint32_t thr = (uint32_t)floor((double)p * 16777216.0 + 0.5);
    const float inv = (float)(1.0 / (1.0 - (double)p));
    size_t kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        const int keep = (philox_word(seed, off + i) >> 8) >= thr;
        kept += (size_t)keep;
        assert_true(a[i] == (keep ? X[i] * inv : 0.0f));
    }
    const double rate = (double)kept / n, sigma = sqrt(p * (1.0 - p) / n);
    assert_true(fabs(rate - (1.0 - p)) < 5 * sigma);

    /* a sub-range with the matching offset reproduces the same slice */
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(x, 123), B(o2, 0), 777, p, seed, off + 123));
    float *c = download(e, o2, 777);
    assert_memory_equal(c, a + 123, 777 * sizeof(float));
    /* counters crossing 2^32 inside one work-item's 8 (the high word
     * differs between lanes), with a ragged start and end */
    const uint64_t off_hi = (4ull << 32) - 50;
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(x, 0), B(o2, 0), 203, p, seed, off_hi));
    float *hi = download(e, o2, 203);
    for (uint32_t i = 0; i < 203; i++)
        assert_true(hi[i] == ((philox_word(seed, off_hi + i) >> 8) >= thr ? X[i] * inv : 0.0f));
    free(hi);
    /* another seed gives another mask */
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(x, 0), B(o2, 0), n, p, seed + 1, off));
    float *d2 = download(e, o2, n);
    size_t diff = 0;
    for (uint32_t i = 0; i < n; i++) diff += (a[i] == 0.0f) != (d2[i] == 0.0f);
    assert_true(diff > n / 10);

    /* backward: the same call on dy, in place; zero exactly where dropped,
     * and equal to d/dx sum(dropout(x) * dy) = mask * dy / (1 - p) */
    float *DY = nmt_test_random_f32(&r, n, -1, 1);
    cl_mem dy = nmt_test_upload_f32(e->dev, DY, n);
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(dy, 0), B(dy, 0), n, p, seed, off));
    float *g = download(e, dy, n);
    for (uint32_t i = 0; i < n; i++) {
        assert_true((g[i] == 0.0f) == (a[i] == 0.0f) || DY[i] == 0.0f);
        assert_true(g[i] == (a[i] != 0.0f ? DY[i] * inv : 0.0f));
    }
    /* p = 0 copies */
    nmt_test_assert_ok(e->dev, nmt_op_dropout(&e->t, B(x, 0), B(o2, 0), n, 0.0f, seed, off));
    float *cp = download(e, o2, n);
    assert_memory_equal(cp, X, n * sizeof(float));
    assert_int_equal(nmt_op_dropout(&e->t, B(x, 0), B(o2, 0), n, 1.0f, seed, off), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_dropout(&e->t, B(x, 0), B(o2, 0), n, -0.1f, seed, off), NMT_ERR_INVALID_ARGUMENT);

    float *bufs[] = {X, a, b, c, d2, DY, g, cp};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bufs); i++) free(bufs[i]);
    nmt_test_release(x);
    nmt_test_release(o1);
    nmt_test_release(o2);
    nmt_test_release(dy);
}

/* ---- Adam, reductions, clipping -------------------------------------------- */

static void test_adam(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(101);
    const uint32_t n = 1003;
    for (int variant = 0; variant < 2; variant++) {
        nmt_adam_params ap = nmt_adam_defaults();
        assert_true(ap.beta1 == 0.9f && ap.beta2 == 0.98f && ap.eps == 1e-9f && ap.grad_scale == 1.0f);
        ap.lr = 1e-3f;
        if (variant) {
            ap.grad_scale = 0.5f;
            ap.weight_decay = 0.01f;
            ap.eps = 1e-6f;
        }
        float *P = nmt_test_random_f32(&r, n, -1, 1);
        double *rp = widen(P, n), *rm = calloc(n, sizeof(double)), *rv = calloc(n, sizeof(double));
        assert_non_null(rm);
        assert_non_null(rv);
        cl_mem p = nmt_test_upload_f32(e->dev, P, n), g = nmt_test_buffer_f32_fill(e->dev, n, 0.0f);
        cl_mem m = nmt_test_buffer_f32_fill(e->dev, n, 0.0f), v = nmt_test_buffer_f32_fill(e->dev, n, 0.0f);
        for (uint64_t step = 1; step <= 6; step++) {
            float *G = nmt_test_random_f32(&r, n, -1, 1);
            if (step == 3) nmt_test_fill_const(G, 10, 0.0f);  /* zero gradients still move via m */
            nmt_test_assert_ok(e->dev, nmt_device_write(e->dev, g, 0, n * sizeof(float), G));
            ap.step = step;
            ap.lr = 1e-3f * (float)step;  /* a schedule: lr per step */
            nmt_test_assert_ok(e->dev, nmt_op_adam(&e->t, B(p, 0), B(g, 0), B(m, 0), B(v, 0), n, &ap));
            const double b1 = ap.beta1, b2 = ap.beta2;
            for (uint32_t i = 0; i < n; i++) {
                const double gg = (double)G[i] * ap.grad_scale;
                rm[i] = b1 * rm[i] + (1 - b1) * gg;
                rv[i] = b2 * rv[i] + (1 - b2) * gg * gg;
                const double mh = rm[i] / (1 - pow(b1, (double)step)), vh = rv[i] / (1 - pow(b2, (double)step));
                rp[i] -= ap.lr * (mh / (sqrt(vh) + ap.eps) + ap.weight_decay * rp[i]);
            }
            free(G);
        }
        float *got = download(e, p, n), *want = nmt_test_alloc_f32(n), *gm = download(e, m, n),
              *wm = nmt_test_alloc_f32(n);
        for (uint32_t i = 0; i < n; i++) {
            want[i] = (float)rp[i];
            wm[i] = (float)rm[i];
        }
        nmt_test_assert_close(got, want, n, EXACT_TOL);
        nmt_test_assert_close(gm, wm, n, EXACT_TOL);
        /* the updates themselves (p - p0) to 1e-3 of their size */
        for (uint32_t i = 0; i < n; i++) {
            want[i] -= P[i];
            got[i] -= P[i];
        }
        nmt_test_assert_close(got, want, n, 1e-3);
        free(P);
        free(rp);
        free(rm);
        free(rv);
        free(got);
        free(want);
        free(gm);
        free(wm);
        nmt_test_release(p);
        nmt_test_release(g);
        nmt_test_release(m);
        nmt_test_release(v);
    }
}

static float reduce(env *e, cl_mem x, size_t off, uint32_t n, int square, cl_mem part, cl_mem out) {
    nmt_test_assert_ok(e->dev, nmt_op_reduce_sum(&e->t, B(x, off), n, square, B(part, 0), B(out, 1)));
    float v[2];
    nmt_test_download_f32(e->dev, out, 0, 2, v);
    assert_true(isnan(v[0]));  /* only out[off] is written */
    return v[1];
}

static void test_reduce_and_clip(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(111);
    cl_mem part = nmt_test_buffer_f32_fill(e->dev, NMT_TRAIN_REDUCE_GROUPS, NAN);
    cl_mem out = nmt_test_buffer_f32_fill(e->dev, 2, NAN);
    static const uint32_t sizes[] = {1, 5, 255, 256, 257, 100003};
    for (size_t si = 0; si < NMT_ARRAY_LEN(sizes); si++) {
        const uint32_t n = sizes[si];
        float *X = nmt_test_random_f32(&r, n + 2, -1, 1);
        cl_mem x = nmt_test_upload_f32(e->dev, X, n + 2);
        double s = 0, q = 0;
        for (uint32_t i = 0; i < n; i++) {
            s += X[2 + i];
            q += (double)X[2 + i] * X[2 + i];
        }
        const float gs = reduce(e, x, 2, n, 0, part, out), gq = reduce(e, x, 2, n, 1, part, out);
        assert_true(fabs(gq - q) <= 1e-5 * q);
        assert_true(fabs(gs - s) <= 1e-5 * (sqrt(q) * sqrt((double)n) + 1e-6));
        /* bitwise reproducible */
        const float gq2 = reduce(e, x, 2, n, 1, part, out);
        assert_memory_equal(&gq, &gq2, sizeof gq);
        /* clipping to max_norm: scale, then the norm is max_norm */
        const double norm = sqrt((double)gq), max_norm = 0.5;
        nmt_test_assert_ok(e->dev, nmt_op_scale(&e->t, B(x, 2), n, (float)(max_norm / norm)));
        const float after = reduce(e, x, 2, n, 1, part, out);
        assert_true(fabs(sqrt((double)after) - max_norm) <= 1e-5);
        float *Y = download(e, x, n + 2);
        assert_memory_equal(Y, X, 2 * sizeof(float));
        free(X);
        free(Y);
        nmt_test_release(x);
    }
    /* n = 0: the sum is 0 */
    cl_mem x = nmt_test_buffer_f32_fill(e->dev, 1, 5.0f);
    assert_true(reduce(e, x, 0, 0, 1, part, out) == 0.0f);
    nmt_test_release(x);
    nmt_test_release(part);
    nmt_test_release(out);
}

static void test_fill_axpy(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(121);
    const uint32_t n = 333;
    float *Y = nmt_test_random_f32(&r, n + 2, -1, 1), *X = nmt_test_random_f32(&r, n, -1, 1);
    cl_mem y = nmt_test_upload_f32(e->dev, Y, n + 2), x = nmt_test_upload_f32(e->dev, X, n);
    nmt_test_assert_ok(e->dev, nmt_op_axpy(&e->t, B(y, 1), B(x, 0), n, -0.5f));
    float *got = download(e, y, n + 2);
    assert_true(got[0] == Y[0] && got[n + 1] == Y[n + 1]);
    for (uint32_t i = 0; i < n; i++) assert_true(fabsf(got[1 + i] - (Y[1 + i] - 0.5f * X[i])) <= 1e-6f);
    nmt_test_assert_ok(e->dev, nmt_op_fill(&e->t, B(y, 1), n, 0.0f));
    free(got);
    got = download(e, y, n + 2);
    assert_true(got[0] == Y[0] && got[n + 1] == Y[n + 1]);
    for (uint32_t i = 0; i < n; i++) assert_true(got[1 + i] == 0.0f);
    free(got);
    free(X);
    free(Y);
    nmt_test_release(x);
    nmt_test_release(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_tn),
        cmocka_unit_test(test_gemm_tn_clblast),
        cmocka_unit_test(test_col_sum),
        cmocka_unit_test(test_philox_known_answer),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_reduce_and_clip),
        cmocka_unit_test(test_fill_axpy),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
