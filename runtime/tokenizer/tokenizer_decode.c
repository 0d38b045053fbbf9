/* SPDX-License-Identifier: MIT */
/* tokenizer_decode.c — the encoder driver (normalize, segment, then the
 * unknown-piece rules of SentencePieceProcessor::PopulateSentencePieceText),
 * the decoder (SentencePieceProcessor::Decode: control pieces vanish,
 * unknowns become the unknown surface, runs of byte pieces are reassembled
 * as UTF-8 with U+FFFD for each invalid byte, U+2581 becomes a space and the
 * leading one is dropped), and the public nmt_tokenizer_* API. */
#include "tokenizer.h"

#include <string.h>

static const uint8_t DEFAULT_UNK_SURFACE[5] = {' ', 0xE2, 0x81, 0x87, ' '}; /* " \u2047 " */

/* ------------------------------------------------------------------------ */
/* Encode                                                                   */
/* ------------------------------------------------------------------------ */

nmt_status nmt_tok_encode(nmt_tokenizer *t, const char *text, size_t n) {
    NMT_CHECK(text != NULL || n == 0, NMT_ERR_INVALID_ARGUMENT);
    t->n_ids = 0;
    NMT_TRY(nmt_tok_normalize(t, (const uint8_t *)text, n));
    uint32_t n_raw = 0;
    if (t->model_type == NMT_SP_UNIGRAM) NMT_TRY(nmt_tok_unigram(t, &n_raw));
    else NMT_TRY(nmt_tok_bpe(t, &n_raw));
    int prev_unk = 0;
    uint32_t k = 0;
    size_t consumed = 0;
    for (uint32_t i = 0; i < n_raw; i++) {
        const int32_t id = t->raw_ids[i];
        const uint8_t type = t->pieces[id].type;
        const int is_unk = type == NMT_SP_UNKNOWN;
        if (type == NMT_SP_CONTROL) {
            t->ids[k++] = id; /* no surface: consumes nothing (the check below fails) */
        } else {
            if (is_unk && t->byte_fallback) {
                for (uint32_t b = 0; b < t->raw_len[i]; b++)
                    t->ids[k++] = t->byte_id[t->norm[t->raw_off[i] + b]];
            } else if (!(is_unk && prev_unk)) { /* runs of unknowns merge into one */
                t->ids[k++] = id;
            }
            consumed += t->raw_len[i];
        }
        prev_unk = is_unk;
    }
    /* SentencePiece: "all normalized characters are not consumed" */
    NMT_CHECK(consumed == t->norm_len, NMT_ERR_TOKENIZER_MODEL);
    t->n_ids = k;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Decode                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct sink {
    char *p;
    size_t cap, len;
} sink;

static void emit(sink *o, const void *s, size_t n) {
    if (o->len < o->cap && n > 0) memcpy(o->p + o->len, s, NMT_MIN(n, o->cap - o->len));
    o->len += n;
}

/* A run of byte pieces, reassembled: valid UTF-8 as is, else U+FFFD per byte. */
static void flush_bytes(const nmt_tokenizer *t, const int32_t *ids, uint32_t from, uint32_t to,
                        sink *o) {
    uint8_t buf[4];
    uint32_t nb = 0;
    while (from < to || nb > 0) {
        while (nb < 4 && from < to) {
            const nmt_sp_piece *pc = &t->pieces[ids[from++]];
            const uint8_t *s = t->blob + pc->off;
            /* "<0xXX>": validated at load */
            const uint8_t hi = s[3], lo = s[4];
            buf[nb++] = (uint8_t)(((hi <= '9' ? hi - '0' : hi - 'A' + 10) << 4) |
                                  (lo <= '9' ? lo - '0' : lo - 'A' + 10));
        }
        uint32_t cp, mblen;
        if (!nmt_utf8_decode(buf, nb, &cp, &mblen) && mblen != 3) {
            emit(o, "\xEF\xBF\xBD", 3);
            mblen = 1;
        } else {
            emit(o, buf, mblen);
        }
        memmove(buf, buf + mblen, nb - mblen);
        nb -= mblen;
    }
}

/* A piece with U+2581 turned into spaces. */
static void emit_piece(sink *o, const uint8_t *s, size_t n) {
    size_t i = 0, run = 0;
    while (i < n) {
        if (n - i >= 3 && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
            emit(o, s + run, i - run);
            emit(o, " ", 1);
            i += 3;
            run = i;
        } else {
            i++;
        }
    }
    emit(o, s + run, n - run);
}

nmt_status nmt_tok_decode(const nmt_tokenizer *t, const int32_t *ids, uint32_t n, char *out,
                          size_t cap, size_t *len) {
    NMT_CHECK(len != NULL && (ids != NULL || n == 0) && (out != NULL || cap == 0),
              NMT_ERR_INVALID_ARGUMENT);
    for (uint32_t i = 0; i < n; i++)
        NMT_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < t->n_pieces, NMT_ERR_TOKEN_OUT_OF_RANGE);
    sink o = {out, cap, 0};
    const nmt_sp_normspec *ns = &t->ns;
    int is_bos_ws = 1, bos_ws_seen = 0;
    uint32_t byte_start = 0;
    for (uint32_t i = 0; i < n; i++) {
        const nmt_sp_piece *pc = &t->pieces[ids[i]];
        if (pc->type == NMT_SP_BYTE) continue;
        flush_bytes(t, ids, byte_start, i, &o);
        byte_start = i + 1;
        if (bos_ws_seen || o.len > 0) is_bos_ws = 0;
        bos_ws_seen = 0;
        if (pc->type == NMT_SP_CONTROL) continue;
        if (pc->type == NMT_SP_UNKNOWN) {
            if (t->has_unk_surface) emit(&o, t->blob + t->unk_surface_off, t->unk_surface_len);
            else emit(&o, DEFAULT_UNK_SURFACE, sizeof DEFAULT_UNK_SURFACE);
            continue;
        }
        const uint8_t *s = t->blob + pc->off;
        size_t len_p = pc->len;
        if (is_bos_ws && (ns->add_dummy_prefix || ns->remove_extra_ws)) {
            if (len_p >= 3 && s[0] == 0xE2 && s[1] == 0x96 && s[2] == 0x81) {
                s += 3;
                len_p -= 3;
                bos_ws_seen = !ns->remove_extra_ws;
            }
        }
        emit_piece(&o, s, len_p);
    }
    flush_bytes(t, ids, byte_start, n, &o);
    *len = o.len;
    return o.len <= cap ? NMT_OK : NMT_ERR_BUFFER_TOO_SMALL;
}

/* ------------------------------------------------------------------------ */
/* Public API                                                               */
/* ------------------------------------------------------------------------ */

nmt_status nmt_tok_plan_new(nmt_arena *a, const void *model, size_t size, uint32_t max_text_bytes,
                            nmt_tokenizer **out, uint32_t *n_pieces, uint32_t *max_decode_bytes) {
    nmt_tokenizer *t = NMT_ARENA_NEW(a, nmt_tokenizer, 1);
    NMT_CHECK(t != NULL, NMT_ERR_ARENA_TOO_SMALL);
    *out = NULL;
    nmt_tokenizer tmp; /* the measuring plan writes its scalars somewhere real */
    nmt_tokenizer *p = nmt_arena_measuring(a) ? &tmp : t;
    NMT_TRY(nmt_tok_plan(p, a, model, size, max_text_bytes));
    if (n_pieces) *n_pieces = p->n_pieces;
    if (max_decode_bytes) *max_decode_bytes = p->max_decode_bytes;
    if (p == t) *out = t;
    return NMT_OK;
}

nmt_status nmt_tokenizer_arena_size(const void *model, size_t size, uint32_t max_text_bytes,
                                    size_t *arena_bytes) {
    NMT_CHECK(arena_bytes != NULL, NMT_ERR_INVALID_ARGUMENT);
    nmt_arena a;
    nmt_arena_init_measure(&a);
    nmt_tokenizer *t;
    NMT_TRY(nmt_tok_plan_new(&a, model, size, max_text_bytes, &t, NULL, NULL));
    *arena_bytes = nmt_arena_required(&a);
    return NMT_OK;
}

nmt_status nmt_tokenizer_create(const void *model, size_t size, uint32_t max_text_bytes,
                                void *arena, size_t arena_size, nmt_tokenizer **out) {
    NMT_CHECK(out != NULL && arena != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    size_t need;
    NMT_TRY(nmt_tokenizer_arena_size(model, size, max_text_bytes, &need));
    nmt_arena a;
    nmt_arena_init(&a, arena, arena_size);
    NMT_CHECK(a.size >= need, NMT_ERR_ARENA_TOO_SMALL);
    return nmt_tok_plan_new(&a, model, size, max_text_bytes, out, NULL, NULL);
}

nmt_status nmt_tokenizer_encode(nmt_tokenizer *t, const char *text, size_t len,
                                const int32_t **ids, uint32_t *n_ids) {
    NMT_CHECK(t != NULL && ids != NULL && n_ids != NULL, NMT_ERR_INVALID_ARGUMENT);
    *ids = NULL;
    *n_ids = 0;
    NMT_TRY(nmt_tok_encode(t, text, len));
    *ids = t->ids;
    *n_ids = t->n_ids;
    return NMT_OK;
}

nmt_status nmt_tokenizer_decode(const nmt_tokenizer *t, const int32_t *ids, uint32_t n_ids,
                                char *out, size_t cap, size_t *out_len) {
    NMT_CHECK(t != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_tok_decode(t, ids, n_ids, out, cap, out_len);
}

size_t nmt_tokenizer_decode_bound(const nmt_tokenizer *t, uint32_t n_ids) {
    return t ? (size_t)n_ids * t->max_decode_bytes : 0;
}

nmt_status nmt_tokenizer_piece(const nmt_tokenizer *t, int32_t id, const char **piece,
                               size_t *len) {
    NMT_CHECK(t != NULL && piece != NULL && len != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(id >= 0 && (uint32_t)id < t->n_pieces, NMT_ERR_TOKEN_OUT_OF_RANGE);
    *piece = (const char *)nmt_tok_piece_str(t, (uint32_t)id);
    *len = t->pieces[id].len;
    return NMT_OK;
}

nmt_status nmt_tokenizer_get_info(const nmt_tokenizer *t, nmt_tokenizer_info *info) {
    NMT_CHECK(t != NULL && info != NULL, NMT_ERR_INVALID_ARGUMENT);
    memset(info, 0, sizeof *info);
    info->vocab_size = t->n_pieces;
    info->model_type = t->model_type == NMT_SP_BPE ? "bpe" : "unigram";
    info->byte_fallback = t->byte_fallback;
    info->unk_id = t->unk_id;
    info->bos_id = t->spec_ids[1];
    info->eos_id = t->spec_ids[2];
    info->pad_id = t->spec_ids[3];
    info->max_text_bytes = t->max_text_bytes;
    return NMT_OK;
}
