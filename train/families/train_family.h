/* SPDX-License-Identifier: MIT */
/* train_family.h — what a family with gradients provides to the trainer
 * (one nmt_train_family record, e.g. train/families/transformer/tf_train.c)
 * and what the trainer gives it: batches, limits, step options, and the
 * helpers its steps share (train_family.c).  The trainer's registry of
 * these records (nmt_train_family_find) and the generic model over them,
 * ntm_*, are train/core/train_model.h's, one layer above.
 *
 * Batches follow the runtime's sequence conventions exactly (so the
 * trainer's log-probabilities equal nmt_session_score on the exported model):
 *   source   x_1 .. x_n EOS                      (src_lens[i] = n + 1)
 *   decoder  BOS y_1 .. y_m   ->   y_1 .. y_m EOS (tgt_lens[i] = m + 1)
 * padded with pad_id to src_len / tgt_len; target positions >= tgt_lens[i]
 * are ignored by the loss.  Internal header. */
#ifndef NMT_TRAIN_FAMILY_H
#define NMT_TRAIN_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_writer.h"
#include "ops.h"
#include "ops_train.h"

typedef struct nmt_train_limits {
    uint32_t max_seqs;     /* sentences per micro-batch */
    uint32_t max_src_len;  /* padded source length, EOS included */
    uint32_t max_tgt_len;  /* padded target length, BOS/EOS included */
    uint32_t max_tokens;   /* n_seq * max(src_len, tgt_len) bound of one micro-batch
                              (0 = max_seqs * max(max_src_len, max_tgt_len)) */
    uint64_t max_act_bytes; /* cap on the planned activation bytes of a family whose
                               activations grow faster than tokens (BA-NMT: O(B*T*S*hist));
                               0 = the device's global memory; see ntm_act_bytes */
} nmt_train_limits;

typedef struct nmt_train_batch {
    uint32_t n_seq, src_len, tgt_len;  /* padded lengths of this batch */
    const int32_t *src;       /* [n_seq * src_len] */
    const uint32_t *src_lens; /* [n_seq], 1..src_len (EOS included) */
    const int32_t *tgt_in;    /* [n_seq * tgt_len]: BOS y ... pad */
    const int32_t *tgt_out;   /* [n_seq * tgt_len]: y ... EOS pad */
    const uint32_t *tgt_lens; /* [n_seq], 1..tgt_len */
    /* MG-SA syntax heads (optional; NULL: every sentence gets the model's
     * fallback n-grams; other families ignore them): sentence i's phrase
     * spans over its source tokens (EOS not counted), checked as the
     * runtime checks nmt_session_set_spans (families/spans.h), and their
     * labels (tools/spans_file.h, for the tag loss; may be NULL) */
    const nmt_span *const *spans;     /* [n_seq]: n_spans[i] spans each */
    const uint32_t *n_spans;          /* [n_seq] */
    const uint8_t *const *span_labels; /* [n_seq]: n_spans[i] label ids each */
} nmt_train_batch;

/* A backward's report that gradients G[off, off + n) of the flat layout
 * (param_store.h) are final for this call: later kernels of the backward do
 * not write them.  Called on the calling thread, between enqueues (the
 * kernels that computed them may still be queued); the data-parallel
 * trainer reads the slice back and starts its all-reduce while the rest of
 * the backward runs (train/cli/train_dist.c). */
typedef void (*nmt_grads_ready_fn)(void *user, size_t off, size_t n);

typedef struct nmt_train_step_opts {
    float dropout;          /* residual dropout (after each sub-layer, on embeddings) */
    float attn_dropout;     /* reserved: must be 0 (attention probabilities are not kept) */
    float label_smoothing;  /* eps of nmt_op_xent */
    float grad_scale;       /* multiplies the loss gradient (1 / target tokens of the step) */
    uint64_t seed;          /* dropout masks: a pure function of (seed, site, element) */
    float tag_lambda;       /* MG-SA syntax heads: weight of the phrase-tag loss (0: none); the
                               loss_sum of forward_backward then includes tag_lambda * L_tag */
    nmt_grads_ready_fn grads_ready; /* optional (NULL: none); families that do not report ignore it */
    void *grads_user;               /* its first argument */
} nmt_train_step_opts;

/* What a family with gradients provides; `m` is the family's own model.
 * The meaning of each call is that of the ntm_* function of the same name. */
/* Attention mass by kind of query and key in one attention sub-layer
 * (`where`, e.g. "dec.1.cross_attn"): token-to-token, token-to-phrase,
 * phrase-to-token, phrase-to-phrase (the interleaved phrase attention's
 * unigram / bigram queries over unigram / bigram keys), summed over the
 * query rows of the batches seen. */
typedef struct ntm_attn_mass {
    char where[32];
    double mass[4];
} ntm_attn_mass;

typedef struct nmt_train_family {
    const char *arch;  /* the runtime family's arch string */
    nmt_status (*create)(nmt_device *dev, const void *image, size_t size, const nmt_train_limits *lim, void **m);
    void (*destroy)(void *m);
    size_t (*n_params)(const void *m);
    uint32_t (*d_model)(const void *m);
    nmt_status (*add_to_writer)(void *m, nmtw_writer *w, int optimizer);
    nmt_status (*zero_grad)(void *m);
    nmt_status (*forward_backward)(void *m, const nmt_train_batch *b, const nmt_train_step_opts *o,
                                   double *loss_sum, double *nll_sum);
    nmt_status (*forward_loss)(void *m, const nmt_train_batch *b, float label_smoothing, double *loss_sum,
                               double *nll_sum);
    nmt_status (*token_logprobs)(void *m, const nmt_train_batch *b, float *lp);
    nmt_status (*grad_norm)(void *m, double *norm);
    nmt_status (*adam_step)(void *m, const nmt_adam_params *ap);
    /* Optional (NULL: 0): ntm_act_bytes. */
    size_t (*act_bytes)(const void *image, size_t size, const nmt_train_limits *lim);
    /* Optional (NULL: NMT_ERR_UNSUPPORTED): ntm_attention_mass. */
    nmt_status (*attention_mass)(void *m, const nmt_train_batch *b, struct ntm_attn_mass *out, uint32_t cap,
                                 uint32_t *n);
    /* The model's parameter store (train/ops/param_store.h): ntm_grads_read / ntm_grads_write. */
    struct nmt_pstore *(*store)(void *m);
} nmt_train_family;

/* A family's create: lim checked (1 <= max_seqs, max_src_len, max_tgt_len
 * <= 65536) and completed into *L: max_tokens 0 becomes a full batch
 * (max_seqs * max(max_src_len, max_tgt_len)), then must lie in
 * [max(max_src_len, max_tgt_len), 2^24] and is cut to a full batch.
 * NMT_ERR_INVALID_ARGUMENT otherwise. */
nmt_status nmt_train_limits_resolve(nmt_train_limits *L);

/* For a family's steps: whether b's arrays are set and its shape (n_seq,
 * padded lengths, tokens) fits L; each sentence's lengths and token ids
 * are the family's to check. */
int nmt_train_batch_fits(const nmt_train_batch *b, const nmt_train_limits *L);
/* Whether o is valid for forward_backward: dropout and label_smoothing in
 * [0, 1), attn_dropout 0, a finite grad_scale. */
int nmt_train_step_opts_ok(const nmt_train_step_opts *o);

/* For a family's steps: the sums over `rows` rows of nmt_op_xent's per-row
 * loss and NLL, reduced into red[0], red[1] (partial: the reduction's
 * scratch) and read back (blocking); either output may be NULL. */
nmt_status nmt_train_loss_sums(nmt_train_ops *t, nmt_buf loss, nmt_buf nll, uint32_t rows, nmt_buf partial,
                               nmt_buf red, double *loss_sum, double *nll_sum);

#endif
