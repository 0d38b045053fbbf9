/* SPDX-License-Identifier: MIT */
/* kernels_gru_test.c — the GRU (BA-NMT, issue 17): the cell op
 * nmt_op_gru_cell (cl/recurrent.cl) against ref_gru_cell of ref_ops.c as a
 * decoder step over masked rows, with a broadcast bias row and in place;
 * the layer nmt_layer_gru (runtime/ops/layers.c) in both directions against a
 * naive double GRU over sequences of 4, 0, 1 and 3 steps, with and without
 * an initial state and a recurrent bias; the cell's backward
 * nmt_op_gru_cell_bwd and the layer's nmt_layer_gru_bwd
 * (cl/recurrent_bwd.cl, train/) against central finite differences of the
 * double references, for every input and weight gradient; the history
 * GRUs' scaled input nmt_op_gru_scaled_input and its backward likewise.
 * Strides are padded and operands offset throughout. */
#include "ops_common.h"
#include "ref_ops.h"

#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H 4u
#define IN 5u
#define G (3 * H)
#define W (5 * H) /* nmt_gru_width */

/* got vs want (n values) within TOL; the measured error with NMT_TEST_VERBOSE=1. */
static void close_to(const float *got, const float *want, size_t n, const char *what) {
    if (getenv("NMT_TEST_VERBOSE"))
        fprintf(stderr, "  %-32s error %.2e over %zu values\n", what, nmt_test_norm_error(got, want, n), n);
    nmt_test_assert_close_impl(got, want, n, TOL, what, __FILE__, __LINE__);
}

/* With NMT_TEST_VERBOSE=1: the error of a rows x cols block (check_block checks it). */
static void print_block_error(const float *got, const float *want, size_t off, uint32_t rows, uint32_t cols,
                              uint32_t ld, const char *what) {
    if (!getenv("NMT_TEST_VERBOSE")) return;
    float *g = nmt_test_alloc_f32((size_t)rows * cols), *w = nmt_test_alloc_f32((size_t)rows * cols);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            g[(size_t)r * cols + c] = got[off + (size_t)r * ld + c];
            w[(size_t)r * cols + c] = want[off + (size_t)r * ld + c];
        }
    close_to(g, w, (size_t)rows * cols, what);
    free(g), free(w);
}

static float *copy_f32(const float *x, size_t n) {
    float *c = nmt_test_alloc_f32(n);
    memcpy(c, x, sizeof(float) * n);
    return c;
}

/* ---- the cell as a decoder step over masked rows -------------------------- */

#define R 5u         /* state rows */
#define OZ 3u        /* offsets and strides of the cell operands */
#define LDZ (W + 2)
#define OHG 1u
#define LDHG (G + 1)
#define OHP 2u
#define LDHP (H + 1)
#define OHS 1u
#define LDHS (H + 2)
#define OCO 1u
#define LDCO (H + 3)
#define LDDZ (4 * H + 1)
#define ZN (OZ + (size_t)R * LDZ)
#define HGN (OHG + (size_t)R * LDHG)
#define HPN (OHP + (size_t)R * LDHP)
#define HSN (OHS + (size_t)R * LDHS)
#define CON (OCO + (size_t)R * LDCO)
static const int32_t mask[R] = {1, 0, 1, 1, 0};

/* Cell configurations: 0 every operand and a mask; 1 one broadcast hg row
 * (ld 0), no h_prev, no mask, no out; 2 the state updated in place. */
typedef struct cell_case {
    int bcast, no_hp, no_mask, no_out, in_place;
} cell_case;
static const cell_case cell_cases[] = {{0, 0, 0, 0, 0}, {1, 1, 1, 1, 0}, {0, 0, 0, 0, 1}};

typedef struct cell_host {
    float *z, *hg, *hp; /* as uploaded */
} cell_host;

static void test_gru_cell_forward(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops)); /* idempotent */
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(cell_cases); ci++) {
        const cell_case *c = &cell_cases[ci];
        nmt_test_rng r = nmt_test_rng_make(170 + ci);
        float *z = host_block(&r, ZN, OZ, R, G, LDZ, -2, 2);
        float *hg = host_block(&r, HGN, OHG, c->bcast ? 1 : R, G, LDHG, -2, 2);
        float *hp = host_block(&r, HPN, OHP, R, H, LDHP, -1, 1);
        cl_mem dz = nmt_test_upload_f32(e->dev, z, ZN), dhg = nmt_test_upload_f32(e->dev, hg, HGN);
        cl_mem dhp = nmt_test_upload_f32(e->dev, hp, HPN), dmask = nmt_test_upload_i32(e->dev, mask, R);
        cl_mem dhs = nmt_test_buffer_f32_fill(e->dev, HSN, NAN), dout = nmt_test_buffer_f32_fill(e->dev, CON, NAN);
        const nmt_buf hs = c->in_place ? B(dhp, OHP) : B(dhs, OHS);
        const uint32_t ld_hs = c->in_place ? LDHP : LDHS;
        nmt_test_assert_ok(e->dev, nmt_op_gru_cell(&e->ops, B(dz, OZ), LDZ, B(dhg, OHG), c->bcast ? 0 : LDHG,
                                                   c->no_hp ? NONE : B(dhp, OHP), LDHP, hs, ld_hs,
                                                   c->no_out ? NONE : B(dout, OCO), LDCO,
                                                   c->no_mask ? NONE : B(dmask, 0), R, 1, 0, 0, H));
        float *gz = download(e, dz, ZN), *ghs = c->in_place ? download(e, dhp, HPN) : download(e, dhs, HSN);
        float *gout = download(e, dout, CON);

        float *wz = copy_f32(z, ZN), *whs = c->in_place ? copy_f32(hp, HPN) : nan_f32(HSN), *wout = nan_f32(CON);
        for (uint32_t b = 0; b < R; b++) {
            const int real = c->no_mask || mask[b];
            double xg[G], hgd[G], hpd[H], out[H], keep[W];
            for (uint32_t k = 0; k < G; k++) {
                xg[k] = z[OZ + (size_t)b * LDZ + k];
                hgd[k] = hg[OHG + (size_t)(c->bcast ? 0 : b) * LDHG + k];
            }
            for (uint32_t j = 0; j < H; j++) hpd[j] = c->no_hp ? 0.0 : hp[OHP + (size_t)b * LDHP + j];
            ref_gru_cell(xg, hgd, hpd, H, out, keep);
            for (uint32_t k = 0; k < W; k++) wz[OZ + (size_t)b * LDZ + k] = real ? (float)keep[k] : 0.0f;
            for (uint32_t j = 0; j < H; j++) {
                whs[(c->in_place ? OHP : OHS) + (size_t)b * ld_hs + j] = real ? (float)out[j] : (float)hpd[j];
                if (!c->no_out) wout[OCO + (size_t)b * LDCO + j] = real ? (float)out[j] : 0.0f;
            }
        }
        char what[3][40];
        snprintf(what[0], sizeof what[0], "gru cell kept z, case %zu", ci);
        snprintf(what[1], sizeof what[1], "gru cell state, case %zu", ci);
        snprintf(what[2], sizeof what[2], "gru cell out, case %zu", ci);
        check_block(gz, wz, ZN, OZ, R, W, LDZ, TOL, what[0]);
        check_block(ghs, whs, c->in_place ? HPN : HSN, c->in_place ? OHP : OHS, R, H, ld_hs, TOL, what[1]);
        print_block_error(gz, wz, OZ, R, W, LDZ, what[0]);
        print_block_error(ghs, whs, c->in_place ? OHP : OHS, R, H, ld_hs, what[1]);
        if (!c->no_out) check_block(gout, wout, CON, OCO, R, H, LDCO, TOL, what[2]);
        else
            for (size_t i = 0; i < CON; i++) assert_true(isnan(gout[i])); /* out NONE: nothing written */
        /* masked rows keep their state bit for bit and output exact zeros */
        for (uint32_t b = 0; b < R; b++)
            if (!c->no_mask && !mask[b])
                for (uint32_t j = 0; j < H; j++) {
                    const float want = c->no_hp ? 0.0f : hp[OHP + (size_t)b * LDHP + j];
                    assert_true(ghs[(c->in_place ? OHP : OHS) + (size_t)b * ld_hs + j] == want);
                    if (!c->no_out) assert_true(gout[OCO + (size_t)b * LDCO + j] == 0.0f);
                }
        if (ci == 0) {
            /* bad arguments */
            assert_int_equal(nmt_op_gru_cell(&e->ops, B(dz, OZ), LDZ, B(dhg, OHG), LDHG, B(dhp, OHP), LDHP, hs,
                                             ld_hs, NONE, 0, NONE, R, 1, 1, 0, H),
                             NMT_ERR_INVALID_ARGUMENT); /* t >= t_cap */
            assert_int_equal(nmt_op_gru_cell(&e->ops, B(dz, OZ), W - 1, B(dhg, OHG), LDHG, B(dhp, OHP), LDHP, hs,
                                             ld_hs, NONE, 0, NONE, R, 1, 0, 0, H),
                             NMT_ERR_INVALID_ARGUMENT); /* ld_z < 5h */
            assert_int_equal(nmt_op_gru_cell(&e->ops, B(dz, OZ), LDZ, B(dhg, OHG), G - 1, B(dhp, OHP), LDHP, hs,
                                             ld_hs, NONE, 0, NONE, R, 1, 0, 0, H),
                             NMT_ERR_INVALID_ARGUMENT); /* 0 < ld_hg < 3h */
            assert_int_equal(nmt_op_gru_cell(&e->ops, B(dz, OZ), LDZ, B(dhg, OHG), LDHG, B(dhp, OHP), LDHP, NONE,
                                             ld_hs, NONE, 0, NONE, R, 1, 0, 0, H),
                             NMT_ERR_INVALID_ARGUMENT); /* no state */
            assert_int_equal(nmt_op_gru_cell(&e->ops, B(dz, OZ), LDZ, B(dhg, OHG), LDHG, B(dhp, OHP), LDHP, hs,
                                             ld_hs, B(dout, OCO), H - 1, NONE, R, 1, 0, 0, H),
                             NMT_ERR_INVALID_ARGUMENT); /* ld_out < h */
        }
        cl_mem rel[] = {dz, dhg, dhp, dmask, dhs, dout};
        for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
        free(z), free(hg), free(hp), free(gz), free(ghs), free(gout), free(wz), free(whs), free(wout);
    }
}

/* The cell step's loss for the finite differences: sum over rows of
 * (wo + wh) . h' (real rows) or wh . h_prev (masked rows: h' = h_prev, out 0). */
typedef struct cell_ref {
    const double *xg, *hg, *hp; /* [R, 3h], [R, 3h], [R, h] */
    const double *wo, *wh;      /* [R, h] weights of out and of the new state */
} cell_ref;

static double cell_loss(void *ctx, int *skip) {
    const cell_ref *p = ctx;
    *skip = 0;
    double l = 0, out[H];
    for (uint32_t b = 0; b < R; b++) {
        ref_gru_cell(p->xg + (size_t)b * G, p->hg + (size_t)b * G, p->hp + (size_t)b * H, H, out, NULL);
        for (uint32_t j = 0; j < H; j++)
            l += mask[b] ? (p->wo[b * H + j] + p->wh[b * H + j]) * out[j] : p->wh[b * H + j] * p->hp[b * H + j];
    }
    return l;
}

/* Dense rows x cols of x (stride ld, offset off), as float. */
static float *dense_f(const float *x, size_t off, uint32_t rows, uint32_t cols, uint32_t ld) {
    float *d = nmt_test_alloc_f32((size_t)rows * cols);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) d[(size_t)r * cols + c] = x[off + (size_t)r * ld + c];
    return d;
}

static double *dense_d(const float *x, size_t off, uint32_t rows, uint32_t cols, uint32_t ld) {
    float *f = dense_f(x, off, rows, cols, ld);
    double *d = widen(f, (size_t)rows * cols);
    free(f);
    return d;
}

static void test_gru_cell_bwd(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_rng r = nmt_test_rng_make(175);
    float *z = host_block(&r, ZN, OZ, R, G, LDZ, -2, 2);
    float *hg = host_block(&r, HGN, OHG, R, G, LDHG, -2, 2);
    float *hp = host_block(&r, HPN, OHP, R, H, LDHP, -1, 1);
    float *wo = host_block(&r, CON, OCO, R, H, LDCO, -1, 1);
    float *wh = host_block(&r, (size_t)R * H, 0, R, H, H, -1, 1);
    cl_mem dz = nmt_test_upload_f32(e->dev, z, ZN), dhg = nmt_test_upload_f32(e->dev, hg, HGN);
    cl_mem dhp = nmt_test_upload_f32(e->dev, hp, HPN), dmask = nmt_test_upload_i32(e->dev, mask, R);
    cl_mem dhs = nmt_test_buffer_f32_fill(e->dev, HSN, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_gru_cell(&e->ops, B(dz, OZ), LDZ, B(dhg, OHG), LDHG, B(dhp, OHP), LDHP,
                                               B(dhs, OHS), LDHS, NONE, 0, B(dmask, 0), R, 1, 0, 0, H));
    cl_mem ddout = nmt_test_upload_f32(e->dev, wo, CON), ddh = nmt_test_upload_f32(e->dev, wh, (size_t)R * H);
    cl_mem ddz = nmt_test_buffer_f32_fill(e->dev, (size_t)R * LDDZ, NAN);
    cl_mem ddg = nmt_test_buffer_f32_fill(e->dev, (size_t)R * G, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_gru_cell_bwd(&e->t, B(dz, OZ), LDZ, B(ddout, OCO), LDCO, B(ddh, 0), B(ddz, 0),
                                                   LDDZ, B(ddg, 0), B(dmask, 0), R, 1, 0, 0, H));
    float *gdz = download(e, ddz, (size_t)R * LDDZ), *gdg = download(e, ddg, (size_t)R * G);
    float *gdh = download(e, ddh, (size_t)R * H);

    double *xgd = dense_d(z, OZ, R, G, LDZ), *hgd = dense_d(hg, OHG, R, G, LDHG), *hpd = dense_d(hp, OHP, R, H, LDHP);
    double *wod = dense_d(wo, OCO, R, H, LDCO), *whd = widen(wh, (size_t)R * H);
    cell_ref p = {xgd, hgd, hpd, wod, whd};
    float *gx = dense_f(gdz, 0, R, G, LDDZ);
    fd_check("gru cell d(x W_ih^T + b_ih)", cell_loss, &p, xgd, (size_t)R * G, gx, NULL);
    fd_check("gru cell d(h W_hh^T + b_hh)", cell_loss, &p, hgd, (size_t)R * G, gdg, NULL);
    fd_check("gru cell d h_prev (direct)", cell_loss, &p, hpd, (size_t)R * H, gdh, NULL);
    for (uint32_t b = 0; b < R; b++)
        for (uint32_t j = 0; j < H; j++) /* dz's hn column is dg's n part */
            assert_true(gdz[(size_t)b * LDDZ + 3 * H + j] == gdg[(size_t)b * G + 2 * H + j]);
    assert_int_equal(nmt_op_gru_cell_bwd(&e->t, B(dz, OZ), LDZ, NONE, 0, B(ddh, 0), B(ddz, 0), 4 * H - 1, B(ddg, 0),
                                         NONE, R, 1, 0, 0, H),
                     NMT_ERR_INVALID_ARGUMENT); /* ld_dz < 4h */
    assert_int_equal(nmt_op_gru_cell_bwd(&e->t, B(dz, OZ), LDZ, NONE, 0, B(ddh, 0), B(ddz, 0), LDDZ, NONE, NONE, R, 1,
                                         0, 0, H),
                     NMT_ERR_INVALID_ARGUMENT); /* no dg */
    cl_mem rel[] = {dz, dhg, dhp, dmask, dhs, ddout, ddh, ddz, ddg};
    for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
    free(z), free(hg), free(hp), free(wo), free(wh), free(gdz), free(gdg), free(gdh);
    free(xgd), free(hgd), free(hpd), free(wod), free(whd), free(gx);
}

/* ---- the layer over time ------------------------------------------------ */

#define N_SEQ 4u
#define T_CAP 4u
#define ROWS (N_SEQ * T_CAP)
#define OX 3u
#define LD_X 7u
#define OOUT 2u
#define LD_OUT (2 * H + 1) /* forward columns 0 .. h, reverse h .. 2h */
#define OH0 1u
#define LD_H0 (H + 2)
#define XN (OX + (size_t)ROWS * LD_X)
#define OUTN (OOUT + (size_t)ROWS * LD_OUT)
#define H0N (OH0 + (size_t)N_SEQ * LD_H0)
static const int32_t counts[N_SEQ] = {4, 0, 1, 3};

/* The layer's inputs in double (the FD checker perturbs them). */
typedef struct layer_ref {
    int reverse;
    const double *x;    /* [ROWS, IN] */
    const double *w_ih; /* [3h, IN] */
    const double *b_ih; /* [3h] */
    const double *w_hh; /* [3h, h] */
    const double *b_hh; /* [3h] or NULL */
    const double *h0;   /* [N_SEQ, h] or NULL */
    const double *wl;   /* [ROWS, h] loss weights of out */
} layer_ref;

/* out [ROWS, h] (zero past the counts), last [N_SEQ, h]: the naive GRU. */
static void ref_gru_layer(const layer_ref *p, double *out, double *last) {
    for (size_t i = 0; i < (size_t)ROWS * H; i++) out[i] = 0;
    for (uint32_t b = 0; b < N_SEQ; b++) {
        double h[H], xg[G], hg[G];
        for (uint32_t j = 0; j < H; j++) h[j] = p->h0 ? p->h0[b * H + j] : 0;
        for (uint32_t t = 0; t < (uint32_t)counts[b]; t++) {
            const size_t row = (size_t)b * T_CAP + (p->reverse ? (uint32_t)counts[b] - 1 - t : t);
            for (uint32_t k = 0; k < G; k++) {
                double a = p->b_ih[k], c = p->b_hh ? p->b_hh[k] : 0;
                for (uint32_t i = 0; i < IN; i++) a += p->w_ih[k * IN + i] * p->x[row * IN + i];
                for (uint32_t j = 0; j < H; j++) c += p->w_hh[k * H + j] * h[j];
                xg[k] = a;
                hg[k] = c;
            }
            ref_gru_cell(xg, hg, h, H, out + row * H, NULL);
            memcpy(h, out + row * H, sizeof h);
        }
        if (last) memcpy(last + (size_t)b * H, h, sizeof h);
    }
}

static double layer_loss(void *ctx, int *skip) {
    const layer_ref *p = ctx;
    *skip = 0;
    double out[ROWS * H], l = 0;
    ref_gru_layer(p, out, NULL);
    for (size_t i = 0; i < (size_t)ROWS * H; i++) l += p->wl[i] * out[i];
    return l;
}

/* Layer configurations: initial state, recurrent bias. */
typedef struct layer_case {
    int h0, b_hh;
} layer_case;
static const layer_case layer_cases[] = {{0, 1}, {1, 0}, {0, 0}, {1, 1}};

typedef struct layer_host {
    float *x, *wi, *bi, *wh, *bh, *h0;
} layer_host;

typedef struct layer_dev {
    cl_mem x, wi, bi, wh, bh, h0, cnt, z[2], hg, st[2], out;
} layer_dev;

static void make_layer(nmt_test_rng *r, layer_host *hst) {
    hst->x = host_block(r, XN, OX, ROWS, IN, LD_X, -2, 2);
    for (size_t i = 0; i < XN; i++)
        if (isnan(hst->x[i])) hst->x[i] = 0.5f; /* finite stride padding (the dx check reads it) */
    hst->wi = host_block(r, G * IN, 0, G, IN, IN, -1, 1);
    hst->bi = host_block(r, G, 0, 1, G, G, -1, 1);
    hst->wh = host_block(r, G * H, 0, G, H, H, -1, 1);
    hst->bh = host_block(r, G, 0, 1, G, G, -1, 1);
    hst->h0 = host_block(r, H0N, OH0, N_SEQ, H, LD_H0, -1, 1);
}

static void free_layer(layer_host *hst) {
    free(hst->x), free(hst->wi), free(hst->bi), free(hst->wh), free(hst->bh), free(hst->h0);
}

/* Both directions into one out (forward columns 0 .. h, reverse h .. 2h);
 * z[dir] and st[dir] kept per direction. */
static void run_layer(env *e, const layer_case *c, const layer_host *hst, layer_dev *d) {
    d->x = nmt_test_upload_f32(e->dev, hst->x, XN);
    d->wi = nmt_test_upload_f32(e->dev, hst->wi, G * IN);
    d->bi = nmt_test_upload_f32(e->dev, hst->bi, G);
    d->wh = nmt_test_upload_f32(e->dev, hst->wh, G * H);
    d->bh = nmt_test_upload_f32(e->dev, hst->bh, G);
    d->h0 = nmt_test_upload_f32(e->dev, hst->h0, H0N);
    d->cnt = nmt_test_upload_i32(e->dev, counts, N_SEQ);
    d->hg = nmt_test_buffer_f32_fill(e->dev, (size_t)N_SEQ * G, NAN);
    d->out = nmt_test_buffer_f32_fill(e->dev, OUTN, NAN);
    const nmt_lin w_ih = {.w = B(d->wi, 0), .b = B(d->bi, 0)};
    const nmt_lin w_hh = {.w = B(d->wh, 0), .b = c->b_hh ? B(d->bh, 0) : NONE};
    for (int dir = 0; dir < 2; dir++) {
        d->z[dir] = nmt_test_buffer_f32_fill(e->dev, (size_t)ROWS * W, NAN);
        d->st[dir] = nmt_test_buffer_f32_fill(e->dev, (size_t)N_SEQ * H, NAN);
        nmt_test_assert_ok(e->dev, nmt_layer_gru(&e->ops, B(d->x, OX), LD_X, N_SEQ, T_CAP, IN, H, dir, &w_ih, &w_hh,
                                                 B(d->cnt, 0), c->h0 ? B(d->h0, OH0) : NONE, LD_H0, B(d->z[dir], 0),
                                                 B(d->hg, 0), B(d->st[dir], 0), B(d->out, OOUT + dir * H), LD_OUT));
    }
}

static void release_layer(layer_dev *d) {
    cl_mem m[] = {d->x, d->wi, d->bi, d->wh, d->bh, d->h0, d->cnt, d->z[0], d->z[1], d->hg, d->st[0], d->st[1], d->out};
    for (size_t i = 0; i < NMT_ARRAY_LEN(m); i++) nmt_test_release(m[i]);
}

static void test_gru_layer_forward(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(layer_cases); ci++) {
        const layer_case *c = &layer_cases[ci];
        nmt_test_rng r = nmt_test_rng_make(180 + ci);
        layer_host hst;
        make_layer(&r, &hst);
        layer_dev d;
        run_layer(e, c, &hst, &d);
        float *got = download(e, d.out, OUTN), *want = nan_f32(OUTN);
        double *xd = dense_d(hst.x, OX, ROWS, IN, LD_X), *wid = widen(hst.wi, G * IN), *bid = widen(hst.bi, G);
        double *whd = widen(hst.wh, G * H), *bhd = widen(hst.bh, G), *h0d = dense_d(hst.h0, OH0, N_SEQ, H, LD_H0);
        for (int dir = 0; dir < 2; dir++) {
            layer_ref p = {dir, xd, wid, bid, whd, c->b_hh ? bhd : NULL, c->h0 ? h0d : NULL, NULL};
            double out[ROWS * H], last[N_SEQ * H];
            ref_gru_layer(&p, out, last);
            for (uint32_t i = 0; i < ROWS; i++)
                for (uint32_t j = 0; j < H; j++)
                    want[OOUT + (size_t)i * LD_OUT + dir * H + j] = (float)out[(size_t)i * H + j];
            float *st = download(e, d.st[dir], (size_t)N_SEQ * H), lastf[N_SEQ * H];
            for (size_t i = 0; i < (size_t)N_SEQ * H; i++) lastf[i] = (float)last[i];
            char what[48];
            snprintf(what, sizeof what, "gru last state, case %zu dir %d", ci, dir);
            close_to(st, lastf, (size_t)N_SEQ * H, what);
            for (uint32_t j = 0; j < H; j++) /* the empty sequence: h0 (or 0) exactly */
                assert_true(st[1 * H + j] == (c->h0 ? hst.h0[OH0 + LD_H0 + j] : 0.0f));
            free(st);
        }
        char what[32];
        snprintf(what, sizeof what, "gru out, case %zu", ci);
        check_block(got, want, OUTN, OOUT, ROWS, 2 * H, LD_OUT, TOL, what);
        print_block_error(got, want, OOUT, ROWS, 2 * H, LD_OUT, what);
        /* positions past a sequence are exact zeros in both directions */
        for (uint32_t b = 0; b < N_SEQ; b++)
            for (uint32_t t = (uint32_t)counts[b]; t < T_CAP; t++)
                for (uint32_t j = 0; j < 2 * H; j++)
                    assert_true(got[OOUT + ((size_t)b * T_CAP + t) * LD_OUT + j] == 0.0f);
        if (ci == 0) {
            const nmt_lin w_ih = {.w = B(d.wi, 0), .b = B(d.bi, 0)}, w_hh = {.w = B(d.wh, 0)};
            assert_int_equal(nmt_layer_gru(&e->ops, B(d.x, OX), LD_X, N_SEQ, T_CAP, IN, H, 0, &w_ih, &w_hh,
                                           B(d.cnt, 0), NONE, 0, B(d.z[0], 0), NONE, B(d.st[0], 0), B(d.out, OOUT),
                                           LD_OUT),
                             NMT_ERR_INVALID_ARGUMENT); /* no hg scratch */
            assert_int_equal(nmt_layer_gru(&e->ops, B(d.x, OX), LD_X, N_SEQ, T_CAP, IN, H, 0, &w_ih, &w_hh,
                                           B(d.cnt, 0), B(d.h0, OH0), H - 1, B(d.z[0], 0), B(d.hg, 0), B(d.st[0], 0),
                                           B(d.out, OOUT), LD_OUT),
                             NMT_ERR_INVALID_ARGUMENT); /* ld_h0 < h */
        }
        release_layer(&d);
        free_layer(&hst);
        free(got), free(want), free(xd), free(wid), free(bid), free(whd), free(bhd), free(h0d);
    }
}

static void test_gru_layer_bwd(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_nn(&e->ops));
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(layer_cases); ci++) {
        const layer_case *c = &layer_cases[ci];
        nmt_test_rng r = nmt_test_rng_make(190 + ci);
        layer_host hst;
        make_layer(&r, &hst);
        layer_dev d;
        run_layer(e, c, &hst, &d);
        float *wl = host_block(&r, OUTN, OOUT, ROWS, 2 * H, LD_OUT, -1, 1);
        double *xd = dense_d(hst.x, OX, ROWS, IN, LD_X), *wid = widen(hst.wi, G * IN), *bid = widen(hst.bi, G);
        double *whd = widen(hst.wh, G * H), *bhd = widen(hst.bh, G), *h0d = dense_d(hst.h0, OH0, N_SEQ, H, LD_H0);
        cl_mem ddout = nmt_test_upload_f32(e->dev, wl, OUTN);
        for (int dir = 0; dir < 2; dir++) {
            /* parameter gradients accumulate onto these */
            float *gi0 = host_block(&r, G * IN, 0, G, IN, IN, -1, 1), *gb0 = host_block(&r, G, 0, 1, G, G, -1, 1);
            float *gh0 = host_block(&r, G * H, 0, G, H, H, -1, 1), *ghb0 = host_block(&r, G, 0, 1, G, G, -1, 1);
            cl_mem ddz = nmt_test_buffer_f32_fill(e->dev, (size_t)ROWS * 4 * H, NAN);
            cl_mem ddg = nmt_test_buffer_f32_fill(e->dev, (size_t)N_SEQ * G, NAN);
            cl_mem ddh = nmt_test_buffer_f32_fill(e->dev, (size_t)N_SEQ * H, NAN);
            cl_mem ddx = nmt_test_buffer_f32_fill(e->dev, XN, 7.0f);
            cl_mem dgi = nmt_test_upload_f32(e->dev, gi0, G * IN), dgb = nmt_test_upload_f32(e->dev, gb0, G);
            cl_mem dgh = nmt_test_upload_f32(e->dev, gh0, G * H), dghb = nmt_test_upload_f32(e->dev, ghb0, G);
            nmt_test_assert_ok(e->dev, nmt_layer_gru_bwd(&e->ops, &e->t, B(d.x, OX), LD_X, N_SEQ, T_CAP, IN, H, dir,
                                                         B(d.wi, 0), B(d.wh, 0), B(d.cnt, 0), B(d.z[dir], 0),
                                                         B(ddout, OOUT + dir * H), LD_OUT, B(ddz, 0), B(ddg, 0),
                                                         B(ddh, 0), B(ddx, OX), LD_X, 0.0f, B(dgi, 0), B(dgb, 0),
                                                         B(dgh, 0), c->b_hh ? B(dghb, 0) : NONE));
            float *gx = download(e, ddx, XN), *gi = download(e, dgi, G * IN), *gb = download(e, dgb, G);
            float *gh = download(e, dgh, G * H), *ghb = download(e, dghb, G), *gh0v = download(e, ddh, N_SEQ * H);
            for (size_t i = 0; i < XN; i++) /* dx_beta 0: only the block written */
                if (i < OX || (i - OX) % LD_X >= IN) assert_true(gx[i] == 7.0f);
            if (!c->b_hh)
                for (uint32_t k = 0; k < G; k++) assert_true(ghb[k] == ghb0[k]); /* g_hb NONE: untouched */

            double *wld = dense_d(wl, OOUT + dir * H, ROWS, H, LD_OUT);
            layer_ref p = {dir, xd, wid, bid, whd, c->b_hh ? bhd : NULL, c->h0 ? h0d : NULL, wld};
            float *gxd = dense_f(gx, OX, ROWS, IN, LD_X);
            char what[6][48];
            const char *names[6] = {"dx", "dW_ih", "db_ih", "dW_hh", "db_hh", "dh0"};
            for (int k = 0; k < 6; k++) snprintf(what[k], sizeof what[k], "gru %s, case %zu dir %d", names[k], ci, dir);
            fd_check(what[0], layer_loss, &p, xd, (size_t)ROWS * IN, gxd, NULL);
            fd_check(what[1], layer_loss, &p, wid, G * IN, gi, gi0);
            fd_check(what[2], layer_loss, &p, bid, G, gb, gb0);
            fd_check(what[3], layer_loss, &p, whd, G * H, gh, gh0);
            if (c->b_hh) fd_check(what[4], layer_loss, &p, bhd, G, ghb, ghb0);
            if (c->h0) fd_check(what[5], layer_loss, &p, h0d, (size_t)N_SEQ * H, gh0v, NULL);
            /* the empty sequence: no gradient for its inputs or its initial state */
            for (uint32_t j = 0; j < H; j++) assert_true(gh0v[1 * H + j] == 0.0f);
            for (uint32_t t = 0; t < T_CAP; t++)
                for (uint32_t k = 0; k < IN; k++) assert_true(gxd[((size_t)1 * T_CAP + t) * IN + k] == 0.0f);
            cl_mem rel[] = {ddz, ddg, ddh, ddx, dgi, dgb, dgh, dghb};
            for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
            free(gi0), free(gb0), free(gh0), free(ghb0), free(gx), free(gi), free(gb), free(gh), free(ghb);
            free(gh0v), free(wld), free(gxd);
        }
        nmt_test_release(ddout);
        release_layer(&d);
        free_layer(&hst);
        free(wl), free(xd), free(wid), free(bid), free(whd), free(bhd), free(h0d);
    }
}

/* ---- the scaled input of the history GRUs ------------------------------- */

#define S_ROWS 4u  /* rows b: 2 sentences x group 2 */
#define S_GROUP 2u
#define S_CAP 3u
#define S_N G
#define S_SENT (S_ROWS / S_GROUP)
#define OP 1u
#define LDP (S_N + 1)
#define OA 2u
#define LDA (S_CAP + 1)
#define OSO 1u
#define LDSO (S_N + 2)
#define PN (OP + (size_t)S_SENT * S_CAP * LDP)
#define AN (OA + (size_t)S_ROWS * LDA)
#define SON (OSO + (size_t)S_ROWS * S_CAP * LDSO)

typedef struct scaled_ref {
    const double *p, *a, *bias, *wl; /* [S_SENT * S_CAP, n], [S_ROWS, S_CAP], [n] or NULL, [S_ROWS * S_CAP, n] */
} scaled_ref;

static void ref_scaled(const scaled_ref *q, double *out) {
    for (uint32_t b = 0; b < S_ROWS; b++)
        for (uint32_t j = 0; j < S_CAP; j++)
            for (uint32_t c = 0; c < S_N; c++)
                out[((size_t)b * S_CAP + j) * S_N + c] =
                    q->a[b * S_CAP + j] * q->p[((b / S_GROUP) * S_CAP + j) * S_N + c] + (q->bias ? q->bias[c] : 0);
}

static double scaled_loss(void *ctx, int *skip) {
    const scaled_ref *q = ctx;
    *skip = 0;
    double out[S_ROWS * S_CAP * S_N], l = 0;
    ref_scaled(q, out);
    for (size_t i = 0; i < (size_t)S_ROWS * S_CAP * S_N; i++) l += q->wl[i] * out[i];
    return l;
}

static void test_gru_scaled_input(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    for (int ci = 0; ci < 2; ci++) { /* 0: bias, accumulated dalpha; 1: neither */
        nmt_test_rng r = nmt_test_rng_make(200 + (uint64_t)ci);
        float *p = host_block(&r, PN, OP, S_SENT * S_CAP, S_N, LDP, -1, 1);
        float *a = host_block(&r, AN, OA, S_ROWS, S_CAP, LDA, 0, 1);
        float *bias = host_block(&r, S_N, 0, 1, S_N, S_N, -1, 1);
        float *wl = host_block(&r, SON, OSO, S_ROWS * S_CAP, S_N, LDSO, -1, 1);
        cl_mem dp = nmt_test_upload_f32(e->dev, p, PN), da = nmt_test_upload_f32(e->dev, a, AN);
        cl_mem db = nmt_test_upload_f32(e->dev, bias, S_N), dout = nmt_test_buffer_f32_fill(e->dev, SON, NAN);
        nmt_test_assert_ok(e->dev, nmt_op_gru_scaled_input(&e->ops, B(dp, OP), LDP, B(da, OA), LDA,
                                                           ci ? NONE : B(db, 0), S_ROWS, S_CAP, S_GROUP, S_N,
                                                           B(dout, OSO), LDSO));
        float *got = download(e, dout, SON), *want = nan_f32(SON);
        double *pd = dense_d(p, OP, S_SENT * S_CAP, S_N, LDP), *ad = dense_d(a, OA, S_ROWS, S_CAP, LDA);
        double *bd = widen(bias, S_N), *wld = dense_d(wl, OSO, S_ROWS * S_CAP, S_N, LDSO);
        double out[S_ROWS * S_CAP * S_N];
        scaled_ref q = {pd, ad, ci ? NULL : bd, wld};
        ref_scaled(&q, out);
        for (uint32_t i = 0; i < S_ROWS * S_CAP; i++)
            for (uint32_t c = 0; c < S_N; c++) want[OSO + (size_t)i * LDSO + c] = (float)out[(size_t)i * S_N + c];
        check_block(got, want, SON, OSO, S_ROWS * S_CAP, S_N, LDSO, TOL, "gru scaled input");
        print_block_error(got, want, OSO, S_ROWS * S_CAP, S_N, LDSO, "gru scaled input");

        /* backward: dp and dbias accumulate, dalpha written or added */
        float *gp0 = host_block(&r, PN, OP, S_SENT * S_CAP, S_N, LDP, -1, 1);
        float *ga0 = host_block(&r, AN, OA, S_ROWS, S_CAP, LDA, -1, 1);
        float *gb0 = host_block(&r, S_N, 0, 1, S_N, S_N, -1, 1);
        cl_mem ddout = nmt_test_upload_f32(e->dev, wl, SON), dgp = nmt_test_upload_f32(e->dev, gp0, PN);
        cl_mem dga = nmt_test_upload_f32(e->dev, ga0, AN), dgb = nmt_test_upload_f32(e->dev, gb0, S_N);
        nmt_test_assert_ok(e->dev, nmt_op_gru_scaled_input_bwd(&e->t, B(dp, OP), LDP, B(da, OA), LDA, B(ddout, OSO),
                                                               LDSO, S_ROWS, S_CAP, S_GROUP, S_N, B(dgp, OP), LDP,
                                                               B(dga, OA), LDA, ci ? 0.0f : 1.0f,
                                                               ci ? NONE : B(dgb, 0)));
        float *gp = download(e, dgp, PN), *ga = download(e, dga, AN), *gb = download(e, dgb, S_N);
        float *gpd = dense_f(gp, OP, S_SENT * S_CAP, S_N, LDP), *gp0d = dense_f(gp0, OP, S_SENT * S_CAP, S_N, LDP);
        float *gad = dense_f(ga, OA, S_ROWS, S_CAP, LDA), *ga0d = dense_f(ga0, OA, S_ROWS, S_CAP, LDA);
        fd_check("gru scaled input dP", scaled_loss, &q, pd, (size_t)S_SENT * S_CAP * S_N, gpd, gp0d);
        fd_check("gru scaled input dalpha", scaled_loss, &q, ad, (size_t)S_ROWS * S_CAP, gad, ci ? NULL : ga0d);
        if (!ci) fd_check("gru scaled input dbias", scaled_loss, &q, bd, S_N, gb, gb0);
        else
            for (uint32_t c = 0; c < S_N; c++) assert_true(gb[c] == gb0[c]);
        for (size_t i = 0; i < AN; i++) /* outside the alpha block untouched */
            if (i < OA || (i - OA) % LDA >= S_CAP) assert_true(memcmp(&ga[i], &ga0[i], sizeof(float)) == 0);
        assert_int_equal(nmt_op_gru_scaled_input(&e->ops, B(dp, OP), LDP, B(da, OA), LDA, NONE, 3, S_CAP, S_GROUP, S_N,
                                                 B(dout, OSO), LDSO),
                         NMT_ERR_INVALID_ARGUMENT); /* group does not divide the rows */
        assert_int_equal(nmt_op_gru_scaled_input_bwd(&e->t, B(dp, OP), LDP, B(da, OA), LDA, B(ddout, OSO), LDSO,
                                                     S_ROWS, S_CAP, S_GROUP, S_N, B(dgp, OP), LDP, B(dga, OA), LDA,
                                                     0.5f, NONE),
                         NMT_ERR_INVALID_ARGUMENT); /* alpha_beta 0 or 1 */
        cl_mem rel[] = {dp, da, db, dout, ddout, dgp, dga, dgb};
        for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
        free(p), free(a), free(bias), free(wl), free(got), free(want), free(pd), free(ad), free(bd), free(wld);
        free(gp0), free(ga0), free(gb0), free(gp), free(ga), free(gb), free(gpd), free(gp0d), free(gad), free(ga0d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gru_cell_forward),
        cmocka_unit_test(test_gru_cell_bwd),
        cmocka_unit_test(test_gru_layer_forward),
        cmocka_unit_test(test_gru_layer_bwd),
        cmocka_unit_test(test_gru_scaled_input),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
