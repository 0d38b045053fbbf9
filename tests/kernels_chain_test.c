/* kernels_chain_test.c — few-row products and norms chained into one
 * launch (runtime/ops_chain.c, cl/gemm.cl gemm_chain):
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
 *     products, chain_on 0 — launched as before. */
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
                nmt_test_assert_ok(e->dev, nmt_ops_set_pos_table(&ops, B(b.pt, 0), T + 1, c->d));
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

/* 24 products in a row, each with weights, a bias and an output of its
 * own: more buffers than a launch holds (a chain's first op brings 4, each
 * next 3: 21 ops fill 64 buffer slots), then 50 more on two buffers: more
 * op slots than a launch holds (48).  Chained and not: the same bits; with
 * the chain, 2 launches (21 + 3) and 2 more (48 + 2). */
static void test_chain_capacity(void **state) {
    env *e = *state;
    enum { NP = 24, NQ = 50, D = 48 };
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_step),
        cmocka_unit_test(test_chain_capacity),
        cmocka_unit_test(test_chain_not_taken),
    };
    return cmocka_run_group_tests(tests, kernels_setup, ops_teardown);
}
