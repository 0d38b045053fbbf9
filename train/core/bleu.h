/* SPDX-License-Identifier: MIT */
/* bleu.h — corpus BLEU computed exactly as sacreBLEU's default
 * (`sacrebleu -tok 13a -s exp`, mixed case, max n-gram order 4, closest
 * reference length), for the trainer's validation.  No Python involved;
 * tests/bleu_test.c checks it against fixtures produced by sacreBLEU
 * (scripts/make_bleu_fixtures.py).  Not part of the runtime: it allocates. */
#ifndef NMT_BLEU_H
#define NMT_BLEU_H

#include <stddef.h>
#include <stdint.h>

#define NMT_BLEU_ORDER 4

/* Sufficient statistics, summed over segments. */
typedef struct nmt_bleu_stats {
    uint64_t sys_len, ref_len;
    uint64_t correct[NMT_BLEU_ORDER];
    uint64_t total[NMT_BLEU_ORDER];
} nmt_bleu_stats;

typedef struct nmt_bleu_result {
    double score;                         /* 0..100 */
    double precisions[NMT_BLEU_ORDER];    /* percent, smoothed as sacreBLEU does */
    double bp;                            /* brevity penalty */
} nmt_bleu_result;

/* The 13a tokenization of one line (sacreBLEU's Tokenizer13a applied after
 * rstrip of Unicode whitespace).  Returns a malloc'd string or NULL on
 * allocation failure. */
char *nmt_bleu_tokenize_13a(const char *line);

/* Add one segment: a hypothesis and its n_refs references (untokenized
 * text).  Returns 0, or -1 if memory ran out (stats unchanged). */
int nmt_bleu_add(nmt_bleu_stats *st, const char *hyp, const char *const *refs, size_t n_refs);

/* Corpus score from the statistics (sacreBLEU's compute_bleu, exp smoothing). */
nmt_bleu_result nmt_bleu_score(const nmt_bleu_stats *st);

#endif
