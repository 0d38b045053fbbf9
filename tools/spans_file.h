/* SPDX-License-Identifier: MIT */
/* spans_file.h — spans files: the syntactic phrases of a training corpus's
 * source side (MG-SA syntax heads, docs/TRAINING.md "Phrase spans").
 *
 * One line per line of the source file (the same count; the trainer's
 * length filters then drop a span line with its pair).  A line holds zero
 * or more spans separated by spaces or tabs, each START-END:LABEL:
 *   START, END  SentencePiece-piece offsets into the source sentence as the
 *               model's tokenizer encodes it (EOS not counted): the span
 *               covers pieces START .. END-1 (END exclusive), decimal;
 *   LABEL       one of the phrase labels below (upper case).
 * Spans come in ascending order and do not overlap; START < END; a token
 * in no span is a phrase of its own.  An empty line (or one of blanks)
 * gives the sentence no spans: the model's mg_syntax_fallback n-grams, as
 * for a sentence the parser could not parse.  Lines end at "\n" (a
 * trailing "\r" and a leading UTF-8 byte-order mark are not part of them).
 *
 * Errors (a one-line message "FILE:LINE: ..."): text that is not
 * START-END:LABEL, or an unknown label, is NMT_ERR_INVALID_ARGUMENT; an
 * empty span (END <= START), a span starting before the end of the one
 * before (overlapping or descending) and, once the pair is tokenized
 * (td_set_spans), a span past the sentence are NMT_ERR_INVALID_SPANS, the
 * status nmt_session_set_spans gives the same spans. */
#ifndef NMT_TOOL_SPANS_FILE_H
#define NMT_TOOL_SPANS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_edge.h"

/* The phrase labels, in label-id order (the tag loss's classes): noun,
 * verb, prepositional phrase, clause, subordinate clause, adjective and
 * adverb phrase, O any other constituent. */
#define TSP_N_LABELS 8
extern const char *const tsp_labels[TSP_N_LABELS];

/* Label id of the n bytes at s; -1 if none. */
int tsp_label_id(const char *s, size_t n);

/* Parse one line (s, n bytes, no "\n") into at most cap spans and label
 * ids; *n_out their count.  On an error, why (may be NULL) receives the
 * reason without file or line. */
nmt_status tsp_parse_line(const char *s, size_t n, nmt_span *sp, uint8_t *labels, uint32_t cap, uint32_t *n_out,
                          char *why, size_t why_cap);

typedef struct tsp_file tsp_file;

/* A whole spans file (name: for messages), from memory or from path (a
 * regular file or a pipe, as the corpus files). */
nmt_status tsp_parse(const char *text, size_t size, const char *name, tsp_file **out, char *err, size_t err_cap);
nmt_status tsp_read(const char *path, tsp_file **out, char *err, size_t err_cap);
void tsp_free(tsp_file *f);
const char *tsp_name(const tsp_file *f);
uint64_t tsp_lines(const tsp_file *f);
/* Line i (0-based): its spans and label ids (NULL, NULL, 0 when empty or
 * out of range); valid while f lives. */
void tsp_line(const tsp_file *f, uint64_t i, const nmt_span **sp, const uint8_t **labels, uint32_t *n);

#endif
