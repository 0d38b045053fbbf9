/* SPDX-License-Identifier: MIT */
/* ops_rec.h — recurrent cells and additive attention (cl/recurrent.cl,
 * cl/additive.cl; runtime/ops/ops_rec.c, ops_additive.c): LSTM / ON-LSTM and
 * GRU steps, the RNN helpers and Bahdanau attention of BA-NMT.
 * Part of the op layer's face (ops.h has the buffers, nmt_ops and the
 * products, norms and element-wise ops every family uses). */
#ifndef NMT_OPS_REC_H
#define NMT_OPS_REC_H

#include "ops.h"

/* Width of an LSTM's gate rows: 4h, plus ON-LSTM's 2 * (h / chunk) master
 * gates when chunk > 0. */
static inline uint32_t nmt_lstm_gates(uint32_t h, uint32_t chunk) { return 4 * h + (chunk ? 2 * (h / chunk) : 0); }

/* The gates of LSTM step t (cl/recurrent.cl lstm_cell) over n_seq
 * sequences whose step-t rows are r = b * t_cap + t: z (float [n_seq *
 * t_cap, nmt_lstm_gates(h, chunk)]) holds the pre-activations (order i,
 * f, g, o, then ON-LSTM's master forget and input gates), i, f, g, o
 * replaced by their activations; c (float [n_seq * t_cap, h]) receives the
 * cell c_t = f c_{t-1} + i g (ON-LSTM, chunk > 0: f and i combined with
 * the cumax master gates of unit j's chunk j / chunk; c_{t-1} read from
 * row r - 1; none at t = 0), out (row stride ld_out) the output
 * h_t = o tanh(c_t).  Steps t >= count[b] (int [n_seq]) are written as
 * zeros.  chunk must divide h.  Requires nmt_ops_enable_recurrent. */
nmt_status nmt_op_lstm_cell(nmt_ops *ops, nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out, nmt_buf count,
                            uint32_t n_seq, uint32_t t_cap, uint32_t t, uint32_t h, uint32_t chunk);

/* Width of the rows a GRU step keeps (nmt_op_gru_cell's z): r, z, n, hn,
 * h_prev, h each. */
static inline uint32_t nmt_gru_width(uint32_t h) { return 5 * h; }

/* One GRU step (cl/recurrent.cl gru_cell), the cuDNN / PyTorch form:
 *   r = sigmoid(xr + hr), u = sigmoid(xz + hz), n = tanh(xn + r * hn),
 *   h' = (1 - u) * n + u * h_prev,
 * where xr, xz, xn are x W_ih^T + b_ih and hr, hz, hn are h_prev W_hh^T +
 * b_hh (gate order r, z, n).  r scales the projected hn, so a step needs
 * one recurrent product (dl4mt / Bahdanau's GRU applies r to h_prev before
 * U_n, which puts a second product inside the cell; docs/ARCHITECTURES.md).
 * n_seq state rows b; step t's data row is b * t_cap + t, or for reverse
 * b * t_cap + len - 1 - t, len = min(count[b], t_cap) (count int [n_seq];
 * NMT_NO_BUF: len = t_cap).  A step with t >= len is padding: the state
 * is kept (hs = h_prev) and z and out row b * t_cap + t get zeros.
 *   z   (row stride ld_z >= 5h, nmt_gru_width) data rows: in, columns
 *       0 .. 3h hold x W_ih^T + b_ih; out, r, u, n, hn, h_prev (the
 *       backward's inputs);
 *   hg  row b (stride ld_hg >= 3h, or 0: one row for every b, e.g. the bias
 *       alone when h_prev is zero): h_prev W_hh^T + b_hh; NMT_NO_BUF: zeros;
 *   hp  row b (stride ld_hp): h_prev; NMT_NO_BUF: zeros;
 *   hs  row b (stride ld_hs): receives h' (may be hp: in place);
 *   out data rows (stride ld_out): h' too; NMT_NO_BUF: not written.
 * A layer over time passes its count and t; a decoder step over arbitrary
 * rows passes t_cap 1, t 0 and count NMT_NO_BUF (all rows step) or an
 * int 0/1 mask (rows with 0 keep their state).  Requires
 * nmt_ops_enable_recurrent. */
nmt_status nmt_op_gru_cell(nmt_ops *ops, nmt_buf z, uint32_t ld_z, nmt_buf hg, uint32_t ld_hg, nmt_buf hp,
                           uint32_t ld_hp, nmt_buf hs, uint32_t ld_hs, nmt_buf out, uint32_t ld_out, nmt_buf count,
                           uint32_t n_seq, uint32_t t_cap, uint32_t t, int reverse, uint32_t h);

/* Input pre-activations of GRUs fed a shared projection scaled per row
 * (cl/recurrent.cl gru_scaled_input; BA-NMT's history GRUs, input
 * alpha_bj h_j): out row b * s_cap + j (b < n_rows, j < s_cap, stride
 * ld_out, n columns) = alpha[b * ld_a + j] * p row (b / group) * s_cap + j
 * (stride ld_p: the projection h_j W_ih^T of sentence b / group, shared
 * by its group rows, e.g. beams) + bias (NMT_NO_BUF: none).  Write it
 * into the first 3h columns of nmt_op_gru_cell's z.  group divides
 * n_rows.  Requires nmt_ops_enable_recurrent. */
nmt_status nmt_op_gru_scaled_input(nmt_ops *ops, nmt_buf p, uint32_t ld_p, nmt_buf alpha, uint32_t ld_a, nmt_buf bias,
                                   uint32_t n_rows, uint32_t s_cap, uint32_t group, uint32_t n, nmt_buf out,
                                   uint32_t ld_out);

/* RNN helpers (cl/recurrent.cl; BA-NMT, issue 17).  Requires
 * nmt_ops_enable_recurrent.
 * nmt_op_act_rows: out row r (stride ld_out), c < n = tanh(x[r, c])
 * (maxout 0; out may be x: in place) or max(x[r, 2c], x[r, 2c + 1])
 * (maxout 1: x rows 2n wide), r < rows. */
nmt_status nmt_op_act_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t rows, uint32_t n, int maxout, nmt_buf out,
                           uint32_t ld_out);
/* out row b (stride ld_out, n columns) = sum_{j < s_cap} alpha[b * ld_a
 * + j] * x row b * s_cap + j (stride ld_x), b < n_rows: per-row weighted
 * sums over positions (BA-NMT's history sums); x NMT_NO_BUF: zeros. */
nmt_status nmt_op_weighted_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, nmt_buf alpha, uint32_t ld_a,
                                uint32_t n_rows, uint32_t s_cap, uint32_t n, nmt_buf out, uint32_t ld_out);
/* An embedding without position terms, int8 table (fp32 tables:
 * nmt_op_gather_rows): out row r (stride ld_out) = Q row tok[r] * qscale
 * [tok[r]], d columns, r < rows; tok an int buffer of validated ids. */
nmt_status nmt_op_lookup_q8(nmt_ops *ops, nmt_buf tok, uint32_t rows, nmt_buf q, nmt_buf qscale, uint32_t d,
                            nmt_buf out, uint32_t ld_out);

/* Additive (Bahdanau) attention, one target step (cl/additive.cl; BA-NMT,
 * issue 17, docs/ARCHITECTURES.md).  Row b < n_rows (a decoder state)
 * reads sentence m = b / group (beams share a sentence's K, H and len),
 * whose valid positions are j < n = min(len[m], s_cap) (len int [n_rows /
 * group rounded up]):
 *   e[b,j]     = v . tanh(q[b,:] + K[m,j,:] (+ E1[b,j,:]) (+ E2[b,j,:]))
 *   alpha[b,j] = softmax over j < n of e[b,:], 0 for n <= j < s_cap
 *   out[b,:]   = sum_{j < n} alpha[b,j] H[m,j,:]          (zeros when n = 0)
 * q [n_rows, a_dim] is W s~ + bias (a GEMM); K = U h_j, computed once per
 * sentence, row (m, j) = m * s_cap + j; E1 / E2 (optional, NMT_NO_BUF) are
 * extra per-row, per-position terms added inside the tanh — BA-NMT's
 * source- and target-history terms — row (b, j) = b * s_cap + j; v [a_dim];
 * H rows (m, j) like K, d_h wide; alpha dense [n_rows, s_cap] (the
 * backward, the history updates and the alignment output read it); out
 * [n_rows, d_h] with its own stride (a slice of a concatenated buffer).
 * Requires nmt_ops_enable_additive. */
typedef struct nmt_additive_args {
    uint32_t n_rows, s_cap, a_dim, d_h, group;
    nmt_buf q; uint32_t q_ld;
    nmt_buf k; uint32_t k_ld;
    nmt_buf e1; uint32_t e1_ld;    /* optional */
    nmt_buf e2; uint32_t e2_ld;    /* optional */
    nmt_buf v;
    nmt_buf h; uint32_t h_ld;
    nmt_buf len;
    nmt_buf alpha;
    nmt_buf out; uint32_t out_ld;
} nmt_additive_args;

nmt_status nmt_op_additive_attn(nmt_ops *ops, const nmt_additive_args *a);
/* The argument checks of nmt_op_additive_attn (and of its backward). */
nmt_status nmt_additive_check(const nmt_additive_args *a);

#endif
