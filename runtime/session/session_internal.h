/* SPDX-License-Identifier: MIT */
/* session_internal.h — the session struct and the internal entry points
 * that tests and the trainer use (not part of the public API). */
#ifndef NMT_SESSION_INTERNAL_H
#define NMT_SESSION_INTERNAL_H

#include "beam.h"
#include "family.h"
#include "ops_beam.h"
#include "platform.h"
#include "tokenizer.h"

struct nmt_session {
    nmt_device *dev;
    nmt_ops ops;
    nmt_arena arena;           /* the caller's memory; high = arena bytes used */
    nmt_mapping map;           /* model file mapping when opened by path, during create only */
    int mapped;
    nmt_file file;             /* validated model image, during create only (zeroed after) */
    const nmt_family *fam;
    void *fam_state;
    _Alignas(16) unsigned char cfg[NMT_FAMILY_CFG_BYTES];
    nmt_model_info info;
    nmt_limits limits;         /* defaults resolved */
    nmt_plan_dims dims;
    nmt_io_bufs io;
    nmt_plan_ctx pc;           /* what the family's plan gets; every device buffer (released at destroy) */
    int fp16;                  /* fp16 compute: 2-D F16 weights stay half (nmt_plan_ctx.fp16) */
    int src_eos;               /* eos_id after every source (nmt_family.source_eos) */
    const nmt_decode_opts *call; /* during a translate call: its options (on_step, cancel) */
    uint32_t call_steps;       /* steps done in the call (nmt_session_partial: hist length) */
    /* host scratch, sized from the limits */
    int32_t *h_tok;            /* (max_batch * max(src_cap, tgt_cap)) packing */
    int32_t *h_len;            /* (max_batch) */
    nmt_spans spans;           /* set by nmt_session_set_spans for the next call */
    int32_t *h_col;            /* (step_rows) */
    uint32_t *h_max_len;       /* (max_batch) */
    float *h_logits;           /* (step_rows, tgt_vocab) */
    /* device top-k (cl/topk.cl; unused when ops.k_topk is NULL): a step's
     * upload (next tokens, then the rows' scores) and its k candidates */
    int32_t *h_step;           /* (2 * step_rows) */
    uint32_t topk_cap;         /* largest k: min(2 * max_beam + 1, NMT_TOPK_MAX) */
    int trim_finished;         /* 1 (set at creation): trailing finished sentences skip the step; tests clear it */
    uint64_t rows_trimmed;     /* row-steps so skipped, counted for tests */
    /* the translate call's sentences, longest source first (session.c,
     * order_batch): slot[i] is where the caller's sentence i decoded, so
     * result getters read slot[i]; the rest are the reordered views */
    int order_batch;           /* 1 (set at creation); tests clear it */
    int kv_table;              /* 1 (set at creation): a beam reorder passes io.h_reorder (the
                                  Transformer's K|V table) and leaves io.reorder to the family
                                  (nmt_io_reorder_upload); tests clear it to compare the gather */
    uint32_t *slot;            /* (max_batch) */
    uint64_t *ord_key;         /* (max_batch) sort keys */
    const int32_t **ord_tok;   /* (max_batch) sources */
    uint32_t *ord_len;         /* (max_batch) */
    const int32_t **ord_pre;   /* (max_batch) forced prefixes */
    uint32_t *ord_plen;        /* (max_batch) */
    const nmt_span **ord_spans; /* (max_batch) MG-SA syntax spans */
    uint32_t *ord_nspans;      /* (max_batch) */
    uint32_t *h_cand;          /* (step_rows * (2 * topk_cap + 1)) words, nmt_op_topk_logprobs's layout */
    uint32_t *h_cand_next;     /* the same: the candidates of the step after (chained steps) */
    int32_t *h_beam_state;     /* (3 * max_batch) the sentences' state at a chained search's start */
    nmt_buf d_beam_state;      /* the same on the device, kept by nmt_op_beam_advance */
    int chain_steps;           /* 1 (set at creation) unless NMT_EDGE_NO_CHAIN=1: steps chained on the
                                  device (session.c, decode_chained); tests clear it to compare */
    uint64_t steps_chained;    /* steps so enqueued, counted for tests */
    nmt_buf d_cand;            /* the same on the device */
    nmt_beam beam;
    int want_token_lp, want_sampling; /* nmt_session_params.token_logprobs / .sampling */
    /* alignments (dims.align; NULL otherwise): every step's rows as the
     * device wrote them, and the beam's back-pointers after each step */
    float *h_align;            /* (tgt_cap, step_rows, src_cap) */
    int32_t *h_align_back;     /* (tgt_cap, step_rows) */
    uint32_t n_results, result_n_best;
    /* alignments of the last nmt_session_score call (session_align.c): its
     * pairs, 0 after a translate call; step p's rows hold pair i's row p in
     * row i of h_align, and h_max_len[i] (translate's scratch) the length
     * of reference i */
    uint32_t n_scored;
    /* text API (session_text.c); NULL tokenizers: the model embeds none */
    nmt_tokenizer *tok_src, *tok_tgt; /* tok_tgt == tok_src when shared */
    int32_t *txt_ids;          /* (max_batch, max_src_len) then (max_batch, max_tgt_len) */
    const int32_t **txt_ptrs;  /* (2 * max_batch) */
    uint32_t *txt_lens;        /* (2 * max_batch) */
    char *txt_out;             /* (txt_out_cap) one detokenized hypothesis */
    size_t txt_out_cap;
};

/* Plan the tokenizers and text buffers (session_text.c; called by
 * plan_session on both passes). */
nmt_status nmt_session_plan_text(nmt_session *s, nmt_arena *a);
/* The embedded tokenizer models of f (session_text.c): each a 1-D U8
 * tensor or absent (NULL, 0); `tokenizer.tgt` only beside `tokenizer.src`.
 * NMT_ERR_MODEL_TENSOR_SHAPE / NMT_ERR_MODEL_MISSING_TENSOR otherwise, so
 * nmt_model_inspect refuses what a session would. */
nmt_status nmt_file_tokenizers(const nmt_file *f, const void **src, size_t *src_n, const void **tgt,
                               size_t *tgt_n);

/* Add the GNMT coverage penalty beta * sum_j log(max(min(c_j, 1), 1e-6))
 * to the score of every finished hypothesis of the last translate call and
 * re-rank them (session_align.c; needs alignments). */
void nmt_session_coverage(nmt_session *s, float beta);

/* nmt_session_score on a session with alignments (session_align.c):
 * forced decoding position by position (the incremental path), keeping
 * every step's alignment rows for nmt_session_result_alignment. */
nmt_status nmt_session_score_aligned(nmt_session *s, const nmt_batch *src, const nmt_batch *tgt,
                                     float *out_logprob);

/* Per-position callback of forced decoding: sentence i, decoder position p
 * (0 = after BOS), the reference label at p, and the V logits or
 * log-probabilities predicting it (valid during the call). */
typedef void (*nmt_forced_fn)(void *user, uint32_t i, uint32_t p, int32_t label, const float *row);

/* The family's reorder of the first `rows` decoder rows by the
 * back-pointers the device wrote into io.reorder (session.c; decoding step
 * t), as the chained search and the warm-up do. */
nmt_status nmt_session_reorder_on_device(nmt_session *s, uint32_t rows, uint32_t t);

/* Teacher-forced decoding of (src, tgt) pairs: the whole target at once
 * (incremental = 0, what scoring and training use) or one position at a
 * time through the KV cache (incremental = 1, what beam search uses).  The
 * two must agree (tests).  log_softmax = 0 delivers raw logits. */
nmt_status nmt_session_forced(nmt_session *s, const nmt_batch *src, const nmt_batch *tgt,
                              int incremental, int log_softmax, nmt_forced_fn fn, void *user);

#endif
