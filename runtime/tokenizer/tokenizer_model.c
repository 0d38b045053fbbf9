/* SPDX-License-Identifier: MIT */
/* tokenizer_model.c — reading a SentencePiece .model file (copied into the
 * tokenizer's arena, then read in place there).
 *
 * The file is a protobuf `ModelProto` (sentencepiece_model.proto).  We read
 * the wire format directly: varints, fixed32/fixed64 and length-delimited
 * fields; every other field is skipped, groups and truncated fields are
 * errors.  Fields read:
 *
 *   ModelProto      1 pieces (repeated)  2 trainer_spec  3 normalizer_spec
 *                   5 denormalizer_spec
 *   SentencePiece   1 piece  2 score (float)  3 type (default NORMAL)
 *   TrainerSpec     3 model_type  24 treat_whitespace_as_suffix
 *                   25 split_digits  35 byte_fallback  40..43 unk/bos/eos/pad
 *                   ids  44 unk_surface
 *   NormalizerSpec  2 precompiled_charsmap  3 add_dummy_prefix
 *                   4 remove_extra_whitespaces  5 escape_whitespaces
 *
 * The consistency checks are SentencePiece's own (ModelInterface::
 * InitializePieces): no empty or duplicate piece, exactly one UNKNOWN piece,
 * BYTE pieces only with byte_fallback and then all 256 of them.
 */
#include "tokenizer.h"

#include <float.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Protobuf wire format                                                     */
/* ------------------------------------------------------------------------ */

typedef struct pb_field {
    uint32_t num, wt;
    uint64_t v;           /* varint / fixed value */
    const uint8_t *data;  /* length-delimited payload */
    size_t len;
} pb_field;

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return 0;
        const uint8_t b = *(*p)++;
        if (shift == 63 && (b & 0x7e)) return 0; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Next field of a message in [*p, end): 1 = got one, 0 = end, -1 = malformed. */
static int pb_next(const uint8_t **p, const uint8_t *end, pb_field *f) {
    if (*p >= end) return 0;
    uint64_t key;
    if (!pb_varint(p, end, &key) || key >> 32) return -1;
    f->num = (uint32_t)(key >> 3);
    f->wt = (uint32_t)(key & 7);
    if (f->num == 0) return -1;
    f->data = NULL;
    f->len = 0;
    f->v = 0; /* (GCC 12 -O3 -Wmaybe-uninitialized: unread after a malformed varint) */
    switch (f->wt) {
    case 0:
        return pb_varint(p, end, &f->v) ? 1 : -1;
    case 1:
        if ((size_t)(end - *p) < 8) return -1;
        f->v = 0;
        for (int i = 7; i >= 0; i--) f->v = f->v << 8 | (*p)[i];
        *p += 8;
        return 1;
    case 5:
        if ((size_t)(end - *p) < 4) return -1;
        f->v = (uint32_t)(*p)[0] | (uint32_t)(*p)[1] << 8 | (uint32_t)(*p)[2] << 16 |
               (uint32_t)(*p)[3] << 24;
        *p += 4;
        return 1;
    case 2: {
        uint64_t n;
        if (!pb_varint(p, end, &n) || n > (uint64_t)(end - *p)) return -1;
        f->data = *p;
        f->len = (size_t)n;
        *p += n;
        return 1;
    }
    default:
        return -1; /* groups (3, 4) and reserved wire types */
    }
}

#define PB_BAD NMT_ERR_TOKENIZER_MODEL

/* Field accessors: wrong wire types are malformed files. */
static nmt_status pb_bool(const pb_field *f, int *out) {
    NMT_CHECK(f->wt == 0, PB_BAD);
    *out = f->v != 0;
    return NMT_OK;
}

static nmt_status pb_int32(const pb_field *f, int32_t *out) {
    NMT_CHECK(f->wt == 0, PB_BAD);
    *out = (int32_t)(uint32_t)f->v; /* int32 negatives are sign-extended varints */
    return NMT_OK;
}

static nmt_status pb_float(const pb_field *f, float *out) {
    NMT_CHECK(f->wt == 5, PB_BAD);
    uint32_t u = (uint32_t)f->v;
    memcpy(out, &u, 4);
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */
/* ------------------------------------------------------------------------ */

static nmt_status parse_piece(const nmt_tokenizer *t, const uint8_t *p, const uint8_t *end,
                              nmt_sp_piece *out) {
    nmt_sp_piece pc = {.off = 0, .len = 0, .score = 0.0f, .type = NMT_SP_NORMAL};
    int have_piece = 0;
    pb_field f;
    int r;
    while ((r = pb_next(&p, end, &f)) > 0) {
        if (f.num == 1) {
            NMT_CHECK(f.wt == 2 && f.len <= UINT32_MAX, PB_BAD);
            pc.off = (uint32_t)(f.data - t->blob);
            pc.len = (uint32_t)f.len;
            have_piece = 1;
        } else if (f.num == 2) {
            NMT_TRY(pb_float(&f, &pc.score));
        } else if (f.num == 3) {
            int32_t ty;
            NMT_TRY(pb_int32(&f, &ty));
            NMT_CHECK(ty >= NMT_SP_NORMAL && ty <= NMT_SP_BYTE, PB_BAD);
            pc.type = (uint8_t)ty;
        }
    }
    NMT_CHECK(r == 0 && have_piece && pc.len > 0, PB_BAD); /* "piece must not be empty" */
    *out = pc;
    return NMT_OK;
}

static nmt_status parse_trainer(nmt_tokenizer *t, const uint8_t *p, const uint8_t *end) {
    pb_field f;
    int r;
    while ((r = pb_next(&p, end, &f)) > 0) {
        switch (f.num) {
        case 3: {
            int32_t v;
            NMT_TRY(pb_int32(&f, &v));
            t->model_type = v;
            break;
        }
        case 24: NMT_TRY(pb_bool(&f, &t->ws_suffix)); break;
        case 25: NMT_TRY(pb_bool(&f, &t->split_digits)); break;
        case 35: NMT_TRY(pb_bool(&f, &t->byte_fallback)); break;
        case 40: case 41: case 42: case 43:
            NMT_TRY(pb_int32(&f, &t->spec_ids[f.num - 40]));
            break;
        case 44:
            NMT_CHECK(f.wt == 2 && f.len <= UINT32_MAX, PB_BAD);
            t->has_unk_surface = 1;
            t->unk_surface_off = (uint32_t)(f.data - t->blob);
            t->unk_surface_len = (uint32_t)f.len;
            break;
        default: break;
        }
    }
    return r == 0 ? NMT_OK : PB_BAD;
}

static nmt_status parse_normalizer(const nmt_tokenizer *t, const uint8_t *p, const uint8_t *end,
                                   nmt_sp_normspec *ns) {
    pb_field f;
    int r;
    while ((r = pb_next(&p, end, &f)) > 0) {
        switch (f.num) {
        case 2:
            NMT_CHECK(f.wt == 2 && f.len <= UINT32_MAX, PB_BAD);
            ns->charsmap_off = (uint32_t)(f.data - t->blob);
            ns->charsmap_len = (uint32_t)f.len;
            break;
        case 3: NMT_TRY(pb_bool(&f, &ns->add_dummy_prefix)); break;
        case 4: NMT_TRY(pb_bool(&f, &ns->remove_extra_ws)); break;
        case 5: NMT_TRY(pb_bool(&f, &ns->escape_ws)); break;
        default: break;
        }
    }
    return r == 0 ? NMT_OK : PB_BAD;
}

/* One pass over the ModelProto.  With `pieces` NULL it counts pieces and
 * reads the specs; otherwise it stores the pieces. */
static nmt_status parse_model(nmt_tokenizer *t, nmt_sp_piece *pieces, uint32_t *n_pieces) {
    const uint8_t *p = t->blob, *end = t->blob + t->size;
    pb_field f;
    int r;
    uint32_t n = 0;
    while ((r = pb_next(&p, end, &f)) > 0) {
        if (f.num == 1) {
            NMT_CHECK(f.wt == 2, PB_BAD);
            nmt_sp_piece pc;
            NMT_TRY(parse_piece(t, f.data, f.data + f.len, &pc));
            NMT_CHECK(n < (1u << 24), PB_BAD); /* ids are int32; keep tables sane */
            if (pieces) pieces[n] = pc;
            n++;
        } else if (pieces == NULL && (f.num == 2 || f.num == 3 || f.num == 5)) {
            NMT_CHECK(f.wt == 2, PB_BAD);
            if (f.num == 2) {
                NMT_TRY(parse_trainer(t, f.data, f.data + f.len));
            } else if (f.num == 3) {
                NMT_TRY(parse_normalizer(t, f.data, f.data + f.len, &t->ns));
            } else {
                nmt_sp_normspec dn = {0};
                NMT_TRY(parse_normalizer(t, f.data, f.data + f.len, &dn));
                if (dn.charsmap_len > 0) t->has_denormalizer = 1;
            }
        }
    }
    NMT_CHECK(r == 0, PB_BAD);
    *n_pieces = n;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Sorted piece indexes                                                     */
/* ------------------------------------------------------------------------ */

/* Byte-wise comparison, a proper prefix sorting first (std::string order). */
static int cmp_bytes(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    const size_t n = NMT_MIN(na, nb);
    const int c = n ? memcmp(a, b, n) : 0;
    if (c != 0) return c;
    return na < nb ? -1 : na > nb;
}

static int cmp_ids(const nmt_tokenizer *t, uint32_t a, uint32_t b) {
    const nmt_sp_piece *pa = &t->pieces[a], *pb = &t->pieces[b];
    return cmp_bytes(t->blob + pa->off, pa->len, t->blob + pb->off, pb->len);
}

static void sift_down(const nmt_tokenizer *t, uint32_t *v, size_t i, size_t n) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && cmp_ids(t, v[c + 1], v[c]) > 0) c++;
        if (cmp_ids(t, v[c], v[i]) <= 0) return;
        const uint32_t tmp = v[c];
        v[c] = v[i];
        v[i] = tmp;
        i = c;
    }
}

/* Heapsort: in place, no allocation, O(n log n) on any input. */
static void sort_ids(const nmt_tokenizer *t, uint32_t *v, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(t, v, i, n);
    for (size_t end = n; end > 1; end--) {
        const uint32_t tmp = v[0];
        v[0] = v[end - 1];
        v[end - 1] = tmp;
        sift_down(t, v, 0, end - 1);
    }
}

static int is_normal_type(uint8_t ty) {
    return ty == NMT_SP_NORMAL || ty == NMT_SP_USER_DEFINED || ty == NMT_SP_UNUSED;
}

/* "<0xXX>" with upper-case hex digits, as ByteToPiece writes it; else -1. */
static int piece_to_byte(const uint8_t *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        const uint8_t c = s[i];
        const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static nmt_status fill_tables(nmt_tokenizer *t) {
    uint32_t nn = 0, nr = 0;
    int unk = -1;
    t->min_score = FLT_MAX;
    t->max_score = FLT_MIN; /* SentencePiece's initial values, kept for parity */
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    for (uint32_t i = 0; i < t->n_pieces; i++) {
        const nmt_sp_piece *pc = &t->pieces[i];
        if (is_normal_type(pc->type)) {
            t->normal_sorted[nn++] = i;
        } else {
            t->reserved_sorted[nr++] = i;
        }
        if (pc->type == NMT_SP_NORMAL) {
            t->min_score = NMT_MIN(t->min_score, pc->score);
            t->max_score = NMT_MAX(t->max_score, pc->score);
        }
        if (pc->type == NMT_SP_UNKNOWN) {
            NMT_CHECK(unk < 0, PB_BAD); /* "unk is already defined" */
            unk = (int)i;
        }
        if (pc->type == NMT_SP_BYTE) {
            NMT_CHECK(t->byte_fallback, PB_BAD);
            const int b = piece_to_byte(t->blob + pc->off, pc->len);
            NMT_CHECK(b >= 0, PB_BAD);
            t->byte_id[b] = (int32_t)i;
        }
    }
    NMT_CHECK(unk >= 0, PB_BAD); /* "unk is not defined" */
    t->unk_id = unk;
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++) NMT_CHECK(t->byte_id[b] >= 0, PB_BAD);
    sort_ids(t, t->normal_sorted, nn);
    sort_ids(t, t->reserved_sorted, nr);
    for (uint32_t i = 1; i < nn; i++)
        NMT_CHECK(cmp_ids(t, t->normal_sorted[i - 1], t->normal_sorted[i]) != 0, PB_BAD);
    for (uint32_t i = 1; i < nr; i++)
        NMT_CHECK(cmp_ids(t, t->reserved_sorted[i - 1], t->reserved_sorted[i]) != 0, PB_BAD);
    return NMT_OK;
}

/* Read-only scan of the piece messages: counts, flags and SentencePiece's
 * checks that need no table (one UNKNOWN, BYTE pieces only with
 * byte_fallback and then all 256). */
static nmt_status scan_pieces(nmt_tokenizer *t, uint32_t *n_normal, uint32_t *max_len) {
    const uint8_t *p = t->blob, *end = t->blob + t->size;
    uint8_t seen[32] = {0};
    int n_unk = 0;
    pb_field f;
    while (pb_next(&p, end, &f) > 0) {
        if (f.num != 1) continue;
        nmt_sp_piece pc;
        NMT_TRY(parse_piece(t, f.data, f.data + f.len, &pc));
        *n_normal += is_normal_type(pc.type);
        *max_len = NMT_MAX(*max_len, pc.len);
        if (pc.type == NMT_SP_USER_DEFINED) t->has_user_defined = 1;
        if (pc.type == NMT_SP_UNUSED) t->has_unused = 1;
        if (pc.type == NMT_SP_UNKNOWN) n_unk++;
        if (pc.type == NMT_SP_BYTE) {
            NMT_CHECK(t->byte_fallback, PB_BAD);
            const int b = piece_to_byte(t->blob + pc.off, pc.len);
            NMT_CHECK(b >= 0, PB_BAD);
            seen[b >> 3] |= (uint8_t)(1u << (b & 7));
        }
    }
    NMT_CHECK(n_unk == 1, PB_BAD);
    if (t->byte_fallback)
        for (int i = 0; i < 32; i++) NMT_CHECK(seen[i] == 0xff, PB_BAD);
    return NMT_OK;
}

/* The precompiled charsmap of the normalizer spec (its trie and replacement
 * strings, tokenizer_norm.c reads them), bounds-checked, and the longest
 * replacement (escaped spaces counted). */
nmt_status nmt_tok_charsmap_init(const nmt_tokenizer *t, nmt_sp_normspec *ns) {
    uint32_t max_out = 3; /* U+FFFD for one bad byte; an escaped space */
    ns->trie = NULL;
    ns->trie_units = 0;
    ns->strs = NULL;
    ns->strs_len = 0;
    if (ns->charsmap_len > 0) {
        const uint8_t *b = t->blob + ns->charsmap_off;
        const uint32_t n = ns->charsmap_len;
        NMT_CHECK(n > 4, NMT_ERR_TOKENIZER_MODEL);
        const uint32_t trie_bytes = nmt_tok_rd32(b);
        NMT_CHECK(trie_bytes <= n - 4, NMT_ERR_TOKENIZER_MODEL);
        ns->trie = b + 4;
        ns->trie_units = trie_bytes / 4;
        ns->strs = b + 4 + trie_bytes;
        ns->strs_len = n - 4 - trie_bytes;
        /* longest replacement string, spaces counted as escaped */
        uint32_t cur = 0;
        for (uint32_t i = 0; i < ns->strs_len; i++) {
            if (ns->strs[i] == 0) {
                cur = 0;
                continue;
            }
            cur += ns->strs[i] == ' ' ? 3 : 1;
            max_out = NMT_MAX(max_out, cur);
        }
    }
    ns->max_out = max_out;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Planning                                                                 */
/* ------------------------------------------------------------------------ */

nmt_status nmt_tok_plan(nmt_tokenizer *t, nmt_arena *a, const void *model, size_t size,
                        uint32_t max_text_bytes) {
    NMT_CHECK(t != NULL && a != NULL && (model != NULL || size == 0), NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(max_text_bytes > 0 && max_text_bytes <= (1u << 24), NMT_ERR_INVALID_ARGUMENT);
    memset(t, 0, sizeof *t);
    t->blob = model;
    t->size = size;
    t->model_type = NMT_SP_UNIGRAM;
    t->spec_ids[0] = 0;
    t->spec_ids[1] = 1;
    t->spec_ids[2] = 2;
    t->spec_ids[3] = -1;
    t->ns.add_dummy_prefix = t->ns.remove_extra_ws = t->ns.escape_ws = 1;
    t->max_text_bytes = max_text_bytes;
    NMT_CHECK(size > 0, PB_BAD);
    /* The model bytes are copied into the arena first and parsed there, so
     * that no table points into the caller's image: a session's image is
     * its mapped model file, which may be truncated or replaced while the
     * session runs (issue 21).  The measuring pass reads the image itself. */
    uint8_t *copy = nmt_arena_alloc(a, size, 1);
    NMT_CHECK(copy != NULL, NMT_ERR_ARENA_TOO_SMALL);
    if (!nmt_arena_measuring(a)) {
        memcpy(copy, model, size);
        t->blob = copy;
    }

    /* pass 1: specs and counts, everything validated */
    uint32_t n = 0;
    NMT_TRY(parse_model(t, NULL, &n));
    NMT_CHECK(n > 0, PB_BAD);
    t->n_pieces = n;
    if (t->model_type != NMT_SP_UNIGRAM && t->model_type != NMT_SP_BPE) {
        NMT_CHECK(t->model_type == NMT_SP_WORD || t->model_type == NMT_SP_CHAR, PB_BAD);
        return NMT_ERR_UNSUPPORTED;
    }
    if (t->has_denormalizer) return NMT_ERR_UNSUPPORTED;
    NMT_TRY(nmt_tok_charsmap_init(t, &t->ns));

    t->pieces = NMT_ARENA_NEW(a, nmt_sp_piece, n);
    NMT_CHECK(t->pieces != NULL, NMT_ERR_ARENA_TOO_SMALL);

    /* pass 2: the kinds of pieces, checked the same way on both passes */
    uint32_t nn = 0, max_len = 0;
    NMT_TRY(scan_pieces(t, &nn, &max_len));
    /* pass 3 (real arena only): the pieces themselves */
    if (!nmt_arena_measuring(a)) NMT_TRY(parse_model(t, t->pieces, &n));
    t->n_normal = nn;
    t->n_reserved = n - nn;
    t->max_piece_len = max_len;
    t->normal_sorted = NMT_ARENA_NEW(a, uint32_t, nn ? nn : 1);
    t->reserved_sorted = NMT_ARENA_NEW(a, uint32_t, n - nn ? n - nn : 1);
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    if (!nmt_arena_measuring(a)) NMT_TRY(fill_tables(t));
    if (t->model_type == NMT_SP_UNIGRAM) NMT_CHECK(nn > 0, PB_BAD); /* "no pieces are loaded" */

    /* bytes one id decodes to: its piece, the unknown surface, or U+FFFD */
    uint32_t dec = NMT_MAX(max_len, 3u);
    dec = NMT_MAX(dec, t->has_unk_surface ? t->unk_surface_len : 5u);
    t->max_decode_bytes = dec;

    /* Normalized text: each step of the normalizer consumes >= 1 input byte
     * and writes at most norm.max_out bytes (spaces escaped to 3 bytes), plus
     * the dummy prefix/suffix. */
    size_t cap;
    NMT_CHECK(nmt_mul_ok(max_text_bytes, t->ns.max_out, &cap), NMT_ERR_INVALID_ARGUMENT);
    cap += 8;
    NMT_CHECK(cap < ((size_t)1 << 30), NMT_ERR_INVALID_ARGUMENT);
    t->norm_cap = cap;
    t->norm = NMT_ARENA_NEW(a, uint8_t, cap);
    t->raw_ids = NMT_ARENA_NEW(a, int32_t, cap);
    t->raw_off = NMT_ARENA_NEW(a, uint32_t, cap);
    t->raw_len = NMT_ARENA_NEW(a, uint32_t, cap);
    t->ids = NMT_ARENA_NEW(a, int32_t, cap);
    if (t->model_type == NMT_SP_UNIGRAM) {
        t->cells = NMT_ARENA_NEW(a, nmt_sp_cell, cap + 1);
    } else {
        t->syms = NMT_ARENA_NEW(a, nmt_sp_sym, cap);
        t->heap = NMT_ARENA_NEW(a, nmt_sp_pair, 3 * cap);
        if (t->has_unused) {
            t->merges = NMT_ARENA_NEW(a, uint32_t, 9 * cap);
            t->stack = NMT_ARENA_NEW(a, uint32_t, 2 * cap + 2);
        }
    }
    NMT_CHECK(!a->failed, NMT_ERR_ARENA_TOO_SMALL);
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Lookups                                                                  */
/* ------------------------------------------------------------------------ */

static int32_t find_in(const nmt_tokenizer *t, const uint32_t *v, uint32_t n, const uint8_t *s,
                       size_t len) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        const nmt_sp_piece *pc = &t->pieces[v[mid]];
        const int c = cmp_bytes(t->blob + pc->off, pc->len, s, len);
        if (c == 0) return (int32_t)v[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int32_t nmt_tok_find_normal(const nmt_tokenizer *t, const uint8_t *s, size_t n) {
    return find_in(t, t->normal_sorted, t->n_normal, s, n);
}

int32_t nmt_tok_piece_to_id(const nmt_tokenizer *t, const uint8_t *s, size_t n) {
    int32_t id = find_in(t, t->reserved_sorted, t->n_reserved, s, n);
    if (id < 0) id = find_in(t, t->normal_sorted, t->n_normal, s, n);
    return id < 0 ? t->unk_id : id;
}

/* The sorted array doubles as a trie: the pieces sharing the first k bytes
 * of s form a contiguous range; narrowing it by byte k is two binary
 * searches, and a piece of exactly k+1 bytes sorts first in the new range. */
void nmt_tok_prefixes(const nmt_tokenizer *t, const uint8_t *s, size_t n, nmt_tok_prefix_fn fn,
                      void *user) {
    const uint32_t *v = t->normal_sorted;
    uint32_t lo = 0, hi = t->n_normal;
    for (size_t k = 0; k < n && lo < hi; k++) {
        const uint8_t c = s[k];
        /* first index in [lo, hi) whose byte k is >= c (pieces of length k
         * sort before every longer one and count as "< c") */
        uint32_t a = lo, b = hi;
        while (a < b) {
            const uint32_t m = a + (b - a) / 2;
            const nmt_sp_piece *pc = &t->pieces[v[m]];
            if (pc->len <= k || t->blob[pc->off + k] < c) a = m + 1;
            else b = m;
        }
        uint32_t e = a, f = hi;
        while (e < f) {
            const uint32_t m = e + (f - e) / 2;
            const nmt_sp_piece *pc = &t->pieces[v[m]];
            if (t->blob[pc->off + k] <= c) e = m + 1;
            else f = m;
        }
        lo = a;
        hi = e;
        if (lo < hi && t->pieces[v[lo]].len == k + 1) fn(user, v[lo], (uint32_t)(k + 1));
    }
}

typedef struct user_match {
    const nmt_tokenizer *t;
    uint32_t best;
} user_match;

static void on_user_prefix(void *user, uint32_t id, uint32_t len) {
    user_match *m = user;
    if (m->t->pieces[id].type == NMT_SP_USER_DEFINED) m->best = len;
}

uint32_t nmt_tok_user_prefix(const nmt_tokenizer *t, const uint8_t *s, size_t n) {
    if (!t->has_user_defined) return 0;
    user_match m = {t, 0};
    nmt_tok_prefixes(t, s, n, on_user_prefix, &m);
    return m.best;
}
