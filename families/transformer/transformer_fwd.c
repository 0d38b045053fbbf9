/* SPDX-License-Identifier: MIT */
/* transformer_fwd.c — the Transformer / HySAN forward (transformer_fwd.h):
 * embeddings, HySAN self-attention with branch fusion, cross-attention, FFN,
 * pre-/post-norm residual wiring, output projection.  Used by decoding,
 * scoring and training alike. */
#include "transformer_fwd.h"

#include <string.h>

static const nmt_tf_sub_w *sub_w(const nmt_tf_fwd *fw, uint32_t k) { return &fw->w->sub[k]; }

static nmt_status linear(const nmt_tf_fwd *fw, nmt_buf in, uint32_t ld_in, uint32_t rows, const nmt_lin *w,
                         uint32_t out_dim, uint32_t in_dim, nmt_buf out, uint32_t ld_out, int relu) {
    return nmt_layer_linear(fw->ops, in, ld_in, rows, w, out_dim, in_dim, out, ld_out, relu);
}

nmt_status nmt_tf_embed(const nmt_tf_fwd *fw, const nmt_lin *E, nmt_buf tok, uint32_t rows, uint32_t seq_len,
                        uint32_t pos0, nmt_buf out, uint64_t site) {
    const nmt_tf_cfg *c = fw->c;
    NMT_TRY(nmt_layer_embed(fw->ops, tok, rows, seq_len, pos0, E, c->d, c->emb_scale, out));
    return fw->drop ? fw->drop(fw->user, out, rows * c->d, site) : NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Attention sub-layers                                                     */
/* ------------------------------------------------------------------------ */

static void attn_common(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_branch *br, uint32_t nbr, int causal,
                        nmt_attn_args *o) {
    memset(o, 0, sizeof *o);
    o->n_heads = fw->c->heads;
    o->d_head = fw->c->dh;
    o->group = 1;
    o->causal = causal;
    o->n_branches = nbr;
    memcpy(o->branches, br, sizeof(nmt_branch) * nbr);
    o->scores = fw->scores;
    o->stats = fw->stats;
    o->out = a->ctx;
    o->out_ld = nbr * fw->c->d;
}

void nmt_tf_self_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, int dec, const nmt_tf_pass *p,
                      nmt_attn_args *o) {
    const nmt_tf_cfg *c = fw->c;
    const uint32_t d = c->d;
    attn_common(fw, a, dec ? c->dec_br : c->enc_br, dec ? c->n_dec_br : c->n_enc_br, dec, o);
    o->n_seq = p->n;
    o->lq = p->len;
    o->lk_max = p->len;
    o->q = a->qkv;
    o->k = nmt_buf_at(a->qkv, d);
    o->v = nmt_buf_at(a->qkv, 2 * (size_t)d);
    o->q_ld = o->k_ld = o->v_ld = 3 * d;
    o->kv_seq_stride = (uint64_t)p->len * 3 * d;
    o->key_len = dec ? NMT_NO_BUF : p->key_len; /* decoder self-attention: causal, no padding inside */
    o->key_len_const = p->len;
}

void nmt_tf_cross_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p, nmt_attn_args *o) {
    static const nmt_branch global = {NMT_BRANCH_GLOBAL, 0};
    const uint32_t d = fw->c->d;
    attn_common(fw, a, &global, 1, 0, o);
    o->n_seq = p->n;
    o->lq = p->len;
    o->group = p->group;
    o->lk_max = p->src_len;
    o->q = a->qkv;
    o->q_ld = d;
    o->k = a->kv;
    o->v = nmt_buf_at(a->kv, d);
    o->k_ld = o->v_ld = 2 * d;
    o->kv_seq_stride = (uint64_t)p->src_len * 2 * d;
    o->key_len = p->key_len;
}

void nmt_mg_group_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p, uint32_t g,
                       nmt_attn_args *o) {
    const nmt_tf_cfg *c = fw->c;
    const nmt_mg_group *gr = &c->mg_group[g];
    const size_t col = (size_t)gr->h0 * c->dh, w = (size_t)gr->nh * c->dh;
    nmt_tf_self_args(fw, a, 0, p, o);
    o->n_heads = gr->nh;
    o->q = nmt_buf_at(a->qkv, col);
    o->out = nmt_buf_at(a->ctx, col);
    if (gr->n == 0) {
        o->k = nmt_buf_at(o->k, col);
        o->v = nmt_buf_at(o->v, col);
        return;
    }
    const uint32_t m_cap = nmt_mg_m_cap(c, g, p->len);
    o->k = a->mg_kv[g];
    o->v = nmt_buf_at(a->mg_kv[g], w);
    o->k_ld = o->v_ld = (uint32_t)(2 * w);
    o->kv_seq_stride = (uint64_t)m_cap * 2 * w;
    o->lk_max = m_cap;
    o->key_len = a->mg_cnt[g];
    o->key_len_const = m_cap;
}

void nmt_mg_compose_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p, uint32_t g,
                         nmt_attn_args *o) {
    const nmt_branch block = {NMT_BRANCH_BLOCK, fw->c->mg_group[g].n};
    const uint32_t d = fw->c->d;
    attn_common(fw, a, &block, 1, 0, o);
    o->n_seq = p->n;
    o->lq = o->lk_max = o->key_len_const = p->len;
    o->q = a->mg_cqkv;
    o->k = nmt_buf_at(a->mg_cqkv, d);
    o->v = nmt_buf_at(a->mg_cqkv, 2 * (size_t)d);
    o->q_ld = o->k_ld = o->v_ld = 3 * d;
    o->kv_seq_stride = (uint64_t)p->len * 3 * d;
    o->key_len = p->key_len;
    o->out = a->mg_cctx[g];
    o->out_ld = d;
}

/* The end of a post-norm sub-layer at inference (nmt_tf_fwd.fuse_norm):
 * out = LN(x + t) with the sub-layer's norm, taken over by its last
 * product (project).  NULL: the product writes t and sublayer() norms. */
typedef struct tf_tail {
    const nmt_lin *ln;
    nmt_buf res, out;
} tf_tail;

/* t = in W^T + b, the sub-layer's last product (out_dim d); with a tail,
 * the tail's out = LN(res + t) instead, in one launch where the ops can. */
static nmt_status project(const nmt_tf_fwd *fw, const tf_tail *tl, nmt_buf in, uint32_t ld_in, uint32_t rows,
                          const nmt_lin *w, uint32_t in_dim, nmt_buf t) {
    const uint32_t d = fw->c->d;
    if (tl == NULL) return linear(fw, in, ld_in, rows, w, d, in_dim, t, d, 0);
    return nmt_layer_linear_norm(fw->ops, in, ld_in, rows, w, d, in_dim, tl->res, tl->ln, fw->c->eps, t, tl->out);
}

/* ctx (rows, nbr*d) -> t (rows, d): fusion of the branches, then W_o. */
static nmt_status fuse_and_project(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, uint32_t nbr,
                                   uint32_t rows, const tf_tail *tl) {
    const nmt_tf_cfg *c = fw->c;
    const uint32_t d = c->d, ld = nbr * d;
    if (nbr == 1 || c->fusion == NMT_TF_FUSE_CONCAT) return project(fw, tl, a->ctx, ld, rows, &w->o, ld, a->t);
    if (c->fusion == NMT_TF_FUSE_SUM) {
        /* W_o (sum_b x_b) + b_o = sum_b W_o x_b + b_o: accumulate GEMMs */
        for (uint32_t b = 0; b < nbr; b++)
            NMT_TRY(nmt_layer_matmul(fw->ops, rows, d, d, nmt_buf_at(a->ctx, (size_t)b * d), ld, &w->o,
                                     b ? 1.0f : 0.0f, a->t, d, b ? NMT_NO_BUF : w->o.b, 0));
        return tl ? nmt_layer_norm(fw->ops, a->t, tl->res, tl->out, rows, d, tl->ln, c->eps) : NMT_OK;
    }
    const uint32_t dr = d / c->gate_r;
    for (uint32_t b = 0; b < nbr; b++)
        NMT_TRY(nmt_layer_gate(fw->ops, nmt_buf_at(a->ctx, (size_t)b * d), ld, rows, &w->g1[b], &w->g2[b], d, dr,
                               a->gh[b], a->g[b], a->fused, d, b > 0, fw->fuse_norm));
    return project(fw, tl, a->fused, d, rows, &w->o, d, a->t);
}

static nmt_status self_attn(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, int dec,
                            const nmt_tf_pass *p, nmt_buf in, const tf_tail *tl) {
    const uint32_t d = fw->c->d, rows = p->n * p->len;
    NMT_TRY(linear(fw, in, d, rows, &w->qkv, 3 * d, d, a->qkv, 3 * d, 0));
    nmt_attn_args o;
    if (p->step) {
        /* attend over [0, t]; the attention appends this position's K|V
         * (from qkv) to the cache */
        const uint32_t T = p->cache_len;
        attn_common(fw, a, fw->c->dec_br, fw->c->n_dec_br, 1, &o);
        o.n_seq = rows;
        o.lq = 1;
        o.q_pos0 = p->t;
        o.lk_max = p->t + 1;
        o.q = a->qkv;
        o.q_ld = 3 * d;
        o.k = a->kv;
        o.v = nmt_buf_at(a->kv, d);
        o.k_ld = o.v_ld = 2 * d;
        o.kv_seq_stride = (uint64_t)T * 2 * d;
        o.kv_row = a->kv_row;
        o.kv_row_ld = a->kv_row_ld;
        o.k_new = nmt_buf_at(a->qkv, d);
        o.v_new = nmt_buf_at(a->qkv, 2 * (size_t)d);
        o.new_ld = 3 * d;
        o.key_len_const = p->t + 1;
    } else {
        nmt_tf_self_args(fw, a, dec, p, &o);
    }
    NMT_TRY(nmt_op_attention(fw->ops, &o));
    return fuse_and_project(fw, w, a, o.n_branches, rows, tl);
}

static nmt_status cross_attn(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a,
                             const nmt_tf_pass *p, nmt_buf in, const tf_tail *tl) {
    const uint32_t d = fw->c->d, rows = p->n * p->len;
    NMT_TRY(linear(fw, in, d, rows, &w->q, d, d, a->qkv, d, 0));
    nmt_attn_args o;
    nmt_tf_cross_args(fw, a, p, &o);
    NMT_TRY(nmt_op_attention(fw->ops, &o));
    return project(fw, tl, a->ctx, d, rows, &w->o, d, a->t);
}

/* Alignment rows of a decoder step (nmt_tf_pass.align): the probabilities
 * of the cross-attention just run, recomputed from its q (a->qkv) and the
 * memory's k (a->kv), averaged over heads or of one head. */
static nmt_status cross_align(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p) {
    const uint32_t d = fw->c->d;
    return nmt_op_attn_align(fw->ops, p->n * p->len, p->group, fw->c->heads, fw->c->dh, p->align_head, a->qkv, d,
                             a->kv, 2 * d, (uint64_t)p->src_len * 2 * d, p->key_len, p->src_len, p->align,
                             p->align_ld);
}

/* MG-SA encoder self-attention (docs/ARCHITECTURES.md): q|k|v of the tokens
 * for every head; each phrase group's heads take their keys and values
 * from its phrase memory H_g = REC(COM(n-gram spans of the input)), COM
 * max-pooling (of the input, or of a self-attention inside each phrase:
 * SAN) or the last state of an LSTM over each phrase, REC none or an
 * (ON-)LSTM over the phrase sequence, projected by the group's rows of
 * W_k and W_v. */
static nmt_status mg_self_attn(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a,
                               const nmt_tf_pass *p, nmt_buf in, const tf_tail *tl) {
    const nmt_tf_cfg *c = fw->c;
    const uint32_t d = c->d, rows = p->n * p->len;
    NMT_TRY(linear(fw, in, d, rows, &w->qkv, 3 * d, d, a->qkv, 3 * d, 0));
    const int san = c->mg_compose == NMT_MG_COM_SAN;
    if (san) NMT_TRY(linear(fw, in, d, rows, &w->mg_cqkv, 3 * d, d, a->mg_cqkv, 3 * d, 0));
    for (uint32_t g = 0; g < c->mg_n_groups; g++) {
        const nmt_mg_group *gr = &c->mg_group[g];
        if (gr->n > 0) {
            nmt_buf tokens = in; /* what the phrases pool: the input, or the composition's attention */
            if (san) {
                nmt_attn_args ca;
                nmt_mg_compose_args(fw, a, p, g, &ca);
                NMT_TRY(nmt_op_attention(fw->ops, &ca));
                tokens = a->mg_cctx[g];
            }
            const uint32_t m_cap = nmt_mg_m_cap(c, g, p->len), m = p->n * m_cap, wd = gr->nh * c->dh;
            if (!gr->syntax) /* syntax heads: the caller's partition is already there */
                NMT_TRY(nmt_op_ngram_spans(fw->ops, p->key_len, p->n, gr->n, m_cap, a->mg_seg[g], a->mg_cnt[g]));
            const int rec = c->mg_interact != NMT_MG_REC_NONE;
            const nmt_buf pooled = rec ? a->mg_pool[g] : a->mg_hg[g];
            if (c->mg_compose == NMT_MG_COM_LSTM) {
                /* each phrase a sequence of n steps; G = the state after its last token */
                NMT_TRY(nmt_op_span_tokens(fw->ops, in, d, p->len, a->mg_seg[g], p->n, m_cap, gr->n, d,
                                           a->mg_ptok[g], a->mg_pcnt[g]));
                NMT_TRY(nmt_layer_lstm(fw->ops, a->mg_ptok[g], d, m, gr->n, d, d, 0, &w->mg_com_ih, &w->mg_com_hh,
                                       a->mg_pcnt[g], a->mg_pz[g], a->mg_pc[g], a->mg_ph[g], d));
                NMT_TRY(nmt_op_span_last(fw->ops, a->mg_ph[g], d, a->mg_seg[g], m, gr->n, d, pooled, d));
            } else {
                NMT_TRY(nmt_op_segment_max(fw->ops, tokens, d, p->len, a->mg_seg[g], p->n, m_cap, d, pooled, d,
                                           a->mg_arg[g]));
            }
            if (rec)
                NMT_TRY(nmt_layer_lstm(fw->ops, pooled, d, p->n, m_cap, d, d, nmt_mg_rec_chunk(c), &w->mg_ih,
                                       &w->mg_hh, a->mg_cnt[g], a->mg_z[g], a->mg_c[g], a->mg_hg[g], d));
            const nmt_lin wk = nmt_lin_rows(&w->qkv, d + gr->h0 * c->dh, d);
            const nmt_lin wv = nmt_lin_rows(&w->qkv, 2 * d + gr->h0 * c->dh, d);
            NMT_TRY(linear(fw, a->mg_hg[g], d, m, &wk, wd, d, a->mg_kv[g], 2 * wd, 0));
            NMT_TRY(linear(fw, a->mg_hg[g], d, m, &wv, wd, d, nmt_buf_at(a->mg_kv[g], wd), 2 * wd, 0));
        }
        nmt_attn_args o;
        nmt_mg_group_args(fw, a, p, g, &o);
        NMT_TRY(nmt_op_attention(fw->ops, &o));
    }
    return fuse_and_project(fw, w, a, 1, rows, tl);
}

static nmt_status ffn(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, uint32_t rows, nmt_buf in,
                      const tf_tail *tl) {
    const nmt_tf_cfg *c = fw->c;
    /* The activation in the product's epilogue (the same bits as the product
     * followed by nmt_op_act), unless the caller keeps GELU's or swish's
     * pre-activation ffp (training: their backward reads it) or the device
     * runs it faster as a kernel of its own (nmt_ops_fuse_act: CPUs past a
     * few rows); then in place in ffh when there is no ffp */
    if (c->ffn_act && (a->ffp.mem || !nmt_ops_fuse_act(fw->ops, rows))) {
        const nmt_buf pre = a->ffp.mem ? a->ffp : a->ffh;
        NMT_TRY(linear(fw, in, c->d, rows, &w->fc1, c->ff, c->d, pre, c->ff, 0));
        NMT_TRY(nmt_op_act(fw->ops, pre, a->ffh, rows * c->ff, c->ffn_act + 1));
    } else {
        NMT_TRY(linear(fw, in, c->d, rows, &w->fc1, c->ff, c->d, a->ffh, c->ff, c->ffn_act + 1));
    }
    return project(fw, tl, a->ffh, c->ff, rows, &w->fc2, c->ff, a->t);
}

/* ------------------------------------------------------------------------ */
/* Residual wiring and stacks                                               */
/* ------------------------------------------------------------------------ */

static int same_buf(nmt_buf a, nmt_buf b) { return a.mem == b.mem && a.off == b.off; }

/* Sub-layer k: post-norm out = LN(x + drop(F(x))); pre-norm out = x +
 * drop(F(LN(x))). */
static nmt_status sublayer(const nmt_tf_fwd *fw, uint32_t k, const nmt_tf_pass *p) {
    const nmt_tf_cfg *c = fw->c;
    const nmt_tf_sub_w *w = sub_w(fw, k);
    const uint32_t rows = p->n * p->len, n = rows * c->d;
    nmt_tf_acts a;
    fw->acts(fw->user, k, &a);
    nmt_buf in = a.x;
    if (c->pre_norm) {
        NMT_TRY(nmt_layer_norm(fw->ops, a.x, NMT_NO_BUF, a.h, rows, c->d, &w->ln, c->eps));
        in = a.h;
    }
    const int dec = nmt_tf_sub_is_dec(c, k);
    /* post-norm at inference: the last product takes the residual and norm
     * (the phrase attentions end in their own products and keep t) */
    const tf_tail tail = {&w->ln, a.x, a.out};
    const tf_tail *tl = !c->pre_norm && fw->fuse_norm && fw->drop == NULL ? &tail : NULL;
    int normed = tl != NULL;
    switch (nmt_tf_sub_kind_of(c, k)) {
    case NMT_TF_SUB_SELF:
        if (nmt_ph_of(c, dec, 0)) {
            NMT_TRY(nmt_ph_attn(fw, w, &a, nmt_ph_of(c, dec, 0), dec, 0, p, in));
            normed = 0;
        } else if (!dec && nmt_mg_layer(c, k / 2)) NMT_TRY(mg_self_attn(fw, w, &a, p, in, tl));
        else NMT_TRY(self_attn(fw, w, &a, dec, p, in, tl));
        break;
    case NMT_TF_SUB_CROSS:
        if (nmt_ph_of(c, 1, 1)) {
            NMT_TRY(nmt_ph_attn(fw, w, &a, nmt_ph_of(c, 1, 1), 1, 1, p, in));
            normed = 0;
        } else NMT_TRY(cross_attn(fw, w, &a, p, in, tl));
        if (p->align.mem != NULL && k == p->align_k) NMT_TRY(cross_align(fw, &a, p));
        break;
    case NMT_TF_SUB_FFN: NMT_TRY(ffn(fw, w, &a, rows, in, tl)); break;
    }
    if (normed) return NMT_OK;
    if (fw->drop) NMT_TRY(fw->drop(fw->user, a.t, n, 2 + (uint64_t)k));
    if (!c->pre_norm) return nmt_layer_norm(fw->ops, a.t, a.x, a.out, rows, c->d, &w->ln, c->eps);
    if (!same_buf(a.out, a.x)) NMT_TRY(nmt_op_copy_rows(fw->ops, a.x, c->d, a.out, c->d, rows, c->d));
    return nmt_op_add(fw->ops, a.out, a.t, n);
}

/* Final norm of a pre-norm stack: out = LN(output of sub-layer last). */
static nmt_status final_norm(const nmt_tf_fwd *fw, uint32_t last, const nmt_lin *ln, uint32_t rows, nmt_buf out) {
    if (!fw->c->pre_norm) return NMT_OK;
    nmt_tf_acts a;
    fw->acts(fw->user, last, &a);
    return nmt_layer_norm(fw->ops, a.out, NMT_NO_BUF, out, rows, fw->c->d, ln, fw->c->eps);
}

nmt_status nmt_tf_encoder(const nmt_tf_fwd *fw, const nmt_tf_pass *p, nmt_buf out) {
    const uint32_t E = nmt_tf_n_enc_sub(fw->c);
    for (uint32_t k = 0; k < E; k++) NMT_TRY(sublayer(fw, k, p));
    return final_norm(fw, E - 1, &fw->w->enc_ln, p->n * p->len, out);
}

nmt_status nmt_tf_cross_kv(const nmt_tf_fwd *fw, nmt_buf memory, const nmt_tf_pass *p) {
    const nmt_tf_cfg *c = fw->c;
    const uint32_t E = nmt_tf_n_enc_sub(c), rows = p->n * p->len;
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        const uint32_t k = E + 3 * l + 1;
        nmt_tf_acts a;
        fw->acts(fw->user, k, &a);
        NMT_TRY(linear(fw, memory, c->d, rows, &sub_w(fw, k)->kv, 2 * c->d, c->d, a.kv, 2 * c->d, 0));
        if (nmt_ph_of(c, 1, 1)) NMT_TRY(nmt_ph_cross_kv(fw, sub_w(fw, k), &a, nmt_ph_of(c, 1, 1), memory, p));
    }
    return NMT_OK;
}

nmt_status nmt_tf_decoder(const nmt_tf_fwd *fw, const nmt_tf_pass *p, nmt_buf out) {
    const uint32_t E = nmt_tf_n_enc_sub(fw->c), K = nmt_tf_n_sub(fw->c);
    for (uint32_t k = E; k < K; k++) NMT_TRY(sublayer(fw, k, p));
    return final_norm(fw, K - 1, &fw->w->dec_ln, p->n * p->len, out);
}

nmt_status nmt_tf_logits(const nmt_tf_fwd *fw, nmt_buf y, uint32_t rows, nmt_buf logits) {
    const nmt_tf_cfg *c = fw->c;
    return nmt_layer_matmul(fw->ops, rows, c->tgt_vocab, c->d, y, c->d, &fw->w->out, 0.0f, logits, c->tgt_vocab,
                            c->out_bias ? fw->w->out_b.w : NMT_NO_BUF, 0);
}
