/* SPDX-License-Identifier: MIT */
/* transformer.c — the Transformer / HySAN family in the runtime
 * (docs/ARCHITECTURES.md): its registry record, plan (weights from the
 * catalogue, activations, caches) and the session's entry points, each a
 * few calls into the shared forward (transformer_fwd.h).  The decoder runs
 * either one incremental step for all beam rows (KV cache) or teacher-forced
 * over whole target prefixes (scoring); both use the same forward and must
 * agree (tested).  Everything is planned once: the entry points only
 * enqueue. */
#include "transformer_fwd.h"

#include "ops_beam.h"
#include "spans.h"

#include <string.h>

_Static_assert(sizeof(nmt_tf_cfg) <= NMT_FAMILY_CFG_BYTES, "config fits the session's slot");

typedef struct tf_state {
    nmt_tf_cfg c;
    nmt_plan_dims dims;
    nmt_tf_weights w;
    nmt_tf_fwd fw;
    nmt_tf_acts acts;  /* scratch shared by every sub-layer; kv set per layer */
    nmt_buf *cache;    /* [dec_layers] (step_rows, tgt_cap, 2d): self-attn K | V per position */
    nmt_buf *cross_kv; /* [dec_layers] (max_batch * src_cap, 2d): cross-attn K | V */
    nmt_buf x;         /* (rows, d) residual stream */
    nmt_buf cache_tmp; /* (step_rows, tgt_cap, 2d) spare cache: beam reorder target */
    uint32_t src_pad_len;  /* padded source length of the last encode */
    /* MG-SA syntax heads: the partition of a batch, built on the host and
     * uploaded to the groups' (shared) mg_seg / mg_cnt */
    int32_t *h_seg;    /* (max_batch, src_cap, 2) start, length */
    int32_t *h_cnt;    /* (max_batch) phrases per sentence */
    /* phrase-based attention (transformer_phrase.c), per decoder layer l and
     * segment g at l * NMT_PATTN_MAX_SEG + g: the decoder self-attention's
     * segment caches (the K|V cache's shape; teacher-forced scoring uses
     * them as scratch), the cross-attention's memory segments, and the
     * self-attention's input windows of this step and the last */
    nmt_buf *ph_cache, *ph_cross, *win, *win_prev;
    nmt_buf *cwin, *cwin_prev; /* interleaved cross-attention: windows of its query inputs */
    nmt_buf win_tmp;   /* spare window: beam reorder target (every window has its size) */
    /* The beam's K|V table: row r's key and value at position p live in
     * cache row kv_tab[p * step_rows + r] (ops.h nmt_attn_args.kv_row; a
     * phrase decoder self-attention's segment caches likewise,
     * nmt_pattn_args.kv_row), so a beam reorder permutes these ints on the
     * host instead of gathering every layer's caches.  Identity past
     * position kv_hi (0: identity everywhere, the device copy unread). */
    int32_t *h_kvtab;  /* (tgt_cap, step_rows) */
    int32_t *h_kvtmp;  /* (step_rows) one position's old entries */
    nmt_buf kvtab;     /* int: the device copy */
    uint32_t kv_hi;
    uint32_t align_k, align_head; /* alignments (dims.align): the cross sub-layer and head they read */
} tf_state;

static void tf_acts(void *user, uint32_t k, nmt_tf_acts *out) {
    const tf_state *st = (const tf_state *)user;
    *out = st->acts;
    const uint32_t E = nmt_tf_n_enc_sub(&st->c);
    if (k >= E) {
        const uint32_t l = (k - E) / 3, kind = (k - E) % 3;
        if (kind == NMT_TF_SUB_SELF) {
            out->kv = st->cache[l];
            if (st->kv_hi > 0) {
                out->kv_row = st->kvtab;
                out->kv_row_ld = st->dims.step_rows;
            }
        }
        else if (kind == NMT_TF_SUB_CROSS) out->kv = st->cross_kv[l];
        const nmt_buf *seg = kind == NMT_TF_SUB_SELF ? st->ph_cache : kind == NMT_TF_SUB_CROSS ? st->ph_cross : NULL;
        if (seg != NULL && nmt_ph_of(&st->c, 1, kind == NMT_TF_SUB_CROSS))
            for (uint32_t g = 0; g < NMT_PATTN_MAX_SEG; g++) out->ph_kv[g] = seg[l * NMT_PATTN_MAX_SEG + g];
        if (kind == NMT_TF_SUB_SELF && st->win != NULL) {
            out->ph_win = st->win[l];
            out->ph_win_prev = st->win_prev[l];
        }
        if (kind == NMT_TF_SUB_CROSS && st->cwin != NULL) {
            out->ph_win = st->cwin[l];
            out->ph_win_prev = st->cwin_prev[l];
        }
    }
}

/* Phrase attention buffers (transformer_phrase.c): scratch shared by the
 * sub-layers, per-layer caches, windows and memory segments. */
static nmt_status plan_phrase(nmt_plan_ctx *pc, nmt_arena *a, tf_state *local, int real, size_t rows) {
    const nmt_tf_cfg *c = &local->c;
    const nmt_plan_dims *dims = &local->dims;
    const size_t B = dims->max_batch, S = dims->src_cap, T = dims->tgt_cap, R = dims->step_rows, d = c->d;
    const size_t L = c->dec_layers, nseg = NMT_PATTN_MAX_SEG;
    uint32_t n_max = 1, segs = 0;
    for (int k = 0; k < NMT_PH_KINDS; k++) {
        n_max = NMT_MAX(n_max, c->ph[k].n_max);
        segs = NMT_MAX(segs, c->ph[k].n_segs);
    }
    if (segs == 0) return NMT_OK;
    if (real) NMT_TRY(nmt_ops_enable_phrase(pc->ops));
    nmt_tf_acts *ac = &local->acts;
    const nmt_ph_kind *enc = nmt_ph_of(c, 0, 0), *dec = nmt_ph_of(c, 1, 0), *cross = nmt_ph_of(c, 1, 1);
    int inter = 0;
    for (int k = 0; k < NMT_PH_KINDS; k++) inter |= c->ph[k].structure == NMT_PH_INTER;
    /* window rows: n_max inputs, or the interleaved encoder's output pairs (4d) */
    NMT_TRY(nmt_plan_floats(pc, a, rows * NMT_MAX(n_max, inter ? 4u : 0u) * d, &ac->ph_cols));
    for (uint32_t g = 0; g < segs; g++) NMT_TRY(nmt_plan_floats(pc, a, rows * n_max * d, &ac->ph_qx[g]));
    if (inter) {
        NMT_TRY(nmt_plan_floats(pc, a, rows * d, &ac->ph_qb));
        NMT_TRY(nmt_plan_floats(pc, a, rows * 2 * d, &ac->ph_qbx));
    }
    if (enc && enc->structure != NMT_PH_HOMO)
        for (uint32_t g = 0; g < enc->n_segs; g++) NMT_TRY(nmt_plan_floats(pc, a, B * S * 2 * d, &ac->ph_kv[g]));
    nmt_buf *bufs = NMT_ARENA_NEW(a, nmt_buf, 2 * L * nseg + 4 * L);
    NMT_CHECK(bufs != NULL, NMT_ERR_ARENA_TOO_SMALL);
    if (real) memset(bufs, 0, sizeof *bufs * (2 * L * nseg + 4 * L));
    local->ph_cache = bufs;
    local->ph_cross = bufs + L * nseg;
    for (size_t l = 0; l < L; l++)
        for (uint32_t g = 0; g < nseg; g++) {
            nmt_buf b = {NULL, 0};
            if (dec && dec->structure != NMT_PH_HOMO && g < dec->n_segs && nmt_ph_own(&dec->seg[g])) {
                NMT_TRY(nmt_plan_floats(pc, a, R * T * 2 * d, &b)); /* the K|V cache's size: reorder swaps them */
                if (real) local->ph_cache[l * nseg + g] = b;
            }
            if (cross && cross->structure != NMT_PH_HOMO && g < cross->n_segs && nmt_ph_own(&cross->seg[g])) {
                NMT_TRY(nmt_plan_floats(pc, a, B * S * 2 * d, &b));
                if (real) local->ph_cross[l * nseg + g] = b;
            }
        }
    /* decoder input windows (self: n_max inputs; interleaved cross: 2), all
     * of one size so that the beam reorder can rotate them with one spare */
    const int self_win = dec && dec->n_max > 1, cross_win = cross && cross->structure == NMT_PH_INTER;
    const size_t wsz = R * NMT_MAX(self_win ? dec->n_max : 0u, cross_win ? 2u : 0u) * d;
    for (int which = 0; which < 2; which++) {
        if (!(which ? cross_win : self_win)) continue;
        nmt_buf *cur = bufs + 2 * L * nseg + (size_t)which * 2 * L, *prev = cur + L;
        if (which) local->cwin = cur, local->cwin_prev = prev;
        else local->win = cur, local->win_prev = prev;
        for (size_t l = 0; l < L; l++) {
            nmt_buf w0, w1;
            NMT_TRY(nmt_plan_floats(pc, a, wsz, &w0));
            NMT_TRY(nmt_plan_floats(pc, a, wsz, &w1));
            if (real) {
                cur[l] = w0;
                prev[l] = w1;
            }
        }
    }
    if (self_win || cross_win) NMT_TRY(nmt_plan_floats(pc, a, wsz, &local->win_tmp));
    return NMT_OK;
}

static size_t max3(size_t a, size_t b, size_t c) { return NMT_MAX(a, NMT_MAX(b, c)); }

static nmt_status tf_plan(nmt_plan_ctx *pc, const nmt_file *f, const void *cfgp, const nmt_plan_dims *dims,
                          nmt_arena *a, void **state) {
    const nmt_tf_cfg *c = (const nmt_tf_cfg *)cfgp;
    tf_state *st = NMT_ARENA_NEW(a, tf_state, 1);
    nmt_tf_sub_w *subs = NMT_ARENA_NEW(a, nmt_tf_sub_w, nmt_tf_n_sub(c));
    nmt_buf *caches = NMT_ARENA_NEW(a, nmt_buf, 2 * (size_t)c->dec_layers);
    NMT_CHECK(st != NULL && subs != NULL && caches != NULL, NMT_ERR_ARENA_TOO_SMALL);
    *state = st;
    /* In the measuring pass the arena hands out dummy pointers: record
     * everything in locals and copy into the arena only for real. */
    const int real = !nmt_arena_measuring(a);
    tf_state local;
    memset(&local, 0, sizeof local);
    local.c = *c;
    local.dims = *dims;
    local.cache = caches;
    local.cross_kv = caches + c->dec_layers;
    if (real) memset(subs, 0, sizeof *subs * nmt_tf_n_sub(c));
    local.w.sub = subs;

    /* int8 kernels exist only for models with int8 weights; the ops are
     * initialised before the real pass (not in the measuring one) */
    int any_q8 = 0;
    NMT_TRY(nmt_family_check_tensors(&nmt_family_transformer, c, f, &any_q8));
    if (real && any_q8) NMT_TRY(nmt_ops_enable_q8(pc->ops));
    if (real && !any_q8) { /* a decoder step's fp32 weights: self q|k|v and out, cross q and out, the FFN; logits */
        const uint64_t d64 = c->d, per_layer = 6 * d64 * d64 + 2 * d64 * c->ff;
        (void)nmt_ops_plan_streaming(pc->ops, 4 * (c->dec_layers * per_layer + d64 * c->tgt_vocab));
    }
    if (real && pc->fp16) NMT_TRY(nmt_ops_enable_f16(pc->ops)); /* fp16 compute */
    NMT_TRY(nmt_family_load_weights(&nmt_family_transformer, c, real ? &local.w : NULL, pc, f, a));

    const size_t B = dims->max_batch, S = dims->src_cap, T = dims->tgt_cap, R = dims->step_rows, d = c->d;
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        nmt_buf cache, kv;
        NMT_TRY(nmt_plan_floats(pc, a, R * T * 2 * d, &cache));
        NMT_TRY(nmt_plan_floats(pc, a, B * S * 2 * d, &kv));
        if (real) {
            local.cache[l] = cache;
            local.cross_kv[l] = kv;
        }
    }
    const size_t rows = max3(B * S, B * T, R);
    if (any_q8) NMT_TRY(nmt_plan_i8dot(pc, a, rows, NMT_MAX(d, (size_t)c->ff))); /* int8 x int8 scratch */
    const size_t nbr = NMT_MAX(c->n_enc_br, c->n_dec_br);
    const size_t H = c->heads;
    nmt_tf_acts *ac = &local.acts;
    NMT_TRY(nmt_plan_floats(pc, a, rows * d, &local.x));
    ac->x = ac->out = local.x;
    NMT_TRY(nmt_plan_floats(pc, a, rows * d, &ac->h));
    NMT_TRY(nmt_plan_floats(pc, a, rows * d, &ac->t));
    NMT_TRY(nmt_plan_floats(pc, a, rows * 3 * d, &ac->qkv));
    int ph_inter = 0;
    for (int k = 0; k < NMT_PH_KINDS; k++) ph_inter |= c->ph[k].structure == NMT_PH_INTER;
    NMT_TRY(nmt_plan_floats(pc, a, rows * NMT_MAX(nbr, ph_inter ? 2u : 1u) * d, &ac->ctx));
    if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
        NMT_TRY(nmt_plan_floats(pc, a, rows * d, &ac->fused));
        NMT_TRY(nmt_plan_floats(pc, a, rows * (d / c->gate_r), &ac->gh[0]));
        NMT_TRY(nmt_plan_floats(pc, a, rows * d, &ac->g[0]));
        for (size_t b = 1; b < nbr; b++) {
            ac->gh[b] = ac->gh[0];
            ac->g[b] = ac->g[0];
        }
    }
    NMT_TRY(nmt_plan_floats(pc, a, rows * c->ff, &ac->ffh));
    if (c->mg_mask) {
        /* MG-SA phrase memories, shared by the encoder layers that use them */
        if (real) NMT_TRY(nmt_ops_enable_phrase(pc->ops));
        if (c->mg_compose == NMT_MG_COM_SAN) {
            /* the composition's q|k|v and its output, shared by the groups in turn */
            NMT_TRY(nmt_plan_floats(pc, a, B * S * 3 * d, &ac->mg_cqkv));
            NMT_TRY(nmt_plan_floats(pc, a, B * S * d, &ac->mg_cctx[0]));
            for (uint32_t g = 1; g < c->mg_n_groups; g++) ac->mg_cctx[g] = ac->mg_cctx[0];
        }
        nmt_buf syn_seg = {NULL, 0}, syn_cnt = {NULL, 0};
        if (nmt_mg_has_syntax(c)) { /* one partition for every syntax group */
            local.h_seg = NMT_ARENA_NEW(a, int32_t, B * S * 2);
            local.h_cnt = NMT_ARENA_NEW(a, int32_t, B);
            NMT_CHECK(local.h_seg != NULL && local.h_cnt != NULL, NMT_ERR_ARENA_TOO_SMALL);
            NMT_TRY(nmt_plan_floats(pc, a, B * S * 2, &syn_seg));
            NMT_TRY(nmt_plan_floats(pc, a, B, &syn_cnt));
        }
        for (uint32_t g = 0; g < c->mg_n_groups; g++) {
            if (c->mg_group[g].n == 0) continue;
            const size_t m = B * nmt_mg_m_cap(c, g, (uint32_t)S), w = (size_t)c->mg_group[g].nh * c->dh;
            if (c->mg_group[g].syntax) {
                ac->mg_seg[g] = syn_seg;
                ac->mg_cnt[g] = syn_cnt;
            } else {
                NMT_TRY(nmt_plan_floats(pc, a, m * 2, &ac->mg_seg[g]));
                NMT_TRY(nmt_plan_floats(pc, a, B, &ac->mg_cnt[g]));
            }
            NMT_TRY(nmt_plan_floats(pc, a, m * d, &ac->mg_hg[g]));
            NMT_TRY(nmt_plan_floats(pc, a, m * 2 * w, &ac->mg_kv[g]));
            if (c->mg_compose == NMT_MG_COM_LSTM) {
                const size_t pr = m * c->mg_group[g].n; /* the phrases as sequences */
                NMT_TRY(nmt_plan_floats(pc, a, pr * d, &ac->mg_ptok[g]));
                NMT_TRY(nmt_plan_floats(pc, a, m, &ac->mg_pcnt[g]));
                NMT_TRY(nmt_plan_floats(pc, a, pr * 4 * d, &ac->mg_pz[g]));
                NMT_TRY(nmt_plan_floats(pc, a, pr * d, &ac->mg_pc[g]));
                NMT_TRY(nmt_plan_floats(pc, a, pr * d, &ac->mg_ph[g]));
            }
            if (c->mg_interact != NMT_MG_REC_NONE) {
                NMT_TRY(nmt_plan_floats(pc, a, m * d, &ac->mg_pool[g]));
                NMT_TRY(nmt_plan_floats(pc, a, m * nmt_mg_rec_gates(c), &ac->mg_z[g]));
                NMT_TRY(nmt_plan_floats(pc, a, m * d, &ac->mg_c[g]));
            }
        }
        if (real && (c->mg_interact != NMT_MG_REC_NONE || c->mg_compose == NMT_MG_COM_LSTM))
            NMT_TRY(nmt_ops_enable_recurrent(pc->ops));
    }
    NMT_TRY(plan_phrase(pc, a, &local, real, rows));
    if (dims->align) {
        /* alignments: a cross-attention over the source tokens, of a layer and
         * head the model has; phrase cross-attention (keys are n-grams) has none */
        NMT_CHECK(dims->align_layer <= c->dec_layers && dims->align_head <= c->heads, NMT_ERR_INVALID_ARGUMENT);
        NMT_CHECK(nmt_ph_of(c, 1, 1) == NULL, NMT_ERR_UNSUPPORTED);
        local.align_k = nmt_tf_n_enc_sub(c) + 3 * ((dims->align_layer ? dims->align_layer : c->dec_layers) - 1) + 1;
        local.align_head = dims->align_head;
        if (real) NMT_TRY(nmt_ops_enable_align(pc->ops));
    }
    size_t sc = max3(B * H * S * S, B * H * T * T, B * H * T * S);
    sc = NMT_MAX(sc, R * H * NMT_MAX(S, T));
    for (int k = 0; k < NMT_PH_KINDS; k++) /* phrase attention: a column block per segment */
        sc = NMT_MAX(sc, max3(B * H * S * S, B * H * T * T, NMT_MAX(B * H * T * S, R * H * NMT_MAX(S, T))) *
                             NMT_MAX(c->ph[k].n_segs, 1u));
    NMT_TRY(nmt_plan_floats(pc, a, sc, &local.fw.scores));
    NMT_TRY(nmt_plan_floats(pc, a, 2 * max3(B * H * S, B * H * T, R * H), &local.fw.stats));
    NMT_TRY(nmt_plan_floats(pc, a, R * T * 2 * d, &local.cache_tmp));
    { /* the position terms of every position a session embeds, computed once */
        const size_t n_pos = NMT_MAX(S, T);
        nmt_buf pt;
        NMT_TRY(nmt_plan_floats(pc, a, n_pos * d, &pt));
        if (real) NMT_TRY(nmt_ops_set_pos_table(pc->ops, pt, (uint32_t)n_pos, (uint32_t)d,
                                                       (uint32_t)c->pos_enc, c->pos_offset));
    }
    { /* the K|V table, identity to begin with */
        local.h_kvtab = NMT_ARENA_NEW(a, int32_t, T * R);
        local.h_kvtmp = NMT_ARENA_NEW(a, int32_t, R);
        NMT_CHECK(local.h_kvtab != NULL && local.h_kvtmp != NULL, NMT_ERR_ARENA_TOO_SMALL);
        if (real)
            for (size_t i = 0; i < T * R; i++) local.h_kvtab[i] = (int32_t)(i % R);
        NMT_TRY(nmt_plan_buffer(pc, a, T * R * sizeof(int32_t), real ? local.h_kvtab : NULL, &local.kvtab));
    }

    if (real) {
        *st = local;
        st->fw.ops = pc->ops;
        st->fw.c = &st->c;
        st->fw.w = &st->w;
        st->fw.acts = tf_acts;
        st->fw.drop = NULL;
        st->fw.fuse_norm = 1;
        st->fw.user = st;
    }
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

static nmt_status tf_encode(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t len) {
    tf_state *st = (tf_state *)state;
    NMT_CHECK(n >= 1 && n <= st->dims.max_batch && len >= 1 && len <= st->dims.src_cap, NMT_ERR_LIMIT_EXCEEDED);
    const uint32_t rows = n * len;
    st->src_pad_len = len;
    if (st->h_seg != NULL) {
        uint32_t g = 0;
        while (!st->c.mg_group[g].syntax) g++;
        /* the partition (families/spans.c: the trainer builds its batches' with the same call) */
        nmt_spans_partition(st->c.mg_fallback, io->spans, io->h_src_len, n, len, st->h_seg, st->h_cnt);
        const nmt_buf seg = st->acts.mg_seg[g], cnt = st->acts.mg_cnt[g];
        nmt_device *dev = st->fw.ops->dev;
        NMT_TRY(nmt_device_write(dev, seg.mem, seg.off * sizeof(cl_int), (size_t)n * len * 2 * sizeof(cl_int),
                                 st->h_seg));
        NMT_TRY(nmt_device_write(dev, cnt.mem, cnt.off * sizeof(cl_int), (size_t)n * sizeof(cl_int), st->h_cnt));
    }
    if (st->kv_hi > 0) { /* the last batch's beam: the table back to the identity */
        const size_t R = st->dims.step_rows, n_tab = (size_t)st->kv_hi * R;
        for (size_t i = 0; i < n_tab; i++) st->h_kvtab[i] = (int32_t)(i % R);
        NMT_TRY(nmt_device_write(st->fw.ops->dev, st->kvtab.mem, st->kvtab.off * sizeof(cl_int),
                                 n_tab * sizeof(cl_int), st->h_kvtab));
        st->kv_hi = 0;
    }
    const nmt_tf_pass p = {.n = n, .len = len, .key_len = io->src_len};
    NMT_TRY(nmt_tf_embed(&st->fw, &st->w.src_emb, io->src_tok, rows, len, 0, st->x, 0));
    NMT_TRY(nmt_tf_encoder(&st->fw, &p, st->x));
    return nmt_tf_cross_kv(&st->fw, st->x, &p);
}

static nmt_status tf_step(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t group, uint32_t t) {
    tf_state *st = (tf_state *)state;
    NMT_CHECK(rows >= 1 && rows <= st->dims.step_rows && group >= 1 && t < st->dims.tgt_cap, NMT_ERR_LIMIT_EXCEEDED);
    const nmt_tf_pass p = {.n = rows, .len = 1, .key_len = io->src_len, .group = group,
                           .src_len = st->src_pad_len, .step = 1, .t = t, .cache_len = st->dims.tgt_cap,
                           .align = io->align, .align_k = st->align_k, .align_head = st->align_head,
                           .align_ld = st->dims.src_cap};
    NMT_TRY(nmt_tf_embed(&st->fw, &st->w.tgt_emb, io->step_tok, rows, 1, t, st->x, 1));
    NMT_TRY(nmt_tf_decoder(&st->fw, &p, st->x));
    for (uint32_t l = 0; l < st->c.dec_layers; l++) { /* this step's windows become the last ones */
        if (st->win != NULL) {
            const nmt_buf w = st->win[l];
            st->win[l] = st->win_prev[l];
            st->win_prev[l] = w;
        }
        if (st->cwin != NULL) {
            const nmt_buf w = st->cwin[l];
            st->cwin[l] = st->cwin_prev[l];
            st->cwin_prev[l] = w;
        }
    }
    return nmt_tf_logits(&st->fw, st->x, rows, io->logits);
}

/* One beam reorder's gathers: the back-pointers go to the device before the
 * first gather and only then (the K|V-table path gathers nothing). */
typedef struct tf_gather {
    tf_state *st;
    const nmt_io_bufs *io;
    uint32_t rows;
    int uploaded;
} tf_gather;

/* Gather rows of *buf (live elements of rows `ld` apart) into the spare,
 * which becomes *buf; the old *buf becomes the spare. */
static nmt_status reorder_swap(tf_gather *g, nmt_buf *buf, nmt_buf *spare, uint64_t ld, uint32_t live) {
    if (!g->uploaded) {
        NMT_TRY(nmt_io_reorder_upload(g->st->fw.ops, g->io, g->rows));
        g->uploaded = 1;
    }
    NMT_TRY(nmt_op_gather_rows(g->st->fw.ops, *buf, ld, *spare, ld, g->io->reorder, g->rows, live));
    const nmt_buf old = *buf;
    *buf = *spare;
    *spare = old;
    return NMT_OK;
}

static nmt_status tf_reorder(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t t) {
    tf_state *st = (tf_state *)state;
    const uint32_t d = st->c.d, T = st->dims.tgt_cap, live = (t + 1) * 2 * d;
    NMT_CHECK(rows <= st->dims.step_rows && t < T, NMT_ERR_LIMIT_EXCEEDED);
    /* The K|V caches: through the table where the attention reads through
     * one (positions [0, t] permuted on the host and uploaded, or on the
     * device when only it has the back-pointers: every layer's cache stays
     * where it is, each (row, position) written once by its step); else
     * gathered. */
    const nmt_ph_kind *pk = nmt_ph_of(&st->c, 1, 0);
    const uint32_t R = st->dims.step_rows;
    const int on_dev = io->reorder_on_device && nmt_ops_kv_permute_fits(st->fw.ops, R);
    const int table = (io->h_reorder != NULL || on_dev) &&
                      (pk != NULL ? nmt_ops_pattn_kv_row(st->fw.ops, st->c.dh)
                                  : nmt_ops_attn_kv_row(st->fw.ops, st->c.dh));
    NMT_CHECK(table || st->kv_hi == 0, NMT_ERR_INVALID_ARGUMENT); /* a batch does not switch between the two */
    if (table && on_dev) { /* the back-pointers are on the device only: the table permuted there */
        NMT_TRY(nmt_op_kv_table_permute(st->fw.ops, st->kvtab, R, t + 1, io->reorder, rows));
    } else if (table) {
        for (uint32_t r = 0; r < rows; r++) NMT_CHECK((uint32_t)io->h_reorder[r] < R, NMT_ERR_INVALID_ARGUMENT);
        for (uint32_t p = 0; p <= t; p++) {
            int32_t *e = st->h_kvtab + (size_t)p * R;
            memcpy(st->h_kvtmp, e, sizeof(int32_t) * R);
            for (uint32_t r = 0; r < rows; r++) e[r] = st->h_kvtmp[io->h_reorder[r]];
        }
        NMT_TRY(nmt_device_write_queued(st->fw.ops->dev, st->kvtab.mem, st->kvtab.off * sizeof(cl_int),
                                        (size_t)(t + 1) * R * sizeof(cl_int), st->h_kvtab));
    }
    if (table) st->kv_hi = NMT_MAX(st->kv_hi, t + 1);
    /* All caches and the spare have one shape: gather each layer's cache into
     * the spare, which becomes that layer's cache, and the old cache becomes
     * the spare for the next layer — one copy per layer, no copy back. */
    tf_gather g = {.st = st, .io = io, .rows = rows};
    for (uint32_t l = 0; l < st->c.dec_layers; l++) {
        if (!table) NMT_TRY(reorder_swap(&g, &st->cache[l], &st->cache_tmp, (uint64_t)T * 2 * d, live));
        /* phrase attention: the segment caches (the K|V cache's size; rows
         * of 2d or d per position) and the input window */
        if (st->cwin != NULL) NMT_TRY(reorder_swap(&g, &st->cwin_prev[l], &st->win_tmp, (uint64_t)2 * d, 2 * d));
        if (pk == NULL) continue;
        const uint32_t ld = pk->method == NMT_PH_CONVKV ? 2 * d : d;
        for (uint32_t s = 0; s < NMT_PATTN_MAX_SEG && !table; s++) {
            nmt_buf *b = &st->ph_cache[l * NMT_PATTN_MAX_SEG + s];
            if (b->mem != NULL) NMT_TRY(reorder_swap(&g, b, &st->cache_tmp, (uint64_t)T * ld, (t + 1) * ld));
        }
        if (st->win != NULL)
            NMT_TRY(reorder_swap(&g, &st->win_prev[l], &st->win_tmp, (uint64_t)pk->n_max * d, pk->n_max * d));
    }
    return NMT_OK;
}

static nmt_status tf_decode_full(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t tlen) {
    tf_state *st = (tf_state *)state;
    NMT_CHECK(n >= 1 && n <= st->dims.max_batch && tlen >= 1 && tlen <= st->dims.tgt_cap, NMT_ERR_LIMIT_EXCEEDED);
    const nmt_tf_pass p = {.n = n, .len = tlen, .key_len = io->src_len, .group = 1, .src_len = st->src_pad_len};
    NMT_TRY(nmt_tf_embed(&st->fw, &st->w.tgt_emb, io->tgt_tok, n * tlen, tlen, 0, st->x, 1));
    return nmt_tf_decoder(&st->fw, &p, st->x);
}

static nmt_status tf_project(void *state, const nmt_io_bufs *io, uint32_t first, uint32_t rows) {
    tf_state *st = (tf_state *)state;
    NMT_CHECK(rows <= st->dims.step_rows, NMT_ERR_LIMIT_EXCEEDED);
    return nmt_tf_logits(&st->fw, nmt_buf_at(st->x, (size_t)first * st->c.d), rows, io->logits);
}

static void tf_release(void *state) { (void)state; /* all buffers are session-owned */ }

static int tf_source_eos(const void *cfg) { return ((const nmt_tf_cfg *)cfg)->src_eos; }

/* The Transformer reads the first NMT_TF_N_HPARAMS keys of the table; MG-SA
 * the whole table (the mg_* suffix too) and the forward takes the phrase
 * path in its layers: one set of functions, two records. */
#define TF_RECORD(arch_, summary_, table_, n_hparams_)                                           \
    {                                                                                            \
        .arch = arch_, .summary = summary_, .cfg_size = sizeof(nmt_tf_cfg), .hparams = table_,   \
        .n_hparams = n_hparams_, .finish = nmt_tf_finish, .catalogue = nmt_tf_catalogue,         \
        .info = nmt_tf_info, .random_args = NMT_TF_RANDOM_ARGS, .plan = tf_plan, .encode = tf_encode, .step = tf_step,              \
        .reorder = tf_reorder, .decode_full = tf_decode_full, .project = tf_project,             \
        .release = tf_release, .alignments = 1, .fp16_weights = 1, .source_eos = tf_source_eos,  \
    }

const nmt_family nmt_family_transformer =
    TF_RECORD(NMT_TF_ARCH, "Transformer / HySAN: hybrid masked self-attention branches with fusion (vanilla: global only)",
              nmt_tf_hparams, NMT_TF_N_HPARAMS);

const nmt_family nmt_family_mgsa =
    TF_RECORD(NMT_MGSA_ARCH,
              "MG-SA: multi-granularity self-attention, phrase heads over n-gram phrases in chosen encoder layers",
              nmt_tf_hparams, NMT_MGSA_N_HPARAMS);

const nmt_family nmt_family_phrase =
    TF_RECORD(NMT_PH_ARCH,
              "phrase-based attention: ConvKV / QueryK n-gram keys in homogeneous or heterogeneous heads, per "
              "attention kind",
              nmt_ph_hparams, NMT_PH_N_HPARAMS);
