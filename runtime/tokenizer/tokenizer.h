/* SPDX-License-Identifier: MIT */
/* tokenizer.h — the SentencePiece-compatible tokenizer (internal view).
 *
 * A tokenizer copies a SentencePiece `.model` file (protobuf ModelProto)
 * into its arena and reads it in place there: pieces, scores and the
 * normalizer's precompiled charsmap stay in that copy and are addressed by
 * offset, so nothing refers to the caller's bytes (the mapped .nmt file or a
 * caller buffer) once planning is done.  Everything else — the piece table, the sorted piece
 * indexes used for lookups, and the per-sentence scratch (normalized text,
 * Viterbi lattice or BPE symbols, output ids) — is planned into an arena
 * from `max_text_bytes`, the bound on the bytes of one input sentence.
 *
 * The behaviour follows SentencePiece 0.1.97 (Debian 12's `sentencepiece`)
 * exactly; docs/TOKENIZER.md lists every rule and where it comes from.
 *
 * Files:  tokenizer_model.c   protobuf reader, piece tables, planning, lookups
 *         tokenizer_norm.c    UTF-8, charsmap double-array trie, normalizer
 *         tokenizer_unigram.c Viterbi segmentation
 *         tokenizer_bpe.c     merge-by-score segmentation
 *         tokenizer_decode.c  ids -> text, the encode driver, public API
 */
#ifndef NMT_TOKENIZER_H
#define NMT_TOKENIZER_H

#include "arena.h"
#include "common.h"

#include <stddef.h>
#include <stdint.h>

/* SentencePiece piece types (sentencepiece_model.proto). */
enum {
    NMT_SP_NORMAL = 1,
    NMT_SP_UNKNOWN = 2,
    NMT_SP_CONTROL = 3,
    NMT_SP_USER_DEFINED = 4,
    NMT_SP_UNUSED = 5,
    NMT_SP_BYTE = 6
};

/* TrainerSpec.model_type */
enum { NMT_SP_UNIGRAM = 1, NMT_SP_BPE = 2, NMT_SP_WORD = 3, NMT_SP_CHAR = 4 };

/* One piece; the string is blob[off, off + len). */
typedef struct nmt_sp_piece {
    uint32_t off, len;
    float score;
    uint8_t type;
} nmt_sp_piece;

/* NormalizerSpec fields the encoder uses. */
typedef struct nmt_sp_normspec {
    uint32_t charsmap_off, charsmap_len; /* precompiled_charsmap bytes (0 = identity) */
    int add_dummy_prefix, remove_extra_ws, escape_ws;
    /* decoded charsmap: trie units (little-endian u32, possibly unaligned)
     * and the NUL-separated normalized strings */
    const uint8_t *trie;
    uint32_t trie_units;
    const uint8_t *strs;
    uint32_t strs_len;
    uint32_t max_out;  /* longest normalized string, spaces counted as 3 bytes */
} nmt_sp_normspec;

/* A Viterbi cell: best path ending at this byte offset. */
typedef struct nmt_sp_cell {
    float score;
    int32_t start; /* -1: not reached */
    int32_t id;
} nmt_sp_cell;

/* A BPE symbol (a span of the normalized text) and an agenda entry. */
typedef struct nmt_sp_sym {
    int32_t prev, next;
    uint32_t off, len;
    int32_t freeze;
} nmt_sp_sym;

typedef struct nmt_sp_pair {
    int32_t left, right;
    float score;
    uint32_t size;
} nmt_sp_pair;

struct nmt_tokenizer {
    const uint8_t *blob;    /* (size) the .model bytes: the arena's copy */
    size_t size;
    /* trainer spec */
    int model_type;
    int byte_fallback;
    int ws_suffix;          /* treat_whitespace_as_suffix */
    int split_digits;       /* informational: a training option */
    int32_t unk_id;         /* the UNKNOWN piece (by type) */
    int32_t spec_ids[4];    /* trainer spec unk, bos, eos, pad ids */
    uint32_t unk_surface_off, unk_surface_len; /* 0 len + off 0: the default " \u2047 " */
    int has_unk_surface;
    nmt_sp_normspec ns;         /* normalizer spec */
    int has_denormalizer;
    /* pieces */
    nmt_sp_piece *pieces;   /* (n_pieces) */
    uint32_t n_pieces;
    uint32_t *normal_sorted;   /* (n_normal) ids of NORMAL/USER_DEFINED/UNUSED, by string */
    uint32_t n_normal;
    uint32_t *reserved_sorted; /* (n_reserved) ids of CONTROL/UNKNOWN/BYTE, by string */
    uint32_t n_reserved;
    int32_t byte_id[256];   /* id of piece <0xXX>, -1 if absent */
    float min_score, max_score; /* over NORMAL pieces, SentencePiece's initial values */
    int has_user_defined, has_unused;
    uint32_t max_piece_len; /* bytes, over every piece */
    uint32_t max_decode_bytes; /* bytes one id can decode to */
    /* limits and scratch (planned from max_text_bytes) */
    uint32_t max_text_bytes;
    size_t norm_cap;        /* bytes of normalized text for max_text_bytes of input */
    uint8_t *norm;          /* (norm_cap) normalized text */
    nmt_sp_cell *cells;     /* unigram: (norm_cap + 1) */
    nmt_sp_sym *syms;       /* bpe: (norm_cap) */
    nmt_sp_pair *heap;      /* bpe: (3 * norm_cap) */
    uint32_t *merges;       /* bpe with UNUSED pieces: (3 * norm_cap * 3) left off/len, right len */
    uint32_t *stack;        /* bpe with UNUSED pieces: resegmentation stack (2 * norm_cap) */
    int32_t *raw_ids;       /* (norm_cap) segmentation ids before unk/byte handling */
    uint32_t *raw_off;      /* (norm_cap) and their spans */
    uint32_t *raw_len;
    int32_t *ids;           /* (norm_cap) the result */
    uint32_t n_ids;
    size_t norm_len;
};

/* Parse and validate a .model image and plan every table and scratch buffer
 * into `a` (a measuring arena only sizes; the tables are filled only on a
 * real arena).  The image is copied into `a` (its bytes are counted by the
 * measuring pass); it need not outlive the call.  Statuses:
 * NMT_ERR_TOKENIZER_MODEL (malformed or inconsistent file),
 * NMT_ERR_UNSUPPORTED (WORD/CHAR models, a denormalizer),
 * NMT_ERR_ARENA_TOO_SMALL, NMT_ERR_INVALID_ARGUMENT. */
nmt_status nmt_tok_plan(nmt_tokenizer *t, nmt_arena *a, const void *model, size_t size,
                        uint32_t max_text_bytes);

/* Piece lookups.  `nmt_tok_piece_to_id` is SentencePiece's PieceToId:
 * reserved pieces first, then normal ones, else unk_id. */
int32_t nmt_tok_piece_to_id(const nmt_tokenizer *t, const uint8_t *s, size_t n);
int32_t nmt_tok_find_normal(const nmt_tokenizer *t, const uint8_t *s, size_t n);
static inline const uint8_t *nmt_tok_piece_str(const nmt_tokenizer *t, uint32_t id) {
    return t->blob + t->pieces[id].off;
}

/* Prefix search over the normal pieces: calls fn(user, id, len) for every
 * piece that is a prefix of s[0, n), shortest first. */
typedef void (*nmt_tok_prefix_fn)(void *user, uint32_t id, uint32_t len);
void nmt_tok_prefixes(const nmt_tokenizer *t, const uint8_t *s, size_t n, nmt_tok_prefix_fn fn,
                      void *user);

/* Length of the longest USER_DEFINED piece that prefixes s[0, n), 0 if none. */
uint32_t nmt_tok_user_prefix(const nmt_tokenizer *t, const uint8_t *s, size_t n);

/* UTF-8 as SentencePiece reads it. */
static inline uint32_t nmt_utf8_onecharlen(uint8_t b) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b >> 4];
}
/* Decodes one code point; *mblen = 1 and 0xFFFD on an invalid sequence.
 * Returns whether the sequence is valid in SentencePiece's sense
 * (a literal U+FFFD counts as valid). */
int nmt_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, uint32_t *mblen);

/* Decode the precompiled charsmap of a normalizer spec (validates sizes;
 * tokenizer_model.c, at load). */
nmt_status nmt_tok_charsmap_init(const nmt_tokenizer *t, nmt_sp_normspec *ns);

/* A little-endian 32-bit word (the charsmap's trie units). */
static inline uint32_t nmt_tok_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Normalize text[0, n) into t->norm (t->norm_len).  NMT_ERR_INPUT_TOO_LONG if
 * n > max_text_bytes; NMT_ERR_TOKENIZER_MODEL if the charsmap points outside
 * its strings. */
nmt_status nmt_tok_normalize(nmt_tokenizer *t, const uint8_t *text, size_t n);

/* Segment t->norm into raw_ids/raw_off/raw_len (n_raw). */
nmt_status nmt_tok_unigram(nmt_tokenizer *t, uint32_t *n_raw);
nmt_status nmt_tok_bpe(nmt_tokenizer *t, uint32_t *n_raw);

/* The full encoder: normalize, segment, unknown/byte handling into t->ids. */
nmt_status nmt_tok_encode(nmt_tokenizer *t, const char *text, size_t n);

/* Allocate the tokenizer struct from `a` and plan it (on a measuring arena
 * *out is NULL and only the sizes are recorded).  *n_pieces and
 * *max_decode_bytes (either may be NULL) are set on both passes. */
nmt_status nmt_tok_plan_new(nmt_arena *a, const void *model, size_t size, uint32_t max_text_bytes,
                            nmt_tokenizer **out, uint32_t *n_pieces, uint32_t *max_decode_bytes);

/* Decode ids into out[0, cap); *len gets the byte count (also when the
 * buffer is too small: NMT_ERR_BUFFER_TOO_SMALL).  out may be NULL with cap 0
 * to measure. */
nmt_status nmt_tok_decode(const nmt_tokenizer *t, const int32_t *ids, uint32_t n, char *out,
                          size_t cap, size_t *len);

#endif
