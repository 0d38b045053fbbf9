/* SPDX-License-Identifier: MIT */
/* tokenizer_norm.c — SentencePiece's normalizer: UTF-8 as it reads it, the
 * precompiled charsmap (a darts-clone double-array trie over input byte
 * strings whose values point into a block of NUL-terminated replacement
 * strings), and Normalizer::Normalize (leading/trailing/repeated whitespace,
 * the dummy prefix, U+2581 escaping).  The charsmap comes from an untrusted
 * file: every trie step and string read is bounds-checked; where
 * SentencePiece would read out of bounds we stop the match (or fail with
 * NMT_ERR_TOKENIZER_MODEL for a dangling value). */
#include "tokenizer.h"

#include <string.h>

#define SPACE_SYMBOL "\xe2\x96\x81" /* U+2581, 3 bytes */
#define MAX_TRIE_RESULTS 32         /* Normalizer::kMaxTrieResultsSize */

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                    */
/* ------------------------------------------------------------------------ */

static int is_trail(uint8_t b) { return (b & 0xC0) == 0x80; }
static int valid_cp(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

int nmt_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, uint32_t *mblen) {
    const uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        *mblen = 1;
        return 1;
    }
    if (n >= 2 && (b & 0xE0) == 0xC0) {
        const uint32_t c = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F);
        if (is_trail(s[1]) && c >= 0x80 && valid_cp(c)) {
            *cp = c;
            *mblen = 2;
            return 1;
        }
    } else if (n >= 3 && (b & 0xF0) == 0xE0) {
        const uint32_t c = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        if (is_trail(s[1]) && is_trail(s[2]) && c >= 0x800 && valid_cp(c)) {
            *cp = c;
            *mblen = 3;
            return 1;
        }
    } else if (n >= 4 && (b & 0xF8) == 0xF0) {
        const uint32_t c = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
                           (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
        if (is_trail(s[1]) && is_trail(s[2]) && is_trail(s[3]) && c >= 0x10000 && valid_cp(c)) {
            *cp = c;
            *mblen = 4;
            return 1;
        }
    }
    *cp = 0xFFFD;
    *mblen = 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Precompiled charsmap                                                     */
/* ------------------------------------------------------------------------ */

typedef struct trie_hit {
    uint32_t value, length;
} trie_hit;

/* darts-clone commonPrefixSearch, bounds-checked; returns the number of
 * matches (all of them, as darts does), storing the first `max`. */
static size_t trie_prefixes(const nmt_sp_normspec *ns, const uint8_t *key, size_t len,
                            trie_hit *out, size_t max) {
    const uint32_t U = ns->trie_units;
    if (U == 0) return 0;
    size_t found = 0;
    uint32_t unit = nmt_tok_rd32(ns->trie);
    size_t pos = (size_t)(unit >> 10) << ((unit & (1u << 9)) >> 6);
    for (size_t i = 0; i < len; i++) {
        pos ^= key[i];
        if (pos >= U) return found;
        unit = nmt_tok_rd32(ns->trie + 4 * pos);
        if ((unit & ((1u << 31) | 0xFFu)) != key[i]) return found;
        pos ^= (size_t)(unit >> 10) << ((unit & (1u << 9)) >> 6);
        if ((unit >> 8) & 1) {
            if (pos >= U) return found;
            if (found < max) {
                out[found].value = nmt_tok_rd32(ns->trie + 4 * pos) & 0x7FFFFFFFu;
                out[found].length = (uint32_t)(i + 1);
            }
            found++;
        }
    }
    return found;
}

/* Normalizer::NormalizePrefix: the replacement for the longest rule that
 * matches at s (or one UTF-8 character, or U+FFFD for a bad byte), and the
 * input bytes consumed.  User-defined pieces pass through unchanged. */
static nmt_status normalize_prefix(const nmt_tokenizer *t, const nmt_sp_normspec *ns,
                                   const uint8_t *s, size_t n, const uint8_t **out,
                                   uint32_t *out_len, uint32_t *consumed) {
    const uint32_t user = nmt_tok_user_prefix(t, s, n);
    if (user > 0) {
        *out = s;
        *out_len = *consumed = user;
        return NMT_OK;
    }
    trie_hit hits[MAX_TRIE_RESULTS];
    size_t nh = trie_prefixes(ns, s, n, hits, MAX_TRIE_RESULTS);
    if (nh > MAX_TRIE_RESULTS) nh = MAX_TRIE_RESULTS;
    uint32_t best_len = 0, best_val = 0;
    for (size_t k = 0; k < nh; k++)
        if (best_len == 0 || hits[k].length > best_len) {
            best_len = hits[k].length;
            best_val = hits[k].value;
        }
    if (best_len == 0) {
        uint32_t cp, mblen;
        if (!nmt_utf8_decode(s, n, &cp, &mblen) && mblen != 3) {
            static const uint8_t replacement[3] = {0xEF, 0xBF, 0xBD};
            *out = replacement;
            *out_len = 3;
            *consumed = 1;
        } else {
            *out = s;
            *out_len = *consumed = mblen;
        }
        return NMT_OK;
    }
    NMT_CHECK(best_val < ns->strs_len, NMT_ERR_TOKENIZER_MODEL);
    const uint8_t *r = ns->strs + best_val;
    const uint8_t *nul = memchr(r, 0, ns->strs_len - best_val);
    NMT_CHECK(nul != NULL, NMT_ERR_TOKENIZER_MODEL);
    *out = r;
    *out_len = (uint32_t)(nul - r);
    *consumed = best_len;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Normalizer::Normalize                                                    */
/* ------------------------------------------------------------------------ */

typedef struct outbuf {
    uint8_t *p;
    size_t len, cap;
} outbuf;

static nmt_status put(outbuf *o, const void *s, size_t n) {
    NMT_CHECK(n <= o->cap - o->len, NMT_ERR_INPUT_TOO_LONG); /* cannot happen: planned */
    memcpy(o->p + o->len, s, n);
    o->len += n;
    return NMT_OK;
}

static nmt_status put_ws(outbuf *o, int escape) {
    return escape ? put(o, SPACE_SYMBOL, 3) : put(o, " ", 1);
}

nmt_status nmt_tok_normalize(nmt_tokenizer *t, const uint8_t *s, size_t n) {
    const nmt_sp_normspec *ns = &t->ns;
    NMT_CHECK(n <= t->max_text_bytes, NMT_ERR_INPUT_TOO_LONG);
    outbuf o = {t->norm, 0, t->norm_cap};
    t->norm_len = 0;
    if (n == 0) return NMT_OK;
    const uint8_t *r;
    uint32_t rl, used;
    if (ns->remove_extra_ws) { /* leading whitespace */
        while (n > 0) {
            NMT_TRY(normalize_prefix(t, ns, s, n, &r, &rl, &used));
            if (!(rl == 1 && r[0] == ' ')) break;
            s += used;
            n -= used;
        }
    }
    if (n == 0) return NMT_OK;
    if (!t->ws_suffix && ns->add_dummy_prefix) NMT_TRY(put_ws(&o, ns->escape_ws));
    int prev_space = ns->remove_extra_ws;
    while (n > 0) {
        NMT_TRY(normalize_prefix(t, ns, s, n, &r, &rl, &used));
        while (prev_space && rl > 0 && r[0] == ' ') {
            r++;
            rl--;
        }
        if (rl > 0) {
            for (uint32_t i = 0; i < rl; i++) {
                if (ns->escape_ws && r[i] == ' ') NMT_TRY(put(&o, SPACE_SYMBOL, 3));
                else NMT_TRY(put(&o, &r[i], 1));
            }
            prev_space = r[rl - 1] == ' ';
        }
        s += used;
        n -= used;
        if (!ns->remove_extra_ws) prev_space = 0;
    }
    if (ns->remove_extra_ws) { /* trailing whitespace */
        const size_t w = ns->escape_ws ? 3 : 1;
        const uint8_t *sp = (const uint8_t *)(ns->escape_ws ? SPACE_SYMBOL : " ");
        while (o.len >= w && memcmp(o.p + o.len - w, sp, w) == 0) o.len -= w;
    }
    if (t->ws_suffix && ns->add_dummy_prefix) NMT_TRY(put_ws(&o, ns->escape_ws));
    t->norm_len = o.len;
    return NMT_OK;
}
