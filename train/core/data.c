/* SPDX-License-Identifier: MIT */
/* data.c — parallel text, tokenized once, filtered, and served as length-
 * bucketed token batches in a seeded per-epoch order (see data.h). */
#include "data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tool_file.h"
#include "spans.h"

/* ---- corpus ------------------------------------------------------------- */

struct td_corpus {
    uint32_t n;
    int32_t *tok;       /* all tokens: pair i's source then target */
    uint64_t *off;      /* [n]: start of pair i's source in tok */
    uint32_t *src_len;  /* [n] */
    uint32_t *tgt_len;  /* [n] */
    uint64_t n_tok, cap_tok;
    uint32_t cap_pairs;
    uint64_t *line;     /* [n]: pair i's line in the files, 1-based */
    uint64_t n_lines;   /* lines read (kept or dropped) */
    /* MG-SA phrase spans (td_set_spans; NULL: none): pair i's at sp_first[i] */
    nmt_span *sp;
    uint8_t *sp_lab;
    uint64_t *sp_first; /* [n + 1] */
};

static td_corpus *corpus_new(void) { return calloc(1, sizeof(td_corpus)); }

void td_free(td_corpus *c) {
    if (!c) return;
    free(c->tok);
    free(c->off);
    free(c->src_len);
    free(c->tgt_len);
    free(c->line);
    free(c->sp);
    free(c->sp_lab);
    free(c->sp_first);
    free(c);
}

/* Append one pair (copied); 0 on success, -1 out of memory. */
static int corpus_add(td_corpus *c, const int32_t *src, uint32_t sn, const int32_t *tgt, uint32_t tn, uint64_t line) {
    if (c->n == UINT32_MAX) return -1;
    if (c->n == c->cap_pairs) {
        uint32_t nc = c->cap_pairs ? (c->cap_pairs > UINT32_MAX / 2 ? UINT32_MAX : c->cap_pairs * 2) : 256;
        uint64_t *o = realloc(c->off, (size_t)nc * sizeof *o);
        if (!o) return -1;
        c->off = o;
        uint32_t *s = realloc(c->src_len, (size_t)nc * sizeof *s);
        if (!s) return -1;
        c->src_len = s;
        uint32_t *t = realloc(c->tgt_len, (size_t)nc * sizeof *t);
        if (!t) return -1;
        c->tgt_len = t;
        uint64_t *l = realloc(c->line, (size_t)nc * sizeof *l);
        if (!l) return -1;
        c->line = l;
        c->cap_pairs = nc;
    }
    uint64_t need = c->n_tok + (uint64_t)sn + tn;
    if (need > SIZE_MAX / sizeof(int32_t)) return -1;
    if (need > c->cap_tok) {
        uint64_t nc = c->cap_tok ? c->cap_tok : 4096;
        while (nc < need) nc *= 2;
        if (nc > SIZE_MAX / sizeof(int32_t)) nc = need;
        int32_t *t = realloc(c->tok, (size_t)nc * sizeof *t);
        if (!t) return -1;
        c->tok = t;
        c->cap_tok = nc;
    }
    if (sn) memcpy(c->tok + c->n_tok, src, (size_t)sn * sizeof(int32_t));
    if (tn) memcpy(c->tok + c->n_tok + sn, tgt, (size_t)tn * sizeof(int32_t));
    c->off[c->n] = c->n_tok;
    c->src_len[c->n] = sn;
    c->tgt_len[c->n] = tn;
    c->line[c->n] = line;
    c->n_tok = need;
    c->n++;
    return 0;
}

uint32_t td_size(const td_corpus *c) { return c ? c->n : 0; }

void td_pair(const td_corpus *c, uint32_t i, const int32_t **src, uint32_t *src_len, const int32_t **tgt,
             uint32_t *tgt_len) {
    if (!c || i >= c->n) {
        if (src) *src = NULL;
        if (src_len) *src_len = 0;
        if (tgt) *tgt = NULL;
        if (tgt_len) *tgt_len = 0;
        return;
    }
    if (src) *src = c->tok + c->off[i];
    if (src_len) *src_len = c->src_len[i];
    if (tgt) *tgt = c->tok + c->off[i] + c->src_len[i];
    if (tgt_len) *tgt_len = c->tgt_len[i];
}

nmt_status td_from_tokens(const int32_t *const *src, const uint32_t *src_lens, const int32_t *const *tgt,
                          const uint32_t *tgt_lens, uint32_t n, td_corpus **out) {
    if (!out) return NMT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (n > 0 && (!src || !src_lens || !tgt || !tgt_lens)) return NMT_ERR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < n; i++)
        if ((src_lens[i] > 0 && !src[i]) || (tgt_lens[i] > 0 && !tgt[i])) return NMT_ERR_INVALID_ARGUMENT;
    td_corpus *c = corpus_new();
    if (!c) return NMT_ERR_IO;
    for (uint32_t i = 0; i < n; i++) {
        if (corpus_add(c, src[i], src_lens[i], tgt[i], tgt_lens[i], (uint64_t)i + 1) != 0) {
            td_free(c);
            return NMT_ERR_IO;
        }
    }
    c->n_lines = n;
    *out = c;
    return NMT_OK;
}

/* ---- loading ------------------------------------------------------------ */

typedef struct text_file {
    char *data;
    size_t size;
    size_t pos;
    uint64_t lines;
} text_file;

/* The whole corpus file (tool_file.h): a regular file, or a pipe such as
 * `--src <(zcat corpus.gz)` up to NMT_TOOL_MAX_PIPE_BYTES; devices and
 * directories are refused before anything is read. */
static nmt_status read_text(const char *path, text_file *tf, char *err, size_t err_cap) {
    memset(tf, 0, sizeof *tf);
    char why[NMT_TOOL_WHY_BYTES];
    size_t n = 0;
    char *buf = nmt_tool_read_file(path, NMT_TOOL_MAX_PIPE_BYTES, &n, why, sizeof why);
    if (buf == NULL) {
        nmt_errf(err, err_cap, "%s", why);
        return NMT_ERR_IO;
    }
    tf->data = buf;
    tf->size = n;
    /* A UTF-8 byte-order mark at the start is not part of the first line. */
    if (n >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB && (unsigned char)buf[2] == 0xBF)
        tf->pos = 3;
    for (size_t i = tf->pos; i < n; i++)
        if (buf[i] == '\n') tf->lines++;
    if (n > tf->pos && buf[n - 1] != '\n') tf->lines++; /* last line without a newline */
    return NMT_OK;
}

/* Next line (without "\n" / "\r\n"); 0 at the end of the file. */
static int next_line(text_file *tf, const char **line, size_t *len) {
    if (tf->pos >= tf->size) return 0;
    const char *s = tf->data + tf->pos;
    const char *nl = memchr(s, '\n', tf->size - tf->pos);
    size_t n = nl ? (size_t)(nl - s) : tf->size - tf->pos;
    tf->pos += n + (nl ? 1 : 0);
    if (n > 0 && s[n - 1] == '\r') n--;
    *line = s;
    *len = n;
    return 1;
}

/* One side's line encoder: the tokenizer, or (tok == NULL) whitespace-
 * separated token ids below `vocab`, parsed into buf. */
typedef struct line_enc {
    nmt_tokenizer *tok;
    uint32_t vocab;
    const char *path;
    int32_t *buf;
    size_t cap;
} line_enc;

static nmt_status parse_ids(line_enc *e, const char *s, size_t n, uint64_t line_no, const int32_t **ids,
                            uint32_t *n_ids, char *err, size_t err_cap) {
    if (n / 2 + 1 > e->cap) {
        size_t nc = n / 2 + 1 > 256 ? n / 2 + 1 : 256;
        int32_t *p = realloc(e->buf, nc * sizeof *p);
        if (!p) {
            nmt_errf(err, err_cap, "%s:%llu: out of memory", e->path, (unsigned long long)line_no);
            return NMT_ERR_IO;
        }
        e->buf = p;
        e->cap = nc;
    }
    uint32_t k = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i == n) break;
        size_t j = i;
        uint64_t v = 0;
        while (j < n && s[j] >= '0' && s[j] <= '9' && v < e->vocab) v = v * 10 + (uint64_t)(s[j++] - '0');
        if (j == i || v >= e->vocab || (j < n && s[j] != ' ' && s[j] != '\t')) {
            size_t w = i;
            while (w < n && w - i < 20 && s[w] != ' ' && s[w] != '\t') w++;
            nmt_errf(err, err_cap, "%s:%llu: '%.*s' is not a token id in [0, %u)", e->path,
                     (unsigned long long)line_no, (int)(w - i), s + i, e->vocab);
            return NMT_ERR_INVALID_ARGUMENT;
        }
        e->buf[k++] = (int32_t)v; /* at most one id per 2 bytes: fits in cap */
        i = j;
    }
    *ids = e->buf;
    *n_ids = k;
    return NMT_OK;
}

/* Encode one line; *too_long set when the tokenizer refuses its length. */
static nmt_status encode_line(line_enc *e, const char *s, size_t n, uint64_t line_no, const int32_t **ids,
                              uint32_t *n_ids, int *too_long, char *err, size_t err_cap) {
    *too_long = 0;
    if (e->tok == NULL) return parse_ids(e, s, n, line_no, ids, n_ids, err, err_cap);
    nmt_status st = nmt_tokenizer_encode(e->tok, s, n, ids, n_ids);
    if (st == NMT_ERR_INPUT_TOO_LONG) {
        *too_long = 1;
        *ids = NULL;
        *n_ids = 0;
        return NMT_OK;
    }
    if (st != NMT_OK)
        nmt_errf(err, err_cap, "%s:%llu: tokenizer failed: %s", e->path, (unsigned long long)line_no,
                 nmt_status_str(st));
    return st;
}

static nmt_status load_pairs(const char *src_path, const char *tgt_path, line_enc *se, line_enc *te,
                             const td_filter *f, td_corpus **out, td_stats *st, char *err, size_t err_cap) {
    td_filter flt = {100, 3.0};
    if (f) flt = *f;
    if (flt.max_ratio < 0 || flt.max_ratio != flt.max_ratio) {
        nmt_errf(err, err_cap, "td_load: bad max_ratio %g", flt.max_ratio);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    text_file sf, tf;
    nmt_status s = read_text(src_path, &sf, err, err_cap);
    if (s != NMT_OK) return s;
    s = read_text(tgt_path, &tf, err, err_cap);
    if (s != NMT_OK) {
        free(sf.data);
        return s;
    }
    if (sf.lines != tf.lines) {
        uint64_t first = (sf.lines < tf.lines ? sf.lines : tf.lines) + 1;
        nmt_errf(err, err_cap, "%s has %llu lines but %s has %llu: line %llu has no partner", src_path,
                (unsigned long long)sf.lines, tgt_path, (unsigned long long)tf.lines, (unsigned long long)first);
        free(sf.data);
        free(tf.data);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    se->path = src_path;
    te->path = tgt_path;
    td_corpus *c = corpus_new();
    int32_t *src_copy = NULL;
    size_t src_copy_cap = 0;
    td_stats acc;
    memset(&acc, 0, sizeof acc);
    if (!c) {
        s = NMT_ERR_IO;
        nmt_errf(err, err_cap, "td_load: out of memory");
        goto done;
    }
    const char *sl, *tl;
    size_t sn, tn;
    while (next_line(&sf, &sl, &sn) && next_line(&tf, &tl, &tn)) {
        acc.lines++;
        const int32_t *ids;
        uint32_t n_src = 0, n_tgt = 0;
        int long_src = 0, long_tgt = 0;
        s = encode_line(se, sl, sn, acc.lines, &ids, &n_src, &long_src, err, err_cap);
        if (s != NMT_OK) goto done;
        if (n_src > src_copy_cap) {
            size_t nc = src_copy_cap ? src_copy_cap : 256;
            while (nc < n_src) nc *= 2;
            int32_t *p = realloc(src_copy, nc * sizeof *p);
            if (!p) {
                s = NMT_ERR_IO;
                nmt_errf(err, err_cap, "td_load: out of memory");
                goto done;
            }
            src_copy = p;
            src_copy_cap = nc;
        }
        if (n_src) memcpy(src_copy, ids, (size_t)n_src * sizeof(int32_t));
        s = encode_line(te, tl, tn, acc.lines, &ids, &n_tgt, &long_tgt, err, err_cap);
        if (s != NMT_OK) goto done;
        if (long_src || long_tgt) {
            acc.dropped_long++;
            continue;
        }
        if (n_src == 0 || n_tgt == 0) {
            acc.dropped_empty++;
            continue;
        }
        if (flt.max_len > 0 && (n_src > flt.max_len || n_tgt > flt.max_len)) {
            acc.dropped_long++;
            continue;
        }
        if (flt.max_ratio > 0) {
            double a = (double)n_src + 1.0, b = (double)n_tgt + 1.0;
            double r = a > b ? a / b : b / a;
            if (r > flt.max_ratio) {
                acc.dropped_ratio++;
                continue;
            }
        }
        if (corpus_add(c, src_copy, n_src, ids, n_tgt, acc.lines) != 0) {
            s = NMT_ERR_IO;
            nmt_errf(err, err_cap, "td_load: out of memory at line %llu", (unsigned long long)acc.lines);
            goto done;
        }
        acc.kept++;
        acc.src_tokens += n_src;
        acc.tgt_tokens += n_tgt;
    }
    s = NMT_OK;
done:
    free(src_copy);
    free(se->buf);
    free(te->buf);
    free(sf.data);
    free(tf.data);
    if (s != NMT_OK) {
        td_free(c);
        return s;
    }
    if (st) *st = acc;
    c->n_lines = acc.lines;
    *out = c;
    return NMT_OK;
}

nmt_status td_load(const char *src_path, const char *tgt_path, nmt_tokenizer *src_tok, nmt_tokenizer *tgt_tok,
                   const td_filter *f, td_corpus **out, td_stats *st, char *err, size_t err_cap) {
    if (out) *out = NULL;
    if (st) memset(st, 0, sizeof *st);
    if (err && err_cap) err[0] = '\0';
    if (!src_path || !tgt_path || !src_tok || !tgt_tok || !out) {
        nmt_errf(err, err_cap, "td_load: missing argument");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    line_enc se = {src_tok, 0, NULL, NULL, 0}, te = {tgt_tok, 0, NULL, NULL, 0};
    return load_pairs(src_path, tgt_path, &se, &te, f, out, st, err, err_cap);
}

nmt_status td_load_ids(const char *src_path, const char *tgt_path, uint32_t src_vocab, uint32_t tgt_vocab,
                       const td_filter *f, td_corpus **out, td_stats *st, char *err, size_t err_cap) {
    if (out) *out = NULL;
    if (st) memset(st, 0, sizeof *st);
    if (err && err_cap) err[0] = '\0';
    if (!src_path || !tgt_path || !out || src_vocab == 0 || tgt_vocab == 0 || src_vocab > INT32_MAX ||
        tgt_vocab > INT32_MAX) {
        nmt_errf(err, err_cap, "td_load_ids: missing argument or bad vocabulary size");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    line_enc se = {NULL, src_vocab, NULL, NULL, 0}, te = {NULL, tgt_vocab, NULL, NULL, 0};
    return load_pairs(src_path, tgt_path, &se, &te, f, out, st, err, err_cap);
}

/* ---- batcher ------------------------------------------------------------ */

typedef struct td_bspan {
    uint32_t start, n_seq, src_len, tgt_len; /* start into order[]; padded lengths */
} td_bspan;

struct td_batcher {
    const td_corpus *c;
    uint32_t *order; /* pair indices sorted by (tgt_len, src_len, line) */
    td_bspan *batches;
    uint32_t n_batches;
    uint32_t *perm;       /* batch order of perm_epoch */
    uint64_t perm_epoch;
    int perm_valid;
    uint64_t seed;
    td_position pos;
    int32_t bos, eos, pad;
    int no_src_eos; /* td_batcher_source_eos(b, 0) */
    uint32_t max_seqs, max_src, max_tgt;
    int32_t *src, *tgt_in, *tgt_out;
    uint32_t *src_lens, *tgt_lens;
    const nmt_span **b_sp;     /* [max_seqs]: a batch's spans (corpus with spans) */
    const uint8_t **b_lab;
    uint32_t *b_nsp;
};

typedef struct sort_key {
    uint32_t tgt, src, line;
} sort_key;

static int cmp_keys(const void *pa, const void *pb) {
    const sort_key *a = pa, *b = pb;
    if (a->tgt != b->tgt) return a->tgt < b->tgt ? -1 : 1;
    if (a->src != b->src) return a->src < b->src ? -1 : 1;
    return a->line < b->line ? -1 : (a->line > b->line);
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void make_perm(td_batcher *b, uint64_t epoch) {
    if (b->perm_valid && b->perm_epoch == epoch) return;
    for (uint32_t i = 0; i < b->n_batches; i++) b->perm[i] = i;
    uint64_t st = b->seed;
    uint64_t mix = splitmix64(&st);
    st = mix ^ (epoch * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
    for (uint32_t i = b->n_batches; i > 1; i--) {
        uint32_t j = (uint32_t)(splitmix64(&st) % i);
        uint32_t t = b->perm[i - 1];
        b->perm[i - 1] = b->perm[j];
        b->perm[j] = t;
    }
    b->perm_epoch = epoch;
    b->perm_valid = 1;
}

void td_batcher_free(td_batcher *b) {
    if (!b) return;
    free(b->order);
    free(b->batches);
    free(b->perm);
    free(b->src);
    free(b->tgt_in);
    free(b->tgt_out);
    free(b->src_lens);
    free(b->tgt_lens);
    free(b->b_sp);
    free(b->b_lab);
    free(b->b_nsp);
    free(b);
}

nmt_status td_batcher_create(const td_corpus *c, uint32_t max_tokens, uint32_t max_seqs, uint64_t seed,
                             int32_t bos, int32_t eos, int32_t pad, td_batcher **out) {
    if (!out) return NMT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!c || c->n == 0 || max_tokens == 0 || max_seqs == 0) return NMT_ERR_INVALID_ARGUMENT;
    td_batcher *b = calloc(1, sizeof *b);
    if (!b) return NMT_ERR_IO;
    b->c = c;
    b->seed = seed;
    b->bos = bos;
    b->eos = eos;
    b->pad = pad;
    b->order = malloc((size_t)c->n * sizeof *b->order);
    b->batches = malloc((size_t)c->n * sizeof *b->batches);
    if (!b->order || !b->batches) {
        td_batcher_free(b);
        return NMT_ERR_IO;
    }
    sort_key *keys = malloc((size_t)c->n * sizeof *keys);
    if (!keys) {
        td_batcher_free(b);
        return NMT_ERR_IO;
    }
    for (uint32_t i = 0; i < c->n; i++) keys[i] = (sort_key){c->tgt_len[i], c->src_len[i], i};
    qsort(keys, c->n, sizeof *keys, cmp_keys);
    for (uint32_t i = 0; i < c->n; i++) b->order[i] = keys[i].line;
    free(keys);

    uint64_t buf_src = 0, buf_tgt = 0;
    uint32_t nb = 0;
    td_bspan cur = {0, 0, 0, 0};
    for (uint32_t k = 0; k < c->n; k++) {
        uint32_t p = b->order[k];
        uint64_t sl = (uint64_t)c->src_len[p] + 1, tl = (uint64_t)c->tgt_len[p] + 1;
        if ((sl > tl ? sl : tl) > max_tokens) {
            td_batcher_free(b);
            return NMT_ERR_INVALID_ARGUMENT;
        }
        if (cur.n_seq > 0) {
            uint64_t ms = sl > cur.src_len ? sl : cur.src_len, mt = tl > cur.tgt_len ? tl : cur.tgt_len;
            uint64_t m = ms > mt ? ms : mt;
            if (cur.n_seq + 1 > max_seqs || (uint64_t)(cur.n_seq + 1) * m > max_tokens) {
                b->batches[nb++] = cur;
                cur.start = k;
                cur.n_seq = 0;
                cur.src_len = cur.tgt_len = 0;
            }
        }
        cur.n_seq++;
        if (sl > cur.src_len) cur.src_len = (uint32_t)sl;
        if (tl > cur.tgt_len) cur.tgt_len = (uint32_t)tl;
    }
    b->batches[nb++] = cur;
    b->n_batches = nb;
    for (uint32_t i = 0; i < nb; i++) {
        const td_bspan *x = &b->batches[i];
        if (x->n_seq > b->max_seqs) b->max_seqs = x->n_seq;
        if (x->src_len > b->max_src) b->max_src = x->src_len;
        if (x->tgt_len > b->max_tgt) b->max_tgt = x->tgt_len;
        if ((uint64_t)x->n_seq * x->src_len > buf_src) buf_src = (uint64_t)x->n_seq * x->src_len;
        if ((uint64_t)x->n_seq * x->tgt_len > buf_tgt) buf_tgt = (uint64_t)x->n_seq * x->tgt_len;
    }
    b->perm = malloc((size_t)nb * sizeof *b->perm);
    b->src = malloc((size_t)buf_src * sizeof(int32_t));
    b->tgt_in = malloc((size_t)buf_tgt * sizeof(int32_t));
    b->tgt_out = malloc((size_t)buf_tgt * sizeof(int32_t));
    b->src_lens = malloc((size_t)b->max_seqs * sizeof(uint32_t));
    b->tgt_lens = malloc((size_t)b->max_seqs * sizeof(uint32_t));
    if (c->sp_first) {
        b->b_sp = malloc((size_t)b->max_seqs * sizeof *b->b_sp);
        b->b_lab = malloc((size_t)b->max_seqs * sizeof *b->b_lab);
        b->b_nsp = malloc((size_t)b->max_seqs * sizeof *b->b_nsp);
    }
    if (!b->perm || !b->src || !b->tgt_in || !b->tgt_out || !b->src_lens || !b->tgt_lens ||
        (c->sp_first && (!b->b_sp || !b->b_lab || !b->b_nsp))) {
        td_batcher_free(b);
        return NMT_ERR_IO;
    }
    *out = b;
    return NMT_OK;
}

uint32_t td_batches_per_epoch(const td_batcher *b) { return b ? b->n_batches : 0; }

void td_batcher_bounds(const td_batcher *b, uint32_t *max_seqs, uint32_t *max_src_len, uint32_t *max_tgt_len) {
    if (max_seqs) *max_seqs = b ? b->max_seqs : 0;
    if (max_src_len) *max_src_len = b ? b->max_src : 0;
    if (max_tgt_len) *max_tgt_len = b ? b->max_tgt : 0;
}

td_position td_tell(const td_batcher *b) {
    td_position p = {0, 0};
    if (b) p = b->pos;
    return p;
}

nmt_status td_seek(td_batcher *b, td_position p) {
    if (!b || p.index >= b->n_batches) return NMT_ERR_INVALID_ARGUMENT;
    b->pos = p;
    return NMT_OK;
}

void td_batcher_source_eos(td_batcher *b, int on) {
    if (b) b->no_src_eos = !on;
}

static void fill_batch(td_batcher *b, uint32_t k, nmt_train_batch *out, uint32_t *tgt_tokens) {
    const td_bspan *x = &b->batches[k];
    const td_corpus *c = b->c;
    uint32_t toks = 0;
    for (uint32_t s = 0; s < x->n_seq; s++) {
        uint32_t p = b->order[x->start + s];
        const int32_t *src = c->tok + c->off[p];
        const int32_t *tgt = src + c->src_len[p];
        uint32_t n = c->src_len[p], m = c->tgt_len[p];
        int32_t *sr = b->src + (size_t)s * x->src_len;
        int32_t *ti = b->tgt_in + (size_t)s * x->tgt_len;
        int32_t *to = b->tgt_out + (size_t)s * x->tgt_len;
        if (n) memcpy(sr, src, (size_t)n * sizeof(int32_t));
        const uint32_t ne = !b->no_src_eos || n == 0 ? 1 : 0; /* as the runtime's session packs it */
        if (ne) sr[n] = b->eos;
        for (uint32_t t = n + ne; t < x->src_len; t++) sr[t] = b->pad;
        ti[0] = b->bos;
        if (m) {
            memcpy(ti + 1, tgt, (size_t)m * sizeof(int32_t));
            memcpy(to, tgt, (size_t)m * sizeof(int32_t));
        }
        to[m] = b->eos;
        for (uint32_t t = m + 1; t < x->tgt_len; t++) ti[t] = to[t] = b->pad;
        b->src_lens[s] = n + ne;
        b->tgt_lens[s] = m + 1;
        toks += m + 1;
        if (c->sp_first) { /* the pair's spans travel with it */
            b->b_nsp[s] = (uint32_t)(c->sp_first[p + 1] - c->sp_first[p]);
            b->b_sp[s] = c->sp + c->sp_first[p];
            b->b_lab[s] = c->sp_lab + c->sp_first[p];
        }
    }
    out->n_seq = x->n_seq;
    out->src_len = x->src_len;
    out->tgt_len = x->tgt_len;
    out->src = b->src;
    out->src_lens = b->src_lens;
    out->tgt_in = b->tgt_in;
    out->tgt_out = b->tgt_out;
    out->tgt_lens = b->tgt_lens;
    out->spans = c->sp_first ? b->b_sp : NULL;
    out->n_spans = c->sp_first ? b->b_nsp : NULL;
    out->span_labels = c->sp_first ? b->b_lab : NULL;
    if (tgt_tokens) *tgt_tokens = toks;
}

nmt_status td_next(td_batcher *b, nmt_train_batch *out, uint32_t *tgt_tokens) {
    if (!b || !out) return NMT_ERR_INVALID_ARGUMENT;
    if (b->pos.index >= b->n_batches) return NMT_ERR_INVALID_ARGUMENT;
    make_perm(b, b->pos.epoch);
    fill_batch(b, b->perm[b->pos.index], out, tgt_tokens);
    if (++b->pos.index == b->n_batches) {
        b->pos.index = 0;
        b->pos.epoch++;
    }
    return NMT_OK;
}

nmt_status td_batch_at(td_batcher *b, uint32_t k, nmt_train_batch *out, uint32_t *tgt_tokens) {
    if (!b || !out || k >= b->n_batches) return NMT_ERR_INVALID_ARGUMENT;
    fill_batch(b, k, out, tgt_tokens);
    return NMT_OK;
}

/* ---- phrase spans ------------------------------------------------------- */

nmt_status td_set_spans(td_corpus *c, const tsp_file *f, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!c || !f || c->sp_first) {
        nmt_errf(err, err_cap, "td_set_spans: missing argument or spans already set");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    if (tsp_lines(f) != c->n_lines) {
        nmt_errf(err, err_cap, "%s has %llu lines but the source has %llu", tsp_name(f),
                 (unsigned long long)tsp_lines(f), (unsigned long long)c->n_lines);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const nmt_span *sp;
        uint32_t k, bad = 0;
        tsp_line(f, c->line[i] - 1, &sp, NULL, &k);
        const nmt_status st = nmt_spans_check(sp, k, c->src_len[i], &bad);
        if (st != NMT_OK) { /* the file's parser took everything but the sentence's length */
            nmt_errf(err, err_cap, "%s:%llu: span %u-%u is past the sentence's %u pieces", tsp_name(f),
                     (unsigned long long)c->line[i], sp[bad].start, sp[bad].start + sp[bad].len, c->src_len[i]);
            return st;
        }
        total += k;
    }
    c->sp_first = malloc(((size_t)c->n + 1) * sizeof *c->sp_first);
    c->sp = malloc((size_t)(total ? total : 1) * sizeof *c->sp);
    c->sp_lab = malloc((size_t)(total ? total : 1));
    if (!c->sp_first || !c->sp || !c->sp_lab) {
        free(c->sp_first);
        free(c->sp);
        free(c->sp_lab);
        c->sp_first = NULL;
        c->sp = NULL;
        c->sp_lab = NULL;
        nmt_errf(err, err_cap, "td_set_spans: out of memory");
        return NMT_ERR_IO;
    }
    uint64_t used = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const nmt_span *sp;
        const uint8_t *lab;
        uint32_t k;
        tsp_line(f, c->line[i] - 1, &sp, &lab, &k);
        c->sp_first[i] = used;
        if (k) {
            memcpy(c->sp + used, sp, k * sizeof *sp);
            memcpy(c->sp_lab + used, lab, k);
        }
        used += k;
    }
    c->sp_first[c->n] = used;
    return NMT_OK;
}

void td_pair_spans(const td_corpus *c, uint32_t i, const nmt_span **sp, const uint8_t **labels, uint32_t *n,
                   uint64_t *line) {
    const int ok = c && i < c->n;
    const int has = ok && c->sp_first;
    if (sp) *sp = has ? c->sp + c->sp_first[i] : NULL;
    if (labels) *labels = has ? c->sp_lab + c->sp_first[i] : NULL;
    if (n) *n = has ? (uint32_t)(c->sp_first[i + 1] - c->sp_first[i]) : 0;
    if (line) *line = ok ? c->line[i] : 0;
}
