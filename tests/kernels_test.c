/* SPDX-License-Identifier: MIT */
/* kernels_test.c — the forward ops of runtime/ops/ops.c and the cl/ kernels
 * other than GEMM and attention against the naive references of ref_ops.c
 * on seeded random data: ops init, embed (f32 and int8 tables), layernorm,
 * add/relu, gate_accum, copy_rows, gather_rows, log_softmax.  Awkward sizes:
 * tails, element offsets, leading dimensions wider than the rows.  Each
 * check also verifies that nothing outside the output region was written
 * (buffers are surrounded by NaN sentinels, compared bitwise) and, where an
 * input may be left unread, that NaN there does not leak into the result.
 *
 * GEMM is in kernels_gemm_test.c, attention in kernels_attn_test.c; the
 * fixture and helpers are in ops_common.c. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

/* ---- ops init ------------------------------------------------------------ */

static void test_ops_init(void **state) {
    env *e = *state;
    const nmt_ops *o = &e->ops;
    const cl_kernel ks[] = {o->k_embed, o->k_embed_q8, o->k_layernorm, o->k_add, o->k_relu, o->k_act, o->k_gate_accum, o->k_copy_rows,
                            o->k_gather_rows, o->k_log_softmax, o->k_attn_scores, o->k_attn_stats,
                            o->k_attn_apply, o->k_attn_fused};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ks); i++) assert_non_null(ks[i]);
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        assert_non_null(o->k_gemm[NMT_GOP_NT][c]);
        assert_non_null(o->k_gemm[NMT_GOP_NN][c]);  /* enabled by setup */
        assert_non_null(o->k_gemm[NMT_GOP_Q8][c]);
        for (int op = 0; op < NMT_GOP_COUNT; op++) {
            assert_true(nmt_gemm_cfg_valid((nmt_gemm_op)op, &o->cfg[op][c]));
            assert_true(o->cfg[op][c].wg <= e->dev->info.max_work_group_size);
        }
    }
    assert_ptr_equal(o->dev, e->dev);
    assert_true(o->gemm == NMT_GEMM_OWN || o->gemm == NMT_GEMM_CLBLAST);
    assert_true(o->reduce_wg >= 1 && (o->reduce_wg & (o->reduce_wg - 1)) == 0);
    assert_true(o->wg_max >= 1 && o->wg_max <= e->dev->info.max_work_group_size);

    /* A second ops on the same device reuses the device's programs; its
     * int8 kernels exist only once enabled. */
    uint32_t programs = e->dev->n_programs;
    nmt_ops again;
    nmt_test_assert_ok(e->dev, nmt_ops_init(&again, e->dev));
    assert_int_equal(e->dev->n_programs, programs);
    assert_null(again.k_gemm[NMT_GOP_Q8][0]);
    assert_null(again.k_gemm[NMT_GOP_NN][0]);  /* built at first use */
    nmt_buf none = {NULL, 0};
    assert_int_equal(nmt_op_gemm_q8(&again, 1, 1, 1, 1.0f, none, 1, none, 1, none, 0.0f, none, 1, none, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(&again));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(&again));  /* idempotent */
    nmt_test_assert_ok(e->dev, nmt_ops_enable_nn(&again));
    assert_non_null(again.k_gemm[NMT_GOP_NN][NMT_GCLASS_BIG]);
    assert_int_equal(e->dev->n_programs, programs);
    nmt_ops_release(&again);
    assert_null(again.k_gemm[NMT_GOP_NT][0]);
    assert_null(again.dev);
    nmt_ops_release(&again);  /* twice is harmless */

    assert_int_equal(nmt_ops_init(NULL, e->dev), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_ops_init(&again, NULL), NMT_ERR_INVALID_ARGUMENT);
    nmt_tuning bad = e->dev->tuning;
    bad.gemm[NMT_GOP_NT][NMT_GCLASS_BIG].vw = 3;
    assert_int_equal(nmt_ops_init_tuned(&again, e->dev, &bad), NMT_ERR_INVALID_ARGUMENT);
    bad = e->dev->tuning;
    bad.gemm[NMT_GOP_Q8][NMT_GCLASS_M2].provider = NMT_GEMM_CLBLAST;
    assert_int_equal(nmt_ops_init_tuned(&again, e->dev, &bad), NMT_ERR_INVALID_ARGUMENT);
}

/* ---- embed ---------------------------------------------------------------- */

static void run_embed(env *e, uint32_t rows, uint32_t seq_len, uint32_t pos0, uint32_t d, double tol, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t V = 11, tok_off = 2, e_off = 3, out_off = 5;
    int32_t *tok = nmt_test_random_i32(&r, tok_off + rows, 0, (int32_t)V);
    float *E = nmt_test_random_f32(&r, e_off + (size_t)V * d, -1, 1);
    const size_t nout = out_off + (size_t)rows * d + 4;
    float *out = nmt_test_alloc_f32(nout);
    nmt_test_fill_const(out, nout, NAN);
    const float scale = sqrtf((float)d);

    cl_mem dtok = nmt_test_upload_i32(e->dev, tok, tok_off + rows);
    cl_mem dE = nmt_test_upload_f32(e->dev, E, e_off + (size_t)V * d);
    cl_mem dout = nmt_test_upload_f32(e->dev, out, nout);
    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, tok_off), rows, seq_len, pos0, B(dE, e_off), d, scale,
                                            B(dout, out_off)));
    float *got = download(e, dout, nout);
    ref_embed(tok + tok_off, rows, seq_len, pos0, E + e_off, d, scale, out + out_off);
    char what[96];
    snprintf(what, sizeof what, "embed rows=%u seq_len=%u pos0=%u d=%u", rows, seq_len, pos0, d);
    check_block(got, out, nout, out_off, rows, d, d, tol, what);
    nmt_test_release(dtok);
    nmt_test_release(dE);
    nmt_test_release(dout);
    free(tok);
    free(E);
    free(out);
    free(got);
}

static void test_embed(void **state) {
    env *e = *state;
    run_embed(e, 9, 4, 0, 16, TOL, 1);   /* 2 sequences of 4 + 1 row: positions wrap */
    run_embed(e, 12, 12, 5, 10, TOL, 2); /* pos0 > 0 (decoder steps) */
    run_embed(e, 3, 1, 7, 24, TOL, 3);   /* seq_len 1: every row at pos0 */
    run_embed(e, 5, 5, 0, 7, TOL, 4);    /* odd d: last column has no position term */
    run_embed(e, 4, 4, 0, 2, TOL, 5);    /* d/2 == 1 */
    /* Large positions: fp32 rounding of pos * w_i alone is ~pos * 6e-8 rad
     * (fairseq computes the table the same way), hence a looser bound. */
    run_embed(e, 6, 6, 250, 64, 1e-4, 6);

    /* the sinusoid reference itself: P(0) = (0.., 1..), P(pos, 0) = sin(pos) */
    assert_true(ref_sinusoid(0, 3, 16) == 0.0 && ref_sinusoid(0, 8 + 3, 16) == 1.0);
    assert_true(fabs(ref_sinusoid(5, 0, 16) - sin(5.0)) < 1e-15);
    assert_true(fabs(ref_sinusoid(5, 7, 16) - sin(5.0 * 1e-4)) < 1e-15);  /* w_{d/2-1} = 1/10000 */

    float x = 0;
    cl_mem m = nmt_test_upload_f32(e->dev, &x, 1);
    assert_int_equal(nmt_op_embed(&e->ops, B(m, 0), 0, 1, 0, B(m, 0), 4, 1, B(m, 0)), NMT_OK);
    assert_int_equal(nmt_op_embed(&e->ops, B(m, 0), 1, 0, 0, B(m, 0), 4, 1, B(m, 0)), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_embed(&e->ops, NONE, 1, 1, 0, B(m, 0), 4, 1, B(m, 0)), NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(m);
}

/* The position table (nmt_ops_set_pos_table): its rows are the sinusoid,
 * an embedding reading it gives the same bits as one computing the terms,
 * positions past it are computed, and a d it was not built for ignores it;
 * the table is really read (overwritten, the output follows). */
/* The position layouts (cl/common.cl pos_term_layout) against their
 * formulas in double, with an offset; an embedding past a table of a
 * layout the kernels do not compute is refused; gelu and swish (act)
 * against double, in place and out of place. */
static double ref_pos_layout(uint32_t layout, double q, uint32_t c, uint32_t d) {
    const uint32_t half = d / 2, i = c < half ? c : c - half;
    switch (layout) {
    case 1: return c < half ? sin(q * pow(10000.0, -2.0 * i / d)) : cos(q * pow(10000.0, -2.0 * i / d));
    case 2: return c % 2 ? cos(q * pow(10000.0, -2.0 * (c / 2) / d)) : sin(q * pow(10000.0, -2.0 * (c / 2) / d));
    case 3: return 0.0;
    default: return c < half ? sin(q * pow(10000.0, -(double)i / (half - 1))) : cos(q * pow(10000.0, -(double)i / (half - 1)));
    }
}

static void test_pos_layouts_and_act(void **state) {
    env *e = *state;
    const uint32_t d = 16, n_pos = 40, offset = 2;
    cl_mem dpt = nmt_test_buffer(e->dev, (size_t)n_pos * d * sizeof(float), NULL);
    for (uint32_t layout = 0; layout <= 3; layout++) {
        nmt_test_assert_ok(e->dev, nmt_ops_set_pos_table(&e->ops, B(dpt, 0), n_pos, d, layout, offset));
        float *t = download(e, dpt, (size_t)n_pos * d);
        for (uint32_t p = 0; p < n_pos; p++)
            for (uint32_t c = 0; c < d; c++)
                if (fabs(t[p * d + c] - ref_pos_layout(layout, p + offset, c, d)) > 2e-5)
                    fail_msg("layout %u position %u column %u: %g, want %g", layout, p, c, t[p * d + c],
                             ref_pos_layout(layout, p + offset, c, d));
        free(t);
    }
    /* layout 3 (none) is set: an embedding past the table is refused, inside it is E * scale */
    int32_t tok[2] = {1, 0};
    float E[2 * 16];
    for (int i = 0; i < 32; i++) E[i] = (float)i;
    cl_mem dtok = nmt_test_upload_i32(e->dev, tok, 2), dE = nmt_test_upload_f32(e->dev, E, 32);
    cl_mem dout = nmt_test_buffer(e->dev, 32 * sizeof(float), NULL);
    assert_int_equal(nmt_op_embed(&e->ops, B(dtok, 0), 2, 2, n_pos - 1, B(dE, 0), d, 1.0f, B(dout, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, 0), 2, 2, n_pos - 2, B(dE, 0), d, 2.0f, B(dout, 0)));
    float *got = download(e, dout, 32);
    for (int i = 0; i < 32; i++) assert_true(got[i] == 2.0f * E[(size_t)tok[i / 16] * 16 + (size_t)(i % 16)]);
    free(got);
    nmt_test_assert_ok(e->dev, nmt_ops_set_pos_table(&e->ops, NONE, 0, d, 0, 0));
    assert_int_equal(nmt_ops_set_pos_table(&e->ops, B(dpt, 0), n_pos, d, 4, 0), NMT_ERR_INVALID_ARGUMENT);

    nmt_test_rng r = nmt_test_rng_make(23);
    const uint32_t n = 1031;
    float *X = nmt_test_random_f32(&r, n, -6, 6);
    cl_mem dx = nmt_test_upload_f32(e->dev, X, n), dy = nmt_test_buffer_f32_fill(e->dev, n + 1, NAN);
    for (int kind = NMT_ACT_GELU; kind <= NMT_ACT_SWISH; kind++) {
        nmt_test_assert_ok(e->dev, nmt_op_act(&e->ops, B(dx, 0), B(dy, 1), n, kind));
        float *y = download(e, dy, n + 1);
        assert_true(isnan(y[0]));
        for (uint32_t i = 0; i < n; i++) {
            const double v = X[i], want = kind == NMT_ACT_GELU ? 0.5 * v * (1 + erf(v / sqrt(2.0))) : v / (1 + exp(-v));
            if (fabs(y[1 + i] - want) > 1e-5 * (1 + fabs(want))) fail_msg("act %d x %g: %g, want %g", kind, v, y[1 + i], want);
        }
        free(y);
    }
    nmt_test_assert_ok(e->dev, nmt_op_act(&e->ops, B(dx, 0), B(dx, 0), n, NMT_ACT_SWISH)); /* in place */
    float *inplace = download(e, dx, n);
    for (uint32_t i = 0; i < n; i++) assert_true(fabs(inplace[i] - X[i] / (1 + exp(-(double)X[i]))) < 1e-5 * (1 + fabs(X[i])));
    assert_int_equal(nmt_op_act(&e->ops, B(dx, 0), B(dy, 0), n, NMT_ACT_RELU), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_act(&e->ops, B(dx, 0), B(dy, 0), n, 7), NMT_ERR_INVALID_ARGUMENT);
    free(inplace);
    free(X);
    nmt_test_release(dx);
    nmt_test_release(dy);
    nmt_test_release(dtok);
    nmt_test_release(dE);
    nmt_test_release(dout);
    nmt_test_release(dpt);
}

static void test_embed_pos_table(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(17);
    const uint32_t V = 9, d = 24, n_pos = 10, pt_off = 3, rows = 16, seq_len = 8, pos0 = 6; /* positions 6..13 */
    int32_t tok[16];
    nmt_test_fill_int(&r, tok, rows, 0, (int32_t)V);
    float *E = nmt_test_random_f32(&r, (size_t)V * d, -1, 1);
    const size_t nout = (size_t)rows * d;
    cl_mem dtok = nmt_test_upload_i32(e->dev, tok, rows), dE = nmt_test_upload_f32(e->dev, E, (size_t)V * d);
    cl_mem dpt = nmt_test_buffer(e->dev, (pt_off + (size_t)n_pos * d) * sizeof(float), NULL);
    cl_mem dout = nmt_test_buffer(e->dev, nout * sizeof(float), NULL);
    const float scale = 1.5f;

    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, 0), rows, seq_len, pos0, B(dE, 0), d, scale, B(dout, 0)));
    float *computed = download(e, dout, nout);
    nmt_test_assert_ok(e->dev, nmt_ops_set_pos_table(&e->ops, B(dpt, pt_off), n_pos, d, 0, 0));
    float *table = download(e, dpt, pt_off + (size_t)n_pos * d);
    for (uint32_t p = 0; p < n_pos; p++)
        for (uint32_t c = 0; c < d; c++)
            assert_true(fabs(table[pt_off + p * d + c] - ref_sinusoid(p, c, d)) < 1e-5);
    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, 0), rows, seq_len, pos0, B(dE, 0), d, scale, B(dout, 0)));
    float *tabled = download(e, dout, nout);
    assert_memory_equal(tabled, computed, nout * sizeof(float)); /* the same bits */

    /* overwrite the table: rows at positions 6..9 follow it, 10..13 do not */
    float *big = nmt_test_alloc_f32(pt_off + (size_t)n_pos * d);
    nmt_test_fill_const(big, pt_off + (size_t)n_pos * d, 1000.0f);
    assert_int_equal(clEnqueueWriteBuffer(e->dev->queue, dpt, CL_TRUE, 0, (pt_off + (size_t)n_pos * d) * sizeof(float),
                                          big, 0, NULL, NULL),
                     CL_SUCCESS);
    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, 0), rows, seq_len, pos0, B(dE, 0), d, scale, B(dout, 0)));
    float *poisoned = download(e, dout, nout);
    for (uint32_t row = 0; row < rows; row++)
        for (uint32_t c = 0; c < d; c++) {
            const size_t i = (size_t)row * d + c;
            if (pos0 + row % seq_len < n_pos)
                assert_true(fabs(poisoned[i] - (E[(size_t)tok[row] * d + c] * scale + 1000.0f)) < 1e-3);
            else
                assert_true(poisoned[i] == computed[i]);
        }
    /* another d: computed (the reference), not read from the table */
    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, 0), 2, 2, 0, B(dE, 0), 8, scale, B(dout, 0)));
    float *other = download(e, dout, 16);
    float want[16];
    ref_embed(tok, 2, 2, 0, E, 8, scale, want);
    nmt_test_assert_close(other, want, 16, TOL); /* another d with a table set */

    /* off again: computed; bad sizes refused */
    nmt_test_assert_ok(e->dev, nmt_ops_set_pos_table(&e->ops, NONE, n_pos, d, 0, 0));
    assert_int_equal(e->ops.pos_rows, 0);
    nmt_test_assert_ok(e->dev, nmt_op_embed(&e->ops, B(dtok, 0), rows, seq_len, pos0, B(dE, 0), d, scale, B(dout, 0)));
    float *off = download(e, dout, nout);
    assert_memory_equal(off, computed, nout * sizeof(float));
    assert_int_equal(nmt_ops_set_pos_table(&e->ops, B(dpt, 0), 1u << 16, 1u << 16, 0, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(e->ops.pos_rows, 0);
    assert_int_equal(nmt_ops_set_pos_table(NULL, B(dpt, 0), 1, 1, 0, 0), NMT_ERR_INVALID_ARGUMENT);

    nmt_test_release(dtok);
    nmt_test_release(dE);
    nmt_test_release(dpt);
    nmt_test_release(dout);
    free(E);
    free(computed);
    free(table);
    free(tabled);
    free(big);
    free(poisoned);
    free(other);
    free(off);
}

/* int8 table with per-row scales (the .nmt I8 layout) against ref_embed on
 * the dequantized table E = q * scale[row].  Q and the scales live in one
 * buffer, as the runtime loads them, at odd element offsets. */
static void run_embed_q8(env *e, uint32_t rows, uint32_t seq_len, uint32_t pos0, uint32_t d, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t V = 13, tok_off = 1, q_off = 7, out_off = 3;
    int32_t *tok = nmt_test_random_i32(&r, tok_off + rows, 0, (int32_t)V);
    const size_t qbytes = nmt_test_round_up(q_off + (size_t)V * d, 4), s_off = qbytes / 4 + 2;
    const size_t total = (s_off + V) * 4;
    unsigned char *blob = calloc(total, 1);
    float *E = nmt_test_alloc_f32((size_t)V * d);
    assert_non_null(blob);
    for (uint32_t t = 0; t < V; t++) {
        float sc = nmt_test_rng_uniform(&r, 0.001f, 0.05f);
        if (t == 0) sc = 1.0f; /* an all-zero row keeps any scale */
        memcpy(blob + 4 * (s_off + t), &sc, 4);
        for (uint32_t c = 0; c < d; c++) {
            int8_t q = t == 0 ? 0 : (int8_t)nmt_test_rng_int(&r, -128, 128);
            blob[q_off + (size_t)t * d + c] = (unsigned char)q;
            E[(size_t)t * d + c] = (float)q * sc;
        }
    }
    const size_t nout = out_off + (size_t)rows * d + 4;
    float *out = nmt_test_alloc_f32(nout);
    nmt_test_fill_const(out, nout, NAN);
    const float scale = sqrtf((float)d);
    cl_mem dtok = nmt_test_upload_i32(e->dev, tok, tok_off + rows);
    cl_mem dQ = nmt_test_buffer(e->dev, total, blob);
    cl_mem dout = nmt_test_upload_f32(e->dev, out, nout);
    nmt_test_assert_ok(e->dev, nmt_op_embed_q8(&e->ops, B(dtok, tok_off), rows, seq_len, pos0, B(dQ, q_off),
                                               B(dQ, s_off), d, scale, B(dout, out_off)));
    float *got = download(e, dout, nout);
    ref_embed(tok + tok_off, rows, seq_len, pos0, E, d, scale, out + out_off);
    char what[96];
    snprintf(what, sizeof what, "embed_q8 rows=%u seq_len=%u pos0=%u d=%u", rows, seq_len, pos0, d);
    check_block(got, out, nout, out_off, rows, d, d, TOL, what);
    nmt_test_release(dtok);
    nmt_test_release(dQ);
    nmt_test_release(dout);
    free(tok);
    free(blob);
    free(E);
    free(out);
    free(got);
}

static void test_embed_q8(void **state) {
    env *e = *state;
    assert_non_null(e->ops.k_embed_q8);
    run_embed_q8(e, 9, 4, 0, 16, 1);
    run_embed_q8(e, 12, 12, 5, 10, 2);
    run_embed_q8(e, 3, 1, 7, 24, 3);
    run_embed_q8(e, 5, 5, 0, 7, 4);   /* odd d */
    run_embed_q8(e, 40, 40, 0, 64, 5);

    float x = 0;
    cl_mem m = nmt_test_upload_f32(e->dev, &x, 1);
    assert_int_equal(nmt_op_embed_q8(&e->ops, B(m, 0), 0, 1, 0, B(m, 0), B(m, 0), 4, 1, B(m, 0)), NMT_OK);
    assert_int_equal(nmt_op_embed_q8(&e->ops, B(m, 0), 1, 0, 0, B(m, 0), B(m, 0), 4, 1, B(m, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_embed_q8(&e->ops, B(m, 0), 1, 1, 0, B(m, 0), NONE, 4, 1, B(m, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_embed_q8(NULL, B(m, 0), 1, 1, 0, B(m, 0), B(m, 0), 4, 1, B(m, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(m);
}

/* ---- layernorm ----------------------------------------------------------- */

enum { LN_OUT_SEPARATE, LN_OUT_IS_X, LN_OUT_IS_RES };

static void run_layernorm(env *e, uint32_t rows, uint32_t d, int with_res, int alias, float mean_shift,
                          uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const size_t off = 3, n = off + (size_t)rows * d + 2;
    float *x = host_block(&r, n, off, rows, d, d, mean_shift - 2, mean_shift + 2);
    float *res = host_block(&r, n, off, rows, d, d, -1, 1);
    float *out = nmt_test_alloc_f32(n);
    nmt_test_fill_const(out, n, NAN);
    float *g = nmt_test_random_f32(&r, d + 1, 0.5f, 1.5f), *b = nmt_test_random_f32(&r, d + 1, -0.5f, 0.5f);
    const float eps = 1e-5f;

    cl_mem dx = nmt_test_upload_f32(e->dev, x, n), dres = nmt_test_upload_f32(e->dev, res, n);
    cl_mem dout = nmt_test_upload_f32(e->dev, out, n);
    cl_mem dg = nmt_test_upload_f32(e->dev, g, d + 1), db = nmt_test_upload_f32(e->dev, b, d + 1);
    cl_mem target = alias == LN_OUT_IS_X ? dx : alias == LN_OUT_IS_RES ? dres : dout;
    nmt_test_assert_ok(e->dev, nmt_op_layernorm(&e->ops, B(dx, off), with_res ? B(dres, off) : NONE, B(target, off),
                                                rows, d, B(dg, 1), B(db, 1), eps));
    float *got = download(e, target, n);
    float *want = alias == LN_OUT_IS_X ? x : alias == LN_OUT_IS_RES ? res : out;
    ref_layernorm(x + off, with_res ? res + off : NULL, want + off, rows, d, g + 1, b + 1, eps);
    char what[96];
    snprintf(what, sizeof what, "layernorm rows=%u d=%u res=%d alias=%d shift=%g", rows, d, with_res, alias,
             (double)mean_shift);
    check_block(got, want, n, off, rows, d, d, TOL, what);
    nmt_test_release(dx);
    nmt_test_release(dres);
    nmt_test_release(dout);
    nmt_test_release(dg);
    nmt_test_release(db);
    free(x);
    free(res);
    free(out);
    free(g);
    free(b);
    free(got);
}

static void layernorm_cases(env *e) {
    /* both launch shapes: a work-item per row (CPUs) and a work-group of
     * reduce_wg per row (elsewhere), whatever the device chose, and 16 */
    const size_t chosen = e->ops.norm_wg;
    const size_t wgs[3] = {1, NMT_MIN((size_t)16, e->ops.reduce_wg), e->ops.reduce_wg}; /* 16: one subgroup (Intel) */
    for (int w = 0; w < 3; w++) {
        e->ops.norm_wg = wgs[w];
        run_layernorm(e, 5, 37, 0, LN_OUT_SEPARATE, 0, 1);
        run_layernorm(e, 5, 37, 1, LN_OUT_SEPARATE, 0, 2);
        run_layernorm(e, 3, 1000, 1, LN_OUT_SEPARATE, 0, 3);  /* row longer than the work-group */
        run_layernorm(e, 7, 64, 0, LN_OUT_IS_X, 0, 4);        /* in place */
        run_layernorm(e, 7, 64, 1, LN_OUT_IS_X, 0, 5);
        run_layernorm(e, 7, 64, 1, LN_OUT_IS_RES, 0, 6);
        run_layernorm(e, 4, 512, 0, LN_OUT_SEPARATE, 100.0f, 7);  /* large mean: two-pass variance */
        run_layernorm(e, 2, 1, 0, LN_OUT_SEPARATE, 0, 8);     /* d = 1: output = beta */
        run_layernorm(e, 3, 48, 1, LN_OUT_IS_X, 0, 9);        /* whole float16 vectors only */
    }
    e->ops.norm_wg = chosen;
}

/* The fixture's path (subgroups where the device has them), then the
 * portable one against the same reference (issue 23). */
static void test_layernorm(void **state) {
    env *e = *state;
    layernorm_cases(e);
    with_ops_mode(e, NMT_SG_OFF, 0, layernorm_cases);
    with_ops_mode(e, NMT_SG_ALL, 0, layernorm_cases); /* CPUs: the subgroup layernorm too */
}

/* ---- add, relu, gate_accum, copy_rows, gather_rows ------------------------ */

static void test_add_relu(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(11);
    const uint32_t sizes[] = {1, 5, 1000, 4099};
    for (size_t t = 0; t < NMT_ARRAY_LEN(sizes); t++) {
        const uint32_t n = sizes[t];
        const size_t off = 3, total = off + n + 2;
        float *dst = host_block(&r, total, off, 1, n, n, -1, 1);
        float *src = host_block(&r, total, 1, 1, n, n, -1, 1);
        cl_mem dd = nmt_test_upload_f32(e->dev, dst, total), ds = nmt_test_upload_f32(e->dev, src, total);
        nmt_test_assert_ok(e->dev, nmt_op_add(&e->ops, B(dd, off), B(ds, 1), n));
        ref_add(dst + off, src + 1, n);
        float *got = download(e, dd, total);
        check_block(got, dst, total, off, 1, n, n, 0.0, "add");  /* exact: one fp32 addition */

        nmt_test_assert_ok(e->dev, nmt_op_relu(&e->ops, B(dd, off), n));
        ref_relu(dst + off, n);
        free(got);
        got = download(e, dd, total);
        check_block(got, dst, total, off, 1, n, n, 0.0, "relu");
        nmt_test_release(dd);
        nmt_test_release(ds);
        free(dst);
        free(src);
        free(got);
    }
    assert_int_equal(nmt_op_add(&e->ops, NONE, NONE, 0), NMT_OK);
    assert_int_equal(nmt_op_add(&e->ops, NONE, NONE, 3), NMT_ERR_INVALID_ARGUMENT);
}

static void test_gate_accum(void **state) {
    env *e = *state;
    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        nmt_test_rng r = nmt_test_rng_make(20 + accumulate);
        const uint32_t rows = 5, d = 13, ld_x = 16, ld_g = 20, ld_o = 17;
        const size_t ox = 1, og = 2, oo = 3;
        const size_t nx = ox + rows * ld_x, ng = og + rows * ld_g, no = oo + rows * ld_o;
        float *x = host_block(&r, nx, ox, rows, d, ld_x, -2, 2);
        float *g = host_block(&r, ng, og, rows, d, ld_g, -20, 20);  /* saturating gates too */
        float *o = host_block(&r, no, oo, rows, d, ld_o, -1, 1);
        if (!accumulate) /* out is not read when not accumulating */
            for (uint32_t i = 0; i < rows; i++) nmt_test_fill_const(o + oo + i * ld_o, d, NAN);
        cl_mem dx = nmt_test_upload_f32(e->dev, x, nx), dg = nmt_test_upload_f32(e->dev, g, ng);
        cl_mem dout = nmt_test_upload_f32(e->dev, o, no);
        nmt_test_assert_ok(e->dev, nmt_op_gate_accum(&e->ops, B(dx, ox), ld_x, B(dg, og), ld_g, B(dout, oo), ld_o,
                                                     rows, d, accumulate));
        ref_gate_accum(x + ox, ld_x, g + og, ld_g, o + oo, ld_o, rows, d, accumulate);
        float *got = download(e, dout, no);
        check_block(got, o, no, oo, rows, d, ld_o, TOL, accumulate ? "gate_accum accumulate" : "gate_accum first");
        nmt_test_release(dx);
        nmt_test_release(dg);
        nmt_test_release(dout);
        free(x);
        free(g);
        free(o);
        free(got);
    }
}

static void test_copy_rows(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(30);
    const uint32_t rows = 7, cols = 13, ld_s = 20, ld_d = 15;
    const size_t os = 4, od = 6, ns = os + rows * ld_s, nd = od + rows * ld_d + 1;
    float *src = host_block(&r, ns, os, rows, cols, ld_s, -1, 1);
    float *dst = nmt_test_alloc_f32(nd);
    nmt_test_fill_const(dst, nd, NAN);
    cl_mem ds = nmt_test_upload_f32(e->dev, src, ns), dd = nmt_test_upload_f32(e->dev, dst, nd);
    nmt_test_assert_ok(e->dev, nmt_op_copy_rows(&e->ops, B(ds, os), ld_s, B(dd, od), ld_d, rows, cols));
    ref_copy_rows(src + os, ld_s, dst + od, ld_d, rows, cols);
    float *got = download(e, dd, nd);
    check_block(got, dst, nd, od, rows, cols, ld_d, 0.0, "copy_rows");
    assert_int_equal(nmt_op_copy_rows(&e->ops, B(ds, 0), 5, B(dd, 0), 20, 2, 6), NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(ds);
    nmt_test_release(dd);
    free(src);
    free(dst);
    free(got);
}

static void test_gather_rows(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(40);
    const uint32_t src_rows = 8, rows = 6, cols = 11;
    const uint64_t ld_s = 19, ld_d = 23;
    const size_t os = 2, od = 5, ns = os + src_rows * ld_s, nd = od + rows * ld_d;
    const int32_t idx[] = {-1, 7, 0, 0, 3, 7, 6};  /* idx buffer offset 1: repeats, reversal */
    float *src = host_block(&r, ns, os, src_rows, cols, ld_s, -1, 1);
    float *dst = nmt_test_alloc_f32(nd);
    nmt_test_fill_const(dst, nd, NAN);
    cl_mem ds = nmt_test_upload_f32(e->dev, src, ns), dd = nmt_test_upload_f32(e->dev, dst, nd);
    cl_mem di = nmt_test_upload_i32(e->dev, idx, NMT_ARRAY_LEN(idx));
    nmt_test_assert_ok(e->dev, nmt_op_gather_rows(&e->ops, B(ds, os), ld_s, B(dd, od), ld_d, B(di, 1), rows, cols));
    ref_gather_rows(src + os, ld_s, dst + od, ld_d, idx + 1, rows, cols);
    float *got = download(e, dd, nd);
    check_block(got, dst, nd, od, rows, cols, (uint32_t)ld_d, 0.0, "gather_rows");
    assert_int_equal(nmt_op_gather_rows(&e->ops, B(ds, 0), ld_s, B(dd, 0), ld_d, NONE, rows, cols),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(ds);
    nmt_test_release(dd);
    nmt_test_release(di);
    free(src);
    free(dst);
    free(got);
}

/* ---- log_softmax ---------------------------------------------------------- */

static void run_log_softmax(env *e, uint32_t rows, uint32_t n, uint32_t ld, float range, int special,
                            uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const size_t off = 3, total = off + (size_t)rows * ld;
    float *x = host_block(&r, total, off, rows, n, ld, -range, range);
    if (special) {
        /* row 0: some -INF entries (masked logits); last row: all -INF */
        for (uint32_t c = 0; c < n; c += 3) x[off + c] = -INFINITY;
        for (uint32_t c = 0; c < n; c++) x[off + (size_t)(rows - 1) * ld + c] = -INFINITY;
    }
    cl_mem dx = nmt_test_upload_f32(e->dev, x, total);
    nmt_test_assert_ok(e->dev, nmt_op_log_softmax(&e->ops, B(dx, off), rows, n, ld));
    ref_log_softmax(x + off, rows, n, ld);
    float *got = download(e, dx, total);
    char what[96];
    snprintf(what, sizeof what, "log_softmax rows=%u n=%u ld=%u range=%g", rows, n, ld, (double)range);
    check_block(got, x, total, off, rows, n, ld, TOL, what);
    for (uint32_t i = 0; i < rows; i++) {
        if (special && i == rows - 1) continue;
        double s = 0.0;
        for (uint32_t c = 0; c < n; c++) {
            float v = got[off + (size_t)i * ld + c];
            assert_true(v <= 1e-6f);
            s += exp((double)v);
        }
        if (fabs(s - 1.0) > 1e-5) fail_msg("%s: row %u sums to %.9f", what, i, s);
    }
    nmt_test_release(dx);
    free(x);
    free(got);
}

static void log_softmax_cases(env *e) {
    run_log_softmax(e, 7, 1001, 1010, 30.0f, 0, 1);
    run_log_softmax(e, 3, 1, 1, 5.0f, 0, 2);         /* n = 1: log 1 = 0 */
    run_log_softmax(e, 5, 37, 40, 5.0f, 1, 3);       /* -INF entries, an all -INF row */
    run_log_softmax(e, 2, 32000, 32000, 20.0f, 0, 4);  /* vocabulary-sized rows */
    run_log_softmax(e, 4, 17, 17, 1000.0f, 0, 5);    /* huge logits: must not overflow */
    /* local sizes below the chosen one: one subgroup, or fewer work-items than a subgroup */
    const size_t chosen = e->ops.reduce_wg;
    for (size_t w = 1; w < chosen; w *= 4) {
        e->ops.reduce_wg = w;
        run_log_softmax(e, 3, 1001, 1001, 30.0f, 1, 10 + w);
    }
    e->ops.reduce_wg = chosen;
}

static void test_log_softmax(void **state) {
    env *e = *state;
    log_softmax_cases(e);
    with_ops_mode(e, NMT_SG_OFF, 0, log_softmax_cases);
}

/* ---- reduction path ------------------------------------------------------ */

static void test_reduce_path(void **state) { check_reduce_path(*state); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_init),
        cmocka_unit_test(test_reduce_path),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_embed_q8),
        cmocka_unit_test(test_embed_pos_table),
        cmocka_unit_test(test_pos_layouts_and_act),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_add_relu),
        cmocka_unit_test(test_gate_accum),
        cmocka_unit_test(test_copy_rows),
        cmocka_unit_test(test_gather_rows),
        cmocka_unit_test(test_log_softmax),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
