/* SPDX-License-Identifier: MIT */
/* kernels_phrase_test.c — the phrase-memory ops of MG-SA (issue 15):
 * nmt_op_segment_max (cl/phrase.cl) against a naive reference, and its
 * backward nmt_op_segment_max_bwd (cl/phrase_bwd.cl) against central finite
 * differences, both with padded strides, offsets, empty phrases, tokens in
 * no phrase and ties; the phrases-as-sequences ops nmt_op_span_tokens /
 * nmt_op_span_last and their backward (linear maps: exact against a naive
 * gather / scatter). */
#include "ops_common.h"

#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 3 sentences of n_cap 7 token rows, up to 4 phrases each: n-gram 2 over
 * 7 tokens; 3 + 3 with an empty third and fourth; spans that leave tokens
 * 0 and 6 out (as padding is) with two empty phrases. */
#define N_SENT 3u
#define N_CAP 7u
#define M_CAP 4u
static const int32_t spans[N_SENT * M_CAP * 2] = {
    0, 2, 2, 2, 4, 2, 6, 1,  /* sentence 0 */
    0, 3, 3, 3, 6, 0, 0, 0,  /* sentence 1 */
    1, 1, 2, 4, 0, 0, 0, 0,  /* sentence 2 */
};

/* G[r, c] and the argmax row (first on ties; -1 and 0 for an empty span). */
static void ref_segment_max(const double *x, uint32_t ld_x, uint32_t d, double *g, int32_t *arg) {
    for (uint32_t r = 0; r < N_SENT * M_CAP; r++) {
        const uint32_t b = r / M_CAP;
        const int32_t start = spans[2 * r], len = spans[2 * r + 1];
        for (uint32_t c = 0; c < d; c++) {
            double best = 0;
            int32_t a = -1;
            for (int32_t t = 0; t < len; t++) {
                const int32_t row = (int32_t)(b * N_CAP) + start + t;
                const double v = x[(size_t)row * ld_x + c];
                if (t == 0 || v > best) best = v, a = row;
            }
            g[(size_t)r * d + c] = best;
            arg[(size_t)r * d + c] = a;
        }
    }
}

static void test_segment_max(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops)); /* idempotent */
    const uint32_t d = 13, ld_x = 16, ld_g = 15, rows = N_SENT * M_CAP;
    const size_t ox = 3, og = 2, oa = 5;
    const size_t nx = ox + (size_t)N_SENT * N_CAP * ld_x, ng = og + (size_t)rows * ld_g, na = oa + (size_t)rows * d;
    nmt_test_rng r = nmt_test_rng_make(71);
    float *x = host_block(&r, nx, ox, N_SENT * N_CAP, d, ld_x, -2, 2);
    /* ties: sentence 1's first phrase has its max twice in column 5 */
    x[ox + (1 * N_CAP + 0) * ld_x + 5] = 7.0f;
    x[ox + (1 * N_CAP + 2) * ld_x + 5] = 7.0f;
    double *xd = widen(x + ox, (size_t)N_SENT * N_CAP * ld_x);
    double *want_d = malloc(sizeof(double) * rows * d);
    int32_t *want_a = malloc(sizeof(int32_t) * rows * d);
    assert_non_null(want_d);
    assert_non_null(want_a);
    ref_segment_max(xd, ld_x, d, want_d, want_a);
    assert_int_equal(want_a[(1 * M_CAP) * d + 5], 1 * N_CAP + 0);
    float *want = nan_f32(ng);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t c = 0; c < d; c++) want[og + (size_t)i * ld_g + c] = (float)want_d[(size_t)i * d + c];

    cl_mem dx = nmt_test_upload_f32(e->dev, x, nx), ds = nmt_test_upload_i32(e->dev, spans, N_SENT * M_CAP * 2);
    int32_t *a0 = malloc(sizeof(int32_t) * na);
    assert_non_null(a0);
    for (size_t i = 0; i < na; i++) a0[i] = 12345;
    for (int with_arg = 0; with_arg <= 1; with_arg++) {
        cl_mem dg = nmt_test_buffer_f32_fill(e->dev, ng, NAN), da = nmt_test_upload_i32(e->dev, a0, na);
        nmt_test_assert_ok(e->dev, nmt_op_segment_max(&e->ops, B(dx, ox), ld_x, N_CAP, B(ds, 0), N_SENT, M_CAP, d,
                                                      B(dg, og), ld_g, with_arg ? B(da, oa) : NONE));
        float *got = download(e, dg, ng);
        check_block(got, want, ng, og, rows, d, ld_g, 0.0, "segment_max");  /* a max is exact */
        int32_t *ga = malloc(sizeof(int32_t) * na);
        assert_non_null(ga);
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, da, 0, sizeof(int32_t) * na, ga));
        for (size_t i = 0; i < na; i++) {
            const int32_t w = (with_arg && i >= oa) ? want_a[i - oa] : 12345;
            if (ga[i] != w) fail_msg("segment_max arg[%zu] = %d, want %d (with_arg %d)", i, ga[i], w, with_arg);
        }
        free(ga);
        free(got);
        nmt_test_release(dg);
        nmt_test_release(da);
    }
    /* bad arguments */
    assert_int_equal(nmt_op_segment_max(&e->ops, B(dx, 0), d - 1, N_CAP, B(ds, 0), N_SENT, M_CAP, d, B(dx, 0), d, NONE),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_segment_max(&e->ops, B(dx, 0), d, N_CAP, NONE, N_SENT, M_CAP, d, B(dx, 0), d, NONE),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_segment_max(&e->ops, B(dx, 0), d, 0, B(ds, 0), N_SENT, M_CAP, d, B(dx, 0), d, NONE),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_ops not_enabled = e->ops;
    not_enabled.k_segment_max = NULL;
    assert_int_equal(nmt_op_segment_max(&not_enabled, B(dx, 0), d, N_CAP, B(ds, 0), N_SENT, M_CAP, d, B(dx, 0), d,
                                        NONE),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(dx);
    nmt_test_release(ds);
    free(a0);
    free(x);
    free(xd);
    free(want_d);
    free(want_a);
    free(want);
}

/* L = sum W[r, c] * G[r, c](X) */
typedef struct seg_loss_ctx {
    const double *x, *w;
    uint32_t ld_x, d;
} seg_loss_ctx;

static double seg_loss(void *ctx, int *skip) {
    seg_loss_ctx *c = ctx;
    *skip = 0;
    const size_t n = (size_t)N_SENT * M_CAP * c->d;
    double *g = malloc(sizeof(double) * n);
    int32_t *a = malloc(sizeof(int32_t) * n);
    assert_non_null(g);
    assert_non_null(a);
    ref_segment_max(c->x, c->ld_x, c->d, g, a);
    double l = 0;
    for (size_t i = 0; i < n; i++) l += c->w[i] * g[i];
    free(g);
    free(a);
    return l;
}

static void test_segment_max_bwd(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops));
    const uint32_t d = 5, ld_x = 7, ld_g = 6, rows = N_SENT * M_CAP;
    const size_t nxr = (size_t)N_SENT * N_CAP * ld_x, ox = 2, og = 1;
    /* distinct values 0.05 apart, shuffled: no perturbation of FD_H moves a max */
    nmt_test_rng r = nmt_test_rng_make(72);
    float *x = nan_f32(ox + nxr);
    const size_t nv = (size_t)N_SENT * N_CAP * d;
    uint32_t *perm = malloc(sizeof(uint32_t) * nv);
    assert_non_null(perm);
    for (uint32_t i = 0; i < nv; i++) perm[i] = i;
    for (uint32_t i = (uint32_t)nv - 1; i > 0; i--) {
        const uint32_t j = (uint32_t)(nmt_test_rng_next(&r) % (i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < nv; i++) x[ox + (i / d) * ld_x + i % d] = -5.0f + 0.05f * (float)perm[i];
    float *w = host_block(&r, og + (size_t)rows * ld_g, og, rows, d, ld_g, -1, 1);
    float *base = host_block(&r, ox + nxr, ox, N_SENT * N_CAP, d, ld_x, -1, 1);  /* dx accumulates */
    for (size_t i = 0; i < ox + nxr; i++)  /* finite padding: got - base = 0 there, as the FD gives */
        if (isnan(base[i])) base[i] = 3.25f;

    cl_mem dx = nmt_test_upload_f32(e->dev, x, ox + nxr), ds = nmt_test_upload_i32(e->dev, spans, rows * 2);
    cl_mem dg = nmt_test_buffer_f32_fill(e->dev, og + (size_t)rows * ld_g, NAN);
    cl_mem da = nmt_test_buffer(e->dev, sizeof(int32_t) * rows * d, NULL);
    cl_mem ddg = nmt_test_upload_f32(e->dev, w, og + (size_t)rows * ld_g);
    cl_mem ddx = nmt_test_upload_f32(e->dev, base, ox + nxr);
    nmt_test_assert_ok(e->dev, nmt_op_segment_max(&e->ops, B(dx, ox), ld_x, N_CAP, B(ds, 0), N_SENT, M_CAP, d,
                                                  B(dg, og), ld_g, B(da, 0)));
    nmt_test_assert_ok(e->dev, nmt_op_segment_max_bwd(&e->t, B(da, 0), B(ddg, og), ld_g, rows, d, B(ddx, ox), ld_x));
    float *got = download(e, ddx, ox + nxr);

    /* outside the block (NaN padding of the strides) nothing was written */
    for (size_t i = 0; i < ox + nxr; i++) {
        const int in_block = i >= ox && (i - ox) % ld_x < d;
        if (!in_block) assert_memory_equal(&got[i], &base[i], sizeof(float));
    }
    double *xd = widen(x + ox, nxr);
    double *wd = malloc(sizeof(double) * rows * d);
    assert_non_null(wd);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t c = 0; c < d; c++) wd[(size_t)i * d + c] = w[og + (size_t)i * ld_g + c];
    seg_loss_ctx ctx = {xd, wd, ld_x, d};
    fd_check("segment_max_bwd", seg_loss, &ctx, xd, nxr, got + ox, base + ox);
    /* tokens in no phrase (sentence 2, rows 0 and 6) got nothing */
    for (uint32_t c = 0; c < d; c++) {
        assert_memory_equal(&got[ox + (2 * N_CAP + 0) * ld_x + c], &base[ox + (2 * N_CAP + 0) * ld_x + c], 4);
        assert_memory_equal(&got[ox + (2 * N_CAP + 6) * ld_x + c], &base[ox + (2 * N_CAP + 6) * ld_x + c], 4);
    }
    assert_int_equal(nmt_op_segment_max_bwd(&e->t, NONE, B(ddg, 0), ld_g, rows, d, B(ddx, 0), ld_x),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_segment_max_bwd(&e->t, B(da, 0), B(ddg, 0), d - 1, rows, d, B(ddx, 0), ld_x),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(dx);
    nmt_test_release(ds);
    nmt_test_release(dg);
    nmt_test_release(da);
    nmt_test_release(ddg);
    nmt_test_release(ddx);
    free(perm);
    free(x);
    free(w);
    free(base);
    free(got);
    free(xd);
    free(wd);
}

/* The n-gram partition: phrase m of a sentence of length L starts at m * n
 * with length min(n, L - m * n) (0 past the end); count min(ceil(L/n), m_cap). */
static void test_ngram_spans(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops));
    static const int32_t lens[] = {7, 1, 0, 5, 12, 8, -3};
    const uint32_t n_sent = NMT_ARRAY_LEN(lens), m_cap = 4;
    const size_t o_len = 1, o_seg = 3, o_cnt = 2, n_seg = o_seg + (size_t)n_sent * m_cap * 2;
    int32_t len_h[1 + NMT_ARRAY_LEN(lens)];
    len_h[0] = 99;
    memcpy(len_h + o_len, lens, sizeof lens);
    cl_mem dl = nmt_test_upload_i32(e->dev, len_h, o_len + n_sent);
    for (uint32_t n = 1; n <= 3; n++) {
        int32_t *fill = malloc(sizeof(int32_t) * n_seg);
        assert_non_null(fill);
        for (size_t i = 0; i < n_seg; i++) fill[i] = -777;
        cl_mem ds = nmt_test_upload_i32(e->dev, fill, n_seg), dc = nmt_test_upload_i32(e->dev, fill, o_cnt + n_sent);
        nmt_test_assert_ok(e->dev,
                           nmt_op_ngram_spans(&e->ops, B(dl, o_len), n_sent, n, m_cap, B(ds, o_seg), B(dc, o_cnt)));
        int32_t *seg = malloc(sizeof(int32_t) * n_seg), cnt[16];
        assert_non_null(seg);
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, ds, 0, sizeof(int32_t) * n_seg, seg));
        nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dc, 0, sizeof(int32_t) * (o_cnt + n_sent), cnt));
        for (size_t i = 0; i < o_seg; i++) assert_int_equal(seg[i], -777);
        for (size_t i = 0; i < o_cnt; i++) assert_int_equal(cnt[i], -777);
        for (uint32_t b = 0; b < n_sent; b++) {
            const int32_t L = lens[b] < 0 ? 0 : lens[b];
            int32_t want_cnt = (L + (int32_t)n - 1) / (int32_t)n;
            if (want_cnt > (int32_t)m_cap) want_cnt = (int32_t)m_cap;
            assert_int_equal(cnt[o_cnt + b], want_cnt);
            for (uint32_t m = 0; m < m_cap; m++) {
                const int32_t start = (int32_t)(m * n), rest = L - start;
                const int32_t want_len = rest <= 0 ? 0 : rest < (int32_t)n ? rest : (int32_t)n;
                const size_t at = o_seg + ((size_t)b * m_cap + m) * 2;
                if (seg[at] != start || seg[at + 1] != want_len)
                    fail_msg("n %u sentence %u phrase %u: (%d, %d), want (%d, %d)", n, b, m, seg[at], seg[at + 1],
                             start, want_len);
            }
        }
        free(seg);
        free(fill);
        nmt_test_release(ds);
        nmt_test_release(dc);
    }
    assert_int_equal(nmt_op_ngram_spans(&e->ops, B(dl, 0), n_sent, 0, m_cap, B(dl, 0), B(dl, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_ngram_spans(&e->ops, B(dl, 0), n_sent, 65, m_cap, B(dl, 0), B(dl, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_ngram_spans(&e->ops, B(dl, 0), n_sent, 2, m_cap, NONE, B(dl, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    nmt_test_release(dl);
}

/* Phrases as sequences: P rows r * T + t are the span's tokens (zero past
 * it) and count[r] its length; G[r] the row of its last token; the
 * backward scatters exactly back.  Spans of length up to 4: T = 5 leaves
 * a zero row after every phrase. */
static void test_span_ops(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops));
    const uint32_t d = 6, ld_x = 9, T = 5, rows = N_SENT * M_CAP, ld_h = 8, ld_g = 7;
    const size_t ox = 2, nx = ox + (size_t)N_SENT * N_CAP * ld_x, np = (size_t)rows * T * d;
    nmt_test_rng r = nmt_test_rng_make(73);
    float *x = host_block(&r, nx, ox, N_SENT * N_CAP, d, ld_x, -2, 2);
    cl_mem dx = nmt_test_upload_f32(e->dev, x, nx), ds = nmt_test_upload_i32(e->dev, spans, rows * 2);
    cl_mem dp = nmt_test_buffer_f32_fill(e->dev, np, NAN), dc = nmt_test_buffer(e->dev, sizeof(int32_t) * rows, NULL);
    nmt_test_assert_ok(e->dev, nmt_op_span_tokens(&e->ops, B(dx, ox), ld_x, N_CAP, B(ds, 0), N_SENT, M_CAP, T, d,
                                                  B(dp, 0), B(dc, 0)));
    float *p = download(e, dp, np);
    int32_t cnt[N_SENT * M_CAP];
    nmt_test_assert_ok(e->dev, nmt_device_read(e->dev, dc, 0, sizeof cnt, cnt));
    for (uint32_t q = 0; q < rows; q++) {
        const uint32_t b = q / M_CAP;
        const int32_t start = spans[2 * q], len = spans[2 * q + 1];
        assert_int_equal(cnt[q], len);
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t c = 0; c < d; c++) {
                const float want = (int32_t)t < len ? x[ox + ((size_t)b * N_CAP + start + t) * ld_x + c] : 0.0f;
                assert_memory_equal(&p[((size_t)q * T + t) * d + c], &want, sizeof want);
            }
    }
    /* the last state of each phrase */
    const size_t nh = (size_t)rows * T * ld_h, ng = 1 + (size_t)rows * ld_g;
    float *h = host_block(&r, nh, 0, rows * T, d, ld_h, -1, 1);
    cl_mem dh = nmt_test_upload_f32(e->dev, h, nh), dg = nmt_test_buffer_f32_fill(e->dev, ng, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_span_last(&e->ops, B(dh, 0), ld_h, B(ds, 0), rows, T, d, B(dg, 1), ld_g));
    float *g = download(e, dg, ng);
    for (uint32_t q = 0; q < rows; q++) {
        const int32_t len = spans[2 * q + 1];
        for (uint32_t c = 0; c < d; c++) {
            const float want = len > 0 ? h[((size_t)q * T + len - 1) * ld_h + c] : 0.0f;
            assert_memory_equal(&g[1 + (size_t)q * ld_g + c], &want, sizeof want);
        }
    }
    /* backward: dh = dg at the last token only; dx += the tokens' rows */
    float *wg = host_block(&r, ng, 1, rows, d, ld_g, -1, 1);
    cl_mem ddg = nmt_test_upload_f32(e->dev, wg, ng), ddh = nmt_test_buffer_f32_fill(e->dev, nh, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_span_last_bwd(&e->t, B(ddg, 1), ld_g, B(ds, 0), rows, T, d, B(ddh, 0), ld_h));
    float *gh = download(e, ddh, nh);
    for (uint32_t q = 0; q < rows; q++)
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t c = 0; c < d; c++) {
                const float want = (int32_t)t == spans[2 * q + 1] - 1 ? wg[1 + (size_t)q * ld_g + c] : 0.0f;
                assert_memory_equal(&gh[((size_t)q * T + t) * ld_h + c], &want, sizeof want);
            }
    float *base = host_block(&r, nx, ox, N_SENT * N_CAP, d, ld_x, -1, 1);
    cl_mem ddx = nmt_test_upload_f32(e->dev, base, nx), ddp = nmt_test_upload_f32(e->dev, p, np);
    nmt_test_assert_ok(e->dev, nmt_op_span_tokens_bwd(&e->t, B(ddp, 0), B(ds, 0), N_SENT, M_CAP, T, d, N_CAP,
                                                      B(ddx, ox), ld_x));
    float *gx = download(e, ddx, nx), *want = malloc(sizeof(float) * nx);
    assert_non_null(want);
    memcpy(want, base, sizeof(float) * nx);
    for (uint32_t q = 0; q < rows; q++) {
        const uint32_t b = q / M_CAP;
        for (int32_t t = 0; t < spans[2 * q + 1]; t++)
            for (uint32_t c = 0; c < d; c++)
                want[ox + ((size_t)b * N_CAP + spans[2 * q] + t) * ld_x + c] += p[((size_t)q * T + t) * d + c];
    }
    assert_memory_equal(gx, want, sizeof(float) * nx); /* NaN padding untouched too */
    /* bad arguments */
    assert_int_equal(nmt_op_span_tokens(&e->ops, B(dx, 0), d - 1, N_CAP, B(ds, 0), N_SENT, M_CAP, T, d, B(dp, 0),
                                        B(dc, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_span_tokens(&e->ops, B(dx, 0), ld_x, N_CAP, B(ds, 0), N_SENT, M_CAP, 0, d, B(dp, 0),
                                        B(dc, 0)),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_span_last(&e->ops, B(dh, 0), ld_h, NONE, rows, T, d, B(dg, 0), ld_g),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_span_last_bwd(&e->t, B(ddg, 0), d - 1, B(ds, 0), rows, T, d, B(ddh, 0), ld_h),
                     NMT_ERR_INVALID_ARGUMENT);
    assert_int_equal(nmt_op_span_tokens_bwd(&e->t, B(ddp, 0), B(ds, 0), N_SENT, M_CAP, T, d, N_CAP, NONE, ld_x),
                     NMT_ERR_INVALID_ARGUMENT);
    cl_mem rel[] = {dx, ds, dp, dc, dh, dg, ddg, ddh, ddx, ddp};
    for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
    free(x), free(p), free(h), free(g), free(wg), free(gh), free(base), free(gx), free(want);
}

/* ---- 1-D convolution over positions ------------------------------------ */

#define CV_SEQ 3u
#define CV_CAP 7u
#define CV_IN 5u
#define CV_OUT 4u
static const int32_t cv_len[CV_SEQ] = {7, 4, 0};

typedef struct conv_ref {
    uint32_t n, stride, pad, t_out;
    const double *x;  /* [CV_SEQ * CV_CAP, CV_IN] */
    const double *w;  /* [CV_OUT, n * CV_IN] */
    const double *b;  /* [CV_OUT] */
    const double *wl; /* [CV_SEQ * t_out, CV_OUT] loss weights */
} conv_ref;

static void ref_conv(const conv_ref *c, double *out) {
    for (uint32_t s = 0; s < CV_SEQ; s++)
        for (uint32_t t = 0; t < c->t_out; t++)
            for (uint32_t o = 0; o < CV_OUT; o++) {
                double acc = c->b[o];
                for (uint32_t i = 0; i < c->n; i++) {
                    const int64_t p = (int64_t)t * c->stride + i - c->pad;
                    if (p < 0 || p >= cv_len[s]) continue;
                    for (uint32_t k = 0; k < CV_IN; k++)
                        acc += c->w[(size_t)o * c->n * CV_IN + i * CV_IN + k] * c->x[((size_t)s * CV_CAP + p) * CV_IN + k];
                }
                out[((size_t)s * c->t_out + t) * CV_OUT + o] = acc;
            }
}

static double conv_loss(void *ctx, int *skip) {
    const conv_ref *c = ctx;
    *skip = 0;
    double *out = malloc(sizeof(double) * CV_SEQ * c->t_out * CV_OUT), l = 0;
    assert_non_null(out);
    ref_conv(c, out);
    for (size_t i = 0; i < (size_t)CV_SEQ * c->t_out * CV_OUT; i++) l += c->wl[i] * out[i];
    free(out);
    return l;
}

/* Homogeneous n-gram keys (left-padded, stride 1), the interleaved
 * encoder's window 3 stride 2 over a padded sequence, and window 2 stride 2. */
static void test_conv1d(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops));
    static const uint32_t cases[][4] = {{2, 1, 1, CV_CAP}, {3, 2, 1, 4}, {2, 2, 0, 3}, {1, 1, 0, CV_CAP}};
    const uint32_t ld_x = CV_IN + 1, ld_out = CV_OUT + 2;
    const size_t ox = 1, nx = ox + (size_t)CV_SEQ * CV_CAP * ld_x;
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(cases); ci++) {
        const uint32_t n = cases[ci][0], stride = cases[ci][1], pad = cases[ci][2], T = cases[ci][3];
        const uint32_t K = n * CV_IN, rows = CV_SEQ * T;
        nmt_test_rng r = nmt_test_rng_make(80 + ci);
        float *x = host_block(&r, nx, ox, CV_SEQ * CV_CAP, CV_IN, ld_x, -1, 1);
        for (size_t i = 0; i < nx; i++)
            if (isnan(x[i])) x[i] = 9.0f; /* stride padding: finite, never read */
        float *w = host_block(&r, (size_t)CV_OUT * K, 0, CV_OUT, K, K, -1, 1);
        float *bb = host_block(&r, CV_OUT, 0, 1, CV_OUT, CV_OUT, -1, 1);
        cl_mem dx = nmt_test_upload_f32(e->dev, x, nx), dl = nmt_test_upload_i32(e->dev, cv_len, CV_SEQ);
        cl_mem dw = nmt_test_upload_f32(e->dev, w, (size_t)CV_OUT * K), db = nmt_test_upload_f32(e->dev, bb, CV_OUT);
        cl_mem dcols = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * K, NAN);
        cl_mem dout = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * ld_out, NAN);
        const nmt_lin lw = {.w = B(dw, 0), .b = B(db, 0)};
        nmt_test_assert_ok(e->dev, nmt_layer_conv1d(&e->ops, B(dx, ox), ld_x, CV_CAP, B(dl, 0), CV_SEQ, T, n, stride,
                                                    pad, CV_IN, &lw, CV_OUT, B(dcols, 0), B(dout, 0), ld_out));
        float *got = download(e, dout, (size_t)rows * ld_out);
        double *xd = malloc(sizeof(double) * CV_SEQ * CV_CAP * CV_IN);
        assert_non_null(xd);
        for (uint32_t q = 0; q < CV_SEQ * CV_CAP; q++)
            for (uint32_t k = 0; k < CV_IN; k++) xd[(size_t)q * CV_IN + k] = x[ox + (size_t)q * ld_x + k];
        double *wd = widen(w, (size_t)CV_OUT * K), *bd = widen(bb, CV_OUT);
        double *want = malloc(sizeof(double) * rows * CV_OUT);
        assert_non_null(want);
        conv_ref c = {n, stride, pad, T, xd, wd, bd, NULL};
        ref_conv(&c, want);
        float *wantf = nan_f32((size_t)rows * ld_out);
        for (uint32_t q = 0; q < rows; q++)
            for (uint32_t o = 0; o < CV_OUT; o++) wantf[(size_t)q * ld_out + o] = (float)want[(size_t)q * CV_OUT + o];
        char what[48];
        snprintf(what, sizeof what, "conv1d n %u stride %u pad %u", n, stride, pad);
        check_block(got, wantf, (size_t)rows * ld_out, 0, rows, CV_OUT, ld_out, TOL, what);

        /* backward: L = sum wl * out */
        float *wl = host_block(&r, (size_t)rows * ld_out, 0, rows, CV_OUT, ld_out, -1, 1);
        float *gx0 = host_block(&r, nx, ox, CV_SEQ * CV_CAP, CV_IN, ld_x, -1, 1);
        float *gw0 = host_block(&r, (size_t)CV_OUT * K, 0, CV_OUT, K, K, -1, 1);
        float *gb0 = host_block(&r, CV_OUT, 0, 1, CV_OUT, CV_OUT, -1, 1);
        cl_mem ddout = nmt_test_upload_f32(e->dev, wl, (size_t)rows * ld_out);
        cl_mem ddcols = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * K, NAN);
        cl_mem ddx = nmt_test_upload_f32(e->dev, gx0, nx), dgw = nmt_test_upload_f32(e->dev, gw0, (size_t)CV_OUT * K);
        cl_mem dgb = nmt_test_upload_f32(e->dev, gb0, CV_OUT);
        nmt_test_assert_ok(e->dev, nmt_layer_conv1d_bwd(&e->ops, &e->t, B(dl, 0), CV_SEQ, CV_CAP, T, n, stride, pad,
                                                        CV_IN, B(dw, 0), CV_OUT, B(dcols, 0), B(ddout, 0), ld_out,
                                                        B(ddcols, 0), B(ddx, ox), ld_x, B(dgw, 0), B(dgb, 0)));
        float *gx = download(e, ddx, nx), *gw = download(e, dgw, (size_t)CV_OUT * K), *gb = download(e, dgb, CV_OUT);
        /* positions past a sequence and the stride padding: untouched (bitwise) */
        for (size_t i = 0; i < nx; i++) {
            const size_t q = i >= ox ? (i - ox) / ld_x : 0, k = i >= ox ? (i - ox) % ld_x : 0;
            if (i < ox || k >= CV_IN || (int32_t)(q % CV_CAP) >= cv_len[q / CV_CAP])
                assert_memory_equal(&gx[i], &gx0[i], sizeof(float));
        }
        float *gxd = malloc(sizeof(float) * CV_SEQ * CV_CAP * CV_IN), *gx0d = malloc(sizeof(float) * CV_SEQ * CV_CAP * CV_IN);
        assert_true(gxd && gx0d);
        for (uint32_t q = 0; q < CV_SEQ * CV_CAP; q++)
            for (uint32_t k = 0; k < CV_IN; k++) {
                gxd[(size_t)q * CV_IN + k] = gx[ox + (size_t)q * ld_x + k];
                gx0d[(size_t)q * CV_IN + k] = gx0[ox + (size_t)q * ld_x + k];
            }
        double *wld = malloc(sizeof(double) * rows * CV_OUT);
        assert_non_null(wld);
        for (uint32_t q = 0; q < rows; q++)
            for (uint32_t o = 0; o < CV_OUT; o++) wld[(size_t)q * CV_OUT + o] = wl[(size_t)q * ld_out + o];
        c.wl = wld;
        snprintf(what, sizeof what, "conv1d dx n %u stride %u", n, stride);
        fd_check(what, conv_loss, &c, xd, (size_t)CV_SEQ * CV_CAP * CV_IN, gxd, gx0d);
        snprintf(what, sizeof what, "conv1d dW n %u stride %u", n, stride);
        fd_check(what, conv_loss, &c, wd, (size_t)CV_OUT * K, gw, gw0);
        snprintf(what, sizeof what, "conv1d db n %u stride %u", n, stride);
        fd_check(what, conv_loss, &c, bd, CV_OUT, gb, gb0);
        if (ci == 0) { /* bad arguments */
            assert_int_equal(nmt_op_window_rows(&e->ops, B(dx, 0), ld_x, CV_CAP, B(dl, 0), CV_SEQ, T, n, 0, pad,
                                                CV_IN, B(dcols, 0), K),
                             NMT_ERR_INVALID_ARGUMENT); /* stride 0 */
            assert_int_equal(nmt_op_window_rows(&e->ops, B(dx, 0), ld_x, CV_CAP, B(dl, 0), CV_SEQ, T, n, 1, pad,
                                                CV_IN, B(dcols, 0), K - 1),
                             NMT_ERR_INVALID_ARGUMENT); /* ld_y < n * d */
            assert_int_equal(nmt_op_window_rows_bwd(&e->t, B(ddcols, 0), K, B(dl, 0), CV_SEQ, CV_CAP, T, n, 1, pad,
                                                    CV_IN, NONE, ld_x),
                             NMT_ERR_INVALID_ARGUMENT); /* no dx */
            /* without lengths every position < n_cap is valid: the same as
             * lengths of n_cap, forward and backward */
            const int32_t full[CV_SEQ] = {CV_CAP, CV_CAP, CV_CAP};
            cl_mem dfull = nmt_test_upload_i32(e->dev, full, CV_SEQ);
            cl_mem y1 = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * K, NAN);
            cl_mem y2 = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * K, NAN);
            nmt_test_assert_ok(e->dev, nmt_op_window_rows(&e->ops, B(dx, ox), ld_x, CV_CAP, B(dfull, 0), CV_SEQ, T, n,
                                                          stride, pad, CV_IN, B(y1, 0), K));
            nmt_test_assert_ok(e->dev, nmt_op_window_rows(&e->ops, B(dx, ox), ld_x, CV_CAP, NONE, CV_SEQ, T, n, stride,
                                                          pad, CV_IN, B(y2, 0), K));
            float *a1 = download(e, y1, (size_t)rows * K), *a2 = download(e, y2, (size_t)rows * K);
            assert_memory_equal(a1, a2, sizeof(float) * rows * K);
            cl_mem x1 = nmt_test_upload_f32(e->dev, gx0, nx), x2 = nmt_test_upload_f32(e->dev, gx0, nx);
            nmt_test_assert_ok(e->dev, nmt_op_window_rows_bwd(&e->t, B(ddcols, 0), K, B(dfull, 0), CV_SEQ, CV_CAP, T,
                                                              n, stride, pad, CV_IN, B(x1, ox), ld_x));
            nmt_test_assert_ok(e->dev, nmt_op_window_rows_bwd(&e->t, B(ddcols, 0), K, NONE, CV_SEQ, CV_CAP, T, n,
                                                              stride, pad, CV_IN, B(x2, ox), ld_x));
            float *b1 = download(e, x1, nx), *b2 = download(e, x2, nx);
            assert_memory_equal(b1, b2, sizeof(float) * nx);
            free(a1), free(a2), free(b1), free(b2);
            cl_mem rel0[] = {dfull, y1, y2, x1, x2};
            for (size_t i = 0; i < NMT_ARRAY_LEN(rel0); i++) nmt_test_release(rel0[i]);
        }
        cl_mem rel[] = {dx, dl, dw, db, dcols, dout, ddout, ddcols, ddx, dgw, dgb};
        for (size_t i = 0; i < NMT_ARRAY_LEN(rel); i++) nmt_test_release(rel[i]);
        free(x), free(w), free(bb), free(got), free(xd), free(wd), free(bd), free(want), free(wantf);
        free(wl), free(gx0), free(gw0), free(gb0), free(gx), free(gw), free(gb), free(gxd), free(gx0d), free(wld);
    }
}

/* ---- phrase-based attention (nmt_op_pattn and its backward) ----------- */

#define PA_H 2u
#define PA_DH 3u
#define PA_W (PA_H * PA_DH)
#define PA_LK 6u
#define PA_MAXQ 6u
#define PA_MAXS 4u

/* One case: shapes, masks and per segment whether it has q and how many
 * extra taps; the tensors live in double arrays the FD checker perturbs. */
typedef struct pa_case {
    uint32_t n_seq, lq, q_pos0, group, causal, n_segs;
    int32_t key_len[PA_MAXS];
    uint32_t has_q[2], n_ext[2], lo[2];
    uint32_t q_lo;
} pa_case;

typedef struct pa_ref {
    const pa_case *c;
    double *q[2], *qx[2], *k[2], *v[2]; /* dense: q (rows, W), qx (rows, n_ext W), k / v (n_kv * LK, W) */
    const double *wl;                   /* (rows, W) loss weights */
} pa_ref;

static uint32_t pa_nwin(const pa_case *c, uint32_t g) { return c->n_ext[g] + c->has_q[g]; }
static uint32_t pa_nkv(const pa_case *c) { return (c->n_seq + c->group - 1) / c->group; }

static void ref_pattn(const pa_ref *r, double *out) {
    const pa_case *c = r->c;
    const uint32_t L = PA_LK * c->n_segs;
    double sc[PA_LK * 2];
    int ok[PA_LK * 2];
    for (uint32_t s = 0; s < c->n_seq; s++)
        for (uint32_t h = 0; h < PA_H; h++)
            for (uint32_t i = 0; i < c->lq; i++) {
                const uint32_t m = s / c->group, row = s * c->lq + i;
                const int pos = (int)(c->q_pos0 + i);
                double mx = -INFINITY;
                for (uint32_t g = 0; g < c->n_segs; g++) {
                    const uint32_t nw = pa_nwin(c, g), ne = c->n_ext[g];
                    for (uint32_t j = 0; j < PA_LK; j++) {
                        const uint32_t col = g * PA_LK + j;
                        ok[col] = (int)j >= (int)c->lo[g] && (int)j < c->key_len[m] && !(c->causal && (int)j > pos) &&
                                  pos >= (int)c->q_lo;
                        double a = 0;
                        for (uint32_t u = 0; u < nw; u++) {
                            const int kr = (int)j - (int)nw + 1 + (int)u;
                            if (kr < 0) continue;
                            for (uint32_t e = 0; e < PA_DH; e++) {
                                const double qv = u < ne ? r->qx[g][(size_t)row * ne * PA_W + (h * ne + u) * PA_DH + e]
                                                         : r->q[g][(size_t)row * PA_W + h * PA_DH + e];
                                a += qv * r->k[g][((size_t)m * PA_LK + (size_t)kr) * PA_W + h * PA_DH + e];
                            }
                        }
                        sc[col] = a / sqrt((double)nw * PA_DH);
                        if (ok[col] && sc[col] > mx) mx = sc[col];
                    }
                }
                double sum = 0;
                for (uint32_t col = 0; col < L; col++) sum += ok[col] ? exp(sc[col] - mx) : 0;
                for (uint32_t e = 0; e < PA_DH; e++) {
                    double acc = 0;
                    for (uint32_t col = 0; col < L; col++)
                        if (ok[col])
                            acc += exp(sc[col] - mx) / sum *
                                   r->v[col / PA_LK][((size_t)m * PA_LK + col % PA_LK) * PA_W + h * PA_DH + e];
                    out[(size_t)row * PA_W + h * PA_DH + e] = acc;
                }
            }
}

static double pa_loss(void *ctx, int *skip) {
    const pa_ref *r = ctx;
    *skip = 0;
    const size_t n = (size_t)r->c->n_seq * r->c->lq * PA_W;
    double *out = malloc(sizeof(double) * n);
    assert_non_null(out);
    ref_pattn(r, out);
    double l = 0;
    for (size_t i = 0; i < n; i++) l += r->wl[i] * out[i];
    free(out);
    return l;
}

/* Dense double (rows, cols) from a float block at off with stride ld. */
static double *pa_dense(const float *x, size_t off, uint32_t rows, uint32_t cols, uint32_t ld) {
    double *d = malloc(sizeof(double) * ((size_t)rows * cols + 1));
    assert_non_null(d);
    for (uint32_t q = 0; q < rows; q++)
        for (uint32_t k = 0; k < cols; k++) d[(size_t)q * cols + k] = x[off + (size_t)q * ld + k];
    return d;
}

/* The fused kernel through a kv_row table: every position's key and value
 * rows of the key sequences permuted (a random permutation per position,
 * into copies with one spare sequence), the table pointing back.  The
 * same keys and values in the same order: `fused`'s result bit for bit.
 * The split kernels refuse a table. */
static void pattn_through_table(env *e, const nmt_pattn_args *a0, const pa_case *c, const float *fused,
                                nmt_test_rng *r) {
    const uint32_t n_kv = pa_nkv(c), n_phys = n_kv + 1, tab_ld = n_phys + 2, otab = 3;
    int32_t *tab = calloc((size_t)otab + (size_t)PA_LK * tab_ld, sizeof(int32_t));
    assert_non_null(tab);
    for (uint32_t p = 0; p < PA_LK; p++) {
        int32_t perm[PA_MAXS + 1];
        for (uint32_t m = 0; m < n_phys; m++) perm[m] = (int32_t)m;
        for (uint32_t m = n_phys - 1; m > 0; m--) { /* Fisher-Yates */
            const uint32_t k = (uint32_t)nmt_test_rng_int(r, 0, (int32_t)m + 1);
            const int32_t x = perm[m];
            perm[m] = perm[k];
            perm[k] = x;
        }
        for (uint32_t m = 0; m < n_kv; m++) tab[otab + (size_t)p * tab_ld + m] = perm[m];
    }
    nmt_pattn_args a = *a0;
    cl_mem mk[PA_MAXS], mv[PA_MAXS];
    for (uint32_t g = 0; g < a.n_segs; g++) {
        nmt_pattn_seg *sg = &a.seg[g];
        /* the copies: sequence tab[p][m] holds sequence m's position p */
        const size_t nk = (size_t)n_phys * sg->k_stride, nv = (size_t)n_phys * sg->v_stride;
        float *src_k = download(e, sg->k.mem, (size_t)n_kv * sg->k_stride);
        float *src_v = download(e, sg->v.mem, (size_t)n_kv * sg->v_stride);
        float *hk = nan_f32(nk), *hv = nan_f32(nv);
        for (uint32_t m = 0; m < n_kv; m++)
            for (uint32_t p = 0; p < PA_LK; p++) {
                const size_t to = (size_t)tab[otab + (size_t)p * tab_ld + m];
                memcpy(hk + to * sg->k_stride + (size_t)p * sg->k_ld, src_k + m * sg->k_stride + (size_t)p * sg->k_ld,
                       sizeof(float) * sg->k_ld);
                memcpy(hv + to * sg->v_stride + (size_t)p * sg->v_ld, src_v + m * sg->v_stride + (size_t)p * sg->v_ld,
                       sizeof(float) * sg->v_ld);
            }
        mk[g] = nmt_test_upload_f32(e->dev, hk, nk);
        mv[g] = nmt_test_upload_f32(e->dev, hv, nv);
        sg->k = B(mk[g], 0);
        sg->v = B(mv[g], 0);
        free(src_k), free(src_v), free(hk), free(hv);
    }
    cl_mem dtab = nmt_test_upload_i32(e->dev, tab, (size_t)otab + (size_t)PA_LK * tab_ld);
    a.kv_row = B(dtab, otab);
    a.kv_row_ld = tab_ld;
    const uint32_t rows = c->n_seq * c->lq;
    const size_t no = (size_t)rows * a.out_ld;
    cl_mem out = nmt_test_buffer_f32_fill(e->dev, no, NAN);
    a.out = B(out, 0);
    e->ops.attn_mode = NMT_ATTN_SPLIT;
    assert_false(nmt_ops_pattn_kv_row(&e->ops, PA_DH));
    assert_int_equal(nmt_op_pattn(&e->ops, &a), NMT_ERR_UNSUPPORTED); /* only the fused kernel reads a table */
    e->ops.attn_mode = NMT_ATTN_AUTO;
    assert_true(nmt_ops_pattn_kv_row(&e->ops, PA_DH));
    nmt_test_assert_ok(e->dev, nmt_op_pattn(&e->ops, &a));
    float *got = download(e, out, no);
    for (size_t i = 0; i < no; i++)
        if (memcmp(&got[i], &fused[i], sizeof(float)) != 0 && !(isnan(got[i]) && isnan(fused[i])))
            fail_msg("pattn through a kv_row table: element %zu is %.9g, without the table %.9g", i, (double)got[i],
                     (double)fused[i]);
    free(got);
    nmt_test_release(out);
    nmt_test_release(dtab);
    for (uint32_t g = 0; g < a.n_segs; g++) nmt_test_release(mk[g]), nmt_test_release(mv[g]);
    free(tab);
}

static void test_pattn(void **state) {
    env *e = *state;
    nmt_test_assert_ok(e->dev, nmt_ops_enable_phrase(&e->ops));
    /* heterogeneous ConvKV-like (two segments of one-tap windows, the second
     * from key 1), homogeneous QueryK-like (3 taps, causal), heterogeneous
     * QueryK-like with beam groups at a decoder step (one query at
     * position 2; a segment without q); queries before q_lo attend to
     * nothing */
    static const pa_case cases[] = {
        {3, 5, 0, 1, 0, 2, {6, 3, 1, 0}, {1, 1}, {0, 0}, {0, 1}, 0},
        {2, 6, 0, 1, 1, 1, {6, 6, 0, 0}, {1, 0}, {2, 0}, {0, 0}, 2},
        {4, 1, 2, 2, 1, 2, {3, 2, 0, 0}, {1, 0}, {0, 2}, {0, 1}, 1},
    };
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(cases); ci++) {
        const pa_case *c = &cases[ci];
        const uint32_t rows = c->n_seq * c->lq, n_kv = pa_nkv(c), krows = n_kv * PA_LK;
        const uint32_t q_ld = PA_W + 1, kv_ld = PA_W + 2, out_ld = PA_W + 1;
        nmt_test_rng r = nmt_test_rng_make(300 + ci);
        int32_t kl[PA_MAXS];
        memcpy(kl, c->key_len, sizeof kl);
        cl_mem dkl = nmt_test_upload_i32(e->dev, kl, PA_MAXS);
        nmt_pattn_args a;
        memset(&a, 0, sizeof a);
        a.n_seq = c->n_seq;
        a.lq = c->lq;
        a.q_pos0 = c->q_pos0;
        a.lk_max = PA_LK;
        a.group = c->group;
        a.n_heads = PA_H;
        a.d_head = PA_DH;
        a.key_len = B(dkl, 0);
        a.causal = (int)c->causal;
        a.q_lo = c->q_lo;
        a.n_segs = c->n_segs;
        pa_ref ref = {c, {0}, {0}, {0}, {0}, NULL};
        float *hq[2] = {0}, *hqx[2] = {0}, *hk[2], *hv[2];
        cl_mem mq[2] = {0}, mqx[2] = {0}, mk[2], mv[2];
        for (uint32_t g = 0; g < c->n_segs; g++) {
            nmt_pattn_seg *sg = &a.seg[g];
            const uint32_t ne = c->n_ext[g];
            if (c->has_q[g]) {
                hq[g] = host_block(&r, (size_t)rows * q_ld + 1, 1, rows, PA_W, q_ld, -1, 1);
                mq[g] = nmt_test_upload_f32(e->dev, hq[g], (size_t)rows * q_ld + 1);
                sg->q = B(mq[g], 1);
                sg->q_ld = q_ld;
                ref.q[g] = pa_dense(hq[g], 1, rows, PA_W, q_ld);
            }
            if (ne) {
                hqx[g] = host_block(&r, (size_t)rows * ne * PA_W, 0, rows, ne * PA_W, ne * PA_W, -1, 1);
                mqx[g] = nmt_test_upload_f32(e->dev, hqx[g], (size_t)rows * ne * PA_W);
                sg->qx = B(mqx[g], 0);
                sg->qx_ld = ne * PA_W;
                sg->n_ext = ne;
                ref.qx[g] = pa_dense(hqx[g], 0, rows, ne * PA_W, ne * PA_W);
            }
            /* key rows past a sequence's length stay NaN: never read */
            hk[g] = host_block(&r, (size_t)krows * kv_ld, 0, krows, PA_W, kv_ld, -1, 1);
            hv[g] = host_block(&r, (size_t)krows * kv_ld, 0, krows, PA_W, kv_ld, -1, 1);
            for (uint32_t q = 0; q < krows; q++)
                if ((int32_t)(q % PA_LK) >= kl[q / PA_LK])
                    for (uint32_t k = 0; k < PA_W; k++) hv[g][(size_t)q * kv_ld + k] = NAN;
            mk[g] = nmt_test_upload_f32(e->dev, hk[g], (size_t)krows * kv_ld);
            mv[g] = nmt_test_upload_f32(e->dev, hv[g], (size_t)krows * kv_ld);
            sg->k = B(mk[g], 0);
            sg->v = B(mv[g], 0);
            sg->k_ld = sg->v_ld = kv_ld;
            sg->k_stride = sg->v_stride = (uint64_t)PA_LK * kv_ld;
            sg->lo = c->lo[g];
            ref.k[g] = pa_dense(hk[g], 0, krows, PA_W, kv_ld);
            ref.v[g] = pa_dense(hv[g], 0, krows, PA_W, kv_ld);
            for (size_t i = 0; i < (size_t)krows * PA_W; i++)
                if (isnan(ref.v[g][i])) ref.v[g][i] = 0; /* masked: weight 0 in the reference */
        }
        const size_t np = (size_t)rows * PA_H * c->n_segs * PA_LK;
        cl_mem dp = nmt_test_buffer_f32_fill(e->dev, np, NAN);
        cl_mem dout = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * out_ld, NAN);
        a.p = B(dp, 0);
        a.out = B(dout, 0);
        a.out_ld = out_ld;
        double *want = malloc(sizeof(double) * rows * PA_W);
        assert_non_null(want);
        ref_pattn(&ref, want);
        float *wantf = nan_f32((size_t)rows * out_ld);
        for (uint32_t q = 0; q < rows; q++)
            for (uint32_t k = 0; k < PA_W; k++) wantf[(size_t)q * out_ld + k] = (float)want[(size_t)q * PA_W + k];
        char what[64];
        float *got = NULL;
        for (int mode = 0; mode < 2; mode++) { /* the split kernels (d_head > 128), then the fused one */
            e->ops.attn_mode = mode ? NMT_ATTN_AUTO : NMT_ATTN_SPLIT;
            cl_mem fresh = nmt_test_buffer_f32_fill(e->dev, (size_t)rows * out_ld, NAN);
            a.out = B(fresh, 0);
            nmt_test_assert_ok(e->dev, nmt_op_pattn(&e->ops, &a));
            free(got);
            got = download(e, fresh, (size_t)rows * out_ld);
            nmt_test_release(fresh);
            snprintf(what, sizeof what, "pattn case %zu (%s)", ci, mode ? "fused" : "split");
            check_block(got, wantf, (size_t)rows * out_ld, 0, rows, PA_W, out_ld, TOL, what);
        }
        pattn_through_table(e, &a, c, got, &r);
        a.out = B(dout, 0);

        /* backward: L = sum wl * out; gradients added onto random bases */
        float *wl = host_block(&r, (size_t)rows * out_ld, 0, rows, PA_W, out_ld, -1, 1);
        cl_mem ddo = nmt_test_upload_f32(e->dev, wl, (size_t)rows * out_ld);
        cl_mem dds = nmt_test_buffer_f32_fill(e->dev, np, NAN);
        nmt_pattn_bwd_args b;
        memset(&b, 0, sizeof b);
        b.fwd = a;
        b.d_out = B(ddo, 0);
        b.d_out_ld = out_ld;
        b.ds = B(dds, 0);
        float *g0q[2] = {0}, *g0x[2] = {0}, *g0k[2], *g0v[2];
        cl_mem gq[2] = {0}, gx[2] = {0}, gk[2], gv[2];
        for (uint32_t g = 0; g < c->n_segs; g++) {
            nmt_pattn_seg *d = &b.grad[g];
            *d = a.seg[g];
            if (c->has_q[g]) {
                g0q[g] = host_block(&r, (size_t)rows * q_ld + 1, 1, rows, PA_W, q_ld, -1, 1);
                gq[g] = nmt_test_upload_f32(e->dev, g0q[g], (size_t)rows * q_ld + 1);
                d->q = B(gq[g], 1);
            }
            if (c->n_ext[g]) {
                const size_t nx = (size_t)rows * c->n_ext[g] * PA_W;
                g0x[g] = host_block(&r, nx, 0, rows, c->n_ext[g] * PA_W, c->n_ext[g] * PA_W, -1, 1);
                gx[g] = nmt_test_upload_f32(e->dev, g0x[g], nx);
                d->qx = B(gx[g], 0);
            }
            g0k[g] = host_block(&r, (size_t)krows * kv_ld, 0, krows, PA_W, kv_ld, -1, 1);
            g0v[g] = host_block(&r, (size_t)krows * kv_ld, 0, krows, PA_W, kv_ld, -1, 1);
            gk[g] = nmt_test_upload_f32(e->dev, g0k[g], (size_t)krows * kv_ld);
            gv[g] = nmt_test_upload_f32(e->dev, g0v[g], (size_t)krows * kv_ld);
            d->k = B(gk[g], 0);
            d->v = B(gv[g], 0);
        }
        nmt_test_assert_ok(e->dev, nmt_op_pattn_bwd(&e->t, &b));
        double *wld = pa_dense(wl, 0, rows, PA_W, out_ld);
        ref.wl = wld;
        for (uint32_t g = 0; g < c->n_segs; g++) {
            if (c->has_q[g]) {
                float *gg = download(e, gq[g], (size_t)rows * q_ld + 1);
                float *gd = malloc(sizeof(float) * rows * PA_W), *bd = malloc(sizeof(float) * rows * PA_W);
                assert_true(gd && bd);
                for (uint32_t q = 0; q < rows; q++)
                    for (uint32_t k = 0; k < PA_W; k++) {
                        gd[(size_t)q * PA_W + k] = gg[1 + (size_t)q * q_ld + k];
                        bd[(size_t)q * PA_W + k] = g0q[g][1 + (size_t)q * q_ld + k];
                    }
                snprintf(what, sizeof what, "pattn case %zu dq seg %u", ci, g);
                fd_check(what, pa_loss, &ref, ref.q[g], (size_t)rows * PA_W, gd, bd);
                free(gg);
                free(gd);
                free(bd);
            }
            if (c->n_ext[g]) {
                const size_t nx = (size_t)rows * c->n_ext[g] * PA_W;
                float *gg = download(e, gx[g], nx);
                snprintf(what, sizeof what, "pattn case %zu dqx seg %u", ci, g);
                fd_check(what, pa_loss, &ref, ref.qx[g], nx, gg, g0x[g]);
                free(gg);
            }
            for (int kv = 0; kv < 2; kv++) {
                float *gg = download(e, kv ? gv[g] : gk[g], (size_t)krows * kv_ld);
                const float *base = kv ? g0v[g] : g0k[g];
                float *gd = malloc(sizeof(float) * krows * PA_W), *bd = malloc(sizeof(float) * krows * PA_W);
                assert_true(gd && bd);
                for (uint32_t q = 0; q < krows; q++)
                    for (uint32_t k = 0; k < PA_W; k++) {
                        gd[(size_t)q * PA_W + k] = gg[(size_t)q * kv_ld + k];
                        bd[(size_t)q * PA_W + k] = base[(size_t)q * kv_ld + k];
                    }
                snprintf(what, sizeof what, "pattn case %zu d%s seg %u", ci, kv ? "v" : "k", g);
                fd_check(what, pa_loss, &ref, kv ? ref.v[g] : ref.k[g], (size_t)krows * PA_W, gd, bd);
                free(gg);
                free(gd);
                free(bd);
            }
        }
        if (ci == 0) { /* bad arguments */
            nmt_pattn_args bad = a;
            bad.n_segs = NMT_PATTN_MAX_SEG + 1;
            assert_int_equal(nmt_op_pattn(&e->ops, &bad), NMT_ERR_INVALID_ARGUMENT);
            bad = a;
            bad.seg[0].k_ld = PA_W - 1;
            assert_int_equal(nmt_op_pattn(&e->ops, &bad), NMT_ERR_INVALID_ARGUMENT);
            bad = a;
            bad.group = 0;
            assert_int_equal(nmt_op_pattn(&e->ops, &bad), NMT_ERR_INVALID_ARGUMENT);
            nmt_pattn_bwd_args bb = b;
            bb.grad[1].k = NONE;
            assert_int_equal(nmt_op_pattn_bwd(&e->t, &bb), NMT_ERR_INVALID_ARGUMENT);
        }
        for (uint32_t g = 0; g < c->n_segs; g++) {
            free(hq[g]);
            free(hqx[g]);
            free(hk[g]);
            free(hv[g]);
            free(ref.q[g]);
            free(ref.qx[g]);
            free(ref.k[g]);
            free(ref.v[g]);
            free(g0q[g]);
            free(g0x[g]);
            free(g0k[g]);
            free(g0v[g]);
            if (mq[g]) nmt_test_release(mq[g]);
            if (mqx[g]) nmt_test_release(mqx[g]);
            if (gq[g]) nmt_test_release(gq[g]);
            if (gx[g]) nmt_test_release(gx[g]);
            nmt_test_release(mk[g]);
            nmt_test_release(mv[g]);
            nmt_test_release(gk[g]);
            nmt_test_release(gv[g]);
        }
        nmt_test_release(dkl);
        nmt_test_release(dp);
        nmt_test_release(dout);
        nmt_test_release(ddo);
        nmt_test_release(dds);
        free(got);
        free(want);
        free(wantf);
        free(wl);
        free(wld);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_spans),
        cmocka_unit_test(test_segment_max),
        cmocka_unit_test(test_segment_max_bwd),
        cmocka_unit_test(test_span_ops),
        cmocka_unit_test(test_conv1d),
        cmocka_unit_test(test_pattn),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
