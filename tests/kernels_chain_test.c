/* SPDX-License-Identifier: MIT */
/* kernels_chain_test.c — few-row products and norms chained into one
 * launch (runtime/ops/ops_chain.c, cl/gemm.cl gemm_chain, cl/gemm_i8.cl
 * gemm_i8_chain):
 *   - a decoder step's op sequence (an embedding with its position terms
 *     computed or from a table, q|k|v, the self-attention with its K|V
 *     append through a beam's table, one or two branches, the output
 *     product with its residual and norm, the FFN with ReLU, a norm with a
 *     residual, a vocabulary product) at 1-4 rows, odd sizes and offsets:
 *     chained, the same bits as with the chain off (the cache too), and the
 *     products and norms within 2e-4 (relative) of the host references;
 *     how many launches and ops the chain took;
 *   - ops outside the chain (an add) and reads see the chain's results
 *     (the device's settle hook enqueues it first);
 *   - more ops or buffers than one launch holds: several launches, the
 *     same bits;
 *   - what is not chained: more than 4 rows, alpha or beta not 1 / 0, NN
 *     products, chain_on 0 — launched as before;
 *   - an int8 step (products, HySAN gates, the product with its residual
 *     and norm) at 1-4 rows, d and dr at their limits: int8 x int8
 *     (cl/gemm_i8.cl gemm_i8_chain) in the device's fast variant and the
 *     portable one, and int8 weights x fp32 (cl/gemm_q8.cl gemm_q8_chain):
 *     the same bits chained and not, one launch. */
#include "ops_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

/* The fixture's ops with the chain on (a CPU device), or off (NULL). */
static int chain_ops(env *e, nmt_ops *ops, int on) {
    nmt_test_assert_ok(e->dev, nmt_ops_init(ops, e->dev));
    nmt_test_assert_ok(e->dev, nmt_ops_chain_enable(ops, on));
    const int got = ops->chain_on;
    if (on) assert_int_equal(got, e->dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_PRODUCT_CHAIN"));
    else assert_int_equal(got, 0);
    return got;
}

typedef struct step_case {
    uint32_t M, d, ff, vocab, off, heads, nbr, pos;
} step_case;

/* the self-attention reads a cache of T positions (steps at pos and pos + 1 < T) */
#define T 12

static const step_case step_cases[] = {
    /* M  d    ff   vocab off heads branches pos */
    {1, 64, 256, 500, 0, 4, 1, 5},  /* a small decoder step */
    {2, 70, 130, 77, 3, 2, 2, 0},   /* K tails, N not a multiple of the chunk; d_head 35; the first step */
    {3, 33, 40, 64, 1, 3, 1, 10},   /* three rows: the m16 class, rows past M clamped; the cache's end */
    {4, 128, 96, 200, 0, 4, 2, 7},  /* beam 4, HySAN-like branches (global, local 2) */
    {1, 5, 7, 3, 2, 1, 1, 3},       /* N below a block of columns */
};

/* The buffers of one run, each a separate allocation. */
typedef struct step_bufs {
    cl_mem x, w1, b1, qkv, w2, b2, t, o1, g1, be1, w3, b3, h, w4, y, g2, be2, o2, w5, lg, z, kv, kr, ctx, sc, tok, em,
        pt;
} step_bufs;

/* The host's copies of the inputs (weights, x, gains). */
typedef struct step_host {
    float *x, *w1, *b1, *w2, *b2, *g1, *be1, *w3, *b3, *w4, *g2, *be2, *w5, *kv;
    int32_t *kr;
} step_host;

static void make_host(const step_case *c, uint64_t seed, step_host *h) {
    nmt_test_rng r = nmt_test_rng_make(seed);
    const uint32_t d = c->d, ff = c->ff, V = c->vocab, o = c->off;
    h->x = nmt_test_random_f32(&r, o + (size_t)c->M * d, -1, 1);
    h->w1 = nmt_test_random_f32(&r, o + (size_t)3 * d * d, -0.3f, 0.3f);
    h->b1 = nmt_test_random_f32(&r, o + 3 * d, -0.5f, 0.5f);
    h->w2 = nmt_test_random_f32(&r, o + (size_t)d * d * c->nbr, -0.3f, 0.3f);
    h->b2 = nmt_test_random_f32(&r, o + d, -0.5f, 0.5f);
    h->g1 = nmt_test_random_f32(&r, o + d, 0.5f, 1.5f);
    h->be1 = nmt_test_random_f32(&r, o + d, -0.5f, 0.5f);
    h->w3 = nmt_test_random_f32(&r, o + (size_t)ff * d, -0.3f, 0.3f);
    h->b3 = nmt_test_random_f32(&r, o + ff, -0.5f, 0.5f);
    h->w4 = nmt_test_random_f32(&r, o + (size_t)d * ff, -0.3f, 0.3f);
    h->g2 = nmt_test_random_f32(&r, o + d, 0.5f, 1.5f);
    h->be2 = nmt_test_random_f32(&r, o + d, -0.5f, 0.5f);
    h->w5 = nmt_test_random_f32(&r, o + (size_t)V * d, -0.3f, 0.3f);
    /* the K|V cache of M sequences (T positions, k then v), and a beam's
     * table: position j of row m reads sequence (m + j) % M */
    h->kv = nmt_test_random_f32(&r, (size_t)c->M * T * 2 * d, -1, 1);
    h->kr = malloc(sizeof(int32_t) * T * c->M);
    assert_non_null(h->kr);
    for (uint32_t j = 0; j < T; j++)
        for (uint32_t m = 0; m < c->M; m++) h->kr[j * c->M + m] = (int32_t)((m + j) % c->M);
}

static void free_host(step_host *h) {
    float *p[] = {h->x, h->w1, h->b1, h->w2, h->b2, h->g1, h->be1, h->w3, h->b3, h->w4, h->g2, h->be2, h->w5, h->kv};
    for (size_t i = 0; i < NMT_ARRAY_LEN(p); i++) free(p[i]);
    free(h->kr);
}

static void upload(env *e, const step_case *c, const step_host *h, step_bufs *b) {
    const uint32_t d = c->d, ff = c->ff, V = c->vocab, o = c->off, M = c->M;
    nmt_device *dev = e->dev;
    b->x = nmt_test_upload_f32(dev, h->x, o + (size_t)M * d);
    b->w1 = nmt_test_upload_f32(dev, h->w1, o + (size_t)3 * d * d);
    b->b1 = nmt_test_upload_f32(dev, h->b1, o + 3 * d);
    b->w2 = nmt_test_upload_f32(dev, h->w2, o + (size_t)d * d * c->nbr);
    b->b2 = nmt_test_upload_f32(dev, h->b2, o + d);
    b->g1 = nmt_test_upload_f32(dev, h->g1, o + d);
    b->be1 = nmt_test_upload_f32(dev, h->be1, o + d);
    b->w3 = nmt_test_upload_f32(dev, h->w3, o + (size_t)ff * d);
    b->b3 = nmt_test_upload_f32(dev, h->b3, o + ff);
    b->w4 = nmt_test_upload_f32(dev, h->w4, o + (size_t)d * ff);
    b->g2 = nmt_test_upload_f32(dev, h->g2, o + d);
    b->be2 = nmt_test_upload_f32(dev, h->be2, o + d);
    b->w5 = nmt_test_upload_f32(dev, h->w5, o + (size_t)V * d);
    b->qkv = nmt_test_buffer_f32_fill(dev, o + (size_t)M * 3 * d + 1, NAN);
    b->t = nmt_test_buffer_f32_fill(dev, o + (size_t)M * d + 1, NAN);
    b->o1 = nmt_test_buffer_f32_fill(dev, o + (size_t)M * d + 1, NAN);
    b->h = nmt_test_buffer_f32_fill(dev, o + (size_t)M * ff + 1, NAN);
    b->y = nmt_test_buffer_f32_fill(dev, o + (size_t)M * d + 1, NAN);
    b->o2 = nmt_test_buffer_f32_fill(dev, o + (size_t)M * d + 1, NAN);
    b->lg = nmt_test_buffer_f32_fill(dev, o + (size_t)M * V + 1, NAN);
    b->z = nmt_test_buffer_f32_fill(dev, o + (size_t)M * V + 1, 0.0f);
    b->kv = nmt_test_upload_f32(dev, h->kv, (size_t)M * T * 2 * d);
    b->kr = nmt_test_upload_i32(dev, h->kr, (size_t)T * M);
    b->ctx = nmt_test_buffer_f32_fill(dev, o + (size_t)M * d * c->nbr + 1, NAN);
    b->sc = nmt_test_buffer_f32_fill(dev, 16, 0.0f); /* scores and stats: attn_fused reads neither */
    int32_t tok[4];
    for (uint32_t m = 0; m < M; m++) tok[m] = (int32_t)((7 * m + 3) % V);
    b->tok = nmt_test_upload_i32(dev, tok, M);
    b->em = nmt_test_buffer_f32_fill(dev, (size_t)M * d + 1, NAN);
    b->pt = nmt_test_buffer_f32_fill(dev, (size_t)(T + 1) * d, 0.0f);
}

static void release(step_bufs *b) {
    cl_mem *m = &b->x;
    for (size_t i = 0; i < sizeof *b / sizeof(cl_mem); i++) nmt_test_release(m[i]);
}

/* The step: q|k|v, the self-attention (its K|V append), the output
 * product with x and a norm (gemm_nt_ln at 1-2 rows; at 3-4 it refuses and
 * the product and layernorm go apart), the FFN, a norm with a residual,
 * the vocabulary product; then (add) z += logits outside the chain. */
static void run_step(env *e, nmt_ops *ops, const step_case *c, const step_bufs *b, uint32_t pos, int add) {
    const uint32_t d = c->d, ff = c->ff, V = c->vocab, o = c->off, M = c->M;
    const float eps = 1e-5f;
    /* the step's embedding (rows of the vocabulary product's weights) */
    nmt_test_assert_ok(e->dev, nmt_op_embed(ops, B(b->tok, 0), M, 1, pos, B(b->w5, o), d, 1.5f, B(b->em, 0)));
    nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, M, 3 * d, d, 1.0f, B(b->x, o), d, B(b->w1, o), d, 0.0f,
                                           B(b->qkv, o), 3 * d, B(b->b1, o), 0));
    /* the decoder's self-attention at position pos: the step's k and v
     * appended to the cache, keys read through the table */
    nmt_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_seq = M;
    a.lq = 1;
    a.q_pos0 = pos;
    a.lk_max = pos + 1;
    a.group = 1;
    a.n_heads = c->heads;
    a.d_head = d / c->heads;
    a.q = B(b->qkv, o);
    a.q_ld = 3 * d;
    a.k = B(b->kv, 0);
    a.v = B(b->kv, d);
    a.k_ld = a.v_ld = 2 * d;
    a.kv_seq_stride = (uint64_t)T * 2 * d;
    a.kv_row = B(b->kr, 0);
    a.kv_row_ld = M;
    a.k_new = B(b->qkv, o + d);
    a.v_new = B(b->qkv, o + 2 * (size_t)d);
    a.new_ld = 3 * d;
    a.key_len_const = pos + 1;
    a.causal = 1;
    a.n_branches = c->nbr;
    a.branches[0] = (nmt_branch){NMT_BRANCH_GLOBAL, 0};
    a.branches[1] = (nmt_branch){NMT_BRANCH_LOCAL, 2};
    a.scores = a.stats = B(b->sc, 0);
    a.out = B(b->ctx, o);
    a.out_ld = d * c->nbr;
    nmt_test_assert_ok(e->dev, nmt_op_attention(ops, &a));
    /* the output product (of the branches' contexts) with the residual x and a norm */
    const uint32_t dc = d * c->nbr;
    nmt_status s = nmt_op_gemm_nt_ln(ops, M, d, dc, B(b->ctx, o), dc, B(b->w2, o), dc, B(b->b2, o), B(b->x, o), d,
                                     B(b->g1, o), B(b->be1, o), eps, B(b->o1, o), d);
    if (s == NMT_ERR_UNSUPPORTED) {
        nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, M, d, dc, 1.0f, B(b->ctx, o), dc, B(b->w2, o), dc, 0.0f,
                                               B(b->t, o), d, B(b->b2, o), 0));
        s = nmt_op_layernorm(ops, B(b->t, o), B(b->x, o), B(b->o1, o), M, d, B(b->g1, o), B(b->be1, o), eps);
    }
    nmt_test_assert_ok(e->dev, s);
    nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, M, ff, d, 1.0f, B(b->o1, o), d, B(b->w3, o), d, 0.0f,
                                           B(b->h, o), ff, B(b->b3, o), 1));
    nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, M, d, ff, 1.0f, B(b->h, o), ff, B(b->w4, o), ff, 0.0f,
                                           B(b->y, o), d, NONE, 0));
    nmt_test_assert_ok(e->dev, nmt_op_layernorm(ops, B(b->y, o), B(b->o1, o), B(b->o2, o), M, d, B(b->g2, o),
                                                B(b->be2, o), eps));
    nmt_test_assert_ok(e->dev, nmt_op_gemm(ops, 1, M, V, d, 1.0f, B(b->o2, o), d, B(b->w5, o), d, 0.0f,
                                           B(b->lg, o), V, NONE, 0));
    if (add) nmt_test_assert_ok(e->dev, nmt_op_add(ops, B(b->z, o), B(b->lg, o), M * V)); /* outside the chain */
}

/* Every output buffer of the run, downloaded (sizes as upload made them). */
static float **outputs(env *e, const step_case *c, const step_bufs *b, size_t *sizes) {
    const uint32_t d = c->d, ff = c->ff, V = c->vocab, o = c->off, M = c->M;
    const cl_mem m[] = {b->qkv, b->o1, b->h, b->y, b->o2, b->lg, b->z, b->ctx, b->kv, b->em};
    const size_t n[] = {o + (size_t)M * 3 * d + 1, o + (size_t)M * d + 1, o + (size_t)M * ff + 1,
                        o + (size_t)M * d + 1,     o + (size_t)M * d + 1, o + (size_t)M * V + 1,
                        o + (size_t)M * V + 1,     o + (size_t)M * d * c->nbr + 1, (size_t)M * T * 2 * d,
                        (size_t)M * d + 1};
    float **out = calloc(NMT_ARRAY_LEN(m), sizeof *out);
    assert_non_null(out);
    for (size_t i = 0; i < NMT_ARRAY_LEN(m); i++) {
        out[i] = download(e, m[i], n[i]);
        sizes[i] = n[i];
    }
    return out;
}

#define N_OUT 10

static void free_outputs(float **o) {
    for (int i = 0; i < N_OUT; i++) free(o[i]);
    free(o);
}

/* The host references of the step: logits and z within a tolerance
 * scaled by the products' sizes. */
static void check_reference(const step_case *c, const step_host *h, float **got) {
    const uint32_t d = c->d, ff = c->ff, V = c->vocab, o = c->off, M = c->M, dc = d * c->nbr;
    const float *ctx = got[7] + o; /* the attention's output as the device computed it (kernels_attn_test
                                      checks the attention itself) */
    float *qkv = nmt_test_alloc_f32((size_t)M * 3 * d), *t = nmt_test_alloc_f32((size_t)M * d);
    float *o1 = nmt_test_alloc_f32((size_t)M * d), *hh = nmt_test_alloc_f32((size_t)M * ff);
    float *y = nmt_test_alloc_f32((size_t)M * d), *o2 = nmt_test_alloc_f32((size_t)M * d);
    float *lg = nmt_test_alloc_f32((size_t)M * V);
    ref_gemm(1, M, 3 * d, d, 1.0f, h->x + o, d, h->w1 + o, d, 0.0f, qkv, 3 * d, h->b1 + o, 0);
    ref_gemm(1, M, d, dc, 1.0f, ctx, dc, h->w2 + o, dc, 0.0f, t, d, h->b2 + o, 0);
    ref_layernorm(t, h->x + o, o1, M, d, h->g1 + o, h->be1 + o, 1e-5f);
    ref_gemm(1, M, ff, d, 1.0f, o1, d, h->w3 + o, d, 0.0f, hh, ff, h->b3 + o, 1);
    ref_gemm(1, M, d, ff, 1.0f, hh, ff, h->w4 + o, ff, 0.0f, y, d, NULL, 0);
    ref_layernorm(y, o1, o2, M, d, h->g2 + o, h->be2 + o, 1e-5f);
    ref_gemm(1, M, V, d, 1.0f, o2, d, h->w5 + o, d, 0.0f, lg, V, NULL, 0);
    const float *want[] = {qkv, o1, hh, y, o2, lg, lg};
    const size_t n[] = {(size_t)M * 3 * d, (size_t)M * d, (size_t)M * ff, (size_t)M * d, (size_t)M * d,
                        (size_t)M * V, (size_t)M * V};
    for (int i = 0; i < 7; i++) {
        for (size_t j = 0; j < n[i]; j++) {
            const float g = got[i][o + j], w = want[i][j];
            if (!(fabsf(g - w) <= 2e-4f * (1.0f + fabsf(w))))
                fail_msg("case M %u d %u: output %d element %zu: %.8g, reference %.8g", M, d, i, j, (double)g,
                         (double)w);
        }
        if (i != 6) assert_true(isnan(got[i][o + n[i]])); /* nothing past the rows (z starts at 0) */
    }
    void *p[] = {qkv, t, o1, hh, y, o2, lg};
    for (size_t i = 0; i < NMT_ARRAY_LEN(p); i++) free(p[i]);
}

static void test_chain_step(void **state) {
    env *e = *state;
    for (size_t ci = 0; ci < NMT_ARRAY_LEN(step_cases); ci++) {
        const step_case *c = &step_cases[ci];
        step_host h;
        make_host(c, 100 + ci, &h);
        float **res[2];
        size_t sizes[N_OUT];
        int on = 0;
        uint64_t chains = 0, chained = 0, writes = 0;
        for (int pass = 0; pass < 2; pass++) {
            nmt_ops ops;
            const int got = chain_ops(e, &ops, pass == 1);
            if (pass == 1) on = got;
            step_bufs b;
            upload(e, c, &h, &b);
            if (ci % 2) /* the position terms from a table (zeros: not pos_term's values, so it shows) */
                nmt_test_assert_ok(e->dev, nmt_ops_set_pos_table(&ops, B(b.pt, 0), T + 1, c->d, 0, 0));
            run_step(e, &ops, c, &b, c->pos, 0); /* two steps: the second appends at pos + 1 */
            nmt_test_assert_ok(e->dev, nmt_device_finish(e->dev)); /* else one chain holds both */
            run_step(e, &ops, c, &b, c->pos + 1, 1);
            res[pass] = outputs(e, c, &b, sizes);
            chains = ops.n_chains;
            chained = ops.n_chained;
            writes = ops.n_chain_writes;
            release(&b);
            nmt_ops_release(&ops);
        }
        for (int i = 0; i < N_OUT; i++) {
            if (memcmp(res[0][i], res[1][i], sizes[i] * sizeof(float)) != 0)
                fail_msg("case %zu: output %d differs chained and not", ci, i);
        }
        check_reference(c, &h, res[1]);
        /* the add outside the chain: z = 0 + logits, bit for bit */
        assert_memory_equal(res[1][6] + c->off, res[1][5] + c->off, (size_t)c->M * c->vocab * sizeof(float));
        if (on) {
            /* a step's 9 ops (the embedding, 5 products, 2 norms, the
             * attention; at 1-2 rows gemm_nt_ln's product and norm are two
             * of them; 10 slots) and their 25-26 buffers in one launch; the second step reads
             * the first's descriptor block (its position relative), except
             * after a first step at position 0 (no position to be relative
             * to) */
            assert_int_equal(chains, 2);
            assert_int_equal(chained, 20);
            assert_int_equal(writes, c->pos == 0 ? 2 : 1);
        } else {
            assert_int_equal(chains, 0);
        }
        free_outputs(res[0]);
        free_outputs(res[1]);
        free_host(&h);
    }
}

/* NP products in a row, each with weights, a bias and an output of its
 * own: more buffers than a launch holds (a chain's first op brings 4, each
 * next 3: PER ops fill its buffer slots, 31 of 96), then NQ more on two
 * buffers: more op slots than a launch holds.  Chained and not: the same
 * bits; with the chain, 2 launches (PER + 3) and 2 more (all the slots +
 * 2). */
static void test_chain_capacity(void **state) {
    env *e = *state;
    enum { PER = (NMT_OPS_CHAIN_BUFS - 4) / 3 + 1, NP = PER + 3, NQ = NMT_OPS_CHAIN_OPS + 2, D = 48 };
    const uint32_t M = 2;
    nmt_test_rng r = nmt_test_rng_make(7);
    float *x = nmt_test_random_f32(&r, (size_t)M * D, -1, 1);
    float *w[NP], *bias[NP];
    for (int i = 0; i < NP; i++) {
        w[i] = nmt_test_random_f32(&r, (size_t)D * D, -0.2f, 0.2f);
        bias[i] = nmt_test_random_f32(&r, D, -0.1f, 0.1f);
    }
    float *out[2];
    uint64_t chains = 0;
    int on = 0;
    for (int pass = 0; pass < 2; pass++) {
        nmt_ops ops;
        const int got = chain_ops(e, &ops, pass == 1);
        if (pass == 1) on = got;
        cl_mem dw[NP], db[NP], act[NP + 1];
        for (int i = 0; i < NP; i++) {
            dw[i] = nmt_test_upload_f32(e->dev, w[i], (size_t)D * D);
            db[i] = nmt_test_upload_f32(e->dev, bias[i], D);
        }
        act[0] = nmt_test_upload_f32(e->dev, x, (size_t)M * D);
        for (int i = 1; i <= NP; i++) act[i] = nmt_test_buffer_f32_fill(e->dev, (size_t)M * D, NAN);
        for (int i = 0; i < NP; i++)
            nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, M, D, D, 1.0f, B(act[i], 0), D, B(dw[i], 0), D, 0.0f,
                                                   B(act[i + 1], 0), D, B(db[i], 0), i % 3 == 0));
        nmt_test_assert_ok(e->dev, nmt_device_finish(e->dev));
        if (pass == 1 && on) assert_int_equal(ops.n_chains, 2);
        for (int i = 0; i < NQ; i++) /* act[NP] and act[NP - 1] in turn */
            nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, M, D, D, 1.0f, B(act[NP - i % 2], 0), D, B(dw[0], 0), D,
                                                   0.0f, B(act[NP - 1 + i % 2], 0), D, B(db[0], 0), 1));
        out[pass] = download(e, act[NP - NQ % 2], (size_t)M * D);
        chains = ops.n_chains;
        if (pass == 1 && on) assert_int_equal(ops.n_chained, NP + NQ);
        for (int i = 0; i < NP; i++) {
            nmt_test_release(dw[i]);
            nmt_test_release(db[i]);
        }
        for (int i = 0; i <= NP; i++) nmt_test_release(act[i]);
        nmt_ops_release(&ops);
    }
    assert_memory_equal(out[0], out[1], (size_t)M * D * sizeof(float));
    if (on) assert_int_equal(chains, 4);
    /* and the values: the chain of products on the host */
    float *a = nmt_test_alloc_f32((size_t)M * D), *t = nmt_test_alloc_f32((size_t)M * D);
    memcpy(a, x, (size_t)M * D * sizeof(float));
    for (int i = 0; i < NP + NQ; i++) {
        const int j = i < NP ? i : 0;
        ref_gemm(1, M, D, D, 1.0f, a, D, w[j], D, 0.0f, t, D, bias[j], i < NP ? i % 3 == 0 : 1);
        memcpy(a, t, (size_t)M * D * sizeof(float));
    }
    for (size_t j = 0; j < (size_t)M * D; j++) assert_true(fabsf(out[1][j] - a[j]) <= 1e-4f * (1.0f + fabsf(a[j])));
    free(a);
    free(t);
    free(out[0]);
    free(out[1]);
    free(x);
    for (int i = 0; i < NP; i++) {
        free(w[i]);
        free(bias[i]);
    }
}

/* What the chain leaves to the launches as before: 5 rows, alpha 2, beta
 * 1, an NN product, a norm with no product before it; nothing recorded
 * with chain_on 0; and a finish enqueues what is recorded. */
static void test_chain_not_taken(void **state) {
    env *e = *state;
    nmt_ops ops;
    if (!chain_ops(e, &ops, 1)) {
        nmt_ops_release(&ops);
        return; /* not a CPU device: nothing is chained (chain_ops checked it) */
    }
    nmt_test_rng r = nmt_test_rng_make(9);
    const uint32_t D = 32;
    float *x = nmt_test_random_f32(&r, 5 * D, -1, 1), *w = nmt_test_random_f32(&r, D * D, -0.3f, 0.3f);
    cl_mem dx = nmt_test_upload_f32(e->dev, x, 5 * D), dw = nmt_test_upload_f32(e->dev, w, D * D);
    cl_mem dc = nmt_test_buffer_f32_fill(e->dev, 5 * D, 0.0f);
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, 5, D, D, 1.0f, B(dx, 0), D, B(dw, 0), D, 0.0f, B(dc, 0), D, NONE, 0));
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, 1, D, D, 2.0f, B(dx, 0), D, B(dw, 0), D, 0.0f, B(dc, 0), D, NONE, 0));
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, 1, D, D, 1.0f, B(dx, 0), D, B(dw, 0), D, 1.0f, B(dc, 0), D, NONE, 0));
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 0, 1, D, D, 1.0f, B(dx, 0), D, B(dw, 0), D, 0.0f, B(dc, 0), D, NONE, 0));
    assert_int_equal(ops.chain_n, 0);
    ops.chain_on = 0;
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, 1, D, D, 1.0f, B(dx, 0), D, B(dw, 0), D, 0.0f, B(dc, 0), D, NONE, 0));
    assert_int_equal(ops.chain_n, 0);
    ops.chain_on = 1;
    nmt_test_assert_ok(e->dev, nmt_op_gemm(&ops, 1, 1, D, D, 1.0f, B(dx, 0), D, B(dw, 0), D, 0.0f, B(dc, 0), D, NONE, 0));
    assert_int_equal(ops.chain_n, 1); /* recorded; the finish enqueues it */
    cl_mem dg = nmt_test_buffer_f32_fill(e->dev, D, 1.0f), db = nmt_test_buffer_f32_fill(e->dev, D, 0.0f);
    nmt_test_assert_ok(e->dev, nmt_op_layernorm(&ops, B(dc, 0), NONE, B(dc, 0), 1, D, B(dg, 0), B(db, 0), 1e-5f));
    assert_int_equal(ops.chain_n, 2); /* a norm joins a product's chain */
    nmt_test_assert_ok(e->dev, nmt_device_finish(e->dev));
    assert_int_equal(ops.chain_n, 0);
    assert_int_equal(ops.n_chains, 1);
    assert_null(e->dev->settle);
    /* ... but does not begin one: launched at once */
    nmt_test_assert_ok(e->dev, nmt_op_layernorm(&ops, B(dc, 0), NONE, B(dc, 0), 1, D, B(dg, 0), B(db, 0), 1e-5f));
    assert_int_equal(ops.chain_n, 0);
    nmt_test_release(dg);
    nmt_test_release(db);
    nmt_test_release(dx);
    nmt_test_release(dw);
    nmt_test_release(dc);
    free(x);
    free(w);
    nmt_ops_release(&ops);
}

/* ---- int8 x int8 (cl/gemm_i8.cl gemm_i8_chain) ---------------------------- */

typedef struct i8_case {
    uint32_t M, d, dr, ff, vocab, off;
} i8_case;

static const i8_case i8_cases[] = {
    /* M  d     dr   ff   vocab off */
    {1, 256, 64, 128, 500, 0},  /* a small step */
    {2, 70, 18, 130, 77, 3},    /* K tails of 4 and 64 bytes, N not a multiple of the chunk */
    {3, 33, 5, 40, 64, 1},      /* the m16 class; the norm as a product and a norm with a residual */
    {4, 128, 32, 96, 200, 0},   /* beam 4 */
    {1, 2048, 512, 64, 9, 0},   /* d and dr at their limits (2,048 and 512) */
};

/* One int8 step of case c through the public ops: e = the embedding of M
 * tokens at position 7 from the int8 table W3 (embed_q8; its output is not
 * the step's x, so the checks below keep their inputs); h = ReLU(x W1^T + b1);
 * g = two HySAN gates of x (the second without b1, accumulating); y =
 * LN(h W2^T + b2 + g) (gemm_i8_nt_ln's form up to 2 rows, else the product
 * and a norm with the residual, as nmt_layer_linear_norm); z = y W3^T.
 * Then the device top-k of z (nmt_op_topk_logprobs, k 5, the last row dead
 * when M > 1), a greedy pick from it (nmt_op_topk_pick, EOS barred), a beam
 * step from its candidates (nmt_op_beam_advance) and a K|V table permuted
 * through the step's back-pointers (nmt_op_kv_table_permute).  Returns h |
 * g | y | z | e | the top-k's and the pick's outputs | the beam step's
 * tokens, scores, back-pointers, state and the table, as floats' bits, in
 * one malloc'd array. */
static float *i8_step(env *e, nmt_ops *ops, const i8_case *c, uint64_t seed, int i8) {
    const uint32_t M = c->M, d = c->d, dr = c->dr, ff = c->ff, V = c->vocab, o = c->off;
    nmt_test_rng r = nmt_test_rng_make(seed);
    float *x = nmt_test_random_f32(&r, o + (size_t)M * d, -2, 2);
    int8_t *w1 = random_i8(&r, o + (size_t)ff * d), *g1 = random_i8(&r, o + (size_t)dr * d);
    int8_t *g2 = random_i8(&r, o + (size_t)d * dr), *w2 = random_i8(&r, o + (size_t)d * ff);
    int8_t *w3 = random_i8(&r, o + (size_t)V * d);
    float *s1 = nmt_test_random_f32(&r, o + ff, 0.001f, 0.01f), *b1 = nmt_test_random_f32(&r, o + ff, -0.5f, 0.5f);
    float *gs1 = nmt_test_random_f32(&r, o + dr, 0.001f, 0.05f), *gb1 = nmt_test_random_f32(&r, o + dr, -0.5f, 0.5f);
    float *gs2 = nmt_test_random_f32(&r, o + d, 0.001f, 0.05f), *gb2 = nmt_test_random_f32(&r, o + d, -0.5f, 0.5f);
    float *s2 = nmt_test_random_f32(&r, o + d, 0.001f, 0.01f), *b2 = nmt_test_random_f32(&r, o + d, -0.5f, 0.5f);
    float *s3 = nmt_test_random_f32(&r, o + V, 0.001f, 0.01f);
    float *ga = nmt_test_random_f32(&r, o + d, 0.5f, 1.5f), *be = nmt_test_random_f32(&r, o + d, -0.5f, 0.5f);
    const size_t kmax = d > ff ? d : ff;
    ops->i8_cap = (size_t)M * (kmax > dr ? kmax : dr);
    ops->i8_a = B(nmt_test_buffer(e->dev, ops->i8_cap, NULL), 0);
    ops->i8_s = B(nmt_test_buffer(e->dev, M * sizeof(float), NULL), 0);
    ops->i8_rows = M;
    cl_mem dx = nmt_test_upload_f32(e->dev, x, o + (size_t)M * d);
    cl_mem dw1 = nmt_test_buffer(e->dev, o + (size_t)ff * d, w1), dg1 = nmt_test_buffer(e->dev, o + (size_t)dr * d, g1);
    cl_mem dg2 = nmt_test_buffer(e->dev, o + (size_t)d * dr, g2), dw2 = nmt_test_buffer(e->dev, o + (size_t)d * ff, w2);
    cl_mem dw3 = nmt_test_buffer(e->dev, o + (size_t)V * d, w3);
    cl_mem ds1 = nmt_test_upload_f32(e->dev, s1, o + ff), db1 = nmt_test_upload_f32(e->dev, b1, o + ff);
    cl_mem dgs1 = nmt_test_upload_f32(e->dev, gs1, o + dr), dgb1 = nmt_test_upload_f32(e->dev, gb1, o + dr);
    cl_mem dgs2 = nmt_test_upload_f32(e->dev, gs2, o + d), dgb2 = nmt_test_upload_f32(e->dev, gb2, o + d);
    cl_mem ds2 = nmt_test_upload_f32(e->dev, s2, o + d), db2 = nmt_test_upload_f32(e->dev, b2, o + d);
    cl_mem ds3 = nmt_test_upload_f32(e->dev, s3, o + V), dga = nmt_test_upload_f32(e->dev, ga, o + d);
    cl_mem dbe = nmt_test_upload_f32(e->dev, be, o + d);
    const size_t nh = (size_t)M * ff, nd = (size_t)M * d, nz = (size_t)M * V;
    cl_mem dh = nmt_test_buffer_f32_fill(e->dev, o + nh, NAN), dg = nmt_test_buffer_f32_fill(e->dev, o + nd, NAN);
    cl_mem dy = nmt_test_buffer_f32_fill(e->dev, o + nd, NAN), dt = nmt_test_buffer_f32_fill(e->dev, nd, NAN);
    cl_mem dz = nmt_test_buffer_f32_fill(e->dev, o + nz, NAN);
    int32_t tok[4];
    for (uint32_t m = 0; m < M; m++) tok[m] = (int32_t)((7 * m + 3) % V);
    cl_mem dtok = nmt_test_buffer(e->dev, M * sizeof(int32_t), tok), de = nmt_test_buffer_f32_fill(e->dev, nd, NAN);
    nmt_test_assert_ok(e->dev, nmt_op_embed_q8(ops, B(dtok, 0), M, 1, 7, B(dw3, o), B(ds3, o), d, 1.5f, B(de, 0)));
    const uint64_t gates = ops->n_gates;
    nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, M, ff, d, 1.0f, B(dx, o), d, B(dw1, o), d, B(ds1, o), 0.0f,
                                              B(dh, o), ff, B(db1, o), 1));
    nmt_status (*gate)(nmt_ops *, uint32_t, uint32_t, uint32_t, nmt_buf, uint32_t, nmt_buf, nmt_buf, nmt_buf,
                       nmt_buf, nmt_buf, nmt_buf, nmt_buf, uint32_t, int) = i8 ? nmt_op_gate_i8 : nmt_op_gate_q8;
    nmt_test_assert_ok(e->dev, gate(ops, M, d, dr, B(dx, o), d, B(dg1, o), B(dgs1, o), B(dgb1, o), B(dg2, o), B(dgs2, o),
                                    B(dgb2, o), B(dg, o), d, 0));
    nmt_test_assert_ok(e->dev, gate(ops, M, d, dr, B(dx, o), d, B(dg1, o), B(dgs1, o), NONE, B(dg2, o), B(dgs2, o),
                                    B(dgb2, o), B(dg, o), d, 1));
    assert_int_equal(ops->n_gates, gates + 2);
    nmt_status st = (i8 ? nmt_op_gemm_i8_nt_ln : nmt_op_gemm_q8_nt_ln)(ops, M, d, ff, B(dh, o), ff, B(dw2, o), ff,
                                                                       B(ds2, o), B(db2, o), B(dg, o), d, B(dga, o),
                                                                       B(dbe, o), 1e-5f, B(dy, o), d);
    assert_int_equal(st, M <= (i8 ? NMT_OPS_I8_LN_ROWS : 2) ? NMT_OK : NMT_ERR_UNSUPPORTED);
    if (st == NMT_ERR_UNSUPPORTED) {
        nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, M, d, ff, 1.0f, B(dh, o), ff, B(dw2, o), ff, B(ds2, o), 0.0f,
                                                  B(dt, 0), d, B(db2, o), 0));
        nmt_test_assert_ok(e->dev, nmt_op_layernorm(ops, B(dt, 0), B(dg, o), B(dy, o), M, d, B(dga, o), B(dbe, o),
                                                    1e-5f));
    }
    nmt_test_assert_ok(e->dev, nmt_op_gemm_q8(ops, M, V, d, 1.0f, B(dy, o), d, B(dw3, o), d, B(ds3, o), 0.0f,
                                              B(dz, o), V, NONE, 0));
    /* the top-k of z: candidates (2k + 1 per row), the scores the pick
     * rewrites and its tokens */
    const uint32_t tk = 5, nc = M * (2 * tk + 1);
    float sc[4], sc2[4];
    for (uint32_t m = 0; m < M; m++) {
        sc[m] = m + 1 == M && M > 1 ? -INFINITY : -0.25f * (float)m;
        sc2[m] = -0.5f * (float)m;
    }
    cl_mem dsc = nmt_test_upload_f32(e->dev, sc, M), dsc2 = nmt_test_upload_f32(e->dev, sc2, M);
    cl_mem dcand = nmt_test_buffer_f32_fill(e->dev, nc, NAN), dcand2 = nmt_test_buffer_f32_fill(e->dev, nc, NAN);
    cl_mem dpick = nmt_test_buffer_f32_fill(e->dev, M, NAN);
    nmt_test_assert_ok(e->dev, nmt_ops_enable_topk(ops));
    nmt_test_assert_ok(e->dev, nmt_op_topk_logprobs(ops, B(dz, o), M, V, V, B(dsc, 0), tk, 1, B(dcand, 0)));
    nmt_test_assert_ok(e->dev, nmt_op_topk_pick(ops, B(dz, o), M, V, V, B(dsc2, 0), tk, 1, B(dcand2, 0), 1,
                                                B(dpick, 0)));
    /* a beam step from the top-k's candidates (K 2 where M is even, else M;
     * at M 4 the second sentence has a finished hypothesis and min_len 8 > t
     * bars EOS; at M 3 the length limit is t: EOS only), then the K|V
     * table's permutation through its back-pointers (M + 1 entries a
     * position, the last never written) */
    const uint32_t K = M % 2 == 0 ? 2 : M, t = 7, ld = M + 1, npos = t + 1, ntab = npos * ld;
    int32_t bst[6] = {0, 0, 20, 0, 1, 20}, tab[8 * 5];
    if (M == 3) bst[2] = (int32_t)t;
    for (uint32_t i = 0; i < ntab; i++) tab[i] = (int32_t)(100 * (i / ld) + i % ld);
    cl_mem dbst = nmt_test_buffer(e->dev, sizeof bst, bst), dtab = nmt_test_buffer(e->dev, ntab * sizeof(int32_t), tab);
    cl_mem dbtok = nmt_test_buffer_f32_fill(e->dev, M, NAN), dback = nmt_test_buffer_f32_fill(e->dev, M, NAN);
    nmt_test_assert_ok(e->dev, nmt_ops_enable_beam(ops));
    const nmt_beam_step bs = {.cand = B(dcand, 0), .state = B(dbst, 0), .tok = B(dbtok, 0), .score = B(dsc, 0),
                              .back = B(dback, 0), .rows = M, .k = tk, .K = K, .V = V, .eos = 1, .t = t,
                              .min_len = M == 4 ? 8 : 0};
    nmt_test_assert_ok(e->dev, nmt_op_beam_advance(ops, &bs));
    nmt_test_assert_ok(e->dev, nmt_op_kv_table_permute(ops, B(dtab, 0), ld, npos, B(dback, 0), M));
    const size_t nk = 2 * (size_t)nc + 2 * M, nb = 3 * (size_t)M + 6 + ntab;
    float *out = nmt_test_alloc_f32(nh + 3 * nd + nz + nk + nb);
    nmt_test_download_f32(e->dev, dh, o, nh, out); /* the read settles the chain first */
    nmt_test_download_f32(e->dev, dg, o, nd, out + nh);
    nmt_test_download_f32(e->dev, dy, o, nd, out + nh + nd);
    nmt_test_download_f32(e->dev, dz, o, nz, out + nh + 2 * nd);
    float *emb = out + nh + 2 * nd + nz, *cand = emb + nd;
    nmt_test_download_f32(e->dev, de, 0, nd, emb);
    nmt_test_download_f32(e->dev, dcand, 0, nc, cand);
    nmt_test_download_f32(e->dev, dcand2, 0, nc, cand + nc);
    nmt_test_download_f32(e->dev, dsc2, 0, M, cand + 2 * nc);
    nmt_test_download_f32(e->dev, dpick, 0, M, cand + 2 * nc + M);
    float *beam = cand + nk; /* tok, score, back, state, table */
    nmt_test_download_f32(e->dev, dbtok, 0, M, beam);
    nmt_test_download_f32(e->dev, dsc, 0, M, beam + M);
    nmt_test_download_f32(e->dev, dback, 0, M, beam + 2 * M);
    nmt_test_download_f32(e->dev, dbst, 0, 6, beam + 3 * M);
    nmt_test_download_f32(e->dev, dtab, 0, ntab, beam + 3 * M + 6);
    int32_t back[4], st_after[6], tab_after[8 * 5];
    memcpy(back, beam + 2 * M, sizeof(int32_t) * M);
    memcpy(st_after, beam + 3 * M, sizeof st_after);
    memcpy(tab_after, beam + 3 * M + 6, sizeof(int32_t) * ntab);
    for (uint32_t j = 0; j < M; j++) /* each row continues one of its sentence's rows */
        if (back[j] < (int32_t)(j / K * K) || back[j] >= (int32_t)(j / K * K + K))
            fail_msg("beam row %u continues row %d (K %u)", j, (int)back[j], K);
    if (M == 3) assert_int_equal(st_after[0], 1); /* at its length limit: done */
    for (uint32_t p = 0; p < npos; p++) /* the table: entry (p, r) = the old (p, back[r]); the last untouched */
        for (uint32_t q = 0; q < ld; q++) {
            const int32_t want = tab[p * ld + (q < M ? (uint32_t)back[q] : q)];
            if (tab_after[p * ld + q] != want)
                fail_msg("K|V table (%u, %u) = %d, want %d", p, q, (int)tab_after[p * ld + q], (int)want);
        }
    for (uint32_t m = 0; m < M; m++) { /* row m's first candidate: z's largest entry (ties to the lower id) */
        const float *zr = out + nh + 2 * nd + (size_t)m * V;
        uint32_t best = 0;
        for (uint32_t v = 1; v < V; v++)
            if (zr[v] > zr[best]) best = v;
        uint32_t id;
        memcpy(&id, &cand[M * tk + (size_t)m * tk], sizeof id);
        if (m + 1 == M && M > 1) assert_int_equal(id, UINT32_MAX); /* the dead row */
        else if (id != best) fail_msg("top-k row %u: first id %u, want %u", m, id, best);
    }
    for (uint32_t m = 0; m < M; m++) /* e: the table's row, dequantized, x 1.5 + the position's term (within 1e-5) */
        for (uint32_t c2 = 0; c2 < d; c2++) {
            const uint32_t half = d / 2, i = c2 < half ? c2 : c2 - half;
            const double w = exp(-9.210340371976184 * (double)i / (double)(half > 1 ? half - 1 : 1));
            const double p = c2 >= 2 * half ? 0.0 : c2 < half ? sin(7.0 * w) : cos(7.0 * w);
            const double want = (double)w3[o + (size_t)tok[m] * d + c2] * s3[o + tok[m]] * 1.5 + p;
            if (fabs(emb[(size_t)m * d + c2] - want) > 1e-4 * (1.0 + fabs(want)))
                fail_msg("e[%u,%u] = %.7g, want %.7g", m, c2, emb[(size_t)m * d + c2], want);
        }
    /* h against the host: x quantized per row (|error| <= amax / 254 per
     * element) times W1 and its scales, + b1, ReLU */
    for (uint32_t m = 0; m < M; m++) {
        const float *xr = x + o + (size_t)m * d;
        float amax = 0.0f;
        for (uint32_t k = 0; k < d; k++) amax = fmaxf(amax, fabsf(xr[k]));
        for (uint32_t n = 0; n < ff; n++) {
            double acc = 0.0, bound = 0.0;
            for (uint32_t k = 0; k < d; k++) {
                const double w = (double)w1[o + (size_t)n * d + k] * s1[o + n];
                acc += xr[k] * w;
                bound += fabs(w) * amax / 254.0;
            }
            const double want = fmax(acc + b1[o + n], 0.0), got = out[(size_t)m * ff + n];
            if (fabs(got - want) > bound * 1.01 + 1e-5 * (1.0 + fabs(want)))
                fail_msg("h[%u,%u] = %.7g, want %.7g (bound %.3g)", m, n, got, want, bound);
        }
    }
    const cl_mem mems[] = {dx, dw1, dg1, dg2, dw2, dw3, ds1, db1, dgs1, dgb1, dgs2, dgb2, ds2, db2, ds3, dga, dbe,
                           dh, dg, dy, dt, dz, dtok, de, dsc, dsc2, dcand, dcand2, dpick, dbst, dtab, dbtok, dback,
                           ops->i8_a.mem, ops->i8_s.mem};
    for (size_t i = 0; i < NMT_ARRAY_LEN(mems); i++) nmt_test_release(mems[i]);
    void *host[] = {x, w1, g1, g2, w2, w3, s1, b1, gs1, gb1, gs2, gb2, s2, b2, s3, ga, be};
    for (size_t i = 0; i < NMT_ARRAY_LEN(host); i++) free(host[i]);
    return out;
}

/* The int8 step chained and not, int8 x int8 in every variant the device
 * builds (its fast one and the portable one) and int8 weights x fp32 (the
 * m2 and m16 classes' own kernels): the same bits in every output; with
 * the chain on a CPU, one launch of 16 slots (a product and a gate 2 each,
 * an embedding, a norm, the top-k, the pick, the beam step and the
 * permutation 1; the int8 x int8 products' quantizations 3 more: 19),
 * which the int8 embedding begins; where the reductions use subgroups the
 * top-ks launch on their own, and so do the beam step and the permutation
 * after them; the first product within the
 * quantization bound of the host's (x exact for int8 weights x fp32: the
 * bound holds too). */
static void test_chain_i8_step(void **state) {
    env *e = *state;
    const int variants[3] = {0, nmt_i8dot_fast_variant(e->dev), NMT_I8_PORTABLE};
    for (int vi = 0; vi < 3; vi++) {
        if (vi == 2 && variants[1] == NMT_I8_PORTABLE) break;
        for (size_t i = 0; i < NMT_ARRAY_LEN(i8_cases); i++) {
            const i8_case *c = &i8_cases[i];
            const size_t n = (size_t)c->M * (c->ff + 3 * c->d + c->vocab + 2 * (2 * 5 + 1) + 2 + 3) + 6 +
                             8 * ((size_t)c->M + 1);
            float *res[2];
            for (int pass = 0; pass < 2; pass++) {
                nmt_ops ops;
                if (variants[vi] == 0) { /* int8 weights x fp32 */
                    nmt_test_assert_ok(e->dev, nmt_ops_init(&ops, e->dev));
                    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(&ops));
                    memset(ops.i8_use, 0, sizeof ops.i8_use);
                } else {
                    open_i8_ops(e, &ops, variants[vi]);
                }
                nmt_test_assert_ok(e->dev, nmt_ops_chain_enable(&ops, pass));
                ops.fuse_gate = 1; /* a GPU (Oclgrind too): on request */
                res[pass] = i8_step(e, &ops, c, 900 + i, variants[vi] != 0);
                if (ops.chain_on) {
                    if (variants[vi] != 0) assert_non_null(ops.k_i8_chain);
                    else assert_non_null(ops.k_q8_chain[nmt_ops_chain_host(&ops, NMT_GOP_Q8, nmt_gemm_class_of(c->M))]);
                    assert_int_equal(ops.n_chains, 1);
                    assert_int_equal(ops.n_chained, (variants[vi] != 0 ? 15 : 12) + (ops.subgroups ? 0 : 4));
                } else {
                    assert_int_equal(ops.n_chains, 0);
                    if (pass == 1) assert_false(e->dev->info.is_cpu && !nmt_env_flag("NMT_EDGE_NO_PRODUCT_CHAIN"));
                }
                nmt_ops_release(&ops);
            }
            for (size_t j = 0; j < n; j++)
                if (memcmp(&res[0][j], &res[1][j], sizeof(float)) != 0)
                    fail_msg("variant %d case %zu (M=%u d=%u): output %zu chained %.9g, launched %.9g", variants[vi],
                             i, c->M, c->d, j, res[1][j], res[0][j]);
            free(res[0]);
            free(res[1]);
        }
    }
}

/* Which program holds a class's chain kernel (nmt_ops_chain_host): the m2
 * class's for the m16 class too where both are ours with one vector width,
 * the class's own where the widths differ, a class works in groups or is
 * CLBlast's, or (int8 weights x fp32) a class is deferred; and the device's
 * ops build one gemm_q8_chain / gemm_chain for both classes exactly then. */
static void test_chain_host(void **state) {
    env *e = *state;
    nmt_ops t;
    memset(&t, 0, sizeof t);
    const nmt_gemm_cfg own16 = {.provider = NMT_GEMM_OWN, .tm = 1, .tn = 2, .vw = 16, .wg = 64};
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++) t.cfg[op][c] = own16;
    t.cfg[NMT_GOP_Q8][NMT_GCLASS_M16].tn = 8; /* blocks do not matter, widths do */
    for (int op = 0; op < NMT_GOP_COUNT; op++) {
        const nmt_gemm_class want = op == NMT_GOP_NT || op == NMT_GOP_Q8 ? NMT_GCLASS_M2 : NMT_GCLASS_M16;
        assert_int_equal(nmt_ops_chain_host(&t, (nmt_gemm_op)op, NMT_GCLASS_M16), want);
        assert_int_equal(nmt_ops_chain_host(&t, (nmt_gemm_op)op, NMT_GCLASS_M2), NMT_GCLASS_M2);
        assert_int_equal(nmt_ops_chain_host(&t, (nmt_gemm_op)op, NMT_GCLASS_BIG), NMT_GCLASS_BIG);
    }
    t.cfg[NMT_GOP_Q8][NMT_GCLASS_M16].vw = 8;
    assert_int_equal(nmt_ops_chain_host(&t, NMT_GOP_Q8, NMT_GCLASS_M16), NMT_GCLASS_M16);
    assert_int_equal(nmt_ops_chain_host(&t, NMT_GOP_NT, NMT_GCLASS_M16), NMT_GCLASS_M2);
    t.cfg[NMT_GOP_Q8][NMT_GCLASS_M16].vw = 16;
    t.lazy_q8[NMT_GCLASS_M16] = 1;
    assert_int_equal(nmt_ops_chain_host(&t, NMT_GOP_Q8, NMT_GCLASS_M16), NMT_GCLASS_M16);
    assert_int_equal(nmt_ops_chain_host(&t, NMT_GOP_NT, NMT_GCLASS_M16), NMT_GCLASS_M2);
    t.lazy_q8[NMT_GCLASS_M16] = 0;
    t.cfg[NMT_GOP_NT][NMT_GCLASS_M2] = (nmt_gemm_cfg){.provider = NMT_GEMM_OWN, .tm = 2, .tn = 1, .vw = 16, .wg = 64,
                                                      .kgroup = 1};
    assert_int_equal(nmt_ops_chain_host(&t, NMT_GOP_NT, NMT_GCLASS_M16), NMT_GCLASS_M16);
    t.cfg[NMT_GOP_NT][NMT_GCLASS_M2] = own16;
    t.cfg[NMT_GOP_NT][NMT_GCLASS_M16].provider = NMT_GEMM_CLBLAST;
    assert_int_equal(nmt_ops_chain_host(&t, NMT_GOP_NT, NMT_GCLASS_M16), NMT_GCLASS_M16);

    nmt_ops ops;
    nmt_test_assert_ok(e->dev, nmt_ops_init(&ops, e->dev));
    nmt_test_assert_ok(e->dev, nmt_ops_enable_q8(&ops));
    for (int q8 = 0; q8 < 2; q8++) {
        const nmt_gemm_op op = q8 ? NMT_GOP_Q8 : NMT_GOP_NT;
        cl_kernel *k = q8 ? ops.k_q8_chain : ops.k_chain;
        const nmt_gemm_cfg *c = ops.cfg[op];
        const int chained = e->dev->info.is_cpu && c[0].provider == NMT_GEMM_OWN && !c[0].kgroup;
        const int shared = nmt_ops_chain_host(&ops, op, NMT_GCLASS_M16) == NMT_GCLASS_M2;
        assert_int_equal(shared, chained && c[1].provider == NMT_GEMM_OWN && !c[1].kgroup && c[0].vw == c[1].vw);
        assert_int_equal(k[0] != NULL, chained);
        if (shared) assert_null(k[1]);
    }
    nmt_ops_release(&ops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_host),
        cmocka_unit_test(test_chain_step),
        cmocka_unit_test(test_chain_capacity),
        cmocka_unit_test(test_chain_not_taken),
        cmocka_unit_test(test_chain_i8_step),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
