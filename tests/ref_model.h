/* ref_model.h — naive double-precision reference of the Transformer/HySAN
 * forward pass (tests only). */
#ifndef NMT_REF_MODEL_H
#define NMT_REF_MODEL_H

#include "format.h"

/* Teacher-forced logits of one sentence pair: decoder inputs BOS, tgt[0..n)
 * -> logits[(tgt_len + 1) * tgt_vocab] (row p predicts tgt[p], or EOS at
 * p == tgt_len).  Returns the number of rows. */
int ref_model_logits(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt,
                     uint32_t tgt_len, double *logits);

/* The log-probability of tgt (then EOS) given src under ref_model_logits. */
double ref_model_score(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len);

#endif
