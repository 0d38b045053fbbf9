/* SPDX-License-Identifier: MIT */
/* banmt_cfg.h — the declaration of the BA-NMT family (arch "banmt", issue
 * 17, docs/ARCHITECTURES.md "BA-NMT"): RNNsearch (bidirectional GRU
 * encoder, dl4mt conditional-GRU decoder with additive attention) with an
 * optional source (SA), target (TA) or bilingual (BA) history in the
 * attention.  Its hyper-parameters (the table in banmt_cfg.c), its tensors
 * (nmt_ba_catalogue) and the weight struct the catalogue fills; the
 * runtime (banmt.c), the trainer and the converter read this one
 * declaration.  Internal header. */
#ifndef NMT_BANMT_CFG_H
#define NMT_BANMT_CFG_H

#include "family.h"

#define NMT_BA_ARCH "banmt"
#define NMT_BA_MAX_DIM (1u << 16)

/* history: which histories enter the attention and the readout. */
enum { NMT_BA_NONE = 0, NMT_BA_SA = 1, NMT_BA_TA = 2, NMT_BA_BA = 3 };

typedef struct nmt_ba_cfg {
    /* read from the table */
    uint32_t src_vocab, tgt_vocab;
    uint32_t emb, hidden, att, readout, hist; /* E, H, A, R, Hs = Ht */
    int history;                              /* NMT_BA_* */
    int maxout;                               /* readout: max over pairs of 2R rows instead of tanh */
    uint32_t bos, eos, pad, unk;
    /* derived by finish() */
    int sa, ta;        /* source / target history present */
    uint32_t cat;      /* readout input width E + 2H + H (+ Hs) (+ Ht) */
} nmt_ba_cfg;

/* Column offsets of the readout's input [y; c; s_i; hsum; tsum]. */
static inline uint32_t nmt_ba_col_c(const nmt_ba_cfg *c) { return c->emb; }
static inline uint32_t nmt_ba_col_s(const nmt_ba_cfg *c) { return c->emb + 2 * c->hidden; }
static inline uint32_t nmt_ba_col_hs(const nmt_ba_cfg *c) { return c->emb + 3 * c->hidden; }
static inline uint32_t nmt_ba_col_ts(const nmt_ba_cfg *c) { return nmt_ba_col_hs(c) + (c->sa ? c->hist : 0); }
/* Rows of W_r: R, or 2R with maxout. */
static inline uint32_t nmt_ba_r_rows(const nmt_ba_cfg *c) { return c->maxout ? 2 * c->readout : c->readout; }

/* A GRU's weights: ih = W_ih [3h, in] with b_ih, hh = W_hh [3h, h] with
 * b_hh (gate order r, z, n; ops.h nmt_op_gru_cell). */
typedef struct nmt_ba_gru {
    nmt_lin ih, hh;
} nmt_ba_gru;

typedef struct nmt_ba_weights {
    nmt_lin src_emb;          /* [V_s, E] (.w only) */
    nmt_ba_gru enc_fw, enc_rev; /* in E, h H */
    nmt_lin tgt_emb;          /* [V_t, E] */
    nmt_lin init;             /* [H, 2H] + b: s_0 = tanh(W mean h + b) */
    nmt_ba_gru gru1;          /* in E, h H */
    nmt_lin att_q;            /* [A, H] + b: W_a s~_i */
    nmt_lin att_k;            /* [A, 2H], no bias: U_a h_j */
    nmt_lin att_v;            /* .w [A]: v_a */
    nmt_lin att_hs;           /* SA: [A, Hs], no bias: V_h */
    nmt_lin att_ts;           /* TA: [A, Ht], no bias: V_s */
    nmt_ba_gru gru2;          /* in 2H, h H */
    nmt_ba_gru hist_s;        /* SA: in 2H, h Hs */
    nmt_ba_gru hist_t;        /* TA: in H, h Ht */
    nmt_lin readout;          /* [R or 2R, cat] + b */
    nmt_lin out;              /* [V_t, R] + b */
} nmt_ba_weights;

#define NMT_BA_N_HPARAMS 13
/* `nmt-edge-convert random --arch banmt`'s defaults: a small model that opens. */
#define NMT_BA_RANDOM_ARGS "emb=16 hidden=16 src-vocab=64 tgt-vocab=64 bos-id=1 eos-id=2 unk-id=3"
extern const nmt_hparam nmt_ba_hparams[NMT_BA_N_HPARAMS];
extern const nmt_family nmt_family_banmt;
nmt_status nmt_ba_finish(void *cfg, uint64_t present, char *why, size_t why_cap);
void nmt_ba_info(const void *cfg, nmt_model_info *info);

/* Every tensor in file order (family.h: nmt_family.catalogue); `w` (may be
 * NULL) is an nmt_ba_weights. */
nmt_status nmt_ba_catalogue(const void *cfg, void *w, nmt_tensor_fn fn, void *ctx);

#endif
