/* SPDX-License-Identifier: MIT */
/* ops_attn.h — multi-head masked attention with HySAN's branches
 * (cl/attention.cl, runtime/ops/ops_attn.c) and the attention alignments
 * (cl/align.cl, ops_align.c).
 * Part of the op layer's face (ops.h has the buffers, nmt_ops and the
 * products, norms and element-wise ops every family uses). */
#ifndef NMT_OPS_ATTN_H
#define NMT_OPS_ATTN_H

#include "ops.h"

/* Multi-head masked attention with HySAN branches sharing one score matrix.
 *
 * Query sequences s < n_seq, each with lq queries; query i sits at absolute
 * position q_pos0 + i.  Query sequence s reads key/value sequence s / group.
 * Key j of kv sequence m is at k + m*kv_seq_stride + j*k_ld (same for v);
 * head h uses columns [h*d_head, (h+1)*d_head).  Valid keys of kv sequence m:
 * j < key_len[m] (int buffer) or, if key_len.mem == NULL, j < key_len_const.
 *
 *   S[s,h,i,j] = (q_i . k_j) / sqrt(d_head)                 (computed once)
 *   for each branch b: P_b = softmax_j(S + M_b + M_pad (+ M_causal))
 *                      out[s*lq+i, b*H*d_head + h*d_head + c] = sum_j P_b v_j[c]
 *
 * Rows with no allowed key produce zeros.  scores: scratch of
 * n_seq*H*lq*lk_max floats; stats: scratch of n_seq*H*lq*2 floats.
 *
 * kv_row (optional; int): key and value j of kv sequence m are read from
 * kv sequence kv_row[j*kv_row_ld + m] instead of m — a beam search's rows
 * reading their shared history in place (docs/RUNTIME.md, "The beam's K|V
 * table").  Only the fused path takes it (nmt_ops_attn_kv_row); elsewhere
 * NMT_ERR_UNSUPPORTED.
 *
 * k_new, v_new (optional, both or neither; a decoding step: lq == 1,
 * group == 1): the key and value of each query's own position q_pos0 are
 * row s of k_new / v_new (row stride new_ld), not the cache's, and the call
 * also writes them into the cache there (at kv sequence kv_row[q_pos0 *
 * kv_row_ld + s] with a table, else s) for the next steps: the step's K|V
 * append, in the fused path without a launch of its own. */
typedef struct nmt_attn_args {
    uint32_t n_seq, lq, q_pos0, lk_max, group;
    uint32_t n_heads, d_head;
    nmt_buf q; uint32_t q_ld;
    nmt_buf k; uint32_t k_ld;
    nmt_buf v; uint32_t v_ld;
    uint64_t kv_seq_stride;
    nmt_buf kv_row; uint32_t kv_row_ld;
    nmt_buf k_new, v_new; uint32_t new_ld;
    nmt_buf key_len; uint32_t key_len_const;
    int causal;
    uint32_t n_branches;
    nmt_branch branches[NMT_MAX_BRANCHES];
    nmt_buf scores, stats;
    nmt_buf out; uint32_t out_ld;
} nmt_attn_args;

nmt_status nmt_op_attention(nmt_ops *ops, const nmt_attn_args *a);

/* 1 when nmt_op_attention takes a kv_row table for heads of d_head (its
 * fused path), else 0. */
int nmt_ops_attn_kv_row(const nmt_ops *ops, uint32_t d_head);

/* Attention alignments (cl/align.cl, runtime/ops/ops_align.c): the softmax
 * probabilities of a cross-attention's queries over its keys, averaged over
 * heads (head 0) or of head `head` (1-based), recomputed from q and k:
 *   out[r, j] = mean_h softmax_j(q[r, h] . k[m, j, h] / sqrt(d_head)),
 * m = r / group, j < min(key_len[m], lk_max); 0 for the other j < lk_max.
 * q rows q_ld apart; key j of sequence m at k + m * kv_stride + j * k_ld;
 * out [rows, out_ld], out_ld >= lk_max.  Requires nmt_ops_enable_align. */
nmt_status nmt_ops_enable_align(nmt_ops *ops);
nmt_status nmt_op_attn_align(nmt_ops *ops, uint32_t rows, uint32_t group, uint32_t n_heads, uint32_t d_head,
                             uint32_t head, nmt_buf q, uint32_t q_ld, nmt_buf k, uint32_t k_ld, uint64_t kv_stride,
                             nmt_buf key_len, uint32_t lk_max, nmt_buf out, uint32_t out_ld);

#endif
