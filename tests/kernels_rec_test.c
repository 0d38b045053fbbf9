/* SPDX-License-Identifier: MIT */
/* kernels_rec_test.c — the recurrent layer (MG-SA's LSTM and ON-LSTM
 * interaction, issue 15): nmt_layer_lstm (runtime/ops/layers.c over
 * cl/recurrent.cl and the GEMMs) against a naive double reference, and its
 * backward nmt_layer_lstm_bwd (train/ops/layers_bwd.c, cl/recurrent_bwd.cl)
 * against central finite differences, over sequences of different lengths
 * (one full, one empty, one short) with padded strides and offsets; LSTM
 * (chunk 0) and ON-LSTM with chunks of 2 and 1 units. */
#include "ops_common.h"
#include "ref_ops.h"

#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SEQ 3u
#define T_CAP 4u
#define IN 5u
#define H 4u
#define GMAX (4 * H + 2 * H) /* gate rows of ON-LSTM with chunk 1 */
static const int32_t counts[N_SEQ] = {4, 0, 2};

/* The inputs of one test, in double (the FD checker perturbs them). */
typedef struct lstm_ref {
    uint32_t chunk;      /* 0: LSTM; else ON-LSTM */
    const double *x;     /* [N_SEQ * T_CAP, IN] (dense) */
    const double *w_ih;  /* [G, IN] */
    const double *b;     /* [G] */
    const double *w_hh;  /* [G, H] */
    const double *wl;    /* [N_SEQ * T_CAP, H] loss weights */
} lstm_ref;

static double sigm(double v) { return 1.0 / (1.0 + exp(-v)); }


/* out [N_SEQ * T_CAP, H]: h_t for t < counts[b], 0 after.  ON-LSTM
 * (Shen et al. 2019): ft = cumax(master f), it = 1 - cumax(master i) of
 * the unit's chunk, w = ft it, f^ = f w + (ft - w), i^ = i w + (it - w). */
static void ref_lstm(const lstm_ref *p, double *out) {
    const uint32_t m = p->chunk ? H / p->chunk : 0, G = 4 * H + 2 * m;
    for (uint32_t b = 0; b < N_SEQ; b++) {
        double h[H] = {0}, c[H] = {0}, z[GMAX];
        for (uint32_t t = 0; t < T_CAP; t++) {
            const size_t r = (size_t)b * T_CAP + t;
            if ((int32_t)t >= counts[b]) {
                for (uint32_t j = 0; j < H; j++) out[r * H + j] = 0;
                continue;
            }
            for (uint32_t k = 0; k < G; k++) {
                double acc = p->b[k];
                for (uint32_t i = 0; i < IN; i++) acc += p->x[r * IN + i] * p->w_ih[(size_t)k * IN + i];
                for (uint32_t j = 0; j < H; j++) acc += h[j] * p->w_hh[(size_t)k * H + j];
                z[k] = acc;
            }
            for (uint32_t j = 0; j < H; j++) {
                double f = sigm(z[H + j]), i = sigm(z[j]);
                if (m) {
                    const double ft = ref_cumax(z + 4 * H, m, j / p->chunk), it = 1 - ref_cumax(z + 4 * H + m, m, j / p->chunk);
                    const double w = ft * it;
                    f = f * w + (ft - w);
                    i = i * w + (it - w);
                }
                c[j] = f * c[j] + i * tanh(z[2 * H + j]);
                h[j] = sigm(z[3 * H + j]) * tanh(c[j]);
                out[r * H + j] = h[j];
            }
        }
    }
}

static double lstm_loss(void *ctx, int *skip) {
    const lstm_ref *p = ctx;
    *skip = 0;
    double out[N_SEQ * T_CAP * H], l = 0;
    ref_lstm(p, out);
    for (size_t i = 0; i < N_SEQ * T_CAP * H; i++) l += p->wl[i] * out[i];
    return l;
}

/* Dense double copy of a rows x cols block (stride ld, offset off). */
static double *dense(const float *x, size_t off, uint32_t rows, uint32_t cols, uint32_t ld) {
    double *d = malloc(sizeof(double) * rows * cols);
    assert_non_null(d);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) d[(size_t)r * cols + c] = x[off + (size_t)r * ld + c];
    return d;
}

typedef struct lstm_dev {
    cl_mem x, wi, bi, wh, cnt, z, c, out;
} lstm_dev;

#define LD_X 7u
#define LD_OUT 5u
#define OX 3u
#define OOUT 2u
#define ROWS (N_SEQ * T_CAP)

static void run_forward(env *e, uint32_t chunk, const float *x, const float *wi, const float *bi, const float *wh,
                        lstm_dev *d) {
    const uint32_t G = nmt_lstm_gates(H, chunk);
    d->x = nmt_test_upload_f32(e->dev, x, OX + (size_t)ROWS * LD_X);
    d->wi = nmt_test_upload_f32(e->dev, wi, G * IN);
    d->bi = nmt_test_upload_f32(e->dev, bi, G);
    d->wh = nmt_test_upload_f32(e->dev, wh, G * H);
    d->cnt = nmt_test_upload_i32(e->dev, counts, N_SEQ);
    d->z = nmt_test_buffer_f32_fill(e->dev, (size_t)ROWS * G, NAN);
    d->c = nmt_test_buffer_f32_fill(e->dev, (size_t)ROWS * H, NAN);
    d->out = nmt_test_buffer_f32_fill(e->dev, OOUT + (size_t)ROWS * LD_OUT, NAN);
    const nmt_lin w_ih = {.w = B(d->wi, 0), .b = B(d->bi, 0)}, w_hh = {.w = B(d->wh, 0)};
    nmt_test_assert_ok(e->dev, nmt_layer_lstm(&e->ops, B(d->x, OX), LD_X, N_SEQ, T_CAP, IN, H, chunk, &w_ih, &w_hh,
                                              B(d->cnt, 0), B(d->z, 0), B(d->c, 0), B(d->out, OOUT), LD_OUT));
}

static void release_dev(lstm_dev *d) {
    cl_mem *m[] = {&d->x, &d->wi, &d->bi, &d->wh, &d->cnt, &d->z, &d->c, &d->out};
    for (size_t i = 0; i < NMT_ARRAY_LEN(m); i++) nmt_test_release(*m[i]);
}

static const uint32_t chunks[] = {0, 2, 1};

static void test_lstm_forward(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops)); /* idempotent */
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(chunks); ci++) {
        const uint32_t chunk = chunks[ci], G = nmt_lstm_gates(H, chunk);
        nmt_test_rng r = nmt_test_rng_make(91 + ci);
        float *x = host_block(&r, OX + (size_t)ROWS * LD_X, OX, ROWS, IN, LD_X, -2, 2);
        float *wi = host_block(&r, G * IN, 0, G, IN, IN, -1, 1);
        float *bi = host_block(&r, G, 0, 1, G, G, -1, 1);
        float *wh = host_block(&r, G * H, 0, G, H, H, -1, 1);
        lstm_dev d;
        run_forward(e, chunk, x, wi, bi, wh, &d);
        float *got = download(e, d.out, OOUT + (size_t)ROWS * LD_OUT);

        double *xd = dense(x, OX, ROWS, IN, LD_X), *wid = widen(wi, G * IN), *bid = widen(bi, G);
        double *whd = widen(wh, G * H), want[ROWS * H];
        lstm_ref p = {chunk, xd, wid, bid, whd, NULL};
        ref_lstm(&p, want);
        float *wantf = nan_f32(OOUT + (size_t)ROWS * LD_OUT);
        for (uint32_t i = 0; i < ROWS; i++)
            for (uint32_t j = 0; j < H; j++) wantf[OOUT + (size_t)i * LD_OUT + j] = (float)want[(size_t)i * H + j];
        char what[32];
        snprintf(what, sizeof what, "lstm out, chunk %u", chunk);
        check_block(got, wantf, OOUT + (size_t)ROWS * LD_OUT, OOUT, ROWS, H, LD_OUT, TOL, what);
        /* steps past a sequence are exact zeros, the empty sequence all zero */
        for (uint32_t b = 0; b < N_SEQ; b++)
            for (uint32_t t = (uint32_t)counts[b]; t < T_CAP; t++)
                for (uint32_t j = 0; j < H; j++)
                    assert_true(got[OOUT + ((size_t)b * T_CAP + t) * LD_OUT + j] == 0.0f);
        if (ci == 0) {
            /* bad arguments */
            assert_int_equal(nmt_op_lstm_cell(&e->ops, B(d.z, 0), B(d.c, 0), B(d.out, 0), LD_OUT, B(d.cnt, 0), N_SEQ,
                                              T_CAP, T_CAP, H, 0),
                             NMT_ERR_INVALID_ARGUMENT); /* t >= t_cap */
            assert_int_equal(nmt_op_lstm_cell(&e->ops, B(d.z, 0), B(d.c, 0), B(d.out, 0), H - 1, B(d.cnt, 0), N_SEQ,
                                              T_CAP, 0, H, 0),
                             NMT_ERR_INVALID_ARGUMENT); /* ld_out < h */
            assert_int_equal(nmt_op_lstm_cell(&e->ops, NONE, B(d.c, 0), B(d.out, 0), LD_OUT, B(d.cnt, 0), N_SEQ, T_CAP,
                                              0, H, 0),
                             NMT_ERR_INVALID_ARGUMENT);
            assert_int_equal(nmt_op_lstm_cell(&e->ops, B(d.z, 0), B(d.c, 0), B(d.out, 0), LD_OUT, B(d.cnt, 0), N_SEQ,
                                              T_CAP, 0, H, 3),
                             NMT_ERR_INVALID_ARGUMENT); /* chunk 3 does not divide 4 */
            const nmt_lin w_ih = {.w = B(d.wi, 0), .b = B(d.bi, 0)}, w_hh = {.w = B(d.wh, 0)};
            assert_int_equal(nmt_layer_lstm(&e->ops, B(d.x, OX), LD_X, N_SEQ, T_CAP, IN, H, 3, &w_ih, &w_hh,
                                            B(d.cnt, 0), B(d.z, 0), B(d.c, 0), B(d.out, OOUT), LD_OUT),
                             NMT_ERR_INVALID_ARGUMENT);
        }
        release_dev(&d);
        free(x), free(wi), free(bi), free(wh), free(got), free(xd), free(wid), free(bid), free(whd), free(wantf);
    }
}

static void test_lstm_bwd(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_nn(&e->ops));
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(chunks); ci++) {
        const uint32_t chunk = chunks[ci], G = nmt_lstm_gates(H, chunk);
        nmt_test_rng r = nmt_test_rng_make(92 + ci);
        float *x = host_block(&r, OX + (size_t)ROWS * LD_X, OX, ROWS, IN, LD_X, -2, 2);
        for (size_t i = 0; i < OX + (size_t)ROWS * LD_X; i++)
            if (isnan(x[i])) x[i] = 0.5f; /* finite stride padding (the dx check reads it) */
        float *wi = host_block(&r, G * IN, 0, G, IN, IN, -1, 1);
        float *bi = host_block(&r, G, 0, 1, G, G, -1, 1);
        float *wh = host_block(&r, G * H, 0, G, H, H, -1, 1);
        float *wl = host_block(&r, OOUT + (size_t)ROWS * LD_OUT, OOUT, ROWS, H, LD_OUT, -1, 1);
        lstm_dev d;
        run_forward(e, chunk, x, wi, bi, wh, &d);

        /* parameter gradients accumulate onto these */
        float *gi0 = host_block(&r, G * IN, 0, G, IN, IN, -1, 1);
        float *gb0 = host_block(&r, G, 0, 1, G, G, -1, 1);
        float *gh0 = host_block(&r, G * H, 0, G, H, H, -1, 1);
        const size_t nx = OX + (size_t)ROWS * LD_X;
        cl_mem ddout = nmt_test_upload_f32(e->dev, wl, OOUT + (size_t)ROWS * LD_OUT);
        cl_mem ddz = nmt_test_buffer_f32_fill(e->dev, (size_t)ROWS * G, NAN);
        cl_mem ddc = nmt_test_buffer_f32_fill(e->dev, (size_t)N_SEQ * H, NAN);
        cl_mem ddm = nmt_test_buffer_f32_fill(e->dev, (size_t)N_SEQ * 2 * H, NAN);
        cl_mem ddx = nmt_test_buffer_f32_fill(e->dev, nx, 7.0f);
        cl_mem dgi = nmt_test_upload_f32(e->dev, gi0, G * IN), dgb = nmt_test_upload_f32(e->dev, gb0, G);
        cl_mem dgh = nmt_test_upload_f32(e->dev, gh0, G * H);
        nmt_test_assert_ok(e->dev, nmt_layer_lstm_bwd(&e->ops, &e->t, B(d.x, OX), LD_X, N_SEQ, T_CAP, IN, H, chunk,
                                                      B(d.wi, 0), B(d.wh, 0), B(d.cnt, 0), B(d.z, 0), B(d.c, 0),
                                                      B(d.out, OOUT), LD_OUT, B(ddout, OOUT), LD_OUT, B(ddz, 0),
                                                      B(ddc, 0), chunk ? B(ddm, 0) : NONE, B(ddx, OX), LD_X, 0.0f,
                                                      B(dgi, 0), B(dgb, 0), B(dgh, 0)));
        float *gx = download(e, ddx, nx), *gi = download(e, dgi, G * IN), *gb = download(e, dgb, G);
        float *gh = download(e, dgh, G * H);
        /* dx: only the block written (dx_beta 0), the stride padding untouched */
        for (size_t i = 0; i < nx; i++)
            if (i < OX || (i - OX) % LD_X >= IN) assert_true(gx[i] == 7.0f);

        double *xd = dense(x, OX, ROWS, IN, LD_X), *wid = widen(wi, G * IN), *bid = widen(bi, G);
        double *whd = widen(wh, G * H), *wld = dense(wl, OOUT, ROWS, H, LD_OUT);
        lstm_ref p = {chunk, xd, wid, bid, whd, wld};
        float *gxd = malloc(sizeof(float) * ROWS * IN);
        assert_non_null(gxd);
        for (uint32_t i = 0; i < ROWS; i++)
            for (uint32_t c = 0; c < IN; c++) gxd[(size_t)i * IN + c] = gx[OX + (size_t)i * LD_X + c];
        char what[4][40];
        snprintf(what[0], sizeof what[0], "lstm dx, chunk %u", chunk);
        snprintf(what[1], sizeof what[1], "lstm dW_ih, chunk %u", chunk);
        snprintf(what[2], sizeof what[2], "lstm db, chunk %u", chunk);
        snprintf(what[3], sizeof what[3], "lstm dW_hh, chunk %u", chunk);
        fd_check(what[0], lstm_loss, &p, xd, (size_t)ROWS * IN, gxd, NULL);
        fd_check(what[1], lstm_loss, &p, wid, G * IN, gi, gi0);
        fd_check(what[2], lstm_loss, &p, bid, G, gb, gb0);
        fd_check(what[3], lstm_loss, &p, whd, G * H, gh, gh0);
        /* the empty sequence's inputs get no gradient */
        for (uint32_t t = 0; t < T_CAP; t++)
            for (uint32_t c = 0; c < IN; c++) assert_true(gxd[((size_t)1 * T_CAP + t) * IN + c] == 0.0f);

        if (ci == 1) {
            assert_int_equal(nmt_op_lstm_cell_bwd(&e->t, B(d.z, 0), B(d.c, 0), B(ddout, 0), LD_OUT, B(ddc, 0),
                                                  B(ddz, 0), B(ddm, 0), B(d.cnt, 0), N_SEQ, T_CAP, T_CAP, H, chunk),
                             NMT_ERR_INVALID_ARGUMENT); /* step >= t_cap */
            assert_int_equal(nmt_op_lstm_cell_bwd(&e->t, B(d.z, 0), B(d.c, 0), B(ddout, 0), LD_OUT, NONE, B(ddz, 0),
                                                  B(ddm, 0), B(d.cnt, 0), N_SEQ, T_CAP, 0, H, chunk),
                             NMT_ERR_INVALID_ARGUMENT);
            assert_int_equal(nmt_op_lstm_cell_bwd(&e->t, B(d.z, 0), B(d.c, 0), B(ddout, 0), LD_OUT, B(ddc, 0),
                                                  B(ddz, 0), NONE, B(d.cnt, 0), N_SEQ, T_CAP, 0, H, chunk),
                             NMT_ERR_INVALID_ARGUMENT); /* ON-LSTM without dm */
            assert_int_equal(nmt_op_onlstm_master_bwd(&e->t, B(d.z, 0), B(ddm, 0), B(ddz, 0), B(d.cnt, 0), N_SEQ,
                                                      T_CAP, 0, H, 0),
                             NMT_ERR_INVALID_ARGUMENT); /* chunk 0 has no masters */
        }
        release_dev(&d);
        cl_mem rel[] = {ddout, ddz, ddc, ddm, ddx, dgi, dgb, dgh};
        for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
        free(x), free(wi), free(bi), free(wh), free(wl), free(gi0), free(gb0), free(gh0);
        free(gx), free(gi), free(gb), free(gh), free(xd), free(wid), free(bid), free(whd), free(wld), free(gxd);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_forward),
        cmocka_unit_test(test_lstm_bwd),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
