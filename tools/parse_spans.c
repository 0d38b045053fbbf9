/* SPDX-License-Identifier: MIT */
/* parse_spans.c — English base phrases from link-grammar (parse_spans.h). */
#include "parse_spans.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NMT_HAVE_LINK_GRAMMAR
#include <link-grammar/link-includes.h>

#define PS_MAX_WORDS 512
#define PS_MAX_DEPTH 128

struct nmt_parser {
    Dictionary dict;
    Parse_Options opts;
    uint64_t parsed, fallback;
};

/* link-grammar's own messages: its default handler prints debug and info
 * lines (a dictionary's locale, say) on stdout, which is where `nmt-edge
 * translate` writes translations; warnings and errors go to stderr here,
 * the rest nowhere. */
static void lg_message(lg_errinfo *e, void *data) {
    (void)data;
    if (e == NULL || e->severity > lg_Warn || e->text == NULL) return;
    const char *t = e->text;
    size_t n = strlen(t);
    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == ' ')) n--;
    fprintf(stderr, "link-grammar: %s: %.*s\n", e->severity_label ? e->severity_label : "message", (int)n, t);
}

nmt_parser *nmt_parser_create(char *why, size_t why_cap) {
    nmt_parser *p = calloc(1, sizeof *p);
    if (p == NULL) {
        if (why) snprintf(why, why_cap, "out of memory");
        return NULL;
    }
    lg_error_set_handler(lg_message, NULL);
    parse_options_set_verbosity(p->opts = parse_options_create(), 0);
    p->dict = dictionary_create_lang("en");
    if (p->dict == NULL) {
        if (why) snprintf(why, why_cap, "link-grammar: no English dictionary (apt-get install link-grammar)");
        nmt_parser_destroy(p);
        return NULL;
    }
    parse_options_set_max_parse_time(p->opts, 10);
    parse_options_set_linkage_limit(p->opts, 100);
    parse_options_set_min_null_count(p->opts, 0);
    parse_options_set_max_null_count(p->opts, 0); /* a parse that drops words is no parse */
    return p;
}

void nmt_parser_destroy(nmt_parser *p) {
    if (p == NULL) return;
    if (p->opts) parse_options_delete(p->opts);
    if (p->dict) dictionary_delete(p->dict);
    free(p);
}

void nmt_parser_counts(const nmt_parser *p, uint64_t *parsed, uint64_t *fallback) {
    if (parsed) *parsed = p ? p->parsed : 0;
    if (fallback) *fallback = p ? p->fallback : 0;
}

/* Our label of a link-grammar constituent label. */
static void label_of(const char *s, size_t n, char out[8]) {
    static const char *const keep[7] = {"NP", "VP", "PP", "S", "SBAR", "ADJP", "ADVP"};
    for (int i = 0; i < 7; i++)
        if (strlen(keep[i]) == n && memcmp(keep[i], s, n) == 0) {
            snprintf(out, 8, "%s", keep[i]);
            return;
        }
    snprintf(out, 8, "O");
}

/* The base constituents of a one-line tree "(S (NP the cat.n) ...)" over
 * its leaves; -1 when the tree is not what we expect. */
static int tree_spans(const char *t, nmt_parsed_span *out, uint32_t cap, uint32_t *n_leaves) {
    struct {
        uint32_t first;
        int has_child;
        char label[8];
    } st[PS_MAX_DEPTH];
    int depth = 0, n = 0;
    uint32_t leaves = 0;
    for (const char *c = t; *c;) {
        if (*c == ' ' || *c == '\n') {
            c++;
        } else if (*c == '(') {
            const char *l = ++c;
            while (*c && *c != ' ' && *c != '(' && *c != ')') c++;
            if (depth == PS_MAX_DEPTH) return -1;
            if (depth > 0) st[depth - 1].has_child = 1;
            st[depth].first = leaves;
            st[depth].has_child = 0;
            label_of(l, (size_t)(c - l), st[depth].label);
            depth++;
        } else if (*c == ')') {
            c++;
            if (depth == 0) return -1;
            depth--;
            if (!st[depth].has_child && leaves > st[depth].first) { /* a base phrase */
                if ((uint32_t)n == cap) return -1;
                out[n].start = st[depth].first;
                out[n].len = leaves - st[depth].first;
                memcpy(out[n].label, st[depth].label, 8);
                n++;
            }
        } else {
            while (*c && *c != ' ' && *c != ')') c++;
            leaves++;
        }
    }
    *n_leaves = leaves;
    return depth == 0 ? n : -1;
}

int nmt_parser_word_spans(nmt_parser *p, const char *text, size_t len, nmt_parsed_span *out, uint32_t cap,
                          uint32_t *wb, uint32_t *we, uint32_t cap_words, uint32_t *n_words) {
    *n_words = 0;
    char *s = malloc(len + 1);
    if (s == NULL) return -1;
    memcpy(s, text, len);
    s[len] = '\0';
    int n = -1;
    Sentence sent = sentence_create(s, p->dict);
    if (sent && sentence_parse(sent, p->opts) > 0 && sentence_null_count(sent) == 0) {
        Linkage l = linkage_create(0, sent, p->opts);
        if (l) {
            char *tree = linkage_print_constituent_tree(l, SINGLE_LINE);
            uint32_t leaves = 0;
            const size_t nw = linkage_get_num_words(l); /* LEFT-WALL, the words, RIGHT-WALL */
            if (tree) n = tree_spans(tree, out, cap, &leaves);
            if (n >= 0 && (nw < 2 || leaves != nw - 2 || leaves > PS_MAX_WORDS)) n = -1; /* leaves = words */
            for (uint32_t w = 0; n >= 0 && w < leaves && w < cap_words; w++) {
                if (wb) wb[w] = (uint32_t)linkage_get_word_byte_start(l, w + 1);
                if (we) we[w] = (uint32_t)linkage_get_word_byte_end(l, w + 1);
            }
            if (n >= 0) *n_words = leaves;
            if (tree) linkage_free_constituent_tree_str(tree);
            linkage_delete(l);
        }
    }
    if (sent) sentence_delete(sent);
    free(s);
    return n;
}

/* The piece holding byte b of the text (piece k covers [pb[k], pe[k])). */
static int32_t piece_at(const uint32_t *pb, const uint32_t *pe, uint32_t n, uint32_t b) {
    for (uint32_t k = 0; k < n; k++)
        if (b >= pb[k] && b < pe[k]) return (int32_t)k;
    return -1;
}

int nmt_parser_piece_spans(nmt_parser *p, const nmt_tokenizer *t, const int32_t *ids, uint32_t n,
                           nmt_parsed_span *out, uint32_t cap) {
    if (p == NULL || n == 0 || n > PS_MAX_WORDS) return p ? (p->fallback++, -1) : -1;
    const size_t bound = nmt_tokenizer_decode_bound(t, n) + 1;
    char *text = malloc(bound);
    uint32_t *pb = malloc(sizeof(uint32_t) * n * 2), *pe = pb ? pb + n : NULL;
    uint32_t wb[PS_MAX_WORDS], we[PS_MAX_WORDS], nw = 0;
    nmt_parsed_span words[PS_MAX_WORDS];
    int m = -1;
    size_t tl = 0, prev = 0;
    int ok = text && pb && nmt_tokenizer_decode(t, ids, n, text, bound, &tl) == NMT_OK;
    /* piece k's bytes: the growth of the decoded prefix, its leading blanks not counted */
    for (uint32_t k = 0; ok && k < n; k++) {
        size_t l = 0;
        ok = nmt_tokenizer_decode(t, ids, k + 1, text, bound, &l) == NMT_OK && l >= prev;
        size_t b = prev;
        while (ok && b < l && text[b] == ' ') b++;
        pb[k] = (uint32_t)b;
        pe[k] = (uint32_t)l;
        prev = l;
    }
    if (ok) ok = nmt_tokenizer_decode(t, ids, n, text, bound, &tl) == NMT_OK && tl == prev;
    if (ok) m = nmt_parser_word_spans(p, text, tl, words, PS_MAX_WORDS, wb, we, PS_MAX_WORDS, &nw);
    int k = 0;
    uint32_t end = 0;
    for (int i = 0; i < m; i++) {
        const uint32_t b = wb[words[i].start], e = we[words[i].start + words[i].len - 1];
        const int32_t a = piece_at(pb, pe, n, b), z = e > b ? piece_at(pb, pe, n, e - 1) : -1;
        if (a < 0 || z < a) { /* a word the pieces do not hold: the sentence falls back */
            k = -1;
            break;
        }
        if ((uint32_t)a < end || (uint32_t)k == cap) continue; /* shares a piece with the phrase before */
        out[k] = words[i];
        out[k].start = (uint32_t)a;
        out[k].len = (uint32_t)(z - a + 1);
        end = (uint32_t)z + 1;
        k++;
    }
    free(text);
    free(pb);
    if (m < 0 || k < 0) {
        p->fallback++;
        return -1;
    }
    p->parsed++;
    return k;
}

#else /* built without the parser */

nmt_parser *nmt_parser_create(char *why, size_t why_cap) {
    if (why) snprintf(why, why_cap, "built without link-grammar (cmake -DNMT_WITH_LINK_GRAMMAR=ON)");
    return NULL;
}
void nmt_parser_destroy(nmt_parser *p) { (void)p; }
int nmt_parser_word_spans(nmt_parser *p, const char *text, size_t len, nmt_parsed_span *out, uint32_t cap,
                          uint32_t *wb, uint32_t *we, uint32_t cap_words, uint32_t *n_words) {
    (void)p, (void)text, (void)len, (void)out, (void)cap, (void)wb, (void)we, (void)cap_words;
    *n_words = 0;
    return -1;
}
int nmt_parser_piece_spans(nmt_parser *p, const nmt_tokenizer *t, const int32_t *ids, uint32_t n,
                           nmt_parsed_span *out, uint32_t cap) {
    (void)p, (void)t, (void)ids, (void)n, (void)out, (void)cap;
    return -1;
}
void nmt_parser_counts(const nmt_parser *p, uint64_t *parsed, uint64_t *fallback) {
    (void)p;
    if (parsed) *parsed = 0;
    if (fallback) *fallback = 0;
}
#endif

/* ---- nmt-edge translate: spans for a session's text batches ------------ */

void nmt_syntax_open(nmt_syntax_spans *y, const nmt_session *s, const char *prog) {
    memset(y, 0, sizeof *y);
    nmt_model_info info;
    nmt_session_model_info(s, &info);
    if (strcmp(info.arch, "mgsa") != 0 || strstr(info.family_config, "syntax") == NULL) return;
    char why[256] = "";
    y->p = nmt_parser_create(why, sizeof why);
    if (y->p == NULL)
        fprintf(stderr, "%s: note: the model has syntax heads but no English parser (%s): sentences get the "
                        "model's n-gram phrases\n", prog, why);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (q == NULL) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

nmt_status nmt_syntax_set(nmt_syntax_spans *y, nmt_session *s, const char *const *texts, const size_t *lens,
                          uint32_t n) {
    if (y->p == NULL) return NMT_OK;
    nmt_tokenizer *t = nmt_session_tokenizer(s, 0);
    size_t cs = y->cap_sent;
    if (t == NULL) return NMT_OK;
    if (grow((void **)&y->counts, &cs, n, sizeof *y->counts) ||
        grow((void **)&y->ptrs, &y->cap_sent, n, sizeof *y->ptrs))
        return NMT_ERR_IO;
    size_t used = 0;
    nmt_parsed_span sp[256];
    size_t *off = malloc(sizeof(size_t) * (n ? n : 1));
    if (off == NULL) return NMT_ERR_IO;
    for (uint32_t i = 0; i < n; i++) {
        const int32_t *ids = NULL;
        uint32_t n_ids = 0;
        int k = -1;
        if (nmt_tokenizer_encode(t, texts[i], lens[i], &ids, &n_ids) == NMT_OK && n_ids > 0)
            k = nmt_parser_piece_spans(y->p, t, ids, n_ids, sp, 256);
        y->counts[i] = k > 0 ? (uint32_t)k : 0;
        off[i] = used;
        if (grow((void **)&y->spans, &y->cap_spans, used + y->counts[i] + 1, sizeof *y->spans)) {
            free(off);
            return NMT_ERR_IO;
        }
        for (uint32_t j = 0; j < y->counts[i]; j++) y->spans[used + j] = (nmt_span){sp[j].start, sp[j].len};
        used += y->counts[i];
    }
    for (uint32_t i = 0; i < n; i++) y->ptrs[i] = y->counts[i] ? y->spans + off[i] : NULL;
    free(off);
    return nmt_session_set_spans(s, y->ptrs, y->counts, n);
}

void nmt_syntax_close(nmt_syntax_spans *y, const char *prog) {
    if (y->p) {
        uint64_t parsed = 0, fallback = 0;
        nmt_parser_counts(y->p, &parsed, &fallback);
        fprintf(stderr, "%s: syntax heads: %llu sentences parsed, %llu not parsed (n-gram phrases)\n", prog,
                (unsigned long long)parsed, (unsigned long long)fallback);
    }
    nmt_parser_destroy(y->p);
    free(y->ptrs);
    free(y->counts);
    free(y->spans);
    memset(y, 0, sizeof *y);
}
