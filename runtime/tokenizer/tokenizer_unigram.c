/* SPDX-License-Identifier: MIT */
/* tokenizer_unigram.c — unigram segmentation: SentencePiece's
 * Model::EncodeOptimized, a Viterbi pass over byte offsets of the
 * normalized text.  For each character start, every piece that prefixes the
 * rest of the text proposes a path ending after it; a character no
 * single-character piece covers gets an unknown node scored
 * min_score - 10.  The arithmetic types follow the reference exactly
 * (a normal or user-defined piece's score is added in double precision and
 * the path score stored as float; the unknown node's sum is float), so that
 * ties and near-ties resolve identically. */
#include "tokenizer.h"

#define UNK_PENALTY 10.0f

typedef struct viterbi_ctx {
    nmt_tokenizer *t;
    uint32_t start;      /* byte offset of the character */
    uint32_t mblen;      /* its length */
    float till;          /* best score of a path ending at `start` */
    int has_single;      /* a piece covers exactly this character */
} viterbi_ctx;

static void on_piece(void *user, uint32_t id, uint32_t len) {
    viterbi_ctx *c = user;
    const nmt_tokenizer *t = c->t;
    const nmt_sp_piece *pc = &t->pieces[id];
    if (pc->type == NMT_SP_UNUSED) return;
    /* user-defined symbols get a bonus so that they are always chosen */
    const double score = pc->type == NMT_SP_USER_DEFINED ? (double)((float)len * t->max_score) - 0.1
                                                         : (double)pc->score;
    const double cand = score + (double)c->till;
    nmt_sp_cell *cell = &t->cells[c->start + len];
    if (cell->start == -1 || cand > (double)cell->score) {
        cell->score = (float)cand;
        cell->start = (int32_t)c->start;
        cell->id = (int32_t)id;
    }
    if (len == c->mblen) c->has_single = 1;
}

nmt_status nmt_tok_unigram(nmt_tokenizer *t, uint32_t *n_raw) {
    const uint32_t n = (uint32_t)t->norm_len;
    const uint8_t *s = t->norm;
    *n_raw = 0;
    if (n == 0) return NMT_OK;
    const float unk_score = t->min_score - UNK_PENALTY;
    for (uint32_t i = 0; i <= n; i++) {
        t->cells[i].score = 0.0f;
        t->cells[i].start = -1;
        t->cells[i].id = -1;
    }
    for (uint32_t start = 0; start < n;) {
        viterbi_ctx c = {t, start, NMT_MIN(nmt_utf8_onecharlen(s[start]), n - start),
                         t->cells[start].score, 0};
        nmt_tok_prefixes(t, s + start, n - start, on_piece, &c);
        if (!c.has_single) {
            nmt_sp_cell *cell = &t->cells[start + c.mblen];
            const float cand = unk_score + c.till;
            if (cell->start == -1 || cand > cell->score) {
                cell->score = cand;
                cell->start = (int32_t)start;
                cell->id = t->unk_id;
            }
        }
        start += c.mblen;
    }
    /* back-trace: count, then write the pieces in text order */
    uint32_t count = 0;
    for (int32_t end = (int32_t)n; end > 0; end = t->cells[end].start) {
        NMT_CHECK(t->cells[end].start >= 0 && t->cells[end].start < end, NMT_ERR_TOKENIZER_MODEL);
        count++;
    }
    uint32_t k = count;
    for (int32_t end = (int32_t)n; end > 0; end = t->cells[end].start) {
        k--;
        t->raw_ids[k] = t->cells[end].id;
        t->raw_off[k] = (uint32_t)t->cells[end].start;
        t->raw_len[k] = (uint32_t)end - (uint32_t)t->cells[end].start;
    }
    *n_raw = count;
    return NMT_OK;
}
