/* SPDX-License-Identifier: MIT */
/* spans.h — phrase spans of source sentences (MG-SA's syntax heads): the
 * one check and the one completion to a partition, shared by the runtime
 * (nmt_session_set_spans in runtime/session/session.c, the family's encode in
 * families/transformer/transformer.c) and the trainer (train/core/data.c reads
 * spans files, train/families/transformer/tf_train.c builds each batch's
 * partition), so that a model trains on exactly the phrases it later runs
 * on.  Allocation-free; nothing here is public. */
#ifndef NMT_SPANS_H
#define NMT_SPANS_H

#include <stdint.h>

#include "family.h"

/* The spans of one sentence of len tokens (the runtime's EOS not counted):
 * NMT_OK when each is non-empty, ascending, inside [0, len) and does not
 * overlap the one before; NMT_ERR_INVALID_SPANS when one is not;
 * NMT_ERR_INVALID_ARGUMENT when n_spans > 0 and sp is NULL.  *bad (may be
 * NULL) receives the index of the offending span. */
nmt_status nmt_spans_check(const nmt_span *sp, uint32_t n_spans, uint32_t len, uint32_t *bad);

/* The phrase partition of sentences b < n of padded length len (phrase row
 * b * len + m of seg: start, length; cnt[b] phrases): the spans of
 * sentence b (src may be NULL: none), every other position (the EOS too)
 * a phrase of its own; a sentence without spans gets n-grams of
 * `fallback` tokens (the last shorter).  lens[b] counts the EOS.  Rows
 * past a sentence's phrases are (0, 0).  Spans must have passed
 * nmt_spans_check against lens[b] - 1. */
void nmt_spans_partition(uint32_t fallback, const nmt_spans *src, const int32_t *lens, uint32_t n, uint32_t len,
                         int32_t *seg, int32_t *cnt);

#endif
