/* SPDX-License-Identifier: MIT */
/* ops_phrase.h — phrase memories and phrase-based attention (cl/phrase.cl,
 * runtime/ops/ops_phrase.c): MG-SA's max-pooled and LSTM-composed phrases,
 * n-gram partitions, windows of positions, ConvKV / QueryK attention.
 * Part of the op layer's face (ops.h has the buffers, nmt_ops and the
 * products, norms and element-wise ops every family uses). */
#ifndef NMT_OPS_PHRASE_H
#define NMT_OPS_PHRASE_H

#include "ops.h"

/* Phrase memory by max-pooling (cl/phrase.cl segment_max; MG-SA's COM =
 * max): phrase row r = b * m_cap + m (b < n_sent) of G (row stride ld_g)
 * is the column-wise max of the rows b * n_cap + t, start <= t < start +
 * len, of X (row stride ld_x), with start = seg[2r], len = seg[2r + 1]
 * (int; len 0 = no phrase: a zero row).  arg (optional: NONE) receives the
 * argmax rows of X (int [n_sent * m_cap, d]; -1 for no phrase) for the
 * backward.  Spans must satisfy 0 <= start, start + len <= n_cap, and be
 * disjoint within a sentence (the caller's phrase partition guarantees it;
 * the kernel trusts them).  Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_segment_max(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf seg,
                              uint32_t n_sent, uint32_t m_cap, uint32_t d, nmt_buf g, uint32_t ld_g, nmt_buf arg);

/* The n-gram phrase partition (cl/phrase.cl ngram_spans) of n_sent
 * sentences whose lengths (int, EOS included, padding excluded) are in
 * `len`: spans for nmt_op_segment_max in seg (int [n_sent * m_cap, 2]:
 * phrase m starts at m * n, its length min(n, L - m * n), 0 past the
 * sentence) and the phrase count min(ceil(L / n), m_cap) of each sentence
 * in count (int [n_sent]; an attention's key lengths).  1 <= n <= 64.
 * Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_ngram_spans(nmt_ops *ops, nmt_buf len, uint32_t n_sent, uint32_t n, uint32_t m_cap, nmt_buf seg,
                              nmt_buf count);

/* Phrases as sequences (cl/phrase.cl; MG-SA's LSTM composition): phrase
 * row r = b * m_cap + m (r < n_sent * m_cap) of span (start, len) = (seg[2r],
 * seg[2r + 1]) becomes rows r * t_cap + t of p (float, d wide): the token
 * rows b * n_cap + start + t of x (row stride ld_x) for t < len, zero rows
 * after; count[r] (int) = len.  t_cap must be >= every len (n-grams: n).
 * Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_span_tokens(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf seg, uint32_t n_sent,
                              uint32_t m_cap, uint32_t t_cap, uint32_t d, nmt_buf p, nmt_buf count);

/* g[r] (row stride ld_g) = h[r * t_cap + len - 1] (row stride ld_h), the
 * state after phrase r's last token (zero for len 0), r < rows.  Requires
 * nmt_ops_enable_phrase. */
nmt_status nmt_op_span_last(nmt_ops *ops, nmt_buf h, uint32_t ld_h, nmt_buf seg, uint32_t rows, uint32_t t_cap,
                            uint32_t d, nmt_buf g, uint32_t ld_g);

/* Windows of positions as rows (cl/phrase.cl window_rows; a 1-D
 * convolution over positions is this and one GEMM, layers.h
 * nmt_layer_conv1d): row s * t_out + t of y (row stride ld_y >= n * d)
 * holds, for i < n, the row of position p = t * stride + i - pad of
 * sequence s in x (rows s * n_cap + p, stride ld_x) when 0 <= p < len[s]
 * (int [n_seq]; len NMT_NO_BUF: p < n_cap), else zeros.  Requires
 * nmt_ops_enable_phrase. */
nmt_status nmt_op_window_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf len, uint32_t n_seq,
                              uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t d, nmt_buf y,
                              uint32_t ld_y);

/* Phrase-based attention (issue 16, docs/ARCHITECTURES.md; cl/phrase.cl
 * pattn_*): one softmax per query over the concatenated keys of up to
 * NMT_PATTN_MAX_SEG segments (n-gram types).  Query sequence s < n_seq
 * (lq queries at positions q_pos0 + i, rows s * lq + i) reads key/value
 * sequence m = s / group.  Segment g's key j < lk_max (the window of
 * positions ending at j) scores, for head h,
 *   S = scale * sum_{u < n_win} qtap_u . k[j - n_win + 1 + u]   (rows < 0: 0)
 * with scale = 1 / sqrt(n_win * d_head); tap u < n_ext is columns
 * [(h * n_ext + u) * d_head, +d_head) of qx (row stride qx_ld), tap
 * n_win - 1 is head h's columns of q when q.mem (n_win = n_ext + 1), else
 * n_win = n_ext; key row j of sequence m is k + m * k_stride + j * k_ld,
 * head columns [h * d_head, +d_head); v likewise (v_stride, v_ld).  ConvKV:
 * n_win 1 over convolved keys; QueryK: n_win n over token keys.  Valid
 * keys: lo <= j < key_len[m] (or key_len_const), and j <= position when
 * causal; queries at positions below q_lo have none; a row without one
 * gives zeros.  Probabilities go to p (float,
 * row (s * H + h) * lq + i, n_segs * lk_max columns, segment g at g *
 * lk_max; the trainer's backward reads them), the output to head h's
 * columns of out (row stride out_ld). */
#define NMT_PATTN_MAX_SEG 4
typedef struct nmt_pattn_seg {
    nmt_buf q; uint32_t q_ld;      /* optional: the window's last tap */
    nmt_buf qx; uint32_t qx_ld, n_ext;
    nmt_buf k; uint32_t k_ld;
    nmt_buf v; uint32_t v_ld;
    uint64_t k_stride, v_stride;   /* key / value sequence m starts m * stride elements in */
    uint32_t lo;
} nmt_pattn_seg;
typedef struct nmt_pattn_args {
    uint32_t n_seq, lq, q_pos0, lk_max, group, n_heads, d_head;
    nmt_buf key_len; uint32_t key_len_const;
    int causal;
    uint32_t q_lo;
    uint32_t n_segs;
    nmt_pattn_seg seg[NMT_PATTN_MAX_SEG];
    /* optional (int): every segment's key and value at position p of
     * sequence m are those of sequence kv_row[p * kv_row_ld + m] (a beam's
     * rows reading the decoder caches where each position was written, as
     * nmt_attn_args.kv_row); only the fused kernel takes it
     * (nmt_ops_pattn_kv_row), elsewhere NMT_ERR_UNSUPPORTED */
    nmt_buf kv_row; uint32_t kv_row_ld;
    nmt_buf p;
    nmt_buf out; uint32_t out_ld;
} nmt_pattn_args;

static inline uint32_t nmt_pattn_n_win(const nmt_pattn_seg *g) { return g->n_ext + (g->q.mem != NULL); }

/* Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_pattn(nmt_ops *ops, const nmt_pattn_args *a);
/* 1 when nmt_op_pattn takes a kv_row table for heads of d_head (its fused
 * kernel: not NMT_ATTN_SPLIT, d_head <= 128, the phrase kernels enabled). */
int nmt_ops_pattn_kv_row(const nmt_ops *ops, uint32_t d_head);
/* The argument checks of nmt_op_pattn (and of its backward). */
nmt_status nmt_pattn_check(const nmt_pattn_args *a);

#endif
