/* SPDX-License-Identifier: MIT */
/* tf_train.h — the Transformer/HySAN family with gradients: the trainer's
 * model.  Forward with the calls of runtime/ops/ops.h (the runtime's kernels),
 * backward with train/ops/ops_train.h, the chaining of docs/TRAINING-OPS.md.
 *
 * Parameters live in one flat device buffer P (gradients G, Adam moments M
 * and V have the same layout), so the optimiser is one nmt_op_adam call and
 * the gradient norm one nmt_op_reduce_sum.  Every tensor of the model file
 * (docs/ARCHITECTURES.md, the names of runtime/transformer.c) is a
 * contiguous slice of P; the q, k, v projections of a self-attention block
 * (and k, v of a cross-attention block) are adjacent so the forward runs
 * them as one fused product, as the runtime does.
 *
 * The trainer is not allocation-free (it is a workstation tool): tft_create
 * allocates host and device memory once for the given limits; the step calls
 * only enqueue (plus small host-to-device uploads of the batch).
 *
 * Batches follow the conventions of train/families/train_family.h.  The trainer
 * program reaches this model through the family record
 * nmt_tf_train_family (train_model.h's registry); the tft_* calls are for
 * the family's own tests. */
#ifndef NMT_TF_TRAIN_H
#define NMT_TF_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_writer.h"
#include "ops.h"
#include "ops_train.h"
#include "train_family.h"

/* The family-independent trainer types (train/families/train_family.h). */
typedef nmt_train_limits tft_limits;
typedef nmt_train_batch tft_batch;
typedef nmt_train_step_opts tft_step_opts;

typedef struct tft_model tft_model;

/* Create the model from a model or checkpoint image (a .nmt file of the
 * Transformer family with F32 tensors; extra tensors are ignored).  Reads the
 * architecture from its metadata, uploads every parameter, creates the
 * kernels (nmt_ops + nmt_train_ops, with nmt_ops_enable_nn) and every
 * buffer for `lim`.  If the image holds F32 tensors `train.adam_m` and
 * `train.adam_v` of n_params elements they are loaded, else M = V = 0.
 * Statuses of the runtime: MODEL_ARCH, MODEL_MISSING_TENSOR,
 * MODEL_TENSOR_SHAPE, UNSUPPORTED (non-F32), INVALID_ARGUMENT (limits),
 * OUT_OF_MEMORY, OPENCL. */
nmt_status tft_create(nmt_device *dev, const void *image, size_t size, const tft_limits *lim,
                      tft_model **out);
void tft_destroy(tft_model *m);

/* Sizes and the tensor table (file order of the runtime's catalogue). */
size_t tft_n_params(const tft_model *m);
uint32_t tft_n_tensors(const tft_model *m);
/* Tensor i: name, ndim (1 or 2), shape, and its slice [offset, offset+count) of P. */
void tft_tensor(const tft_model *m, uint32_t i, const char **name, uint32_t *ndim, uint32_t shape[2],
                size_t *offset, size_t *count);
/* Vocabulary sizes and special ids of the model. */
void tft_vocab(const tft_model *m, uint32_t *src_vocab, uint32_t *tgt_vocab, int32_t *bos, int32_t *eos,
               int32_t *pad, int32_t *unk);
uint32_t tft_d_model(const tft_model *m);

/* Every metadata key of the architecture (the keys runtime/transformer.c
 * reads) and every parameter tensor as F32, into w.  With `optimizer`, also
 * train.adam_m and train.adam_v (1-D, n_params). */
nmt_status tft_add_to_writer(tft_model *m, nmtw_writer *w, int optimizer);

/* Host copies of P, G, M, V (n_params floats each; NULL = skipped).  Blocks. */
nmt_status tft_read_state(tft_model *m, float *params, float *grads, float *adam_m, float *adam_v);
/* Upload P (and M, V when not NULL). */
nmt_status tft_write_state(tft_model *m, const float *params, const float *adam_m, const float *adam_v);

/* G = 0. */
nmt_status tft_zero_grad(tft_model *m);

/* One micro-batch: forward (with dropout), loss, backward; parameter
 * gradients are ADDED to G (accumulation across micro-batches).  On return
 * (blocking) *loss_sum is the summed label-smoothed loss and *nll_sum the
 * summed NLL over the non-padding target tokens; either may be NULL. */
nmt_status tft_forward_backward(tft_model *m, const tft_batch *b, const tft_step_opts *o, double *loss_sum,
                                double *nll_sum);

/* Forward only, no dropout (validation): the summed losses as above. */
nmt_status tft_forward_loss(tft_model *m, const tft_batch *b, float label_smoothing, double *loss_sum,
                            double *nll_sum);

/* Forward only, no dropout: log P(tgt_out[s, t] | ...) into
 * lp[s * tgt_len + t] for t < tgt_lens[s] (other entries 0). */
nmt_status tft_token_logprobs(tft_model *m, const tft_batch *b, float *lp);
/* train_model.h ntm_attention_mass: the interleaved phrase attention's
 * sub-layers (others have no kinds of query and key to tell apart). */
nmt_status tft_attention_mass(tft_model *m, const tft_batch *b, ntm_attn_mass *out, uint32_t cap, uint32_t *n);

/* sqrt(sum G^2) (blocking). */
nmt_status tft_grad_norm(tft_model *m, double *norm);

/* One Adam step on P with G (ap->grad_scale applies clipping / averaging). */
nmt_status tft_adam_step(tft_model *m, const nmt_adam_params *ap);

/* This family's record in the trainer's registry (train/core/train_model.c). */
extern const nmt_train_family nmt_tf_train_family;
/* MG-SA's (arch "mgsa"): the same model with phrase heads. */
extern const nmt_train_family nmt_mgsa_train_family;
extern const nmt_train_family nmt_phrase_train_family;

#endif
