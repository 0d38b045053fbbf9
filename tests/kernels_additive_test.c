/* SPDX-License-Identifier: MIT */
/* kernels_additive_test.c — additive (Bahdanau) attention (BA-NMT, issue
 * 17): the forward nmt_op_additive_attn (runtime/ops/ops_additive.c,
 * cl/additive.cl) against the naive double reference ref_additive_attn,
 * and its backward nmt_op_additive_bwd (train/ops/ops_train_additive.c,
 * cl/additive_bwd.cl) against central finite differences of that
 * reference.  Rows of unequal lengths (0, 1, full, past s_cap: clamped),
 * with and without the extra terms E1 / E2, operands at offsets with padded
 * strides, beams sharing a sentence (group 2), and positions and attention
 * columns more than one work-group wide (the local size lowered). */
#include "ops_common.h"
#include "ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF 3u /* every operand starts OFF elements into its buffer */
#define PAD 2u /* and its rows are PAD elements wider than the data */

/* One problem: dense inputs in double (the reference's; drawn as floats,
 * so the device sees the same values). */
typedef struct prob {
    uint32_t n_rows, s_cap, a_dim, d_h, group;
    int has_e1, has_e2;
    const int32_t *len;
    double *q, *k, *e1, *e2, *v, *h;
} prob;

static uint32_t n_sent(const prob *p) { return (p->n_rows + p->group - 1) / p->group; }

static double *rand_d(nmt_test_rng *r, size_t n, float lo, float hi) {
    double *x = malloc(sizeof(double) * (n ? n : 1));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = nmt_test_rng_uniform(r, lo, hi);
    return x;
}

static void prob_make(prob *p, uint64_t seed) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const size_t ks = (size_t)n_sent(p) * p->s_cap, rs = (size_t)p->n_rows * p->s_cap;
    p->q = rand_d(&r, (size_t)p->n_rows * p->a_dim, -1, 1);
    p->k = rand_d(&r, ks * p->a_dim, -1, 1);
    p->e1 = p->has_e1 ? rand_d(&r, rs * p->a_dim, -0.5f, 0.5f) : NULL;
    p->e2 = p->has_e2 ? rand_d(&r, rs * p->a_dim, -0.5f, 0.5f) : NULL;
    p->v = rand_d(&r, p->a_dim, -1, 1);
    p->h = rand_d(&r, ks * p->d_h, -1, 1);
}

static void prob_free(prob *p) {
    free(p->q);
    free(p->k);
    free(p->e1);
    free(p->e2);
    free(p->v);
    free(p->h);
}

/* Host image of a strided operand: NaN, then the dense rows x cols array x
 * at OFF with stride cols + PAD (x NULL: NaN only). */
static float *strided(const double *x, size_t rows, uint32_t cols, size_t *total) {
    *total = OFF + rows * (cols + PAD);
    float *f = nan_f32(*total);
    if (x)
        for (size_t i = 0; i < rows; i++)
            for (uint32_t c = 0; c < cols; c++) f[OFF + i * (cols + PAD) + c] = (float)x[i * cols + c];
    return f;
}

static cl_mem up(env *e, const double *x, size_t rows, uint32_t cols) {
    size_t n;
    float *f = strided(x, rows, cols, &n);
    cl_mem m = nmt_test_upload_f32(e->dev, f, n);
    free(f);
    return m;
}

/* Dense float copy of the rows x cols operand at OFF / stride cols + PAD. */
static float *unstride(const float *f, size_t rows, uint32_t cols) {
    float *x = nmt_test_alloc_f32(rows * cols > 0 ? rows * cols : 1);
    for (size_t i = 0; i < rows; i++) memcpy(x + i * cols, f + OFF + i * (cols + PAD), sizeof(float) * cols);
    return x;
}

/* The forward's device buffers and arguments. */
typedef struct dev_prob {
    cl_mem q, k, e1, e2, v, h, len, alpha, out;
    nmt_additive_args a;
} dev_prob;

static void dev_up(env *e, const prob *p, dev_prob *d) {
    memset(d, 0, sizeof *d);
    const size_t ks = (size_t)n_sent(p) * p->s_cap, rs = (size_t)p->n_rows * p->s_cap;
    d->q = up(e, p->q, p->n_rows, p->a_dim);
    d->k = up(e, p->k, ks, p->a_dim);
    if (p->has_e1) d->e1 = up(e, p->e1, rs, p->a_dim);
    if (p->has_e2) d->e2 = up(e, p->e2, rs, p->a_dim);
    d->v = up(e, p->v, 1, p->a_dim);
    d->h = up(e, p->h, ks, p->d_h);
    int32_t *len = calloc(OFF + n_sent(p), sizeof(int32_t));
    assert_non_null(len);
    memcpy(len + OFF, p->len, sizeof(int32_t) * n_sent(p));
    d->len = nmt_test_upload_i32(e->dev, len, OFF + n_sent(p));
    free(len);
    d->alpha = nmt_test_buffer_f32_fill(e->dev, OFF + rs, NAN);
    d->out = up(e, NULL, p->n_rows, p->d_h);
    nmt_additive_args *a = &d->a;
    a->n_rows = p->n_rows, a->s_cap = p->s_cap, a->a_dim = p->a_dim, a->d_h = p->d_h, a->group = p->group;
    a->q = B(d->q, OFF), a->q_ld = p->a_dim + PAD;
    a->k = B(d->k, OFF), a->k_ld = p->a_dim + PAD;
    a->e1 = p->has_e1 ? B(d->e1, OFF) : NONE, a->e1_ld = p->a_dim + PAD;
    a->e2 = p->has_e2 ? B(d->e2, OFF) : NONE, a->e2_ld = p->a_dim + PAD;
    a->v = B(d->v, OFF);
    a->h = B(d->h, OFF), a->h_ld = p->d_h + PAD;
    a->len = B(d->len, OFF);
    a->alpha = B(d->alpha, OFF);
    a->out = B(d->out, OFF), a->out_ld = p->d_h + PAD;
}

static void dev_free(dev_prob *d) {
    cl_mem *ms[] = {&d->q, &d->k, &d->e1, &d->e2, &d->v, &d->h, &d->len, &d->alpha, &d->out};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) nmt_test_release(*ms[i]);
}

static void ref_of(const prob *p, double *alpha, double *out) {
    const ref_additive_args r = {p->n_rows, p->s_cap, p->a_dim, p->d_h, p->group, p->q, p->k,
                                 p->e1,     p->e2,    p->v,     p->h,   p->len,   alpha, out};
    ref_additive_attn(&r);
}

/* ---- forward ------------------------------------------------------------- */

/* The forward of p at local size wg (0: the op layer's) against the
 * reference: alpha over whole rows (zeros at masked positions), the
 * context inside its block, nothing outside either written. */
static void check_forward(env *e, prob *p, size_t wg, const char *what) {
    const size_t rs = (size_t)p->n_rows * p->s_cap;
    double *al = malloc(sizeof(double) * rs), *o = malloc(sizeof(double) * p->n_rows * p->d_h);
    assert_true(al != NULL && o != NULL);
    ref_of(p, al, o);
    dev_prob d;
    dev_up(e, p, &d);
    const size_t wg0 = e->ops.additive_wg;
    if (wg) e->ops.additive_wg = wg;
    nmt_test_assert_ok(e->dev, nmt_op_additive_attn(&e->ops, &d.a));
    e->ops.additive_wg = wg0;

    float *got_al = download(e, d.alpha, OFF + rs), *want_al = nan_f32(OFF + rs);
    for (size_t i = 0; i < rs; i++) want_al[OFF + i] = (float)al[i];
    char name[96];
    snprintf(name, sizeof name, "%s alpha", what);
    check_block(got_al, want_al, OFF + rs, OFF, p->n_rows, p->s_cap, p->s_cap, TOL, name);
    for (uint32_t b = 0; b < p->n_rows; b++) /* masked positions: exactly 0 */
        for (uint32_t j = 0; j < p->s_cap; j++)
            if ((int32_t)j >= p->len[b / p->group]) assert_true(got_al[OFF + (size_t)b * p->s_cap + j] == 0.0f);
    size_t n_out;
    float *want_o = strided(o, p->n_rows, p->d_h, &n_out), *got_o = download(e, d.out, n_out);
    snprintf(name, sizeof name, "%s context", what);
    check_block(got_o, want_o, n_out, OFF, p->n_rows, p->d_h, p->d_h + PAD, TOL, name);
    if (getenv("NMT_TEST_VERBOSE")) {
        float *g = unstride(got_o, p->n_rows, p->d_h), *w = unstride(want_o, p->n_rows, p->d_h);
        fprintf(stderr, "  %-40s alpha error %.2e, context error %.2e\n", what,
                nmt_test_norm_error(got_al + OFF, want_al + OFF, rs),
                nmt_test_norm_error(g, w, (size_t)p->n_rows * p->d_h));
        free(g);
        free(w);
    }
    free(got_al);
    free(want_al);
    free(got_o);
    free(want_o);
    free(al);
    free(o);
    dev_free(&d);
}

static void test_forward(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_additive(&e->ops));
    assert_true(e->ops.additive_wg >= 1 && (e->ops.additive_wg & (e->ops.additive_wg - 1)) == 0);
    /* lengths 0, 1, full, past s_cap (clamped), and others */
    static const int32_t lens[6] = {0, 1, 70, 33, 100, 2};
    for (int terms = 0; terms < 3; terms++) {
        prob p = {6, 70, 80, 67, 1, terms >= 1, terms == 2, lens, 0, 0, 0, 0, 0, 0};
        prob_make(&p, 101 + (uint64_t)terms);
        char what[64];
        snprintf(what, sizeof what, "terms %d, local %zu", terms, e->ops.additive_wg);
        check_forward(e, &p, 0, what);
        snprintf(what, sizeof what, "terms %d, local 8", terms);
        check_forward(e, &p, 8, what); /* S and A span many work-groups' widths */
        prob_free(&p);
    }
    /* beams: rows 2m and 2m + 1 read sentence m */
    static const int32_t slens[3] = {5, 0, 1};
    prob p = {6, 9, 12, 10, 2, 1, 0, slens, 0, 0, 0, 0, 0, 0};
    prob_make(&p, 7);
    check_forward(e, &p, 0, "group 2");
    check_forward(e, &p, 2, "group 2, local 2");
    prob_free(&p);
}

static void test_invalid(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_additive(&e->ops));
    static const int32_t lens[2] = {3, 2};
    prob p = {2, 4, 3, 2, 1, 1, 0, lens, 0, 0, 0, 0, 0, 0};
    prob_make(&p, 3);
    dev_prob d;
    dev_up(e, &p, &d);
    nmt_additive_args a = d.a;
    a.k_ld = 2;
    assert_int_equal(nmt_op_additive_attn(&e->ops, &a), NMT_ERR_INVALID_ARGUMENT);
    a = d.a;
    a.e1_ld = 1;
    assert_int_equal(nmt_op_additive_attn(&e->ops, &a), NMT_ERR_INVALID_ARGUMENT);
    a = d.a;
    a.group = 0;
    assert_int_equal(nmt_op_additive_attn(&e->ops, &a), NMT_ERR_INVALID_ARGUMENT);
    a = d.a;
    a.out = B(d.alpha, OFF + 2); /* overlaps alpha */
    assert_int_equal(nmt_op_additive_attn(&e->ops, &a), NMT_ERR_INVALID_ARGUMENT);
    a = d.a;
    a.h = NONE;
    assert_int_equal(nmt_op_additive_attn(&e->ops, &a), NMT_ERR_INVALID_ARGUMENT);
    a = d.a;
    a.n_rows = 0;
    nmt_test_assert_ok(e->dev, nmt_op_additive_attn(&e->ops, &a));
    /* the backward trains without beams */
    a = d.a;
    a.group = 2;
    nmt_additive_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    ba.fwd = a;
    ba.dc = B(d.out, 0), ba.dc_ld = 2;
    ba.dq = ba.dk = ba.dv = ba.dh = ba.scratch = B(d.q, 0);
    assert_int_equal(nmt_op_additive_bwd(&e->t, &ba), NMT_ERR_INVALID_ARGUMENT);
    dev_free(&d);
    prob_free(&p);
}

/* ---- backward ------------------------------------------------------------ */

/* L = sum dc . out + sum dal . alpha of the reference (dal NULL: 0). */
typedef struct loss_ctx {
    prob *p;
    const double *dc, *dal;
    double *alpha, *out;
} loss_ctx;

static double loss(void *vctx, int *skip) {
    loss_ctx *c = vctx;
    const prob *p = c->p;
    (void)skip;
    ref_of(p, c->alpha, c->out);
    double l = 0.0;
    for (size_t i = 0; i < (size_t)p->n_rows * p->d_h; i++) l += c->dc[i] * c->out[i];
    if (c->dal)
        for (size_t i = 0; i < (size_t)p->n_rows * p->s_cap; i++) l += c->dal[i] * c->alpha[i];
    return l;
}

/* Gradient of a strided operand: uploaded with random base values, read
 * back dense after the backward. */
typedef struct grad_buf {
    cl_mem m;
    size_t rows, total;
    uint32_t cols;
    float *base, *got;
} grad_buf;

static void grad_up(env *e, nmt_test_rng *r, grad_buf *g, size_t rows, uint32_t cols) {
    g->rows = rows, g->cols = cols;
    double *b = rand_d(r, rows * cols, -1, 1);
    float *f = strided(b, rows, cols, &g->total);
    g->base = unstride(f, rows, cols);
    g->m = nmt_test_upload_f32(e->dev, f, g->total);
    free(f);
    free(b);
    g->got = NULL;
}

static void grad_down(env *e, grad_buf *g) {
    float *f = download(e, g->m, g->total);
    g->got = unstride(f, g->rows, g->cols);
    /* outside the block nothing changed */
    size_t n;
    float *nanimg = strided(NULL, g->rows, g->cols, &n);
    for (size_t i = 0; i < n; i++) {
        const size_t rel = i < OFF ? 0 : i - OFF;
        if (i >= OFF && rel % (g->cols + PAD) < g->cols) continue;
        assert_memory_equal(&f[i], &nanimg[i], sizeof(float));
    }
    free(nanimg);
    free(f);
}

static void grad_free(grad_buf *g) {
    nmt_test_release(g->m);
    free(g->base);
    free(g->got);
}

/* Backward of p (E1 / E2 as p says, dalpha when with_dal, dq accumulated
 * when dq_acc) at training reduce size wg (0: the ops'), every input's
 * gradient against finite differences. */
static void check_backward(env *e, prob *p, int with_dal, int dq_acc, size_t wg, const char *what) {
    nmt_test_rng r = nmt_test_rng_make(900 + (uint64_t)with_dal * 2 + (uint64_t)dq_acc);
    const size_t rs = (size_t)p->n_rows * p->s_cap;
    dev_prob d;
    dev_up(e, p, &d);
    nmt_test_assert_ok(e->dev, nmt_op_additive_attn(&e->ops, &d.a));
    double *dc = rand_d(&r, (size_t)p->n_rows * p->d_h, -1, 1), *dal = with_dal ? rand_d(&r, rs, -1, 1) : NULL;
    cl_mem mdc = up(e, dc, p->n_rows, p->d_h), mdal = NULL;
    if (with_dal) {
        float *f = nan_f32(OFF + rs);
        for (size_t i = 0; i < rs; i++) f[OFF + i] = (float)dal[i];
        mdal = nmt_test_upload_f32(e->dev, f, OFF + rs);
        free(f);
    }
    grad_buf gq, gk, g1, g2, gv, gh;
    grad_up(e, &r, &gq, p->n_rows, p->a_dim);
    grad_up(e, &r, &gk, rs, p->a_dim);
    grad_up(e, &r, &g1, rs, p->a_dim);
    grad_up(e, &r, &g2, rs, p->a_dim);
    grad_up(e, &r, &gv, 1, p->a_dim);
    grad_up(e, &r, &gh, rs, p->d_h);
    cl_mem scr = nmt_test_buffer_f32_fill(e->dev, OFF + rs + (size_t)p->n_rows * p->a_dim, NAN);

    nmt_additive_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    ba.fwd = d.a;
    ba.dc = B(mdc, OFF), ba.dc_ld = p->d_h + PAD;
    ba.dalpha = with_dal ? B(mdal, OFF) : NONE;
    ba.dq = B(gq.m, OFF), ba.dq_ld = p->a_dim + PAD, ba.dq_accumulate = dq_acc;
    ba.dk = B(gk.m, OFF), ba.dk_ld = p->a_dim + PAD;
    ba.de1 = p->has_e1 ? B(g1.m, OFF) : NONE, ba.de1_ld = p->a_dim + PAD;
    ba.de2 = p->has_e2 ? B(g2.m, OFF) : NONE, ba.de2_ld = p->a_dim + PAD;
    ba.dv = B(gv.m, OFF);
    ba.dh = B(gh.m, OFF), ba.dh_ld = p->d_h + PAD;
    ba.scratch = B(scr, OFF);
    const size_t wg0 = e->t.reduce_wg;
    if (wg) e->t.reduce_wg = wg;
    nmt_test_assert_ok(e->dev, nmt_op_additive_bwd(&e->t, &ba));
    e->t.reduce_wg = wg0;
    grad_buf *gs[] = {&gq, &gk, &g1, &g2, &gv, &gh};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) grad_down(e, gs[i]);

    double *al = malloc(sizeof(double) * rs), *o = malloc(sizeof(double) * p->n_rows * p->d_h);
    assert_true(al != NULL && o != NULL);
    loss_ctx c = {p, dc, dal, al, o};
    char name[96];
    if (getenv("NMT_TEST_VERBOSE")) fprintf(stderr, " %s\n", what);
    snprintf(name, sizeof name, "%s dq", what);
    fd_check(name, loss, &c, p->q, (size_t)p->n_rows * p->a_dim, gq.got, dq_acc ? gq.base : NULL);
    snprintf(name, sizeof name, "%s dK", what);
    fd_check(name, loss, &c, p->k, rs * p->a_dim, gk.got, gk.base);
    if (p->has_e1) {
        snprintf(name, sizeof name, "%s dE1", what);
        fd_check(name, loss, &c, p->e1, rs * p->a_dim, g1.got, g1.base);
    } else {
        assert_memory_equal(g1.got, g1.base, sizeof(float) * rs * p->a_dim);
    }
    if (p->has_e2) {
        snprintf(name, sizeof name, "%s dE2", what);
        fd_check(name, loss, &c, p->e2, rs * p->a_dim, g2.got, g2.base);
    } else {
        assert_memory_equal(g2.got, g2.base, sizeof(float) * rs * p->a_dim);
    }
    snprintf(name, sizeof name, "%s dv", what);
    fd_check(name, loss, &c, p->v, p->a_dim, gv.got, gv.base);
    snprintf(name, sizeof name, "%s dH", what);
    fd_check(name, loss, &c, p->h, rs * p->d_h, gh.got, gh.base);

    free(al);
    free(o);
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) grad_free(gs[i]);
    nmt_test_release(scr);
    nmt_test_release(mdc);
    nmt_test_release(mdal);
    free(dc);
    free(dal);
    dev_free(&d);
}

static void test_backward(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_additive(&e->ops));
    static const int32_t lens[5] = {0, 1, 7, 4, 9}; /* 9: clamped to s_cap */
    for (int full = 0; full < 2; full++) {
        prob p = {5, 7, 6, 5, 1, full, full, lens, 0, 0, 0, 0, 0, 0};
        prob_make(&p, 55 + (uint64_t)full);
        check_backward(e, &p, full, full, 0, full ? "E1 E2 dalpha, dq +=" : "plain");
        check_backward(e, &p, full, !full, 2, full ? "E1 E2 dalpha, local 2" : "plain, dq +=, local 2");
        prob_free(&p);
    }
    static const int32_t lens1[3] = {3, 6, 2};
    prob p = {3, 6, 4, 3, 1, 1, 0, lens1, 0, 0, 0, 0, 0, 0};
    prob_make(&p, 77);
    check_backward(e, &p, 1, 0, 0, "E1 only, dalpha");
    prob_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_backward),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
