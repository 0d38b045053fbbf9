/* SPDX-License-Identifier: MIT */
/* tf_train_internal.h — the trainer model's private layout, shared by
 * tf_train.c (catalogue, buffers, forward, steps) and tf_train_bwd.c (the
 * backward pass).  Not part of tf_train.h's interface. */
#ifndef NMT_TF_TRAIN_INTERNAL_H
#define NMT_TF_TRAIN_INTERNAL_H

#include "param_store.h"
#include "tf_train.h"
#include "transformer_fwd.h"

typedef nmt_tf_cfg tft_cfg;

enum { SUB_SELF = NMT_TF_SUB_SELF, SUB_CROSS = NMT_TF_SUB_CROSS, SUB_FFN = NMT_TF_SUB_FFN };

/* One residual sub-layer: its parameters (views into P) and the activations
 * the forward keeps for the backward (nmt_tf_acts: its own buffers). */
typedef struct sub_desc {
    int kind, dec;
    const nmt_tf_sub_w *w;
    nmt_tf_acts a;
} sub_desc;

struct tft_model {
    nmt_device *dev;
    const nmt_family *fam;   /* nmt_family_transformer or nmt_family_mgsa */
    tft_cfg c;
    tft_limits lim;
    nmt_ops ops;
    nmt_train_ops t;
    int ops_ok, t_ok;
    nmt_pstore ps;           /* parameters P, gradients G, Adam moments M, V and their table */
    cl_mem *mems;            /* every other device buffer */
    size_t n_mems, cap_mems;
    nmt_tf_weights w;        /* views into P (the catalogue's struct) */
    nmt_tf_fwd fw;           /* the shared forward over this model's buffers */
    float drop_p;            /* dropout of the running forward */
    uint64_t drop_seed;
    sub_desc *subs;          /* encoder sub-layers, then decoder ones */
    uint32_t n_enc_sub, n_dec_sub;
    nmt_buf enc_top, enc_out, dec_top, y_fin;
    nmt_buf h, scores, stats, probs, dstats, logits, loss, nll, partial, red;
    nmt_buf g_a, g_b, dtmp, dh, dqkv, dctx, dfused, dgh, dg, dffn, dkv, d_enc, lnstats;
    nmt_buf d_hg, d_kvg;     /* MG-SA: gradients of a phrase memory and its k|v */
    nmt_buf d_pool, d_z, d_c, d_m; /* MG-SA (ON-)LSTM interaction: of the pooled phrases, gates, carried
                                      cell, ON-LSTM's per-unit master parts */
    nmt_buf d_cctx, d_cqkv, d_cqkv_sum; /* MG-SA SAN composition: of its output, q|k|v (a group's, summed) */
    nmt_buf d_ph, d_pz, d_pc, d_ptok;   /* MG-SA LSTM composition: of its states, gates, carried cell, tokens */
    nmt_buf ph_cols, d_cols;            /* phrase attention: window rows (every sub-layer's scratch), their gradient */
    nmt_buf d_phqx[NMT_PATTN_MAX_SEG], d_phkv[NMT_PATTN_MAX_SEG]; /* gradients of a sub-layer's ph_qx, ph_kv */
    nmt_buf d_qb, d_qbx;                /* interleaved: gradients of the bigram queries */
    nmt_buf src_tok, tgt_in, tgt_out, klen, perm_s, seg_s, segtok_s, perm_t, seg_t, segtok_t;
    int32_t *h_src, *h_tin, *h_tout, *h_klen, *h_perm, *h_seg, *h_segtok;
    uint32_t *h_count;
    int32_t *h_syn_seg, *h_syn_cnt; /* MG-SA syntax heads: a batch's partition (max_tokens, 2), (max_seqs) */
    /* MG-SA tag supervision (tf_train_tag.c): W_t, b_t views per encoder
     * layer, tag logits per layer (enc_layers, max_tokens, labels), targets
     * per phrase row (-1: not a span), per-row loss */
    nmt_lin *tag;
    nmt_buf tag_logits, tag_tgt, tag_loss;
    int32_t *h_tag;
    uint32_t tag_n; /* labelled phrases of the batch */
    int tag_on;     /* the tag loss's gradient is in tag_logits (this step) */
    float *h_nll;
    uint32_t n, S, T; /* the current batch */
};

static const nmt_buf NO_BUF = {NULL, 0};

/* The gradient of a parameter view (the same slice of G as of P). */
static inline nmt_buf GB(const tft_model *m, nmt_buf p) { return nmt_buf_at(m->ps.G, p.off); }

/* Attention arguments of a self-/cross-attention sub-layer for the current
 * batch (the forward's; the backward takes them as its `fwd`). */
void tft_attn_self_args(const tft_model *m, const sub_desc *s, nmt_attn_args *a);
void tft_attn_cross_args(const tft_model *m, const sub_desc *s, nmt_attn_args *a);
/* MG-SA: the forward's attention arguments of head group g of an encoder
 * self-attention sub-layer with phrase heads. */
void tft_mg_group_args(const tft_model *m, const sub_desc *s, uint32_t g, nmt_attn_args *a);
/* MG-SA: the forward's arguments of group g's SAN composition attention. */
void tft_mg_compose_args(const tft_model *m, const sub_desc *s, uint32_t g, nmt_attn_args *a);
/* Phrase attention: the phrase configuration of sub-layer s (NULL: the
 * Transformer's attention) and, when `a`, the forward's arguments of its
 * attention call i (transformer_fwd.h nmt_ph_args). */
const nmt_ph_kind *tft_ph_args(const tft_model *m, const sub_desc *s, uint32_t i, nmt_pattn_args *a);
/* Interleaved: the forward's window rows into m->ph_cols, of the query
 * inputs `in` (bigram queries) or of the encoder's outputs (W_o). */
nmt_status tft_ph_bigram_window(const tft_model *m, const sub_desc *s, nmt_buf in);
nmt_status tft_ph_out_window(const tft_model *m, const sub_desc *s);
/* Whether sub-layer s is an encoder self-attention with phrase heads. */
int tft_is_mg(const tft_model *m, const sub_desc *s);

/* MG-SA tag supervision (tf_train_tag.c): whether encoder layer l has a
 * tagger; its training-only tensors (tag NULL: no binding); buffers; the
 * batch's targets from the partition in h_syn_seg; the forward with the
 * loss gradient (lambda * grad_scale) kept, *sum = L_tag; the backward of
 * head group g of sub-layer s into the pooled rows' gradient d_pooled. */
int tft_tag_layer(const tft_cfg *c, uint32_t l);
nmt_status tft_tag_catalogue(const tft_cfg *c, nmt_lin *tag, nmt_tensor_fn fn, void *ctx);
nmt_status tft_tag_alloc(tft_model *m, nmt_status (*dbuf)(tft_model *, size_t, nmt_buf *));
nmt_status tft_tag_targets(tft_model *m, const tft_batch *b);
nmt_status tft_tag_forward(tft_model *m, float lambda, float grad_scale, double *sum);
nmt_status tft_tag_bwd(tft_model *m, const sub_desc *s, uint32_t g, nmt_buf d_pooled);

/* Backward from the logits' gradient (in m->logits): adds every parameter's
 * gradient into m->G.  p and seed: the forward's dropout (same masks). */
/* o->grads_ready (when set) hears of each layer's gradients once final:
 * the decoder's layers top down, then the encoder's; the embeddings (and
 * any tagger) are left to the caller's end of step. */
nmt_status tft_backward(tft_model *m, const tft_step_opts *o);

#endif
