/* SPDX-License-Identifier: MIT */
/* train_model.h — the trainer's model of any family, found by the `arch`
 * of its model image in the trainer's registry (nmt_train_family_find).
 *
 * A family with gradients provides one `nmt_train_family` record (for the
 * Transformer/HySAN family: train/families/transformer/tf_train.c) whose
 * calls the trainer program (train/cli/nmt_edge_train.c), the checkpoints
 * (checkpoint.c) and the tests reach through the ntm_* functions below, so
 * the trainer holds no family-specific code.  The registry lives in the
 * training library, beside the runtime's (families/registry.c), which
 * knows nothing of training: docs/ADDING-A-FAMILY.md step 6. */
#ifndef NMT_TRAIN_MODEL_H
#define NMT_TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "train_family.h"

/* The trainer's record of an arch string (its registry, train_model.c);
 * NULL when no family with that arch can be trained. */
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
