/* SPDX-License-Identifier: MIT */
/* session_text.c — the session's text API: the SentencePiece models
 * embedded in the .nmt file (`tokenizer.src`, and `tokenizer.tgt` unless
 * the two sides share one), planned into the session arena from the limits,
 * and translate/score/result calls that tokenize and detokenize around the
 * id-level calls of session.c. */
#include "session_internal.h"

#include <string.h>

/* A U8 tensor holding a tokenizer model, or NULL/0 when absent. */
static nmt_status find_blob(const nmt_file *f, const char *name, const void **data, size_t *size) {
    nmt_tensor_view v;
    *data = NULL;
    *size = 0;
    if (nmt_file_find(f, name, &v) != NMT_OK) return NMT_OK;
    if (v.dtype != NMT_DTYPE_U8 || v.ndim != 1) {
        nmt_why(f->why, f->why_cap, "tensor '%s' must be 1-D u8 bytes (an embedded SentencePiece model)", name);
        return NMT_ERR_MODEL_TENSOR_SHAPE;
    }
    *data = v.data;
    *size = (size_t)v.nbytes;
    return NMT_OK;
}

nmt_status nmt_file_tokenizers(const nmt_file *f, const void **src, size_t *src_n, const void **tgt,
                               size_t *tgt_n) {
    NMT_TRY(find_blob(f, "tokenizer.src", src, src_n));
    NMT_TRY(find_blob(f, "tokenizer.tgt", tgt, tgt_n));
    if (*src == NULL && *tgt != NULL) { /* a target tokenizer alone is a packaging error */
        nmt_why(f->why, f->why_cap, "tensor 'tokenizer.tgt' without 'tokenizer.src'");
        return NMT_ERR_MODEL_MISSING_TENSOR;
    }
    return NMT_OK;
}

nmt_status nmt_session_plan_text(nmt_session *s, nmt_arena *a) {
    const void *src, *tgt;
    size_t src_n, tgt_n;
    NMT_TRY(nmt_file_tokenizers(&s->file, &src, &src_n, &tgt, &tgt_n));
    s->tok_src = s->tok_tgt = NULL;
    if (src == NULL) return NMT_OK;
    const nmt_limits *L = &s->limits;
    uint32_t n_src, n_tgt, dec_bytes;
    NMT_TRY(nmt_tok_plan_new(a, src, src_n, L->max_text_bytes, &s->tok_src, &n_src, &dec_bytes));
    n_tgt = n_src;
    if (tgt != NULL) {
        NMT_TRY(nmt_tok_plan_new(a, tgt, tgt_n, L->max_text_bytes, &s->tok_tgt, &n_tgt, &dec_bytes));
    } else {
        s->tok_tgt = s->tok_src;
    }
    /* every id a tokenizer produces must be a row of the embeddings */
    NMT_CHECK(n_src <= s->info.src_vocab && n_tgt <= s->info.tgt_vocab, NMT_ERR_TOKENIZER_MODEL);
    const uint32_t B = L->max_batch;
    s->txt_ids = NMT_ARENA_NEW(a, int32_t, (size_t)B * ((size_t)L->max_src_len + L->max_tgt_len) + 1);
    s->txt_ptrs = (const int32_t **)NMT_ARENA_NEW(a, const int32_t *, 2 * (size_t)B);
    s->txt_lens = NMT_ARENA_NEW(a, uint32_t, 2 * (size_t)B);
    NMT_CHECK(nmt_mul_ok(L->max_tgt_len, dec_bytes, &s->txt_out_cap), NMT_ERR_INVALID_ARGUMENT);
    s->txt_out_cap += 1;
    s->txt_out = NMT_ARENA_NEW(a, char, s->txt_out_cap);
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    return NMT_OK;
}

nmt_tokenizer *nmt_session_tokenizer(const nmt_session *s, int target) {
    if (s == NULL) return NULL;
    return target ? s->tok_tgt : s->tok_src;
}

/* Tokenize a text batch into rows of `cap` ids starting at `ids`, and point
 * out->tokens at them (pointer/length arrays at ptrs/lens). */
static nmt_status tokenize_batch(nmt_session *s, nmt_tokenizer *t, const nmt_text_batch *in,
                                 uint32_t cap, int32_t *ids, const int32_t **ptrs, uint32_t *lens,
                                 nmt_batch *out) {
    NMT_CHECK(in != NULL && (in->n == 0 || (in->text != NULL && in->lens != NULL)),
              NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(in->n <= s->limits.max_batch, NMT_ERR_LIMIT_EXCEEDED);
    for (uint32_t i = 0; i < in->n; i++) {
        NMT_CHECK(in->text[i] != NULL || in->lens[i] == 0, NMT_ERR_INVALID_ARGUMENT);
        NMT_TRY(nmt_tok_encode(t, in->text[i], in->lens[i]));
        NMT_CHECK(t->n_ids <= cap, NMT_ERR_INPUT_TOO_LONG);
        int32_t *row = ids + (size_t)i * cap;
        if (t->n_ids) memcpy(row, t->ids, sizeof(int32_t) * t->n_ids);
        ptrs[i] = row;
        lens[i] = t->n_ids;
    }
    out->tokens = ptrs;
    out->lens = lens;
    out->n = in->n;
    return NMT_OK;
}

nmt_status nmt_session_translate_text(nmt_session *s, const nmt_text_batch *src,
                                      const nmt_decode_opts *opts) {
    NMT_CHECK(s != NULL && src != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(s->tok_src != NULL, NMT_ERR_NO_TOKENIZER);
    s->n_results = 0;
    nmt_batch b;
    NMT_TRY(tokenize_batch(s, s->tok_src, src, s->limits.max_src_len, s->txt_ids, s->txt_ptrs,
                           s->txt_lens, &b));
    if (opts == NULL || opts->prefix_text == NULL) return nmt_session_translate(s, &b, opts);
    /* a forced prefix as text: target-tokenized into the second half of the scratch */
    NMT_CHECK(opts->prefix == NULL && opts->prefix_text_len != NULL, NMT_ERR_INVALID_ARGUMENT);
    const nmt_limits *L = &s->limits;
    const nmt_text_batch pt = {.text = opts->prefix_text, .lens = opts->prefix_text_len, .n = src->n};
    nmt_batch bp;
    NMT_TRY(tokenize_batch(s, s->tok_tgt, &pt, L->max_tgt_len, s->txt_ids + (size_t)L->max_batch * L->max_src_len,
                           s->txt_ptrs + L->max_batch, s->txt_lens + L->max_batch, &bp));
    nmt_decode_opts o = *opts;
    o.prefix = bp.tokens;
    o.prefix_len = bp.lens;
    o.prefix_text = NULL;
    o.prefix_text_len = NULL;
    return nmt_session_translate(s, &b, &o);
}

nmt_status nmt_session_result_text(nmt_session *s, uint32_t i, uint32_t rank, const char **text,
                                   size_t *len, float *score, float *logprob) {
    NMT_CHECK(s != NULL && text != NULL && len != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(s->tok_tgt != NULL, NMT_ERR_NO_TOKENIZER);
    const int32_t *ids;
    uint32_t n;
    NMT_TRY(nmt_session_result(s, i, rank, &ids, &n, score, logprob));
    size_t out_len;
    NMT_TRY(nmt_tok_decode(s->tok_tgt, ids, n, s->txt_out, s->txt_out_cap, &out_len));
    *text = s->txt_out;
    *len = out_len;
    return NMT_OK;
}

nmt_status nmt_session_score_text(nmt_session *s, const nmt_text_batch *src,
                                  const nmt_text_batch *tgt, float *out_logprob) {
    NMT_CHECK(s != NULL && src != NULL && tgt != NULL && out_logprob != NULL,
              NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(s->tok_src != NULL, NMT_ERR_NO_TOKENIZER);
    NMT_CHECK(src->n == tgt->n, NMT_ERR_INVALID_ARGUMENT);
    const nmt_limits *L = &s->limits;
    nmt_batch bs, bt;
    NMT_TRY(tokenize_batch(s, s->tok_src, src, L->max_src_len, s->txt_ids, s->txt_ptrs,
                           s->txt_lens, &bs));
    NMT_TRY(tokenize_batch(s, s->tok_tgt, tgt, L->max_tgt_len,
                           s->txt_ids + (size_t)L->max_batch * L->max_src_len,
                           s->txt_ptrs + L->max_batch, s->txt_lens + L->max_batch, &bt));
    return nmt_session_score(s, &bs, &bt, out_logprob);
}

nmt_status nmt_model_tokenizer(const void *data, size_t size, int target, const void **model,
                               size_t *model_size) {
    NMT_CHECK(model != NULL && model_size != NULL, NMT_ERR_INVALID_ARGUMENT);
    *model = NULL;
    *model_size = 0;
    nmt_file f;
    NMT_TRY(nmt_file_open(&f, data, size, 1));
    const void *src, *tgt;
    size_t src_n, tgt_n;
    NMT_TRY(find_blob(&f, "tokenizer.src", &src, &src_n));
    NMT_TRY(find_blob(&f, "tokenizer.tgt", &tgt, &tgt_n));
    NMT_CHECK(src != NULL, NMT_ERR_NO_TOKENIZER);
    *model = (target && tgt != NULL) ? tgt : src;
    *model_size = (target && tgt != NULL) ? tgt_n : src_n;
    return NMT_OK;
}
