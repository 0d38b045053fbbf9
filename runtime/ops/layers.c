/* SPDX-License-Identifier: MIT */
/* layers.c — shared layers over the op layer (layers.h). */
#include "layers.h"

#include "ops_phrase.h"
#include "ops_rec.h"

nmt_status nmt_layer_matmul(nmt_ops *ops, uint32_t rows, uint32_t N, uint32_t K, nmt_buf in, uint32_t ld_in,
                            const nmt_lin *w, float beta, nmt_buf out, uint32_t ld_out, nmt_buf bias, int relu) {
    if (w->f16) return nmt_op_gemm_f16(ops, rows, N, K, 1.0f, in, ld_in, w->w, K, beta, out, ld_out, bias, relu);
    if (w->q8)
        return nmt_op_gemm_q8(ops, rows, N, K, 1.0f, in, ld_in, w->w, K, w->s, beta, out, ld_out, bias, relu);
    return nmt_op_gemm(ops, 1, rows, N, K, 1.0f, in, ld_in, w->w, K, beta, out, ld_out, bias, relu);
}

nmt_status nmt_layer_linear_norm(nmt_ops *ops, nmt_buf in, uint32_t ld_in, uint32_t rows, const nmt_lin *w,
                                 uint32_t out_dim, uint32_t in_dim, nmt_buf res, const nmt_lin *ln, float eps,
                                 nmt_buf t, nmt_buf out) {
    if (!w->f16) {
        nmt_status s;
        if (w->q8) {
            s = nmt_op_gemm_i8_nt_ln(ops, rows, out_dim, in_dim, in, ld_in, w->w, in_dim, w->s, w->b, res, out_dim,
                                     ln->w, ln->b, eps, out, out_dim);
            if (s == NMT_ERR_UNSUPPORTED)
                s = nmt_op_gemm_q8_nt_ln(ops, rows, out_dim, in_dim, in, ld_in, w->w, in_dim, w->s, w->b, res,
                                         out_dim, ln->w, ln->b, eps, out, out_dim);
        } else {
            s = nmt_op_gemm_nt_ln(ops, rows, out_dim, in_dim, in, ld_in, w->w, in_dim, w->b, res, out_dim, ln->w,
                                  ln->b, eps, out, out_dim);
        }
        if (s != NMT_ERR_UNSUPPORTED) return s;
    }
    NMT_TRY(nmt_layer_linear(ops, in, ld_in, rows, w, out_dim, in_dim, t, out_dim, 0));
    return nmt_layer_norm(ops, t, res, out, rows, out_dim, ln, eps);
}

nmt_status nmt_layer_gate(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t rows, const nmt_lin *g1, const nmt_lin *g2,
                          uint32_t d, uint32_t dr, nmt_buf gh, nmt_buf g, nmt_buf out, uint32_t ld_out, int accumulate,
                          int fuse) {
    if (fuse && g1->q8 && g2->q8) {
        nmt_status s = nmt_op_gate_i8(ops, rows, d, dr, x, ld_x, g1->w, g1->s, g1->b, g2->w, g2->s, g2->b, out,
                                      ld_out, accumulate);
        if (s == NMT_ERR_UNSUPPORTED)
            s = nmt_op_gate_q8(ops, rows, d, dr, x, ld_x, g1->w, g1->s, g1->b, g2->w, g2->s, g2->b, out, ld_out,
                               accumulate);
        if (s != NMT_ERR_UNSUPPORTED) return s;
    }
    NMT_TRY(nmt_layer_linear(ops, x, ld_x, rows, g1, dr, d, gh, dr, 1));
    NMT_TRY(nmt_layer_linear(ops, gh, dr, rows, g2, d, dr, g, d, 0));
    return nmt_op_gate_accum(ops, x, ld_x, g, d, out, ld_out, rows, d, accumulate);
}

nmt_status nmt_layer_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                           const nmt_lin *E, uint32_t d, float scale, nmt_buf out) {
    if (E->f16) return nmt_op_embed_f16(ops, tok, rows, seq_len, pos0, E->w, d, scale, out);
    if (E->q8) return nmt_op_embed_q8(ops, tok, rows, seq_len, pos0, E->w, E->s, d, scale, out);
    return nmt_op_embed(ops, tok, rows, seq_len, pos0, E->w, d, scale, out);
}

nmt_status nmt_layer_lstm(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_seq, uint32_t t_cap, uint32_t in_dim,
                          uint32_t h, uint32_t chunk, const nmt_lin *w_ih, const nmt_lin *w_hh, nmt_buf count,
                          nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out) {
    if (n_seq == 0 || t_cap == 0) return NMT_OK;
    if (chunk && h % chunk) return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t G = nmt_lstm_gates(h, chunk);
    const uint64_t rows = (uint64_t)n_seq * t_cap;
    if ((uint64_t)t_cap * ld_out > UINT32_MAX || (uint64_t)t_cap * G > UINT32_MAX || rows > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_layer_linear(ops, x, ld_x, (uint32_t)rows, w_ih, G, in_dim, z, G, 0));
    for (uint32_t t = 0; t < t_cap; t++) {
        /* z[:, t] += h_{t-1} W_hh^T: the rows of one step are t_cap rows apart */
        if (t > 0)
            NMT_TRY(nmt_layer_matmul(ops, n_seq, G, h, nmt_buf_at(out, (size_t)(t - 1) * ld_out), t_cap * ld_out,
                                     w_hh, 1.0f, nmt_buf_at(z, (size_t)t * G), t_cap * G, NMT_NO_BUF, 0));
        NMT_TRY(nmt_op_lstm_cell(ops, z, c, out, ld_out, count, n_seq, t_cap, t, h, chunk));
    }
    return NMT_OK;
}

nmt_status nmt_layer_gru(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_seq, uint32_t t_cap, uint32_t in_dim,
                         uint32_t h, int reverse, const nmt_lin *w_ih, const nmt_lin *w_hh, nmt_buf count, nmt_buf h0,
                         uint32_t ld_h0, nmt_buf z, nmt_buf hg, nmt_buf state, nmt_buf out, uint32_t ld_out) {
    if (n_seq == 0 || t_cap == 0) return NMT_OK;
    const uint64_t rows = (uint64_t)n_seq * t_cap;
    if (rows > UINT32_MAX || (uint64_t)h * 5 > UINT32_MAX || hg.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t G = 3 * h, W = nmt_gru_width(h);
    /* z[:, 0 .. 3h) = x W_ih^T + b_ih for every step at once */
    NMT_TRY(nmt_layer_linear(ops, x, ld_x, (uint32_t)rows, w_ih, G, in_dim, z, W, 0));
    for (uint32_t t = 0; t < t_cap; t++) {
        const nmt_buf prev = t ? state : h0;
        const uint32_t ld_prev = t ? h : ld_h0;
        nmt_buf g = w_hh->b; /* h_{-1} = 0: the recurrent pre-activations are the bias */
        uint32_t ld_g = 0;
        if (prev.mem) {
            NMT_TRY(nmt_layer_matmul(ops, n_seq, G, h, prev, ld_prev, w_hh, 0.0f, hg, G, w_hh->b, 0));
            g = hg;
            ld_g = G;
        }
        NMT_TRY(nmt_op_gru_cell(ops, z, W, g, ld_g, prev, ld_prev, state, h, out, ld_out, count, n_seq, t_cap, t,
                                reverse, h));
    }
    return NMT_OK;
}

nmt_status nmt_layer_conv1d(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf len, uint32_t n_seq,
                            uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t in_dim,
                            const nmt_lin *w, uint32_t out_dim, nmt_buf cols, nmt_buf out, uint32_t ld_out) {
    if (n_seq == 0 || t_out == 0) return NMT_OK;
    const uint64_t k = (uint64_t)n * in_dim, rows = (uint64_t)n_seq * t_out;
    if (k > UINT32_MAX || rows > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_op_window_rows(ops, x, ld_x, n_cap, len, n_seq, t_out, n, stride, pad, in_dim, cols, (uint32_t)k));
    return nmt_layer_linear(ops, cols, (uint32_t)k, (uint32_t)rows, w, out_dim, (uint32_t)k, out, ld_out, 0);
}
