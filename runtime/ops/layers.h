/* SPDX-License-Identifier: MIT */
/* layers.h — layers built from the op layer (ops.h) that every family uses:
 * a linear map with fp32 or int8 weights, layer norm, token embedding.
 * Families compose these (and the ops) into their forward; the trainer
 * calls the same forward, so a layer is written once.
 *
 * Planned here for the families to come (docs/ADDING-A-FAMILY.md, "shared
 * layers"), each with its backward in train/ beside the others:
 *   - recurrent cells over time: LSTM and ON-LSTM (nmt_layer_lstm) and
 *     GRU (nmt_layer_gru) are here (one gate GEMM for all steps of the
 *     input, one per step for the recurrence, a pointwise cell kernel in
 *     cl/recurrent.cl), MG-SA / BA-NMT;
 *   - 1-D convolution over positions: here (nmt_layer_conv1d: the window
 *     rows of nmt_op_window_rows and one GEMM), for the phrase-based
 *     attentions' ConvKV / QueryK / interleaving (issue 16);
 *   - max-pooling over spans (n-gram windows, syntax spans), MG-SA;
 *   - additive (Bahdanau) attention, BA-NMT.
 * Internal header. */
#ifndef NMT_LAYERS_H
#define NMT_LAYERS_H

#include "ops.h"

/* Weights of a linear map w [out, in], b [out] as device buffers.  q8: w is
 * int8 (offsets in bytes) with per-row fp32 scales in s (same buffer, after
 * the int8 data); f16: w is half (offsets in halves; fp16 compute, the
 * session's fp16 flag); else w is fp32.  b is fp32.  For a layer norm w is
 * the gain (fp32). */
typedef struct nmt_lin {
    nmt_buf w, b, s;
    int q8;
    int f16;
} nmt_lin;

static const nmt_buf NMT_NO_BUF = {NULL, 0};

/* out[rows, N] = in[rows, K] W^T (+ beta out) (+ bias) (ReLU); W [N, K] of
 * w, fp32, int8 with per-row scales, or half (fp16 compute). */
nmt_status nmt_layer_matmul(nmt_ops *ops, uint32_t rows, uint32_t N, uint32_t K, nmt_buf in, uint32_t ld_in,
                            const nmt_lin *w, float beta, nmt_buf out, uint32_t ld_out, nmt_buf bias, int relu);

/* out = in W^T + b (ReLU): nmt_layer_matmul with w's bias and beta 0. */
static inline nmt_status nmt_layer_linear(nmt_ops *ops, nmt_buf in, uint32_t ld_in, uint32_t rows, const nmt_lin *w,
                                          uint32_t out_dim, uint32_t in_dim, nmt_buf out, uint32_t ld_out, int relu) {
    return nmt_layer_matmul(ops, rows, out_dim, in_dim, in, ld_in, w, 0.0f, out, ld_out, w->b, relu);
}

/* Rows [row0, row0 + n) of w [*, in_dim] as a linear map of its own (fp32
 * or int8: the int8 data, its scales and the bias move together). */
static inline nmt_lin nmt_lin_rows(const nmt_lin *w, uint32_t row0, uint32_t in_dim) {
    nmt_lin r = *w;
    r.w.off += (size_t)row0 * in_dim;  /* elements: floats, int8 bytes when q8, halves when f16 */
    if (r.q8) r.s.off += row0;
    if (r.b.mem) r.b.off += row0;
    return r;
}

/* out = LN(x (+ res)) with gain ln->w, bias ln->b; rows of width d. */
static inline nmt_status nmt_layer_norm(nmt_ops *ops, nmt_buf x, nmt_buf res, nmt_buf out, uint32_t rows,
                                        uint32_t d, const nmt_lin *ln, float eps) {
    return nmt_op_layernorm(ops, x, res, out, rows, d, ln->w, ln->b, eps);
}

/* out = LN(in W^T + b + res) (gain ln->w, bias ln->b; rows of width
 * out_dim, stride out_dim): a post-norm sub-layer's last product, its
 * residual and its norm.  One launch where nmt_op_gemm_nt_ln (fp32 w, rows
 * <= 2), nmt_op_gemm_i8_nt_ln (int8 w taking int8 x int8, rows <= 2, CPU
 * devices) or nmt_op_gemm_q8_nt_ln (int8 w otherwise, rows <= 2) runs it; otherwise the product into t, then the norm.  out may
 * be res, not in. */
nmt_status nmt_layer_linear_norm(nmt_ops *ops, nmt_buf in, uint32_t ld_in, uint32_t rows, const nmt_lin *w,
                                 uint32_t out_dim, uint32_t in_dim, nmt_buf res, const nmt_lin *ln, float eps,
                                 nmt_buf t, nmt_buf out);

/* One branch's squeeze gate (HySAN fusion "gate"), rows of width d:
 *   out = (accumulate ? out : 0) + x * sigmoid(ReLU(x W1^T + b1) W2^T + b2)
 * with g1 = W1 [dr, d], g2 = W2 [d, dr].  One launch where fuse and
 * nmt_op_gate_i8 (int8 x int8 products) or nmt_op_gate_q8 (int8 weights x
 * fp32) runs it (int8 weights, a few rows, CPU devices); otherwise
 * the two products into gh (rows x dr) and g (rows x d), then gate_accum:
 * the trainer passes fuse 0, its backward reads gh and g. */
nmt_status nmt_layer_gate(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t rows, const nmt_lin *g1, const nmt_lin *g2,
                          uint32_t d, uint32_t dr, nmt_buf gh, nmt_buf g, nmt_buf out, uint32_t ld_out, int accumulate,
                          int fuse);

/* out[rows, d] = E[tok] * scale + P(pos0 + position in sequence). */
nmt_status nmt_layer_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                           const nmt_lin *E, uint32_t d, float scale, nmt_buf out);

/* 1-D convolution over positions (the phrase-based attentions' Conv_n):
 * out row s * t_out + t (stride ld_out) = W [out_dim, n * in_dim] applied
 * to the n input rows at positions t * stride + i - pad (i < n) of
 * sequence s (x rows s * n_cap + p, stride ld_x; positions outside [0,
 * len[s]) read as zeros), plus W's bias.  cols (float [n_seq * t_out,
 * n * in_dim]) is the caller's scratch (the trainer keeps it for the
 * weight gradient).  nmt_op_window_rows then one GEMM; requires
 * nmt_ops_enable_phrase. */
nmt_status nmt_layer_conv1d(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf len, uint32_t n_seq,
                            uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t in_dim,
                            const nmt_lin *w, uint32_t out_dim, nmt_buf cols, nmt_buf out, uint32_t ld_out);

/* LSTM over n_seq sequences of up to t_cap steps (MG-SA's phrase
 * interaction): step t of sequence b is row b * t_cap + t of x (in_dim
 * wide, stride ld_x) and of out (h wide, stride ld_out); count[b] (int
 * [n_seq]) steps are real, later rows of out are zero.  chunk 0: LSTM;
 * chunk > 0 (dividing h): ON-LSTM (ordered neurons: cumax master forget
 * and input gates over h / chunk chunks, ops.h nmt_op_lstm_cell).  With
 * G = nmt_lstm_gates(h, chunk): w_ih [G, in_dim] with its bias, w_hh
 * [G, h] (its bias unused), gate order i, f, g, o (then the masters),
 * h_{-1} = c_{-1} = 0.  z (float [n_seq * t_cap, G]) and c (float
 * [n_seq * t_cap, h]) are the caller's: afterwards they hold the gate
 * activations and the cells (the trainer's backward reads them).  One
 * product for the inputs of every step, then per step one product (beta 1
 * onto z) and one cell kernel (nmt_op_lstm_cell).  Requires
 * nmt_ops_enable_recurrent. */
nmt_status nmt_layer_lstm(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_seq, uint32_t t_cap, uint32_t in_dim,
                          uint32_t h, uint32_t chunk, const nmt_lin *w_ih, const nmt_lin *w_hh, nmt_buf count,
                          nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out);

/* GRU over n_seq sequences of up to t_cap steps (BA-NMT's encoder and
 * history GRUs), the cuDNN / PyTorch cell of ops.h nmt_op_gru_cell: r
 * multiplies the projected hn, so one recurrent product per step.  Data
 * row b * t_cap + p of x (in_dim wide, stride ld_x) and of out (h wide,
 * stride ld_out) is position p of sequence b; count[b] (int [n_seq])
 * positions are real, later rows of out are zero.  Forward: step t reads
 * position t; reverse: position count[b] - 1 - t (a bidirectional encoder
 * is two calls writing two column blocks of one out).  w_ih [3h, in_dim]
 * with its bias, w_hh [3h, h] with its bias (optional), gate order r, z,
 * n.  h_{-1} = h0 row b (stride ld_h0), or 0 for h0 NMT_NO_BUF.  Caller's
 * buffers: z (float [n_seq * t_cap, 5h], nmt_gru_width) keeps what the
 * backward reads; hg (float [n_seq, 3h]) is scratch; state (float [n_seq,
 * h]) ends as each sequence's last state (h0, or 0, for count 0).  One
 * product for the inputs of every step, then per step one product and one
 * cell kernel.  Requires nmt_ops_enable_recurrent. */
nmt_status nmt_layer_gru(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_seq, uint32_t t_cap, uint32_t in_dim,
                         uint32_t h, int reverse, const nmt_lin *w_ih, const nmt_lin *w_hh, nmt_buf count, nmt_buf h0,
                         uint32_t ld_h0, nmt_buf z, nmt_buf hg, nmt_buf state, nmt_buf out, uint32_t ld_out);

#endif
