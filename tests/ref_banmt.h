/* SPDX-License-Identifier: MIT */
/* ref_banmt.h — naive double-precision reference of the BA-NMT forward
 * (docs/ARCHITECTURES.md "BA-NMT"; tests only). */
#ifndef NMT_REF_BANMT_H
#define NMT_REF_BANMT_H

#include "format.h"

/* Teacher-forced logits of one sentence pair (decoder inputs BOS, tgt[0..n)):
 * logits[(tgt_len + 1) * tgt_vocab], row p predicting tgt[p] (EOS at p ==
 * tgt_len); alpha (optional) [(tgt_len + 1) * (src_len + 1)] the attention
 * of each step over the source (EOS included).  fp32 files only.  Returns
 * the number of rows. */
int ref_banmt_logits(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len,
                     double *logits, double *alpha);

/* The log-probability of tgt (then EOS) given src under ref_banmt_logits. */
double ref_banmt_score(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len);

#endif
