/* SPDX-License-Identifier: MIT */
/* banmt.c — the BA-NMT family in the runtime (docs/ARCHITECTURES.md
 * "BA-NMT"): its registry record, plan (weights from the catalogue, the
 * encoder's outputs, the per-row decoder state s, h~, s~ and the step's
 * scratch) and the session's entry points, each a few calls into the
 * shared forward (banmt_fwd.h).  Incremental decoding runs one step for
 * all beam rows; teacher-forced scoring loops the same step over
 * positions and keeps each position's readout for project.  Everything is
 * planned once: the entry points only enqueue. */
#include "banmt_fwd.h"

#include <string.h>

_Static_assert(sizeof(nmt_ba_cfg) <= NMT_FAMILY_CFG_BYTES, "config fits the session's slot");

typedef struct ba_state {
    nmt_ba_cfg c;
    nmt_plan_dims dims;
    nmt_ba_weights w;
    nmt_ba_fwd fw;
    nmt_ba_enc_acts enc; /* the encoder's buffers and outputs (max_batch * src_cap rows) */
    nmt_ba_acts acts;    /* the step's scratch, shared by every step (state fields set per call) */
    /* per-row decoder state (step_rows rows; history row b holds L positions
     * of the last encode, b * L * hist floats in) */
    nmt_buf s;           /* (step_rows, H) s_{i-1} */
    nmt_buf hs, ts;      /* SA / TA: (step_rows * src_cap, hist) h~, s~ */
    nmt_buf spare_s, spare_h; /* beam reorder targets of s and of a history */
    nmt_buf mask;        /* int (step_rows * src_cap): position j of row b inside its sentence */
    nmt_buf t_step;      /* (step_rows, R) readout of a step */
    nmt_buf y_all;       /* (max_batch * tgt_cap, E) teacher-forced inputs */
    nmt_buf t_all;       /* (max_batch * tgt_cap, R) teacher-forced readouts */
    int32_t *h_mask;     /* host (step_rows * src_cap) */
    int32_t *h_len;      /* host (max_batch): lengths of the last encode */
    uint32_t n_sent, src_pad_len;
    nmt_buf t_out;       /* where the next step's readout goes, and its stride */
    uint32_t t_ld;
} ba_state;

static void ba_acts(void *user, uint32_t t, nmt_ba_acts *out) {
    (void)t;
    const ba_state *st = (const ba_state *)user;
    *out = st->acts;
    out->s_prev = out->s_next = st->s;
    out->s_prev_ld = st->c.hidden;
    out->hs_prev = out->hs_next = st->hs;
    out->ts_prev = out->ts_next = st->ts;
    out->t = st->t_out;
    out->t_ld = st->t_ld;
}

static nmt_status ba_plan(nmt_plan_ctx *pc, const nmt_file *f, const void *cfgp, const nmt_plan_dims *dims,
                          nmt_arena *a, void **state) {
    const nmt_ba_cfg *c = (const nmt_ba_cfg *)cfgp;
    ba_state *st = NMT_ARENA_NEW(a, ba_state, 1);
    NMT_CHECK(st != NULL, NMT_ERR_ARENA_TOO_SMALL);
    *state = st;
    /* the measuring pass's arena pointers are not memory: record in locals */
    const int real = !nmt_arena_measuring(a);
    ba_state local;
    memset(&local, 0, sizeof local);
    local.c = *c;
    local.dims = *dims;
    if (dims->align) /* one attention of one head */
        NMT_CHECK(dims->align_layer <= 1 && dims->align_head <= 1, NMT_ERR_INVALID_ARGUMENT);

    int any_q8 = 0;
    NMT_TRY(nmt_family_check_tensors(&nmt_family_banmt, c, f, &any_q8));
    if (real) {
        nmt_ops *ops = pc->ops;
        if (any_q8) NMT_TRY(nmt_ops_enable_q8(ops));
        NMT_TRY(nmt_ops_enable_recurrent(ops));
        NMT_TRY(nmt_ops_enable_additive(ops));
    }
    NMT_TRY(nmt_family_load_weights(&nmt_family_banmt, c, real ? &local.w : NULL, pc, f, a));

    const size_t B = dims->max_batch, S = dims->src_cap, T = dims->tgt_cap, R = dims->step_rows;
    const size_t E = c->emb, H = c->hidden, A = c->att, Hh = c->hist, Ro = c->readout, BS = B * S, RS = R * S;
    nmt_ba_enc_acts *en = &local.enc;
    NMT_TRY(nmt_plan_floats(pc, a, BS * E, &en->x));
    NMT_TRY(nmt_plan_floats(pc, a, BS * 5 * H, &en->zf));
    NMT_TRY(nmt_plan_floats(pc, a, BS * 5 * H, &en->zb));
    NMT_TRY(nmt_plan_floats(pc, a, B * 3 * H, &en->hg));
    NMT_TRY(nmt_plan_floats(pc, a, B * H, &en->state));
    NMT_TRY(nmt_plan_floats(pc, a, BS * 2 * H, &en->h));
    NMT_TRY(nmt_plan_floats(pc, a, BS * A, &en->k));
    if (c->sa) NMT_TRY(nmt_plan_floats(pc, a, BS * 3 * Hh, &en->ps));
    NMT_TRY(nmt_plan_floats(pc, a, BS, &en->mean_a));
    NMT_TRY(nmt_plan_floats(pc, a, B * 2 * H, &en->mean));
    NMT_TRY(nmt_plan_floats(pc, a, B * H, &en->s0));
    static const float zero = 0.0f;
    NMT_TRY(nmt_plan_buffer(pc, a, sizeof zero, &zero, &en->zero));

    NMT_TRY(nmt_plan_floats(pc, a, R * H, &local.s));
    NMT_TRY(nmt_plan_floats(pc, a, R * H, &local.spare_s));
    if (c->sa) NMT_TRY(nmt_plan_floats(pc, a, RS * Hh, &local.hs));
    if (c->ta) NMT_TRY(nmt_plan_floats(pc, a, RS * Hh, &local.ts));
    if (c->sa || c->ta) NMT_TRY(nmt_plan_floats(pc, a, RS * Hh, &local.spare_h));
    NMT_TRY(nmt_plan_buffer(pc, a, RS * sizeof(cl_int), NULL, &local.mask));
    nmt_ba_acts *ac = &local.acts;
    NMT_TRY(nmt_plan_floats(pc, a, R * c->cat, &ac->cat));
    NMT_TRY(nmt_plan_floats(pc, a, R * 5 * H, &ac->z1));
    NMT_TRY(nmt_plan_floats(pc, a, R * 3 * H, &ac->hg1));
    ac->z2 = ac->z1; /* GRU2 runs after GRU1 is done with them */
    ac->hg2 = ac->hg1;
    NMT_TRY(nmt_plan_floats(pc, a, R * H, &ac->st));
    NMT_TRY(nmt_plan_floats(pc, a, R * A, &ac->q));
    if (c->sa) NMT_TRY(nmt_plan_floats(pc, a, RS * A, &ac->e1));
    if (c->ta) NMT_TRY(nmt_plan_floats(pc, a, RS * A, &ac->e2));
    NMT_TRY(nmt_plan_floats(pc, a, RS, &ac->alpha));
    if (c->sa || c->ta) { /* the two history updates run one after the other */
        NMT_TRY(nmt_plan_floats(pc, a, RS * 5 * Hh, &ac->zs));
        NMT_TRY(nmt_plan_floats(pc, a, RS * 3 * Hh, &ac->hgs));
        ac->zt = ac->zs;
        ac->hgt = ac->hgs;
    }
    if (c->ta) NMT_TRY(nmt_plan_floats(pc, a, R * 3 * Hh, &ac->pt));
    NMT_TRY(nmt_plan_floats(pc, a, R * nmt_ba_r_rows(c), &ac->u));
    NMT_TRY(nmt_plan_floats(pc, a, R * Ro, &local.t_step));
    NMT_TRY(nmt_plan_floats(pc, a, B * T * E, &local.y_all));
    NMT_TRY(nmt_plan_floats(pc, a, B * T * Ro, &local.t_all));
    local.h_mask = NMT_ARENA_NEW(a, int32_t, RS);
    local.h_len = NMT_ARENA_NEW(a, int32_t, B);
    NMT_CHECK(local.h_mask != NULL && local.h_len != NULL, NMT_ERR_ARENA_TOO_SMALL);

    if (real) {
        *st = local;
        st->fw.ops = pc->ops;
        st->fw.c = &st->c;
        st->fw.w = &st->w;
        st->fw.acts = ba_acts;
        st->fw.drop = NULL;
        st->fw.user = st;
    }
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

static nmt_status ba_encode(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t len) {
    ba_state *st = (ba_state *)state;
    NMT_CHECK(n >= 1 && n <= st->dims.max_batch && len >= 1 && len <= st->dims.src_cap, NMT_ERR_LIMIT_EXCEEDED);
    st->n_sent = n;
    st->src_pad_len = len;
    memcpy(st->h_len, io->h_src_len, sizeof(int32_t) * n);
    return nmt_ba_encoder(&st->fw, &st->enc, io->src_tok, io->src_len, n, len);
}

/* The start of a decode over `rows` rows (row b: sentence b / group): s_0
 * of each row and the mask of the positions inside its sentence. */
static nmt_status start_rows(ba_state *st, uint32_t rows, uint32_t group) {
    const uint32_t H = st->c.hidden, L = st->src_pad_len, n = rows / group;
    NMT_CHECK(n == st->n_sent && rows % group == 0, NMT_ERR_INVALID_ARGUMENT);
    for (uint32_t k = 0; k < group; k++) /* row m * group + k = sentence m's s_0 */
        NMT_TRY(nmt_op_copy_rows(st->fw.ops, st->enc.s0, H, nmt_buf_at(st->s, (size_t)k * H), group * H, n, H));
    if (!st->c.sa && !st->c.ta) return NMT_OK;
    for (uint32_t b = 0; b < rows; b++)
        for (uint32_t j = 0; j < L; j++) st->h_mask[(size_t)b * L + j] = (int32_t)j < st->h_len[b / group];
    return nmt_device_write(st->fw.ops->dev, st->mask.mem, 0, (size_t)rows * L * sizeof(cl_int), st->h_mask);
}

static nmt_ba_pass pass_of(const ba_state *st, const nmt_io_bufs *io, uint32_t rows, uint32_t group, uint32_t t) {
    const int hist = st->c.sa || st->c.ta;
    return (nmt_ba_pass){.rows = rows, .group = group, .t = t, .src_len = st->src_pad_len, .key_len = io->src_len,
                         .mask = hist ? st->mask : NMT_NO_BUF, .h = st->enc.h, .k = st->enc.k, .ps = st->enc.ps,
                         .align = NMT_NO_BUF, .align_ld = 0};
}

static nmt_status ba_step(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t group, uint32_t t) {
    ba_state *st = (ba_state *)state;
    NMT_CHECK(rows >= 1 && rows <= st->dims.step_rows && group >= 1 && t < st->dims.tgt_cap, NMT_ERR_LIMIT_EXCEEDED);
    if (t == 0) NMT_TRY(start_rows(st, rows, group));
    NMT_TRY(nmt_ba_embed(&st->fw, &st->w.tgt_emb, io->step_tok, rows, st->acts.cat, st->c.cat));
    st->t_out = st->t_step;
    st->t_ld = st->c.readout;
    nmt_ba_pass p = pass_of(st, io, rows, group, t);
    if (io->align.mem) {
        p.align = io->align;
        p.align_ld = st->dims.src_cap;
    }
    NMT_TRY(nmt_ba_step(&st->fw, &p));
    return nmt_ba_logits(&st->fw, st->t_step, st->c.readout, rows, io->logits);
}

/* Gather rows of *buf (row r: `cols` floats, ld apart) into the spare,
 * which becomes *buf; the old *buf becomes the spare. */
static nmt_status reorder_swap(ba_state *st, const nmt_io_bufs *io, nmt_buf *buf, nmt_buf *spare, uint64_t ld,
                               uint32_t rows, uint32_t cols) {
    NMT_TRY(nmt_op_gather_rows(st->fw.ops, *buf, ld, *spare, ld, io->reorder, rows, cols));
    const nmt_buf old = *buf;
    *buf = *spare;
    *spare = old;
    return NMT_OK;
}

static nmt_status ba_reorder(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t t) {
    ba_state *st = (ba_state *)state;
    NMT_CHECK(rows <= st->dims.step_rows && t < st->dims.tgt_cap, NMT_ERR_LIMIT_EXCEEDED);
    const uint32_t H = st->c.hidden, w = st->src_pad_len * st->c.hist;
    NMT_TRY(nmt_io_reorder_upload(st->fw.ops, io, rows)); /* everything here is gathered */
    /* every piece of per-row decoder state: s, h~, s~ (the mask depends on
     * the sentence only, which a reorder keeps) */
    NMT_TRY(reorder_swap(st, io, &st->s, &st->spare_s, H, rows, H));
    if (st->c.sa) NMT_TRY(reorder_swap(st, io, &st->hs, &st->spare_h, w, rows, w));
    if (st->c.ta) NMT_TRY(reorder_swap(st, io, &st->ts, &st->spare_h, w, rows, w));
    return NMT_OK;
}

static nmt_status ba_decode_full(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t tlen) {
    ba_state *st = (ba_state *)state;
    NMT_CHECK(n >= 1 && n <= st->dims.max_batch && tlen >= 1 && tlen <= st->dims.tgt_cap, NMT_ERR_LIMIT_EXCEEDED);
    const nmt_ba_cfg *c = &st->c;
    const uint32_t E = c->emb, Ro = c->readout;
    NMT_TRY(nmt_ba_embed(&st->fw, &st->w.tgt_emb, io->tgt_tok, n * tlen, st->y_all, E));
    NMT_TRY(start_rows(st, n, 1));
    st->t_ld = tlen * Ro; /* position p of sentence b: row b * tlen + p */
    for (uint32_t p = 0; p < tlen; p++) {
        NMT_TRY(nmt_op_copy_rows(st->fw.ops, nmt_buf_at(st->y_all, (size_t)p * E), tlen * E, st->acts.cat, c->cat, n,
                                 E));
        st->t_out = nmt_buf_at(st->t_all, (size_t)p * Ro);
        const nmt_ba_pass ps = pass_of(st, io, n, 1, p);
        NMT_TRY(nmt_ba_step(&st->fw, &ps));
    }
    return NMT_OK;
}

static nmt_status ba_project(void *state, const nmt_io_bufs *io, uint32_t first, uint32_t rows) {
    ba_state *st = (ba_state *)state;
    NMT_CHECK(rows <= st->dims.step_rows, NMT_ERR_LIMIT_EXCEEDED);
    return nmt_ba_logits(&st->fw, nmt_buf_at(st->t_all, (size_t)first * st->c.readout), st->c.readout, rows,
                         io->logits);
}

static void ba_release(void *state) { (void)state; /* all buffers are session-owned */ }

const nmt_family nmt_family_banmt = {
    .arch = NMT_BA_ARCH,
    .summary = "BA-NMT: RNNsearch (bi-GRU encoder, conditional-GRU decoder, additive attention) with source / "
               "target / bilingual history in the attention",
    .cfg_size = sizeof(nmt_ba_cfg),
    .hparams = nmt_ba_hparams,
    .n_hparams = NMT_BA_N_HPARAMS,
    .finish = nmt_ba_finish,
    .catalogue = nmt_ba_catalogue,
    .info = nmt_ba_info,
    .random_args = NMT_BA_RANDOM_ARGS,
    .plan = ba_plan,
    .encode = ba_encode,
    .step = ba_step,
    .reorder = ba_reorder,
    .decode_full = ba_decode_full,
    .project = ba_project,
    .alignments = 1,
    .release = ba_release,
};
