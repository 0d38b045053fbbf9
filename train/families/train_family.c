/* SPDX-License-Identifier: MIT */
/* train_family.c — the helpers every family's steps share (train_family.h). */
#include "train_family.h"

#include <math.h>

#include "common.h"
#include "device.h"

nmt_status nmt_train_limits_resolve(nmt_train_limits *L) {
    NMT_CHECK(L->max_seqs >= 1 && L->max_seqs <= (1u << 16) && L->max_src_len >= 1 && L->max_src_len <= (1u << 16) &&
                  L->max_tgt_len >= 1 && L->max_tgt_len <= (1u << 16),
              NMT_ERR_INVALID_ARGUMENT);
    const uint64_t full = (uint64_t)L->max_seqs * NMT_MAX(L->max_src_len, L->max_tgt_len);
    if (L->max_tokens == 0) L->max_tokens = (uint32_t)NMT_MIN(full, (uint64_t)UINT32_MAX);
    NMT_CHECK(L->max_tokens >= NMT_MAX(L->max_src_len, L->max_tgt_len) && L->max_tokens <= (1u << 24),
              NMT_ERR_INVALID_ARGUMENT);
    if ((uint64_t)L->max_tokens > full) L->max_tokens = (uint32_t)full;
    return NMT_OK;
}

int nmt_train_batch_fits(const nmt_train_batch *b, const nmt_train_limits *L) {
    return b != NULL && b->src && b->src_lens && b->tgt_in && b->tgt_out && b->tgt_lens && b->n_seq >= 1 &&
           b->n_seq <= L->max_seqs && b->src_len >= 1 && b->src_len <= L->max_src_len && b->tgt_len >= 1 &&
           b->tgt_len <= L->max_tgt_len && (uint64_t)b->n_seq * b->src_len <= L->max_tokens &&
           (uint64_t)b->n_seq * b->tgt_len <= L->max_tokens;
}

int nmt_train_step_opts_ok(const nmt_train_step_opts *o) {
    return o->dropout >= 0.0f && o->dropout < 1.0f && o->attn_dropout == 0.0f && o->label_smoothing >= 0.0f &&
           o->label_smoothing < 1.0f && isfinite(o->grad_scale);
}

nmt_status nmt_train_loss_sums(nmt_train_ops *t, nmt_buf loss, nmt_buf nll, uint32_t rows, nmt_buf partial,
                               nmt_buf red, double *loss_sum, double *nll_sum) {
    NMT_TRY(nmt_op_reduce_sum(t, loss, rows, 0, partial, red));
    NMT_TRY(nmt_op_reduce_sum(t, nll, rows, 0, partial, nmt_buf_at(red, 1)));
    float s[2];
    NMT_TRY(nmt_device_read(t->dev, red.mem, red.off * sizeof(float), sizeof s, s));
    if (loss_sum) *loss_sum = s[0];
    if (nll_sum) *nll_sum = s[1];
    return NMT_OK;
}

