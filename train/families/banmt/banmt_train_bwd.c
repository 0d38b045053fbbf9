/* SPDX-License-Identifier: MIT */
/* banmt_train_bwd.c — the BA-NMT trainer's backward pass
 * (banmt_train_internal.h bat_backward): the output layer over every
 * step, then backpropagation through time over the decoder steps (last
 * first: readout, the history updates, the history sums, GRU2, the
 * additive attention with its history terms, W_q, GRU1), carrying the
 * gradients of s_i and of the history states h~^i, s~^i from step to
 * step; then s_0 (tanh, W_init, the masked mean), U_a and the SA
 * projection onto h_j, the bi-GRU encoder and both embeddings.  Every op
 * is the backward of the forward call it follows (ops_train.h). */
#include "banmt_train_internal.h"

static const nmt_buf NONE = {NULL, 0};

/* y = x W^T (+ b): dx (beta dxb), dW and db accumulated (db NONE: none). */
static nmt_status lin_bwd(bat_model *m, uint32_t rows, uint32_t out, uint32_t in, nmt_buf x, uint32_t ld_x,
                          const nmt_lin *w, nmt_buf dy, uint32_t ld_dy, nmt_buf dx, uint32_t ld_dx, float dxb,
                          int bias) {
    return nmt_op_linear_bwd(&m->ops, &m->t, rows, out, in, x, ld_x, w->w, dy, ld_dy, dx, ld_dx, dxb,
                             bat_grad(m, w->w), bias ? bat_grad(m, w->b) : NONE, 1.0f);
}

/* Backward of one GRU cell step over `rows` rows (t_cap 1; count: the
 * mask or NONE) and of its recurrent product: dstate holds the gradient
 * of the new state and ends as that of h_prev (direct part plus dg
 * W_hh; h_prev NONE: its product was the bias alone).  dz (ld 4h) keeps
 * the gradient of the input pre-activations. */
static nmt_status cell_bwd(bat_model *m, const nmt_ba_gru *g, nmt_buf z, uint32_t rows, uint32_t h, nmt_buf count,
                           nmt_buf hp, uint32_t ld_hp, nmt_buf dstate) {
    NMT_TRY(nmt_op_gru_cell_bwd(&m->t, z, 5 * h, NONE, 0, dstate, m->dz, 4 * h, m->dg, count, rows, 1, 0, 0, h));
    if (hp.mem == NULL) return nmt_op_col_sum(&m->t, rows, 3 * h, 1.0f, m->dg, 3 * h, 1.0f, bat_grad(m, g->hh.b));
    return lin_bwd(m, rows, 3 * h, h, hp, ld_hp, &g->hh, m->dg, 3 * h, dstate, h, 1.0f, 1);
}

/* Embedding backward: dE[tok[r]] += dy[r] over `rows` rows (d wide). */
static nmt_status embed_grad(bat_model *m, const int32_t *tok, uint32_t rows, uint32_t vocab, nmt_buf dy,
                             nmt_buf dE) {
    uint32_t n_seg = 0;
    NMT_TRY(nmt_embed_bwd_plan(tok, rows, vocab, -1, m->h_count, m->h_perm, m->h_seg, m->h_segtok, &n_seg));
    if (n_seg == 0) return NMT_OK;
    NMT_TRY(nmt_device_write(m->dev, m->perm.mem, 0, rows * sizeof(int32_t), m->h_perm));
    NMT_TRY(nmt_device_write(m->dev, m->seg.mem, 0, (n_seg + 1) * sizeof(int32_t), m->h_seg));
    NMT_TRY(nmt_device_write(m->dev, m->segtok.mem, 0, n_seg * sizeof(int32_t), m->h_segtok));
    return nmt_op_embed_bwd(&m->t, dy, m->c.emb, m->perm, m->seg, m->segtok, n_seg, 1.0f, dE);
}

/* Backward of decoder step t.  In: m->dt's slice (the readout's gradient,
 * dropout undone), *ds_cur (the gradient of s_t from later steps), dhs /
 * dts (of h~^t, s~^t).  Out: *ds_prev (of s_{t-1}, or s_0), dhs / dts (of
 * h~^{t-1}, s~^{t-1}), the y_{t-1} rows of m->dy. */
static nmt_status step_bwd(bat_model *m, uint32_t t, nmt_buf ds_cur, nmt_buf ds_prev) {
    const nmt_ba_cfg *c = &m->c;
    const nmt_ba_weights *w = &m->w;
    const uint32_t n = m->n, L = m->S, E = c->emb, H = c->hidden, A = c->att, Hh = c->hist, W = c->cat;
    const uint32_t Rr = nmt_ba_r_rows(c), pos = n * L;
    nmt_ba_acts a;
    bat_step_acts(m, t, &a);
    const nmt_ba_pass ps = bat_pass(m, t);
    /* readout t = act(W_r cat + b_r) */
    NMT_TRY(nmt_op_act_rows_bwd(&m->t, a.u, Rr, nmt_buf_at(m->dt, (size_t)t * n * c->readout), c->readout, n,
                                c->readout, c->maxout ? NMT_ACT_BWD_MAXOUT : NMT_ACT_BWD_TANH_IN, m->du, Rr));
    NMT_TRY(lin_bwd(m, n, Rr, W, a.cat, W, &w->readout, m->du, Rr, m->dcat, W, 0.0f, 1));
    /* s_t: the readout's part joins the later steps' */
    NMT_TRY(nmt_op_copy_rows(&m->ops, nmt_buf_at(m->dcat, nmt_ba_col_s(c)), W, m->dtmp, H, n, H));
    NMT_TRY(nmt_op_axpy(&m->t, ds_cur, m->dtmp, n * H, 1.0f));
    NMT_TRY(nmt_op_fill(&m->t, ds_prev, n * H, 0.0f));
    /* history updates (their gradients of alpha first: written, then added) */
    if (c->sa) {
        NMT_TRY(cell_bwd(m, &w->hist_s, a.zs, pos, Hh, m->mask, t ? a.hs_prev : NONE, Hh, m->dhs));
        NMT_TRY(nmt_op_gru_scaled_input_bwd(&m->t, ps.ps, 3 * Hh, a.alpha, L, m->dz, 4 * Hh, n, L, 1, 3 * Hh, m->dps,
                                            3 * Hh, m->dalpha, L, 0.0f, bat_grad(m, w->hist_s.ih.b)));
    }
    if (c->ta) {
        NMT_TRY(cell_bwd(m, &w->hist_t, a.zt, pos, Hh, m->mask, t ? a.ts_prev : NONE, Hh, m->dts));
        NMT_TRY(nmt_op_fill(&m->t, m->dpt, n * 3 * Hh, 0.0f));
        NMT_TRY(nmt_op_gru_scaled_input_bwd(&m->t, a.pt, 3 * Hh, a.alpha, 1, m->dz, 4 * Hh, pos, 1, L, 3 * Hh, m->dpt,
                                            3 * Hh, m->dalpha, 1, c->sa ? 1.0f : 0.0f, bat_grad(m, w->hist_t.ih.b)));
        NMT_TRY(lin_bwd(m, n, 3 * Hh, H, a.s_prev, a.s_prev_ld, &w->hist_t.ih, m->dpt, 3 * Hh, ds_prev, H, 1.0f, 0));
    }
    /* history sums sum_j alpha_j h~_j^{t-1} (0 at t = 0) */
    if (t > 0 && c->sa)
        NMT_TRY(nmt_op_weighted_rows_bwd(&m->t, a.hs_prev, Hh, a.alpha, L, nmt_buf_at(m->dcat, nmt_ba_col_hs(c)), W,
                                         n, L, Hh, m->dhs, Hh, m->dalpha, L));
    if (t > 0 && c->ta)
        NMT_TRY(nmt_op_weighted_rows_bwd(&m->t, a.ts_prev, Hh, a.alpha, L, nmt_buf_at(m->dcat, nmt_ba_col_ts(c)), W,
                                         n, L, Hh, m->dts, Hh, m->dalpha, L));
    /* s_t = GRU2(c_t, s~_t): ds_cur becomes the gradient of s~_t */
    NMT_TRY(cell_bwd(m, &w->gru2, a.z2, n, H, NONE, a.st, H, ds_cur));
    NMT_TRY(lin_bwd(m, n, 3 * H, 2 * H, nmt_buf_at(a.cat, nmt_ba_col_c(c)), W, &w->gru2.ih, m->dz, 4 * H,
                    nmt_buf_at(m->dcat, nmt_ba_col_c(c)), W, 1.0f, 1));
    /* attention: c_t and alpha's gradients into q, U h_j, the history terms, v, h_j */
    const int e1 = t > 0 && c->sa, e2 = t > 0 && c->ta;
    if (e1) NMT_TRY(nmt_op_fill(&m->t, m->de1, pos * A, 0.0f));
    if (e2) NMT_TRY(nmt_op_fill(&m->t, m->de2, pos * A, 0.0f));
    nmt_additive_bwd_args ab = {.dc = nmt_buf_at(m->dcat, nmt_ba_col_c(c)), .dc_ld = W,
                                .dalpha = (c->sa || c->ta) ? m->dalpha : NONE, .dq = m->dq, .dq_ld = A,
                                .dk = m->dk, .dk_ld = A, .de1 = e1 ? m->de1 : NONE, .de1_ld = A,
                                .de2 = e2 ? m->de2 : NONE, .de2_ld = A, .dv = bat_grad(m, w->att_v.w),
                                .dh = m->dh, .dh_ld = 2 * H, .scratch = m->ascr};
    nmt_ba_attn_args(&m->fw, &a, &ps, &ab.fwd);
    NMT_TRY(nmt_op_additive_bwd(&m->t, &ab));
    if (e1) NMT_TRY(lin_bwd(m, pos, A, Hh, a.hs_prev, Hh, &w->att_hs, m->de1, A, m->dhs, Hh, 1.0f, 0));
    if (e2) NMT_TRY(lin_bwd(m, pos, A, Hh, a.ts_prev, Hh, &w->att_ts, m->de2, A, m->dts, Hh, 1.0f, 0));
    NMT_TRY(lin_bwd(m, n, A, H, a.st, H, &w->att_q, m->dq, A, ds_cur, H, 1.0f, 1));
    /* s~_t = GRU1(y_{t-1}, s_{t-1}) */
    NMT_TRY(nmt_op_gru_cell_bwd(&m->t, a.z1, 5 * H, NONE, 0, ds_cur, m->dz, 4 * H, m->dg, NONE, n, 1, 0, 0, H));
    NMT_TRY(nmt_op_axpy(&m->t, ds_prev, ds_cur, n * H, 1.0f));
    NMT_TRY(lin_bwd(m, n, 3 * H, H, a.s_prev, a.s_prev_ld, &w->gru1.hh, m->dg, 3 * H, ds_prev, H, 1.0f, 1));
    NMT_TRY(lin_bwd(m, n, 3 * H, E, a.cat, W, &w->gru1.ih, m->dz, 4 * H, m->dcat, W, 1.0f, 1));
    return nmt_op_copy_rows(&m->ops, m->dcat, W, nmt_buf_at(m->dy, (size_t)t * n * E), E, n, E);
}

nmt_status bat_backward(bat_model *m, float p, uint64_t seed) {
    const nmt_ba_cfg *c = &m->c;
    const nmt_ba_weights *w = &m->w;
    const uint32_t n = m->n, L = m->S, T = m->T, E = c->emb, H = c->hidden, A = c->att, Hh = c->hist;
    const uint32_t Ro = c->readout, rt = n * T, pos = n * L;
    /* output layer over every step's readout */
    NMT_TRY(lin_bwd(m, rt, c->tgt_vocab, Ro, m->tt, Ro, &w->out, m->logits, c->tgt_vocab, m->dt, Ro, 0.0f, 1));
    if (p > 0.0f)
        for (uint32_t t = 0; t < T; t++)
            NMT_TRY(nmt_op_dropout(&m->t, nmt_buf_at(m->dt, (size_t)t * n * Ro),
                                   nmt_buf_at(m->dt, (size_t)t * n * Ro), n * Ro, p, seed, (1 + (uint64_t)t) << 32));
    nmt_buf ds_cur = m->ds_a, ds_prev = m->ds_b;
    NMT_TRY(nmt_op_fill(&m->t, ds_cur, n * H, 0.0f));
    if (c->sa) {
        NMT_TRY(nmt_op_fill(&m->t, m->dhs, pos * Hh, 0.0f));
        NMT_TRY(nmt_op_fill(&m->t, m->dps, pos * 3 * Hh, 0.0f));
    }
    if (c->ta) NMT_TRY(nmt_op_fill(&m->t, m->dts, pos * Hh, 0.0f));
    NMT_TRY(nmt_op_fill(&m->t, m->dk, pos * A, 0.0f));
    NMT_TRY(nmt_op_fill(&m->t, m->dh, pos * 2 * H, 0.0f));
    for (uint32_t t = T; t-- > 0;) {
        NMT_TRY(step_bwd(m, t, ds_cur, ds_prev));
        const nmt_buf x = ds_cur;
        ds_cur = ds_prev;
        ds_prev = x;
    }
    /* s_0 = tanh(W_init mean + b) (ds_cur: its gradient) */
    NMT_TRY(nmt_op_act_rows_bwd(&m->t, m->enc.s0, H, ds_cur, H, n, H, NMT_ACT_BWD_TANH_OUT, m->dtmp, H));
    NMT_TRY(lin_bwd(m, n, H, 2 * H, m->enc.mean, 2 * H, &w->init, m->dtmp, H, ds_prev, 2 * H, 0.0f, 1));
    /* the mean over j < len: the forward's additive attention with v = 0 */
    nmt_additive_bwd_args mb = {.fwd = {.n_rows = n, .s_cap = L, .a_dim = 1, .d_h = 2 * H, .group = 1,
                                        .q = m->enc.h, .q_ld = 2 * H, .k = m->enc.h, .k_ld = 2 * H,
                                        .v = m->enc.zero, .h = m->enc.h, .h_ld = 2 * H, .len = m->klen,
                                        .alpha = m->enc.mean_a, .out = m->enc.mean, .out_ld = 2 * H},
                                .dc = ds_prev, .dc_ld = 2 * H, .dalpha = NONE, .dq = m->mq, .dq_ld = 1,
                                .dk = m->mk, .dk_ld = 1, .dv = m->mv, .dh = m->dh, .dh_ld = 2 * H,
                                .scratch = m->mscr};
    NMT_TRY(nmt_op_additive_bwd(&m->t, &mb));
    /* h_j's other uses: U_a h_j, the SA projection h_j W_ih^S */
    NMT_TRY(lin_bwd(m, pos, A, 2 * H, m->enc.h, 2 * H, &w->att_k, m->dk, A, m->dh, 2 * H, 1.0f, 0));
    if (c->sa)
        NMT_TRY(lin_bwd(m, pos, 3 * Hh, 2 * H, m->enc.h, 2 * H, &w->hist_s.ih, m->dps, 3 * Hh, m->dh, 2 * H, 1.0f, 0));
    /* the bi-GRU encoder */
    NMT_TRY(nmt_layer_gru_bwd(&m->ops, &m->t, m->enc.x, E, n, L, E, H, 0, w->enc_fw.ih.w, w->enc_fw.hh.w, m->klen,
                              m->enc.zf, m->dh, 2 * H, m->dze, m->dge, m->dhe, m->dx, E, 0.0f,
                              bat_grad(m, w->enc_fw.ih.w), bat_grad(m, w->enc_fw.ih.b), bat_grad(m, w->enc_fw.hh.w),
                              bat_grad(m, w->enc_fw.hh.b)));
    NMT_TRY(nmt_layer_gru_bwd(&m->ops, &m->t, m->enc.x, E, n, L, E, H, 1, w->enc_rev.ih.w, w->enc_rev.hh.w, m->klen,
                              m->enc.zb, nmt_buf_at(m->dh, H), 2 * H, m->dze, m->dge, m->dhe, m->dx, E, 1.0f,
                              bat_grad(m, w->enc_rev.ih.w), bat_grad(m, w->enc_rev.ih.b),
                              bat_grad(m, w->enc_rev.hh.w), bat_grad(m, w->enc_rev.hh.b)));
    /* embeddings */
    NMT_TRY(embed_grad(m, m->h_src, pos, c->src_vocab, m->dx, bat_grad(m, w->src_emb.w)));
    return embed_grad(m, m->h_tin, rt, c->tgt_vocab, m->dy, bat_grad(m, w->tgt_emb.w));
}
