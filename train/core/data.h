/* SPDX-License-Identifier: MIT */
/* data.h — the trainer's data: parallel text, tokenized once, filtered, and
 * served as token-based batches from length buckets in a seeded order.
 *
 * Corpus: two UTF-8 files with one sentence per line (same line count,
 * else NMT_ERR_INVALID_ARGUMENT with the line number in the message),
 * tokenized with the runtime's SentencePiece tokenizer (the one embedded in
 * the model).  Filters: pairs with an empty side, more than max_len tokens
 * on a side, or a length ratio (longer / shorter, in tokens, both + 1) above
 * max_ratio are dropped and counted.  A line the tokenizer refuses as longer
 * than its max_text_bytes counts as dropped_long.  Lines end at "\n" (a
 * trailing "\r" and a leading UTF-8 byte-order mark are not part of them);
 * a final line without "\n" counts.
 *
 * Batches: pairs are sorted by (target length, source length, line) and cut
 * into batches whose padded token count n_seq * max(src_len, tgt_len) stays
 * <= max_tokens (and n_seq <= max_seqs); the list of batches is shuffled per
 * epoch with a splitmix64/Fisher-Yates stream seeded by (seed, epoch).  So the
 * position (epoch, index) fully determines what comes next: a resumed run
 * sees exactly the batches an uninterrupted run would. */
#ifndef NMT_TRAIN_DATA_H
#define NMT_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_edge.h"
#include "train_model.h"
#include "spans_file.h"

typedef struct td_filter {
    uint32_t max_len;   /* tokens per side, EOS/BOS not counted (default 100; 0 = no limit) */
    double max_ratio;   /* default 3.0; 0 = no ratio filter (f == NULL: the defaults) */
} td_filter;

typedef struct td_stats {
    uint64_t lines, kept, dropped_empty, dropped_long, dropped_ratio;
    uint64_t src_tokens, tgt_tokens;  /* of kept pairs, EOS not counted */
} td_stats;

typedef struct td_corpus td_corpus;

/* Read and tokenize.  err (may be NULL) receives a one-line message on
 * failure (file name, line).  tgt_tok may equal src_tok (shared model). */
nmt_status td_load(const char *src_path, const char *tgt_path, nmt_tokenizer *src_tok, nmt_tokenizer *tgt_tok,
                   const td_filter *f, td_corpus **out, td_stats *st, char *err, size_t err_cap);
/* The same from files of whitespace-separated token ids (one sentence per
 * line, ids in [0, vocab) of their side; anything else is
 * NMT_ERR_INVALID_ARGUMENT naming the file, line and token). */
nmt_status td_load_ids(const char *src_path, const char *tgt_path, uint32_t src_vocab, uint32_t tgt_vocab,
                       const td_filter *f, td_corpus **out, td_stats *st, char *err, size_t err_cap);
/* Build a corpus from token arrays (tests, synthetic tasks); copied. */
nmt_status td_from_tokens(const int32_t *const *src, const uint32_t *src_lens, const int32_t *const *tgt,
                          const uint32_t *tgt_lens, uint32_t n, td_corpus **out);
void td_free(td_corpus *c);
uint32_t td_size(const td_corpus *c);
/* Pair i (in file order): token arrays without EOS/BOS. */
void td_pair(const td_corpus *c, uint32_t i, const int32_t **src, uint32_t *src_len, const int32_t **tgt,
             uint32_t *tgt_len);

/* MG-SA syntax heads: attach a spans file (spans_file.h) to a corpus
 * loaded from its source: line L of f belongs to the pair of line L (the
 * filters dropped the others with their pairs), its spans checked against
 * the pair's source pieces as the runtime checks them (a span past the
 * sentence: NMT_ERR_INVALID_SPANS, "FILE:LINE: span A-B is past the
 * sentence's N pieces"); a line count other than the source's is
 * NMT_ERR_INVALID_ARGUMENT.  Copied; batchers created afterwards hand each
 * batch its sentences' spans and labels (nmt_train_batch.spans). */
nmt_status td_set_spans(td_corpus *c, const tsp_file *f, char *err, size_t err_cap);
/* Pair i's spans, label ids and line in the files (1-based). */
void td_pair_spans(const td_corpus *c, uint32_t i, const nmt_span **sp, const uint8_t **labels, uint32_t *n,
                   uint64_t *line);

typedef struct td_position {
    uint64_t epoch;  /* 0-based */
    uint64_t index;  /* next batch within the epoch */
} td_position;

typedef struct td_batcher td_batcher;

/* Batches of at most max_tokens padded tokens (counting EOS/BOS) and
 * max_seqs sentences; bos/eos/pad ids of the model.  A pair longer than
 * max_tokens alone is INVALID_ARGUMENT (the filter must drop it first), as
 * are an empty corpus and max_tokens or max_seqs of 0.  Within a batch the
 * sentences keep the sorted order; each batch is padded to its own longest
 * source and target.  The batcher keeps a pointer to the corpus (free the
 * batcher first).  Running out of host memory is NMT_ERR_IO here and in
 * td_load / td_from_tokens (the writer's convention). */
nmt_status td_batcher_create(const td_corpus *c, uint32_t max_tokens, uint32_t max_seqs, uint64_t seed,
                             int32_t bos, int32_t eos, int32_t pad, td_batcher **out);
void td_batcher_free(td_batcher *b);
/* on 0: sources are not followed by EOS (a model's source_eos 0; an empty
 * source is EOS alone, as the session packs it); 1 (the default): they are. */
void td_batcher_source_eos(td_batcher *b, int on);
uint32_t td_batches_per_epoch(const td_batcher *b);
/* Largest n_seq, src_len, tgt_len any batch can have (for nmt_train_limits). */
void td_batcher_bounds(const td_batcher *b, uint32_t *max_seqs, uint32_t *max_src_len, uint32_t *max_tgt_len);

td_position td_tell(const td_batcher *b);
nmt_status td_seek(td_batcher *b, td_position p);  /* INVALID_ARGUMENT if index out of range */

/* The batch at the current position, then advance (wrapping into the next
 * epoch).  The arrays of *out belong to the batcher and stay valid until the
 * next call.  *tgt_tokens = non-padding target tokens (EOS included). */
nmt_status td_next(td_batcher *b, nmt_train_batch *out, uint32_t *tgt_tokens);

/* Batches in file order without shuffling (validation): batch k of the
 * sorted list; td_batches_per_epoch of them. */
nmt_status td_batch_at(td_batcher *b, uint32_t k, nmt_train_batch *out, uint32_t *tgt_tokens);

#endif
