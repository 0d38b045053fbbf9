/* SPDX-License-Identifier: MIT */
/* parse_spans.h — English constituent phrases for MG-SA's syntax heads,
 * from CMU Link Grammar (Debian's liblink-grammar-dev), on the tool side
 * only: nmt-edge translate and nmt-edge-train parse-spans link it when the
 * build option NMT_WITH_LINK_GRAMMAR is on (NMT_HAVE_LINK_GRAMMAR defined);
 * libnmtedge stays parser-free.  docs/ARCHITECTURES.md (MG-SA) gives the
 * choices: the phrases are the tree's base constituents (those containing
 * no smaller constituent), labelled NP VP PP S SBAR ADJP ADVP or O; a word
 * in none is a phrase of its own; a sentence the parser cannot parse
 * without dropping words (null links) gets no spans (the model's n-gram
 * fallback), and is counted. */
#ifndef NMT_PARSE_SPANS_H
#define NMT_PARSE_SPANS_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_edge.h"

typedef struct nmt_parser nmt_parser;

/* A phrase: pieces (or words) [start, start + len) and its label. */
typedef struct nmt_parsed_span {
    uint32_t start, len;
    char label[8];
} nmt_parsed_span;

/* The English parser (NULL with a reason in why when the library or its
 * dictionary is missing, or the build has no parser). */
nmt_parser *nmt_parser_create(char *why, size_t why_cap);
void nmt_parser_destroy(nmt_parser *p);

/* Base phrases of text (len bytes) over its words: at most cap into out,
 * word byte ranges into wb / we (cap_words each, may be NULL), the word
 * count into *n_words.  Returns the phrase count, -1 when the sentence
 * cannot be parsed. */
int nmt_parser_word_spans(nmt_parser *p, const char *text, size_t len, nmt_parsed_span *out, uint32_t cap,
                          uint32_t *wb, uint32_t *we, uint32_t cap_words, uint32_t *n_words);

/* The same phrases over the SentencePiece pieces ids[0..n) of a sentence
 * as t encodes it (its decoded text is what is parsed): ascending,
 * disjoint, non-empty, inside [0, n), as nmt_session_set_spans wants
 * them (a phrase that would overlap the one before, through a piece
 * spanning two words, is dropped).  Returns the count, -1 when the
 * sentence cannot be parsed or its pieces cannot be placed in its text. */
int nmt_parser_piece_spans(nmt_parser *p, const nmt_tokenizer *t, const int32_t *ids, uint32_t n,
                           nmt_parsed_span *out, uint32_t cap);

/* Counters of a run: sentences parsed and sentences that fell back. */
void nmt_parser_counts(const nmt_parser *p, uint64_t *parsed, uint64_t *fallback);

/* ---- nmt-edge translate: spans for a session's text batches ------------ */

/* The parser of a session whose model has syntax heads (NULL otherwise,
 * and when the build has no parser: then a one-line note on stderr says
 * that sentences get the caller's spans or the model's n-grams), with
 * reusable per-batch arrays. */
typedef struct nmt_syntax_spans {
    nmt_parser *p;
    const nmt_span **ptrs;
    uint32_t *counts;
    nmt_span *spans;
    size_t cap_sent, cap_spans;
} nmt_syntax_spans;

void nmt_syntax_open(nmt_syntax_spans *y, const nmt_session *s, const char *prog);
/* Parse the batch's texts with the session's source tokenizer and set the
 * spans for its next translate call (nmt_session_set_spans); a sentence
 * that cannot be parsed gets none (the n-gram fallback). */
nmt_status nmt_syntax_set(nmt_syntax_spans *y, nmt_session *s, const char *const *texts, const size_t *lens,
                          uint32_t n);
/* Report the counts on stderr (when there was a parser) and free. */
void nmt_syntax_close(nmt_syntax_spans *y, const char *prog);

#endif
