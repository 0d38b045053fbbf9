/* SPDX-License-Identifier: MIT */
/* cli_align.c — `nmt-edge translate --alignment` and `score --alignment`:
 * the alignment of each printed hypothesis (translate) or of each given
 * pair under teacher forcing (score), appended to its line after " ||| "
 * (the form scripts/compare/aer.py reads), from the library's
 * nmt_session_result_alignment / nmt_session_result_links.
 *
 *   hard   Pharaoh pairs "i-j", 0-based: target piece j is linked to the
 *          source piece i its attention row puts most weight on (the
 *          source's end-of-sentence never); one pair per target piece, in
 *          target order.
 *   hard + --alignment-words
 *          the same links between whitespace words: a piece starting with
 *          U+2581 (SentencePiece's word boundary), or the byte-fallback
 *          piece of a whitespace byte, starts a word, every other piece
 *          continues the word before; word i is linked to word j when
 *          any piece of i is linked to any piece of j.  Pairs unique, sorted
 *          by target word, then source word.  Text mode only.
 *   soft   the attention matrix: one row per target piece, rows separated
 *          by " ; ", each row the probabilities ("%.4f") of the source
 *          pieces then of the source's end-of-sentence (so it sums to 1).
 *
 * An empty translation (or source) appends " |||" and nothing after it.
 * --format jsonl takes the same alignment as a JSON array (cli_align_json):
 * hard [[i, j], ...], soft [[p, ...], ...] (one array per target piece). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Word index of every piece of ids[0, n) into words[] (the tokenizer's
 * pieces): a piece starting with U+2581, or the byte-fallback piece of a
 * whitespace byte (<0x20>, <0x09>, <0x0A>, <0x0D>), starts a word.
 * Returns the number of words. */
static uint32_t word_map(const nmt_tokenizer *tok, const int32_t *ids, uint32_t n, uint32_t *words) {
    uint32_t w = 0;
    for (uint32_t k = 0; k < n; k++) {
        const char *piece = NULL;
        size_t len = 0;
        int starts = 0;
        if (nmt_tokenizer_piece(tok, ids[k], &piece, &len) == NMT_OK)
            starts = (len >= 3 && memcmp(piece, "\xe2\x96\x81", 3) == 0) ||
                     (len == 6 && (memcmp(piece, "<0x20>", 6) == 0 || memcmp(piece, "<0x09>", 6) == 0 ||
                                   memcmp(piece, "<0x0A>", 6) == 0 || memcmp(piece, "<0x0D>", 6) == 0));
        if (k > 0 && starts) w++;
        words[k] = w;
    }
    return n ? w + 1 : 0;
}

int cli_align_init(cli_align *a, const cli_opts *o, const runtime *rt) {
    memset(a, 0, sizeof *a);
    if (o->alignment == NULL) return 0;
    a->mode = strcmp(o->alignment, "soft") == 0 ? CLI_ALIGN_SOFT : CLI_ALIGN_HARD;
    a->words = o->alignment_words;
    if (a->words && (nmt_session_tokenizer(rt->s, 0) == NULL || o->ids)) {
        fprintf(stderr, PROG ": --alignment-words needs text: a model with an embedded tokenizer, without --ids\n");
        return 1;
    }
    nmt_limits lim;
    nmt_session_limits(rt->s, &lim);
    a->max_tgt = lim.max_tgt_len;
    a->max_src = lim.max_src_len;
    a->soft = xrealloc(NULL, sizeof(float) * (size_t)lim.max_tgt_len * (lim.max_src_len + 1) + 1);
    a->links = xrealloc(NULL, sizeof(int32_t) * ((size_t)lim.max_tgt_len + 1));
    a->src_word = xrealloc(NULL, sizeof(uint32_t) * ((size_t)lim.max_src_len + 1));
    a->tgt_word = xrealloc(NULL, sizeof(uint32_t) * ((size_t)lim.max_tgt_len + 1));
    return 0;
}

void cli_align_free(cli_align *a) {
    free(a->soft);
    free(a->links);
    free(a->src_word);
    free(a->tgt_word);
    memset(a, 0, sizeof *a);
}

/* Before an item of an alignment: " " in the text form, ", " between the
 * items of a JSON array. */
static void next_item(strbuf *out, int json, int *first) {
    if (!json || !*first) sb_printf(out, "%s", json ? ", " : " ");
    *first = 0;
}

/* The alignment of hypothesis `rank` of result i as text (" ||| 0-0 1-1",
 * " ||| 0.9 0.1 ; ...") or as one JSON array (json: [[0, 0], [1, 1]] or
 * [[0.9, 0.1], ...]). */
static int align_write(cli_align *a, const runtime *rt, uint32_t i, uint32_t rank, const char *src, size_t src_len,
                       const char *tgt_text, size_t tgt_text_len, int json, strbuf *out) {
    uint32_t len, cols;
    nmt_status st = nmt_session_result_alignment(rt->s, i, rank, a->soft,
                                                 (size_t)a->max_tgt * (a->max_src + 1), &len, &cols);
    if (st == NMT_OK && a->mode == CLI_ALIGN_HARD) st = nmt_session_result_links(rt->s, i, rank, a->links, a->max_tgt, &len);
    if (st != NMT_OK) return report_status("reading an alignment failed", st, rt);
    /* text: " |||" then " ITEM" each; JSON: "[" then "ITEM" joined by ", ", "]" */
    int first = 1;
    sb_printf(out, json ? "[" : " |||");
    if (a->mode == CLI_ALIGN_SOFT) {
        for (uint32_t p = 0; p < len; p++) {
            if (json) {
                next_item(out, json, &first);
                sb_printf(out, "[");
            } else if (p) {
                sb_printf(out, " ;");
            }
            for (uint32_t j = 0; j < cols; j++)
                sb_printf(out, "%s%.4f", json ? (j ? ", " : "") : " ", (double)a->soft[(size_t)p * cols + j]);
            if (json) sb_printf(out, "]");
        }
        if (json) sb_printf(out, "]");
        return 0;
    }
    if (!a->words) {
        for (uint32_t p = 0; p < len; p++) {
            if (a->links[p] < 0) continue;
            next_item(out, json, &first);
            sb_printf(out, json ? "[%d, %u]" : "%d-%u", (int)a->links[p], p);
        }
        if (json) sb_printf(out, "]");
        return 0;
    }
    /* words: the source pieces again (the session's tokenizer, as the translation did), then the target's:
     * the hypothesis's tokens, or the reference text tokenized again (score) */
    const int32_t *ids, *tgt;
    uint32_t n_src, n_tgt;
    st = nmt_tokenizer_encode(nmt_session_tokenizer(rt->s, 0), src, src_len, &ids, &n_src);
    if (st == NMT_OK && n_src + 1 != cols) st = NMT_ERR_INVALID_ARGUMENT; /* cannot happen: the same text */
    if (st != NMT_OK) return report_status("reading an alignment failed", st, rt);
    const uint32_t sw = word_map(nmt_session_tokenizer(rt->s, 0), ids, n_src, a->src_word); /* before ids moves */
    if (tgt_text != NULL)
        st = nmt_tokenizer_encode(nmt_session_tokenizer(rt->s, 1), tgt_text, tgt_text_len, &tgt, &n_tgt);
    else
        st = nmt_session_result(rt->s, i, rank, &tgt, &n_tgt, NULL, NULL);
    if (st == NMT_OK && n_tgt != len) st = NMT_ERR_INVALID_ARGUMENT; /* cannot happen either */
    if (st != NMT_OK) return report_status("reading an alignment failed", st, rt);
    const uint32_t tw = word_map(nmt_session_tokenizer(rt->s, 1), tgt, n_tgt, a->tgt_word);
    uint8_t *link = calloc((size_t)sw * tw + 1, 1);
    if (link == NULL) return report_status("reading an alignment failed", NMT_ERR_ARENA_TOO_SMALL, rt);
    for (uint32_t p = 0; p < len; p++)
        if (a->links[p] >= 0) link[(size_t)a->tgt_word[p] * sw + a->src_word[a->links[p]]] = 1;
    for (uint32_t q = 0; q < tw; q++)
        for (uint32_t k = 0; k < sw; k++) {
            if (!link[(size_t)q * sw + k]) continue;
            next_item(out, json, &first);
            sb_printf(out, json ? "[%u, %u]" : "%u-%u", k, q);
        }
    free(link);
    if (json) sb_printf(out, "]");
    return 0;
}

int cli_align_append(cli_align *a, const runtime *rt, uint32_t i, uint32_t rank, const char *src, size_t src_len,
                     const char *tgt_text, size_t tgt_text_len, strbuf *out) {
    if (a->mode == CLI_ALIGN_NONE) return 0;
    return align_write(a, rt, i, rank, src, src_len, tgt_text, tgt_text_len, 0, out);
}

int cli_align_json(cli_align *a, const runtime *rt, uint32_t i, uint32_t rank, const char *src, size_t src_len,
                   strbuf *out) {
    if (a->mode == CLI_ALIGN_NONE) return 0;
    return align_write(a, rt, i, rank, src, src_len, NULL, 0, 1, out);
}
