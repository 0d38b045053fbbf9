/* SPDX-License-Identifier: MIT */
/* train_model.h — the trainer's model of any family, found by the `arch`
 * of its model image in the trainer's registry (train/train_model.c).
 *
 * A family with gradients provides one `nmt_train_family` record (for the
 * Transformer/HySAN family: families/transformer/tf_train.c) whose calls
 * the trainer program (nmt_edge_train.c), the checkpoints (checkpoint.c)
 * and the tests reach through the ntm_* functions below, so the trainer
 * holds no family-specific code.  The registry lives in the training
 * library, beside the runtime's (families/registry.c), which knows nothing
 * of training: docs/ADDING-A-FAMILY.md step 6.
 *
 * Batches follow the runtime's sequence conventions exactly (so the
 * trainer's log-probabilities equal nmt_session_score on the exported model):
 *   source   x_1 .. x_n EOS                      (src_lens[i] = n + 1)
 *   decoder  BOS y_1 .. y_m   ->   y_1 .. y_m EOS (tgt_lens[i] = m + 1)
 * padded with pad_id to src_len / tgt_len; target positions >= tgt_lens[i]
 * are ignored by the loss. */
#ifndef NMT_TRAIN_MODEL_H
#define NMT_TRAIN_MODEL_H

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
     * labels (train/spans_file.h, for the tag loss; may be NULL) */
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
    /* The model's parameter store (train/param_store.h): ntm_grads_read / ntm_grads_write. */
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

/* The trainer's record of an arch string; NULL when no family with that
 * arch can be trained. */
const nmt_train_family *nmt_train_family_find(const char *arch);

typedef struct ntm_model ntm_model;

/* Create the model of the image's family (its "arch" key; a runtime family
 * without a trainer record, or an unknown arch, is NMT_ERR_MODEL_ARCH) from
 * a model or checkpoint image with F32 tensors: every parameter uploaded,
 * the kernels and buffers for `lim` created; F32 tensors train.adam_m and
 * train.adam_v of n_params elements are loaded, else the moments are 0.
 * Statuses of the runtime: MODEL_* for a bad image, UNSUPPORTED (non-F32),
 * INVALID_ARGUMENT (limits), OPENCL. */
nmt_status ntm_create(nmt_device *dev, const void *image, size_t size, const nmt_train_limits *lim,
                      ntm_model **out);
void ntm_destroy(ntm_model *m);

/* Device bytes of activations and backward scratch the image's family
 * plans for `lim`, for a family that checks lim->max_act_bytes (create
 * fails with NMT_ERR_DEVICE_MEMORY above it); 0 for the others or a bad
 * image. */
size_t ntm_act_bytes(const void *image, size_t size, const nmt_train_limits *lim);
const nmt_train_family *ntm_family(const ntm_model *m);
/* The family's own model (e.g. a tft_model *), for the family's tests. */
void *ntm_impl(ntm_model *m);

size_t ntm_n_params(const ntm_model *m);
/* The first training-only tensor (train.*, a family's own: MG-SA's tag
 * heads) of m's layout that the image lacks, NULL when none is (or the
 * family keeps no parameter store): a checkpoint to resume has them all. */
const char *ntm_missing_train_tensor(ntm_model *m, const void *image, size_t size);
uint32_t ntm_d_model(const ntm_model *m);

/* Every metadata key of the architecture and every parameter tensor as F32,
 * into w; with `optimizer`, also train.adam_m and train.adam_v. */
nmt_status ntm_add_to_writer(ntm_model *m, nmtw_writer *w, int optimizer);

/* Gradients = 0. */
nmt_status ntm_zero_grad(ntm_model *m);

/* One micro-batch: forward (with dropout), loss, backward; gradients are
 * ADDED (accumulation across micro-batches).  On return (blocking)
 * *loss_sum is the summed label-smoothed loss and *nll_sum the summed NLL
 * over the non-padding target tokens; either may be NULL. */
nmt_status ntm_forward_backward(ntm_model *m, const nmt_train_batch *b, const nmt_train_step_opts *o,
                                double *loss_sum, double *nll_sum);

/* Forward only, no dropout (validation): the summed losses as above. */
nmt_status ntm_forward_loss(ntm_model *m, const nmt_train_batch *b, float label_smoothing, double *loss_sum,
                            double *nll_sum);

/* Forward only, no dropout: log P(tgt_out[s, t] | ...) into
 * lp[s * tgt_len + t] for t < tgt_lens[s] (other entries 0). */
nmt_status ntm_token_logprobs(ntm_model *m, const nmt_train_batch *b, float *lp);
/* Teacher-forced forward of b, then each attention sub-layer whose kind of
 * query and key can be told apart (the interleaved phrase attention) adds
 * its attention mass to out[i] (i < *n <= cap, in sub-layer order, `where`
 * filled).  NMT_ERR_UNSUPPORTED for a family without them. */
nmt_status ntm_attention_mass(ntm_model *m, const nmt_train_batch *b, ntm_attn_mass *out, uint32_t cap, uint32_t *n);

/* sqrt(sum of squared gradients) (blocking). */
nmt_status ntm_grad_norm(ntm_model *m, double *norm);

/* One Adam step (ap->grad_scale applies clipping / averaging). */
nmt_status ntm_adam_step(ntm_model *m, const nmt_adam_params *ap);

/* Gradients [off, off + n) of the flat layout (param_store.h) to host memory
 * (blocking) and back: the data-parallel trainer sums them across processes
 * (train/cli/train_dist.c).  NMT_ERR_INVALID_ARGUMENT for a range past
 * ntm_n_params. */
nmt_status ntm_grads_read(ntm_model *m, size_t off, size_t n, float *dst);
nmt_status ntm_grads_write(ntm_model *m, size_t off, size_t n, const float *src);
/* The read of ntm_grads_read enqueued without waiting; *ev (a cl_event,
 * released by the caller) completes when dst holds the values. */
nmt_status ntm_grads_read_async(ntm_model *m, size_t off, size_t n, float *dst, void **ev);

#endif
