/* SPDX-License-Identifier: MIT */
/* kernels_rnn_test.c — the RNN helper ops of BA-NMT (ops.h
 * nmt_op_act_rows, nmt_op_weighted_rows, nmt_op_lookup_q8; cl/recurrent.cl)
 * against naive C: tanh (strided and in place) and maxout over pairs,
 * per-row weighted sums over positions (and the zeros of an absent x), the
 * int8 embedding lookup.  Operands offset and strides padded; outside the
 * output block nothing changes. */
#include "ops_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 5u
#define N 7u

static void test_act_rows(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_rng r = nmt_test_rng_make(11);
    for (int maxout = 0; maxout <= 1; maxout++)
        for (int in_place = 0; in_place <= (maxout ? 0 : 1); in_place++) {
            const uint32_t ldx = 2 * N + 3, ldo = in_place ? ldx : N + 2;
            const size_t ox = 4, oo = in_place ? ox : 3, nx = ox + (size_t)ROWS * ldx, no = oo + (size_t)ROWS * ldo;
            float *x = host_block(&r, nx, ox, ROWS, maxout ? 2 * N : N, ldx, -3, 3);
            cl_mem dx = nmt_test_upload_f32(e->dev, x, nx);
            cl_mem dout = in_place ? dx : nmt_test_buffer_f32_fill(e->dev, no, NAN);
            nmt_test_assert_ok(e->dev, nmt_op_act_rows(&e->ops, B(dx, ox), ldx, ROWS, N, maxout, B(dout, oo), ldo));
            float *got = download(e, dout, no), *want = in_place ? nmt_test_dup_f32(x, nx) : nan_f32(no);
            for (uint32_t i = 0; i < ROWS; i++)
                for (uint32_t c = 0; c < N; c++) {
                    const float *xr = x + ox + (size_t)i * ldx;
                    want[oo + (size_t)i * ldo + c] =
                        maxout ? fmaxf(xr[2 * c], xr[2 * c + 1]) : (float)tanh((double)xr[c]);
                }
            check_block(got, want, no, oo, ROWS, N, ldo, TOL, maxout ? "maxout" : "tanh");
            if (!in_place) nmt_test_release(dout);
            nmt_test_release(dx);
            free(x), free(got), free(want);
        }
}

static void test_weighted_rows(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_rng r = nmt_test_rng_make(12);
    const uint32_t S = 4, ldx = N + 1, lda = S + 2, ldo = N + 3;
    const size_t ox = 2, oa = 1, oo = 5, nx = ox + (size_t)ROWS * S * ldx, na = oa + (size_t)ROWS * lda,
                 no = oo + (size_t)ROWS * ldo;
    float *x = host_block(&r, nx, ox, ROWS * S, N, ldx, -1, 1), *a = host_block(&r, na, oa, ROWS, S, lda, 0, 1);
    cl_mem dx = nmt_test_upload_f32(e->dev, x, nx), da = nmt_test_upload_f32(e->dev, a, na);
    for (int absent = 0; absent <= 1; absent++) {
        cl_mem dout = nmt_test_buffer_f32_fill(e->dev, no, NAN);
        nmt_test_assert_ok(e->dev, nmt_op_weighted_rows(&e->ops, absent ? NONE : B(dx, ox), ldx, B(da, oa), lda,
                                                        ROWS, S, N, B(dout, oo), ldo));
        float *got = download(e, dout, no), *want = nan_f32(no);
        for (uint32_t b = 0; b < ROWS; b++)
            for (uint32_t c = 0; c < N; c++) {
                double acc = 0;
                for (uint32_t j = 0; j < S && !absent; j++)
                    acc += (double)a[oa + (size_t)b * lda + j] * x[ox + ((size_t)b * S + j) * ldx + c];
                want[oo + (size_t)b * ldo + c] = (float)acc;
            }
        check_block(got, want, no, oo, ROWS, N, ldo, TOL, absent ? "weighted rows, no x" : "weighted rows");
        nmt_test_release(dout);
        free(got), free(want);
    }
    nmt_test_release(dx), nmt_test_release(da);
    free(x), free(a);
}

static void test_lookup_q8(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_recurrent(&e->ops));
    nmt_test_rng r = nmt_test_rng_make(13);
    const uint32_t V = 6, d = N, ldo = N + 2, oq = 3, os = 1;
    int8_t q[3 + 6 * N];
    for (size_t i = 0; i < sizeof q; i++) q[i] = (int8_t)nmt_test_rng_int(&r, -127, 128);
    float *sc = nmt_test_random_f32(&r, os + V, 0.01f, 0.1f);
    const int32_t tok[ROWS] = {5, 0, 3, 3, 1};
    cl_mem dq = nmt_test_buffer(e->dev, sizeof q, q), ds = nmt_test_upload_f32(e->dev, sc, os + V),
           dt = nmt_test_upload_i32(e->dev, tok, ROWS);
    const size_t oo = 2, no = oo + (size_t)ROWS * ldo;
    cl_mem dout = nmt_test_buffer_f32_fill(e->dev, no, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_lookup_q8(&e->ops, B(dt, 0), ROWS, B(dq, oq), B(ds, os), d, B(dout, oo), ldo));
    float *got = download(e, dout, no), *want = nan_f32(no);
    for (uint32_t i = 0; i < ROWS; i++)
        for (uint32_t c = 0; c < d; c++)
            want[oo + (size_t)i * ldo + c] = (float)q[oq + (size_t)tok[i] * d + c] * sc[os + tok[i]];
    check_block(got, want, no, oo, ROWS, d, ldo, 0.0, "lookup q8");
    nmt_test_release(dq), nmt_test_release(ds), nmt_test_release(dt), nmt_test_release(dout);
    free(sc), free(got), free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_rows),
        cmocka_unit_test(test_weighted_rows),
        cmocka_unit_test(test_lookup_q8),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
