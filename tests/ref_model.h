/* SPDX-License-Identifier: MIT */
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

/* The same forward's cross-attention probabilities of decoder layer `layer`
 * (1-based, 0 = the last), averaged over heads (head 0) or of head `head`
 * (1-based): probs[(tgt_len + 1) * (src_len + 1)], row p the decoder
 * position predicting tgt[p] (EOS at p == tgt_len), column j the source
 * token (src_len: the appended EOS).  Transformer cross-attention only
 * (not phrase attention).  Returns the number of rows. */
int ref_model_cross_attention(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt,
                              uint32_t tgt_len, uint32_t layer, uint32_t head, double *probs);

/* MG-SA syntax heads: the phrase spans of the source of the next calls
 * (ascending, disjoint, inside the sentence; the reference completes them
 * itself: every other token and the EOS a phrase of its own); NULL or 0
 * spans: the model's mg_syntax_fallback n-grams.  Kept until set again. */
void ref_model_set_spans(const nmt_span *spans, uint32_t n_spans);
/* MG-SA tag supervision: label ids (tools/spans_file.h) of the spans last
 * set (cleared by ref_model_set_spans); while set, each forward adds, in
 * every MG layer, the tag loss of its first syntax head's pooled phrases
 * (tensors train.enc.L.self_attn.phrase_tag.{weight,bias}, 8 labels) to a
 * sum that ref_model_tag_loss returns and resets. */
void ref_model_set_span_labels(const uint8_t *labels);
double ref_model_tag_loss(void);

/* The log-probability of tgt (then EOS) given src under ref_model_logits. */
double ref_model_score(const nmt_file *f, const int32_t *src, uint32_t src_len, const int32_t *tgt, uint32_t tgt_len);

#endif
