/* SPDX-License-Identifier: MIT */
/* model_arch.h — a new model of a family that extends the Transformer's
 * configuration and tensors (MG-SA: the same weights plus phrase-head keys),
 * made from a random Transformer image so both start from the same weights
 * for one seed (the comparison protocol, docs/RESULTS.md). */
#ifndef NMT_TRAIN_MODEL_ARCH_H
#define NMT_TRAIN_MODEL_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_edge.h"

/* The image of the Transformer image tf (tf_size bytes) as a model of
 * `arch`: the Transformer's hyper-parameters, then keys[i] = values[i]
 * (i < n; NULL values are skipped), the family's defaults for its other
 * keys, all checked by the family's own parser (a bad value is
 * NMT_ERR_MODEL_ARCH or NMT_ERR_INVALID_ARGUMENT with a message naming the
 * key in err); every tensor and tokenizer blob copied, and the tensors the
 * family has beyond the Transformer's (MG-SA's LSTM interaction) drawn at
 * random (nmtw_add_random_missing with seed and weight_scale).  *out is
 * malloc'd.
 * An arch whose configuration is not the Transformer's (BA-NMT) gets a
 * new model: its keys from keys / values, the Transformer image's
 * vocabularies, special ids and tokenizer blobs, required widths without
 * a value = d_model, every tensor drawn by its catalogue at weight scale 1
 * (the family's own init; weight_scale unused). */
nmt_status train_model_as_arch(const void *tf, size_t tf_size, const char *arch, const char *const *keys,
                               const char *const *values, size_t n, uint64_t seed, float weight_scale, void **out,
                               size_t *out_size, char *err, size_t err_cap);

#endif
