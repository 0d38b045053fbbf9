/* SPDX-License-Identifier: MIT */
/* kernels_attn_test.c — nmt_op_attention (the fused online-softmax kernel
 * and the split scores/stats/apply path) against ref_attention of
 * ref_ops.c: every branch kind (global, fw, bw, local:k) alone and several
 * at once, causal decoding, incremental steps against a KV cache, grouped
 * cross-attention, key padding, fully masked rows (exactly zero), long rows
 * and argument validation.  Keys beyond the valid length are NaN, so reading
 * a masked key poisons the output; nothing outside the output block may
 * change (NaN sentinels, compared bitwise).
 *
 * The fixture and helpers are in ops_common.c. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

/* ---- attention ------------------------------------------------------------ */

typedef struct attn_case {
    const char *name;
    uint32_t n_seq, lq, q_pos0, lk_max, group, H, dh;
    int causal;
    uint32_t n_branches;
    nmt_branch br[NMT_MAX_BRANCHES];
    const int32_t *key_len;  /* per kv sequence, or NULL: key_len_const */
    uint32_t key_len_const;
} attn_case;

static nmt_branch G(void) { nmt_branch b = {NMT_BRANCH_GLOBAL, 0}; return b; }
static nmt_branch FW(void) { nmt_branch b = {NMT_BRANCH_FW, 0}; return b; }
static nmt_branch BW(void) { nmt_branch b = {NMT_BRANCH_BW, 0}; return b; }
static nmt_branch LOCAL(uint32_t k) { nmt_branch b = {NMT_BRANCH_LOCAL, k}; return b; }
static nmt_branch BLOCK(uint32_t k) { nmt_branch b = {NMT_BRANCH_BLOCK, k}; return b; }

/* kv_table: keys read through a random kv_row table (the fused kernel; the
 * split path refuses it).  append (a step: lq 1, group 1): each sequence's
 * own position q_pos0 comes from k_new / v_new rows; the cache holds NaN
 * there, and afterwards must hold exactly those rows (table: identity at
 * q_pos0, as in the runtime) with nothing else changed. */
static void run_attention_mode(env *e, const attn_case *c, uint64_t seed, int mode, int kv_table, int append) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t width = c->H * c->dh;
    const uint32_t n_kv = (c->n_seq + c->group - 1) / c->group;
    const uint32_t q_ld = width + 3, k_ld = width + 1, v_ld = width + 2;
    const uint32_t out_ld = c->n_branches * width + 5;
    const uint64_t kv_stride = (uint64_t)c->lk_max * NMT_MAX(k_ld, v_ld) + 7;
    const size_t oq = 2, ok = 3, ov = 1, oo = 4, okl = 1;
    const size_t nq = oq + (size_t)c->n_seq * c->lq * q_ld, nk = ok + n_kv * kv_stride, nv = ov + n_kv * kv_stride;
    const size_t no = oo + (size_t)c->n_seq * c->lq * out_ld;
    const size_t nscores = (size_t)c->n_seq * c->H * c->lq * c->lk_max, nstats = (size_t)c->n_seq * c->H * c->lq * 2;

    float *q = host_block(&r, nq, oq, c->n_seq * c->lq, width, q_ld, -1, 1);
    float *k = nmt_test_alloc_f32(nk), *v = nmt_test_alloc_f32(nv);
    nmt_test_fill_const(k, nk, NAN);
    nmt_test_fill_const(v, nv, NAN);
    /* Only keys below the valid length are data; the rest of the cache is
     * NaN, so reading any masked key would poison the output. */
    for (uint32_t m = 0; m < n_kv; m++) {
        uint32_t valid = c->key_len ? (uint32_t)NMT_MAX(c->key_len[m], 0) : c->key_len_const;
        valid = NMT_MIN(valid, c->lk_max);
        for (uint32_t j = 0; j < valid; j++) {
            nmt_test_fill_uniform(&r, k + ok + m * kv_stride + (uint64_t)j * k_ld, width, -1, 1);
            nmt_test_fill_uniform(&r, v + ov + m * kv_stride + (uint64_t)j * v_ld, width, -1, 1);
        }
    }
    /* kv_table: key j of sequence m comes from sequence tab[j][m], one with
     * key j valid; the reference reads the gathered copies kg / vg */
    const uint32_t tab_ld = n_kv + 2;
    const size_t otab = 3, ntab = otab + (size_t)c->lk_max * tab_ld + 1;
    int32_t *tab = NULL;
    float *kg = k, *vg = v;
    if (kv_table) {
        tab = calloc(ntab, sizeof *tab);
        kg = nmt_test_alloc_f32(nk);
        vg = nmt_test_alloc_f32(nv);
        assert_true(tab != NULL);
        nmt_test_fill_const(kg, nk, NAN);
        nmt_test_fill_const(vg, nv, NAN);
        for (uint32_t m = 0; m < n_kv; m++)
            for (uint32_t j = 0; j < c->lk_max; j++) {
                uint32_t from = m;
                for (int tries = 0; tries < 8 && !(append && j == c->q_pos0); tries++) {
                    const uint32_t x = (uint32_t)nmt_test_rng_int(&r, 0, (int32_t)n_kv);
                    const uint32_t vx = c->key_len ? (uint32_t)NMT_MAX(c->key_len[x], 0) : c->key_len_const;
                    if (j < vx) {
                        from = x;
                        break;
                    }
                }
                tab[otab + (size_t)j * tab_ld + m] = (int32_t)from;
                memcpy(kg + ok + m * kv_stride + (uint64_t)j * k_ld, k + ok + from * kv_stride + (uint64_t)j * k_ld,
                       sizeof(float) * width);
                memcpy(vg + ov + m * kv_stride + (uint64_t)j * v_ld, v + ov + from * kv_stride + (uint64_t)j * v_ld,
                       sizeof(float) * width);
            }
    }
    cl_mem dtab = kv_table ? nmt_test_upload_i32(e->dev, tab, ntab) : NULL;
    /* append: the new rows, and the cache the device starts from (NaN at
     * every sequence's position q_pos0) */
    const uint32_t new_ld = width + 5;
    const size_t okn = 2, nkn = okn + (size_t)c->n_seq * new_ld;
    float *kn = NULL, *vn = NULL, *k0 = k, *v0 = v;
    if (append) {
        assert_true(c->lq == 1 && c->group == 1);
        kn = nmt_test_alloc_f32(nkn);
        vn = nmt_test_alloc_f32(nkn);
        k0 = nmt_test_alloc_f32(nk);
        v0 = nmt_test_alloc_f32(nv);
        nmt_test_fill_const(kn, nkn, NAN);
        nmt_test_fill_const(vn, nkn, NAN);
        memcpy(k0, k, sizeof(float) * nk);
        memcpy(v0, v, sizeof(float) * nv);
        for (uint32_t s = 0; s < c->n_seq; s++) {
            const uint64_t kp = ok + s * kv_stride + (uint64_t)c->q_pos0 * k_ld;
            const uint64_t vp = ov + s * kv_stride + (uint64_t)c->q_pos0 * v_ld;
            memcpy(kn + okn + (size_t)s * new_ld, k + kp, sizeof(float) * width);
            memcpy(vn + okn + (size_t)s * new_ld, v + vp, sizeof(float) * width);
            nmt_test_fill_const(k0 + kp, width, NAN);
            nmt_test_fill_const(v0 + vp, width, NAN);
        }
    }
    cl_mem dkn = append ? nmt_test_upload_f32(e->dev, kn, nkn) : NULL;
    cl_mem dvn = append ? nmt_test_upload_f32(e->dev, vn, nkn) : NULL;
    float *out = nmt_test_alloc_f32(no);
    nmt_test_fill_const(out, no, NAN);
    int32_t kl_host[16] = {0};
    if (c->key_len) memcpy(kl_host + okl, c->key_len, n_kv * sizeof(int32_t));

    cl_mem dq = nmt_test_upload_f32(e->dev, q, nq), dk = nmt_test_upload_f32(e->dev, k0, nk);
    cl_mem dv = nmt_test_upload_f32(e->dev, v0, nv), dout = nmt_test_upload_f32(e->dev, out, no);
    cl_mem dscores = nmt_test_buffer_f32_fill(e->dev, 1 + (nscores ? nscores : 1), NAN);
    cl_mem dstats = nmt_test_buffer_f32_fill(e->dev, 2 + nstats, NAN);
    cl_mem dkl = nmt_test_upload_i32(e->dev, kl_host, 16);

    nmt_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_seq = c->n_seq;
    a.lq = c->lq;
    a.q_pos0 = c->q_pos0;
    a.lk_max = c->lk_max;
    a.group = c->group;
    a.n_heads = c->H;
    a.d_head = c->dh;
    a.q = B(dq, oq);
    a.q_ld = q_ld;
    a.k = B(dk, ok);
    a.k_ld = k_ld;
    a.v = B(dv, ov);
    a.v_ld = v_ld;
    a.kv_seq_stride = kv_stride;
    a.key_len = c->key_len ? B(dkl, okl) : NONE;
    a.key_len_const = c->key_len_const;
    a.causal = c->causal;
    a.n_branches = c->n_branches;
    memcpy(a.branches, c->br, sizeof c->br);
    a.scores = B(dscores, 1);
    a.stats = B(dstats, 2);
    a.out = B(dout, oo);
    a.out_ld = out_ld;
    if (kv_table) {
        a.kv_row = B(dtab, otab);
        a.kv_row_ld = tab_ld;
    }
    if (append) {
        a.k_new = B(dkn, okn);
        a.v_new = B(dvn, okn);
        a.new_ld = new_ld;
    }
    const int saved_mode = e->ops.attn_mode;
    e->ops.attn_mode = mode;
    nmt_status st = nmt_op_attention(&e->ops, &a);
    assert_int_equal(nmt_ops_attn_kv_row(&e->ops, c->dh), mode != NMT_ATTN_SPLIT && c->dh <= 128);
    if (mode == NMT_ATTN_GROUP) assert_non_null(e->ops.k_attn_group); /* it ran, not attn_fused */
    e->ops.attn_mode = saved_mode;
    float *got = NULL;
    if (kv_table && mode == NMT_ATTN_SPLIT) {
        assert_int_equal(st, NMT_ERR_UNSUPPORTED); /* only the fused kernel reads through a table */
        goto done;
    }
    nmt_test_assert_ok(e->dev, st);
    got = download(e, dout, no);

    ref_attn_args ra;
    memset(&ra, 0, sizeof ra);
    ra.n_seq = c->n_seq;
    ra.lq = c->lq;
    ra.q_pos0 = c->q_pos0;
    ra.lk_max = c->lk_max;
    ra.group = c->group;
    ra.n_heads = c->H;
    ra.d_head = c->dh;
    ra.q = q + oq;
    ra.q_ld = q_ld;
    ra.k = kg + ok;
    ra.k_ld = k_ld;
    ra.v = vg + ov;
    ra.v_ld = v_ld;
    ra.kv_seq_stride = kv_stride;
    ra.key_len = c->key_len;
    ra.key_len_const = c->key_len_const;
    ra.causal = c->causal;
    ra.n_branches = c->n_branches;
    memcpy(ra.branches, c->br, sizeof c->br);
    ra.out = out + oo;
    ra.out_ld = out_ld;
    ref_attention(&ra);

    char what[128];
    snprintf(what, sizeof what, "attention [%s] %s%s", c->name,
             mode == NMT_ATTN_FUSED ? "fused" : mode == NMT_ATTN_GROUP ? "group" : "split",
             append ? ", appending" : "");
    check_block(got, out, no, oo, c->n_seq * c->lq, c->n_branches * width, out_ld, TOL, what);
    if (append) { /* the cache now holds the new rows at q_pos0, bit for bit, and nothing else changed */
        float *gk = download(e, dk, nk), *gv = download(e, dv, nv);
        for (size_t x = 0; x < nk; x++)
            if (memcmp(&gk[x], &k[x], sizeof(float)) != 0) fail_msg("%s: key cache element %zu", what, x);
        for (size_t x = 0; x < nv; x++)
            if (memcmp(&gv[x], &v[x], sizeof(float)) != 0) fail_msg("%s: value cache element %zu", what, x);
        free(gk);
        free(gv);
    }

    /* rows with no visible key are exactly zero */
    for (uint32_t b = 0; b < c->n_branches; b++)
        for (uint32_t s = 0; s < c->n_seq; s++)
            for (uint32_t i = 0; i < c->lq; i++) {
                int any = 0;
                for (uint32_t j = 0; j < c->lk_max && !any; j++) any = ref_attn_allowed(&ra, s, i, j, c->br[b]);
                if (any) continue;
                const float *row = got + oo + (size_t)(s * c->lq + i) * out_ld + (size_t)b * width;
                for (uint32_t x = 0; x < width; x++)
                    if (row[x] != 0.0f) fail_msg("%s: masked row s=%u i=%u branch %u not zero", what, s, i, b);
            }

done:
    if (append) {
        nmt_test_release(dkn);
        nmt_test_release(dvn);
        free(kn);
        free(vn);
        free(k0);
        free(v0);
    }
    if (kv_table) {
        nmt_test_release(dtab);
        free(tab);
        free(kg);
        free(vg);
    }
    nmt_test_release(dq);
    nmt_test_release(dk);
    nmt_test_release(dv);
    nmt_test_release(dout);
    nmt_test_release(dscores);
    nmt_test_release(dstats);
    nmt_test_release(dkl);
    free(q);
    free(k);
    free(v);
    free(out);
    free(got);
}

/* Every path: the fused online-softmax kernel (a work-item per row, and a
 * work-group per row) and scores/stats/apply. */
static const int attn_modes[] = {NMT_ATTN_FUSED, NMT_ATTN_GROUP, NMT_ATTN_SPLIT};

static void run_attention(env *e, const attn_case *c, uint64_t seed) {
    for (size_t m = 0; m < NMT_ARRAY_LEN(attn_modes); m++) run_attention_mode(e, c, seed, attn_modes[m], 0, 0);
}

/* The same through a kv_row table: the fused kernels, and the split path's refusal. */
static void run_attention_table(env *e, const attn_case *c, uint64_t seed) {
    for (size_t m = 0; m < NMT_ARRAY_LEN(attn_modes); m++) run_attention_mode(e, c, seed, attn_modes[m], 1, 0);
}

/* A step appending its K|V: every path, then every path through a table. */
static void run_attention_append(env *e, const attn_case *c, uint64_t seed) {
    for (int t = 0; t < 2; t++)
        for (size_t m = 0; m < NMT_ARRAY_LEN(attn_modes); m++) run_attention_mode(e, c, seed, attn_modes[m], t, 1);
}

static void test_attention_single_branches(void **state) {
    env *e = *state;
    static const int32_t kl[] = {9, 6};
    attn_case c = {"global", 2, 9, 0, 9, 1, 2, 8, 0, 1, {G()}, NULL, 9};
    run_attention(e, &c, 1);
    c.key_len = kl; /* key padding from here on */
    c.name = "global padded";
    run_attention(e, &c, 2);
    c.name = "fw";
    c.br[0] = FW();
    run_attention(e, &c, 3);
    c.name = "bw";
    c.br[0] = BW();
    run_attention(e, &c, 4);
    const uint32_t radii[] = {0, 1, 3};
    for (size_t i = 0; i < NMT_ARRAY_LEN(radii); i++) {
        c.name = "local";
        c.br[0] = LOCAL(radii[i]);
        run_attention(e, &c, 10 + i);
    }
    c.name = "local huge radius == global";
    c.br[0] = LOCAL(0xffffffffu);
    run_attention(e, &c, 20);
    /* MG-SA's attention inside n-gram phrases (the last block shorter) */
    const uint32_t blocks[] = {1, 2, 3, 64};
    for (size_t i = 0; i < NMT_ARRAY_LEN(blocks); i++) {
        c.name = "block";
        c.br[0] = BLOCK(blocks[i]);
        run_attention(e, &c, 21 + i);
    }
}

static void test_attention_multi_branch(void **state) {
    env *e = *state;
    /* encoder HySAN: all branch kinds share one score matrix; odd d_head */
    static const int32_t kl[] = {11, 4, 0};  /* the last sequence is empty: all rows masked */
    attn_case c = {"global fw bw local:1 local:3 padded", 3, 11, 0, 11, 1, 3, 7, 0, 5,
                   {G(), FW(), BW(), LOCAL(1), LOCAL(3)}, kl, 0};
    run_attention(e, &c, 30);
    /* the maximum branch count */
    attn_case c8 = {"8 branches", 2, 6, 0, 6, 1, 2, 4, 0, 8,
                    {G(), FW(), BW(), LOCAL(0), LOCAL(1), LOCAL(2), G(), BW()}, NULL, 6};
    run_attention(e, &c8, 31);
    /* phrase blocks over padded sentences (the block of a key past key_len is cut) */
    attn_case cb = {"block:2 block:3 padded", 3, 11, 0, 11, 1, 2, 5, 0, 2, {BLOCK(2), BLOCK(3)}, kl, 0};
    run_attention(e, &cb, 32);
}

static void test_attention_causal(void **state) {
    env *e = *state;
    /* decoder self-attention over a whole prefix (training / scoring) */
    attn_case c = {"causal global fw local:2", 2, 8, 0, 8, 1, 4, 8, 1, 3, {G(), FW(), LOCAL(2)}, NULL, 8};
    run_attention(e, &c, 40);
    /* causal + BW keeps only j == pos */
    attn_case c2 = {"causal bw", 1, 5, 0, 5, 1, 1, 4, 1, 1, {BW()}, NULL, 5};
    run_attention(e, &c2, 41);
}

static void test_attention_incremental(void **state) {
    env *e = *state;
    /* One decoding step t = 5 for 3 beams against a cache of capacity 12
     * holding 6 valid keys (NaN beyond), q_pos0 = 5, lq = 1. */
    attn_case c = {"step t=5", 3, 1, 5, 12, 1, 2, 8, 1, 2, {G(), LOCAL(2)}, NULL, 6};
    run_attention(e, &c, 50);
    /* first step: a single key */
    attn_case c0 = {"step t=0", 2, 1, 0, 12, 1, 2, 8, 1, 2, {G(), LOCAL(0)}, NULL, 1};
    run_attention(e, &c0, 51);
    /* per-beam lengths through the buffer */
    static const int32_t kl[] = {6, 3, 6};
    attn_case c1 = {"step with key_len buffer", 3, 1, 5, 12, 1, 2, 8, 1, 1, {FW()}, kl, 0};
    run_attention(e, &c1, 52);
    /* a beam's rows reading their history through the K|V table
     * (transformer.c): the scalar and the float16 path, HySAN branches,
     * per-sequence lengths, the last key of the cache */
    attn_case t1 = {"step t=5 through a table", 4, 1, 5, 12, 1, 2, 8, 1, 2, {G(), LOCAL(2)}, NULL, 6};
    run_attention_table(e, &t1, 53);
    attn_case t2 = {"step t=9 through a table, d_head 16", 6, 1, 9, 10, 1, 2, 16, 1, 3, {G(), FW(), BW()}, NULL, 10};
    run_attention_table(e, &t2, 54);
    attn_case t3 = {"table with key_len buffer", 3, 1, 5, 12, 1, 2, 8, 1, 1, {G()}, kl, 0};
    run_attention_table(e, &t3, 55);
    /* the step's own K|V from its projection rows, appended by the call
     * (transformer_fwd.c): scalar and float16 paths, several branches (one
     * work-item writes), the first and the last position of the cache */
    attn_case a1 = {"append at t=5", 3, 1, 5, 12, 1, 2, 8, 1, 2, {G(), LOCAL(2)}, NULL, 6};
    run_attention_append(e, &a1, 56);
    attn_case a2 = {"append at t=9, d_head 16", 6, 1, 9, 10, 1, 2, 16, 1, 3, {G(), FW(), BW()}, NULL, 10};
    run_attention_append(e, &a2, 57);
    attn_case a3 = {"append at t=0", 2, 1, 0, 4, 1, 3, 5, 1, 1, {G()}, NULL, 1};
    run_attention_append(e, &a3, 58);
}

static void test_attention_cross_group(void **state) {
    env *e = *state;
    /* Cross-attention: 2 sentences x 3 beams read 2 encoder outputs (group
     * 3), padded source lengths, decoder rows at positions 2..5, d_head 10. */
    static const int32_t kl[] = {10, 6};
    attn_case c = {"cross group=3", 6, 4, 2, 10, 3, 2, 10, 0, 1, {G()}, kl, 0};
    run_attention(e, &c, 60);
    /* group that does not divide n_seq */
    static const int32_t kl2[] = {5, 2, 7};
    attn_case c2 = {"cross group=2, odd n_seq", 5, 2, 0, 7, 2, 1, 6, 0, 1, {G()}, kl2, 0};
    run_attention(e, &c2, 61);
}

static void test_attention_masked_and_edge(void **state) {
    env *e = *state;
    /* Every key masked for one sequence, key_len beyond lk_max for another
     * (clamped), a local window that misses all valid keys for late rows. */
    static const int32_t kl[] = {0, 99};
    attn_case c = {"key_len 0 and > lk_max", 2, 6, 0, 6, 1, 2, 4, 0, 2, {G(), LOCAL(1)}, kl, 0};
    run_attention(e, &c, 70);
    static const int32_t kl2[] = {2};
    attn_case c2 = {"local window past the keys", 1, 8, 0, 8, 1, 1, 4, 0, 1, {LOCAL(1)}, kl2, 0};
    run_attention(e, &c2, 71);
    attn_case c3 = {"lk_max 0", 2, 3, 0, 0, 1, 2, 4, 0, 2, {G(), FW()}, NULL, 0};
    run_attention(e, &c3, 72);
    attn_case c4 = {"d_head 1", 1, 5, 0, 5, 1, 3, 1, 0, 1, {G()}, NULL, 5};
    run_attention(e, &c4, 73);
    attn_case c5 = {"d_head 64, 8 heads", 2, 13, 0, 17, 1, 8, 64, 0, 2, {G(), LOCAL(2)}, NULL, 17};
    run_attention(e, &c5, 74);
    /* float16 register path of attn_fused at its smallest and largest d_head */
    attn_case c6 = {"d_head 16, causal", 2, 7, 0, 7, 1, 2, 16, 1, 2, {G(), FW()}, NULL, 7};
    run_attention(e, &c6, 75);
    attn_case c7 = {"d_head 128, padded keys", 2, 5, 0, 9, 1, 1, 128, 0, 2, {G(), BW()}, NULL, 6};
    run_attention(e, &c7, 76);
}

static void test_attention_long_rows(void **state) {
    env *e = *state;
    /* More visible keys than attn_apply stages per step (ATTN_TILE = 64),
     * d_head wider than a work-group, and a d_head that pads the group. */
    attn_case c = {"150 keys, step t=140", 2, 3, 140, 150, 1, 2, 72, 1, 3, {G(), LOCAL(70), FW()}, NULL, 143};
    run_attention(e, &c, 80);
    static const int32_t kl[] = {130, 65};
    attn_case c2 = {"130/65 keys, encoder", 2, 130, 0, 130, 1, 1, 3, 0, 3, {G(), BW(), LOCAL(64)}, kl, 0};
    run_attention(e, &c2, 81);
    /* a HySAN decoder's teacher-forced self-attention past one tile of keys */
    attn_case c3 = {"100 rows causal, 4 heads of 64", 1, 100, 0, 100, 1, 4, 64, 1, 4,
                    {G(), FW(), BW(), LOCAL(3)}, NULL, 100};
    run_attention(e, &c3, 82);
}

/* $NMT_EDGE_ATTN picks the path at nmt_ops_init; anything else leaves AUTO,
 * which is the work-group kernel on GPUs and the work-item one elsewhere
 * (the kernel's presence on this device is asserted by the runs above). */
static void test_attention_mode_env(void **state) {
    env *e = *state;
    static const struct {
        const char *v;
        int mode;
    } cases[] = {{"item", NMT_ATTN_FUSED}, {"group", NMT_ATTN_GROUP}, {"split", NMT_ATTN_SPLIT},
                 {"", NMT_ATTN_AUTO},      {"Group", NMT_ATTN_AUTO},  {"fused", NMT_ATTN_AUTO}};
    for (size_t i = 0; i < NMT_ARRAY_LEN(cases); i++) {
        setenv("NMT_EDGE_ATTN", cases[i].v, 1);
        nmt_ops o;
        nmt_test_assert_ok(e->dev, nmt_ops_init(&o, e->dev));
        assert_int_equal(o.attn_mode, cases[i].mode);
        assert_int_equal(nmt_ops_attn_kv_row(&o, 64), cases[i].mode != NMT_ATTN_SPLIT);
        nmt_ops_release(&o);
    }
    unsetenv("NMT_EDGE_ATTN");
}

static void test_attention_arguments(void **state) {
    env *e = *state;
    nmt_log_fn saved = e->dev->log.fn;
    e->dev->log.fn = NULL;  /* the refusals below are logged at ERROR */
    float x[64] = {0};
    cl_mem m = nmt_test_upload_f32(e->dev, x, 64);
    nmt_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_seq = 1;
    a.lq = 2;
    a.lk_max = 2;
    a.group = 1;
    a.n_heads = 1;
    a.d_head = 4;
    /* q, k and v share rows (read only); scores, stats and the output each
     * have their own part of the buffer (no work-item writes what another reads) */
    a.q = a.k = a.v = B(m, 0);
    a.scores = B(m, 16);
    a.stats = B(m, 24);
    a.out = B(m, 32);
    a.q_ld = a.k_ld = a.v_ld = a.out_ld = 4;
    a.key_len_const = 2;
    a.n_branches = 1;
    assert_int_equal(nmt_op_attention(&e->ops, &a), NMT_OK);
    assert_int_equal(nmt_op_attention(&e->ops, NULL), NMT_ERR_INVALID_ARGUMENT);
    nmt_attn_args b = a;
    b.n_branches = 0;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.n_branches = NMT_MAX_BRANCHES + 1;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.group = 0;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.branches[0].kind = (nmt_branch_kind)9;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.branches[0].kind = NMT_BRANCH_BLOCK; /* a block of 0 positions */
    b.branches[0].k = 0;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.n_branches = 2;  /* out_ld 4 < 2 branches * 4 */
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.q_ld = 3;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.v = NONE;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.q_pos0 = 1u << 30;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_ERR_UNSUPPORTED);
    /* an append: both rows or neither, one query per sequence, no groups,
     * rows as wide as the heads */
    b = a;
    b.lq = 1;
    b.k = b.v = B(m, 8); /* the append writes the cache: not q's rows (attn_group's work-items would race) */
    b.k_new = B(m, 40);
    b.v_new = B(m, 48);
    b.new_ld = 4;
    b.out = B(m, 56);
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_OK);
    nmt_attn_args c = b;
    c.v_new = NONE;
    assert_int_equal(nmt_op_attention(&e->ops, &c), NMT_ERR_INVALID_ARGUMENT);
    c = b;
    c.k_new = NONE;
    assert_int_equal(nmt_op_attention(&e->ops, &c), NMT_ERR_INVALID_ARGUMENT);
    c = b;
    c.lq = 2;
    assert_int_equal(nmt_op_attention(&e->ops, &c), NMT_ERR_INVALID_ARGUMENT);
    c = b;
    c.group = 2;
    assert_int_equal(nmt_op_attention(&e->ops, &c), NMT_ERR_INVALID_ARGUMENT);
    c = b;
    c.new_ld = 3;
    assert_int_equal(nmt_op_attention(&e->ops, &c), NMT_ERR_INVALID_ARGUMENT);
    b = a;
    b.lq = 0;  /* nothing to compute */
    b.q = NONE;
    assert_int_equal(nmt_op_attention(&e->ops, &b), NMT_OK);
    nmt_test_release(m);
    e->dev->log.fn = saved;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_single_branches),
        cmocka_unit_test(test_attention_multi_branch),
        cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_attention_incremental),
        cmocka_unit_test(test_attention_cross_group),
        cmocka_unit_test(test_attention_masked_and_edge),
        cmocka_unit_test(test_attention_long_rows),
        cmocka_unit_test(test_attention_arguments),
        cmocka_unit_test(test_attention_mode_env),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
