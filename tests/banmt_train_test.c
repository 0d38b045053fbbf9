/* SPDX-License-Identifier: MIT */
/* banmt_train_test.c — the BA-NMT trainer (train/families/banmt/banmt_train*.c):
 *   - its new backward kernels (ops_train.h nmt_op_act_rows_bwd: tanh from
 *     the input or the output, maxout; nmt_op_weighted_rows_bwd) against
 *     central finite differences;
 *   - the whole model's gradient (none / sa / ta / ba, maxout) against
 *     central differences of the double reference's loss
 *     (tests/ref_banmt.c) over a padded batch;
 *   - the trainer's log-probabilities equal nmt_session_score on the
 *     exported model before and after Adam steps (with readout dropout);
 *   - the activation plan grows as O(B * T * S * hist) and its cap refuses
 *     a model that would not fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "banmt_cfg.h"
#include "banmt_train.h"
#include "family_common.h"
#include "family_writer.h"
#include "nmt_writer.h"
#include "ops_common.h"
#include "ref_banmt.h"
#include "train_model.h"

/* ---- 1. the backward kernels ------------------------------------------- */

#define AR_ROWS 5u
#define AR_N 7u

typedef struct act_ctx {
    double *x; /* rows x (2n or n) */
    const float *sign;
    int mode;
} act_ctx;

static double act_loss(void *ctx, int *skip) {
    act_ctx *c = ctx;
    *skip = 0;
    double s = 0.0;
    for (uint32_t r = 0; r < AR_ROWS; r++)
        for (uint32_t j = 0; j < AR_N; j++) {
            double y;
            if (c->mode == NMT_ACT_BWD_MAXOUT) {
                const double a = c->x[r * 2 * AR_N + 2 * j], b = c->x[r * 2 * AR_N + 2 * j + 1];
                if (fabs(a - b) < 2.5 * FD_H) *skip = 1; /* a perturbation would cross the kink */
                y = fmax(a, b);
            } else {
                y = tanh(c->x[r * AR_N + j]);
            }
            s += c->sign[r * AR_N + j] * y;
        }
    return s;
}

static void test_act_rows_bwd(void **state) {
    env *e = *state;
    assert_non_null(e->t.k_act_rows_bwd);
    const int modes[2] = {NMT_ACT_BWD_TANH_IN, NMT_ACT_BWD_MAXOUT};
    for (int mi = 0; mi < 2; mi++) {
        const int mode = modes[mi];
        const uint32_t w = mode == NMT_ACT_BWD_MAXOUT ? 2 * AR_N : AR_N, ldx = w + 3, ldy = AR_N + 2, ldd = w + 1;
        nmt_test_rng r = nmt_test_rng_make(900 + (uint64_t)mi);
        float x[AR_ROWS * (2 * AR_N + 3)], dy[AR_ROWS * (AR_N + 2)], sign[AR_ROWS * AR_N];
        double xd[AR_ROWS * 2 * AR_N];
        for (size_t i = 0; i < NMT_ARRAY_LEN(x); i++) x[i] = nmt_test_rng_uniform(&r, -1.5f, 1.5f);
        for (uint32_t i = 0; i < AR_ROWS; i++) {
            for (uint32_t j = 0; j < w; j++) xd[i * w + j] = x[i * ldx + j];
            for (uint32_t j = 0; j < AR_N; j++) {
                sign[i * AR_N + j] = nmt_test_rng_uniform(&r, -1.0f, 1.0f);
                dy[i * ldy + j] = sign[i * AR_N + j];
            }
        }
        cl_mem dx_m = nmt_test_upload_f32(e->dev, x, AR_ROWS * ldx);
        cl_mem ddy = nmt_test_upload_f32(e->dev, dy, AR_ROWS * ldy);
        cl_mem ddx = nmt_test_buffer_f32_fill(e->dev, (size_t)AR_ROWS * ldd, NAN);
        nmt_test_assert_ok(e->dev, nmt_op_act_rows_bwd(&e->t, B(dx_m, 0), ldx, B(ddy, 0), ldy, AR_ROWS, AR_N, mode,
                                                       B(ddx, 0), ldd));
        float *g = download(e, ddx, (size_t)AR_ROWS * ldd), gd[AR_ROWS * 2 * AR_N];
        for (uint32_t i = 0; i < AR_ROWS; i++) {
            for (uint32_t j = 0; j < w; j++) gd[i * w + j] = g[i * ldd + j];
            assert_true(isnan(g[i * ldd + w])); /* past the row: untouched */
        }
        act_ctx c = {xd, sign, mode};
        fd_check(mode == NMT_ACT_BWD_MAXOUT ? "act_rows_bwd maxout" : "act_rows_bwd tanh", act_loss, &c, xd,
                 (size_t)AR_ROWS * w, gd, NULL);
        /* TANH_OUT: the same gradient from tanh's output */
        if (mode == NMT_ACT_BWD_TANH_IN) {
            float y[AR_ROWS * (2 * AR_N + 3)];
            for (size_t i = 0; i < NMT_ARRAY_LEN(y); i++) y[i] = tanhf(x[i]);
            cl_mem dym = nmt_test_upload_f32(e->dev, y, AR_ROWS * ldx);
            cl_mem d2 = nmt_test_buffer_f32_fill(e->dev, (size_t)AR_ROWS * ldd, NAN);
            nmt_test_assert_ok(e->dev, nmt_op_act_rows_bwd(&e->t, B(dym, 0), ldx, B(ddy, 0), ldy, AR_ROWS, AR_N,
                                                           NMT_ACT_BWD_TANH_OUT, B(d2, 0), ldd));
            float *g2 = download(e, d2, (size_t)AR_ROWS * ldd);
            for (uint32_t i = 0; i < AR_ROWS; i++)
                for (uint32_t j = 0; j < AR_N; j++) assert_true(fabsf(g2[i * ldd + j] - g[i * ldd + j]) < 1e-5f);
            free(g2);
            nmt_test_release(dym);
            nmt_test_release(d2);
        }
        assert_int_equal(nmt_op_act_rows_bwd(&e->t, B(dx_m, 0), w - 1, B(ddy, 0), ldy, AR_ROWS, AR_N, mode,
                                             B(ddx, 0), ldd),
                         NMT_ERR_INVALID_ARGUMENT);
        assert_int_equal(nmt_op_act_rows_bwd(&e->t, B(dx_m, 0), ldx, B(ddy, 0), ldy, AR_ROWS, AR_N, 0, B(ddx, 0), ldd),
                         NMT_ERR_INVALID_ARGUMENT);
        free(g);
        nmt_test_release(dx_m);
        nmt_test_release(ddy);
        nmt_test_release(ddx);
    }
}

#define WR_B 3u
#define WR_S 5u
#define WR_N 4u

typedef struct wr_ctx {
    double *x, *a;
    const float *sign;
} wr_ctx;

static double wr_loss(void *ctx, int *skip) {
    wr_ctx *c = ctx;
    *skip = 0;
    double s = 0.0;
    for (uint32_t b = 0; b < WR_B; b++)
        for (uint32_t k = 0; k < WR_N; k++) {
            double o = 0.0;
            for (uint32_t j = 0; j < WR_S; j++) o += c->a[b * WR_S + j] * c->x[(b * WR_S + j) * WR_N + k];
            s += c->sign[b * WR_N + k] * o;
        }
    return s;
}

static void test_weighted_rows_bwd(void **state) {
    env *e = *state;
    enum { LDX = WR_N + 2, LDA = WR_S + 1, LDO = WR_N + 3 };
    nmt_test_rng r = nmt_test_rng_make(910);
    float x[WR_B * WR_S * LDX], a[WR_B * LDA], dout[WR_B * LDO], sign[WR_B * WR_N];
    float dx0[WR_B * WR_S * LDX], da0[WR_B * LDA];
    double xd[WR_B * WR_S * WR_N], ad[WR_B * WR_S];
    for (size_t i = 0; i < NMT_ARRAY_LEN(x); i++) x[i] = nmt_test_rng_uniform(&r, -1.0f, 1.0f);
    for (size_t i = 0; i < NMT_ARRAY_LEN(a); i++) a[i] = nmt_test_rng_uniform(&r, 0.0f, 1.0f);
    for (size_t i = 0; i < NMT_ARRAY_LEN(dx0); i++) dx0[i] = nmt_test_rng_uniform(&r, -1.0f, 1.0f);
    for (size_t i = 0; i < NMT_ARRAY_LEN(da0); i++) da0[i] = nmt_test_rng_uniform(&r, -1.0f, 1.0f);
    for (uint32_t b = 0; b < WR_B; b++) {
        for (uint32_t k = 0; k < WR_N; k++) dout[b * LDO + k] = sign[b * WR_N + k] = nmt_test_rng_uniform(&r, -1, 1);
        for (uint32_t j = 0; j < WR_S; j++) {
            ad[b * WR_S + j] = a[b * LDA + j];
            for (uint32_t k = 0; k < WR_N; k++) xd[(b * WR_S + j) * WR_N + k] = x[(b * WR_S + j) * LDX + k];
        }
    }
    cl_mem mx = nmt_test_upload_f32(e->dev, x, NMT_ARRAY_LEN(x)), ma = nmt_test_upload_f32(e->dev, a, NMT_ARRAY_LEN(a));
    cl_mem mo = nmt_test_upload_f32(e->dev, dout, NMT_ARRAY_LEN(dout));
    cl_mem mdx = nmt_test_upload_f32(e->dev, dx0, NMT_ARRAY_LEN(dx0));
    cl_mem mda = nmt_test_upload_f32(e->dev, da0, NMT_ARRAY_LEN(da0));
    nmt_test_assert_ok(e->dev, nmt_op_weighted_rows_bwd(&e->t, B(mx, 0), LDX, B(ma, 0), LDA, B(mo, 0), LDO, WR_B, WR_S,
                                                        WR_N, B(mdx, 0), LDX, B(mda, 0), LDA));
    float *gx = download(e, mdx, NMT_ARRAY_LEN(dx0)), *ga = download(e, mda, NMT_ARRAY_LEN(da0));
    float gxd[WR_B * WR_S * WR_N], bxd[WR_B * WR_S * WR_N], gad[WR_B * WR_S], bad[WR_B * WR_S];
    for (uint32_t b = 0; b < WR_B; b++)
        for (uint32_t j = 0; j < WR_S; j++) {
            gad[b * WR_S + j] = ga[b * LDA + j];
            bad[b * WR_S + j] = da0[b * LDA + j];
            for (uint32_t k = 0; k < WR_N; k++) {
                gxd[(b * WR_S + j) * WR_N + k] = gx[(b * WR_S + j) * LDX + k];
                bxd[(b * WR_S + j) * WR_N + k] = dx0[(b * WR_S + j) * LDX + k];
            }
            for (uint32_t k = WR_N; k < LDX; k++) /* past the row: unchanged */
                assert_true(gx[(b * WR_S + j) * LDX + k] == dx0[(b * WR_S + j) * LDX + k]);
        }
    wr_ctx c = {xd, ad, sign};
    fd_check("weighted_rows_bwd dx (accumulated)", wr_loss, &c, xd, NMT_ARRAY_LEN(xd), gxd, bxd);
    fd_check("weighted_rows_bwd dalpha (accumulated)", wr_loss, &c, ad, NMT_ARRAY_LEN(ad), gad, bad);
    assert_int_equal(nmt_op_weighted_rows_bwd(&e->t, B(mx, 0), WR_N - 1, B(ma, 0), LDA, B(mo, 0), LDO, WR_B, WR_S,
                                              WR_N, NONE, 0, B(mda, 0), LDA),
                     NMT_ERR_INVALID_ARGUMENT);
    free(gx);
    free(ga);
    cl_mem ms[] = {mx, ma, mo, mdx, mda};
    for (size_t i = 0; i < NMT_ARRAY_LEN(ms); i++) nmt_test_release(ms[i]);
}

/* ---- 2. the whole model against the double reference ------------------- */

#define VOCAB 13u
#define NS 3u
#define MAXS 5u /* padded source length (EOS included) */
#define MAXT 4u /* padded target length (BOS / EOS included) */
static const int32_t s0[] = {5, 9, 4}, s1[] = {7}, s2[] = {12, 3, 8, 10};
static const int32_t t0[] = {4, 6}, t1[] = {9, 9, 10}, t2[] = {11};
static const int32_t *const srcs[NS] = {s0, s1, s2}, *const tgts[NS] = {t0, t1, t2};
static const uint32_t slen[NS] = {3, 1, 4}, tlen[NS] = {2, 3, 1};

typedef struct tbatch {
    int32_t src[NS * MAXS], tin[NS * MAXT], tout[NS * MAXT];
    uint32_t sl[NS], tl[NS];
    nmt_train_batch b;
} tbatch;

/* The batch in the trainer's conventions (train_model.h), padded with 0. */
static void make_batch(tbatch *tb) {
    memset(tb, 0, sizeof *tb);
    for (uint32_t i = 0; i < NS; i++) {
        for (uint32_t j = 0; j < slen[i]; j++) tb->src[i * MAXS + j] = srcs[i][j];
        tb->src[i * MAXS + slen[i]] = 2; /* EOS */
        tb->sl[i] = slen[i] + 1;
        tb->tin[i * MAXT] = 1; /* BOS */
        for (uint32_t j = 0; j < tlen[i]; j++) {
            tb->tin[i * MAXT + 1 + j] = tgts[i][j];
            tb->tout[i * MAXT + j] = tgts[i][j];
        }
        tb->tout[i * MAXT + tlen[i]] = 2;
        tb->tl[i] = tlen[i] + 1;
    }
    tb->b = (nmt_train_batch){.n_seq = NS, .src_len = MAXS, .tgt_len = MAXT, .src = tb->src, .src_lens = tb->sl,
                              .tgt_in = tb->tin, .tgt_out = tb->tout, .tgt_lens = tb->tl};
}

static void ba_cfg(nmt_ba_cfg *c, int history, int maxout) {
    memset(c, 0, sizeof *c);
    c->src_vocab = c->tgt_vocab = VOCAB;
    c->emb = 6;
    c->hidden = 5;
    c->att = 4;
    c->readout = 4;
    c->hist = 3;
    c->history = history;
    c->maxout = maxout;
    c->bos = 1;
    c->eos = 2;
    c->unk = 3;
    assert_int_equal(nmt_ba_finish(c, 0x70ull | (1ull << 9) | (1ull << 10), NULL, 0), NMT_OK);
}

static void *image(const nmt_ba_cfg *c, uint64_t seed, float scale, size_t *size) {
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    assert_int_equal(nmtw_add_hparams(w, &nmt_family_banmt, c), NMT_OK);
    assert_int_equal(nmtw_add_random_tensors(w, &nmt_family_banmt, c, seed, scale), NMT_OK);
    void *img;
    assert_int_equal(nmtw_write_memory(w, &img, size), NMT_OK);
    nmtw_destroy(w);
    return img;
}

static const nmt_train_limits lim = {.max_seqs = NS, .max_src_len = MAXS, .max_tgt_len = MAXT, .max_tokens = 0};

/* -sum of the reference's sentence scores: the summed NLL. */
static double ref_loss(const void *img, size_t size) {
    nmt_file f;
    assert_int_equal(nmt_file_open(&f, img, size, 0), NMT_OK);
    double l = 0.0;
    for (uint32_t i = 0; i < NS; i++) l -= ref_banmt_score(&f, srcs[i], slen[i], tgts[i], tlen[i]);
    return l;
}

static const char *const hist_names[] = {"none", "sa", "ta", "ba"};

static void test_model_grad(void **state) {
    env *e = *state;
    double worst_all = 0.0;
    for (int v = 0; v < 5; v++) {
        const int history = v < 4 ? v : NMT_BA_BA, maxout = v == 4;
        nmt_ba_cfg c;
        ba_cfg(&c, history, maxout);
        size_t size;
        uint8_t *img = image(&c, 300 + (uint64_t)v, 4.0f, &size);
        ntm_model *m = NULL;
        nmt_test_assert_ok(e->dev, ntm_create(e->dev, img, size, &lim, &m));
        tbatch tb;
        make_batch(&tb);
        const nmt_train_step_opts o = {.dropout = 0.0f, .label_smoothing = 0.0f, .grad_scale = 1.0f, .seed = 1};
        double loss = 0.0, nll = 0.0;
        nmt_test_assert_ok(e->dev, ntm_zero_grad(m));
        nmt_test_assert_ok(e->dev, ntm_forward_backward(m, &tb.b, &o, &loss, &nll));
        const double want = ref_loss(img, size);
        assert_true(fabs(loss - want) < 1e-4 * (1.0 + fabs(want)));
        const size_t np = ntm_n_params(m);
        float *g = malloc(np * sizeof(float));
        assert_non_null(g);
        nmt_test_assert_ok(e->dev, nmt_ba_train_read(ntm_impl(m), NULL, g));
        nmt_file f;
        assert_int_equal(nmt_file_open(&f, img, size, 0), NMT_OK);
        nmt_test_rng r = nmt_test_rng_make(400 + (uint64_t)v);
        double worst = 0.0;
        const char *worst_name = "";
        int n_bad = 0;
        for (uint32_t ti = 0; ti < nmt_ba_train_n_tensors(ntm_impl(m)); ti++) {
            const char *name;
            size_t off, count;
            nmt_ba_train_tensor(ntm_impl(m), ti, &name, &off, &count);
            nmt_tensor_view tv;
            assert_int_equal(nmt_file_find(&f, name, &tv), NMT_OK);
            uint8_t *data = img + ((const uint8_t *)tv.data - img);
            double max_err = 0.0, max_fd = 0.0;
            for (int k = 0; k < 6; k++) {
                const size_t j = (size_t)(nmt_test_rng_uniform(&r, 0.0f, 1.0f) * (float)count) % count;
                float p0, pp, pm;
                memcpy(&p0, data + j * 4, 4);
                pp = p0 + (float)FD_H;
                pm = p0 - (float)FD_H;
                memcpy(data + j * 4, &pp, 4);
                const double lp = ref_loss(img, size);
                memcpy(data + j * 4, &pm, 4);
                const double lm = ref_loss(img, size);
                memcpy(data + j * 4, &p0, 4);
                const double fd = (lp - lm) / ((double)pp - (double)pm);
                max_err = fmax(max_err, fabs((double)g[off + j] - fd));
                max_fd = fmax(max_fd, fabs(fd));
            }
            const double ne = max_err / fmax(max_fd, 1e-4);
            if (ne > worst) {
                worst = ne;
                worst_name = name;
            }
            if (ne > 2e-3) {
                printf("banmt %s%s: %s: normalised gradient error %.3g (max |fd| %.3g)\n", hist_names[history],
                       maxout ? " maxout" : "", name, ne, max_fd);
                n_bad++;
            }
        }
        printf("[ gradcheck ] banmt %-4s%-7s loss %.5f (reference %.5f), worst normalised error %.2e (%s)\n",
               hist_names[history], maxout ? " maxout" : "", loss, want, worst, worst_name);
        worst_all = fmax(worst_all, worst);
        free(g);
        ntm_destroy(m);
        free(img);
        assert_int_equal(n_bad, 0);
    }
    (void)worst_all;
}

/* ---- 3. parity with the runtime ----------------------------------------- */

static void session_scores(env *e, const void *img, size_t isz, float *out) {
    const nmt_limits sl = {.max_src_len = MAXS, .max_tgt_len = MAXT, .max_batch = NS, .max_beam = 1};
    nmt_batch sb = {srcs, slen, NS}, tb = {tgts, tlen, NS};
    family_session_scores(e->dev, img, isz, &sl, &sb, &tb, NULL, NULL, out);
}

/* The trainer's summed log-probabilities of each sentence against the
 * session's scores of the model it exports. */
static void compare_with_session(env *e, ntm_model *m, const tbatch *tb, const char *what) {
    nmtw_writer *w = nmtw_create();
    assert_non_null(w);
    nmt_test_assert_ok(e->dev, ntm_add_to_writer(m, w, 0));
    void *img;
    size_t isz;
    assert_int_equal(nmtw_write_memory(w, &img, &isz), NMT_OK);
    nmtw_destroy(w);
    float lp[NS * MAXT], want[NS];
    nmt_test_assert_ok(e->dev, ntm_token_logprobs(m, &tb->b, lp));
    session_scores(e, img, isz, want);
    for (uint32_t i = 0; i < NS; i++) {
        double sum = 0.0;
        for (uint32_t p = 0; p < MAXT; p++) {
            if (p >= tb->tl[i]) assert_true(lp[i * MAXT + p] == 0.0f);
            sum += lp[i * MAXT + p];
        }
        const double diff = fabs(sum - want[i]);
        printf("[ parity    ] banmt %s sentence %u: trainer %.6f session %.6f diff %.2e\n", what, i, sum,
               (double)want[i], diff);
        assert_true(diff < 1e-4 * (1.0 + fabs((double)want[i])));
    }
    free(img);
}

static void test_session_parity(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    ba_cfg(&c, NMT_BA_BA, 0);
    size_t size;
    void *img = image(&c, 77, 4.0f, &size);
    ntm_model *m = NULL;
    nmt_test_assert_ok(e->dev, ntm_create(e->dev, img, size, &lim, &m));
    assert_ptr_equal(ntm_family(m), nmt_train_family_find("banmt"));
    tbatch tb;
    make_batch(&tb);
    compare_with_session(e, m, &tb, "before");
    /* Adam steps with readout dropout and label smoothing: the loss drops */
    double first = 0.0, last = 0.0;
    for (uint64_t step = 1; step <= 8; step++) {
        nmt_test_assert_ok(e->dev, ntm_zero_grad(m));
        const nmt_train_step_opts o = {.dropout = 0.2f, .label_smoothing = 0.1f, .grad_scale = 1.0f / 9.0f,
                                       .seed = 11 + step};
        double loss;
        nmt_test_assert_ok(e->dev, ntm_forward_backward(m, &tb.b, &o, &loss, NULL));
        if (step == 1) first = loss;
        last = loss;
        nmt_adam_params ap = nmt_adam_defaults();
        ap.lr = 1e-2f;
        ap.beta2 = 0.999f;
        ap.eps = 1e-6f;
        ap.step = step;
        nmt_test_assert_ok(e->dev, ntm_adam_step(m, &ap));
    }
    printf("[ adam      ] banmt ba: loss %.4f -> %.4f over 8 steps\n", first, last);
    assert_true(last < first);
    compare_with_session(e, m, &tb, "after 8 Adam steps");
    ntm_destroy(m);
    free(img);
}

/* ---- 4. the activation plan --------------------------------------------- */

static void test_act_plan(void **state) {
    env *e = *state;
    nmt_ba_cfg c;
    ba_cfg(&c, NMT_BA_BA, 0);
    c.hist = 64; /* the history terms dominate */
    nmt_train_limits a = {.max_seqs = 8, .max_src_len = 16, .max_tgt_len = 16, .max_tokens = 128};
    nmt_train_limits b = a, t = a;
    b.max_tokens = 256; /* twice the sentences */
    b.max_seqs = 16;
    t.max_tgt_len = 32; /* twice the target steps (rows n * T bounded by max_tokens: n halves) */
    t.max_tokens = 256;
    const double ba = (double)nmt_ba_train_act_bytes(&c, &a), bb = (double)nmt_ba_train_act_bytes(&c, &b);
    const double bt = (double)nmt_ba_train_act_bytes(&c, &t);
    printf("[ act plan  ] banmt ba hist 64: %.0f bytes; 2x sentences %.2fx; 2x tokens and target length %.2fx\n", ba,
           bb / ba, bt / ba);
    assert_true(bb / ba > 1.8 && bb / ba < 2.2);
    assert_true(bt / ba > 3.0);
    /* a cap below the plan refuses the model, and one above it accepts it */
    ba_cfg(&c, NMT_BA_BA, 0);
    size_t size;
    void *img = image(&c, 5, 1.0f, &size);
    nmt_train_limits capped = lim;
    capped.max_act_bytes = nmt_ba_train_act_bytes(&c, &lim) - 1;
    ntm_model *m = NULL;
    assert_int_equal(ntm_act_bytes(img, size, &lim), nmt_ba_train_act_bytes(&c, &lim));
    assert_int_equal(ntm_create(e->dev, img, size, &capped, &m), NMT_ERR_DEVICE_MEMORY);
    assert_null(m);
    capped.max_act_bytes++;
    nmt_test_assert_ok(e->dev, ntm_create(e->dev, img, size, &capped, &m));
    ntm_destroy(m);
    free(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_rows_bwd),   cmocka_unit_test(test_weighted_rows_bwd),
        cmocka_unit_test(test_model_grad),     cmocka_unit_test(test_session_parity),
        cmocka_unit_test(test_act_plan),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
