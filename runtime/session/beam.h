/* SPDX-License-Identifier: MIT */
/* beam.h — host-side beam search over log-probabilities, independent of
 * the model family.  All sentences of a batch advance together: one call per
 * decoder step consumes the (rows = n*K, V) log-probabilities and produces
 * the next token and the back-pointer of every row.
 *
 * Semantics (fairseq-style): each step ranks the 2K best continuations of
 * a sentence's live beams; an EOS continuation among the first K ranks
 * finishes a hypothesis, other ranks fill the K live beams.  A sentence is
 * done when K hypotheses are finished; at its length limit only EOS is
 * allowed.  Finished hypotheses are ranked by the GNMT length penalty:
 * score = logprob / ((5 + len) / 6)^alpha, len counting EOS.  K = 1 is
 * exactly greedy decoding.  Constraints (nmt_beam_constrain): no EOS before
 * min_len tokens (unless the length limit forces it), and no continuation
 * that would make an n-gram of size no_repeat appear twice in its
 * hypothesis (fairseq's --no-repeat-ngram-size).  Decoding options
 * (nmt_beam_set_*): a forced target prefix (each sentence's first tokens),
 * CTRL's repetition penalty on raw logits (nmt_beam_logprobs), and random
 * top-k sampling with a per-sentence splitmix64 stream (K = 1). */
#ifndef NMT_BEAM_H
#define NMT_BEAM_H

#include "arena.h"
#include "nmt_edge.h"

typedef struct nmt_hyp {
    int32_t *tokens;   /* (max_steps): ids, EOS excluded */
    float *token_lp;   /* (max_steps): log-probability of each token, then of EOS (len + 1);
                          NULL unless nmt_beam_plan_token_lp */
    uint32_t len;
    float score;       /* length-normalised */
    float logprob;     /* sum of log-probabilities incl. EOS */
    int32_t row;       /* the row whose EOS finished it (alignments walk back from there) */
} nmt_hyp;

typedef struct nmt_beam_cand {
    float lp;
    int32_t id;
} nmt_beam_cand;

typedef struct nmt_beam {
    /* planned capacity */
    uint32_t max_batch, max_beam, max_steps;
    /* current search */
    uint32_t n, K, V, eos;
    float alpha;
    float *score;        /* (n*K) cumulative log-probability of live rows; -inf = dead */
    int32_t *hist;       /* (n*K, max_steps) tokens of live rows */
    int32_t *hist_next;  /* (n*K, max_steps) scratch for reordering */
    float *lp_hist, *lp_hist_next; /* (n*K, max_steps) each token's log-probability, as hist
                                      (nmt_beam_plan_token_lp; NULL: not kept) */
    int32_t *next_tok;   /* (n*K) decoder input of the next step */
    int32_t *back;       /* (n*K) row each new row continues */
    uint32_t *max_len;   /* (n) tokens allowed before the forced EOS */
    uint32_t min_len, no_repeat; /* constraints (0: none) */
    int32_t *banned;     /* (max_steps) scratch: the tokens a row may not take next */
    uint8_t *done;       /* (n) */
    uint32_t *n_fin;     /* (n) finished hypotheses */
    nmt_hyp *fin;        /* (n, K) finished hypotheses, sorted at the end */
    /* per-sentence candidate scratch (2K) */
    float *cand_score;
    int32_t *cand_row, *cand_tok;
    float *cand_lp;      /* the candidate token's log-probability */
    nmt_beam_cand *row_cand; /* (2K + 1) scratch: one row's top-k candidates, id order */
    /* decoding options (nmt_beam_set_*; off after nmt_beam_start) */
    float rep_penalty;   /* 1: off */
    int sampling;
    uint32_t topk;       /* 0: every allowed token */
    float temperature;
    uint64_t *rng;       /* (max_batch) splitmix64 state of each sentence (nmt_beam_plan_vocab) */
    const int32_t *const *prefix; /* the caller's (n) forced prefixes, NULL: none */
    const uint32_t *prefix_len;
    int32_t *seen;       /* (max_steps) scratch: a row's tokens, sorted */
    nmt_beam_cand *pool; /* (pool_cap) sampling scratch (nmt_beam_plan_vocab) */
    uint32_t pool_cap;
} nmt_beam;

/* Reserve memory for up to max_batch sentences, max_beam beams and
 * max_steps decoder steps (tokens + EOS). */
nmt_status nmt_beam_plan(nmt_beam *b, nmt_arena *a, uint32_t max_batch, uint32_t max_beam,
                         uint32_t max_steps);

/* Start a search: n sentences, K beams, vocabulary V; max_len[i] tokens
 * before EOS is forced (< max_steps).  Rows' first input is `bos`. */
nmt_status nmt_beam_start(nmt_beam *b, uint32_t n, uint32_t K, uint32_t V, uint32_t eos,
                          uint32_t bos, float alpha, const uint32_t *max_len);

/* Constraints of the search just started (both 0 after nmt_beam_start). */
void nmt_beam_constrain(nmt_beam *b, uint32_t min_len, uint32_t no_repeat);

/* Reserve the sampling scratch for vocabularies up to V (after plan; without
 * it nmt_beam_set_sampling refuses with NMT_ERR_LIMIT_EXCEEDED). */
nmt_status nmt_beam_plan_vocab(nmt_beam *b, nmt_arena *a, uint32_t V);

/* Keep every hypothesis's per-token log-probabilities (after plan; without
 * it results' token_lp is NULL): 3 * max_batch * max_beam * max_steps floats. */
nmt_status nmt_beam_plan_token_lp(nmt_beam *b, nmt_arena *a);

/* Options of the search just started.  Prefix: sentence i's first
 * prefix_len[i] tokens are prefix[i] (arrays read until the search ends;
 * max_len[i] must be >= prefix_len[i]).  Repetition penalty p > 0 (1 =
 * off): see nmt_beam_logprobs.  Sampling (K must be 1, V <= the planned
 * vocabulary, temperature > 0): NMT_ERR_LIMIT_EXCEEDED otherwise. */
void nmt_beam_set_prefix(nmt_beam *b, const int32_t *const *prefix, const uint32_t *prefix_len);
void nmt_beam_set_repetition(nmt_beam *b, float penalty);
nmt_status nmt_beam_set_sampling(nmt_beam *b, uint32_t topk, float temperature, uint64_t seed);

/* With a repetition penalty: turn step t's raw logits (n*K rows of V) into
 * log-probabilities in place, the logit z of each distinct token of a
 * row's history first replaced by z / p (z >= 0) or z * p (z < 0). */
void nmt_beam_logprobs(nmt_beam *b, uint32_t t, float *logits);

/* Re-rank sentence i's finished hypotheses by score (stable; after their
 * scores changed, e.g. by a coverage penalty). */
void nmt_beam_resort(nmt_beam *b, uint32_t i);

/* Consume step t's log-probabilities (n*K rows of V).  Fills next_tok and
 * back.  Returns 1 when every sentence is done (results then sorted). */
int nmt_beam_advance(nmt_beam *b, uint32_t t, const float *logprobs);

/* How many candidates per row step t needs when it is given only each
 * row's best ones (nmt_beam_advance_topk): 2K (the sentence's 2K best
 * continuations come from its rows' 2K best), 2K + 1 while EOS is barred
 * (min_len); 0 when the step needs the whole distribution: sampling, a
 * repetition penalty, no-repeat n-grams (banned tokens), a forced prefix
 * still running. */
uint32_t nmt_beam_topk_width(const nmt_beam *b, uint32_t t);

/* Consume step t given each row's k best continuations (k >= the width
 * above): lp and id (n*K rows of k, ranked by score + lp, ties to the
 * lower id; id -1: none) and every row's EOS log-probability.  The same
 * result as nmt_beam_advance on the whole distribution. */
int nmt_beam_advance_topk(nmt_beam *b, uint32_t t, const float *lp, const int32_t *id, uint32_t k,
                          const float *eos_lp);

/* Hypothesis `rank` of sentence i (after the search finished). */
const nmt_hyp *nmt_beam_result(const nmt_beam *b, uint32_t i, uint32_t rank);
uint32_t nmt_beam_n_results(const nmt_beam *b, uint32_t i);

#endif
