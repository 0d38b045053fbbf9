/* SPDX-License-Identifier: MIT */
/* banmt_train.h — the BA-NMT family with gradients (docs/TRAINING.md
 * "--arch banmt"): its record in the trainer's registry and the hooks its
 * tests read.  The model keeps every decoder step's activations
 * (teacher forcing over the target positions), so its activation memory
 * grows as O(B * T * S * hist): nmt_ba_train_act_bytes plans it.
 * Internal header (training library). */
#ifndef NMT_BANMT_TRAIN_H
#define NMT_BANMT_TRAIN_H

#include "banmt_cfg.h"
#include "train_family.h"

extern const nmt_train_family nmt_banmt_train_family;

/* Device bytes of the activations and backward scratch the trainer plans
 * for `lim` (max_tokens 0: max_seqs * max(max_src_len, max_tgt_len)):
 * per target step the decoder's rows (n * T <= max_tokens) and the
 * history rows of every source position (n * S * T <= max_tokens *
 * max_tgt_len).  Saturates at SIZE_MAX. */
size_t nmt_ba_train_act_bytes(const nmt_ba_cfg *c, const nmt_train_limits *lim);

/* create() refuses (NMT_ERR_DEVICE_MEMORY) limits whose plan exceeds
 * lim->max_act_bytes (`nmt-edge-train --max-act-bytes`), or the device's
 * global memory when that is 0. */

/* Tests: the parameter table (catalogue order) and the flat buffers. */
uint32_t nmt_ba_train_n_tensors(void *m);
void nmt_ba_train_tensor(void *m, uint32_t i, const char **name, size_t *offset, size_t *count);
nmt_status nmt_ba_train_read(void *m, float *params, float *grads);

#endif
