/* SPDX-License-Identifier: MIT */
/* param_store.h — a trainer model's parameters, the part every family's
 * trainer shares (docs/ADDING-A-FAMILY.md step 6; Transformer:
 * train/families/transformer/tf_train.c, BA-NMT: train/families/banmt/banmt_train.c).
 *
 * Parameters live in one flat device buffer P laid out by the family's
 * tensor walk (its catalogue, then any training-only `train.*` tensors):
 * each tensor a contiguous slice in walk order, the parts of a fused block
 * (Transformer self q|k|v, cross k|v) adjacent and the block reserved at its
 * first part, so the forward runs them as one product.  Gradients G and Adam
 * moments M, V have the same layout, so the optimiser is one nmt_op_adam and
 * the gradient norm one nmt_op_reduce_sum.
 *
 * Checkpoint layout (nmt_pstore_add_to_writer): every tensor of the table
 * by name as F32 (a deployment model without the train.* ones), then with
 * the optimizer state `train.adam_m` and `train.adam_v` (1-D, n_params). */
#ifndef NMT_PARAM_STORE_H
#define NMT_PARAM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "family.h"
#include "format.h"
#include "nmt_writer.h"
#include "ops_train.h"

/* One tensor of the table: its name, shape and slice [off, off + count) of P. */
typedef struct nmt_pstore_tensor {
    char name[NMT_TENSOR_NAME_MAX];
    uint32_t ndim, shape[2];
    size_t off, count;
} nmt_pstore_tensor;

typedef struct nmt_pstore {
    nmt_device *dev;
    nmt_train_ops *t;        /* the model's training ops (fill, reduce, adam) */
    nmt_pstore_tensor *tab;  /* n_tab, walk order (owned) */
    uint32_t n_tab;
    size_t n_params;
    cl_mem mems[4];          /* P, G, M, V (owned) */
    nmt_buf P, G, M, V;      /* parameters, gradients, Adam moments (one layout) */
} nmt_pstore;

/* A family's tensor walk: fn(ctx, decl) for every parameter tensor in
 * layout order, with decl.dst pointing into the model's weight struct when
 * `bind` (views into P are set there), NULL otherwise. */
typedef nmt_status (*nmt_pstore_walk)(void *model, int bind, nmt_tensor_fn fn, void *ctx);

/* Whether a tensor is training-only (`train.*`): optional in an image,
 * written only with the optimizer state. */
int nmt_pstore_is_train_only(const char *name);

/* The table of the walk, checked against the image f: every tensor present
 * with its shape (MODEL_MISSING_TENSOR, MODEL_TENSOR_SHAPE) and F32
 * (UNSUPPORTED), a training-only one may be absent; more than UINT32_MAX
 * parameters is UNSUPPORTED.  dev and t are kept for the calls below (t
 * may be initialised later, before nmt_pstore_alloc). */
nmt_status nmt_pstore_plan(nmt_pstore *s, nmt_device *dev, nmt_train_ops *t, const nmt_file *f,
                           nmt_pstore_walk walk, void *model);

/* Device buffers P, G, M, V, then the walk with bind set: the model's
 * weight views into P. */
nmt_status nmt_pstore_alloc(nmt_pstore *s, nmt_pstore_walk walk, void *model);

/* P from the image (an absent training-only tensor starts at 0), G = 0, M
 * and V from F32 tensors train.adam_m / train.adam_v of n_params elements
 * when the image has them, else 0; then waits for the device. */
nmt_status nmt_pstore_load(nmt_pstore *s, const nmt_file *f);

/* The first training-only tensor of the table that f lacks (a checkpoint
 * to resume has every one: nmt_pstore_add_to_writer wrote them); NULL when
 * none is missing. */
const char *nmt_pstore_missing_train_only(const nmt_pstore *s, const nmt_file *f);

/* Releases the buffers and the table (s zeroed); safe on a zeroed store. */
void nmt_pstore_release(nmt_pstore *s);

/* Every tensor as F32 into w (training-only ones only with `optimizer`),
 * then with `optimizer` train.adam_m and train.adam_v. */
nmt_status nmt_pstore_add_to_writer(nmt_pstore *s, nmtw_writer *w, int optimizer);

/* G = 0. */
nmt_status nmt_pstore_zero_grad(nmt_pstore *s);
/* sqrt(sum of G^2) (blocking); partial and red: the model's reduction
 * scratch (NMT_TRAIN_REDUCE_GROUPS and 1 floats). */
nmt_status nmt_pstore_grad_norm(nmt_pstore *s, nmt_buf partial, nmt_buf red, double *norm);
/* One Adam step over P with G, M, V. */
nmt_status nmt_pstore_adam_step(nmt_pstore *s, const nmt_adam_params *ap);

/* The slice [*off, *off + *n) of the layout spanned by the tensors whose
 * names start with `prefix` (walk order keeps a layer's tensors adjacent);
 * 0 when no tensor has it (*off, *n untouched), else 1. */
int nmt_pstore_span(const nmt_pstore *s, const char *prefix, size_t *off, size_t *n);

/* Host copies of P, G, M, V (n_params floats each; NULL = skipped). Blocks. */
nmt_status nmt_pstore_read(nmt_pstore *s, float *params, float *grads, float *adam_m, float *adam_v);
/* Upload P (and M, V when not NULL). */
nmt_status nmt_pstore_write(nmt_pstore *s, const float *params, const float *adam_m, const float *adam_v);

#endif
