/* SPDX-License-Identifier: MIT */
/* transformer_cfg.h — the declaration of the Transformer / HySAN family
 * (docs/ARCHITECTURES.md): its hyper-parameters (the table in
 * transformer_cfg.c), its tensors (nmt_tf_catalogue) and the weight struct
 * the catalogue fills.  The runtime (transformer.c), the trainer
 * (tf_train.c) and the converter (writer/random_model.c) all read this one
 * declaration.  Internal header. */
#ifndef NMT_TRANSFORMER_CFG_H
#define NMT_TRANSFORMER_CFG_H

#include "family.h"
#include "ops_phrase.h"

enum { NMT_TF_FUSE_SUM = 0, NMT_TF_FUSE_CONCAT = 1, NMT_TF_FUSE_GATE = 2 };

/* The metadata value of "arch" for this family (vanilla Transformer and
 * HySAN alike: the branches say which). */
#define NMT_TF_ARCH "transformer"
#define NMT_TF_MAX_LAYERS 64
#define NMT_TF_MAX_DIM (1u << 16)
#define NMT_TF_BRANCH_TEXT 96
/* MG-SA (arch "mgsa", issue 15): the same configuration and weights plus
 * phrase heads in chosen encoder layers (docs/ARCHITECTURES.md). */
#define NMT_MGSA_ARCH "mgsa"
#define NMT_MG_TEXT 160
#define NMT_MG_MAX_GROUPS 8
#define NMT_MG_MAX_N 64

/* mg_compose (COM of a phrase's tokens): max-pooling, self-attention
 * inside the phrase then max-pooling, or the last state of an LSTM over
 * the phrase. */
enum { NMT_MG_COM_MAX = 0, NMT_MG_COM_SAN = 1, NMT_MG_COM_LSTM = 2 };

/* mg_interact (REC over a phrase sequence): none, an LSTM, or an ON-LSTM
 * (ordered neurons, master gates over chunks of mg_chunk units). */
enum { NMT_MG_REC_NONE = 0, NMT_MG_REC_LSTM = 1, NMT_MG_REC_ONLSTM = 2 };

/* A run of adjacent heads with one partition: n = 0 word (tokens), else
 * n-gram phrases of n tokens; syntax: the caller's phrase spans (n = 1:
 * up to one phrase per token). */
typedef struct nmt_mg_group {
    uint32_t h0, nh, n, syntax;
} nmt_mg_group;

/* Phrase-based attention (arch "phrase", issue 16): per attention kind
 * (NMT_PH_ENC self, NMT_PH_DEC self, NMT_PH_CROSS) a method, a structure
 * and its n-gram segments.  Homogeneous: segment g is heads [h0, h0 + nh)
 * attending to n-gram keys (left-padded); heterogeneous: every segment
 * has all heads, one softmax over the n-gram types' keys together. */
#define NMT_PH_ARCH "phrase"
#define NMT_PH_TEXT 32
#define NMT_PH_MAX_N 9
enum { NMT_PH_ENC = 0, NMT_PH_DEC = 1, NMT_PH_CROSS = 2, NMT_PH_KINDS = 3 };
enum { NMT_PH_NONE = 0, NMT_PH_CONVKV = 1, NMT_PH_QUERYK = 2 };
/* Interleaved: heterogeneous unigram + bigram keys attended by unigram
 * queries and by bigram queries (a convolution of two query inputs), the
 * two outputs interleaved and mapped back to one per position by W_o (a
 * window-3 stride-2 convolution over (0, u1, b1, u2, ..., u_N, 0) in the
 * encoder, window 2 stride 2 over (0, u1, b1, ..., u_N) in the decoder):
 * position j's output is W_o [b_j; u_j (; b_{j+1})], b_j the bigram query
 * ending at j (b_0 = 0). */
enum { NMT_PH_HOMO = 0, NMT_PH_HETERO = 1, NMT_PH_INTER = 2 };
typedef struct nmt_ph_seg {
    uint32_t n, h0, nh;
} nmt_ph_seg;
typedef struct nmt_ph_kind {
    int method, structure;
    uint32_t n_segs, n_max;
    nmt_ph_seg seg[NMT_PATTN_MAX_SEG];
} nmt_ph_kind;

typedef struct nmt_tf_cfg {
    /* read from the table */
    uint32_t d, heads, ff, enc_layers, dec_layers, src_vocab, tgt_vocab, gate_r;
    int pre_norm, shared_emb, tied_out, fusion; /* pre_norm: index in {post, pre}; fusion: NMT_TF_FUSE_* */
    float eps, emb_scale;
    char enc_br_text[NMT_TF_BRANCH_TEXT], dec_br_text[NMT_TF_BRANCH_TEXT];
    uint32_t bos, eos, pad, unk;
    int ffn_act;          /* index in {relu, gelu, swish}: NMT_ACT_* - 1 (ops.h) */
    int pos_enc;          /* index in {sinusoid, sinusoid-2i, sinusoid-interleaved, none}: NMT_POS_* */
    uint32_t pos_offset;  /* position of the first token */
    int out_bias, src_eos; /* a logits bias (out_bias tensor); eos_id appended to sources */
    int gate_shared;      /* gate: index in {branch, shared}: one squeeze gate per sub-layer */
    /* MG-SA only (zero for arch "transformer"): the table's suffix */
    char mg_layers_text[NMT_MG_TEXT], mg_heads_text[NMT_MG_TEXT];
    int mg_compose, mg_interact;  /* indices into their choices (NMT_MG_COM_*; NMT_MG_REC_*) */
    uint32_t mg_chunk;            /* ON-LSTM chunk size */
    uint32_t mg_fallback;         /* syntax heads: n-gram size for a sentence without spans */
    /* phrase-based attention only (zero otherwise): its table's suffix */
    char ph_text[NMT_PH_KINDS][NMT_PH_TEXT];
    /* derived by finish() */
    uint32_t dh;
    uint32_t n_enc_br, n_dec_br;
    nmt_branch enc_br[NMT_MAX_BRANCHES], dec_br[NMT_MAX_BRANCHES];
    uint64_t mg_mask;           /* bit l: encoder layer l (0-based) has phrase heads */
    uint32_t mg_n_groups;       /* runs of heads with one partition, in head order */
    nmt_mg_group mg_group[NMT_MG_MAX_GROUPS];
    nmt_ph_kind ph[NMT_PH_KINDS]; /* method NMT_PH_NONE: the Transformer's attention */
} nmt_tf_cfg;

/* The phrase configuration of sub-layer kind (self / cross) of the encoder
 * or decoder, or NULL when it is the Transformer's attention. */
static inline const nmt_ph_kind *nmt_ph_of(const nmt_tf_cfg *c, int dec, int cross) {
    const nmt_ph_kind *k = &c->ph[cross ? NMT_PH_CROSS : dec ? NMT_PH_DEC : NMT_PH_ENC];
    return k->method == NMT_PH_NONE ? NULL : k;
}
/* Width of a segment's extra taps: homogeneous segments add n - 1 taps to
 * the Transformer's (the current position), heterogeneous n-gram segments
 * (n >= 2) have all n of their own. */
static inline uint32_t nmt_ph_taps(const nmt_ph_kind *k, const nmt_ph_seg *g) {
    return k->structure == NMT_PH_HOMO ? g->n - 1 : g->n;
}
/* Interleaved: the width of W_o's input (encoder 3d, decoder and cross 2d). */
static inline uint32_t nmt_ph_o_in(const nmt_ph_kind *k, uint32_t d, int dec) {
    return k != NULL && k->structure == NMT_PH_INTER ? (dec ? 2 * d : 3 * d) : d;
}
/* Whether segment g has weights of its own (a homogeneous unigram group
 * and the heterogeneous unigram segment are the Transformer's). */
static inline int nmt_ph_own(const nmt_ph_seg *g) { return g->n >= 2; }

/* The ON-LSTM chunk of the interaction (0: LSTM or none) and the width of
 * its gate rows: 4d (+ 2 d / chunk master gates). */
static inline uint32_t nmt_mg_rec_chunk(const nmt_tf_cfg *c) {
    return c->mg_interact == NMT_MG_REC_ONLSTM ? c->mg_chunk : 0;
}
static inline uint32_t nmt_mg_rec_gates(const nmt_tf_cfg *c) {
    const uint32_t ch = nmt_mg_rec_chunk(c);
    return 4 * c->d + (ch ? 2 * (c->d / ch) : 0);
}

/* Whether some head takes the caller's phrase spans. */
static inline int nmt_mg_has_syntax(const nmt_tf_cfg *c) {
    for (uint32_t g = 0; g < c->mg_n_groups; g++)
        if (c->mg_group[g].syntax) return 1;
    return 0;
}

/* Whether encoder layer l has phrase heads. */
static inline int nmt_mg_layer(const nmt_tf_cfg *c, uint32_t l) { return l < 64 && (c->mg_mask >> l & 1); }

/* One residual sub-layer's weights.  Self-attention: qkv (fused q|k|v
 * [3d, d]), o ([d, d], or [d, nbr*d] for concat), gate g1[b] [d/r, d] /
 * g2[b] [d, d/r]; cross-attention: q [d, d], kv (fused k|v [2d, d]), o;
 * FFN: fc1 [d_ff, d], fc2 [d, d_ff]; ln: the norm around it (w = gain). */
typedef struct nmt_tf_sub_w {
    nmt_lin qkv, o, q, kv, fc1, fc2, ln;
    nmt_lin g1[NMT_MAX_BRANCHES], g2[NMT_MAX_BRANCHES];
    nmt_lin mg_ih, mg_hh;  /* MG-SA (ON-)LSTM interaction: [G, d] + bias, [G, d] (nmt_mg_rec_gates) */
    nmt_lin mg_cqkv;       /* MG-SA SAN composition: fused q|k|v [3d, d] + bias */
    nmt_lin mg_com_ih, mg_com_hh; /* MG-SA LSTM composition: [4d, d] + bias, [4d, d] */
    /* phrase-based attention, per segment with n >= 2 (w = nh * d_head;
     * homogeneous: taps n - 1, no bias; heterogeneous: taps n, w = d,
     * bias): ConvKV ph_kv [2w, taps d]; QueryK ph_q [taps w, d] (rows
     * head-major: head, tap, column) and ph_v [w, taps d] */
    nmt_lin ph_kv[NMT_PATTN_MAX_SEG], ph_q[NMT_PATTN_MAX_SEG], ph_v[NMT_PATTN_MAX_SEG];
    /* interleaved: the bigram queries over windows of two query inputs,
     * ph_qb [d, 2d] (ConvKV: for both key types; QueryK: for the unigram
     * keys) and QueryK's ph_qb2 [2d, 2d] (2-tap kernels for the bigram
     * keys, rows head-major); o is [d, 3d] (encoder) or [d, 2d] */
    nmt_lin ph_qb, ph_qb2;
} nmt_tf_sub_w;

/* Sub-layer k of the stacks: encoder layer l has 2l (self) and 2l+1 (FFN);
 * decoder layer l has E+3l (self), E+3l+1 (cross), E+3l+2 (FFN), E = 2 *
 * enc_layers. */
typedef enum { NMT_TF_SUB_SELF, NMT_TF_SUB_CROSS, NMT_TF_SUB_FFN } nmt_tf_sub_kind;

static inline uint32_t nmt_tf_n_sub(const nmt_tf_cfg *c) { return 2 * c->enc_layers + 3 * c->dec_layers; }
static inline uint32_t nmt_tf_n_enc_sub(const nmt_tf_cfg *c) { return 2 * c->enc_layers; }
static inline int nmt_tf_sub_is_dec(const nmt_tf_cfg *c, uint32_t k) { return k >= 2 * c->enc_layers; }
static inline nmt_tf_sub_kind nmt_tf_sub_kind_of(const nmt_tf_cfg *c, uint32_t k) {
    if (k < 2 * c->enc_layers) return k % 2 ? NMT_TF_SUB_FFN : NMT_TF_SUB_SELF;
    return (nmt_tf_sub_kind)((k - 2 * c->enc_layers) % 3);
}

typedef struct nmt_tf_weights {
    nmt_lin src_emb, tgt_emb, out;  /* .w only; aliased when shared / tied */
    nmt_lin enc_ln, dec_ln;         /* final norms (pre-norm only) */
    nmt_lin out_b;                  /* .w: the logits bias [tgt_vocab] (output_bias only) */
    nmt_tf_sub_w *sub;              /* [nmt_tf_n_sub], the caller's memory */
} nmt_tf_weights;

extern const nmt_family nmt_family_transformer;

/* The family's declaration (transformer_cfg.c), for the record in
 * transformer.c: the hyper-parameter table and its hooks. */
#define NMT_TF_N_HPARAMS 26
/* MG-SA's table is the Transformer's followed by its own keys: the
 * Transformer record reads the first NMT_TF_N_HPARAMS entries, the MG-SA
 * record all NMT_MGSA_N_HPARAMS, so no key is written twice. */
#define NMT_MGSA_N_HPARAMS (NMT_TF_N_HPARAMS + 6)
/* The phrase-based attention's table: the Transformer's keys (the same
 * entries, spelled once in transformer_cfg.c) and its own three. */
#define NMT_PH_N_HPARAMS (NMT_TF_N_HPARAMS + 3)
/* `nmt-edge-convert random`'s defaults for both records (nmt_family.
 * random_args): a 2 + 2 layer model of width 32 that opens. */
#define NMT_TF_RANDOM_ARGS \
    "d-model=32 heads=4 ff=64 enc-layers=2 dec-layers=2 src-vocab=64 tgt-vocab=64 bos-id=1 eos-id=2 unk-id=3"
extern const nmt_hparam nmt_tf_hparams[NMT_MGSA_N_HPARAMS];
extern const nmt_family nmt_family_mgsa;
extern const nmt_hparam nmt_ph_hparams[NMT_PH_N_HPARAMS];
extern const nmt_family nmt_family_phrase;
nmt_status nmt_tf_finish(void *cfg, uint64_t present, char *why, size_t why_cap);
void nmt_tf_info(const void *cfg, nmt_model_info *info);

/* Every tensor in file order (family.h: nmt_family.catalogue); `w` (may be
 * NULL) is an nmt_tf_weights whose sub array has nmt_tf_n_sub entries.
 * After the walk tgt_emb / out alias src_emb / tgt_emb when shared / tied. */
nmt_status nmt_tf_catalogue(const void *cfg, void *w, nmt_tensor_fn fn, void *ctx);

/* A branch list as the metadata writes it ("global fw bw local:3"). */
void nmt_tf_branches_str(const nmt_branch *br, uint32_t n, char *buf, size_t cap);

#endif
