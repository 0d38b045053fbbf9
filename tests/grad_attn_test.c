/* SPDX-License-Identifier: MIT */
/* grad_attn_test.c — nmt_op_attention_bwd (train/ops/ops_train.h) against
 * central finite differences of a double attention forward on the host:
 * self-attention through one packed qkv buffer and cross-attention through
 * separate q and kv buffers, every branch kind, causal and padded keys,
 * grouped kv sequences, query offsets, and the float16 paths (d_head a
 * multiple of 16).  The forward runs through nmt_op_attention first, so the
 * backward sees the scores and stats it saved.  Gradient buffers start as
 * NaN: every element of dq / dk / dv must be written, padding columns must
 * not.  The finite-difference method is described in grad_test.c; the
 * fixture, fd_check and helpers are in ops_common.c. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

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
#define BR_B(k) {NMT_BRANCH_BLOCK, k}

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
    /* MG-SA's SAN composition: attention inside n-gram phrases */
    {"enc block2 padded", 3, 7, 7, 1, 2, 3, 0, 0, 0, {7, 4, 0}, 1, {BR_B(2)}},
    {"enc block3 block1", 2, 7, 7, 1, 2, 4, 0, 0, 0, {6, 7}, 2, {BR_B(3), BR_B(1)}},
};

static void test_attention_bwd(void **state) {
    env *e = *state;
    for (size_t i = 0; i < NMT_ARRAY_LEN(attn_cases); i++) check_attention(e, &attn_cases[i], 60 + i);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_bwd),
    };
    return cmocka_run_group_tests(tests, grad_setup, ops_teardown);
}
