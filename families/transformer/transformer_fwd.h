/* SPDX-License-Identifier: MIT */
/* transformer_fwd.h — the one forward pass of the Transformer / HySAN family
 * (docs/ARCHITECTURES.md), written against runtime/ops/layers.h and the op
 * layer.  Three callers, one code path:
 *   - incremental decoding (transformer.c: step with the K/V cache),
 *   - teacher-forced scoring (transformer.c: decode_full + project),
 *   - training (tf_train.c), which keeps every sub-layer's activations in
 *     its own buffers (for its backward, tf_train_bwd.c) and adds dropout.
 * Where activations go is the caller's choice through `acts`: the runtime
 * hands every sub-layer the same scratch buffers, the trainer distinct ones.
 * Internal header. */
#ifndef NMT_TRANSFORMER_FWD_H
#define NMT_TRANSFORMER_FWD_H

#include "layers.h"
#include "ops_attn.h"
#include "ops_phrase.h"
#include "transformer_cfg.h"

/* Buffers of one sub-layer (rows = sequences * positions). */
typedef struct nmt_tf_acts {
    nmt_buf x;    /* (rows, d) input */
    nmt_buf out;  /* (rows, d) output; may be x (in place) */
    nmt_buf h;    /* (rows, d) pre-norm: LN(x) */
    nmt_buf t;    /* (rows, d) F's output (before the residual); not written by a
                     step whose sub-layer fuses its norm (nmt_tf_fwd.fuse_norm) */
    nmt_buf qkv;  /* self: (rows, 3d) q|k|v; cross: (rows, d) q */
    nmt_buf ctx;  /* (rows, nbr*d) attention output per branch */
    nmt_buf fused;                       /* gate: (rows, d) gated sum */
    nmt_buf gh[NMT_MAX_BRANCHES];        /* gate: (rows, d/r) hidden */
    nmt_buf g[NMT_MAX_BRANCHES];         /* gate: (rows, d) logits */
    nmt_buf ffh;  /* FFN: (rows, d_ff) */
    nmt_buf ffp;  /* FFN with GELU or swish: fc1's output before the activation (rows, d_ff), or NULL:
                     ffh takes it and the activation runs in place (inference) */
    nmt_buf kv;   /* cross: (source rows, 2d) k|v of the memory; self step: the K|V cache */
    nmt_buf kv_row; uint32_t kv_row_ld; /* self step, optional: the beam's K|V table (ops.h
                                           nmt_attn_args.kv_row; transformer.c) */
    /* MG-SA encoder layers, per head group g with phrases (mg_group[g].n > 0;
     * m = n_sent * ceil(len / n) phrase rows, w = mg_group[g].nh * d_head): */
    nmt_buf mg_seg[NMT_MG_MAX_GROUPS];  /* int (m, 2) spans (ops.h nmt_op_ngram_spans) */
    nmt_buf mg_cnt[NMT_MG_MAX_GROUPS];  /* int (n_sent) phrases per sentence */
    nmt_buf mg_hg[NMT_MG_MAX_GROUPS];   /* (m, d) phrase memory H_g = REC(max-pool of the input) */
    nmt_buf mg_pool[NMT_MG_MAX_GROUPS]; /* REC (ON-)LSTM: (m, d) the pooled phrases G (else H_g is G) */
    nmt_buf mg_z[NMT_MG_MAX_GROUPS];    /* REC: (m, nmt_mg_rec_gates) gates */
    nmt_buf mg_c[NMT_MG_MAX_GROUPS];    /* REC: (m, d) cells */
    nmt_buf mg_kv[NMT_MG_MAX_GROUPS];   /* (m, 2w) the group's k | v of H_g */
    nmt_buf mg_arg[NMT_MG_MAX_GROUPS];  /* training: int (m, d) argmax rows; else absent */
    nmt_buf mg_cqkv;                    /* COM san: (rows, 3d) q|k|v of the composition's attention */
    nmt_buf mg_cctx[NMT_MG_MAX_GROUPS]; /* COM san: (rows, d) its output inside group g's phrases */
    /* COM lstm, per group: the phrases as sequences of n steps (p = m * n rows) */
    nmt_buf mg_ptok[NMT_MG_MAX_GROUPS]; /* (p, d) each phrase's tokens, zero rows past it */
    nmt_buf mg_pcnt[NMT_MG_MAX_GROUPS]; /* int (m) phrase lengths */
    nmt_buf mg_pz[NMT_MG_MAX_GROUPS];   /* (p, 4d) gates */
    nmt_buf mg_pc[NMT_MG_MAX_GROUPS];   /* (p, d) cells */
    nmt_buf mg_ph[NMT_MG_MAX_GROUPS];   /* (p, d) states */
    /* phrase-based attention sub-layers (transformer_cfg.h nmt_ph_kind),
     * per segment g with weights of its own: */
    nmt_buf ph_cols;                    /* scratch: window rows (rows, n_max * d) */
    nmt_buf ph_qx[NMT_PATTN_MAX_SEG];   /* QueryK: (rows, taps * w) the extra query taps */
    nmt_buf ph_kv[NMT_PATTN_MAX_SEG];   /* heterogeneous: the segment's k | v (ConvKV, 2d) or v (QueryK, d)
                                           rows; decoder self step: its cache (rows, cache_len, 2d); cross:
                                           those of the memory (source rows) */
    nmt_buf ph_win, ph_win_prev;        /* decoder self step: the window of the last n_max inputs (rows,
                                           n_max * d) of this step and of the last (interleaved cross:
                                           of its query inputs) */
    nmt_buf ph_qb, ph_qbx;              /* interleaved: bigram queries (rows, d) and QueryK's bigram
                                           kernels (rows, 2d) */
} nmt_tf_acts;

typedef struct nmt_tf_fwd {
    nmt_ops *ops;
    const nmt_tf_cfg *c;
    const nmt_tf_weights *w;
    nmt_buf scores, stats;  /* attention scratch */
    /* The buffers of sub-layer k (transformer_cfg.h numbering). */
    void (*acts)(void *user, uint32_t k, nmt_tf_acts *out);
    /* Training only (NULL at inference): dropout on n floats of x at site
     * (0 source embedding, 1 target embedding, 2 + k sub-layer k). */
    nmt_status (*drop)(void *user, nmt_buf x, uint32_t n, uint64_t site);
    /* Inference only (0 in training, whose backward reads every sub-layer's
     * t, gh and g): a post-norm sub-layer may run its last product, residual
     * and norm as one launch (nmt_layer_linear_norm), leaving t unwritten,
     * and a branch's squeeze gate as one (nmt_layer_gate), leaving gh and g
     * unwritten. */
    int fuse_norm;
    void *user;
} nmt_tf_fwd;

/* One pass over a stack. */
typedef struct nmt_tf_pass {
    uint32_t n, len;     /* sequences and positions per sequence (a step: len 1) */
    nmt_buf key_len;     /* int [n]: source lengths (encoder self-attention, cross-attention) */
    uint32_t group;      /* decoder: query sequence s reads source sentence s / group */
    uint32_t src_len;    /* decoder: padded source length of the memory */
    int step;            /* decoder: one incremental step at position t */
    uint32_t t;
    uint32_t cache_len;  /* step: positions per row of the K|V cache */
    /* step, optional: alignment rows [n, align_ld] of the cross-attention
     * of sub-layer align_k (ops.h nmt_op_attn_align; head align_head,
     * 1-based, 0 = mean over heads); absent (mem NULL): none */
    nmt_buf align;
    uint32_t align_k, align_head, align_ld;
} nmt_tf_pass;
/* (MG-SA syntax heads read their phrase spans and counts from acts
 * mg_seg / mg_cnt, filled by the caller before the encoder runs.) */

/* Embedding of rows tokens into out, then dropout at `site`. */
nmt_status nmt_tf_embed(const nmt_tf_fwd *fw, const nmt_lin *E, nmt_buf tok, uint32_t rows, uint32_t seq_len,
                        uint32_t pos0, nmt_buf out, uint64_t site);

/* Encoder sub-layers over acts(0).x; pre-norm: final norm into `out`. */
nmt_status nmt_tf_encoder(const nmt_tf_fwd *fw, const nmt_tf_pass *p, nmt_buf out);

/* Every decoder layer's cross-attention k|v of the memory (p: its n
 * sentences of len positions, key_len their lengths) into its acts(k).kv
 * (and the phrase attention's memory segments into acts(k).ph_kv). */
nmt_status nmt_tf_cross_kv(const nmt_tf_fwd *fw, nmt_buf memory, const nmt_tf_pass *p);

/* Decoder sub-layers over acts(E).x; pre-norm: final norm into `out`. */
nmt_status nmt_tf_decoder(const nmt_tf_fwd *fw, const nmt_tf_pass *p, nmt_buf out);

/* logits[rows, tgt_vocab] = y W_out^T. */
nmt_status nmt_tf_logits(const nmt_tf_fwd *fw, nmt_buf y, uint32_t rows, nmt_buf logits);

/* MG-SA: phrase rows per sentence of head group g for `len` positions. */
static inline uint32_t nmt_mg_m_cap(const nmt_tf_cfg *c, uint32_t g, uint32_t len) {
    const uint32_t n = c->mg_group[g].n;
    return n ? (len + n - 1) / n : 0;
}

/* The attention arguments of an MG-SA encoder self-attention's head group
 * g (the forward's, for the backward): its heads' queries, and keys/values
 * of the tokens (word heads) or of the phrase memory. */
void nmt_mg_group_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p, uint32_t g,
                       nmt_attn_args *out);

/* MG-SA's SAN composition of head group g (n-gram phrases of n tokens):
 * the attention of every token over the tokens of its phrase (branch
 * NMT_BRANCH_BLOCK of size n), all heads, reading acts->mg_cqkv, writing
 * acts->mg_cctx[g]. */
void nmt_mg_compose_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p, uint32_t g,
                         nmt_attn_args *out);

/* Phrase-based attention (transformer_phrase.c).  A sub-layer runs
 * nmt_ph_calls attention calls: one per head group (homogeneous), one
 * over every segment (heterogeneous), or the unigram then the bigram
 * queries' (interleaved). */
static inline uint32_t nmt_ph_calls(const nmt_ph_kind *pk) {
    return pk->structure == NMT_PH_HOMO ? pk->n_segs : pk->structure == NMT_PH_INTER ? 2 : 1;
}
/* F of a phrase sub-layer (self, or cross when `cross`) over `in` into
 * a->t. */
nmt_status nmt_ph_attn(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, const nmt_ph_kind *pk,
                       int dec, int cross, const nmt_tf_pass *p, nmt_buf in);
/* The memory side of a phrase cross-attention: its segments' keys/values
 * (after the Transformer's k|v of the memory in a->kv). */
nmt_status nmt_ph_cross_kv(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, const nmt_ph_kind *pk,
                           nmt_buf memory, const nmt_tf_pass *p);
/* The arguments of attention call i < nmt_ph_calls of a phrase sub-layer
 * (the forward's; the backward takes them). */
void nmt_ph_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_ph_kind *pk, int dec, int cross,
                 const nmt_tf_pass *p, uint32_t i, nmt_pattn_args *o);
/* Interleaved: window rows of two query inputs (positions j - 1, j) of
 * `in` into a->ph_cols (stride 2d), and of the encoder's output pairs
 * (b_j | u_j, b_{j+1} | u_{j+1}) of a->ctx into a->ph_cols (stride 4d). */
nmt_status nmt_ph_bigram_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, int dec, const nmt_tf_pass *p,
                                nmt_buf in);
nmt_status nmt_ph_out_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p);
/* Window rows of `x` for segment g: row s * len + j holds the taps of the
 * positions ending at j (homogeneous: before j) of x rows s * len + .
 * (len: the pass's, or the source's for cross); into a->ph_cols, stride
 * taps * d (the backward recomputes them). */
nmt_status nmt_ph_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_ph_kind *pk, uint32_t g, nmt_buf x,
                         uint32_t n_seq, uint32_t len, nmt_buf key_len);

/* The attention arguments of a full self-attention sub-layer and of a
 * cross-attention sub-layer (the forward's; the backward takes them as its
 * `fwd`). */
void nmt_tf_self_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, int dec, const nmt_tf_pass *p,
                      nmt_attn_args *out);
void nmt_tf_cross_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p, nmt_attn_args *out);

#endif
