/* SPDX-License-Identifier: MIT */
/* kernels_rows_test.c — the few-row kernels of runtime/ops/ops_rows.c with
 * int8 weights x fp32 products (the int8 x int8 ones are in
 * kernels_i8dot_test.c):
 *   - nmt_op_gate_q8 (gemm_q8_gate: a HySAN branch's squeeze gate, a
 *     work-item per row) bit for bit against the two products
 *     (nmt_op_gemm_q8) and nmt_op_gate_accum, and against a host
 *     reference (ref_gemm_q8, then x * sigmoid(g)) within
 *     1e-4 (two chained products): 1..4 rows, d and d / r with and without the vector tails, up to
 *     d / r 512, biases or not, accumulating or not, offsets and leading
 *     dimensions; nothing outside the rows written;
 *   - nmt_op_gemm_q8_nt_ln (gemm_q8_nt_ln) bit for bit against
 *     nmt_op_gemm_q8 then nmt_op_layernorm and within 1e-5 of ref_gemm_q8 +
 *     ref_layernorm, with layernorm a work-item per row and a work-group of
 *     64;
 *   - the layers (nmt_layer_gate, nmt_layer_linear_norm) fused and not: the
 *     same bits, and an fp32 gate always three launches;
 *   - the exact refusals (NMT_ERR_UNSUPPORTED, nothing written) and bad
 *     arguments.
 * Where the device's table gives the q8 m2 / m16 classes to the kgroup
 * kernel (GPU rows), the ops are rebuilt with the portable default's
 * configurations for them, so every device runs these kernels. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "ref_ops.h"

/* Ops whose q8 m2 / m16 classes are our kernels (the fixture's, or the
 * same tuning with the portable default's configurations there), with the
 * few-row paths on. */
static void open_row_ops(env *e, nmt_ops *ops) {
    nmt_tuning t = e->dev->tuning, d;
    assert_true(nmt_tuning_table_row(0, &d)); /* the portable default */
    for (int c = NMT_GCLASS_M2; c <= NMT_GCLASS_M16; c++)
        if (t.gemm[NMT_GOP_Q8][c].kgroup) t.gemm[NMT_GOP_Q8][c] = d.gemm[NMT_GOP_Q8][c];
    nmt_test_assert_ok(e->dev, nmt_ops_init_tuned(ops, e->dev, &t));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(ops));
    for (int c = NMT_GCLASS_M2; c <= NMT_GCLASS_M16; c++) assert_non_null(ops->k_q8_gate[c]);
    assert_non_null(ops->k_q8_ln);
    assert_int_equal(ops->fuse_gate, e->dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_FUSED_GATE"));
    ops->fuse_gate = 1; /* a GPU: on request */
}

static float sigmoid_ref(float g) { return 1.0f / (1.0f + expf(-g)); }

/* two chained products (K up to 1,024, then 512) summed in another order
 * than the host's: Oclgrind's order gave 1.1e-5 */
#define GATE_TOL 1e-4

/* ---- the gate ------------------------------------------------------------- */

typedef struct gate_case {
    uint32_t rows, d, dr, pad, off;
    int bias1, bias2, accumulate;
} gate_case;

static const gate_case gate_cases[] = {
    /* rows d  dr  pad off b1 b2 acc */
    {1, 256, 64, 0, 0, 1, 1, 0},  /* the bundled model's shape */
    {1, 256, 64, 512, 3, 1, 1, 1}, /* the second branch, its x a column block of ctx */
    {2, 70, 18, 5, 1, 0, 1, 1},   /* tails of the float16 vectors */
    {3, 130, 33, 0, 2, 1, 0, 0},  {4, 64, 16, 3, 0, 0, 0, 1}, {4, 1024, 512, 0, 0, 1, 1, 1},
    {1, 7, 1, 0, 0, 1, 1, 0},
};

typedef struct gate_bufs {
    nmt_buf x, w1, s1, b1, w2, s2, b2;
} gate_bufs;

/* out for case c: one launch (nmt_op_gate_q8), or the two products and
 * gate_accum (three), or the layer fused or not (layer 1 / 2). */
static float *gate_run(env *e, nmt_ops *ops, const gate_case *c, int q8, const gate_bufs *g, const float *O0, size_t no,
                       int how) {
    const uint32_t ld = c->d + c->pad;
    cl_mem dO = nmt_test_upload_f32(e->dev, O0, no);
    const nmt_buf out = B(dO, c->off);
    cl_mem gh = nmt_test_buffer(e->dev, (size_t)c->rows * c->dr * sizeof(float), NULL);
    cl_mem gg = nmt_test_buffer(e->dev, (size_t)c->rows * c->d * sizeof(float), NULL);
    if (how == 0) {
        const uint64_t gates = ops->n_gates;
        nmt_test_assert_ok(e->dev, nmt_op_gate_q8(ops, c->rows, c->d, c->dr, g->x, ld, g->w1, g->s1, g->b1, g->w2,
                                                  g->s2, g->b2, out, ld, c->accumulate));
        assert_int_equal(ops->n_gates, gates + 1);
    } else if (how == 1) {
        if (q8) {
            nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, c->rows, c->dr, c->d, 1.0f, g->x, ld, g->w1, c->d, g->s1,
                                                      0.0f, B(gh, 0), c->dr, g->b1, 1));
            nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, c->rows, c->d, c->dr, 1.0f, B(gh, 0), c->dr, g->w2, c->dr,
                                                      g->s2, 0.0f, B(gg, 0), c->d, g->b2, 0));
        } else {
            nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, c->rows, c->dr, c->d, 1.0f, g->x, ld, g->w1, c->d, 0.0f,
                                                   B(gh, 0), c->dr, g->b1, 1));
            nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, c->rows, c->d, c->dr, 1.0f, B(gh, 0), c->dr, g->w2, c->dr,
                                                   0.0f, B(gg, 0), c->d, g->b2, 0));
        }
        nmt_test_assert_ok(e->dev,
                           nmt_op_gate_accum(ops, g->x, ld, B(gg, 0), c->d, out, ld, c->rows, c->d, c->accumulate));
    } else {
        const nmt_lin w1 = {.w = g->w1, .s = g->s1, .b = g->b1, .q8 = q8};
        const nmt_lin w2 = {.w = g->w2, .s = g->s2, .b = g->b2, .q8 = q8};
        const uint64_t gates = ops->n_gates;
        nmt_test_assert_ok(e->dev, nmt_layer_gate(ops, g->x, ld, c->rows, &w1, &w2, c->d, c->dr, B(gh, 0), B(gg, 0),
                                                  out, ld, c->accumulate, how == 2));
        assert_int_equal(ops->n_gates, gates + (how == 2 && q8)); /* fp32: three launches */
    }
    float *got = download(e, dO, no);
    const cl_mem mems[] = {dO, gh, gg};
    for (size_t j = 0; j < NMT_ARRAY_LEN(mems); j++) nmt_test_release(mems[j]);
    return got;
}

static void gate_form(env *e, nmt_ops *ops, int q8) {
    for (size_t i = 0; i < NMT_ARRAY_LEN(gate_cases); i++) {
        const gate_case *c = &gate_cases[i];
        nmt_test_rng r = nmt_test_rng_make(900 + i + 50 * (size_t)q8);
        const uint32_t ld = c->d + c->pad;
        const size_t nx = c->off + (size_t)c->rows * ld + 3, n1 = c->off + (size_t)c->dr * c->d + 5;
        const size_t n2 = c->off + (size_t)c->d * c->dr + 5, ns = c->off + c->d + c->dr + 3;
        float *X = host_block(&r, nx, c->off, c->rows, c->d, ld, -2, 2);
        float *W1 = host_block(&r, n1, c->off, c->dr, c->d, c->d, -0.2f, 0.2f);
        float *W2 = host_block(&r, n2, c->off, c->d, c->dr, c->dr, -0.2f, 0.2f);
        int8_t *Q1 = malloc(n1), *Q2 = malloc(n2);
        assert_true(Q1 != NULL && Q2 != NULL);
        for (size_t j = 0; j < n1; j++) Q1[j] = (int8_t)(nmt_test_rng_next(&r) % 255u) - 127;
        for (size_t j = 0; j < n2; j++) Q2[j] = (int8_t)(nmt_test_rng_next(&r) % 255u) - 127;
        float *S1 = host_block(&r, ns, c->off, 1, c->dr, c->dr, 0.001f, 0.01f);
        float *S2 = host_block(&r, ns, c->off, 1, c->d, c->d, 0.001f, 0.01f);
        float *B1 = host_block(&r, ns, c->off, 1, c->dr, c->dr, -0.5f, 0.5f);
        float *B2 = host_block(&r, ns, c->off, 1, c->d, c->d, -0.5f, 0.5f);
        float *O0 = host_block(&r, nx, c->off, c->rows, c->d, ld, -1, 1);
        cl_mem dX = nmt_test_upload_f32(e->dev, X, nx);
        cl_mem dW1 = q8 ? nmt_test_buffer(e->dev, n1, Q1) : nmt_test_upload_f32(e->dev, W1, n1);
        cl_mem dW2 = q8 ? nmt_test_buffer(e->dev, n2, Q2) : nmt_test_upload_f32(e->dev, W2, n2);
        cl_mem dS1 = nmt_test_upload_f32(e->dev, S1, ns), dS2 = nmt_test_upload_f32(e->dev, S2, ns);
        cl_mem dB1 = nmt_test_upload_f32(e->dev, B1, ns), dB2 = nmt_test_upload_f32(e->dev, B2, ns);
        const gate_bufs g = {B(dX, c->off),  B(dW1, c->off), q8 ? B(dS1, c->off) : NONE,
                             c->bias1 ? B(dB1, c->off) : NONE, B(dW2, c->off), q8 ? B(dS2, c->off) : NONE,
                             c->bias2 ? B(dB2, c->off) : NONE};
        float *one = gate_run(e, ops, c, q8, &g, O0, nx, q8 ? 0 : 1); /* fp32: no one-launch form */
        float *three = gate_run(e, ops, c, q8, &g, O0, nx, 1);
        char what[96];
        snprintf(what, sizeof what, "%s gate case %zu (rows %u d %u dr %u)", q8 ? "q8" : "fp32", i, c->rows, c->d,
                 c->dr);
        if (memcmp(one, three, nx * sizeof(float)) != 0) fail_msg("%s: not bitwise the three launches", what);
        /* the host reference */
        float *want = malloc(nx * sizeof(float)), *h = malloc((size_t)c->dr * sizeof(float));
        float *gv = malloc((size_t)c->d * sizeof(float));
        assert_true(want != NULL && h != NULL && gv != NULL);
        memcpy(want, O0, nx * sizeof(float));
        for (uint32_t m = 0; m < c->rows; m++) {
            const float *x = X + c->off + (size_t)m * ld;
            if (q8) {
                ref_gemm_q8(1, c->dr, c->d, 1.0f, x, c->d, Q1 + c->off, c->d, S1 + c->off, 0.0f, h, c->dr,
                            c->bias1 ? B1 + c->off : NULL, 1);
                ref_gemm_q8(1, c->d, c->dr, 1.0f, h, c->dr, Q2 + c->off, c->dr, S2 + c->off, 0.0f, gv, c->d,
                            c->bias2 ? B2 + c->off : NULL, 0);
            } else {
                ref_gemm(1, 1, c->dr, c->d, 1.0f, x, c->d, W1 + c->off, c->d, 0.0f, h, c->dr,
                         c->bias1 ? B1 + c->off : NULL, 1);
                ref_gemm(1, 1, c->d, c->dr, 1.0f, h, c->dr, W2 + c->off, c->dr, 0.0f, gv, c->d,
                         c->bias2 ? B2 + c->off : NULL, 0);
            }
            float *o = want + c->off + (size_t)m * ld;
            for (uint32_t k = 0; k < c->d; k++) o[k] = (c->accumulate ? o[k] : 0.0f) + x[k] * sigmoid_ref(gv[k]);
        }
        check_block(one, want, nx, c->off, c->rows, c->d, ld, GATE_TOL, what);
        /* the layer, fused and not */
        float *lf = gate_run(e, ops, c, q8, &g, O0, nx, 2), *lu = gate_run(e, ops, c, q8, &g, O0, nx, 3);
        if (memcmp(lf, one, nx * sizeof(float)) != 0 || memcmp(lu, one, nx * sizeof(float)) != 0)
            fail_msg("%s: the layer differs", what);
        if (i == 0 && q8) { /* the refusals: nothing written */
            cl_mem dO = nmt_test_upload_f32(e->dev, O0, nx);
            const nmt_buf o = B(dO, c->off);
#define GATE(ops_, rows_, d_, dr_, s1_, ldx_, out_) \
    nmt_op_gate_q8(ops_, rows_, d_, dr_, g.x, ldx_, g.w1, s1_, g.b1, g.w2, g.s2, g.b2, out_, ld, 0)
            assert_int_equal(GATE(ops, 5, c->d, c->dr, g.s1, ld, o), NMT_ERR_UNSUPPORTED);   /* 5 rows */
            assert_int_equal(GATE(ops, 1, c->d, 513, g.s1, ld, o), NMT_ERR_UNSUPPORTED);     /* d / r 513 */
            ops->fuse_gate = 0;
            assert_int_equal(GATE(ops, 1, c->d, c->dr, g.s1, ld, o), NMT_ERR_UNSUPPORTED);
            ops->fuse_gate = 1;
            cl_kernel saved = ops->k_q8_gate[NMT_GCLASS_M2]; /* the class's products not ours */
            ops->k_q8_gate[NMT_GCLASS_M2] = NULL;
            assert_int_equal(GATE(ops, 1, c->d, c->dr, g.s1, ld, o), NMT_ERR_UNSUPPORTED);
            ops->k_q8_gate[NMT_GCLASS_M2] = saved;
            assert_int_equal(GATE(ops, 1, c->d, c->dr, NONE, ld, o), NMT_ERR_INVALID_ARGUMENT); /* no scales */
            assert_int_equal(GATE(ops, 1, c->d, c->dr, g.s1, c->d - 1, o), NMT_ERR_INVALID_ARGUMENT); /* ldx < d */
            assert_int_equal(GATE(ops, 1, c->d, c->dr, g.s1, ld, B(dX, c->off + 1)),
                             NMT_ERR_INVALID_ARGUMENT); /* out overlaps x */
            assert_int_equal(GATE(ops, 0, c->d, c->dr, g.s1, ld, o), NMT_OK);
            assert_int_equal(GATE(NULL, 1, c->d, c->dr, g.s1, ld, o), NMT_ERR_INVALID_ARGUMENT);
#undef GATE
            float *after = download(e, dO, nx);
            assert_memory_equal(after, O0, nx * sizeof(float));
            free(after);
            nmt_test_release(dO);
        }
        const cl_mem mems[] = {dX, dW1, dW2, dS1, dS2, dB1, dB2};
        for (size_t j = 0; j < NMT_ARRAY_LEN(mems); j++) nmt_test_release(mems[j]);
        void *host[] = {X, W1, W2, Q1, Q2, S1, S2, B1, B2, O0, one, three, want, h, gv, lf, lu};
        for (size_t j = 0; j < NMT_ARRAY_LEN(host); j++) free(host[j]);
    }
}

static void test_gate_q8(void **state) {
    env *e = *state;
    nmt_ops ops;
    open_row_ops(e, &ops);
    gate_form(e, &ops, 0);
    gate_form(e, &ops, 1);
    nmt_ops_release(&ops);
}

/* ---- an int8 product with its residual and norm --------------------------- */

typedef struct ln_case {
    uint32_t M, N, K, pad, off;
    int bias, in_place; /* in_place: O is R */
} ln_case;

static const ln_case ln_cases[] = {
    /* M  N    K    pad off bias in_place */
    {1, 256, 256, 0, 0, 1, 1},  /* a decoder step's output projection */
    {2, 256, 1024, 0, 0, 1, 1}, /* its second FFN product, two rows */
    {2, 37, 5, 3, 5, 1, 0},     /* odd N and K, offsets, wide lds */
    {1, 300, 67, 1, 2, 0, 1},   {1, 1, 8, 0, 0, 1, 0}, {2, 20, 0, 0, 1, 1, 1}, /* K = 0: LN(bias + R) */
};

static void run_q8_ln(env *e, nmt_ops *ops, const ln_case *c, int layer, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t lda = c->K + c->pad, M = c->M, N = c->N;
    const size_t na = c->off + (size_t)M * lda + 3, nq = c->off + (size_t)N * c->K + 3, nr = c->off + (size_t)M * N + 3;
    float *A = host_block(&r, na, c->off, M, c->K, lda, -1, 1);
    int8_t *Q = malloc(nq);
    assert_non_null(Q);
    for (size_t j = 0; j < nq; j++) Q[j] = (int8_t)(nmt_test_rng_next(&r) % 255u) - 127;
    float *S = host_block(&r, c->off + N + 3, c->off, 1, N, N, 0.001f, 0.02f);
    float *R = host_block(&r, nr, c->off, M, N, N, -1, 1);
    float *bias = host_block(&r, c->off + N + 3, c->off, 1, N, N, -0.5f, 0.5f);
    float *g = nmt_test_random_f32(&r, N + 1, 0.5f, 1.5f), *be = nmt_test_random_f32(&r, N + 1, -0.5f, 0.5f);
    float *out = nmt_test_alloc_f32(nr), *t = nmt_test_alloc_f32((size_t)M * N + 1);
    nmt_test_fill_const(out, nr, NAN);
    const float eps = 1e-5f;
    cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dQ = nmt_test_buffer(e->dev, nq, Q);
    cl_mem dS = nmt_test_upload_f32(e->dev, S, c->off + N + 3), dR = nmt_test_upload_f32(e->dev, R, nr);
    cl_mem dR2 = nmt_test_upload_f32(e->dev, R, nr), dO = nmt_test_upload_f32(e->dev, out, nr);
    cl_mem dO2 = nmt_test_upload_f32(e->dev, out, nr), dT = nmt_test_upload_f32(e->dev, out, nr);
    cl_mem dbias = nmt_test_upload_f32(e->dev, bias, c->off + N + 3);
    cl_mem dg = nmt_test_upload_f32(e->dev, g, N + 1), db = nmt_test_upload_f32(e->dev, be, N + 1);
    const cl_mem target = c->in_place ? dR : dO;
    const nmt_buf bb = c->bias ? B(dbias, c->off) : NONE;
    const uint64_t norms = ops->n_norms;
    if (layer) {
        const nmt_lin w = {.w = B(dQ, c->off), .s = B(dS, c->off), .b = bb, .q8 = 1};
        const nmt_lin ln = {.w = B(dg, 1), .b = B(db, 1)};
        assert_int_equal(lda, c->K);
        nmt_test_assert_ok(e->dev, nmt_layer_linear_norm(ops, B(dA, c->off), lda, M, &w, N, c->K, B(dR, c->off), &ln,
                                                         eps, B(dT, c->off), B(target, c->off)));
    } else {
        nmt_test_assert_ok(e->dev, nmt_op_gemm_q8_nt_ln(ops, M, N, c->K, B(dA, c->off), lda, B(dQ, c->off), c->K,
                                                        B(dS, c->off), bb, B(dR, c->off), N, B(dg, 1), B(db, 1), eps,
                                                        B(target, c->off), N));
    }
    assert_int_equal(ops->n_norms, norms + (ops->fused_norm != 0));
    float *got = download(e, target, nr);
    float *want = c->in_place ? R : out;
    ref_gemm_q8(M, N, c->K, 1.0f, A + c->off, lda, Q + c->off, c->K, S + c->off, 0.0f, t, N,
                c->bias ? bias + c->off : NULL, 0);
    ref_layernorm(t, R + c->off, want + c->off, M, N, g + 1, be + 1, eps);
    char what[128];
    snprintf(what, sizeof what, "gemm_q8_nt_ln%s M=%u N=%u K=%u bias=%d in_place=%d norm_wg=%zu fused=%d",
             layer ? " (layer)" : "", M, N, c->K, c->bias, c->in_place, ops->norm_wg, ops->fused_norm);
    check_block(got, want, nr, c->off, M, N, N, TOL, what);
    /* the two launches it replaces */
    nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, M, N, c->K, 1.0f, B(dA, c->off), lda, B(dQ, c->off), c->K,
                                              B(dS, c->off), 0.0f, B(dT, c->off), N, bb, 0));
    nmt_test_assert_ok(e->dev, nmt_op_layernorm(ops, B(dT, c->off), B(dR2, c->off), B(dO2, c->off), M, N, B(dg, 1),
                                                B(db, 1), eps));
    float *got2 = download(e, dO2, nr);
    if (memcmp(got + c->off, got2 + c->off, (size_t)M * N * sizeof(float)) != 0) fail_msg("%s: not bitwise", what);
    const cl_mem mems[] = {dA, dQ, dS, dR, dR2, dO, dO2, dT, dbias, dg, db};
    for (size_t i = 0; i < NMT_ARRAY_LEN(mems); i++) nmt_test_release(mems[i]);
    void *bufs[] = {A, Q, S, R, bias, g, be, out, t, got, got2};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bufs); i++) free(bufs[i]);
}

static void test_q8_ln(void **state) {
    env *e = *state;
    nmt_ops ops;
    open_row_ops(e, &ops);
    const size_t wgs[2] = {1, NMT_MIN((size_t)64, ops.reduce_wg)}; /* layernorm a work-item per row (CPUs), 64 */
    for (int w = 0; w < 2; w++) {
        ops.norm_wg = wgs[w];
        for (size_t i = 0; i < NMT_ARRAY_LEN(ln_cases); i++) run_q8_ln(e, &ops, &ln_cases[i], 0, 5000 + i);
    }
    ops.norm_wg = 1;
    /* the layer: fused at M <= 2, two launches with the fused path off */
    const ln_case lc[] = {{1, 256, 256, 0, 0, 1, 1}, {2, 33, 64, 0, 0, 0, 0}};
    for (int f = 1; f >= 0; f--) {
        ops.fused_norm = f;
        for (size_t i = 0; i < NMT_ARRAY_LEN(lc); i++) run_q8_ln(e, &ops, &lc[i], 1, 5100 + i);
    }
    ops.fused_norm = 1;
    /* the refusals and bad arguments: nothing written */
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    cl_mem m = nmt_test_upload_f32(e->dev, x, 64), o = nmt_test_upload_f32(e->dev, x, 64);
    const nmt_buf a = B(m, 0), q = B(m, 16), s = B(m, 24), r = B(o, 0), g = B(m, 32), bt = B(m, 48);
#define LN(ops_, M_, K_, lda_, S_, ldr_, O_) \
    nmt_op_gemm_q8_nt_ln(ops_, M_, 4, K_, a, lda_, q, K_, S_, NONE, r, ldr_, g, bt, 1e-5f, O_, 4)
    assert_int_equal(LN(&ops, 0, 4, 4, s, 4, r), NMT_OK);
    assert_int_equal(LN(&ops, 3, 4, 4, s, 4, r), NMT_ERR_UNSUPPORTED); /* more than two rows */
    ops.fused_norm = 0;
    assert_int_equal(LN(&ops, 1, 4, 4, s, 4, r), NMT_ERR_UNSUPPORTED);
    ops.fused_norm = 1;
    cl_kernel saved = ops.k_q8_ln; /* the class's products not ours */
    ops.k_q8_ln = NULL;
    assert_int_equal(LN(&ops, 1, 4, 4, s, 4, r), NMT_ERR_UNSUPPORTED);
    ops.k_q8_ln = saved;
    assert_int_equal(LN(&ops, 1, 4, 4, NONE, 4, r), NMT_ERR_INVALID_ARGUMENT); /* no scales */
    assert_int_equal(LN(&ops, 1, 5, 4, s, 4, r), NMT_ERR_INVALID_ARGUMENT);    /* lda < K */
    assert_int_equal(LN(&ops, 2, 4, 4, s, 3, r), NMT_ERR_INVALID_ARGUMENT);    /* ldr < N */
    assert_int_equal(LN(&ops, 1, 4, 4, s, 4, B(m, 2)), NMT_ERR_INVALID_ARGUMENT); /* O overlaps A */
    assert_int_equal(LN(NULL, 1, 4, 4, s, 4, r), NMT_ERR_INVALID_ARGUMENT);
#undef LN
    float got[64];
    nmt_test_download_f32(e->dev, o, 0, 64, got);
    assert_memory_equal(got, x, sizeof x);
    nmt_test_release(m);
    nmt_test_release(o);
    nmt_ops_release(&ops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_q8),
        cmocka_unit_test(test_q8_ln),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
