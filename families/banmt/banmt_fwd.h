/* SPDX-License-Identifier: MIT */
/* banmt_fwd.h — the one forward pass of the BA-NMT family
 * (docs/ARCHITECTURES.md "BA-NMT"), written against runtime/ops/layers.h and
 * the op layer.  Three callers, one code path:
 *   - incremental decoding (banmt.c: step over beam rows, state reordered),
 *   - teacher-forced scoring (banmt.c: decode_full loops the same step
 *     over positions, keeping each position's readout for project),
 *   - training (the trainer), which gives every step its own activation
 *     buffers through `acts` (for backpropagation through time) and sets
 *     `drop`.
 * Internal header. */
#ifndef NMT_BANMT_FWD_H
#define NMT_BANMT_FWD_H

#include "banmt_cfg.h"
#include "layers.h"
#include "ops_attn.h"
#include "ops_rec.h"

/* Encoder buffers of n sentences padded to L positions (row m * L + j). */
typedef struct nmt_ba_enc_acts {
    nmt_buf x;       /* (n*L, E) source embeddings */
    nmt_buf zf, zb;  /* (n*L, 5H) forward / reverse GRU gates (nmt_layer_gru z) */
    nmt_buf hg;      /* (n, 3H) scratch */
    nmt_buf state;   /* (n, H) scratch: the last states */
    nmt_buf h;       /* (n*L, 2H) h_j = [fwd; bwd], zero rows past a sentence */
    nmt_buf k;       /* (n*L, A) U h_j */
    nmt_buf ps;      /* SA: (n*L, 3Hs) h_j W_ih^S^T (no bias); else absent */
    nmt_buf mean_a;  /* (n, L) the mean's weights 1 / len (0 past it) */
    nmt_buf mean;    /* (n, 2H) mean of h_j over j < len */
    nmt_buf s0;      /* (n, H) s_0 = tanh(W_init mean + b_init) */
    nmt_buf zero;    /* (1) a float 0 (the mean as additive attention with v = 0) */
} nmt_ba_enc_acts;

/* Buffers of decoder step t (rows = the pass's rows).  prev / next pairs
 * may be the same buffer (in place: the runtime) or distinct (the
 * trainer keeps every step's). */
typedef struct nmt_ba_acts {
    nmt_buf s_prev; uint32_t s_prev_ld; /* (rows, H) s_{i-1}: read */
    nmt_buf s_next;                     /* optional (rows, H): receives a copy of s_i (last) */
    nmt_buf hs_prev, hs_next;           /* SA: (rows*L, Hs) h~^{i-1} (read when t > 0), h~^i (written) */
    nmt_buf ts_prev, ts_next;           /* TA: (rows*L, Ht) s~^{i-1}, s~^i likewise */
    nmt_buf cat;                        /* (rows, cat) [y; c; s_i; hsum; tsum]: y_{i-1} in columns
                                           [0, E) before the call (nmt_ba_embed), the rest written */
    nmt_buf z1, hg1;                    /* (rows, 5H) GRU1 gates; (rows, 3H) its recurrent product */
    nmt_buf st;                         /* (rows, H) s~_i (GRU1's state) */
    nmt_buf q;                          /* (rows, A) W_q s~_i + b_q */
    nmt_buf e1, e2;                     /* SA / TA, t > 0: (rows*L, A) V_h h~^{i-1}, V_s s~^{i-1} */
    nmt_buf alpha;                      /* (rows, L) attention */
    nmt_buf z2, hg2;                    /* GRU2 like GRU1 (may be z1, hg1 at inference) */
    nmt_buf zs, hgs;                    /* SA: (rows*L, 5Hs) history GRU gates, (rows*L, 3Hs) */
    nmt_buf pt;                         /* TA: (rows, 3Ht) s_{i-1} W_ih^T,T (no bias) */
    nmt_buf zt, hgt;                    /* TA: (rows*L, 5Ht), (rows*L, 3Ht) */
    nmt_buf u;                          /* (rows, R or 2R) readout pre-activation */
    nmt_buf t; uint32_t t_ld;           /* (rows, R) readout t_i (training: t_ld = R) */
} nmt_ba_acts;

typedef struct nmt_ba_fwd {
    nmt_ops *ops;
    const nmt_ba_cfg *c;
    const nmt_ba_weights *w;
    /* The buffers of decoder step t. */
    void (*acts)(void *user, uint32_t t, nmt_ba_acts *out);
    /* Training only (NULL at inference): dropout on n floats of x at site
     * (0: the readout t_i of step `t` is site 1 + t). */
    nmt_status (*drop)(void *user, nmt_buf x, uint32_t n, uint64_t site);
    void *user;
} nmt_ba_fwd;

/* One decoder step over `rows` rows; row b reads sentence b / group. */
typedef struct nmt_ba_pass {
    uint32_t rows, group, t;  /* t = 0: h~^0 = s~^0 = 0 (their prev buffers are not read) */
    uint32_t src_len;         /* L: padded source length of the encoder pass */
    nmt_buf key_len;          /* int [rows / group]: source lengths (EOS included) */
    nmt_buf mask;             /* int [rows * L]: 1 where j < the row's length (history updates);
                                 NMT_NO_BUF: every position steps */
    /* the encoder's outputs (nmt_ba_enc_acts h, k, ps) */
    nmt_buf h, k, ps;
    nmt_buf align; uint32_t align_ld; /* optional (rows, align_ld): receives alpha */
} nmt_ba_pass;

/* Embeddings without position terms: out row r (stride ld) = E[tok[r]]. */
nmt_status nmt_ba_embed(const nmt_ba_fwd *fw, const nmt_lin *E, nmt_buf tok, uint32_t rows, nmt_buf out,
                        uint32_t ld);

/* Encoder over n sentences of L positions (tokens src_tok [n*L], lengths
 * len [n] incl. EOS): h, k, ps (SA) and s0 of a. */
nmt_status nmt_ba_encoder(const nmt_ba_fwd *fw, const nmt_ba_enc_acts *a, nmt_buf src_tok, nmt_buf len, uint32_t n,
                          uint32_t L);

/* Decoder step p->t: acts(t) in, logits-ready t_i out (nmt_ba_logits). */
nmt_status nmt_ba_step(const nmt_ba_fwd *fw, const nmt_ba_pass *p);

/* logits [rows, tgt_vocab] = t W_o^T + b_o (t rows ld apart). */
nmt_status nmt_ba_logits(const nmt_ba_fwd *fw, nmt_buf t, uint32_t ld, uint32_t rows, nmt_buf logits);

/* The additive-attention arguments of step p with acts a (the forward's;
 * the backward takes them). */
void nmt_ba_attn_args(const nmt_ba_fwd *fw, const nmt_ba_acts *a, const nmt_ba_pass *p, nmt_additive_args *o);

#endif
