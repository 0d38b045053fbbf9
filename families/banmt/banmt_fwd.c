/* SPDX-License-Identifier: MIT */
/* banmt_fwd.c — the BA-NMT forward (banmt_fwd.h): the bidirectional GRU
 * encoder, the initial decoder state, one conditional-GRU decoder step with
 * additive attention over the source and its histories, the readout, the
 * history updates and the output projection.  Used by decoding, scoring
 * and training alike. */
#include "banmt_fwd.h"

static nmt_status linear(const nmt_ba_fwd *fw, nmt_buf in, uint32_t ld_in, uint32_t rows, const nmt_lin *w,
                         uint32_t out_dim, uint32_t in_dim, nmt_buf out, uint32_t ld_out) {
    return nmt_layer_linear(fw->ops, in, ld_in, rows, w, out_dim, in_dim, out, ld_out, 0);
}

nmt_status nmt_ba_embed(const nmt_ba_fwd *fw, const nmt_lin *E, nmt_buf tok, uint32_t rows, nmt_buf out,
                        uint32_t ld) {
    const uint32_t d = fw->c->emb;
    if (E->q8) return nmt_op_lookup_q8(fw->ops, tok, rows, E->w, E->s, d, out, ld);
    return nmt_op_gather_rows(fw->ops, E->w, d, out, ld, tok, rows, d);
}

/* ------------------------------------------------------------------------ */
/* Encoder                                                                  */
/* ------------------------------------------------------------------------ */

nmt_status nmt_ba_encoder(const nmt_ba_fwd *fw, const nmt_ba_enc_acts *a, nmt_buf src_tok, nmt_buf len, uint32_t n,
                          uint32_t L) {
    const nmt_ba_cfg *c = fw->c;
    const nmt_ba_weights *w = fw->w;
    const uint32_t E = c->emb, H = c->hidden, A = c->att, rows = n * L;
    NMT_TRY(nmt_ba_embed(fw, &w->src_emb, src_tok, rows, a->x, E));
    /* h_j = [->h_j ; <-h_j]: two GRUs writing two column blocks; padding
     * positions are skipped (zero rows, states kept) */
    NMT_TRY(nmt_layer_gru(fw->ops, a->x, E, n, L, E, H, 0, &w->enc_fw.ih, &w->enc_fw.hh, len, NMT_NO_BUF, 0, a->zf,
                          a->hg, a->state, a->h, 2 * H));
    NMT_TRY(nmt_layer_gru(fw->ops, a->x, E, n, L, E, H, 1, &w->enc_rev.ih, &w->enc_rev.hh, len, NMT_NO_BUF, 0, a->zb,
                          a->hg, a->state, nmt_buf_at(a->h, H), 2 * H));
    NMT_TRY(linear(fw, a->h, 2 * H, rows, &w->att_k, A, 2 * H, a->k, A)); /* no bias */
    if (c->sa)
        NMT_TRY(nmt_layer_matmul(fw->ops, rows, 3 * c->hist, 2 * H, a->h, 2 * H, &w->hist_s.ih, 0.0f, a->ps,
                                 3 * c->hist, NMT_NO_BUF, 0));
    /* mean over j < len as additive attention with v = 0: e = 0, so alpha
     * = 1 / len on the sentence (q and K any finite rows: h's) */
    const nmt_additive_args m = {.n_rows = n, .s_cap = L, .a_dim = 1, .d_h = 2 * H, .group = 1,
                                 .q = a->h, .q_ld = 2 * H, .k = a->h, .k_ld = 2 * H, .v = a->zero,
                                 .h = a->h, .h_ld = 2 * H, .len = len, .alpha = a->mean_a,
                                 .out = a->mean, .out_ld = 2 * H};
    NMT_TRY(nmt_op_additive_attn(fw->ops, &m));
    NMT_TRY(linear(fw, a->mean, 2 * H, n, &w->init, H, 2 * H, a->s0, H));
    return nmt_op_act_rows(fw->ops, a->s0, H, n, H, 0, a->s0, H);
}

/* ------------------------------------------------------------------------ */
/* Decoder step                                                             */
/* ------------------------------------------------------------------------ */

void nmt_ba_attn_args(const nmt_ba_fwd *fw, const nmt_ba_acts *a, const nmt_ba_pass *p, nmt_additive_args *o) {
    const nmt_ba_cfg *c = fw->c;
    const uint32_t A = c->att;
    *o = (nmt_additive_args){.n_rows = p->rows, .s_cap = p->src_len, .a_dim = A, .d_h = 2 * c->hidden,
                             .group = p->group, .q = a->q, .q_ld = A, .k = p->k, .k_ld = A, .v = fw->w->att_v.w,
                             .h = p->h, .h_ld = 2 * c->hidden, .len = p->key_len, .alpha = a->alpha,
                             .out = nmt_buf_at(a->cat, nmt_ba_col_c(c)), .out_ld = c->cat};
    if (p->t > 0 && c->sa) {
        o->e1 = a->e1;
        o->e1_ld = A;
    }
    if (p->t > 0 && c->ta) {
        o->e2 = a->e2;
        o->e2_ld = A;
    }
}

/* One GRU step over `rows` rows: z[:, 0..3h) = x W_ih^T + b_ih, the
 * recurrent product of h_prev (absent: its bias alone), the cell into hs. */
static nmt_status gru_step(const nmt_ba_fwd *fw, const nmt_ba_gru *g, nmt_buf x, uint32_t ld_x, uint32_t in,
                           uint32_t rows, uint32_t h, nmt_buf z, nmt_buf hg, nmt_buf hp, uint32_t ld_hp, nmt_buf hs,
                           uint32_t ld_hs, nmt_buf mask) {
    NMT_TRY(linear(fw, x, ld_x, rows, &g->ih, 3 * h, in, z, 5 * h));
    nmt_buf rg = g->hh.b;
    uint32_t ld_rg = 0;
    if (hp.mem) {
        NMT_TRY(nmt_layer_matmul(fw->ops, rows, 3 * h, h, hp, ld_hp, &g->hh, 0.0f, hg, 3 * h, g->hh.b, 0));
        rg = hg;
        ld_rg = 3 * h;
    }
    return nmt_op_gru_cell(fw->ops, z, 5 * h, rg, ld_rg, hp, ld_hp, hs, ld_hs, NMT_NO_BUF, 0, mask, rows, 1, 0, 0, h);
}

/* The recurrence of a history GRU over rows * L position rows whose input
 * pre-activations are already in z: h~^i = GRU(., h~^{i-1}) (t = 0:
 * h~^{i-1} = 0), positions past a sentence kept by the mask. */
static nmt_status hist_cell(const nmt_ba_fwd *fw, const nmt_ba_gru *g, const nmt_ba_pass *p, nmt_buf z, nmt_buf hg,
                            nmt_buf prev, nmt_buf next) {
    const uint32_t h = fw->c->hist, n = p->rows * p->src_len;
    nmt_buf rg = g->hh.b, hp = NMT_NO_BUF;
    uint32_t ld_rg = 0;
    if (p->t > 0) {
        NMT_TRY(nmt_layer_matmul(fw->ops, n, 3 * h, h, prev, h, &g->hh, 0.0f, hg, 3 * h, g->hh.b, 0));
        rg = hg;
        ld_rg = 3 * h;
        hp = prev;
    }
    return nmt_op_gru_cell(fw->ops, z, 5 * h, rg, ld_rg, hp, h, next, h, NMT_NO_BUF, 0, p->mask, n, 1, 0, 0, h);
}

nmt_status nmt_ba_step(const nmt_ba_fwd *fw, const nmt_ba_pass *p) {
    const nmt_ba_cfg *c = fw->c;
    const nmt_ba_weights *w = fw->w;
    const uint32_t E = c->emb, H = c->hidden, A = c->att, Hh = c->hist, L = p->src_len, rows = p->rows;
    const uint32_t W = c->cat, Rr = nmt_ba_r_rows(c), pos = rows * L;
    nmt_ba_acts a;
    fw->acts(fw->user, p->t, &a);
    const nmt_buf s_i = nmt_buf_at(a.cat, nmt_ba_col_s(c));
    /* s~_i = GRU1(y_{i-1}, s_{i-1}) */
    NMT_TRY(gru_step(fw, &w->gru1, a.cat, W, E, rows, H, a.z1, a.hg1, a.s_prev, a.s_prev_ld, a.st, H, NMT_NO_BUF));
    /* attention: e_j = v . tanh(W_q s~_i + b_q + U h_j (+ V_h h~_j) (+ V_s s~_j)) */
    NMT_TRY(linear(fw, a.st, H, rows, &w->att_q, A, H, a.q, A));
    if (p->t > 0 && c->sa) NMT_TRY(linear(fw, a.hs_prev, Hh, pos, &w->att_hs, A, Hh, a.e1, A));
    if (p->t > 0 && c->ta) NMT_TRY(linear(fw, a.ts_prev, Hh, pos, &w->att_ts, A, Hh, a.e2, A));
    nmt_additive_args o;
    nmt_ba_attn_args(fw, &a, p, &o);
    NMT_TRY(nmt_op_additive_attn(fw->ops, &o));
    /* s_i = GRU2(c_i, s~_i), into its block of the readout's input */
    NMT_TRY(gru_step(fw, &w->gru2, nmt_buf_at(a.cat, nmt_ba_col_c(c)), W, 2 * H, rows, H, a.z2, a.hg2, a.st, H, s_i,
                     W, NMT_NO_BUF));
    /* the history sums sum_j alpha_j h~_j^{i-1}, sum_j alpha_j s~_j^{i-1} (0 at t = 0) */
    if (c->sa)
        NMT_TRY(nmt_op_weighted_rows(fw->ops, p->t ? a.hs_prev : NMT_NO_BUF, Hh, a.alpha, L, rows, L, Hh,
                                     nmt_buf_at(a.cat, nmt_ba_col_hs(c)), W));
    if (c->ta)
        NMT_TRY(nmt_op_weighted_rows(fw->ops, p->t ? a.ts_prev : NMT_NO_BUF, Hh, a.alpha, L, rows, L, Hh,
                                     nmt_buf_at(a.cat, nmt_ba_col_ts(c)), W));
    /* readout t_i = tanh(W_r [y; c; s_i; hsum; tsum] + b_r), or maxout */
    NMT_TRY(linear(fw, a.cat, W, rows, &w->readout, Rr, W, a.u, Rr));
    NMT_TRY(nmt_op_act_rows(fw->ops, a.u, Rr, rows, c->readout, c->maxout, a.t, a.t_ld));
    if (fw->drop) NMT_TRY(fw->drop(fw->user, a.t, rows * c->readout, 1 + (uint64_t)p->t));
    /* history updates: h~_j^i = GRU_S(alpha_j h_j, h~_j^{i-1}), s~_j^i =
     * GRU_T(alpha_j s_{i-1}, s~_j^{i-1}) over every row and position */
    if (c->sa) {
        NMT_TRY(nmt_op_gru_scaled_input(fw->ops, p->ps, 3 * Hh, a.alpha, L, w->hist_s.ih.b, rows, L, p->group, 3 * Hh,
                                        a.zs, 5 * Hh));
        NMT_TRY(hist_cell(fw, &w->hist_s, p, a.zs, a.hgs, a.hs_prev, a.hs_next));
    }
    if (c->ta) {
        NMT_TRY(nmt_layer_matmul(fw->ops, rows, 3 * Hh, H, a.s_prev, a.s_prev_ld, &w->hist_t.ih, 0.0f, a.pt, 3 * Hh,
                                 NMT_NO_BUF, 0));
        /* row b * L + j: alpha[b, j] (flat, ld 1) times P_T row b (group L) */
        NMT_TRY(nmt_op_gru_scaled_input(fw->ops, a.pt, 3 * Hh, a.alpha, 1, w->hist_t.ih.b, pos, 1, L, 3 * Hh, a.zt,
                                        5 * Hh));
        NMT_TRY(hist_cell(fw, &w->hist_t, p, a.zt, a.hgt, a.ts_prev, a.ts_next));
    }
    if (p->align.mem) NMT_TRY(nmt_op_copy_rows(fw->ops, a.alpha, L, p->align, p->align_ld, rows, L));
    if (a.s_next.mem) NMT_TRY(nmt_op_copy_rows(fw->ops, s_i, W, a.s_next, H, rows, H));
    return NMT_OK;
}

nmt_status nmt_ba_logits(const nmt_ba_fwd *fw, nmt_buf t, uint32_t ld, uint32_t rows, nmt_buf logits) {
    const nmt_ba_cfg *c = fw->c;
    return linear(fw, t, ld, rows, &fw->w->out, c->tgt_vocab, c->readout, logits, c->tgt_vocab);
}
