/* SPDX-License-Identifier: MIT */
/* tokenizer_bpe.c — BPE segmentation: SentencePiece's bpe::Model::Encode.
 *
 * The normalized text starts as one symbol per UTF-8 character (a
 * user-defined piece is one frozen symbol).  Every adjacent pair whose
 * concatenation is a piece goes on an agenda ordered by the piece's score,
 * ties to the leftmost pair; the best pair is merged and its new neighbours
 * proposed, until the agenda is empty.  Stale agenda entries (a side already
 * merged away) are recognised by their length, as in the reference.  A
 * merged piece of type UNUSED is split back into the halves recorded for
 * that string (the most recent proposal wins, like the reference's map).
 * The agenda is a binary heap in the arena: at most 3 entries per symbol. */
#include "tokenizer.h"

#include <string.h>

typedef struct bpe_ctx {
    nmt_tokenizer *t;
    uint32_t n_heap, n_merges;
} bpe_ctx;

/* heap order: a before b when a's score is higher, or equal with a smaller left */
static int before(const nmt_sp_pair *a, const nmt_sp_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(bpe_ctx *c, nmt_sp_pair p) {
    nmt_sp_pair *h = c->t->heap;
    uint32_t i = c->n_heap++;
    while (i > 0) {
        const uint32_t parent = (i - 1) / 2;
        if (!before(&p, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = p;
}

static nmt_sp_pair heap_pop(bpe_ctx *c) {
    nmt_sp_pair *h = c->t->heap;
    const nmt_sp_pair top = h[0];
    const nmt_sp_pair last = h[--c->n_heap];
    const uint32_t n = c->n_heap;
    uint32_t i = 0;
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && before(&h[k + 1], &h[k])) k++;
        if (!before(&h[k], &last)) break;
        h[i] = h[k];
        i = k;
    }
    if (n > 0) h[i] = last;
    return top;
}

static void maybe_add_pair(bpe_ctx *c, int32_t left, int32_t right) {
    nmt_tokenizer *t = c->t;
    if (left < 0 || right < 0 || t->syms[left].freeze || t->syms[right].freeze) return;
    const nmt_sp_sym *l = &t->syms[left], *r = &t->syms[right];
    const int32_t id = nmt_tok_find_normal(t, t->norm + l->off, l->len + r->len);
    if (id < 0) return;
    const nmt_sp_pair p = {left, right, t->pieces[id].score, l->len + r->len};
    heap_push(c, p);
    if (t->pieces[id].type == NMT_SP_UNUSED) {
        uint32_t *m = t->merges + 3 * (size_t)c->n_merges++;
        m[0] = l->off;
        m[1] = l->len;
        m[2] = r->len;
    }
}

/* Split (off, len) into raw pieces, undoing merges into UNUSED pieces. */
static nmt_status resegment(bpe_ctx *c, uint32_t off, uint32_t len, uint32_t *n_raw) {
    nmt_tokenizer *t = c->t;
    uint32_t *stack = t->stack, sp = 0;
    if (!t->has_unused) {
        const int32_t id = nmt_tok_piece_to_id(t, t->norm + off, len);
        t->raw_ids[*n_raw] = id;
        t->raw_off[*n_raw] = off;
        t->raw_len[*n_raw] = len;
        ++*n_raw;
        return NMT_OK;
    }
    stack[sp++] = off;
    stack[sp++] = len;
    while (sp > 0) {
        const uint32_t l = stack[--sp], o = stack[--sp];
        const int32_t id = nmt_tok_piece_to_id(t, t->norm + o, l);
        int found = 0;
        if (t->pieces[id].type == NMT_SP_UNUSED) {
            for (uint32_t k = c->n_merges; k-- > 0;) {
                const uint32_t *m = t->merges + 3 * (size_t)k;
                if (m[1] + m[2] == l && memcmp(t->norm + m[0], t->norm + o, l) == 0) {
                    /* right half first: the stack pops the left one next */
                    NMT_CHECK(sp + 4 <= 2 * t->norm_cap + 2, NMT_ERR_TOKENIZER_MODEL);
                    stack[sp++] = o + m[1];
                    stack[sp++] = m[2];
                    stack[sp++] = o;
                    stack[sp++] = m[1];
                    found = 1;
                    break;
                }
            }
        }
        if (!found) {
            t->raw_ids[*n_raw] = id;
            t->raw_off[*n_raw] = o;
            t->raw_len[*n_raw] = l;
            ++*n_raw;
        }
    }
    return NMT_OK;
}

nmt_status nmt_tok_bpe(nmt_tokenizer *t, uint32_t *n_raw) {
    const uint32_t n = (uint32_t)t->norm_len;
    const uint8_t *s = t->norm;
    bpe_ctx c = {t, 0, 0};
    *n_raw = 0;
    if (n == 0) return NMT_OK;
    uint32_t nsym = 0;
    for (uint32_t off = 0; off < n;) {
        const uint32_t user = nmt_tok_user_prefix(t, s + off, n - off);
        const uint32_t len = user ? user : NMT_MIN(nmt_utf8_onecharlen(s[off]), n - off);
        nmt_sp_sym *y = &t->syms[nsym];
        y->prev = nsym == 0 ? -1 : (int32_t)nsym - 1;
        y->off = off;
        y->len = len;
        y->freeze = user != 0;
        off += len;
        y->next = off >= n ? -1 : (int32_t)nsym + 1;
        nsym++;
    }
    for (uint32_t i = 1; i < nsym; i++) maybe_add_pair(&c, (int32_t)i - 1, (int32_t)i);
    while (c.n_heap > 0) {
        const nmt_sp_pair top = heap_pop(&c);
        nmt_sp_sym *l = &t->syms[top.left], *r = &t->syms[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) t->syms[r->next].prev = top.left;
        r->len = 0;
        maybe_add_pair(&c, l->prev, top.left);
        maybe_add_pair(&c, top.left, l->next);
    }
    for (int32_t i = 0; i != -1; i = t->syms[i].next)
        NMT_TRY(resegment(&c, t->syms[i].off, t->syms[i].len, n_raw));
    return NMT_OK;
}
