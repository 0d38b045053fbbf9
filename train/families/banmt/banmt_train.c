/* SPDX-License-Identifier: MIT */
/* banmt_train.c — the BA-NMT family with gradients (banmt_train.h).
 *
 * The forward is the runtime's own (banmt_fwd.c) run over buffers that keep
 * every decoder step's activations (teacher forcing: one step per target
 * position, history states h~^i, s~^i of every source position per step),
 * with dropout on the readout; the backward through time is
 * banmt_train_bwd.c.  Parameters, gradients and Adam moments are four flat
 * device buffers laid out by the family's tensor catalogue
 * (train/ops/param_store.h). */
#include "banmt_train.h"
#include "banmt_train_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "device.h"
#include "format.h"
#include "family_writer.h"

#define BAT_ERR_NOMEM NMT_ERR_IO /* the writer's convention for host memory */

/* ------------------------------------------------------------------------ */
/* Parameter layout: the family's catalogue                                 */
/* ------------------------------------------------------------------------ */

/* The tensors of P (train/ops/param_store.h lays them out). */
static nmt_status walk(void *mp, int bind, nmt_tensor_fn fn, void *ctx) {
    bat_model *m = (bat_model *)mp;
    return nmt_ba_catalogue(&m->c, bind ? &m->w : NULL, fn, ctx);
}

/* ------------------------------------------------------------------------ */
/* Memory plan                                                              */
/* ------------------------------------------------------------------------ */

/* The plan's sizes in floats: `rows` (n * T and n * S bounds), `pos` (n *
 * S * T bound), per-buffer widths. */
typedef struct plan {
    size_t R, PT, B;
} plan;

static plan plan_of(const nmt_train_limits *lim) {
    const size_t full = (size_t)lim->max_seqs * NMT_MAX(lim->max_src_len, lim->max_tgt_len);
    const size_t R = lim->max_tokens ? NMT_MIN((size_t)lim->max_tokens, full) : full;
    return (plan){.R = R, .PT = R * (lim->max_tgt_len + 1), .B = lim->max_seqs};
}

/* Each buffer of the model in floats, in one list: alloc walks it to
 * create them, nmt_ba_train_act_bytes to sum them. */
typedef void (*buf_fn)(void *ctx, nmt_buf *b, size_t floats);

static void walk_bufs(const nmt_ba_cfg *c, const nmt_train_limits *lim, bat_model *m, buf_fn fn, void *ctx) {
    const plan p = plan_of(lim);
    const size_t R = p.R, PT = p.PT, B = p.B, E = c->emb, H = c->hidden, A = c->att, Hh = c->hist;
    const size_t Ro = c->readout, Rr = nmt_ba_r_rows(c), V = c->tgt_vocab, W = c->cat, Hm = NMT_MAX(H, Hh);
    bat_model z;
    if (m == NULL) {
        memset(&z, 0, sizeof z);
        m = &z;
    }
    nmt_ba_enc_acts *en = &m->enc;
    fn(ctx, &en->x, R * E);
    fn(ctx, &en->zf, R * 5 * H);
    fn(ctx, &en->zb, R * 5 * H);
    fn(ctx, &en->hg, B * 3 * H);
    fn(ctx, &en->state, B * H);
    fn(ctx, &en->h, R * 2 * H);
    fn(ctx, &en->k, R * A);
    if (c->sa) fn(ctx, &en->ps, R * 3 * Hh);
    fn(ctx, &en->mean_a, R);
    fn(ctx, &en->mean, B * 2 * H);
    fn(ctx, &en->s0, B * H);
    fn(ctx, &en->zero, 1);
    /* per target step (slices t * n * width) */
    fn(ctx, &m->cat, R * W);
    fn(ctx, &m->z1, R * 5 * H);
    fn(ctx, &m->st, R * H);
    fn(ctx, &m->q, R * A);
    fn(ctx, &m->alpha, PT);
    fn(ctx, &m->z2, R * 5 * H);
    fn(ctx, &m->u, R * Rr);
    fn(ctx, &m->tt, R * Ro);
    if (c->sa) {
        fn(ctx, &m->e1, PT * A);
        fn(ctx, &m->zs, PT * 5 * Hh);
        fn(ctx, &m->hs, PT * Hh);
    }
    if (c->ta) {
        fn(ctx, &m->e2, PT * A);
        fn(ctx, &m->zt, PT * 5 * Hh);
        fn(ctx, &m->ts, PT * Hh);
        fn(ctx, &m->pt, R * 3 * Hh);
    }
    fn(ctx, &m->hg, NMT_MAX(B * 3 * H, (c->sa || c->ta) ? R * 3 * Hh : 0));
    fn(ctx, &m->logits, R * V);
    fn(ctx, &m->loss, R);
    fn(ctx, &m->nll, R);
    fn(ctx, &m->partial, NMT_TRAIN_REDUCE_GROUPS);
    fn(ctx, &m->red, 2);
    /* backward scratch */
    fn(ctx, &m->dt, R * Ro);
    fn(ctx, &m->dcat, B * W);
    fn(ctx, &m->du, B * Rr);
    fn(ctx, &m->dz, NMT_MAX(B * 4 * H, (c->sa || c->ta) ? R * 4 * Hh : 0));
    fn(ctx, &m->dg, NMT_MAX(B * 3 * H, (c->sa || c->ta) ? R * 3 * Hh : 0));
    fn(ctx, &m->ds_a, B * 2 * H); /* also the gradient of the mean (n, 2H) */
    fn(ctx, &m->ds_b, B * 2 * H);
    fn(ctx, &m->dtmp, B * NMT_MAX(Hm, 2 * H));
    if (c->sa) {
        fn(ctx, &m->dhs, R * Hh);
        fn(ctx, &m->de1, R * A);
        fn(ctx, &m->dps, R * 3 * Hh);
    }
    if (c->ta) {
        fn(ctx, &m->dts, R * Hh);
        fn(ctx, &m->de2, R * A);
        fn(ctx, &m->dpt, B * 3 * Hh);
    }
    fn(ctx, &m->dalpha, R);
    fn(ctx, &m->dq, B * A);
    fn(ctx, &m->dk, R * A);
    fn(ctx, &m->dh, R * 2 * H);
    fn(ctx, &m->dx, R * E);
    fn(ctx, &m->dy, R * E);
    fn(ctx, &m->dze, R * 4 * H);
    fn(ctx, &m->dge, B * 3 * H);
    fn(ctx, &m->dhe, B * H);
    fn(ctx, &m->ascr, R + B * A);
    fn(ctx, &m->mq, B);
    fn(ctx, &m->mk, R);
    fn(ctx, &m->mv, 1);
    fn(ctx, &m->mscr, R + B);
    /* int buffers (cl_int is 4 bytes, like float) */
    fn(ctx, &m->src_tok, R);
    fn(ctx, &m->tgt_in, R);
    fn(ctx, &m->tgt_out, R);
    fn(ctx, &m->klen, B);
    fn(ctx, &m->mask, R);
    fn(ctx, &m->perm, R);
    fn(ctx, &m->seg, R + 1);
    fn(ctx, &m->segtok, R);
}

typedef struct sum_ctx {
    size_t bytes, largest;
} sum_ctx;

static void sum_one(void *ctx, nmt_buf *b, size_t floats) {
    (void)b;
    sum_ctx *s = (sum_ctx *)ctx;
    const size_t bytes = floats > SIZE_MAX / 4 ? SIZE_MAX : floats * 4;
    s->bytes = bytes > SIZE_MAX - s->bytes ? SIZE_MAX : s->bytes + bytes;
    s->largest = NMT_MAX(s->largest, bytes);
}

size_t nmt_ba_train_act_bytes(const nmt_ba_cfg *c, const nmt_train_limits *lim) {
    sum_ctx s = {0, 0};
    if (c == NULL || lim == NULL) return 0;
    walk_bufs(c, lim, NULL, sum_one, &s);
    return s.bytes;
}

typedef struct alloc_ctx {
    bat_model *m;
    nmt_status st;
} alloc_ctx;

static void alloc_one(void *ctx, nmt_buf *b, size_t floats) {
    alloc_ctx *a = (alloc_ctx *)ctx;
    if (a->st != NMT_OK) return;
    bat_model *m = a->m;
    if (m->n_mems == NMT_ARRAY_LEN(m->mems)) {
        a->st = NMT_ERR_INVALID_ARGUMENT;
        return;
    }
    size_t bytes;
    if (!nmt_mul_ok(floats ? floats : 1, sizeof(float), &bytes)) {
        a->st = NMT_ERR_DEVICE_MEMORY;
        return;
    }
    cl_mem mem = NULL;
    a->st = nmt_device_buffer(m->dev, bytes, NULL, &mem);
    if (a->st != NMT_OK) return;
    m->mems[m->n_mems++] = mem;
    *b = (nmt_buf){mem, 0};
}

/* ------------------------------------------------------------------------ */
/* The model                                                                */
/* ------------------------------------------------------------------------ */

static void destroy(bat_model *m) {
    if (m == NULL) return;
    if (m->t_ok) nmt_train_ops_release(&m->t);
    if (m->ops_ok) nmt_ops_release(&m->ops);
    for (size_t i = 0; i < m->n_mems; i++)
        if (m->mems[i]) clReleaseMemObject(m->mems[i]);
    nmt_pstore_release(&m->ps);
    free(m->h_src);
    free(m->h_tin);
    free(m->h_tout);
    free(m->h_klen);
    free(m->h_mask);
    free(m->h_perm);
    free(m->h_seg);
    free(m->h_segtok);
    free(m->h_count);
    free(m->h_nll);
    free(m);
}

void bat_step_acts(void *user, uint32_t t, nmt_ba_acts *o) {
    const bat_model *m = (const bat_model *)user;
    const nmt_ba_cfg *c = &m->c;
    const size_t n = m->n, L = m->S, H = c->hidden, A = c->att, Hh = c->hist, W = c->cat, pos = n * L;
    memset(o, 0, sizeof *o);
    o->cat = nmt_buf_at(m->cat, t * n * W);
    if (t > 0) {
        o->s_prev = nmt_buf_at(m->cat, (t - 1) * n * W + nmt_ba_col_s(c));
        o->s_prev_ld = c->cat;
    } else {
        o->s_prev = m->enc.s0;
        o->s_prev_ld = c->hidden;
    }
    o->z1 = nmt_buf_at(m->z1, t * n * 5 * H);
    o->z2 = nmt_buf_at(m->z2, t * n * 5 * H);
    o->hg1 = o->hg2 = o->hgs = o->hgt = m->hg; /* products: consumed by the cell at once */
    o->st = nmt_buf_at(m->st, t * n * H);
    o->q = nmt_buf_at(m->q, t * n * A);
    o->alpha = nmt_buf_at(m->alpha, t * pos);
    if (c->sa) {
        o->e1 = nmt_buf_at(m->e1, t * pos * A);
        o->zs = nmt_buf_at(m->zs, t * pos * 5 * Hh);
        o->hs_prev = nmt_buf_at(m->hs, (t ? t - 1 : 0) * pos * Hh); /* h~ after step t - 1 */
        o->hs_next = nmt_buf_at(m->hs, t * pos * Hh);
    }
    if (c->ta) {
        o->e2 = nmt_buf_at(m->e2, t * pos * A);
        o->zt = nmt_buf_at(m->zt, t * pos * 5 * Hh);
        o->pt = nmt_buf_at(m->pt, t * n * 3 * Hh);
        o->ts_prev = nmt_buf_at(m->ts, (t ? t - 1 : 0) * pos * Hh);
        o->ts_next = nmt_buf_at(m->ts, t * pos * Hh);
    }
    o->u = nmt_buf_at(m->u, t * n * nmt_ba_r_rows(c));
    o->t = nmt_buf_at(m->tt, t * n * c->readout);
    o->t_ld = c->readout;
}

nmt_ba_pass bat_pass(const bat_model *m, uint32_t t) {
    return (nmt_ba_pass){.rows = m->n, .group = 1, .t = t, .src_len = m->S, .key_len = m->klen,
                         .mask = (m->c.sa || m->c.ta) ? m->mask : NMT_NO_BUF, .h = m->enc.h, .k = m->enc.k,
                         .ps = m->enc.ps, .align = NMT_NO_BUF, .align_ld = 0};
}

/* Dropout on the readout t_i of step t: site 1 + t. */
static nmt_status train_drop(void *user, nmt_buf x, uint32_t n, uint64_t site) {
    bat_model *m = (bat_model *)user;
    return nmt_op_dropout(&m->t, x, x, n, m->drop_p, m->drop_seed, site << 32);
}

static nmt_status create_impl(bat_model *m, const void *image, size_t size) {
    nmt_file f;
    NMT_TRY(nmt_file_open(&f, image, size, 1));
    const nmt_family *fam;
    NMT_TRY(nmt_family_of(&f, &fam));
    NMT_CHECK(fam == &nmt_family_banmt, NMT_ERR_MODEL_ARCH);
    NMT_TRY(nmt_family_parse(fam, &f, &m->c));
    NMT_TRY(nmt_pstore_plan(&m->ps, m->dev, &m->t, &f, walk, m));
    /* the activation plan against the cap: O(B * T * S * hist) */
    m->act_bytes = nmt_ba_train_act_bytes(&m->c, &m->lim);
    const uint64_t cap = m->lim.max_act_bytes ? m->lim.max_act_bytes : m->dev->info.global_mem_bytes;
    NMT_CHECK(cap == 0 || m->act_bytes <= cap, NMT_ERR_DEVICE_MEMORY);

    NMT_TRY(nmt_ops_init(&m->ops, m->dev));
    m->ops_ok = 1;
    NMT_TRY(nmt_ops_enable_nn(&m->ops));
    NMT_TRY(nmt_ops_enable_recurrent(&m->ops));
    NMT_TRY(nmt_ops_enable_additive(&m->ops));
    NMT_TRY(nmt_train_ops_init(&m->t, m->dev));
    m->t_ok = 1;

    NMT_TRY(nmt_pstore_alloc(&m->ps, walk, m)); /* P, G, M, V and the views into P */
    alloc_ctx ac = {m, NMT_OK};
    walk_bufs(&m->c, &m->lim, m, alloc_one, &ac);
    NMT_TRY(ac.st);
    NMT_TRY(nmt_op_fill(&m->t, m->enc.zero, 1, 0.0f));
    const plan p = plan_of(&m->lim);
    const size_t vmax = NMT_MAX(m->c.src_vocab, m->c.tgt_vocab);
    m->h_src = malloc(p.R * sizeof(int32_t));
    m->h_tin = malloc(p.R * sizeof(int32_t));
    m->h_tout = malloc(p.R * sizeof(int32_t));
    m->h_klen = malloc(p.B * sizeof(int32_t));
    m->h_mask = malloc(p.R * sizeof(int32_t));
    m->h_perm = malloc(p.R * sizeof(int32_t));
    m->h_seg = malloc((p.R + 1) * sizeof(int32_t));
    m->h_segtok = malloc(p.R * sizeof(int32_t));
    m->h_count = malloc((vmax + 1) * sizeof(uint32_t));
    m->h_nll = malloc(p.R * sizeof(float));
    NMT_CHECK(m->h_src && m->h_tin && m->h_tout && m->h_klen && m->h_mask && m->h_perm && m->h_seg && m->h_segtok &&
                  m->h_count && m->h_nll,
              BAT_ERR_NOMEM);
    m->fw = (nmt_ba_fwd){.ops = &m->ops, .c = &m->c, .w = &m->w, .acts = bat_step_acts, .drop = NULL, .user = m};

    return nmt_pstore_load(&m->ps, &f);
}

static nmt_status rec_create(nmt_device *dev, const void *image, size_t size, const nmt_train_limits *lim,
                             void **out) {
    NMT_CHECK(out != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    NMT_CHECK(dev != NULL && image != NULL && lim != NULL, NMT_ERR_INVALID_ARGUMENT);
    nmt_train_limits L = *lim;
    /* BA-NMT takes a max_tokens above a full batch as 0 (a full batch)
     * before the range check, where the Transformer refuses one above 2^24 */
    if ((uint64_t)L.max_tokens > (uint64_t)L.max_seqs * NMT_MAX(L.max_src_len, L.max_tgt_len)) L.max_tokens = 0;
    NMT_TRY(nmt_train_limits_resolve(&L));
    bat_model *m = calloc(1, sizeof *m);
    NMT_CHECK(m != NULL, BAT_ERR_NOMEM);
    m->dev = dev;
    m->lim = L;
    nmt_status st = create_impl(m, image, size);
    if (st != NMT_OK) {
        destroy(m);
        return st;
    }
    *out = m;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

/* Validate and upload a batch; decoder rows step-major (row t * n + b). */
static nmt_status load_batch(bat_model *m, const nmt_train_batch *b) {
    NMT_CHECK(nmt_train_batch_fits(b, &m->lim), NMT_ERR_INVALID_ARGUMENT);
    const nmt_ba_cfg *c = &m->c;
    const uint32_t n = b->n_seq, S = b->src_len, T = b->tgt_len;
    for (uint32_t i = 0; i < n; i++) {
        NMT_CHECK(b->src_lens[i] >= 1 && b->src_lens[i] <= S && b->tgt_lens[i] >= 1 && b->tgt_lens[i] <= T,
                  NMT_ERR_INVALID_ARGUMENT);
        m->h_klen[i] = (int32_t)b->src_lens[i];
        for (uint32_t j = 0; j < S; j++) {
            const size_t r = (size_t)i * S + j;
            NMT_CHECK(b->src[r] >= 0 && (uint32_t)b->src[r] < c->src_vocab, NMT_ERR_TOKEN_OUT_OF_RANGE);
            m->h_src[r] = b->src[r];
            m->h_mask[r] = j < b->src_lens[i];
        }
        for (uint32_t p = 0; p < T; p++) {
            const size_t r = (size_t)i * T + p, q = (size_t)p * n + i;
            NMT_CHECK(b->tgt_in[r] >= 0 && (uint32_t)b->tgt_in[r] < c->tgt_vocab, NMT_ERR_TOKEN_OUT_OF_RANGE);
            if (p < b->tgt_lens[i])
                NMT_CHECK(b->tgt_out[r] >= 0 && (uint32_t)b->tgt_out[r] < c->tgt_vocab, NMT_ERR_TOKEN_OUT_OF_RANGE);
            m->h_tin[q] = b->tgt_in[r];
            m->h_tout[q] = p < b->tgt_lens[i] ? b->tgt_out[r] : -1; /* ignored by the loss */
        }
    }
    m->n = n;
    m->S = S;
    m->T = T;
    const size_t rs = (size_t)n * S, rt = (size_t)n * T;
    NMT_TRY(nmt_device_write(m->dev, m->src_tok.mem, 0, rs * sizeof(int32_t), m->h_src));
    NMT_TRY(nmt_device_write(m->dev, m->mask.mem, 0, rs * sizeof(int32_t), m->h_mask));
    NMT_TRY(nmt_device_write(m->dev, m->tgt_in.mem, 0, rt * sizeof(int32_t), m->h_tin));
    NMT_TRY(nmt_device_write(m->dev, m->tgt_out.mem, 0, rt * sizeof(int32_t), m->h_tout));
    return nmt_device_write(m->dev, m->klen.mem, 0, n * sizeof(int32_t), m->h_klen);
}

/* Teacher-forced forward of the loaded batch into m->logits (rows t * n +
 * b), every step's activations kept; readout dropout p (0: none). */
static nmt_status forward(bat_model *m, float p, uint64_t seed) {
    const nmt_ba_cfg *c = &m->c;
    m->fw.drop = p > 0.0f ? train_drop : NULL;
    m->drop_p = p;
    m->drop_seed = seed;
    NMT_TRY(nmt_ba_encoder(&m->fw, &m->enc, m->src_tok, m->klen, m->n, m->S));
    for (uint32_t t = 0; t < m->T; t++) {
        nmt_ba_acts a;
        bat_step_acts(m, t, &a);
        NMT_TRY(nmt_ba_embed(&m->fw, &m->w.tgt_emb, nmt_buf_at(m->tgt_in, (size_t)t * m->n), m->n, a.cat, c->cat));
        const nmt_ba_pass ps = bat_pass(m, t);
        NMT_TRY(nmt_ba_step(&m->fw, &ps));
    }
    return nmt_ba_logits(&m->fw, m->tt, c->readout, m->n * m->T, m->logits);
}

static nmt_status xent(bat_model *m, float eps, float grad_scale, int grad) {
    const uint32_t rt = m->n * m->T, V = m->c.tgt_vocab;
    return nmt_op_xent(&m->t, m->logits, rt, V, V, m->tgt_out, -1, eps, grad_scale, m->loss, m->nll,
                       grad ? m->logits : NMT_NO_BUF, V);
}

static nmt_status read_sums(bat_model *m, double *loss_sum, double *nll_sum) {
    return nmt_train_loss_sums(&m->t, m->loss, m->nll, m->n * m->T, m->partial, m->red, loss_sum, nll_sum);
}

/* ------------------------------------------------------------------------ */
/* The record's calls                                                       */
/* ------------------------------------------------------------------------ */

static nmt_status rec_forward_backward(void *mp, const nmt_train_batch *b, const nmt_train_step_opts *o,
                                       double *loss_sum, double *nll_sum) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL && o != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(nmt_train_step_opts_ok(o), NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, o->dropout, o->seed));
    NMT_TRY(xent(m, o->label_smoothing, o->grad_scale, 1));
    NMT_TRY(bat_backward(m, o->dropout, o->seed));
    return read_sums(m, loss_sum, nll_sum);
}

static nmt_status rec_forward_loss(void *mp, const nmt_train_batch *b, float ls, double *loss_sum, double *nll_sum) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL && ls >= 0.0f && ls < 1.0f, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, 0.0f, 0));
    NMT_TRY(xent(m, ls, 1.0f, 0));
    return read_sums(m, loss_sum, nll_sum);
}

static nmt_status rec_token_logprobs(void *mp, const nmt_train_batch *b, float *lp) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL && lp != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, 0.0f, 0));
    NMT_TRY(xent(m, 0.0f, 1.0f, 0));
    const uint32_t rt = m->n * m->T;
    NMT_TRY(nmt_device_read(m->dev, m->nll.mem, 0, rt * sizeof(float), m->h_nll));
    for (uint32_t i = 0; i < m->n; i++)
        for (uint32_t p = 0; p < m->T; p++)
            lp[(size_t)i * m->T + p] = p < b->tgt_lens[i] ? -m->h_nll[(size_t)p * m->n + i] : 0.0f;
    return NMT_OK;
}

static nmt_status rec_zero_grad(void *mp) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_zero_grad(&m->ps);
}

static nmt_status rec_grad_norm(void *mp, double *norm) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL && norm != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_grad_norm(&m->ps, m->partial, m->red, norm);
}

static nmt_status rec_adam_step(void *mp, const nmt_adam_params *ap) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL && ap != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_adam_step(&m->ps, ap);
}

static nmt_status rec_add_to_writer(void *mp, nmtw_writer *w, int optimizer) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL && w != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(nmtw_add_hparams(w, &nmt_family_banmt, &m->c));
    return nmt_pstore_add_to_writer(&m->ps, w, optimizer);
}

static size_t rec_act_bytes(const void *image, size_t size, const nmt_train_limits *lim) {
    nmt_file f;
    nmt_ba_cfg c;
    if (nmt_file_open(&f, image, size, 0) != NMT_OK || nmt_family_parse(&nmt_family_banmt, &f, &c) != NMT_OK) return 0;
    return nmt_ba_train_act_bytes(&c, lim);
}

static void rec_destroy(void *m) { destroy((bat_model *)m); }
static nmt_pstore *rec_store(void *m) { return m ? &((bat_model *)m)->ps : NULL; }
static size_t rec_n_params(const void *m) { return m ? ((const bat_model *)m)->ps.n_params : 0; }
static uint32_t rec_d_model(const void *m) { return m ? ((const bat_model *)m)->c.hidden : 0; }

uint32_t nmt_ba_train_n_tensors(void *m) { return m ? ((bat_model *)m)->ps.n_tab : 0; }

void nmt_ba_train_tensor(void *mp, uint32_t i, const char **name, size_t *offset, size_t *count) {
    const bat_model *m = (const bat_model *)mp;
    if (m == NULL || i >= m->ps.n_tab) return;
    if (name) *name = m->ps.tab[i].name;
    if (offset) *offset = m->ps.tab[i].off;
    if (count) *count = m->ps.tab[i].count;
}

nmt_status nmt_ba_train_read(void *mp, float *params, float *grads) {
    bat_model *m = (bat_model *)mp;
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_read(&m->ps, params, grads, NULL, NULL);
}

const nmt_train_family nmt_banmt_train_family = {
    .arch = NMT_BA_ARCH,
    .create = rec_create,
    .destroy = rec_destroy,
    .n_params = rec_n_params,
    .d_model = rec_d_model,
    .add_to_writer = rec_add_to_writer,
    .zero_grad = rec_zero_grad,
    .forward_backward = rec_forward_backward,
    .forward_loss = rec_forward_loss,
    .token_logprobs = rec_token_logprobs,
    .grad_norm = rec_grad_norm,
    .adam_step = rec_adam_step,
    .act_bytes = rec_act_bytes,
    .attention_mass = NULL,
    .store = rec_store,
};
