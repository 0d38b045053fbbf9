/* SPDX-License-Identifier: MIT */
/* kernels_gemm_test.c — nmt_op_gemm (NT and NN) and nmt_op_gemm_q8 (int8 B
 * with per-row scales) against ref_gemm / ref_gemm_q8 of ref_ops.c on
 * seeded random data: every shape class, odd M/N/K, K = 0, alpha, beta 0/1,
 * bias and ReLU epilogues, element offsets and wide leading dimensions;
 * every parameter set the tuner can choose and every row of the built-in
 * table (nmt_tuning_valid, the field ranges), the cache-blocked paths with
 * tiny blocks, argument validation and the CLBlast provider; the fused
 * product + residual + layer norm (nmt_op_gemm_nt_ln) against ref_gemm and
 * ref_layernorm and bit for bit against the two launches it replaces.  Nothing
 * outside C's block may change (NaN sentinels, compared bitwise) and a NaN
 * C with beta = 0 must not leak into the result.
 *
 * The fixture and helpers are in ops_common.c. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "ref_ops.h"

/* ---- GEMM ---------------------------------------------------------------- */

typedef struct gemm_case {
    int trans_b;
    uint32_t M, N, K;
    float alpha, beta;
    int bias, relu;
    uint32_t pad;   /* added to every leading dimension */
    uint32_t off;   /* element offset of every operand */
} gemm_case;

static void run_gemm(env *e, nmt_ops *ops, const gemm_case *c, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t lda = c->K + c->pad, ldc = c->N + c->pad;
    const uint32_t ldb = (c->trans_b ? c->K : c->N) + c->pad;
    const uint32_t brows = c->trans_b ? c->N : c->K, bcols = c->trans_b ? c->K : c->N;
    const size_t na = c->off + (size_t)c->M * lda + 3, nb = c->off + (size_t)brows * ldb + 3;
    const size_t nc = c->off + (size_t)c->M * ldc + 3, nbias = c->off + c->N + 3;
    float *A = host_block(&r, na, c->off, c->M, c->K, lda, -1, 1);
    float *Bm = host_block(&r, nb, c->off, brows, bcols, ldb, -1, 1);
    /* beta == 0: C starts as NaN, which must not leak into the result */
    float *C = host_block(&r, nc, c->off, c->M, c->N, ldc, -1, 1);
    if (c->beta == 0.0f) nmt_test_fill_const(C, nc, NAN);
    float *bias = host_block(&r, nbias, c->off, 1, c->N, c->N, -0.5f, 0.5f);

    cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dB = nmt_test_upload_f32(e->dev, Bm, nb);
    cl_mem dC = nmt_test_upload_f32(e->dev, C, nc), dbias = nmt_test_upload_f32(e->dev, bias, nbias);
    nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, c->trans_b, c->M, c->N, c->K, c->alpha, B(dA, c->off), lda,
                                           B(dB, c->off), ldb, c->beta, B(dC, c->off), ldc,
                                           c->bias ? B(dbias, c->off) : NONE, c->relu));
    float *got = download(e, dC, nc);
    ref_gemm(c->trans_b, c->M, c->N, c->K, c->alpha, A + c->off, lda, Bm + c->off, ldb, c->beta, C + c->off, ldc,
             c->bias ? bias + c->off : NULL, c->relu);
    char what[160];
    snprintf(what, sizeof what, "gemm %s M=%u N=%u K=%u alpha=%g beta=%g bias=%d relu=%d pad=%u off=%u",
             c->trans_b ? "NT" : "NN", c->M, c->N, c->K, (double)c->alpha, (double)c->beta, c->bias, c->relu, c->pad,
             c->off);
    check_block(got, C, nc, c->off, c->M, c->N, ldc, TOL, what);
    if (c->relu == NMT_ACT_RELU)
        for (uint32_t m = 0; m < c->M; m++)
            for (uint32_t n = 0; n < c->N; n++) assert_true(got[c->off + m * ldc + n] >= 0.0f);
    nmt_test_release(dA);
    nmt_test_release(dB);
    nmt_test_release(dC);
    nmt_test_release(dbias);
    free(A);
    free(Bm);
    free(C);
    free(bias);
    free(got);
}

static const gemm_case gemm_shapes[] = {
    /* trans M   N   K   alpha beta bias relu pad off */
    {1, 1, 37, 5, 1.0f, 0.0f, 0, 0, 0, 0},    /* decoding: one row (1-row kernels below 4 rows) */
    {1, 1, 50, 64, 1.0f, 0.0f, 1, 0, 0, 0},
    {1, 2, 45, 19, 0.5f, 1.0f, 1, 1, 3, 5},
    {1, 4, 45, 19, 0.5f, 1.0f, 1, 1, 3, 5},   /* smallest M of the block kernels */
    {1, 3, 7, 5, 1.0f, 0.0f, 0, 0, 0, 0},
    {1, 3, 7, 5, 1.0f, 0.0f, 1, 1, 0, 0},
    {1, 64, 96, 80, 1.0f, 0.0f, 0, 0, 0, 0},
    {1, 64, 96, 80, 1.0f, 0.0f, 1, 1, 0, 0},
    {1, 64, 96, 80, 1.0f, 1.0f, 1, 0, 0, 0},  /* beta = 1: accumulate */
    {1, 17, 33, 67, 0.5f, 1.0f, 1, 1, 5, 3},  /* odd everything, offsets, wide lds */
    {1, 5, 9, 1, 1.0f, 0.0f, 1, 0, 2, 1},
    {1, 13, 6, 8, 2.0f, 0.0f, 0, 1, 1, 2},    /* K multiple of 4 but lds/offsets not */
    {0, 1, 37, 5, 1.0f, 0.0f, 0, 0, 0, 0},
    {0, 3, 7, 5, 1.0f, 0.0f, 1, 1, 0, 0},
    {0, 64, 96, 80, 1.0f, 0.0f, 1, 1, 0, 0},
    {0, 64, 96, 80, 1.0f, 1.0f, 0, 0, 0, 0},
    {0, 17, 33, 67, 0.5f, 1.0f, 1, 1, 5, 3},
    {0, 2, 3, 2, 1.0f, 0.0f, 0, 0, 3, 7},
    {0, 1, 61, 33, 1.0f, 1.0f, 1, 1, 2, 1},
    {1, 4, 5, 0, 1.0f, 1.0f, 1, 0, 1, 1},     /* K = 0: C = C + bias */
    {0, 4, 5, 0, 1.0f, 0.0f, 1, 1, 0, 0},     /* K = 0, beta = 0: C = relu(bias) */
    /* GELU (2) and swish (3) in the epilogue: scalar columns, whole vectors */
    {1, 1, 37, 5, 1.0f, 0.0f, 1, 2, 0, 0},
    {1, 3, 64, 33, 1.0f, 0.0f, 1, 3, 0, 0},
    {1, 64, 96, 80, 1.0f, 0.0f, 1, 2, 0, 0},
    {1, 17, 33, 67, 0.5f, 1.0f, 1, 3, 5, 3},
    {0, 17, 33, 67, 0.5f, 1.0f, 1, 2, 5, 3},
};

/* C = alpha * A * (Q * scale)^T ...: same cases, B becomes int8 with per-row
 * scales (trans_b ignored: the int8 op is NT only). */
static void run_gemm_q8(env *e, nmt_ops *ops, const gemm_case *c, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t lda = c->K + c->pad, ldc = c->N + c->pad, ldq = c->K + c->pad;
    const size_t na = c->off + (size_t)c->M * lda + 3, nq = c->off + (size_t)c->N * ldq + 5;
    const size_t nc = c->off + (size_t)c->M * ldc + 3, ns = c->off + c->N + 3;
    float *A = host_block(&r, na, c->off, c->M, c->K, lda, -1, 1);
    int8_t *Q = malloc(nq);
    assert_non_null(Q);
    for (size_t i = 0; i < nq; i++) Q[i] = (int8_t)nmt_test_rng_int(&r, -127, 128);
    float *scale = host_block(&r, ns, c->off, 1, c->N, c->N, 0.001f, 0.05f);
    float *C = host_block(&r, nc, c->off, c->M, c->N, ldc, -1, 1);
    if (c->beta == 0.0f) nmt_test_fill_const(C, nc, NAN);
    float *bias = host_block(&r, ns, c->off, 1, c->N, c->N, -0.5f, 0.5f);

    cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dQ = nmt_test_buffer(e->dev, nq, Q);
    cl_mem dS = nmt_test_upload_f32(e->dev, scale, ns), dC = nmt_test_upload_f32(e->dev, C, nc);
    cl_mem dbias = nmt_test_upload_f32(e->dev, bias, ns);
    nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, c->M, c->N, c->K, c->alpha, B(dA, c->off), lda, B(dQ, c->off), ldq,
                                              B(dS, c->off), c->beta, B(dC, c->off), ldc,
                                              c->bias ? B(dbias, c->off) : NONE, c->relu));
    float *got = download(e, dC, nc);
    ref_gemm_q8(c->M, c->N, c->K, c->alpha, A + c->off, lda, Q + c->off, ldq, scale + c->off, c->beta, C + c->off,
                ldc, c->bias ? bias + c->off : NULL, c->relu);
    char what[160];
    snprintf(what, sizeof what, "gemm_q8 M=%u N=%u K=%u alpha=%g beta=%g bias=%d relu=%d pad=%u off=%u", c->M, c->N,
             c->K, (double)c->alpha, (double)c->beta, c->bias, c->relu, c->pad, c->off);
    check_block(got, C, nc, c->off, c->M, c->N, ldc, TOL, what);
    nmt_test_release(dA);
    nmt_test_release(dQ);
    nmt_test_release(dS);
    nmt_test_release(dC);
    nmt_test_release(dbias);
    free(A);
    free(Q);
    free(scale);
    free(C);
    free(bias);
    free(got);
}

/* Extra shapes on the class boundaries (M = 2 | 3, 16 | 17) and wide tiles. */
static const gemm_case gemm_more[] = {
    {1, 16, 70, 37, 1.0f, 0.0f, 1, 0, 1, 2},
    {1, 40, 130, 33, 1.0f, 1.0f, 0, 1, 0, 1},
    {0, 16, 70, 37, 1.0f, 0.0f, 1, 0, 1, 2},
    {0, 40, 130, 33, 1.0f, 1.0f, 0, 1, 0, 1},
    {0, 19, 64, 48, 1.0f, 0.0f, 1, 1, 0, 0},  /* column blocks exactly full */
};

static void run_all_gemm(env *e, nmt_ops *ops, uint64_t seed) {
    for (size_t i = 0; i < NMT_ARRAY_LEN(gemm_shapes); i++) run_gemm(e, ops, &gemm_shapes[i], seed + i);
    for (size_t i = 0; i < NMT_ARRAY_LEN(gemm_more); i++) run_gemm(e, ops, &gemm_more[i], seed + 50 + i);
    for (size_t i = 0; i < NMT_ARRAY_LEN(gemm_shapes); i++)
        if (gemm_shapes[i].trans_b) run_gemm_q8(e, ops, &gemm_shapes[i], seed + 100 + i);
    for (size_t i = 0; i < NMT_ARRAY_LEN(gemm_more); i++)
        if (gemm_more[i].trans_b) run_gemm_q8(e, ops, &gemm_more[i], seed + 150 + i);
}

/* A product with GELU or swish in its epilogue gives the bits of the same
 * product followed by nmt_op_act (what the runtime's FFN relies on: it
 * fuses the activation, the trainer, which keeps the pre-activation, does
 * not): fp32 and int8 weights (as int8 x fp32 and as int8 x int8), one to
 * 64 rows, scalar and vector columns, and with the chained few-row steps on
 * (CPU devices), where the products of up to 4 rows run in one chain
 * launch. */
static void act_bits_case(env *e, nmt_ops *ops, int q8, uint32_t M, uint32_t N, uint32_t K, int act, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    float *A = nmt_test_random_f32(&r, (size_t)M * K, -2, 2);
    float *W = nmt_test_random_f32(&r, (size_t)N * K, -1, 1);
    float *bias = nmt_test_random_f32(&r, N, -1, 1);
    int8_t *Q = malloc((size_t)N * K);
    assert_non_null(Q);
    for (size_t i = 0; i < (size_t)N * K; i++) Q[i] = (int8_t)nmt_test_rng_int(&r, -127, 128);
    float *S = nmt_test_random_f32(&r, N, 0.005f, 0.05f);
    cl_mem dA = nmt_test_upload_f32(e->dev, A, (size_t)M * K), dW = nmt_test_upload_f32(e->dev, W, (size_t)N * K);
    cl_mem dQ = nmt_test_buffer(e->dev, (size_t)N * K, Q), dS = nmt_test_upload_f32(e->dev, S, N);
    cl_mem db = nmt_test_upload_f32(e->dev, bias, N);
    cl_mem fused = nmt_test_buffer(e->dev, (size_t)M * N * sizeof(float), NULL);
    cl_mem pre = nmt_test_buffer(e->dev, (size_t)M * N * sizeof(float), NULL);
    cl_mem split = nmt_test_buffer(e->dev, (size_t)M * N * sizeof(float), NULL);
    for (int pass = 0; pass < 2; pass++) {
        cl_mem out = pass ? pre : fused;
        const int a = pass ? 0 : act;
        if (q8)
            nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, M, N, K, 1.0f, B(dA, 0), K, B(dQ, 0), K, B(dS, 0), 0.0f,
                                                      B(out, 0), N, B(db, 0), a));
        else
            nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, M, N, K, 1.0f, B(dA, 0), K, B(dW, 0), K, 0.0f, B(out, 0),
                                                   N, B(db, 0), a));
    }
    nmt_test_assert_ok(e->dev, nmt_op_act(ops, B(pre, 0), B(split, 0), M * N, act));
    float *f = download(e, fused, (size_t)M * N), *u = download(e, split, (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * N; i++)
        if (memcmp(&f[i], &u[i], sizeof(float)) != 0)
            fail_msg("%s M=%u N=%u K=%u act %d chain %d: element %zu is %.9g fused, %.9g after the product",
                     q8 ? "gemm_q8" : "gemm", M, N, K, act, ops->chain_on, i, (double)f[i], (double)u[i]);
    free(f);
    free(u);
    cl_mem bufs[] = {dA, dW, dQ, dS, db, fused, pre, split};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bufs); i++) nmt_test_release(bufs[i]);
    free(A);
    free(W);
    free(bias);
    free(Q);
    free(S);
}

static void test_gemm_act_bits(void **state) {
    env *e = *state;
    static const uint32_t shapes[][3] = {{1, 96, 64}, {2, 37, 33}, {4, 64, 48}, {17, 33, 67}, {64, 96, 80}};
    /* ops 0: the environment's (int8 weights x fp32); 1: int8 x int8 products
     * of int8 weights (this device's fast variant, with their scratch) */
    nmt_ops i8ops;
    open_i8_ops(e, &i8ops, nmt_i8dot_fast_variant(e->dev));
    i8ops.i8_cap = 64 * 80;
    i8ops.i8_rows = 64;
    i8ops.i8_a = B(nmt_test_buffer(e->dev, i8ops.i8_cap, NULL), 0);
    i8ops.i8_s = B(nmt_test_buffer(e->dev, i8ops.i8_rows * sizeof(float), NULL), 0);
    nmt_ops *sets[2] = {&e->ops, &i8ops};
    for (int o = 0; o < 2; o++)
        for (int chain = 0; chain < 2; chain++) {
            nmt_test_assert_ok(e->dev, nmt_ops_chain_enable(sets[o], chain));
            if (chain && !sets[o]->chain_on) break; /* a device without chained steps (not a CPU) */
            const uint64_t n_i8 = sets[o]->n_i8_products;
            for (int q8 = 0; q8 < 2; q8++)
                for (size_t i = 0; i < NMT_ARRAY_LEN(shapes); i++)
                    for (int act = NMT_ACT_GELU; act <= NMT_ACT_SWISH; act++)
                        act_bits_case(e, sets[o], q8 || o, shapes[i][0], shapes[i][1], shapes[i][2], act,
                                      1000 + 10 * i + act);
            if (o) assert_true(sets[o]->n_i8_products > n_i8); /* int8 x int8 did run */
            nmt_test_assert_ok(e->dev, nmt_ops_chain_enable(sets[o], 0));
        }
    nmt_test_release(i8ops.i8_a.mem);
    nmt_test_release(i8ops.i8_s.mem);
    nmt_ops_release(&i8ops);
}

/* Cache blocking (NN K chunks, NT row tiles) with tiny blocks, so the
 * chunked paths run on small shapes: chunks accumulate, bias and ReLU are
 * applied once at the end, offsets move with every chunk and tile. */
static const gemm_case gemm_blocked[] = {
    {0, 9, 40, 70, 1.0f, 0.0f, 1, 1, 3, 2},    /* NN: K in chunks of 8 (9 launches) */
    {0, 20, 33, 17, 0.5f, 1.0f, 1, 0, 1, 5},   /* NN: chunks + ragged last chunk, beta 1 */
    {0, 5, 8, 64, -1.0f, 0.0f, 0, 1, 0, 0},    /* NN: ReLU only after the last chunk */
    {1, 500, 21, 30, 1.0f, 0.0f, 1, 1, 2, 3},  /* NT: rows in tiles */
    {1, 450, 40, 9, 0.5f, 1.0f, 1, 0, 0, 1},   /* NT: tiles + ragged last tile, beta 1 */
};

static void test_gemm_blocking(void **state) {
    env *e = *state;
    const uint32_t kc = e->ops.k_chunk, tb = e->ops.a_tile_bytes;
    e->ops.k_chunk = 8;
    e->ops.a_tile_bytes = 64;  /* one work-group of rows per tile */
    for (size_t i = 0; i < NMT_ARRAY_LEN(gemm_blocked); i++) run_gemm(e, &e->ops, &gemm_blocked[i], 700 + i);
    e->ops.k_chunk = 0;
    e->ops.a_tile_bytes = 0;
    for (size_t i = 0; i < NMT_ARRAY_LEN(gemm_blocked); i++) run_gemm(e, &e->ops, &gemm_blocked[i], 700 + i);
    e->ops.k_chunk = kc;
    e->ops.a_tile_bytes = tb;
}

/* The device's own parameters (table row or tuning file). */
static void test_gemm(void **state) {
    env *e = *state;
    run_all_gemm(e, &e->ops, 100);
}

/* Every parameter set the tuner can choose: set i takes candidate i of
 * every (op, class) (the last one when a list is shorter); then every row
 * of the built-in table, whose settings must all be in range, so a row for
 * a device CI never sees (a GPU's, Intel's runtime's) is checked here on
 * the test device.  A row's CLBlast classes run the portable default's
 * kernel instead (test_gemm_clblast tests that provider).  Each set runs
 * on a fresh device (program table). */
static void test_gemm_parameter_sets(void **state) {
    (void)state;
    size_t longest = 0;
    nmt_gemm_cfg cand[NMT_GOP_COUNT][NMT_GCLASS_COUNT][32];
    size_t count[NMT_GOP_COUNT][NMT_GCLASS_COUNT];
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
            count[op][c] = nmt_gemm_candidates((nmt_gemm_op)op, (nmt_gemm_class)c, cand[op][c], 32);
            assert_true(count[op][c] >= 2);  /* the default and at least one other */
            for (size_t i = 0; i < count[op][c]; i++) assert_true(nmt_gemm_cfg_valid((nmt_gemm_op)op, &cand[op][c][i]));
            longest = NMT_MAX(longest, count[op][c]);
        }
    nmt_tuning def;
    assert_true(nmt_tuning_table_row(0, &def));
    size_t rows = 0;
    for (nmt_tuning t; nmt_tuning_table_row(rows, &t); rows++) {
        if (!nmt_tuning_valid(&t)) fail_msg("%s: a setting out of range", t.origin);
        assert_non_null(strstr(t.origin, "table: "));
    }
    assert_true(rows >= 4); /* default, GPU, PoCL CPU, Intel CPU */
    assert_false(nmt_tuning_table_row(rows, &def));
    for (size_t set = 0; set < longest + rows; set++) {
        void *mem = NULL;
        nmt_device *dev = nmt_test_device_open(&mem);
        assert_non_null(dev);
        nmt_tuning t = dev->tuning;
        if (set >= longest) {
            assert_true(nmt_tuning_table_row(set - longest, &t));
            print_message("table row %zu (%s)\n", set - longest, t.origin);
            for (int op = 0; op < NMT_GOP_COUNT; op++)
                for (int c = 0; c < NMT_GCLASS_COUNT; c++)
                    if (t.gemm[op][c].provider == NMT_GEMM_CLBLAST) t.gemm[op][c] = def.gemm[op][c];
        } else {
            for (int op = 0; op < NMT_GOP_COUNT; op++)
                for (int c = 0; c < NMT_GCLASS_COUNT; c++)
                    t.gemm[op][c] = cand[op][c][NMT_MIN(set, count[op][c] - 1)];
        }
        nmt_ops ops;
        nmt_test_assert_ok(dev, nmt_ops_init_tuned(&ops, dev, &t));
        nmt_test_assert_ok(dev, nmt_ops_enable_q8(&ops));
        env ce = {.dev = dev, .mem = mem, .ops = ops};
        run_all_gemm(&ce, &ops, 1000 + 300 * set);
        nmt_ops_release(&ops);
        nmt_test_device_close(dev, mem);
    }
}

/* nmt_tuning_valid: each field's range, as the tuning-file reader's. */
static void test_tuning_valid(void **state) {
    (void)state;
    nmt_tuning ok;
    assert_true(nmt_tuning_table_row(0, &ok));
    assert_true(nmt_tuning_valid(&ok));
    assert_false(nmt_tuning_valid(NULL));
    static const uint16_t bad_wg[] = {0, 3, 48, 2048};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bad_wg); i++) {
        nmt_tuning t = ok;
        t.wg = bad_wg[i];
        assert_false(nmt_tuning_valid(&t));
        t = ok;
        t.reduce_wg = bad_wg[i];
        assert_false(nmt_tuning_valid(&t));
    }
    nmt_tuning t = ok;
    t.wg = 1024;
    t.reduce_wg = 1;
    assert_true(nmt_tuning_valid(&t));
    t = ok;
    t.i8dot[NMT_GCLASS_BIG] = NMT_I8DOT_ON + 1;
    assert_false(nmt_tuning_valid(&t));
    t = ok;
    t.gemm[NMT_GOP_Q8][NMT_GCLASS_M16].provider = NMT_GEMM_CLBLAST; /* own kernels only */
    assert_false(nmt_tuning_valid(&t));
    t = ok;
    t.gemm[NMT_GOP_NN][NMT_GCLASS_M2].kgroup = 1; /* NT and Q8 only */
    assert_false(nmt_tuning_valid(&t));
    t = ok;
    t.gemm[NMT_GOP_I8][NMT_GCLASS_BIG].tm = 9;
    assert_false(nmt_tuning_valid(&t));
}

static void test_gemm_arguments(void **state) {
    env *e = *state;
    nmt_log_fn saved = e->dev->log.fn;
    e->dev->log.fn = NULL;  /* the refusals below are logged at ERROR */
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    cl_mem m = nmt_test_upload_f32(e->dev, x, 64);
    nmt_ops *o = &e->ops;
    /* zero sizes: no-op, buffer untouched */
    assert_int_equal(nmt_op_gemm(o, 1, 0, 4, 4, 1, B(m, 0), 4, B(m, 0), 4, 0, B(m, 0), 4, NONE, 0), NMT_OK);
    assert_int_equal(nmt_op_gemm(o, 1, 4, 0, 4, 1, B(m, 0), 4, B(m, 0), 4, 0, B(m, 0), 4, NONE, 0), NMT_OK);
    float got[64];
    nmt_test_download_f32(e->dev, m, 0, 64, got);
    assert_memory_equal(got, x, sizeof x);
    /* invalid */
    assert_int_equal(nmt_op_gemm(o, 1, 2, 2, 2, 1, NONE, 2, B(m, 0), 2, 0, B(m, 0), 2, NONE, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm(o, 1, 2, 2, 2, 1, B(m, 0), 2, NONE, 2, 0, B(m, 0), 2, NONE, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm(o, 1, 2, 2, 2, 1, B(m, 0), 2, B(m, 0), 2, 0, NONE, 2, NONE, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm(o, 1, 2, 2, 2, 1, B(m, 0), 2, B(m, 0), 2, 0.5f, B(m, 0), 2, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);  /* beta must be 0 or 1 */
    assert_int_equal(nmt_op_gemm(o, 1, 2, 2, 3, 1, B(m, 0), 2, B(m, 0), 3, 0, B(m, 0), 2, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);  /* lda < K */
    assert_int_equal(nmt_op_gemm(o, 0, 2, 3, 2, 1, B(m, 0), 2, B(m, 0), 2, 0, B(m, 0), 3, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);  /* NN: ldb < N */
    assert_int_equal(nmt_op_gemm(o, 1, 2, 3, 2, 1, B(m, 0), 2, B(m, 0), 2, 0, B(m, 0), 2, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);  /* ldc < N */
#if SIZE_MAX > 0xffffffffu /* an offset of 2^32 elements needs a 64-bit size_t */
    assert_int_equal(nmt_op_gemm(o, 1, 2, 2, 2, 1, B(m, (size_t)1 << 32), 2, B(m, 0), 2, 0, B(m, 0), 2, NONE, 0),
                     NMT_ERR_UNSUPPORTED);       /* beyond 32-bit indexing */
#endif
    assert_int_equal(nmt_op_gemm(NULL, 1, 2, 2, 2, 1, B(m, 0), 2, B(m, 0), 2, 0, B(m, 0), 2, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(m);
    e->dev->log.fn = saved;
}

/* The CLBlast provider (only when the library links CLBlast; PoCL JITs its
 * kernels for tens of seconds, so one NT shape with every epilogue). */
static void test_gemm_clblast(void **state) {
    (void)state;
    env ce;
    open_clblast_env(&ce, 0);
    const gemm_case c[] = {
        {1, 17, 33, 67, 0.5f, 1.0f, 1, 1, 5, 3},  /* bias + relu through bias_act */
        {1, 9, 20, 16, 1.0f, 0.0f, 0, 0, 0, 0},   /* plain: CLBlast alone, C starts as NaN */
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(c); i++) run_gemm(&ce, &ce.ops, &c[i], 900 + i);
    close_env(&ce);
}

/* ---- product + residual + layer norm --------------------------------------- */

typedef struct ln_case {
    uint32_t M, N, K;
    int bias;
    int in_place;  /* O is R (a post-norm sub-layer's x = LN(x + F(x))) */
    uint32_t pad;  /* added to the leading dimensions of A and B */
    uint32_t off;  /* element offset of every operand */
} ln_case;

/* nmt_op_gemm_nt_ln (or, layer, nmt_layer_linear_norm) against ref_gemm +
 * ref_layernorm, and bit for bit against nmt_op_gemm then nmt_op_layernorm
 * on the device: the fused launch must change no output of a decoder. */
static void run_gemm_ln(env *e, const ln_case *c, int layer, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t lda = c->K + c->pad, ldb = c->K + c->pad, N = c->N, M = c->M;
    const size_t na = c->off + (size_t)M * lda + 3, nb = c->off + (size_t)N * ldb + 3, nr = c->off + (size_t)M * N + 3;
    float *A = host_block(&r, na, c->off, M, c->K, lda, -1, 1);
    float *W = host_block(&r, nb, c->off, N, c->K, ldb, -1, 1);
    float *R = host_block(&r, nr, c->off, M, N, N, -1, 1);
    float *bias = host_block(&r, c->off + N + 3, c->off, 1, N, N, -0.5f, 0.5f);
    float *g = nmt_test_random_f32(&r, N + 1, 0.5f, 1.5f), *be = nmt_test_random_f32(&r, N + 1, -0.5f, 0.5f);
    float *out = nmt_test_alloc_f32(nr), *t = nmt_test_alloc_f32((size_t)M * N);
    nmt_test_fill_const(out, nr, NAN);
    const float eps = 1e-5f;

    cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dW = nmt_test_upload_f32(e->dev, W, nb);
    cl_mem dR = nmt_test_upload_f32(e->dev, R, nr), dR2 = nmt_test_upload_f32(e->dev, R, nr);
    cl_mem dO = nmt_test_upload_f32(e->dev, out, nr), dO2 = nmt_test_upload_f32(e->dev, out, nr);
    cl_mem dT = nmt_test_upload_f32(e->dev, out, nr), dbias = nmt_test_upload_f32(e->dev, bias, c->off + N + 3);
    cl_mem dg = nmt_test_upload_f32(e->dev, g, N + 1), db = nmt_test_upload_f32(e->dev, be, N + 1);
    const cl_mem target = c->in_place ? dR : dO;
    const nmt_buf bb = c->bias ? B(dbias, c->off) : NONE;
    if (layer) {
        const nmt_lin w = {.w = B(dW, c->off), .b = bb}, ln = {.w = B(dg, 1), .b = B(db, 1)};
        assert_int_equal(ldb, c->K); /* a layer's weights are dense */
        nmt_test_assert_ok(e->dev, nmt_layer_linear_norm(&e->ops, B(dA, c->off), lda, M, &w, N, c->K, B(dR, c->off),
                                                         &ln, eps, B(dT, c->off), B(target, c->off)));
    } else {
        nmt_test_assert_ok(e->dev, nmt_op_gemm_nt_ln(&e->ops, M, N, c->K, B(dA, c->off), lda, B(dW, c->off), ldb, bb,
                                                     B(dR, c->off), N, B(dg, 1), B(db, 1), eps, B(target, c->off), N));
    }
    float *got = download(e, target, nr);

    float *want = c->in_place ? R : out;
    ref_gemm(1, M, N, c->K, 1.0f, A + c->off, lda, W + c->off, ldb, 0.0f, t, N, c->bias ? bias + c->off : NULL, 0);
    ref_layernorm(t, R + c->off, want + c->off, M, N, g + 1, be + 1, eps);
    char what[128];
    snprintf(what, sizeof what, "gemm_nt_ln%s M=%u N=%u K=%u bias=%d in_place=%d pad=%u off=%u norm_wg=%zu",
             layer ? " (layer)" : "", M, N, c->K, c->bias, c->in_place, c->pad, c->off, e->ops.norm_wg);
    check_block(got, want, nr, c->off, M, N, N, TOL, what);

    /* the two launches it replaces */
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&e->ops, 1, M, N, c->K, 1.0f, B(dA, c->off), lda, B(dW, c->off), ldb, 0.0f,
                                           B(dT, c->off), N, bb, 0));
    nmt_test_assert_ok(e->dev, nmt_op_layernorm(&e->ops, B(dT, c->off), B(dR2, c->off), B(dO2, c->off), M, N, B(dg, 1),
                                                B(db, 1), eps));
    float *got2 = download(e, dO2, nr);
    if (memcmp(got + c->off, got2 + c->off, (size_t)M * N * sizeof(float)) != 0) fail_msg("%s: not bitwise", what);

    const cl_mem mems[] = {dA, dW, dR, dR2, dO, dO2, dT, dbias, dg, db};
    for (size_t i = 0; i < NMT_ARRAY_LEN(mems); i++) nmt_test_release(mems[i]);
    void *bufs[] = {A, W, R, bias, g, be, out, t, got, got2};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bufs); i++) free(bufs[i]);
}

static const ln_case ln_cases[] = {
    /* M  N    K     bias in_place pad off */
    {1, 256, 256, 1, 1, 0, 0},   /* a decoder step's output projection, d 256 */
    {2, 256, 1024, 1, 1, 0, 0},  /* its second FFN product, two rows */
    {1, 512, 2048, 1, 0, 0, 0},  /* the base shape's */
    {2, 37, 5, 1, 0, 3, 5},      /* odd N and K (tails of the float16 vectors), offsets, wide lds */
    {1, 300, 67, 0, 1, 1, 2},    /* no bias; N past one column block per work-item */
    {2, 48, 16, 1, 0, 0, 0},     /* whole vectors only */
    {1, 1, 8, 1, 0, 0, 0},       /* N = 1: the output is beta */
    {2, 20, 0, 1, 1, 0, 1},      /* K = 0: LN(bias + R) */
};

static void gemm_ln_cases(env *e, uint64_t seed) {
    for (size_t i = 0; i < NMT_ARRAY_LEN(ln_cases); i++) run_gemm_ln(e, &ln_cases[i], 0, seed + i);
}

/* Run body with ops whose NT m2 class is our kernel: the fixture's, or
 * (where the table gives that class to CLBlast: GPU rows, and Oclgrind,
 * which reports itself a CPU and a GPU) the same tuning with the portable
 * default's m2 configuration, so the fused kernel is tested on every device. */
static void with_own_m2(env *e, void (*body)(env *e)) {
    if (e->ops.k_gemm_ln != NULL) {
        body(e);
        return;
    }
    nmt_tuning t = e->dev->tuning, d;
    assert_true(nmt_tuning_table_row(0, &d)); /* the portable default */
    t.gemm[NMT_GOP_NT][NMT_GCLASS_M2] = d.gemm[NMT_GOP_NT][NMT_GCLASS_M2];
    env ce = *e;
    nmt_test_assert_ok(e->dev, nmt_ops_init_tuned(&ce.ops, e->dev, &t));
    assert_non_null(ce.ops.k_gemm_ln);
    body(&ce);
    nmt_ops_release(&ce.ops);
}

/* The device's launch (PoCL: a work-item per row, as its layernorm) and a
 * work-group of 64 per row (how it runs where layernorm uses reduce_wg). */
static void gemm_ln_body(env *e) {
    gemm_ln_cases(e, 4000);
    const size_t saved = e->ops.norm_wg;
    e->ops.norm_wg = NMT_MIN((size_t)64, e->ops.reduce_wg);
    assert_true(e->ops.norm_wg > 1);
    gemm_ln_cases(e, 4100);
    e->ops.norm_wg = saved;
}

static void test_gemm_ln(void **state) { with_own_m2(*state, gemm_ln_body); }

/* nmt_layer_linear_norm: fused at M <= 2, two launches above (M = 4, 17)
 * or when the fused path is off; the same values either way. */
static void linear_norm_body(env *e) {
    const ln_case c[] = {
        {1, 256, 256, 1, 1, 0, 0}, {4, 256, 256, 1, 1, 0, 0}, {17, 40, 24, 1, 0, 0, 3}, {2, 33, 64, 0, 0, 0, 0}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(c); i++) run_gemm_ln(e, &c[i], 1, 4200 + i);
    e->ops.fused_norm = 0;
    for (size_t i = 0; i < NMT_ARRAY_LEN(c); i++) run_gemm_ln(e, &c[i], 1, 4300 + i);
    e->ops.fused_norm = 1;
}

static void test_linear_norm_layer(void **state) { with_own_m2(*state, linear_norm_body); }

static void gemm_ln_arguments_body(env *e) {
    nmt_log_fn saved = e->dev->log.fn;
    e->dev->log.fn = NULL;
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    cl_mem m = nmt_test_upload_f32(e->dev, x, 64), o = nmt_test_upload_f32(e->dev, x, 64);
    nmt_ops *p = &e->ops;
    const nmt_buf a = B(m, 0), w = B(m, 16), r = B(o, 0), g = B(m, 32), bt = B(m, 48);
#define LN(ops, M, N, K, A, lda, ldb, R, ldr, G, O, ldo) \
    nmt_op_gemm_nt_ln(ops, M, N, K, A, lda, w, ldb, NONE, R, ldr, G, bt, 1e-5f, O, ldo)
    /* M = 0: nothing to do, nothing written */
    assert_int_equal(LN(p, 0, 4, 4, a, 4, 4, r, 4, g, r, 4), NMT_OK);
    float got[64];
    nmt_test_download_f32(e->dev, o, 0, 64, got);
    assert_memory_equal(got, x, sizeof x);
    /* not this op's: more than two rows, or the fused path off */
    assert_int_equal(LN(p, 3, 4, 4, a, 4, 4, r, 4, g, r, 4), NMT_ERR_UNSUPPORTED);
    p->fused_norm = 0;
    assert_int_equal(LN(p, 1, 4, 4, a, 4, 4, r, 4, g, r, 4), NMT_ERR_UNSUPPORTED);
    p->fused_norm = 1;
    /* invalid */
    assert_int_equal(LN(p, 1, 4, 4, NONE, 4, 4, r, 4, g, r, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(LN(p, 1, 4, 4, a, 4, 4, NONE, 4, g, r, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(LN(p, 1, 4, 4, a, 4, 4, r, 4, NONE, r, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(LN(p, 1, 4, 4, a, 4, 4, r, 4, g, NONE, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(LN(p, 1, 4, 5, a, 4, 5, r, 4, g, r, 4), NMT_ERR_INVALID_ARGUMENT);  /* lda < K */
    assert_int_equal(LN(p, 1, 4, 5, a, 5, 4, r, 4, g, r, 4), NMT_ERR_INVALID_ARGUMENT);  /* ldb < K */
    assert_int_equal(LN(p, 2, 4, 4, a, 4, 4, r, 3, g, r, 4), NMT_ERR_INVALID_ARGUMENT);  /* ldr < N */
    assert_int_equal(LN(p, 2, 4, 4, a, 4, 4, r, 4, g, r, 3), NMT_ERR_INVALID_ARGUMENT);  /* ldo < N */
    assert_int_equal(LN(p, 1, 4, 4, a, 4, 4, r, 4, g, B(m, 2), 4), NMT_ERR_INVALID_ARGUMENT); /* O overlaps A */
    assert_int_equal(LN(NULL, 1, 4, 4, a, 4, 4, r, 4, g, r, 4), NMT_ERR_INVALID_ARGUMENT);
#undef LN
    nmt_test_download_f32(e->dev, o, 0, 64, got);
    assert_memory_equal(got, x, sizeof x);
    nmt_test_download_f32(e->dev, m, 0, 64, got);
    assert_memory_equal(got, x, sizeof x);
    nmt_test_release(m);
    nmt_test_release(o);
    e->dev->log.fn = saved;
}

static void test_gemm_ln_arguments(void **state) { with_own_m2(*state, gemm_ln_arguments_body); }

/* Where CLBlast runs the one- and two-row products the fused kernel is not
 * built, and the op refuses: the layer then takes the two launches. */
static void test_gemm_ln_clblast(void **state) {
    env *e = *state;
    if (!nmt_device_have_clblast()) {
        fprintf(stderr, "library built without CLBlast: skipping\n");
        skip();
    }
    nmt_tuning t = e->dev->tuning;
    t.gemm[NMT_GOP_NT][NMT_GCLASS_M2].provider = NMT_GEMM_CLBLAST;
    t.gemm[NMT_GOP_NT][NMT_GCLASS_M2].kgroup = 0; /* a GPU row's kgroup class (CLBlast takes none) */
    nmt_ops ops;
    nmt_test_assert_ok(e->dev, nmt_ops_init_tuned(&ops, e->dev, &t));
    assert_null(ops.k_gemm_ln);
    cl_mem m = nmt_test_upload_f32(e->dev, (const float[16]){0}, 16);
    assert_int_equal(nmt_op_gemm_nt_ln(&ops, 1, 2, 2, B(m, 0), 2, B(m, 4), 2, NONE, B(m, 8), 2, B(m, 12), B(m, 14),
                                       1e-5f, B(m, 8), 2),
                     NMT_ERR_UNSUPPORTED);
    nmt_test_release(m);
    nmt_ops_release(&ops);
}

/* nmt_ops_plan_streaming: weights that fit the device's global memory
 * cache change nothing; more, on a CPU, launch the NT m2 class in
 * work-groups of at most 8 and unfuse the norm; the products stay right. */
static void test_plan_streaming(void **state) {
    env *e = *state;
    nmt_ops o;
    nmt_test_assert_ok(e->dev, nmt_ops_init(&o, e->dev));
    const uint64_t cache = e->dev->global_cache_bytes;
    const uint16_t wg0 = o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].wg;
    const int fused0 = o.fused_norm;
    assert_int_equal(nmt_ops_plan_streaming(&o, cache), 0); /* fits (or unknown: 0) */
    assert_int_equal(o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].wg, wg0);
    assert_int_equal(o.fused_norm, fused0);
    /* (not over a kgroup class, whose work-group is compiled in: devices
     * that call themselves CPU and GPU, as Oclgrind's, take the GPU row) */
    const int applies = e->dev->info.is_cpu && cache > 0 && !o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].kgroup;
    assert_int_equal(nmt_ops_plan_streaming(&o, cache + 1), applies);
    if (applies) {
        assert_int_equal(o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].wg, wg0 < 8 ? wg0 : 8);
        assert_int_equal(o.fused_norm, 0);
        cl_mem m = nmt_test_upload_f32(e->dev, (const float[16]){0}, 16);
        assert_int_equal(nmt_op_gemm_nt_ln(&o, 1, 2, 2, B(m, 0), 2, B(m, 4), 2, NONE, B(m, 8), 2, B(m, 12), B(m, 14),
                                           1e-5f, B(m, 8), 2),
                         NMT_ERR_UNSUPPORTED);
        nmt_test_release(m);
    } else {
        assert_int_equal(o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].wg, wg0);
        assert_int_equal(o.fused_norm, fused0);
    }
    const gemm_case cases[] = {{1, 1, 512, 64, 1.0f, 0.0f, 1, 0, 0, 0}, {1, 2, 300, 37, 1.0f, 1.0f, 1, 1, 3, 5}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) run_gemm(e, &o, &cases[i], 900 + i);
    nmt_ops_release(&o);
    assert_int_equal(nmt_ops_plan_streaming(NULL, UINT64_MAX), 0);
}

static int same_gemm_cfgs(const nmt_tuning *a, const nmt_tuning *b) {
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
            const nmt_gemm_cfg *x = &a->gemm[op][c], *y = &b->gemm[op][c];
            if (x->provider != y->provider || x->tm != y->tm || x->tn != y->tn || x->vw != y->vw ||
                x->mfast != y->mfast || x->wg != y->wg || x->kgroup != y->kgroup)
                return 0;
        }
    return 1;
}

/* The products of few rows as a work-group per column (nmt_gemm_cfg.kgroup,
 * the GPU row's NT and Q8 m2 / m16 classes): the tuning file's lines, the
 * refusals, the table's GPU row, and products of 1..16 rows (K with a
 * scalar tail, bias, ReLU, beta 1, offsets) against the naive one, at
 * work-groups of 64 and 16; the streaming rule leaves them alone. */
static void test_gemm_kgroup(void **state) {
    env *e = *state;
    nmt_tuning t = e->dev->tuning;
    static const char text[] = "nmt-edge-tuning 1\n"
                               "gemm nt m2 own tm=2 tn=1 vw=4 mfast=0 wg=16 kgroup=1\n"
                               "gemm nt m16 own tm=8 tn=1 vw=4 mfast=0 wg=64 kgroup=1\n"
                               "gemm q8 m2 own tm=1 tn=1 vw=8 mfast=0 wg=16 kgroup=1\n"
                               "gemm q8 m16 own tm=4 tn=1 vw=4 mfast=0 wg=64 kgroup=1\n"
                               "gemm nt big own tm=4 tn=4 vw=4 mfast=0 wg=64 kgroup=0\n";
    assert_int_equal(nmt_tuning_parse(&t, text, sizeof text - 1), NMT_OK);
    const nmt_gemm_cfg *c = &t.gemm[NMT_GOP_NT][NMT_GCLASS_M2];
    assert_int_equal(c->kgroup, 1);
    assert_int_equal(c->tm, 2);
    assert_int_equal(c->wg, 16);
    assert_int_equal(t.gemm[NMT_GOP_Q8][NMT_GCLASS_M2].vw, 8);
    assert_int_equal(t.gemm[NMT_GOP_NT][NMT_GCLASS_BIG].kgroup, 0);
    char buf[2048];
    assert_true(nmt_tuning_format(&t, "x", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "gemm nt m2 own tm=2 tn=1 vw=4 mfast=0 wg=16 kgroup=1\n"));
    assert_non_null(strstr(buf, "gemm nt big own tm=4 tn=4 vw=4 mfast=0 wg=64\n"));
    nmt_tuning back = e->dev->tuning;
    assert_int_equal(nmt_tuning_parse(&back, buf, strlen(buf)), NMT_OK);
    assert_true(same_gemm_cfgs(&back, &t));
    static const char *const bad[] = {
        "nmt-edge-tuning 1\ngemm nt m2 own tm=2 tn=4 vw=4 mfast=0 wg=64 kgroup=1\n", /* tn must be 1 */
        "nmt-edge-tuning 1\ngemm nt m2 own tm=2 tn=1 vw=4 mfast=1 wg=64 kgroup=1\n", /* no mfast */
        "nmt-edge-tuning 1\ngemm nn m2 own tm=2 tn=1 vw=4 mfast=0 wg=64 kgroup=1\n", /* NT and Q8 only */
        "nmt-edge-tuning 1\ngemm i8 m2 own tm=2 tn=1 vw=4 mfast=0 wg=64 kgroup=1\n",
        "nmt-edge-tuning 1\ngemm nt m2 own tm=2 tn=1 vw=4 mfast=0 wg=64 kgroup=2\n",
        "nmt-edge-tuning 1\ngemm nt m2 own tm=2 tn=1 vw=4 mfast=0 wg=64 kgroup=1 x\n",
        "nmt-edge-tuning 1\ngemm nt m2 own tm=2 tn=1 vw=4 mfast=0 wg=64 kgroup\n",
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(bad); i++) {
        nmt_tuning u = t;
        assert_int_equal(nmt_tuning_parse(&u, bad[i], strlen(bad[i])), NMT_ERR_INVALID_ARGUMENT);
        assert_true(same_gemm_cfgs(&u, &t)); /* untouched */
    }
    nmt_tuning u = t; /* "clblast" over a kgroup class: CLBlast, no kgroup */
    static const char blas[] = "nmt-edge-tuning 1\ngemm nt m2 clblast\n";
    assert_int_equal(nmt_tuning_parse(&u, blas, sizeof blas - 1), NMT_OK);
    assert_int_equal(u.gemm[NMT_GOP_NT][NMT_GCLASS_M2].provider, NMT_GEMM_CLBLAST);
    assert_int_equal(u.gemm[NMT_GOP_NT][NMT_GCLASS_M2].kgroup, 0);
    nmt_device_info gpu;
    memset(&gpu, 0, sizeof gpu);
    gpu.is_gpu = 1;
    nmt_tuning g;
    nmt_tuning_from_table(&g, &gpu);
    for (int op = NMT_GOP_NT; op <= NMT_GOP_Q8; op += NMT_GOP_Q8 - NMT_GOP_NT) {
        assert_int_equal(g.gemm[op][NMT_GCLASS_M2].kgroup, 1);
        assert_int_equal(g.gemm[op][NMT_GCLASS_M16].kgroup, 1);
        assert_int_equal(g.gemm[op][NMT_GCLASS_BIG].kgroup, 0);
    }
    assert_int_equal(g.gemm[NMT_GOP_NT][NMT_GCLASS_BIG].provider, NMT_GEMM_CLBLAST);

    nmt_ops o;
    nmt_test_assert_ok(e->dev, nmt_ops_init_tuned(&o, e->dev, &t));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(&o));
    assert_int_equal(o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].wg, 16);
    assert_null(o.k_gemm_ln); /* no gemm_nt_ln beside a kgroup m2 class */
    assert_int_equal(nmt_ops_plan_streaming(&o, UINT64_MAX), 0);
    assert_int_equal(o.cfg[NMT_GOP_NT][NMT_GCLASS_M2].wg, 16);
    const gemm_case cases[] = {
        {1, 1, 50, 67, 1.0f, 0.0f, 1, 0, 0, 0},    /* K % 4 = 3: the scalar tail */
        {1, 2, 33, 300, 0.5f, 1.0f, 1, 1, 3, 5},   /* beta 1, ReLU, padding and offsets */
        {1, 3, 17, 1, 1.0f, 0.0f, 0, 0, 0, 0},     /* K 1: only a tail */
        {1, 9, 40, 129, -1.0f, 0.0f, 1, 1, 1, 2},  /* two row blocks, the second ragged */
        {1, 16, 65, 520, 1.0f, 1.0f, 0, 1, 0, 7},  /* K past one sweep of the group */
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
        run_gemm(e, &o, &cases[i], 950 + i);
        run_gemm_q8(e, &o, &cases[i], 970 + i);
    }
    nmt_ops_release(&o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_act_bits),
        cmocka_unit_test(test_gemm_parameter_sets),
        cmocka_unit_test(test_tuning_valid),
        cmocka_unit_test(test_gemm_blocking),
        cmocka_unit_test(test_gemm_arguments),
        cmocka_unit_test(test_gemm_clblast),
        cmocka_unit_test(test_gemm_ln),
        cmocka_unit_test(test_linear_norm_layer),
        cmocka_unit_test(test_gemm_ln_arguments),
        cmocka_unit_test(test_gemm_ln_clblast),
        cmocka_unit_test(test_plan_streaming),
        cmocka_unit_test(test_gemm_kgroup),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
