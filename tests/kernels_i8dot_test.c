/* SPDX-License-Identifier: MIT */
/* kernels_i8dot_test.c — the int8 x int8 products (issue 23, item 2;
 * runtime/ops/ops_i8dot.c, cl/gemm_i8.cl):
 *   - the path choice: the table's (auto, or off where measured slower:
 *     Intel's CPU runtime); with auto a device that reports
 *     cl_khr_integer_dot_product (Intel's CPU runtime) MUST build the dot
 *     built-in variant, and PoCL's CPU device on a host with AVX-512 VNNI
 *     the x86 VNNI variant (this test fails, not skips, if it did not);
 *     elsewhere int8 products stay int8 weights x fp32 unless the tuning
 *     says "on" (portable kernel); the tuning's off and $NMT_EDGE_NO_I8DOT
 *     turn it off;
 *   - quant_rows against a host reference: the same int8 bytes and scales,
 *     exactly (zero rows, K = 1, K not a multiple of 4, offsets, strides);
 *   - gemm_i8_nt against a naive int64 host sum: exact integers before the
 *     rescale (unit scales), then with scales, alpha, beta, bias and ReLU
 *     within 1e-6 of the host's same formula; odd M/N, K % 4 != 0, every
 *     shape class, the portable kernel and (where present) the built-in
 *     and the x86 VNNI variant (there also K of 64..1000 with tails,
 *     unaligned rows and the extremes -128 / 127 of every byte);
 *   - nmt_op_gemm_q8 through the scratch against ref_gemm_q8 (fp32
 *     activations): the quantization error bound; too-big A falls back;
 *   - gemm_i8_gate (a HySAN gate in one launch) against its five launches,
 *     and gemm_i8_nt_ln (a product with its residual and norm) against the
 *     product and layernorm, bit for bit, and what they refuse;
 *   - bad arguments: exact statuses;
 *   - a whole int8 model: its session (arena and device bytes exactly as
 *     predicted) with the tuning "on" runs its products int8 x int8 (the
 *     built-in where present) and scores within 0.5% of the
 *     same session with NMT_EDGE_NO_I8DOT=1 (int8 weights x fp32). */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family_common.h"
#include "format_common.h"
#include "random_model.h"
#include "ref_ops.h"
#include "session_internal.h"
#include "transformer_cfg.h"

/* ---- host references ------------------------------------------------------ */

static void ref_quant_rows(uint32_t M, uint32_t K, const float *X, uint32_t ldx, int8_t *Q, uint32_t ldq, float *S) {
    for (uint32_t m = 0; m < M; m++) {
        const float *x = X + (size_t)m * ldx;
        float amax = 0.0f;
        for (uint32_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(x[k]));
        const int ok = amax > 0.0f && isfinite(amax);
        const float inv = ok ? 127.0f / amax : 0.0f;
        S[m] = ok ? amax / 127.0f : 0.0f;
        for (uint32_t k = 0; k < K; k++) {
            const float v = fminf(fmaxf(x[k] * inv, -127.0f), 127.0f);
            Q[(size_t)m * ldq + k] = (int8_t)rintf(v); /* round half to even (default mode) */
        }
    }
}

/* C = alpha * sum * sa[m] * sq[n] (+ beta C) (+ bias) (ReLU), the kernel's
 * float formula; *isum (optional) the exact integer sums [M,N]. */
static void ref_gemm_i8(uint32_t M, uint32_t N, uint32_t K, float alpha, const int8_t *A, uint32_t lda, const float *sa,
                        const int8_t *Q, uint32_t ldq, const float *sq, float beta, float *C, uint32_t ldc,
                        const float *bias, int relu) {
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t n = 0; n < N; n++) {
            int64_t acc = 0;
            for (uint32_t k = 0; k < K; k++) acc += (int64_t)A[(size_t)m * lda + k] * Q[(size_t)n * ldq + k];
            float v = (float)acc * ((alpha * sa[m]) * sq[n]);
            if (beta != 0.0f) v += beta * C[(size_t)m * ldc + n];
            if (bias) v += bias[n];
            if (relu) v = fmaxf(v, 0.0f);
            C[(size_t)m * ldc + n] = v;
        }
}

/* ---- choice --------------------------------------------------------------- */

static void test_path_choice(void **state) {
    env *e = *state;
    nmt_device *dev = e->dev;
    const int fast = nmt_i8dot_fast_variant(dev), dot = fast != NMT_I8_PORTABLE; /* a fast variant */
    static const char *const names[4] = {"int8 weights x fp32", "int8 x int8 (dot built-in)", "int8 x int8 (portable)",
                                         "int8 x int8 (x86 VNNI)"};
    assert_int_equal(fast, dev->info.has_int_dot ? NMT_I8_DOT_BUILTIN
                           : dev->info.has_x86_vnni ? NMT_I8_VNNI
                                                    : NMT_I8_PORTABLE);
    unsetenv("NMT_EDGE_NO_I8DOT");
    const nmt_tuning saved = dev->tuning;
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        /* the table: auto, or off where int8 x int8 measured slower (Intel's
         * CPU runtime); kernels_setup's ops follow it */
        const int want = dev->tuning.i8dot[c] == NMT_I8DOT_OFF ? 0 : dot ? fast : 0;
        assert_true(dev->tuning.i8dot[c] == NMT_I8DOT_AUTO || dev->tuning.i8dot[c] == NMT_I8DOT_OFF);
        assert_int_equal(nmt_i8dot_path(dev, (nmt_gemm_class)c), want);
        assert_int_equal(e->ops.i8_use[c], want);
        dev->tuning.i8dot[c] = NMT_I8DOT_AUTO;
    }
    /* auto: the built-in or VNNI variant wherever the device has it (a
     * fallback to the portable one, or none, fails here) */
    nmt_ops ops;
    nmt_test_assert_ok(dev, nmt_ops_init(&ops, dev));
    nmt_test_assert_ok(dev, nmt_ops_enable_q8(&ops));
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        assert_int_equal(nmt_i8dot_path(dev, (nmt_gemm_class)c), dot ? fast : 0);
        assert_int_equal(ops.i8_use[c], dot ? fast : 0);
        if (dot) assert_non_null(ops.k_gemm[NMT_GOP_I8][c]);
        else assert_null(ops.k_gemm[NMT_GOP_I8][c]);
    }
    if (dot) assert_non_null(ops.k_quant_rows);
    else print_message("int8 x int8 with the dot built-in or x86 VNNI: not available on this device (portable kernel tested)\n");
    nmt_ops_release(&ops);
    nmt_device_info info;
    nmt_device_get_info(dev, &info);
    assert_string_equal(info.int8_products, names[dot ? fast : 0]);
    assert_int_equal(info.int8x8_classes, dot ? 7u : 0u);

    dev->tuning.i8dot[NMT_GCLASS_M16] = NMT_I8DOT_OFF;
    dev->tuning.i8dot[NMT_GCLASS_BIG] = NMT_I8DOT_ON;
    assert_int_equal(nmt_i8dot_path(dev, NMT_GCLASS_M16), 0);
    assert_int_equal(nmt_i8dot_path(dev, NMT_GCLASS_BIG), fast);
    nmt_device_get_info(dev, &info);
    char want_text[256];
    snprintf(want_text, sizeof want_text, "m2: %s, m16: int8 weights x fp32, big: %s", names[dot ? fast : 0],
             names[fast]);
    assert_string_equal(info.int8_products, want_text);
    assert_int_equal(info.int8x8_classes, (dot ? 1u : 0u) | 4u); /* m2 as before, m16 off, big on */
    setenv("NMT_EDGE_NO_I8DOT", "1", 1);
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) assert_int_equal(nmt_i8dot_path(dev, (nmt_gemm_class)c), 0);
    nmt_device_get_info(dev, &info);
    assert_string_equal(info.int8_products, "int8 weights x fp32 (NMT_EDGE_NO_I8DOT)");
    assert_int_equal(info.int8x8_classes, 0u);
    setenv("NMT_EDGE_NO_I8DOT", "0", 1); /* "0" is not off */
    assert_int_equal(nmt_i8dot_path(dev, NMT_GCLASS_BIG), fast);
    unsetenv("NMT_EDGE_NO_I8DOT");
    dev->tuning = saved;

    /* the tuning file's lines */
    nmt_tuning t = dev->tuning;
    memset(t.i8dot, NMT_I8DOT_AUTO, sizeof t.i8dot); /* what lines do not name stays */
    static const char text[] = "nmt-edge-tuning 1\ni8dot m2 off\ni8dot big on\n";
    assert_int_equal(nmt_tuning_parse(&t, text, sizeof text - 1), NMT_OK);
    assert_int_equal(t.i8dot[NMT_GCLASS_M2], NMT_I8DOT_OFF);
    assert_int_equal(t.i8dot[NMT_GCLASS_M16], NMT_I8DOT_AUTO);
    assert_int_equal(t.i8dot[NMT_GCLASS_BIG], NMT_I8DOT_ON);
    static const char bad[] = "nmt-edge-tuning 1\ni8dot m2 maybe\n";
    assert_int_equal(nmt_tuning_parse(&t, bad, sizeof bad - 1), NMT_ERR_INVALID_ARGUMENT);
    char buf[2048];
    assert_true(nmt_tuning_format(&t, "x", buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "i8dot m2 off\ni8dot m16 auto\ni8dot big on\n"));
}

/* ---- quant_rows ----------------------------------------------------------- */

static void test_quant_rows(void **state) {
    env *e = *state;
    nmt_ops ops;
    open_i8_ops(e, &ops, NMT_I8_PORTABLE);
    static const uint32_t shapes[][4] = {/* M, K, pad, off */
                                         {1, 1, 0, 0}, {3, 5, 1, 3}, {17, 37, 2, 1}, {2, 256, 0, 0}, {5, 1023, 3, 7}};
    nmt_test_rng r = nmt_test_rng_make(11);
    for (size_t i = 0; i < NMT_ARRAY_LEN(shapes); i++) {
        const uint32_t M = shapes[i][0], K = shapes[i][1], ld = K + shapes[i][2], off = shapes[i][3];
        const size_t nx = off + (size_t)M * ld, nq = off + (size_t)M * ld + 4;
        float *X = host_block(&r, nx, off, M, K, ld, -3, 3);
        if (M > 2) /* a zero row, a row of one repeated value, exact halves */
            for (uint32_t k = 0; k < K; k++) {
                X[off + k] = 0.0f;
                X[off + ld + k] = -0.75f;
                X[off + 2 * (size_t)ld + k] = (float)((int)(k % 255) - 127) * 0.5f;
            }
        cl_mem dX = nmt_test_upload_f32(e->dev, X, nx);
        int8_t *Q0 = malloc(nq), *want = malloc(nq), *got = malloc(nq);
        assert_true(Q0 && want && got);
        memset(Q0, 0x55, nq);
        memcpy(want, Q0, nq);
        cl_mem dQ = nmt_test_buffer(e->dev, nq, Q0);
        float S[32], Sw[32];
        cl_mem dS = nmt_test_buffer_f32_fill(e->dev, M + off, NAN);
        nmt_test_assert_ok(e->dev, nmt_op_quant_rows(&ops, M, K, B(dX, off), ld, B(dQ, off), ld, B(dS, off)));
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dQ, 0, nq, got));
        nmt_test_download_f32(e->dev, dS, off, M, S);
        ref_quant_rows(M, K, X + off, ld, want + off, ld, Sw);
        for (size_t j = 0; j < nq; j++)
            if (got[j] != want[j]) fail_msg("quant_rows M=%u K=%u: byte %zu is %d, want %d", M, K, j, got[j], want[j]);
        for (uint32_t m = 0; m < M; m++)
            if (memcmp(&S[m], &Sw[m], sizeof(float)) != 0)
                fail_msg("quant_rows M=%u K=%u: scale %u is %.9g, want %.9g", M, K, m, S[m], Sw[m]);
        if (M > 2) {
            assert_true(S[0] == 0.0f && got[off] == 0);
            assert_true(got[off + ld] == -127);
        }
        nmt_test_release(dX);
        nmt_test_release(dQ);
        nmt_test_release(dS);
        free(X);
        free(Q0);
        free(want);
        free(got);
    }
    nmt_ops_release(&ops);
}

/* ---- gemm_i8_nt ----------------------------------------------------------- */

typedef struct i8_case {
    uint32_t M, N, K;
    float alpha, beta;
    int bias, relu;
    uint32_t pad, off;
} i8_case;

static const i8_case i8_cases[] = {
    {1, 1, 1, 1.0f, 0.0f, 0, 0, 0, 0},     {1, 37, 5, 1.0f, 0.0f, 0, 0, 1, 3},   {2, 33, 130, 1.0f, 0.0f, 0, 0, 0, 0},
    {3, 17, 19, 1.0f, 0.0f, 0, 0, 2, 1},   {16, 65, 64, 1.0f, 0.0f, 0, 0, 0, 0}, {17, 31, 257, 1.0f, 0.0f, 0, 0, 1, 2},
    {33, 70, 1023, 1.0f, 0.0f, 0, 0, 0, 0}, {5, 9, 3, 1.0f, 0.0f, 0, 0, 0, 5},
};
static const i8_case i8_epilogues[] = {
    {1, 37, 33, 0.5f, 1.0f, 1, 0, 0, 0}, {7, 29, 70, 2.0f, 0.0f, 1, 1, 1, 2}, {40, 63, 129, 1.0f, 1.0f, 0, 1, 3, 1},
};

/* unit: scales 1 and alpha 1 (exact integer results; |sum| < 2^24);
 * extremes: every byte -128 or 127 (A + 128 spans 0..255 in the VNNI
 * variant's unsigned operand) */
static void run_gemm_i8_bytes(env *e, nmt_ops *ops, const i8_case *c, int unit, uint64_t seed, int extremes) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t lda = c->K + c->pad, ldq = c->K + c->pad, ldc = c->N + c->pad;
    const size_t na = c->off + (size_t)c->M * lda + 3, nq = c->off + (size_t)c->N * ldq + 5;
    const size_t nc = c->off + (size_t)c->M * ldc + 3, nsa = c->off + c->M + 3, nsq = c->off + c->N + 3;
    int8_t *A = random_i8(&r, na), *Q = random_i8(&r, nq);
    if (extremes) {
        for (size_t i = 0; i < na; i++) A[i] = A[i] < 0 ? -128 : 127;
        for (size_t i = 0; i < nq; i++) Q[i] = Q[i] < 0 ? -128 : 127;
    }
    float *sa = host_block(&r, nsa, c->off, 1, c->M, c->M, 0.001f, 0.05f);
    float *sq = host_block(&r, nsq, c->off, 1, c->N, c->N, 0.001f, 0.05f);
    if (unit) {
        for (size_t i = 0; i < nsa; i++) sa[i] = 1.0f;
        for (size_t i = 0; i < nsq; i++) sq[i] = 1.0f;
    }
    float *C = host_block(&r, nc, c->off, c->M, c->N, ldc, -1, 1);
    if (c->beta == 0.0f) nmt_test_fill_const(C, nc, NAN);
    float *bias = host_block(&r, nsq, c->off, 1, c->N, c->N, -0.5f, 0.5f);
    cl_mem dA = nmt_test_buffer(e->dev, na, A), dQ = nmt_test_buffer(e->dev, nq, Q);
    cl_mem dsa = nmt_test_upload_f32(e->dev, sa, nsa), dsq = nmt_test_upload_f32(e->dev, sq, nsq);
    cl_mem dC = nmt_test_upload_f32(e->dev, C, nc), db = nmt_test_upload_f32(e->dev, bias, nsq);
    nmt_test_assert_ok(e->dev, nmt_op_gemm_i8(ops, c->M, c->N, c->K, c->alpha, B(dA, c->off), lda, B(dsa, c->off),
                                              B(dQ, c->off), ldq, B(dsq, c->off), c->beta, B(dC, c->off), ldc,
                                              c->bias ? B(db, c->off) : NONE, c->relu));
    float *got = download(e, dC, nc);
    ref_gemm_i8(c->M, c->N, c->K, c->alpha, A + c->off, lda, sa + c->off, Q + c->off, ldq, sq + c->off, c->beta,
                C + c->off, ldc, c->bias ? bias + c->off : NULL, c->relu);
    char what[160];
    snprintf(what, sizeof what, "gemm_i8 %s M=%u N=%u K=%u alpha=%g beta=%g bias=%d relu=%d pad=%u off=%u",
             unit ? "exact" : "scaled", c->M, c->N, c->K, (double)c->alpha, (double)c->beta, c->bias, c->relu, c->pad,
             c->off);
    check_block(got, C, nc, c->off, c->M, c->N, ldc, unit ? 0.0 : 1e-6, what);
    nmt_test_release(dA);
    nmt_test_release(dQ);
    nmt_test_release(dsa);
    nmt_test_release(dsq);
    nmt_test_release(dC);
    nmt_test_release(db);
    free(A);
    free(Q);
    free(sa);
    free(sq);
    free(C);
    free(bias);
    free(got);
}

static void run_gemm_i8(env *e, nmt_ops *ops, const i8_case *c, int unit, uint64_t seed) {
    run_gemm_i8_bytes(e, ops, c, unit, seed, 0);
}

static void gemm_i8_all(env *e, int v) {
    nmt_ops ops;
    open_i8_ops(e, &ops, v);
    for (size_t i = 0; i < NMT_ARRAY_LEN(i8_cases); i++) run_gemm_i8(e, &ops, &i8_cases[i], 1, 100 + i);
    for (size_t i = 0; i < NMT_ARRAY_LEN(i8_epilogues); i++) run_gemm_i8(e, &ops, &i8_epilogues[i], 0, 200 + i);
    nmt_ops_release(&ops);
}

static void test_gemm_i8_portable(void **state) { gemm_i8_all(*state, NMT_I8_PORTABLE); }

static void test_gemm_i8_dot(void **state) {
    env *e = *state;
    if (!e->dev->info.has_int_dot) {
        print_message("int8 x int8 with the dot built-in: not available on this device\n");
        return;
    }
    gemm_i8_all(e, NMT_I8_DOT_BUILTIN);
}

/* The x86 VNNI variant (PoCL on an AVX-512 VNNI CPU): the shared cases,
 * then K across its 64-element steps (whole steps, tails, tails only),
 * rows at odd addresses, and the extreme bytes, exactly; M <= 2 runs the
 * one-row block (class m2), larger M the 4 x 4 one. */
static void test_gemm_i8_vnni(void **state) {
    env *e = *state;
    if (!e->dev->info.has_x86_vnni) {
        print_message("int8 x int8 with x86 VNNI: not available on this device (%s)\n", e->dev->info.platform_name);
        return;
    }
    gemm_i8_all(e, NMT_I8_VNNI);
    nmt_ops ops;
    open_i8_ops(e, &ops, NMT_I8_VNNI);
    static const i8_case vc[] = {
        {4, 4, 64, 1.0f, 0.0f, 0, 0, 0, 0},    {8, 16, 128, 1.0f, 0.0f, 0, 0, 0, 0}, {5, 7, 63, 1.0f, 0.0f, 0, 0, 1, 1},
        {9, 13, 65, 1.0f, 0.0f, 0, 0, 3, 5},   {64, 40, 256, 1.0f, 0.0f, 0, 0, 0, 0}, {3, 70, 1000, 1.0f, 0.0f, 0, 0, 2, 3},
        {16, 33, 1024, 1.0f, 0.0f, 0, 0, 0, 1},
        {1, 9, 256, 1.0f, 0.0f, 0, 0, 1, 3},   {2, 13, 1000, 1.0f, 0.0f, 0, 0, 0, 1}, {1, 5, 64, 1.0f, 0.0f, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < NMT_ARRAY_LEN(vc); i++) {
        run_gemm_i8_bytes(e, &ops, &vc[i], 1, 400 + i, 0);
        run_gemm_i8_bytes(e, &ops, &vc[i], 1, 500 + i, 1);
    }
    nmt_ops_release(&ops);
}

/* Every configuration the tuner may choose and every built-in table row's
 * (rows for devices CI never sees included), with a shape of each class. */
static void test_gemm_i8_candidates(void **state) {
    env *e = *state;
    for (int cls = 0; cls < NMT_GCLASS_COUNT; cls++) {
        nmt_gemm_cfg cand[32];
        size_t n = nmt_gemm_candidates(NMT_GOP_I8, (nmt_gemm_class)cls, cand, 16);
        assert_true(n >= 2);
        nmt_tuning row;
        for (size_t r = 0; nmt_tuning_table_row(r, &row); r++) {
            assert_true(n < NMT_ARRAY_LEN(cand));
            cand[n++] = row.gemm[NMT_GOP_I8][cls];
        }
        for (size_t i = 0; i < n; i++) {
            nmt_tuning t = e->dev->tuning;
            t.gemm[NMT_GOP_I8][cls] = cand[i];
            nmt_ops ops;
            nmt_test_assert_ok(e->dev, nmt_ops_init_tuned(&ops, e->dev, &t));
            for (int c = 0; c < NMT_GCLASS_COUNT; c++) ops.i8_use[c] = c == cls ? (e->dev->info.has_int_dot ? 1 : 2) : 0;
            nmt_test_assert_ok(e->dev, nmt_ops_enable_i8(&ops));
            static const uint32_t Ms[NMT_GCLASS_COUNT] = {2, 13, 23};
            const i8_case c = {Ms[cls], 21, 45, 1.0f, 0.0f, 0, 0, 1, 1};
            run_gemm_i8(e, &ops, &c, 1, 300 + i);
            nmt_ops_release(&ops);
        }
    }
}

/* ---- quantization and product in one launch (gemm_i8_nt_q) ---------------- */

/* One nmt_op_gemm_q8 of case c through the int8 x int8 path, fused (the
 * ops' own k_i8_quant) or not (k_i8_quant hidden); returns C (nc floats)
 * and checks which path ran. */
static float *q8_as_i8_run(env *e, nmt_ops *ops, const i8_case *c, cl_mem dA, cl_mem dQ, cl_mem dS, cl_mem db,
                           const float *C0, size_t nc, int fused) {
    const uint32_t lda = c->K + c->pad, ldq = c->K + c->pad, ldc = c->N + c->pad;
    cl_mem dC = nmt_test_upload_f32(e->dev, C0, nc);
    cl_kernel saved[NMT_GCLASS_COUNT];
    memcpy(saved, ops->k_i8_quant, sizeof saved);
    if (!fused) memset(ops->k_i8_quant, 0, sizeof ops->k_i8_quant);
    const uint64_t products = ops->n_i8_products, fusions = ops->n_i8_fused;
    nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, c->M, c->N, c->K, c->alpha, B(dA, c->off), lda, B(dQ, c->off), ldq,
                                              B(dS, c->off), c->beta, B(dC, c->off), ldc,
                                              c->bias ? B(db, c->off) : NONE, c->relu));
    memcpy(ops->k_i8_quant, saved, sizeof saved);
    assert_int_equal(ops->n_i8_products, products + 1);
    assert_int_equal(ops->n_i8_fused, fusions + (uint64_t)(fused != 0));
    float *got = download(e, dC, nc);
    nmt_test_release(dC);
    return got;
}

/* gemm_i8_nt_q against quant_rows + gemm_i8_nt, bit for bit (the same bytes,
 * scales and integer sums), in every variant this device builds: 1..4 rows
 * (the m2 and m16 classes), K of 1, with a tail, whole 64-byte steps and
 * longer than the one-row VNNI form's private row; a zero row, a row with
 * an infinity, offsets, wide leading dimensions and every epilogue.  On a
 * CPU device the kernel must exist for m2 and m16 (not big), and 5 rows or
 * more take two launches. */
static void test_gemm_i8_fused_quant(void **state) {
    env *e = *state;
    const int variants[2] = {nmt_i8dot_fast_variant(e->dev), NMT_I8_PORTABLE};
    static const i8_case cases[] = {
        {1, 37, 1, 1.0f, 0.0f, 0, 0, 0, 0},    {1, 45, 70, 1.0f, 0.0f, 1, 0, 1, 3},
        {2, 33, 256, 0.5f, 1.0f, 1, 1, 2, 1},  {3, 17, 130, 1.0f, 0.0f, 0, 1, 0, 5},
        {4, 65, 64, 2.0f, 1.0f, 1, 0, 3, 2},   {4, 9, 300, 1.0f, 0.0f, 0, 0, 0, 0},
        {1, 21, 2100, 1.0f, 0.0f, 1, 0, 1, 1}, {5, 19, 70, 1.0f, 0.0f, 1, 1, 0, 0},
    };
    for (int vi = 0; vi < 2; vi++) {
        if (vi == 1 && variants[0] == NMT_I8_PORTABLE) break;
        nmt_ops ops;
        open_i8_ops(e, &ops, variants[vi]);
        assert_int_equal(ops.i8_fuse_quant, e->dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_FUSED_QUANT"));
        if (!ops.i8_fuse_quant) { /* a GPU (Oclgrind too): built on request */
            assert_null(ops.k_i8_quant[NMT_GCLASS_M2]);
            ops.i8_fuse_quant = 1;
            for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
                clReleaseKernel(ops.k_gemm[NMT_GOP_I8][c]);
                ops.k_gemm[NMT_GOP_I8][c] = NULL;
            }
            nmt_test_assert_ok(e->dev, nmt_ops_enable_i8(&ops));
        }
        assert_non_null(ops.k_i8_quant[NMT_GCLASS_M2]);
        assert_non_null(ops.k_i8_quant[NMT_GCLASS_M16]);
        assert_null(ops.k_i8_quant[NMT_GCLASS_BIG]);
        for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
            const i8_case *c = &cases[i];
            nmt_test_rng r = nmt_test_rng_make(600 + i);
            const uint32_t lda = c->K + c->pad, ldq = c->K + c->pad, ldc = c->N + c->pad;
            const size_t na = c->off + (size_t)c->M * lda + 3, nq = c->off + (size_t)c->N * ldq + 5;
            const size_t nc = c->off + (size_t)c->M * ldc + 3, ns = c->off + c->N + 3;
            float *A = host_block(&r, na, c->off, c->M, c->K, lda, -2, 2);
            if (c->M >= 3) { /* row 1 all zeros (scale 0), row 2 with an infinity (scale 0) */
                for (uint32_t k = 0; k < c->K; k++) A[c->off + lda + k] = 0.0f;
                A[c->off + 2 * (size_t)lda + c->K / 2] = INFINITY;
            }
            int8_t *Q = random_i8(&r, nq);
            float *scale = host_block(&r, ns, c->off, 1, c->N, c->N, 0.001f, 0.05f);
            float *bias = host_block(&r, ns, c->off, 1, c->N, c->N, -0.5f, 0.5f);
            float *C0 = host_block(&r, nc, c->off, c->M, c->N, ldc, -1, 1);
            ops.i8_a = B(nmt_test_buffer(e->dev, (size_t)c->M * c->K, NULL), 0);
            ops.i8_s = B(nmt_test_buffer(e->dev, c->M * sizeof(float), NULL), 0);
            ops.i8_cap = (size_t)c->M * c->K;
            ops.i8_rows = c->M;
            cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dQ = nmt_test_buffer(e->dev, nq, Q);
            cl_mem dS = nmt_test_upload_f32(e->dev, scale, ns), db = nmt_test_upload_f32(e->dev, bias, ns);
            const int fuses = c->M <= 4 && !(variants[vi] == NMT_I8_VNNI && c->M <= 2 && c->K > 2048);
            float *one = q8_as_i8_run(e, &ops, c, dA, dQ, dS, db, C0, nc, fuses);
            float *two = q8_as_i8_run(e, &ops, c, dA, dQ, dS, db, C0, nc, 0);
            if (memcmp(one, two, nc * sizeof(float)) != 0)
                fail_msg("variant %d case %zu (M=%u N=%u K=%u): one launch differs from two", variants[vi], i, c->M,
                         c->N, c->K);
            for (uint32_t m = 0; m < c->M; m++) /* and it is a product: finite where A is */
                for (uint32_t n = 0; n < c->N; n++) assert_true(isfinite(one[c->off + (size_t)m * ldc + n]));
            const cl_mem mems[] = {ops.i8_a.mem, ops.i8_s.mem, dA, dQ, dS, db};
            for (size_t j = 0; j < NMT_ARRAY_LEN(mems); j++) nmt_test_release(mems[j]);
            void *host[] = {A, Q, scale, bias, C0, one, two};
            for (size_t j = 0; j < NMT_ARRAY_LEN(host); j++) free(host[j]);
        }
        nmt_ops_release(&ops);
    }
}

/* ---- a squeeze gate in one launch ---------------------------------------- */

typedef struct gate_case {
    uint32_t rows, d, dr, ld_pad, off;
    int bias1, bias2, accumulate;
} gate_case;

/* One gate of case c: nmt_op_gate_i8 (one) or the two products through
 * nmt_op_gemm_q8 and gate_accum (three, as a step without it); returns out. */
static float *gate_run(env *e, nmt_ops *ops, const gate_case *c, nmt_buf x, nmt_buf w1, nmt_buf s1, nmt_buf b1,
                       nmt_buf w2, nmt_buf s2, nmt_buf b2, const float *O0, size_t no, int one) {
    const uint32_t ld = c->d + c->ld_pad;
    cl_mem dO = nmt_test_upload_f32(e->dev, O0, no);
    const nmt_buf out = B(dO, c->off);
    if (one) {
        const uint64_t gates = ops->n_gates;
        nmt_test_assert_ok(e->dev, nmt_op_gate_i8(ops, c->rows, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2, out, ld,
                                                  c->accumulate));
        assert_int_equal(ops->n_gates, gates + 1);
    } else {
        cl_mem gh = nmt_test_buffer(e->dev, (size_t)c->rows * c->dr * sizeof(float), NULL);
        cl_mem g = nmt_test_buffer(e->dev, (size_t)c->rows * c->d * sizeof(float), NULL);
        const uint64_t products = ops->n_i8_products;
        nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, c->rows, c->dr, c->d, 1.0f, x, ld, w1, c->d, s1, 0.0f,
                                                  B(gh, 0), c->dr, b1, 1));
        nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, c->rows, c->d, c->dr, 1.0f, B(gh, 0), c->dr, w2, c->dr, s2,
                                                  0.0f, B(g, 0), c->d, b2, 0));
        assert_int_equal(ops->n_i8_products, products + 2); /* both int8 x int8 */
        nmt_test_assert_ok(e->dev, nmt_op_gate_accum(ops, x, ld, B(g, 0), c->d, out, ld, c->rows, c->d,
                                                     c->accumulate));
        nmt_test_release(gh);
        nmt_test_release(g);
    }
    float *got = download(e, dO, no);
    nmt_test_release(dO);
    return got;
}

/* gemm_i8_gate against its five launches (quant_rows + gemm_i8_nt twice,
 * gate_accum), bit for bit, in every variant the device builds (and built
 * with the m16 class's options where m2 is not int8 x int8): 1..4 rows,
 * d and dr with and without tails of 4 and of 64 bytes, at their limits
 * (2,048 and 512), biases or not, accumulating or not, offsets and leading
 * dimensions; a zero row and a row with an infinity.  Then what it refuses:
 * NMT_ERR_UNSUPPORTED with nothing written (5 rows, d or dr over its limit,
 * a product that would not be int8 x int8, fusion off), and bad arguments. */
static void test_gemm_i8_gate(void **state) {
    env *e = *state;
    const int variants[2] = {nmt_i8dot_fast_variant(e->dev), NMT_I8_PORTABLE};
    static const gate_case cases[] = {
        {1, 256, 64, 0, 0, 1, 1, 0},  {1, 256, 64, 512, 3, 1, 1, 1}, {2, 70, 18, 5, 1, 0, 1, 1},
        {3, 130, 33, 0, 2, 1, 0, 0},  {4, 64, 16, 3, 0, 0, 0, 1},    {4, 2048, 512, 0, 0, 1, 1, 1},
        {1, 7, 1, 0, 0, 1, 1, 0},     {2, 1, 3, 1, 1, 1, 0, 1},
    };
    for (int vi = 0; vi < 2; vi++) {
        if (vi == 1 && variants[0] == NMT_I8_PORTABLE) break;
        nmt_ops ops;
        open_i8_ops(e, &ops, variants[vi]);
        assert_int_equal(ops.fuse_gate, e->dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_FUSED_GATE"));
        ops.fuse_gate = 1; /* a GPU (Oclgrind too): on request */
        for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
            const gate_case *c = &cases[i];
            nmt_test_rng r = nmt_test_rng_make(700 + i);
            const uint32_t ld = c->d + c->ld_pad;
            const size_t nx = c->off + (size_t)c->rows * ld + 3, n1 = c->off + (size_t)c->dr * c->d + 5;
            const size_t n2 = c->off + (size_t)c->d * c->dr + 5, ns = c->off + c->d + c->dr + 3;
            float *X = host_block(&r, nx, c->off, c->rows, c->d, ld, -2, 2);
            if (c->rows >= 3) { /* row 1 all zeros, row 2 with an infinity: both scale 0 */
                for (uint32_t k = 0; k < c->d; k++) X[c->off + ld + k] = 0.0f;
                X[c->off + 2 * (size_t)ld + c->d / 2] = INFINITY;
            }
            int8_t *W1 = random_i8(&r, n1), *W2 = random_i8(&r, n2);
            float *S1 = host_block(&r, ns, c->off, 1, c->dr, c->dr, 0.001f, 0.05f);
            float *S2 = host_block(&r, ns, c->off, 1, c->d, c->d, 0.001f, 0.05f);
            float *B1 = host_block(&r, ns, c->off, 1, c->dr, c->dr, -0.5f, 0.5f);
            float *B2 = host_block(&r, ns, c->off, 1, c->d, c->d, -0.5f, 0.5f);
            float *O0 = host_block(&r, nx, c->off, c->rows, c->d, ld, -1, 1);
            ops.i8_cap = (size_t)c->rows * (c->d > c->dr ? c->d : c->dr); /* both products' rows */
            ops.i8_a = B(nmt_test_buffer(e->dev, ops.i8_cap, NULL), 0);
            ops.i8_s = B(nmt_test_buffer(e->dev, c->rows * sizeof(float), NULL), 0);
            ops.i8_rows = c->rows;
            cl_mem dX = nmt_test_upload_f32(e->dev, X, nx), dW1 = nmt_test_buffer(e->dev, n1, W1);
            cl_mem dW2 = nmt_test_buffer(e->dev, n2, W2), dS1 = nmt_test_upload_f32(e->dev, S1, ns);
            cl_mem dS2 = nmt_test_upload_f32(e->dev, S2, ns), dB1 = nmt_test_upload_f32(e->dev, B1, ns);
            cl_mem dB2 = nmt_test_upload_f32(e->dev, B2, ns);
            const nmt_buf x = B(dX, c->off), w1 = B(dW1, c->off), w2 = B(dW2, c->off), s1 = B(dS1, c->off);
            const nmt_buf s2 = B(dS2, c->off), b1 = c->bias1 ? B(dB1, c->off) : NONE;
            const nmt_buf b2 = c->bias2 ? B(dB2, c->off) : NONE;
            float *one = gate_run(e, &ops, c, x, w1, s1, b1, w2, s2, b2, O0, nx, 1);
            float *three = gate_run(e, &ops, c, x, w1, s1, b1, w2, s2, b2, O0, nx, 0);
            for (size_t j = 0; j < nx; j++) {
                const uint32_t row = j >= c->off ? (uint32_t)((j - c->off) / ld) : c->rows;
                const int inside = row < c->rows && (j - c->off) % ld < c->d;
                if (memcmp(&one[j], &three[j], sizeof(float)) != 0)
                    fail_msg("variant %d case %zu (rows %u d %u dr %u): element %zu %.9g, three launches %.9g",
                             variants[vi], i, c->rows, c->d, c->dr, j, one[j], three[j]);
                if (!inside && memcmp(&one[j], &O0[j], sizeof(float)) != 0) /* nothing else written */
                    fail_msg("case %zu: element %zu outside the rows changed", i, j);
                if (inside && !(c->rows >= 3 && row == 2)) assert_true(isfinite(one[j]));
            }
            if (i == 0) { /* what it refuses: nothing written */
                cl_mem dO = nmt_test_upload_f32(e->dev, O0, nx);
                const nmt_buf o = B(dO, c->off);
                assert_int_equal(nmt_op_gate_i8(&ops, 5, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2, o, ld, 0),
                                 NMT_ERR_UNSUPPORTED); /* more rows than it serves */
                assert_int_equal(nmt_op_gate_i8(&ops, 1, 2049, c->dr, x, 2049, w1, s1, b1, w2, s2, b2, o, 2049, 0),
                                 NMT_ERR_UNSUPPORTED); /* d over the private row */
                assert_int_equal(nmt_op_gate_i8(&ops, 1, c->d, 513, x, ld, w1, s1, b1, w2, s2, b2, o, ld, 0),
                                 NMT_ERR_UNSUPPORTED); /* dr over its private arrays */
                ops.i8_rows = 0; /* the products would not be int8 x int8 */
                assert_int_equal(nmt_op_gate_i8(&ops, 1, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2, o, ld, 0),
                                 NMT_ERR_UNSUPPORTED);
                ops.i8_rows = c->rows;
                ops.fuse_gate = 0;
                assert_int_equal(nmt_op_gate_i8(&ops, 1, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2, o, ld, 0),
                                 NMT_ERR_UNSUPPORTED);
                ops.fuse_gate = 1;
                assert_int_equal(nmt_op_gate_i8(&ops, 1, c->d, c->dr, x, ld, w1, NONE, b1, w2, s2, b2, o, ld, 0),
                                 NMT_ERR_INVALID_ARGUMENT); /* no scales */
                assert_int_equal(nmt_op_gate_i8(&ops, 1, c->d, c->dr, x, ld - 1, w1, s1, b1, w2, s2, b2, o, ld, 0),
                                 NMT_ERR_INVALID_ARGUMENT); /* ld_x < d */
                assert_int_equal(nmt_op_gate_i8(&ops, 1, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2,
                                                B(dX, c->off + 1), ld, 0),
                                 NMT_ERR_INVALID_ARGUMENT); /* out overlaps x */
                assert_int_equal(nmt_op_gate_i8(&ops, 0, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2, o, ld, 0),
                                 NMT_OK);
                float *after = download(e, dO, nx);
                assert_memory_equal(after, O0, nx * sizeof(float));
                free(after);
                nmt_test_release(dO);
            }
            if (i == 3) { /* m2 without int8 x int8: refused at 1 row, built with m16's options at 3 */
                nmt_ops m16;
                open_i8_ops(e, &m16, variants[vi]);
                m16.fuse_gate = 1;
                m16.i8_use[NMT_GCLASS_M2] = 0;
                m16.i8_a = ops.i8_a;
                m16.i8_s = ops.i8_s;
                m16.i8_cap = ops.i8_cap;
                m16.i8_rows = ops.i8_rows;
                cl_mem dO = nmt_test_upload_f32(e->dev, O0, nx);
                assert_int_equal(nmt_op_gate_i8(&m16, 1, c->d, c->dr, x, ld, w1, s1, b1, w2, s2, b2, B(dO, c->off),
                                                ld, c->accumulate),
                                 NMT_ERR_UNSUPPORTED);
                assert_null(m16.k_i8_gate);
                nmt_test_release(dO);
                float *m16_one = gate_run(e, &m16, c, x, w1, s1, b1, w2, s2, b2, O0, nx, 1);
                assert_memory_equal(m16_one, one, nx * sizeof(float));
                free(m16_one);
                nmt_ops_release(&m16);
            }
            const cl_mem mems[] = {ops.i8_a.mem, ops.i8_s.mem, dX, dW1, dW2, dS1, dS2, dB1, dB2};
            for (size_t j = 0; j < NMT_ARRAY_LEN(mems); j++) nmt_test_release(mems[j]);
            void *host[] = {X, W1, W2, S1, S2, B1, B2, O0, one, three};
            for (size_t j = 0; j < NMT_ARRAY_LEN(host); j++) free(host[j]);
        }
        nmt_ops_release(&ops);
    }
}

/* ---- a product with its residual and norm in one launch ------------------ */

typedef struct ln_case {
    uint32_t M, N, K, pad, off;
    int bias, alias; /* alias: O is R */
} ln_case;

/* gemm_i8_nt_ln against nmt_op_gemm_q8 (int8 x int8) into T then
 * nmt_op_layernorm, bit for bit, in every variant the device builds: 1 and
 * 2 rows, N and K with and without tails (K up to the private row's 2,048),
 * bias or not, offsets and leading dimensions, O aliasing R, a zero row
 * and a row with an infinity.  Then the exact refusals (3 rows among them). */
static void test_gemm_i8_nt_ln(void **state) {
    env *e = *state;
    const int variants[2] = {nmt_i8dot_fast_variant(e->dev), NMT_I8_PORTABLE};
    static const ln_case cases[] = {
        {1, 256, 256, 0, 0, 1, 0}, {1, 256, 1024, 3, 2, 1, 1}, {2, 70, 130, 5, 1, 0, 0},
        {2, 64, 64, 0, 3, 1, 1},   {2, 300, 2048, 1, 0, 1, 0}, {1, 7, 1, 2, 1, 0, 1},
    };
    const float eps = 1e-5f;
    for (int vi = 0; vi < 2; vi++) {
        if (vi == 1 && variants[0] == NMT_I8_PORTABLE) break;
        nmt_ops ops;
        open_i8_ops(e, &ops, variants[vi]);
        assert_int_equal(ops.i8_fuse_norm, e->dev->info.is_cpu);
        ops.i8_fuse_norm = 1; /* a GPU (Oclgrind too): on request, with layernorm a work-item per row */
        ops.norm_wg = 1;
        for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
            const ln_case *c = &cases[i];
            nmt_test_rng r = nmt_test_rng_make(800 + i);
            const uint32_t lda = c->K + c->pad, ld = c->N + c->pad;
            const size_t na = c->off + (size_t)c->M * lda + 3, nq = c->off + (size_t)c->N * c->K + 5;
            const size_t no = c->off + (size_t)c->M * ld + 3, nn = c->off + c->N + 3;
            float *A = host_block(&r, na, c->off, c->M, c->K, lda, -2, 2);
            const int inf_row = i == 4; /* case 2: row 1 all zeros; case 4: row 1 with an infinity */
            if (i == 2) for (uint32_t k = 0; k < c->K; k++) A[c->off + lda + k] = 0.0f;
            if (inf_row) A[c->off + lda + c->K / 2] = INFINITY;
            int8_t *Q = random_i8(&r, nq);
            float *sq = host_block(&r, nn, c->off, 1, c->N, c->N, 0.001f, 0.05f);
            float *bias = host_block(&r, nn, c->off, 1, c->N, c->N, -0.5f, 0.5f);
            float *gam = host_block(&r, nn, c->off, 1, c->N, c->N, 0.5f, 1.5f);
            float *bet = host_block(&r, nn, c->off, 1, c->N, c->N, -0.5f, 0.5f);
            float *R = host_block(&r, no, c->off, c->M, c->N, ld, -1, 1);
            float *O0 = host_block(&r, no, c->off, c->M, c->N, ld, -1, 1);
            ops.i8_cap = (size_t)c->M * c->K;
            ops.i8_rows = c->M;
            ops.i8_a = B(nmt_test_buffer(e->dev, ops.i8_cap, NULL), 0);
            ops.i8_s = B(nmt_test_buffer(e->dev, c->M * sizeof(float), NULL), 0);
            cl_mem dA = nmt_test_upload_f32(e->dev, A, na), dQ = nmt_test_buffer(e->dev, nq, Q);
            cl_mem dsq = nmt_test_upload_f32(e->dev, sq, nn), db = nmt_test_upload_f32(e->dev, bias, nn);
            cl_mem dg = nmt_test_upload_f32(e->dev, gam, nn), dbt = nmt_test_upload_f32(e->dev, bet, nn);
            cl_mem dR = nmt_test_upload_f32(e->dev, R, no), dO = c->alias ? dR : nmt_test_upload_f32(e->dev, O0, no);
            const nmt_buf a = B(dA, c->off), q = B(dQ, c->off), s = B(dsq, c->off), g = B(dg, c->off);
            const nmt_buf bt = B(dbt, c->off), bs = c->bias ? B(db, c->off) : NONE;
            /* three: the product into T, then layernorm of T + R (rows contiguous) */
            float *Rc = malloc((size_t)c->M * c->N * sizeof(float));
            assert_non_null(Rc);
            for (uint32_t m = 0; m < c->M; m++) memcpy(Rc + (size_t)m * c->N, R + c->off + (size_t)m * ld, c->N * 4);
            cl_mem dT = nmt_test_buffer(e->dev, (size_t)c->M * c->N * sizeof(float), NULL);
            cl_mem dRc = nmt_test_upload_f32(e->dev, Rc, (size_t)c->M * c->N);
            cl_mem dOc = nmt_test_buffer(e->dev, (size_t)c->M * c->N * sizeof(float), NULL);
            const uint64_t products = ops.n_i8_products;
            nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(&ops, c->M, c->N, c->K, 1.0f, a, lda, q, c->K, s, 0.0f,
                                                      B(dT, 0), c->N, bs, 0));
            assert_int_equal(ops.n_i8_products, products + 1); /* int8 x int8 */
            nmt_test_assert_ok(e->dev, nmt_op_layernorm(&ops, B(dT, 0), B(dRc, 0), B(dOc, 0), c->M, c->N, g, bt, eps));
            float *ref = download(e, dOc, (size_t)c->M * c->N);
            /* one */
            const uint64_t norms = ops.n_norms;
            nmt_test_assert_ok(e->dev, nmt_op_gemm_i8_nt_ln(&ops, c->M, c->N, c->K, a, lda, q, c->K, s, bs,
                                                            B(dR, c->off), ld, g, bt, eps, B(dO, c->off), ld));
            assert_int_equal(ops.n_norms, norms + 1);
            float *got = download(e, dO, no);
            const float *before = c->alias ? R : O0;
            for (size_t j = 0; j < no; j++) {
                const int inside = j >= c->off && (j - c->off) / ld < c->M && (j - c->off) % ld < c->N;
                if (!inside) {
                    if (memcmp(&got[j], &before[j], sizeof(float)) != 0)
                        fail_msg("case %zu: element %zu outside the rows changed", i, j);
                    continue;
                }
                const size_t m = (j - c->off) / ld, n = (j - c->off) % ld;
                const float want = ref[m * c->N + n];
                if (memcmp(&got[j], &want, sizeof(float)) != 0)
                    fail_msg("variant %d case %zu (M %u N %u K %u): row %zu col %zu %.9g, two launches %.9g",
                             variants[vi], i, c->M, c->N, c->K, m, n, got[j], want);
                if (!(inf_row && m == 1)) assert_true(isfinite(got[j]));
            }
            if (i == 0) { /* the refusals: nothing written */
                cl_mem dX = nmt_test_upload_f32(e->dev, O0, no);
                const nmt_buf o = B(dX, c->off), rr = B(dR, c->off);
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 3, c->N, c->K, a, lda, q, c->K, s, bs, rr, ld, g, bt, eps,
                                                      o, ld),
                                 NMT_ERR_UNSUPPORTED); /* more rows than it serves */
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, 2049, a, 2049, q, 2049, s, bs, rr, ld, g, bt,
                                                      eps, o, ld),
                                 NMT_ERR_UNSUPPORTED); /* K over the private row */
                ops.norm_wg = 2; /* layernorm not a work-item per row: its bits would differ */
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, c->K, a, lda, q, c->K, s, bs, rr, ld, g, bt, eps,
                                                      o, ld),
                                 NMT_ERR_UNSUPPORTED);
                ops.norm_wg = 1;
                ops.fused_norm = 0; /* NMT_EDGE_NO_FUSED_NORM */
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, c->K, a, lda, q, c->K, s, bs, rr, ld, g, bt, eps,
                                                      o, ld),
                                 NMT_ERR_UNSUPPORTED);
                ops.fused_norm = 1;
                ops.i8_rows = 0; /* the product would not be int8 x int8 */
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, c->K, a, lda, q, c->K, s, bs, rr, ld, g, bt, eps,
                                                      o, ld),
                                 NMT_ERR_UNSUPPORTED);
                ops.i8_rows = c->M;
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, c->K, a, lda, q, c->K, s, bs, rr, ld, NONE, bt,
                                                      eps, o, ld),
                                 NMT_ERR_INVALID_ARGUMENT); /* no gamma */
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, c->K, a, lda, q, c->K, s, bs, rr, c->N - 1, g,
                                                      bt, eps, o, ld),
                                 NMT_ERR_INVALID_ARGUMENT); /* ldr < N */
                assert_int_equal(nmt_op_gemm_i8_nt_ln(&ops, 1, c->N, c->K, a, lda, q, c->K, s, bs, rr, ld, g, bt, eps,
                                                      B(dA, c->off + 1), ld),
                                 NMT_ERR_INVALID_ARGUMENT); /* O overlaps A */
                float *after = download(e, dX, no);
                assert_memory_equal(after, O0, no * sizeof(float));
                free(after);
                nmt_test_release(dX);
            }
            const cl_mem mems[] = {ops.i8_a.mem, ops.i8_s.mem, dA, dQ, dsq, db, dg, dbt, dR, dT, dRc, dOc};
            for (size_t j = 0; j < NMT_ARRAY_LEN(mems); j++) nmt_test_release(mems[j]);
            if (!c->alias) nmt_test_release(dO);
            void *host[] = {A, Q, sq, bias, gam, bet, R, O0, Rc, ref, got};
            for (size_t j = 0; j < NMT_ARRAY_LEN(host); j++) free(host[j]);
        }
        nmt_ops_release(&ops);
    }
}

/* ---- nmt_op_gemm_q8 through the scratch ----------------------------------- */

static void test_gemm_q8_as_i8(void **state) {
    env *e = *state;
    nmt_ops ops;
    open_i8_ops(e, &ops, nmt_i8dot_fast_variant(e->dev));
    const uint32_t M = 19, N = 45, K = 70;
    ops.i8_a = B(nmt_test_buffer(e->dev, (size_t)M * K, NULL), 0);
    ops.i8_s = B(nmt_test_buffer(e->dev, M * sizeof(float), NULL), 0);
    ops.i8_cap = (size_t)M * K;
    ops.i8_rows = M;
    nmt_test_rng r = nmt_test_rng_make(7);
    float *A = host_block(&r, (size_t)M * K, 0, M, K, K, -1, 1);
    int8_t *Q = random_i8(&r, (size_t)N * K);
    float *scale = host_block(&r, N, 0, 1, N, N, 0.001f, 0.05f);
    float *bias = host_block(&r, N, 0, 1, N, N, -0.5f, 0.5f);
    cl_mem dA = nmt_test_upload_f32(e->dev, A, (size_t)M * K), dQ = nmt_test_buffer(e->dev, (size_t)N * K, Q);
    cl_mem dS = nmt_test_upload_f32(e->dev, scale, N), dC = nmt_test_buffer(e->dev, (size_t)M * N * 4, NULL);
    cl_mem db = nmt_test_upload_f32(e->dev, bias, N);
    float *want = malloc((size_t)M * N * sizeof(float));
    assert_non_null(want);
    static const uint32_t rows_list[] = {M, 13, 2, 1}; /* classes big, m16, m2 */
    for (size_t ri = 0; ri < NMT_ARRAY_LEN(rows_list); ri++) {
        const uint32_t rows = rows_list[ri];
        const uint64_t before = ops.n_i8_products;
        nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(&ops, rows, N, K, 1.0f, B(dA, 0), K, B(dQ, 0), K, B(dS, 0), 0.0f,
                                                  B(dC, 0), N, B(db, 0), 0));
        assert_int_equal(ops.n_i8_products, before + 1);
        float *got = download(e, dC, (size_t)rows * N);
        ref_gemm_q8(rows, N, K, 1.0f, A, K, Q, K, scale, 0.0f, want, N, bias, 0);
        /* per output: |error| <= sum_k |A err| |W| with |A err| <= amax/254
         * (half a step) plus fp32 rounding: bound it by the row's amax/254 *
         * sum_k |W[n,k]| and check it holds */
        for (uint32_t m = 0; m < rows; m++) {
            float amax = 0.0f;
            for (uint32_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(A[(size_t)m * K + k]));
            for (uint32_t n = 0; n < N; n++) {
                double wsum = 0.0;
                for (uint32_t k = 0; k < K; k++) wsum += fabs((double)Q[(size_t)n * K + k] * scale[n]);
                const double bound = amax / 254.0 * wsum * 1.001 + 1e-6;
                const double err = fabs((double)got[(size_t)m * N + n] - want[(size_t)m * N + n]);
                if (err > bound) fail_msg("gemm_q8 as i8 rows=%u (%u,%u): error %g > bound %g", rows, m, n, err, bound);
            }
        }
        free(got);
    }
    /* A larger than the scratch: int8 weights x fp32, no int8 x int8 run */
    ops.i8_rows = 4;
    const uint64_t before = ops.n_i8_products;
    nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(&ops, 5, N, K, 1.0f, B(dA, 0), K, B(dQ, 0), K, B(dS, 0), 0.0f, B(dC, 0),
                                              N, NONE, 0));
    assert_int_equal(ops.n_i8_products, before);
    float *got = download(e, dC, (size_t)5 * N);
    ref_gemm_q8(5, N, K, 1.0f, A, K, Q, K, scale, 0.0f, want, N, NULL, 0);
    check_block(got, want, (size_t)5 * N, 0, 5, N, N, TOL, "gemm_q8 fallback");
    free(got);
    nmt_test_release(ops.i8_a.mem);
    nmt_test_release(ops.i8_s.mem);
    nmt_test_release(dA);
    nmt_test_release(dQ);
    nmt_test_release(dS);
    nmt_test_release(dC);
    nmt_test_release(db);
    free(A);
    free(Q);
    free(scale);
    free(bias);
    free(want);
    nmt_ops_release(&ops);
}

/* ---- bad arguments -------------------------------------------------------- */

static void test_bad_args(void **state) {
    env *e = *state;
    nmt_ops plain;
    nmt_test_assert_ok(e->dev, nmt_ops_init(&plain, e->dev));
    cl_mem m = nmt_test_buffer(e->dev, 4096, NULL);
    const nmt_buf b = B(m, 0);
    /* not enabled */
    assert_int_equal(nmt_op_gemm_i8(&plain, 1, 1, 4, 1.0f, b, 4, b, b, 4, b, 0.0f, b, 1, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_quant_rows(&plain, 1, 4, b, 4, b, 4, b), NMT_ERR_INVALID_ARGUMENT);
    nmt_ops_release(&plain);
    nmt_ops ops;
    open_i8_ops(e, &ops, NMT_I8_PORTABLE);
    assert_int_equal(nmt_op_gemm_i8(NULL, 1, 1, 4, 1.0f, b, 4, b, b, 4, b, 0.0f, b, 1, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm_i8(&ops, 1, 1, 4, 1.0f, b, 4, NONE, b, 4, b, 0.0f, b, 1, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_gemm_i8(&ops, 1, 1, 4, 1.0f, b, 4, b, b, 3, b, 0.0f, b, 1, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT); /* ldq < K */
    assert_int_equal(nmt_op_gemm_i8(&ops, 1, 1, 4, 1.0f, b, 4, b, b, 4, b, 0.5f, b, 1, NONE, 0),
                     NMT_ERR_INVALID_ARGUMENT); /* beta not 0 or 1 */
    assert_int_equal(nmt_op_gemm_i8(&ops, 1, 1, 1u << 17, 1.0f, b, 1u << 17, b, b, 1u << 17, b, 0.0f, b, 1, NONE, 0),
                     NMT_ERR_UNSUPPORTED); /* int32 sums could overflow */
    assert_int_equal(nmt_op_gemm_i8(&ops, 0, 1, 4, 1.0f, NONE, 4, NONE, NONE, 4, NONE, 0.0f, NONE, 1, NONE, 0), NMT_OK);
    assert_int_equal(nmt_op_quant_rows(&ops, 1, 4, b, 3, b, 4, b), NMT_ERR_INVALID_ARGUMENT); /* ldx < K */
    assert_int_equal(nmt_op_quant_rows(&ops, 1, 4, b, 4, NONE, 4, b), NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_quant_rows(&ops, 2, 4, B(m, UINT32_MAX - 2), 4, b, 4, b), NMT_ERR_UNSUPPORTED);
    assert_int_equal(nmt_op_quant_rows(&ops, 0, 4, NONE, 4, NONE, 4, NONE), NMT_OK);
    nmt_gemm_cfg bad = ops.cfg[NMT_GOP_I8][0];
    bad.vw = 2; /* four-element dot products */
    assert_false(nmt_gemm_cfg_valid(NMT_GOP_I8, &bad));
    bad.vw = 16;
    bad.provider = NMT_GEMM_CLBLAST;
    assert_false(nmt_gemm_cfg_valid(NMT_GOP_I8, &bad));
    nmt_test_release(m);
    nmt_ops_release(&ops);
}

/* ---- a whole int8 model --------------------------------------------------- */

#define VOCAB 61
static const int32_t src0[] = {5, 9, 11, 4, 30, 2}, src1[] = {7, 2}, src2[] = {12, 3, 8, 20, 6, 15, 10, 40, 2};
static const int32_t tgt0[] = {4, 6, 8, 2}, tgt1[] = {9, 9, 10, 11, 3, 2}, tgt2[] = {13, 2};
static const int32_t *const srcs[3] = {src0, src1, src2}, *const tgts[3] = {tgt0, tgt1, tgt2};
static const uint32_t src_lens[3] = {6, 2, 9}, tgt_lens[3] = {4, 6, 2};

static void session_scores(env *e, void *img, size_t size, float *lp, uint64_t *n_i8) {
    static const nmt_limits lim = {.max_src_len = 12, .max_tgt_len = 10, .max_batch = 3, .max_beam = 2};
    void *copy = malloc(size);
    assert_non_null(copy);
    memcpy(copy, img, size);
    test_model m;
    test_model_open(e->dev, copy, size, &lim, &m); /* arena and device bytes as predicted */
    nmt_batch src = {srcs, src_lens, 3}, tgt = {tgts, tgt_lens, 3};
    nmt_test_assert_ok(e->dev, nmt_session_score(m.s, &src, &tgt, lp));
    *n_i8 = m.s->ops.n_i8_products;
    test_model_close(&m);
}

static void test_model_int8_paths(void **state) {
    env *e = *state;
    nmt_random_transformer_config rc;
    nmt_random_transformer_defaults(&rc);
    rc.d_model = 64;
    rc.d_ff = 160;
    rc.src_vocab = rc.tgt_vocab = VOCAB;
    rc.weight_scale = 0.5f;
    void *img;
    size_t size;
    assert_int_equal(nmt_random_transformer_image(&rc, &img, &size), NMT_OK);
    nmt_file f;
    nmt_tf_cfg c;
    assert_int_equal(nmt_file_open(&f, img, size, 1), NMT_OK);
    assert_int_equal(nmt_family_parse(&nmt_family_transformer, &f, &c), NMT_OK);
    size_t qsize;
    void *q = requantize(&nmt_family_transformer, &c, img, size, 1, &qsize);
    free(img);

    const nmt_tuning saved = e->dev->tuning;
    /* "on" (whatever the table says): the built-in or VNNI variant where
     * the device has it, else the portable kernel */
    for (int k = 0; k < NMT_GCLASS_COUNT; k++) e->dev->tuning.i8dot[k] = NMT_I8DOT_ON;
    float lp_i8[3], lp_f32[3];
    uint64_t n_i8, n_off;
    unsetenv("NMT_EDGE_NO_I8DOT");
    session_scores(e, q, qsize, lp_i8, &n_i8);
    setenv("NMT_EDGE_NO_I8DOT", "1", 1);
    session_scores(e, q, qsize, lp_f32, &n_off);
    unsetenv("NMT_EDGE_NO_I8DOT");
    e->dev->tuning = saved;
    assert_true(n_i8 > 0);     /* the products ran int8 x int8 ... */
    assert_int_equal(n_off, 0); /* ... and not with the switch */
    for (int i = 0; i < 3; i++) {
        print_message("sentence %d: log-prob int8 x int8 %.5f, int8 x fp32 %.5f\n", i, lp_i8[i], lp_f32[i]);
        assert_true(isfinite(lp_i8[i]) && lp_i8[i] != lp_f32[i]);
        if (fabs(lp_i8[i] - lp_f32[i]) > 0.005 * fabs(lp_f32[i]))
            fail_msg("sentence %d: int8 x int8 %.5f vs int8 x fp32 %.5f (more than 0.5%%)", i, lp_i8[i], lp_f32[i]);
    }
    free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_choice),        cmocka_unit_test(test_quant_rows),
        cmocka_unit_test(test_gemm_i8_portable),   cmocka_unit_test(test_gemm_i8_dot),
        cmocka_unit_test(test_gemm_i8_vnni),
        cmocka_unit_test(test_gemm_i8_candidates), cmocka_unit_test(test_gemm_q8_as_i8),
        cmocka_unit_test(test_gemm_i8_fused_quant), cmocka_unit_test(test_gemm_i8_gate),
        cmocka_unit_test(test_gemm_i8_nt_ln),
        cmocka_unit_test(test_bad_args),           cmocka_unit_test(test_model_int8_paths),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
