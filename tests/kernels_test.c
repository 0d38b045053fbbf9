/* kernels_test.c — every nmt_op_* (runtime/ops.c and the cl/ kernels) against the
 * naive references of ref_ops.c on seeded random data, with awkward sizes:
 * tails, K not a multiple of 4, element offsets, leading dimensions wider
 * than the rows.  Each check also verifies that nothing outside the output
 * region was written (buffers are surrounded by NaN sentinels, compared
 * bitwise) and, where an input may be left unread, that NaN there does not
 * leak into the result. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "ref_ops.h"

#define TOL 1e-5

typedef struct env {
    nmt_device *dev;
    void *mem;
    nmt_ops ops;
} env;

static int setup(void **state) {
    env *e = calloc(1, sizeof *e);
    if (e == NULL) return -1;
    e->dev = nmt_test_device_open(&e->mem);
    if (e->dev == NULL) return -1;
    nmt_status s = nmt_ops_init(&e->ops, e->dev);
    if (s == NMT_OK) s = nmt_ops_enable_q8(&e->ops);
    if (s == NMT_OK) s = nmt_ops_enable_nn(&e->ops);
    if (s != NMT_OK) {
        fprintf(stderr, "nmt_ops_init failed: %s\n", nmt_status_str(s));
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    nmt_ops_release(&e->ops);
    nmt_test_device_close(e->dev, e->mem);
    free(e);
    return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static nmt_buf B(cl_mem m, size_t off) {
    nmt_buf b = {m, off};
    return b;
}

static const nmt_buf NONE = {NULL, 0};

/* Host array of `total` floats: NaN everywhere, then a rows x cols block at
 * `off` (stride ld) of uniform random values in [lo, hi). */
static float *host_block(nmt_test_rng *r, size_t total, size_t off, uint32_t rows, uint32_t cols, uint64_t ld,
                         float lo, float hi) {
    float *x = nmt_test_alloc_f32(total);
    nmt_test_fill_const(x, total, NAN);
    for (uint32_t i = 0; i < rows; i++) nmt_test_fill_uniform(r, x + off + i * ld, cols, lo, hi);
    return x;
}

static int in_block(size_t idx, size_t off, uint32_t rows, uint32_t cols, uint64_t ld) {
    if (idx < off) return 0;
    size_t rel = idx - off;
    size_t r = (size_t)(rel / ld), c = (size_t)(rel % ld);
    return r < rows && c < cols;
}

/* got vs want: close (normalised error <= tol) inside the block, bitwise
 * identical outside it. */
static void check_block(const float *got, const float *want, size_t total, size_t off, uint32_t rows, uint32_t cols,
                        uint64_t ld, double tol, const char *what) {
    size_t n = (size_t)rows * cols;
    float *g = nmt_test_alloc_f32(n ? n : 1), *w = nmt_test_alloc_f32(n ? n : 1);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            g[(size_t)r * cols + c] = got[off + r * ld + c];
            w[(size_t)r * cols + c] = want[off + r * ld + c];
        }
    nmt_test_assert_close_impl(g, w, n, tol, what, __FILE__, __LINE__);
    free(g);
    free(w);
    for (size_t i = 0; i < total; i++) {
        if (in_block(i, off, rows, cols, ld)) continue;
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu outside the output block was modified (%g, expected %g)", what, i,
                     (double)got[i], (double)want[i]);
    }
}

static float *download(env *e, cl_mem m, size_t n) {
    float *x = nmt_test_alloc_f32(n);
    nmt_test_download_f32(e->dev, m, 0, n, x);
    return x;
}

/* ---- ops init ------------------------------------------------------------ */

static void test_ops_init(void **state) {
    env *e = *state;
    const nmt_ops *o = &e->ops;
    const cl_kernel ks[] = {o->k_embed, o->k_embed_q8, o->k_layernorm, o->k_add, o->k_relu, o->k_gate_accum, o->k_copy_rows,
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
    if (c->relu)
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
 * every (op, class) (the last one when a list is shorter), plus the
 * portable default row.  Each set runs on a fresh device (program table). */
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
    for (size_t set = 0; set <= longest; set++) {
        void *mem = NULL;
        nmt_device *dev = nmt_test_device_open(&mem);
        assert_non_null(dev);
        nmt_tuning t;
        if (set == longest) {
            nmt_device_info generic;
            memset(&generic, 0, sizeof generic);
            nmt_tuning_from_table(&t, &generic);
        } else {
            t = dev->tuning;
            for (int op = 0; op < NMT_GOP_COUNT; op++)
                for (int c = 0; c < NMT_GCLASS_COUNT; c++)
                    t.gemm[op][c] = cand[op][c][NMT_MIN(set, count[op][c] - 1)];
        }
        nmt_ops ops;
        nmt_test_assert_ok(dev, nmt_ops_init_tuned(&ops, dev, &t));
        nmt_test_assert_ok(dev, nmt_ops_enable_q8(&ops));
        env ce = {dev, mem, ops};
        run_all_gemm(&ce, &ops, 1000 + 300 * set);
        nmt_ops_release(&ops);
        nmt_test_device_close(dev, mem);
    }
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
    env *e = *state;
    if (!nmt_device_have_clblast()) {
        fprintf(stderr, "library built without CLBlast: skipping\n");
        skip();
    }
    nmt_device_params p;
    nmt_test_default_params(&p);
    p.gemm = NMT_GEMM_CLBLAST;
    void *mem = NULL;
    nmt_device *dev = NULL;
    nmt_test_assert_ok(NULL, nmt_test_device_open_with(&p, &mem, &dev));
    nmt_ops ops;
    nmt_test_assert_ok(dev, nmt_ops_init(&ops, dev));
    assert_int_equal(ops.gemm, NMT_GEMM_CLBLAST);
    env ce = {dev, mem, ops};
    (void)e;
    const gemm_case c[] = {
        {1, 17, 33, 67, 0.5f, 1.0f, 1, 1, 5, 3},  /* bias + relu through bias_act */
        {1, 9, 20, 16, 1.0f, 0.0f, 0, 0, 0, 0},   /* plain: CLBlast alone, C starts as NaN */
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(c); i++) run_gemm(&ce, &ops, &c[i], 900 + i);
    nmt_ops_release(&ops);
    nmt_test_device_close(dev, mem);
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

static void test_layernorm(void **state) {
    env *e = *state;
    /* both launch shapes: a work-item per row (CPUs) and a work-group of
     * reduce_wg per row (elsewhere), whatever the device chose */
    const size_t chosen = e->ops.norm_wg;
    const size_t wgs[2] = {1, e->ops.reduce_wg};
    for (int w = 0; w < 2; w++) {
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

static void test_log_softmax(void **state) {
    env *e = *state;
    run_log_softmax(e, 7, 1001, 1010, 30.0f, 0, 1);
    run_log_softmax(e, 3, 1, 1, 5.0f, 0, 2);         /* n = 1: log 1 = 0 */
    run_log_softmax(e, 5, 37, 40, 5.0f, 1, 3);       /* -INF entries, an all -INF row */
    run_log_softmax(e, 2, 32000, 32000, 20.0f, 0, 4);  /* vocabulary-sized rows */
    run_log_softmax(e, 4, 17, 17, 1000.0f, 0, 5);    /* huge logits: must not overflow */
}

/* ---- attention ------------------------------------------------------------ */

typedef struct attn_case {
    const char *name;
    uint32_t n_seq, lq, q_pos0, lk_max, group, H, dh;
    int causal;
    uint32_t n_branches;
    nmt_branch br[NMT_MAX_BRANCHES];
    const int32_t *key_len;  /* per kv sequence, or NULL: key_len_const */
    uint32_t key_len_const;
} attn_case;

static nmt_branch G(void) { nmt_branch b = {NMT_BRANCH_GLOBAL, 0}; return b; }
static nmt_branch FW(void) { nmt_branch b = {NMT_BRANCH_FW, 0}; return b; }
static nmt_branch BW(void) { nmt_branch b = {NMT_BRANCH_BW, 0}; return b; }
static nmt_branch LOCAL(uint32_t k) { nmt_branch b = {NMT_BRANCH_LOCAL, k}; return b; }

static void run_attention_mode(env *e, const attn_case *c, uint64_t seed, int mode) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t width = c->H * c->dh;
    const uint32_t n_kv = (c->n_seq + c->group - 1) / c->group;
    const uint32_t q_ld = width + 3, k_ld = width + 1, v_ld = width + 2;
    const uint32_t out_ld = c->n_branches * width + 5;
    const uint64_t kv_stride = (uint64_t)c->lk_max * NMT_MAX(k_ld, v_ld) + 7;
    const size_t oq = 2, ok = 3, ov = 1, oo = 4, okl = 1;
    const size_t nq = oq + (size_t)c->n_seq * c->lq * q_ld, nk = ok + n_kv * kv_stride, nv = ov + n_kv * kv_stride;
    const size_t no = oo + (size_t)c->n_seq * c->lq * out_ld;
    const size_t nscores = (size_t)c->n_seq * c->H * c->lq * c->lk_max, nstats = (size_t)c->n_seq * c->H * c->lq * 2;

    float *q = host_block(&r, nq, oq, c->n_seq * c->lq, width, q_ld, -1, 1);
    float *k = nmt_test_alloc_f32(nk), *v = nmt_test_alloc_f32(nv);
    nmt_test_fill_const(k, nk, NAN);
    nmt_test_fill_const(v, nv, NAN);
    /* Only keys below the valid length are data; the rest of the cache is
     * NaN, so reading any masked key would poison the output. */
    for (uint32_t m = 0; m < n_kv; m++) {
        uint32_t valid = c->key_len ? (uint32_t)NMT_MAX(c->key_len[m], 0) : c->key_len_const;
        valid = NMT_MIN(valid, c->lk_max);
        for (uint32_t j = 0; j < valid; j++) {
            nmt_test_fill_uniform(&r, k + ok + m * kv_stride + (uint64_t)j * k_ld, width, -1, 1);
            nmt_test_fill_uniform(&r, v + ov + m * kv_stride + (uint64_t)j * v_ld, width, -1, 1);
        }
    }
    float *out = nmt_test_alloc_f32(no);
    nmt_test_fill_const(out, no, NAN);
    int32_t kl_host[16] = {0};
    if (c->key_len) memcpy(kl_host + okl, c->key_len, n_kv * sizeof(int32_t));

    cl_mem dq = nmt_test_upload_f32(e->dev, q, nq), dk = nmt_test_upload_f32(e->dev, k, nk);
    cl_mem dv = nmt_test_upload_f32(e->dev, v, nv), dout = nmt_test_upload_f32(e->dev, out, no);
    cl_mem dscores = nmt_test_buffer_f32_fill(e->dev, 1 + (nscores ? nscores : 1), NAN);
    cl_mem dstats = nmt_test_buffer_f32_fill(e->dev, 2 + nstats, NAN);
    cl_mem dkl = nmt_test_upload_i32(e->dev, kl_host, 16);

    nmt_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_seq = c->n_seq;
    a.lq = c->lq;
    a.q_pos0 = c->q_pos0;
    a.lk_max = c->lk_max;
    a.group = c->group;
    a.n_heads = c->H;
    a.d_head = c->dh;
    a.q = B(dq, oq);
    a.q_ld = q_ld;
    a.k = B(dk, ok);
    a.k_ld = k_ld;
    a.v = B(dv, ov);
    a.v_ld = v_ld;
    a.kv_seq_stride = kv_stride;
    a.key_len = c->key_len ? B(dkl, okl) : NONE;
    a.key_len_const = c->key_len_const;
    a.causal = c->causal;
    a.n_branches = c->n_branches;
    memcpy(a.branches, c->br, sizeof c->br);
    a.scores = B(dscores, 1);
    a.stats = B(dstats, 2);
    a.out = B(dout, oo);
    a.out_ld = out_ld;
    const int saved_mode = e->ops.attn_mode;
    e->ops.attn_mode = mode;
    nmt_status st = nmt_op_attention(&e->ops, &a);
    e->ops.attn_mode = saved_mode;
    nmt_test_assert_ok(e->dev, st);
    float *got = download(e, dout, no);

    ref_attn_args ra;
    memset(&ra, 0, sizeof ra);
    ra.n_seq = c->n_seq;
    ra.lq = c->lq;
    ra.q_pos0 = c->q_pos0;
    ra.lk_max = c->lk_max;
    ra.group = c->group;
    ra.n_heads = c->H;
    ra.d_head = c->dh;
    ra.q = q + oq;
    ra.q_ld = q_ld;
    ra.k = k + ok;
    ra.k_ld = k_ld;
    ra.v = v + ov;
    ra.v_ld = v_ld;
    ra.kv_seq_stride = kv_stride;
    ra.key_len = c->key_len;
    ra.key_len_const = c->key_len_const;
    ra.causal = c->causal;
    ra.n_branches = c->n_branches;
    memcpy(ra.branches, c->br, sizeof c->br);
    ra.out = out + oo;
    ra.out_ld = out_ld;
    ref_attention(&ra);

    char what[128];
    snprintf(what, sizeof what, "attention [%s] %s", c->name, mode == NMT_ATTN_FUSED ? "fused" : "split");
    check_block(got, out, no, oo, c->n_seq * c->lq, c->n_branches * width, out_ld, TOL, what);

    /* rows with no visible key are exactly zero */
    for (uint32_t b = 0; b < c->n_branches; b++)
        for (uint32_t s = 0; s < c->n_seq; s++)
            for (uint32_t i = 0; i < c->lq; i++) {
                int any = 0;
                for (uint32_t j = 0; j < c->lk_max && !any; j++) any = ref_attn_allowed(&ra, s, i, j, c->br[b]);
                if (any) continue;
                const float *row = got + oo + (size_t)(s * c->lq + i) * out_ld + (size_t)b * width;
                for (uint32_t x = 0; x < width; x++)
                    if (row[x] != 0.0f) fail_msg("%s: masked row s=%u i=%u branch %u not zero", what, s, i, b);
            }

    nmt_test_release(dq);
    nmt_test_release(dk);
    nmt_test_release(dv);
    nmt_test_release(dout);
    nmt_test_release(dscores);
    nmt_test_release(dstats);
    nmt_test_release(dkl);
    free(q);
    free(k);
    free(v);
    free(out);
    free(got);
}

/* Both paths: the fused online-softmax kernel and scores/stats/apply. */
static void run_attention(env *e, const attn_case *c, uint64_t seed) {
    run_attention_mode(e, c, seed, NMT_ATTN_FUSED);
    run_attention_mode(e, c, seed, NMT_ATTN_SPLIT);
}

static void test_attention_single_branches(void **state) {
    env *e = *state;
    static const int32_t kl[] = {9, 6};
    attn_case c = {"global", 2, 9, 0, 9, 1, 2, 8, 0, 1, {G()}, NULL, 9};
    run_attention(e, &c, 1);
    c.key_len = kl; /* key padding from here on */
    c.name = "global padded";
    run_attention(e, &c, 2);
    c.name = "fw";
    c.br[0] = FW();
    run_attention(e, &c, 3);
    c.name = "bw";
    c.br[0] = BW();
    run_attention(e, &c, 4);
    const uint32_t radii[] = {0, 1, 3};
    for (size_t i = 0; i < NMT_ARRAY_LEN(radii); i++) {
        c.name = "local";
        c.br[0] = LOCAL(radii[i]);
        run_attention(e, &c, 10 + i);
    }
    c.name = "local huge radius == global";
    c.br[0] = LOCAL(0xffffffffu);
    run_attention(e, &c, 20);
}

static void test_attention_multi_branch(void **state) {
    env *e = *state;
    /* encoder HySAN: all branch kinds share one score matrix; odd d_head */
    static const int32_t kl[] = {11, 4, 0};  /* the last sequence is empty: all rows masked */
    attn_case c = {"global fw bw local:1 local:3 padded", 3, 11, 0, 11, 1, 3, 7, 0, 5,
                   {G(), FW(), BW(), LOCAL(1), LOCAL(3)}, kl, 0};
    run_attention(e, &c, 30);
    /* the maximum branch count */
    attn_case c8 = {"8 branches", 2, 6, 0, 6, 1, 2, 4, 0, 8,
                    {G(), FW(), BW(), LOCAL(0), LOCAL(1), LOCAL(2), G(), BW()}, NULL, 6};
    run_attention(e, &c8, 31);
}

static void test_attention_causal(void **state) {
    env *e = *state;
    /* decoder self-attention over a whole prefix (training / scoring) */
    attn_case c = {"causal global fw local:2", 2, 8, 0, 8, 1, 4, 8, 1, 3, {G(), FW(), LOCAL(2)}, NULL, 8};
    run_attention(e, &c, 40);
    /* causal + BW keeps only j == pos */
    attn_case c2 = {"causal bw", 1, 5, 0, 5, 1, 1, 4, 1, 1, {BW()}, NULL, 5};
    run_attention(e, &c2, 41);
}

static void test_attention_incremental(void **state) {
    env *e = *state;
    /* One decoding step t = 5 for 3 beams against a cache of capacity 12
     * holding 6 valid keys (NaN beyond), q_pos0 = 5, lq = 1. */
    attn_case c = {"step t=5", 3, 1, 5, 12, 1, 2, 8, 1, 2, {G(), LOCAL(2)}, NULL, 6};
    run_attention(e, &c, 50);
    /* first step: a single key */
    attn_case c0 = {"step t=0", 2, 1, 0, 12, 1, 2, 8, 1, 2, {G(), LOCAL(0)}, NULL, 1};
    run_attention(e, &c0, 51);
    /* per-beam lengths through the buffer */
    static const int32_t kl[] = {6, 3, 6};
    attn_case c1 = {"step with key_len buffer", 3, 1, 5, 12, 1, 2, 8, 1, 1, {FW()}, kl, 0};
    run_attention(e, &c1, 52);
}

static void test_attention_cross_group(void **state) {
    env *e = *state;
    /* Cross-attention: 2 sentences x 3 beams read 2 encoder outputs (group
     * 3), padded source lengths, decoder rows at positions 2..5, d_head 10. */
    static const int32_t kl[] = {10, 6};
    attn_case c = {"cross group=3", 6, 4, 2, 10, 3, 2, 10, 0, 1, {G()}, kl, 0};
    run_attention(e, &c, 60);
    /* group that does not divide n_seq */
    static const int32_t kl2[] = {5, 2, 7};
    attn_case c2 = {"cross group=2, odd n_seq", 5, 2, 0, 7, 2, 1, 6, 0, 1, {G()}, kl2, 0};
    run_attention(e, &c2, 61);
}

static void test_attention_masked_and_edge(void **state) {
    env *e = *state;
    /* Every key masked for one sequence, key_len beyond lk_max for another
     * (clamped), a local window that misses all valid keys for late rows. */
    static const int32_t kl[] = {0, 99};
    attn_case c = {"key_len 0 and > lk_max", 2, 6, 0, 6, 1, 2, 4, 0, 2, {G(), LOCAL(1)}, kl, 0};
    run_attention(e, &c, 70);
    static const int32_t kl2[] = {2};
    attn_case c2 = {"local window past the keys", 1, 8, 0, 8, 1, 1, 4, 0, 1, {LOCAL(1)}, kl2, 0};
    run_attention(e, &c2, 71);
    attn_case c3 = {"lk_max 0", 2, 3, 0, 0, 1, 2, 4, 0, 2, {G(), FW()}, NULL, 0};
    run_attention(e, &c3, 72);
    attn_case c4 = {"d_head 1", 1, 5, 0, 5, 1, 3, 1, 0, 1, {G()}, NULL, 5};
    run_attention(e, &c4, 73);
    attn_case c5 = {"d_head 64, 8 heads", 2, 13, 0, 17, 1, 8, 64, 0, 2, {G(), LOCAL(2)}, NULL, 17};
    run_attention(e, &c5, 74);
    /* float16 register path of attn_fused at its smallest and largest d_head */
    attn_case c6 = {"d_head 16, causal", 2, 7, 0, 7, 1, 2, 16, 1, 2, {G(), FW()}, NULL, 7};
    run_attention(e, &c6, 75);
    attn_case c7 = {"d_head 128, padded keys", 2, 5, 0, 9, 1, 1, 128, 0, 2, {G(), BW()}, NULL, 6};
    run_attention(e, &c7, 76);
}

static void test_attention_long_rows(void **state) {
    env *e = *state;
    /* More visible keys than attn_apply stages per step (ATTN_TILE = 64),
     * d_head wider than a work-group, and a d_head that pads the group. */
    attn_case c = {"150 keys, step t=140", 2, 3, 140, 150, 1, 2, 72, 1, 3, {G(), LOCAL(70), FW()}, NULL, 143};
    run_attention(e, &c, 80);
    static const int32_t kl[] = {130, 65};
    attn_case c2 = {"130/65 keys, encoder", 2, 130, 0, 130, 1, 1, 3, 0, 3, {G(), BW(), LOCAL(64)}, kl, 0};
    run_attention(e, &c2, 81);
}

static void test_attention_arguments(void **state) {
    env *e = *state;
    nmt_log_fn saved = e->dev->log.fn;
    e->dev->log.fn = NULL;  /* the refusals below are logged at ERROR */
    float x[64] = {0};
    cl_mem m = nmt_test_upload_f32(e->dev, x, 64);
    nmt_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_seq = 1;
    a.lq = 2;
    a.lk_max = 2;
    a.group = 1;
    a.n_heads = 1;
    a.d_head = 4;
    a.q = a.k = a.v = a.scores = a.stats = a.out = B(m, 0);
    a.q_ld = a.k_ld = a.v_ld = a.out_ld = 4;
    a.key_len_const = 2;
    a.n_branches = 1;
    assert_int_equal(nmt_op_attention(&e->ops, &a), NMT_OK);
    assert_int_equal(nmt_op_attention(&e->ops, NULL), NMT_ERR_INVALID_ARGUMENT);
    nmt_attn_args b = a;
    b.n_branches = 0;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.n_branches = NMT_MAX_BRANCHES + 1;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.group = 0;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.branches[0].kind = (nmt_branch_kind)9;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.n_branches = 2;  /* out_ld 4 < 2 branches * 4 */
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.q_ld = 3;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.v = NONE;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.q_pos0 = 1u << 30;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_UNSUPPORTED);
    b = a;
    b.lq = 0;  /* nothing to compute */
    b.q = NONE;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_OK);
    nmt_test_release(m);
    e->dev->log.fn = saved;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_init),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_parameter_sets),
        cmocka_unit_test(test_gemm_blocking),
        cmocka_unit_test(test_gemm_arguments),
        cmocka_unit_test(test_gemm_clblast),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_embed_q8),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_add_relu),
        cmocka_unit_test(test_gate_accum),
        cmocka_unit_test(test_copy_rows),
        cmocka_unit_test(test_gather_rows),
        cmocka_unit_test(test_log_softmax),
        cmocka_unit_test(test_attention_single_branches),
        cmocka_unit_test(test_attention_multi_branch),
        cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_attention_incremental),
        cmocka_unit_test(test_attention_cross_group),
        cmocka_unit_test(test_attention_masked_and_edge),
        cmocka_unit_test(test_attention_long_rows),
        cmocka_unit_test(test_attention_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
