/* SPDX-License-Identifier: MIT */
/* family_writer.h — writing any family's model from its declaration
 * (families/family.h): its hyper-parameters from the table, random weights
 * from the catalogue.  Used by the trainer (checkpoints), nmt-edge-convert
 * random and the tests. */
#ifndef NMT_FAMILY_WRITER_H
#define NMT_FAMILY_WRITER_H

#include "family.h"
#include "nmt_writer.h"

/* "arch" and every hyper-parameter of cfg, in table order. */
nmt_status nmtw_add_hparams(nmtw_writer *w, const nmt_family *fam, const void *cfg);

/* Every tensor of the catalogue as F32 with reproducible random values:
 * NMT_INIT_UNIFORM U(-b, b), b = weight_scale / sqrt(fan_in); layer-norm
 * gains 1 + U(-0.05, 0.05), biases U(-0.05, 0.05).  Values come from a
 * splitmix64 stream seeded by `seed`, drawn tensor by tensor in file order
 * (exact in binary32: the same bytes on every platform). */
nmt_status nmtw_add_random_tensors(nmtw_writer *w, const nmt_family *fam, const void *cfg, uint64_t seed,
                                   float weight_scale);

/* Every tensor of the catalogue, in its order: copied from `have` where it
 * holds one of that name and shape, else random as above (the stream
 * seeded by `seed`, drawn over those tensors in file order): a model of a
 * family that extends another one keeps the other's weights and adds its
 * own, redrawing any whose shape it changes (the phrase attention's
 * interleaved W_o; train/core/model_arch.c). */
nmt_status nmtw_add_random_missing(nmtw_writer *w, const nmt_family *fam, const void *cfg, const nmt_file *have,
                                   uint64_t seed, float weight_scale);

#endif
