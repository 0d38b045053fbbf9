/* SPDX-License-Identifier: MIT */
/* bleu.c — sacreBLEU-compatible corpus BLEU (13a tokenizer, exp smoothing).
 *
 * The 13a tokenizer is four regular-expression passes applied one after the
 * other (each a left-to-right, non-overlapping substitution), then a split
 * on Unicode whitespace.  Each pass is reproduced here as a scan over UTF-8
 * bytes; the patterns only name ASCII characters and "any character but a
 * digit", and a multi-byte character can never be the ASCII part of a
 * match, so byte-wise scanning makes the same matches as Python's
 * code-point scanning. */
#include "bleu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Unicode whitespace as Python's str.isspace() sees it                     */
/* ------------------------------------------------------------------------ */

/* Length of the whitespace character at s (0 if none). */
static size_t space_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;                 /* U+1680 */
    if (c == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) ||      /* U+2000..200A */
                                      s[2] == 0xa8 || s[2] == 0xa9 ||        /* U+2028, 2029 */
                                      s[2] == 0xaf))                         /* U+202F */
        return 3;
    if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;                 /* U+205F */
    if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;                 /* U+3000 */
    return 0;
}

/* ------------------------------------------------------------------------ */
/* A growable byte buffer                                                   */
/* ------------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 64);
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void putc1(sbuf *b, char c) { put(b, &c, 1); }

/* ------------------------------------------------------------------------ */
/* The 13a passes                                                           */
/* ------------------------------------------------------------------------ */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* r'([\{-\~\[-\` -\&\(-\+\:-\@\/])' -> ' \1 ' */
static int is_p1(unsigned char c) {
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

/* Replace every occurrence of `from` by `to` (str.replace). */
static void replace_all(sbuf *out, const char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to);
    while (*s) {
        if (strncmp(s, from, fl) == 0) {
            put(out, to, tl);
            s += fl;
        } else {
            putc1(out, *s++);
        }
    }
    if (!out->p) put(out, "", 0);
}

/* Length in bytes of the UTF-8 character starting at s (1 for invalid). */
static size_t char_len(const unsigned char *s) {
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return n;
}

static void pass_p1(sbuf *out, const unsigned char *s) {
    for (; *s; s++) {
        if (is_p1(*s)) {
            putc1(out, ' ');
            putc1(out, (char)*s);
            putc1(out, ' ');
        } else {
            putc1(out, (char)*s);
        }
    }
}

/* r'([^0-9])([\.,])' -> r'\1 \2 ' */
static void pass_p2(sbuf *out, const unsigned char *s) {
    while (*s) {
        size_t cl = char_len(s);
        if (!is_digit(s[0]) && (s[cl] == '.' || s[cl] == ',')) {
            put(out, (const char *)s, cl);
            putc1(out, ' ');
            putc1(out, (char)s[cl]);
            putc1(out, ' ');
            s += cl + 1;
        } else {
            put(out, (const char *)s, cl);
            s += cl;
        }
    }
}

/* r'([\.,])([^0-9])' -> r' \1 \2' */
static void pass_p3(sbuf *out, const unsigned char *s) {
    while (*s) {
        if ((s[0] == '.' || s[0] == ',') && s[1] && !is_digit(s[1])) {
            size_t cl = char_len(s + 1);
            putc1(out, ' ');
            putc1(out, (char)s[0]);
            putc1(out, ' ');
            put(out, (const char *)s + 1, cl);
            s += 1 + cl;
        } else {
            putc1(out, (char)*s++);
        }
    }
}

/* r'([0-9])(-)' -> r'\1 \2 ' */
static void pass_p4(sbuf *out, const unsigned char *s) {
    while (*s) {
        if (is_digit(s[0]) && s[1] == '-') {
            putc1(out, (char)s[0]);
            put(out, " - ", 3);
            s += 2;
        } else {
            putc1(out, (char)*s++);
        }
    }
}

typedef void (*pass_fn)(sbuf *, const unsigned char *);

char *nmt_bleu_tokenize_13a(const char *line) {
    /* rstrip (Unicode whitespace) */
    size_t n = strlen(line), end = 0;
    for (size_t i = 0; i < n;) {
        size_t sl = space_len((const unsigned char *)line + i);
        if (sl) {
            i += sl;
        } else {
            i += char_len((const unsigned char *)line + i);
            end = i;
        }
    }
    sbuf a = {0}, b = {0};
    put(&a, line, end);
    if (a.oom) return NULL;
    /* language-independent part */
    static const char *const repl[][2] = {{"<skipped>", ""}, {"-\n", ""}, {"\n", " "},
                                          {"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"},
                                          {"&gt;", ">"}};
    for (size_t r = 0; r < sizeof repl / sizeof repl[0]; r++) {
        if (r >= 3 && strchr(a.p, '&') == NULL) break;
        b.n = 0;
        replace_all(&b, a.p, repl[r][0], repl[r][1]);
        sbuf t = a; a = b; b = t;
        if (a.oom) break;
    }
    /* f' {line} ' then the four regexp passes */
    b.n = 0;
    put(&b, " ", 1);
    put(&b, a.p, a.n);
    put(&b, " ", 1);
    { sbuf t = a; a = b; b = t; }
    static const pass_fn passes[] = {pass_p1, pass_p2, pass_p3, pass_p4};
    for (size_t p = 0; p < 4 && !a.oom && !b.oom; p++) {
        b.n = 0;
        put(&b, "", 0);
        passes[p](&b, (const unsigned char *)a.p);
        sbuf t = a; a = b; b = t;
    }
    /* ' '.join(line.split()) */
    b.n = 0;
    put(&b, "", 0);
    const unsigned char *s = (const unsigned char *)a.p;
    int need_space = 0;
    while (s && *s && !a.oom) {
        size_t sl = space_len(s);
        if (sl) {
            s += sl;
            need_space = b.n > 0;
            continue;
        }
        size_t cl = char_len(s);
        if (need_space) putc1(&b, ' ');
        need_space = 0;
        put(&b, (const char *)s, cl);
        s += cl;
    }
    int oom = a.oom || b.oom;
    free(a.p);
    if (oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ------------------------------------------------------------------------ */
/* n-gram statistics                                                        */
/* ------------------------------------------------------------------------ */

typedef struct toks {
    char *text;          /* tokenized line, spaces replaced by NULs */
    const char **tok;
    size_t n;
} toks;

static int split(const char *line, toks *t) {
    memset(t, 0, sizeof *t);
    t->text = nmt_bleu_tokenize_13a(line);
    if (t->text == NULL) return -1;
    size_t cap = 1;
    for (const char *p = t->text; *p; p++) cap += *p == ' ';
    t->tok = malloc(sizeof(char *) * cap);
    if (t->tok == NULL) return -1;
    for (char *p = t->text; *p;) {
        t->tok[t->n++] = p;
        char *sp = strchr(p, ' ');
        if (sp == NULL) break;
        *sp = '\0';
        p = sp + 1;
    }
    return 0;
}

static void free_toks(toks *t) {
    free(t->text);
    free((void *)t->tok);
}

/* An n-gram: tokens [start, start + n) of a token list. */
typedef struct gram {
    const char *const *tok;
    size_t n;
} gram;

static int gram_cmp(const void *a, const void *b) {
    const gram *x = a, *y = b;
    for (size_t i = 0; i < x->n; i++) {
        int c = strcmp(x->tok[i], y->tok[i]);
        if (c) return c;
    }
    return 0;
}

/* Sorted list of all n-grams of order n. */
static gram *grams(const toks *t, size_t n, size_t *count) {
    *count = t->n >= n ? t->n - n + 1 : 0;
    gram *g = malloc(sizeof(gram) * (*count ? *count : 1));
    if (g == NULL) return NULL;
    for (size_t i = 0; i < *count; i++) g[i] = (gram){t->tok + i, n};
    qsort(g, *count, sizeof(gram), gram_cmp);
    return g;
}

/* Occurrences of g[i]'s value starting at i in a sorted list. */
static size_t run_len(const gram *g, size_t count, size_t i) {
    size_t j = i + 1;
    while (j < count && gram_cmp(&g[i], &g[j]) == 0) j++;
    return j - i;
}

/* Maximum count of `key` over the references' sorted lists. */
static size_t ref_max(gram *const *rg, const size_t *rc, size_t n_refs, const gram *key) {
    size_t best = 0;
    for (size_t r = 0; r < n_refs; r++) {
        const gram *hit = bsearch(key, rg[r], rc[r], sizeof(gram), gram_cmp);
        if (hit == NULL) continue;
        size_t i = (size_t)(hit - rg[r]);
        while (i > 0 && gram_cmp(&rg[r][i - 1], key) == 0) i--;
        size_t c = run_len(rg[r], rc[r], i);
        if (c > best) best = c;
    }
    return best;
}

int nmt_bleu_add(nmt_bleu_stats *st, const char *hyp, const char *const *refs, size_t n_refs) {
    if (n_refs == 0) return -1;
    int rc = -1;
    toks h, *r = calloc(n_refs, sizeof(toks));
    gram **rg = calloc(n_refs, sizeof(gram *));
    size_t *rcount = calloc(n_refs, sizeof(size_t));
    gram *hg = NULL;
    nmt_bleu_stats seg = {0};
    memset(&h, 0, sizeof h);
    if (r == NULL || rg == NULL || rcount == NULL || split(hyp, &h) != 0) goto done;
    for (size_t i = 0; i < n_refs; i++)
        if (split(refs[i], &r[i]) != 0) goto done;
    /* closest reference length, ties to the shorter */
    long best_diff = -1;
    for (size_t i = 0; i < n_refs; i++) {
        long diff = labs((long)h.n - (long)r[i].n);
        if (best_diff < 0 || diff < best_diff || (diff == best_diff && r[i].n < seg.ref_len)) {
            best_diff = diff;
            seg.ref_len = r[i].n;
        }
    }
    seg.sys_len = h.n;
    for (size_t n = 1; n <= NMT_BLEU_ORDER; n++) {
        size_t hc;
        free(hg);
        hg = grams(&h, n, &hc);
        if (hg == NULL) goto done;
        for (size_t i = 0; i < n_refs; i++) {
            free(rg[i]);
            rg[i] = grams(&r[i], n, &rcount[i]);
            if (rg[i] == NULL) goto done;
        }
        for (size_t i = 0; i < hc;) {
            size_t c = run_len(hg, hc, i), m = ref_max(rg, rcount, n_refs, &hg[i]);
            seg.total[n - 1] += c;
            seg.correct[n - 1] += c < m ? c : m;
            i += c;
        }
    }
    st->sys_len += seg.sys_len;
    st->ref_len += seg.ref_len;
    for (int n = 0; n < NMT_BLEU_ORDER; n++) {
        st->correct[n] += seg.correct[n];
        st->total[n] += seg.total[n];
    }
    rc = 0;
done:
    free(hg);
    free_toks(&h);
    for (size_t i = 0; r && i < n_refs; i++) free_toks(&r[i]);
    for (size_t i = 0; rg && i < n_refs; i++) free(rg[i]);
    free(r);
    free(rg);
    free(rcount);
    return rc;
}

static double my_log(double x) { return x == 0.0 ? -9999999999.0 : log(x); }

nmt_bleu_result nmt_bleu_score(const nmt_bleu_stats *st) {
    nmt_bleu_result res = {0};
    res.bp = 1.0;
    if (st->sys_len < st->ref_len)
        res.bp = st->sys_len > 0 ? exp(1.0 - (double)st->ref_len / (double)st->sys_len) : 0.0;
    int any = 0;
    for (int n = 0; n < NMT_BLEU_ORDER; n++) any |= st->correct[n] != 0;
    if (!any) return res;
    double smooth = 1.0, sum = 0.0;
    for (int n = 0; n < NMT_BLEU_ORDER; n++) {
        if (st->total[n] == 0) break;
        if (st->correct[n] == 0) {
            smooth *= 2;
            res.precisions[n] = 100.0 / (smooth * (double)st->total[n]);
        } else {
            res.precisions[n] = 100.0 * (double)st->correct[n] / (double)st->total[n];
        }
    }
    for (int n = 0; n < NMT_BLEU_ORDER; n++) sum += my_log(res.precisions[n]);
    res.score = res.bp * exp(sum / NMT_BLEU_ORDER);
    return res;
}
