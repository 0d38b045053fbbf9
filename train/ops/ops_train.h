/* SPDX-License-Identifier: MIT */
/* ops_train.h — the training half of the kernel layer: one C call per
 * backward op, the loss, dropout and the optimiser, launching the kernels of
 * cl/<family>_bwd.cl, cl/loss.cl and cl/optim.cl.  The trainer chains these with
 * the forward calls of ops.h (docs/TRAINING-OPS.md shows how for a
 * Transformer/HySAN layer).
 *
 * Conventions are those of ops.h: buffers are nmt_buf (cl_mem + element
 * offset), fp32 unless noted, matrices row-major with explicit leading
 * dimensions; every call validates its arguments (NMT_ERR_INVALID_ARGUMENT),
 * only enqueues on the device's in-order queue (never blocks, never creates
 * OpenCL objects, never allocates host memory) and treats empty sizes as a
 * no-op.  Sums run in a fixed order (no atomics), so gradients are bitwise
 * reproducible on a given device.
 *
 * "Accumulate" flags (and beta = 1) add to the output instead of
 * overwriting it: parameter gradients are accumulated across the uses of a
 * parameter and across micro-batches, and zeroed with nmt_op_fill. */
#ifndef NMT_OPS_TRAIN_H
#define NMT_OPS_TRAIN_H

#include "ops.h"
#include "ops_attn.h"
#include "ops_phrase.h"
#include "ops_rec.h"

/* Work-groups of stage 1 of nmt_op_reduce_sum: its `partial` scratch holds
 * this many floats. */
#define NMT_TRAIN_REDUCE_GROUPS 256u

typedef struct nmt_train_ops {
    nmt_device *dev;
    nmt_gemm_provider gemm;  /* OWN or CLBLAST (weight-gradient products) */
    /* kernels (created by nmt_train_ops_init) */
    cl_kernel k_gemm_tn, k_col_sum;                       /* gemm_bwd.cl */
    cl_kernel k_layernorm_bwd, k_layernorm_bwd_params;    /* norm_bwd.cl */
    cl_kernel k_embed_bwd, k_relu_bwd, k_act_bwd, k_gate_bwd, k_dropout;  /* elementwise_bwd.cl */
    cl_kernel k_attn_bwd_scores, k_attn_bwd_probs, k_attn_bwd_ds, k_attn_bwd_dq, k_attn_bwd_dkv;
    cl_kernel k_segment_max_bwd, k_span_last_bwd, k_span_tokens_bwd, k_window_rows_bwd;  /* phrase_bwd.cl */
    cl_kernel k_pattn_dp, k_pattn_ds, k_pattn_dq, k_pattn_dk, k_pattn_dv;              /* phrase_bwd.cl */
    cl_kernel k_lstm_cell_bwd, k_onlstm_master_bwd, k_gru_cell_bwd;  /* recurrent_bwd.cl */
    cl_kernel k_gru_scaled_input_dp, k_gru_scaled_input_da;          /* recurrent_bwd.cl */
    cl_kernel k_act_rows_bwd, k_weighted_rows_da, k_weighted_rows_dx; /* recurrent_bwd.cl (BA-NMT) */
    cl_kernel k_additive_bwd_rows, k_additive_bwd_dv;  /* additive_bwd.cl */
    cl_kernel k_xent;                                     /* loss.cl */
    cl_kernel k_adam, k_reduce_partial, k_reduce_final, k_scale, k_fill, k_axpy;  /* optim.cl */
    /* launch geometry */
    uint32_t gemm_tm, gemm_tn;  /* C block per gemm_tn work-item (-D GEMMT_TM/TN) */
    uint32_t gemm_vw;           /* its vector width along N (-D GEMMT_VW) */
    uint32_t k_chunk;           /* gemm_tn splits K into chunks of this many rows
                                   (0: never); a plain field, may be changed */
    size_t reduce_wg;           /* local size of per-row reductions (power of two) */
    size_t norm_wg;             /* local size of layernorm_bwd: 1 on CPUs, else
                                   reduce_wg (a plain field; tests set both) */
    size_t wg_max;              /* work-items per group for the other kernels */
} nmt_train_ops;

/* An entry of ops_train.c's kernel table: field k_<name>, kernel <name>. */
#define NMT_TKDEF(name, prog) {offsetof(nmt_train_ops, k_##name), prog, #name, 0}

/* The training kernel sources (cl/<op>_bwd.cl, loss.cl, optim.cl), embedded
 * in this library by cmake/embed_cl.cmake; libnmtedge carries none of them. */
extern const nmt_embedded_source nmt_train_embedded_sources[];
extern const size_t nmt_train_embedded_source_count;

/* Register the training sources on the device (nmt_device_add_sources),
 * build the programs (through the device's program cache) and create every
 * kernel.  On failure everything created so far is released.  The device
 * must outlive the ops. */
nmt_status nmt_train_ops_init(nmt_train_ops *t, nmt_device *dev);

/* The same with explicit gemm_tn parameters (tests, tuning): tm 1..8,
 * tn 1..32, vw 1/2/4/8/16 (must divide tn, else 1 is used); else
 * NMT_ERR_INVALID_ARGUMENT.  nmt_train_ops_init chooses them by device type:
 * on CPUs 6 x 32 with 16-wide vectors and K chunks of 256 rows (the B rows
 * a work-group streams then stay in L2), elsewhere 4 x 4 x 4, no chunks. */
nmt_status nmt_train_ops_init_gemm(nmt_train_ops *t, nmt_device *dev, uint32_t tm, uint32_t tn, uint32_t vw);
void nmt_train_ops_release(nmt_train_ops *t);

/* ---- linear layers ------------------------------------------------------ */

/* C[M,N] = alpha * A^T * B (+ C if beta == 1), A [K,M] (lda >= M),
 * B [K,N] (ldb >= N).  beta must be 0 (C not read) or 1.
 * Weight gradient of y = x W^T: dW[out,in] += dy^T x, i.e.
 * M = out, N = in, K = rows, A = dy, B = x, beta = 1. */
nmt_status nmt_op_gemm_tn(nmt_train_ops *t, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                          uint32_t lda, nmt_buf B, uint32_t ldb, float beta, nmt_buf C, uint32_t ldc);

/* out[c] = alpha * sum_{r < rows} X[r*ld + c] (+ out[c] if beta == 1),
 * c < cols.  Bias gradient: db += colsum(dy). */
nmt_status nmt_op_col_sum(nmt_train_ops *t, uint32_t rows, uint32_t cols, float alpha, nmt_buf X, uint32_t ld,
                          float beta, nmt_buf out);

/* Backward of y[rows, out] = x[rows, in] W[out, in]^T + b (ops.h's
 * nmt_op_gemm with trans_b = 1), given dy (ld_dy >= out_dim):
 *   dx  = dy W            (+ dx if dx_beta == 1)   skipped if dx.mem == NULL
 *   dW += dy^T x          (dW [out, in], contiguous) skipped if dW.mem == NULL
 *   db += colsum(dy)      (db [out])                skipped if db.mem == NULL
 * (with param_beta == 0 dW and db are overwritten instead).  A fused ReLU
 * is undone first with nmt_op_relu_bwd.  `ops` runs the dx product with
 * the forward GEMM. */
nmt_status nmt_op_linear_bwd(nmt_ops *ops, nmt_train_ops *t, uint32_t rows, uint32_t out_dim, uint32_t in_dim,
                             nmt_buf x, uint32_t ld_x, nmt_buf W, nmt_buf dy, uint32_t ld_dy, nmt_buf dx,
                             uint32_t ld_dx, float dx_beta, nmt_buf dW, nmt_buf db, float param_beta);

/* ---- layer norm --------------------------------------------------------- */

/* Backward of nmt_op_layernorm: y = LN(v) * gamma + beta, v = x (+ res).
 * Inputs: x (and res, or res.mem == NULL) as given to the forward (NOT its
 * output: post-norm overwrites its residual, so the trainer keeps v or
 * x and res), dy [rows, d], gamma [d], eps.
 *   dx  = rstd * (a - mean(a) - xh * mean(a * xh)),  a = dy * gamma
 *         (dx += ... if accumulate); dv is both dx and dres
 *   dgamma (+)= sum_r dy * xh,  dbeta (+)= sum_r dy    (param_accumulate)
 *         skipped when dgamma.mem / dbeta.mem are both NULL
 * stats: scratch of 2*rows floats (receives mean and rstd per row).
 * dx must not overlap x, res or dy (NMT_ERR_INVALID_ARGUMENT for the same
 * cl_mem with overlapping ranges). */
nmt_status nmt_op_layernorm_bwd(nmt_train_ops *t, nmt_buf x, nmt_buf res, nmt_buf dy, nmt_buf dx,
                                int accumulate, uint32_t rows, uint32_t d, nmt_buf gamma, float eps,
                                nmt_buf dgamma, nmt_buf dbeta, int param_accumulate, nmt_buf stats);

/* ---- elementwise -------------------------------------------------------- */

/* Backward of nmt_op_segment_max (ops.h): dx[arg[r, c], c] += dg[r, c]
 * for every phrase row r < rows (n_sent * m_cap) and column c < d whose
 * arg (the forward's argmax rows, int [rows, d]) is >= 0; row strides ld_g
 * of dg and ld_x of dx.  Rows of dx that were nobody's max are unchanged. */
nmt_status nmt_op_segment_max_bwd(nmt_train_ops *t, nmt_buf arg, nmt_buf dg, uint32_t ld_g, uint32_t rows,
                                  uint32_t d, nmt_buf dx, uint32_t ld_x);

/* Backward of nmt_op_span_last (ops.h): dh row r * t_cap + t (row stride
 * ld_h) = dg[r] (row stride ld_g) for t = len - 1, zero for every other
 * t < t_cap (every row written), r < rows. */
nmt_status nmt_op_span_last_bwd(nmt_train_ops *t, nmt_buf dg, uint32_t ld_g, nmt_buf seg, uint32_t rows,
                                uint32_t t_cap, uint32_t d, nmt_buf dh, uint32_t ld_h);

/* Backward of nmt_op_span_tokens (ops.h): dx[b * n_cap + start + t] (row
 * stride ld_x) += dp[r * t_cap + t] (d wide) for t < len (accumulates;
 * race-free for disjoint spans). */
nmt_status nmt_op_span_tokens_bwd(nmt_train_ops *t, nmt_buf dp, nmt_buf seg, uint32_t n_sent, uint32_t m_cap,
                                  uint32_t t_cap, uint32_t d, uint32_t n_cap, nmt_buf dx, uint32_t ld_x);

/* Backward of nmt_op_window_rows (ops.h): dx row s * n_cap + p (stride
 * ld_x) += the sum of the dy entries (rows s * t_out + t, stride ld_y)
 * that copied it, for every valid position p < len[s] (len NMT_NO_BUF:
 * p < n_cap; accumulates;
 * race-free, a work-item per position). */
nmt_status nmt_op_window_rows_bwd(nmt_train_ops *t, nmt_buf dy, uint32_t ld_y, nmt_buf len, uint32_t n_seq,
                                  uint32_t n_cap, uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t d,
                                  nmt_buf dx, uint32_t ld_x);

/* Backward of nmt_op_lstm_cell (ops.h) at step `step` (cl/recurrent_bwd.cl):
 * z, c: the forward's gates and cells; dh (row stride ld_dh): the
 * gradient of the step's outputs including the recurrent part; dc (float
 * [n_seq, h]): in, the gradient reaching c_step from the next step (zero
 * before the last step); out, the gradient of c_{step-1}; dz (float
 * [n_seq * t_cap, G], G the gate width of ops.h's nmt_lstm_gates)
 * receives the step's rows of the pre-activation gradient of i, f, g, o.  ON-LSTM (chunk > 0): dm
 * (float [n_seq, 2h]) receives each unit's part of its chunk's master
 * gate gradients, which nmt_op_onlstm_master_bwd turns into dz's master
 * columns (dm unused for chunk 0: NONE).  Steps past count[b] give zeros. */
nmt_status nmt_op_lstm_cell_bwd(nmt_train_ops *t, nmt_buf z, nmt_buf c, nmt_buf dh, uint32_t ld_dh, nmt_buf dc,
                                nmt_buf dz, nmt_buf dm, nmt_buf count, uint32_t n_seq, uint32_t t_cap, uint32_t step,
                                uint32_t h, uint32_t chunk);

/* ON-LSTM, after nmt_op_lstm_cell_bwd of the same step: dz's master
 * columns of the step's rows, through cumax, from the per-unit parts in
 * dm.  chunk > 0 and divides h. */
nmt_status nmt_op_onlstm_master_bwd(nmt_train_ops *t, nmt_buf z, nmt_buf dm, nmt_buf dz, nmt_buf count,
                                    uint32_t n_seq, uint32_t t_cap, uint32_t step, uint32_t h, uint32_t chunk);

/* Backward of nmt_op_gru_cell (ops.h) at step `step` (cl/recurrent_bwd.cl
 * gru_cell_bwd; train/ops/ops_train_rec.c), rows as the forward's (count,
 * t_cap, reverse): z (stride ld_z) the forward's kept rows; dout (stride
 * ld_dout) the gradient of the forward's out rows (NMT_NO_BUF: none); dh
 * (float [n_seq, h]) in, the gradient reaching the step's new state from
 * later steps (and from uses of hs), out, its direct part for h_prev
 * (d u; the caller adds dg W_hh, nmt_op_gemm with trans_b 0); dz (stride
 * ld_dz >= 4h) receives at the step's data row the gradients of x W_ih^T
 * + b_ih (3h) and of hn (h); dg (float [n_seq, 3h]) those of h_prev
 * W_hh^T + b_hh.  Padding steps: dz row b * t_cap + t and dg[b] zero, dh
 * kept. */
nmt_status nmt_op_gru_cell_bwd(nmt_train_ops *t, nmt_buf z, uint32_t ld_z, nmt_buf dout, uint32_t ld_dout, nmt_buf dh,
                               nmt_buf dz, uint32_t ld_dz, nmt_buf dg, nmt_buf count, uint32_t n_seq, uint32_t t_cap,
                               uint32_t step, int reverse, uint32_t h);

/* Backward of nmt_op_gru_scaled_input (ops.h; train/ops/ops_train_rec.c),
 * operands as the forward's, dout (stride ld_dout) the gradient of out:
 * dp (stride ld_dp) += the group rows' alpha * dout (accumulated: the
 * projection serves every step); dalpha (stride ld_da) receives (alpha_beta
 * 0) or gets added (1) the dot of p's row and dout's; dbias += the column
 * sums of dout (NMT_NO_BUF: skipped). */
nmt_status nmt_op_gru_scaled_input_bwd(nmt_train_ops *t, nmt_buf p, uint32_t ld_p, nmt_buf alpha, uint32_t ld_a,
                                       nmt_buf dout, uint32_t ld_dout, uint32_t n_rows, uint32_t s_cap,
                                       uint32_t group, uint32_t n, nmt_buf dp, uint32_t ld_dp, nmt_buf dalpha,
                                       uint32_t ld_da, float alpha_beta, nmt_buf dbias);

/* Backward of nmt_op_act_rows (ops.h; train/ops/ops_train_rnn.c), rows r <
 * rows, n outputs per row, dx (stride ld_dx) overwritten:
 *   NMT_ACT_BWD_TANH_IN   x = tanh's input:  dx[r, c] = (1 - tanh(x)^2) dy
 *   NMT_ACT_BWD_TANH_OUT  x = tanh's output: dx[r, c] = (1 - x^2) dy
 *   NMT_ACT_BWD_MAXOUT    x = the 2n-wide input: dy[r, c] to the larger of
 *                         x[r, 2c], x[r, 2c + 1] (the first on a tie), 0
 *                         to the other.
 * dx may be x for TANH_OUT (in place). */
enum { NMT_ACT_BWD_TANH_IN = 1, NMT_ACT_BWD_MAXOUT = 2, NMT_ACT_BWD_TANH_OUT = 3 };
nmt_status nmt_op_act_rows_bwd(nmt_train_ops *t, nmt_buf x, uint32_t ld_x, nmt_buf dy, uint32_t ld_dy, uint32_t rows,
                               uint32_t n, int mode, nmt_buf dx, uint32_t ld_dx);

/* Backward of nmt_op_weighted_rows (ops.h; train/ops/ops_train_rnn.c),
 * operands as the forward's, dout (stride ld_dout) the gradient of out:
 *   dalpha[b * ld_da + j] += x row b * s_cap + j . dout row b   (skipped
 *                                                   when dalpha.mem NULL)
 *   dx row b * s_cap + j  += alpha[b * ld_a + j] * dout row b  (skipped
 *                                                   when dx.mem NULL)
 * Both accumulate; neither may overlap the inputs. */
nmt_status nmt_op_weighted_rows_bwd(nmt_train_ops *t, nmt_buf x, uint32_t ld_x, nmt_buf alpha, uint32_t ld_a,
                                    nmt_buf dout, uint32_t ld_dout, uint32_t n_rows, uint32_t s_cap, uint32_t n,
                                    nmt_buf dx, uint32_t ld_dx, nmt_buf dalpha, uint32_t ld_da);

/* dx[i] = y[i] > 0 ? dy[i] : 0, i < n, y = the ReLU's output (or input).
 * dx may be dy (in place). */
nmt_status nmt_op_relu_bwd(nmt_train_ops *t, nmt_buf y, nmt_buf dy, nmt_buf dx, uint32_t n);
/* Backward of nmt_op_act (GELU or swish, ops.h NMT_ACT_*): dx[i] = dy[i]
 * act'(x[i]), x the activation's input; dx may be dy. */
nmt_status nmt_op_act_bwd(nmt_train_ops *t, nmt_buf x, nmt_buf dy, nmt_buf dx, uint32_t n, int kind);

/* Backward of nmt_op_gate_accum (out (+)= x * sigmoid(g)), rows x d with
 * row strides ld_*, given dout:
 *   dx = dout * s (dx += ... if accumulate_dx),  dg = dout * x * s * (1 - s),
 *   s = sigmoid(g).  dx and dg must not overlap each other or the inputs. */
nmt_status nmt_op_gate_bwd(nmt_train_ops *t, nmt_buf x, uint32_t ld_x, nmt_buf g, uint32_t ld_g, nmt_buf dout,
                           uint32_t ld_dout, nmt_buf dx, uint32_t ld_dx, nmt_buf dg, uint32_t ld_dg,
                           uint32_t rows, uint32_t d, int accumulate_dx);

/* Inverted dropout with a counter-based mask, i < n:
 *   out[i] = keep(seed, offset + i) ? x[i] / (1 - p) : 0     (out may be x)
 * keep(seed, e): word e & 3 of Philox4x32-10 at counter e >> 2 under key
 * seed, shifted right by 8, >= round(p * 2^24) (cl/elementwise_bwd.cl).
 * The backward is the same call on dy with the same seed and offset.  The
 * trainer gives every dropout site of a step its own offset range (or seed)
 * so masks never repeat.  0 <= p < 1 (p == 0 copies). */
nmt_status nmt_op_dropout(nmt_train_ops *t, nmt_buf x, nmt_buf out, uint32_t n, float p, uint64_t seed,
                          uint64_t offset);

/* Host half of the embedding backward: sort the rows by token id (stable
 * counting sort, no allocation).  tok [rows] are ids in [0, vocab); rows
 * whose id equals skip_id (e.g. padding; -1 = none) are left out.
 * Outputs: perm [rows] (row indices grouped by id, ascending within an id),
 * seg [rows + 1] (segment s = perm[seg[s] .. seg[s+1])), seg_tok [rows]
 * (the id of segment s), *n_seg.  count: scratch of vocab + 1 uint32.
 * NMT_ERR_TOKEN_OUT_OF_RANGE for an id outside [0, vocab). */
nmt_status nmt_embed_bwd_plan(const int32_t *tok, uint32_t rows, uint32_t vocab, int32_t skip_id, uint32_t *count,
                              int32_t *perm, int32_t *seg, int32_t *seg_tok, uint32_t *n_seg);

/* Backward of nmt_op_embed (out[r] = E[tok[r]] * scale + P(pos)):
 *   dE[seg_tok[s], :] += scale * sum_{i in segment s} dy[perm[i], :]
 * dy [rows, d] contiguous; perm, seg, seg_tok (int buffers) uploaded from
 * nmt_embed_bwd_plan.  Only the rows of ids present are touched (zero dE
 * first).  Work O(rows * d), one writer per element. */
nmt_status nmt_op_embed_bwd(nmt_train_ops *t, nmt_buf dy, uint32_t d, nmt_buf perm, nmt_buf seg, nmt_buf seg_tok,
                            uint32_t n_seg, float scale, nmt_buf dE);

/* ---- loss --------------------------------------------------------------- */

/* Label-smoothed cross entropy of `rows` rows of logits [rows, V] (stride
 * ld), targets tgt [rows] (int buffer), smoothing eps in [0, 1):
 *   lp = log_softmax(x),  q_t = 1 - eps,  q_j = eps / (V - 1) (j != t)
 *   (V == 1: q_t = 1)
 *   loss[r] = -sum_j q_j lp_j,   nll[r] = -lp_t   (nll.mem NULL: skipped)
 *   dlogits[r, j] = grad_scale * (exp(lp_j) - q_j)  (dlogits.mem NULL: skipped)
 * Rows with tgt == ignore_id (padding) or tgt outside [0, V) give loss =
 * nll = 0 and a zero gradient row.  dlogits may be the logits themselves
 * (same buffer, offset and ld) or must not overlap them.  The batch loss is
 * nmt_op_reduce_sum over loss[]; grad_scale is typically 1 / target tokens. */
nmt_status nmt_op_xent(nmt_train_ops *t, nmt_buf logits, uint32_t rows, uint32_t V, uint32_t ld, nmt_buf tgt,
                       int32_t ignore_id, float eps, float grad_scale, nmt_buf loss, nmt_buf nll,
                       nmt_buf dlogits, uint32_t ld_d);

/* ---- attention ---------------------------------------------------------- */

/* Backward of nmt_op_attention.  fwd holds exactly the forward call's
 * arguments with fwd.out = the saved forward output O (all branches, the
 * layout the forward wrote), fwd.scores = scratch of n_seq*H*lq*lk_max
 * floats (S, then dS), fwd.stats unused.  Given dO in the layout of O
 * (d_out, d_out_ld >= n_branches*H*d_head), writes
 *   dq [n_seq*lq rows, H*d_head]   row s*lq + i at dq + (s*lq+i)*dq_ld
 *   dk, dv                         kv sequence m < ceil(n_seq/group), key j
 *                                  at + m*dkv_seq_stride + j*d{k,v}_ld
 * (overwritten; padding keys j >= key_len get 0; dq/dk/dv must not
 * overlap q, k, v, O, dO or the scratch):
 *   dV  = sum_b P_b^T dO_b,  dS = sum_b P_b * (dO_b V^T - rowsum(dO_b * O_b)),
 *   dQ  = dS K / sqrt(d_head),  dK = dS^T Q / sqrt(d_head)
 * (per sequence and head; dK/dV sum over the `group` query sequences that
 * share a kv sequence).  probs: scratch of n_branches*n_seq*H*lq*lk_max
 * floats; dstats: scratch of n_branches*n_seq*H*lq floats. */
typedef struct nmt_attn_bwd_args {
    nmt_attn_args fwd;
    nmt_buf d_out; uint32_t d_out_ld;
    nmt_buf dq; uint32_t dq_ld;
    nmt_buf dk; uint32_t dk_ld;
    nmt_buf dv; uint32_t dv_ld;
    uint64_t dkv_seq_stride;
    nmt_buf probs, dstats;
} nmt_attn_bwd_args;

nmt_status nmt_op_attention_bwd(nmt_train_ops *t, const nmt_attn_bwd_args *a);

/* Backward of ops.h's phrase-based attention (cl/phrase_bwd.cl pattn_*):
 * fwd.p holds the forward's probabilities; ds (float, the shape of p) is
 * scratch.  Per segment g, the gradients are ADDED into dq[g] (when the
 * segment has q), dqx[g], dk[g] and dv[g] (same layouts and strides as
 * the forward's q, qx, k, v, with grad[g]'s strides), so segments
 * sharing a tensor accumulate into one gradient; the caller zeroes them
 * first. */
typedef struct nmt_pattn_bwd_args {
    nmt_pattn_args fwd;
    nmt_buf d_out; uint32_t d_out_ld;
    nmt_buf ds;
    nmt_pattn_seg grad[NMT_PATTN_MAX_SEG]; /* q, qx, k, v and strides: where the gradients go */
} nmt_pattn_bwd_args;

nmt_status nmt_op_pattn_bwd(nmt_train_ops *t, const nmt_pattn_bwd_args *a);

/* Backward of ops.h's additive attention (cl/additive_bwd.cl): fwd holds
 * the forward call's arguments (group must be 1: training has no beams;
 * fwd.alpha = the probabilities it wrote; fwd.out unused).  Given dc
 * [n_rows, d_h] (stride dc_ld) and optionally dalpha (dense [n_rows,
 * s_cap]: the gradient other consumers of alpha — the history updates —
 * send back; NMT_NO_BUF: none), it
 *   writes dq (stride dq_ld; added to it when dq_accumulate),
 *   ADDS dk (rows of fwd.k's layout, stride dk_ld), de1 / de2 (when
 *   present; the same values as dk: the terms sit in one sum), dh (H's
 *   gradient alpha (x) dc, rows of fwd.h's layout: H also feeds other
 *   paths) and dv ([a_dim], summed over the rows in a fixed order);
 * masked positions receive nothing.  scratch: n_rows * (s_cap + a_dim)
 * floats.  Gradients must not overlap the inputs or each other. */
typedef struct nmt_additive_bwd_args {
    nmt_additive_args fwd;
    nmt_buf dc; uint32_t dc_ld;
    nmt_buf dalpha;                  /* optional */
    nmt_buf dq; uint32_t dq_ld; int dq_accumulate;
    nmt_buf dk; uint32_t dk_ld;
    nmt_buf de1; uint32_t de1_ld;    /* optional */
    nmt_buf de2; uint32_t de2_ld;    /* optional */
    nmt_buf dv;
    nmt_buf dh; uint32_t dh_ld;
    nmt_buf scratch;
} nmt_additive_bwd_args;

nmt_status nmt_op_additive_bwd(nmt_train_ops *t, const nmt_additive_bwd_args *a);

/* ---- optimiser and gradient buffers ------------------------------------- */

typedef struct nmt_adam_params {
    float lr;          /* learning rate of this step (schedule applied by the caller) */
    float beta1;       /* 0.9 */
    float beta2;       /* 0.98 */
    float eps;         /* 1e-9 */
    float weight_decay;/* decoupled (AdamW); 0 = Adam */
    float grad_scale;  /* multiplies g first (clipping / loss normalisation); 1 = none */
    uint64_t step;     /* 1-based step number t, for the bias corrections */
} nmt_adam_params;

/* The paper's defaults (lr 0, beta1 0.9, beta2 0.98, eps 1e-9, no decay,
 * grad_scale 1, step 1). */
nmt_adam_params nmt_adam_defaults(void);

/* One Adam step over n parameters (flat buffers p, g, m, v; m and v start
 * at 0):  g' = grad_scale * g,  m = b1 m + (1-b1) g',  v = b2 v + (1-b2) g'^2,
 *   p -= lr * ((m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * p). */
nmt_status nmt_op_adam(nmt_train_ops *t, nmt_buf p, nmt_buf g, nmt_buf m, nmt_buf v, uint32_t n,
                       const nmt_adam_params *ap);

/* out[0] = sum_{i<n} x[i] (square: sum of x[i]^2, the squared gradient
 * norm), in two stages with a fixed order (bitwise reproducible on a
 * device).  partial: scratch of NMT_TRAIN_REDUCE_GROUPS floats. */
nmt_status nmt_op_reduce_sum(nmt_train_ops *t, nmt_buf x, uint32_t n, int square, nmt_buf partial, nmt_buf out);

/* x[i] *= a (gradient clipping: a = min(1, max_norm / norm)). */
nmt_status nmt_op_scale(nmt_train_ops *t, nmt_buf x, uint32_t n, float a);
/* x[i] = a (zeroing gradients). */
nmt_status nmt_op_fill(nmt_train_ops *t, nmt_buf x, uint32_t n, float a);
/* y[i] += a * x[i] (gradient accumulation, residual backward). */
nmt_status nmt_op_axpy(nmt_train_ops *t, nmt_buf y, nmt_buf x, uint32_t n, float a);

/* ---- shared layers ------------------------------------------------------ */

/* Backward of layers.h nmt_layer_conv1d with fp32 weights W [out_dim,
 * n * in_dim] (train/ops/layers_bwd.c): cols is the forward's; dout (stride
 * ld_dout) the gradient of its output; dcols (float [n_seq * t_out, n *
 * in_dim]) scratch; dx (stride ld_dx) gets the gradient of x added at the
 * valid positions; the gradients of W and its bias are accumulated into
 * g_w, g_b. */
nmt_status nmt_layer_conv1d_bwd(nmt_ops *ops, nmt_train_ops *t, nmt_buf len, uint32_t n_seq, uint32_t n_cap,
                                uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t in_dim, nmt_buf w,
                                uint32_t out_dim, nmt_buf cols, nmt_buf dout, uint32_t ld_dout, nmt_buf dcols,
                                nmt_buf dx, uint32_t ld_dx, nmt_buf g_w, nmt_buf g_b);

/* Backward of layers.h nmt_layer_lstm (LSTM, or ON-LSTM for chunk > 0)
 * with fp32 weights w_ih [G, in_dim] and w_hh [G, h], G the gate width
 * (ops.h's nmt_lstm_gates of h and chunk; train/ops/layers_bwd.c): x, count, z, c and out
 * are the forward's; dout (float [n_seq * t_cap, stride ld_dout]) holds
 * the gradient of out and is overwritten (the recurrent gradient is added
 * into it step by step); dz (float [n_seq * t_cap, G]), dc (float
 * [n_seq, h]) and, for ON-LSTM, dm (float [n_seq, 2h]) are scratch; dx (stride ld_dx) receives the gradient of x
 * (dx_beta 0) or gets it added (1); the gradients of w_ih, its bias and
 * w_hh are accumulated into g_ih, g_ib and g_hh.  Needs nmt_ops_enable_nn. */
nmt_status nmt_layer_lstm_bwd(nmt_ops *ops, nmt_train_ops *t, nmt_buf x, uint32_t ld_x, uint32_t n_seq,
                              uint32_t t_cap, uint32_t in_dim, uint32_t h, uint32_t chunk, nmt_buf w_ih, nmt_buf w_hh,
                              nmt_buf count, nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out, nmt_buf dout,
                              uint32_t ld_dout, nmt_buf dz, nmt_buf dc, nmt_buf dm, nmt_buf dx, uint32_t ld_dx,
                              float dx_beta, nmt_buf g_ih, nmt_buf g_ib, nmt_buf g_hh);

/* Backward of layers.h nmt_layer_gru with fp32 weights w_ih [3h, in_dim]
 * and w_hh [3h, h] (train/ops/layers_bwd.c): x, count, reverse and z are the
 * forward's (z holds every h_prev, h0 included); dout (stride ld_dout) the
 * gradient of out (read only); dz (float [n_seq * t_cap, 4h]) and dg
 * (float [n_seq, 3h]) are scratch; dh (float [n_seq, h]) is zeroed and
 * ends as the gradient of h0; dx (stride ld_dx) receives the gradient of x
 * (dx_beta 0) or gets it added (1); the gradients of w_ih, its bias, w_hh
 * and its bias are accumulated into g_ih, g_ib, g_hh, g_hb (g_ib, g_hb
 * NMT_NO_BUF: skipped).  Backprop through time: per step (last first)
 * nmt_op_gru_cell_bwd and dh += dg W_hh; then the weight gradients, each
 * one product over all rows.  Needs nmt_ops_enable_nn. */
nmt_status nmt_layer_gru_bwd(nmt_ops *ops, nmt_train_ops *t, nmt_buf x, uint32_t ld_x, uint32_t n_seq, uint32_t t_cap,
                             uint32_t in_dim, uint32_t h, int reverse, nmt_buf w_ih, nmt_buf w_hh, nmt_buf count,
                             nmt_buf z, nmt_buf dout, uint32_t ld_dout, nmt_buf dz, nmt_buf dg, nmt_buf dh, nmt_buf dx,
                             uint32_t ld_dx, float dx_beta, nmt_buf g_ih, nmt_buf g_ib, nmt_buf g_hh, nmt_buf g_hb);

#endif
