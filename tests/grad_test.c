/* SPDX-License-Identifier: MIT */
/* grad_test.c — the backward ops of train/ops/ops_train.h for the layers
 * (linear + ReLU, layer norm, gate, cross-entropy loss, embedding) against
 * central finite differences of the corresponding forward, evaluated in
 * double on the host; the training kernels' builds; argument validation of
 * every training op.
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
 * must be prefill + gradient).
 *
 * Attention backward is in grad_attn_test.c; the ops checked against exact
 * references (TN GEMM, column sums, dropout, Adam, reductions) are in
 * grad_exact_test.c; the fixture, fd_check and helpers are in ops_common.c. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

/* ---- init and kernel builds ---------------------------------------------- */

static void test_init(void **state) {
    env *e = *state;
    const nmt_train_ops *t = &e->t;
    const cl_kernel ks[] = {t->k_gemm_tn, t->k_col_sum, t->k_layernorm_bwd, t->k_layernorm_bwd_params,
                            t->k_embed_bwd, t->k_relu_bwd, t->k_act_bwd, t->k_gate_bwd, t->k_dropout,
                            t->k_attn_bwd_scores, t->k_attn_bwd_probs, t->k_attn_bwd_ds, t->k_attn_bwd_dq,
                            t->k_attn_bwd_dkv, t->k_xent, t->k_adam, t->k_reduce_partial, t->k_reduce_final,
                            t->k_scale, t->k_fill, t->k_axpy};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ks); i++) assert_non_null(ks[i]);
    assert_true(t->reduce_wg >= 1 && (t->reduce_wg & (t->reduce_wg - 1)) == 0);
    assert_true(t->wg_max >= 1);
    assert_int_equal(nmt_train_ops_init(NULL, e->dev), NMT_ERR_INVALID_ARGUMENT);

    /* the training sources compile warning-free with other knob values too */
    static const struct { const char *src, *opts; } builds[] = {
        {"gemm_bwd", ""}, {"gemm_bwd", "-DGEMMT_TM=3 -DGEMMT_TN=5"},
        {"gemm_bwd", "-DGEMMT_TM=1 -DGEMMT_TN=1"}, {"norm_bwd", "-DREDUCE_WG=16"},
        {"elementwise_bwd", ""}, {"attention_bwd", ""}, {"loss", "-DREDUCE_WG=16"},
        {"optim", "-DREDUCE_WG=16"}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(builds); i++) nmt_test_build_clean(e->dev, builds[i].src, builds[i].opts);
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

/* act_bwd (GELU, swish) against central differences of the forward in
 * double, h = 1e-4. */
static void test_act_bwd_fd(void **state) {
    env *e = *state;
    nmt_test_rng r = nmt_test_rng_make(37);
    const uint32_t n = 1029;
    float *X = nmt_test_random_f32(&r, n, -6, 6), *DY = nmt_test_random_f32(&r, n, -1, 1);
    cl_mem x = nmt_test_upload_f32(e->dev, X, n), dy = nmt_test_upload_f32(e->dev, DY, n);
    cl_mem dx = nmt_test_buffer_f32_fill(e->dev, n + 1, NAN);
    for (int kind = NMT_ACT_GELU; kind <= NMT_ACT_SWISH; kind++) {
        nmt_test_assert_ok(e->dev, nmt_op_act_bwd(&e->t, B(x, 0), B(dy, 0), B(dx, 1), n, kind));
        float *got = download(e, dx, n + 1);
        assert_true(isnan(got[0]));
        for (uint32_t i = 0; i < n; i++) {
            const double h = 1e-4, v = X[i];
            double f[2];
            for (int s = 0; s < 2; s++) {
                const double u = v + (s ? h : -h);
                f[s] = kind == NMT_ACT_GELU ? 0.5 * u * (1 + erf(u / sqrt(2.0))) : u / (1 + exp(-u));
            }
            const double want = DY[i] * (f[1] - f[0]) / (2 * h);
            if (fabs(got[1 + i] - want) > 1e-4 * (1 + fabs(want)))
                fail_msg("act %d x %g: dx %g, finite differences %g", kind, v, got[1 + i], want);
        }
        free(got);
    }
    assert_int_equal(nmt_op_act_bwd(&e->t, B(x, 0), B(dy, 0), B(dx, 0), n, NMT_ACT_RELU), NMT_ERR_INVALID_ARGUMENT);
    free(X);
    free(DY);
    nmt_test_release(x);
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
        cmocka_unit_test(test_linear_bwd),
        cmocka_unit_test(test_relu_bwd_exact),
        cmocka_unit_test(test_act_bwd_fd),
        cmocka_unit_test(test_layernorm_bwd),
        cmocka_unit_test(test_gate_bwd),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_embed_bwd),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
