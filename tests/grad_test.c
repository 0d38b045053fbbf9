/* grad_test.c — every training op of runtime/ops_train.h against central
 * finite differences of the corresponding forward, evaluated in double on
 * the host, or (for the exact, non-differential ops: TN GEMM, column sums,
 * Adam, reductions, dropout masks, the loss value) against naive double
 * references.
 *
 * Finite differences: each check builds a scalar loss L = sum(out * R) with
 * random R (so dL/dout = R is the upstream gradient handed to the backward
 * op), perturbs every input element by +-h (h = 1e-3) in a double forward
 * and compares (L(x+h) - L(x-h)) / 2h with the kernel's gradient by the
 * normalised error max|g - fd| / max|fd| (tolerance FD_TOL; NMT_TEST_VERBOSE=1
 * prints every check's error).  Inputs are
 * generated as floats and widened, so device and host see identical values.
 * Output buffers are pre-filled with NaN (overwritten outputs: every element
 * must be written) or with random values (accumulated outputs: the result
 * must be prefill + gradient). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "ops_train.h"
#include "ref_ops.h"

#define FD_H 1e-3
#define FD_TOL 1e-4  /* fp32 kernel vs O(h^2) double FD (measured: ~1e-7) */
#define EXACT_TOL 1e-5

typedef struct env {
    nmt_device *dev;
    void *mem;
    nmt_ops ops;
    nmt_train_ops t;
} env;

static int setup(void **state) {
    env *e = calloc(1, sizeof *e);
    if (e == NULL) return -1;
    e->dev = nmt_test_device_open(&e->mem);
    if (e->dev == NULL) return -1;
    nmt_status s = nmt_ops_init(&e->ops, e->dev);
    if (s == NMT_OK) s = nmt_train_ops_init(&e->t, e->dev);
    if (s != NMT_OK) {
        fprintf(stderr, "ops init failed: %s\n", nmt_status_str(s));
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    nmt_train_ops_release(&e->t);
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

static float *download(env *e, cl_mem m, size_t n) {
    float *x = nmt_test_alloc_f32(n);
    nmt_test_download_f32(e->dev, m, 0, n, x);
    return x;
}

static double *widen(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * (n ? n : 1));
    assert_non_null(d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static float *nan_f32(size_t n) {
    float *x = nmt_test_alloc_f32(n);
    nmt_test_fill_const(x, n, NAN);
    return x;
}

/* A differentiable forward: L(ctx) in double, reading its inputs from
 * double arrays the checker perturbs.  *skip set by the loss means "this
 * perturbation crossed a kink (ReLU): do not compare this element". */
typedef double (*loss_fn)(void *ctx, int *skip);

/* Central differences of L with respect to x[idx[k]] (k < n_idx; idx NULL =
 * every element k < n) compared with grad[idx[k]] (+ base[idx[k]] when
 * base is non-NULL: accumulated outputs). */
static void fd_check(const char *what, loss_fn L, void *ctx, double *x, size_t n, const float *grad,
                     const float *base) {
    float *fd = nmt_test_alloc_f32(n), *got = nmt_test_alloc_f32(n);
    size_t used = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const double x0 = x[i];
        int skip = 0;
        x[i] = x0 + FD_H;
        const double lp = L(ctx, &skip);
        x[i] = x0 - FD_H;
        const double lm = L(ctx, &skip);
        x[i] = x0;
        const double g = base ? (double)grad[i] - (double)base[i] : (double)grad[i];
        if (skip) {
            skipped++;
            continue;
        }
        fd[used] = (float)((lp - lm) / (2.0 * FD_H));
        got[used] = (float)g;
        used++;
    }
    assert_true(used > 0 && skipped * 10 <= n);
    if (getenv("NMT_TEST_VERBOSE"))
        fprintf(stderr, "  %-32s fd error %.2e over %zu elements (%zu skipped at kinks)\n", what,
                nmt_test_norm_error(got, fd, used), used, skipped);
    nmt_test_assert_close_impl(got, fd, used, FD_TOL, what, __FILE__, __LINE__);
    free(fd);
    free(got);
}

/* ---- init and kernel builds ---------------------------------------------- */

static void test_init(void **state) {
    env *e = *state;
    const nmt_train_ops *t = &e->t;
    const cl_kernel ks[] = {t->k_gemm_tn, t->k_col_sum, t->k_layernorm_bwd, t->k_layernorm_bwd_params,
                            t->k_embed_bwd, t->k_relu_bwd, t->k_gate_bwd, t->k_dropout,
                            t->k_attn_bwd_scores, t->k_attn_bwd_probs, t->k_attn_bwd_ds, t->k_attn_bwd_dq,
                            t->k_attn_bwd_dkv, t->k_xent, t->k_adam, t->k_reduce_partial, t->k_reduce_final,
                            t->k_scale, t->k_fill, t->k_axpy};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ks); i++) assert_non_null(ks[i]);
    assert_true(t->reduce_wg >= 1 && (t->reduce_wg & (t->reduce_wg - 1)) == 0);
    assert_true(t->wg_max >= 1);
    assert_int_equal(nmt_train_ops_init(NULL, e->dev), NMT_ERR_INVALID_ARGUMENT);

    /* the training sources compile warning-free with other knob values too */
    static const struct { const char *src, *opts; } builds[] = {
        {"gemm_bwd", "-Werror"}, {"gemm_bwd", "-Werror -DGEMMT_TM=3 -DGEMMT_TN=5"},
        {"gemm_bwd", "-Werror -DGEMMT_TM=1 -DGEMMT_TN=1"}, {"norm_bwd", "-Werror -DREDUCE_WG=16"},
        {"elementwise_bwd", "-Werror"}, {"attention_bwd", "-Werror"}, {"loss", "-Werror -DREDUCE_WG=16"},
        {"optim", "-Werror -DREDUCE_WG=16"}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(builds); i++) {
        cl_program prog = NULL;
        nmt_test_assert_ok(e->dev, nmt_device_program(e->dev, builds[i].src, builds[i].opts, &prog));
    }
}

/* ---- GEMM TN and column sums (exact references) --------------------------- */

static void run_gemm_tn(env *e, nmt_train_ops *t, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    /* with N >= 32 whole vector column blocks; K > 2 * k_chunk in chunks */
    static const uint32_t shapes[][3] = {{1, 1, 1},   {5, 7, 3},    {13, 6, 17}, {32, 33, 9},
                                         {4, 4, 0},   {70, 3, 41},  {9, 70, 600}, {7, 64, 513}};
    for (size_t si = 0; si < NMT_ARRAY_LEN(shapes); si++) {
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
    run_gemm_tn(e, &e->t, 11);
    static const uint32_t sets[][4] = {{4, 4, 4, 0}, {3, 8, 8, 5}, {5, 20, 16, 64}, {1, 32, 16, 100}, {8, 1, 1, 7}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(sets); i++) {
        nmt_train_ops t;
        nmt_test_assert_ok(e->dev, nmt_train_ops_init_gemm(&t, e->dev, sets[i][0], sets[i][1], sets[i][2]));
        assert_int_equal(t.gemm_vw, sets[i][1] % sets[i][2] == 0 ? sets[i][2] : 1u);
        t.k_chunk = sets[i][3];
        run_gemm_tn(e, &t, 20 + i);
        nmt_train_ops_release(&t);
    }
    nmt_train_ops t;
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 0, 4, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 4, 33, 4), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 4, 4, 3), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_train_ops_init_gemm(&t, e->dev, 9, 4, 4), NMT_ERR_INVALID_ARGUMENT);
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

/* ---- linear layer (+ ReLU) vs finite differences ------------------------- */

typedef struct lin_ctx {
    uint32_t rows, in, out, ld_x;
    int relu;
    double *x, *W, *b;    /* x [rows, ld_x], W [out, in], b [out] */
    const float *R;       /* [rows, out] */
    signed char *sign;    /* base sign pattern of the pre-activations */
} lin_ctx;

static double lin_loss(void *p, int *skip) {
    lin_ctx *c = p;
    double L = 0;
    for (uint32_t i = 0; i < c->rows; i++)
        for (uint32_t o = 0; o < c->out; o++) {
            double z = c->b[o];
            for (uint32_t k = 0; k < c->in; k++) z += c->x[(size_t)i * c->ld_x + k] * c->W[(size_t)o * c->in + k];
            if (c->relu) {
                signed char sg = z > 0 ? 1 : -1;
                size_t e = (size_t)i * c->out + o;
                if (c->sign[e] == 0) c->sign[e] = sg;
                else if (c->sign[e] != sg) *skip = 1;
                if (z < 0) z = 0;
            }
            L += z * c->R[(size_t)i * c->out + o];
        }
    return L;
}

static void check_linear(env *e, uint32_t rows, uint32_t in, uint32_t out, int relu, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t ld_x = in + 3, ld_dy = out + 2, ld_dx = in + 1;
    const size_t nx = (size_t)rows * ld_x, nw = (size_t)out * in;
    float *X = nmt_test_random_f32(&r, nx, -1, 1), *W = nmt_test_random_f32(&r, nw, -0.5f, 0.5f);
    float *Bv = nmt_test_random_f32(&r, out, -0.5f, 0.5f);
    float *R = nmt_test_random_f32(&r, (size_t)rows * out, -1, 1);
    float *dW0 = nmt_test_random_f32(&r, nw, -1, 1), *db0 = nmt_test_random_f32(&r, out, -1, 1);

    cl_mem x = nmt_test_upload_f32(e->dev, X, nx), w = nmt_test_upload_f32(e->dev, W, nw),
           bb = nmt_test_upload_f32(e->dev, Bv, out);
    cl_mem y = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * out, NAN);
    /* dy [rows, ld_dy] = R */
    float *DY = nan_f32((size_t)rows * ld_dy);
    for (uint32_t i = 0; i < rows; i++) memcpy(DY + (size_t)i * ld_dy, R + (size_t)i * out, out * sizeof(float));
    cl_mem dy = nmt_test_upload_f32(e->dev, DY, (size_t)rows * ld_dy);
    cl_mem dx = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * ld_dx, NAN);
    cl_mem dw = nmt_test_upload_f32(e->dev, dW0, nw), db = nmt_test_upload_f32(e->dev, db0, out);

    nmt_test_assert_ok(e->dev, nmt_op_gemm(&e->ops, 1, rows, out, in, 1.0f, B(x, 0), ld_x, B(w, 0), in, 0.0f,
                                           B(y, 0), out, B(bb, 0), relu));
    if (relu) {
        /* dy <- dy * (y > 0), strided rows: one call per row */
        for (uint32_t i = 0; i < rows; i++)
            nmt_test_assert_ok(e->dev, nmt_op_relu_bwd(&e->t, B(y, (size_t)i * out), B(dy, (size_t)i * ld_dy),
                                                       B(dy, (size_t)i * ld_dy), out));
    }
    nmt_test_assert_ok(e->dev, nmt_op_linear_bwd(&e->ops, &e->t, rows, out, in, B(x, 0), ld_x, B(w, 0), B(dy, 0),
                                                 ld_dy, B(dx, 0), ld_dx, 0.0f, B(dw, 0), B(db, 0), 1.0f));
    float *gdx = download(e, dx, (size_t)rows * ld_dx), *gdw = download(e, dw, nw), *gdb = download(e, db, out);

    lin_ctx c = {rows, in, out, ld_x, relu, widen(X, nx), widen(W, nw), widen(Bv, out), R,
                 calloc((size_t)rows * out, 1)};
    int skip = 0;
    (void)lin_loss(&c, &skip);  /* records the base sign pattern */
    /* dx compared on the rows' valid columns only (padding is never written) */
    float *gx = nmt_test_alloc_f32(nx);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t k = 0; k < ld_x; k++) gx[(size_t)i * ld_x + k] = k < in ? gdx[(size_t)i * ld_dx + k] : 0.0f;
    fd_check("linear dx", lin_loss, &c, c.x, nx, gx, NULL);
    fd_check("linear dW", lin_loss, &c, c.W, nw, gdw, dW0);
    fd_check("linear db", lin_loss, &c, c.b, out, gdb, db0);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t k = in; k < ld_dx; k++) assert_true(isnan(gdx[(size_t)i * ld_dx + k]));

    free(c.x);
    free(c.W);
    free(c.b);
    free(c.sign);
    free(gx);
    free(X);
    free(W);
    free(Bv);
    free(R);
    free(dW0);
    free(db0);
    free(DY);
    free(gdx);
    free(gdw);
    free(gdb);
    cl_mem ms[] = {x, w, bb, y, dy, dx, dw, db};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ms); i++) nmt_test_release(ms[i]);
}

static void test_linear_bwd(void **state) {
    env *e = *state;
    check_linear(e, 5, 7, 6, 0, 21);
    check_linear(e, 9, 13, 10, 1, 22);
    check_linear(e, 3, 33, 5, 1, 23);
}

static void test_relu_bwd_exact(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(31);
    const uint32_t n = 1037;
    float *Y = nmt_test_random_f32(&r, n, -1, 1), *DY = nmt_test_random_f32(&r, n, -1, 1);
    for (uint32_t i = 0; i < n; i += 7) Y[i] = 0.0f;  /* y == 0 passes nothing */
    cl_mem y = nmt_test_upload_f32(e->dev, Y, n), dy = nmt_test_upload_f32(e->dev, DY, n);
    cl_mem dx = nmt_test_buffer_f32_fill(e->dev, n + 1, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_relu_bwd(&e->t, B(y, 0), B(dy, 0), B(dx, 1), n));
    float *got = download(e, dx, n + 1);
    assert_true(isnan(got[0]));
    for (uint32_t i = 0; i < n; i++) assert_true(got[1 + i] == (Y[i] > 0 ? DY[i] : 0.0f));
    free(Y);
    free(DY);
    free(got);
    nmt_test_release(y);
    nmt_test_release(dy);
    nmt_test_release(dx);
}

/* ---- layer norm ------------------------------------------------------------ */

typedef struct ln_ctx {
    uint32_t rows, d;
    double *x, *res, *g, *b;  /* res may be NULL */
    const float *R;
    double eps;
} ln_ctx;

static double ln_loss(void *p, int *skip) {
    (void)skip;
    ln_ctx *c = p;
    double L = 0;
    double *v = malloc(sizeof(double) * c->d);
    assert_non_null(v);
    for (uint32_t i = 0; i < c->rows; i++) {
        double mu = 0, var = 0;
        for (uint32_t k = 0; k < c->d; k++) {
            size_t e = (size_t)i * c->d + k;
            v[k] = c->x[e] + (c->res ? c->res[e] : 0.0);
            mu += v[k];
        }
        mu /= c->d;
        for (uint32_t k = 0; k < c->d; k++) var += (v[k] - mu) * (v[k] - mu);
        var /= c->d;
        const double rstd = 1.0 / sqrt(var + c->eps);
        for (uint32_t k = 0; k < c->d; k++)
            L += ((v[k] - mu) * rstd * c->g[k] + c->b[k]) * c->R[(size_t)i * c->d + k];
    }
    free(v);
    return L;
}

static void check_layernorm(env *e, uint32_t rows, uint32_t d, int with_res, int accumulate, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const size_t n = (size_t)rows * d;
    float *X = nmt_test_random_f32(&r, n, -2, 2), *RS = nmt_test_random_f32(&r, n, -1, 1);
    float *G = nmt_test_random_f32(&r, d, 0.5f, 1.5f), *Bt = nmt_test_random_f32(&r, d, -0.5f, 0.5f);
    float *R = nmt_test_random_f32(&r, n, -1, 1);
    float *DX0 = accumulate ? nmt_test_random_f32(&r, n, -1, 1) : nan_f32(n);
    float *DG0 = accumulate ? nmt_test_random_f32(&r, d, -1, 1) : nan_f32(d);
    float *DB0 = accumulate ? nmt_test_random_f32(&r, d, -1, 1) : nan_f32(d);
    const float eps = 1e-5f;

    cl_mem x = nmt_test_upload_f32(e->dev, X, n), rs = nmt_test_upload_f32(e->dev, RS, n);
    cl_mem g = nmt_test_upload_f32(e->dev, G, d), dy = nmt_test_upload_f32(e->dev, R, n);
    cl_mem dx = nmt_test_upload_f32(e->dev, DX0, n), dg = nmt_test_upload_f32(e->dev, DG0, d),
           db = nmt_test_upload_f32(e->dev, DB0, d), st = nmt_test_buffer_f32_fill(e->dev, 2 * rows, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_layernorm_bwd(&e->t, B(x, 0), with_res ? B(rs, 0) : NONE, B(dy, 0), B(dx, 0),
                                                    accumulate, rows, d, B(g, 0), eps, B(dg, 0), B(db, 0),
                                                    accumulate, B(st, 0)));
    float *gdx = download(e, dx, n), *gdg = download(e, dg, d), *gdb = download(e, db, d);

    ln_ctx c = {rows, d, widen(X, n), with_res ? widen(RS, n) : NULL, widen(G, d), widen(Bt, d), R, eps};
    fd_check("layernorm dx", ln_loss, &c, c.x, n, gdx, accumulate ? DX0 : NULL);
    if (with_res) fd_check("layernorm dres", ln_loss, &c, c.res, n, gdx, accumulate ? DX0 : NULL);
    fd_check("layernorm dgamma", ln_loss, &c, c.g, d, gdg, accumulate ? DG0 : NULL);
    fd_check("layernorm dbeta", ln_loss, &c, c.b, d, gdb, accumulate ? DB0 : NULL);

    free(c.x);
    free(c.res);
    free(c.g);
    free(c.b);
    float *bufs[] = {X, RS, G, Bt, R, DX0, DG0, DB0, gdx, gdg, gdb};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bufs); i++) free(bufs[i]);
    cl_mem ms[] = {x, rs, g, dy, dx, dg, db, st};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ms); i++) nmt_test_release(ms[i]);
}

static void test_layernorm_bwd(void **state) {
    env *e = *state;
    /* a work-item per row (CPUs) and a work-group per row (elsewhere) */
    const size_t chosen = e->t.norm_wg;
    const size_t wgs[2] = {1, e->t.reduce_wg};
    for (int w = 0; w < 2; w++) {
        e->t.norm_wg = wgs[w];
        check_layernorm(e, 5, 7, 0, 0, 41);
        check_layernorm(e, 4, 64, 1, 1, 42);
        check_layernorm(e, 3, 133, 1, 0, 43);  /* wider than any reduction work-group */
        check_layernorm(e, 1, 3, 0, 1, 44);
    }
    e->t.norm_wg = chosen;
}

/* ---- gate ------------------------------------------------------------------ */

typedef struct gate_ctx {
    uint32_t rows, d, ld_x, ld_g;
    double *x, *g;
    const float *R;
} gate_ctx;

static double gate_loss(void *p, int *skip) {
    (void)skip;
    gate_ctx *c = p;
    double L = 0;
    for (uint32_t i = 0; i < c->rows; i++)
        for (uint32_t k = 0; k < c->d; k++) {
            const double g = c->g[(size_t)i * c->ld_g + k];
            L += c->x[(size_t)i * c->ld_x + k] / (1.0 + exp(-g)) * c->R[(size_t)i * c->d + k];
        }
    return L;
}

static void test_gate_bwd(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(51);
    const uint32_t rows = 4, d = 9, ld_x = 12, ld_g = 10, ld_dx = 11, ld_dg = 9;
    const size_t nx = (size_t)rows * ld_x, ng = (size_t)rows * ld_g, ndx = (size_t)rows * ld_dx,
                 ndg = (size_t)rows * ld_dg;
    float *X = nmt_test_random_f32(&r, nx, -2, 2), *G = nmt_test_random_f32(&r, ng, -3, 3);
    float *R = nmt_test_random_f32(&r, (size_t)rows * d, -1, 1), *DX0 = nmt_test_random_f32(&r, ndx, -1, 1);
    cl_mem x = nmt_test_upload_f32(e->dev, X, nx), g = nmt_test_upload_f32(e->dev, G, ng),
           dout = nmt_test_upload_f32(e->dev, R, (size_t)rows * d), dx = nmt_test_upload_f32(e->dev, DX0, ndx),
           dg = nmt_test_buffer_f32_fill(e->dev, ndg, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_gate_bwd(&e->t, B(x, 0), ld_x, B(g, 0), ld_g, B(dout, 0), d, B(dx, 0), ld_dx,
                                               B(dg, 0), ld_dg, rows, d, 1));
    float *gdx = download(e, dx, ndx), *gdg = download(e, dg, ndg);
    /* re-lay the gradients on the input strides (padding columns: zero gradient) */
    float *gx = nmt_test_alloc_f32(nx), *gg = nmt_test_alloc_f32(ng), *bx = nmt_test_alloc_f32(nx);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t k = 0; k < d; k++) {
            gx[(size_t)i * ld_x + k] = gdx[(size_t)i * ld_dx + k];
            bx[(size_t)i * ld_x + k] = DX0[(size_t)i * ld_dx + k];
            gg[(size_t)i * ld_g + k] = gdg[(size_t)i * ld_dg + k];
        }
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t k = d; k < ld_dx; k++)
            assert_memory_equal(&gdx[(size_t)i * ld_dx + k], &DX0[(size_t)i * ld_dx + k], sizeof(float));
    gate_ctx c = {rows, d, ld_x, ld_g, widen(X, nx), widen(G, ng), R};
    fd_check("gate dx", gate_loss, &c, c.x, nx, gx, bx);
    fd_check("gate dg", gate_loss, &c, c.g, ng, gg, NULL);
    free(c.x);
    free(c.g);
    float *bufs[] = {X, G, R, DX0, gdx, gdg, gx, gg, bx};
    for (size_t i = 0; i < NMT_ARRAY_LEN(bufs); i++) free(bufs[i]);
    cl_mem ms[] = {x, g, dout, dx, dg};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ms); i++) nmt_test_release(ms[i]);
}

/* ---- attention ------------------------------------------------------------- */

typedef struct attn_case {
    const char *name;
    uint32_t n_seq, lq, lk, group, H, dh, q_pos0;
    int causal, cross;         /* cross: q and kv in separate buffers */
    int32_t key_len[4];        /* per kv sequence; [0] < 0: key_len_const = lk */
    uint32_t n_br;
    nmt_branch br[4];
} attn_case;

typedef struct attn_ctx {
    const attn_case *ac;
    ref_attn_args ra;          /* masks only */
    double *q, *k, *v;         /* q [n_seq*lq, W] ld q_ld; k/v per kv seq */
    uint32_t q_ld, kv_ld;
    uint64_t kv_stride;
    const float *R;            /* [n_seq*lq, n_br*W] */
} attn_ctx;

static double attn_loss(void *p, int *skip) {
    (void)skip;
    attn_ctx *c = p;
    const attn_case *ac = c->ac;
    const uint32_t W = ac->H * ac->dh, ow = ac->n_br * W;
    double L = 0, sc[64];
    const double scale = 1.0 / sqrt((double)ac->dh);
    for (uint32_t b = 0; b < ac->n_br; b++)
        for (uint32_t s = 0; s < ac->n_seq; s++) {
            const uint64_t kv = (uint64_t)(s / ac->group) * c->kv_stride;
            for (uint32_t h = 0; h < ac->H; h++)
                for (uint32_t i = 0; i < ac->lq; i++) {
                    const double *q = c->q + (size_t)(s * ac->lq + i) * c->q_ld + h * ac->dh;
                    double mx = -INFINITY;
                    for (uint32_t j = 0; j < ac->lk; j++) {
                        sc[j] = -INFINITY;
                        if (!ref_attn_allowed(&c->ra, s, i, j, ac->br[b])) continue;
                        const double *k = c->k + kv + (uint64_t)j * c->kv_ld + h * ac->dh;
                        double dd = 0;
                        for (uint32_t x = 0; x < ac->dh; x++) dd += q[x] * k[x];
                        sc[j] = dd * scale;
                        if (sc[j] > mx) mx = sc[j];
                    }
                    if (mx == -INFINITY) continue;
                    double sum = 0;
                    for (uint32_t j = 0; j < ac->lk; j++) sum += sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx);
                    for (uint32_t x = 0; x < ac->dh; x++) {
                        double o = 0;
                        for (uint32_t j = 0; j < ac->lk; j++)
                            if (sc[j] != -INFINITY)
                                o += exp(sc[j] - mx) / sum * c->v[kv + (uint64_t)j * c->kv_ld + h * ac->dh + x];
                        L += o * c->R[(size_t)(s * ac->lq + i) * ow + b * W + h * ac->dh + x];
                    }
                }
        }
    return L;
}

static void check_attention(env *e, const attn_case *ac, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t W = ac->H * ac->dh, ow = ac->n_br * W;
    const uint32_t n_kv = (ac->n_seq + ac->group - 1) / ac->group;
    const uint32_t rows_q = ac->n_seq * ac->lq;
    /* self-attention: one qkv buffer [rows, 3W] (lq == lk, group 1);
     * cross: q [rows_q, W + 1], kv [n_kv * lk, 2W + 2] */
    const uint32_t q_ld = ac->cross ? W + 1 : 3 * W, kv_ld = ac->cross ? 2 * W + 2 : 3 * W;
    const uint64_t kv_stride = (uint64_t)ac->lk * kv_ld;
    const size_t nq = (size_t)rows_q * q_ld, nkv = (size_t)n_kv * kv_stride;
    float *Q = nmt_test_random_f32(&r, nq, -1.5f, 1.5f);
    float *KV = ac->cross ? nmt_test_random_f32(&r, nkv, -1.5f, 1.5f) : Q;
    float *R = nmt_test_random_f32(&r, (size_t)rows_q * ow, -1, 1);
    const size_t ko = ac->cross ? 0 : W, vo = ac->cross ? W : 2 * (size_t)W;

    cl_mem q = nmt_test_upload_f32(e->dev, Q, nq);
    cl_mem kv = ac->cross ? nmt_test_upload_f32(e->dev, KV, nkv) : q;
    cl_mem out = nmt_test_buffer_f32_fill(e->dev, (size_t)rows_q * ow, NAN);
    cl_mem dout = nmt_test_upload_f32(e->dev, R, (size_t)rows_q * ow);
    const size_t nsc = (size_t)ac->n_seq * ac->H * ac->lq * ac->lk;
    cl_mem scores = nmt_test_buffer_f32_fill(e->dev, nsc, NAN);
    cl_mem stats = nmt_test_buffer_f32_fill(e->dev, (size_t)ac->n_seq * ac->H * ac->lq * 2, NAN);
    cl_mem probs = nmt_test_buffer_f32_fill(e->dev, nsc * ac->n_br, NAN);
    cl_mem dstats = nmt_test_buffer_f32_fill(e->dev, (size_t)ac->n_seq * ac->H * ac->lq * ac->n_br, NAN);
    cl_mem dq = nmt_test_buffer_f32_fill(e->dev, nq, NAN);
    cl_mem dkv = ac->cross ? nmt_test_buffer_f32_fill(e->dev, nkv, NAN) : dq;
    cl_mem kl = NULL;
    if (ac->key_len[0] >= 0) kl = nmt_test_upload_i32(e->dev, ac->key_len, n_kv);

    nmt_attn_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    nmt_attn_args *a = &ba.fwd;
    a->n_seq = ac->n_seq;
    a->lq = ac->lq;
    a->q_pos0 = ac->q_pos0;
    a->lk_max = ac->lk;
    a->group = ac->group;
    a->n_heads = ac->H;
    a->d_head = ac->dh;
    a->q = B(q, 0);
    a->q_ld = q_ld;
    a->k = B(kv, ko);
    a->v = B(kv, vo);
    a->k_ld = a->v_ld = kv_ld;
    a->kv_seq_stride = kv_stride;
    a->key_len = kl ? B(kl, 0) : NONE;
    a->key_len_const = ac->lk;
    a->causal = ac->causal;
    a->n_branches = ac->n_br;
    memcpy(a->branches, ac->br, sizeof(nmt_branch) * ac->n_br);
    a->scores = B(scores, 0);
    a->stats = B(stats, 0);
    a->out = B(out, 0);
    a->out_ld = ow;
    nmt_test_assert_ok(e->dev, nmt_op_attention(&e->ops, a));
    ba.d_out = B(dout, 0);
    ba.d_out_ld = ow;
    ba.dq = B(dq, 0);
    ba.dq_ld = q_ld;
    ba.dk = B(dkv, ko);
    ba.dv = B(dkv, vo);
    ba.dk_ld = ba.dv_ld = kv_ld;
    ba.dkv_seq_stride = kv_stride;
    ba.probs = B(probs, 0);
    ba.dstats = B(dstats, 0);
    nmt_test_assert_ok(e->dev, nmt_op_attention_bwd(&e->t, &ba));
    float *gq = download(e, dq, nq);
    float *gkv = ac->cross ? download(e, dkv, nkv) : gq;

    attn_ctx c;
    memset(&c, 0, sizeof c);
    c.ac = ac;
    c.ra.n_seq = ac->n_seq;
    c.ra.lq = ac->lq;
    c.ra.q_pos0 = ac->q_pos0;
    c.ra.lk_max = ac->lk;
    c.ra.group = ac->group;
    c.ra.key_len = ac->key_len[0] >= 0 ? ac->key_len : NULL;
    c.ra.key_len_const = ac->lk;
    c.ra.causal = ac->causal;
    c.q_ld = q_ld;
    c.kv_ld = kv_ld;
    c.kv_stride = kv_stride;
    c.R = R;
    double *dQ = widen(Q, nq), *dKV = ac->cross ? widen(KV, nkv) : dQ;
    c.q = dQ;
    c.k = dKV + ko;
    c.v = dKV + vo;

    char what[96];
    if (ac->cross) {
        /* every q column inside the rows is written; the padding column is not */
        for (uint32_t i = 0; i < rows_q; i++) {
            assert_true(isnan(gq[(size_t)i * q_ld + W]));
            gq[(size_t)i * q_ld + W] = 0.0f;
        }
        for (size_t i = 0; i < nkv; i++)
            if (i % kv_ld >= 2 * W) {
                assert_true(isnan(gkv[i]));
                gkv[i] = 0.0f;
            }
        snprintf(what, sizeof what, "%s dq", ac->name);
        fd_check(what, attn_loss, &c, dQ, nq, gq, NULL);
        snprintf(what, sizeof what, "%s dk/dv", ac->name);
        fd_check(what, attn_loss, &c, dKV, nkv, gkv, NULL);
    } else {
        snprintf(what, sizeof what, "%s dqkv", ac->name);
        fd_check(what, attn_loss, &c, dQ, nq, gq, NULL);
    }
    free(dQ);
    if (ac->cross) {
        free(dKV);
        free(KV);
        free(gkv);
        nmt_test_release(kv);
        nmt_test_release(dkv);
    }
    free(Q);
    free(R);
    free(gq);
    cl_mem ms[] = {q, out, dout, scores, stats, probs, dstats, dq, kl};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ms); i++) nmt_test_release(ms[i]);
}

#define BR_G {NMT_BRANCH_GLOBAL, 0}
#define BR_FW {NMT_BRANCH_FW, 0}
#define BR_BW {NMT_BRANCH_BW, 0}
#define BR_L(k) {NMT_BRANCH_LOCAL, k}

static const attn_case attn_cases[] = {
    {"global", 2, 5, 5, 1, 2, 3, 0, 0, 0, {-1}, 1, {BR_G}},
    {"fw", 2, 5, 5, 1, 2, 4, 0, 0, 0, {-1}, 1, {BR_FW}},
    {"bw", 2, 5, 5, 1, 1, 5, 0, 0, 0, {-1}, 1, {BR_BW}},
    {"local1", 2, 6, 6, 1, 2, 3, 0, 0, 0, {-1}, 1, {BR_L(1)}},
    {"enc all padded", 3, 6, 6, 1, 2, 3, 0, 0, 0, {6, 3, 0}, 4, {BR_G, BR_FW, BR_BW, BR_L(2)}},
    {"dec causal", 2, 6, 6, 1, 2, 5, 0, 1, 0, {-1}, 2, {BR_G, BR_L(2)}},
    {"dec causal padded", 2, 5, 5, 1, 3, 2, 0, 1, 0, {5, 2}, 3, {BR_G, BR_FW, BR_L(1)}},
    {"cross grouped", 4, 3, 6, 2, 2, 5, 0, 0, 1, {6, 4}, 1, {BR_G}},
    {"cross offset causal", 2, 3, 6, 1, 2, 4, 2, 1, 1, {-1}, 2, {BR_G, BR_L(1)}},
    /* d_head a multiple of 16: the float16 paths of attn_bwd_dq / _dkv */
    {"enc padded dh16", 3, 5, 5, 1, 2, 16, 0, 0, 0, {5, 3, 0}, 2, {BR_G, BR_L(1)}},
    {"cross grouped causal dh32", 4, 3, 6, 2, 1, 32, 2, 1, 1, {6, 4}, 2, {BR_G, BR_FW}},
};

static void test_attention_bwd(void **state) {
    env *e = *state;
    for (size_t i = 0; i < NMT_ARRAY_LEN(attn_cases); i++) check_attention(e, &attn_cases[i], 60 + i);
}

/* ---- loss ------------------------------------------------------------------ */

typedef struct xent_ctx {
    uint32_t rows, V, ld;
    double *x;
    const int32_t *tgt;
    int32_t ignore;
    double eps, gs;
} xent_ctx;

/* loss of one row (0 if ignored); *nll receives -lp_t */
static double xent_row(const xent_ctx *c, uint32_t i, double *nll) {
    const int32_t t = c->tgt[i];
    *nll = 0;
    if (t == c->ignore || t < 0 || (uint32_t)t >= c->V) return 0.0;
    const double *x = c->x + (size_t)i * c->ld;
    double mx = -INFINITY, s = 0;
    for (uint32_t j = 0; j < c->V; j++) mx = x[j] > mx ? x[j] : mx;
    for (uint32_t j = 0; j < c->V; j++) s += exp(x[j] - mx);
    const double lse = mx + log(s);
    double L = 0;
    for (uint32_t j = 0; j < c->V; j++) {
        const double q = c->V == 1 ? 1.0 : (int32_t)j == t ? 1.0 - c->eps : c->eps / (c->V - 1);
        L -= q * (x[j] - lse);
    }
    *nll = -(x[t] - lse);
    return L;
}

static double xent_loss(void *p, int *skip) {
    (void)skip;
    xent_ctx *c = p;
    double L = 0, nll;
    for (uint32_t i = 0; i < c->rows; i++) L += c->gs * xent_row(c, i, &nll);
    return L;
}

static void check_xent(env *e, uint32_t rows, uint32_t V, float eps, int in_place, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t ld = V + 3;
    const size_t n = (size_t)rows * ld;
    float *X = nmt_test_random_f32(&r, n, -4, 4);
    int32_t *T = nmt_test_random_i32(&r, rows, 0, (int32_t)V);
    const int32_t ignore = V > 2 ? 2 : -7;
    T[rows / 2] = ignore;                 /* padding row */
    if (rows > 3) T[rows - 1] = -1;       /* out of range: ignored too */
    if (rows > 4) T[1] = (int32_t)V - 1;  /* last class */
    const float gs = 0.37f;
    cl_mem x = nmt_test_upload_f32(e->dev, X, n), t = nmt_test_upload_i32(e->dev, T, rows);
    cl_mem loss = nmt_test_buffer_f32_fill(e->dev, rows, NAN), nll = nmt_test_buffer_f32_fill(e->dev, rows, NAN);
    cl_mem dx = in_place ? x : nmt_test_buffer_f32_fill(e->dev, n, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_xent(&e->t, B(x, 0), rows, V, ld, B(t, 0), ignore, eps, gs, B(loss, 0),
                                           B(nll, 0), B(dx, 0), ld));
    float *gl = download(e, loss, rows), *gn = download(e, nll, rows), *gdx = download(e, dx, n);

    xent_ctx c = {rows, V, ld, widen(X, n), T, ignore, eps, gs};
    float *wl = nmt_test_alloc_f32(rows), *wn = nmt_test_alloc_f32(rows);
    for (uint32_t i = 0; i < rows; i++) {
        double nl;
        wl[i] = (float)xent_row(&c, i, &nl);
        wn[i] = (float)nl;
    }
    nmt_test_assert_close(gl, wl, rows, EXACT_TOL);
    nmt_test_assert_close(gn, wn, rows, EXACT_TOL);
    if (eps == 0.0f) nmt_test_assert_close(gl, gn, rows, EXACT_TOL);
    /* padding columns: untouched (in place: still the logits) */
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t j = V; j < ld; j++) {
            const float g = gdx[(size_t)i * ld + j], w = X[(size_t)i * ld + j];
            assert_true(in_place ? g == w : isnan(g));
            gdx[(size_t)i * ld + j] = 0.0f;
        }
    for (uint32_t j = 0; j < V; j++) assert_true(gdx[(size_t)(rows / 2) * ld + j] == 0.0f);
    /* the analytic gradient grad_scale * (softmax - q), exactly */
    float *wdx = nmt_test_alloc_f32(n);
    for (uint32_t i = 0; i < rows; i++) {
        const int32_t tt = T[i];
        if (tt == ignore || tt < 0 || (uint32_t)tt >= V) continue;
        double nl, mx = -INFINITY, s = 0;
        (void)xent_row(&c, i, &nl);
        const double *xr = c.x + (size_t)i * ld;
        for (uint32_t j = 0; j < V; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (uint32_t j = 0; j < V; j++) s += exp(xr[j] - mx);
        for (uint32_t j = 0; j < V; j++) {
            const double q = V == 1 ? 1.0 : (int32_t)j == tt ? 1.0 - eps : (double)eps / (V - 1);
            wdx[(size_t)i * ld + j] = (float)(gs * (exp(xr[j] - mx) / s - q));
        }
    }
    nmt_test_assert_close(gdx, wdx, n, EXACT_TOL);
    free(wdx);
    fd_check(in_place ? "xent dlogits (in place)" : "xent dlogits", xent_loss, &c, c.x, n, gdx, NULL);
    free(c.x);
    free(X);
    free(T);
    free(gl);
    free(gn);
    free(gdx);
    free(wl);
    free(wn);
    nmt_test_release(x);
    nmt_test_release(t);
    nmt_test_release(loss);
    nmt_test_release(nll);
    if (!in_place) nmt_test_release(dx);
}

static void test_xent(void **state) {
    env *e = *state;
    check_xent(e, 7, 5, 0.1f, 0, 71);
    check_xent(e, 6, 37, 0.1f, 1, 72);
    check_xent(e, 5, 300, 0.1f, 0, 73);
    check_xent(e, 4, 11, 0.0f, 0, 74);
    check_xent(e, 3, 1, 0.1f, 0, 75);
    check_xent(e, 4, 64, 0.1f, 1, 76); /* whole float16 vectors only, in place */
}

/* ---- embedding ------------------------------------------------------------- */

static void test_embed_bwd(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(81);
    const uint32_t rows = 23, vocab = 7, d = 10, seq = 5;
    const float scale = 3.0f;
    int32_t *tok = nmt_test_random_i32(&r, rows, 0, (int32_t)vocab);
    tok[0] = tok[3] = tok[9] = 4;  /* repeated ids, certainly */
    for (int skip_pad = 0; skip_pad <= 1; skip_pad++) {
        const int32_t skip = skip_pad ? tok[5] : -1;
        uint32_t count[8], n_seg = 0;
        int32_t perm[23], seg[24], seg_tok[23];
        assert_int_equal(nmt_embed_bwd_plan(tok, rows, vocab, skip, count, perm, seg, seg_tok, &n_seg), NMT_OK);
        /* segments: increasing ids, rows ascending within a segment */
        for (uint32_t s = 0; s < n_seg; s++) {
            assert_true(s == 0 || seg_tok[s] > seg_tok[s - 1]);
            assert_true(seg_tok[s] != skip);
            for (int32_t i = seg[s]; i < seg[s + 1]; i++) {
                assert_int_equal(tok[perm[i]], seg_tok[s]);
                assert_true(i == seg[s] || perm[i] > perm[i - 1]);
            }
        }
        float *DY = nmt_test_random_f32(&r, (size_t)rows * d, -1, 1);
        float *E0 = nmt_test_random_f32(&r, (size_t)vocab * d, -1, 1);
        float *want = nmt_test_dup_f32(E0, (size_t)vocab * d);
        for (uint32_t i = 0; i < rows; i++)
            if (tok[i] != skip)
                for (uint32_t c = 0; c < d; c++) {
                    double acc = 0;  /* sum in row order, then scale, as the definition reads */
                    for (uint32_t k = 0; k < rows; k++)
                        if (tok[k] == tok[i]) acc += DY[(size_t)k * d + c];
                    want[(size_t)tok[i] * d + c] = (float)(E0[(size_t)tok[i] * d + c] + scale * acc);
                }
        cl_mem dy = nmt_test_upload_f32(e->dev, DY, (size_t)rows * d);
        cl_mem de = nmt_test_upload_f32(e->dev, E0, (size_t)vocab * d);
        cl_mem p = nmt_test_upload_i32(e->dev, perm, rows), sg = nmt_test_upload_i32(e->dev, seg, n_seg + 1),
               st = nmt_test_upload_i32(e->dev, seg_tok, n_seg);
        nmt_test_assert_ok(e->dev,
                           nmt_op_embed_bwd(&e->t, B(dy, 0), d, B(p, 0), B(sg, 0), B(st, 0), n_seg, scale, B(de, 0)));
        float *got = download(e, de, (size_t)vocab * d);
        nmt_test_assert_close(got, want, (size_t)vocab * d, EXACT_TOL);

        if (!skip_pad) {
            /* finite differences of the forward embed (linear in E): L =
             * sum_r (E[tok[r]] * scale + P) . dy[r] */
            float *g = nmt_test_alloc_f32((size_t)vocab * d), *fd = nmt_test_alloc_f32((size_t)vocab * d);
            float *Ep = nmt_test_dup_f32(E0, (size_t)vocab * d);
            float *o1 = nmt_test_alloc_f32((size_t)rows * d), *o2 = nmt_test_alloc_f32((size_t)rows * d);
            const float h = 0.25f;  /* exact in float: the forward is linear */
            for (size_t k = 0; k < (size_t)vocab * d; k++) {
                g[k] = got[k] - E0[k];
                Ep[k] = E0[k] + h;
                ref_embed(tok, rows, seq, 0, Ep, d, scale, o1);
                Ep[k] = E0[k] - h;
                ref_embed(tok, rows, seq, 0, Ep, d, scale, o2);
                Ep[k] = E0[k];
                double l1 = 0, l2 = 0;
                for (size_t i = 0; i < (size_t)rows * d; i++) {
                    l1 += (double)o1[i] * DY[i];
                    l2 += (double)o2[i] * DY[i];
                }
                fd[k] = (float)((l1 - l2) / (2.0 * h));
            }
            nmt_test_assert_close(g, fd, (size_t)vocab * d, 1e-4);
            free(g);
            free(fd);
            free(Ep);
            free(o1);
            free(o2);
        }
        free(DY);
        free(E0);
        free(want);
        free(got);
        cl_mem ms[] = {dy, de, p, sg, st};
        for (size_t i = 0; i < NMT_ARRAY_LEN(ms); i++) nmt_test_release(ms[i]);
    }
    /* bad ids are refused before anything is written */
    uint32_t count[8], n_seg = 99;
    int32_t perm[23], seg[24], seg_tok[23];
    tok[7] = (int32_t)vocab;
    assert_int_equal(nmt_embed_bwd_plan(tok, rows, vocab, -1, count, perm, seg, seg_tok, &n_seg),
                     NMT_ERR_TOKEN_OUT_OF_RANGE);
    tok[7] = -3;
    assert_int_equal(nmt_embed_bwd_plan(tok, rows, vocab, -1, count, perm, seg, seg_tok, &n_seg),
                     NMT_ERR_TOKEN_OUT_OF_RANGE);
    free(tok);
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

/* ---- argument validation --------------------------------------------------- */

static void test_validation(void **state) {
    env *e = *state;
    nmt_train_ops *t = &e->t;
    cl_mem m = nmt_test_buffer_f32_fill(e->dev, 64, 0.0f);
    const nmt_buf b = B(m, 0);
    assert_int_equal(nmt_op_gemm_tn(t, 2, 2, 2, 1.0f, b, 1, b, 2, 0.0f, b, 2), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm_tn(t, 2, 2, 2, 1.0f, b, 2, b, 2, 0.5f, b, 2), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm_tn(t, 2, 2, 2, 1.0f, NONE, 2, b, 2, 0.0f, b, 2), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm_tn(t, 0, 2, 2, 1.0f, NONE, 2, b, 2, 0.0f, b, 2), NMT_OK);
    assert_int_equal(nmt_op_col_sum(t, 2, 3, 1.0f, b, 2, 0.0f, b), NMT_ERR_INVALID_ARGUMENT);
    /* layer norm: dx overlapping dy or x */
    assert_int_equal(nmt_op_layernorm_bwd(t, B(m, 0), NONE, B(m, 16), B(m, 20), 0, 2, 8, B(m, 48), 1e-5f, NONE,
                                          NONE, 0, B(m, 60)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_layernorm_bwd(t, B(m, 0), NONE, B(m, 16), B(m, 32), 0, 2, 8, B(m, 48), 1e-5f, B(m, 56),
                                          NONE, 0, B(m, 60)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_xent(t, b, 2, 4, 4, b, -1, 1.0f, 1.0f, b, NONE, NONE, 0), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_xent(t, b, 2, 4, 4, b, -1, 0.1f, 1.0f, b, NONE, B(m, 2), 4), NMT_ERR_INVALID_ARGUMENT);
    nmt_adam_params ap = nmt_adam_defaults();
    ap.step = 0;
    assert_int_equal(nmt_op_adam(t, b, b, b, b, 4, &ap), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_adam(t, b, b, b, b, 4, NULL), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_reduce_sum(t, b, 4, 1, NONE, b), NMT_ERR_INVALID_ARGUMENT);
    nmt_attn_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    ba.fwd.group = 1;
    ba.fwd.n_branches = 1;
    ba.fwd.n_seq = ba.fwd.lq = ba.fwd.n_heads = ba.fwd.d_head = 1;
    assert_int_equal(nmt_op_attention_bwd(t, &ba), NMT_ERR_INVALID_ARGUMENT);
    ba.fwd.branches[0].kind = (nmt_branch_kind)9;
    assert_int_equal(nmt_op_attention_bwd(t, &ba), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_fill(NULL, b, 4, 0.0f), NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_gemm_tn),
        cmocka_unit_test(test_col_sum),
        cmocka_unit_test(test_linear_bwd),
        cmocka_unit_test(test_relu_bwd_exact),
        cmocka_unit_test(test_layernorm_bwd),
        cmocka_unit_test(test_gate_bwd),
        cmocka_unit_test(test_attention_bwd),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_embed_bwd),
        cmocka_unit_test(test_philox_known_answer),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_reduce_and_clip),
        cmocka_unit_test(test_fill_axpy),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
