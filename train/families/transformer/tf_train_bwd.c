/* SPDX-License-Identifier: MIT */
/* tf_train_bwd.c — the backward pass of the trainer's Transformer/HySAN
 * model (tf_train_internal.h): each sub-layer's backward chains
 * ops_train.h in the reverse order of the shared forward (transformer_fwd.c), as
 * docs/TRAINING-OPS.md describes. */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "tf_train_internal.h"

static nmt_status lin_bwd(tft_model *m, uint32_t rows, uint32_t out_dim, uint32_t in_dim, nmt_buf x, uint32_t ld_x,
                          nmt_lin w, nmt_buf dy, uint32_t ld_dy, nmt_buf dx, uint32_t ld_dx, float dx_beta) {
    return nmt_op_linear_bwd(&m->ops, &m->t, rows, out_dim, in_dim, x, ld_x, w.w, dy, ld_dy, dx, ld_dx,
                             dx_beta, GB(m, w.w), GB(m, w.b), 1.0f);
}

/* The attention backward's q, k, v gradients into the fused q|k|v
 * gradient buffer `g` (row stride 3d), from column `col` of each block. */
static void qkv_grads(nmt_attn_bwd_args *ba, nmt_buf g, size_t col, uint32_t d) {
    ba->dq = nmt_buf_at(g, col);
    ba->dk = nmt_buf_at(g, d + col);
    ba->dv = nmt_buf_at(g, 2 * (size_t)d + col);
    ba->dq_ld = ba->dk_ld = ba->dv_ld = 3 * d;
    ba->dkv_seq_stride = (uint64_t)ba->fwd.lq * 3 * d;
}

/* MG-SA self-attention after W_o's backward (m->dctx holds d ctx; df, which
 * may be m->dtmp, is consumed): each head group's attention backward; word
 * heads into the q|k|v gradient, a phrase group's keys/values through its
 * rows of W_k / W_v to its phrase memory, through the (ON-)LSTM interaction
 * (when there is one), through the max-pooling and the SAN composition
 * (when there is one) back to the input (collected in m->dtmp, added to m->dh at the end). */
static nmt_status bwd_mg(tft_model *m, sub_desc *s, nmt_attn_bwd_args *ba, nmt_buf in, uint32_t rows) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d;
    /* phrase heads' columns of k|v over the tokens are unused: zero */
    NMT_TRY(nmt_op_fill(&m->t, m->dqkv, rows * 3 * d, 0.0f));
    NMT_TRY(nmt_op_fill(&m->t, m->dtmp, rows * d, 0.0f));
    if (c->mg_compose == NMT_MG_COM_SAN) NMT_TRY(nmt_op_fill(&m->t, m->d_cqkv_sum, rows * 3 * d, 0.0f));
    for (uint32_t g = 0; g < c->mg_n_groups; g++) {
        const nmt_mg_group *gr = &c->mg_group[g];
        const size_t col = (size_t)gr->h0 * c->dh;
        const uint32_t w = gr->nh * c->dh;
        tft_mg_group_args(m, s, g, &ba->fwd);
        ba->d_out = nmt_buf_at(m->dctx, col);
        ba->d_out_ld = d;
        qkv_grads(ba, m->dqkv, col, d); /* a phrase group's k / v gradients go to its memory instead */
        if (gr->n == 0) {
            NMT_TRY(nmt_op_attention_bwd(&m->t, ba));
            continue;
        }
        ba->dk = m->d_kvg;
        ba->dv = nmt_buf_at(m->d_kvg, w);
        ba->dk_ld = ba->dv_ld = 2 * w;
        ba->dkv_seq_stride = (uint64_t)ba->fwd.lk_max * 2 * w;
        NMT_TRY(nmt_op_attention_bwd(&m->t, ba));
        const uint32_t mrows = m->n * ba->fwd.lk_max;
        const nmt_lin wk = nmt_lin_rows(&s->w->qkv, d + gr->h0 * c->dh, d);
        const nmt_lin wv = nmt_lin_rows(&s->w->qkv, 2 * d + gr->h0 * c->dh, d);
        NMT_TRY(lin_bwd(m, mrows, w, d, s->a.mg_hg[g], d, wk, m->d_kvg, 2 * w, m->d_hg, d, 0.0f));
        NMT_TRY(lin_bwd(m, mrows, w, d, s->a.mg_hg[g], d, wv, nmt_buf_at(m->d_kvg, w), 2 * w, m->d_hg, d, 1.0f));
        nmt_buf d_pooled = m->d_hg;
        if (c->mg_interact != NMT_MG_REC_NONE) {
            const nmt_tf_sub_w *sw = s->w;
            NMT_TRY(nmt_layer_lstm_bwd(&m->ops, &m->t, s->a.mg_pool[g], d, m->n, ba->fwd.lk_max, d, d,
                                       nmt_mg_rec_chunk(c), sw->mg_ih.w, sw->mg_hh.w, s->a.mg_cnt[g], s->a.mg_z[g],
                                       s->a.mg_c[g], s->a.mg_hg[g], d, m->d_hg, d, m->d_z, m->d_c, m->d_m, m->d_pool,
                                       d, 0.0f, GB(m, sw->mg_ih.w), GB(m, sw->mg_ih.b), GB(m, sw->mg_hh.w)));
            d_pooled = m->d_pool;
        }
        if (c->mg_compose == NMT_MG_COM_LSTM) {
            /* from the last state of each phrase back through its LSTM to its tokens */
            const nmt_tf_sub_w *sw = s->w;
            NMT_TRY(nmt_op_span_last_bwd(&m->t, d_pooled, d, s->a.mg_seg[g], mrows, gr->n, d, m->d_ph, d));
            NMT_TRY(nmt_layer_lstm_bwd(&m->ops, &m->t, s->a.mg_ptok[g], d, mrows, gr->n, d, d, 0, sw->mg_com_ih.w,
                                       sw->mg_com_hh.w, s->a.mg_pcnt[g], s->a.mg_pz[g], s->a.mg_pc[g], s->a.mg_ph[g],
                                       d, m->d_ph, d, m->d_pz, m->d_pc, NO_BUF, m->d_ptok, d, 0.0f,
                                       GB(m, sw->mg_com_ih.w), GB(m, sw->mg_com_ih.b), GB(m, sw->mg_com_hh.w)));
            NMT_TRY(nmt_op_span_tokens_bwd(&m->t, m->d_ptok, s->a.mg_seg[g], m->n, ba->fwd.lk_max, gr->n, d, m->S,
                                           m->dtmp, d));
            continue;
        }
        if (gr->syntax) NMT_TRY(tft_tag_bwd(m, s, g, d_pooled)); /* + lambda dL_tag / dg (tf_train_tag.c) */
        if (c->mg_compose != NMT_MG_COM_SAN) {
            NMT_TRY(nmt_op_segment_max_bwd(&m->t, s->a.mg_arg[g], d_pooled, d, mrows, d, m->dtmp, d));
            continue;
        }
        /* SAN composition: through the pooling to the attention inside the
         * phrases, its q|k|v gradient summed over the groups */
        NMT_TRY(nmt_op_fill(&m->t, m->d_cctx, rows * d, 0.0f));
        NMT_TRY(nmt_op_segment_max_bwd(&m->t, s->a.mg_arg[g], d_pooled, d, mrows, d, m->d_cctx, d));
        nmt_attn_bwd_args cb;
        memset(&cb, 0, sizeof cb);
        tft_mg_compose_args(m, s, g, &cb.fwd);
        cb.probs = ba->probs;
        cb.dstats = ba->dstats;
        cb.d_out = m->d_cctx;
        cb.d_out_ld = d;
        qkv_grads(&cb, m->d_cqkv, 0, d);
        NMT_TRY(nmt_op_attention_bwd(&m->t, &cb));
        NMT_TRY(nmt_op_axpy(&m->t, m->d_cqkv_sum, m->d_cqkv, rows * 3 * d, 1.0f));
    }
    if (c->mg_compose == NMT_MG_COM_SAN)
        NMT_TRY(lin_bwd(m, rows, 3 * d, d, in, d, s->w->mg_cqkv, m->d_cqkv_sum, 3 * d, m->dtmp, d, 1.0f));
    NMT_TRY(lin_bwd(m, rows, 3 * d, d, in, d, s->w->qkv, m->dqkv, 3 * d, m->dh, d, 0.0f));
    return nmt_op_axpy(&m->t, m->dh, m->dtmp, rows * d, 1.0f);
}

/* The gradient buffer of a phrase attention argument: the same place in
 * the gradient of the activation it points into. */
static nmt_buf ph_grad(const tft_model *m, const sub_desc *s, nmt_buf b) {
    if (b.mem == NULL) return NO_BUF;
    if (b.mem == s->a.qkv.mem) return nmt_buf_at(m->dqkv, b.off - s->a.qkv.off);
    if (b.mem == s->a.kv.mem) return nmt_buf_at(m->dkv, b.off - s->a.kv.off);
    if (b.mem == s->a.ph_qb.mem) return nmt_buf_at(m->d_qb, b.off - s->a.ph_qb.off);
    if (b.mem == s->a.ph_qbx.mem) return nmt_buf_at(m->d_qbx, b.off - s->a.ph_qbx.off);
    for (uint32_t g = 0; g < NMT_PATTN_MAX_SEG; g++) {
        if (b.mem == s->a.ph_qx[g].mem) return nmt_buf_at(m->d_phqx[g], b.off - s->a.ph_qx[g].off);
        if (b.mem == s->a.ph_kv[g].mem) return nmt_buf_at(m->d_phkv[g], b.off - s->a.ph_kv[g].off);
    }
    return NO_BUF; /* not reached: every argument is one of the above */
}

/* Backward of seg_keys (transformer_phrase.c) for segment g whose window
 * rows of x (rows, n_seq sequences of len positions; key_len: valid
 * lengths or NO_BUF) fed: the gradients of its weights, and of x added
 * into dx (stride d).  Homogeneous: from its heads' columns of the main
 * k / v gradients (dk at dmain_k, dv at dmain_v, stride dmain_ld);
 * heterogeneous: from d_phkv[g] (stride ld_seg). */
static nmt_status bwd_seg_keys(tft_model *m, const sub_desc *s, const nmt_ph_kind *pk, uint32_t g, nmt_buf x,
                               uint32_t n_seq, uint32_t len, nmt_buf key_len, nmt_buf dmain_k, nmt_buf dmain_v,
                               uint32_t dmain_ld, nmt_buf dx) {
    const tft_cfg *c = &m->c;
    const nmt_ph_seg *sg = &pk->seg[g];
    const uint32_t d = c->d, taps = nmt_ph_taps(pk, sg), K = taps * d, wd = sg->nh * c->dh, col = sg->h0 * c->dh;
    const uint32_t rows = n_seq * len;
    const nmt_tf_sub_w *w = s->w;
    NMT_TRY(nmt_op_window_rows(&m->ops, x, d, len, key_len, n_seq, len, taps, 1, sg->n - 1, d, m->ph_cols, K));
    if (pk->structure == NMT_PH_HOMO) {
        if (pk->method == NMT_PH_CONVKV) {
            NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, wd, K, m->ph_cols, K, w->ph_kv[g].w,
                                      nmt_buf_at(dmain_k, col), dmain_ld, m->d_cols, K, 0.0f, GB(m, w->ph_kv[g].w),
                                      NO_BUF, 1.0f));
            NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, wd, K, m->ph_cols, K,
                                      nmt_buf_at(w->ph_kv[g].w, (size_t)wd * K), nmt_buf_at(dmain_v, col), dmain_ld,
                                      m->d_cols, K, 1.0f, GB(m, nmt_buf_at(w->ph_kv[g].w, (size_t)wd * K)), NO_BUF,
                                      1.0f));
        } else {
            NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, wd, K, m->ph_cols, K, w->ph_v[g].w,
                                      nmt_buf_at(dmain_v, col), dmain_ld, m->d_cols, K, 0.0f, GB(m, w->ph_v[g].w),
                                      NO_BUF, 1.0f));
        }
    } else {
        const nmt_lin *wl = pk->method == NMT_PH_CONVKV ? &w->ph_kv[g] : &w->ph_v[g];
        const uint32_t ld = pk->method == NMT_PH_CONVKV ? 2 * d : d;
        NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, ld, K, m->ph_cols, K, wl->w, m->d_phkv[g], ld, m->d_cols, K,
                                  0.0f, GB(m, wl->w), GB(m, wl->b), 1.0f));
    }
    return nmt_op_window_rows_bwd(&m->t, m->d_cols, K, key_len, n_seq, len, len, taps, 1, sg->n - 1, d, dx, d);
}

/* Backward of a phrase attention sub-layer (transformer_phrase.c
 * nmt_ph_attn): W_o, the attention calls (probabilities recomputed from
 * the kept activations), the segments' own weights, then q|k|v (self) or
 * q and the memory's k|v (cross) — into m->dh, and m->d_enc for cross. */
static nmt_status bwd_ph(tft_model *m, sub_desc *s, const nmt_ph_kind *pk, nmt_buf df, nmt_buf in, uint32_t rows) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d;
    const int cross = s->kind == SUB_CROSS;
    const uint32_t mrows = m->n * m->S;
    const int inter = pk->structure == NMT_PH_INTER;
    if (!inter) {
        NMT_TRY(lin_bwd(m, rows, d, d, s->a.ctx, d, s->w->o, df, d, m->dctx, d, 0.0f));
    } else if (s->dec) { /* W_o [b_j; u_j] */
        NMT_TRY(lin_bwd(m, rows, d, 2 * d, s->a.ctx, 2 * d, s->w->o, df, d, m->dctx, 2 * d, 0.0f));
    } else { /* W_o [b_j; u_j; b_{j+1}] over windows of two output pairs */
        NMT_TRY(tft_ph_out_window(m, s));
        NMT_TRY(nmt_op_fill(&m->t, m->d_cols, rows * 4 * d, 0.0f));
        NMT_TRY(lin_bwd(m, rows, d, 3 * d, m->ph_cols, 4 * d, s->w->o, df, d, m->d_cols, 4 * d, 0.0f));
        NMT_TRY(nmt_op_fill(&m->t, m->dctx, rows * 2 * d, 0.0f));
        NMT_TRY(nmt_op_window_rows_bwd(&m->t, m->d_cols, 4 * d, m->klen, m->n, m->S, m->S, 2, 1, 0, 2 * d, m->dctx,
                                       2 * d));
    }
    if (inter) {
        NMT_TRY(nmt_op_fill(&m->t, m->d_qb, rows * d, 0.0f));
        if (pk->method == NMT_PH_QUERYK) NMT_TRY(nmt_op_fill(&m->t, m->d_qbx, rows * 2 * d, 0.0f));
    }
    NMT_TRY(nmt_op_fill(&m->t, m->dqkv, rows * (cross ? d : 3 * d), 0.0f));
    if (cross) NMT_TRY(nmt_op_fill(&m->t, m->dkv, mrows * 2 * d, 0.0f));
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        if (!nmt_ph_own(&pk->seg[g])) continue;
        if (pk->method == NMT_PH_QUERYK)
            NMT_TRY(nmt_op_fill(&m->t, m->d_phqx[g], rows * nmt_ph_taps(pk, &pk->seg[g]) * pk->seg[g].nh * c->dh, 0.0f));
        if (pk->structure != NMT_PH_HOMO) NMT_TRY(nmt_op_fill(&m->t, m->d_phkv[g], (cross ? mrows : rows) * 2 * d, 0.0f));
    }
    for (uint32_t i = 0; i < nmt_ph_calls(pk); i++) {
        nmt_pattn_bwd_args b;
        memset(&b, 0, sizeof b);
        tft_ph_args(m, s, i, &b.fwd);
        b.fwd.p = m->probs;
        NMT_TRY(nmt_op_pattn(&m->ops, &b.fwd)); /* the forward's probabilities again (and its output) */
        b.d_out = nmt_buf_at(m->dctx, b.fwd.out.off - s->a.ctx.off);
        b.d_out_ld = b.fwd.out_ld;
        b.ds = m->scores;
        for (uint32_t g = 0; g < b.fwd.n_segs; g++) {
            b.grad[g] = b.fwd.seg[g];
            b.grad[g].q = ph_grad(m, s, b.fwd.seg[g].q);
            b.grad[g].qx = ph_grad(m, s, b.fwd.seg[g].qx);
            b.grad[g].k = ph_grad(m, s, b.fwd.seg[g].k);
            b.grad[g].v = ph_grad(m, s, b.fwd.seg[g].v);
        }
        NMT_TRY(nmt_op_pattn_bwd(&m->t, &b));
    }
    /* the query side: q (and QueryK's extra taps) from the input */
    NMT_TRY(lin_bwd(m, rows, cross ? d : 3 * d, d, in, d, cross ? s->w->q : s->w->qkv, m->dqkv, cross ? d : 3 * d, m->dh,
                    d, 0.0f));
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        const nmt_ph_seg *sg = &pk->seg[g];
        if (!nmt_ph_own(sg) || pk->method != NMT_PH_QUERYK) continue;
        const uint32_t qw = nmt_ph_taps(pk, sg) * sg->nh * c->dh;
        const nmt_lin *wq = &s->w->ph_q[g];
        NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, qw, d, in, d, wq->w, m->d_phqx[g], qw, m->dh, d, 1.0f,
                                  GB(m, wq->w), wq->b.mem ? GB(m, wq->b) : NO_BUF, 1.0f));
    }
    if (inter) { /* the bigram queries: their weights, then the windows of two query inputs */
        NMT_TRY(tft_ph_bigram_window(m, s, in));
        const nmt_lin *wb = &s->w->ph_qb, *wb2 = &s->w->ph_qb2;
        NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, d, 2 * d, m->ph_cols, 2 * d, wb->w, m->d_qb, d, m->d_cols,
                                  2 * d, 0.0f, GB(m, wb->w), GB(m, wb->b), 1.0f));
        if (pk->method == NMT_PH_QUERYK)
            NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rows, 2 * d, 2 * d, m->ph_cols, 2 * d, wb2->w, m->d_qbx, 2 * d,
                                      m->d_cols, 2 * d, 1.0f, GB(m, wb2->w), GB(m, wb2->b), 1.0f));
        const uint32_t len = s->dec ? m->T : m->S;
        NMT_TRY(nmt_op_window_rows_bwd(&m->t, m->d_cols, 2 * d, s->dec ? NO_BUF : m->klen, m->n, len, len, 2, 1, 1, d,
                                       m->dh, d));
    }
    /* the key side: the segments' windows, and the Transformer's k|v */
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        if (!nmt_ph_own(&pk->seg[g])) continue;
        if (cross)
            NMT_TRY(bwd_seg_keys(m, s, pk, g, m->enc_out, m->n, m->S, m->klen, m->dkv, nmt_buf_at(m->dkv, d), 2 * d,
                                 m->d_enc));
        else
            NMT_TRY(bwd_seg_keys(m, s, pk, g, in, m->n, s->dec ? m->T : m->S, s->dec ? NO_BUF : m->klen,
                                 nmt_buf_at(m->dqkv, d), nmt_buf_at(m->dqkv, 2 * (size_t)d), 3 * d, m->dh));
    }
    if (cross) return lin_bwd(m, mrows, 2 * d, d, m->enc_out, d, s->w->kv, m->dkv, 2 * d, m->d_enc, d, 1.0f);
    return NMT_OK;
}

/* Backward of F: df (rows, d) -> m->dh (overwritten), parameter grads added. */
static nmt_status bwd_f(tft_model *m, sub_desc *s, nmt_buf df, nmt_buf in, uint32_t rows) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d;
    if (s->kind == SUB_FFN) {
        NMT_TRY(lin_bwd(m, rows, d, c->ff, s->a.ffh, c->ff, s->w->fc2, df, d, m->dffn, c->ff, 0.0f));
        NMT_TRY(c->ffn_act ? nmt_op_act_bwd(&m->t, s->a.ffp, m->dffn, m->dffn, rows * c->ff, c->ffn_act + 1)
                           : nmt_op_relu_bwd(&m->t, s->a.ffh, m->dffn, m->dffn, rows * c->ff));
        return lin_bwd(m, rows, c->ff, d, in, d, s->w->fc1, m->dffn, c->ff, m->dh, d, 0.0f);
    }
    const nmt_ph_kind *pk = tft_ph_args(m, s, 0, NULL);
    if (pk != NULL) return bwd_ph(m, s, pk, df, in, rows);
    nmt_attn_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    ba.probs = m->probs;
    ba.dstats = m->dstats;
    if (s->kind == SUB_CROSS) {
        NMT_TRY(lin_bwd(m, rows, d, d, s->a.ctx, d, s->w->o, df, d, m->dctx, d, 0.0f));
        tft_attn_cross_args(m, s, &ba.fwd);
        ba.d_out = m->dctx;
        ba.d_out_ld = d;
        ba.dq = m->dqkv;
        ba.dq_ld = d;
        ba.dk = m->dkv;
        ba.dv = nmt_buf_at(m->dkv, d);
        ba.dk_ld = ba.dv_ld = 2 * d;
        ba.dkv_seq_stride = (uint64_t)m->S * 2 * d;
        NMT_TRY(nmt_op_attention_bwd(&m->t, &ba));
        NMT_TRY(lin_bwd(m, rows, d, d, in, d, s->w->q, m->dqkv, d, m->dh, d, 0.0f));
        return lin_bwd(m, m->n * m->S, 2 * d, d, m->enc_out, d, s->w->kv, m->dkv, 2 * d, m->d_enc, d, 1.0f);
    }
    tft_attn_self_args(m, s, &ba.fwd);
    const uint32_t nbr = ba.fwd.n_branches, ld = nbr * d;
    if (nbr == 1 || c->fusion == NMT_TF_FUSE_CONCAT) {
        NMT_TRY(lin_bwd(m, rows, d, ld, s->a.ctx, ld, s->w->o, df, d, m->dctx, ld, 0.0f));
    } else if (c->fusion == NMT_TF_FUSE_SUM) {
        for (uint32_t b = 0; b < nbr; b++) {
            NMT_TRY(nmt_op_gemm(&m->ops, 0, rows, d, d, 1.0f, df, d, s->w->o.w, d, 0.0f,
                                nmt_buf_at(m->dctx, (size_t)b * d), ld, NO_BUF, 0));
            NMT_TRY(nmt_op_gemm_tn(&m->t, d, d, rows, 1.0f, df, d, nmt_buf_at(s->a.ctx, (size_t)b * d), ld, 1.0f,
                                   GB(m, s->w->o.w), d));
        }
        NMT_TRY(nmt_op_col_sum(&m->t, rows, d, 1.0f, df, d, 1.0f, GB(m, s->w->o.b)));
    } else {
        const uint32_t dr = d / c->gate_r;
        NMT_TRY(lin_bwd(m, rows, d, d, s->a.fused, d, s->w->o, df, d, m->dfused, d, 0.0f));
        for (uint32_t b = 0; b < nbr; b++) {
            nmt_buf xb = nmt_buf_at(s->a.ctx, (size_t)b * d), dxb = nmt_buf_at(m->dctx, (size_t)b * d);
            NMT_TRY(nmt_op_gate_bwd(&m->t, xb, ld, s->a.g[b], d, m->dfused, d, dxb, ld, m->dg, d, rows, d, 0));
            NMT_TRY(lin_bwd(m, rows, d, dr, s->a.gh[b], dr, s->w->g2[b], m->dg, d, m->dgh, dr, 0.0f));
            NMT_TRY(nmt_op_relu_bwd(&m->t, s->a.gh[b], m->dgh, m->dgh, rows * dr));
            NMT_TRY(lin_bwd(m, rows, dr, d, xb, ld, s->w->g1[b], m->dgh, dr, dxb, ld, 1.0f));
        }
    }
    if (tft_is_mg(m, s)) return bwd_mg(m, s, &ba, in, rows);
    ba.d_out = m->dctx;
    ba.d_out_ld = ld;
    qkv_grads(&ba, m->dqkv, 0, d);
    NMT_TRY(nmt_op_attention_bwd(&m->t, &ba));
    return lin_bwd(m, rows, 3 * d, d, in, d, s->w->qkv, m->dqkv, 3 * d, m->dh, d, 0.0f);
}

/* *cur: gradient w.r.t. the sub-layer's output; becomes the gradient w.r.t.
 * its input (*cur and *spare may be swapped). */
static nmt_status bwd_sub(tft_model *m, sub_desc *s, uint32_t rows, float p, uint64_t seed, uint64_t site,
                          nmt_buf *cur, nmt_buf *spare) {
    const tft_cfg *c = &m->c;
    const uint32_t n = rows * c->d;
    if (c->pre_norm) {
        nmt_buf df = *cur;
        if (p > 0.0f) {
            NMT_TRY(nmt_op_dropout(&m->t, *cur, m->dtmp, n, p, seed, site << 32));
            df = m->dtmp;
        }
        NMT_TRY(nmt_op_layernorm(&m->ops, s->a.x, NO_BUF, m->h, rows, c->d, s->w->ln.w, s->w->ln.b, c->eps));
        NMT_TRY(bwd_f(m, s, df, m->h, rows));
        return nmt_op_layernorm_bwd(&m->t, s->a.x, NO_BUF, m->dh, *cur, 1, rows, c->d, s->w->ln.w, c->eps,
                                    GB(m, s->w->ln.w), GB(m, s->w->ln.b), 1, m->lnstats);
    }
    NMT_TRY(nmt_op_layernorm_bwd(&m->t, s->a.x, s->a.t, *cur, *spare, 0, rows, c->d, s->w->ln.w, c->eps,
                                 GB(m, s->w->ln.w), GB(m, s->w->ln.b), 1, m->lnstats));
    nmt_buf df = *spare;
    if (p > 0.0f) {
        NMT_TRY(nmt_op_dropout(&m->t, *spare, m->dtmp, n, p, seed, site << 32));
        df = m->dtmp;
    }
    NMT_TRY(bwd_f(m, s, df, s->a.x, rows));
    NMT_TRY(nmt_op_axpy(&m->t, *spare, m->dh, n, 1.0f));
    nmt_buf tmp = *cur;
    *cur = *spare;
    *spare = tmp;
    return NMT_OK;
}

static nmt_status embed_bwd(tft_model *m, const int32_t *tok, uint32_t rows, uint32_t vocab, nmt_buf dy,
                            nmt_buf perm, nmt_buf seg, nmt_buf segtok, nmt_buf emb) {
    uint32_t n_seg = 0;
    NMT_TRY(nmt_embed_bwd_plan(tok, rows, vocab, (int32_t)m->c.pad, m->h_count, m->h_perm, m->h_seg, m->h_segtok,
                               &n_seg));
    if (n_seg == 0) return NMT_OK;
    NMT_TRY(nmt_device_write(m->dev, perm.mem, 0, rows * sizeof(int32_t), m->h_perm));
    NMT_TRY(nmt_device_write(m->dev, seg.mem, 0, (n_seg + 1) * sizeof(int32_t), m->h_seg));
    NMT_TRY(nmt_device_write(m->dev, segtok.mem, 0, n_seg * sizeof(int32_t), m->h_segtok));
    return nmt_op_embed_bwd(&m->t, dy, m->c.d, perm, seg, segtok, n_seg, m->c.emb_scale, GB(m, emb));
}

/* The gradients of the tensors named prefix* are final: tell o->grads_ready. */
static void ready(const tft_model *m, const tft_step_opts *o, const char *prefix) {
    size_t off, n;
    if (o->grads_ready != NULL && nmt_pstore_span(&m->ps, prefix, &off, &n)) o->grads_ready(o->grads_user, off, n);
}

/* Layer l of the stack ("enc" / "dec"): its tensors are named stack.l.* */
static void ready_layer(const tft_model *m, const tft_step_opts *o, const char *stack, uint32_t l) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.%u.", stack, l);
    ready(m, o, prefix);
}

nmt_status tft_backward(tft_model *m, const tft_step_opts *o) {
    const tft_cfg *c = &m->c;
    const float p = o->dropout;
    const uint64_t seed = o->seed;
    const uint32_t d = c->d, rs = m->n * m->S, rt = m->n * m->T;
    nmt_buf cur = m->g_a, spare = m->g_b;
    const nmt_buf out_db = c->out_bias ? GB(m, m->w.out_b.w) : NO_BUF; /* the logits bias (output_bias) */
    if (c->pre_norm) {
        NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rt, c->tgt_vocab, d, m->y_fin, d, m->w.out.w, m->logits,
                                  c->tgt_vocab, m->dtmp, d, 0.0f, GB(m, m->w.out.w), out_db, 1.0f));
        NMT_TRY(nmt_op_layernorm_bwd(&m->t, m->dec_top, NO_BUF, m->dtmp, cur, 0, rt, d, m->w.dec_ln.w, c->eps,
                                     GB(m, m->w.dec_ln.w), GB(m, m->w.dec_ln.b), 1, m->lnstats));
        ready(m, o, "dec.ln.");
    } else {
        NMT_TRY(nmt_op_linear_bwd(&m->ops, &m->t, rt, c->tgt_vocab, d, m->y_fin, d, m->w.out.w, m->logits,
                                  c->tgt_vocab, cur, d, 0.0f, GB(m, m->w.out.w), out_db, 1.0f));
    }
    if (!c->tied_out) ready(m, o, "out_proj"); /* tied: the target embedding's gradient, not final yet */
    if (c->out_bias) ready(m, o, "out_bias");
    NMT_TRY(nmt_op_fill(&m->t, m->d_enc, rs * d, 0.0f));
    for (uint32_t k = m->n_enc_sub + m->n_dec_sub; k-- > m->n_enc_sub;) {
        NMT_TRY(bwd_sub(m, &m->subs[k], rt, p, seed, 2 + k, &cur, &spare));
        /* after a layer's self-attention, the last of its 3 sub-layers */
        if ((k - m->n_enc_sub) % 3 == 0) ready_layer(m, o, "dec", (k - m->n_enc_sub) / 3);
    }
    nmt_buf dy = cur;
    if (p > 0.0f) {
        NMT_TRY(nmt_op_dropout(&m->t, cur, m->dtmp, rt * d, p, seed, (uint64_t)1 << 32));
        dy = m->dtmp;
    }
    NMT_TRY(embed_bwd(m, m->h_tin, rt, c->tgt_vocab, dy, m->perm_t, m->seg_t, m->segtok_t, m->w.tgt_emb.w));
    if (!c->shared_emb) ready(m, o, "tgt_embed"); /* shared: the source embedding's, not final yet */
    /* encoder: the gradient of its output summed over the decoder layers */
    if (c->pre_norm) {
        NMT_TRY(nmt_op_layernorm_bwd(&m->t, m->enc_top, NO_BUF, m->d_enc, cur, 0, rs, d, m->w.enc_ln.w, c->eps,
                                     GB(m, m->w.enc_ln.w), GB(m, m->w.enc_ln.b), 1, m->lnstats));
        ready(m, o, "enc.ln.");
    } else {
        spare = cur;
        cur = m->d_enc;
    }
    for (uint32_t k = m->n_enc_sub; k-- > 0;) {
        NMT_TRY(bwd_sub(m, &m->subs[k], rs, p, seed, 2 + k, &cur, &spare));
        if (k % 2 == 0) ready_layer(m, o, "enc", k / 2); /* after the self-attention, the last of 2 */
    }
    dy = cur;
    if (p > 0.0f) {
        NMT_TRY(nmt_op_dropout(&m->t, cur, m->dtmp, rs * d, p, seed, 0));
        dy = m->dtmp;
    }
    return embed_bwd(m, m->h_src, rs, c->src_vocab, dy, m->perm_s, m->seg_s, m->segtok_s, m->w.src_emb.w);
}
