/* SPDX-License-Identifier: MIT */
/* ops_beam.h — the beam search's candidates (cl/topk.cl,
 * runtime/ops/ops_topk.c) and its steps chained on the device (cl/beam.cl,
 * ops_beam.c).
 * Part of the op layer's face (ops.h has the buffers, nmt_ops and the
 * products, norms and element-wise ops every family uses). */
#ifndef NMT_OPS_BEAM_H
#define NMT_OPS_BEAM_H

#include "ops.h"

/* The beam search's candidates (cl/topk.cl, runtime/ops/ops_topk.c): per row r
 * of x (n logits, stride ld) the log-softmax, bit for bit nmt_op_log_softmax's,
 * fused with the k <= ops->topk_max entries of largest score[r] + lp (ties:
 * the lower id first; NaN never), written into out as uint32 words: lp bits
 * at [r*k + i], ids at [rows*k + r*k + i] (rank order; missing: -inf, -1),
 * the EOS's lp bits at [2*rows*k + r].  A row whose score is not > -inf is
 * not searched (all missing).  One work-group of ops->reduce_wg per row.
 * nmt_ops_enable_topk sets topk_max: NMT_TOPK_MAX or less, as the device's
 * local memory holds reduce_wg * topk_max candidates; NMT_ERR_UNSUPPORTED
 * when it holds fewer than 3 or the kernel cannot take that local size
 * (the caller then reads the whole distribution). */
#define NMT_TOPK_MAX 17u
nmt_status nmt_ops_enable_topk(nmt_ops *ops);
nmt_status nmt_op_topk_logprobs(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                                uint32_t k, uint32_t eos, nmt_buf out);
/* The same, and the greedy step's choice written on the device (greedy
 * steps chained without the host, runtime/session/session.c): for every row whose
 * score is > -inf, tok[r] = the id of its first ranked entry with a key
 * > -inf that is not eos when no_eos (eos when there is none) and
 * score[r] = that key (score + lp: the host's float sum).  That is the
 * token and the score nmt_beam_advance_topk gives the row at beam 1.  Dead
 * rows are left as they are.  score and tok may be parts of one buffer. */
nmt_status nmt_op_topk_pick(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                            uint32_t k, uint32_t eos, nmt_buf out, int no_eos, nmt_buf tok);

/* Beam search steps chained on the device (cl/beam.cl, runtime/ops/ops_beam.c;
 * runtime/session/session.c decode_chained).  nmt_op_beam_advance: for each
 * sentence s < rows / K, what nmt_beam_advance_topk does to its K rows at
 * step t from the candidates cand (nmt_op_topk_logprobs's layout, k a
 * row; scores ranked by score[r] + lp) when the only constraints are
 * min_len and each sentence's length limit: tok[j], score[j] and back[j]
 * of its rows are the beam's next_tok, score and back after the step, the
 * same bits.  state: 3 ints a sentence (done, finished hypotheses, length
 * limit), 0, 0, max_len at the start of a search, kept by the kernel.
 * K <= NMT_BEAM_DEVICE_MAX.  nmt_op_kv_table_permute: entries (p, r) of the
 * table tab (positions of ld ints) become old (p, back[r]) for p <
 * positions, r < rows; NMT_ERR_UNSUPPORTED when ld ints take more than half
 * the device's local memory. */
#define NMT_BEAM_DEVICE_MAX 8u
typedef struct nmt_beam_step {
    nmt_buf cand, state, tok, score, back;
    uint32_t rows, k, K, V, eos, t, min_len;
} nmt_beam_step;
nmt_status nmt_ops_enable_beam(nmt_ops *ops);
nmt_status nmt_op_beam_advance(nmt_ops *ops, const nmt_beam_step *b);
int nmt_ops_kv_permute_fits(const nmt_ops *ops, uint32_t ld); /* 1: the kernel exists and ld ints fit */
nmt_status nmt_op_kv_table_permute(nmt_ops *ops, nmt_buf tab, uint32_t ld, uint32_t positions, nmt_buf back,
                                   uint32_t rows);
/* nmt_ops_chain_open: 1 while ops have been recorded and not yet enqueued
 * (the session reads a chained beam step's candidates after its reorder,
 * so that the permutation joins the recording). */
static inline int nmt_ops_chain_open(const nmt_ops *ops) { return ops->chain_n > 0; }

#endif
