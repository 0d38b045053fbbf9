/* SPDX-License-Identifier: MIT */
/* spans_file.c — reading spans files (spans_file.h). */
#include "spans_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tool_file.h"

const char *const tsp_labels[TSP_N_LABELS] = {"NP", "VP", "PP", "S", "SBAR", "ADJP", "ADVP", "O"};

struct tsp_file {
    char name[256];
    uint64_t n_lines;
    uint64_t *first;  /* [n_lines + 1]: line i's spans are first[i] .. first[i + 1] - 1 */
    nmt_span *sp;
    uint8_t *lab;
};

int tsp_label_id(const char *s, size_t n) {
    for (int i = 0; i < TSP_N_LABELS; i++)
        if (strlen(tsp_labels[i]) == n && memcmp(tsp_labels[i], s, n) == 0) return i;
    return -1;
}

/* A decimal number below 2^32 at s[*i..]; 0 if none. */
static int number(const char *s, size_t n, size_t *i, uint32_t *v) {
    uint64_t x = 0;
    const size_t i0 = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9' && *i - i0 < 10) x = x * 10 + (uint64_t)(s[(*i)++] - '0');
    if (*i == i0 || x > UINT32_MAX || (*i < n && s[*i] >= '0' && s[*i] <= '9')) return 0;
    *v = (uint32_t)x;
    return 1;
}

nmt_status tsp_parse_line(const char *s, size_t n, nmt_span *sp, uint8_t *labels, uint32_t cap, uint32_t *n_out,
                          char *why, size_t why_cap) {
    uint32_t k = 0;
    uint64_t end_before = 0;
    *n_out = 0;
    for (size_t i = 0;;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i == n) break;
        size_t w = i;
        while (w < n && s[w] != ' ' && s[w] != '\t') w++;
        const size_t i0 = i;
        uint32_t a = 0, b = 0;
        const char *colon = memchr(s + i, ':', w - i);
        if (!number(s, w, &i, &a) || i >= w || s[i] != '-' || (++i, !number(s, w, &i, &b)) || s + i != colon) {
            nmt_errf(why, why_cap, "'%.*s' is not START-END:LABEL", (int)NMT_MIN(w - i0, (size_t)40), s + i0);
            return NMT_ERR_INVALID_ARGUMENT;
        }
        const int id = tsp_label_id(colon + 1, (size_t)(s + w - colon - 1));
        if (id < 0) {
            nmt_errf(why, why_cap, "'%.*s': unknown label (NP VP PP S SBAR ADJP ADVP O)",
                     (int)NMT_MIN(w - i0, (size_t)40), s + i0);
            return NMT_ERR_INVALID_ARGUMENT;
        }
        if (b <= a) {
            nmt_errf(why, why_cap, "span %u-%u is empty", a, b);
            return NMT_ERR_INVALID_SPANS;
        }
        if (a < end_before) {
            nmt_errf(why, why_cap, "span %u-%u starts before the end of the one before (%llu)", a, b,
                     (unsigned long long)end_before);
            return NMT_ERR_INVALID_SPANS;
        }
        if (k == cap) {
            nmt_errf(why, why_cap, "more than %u spans", cap);
            return NMT_ERR_INVALID_ARGUMENT;
        }
        sp[k] = (nmt_span){a, b - a};
        labels[k++] = (uint8_t)id;
        end_before = b;
        i = w;
    }
    *n_out = k;
    return NMT_OK;
}

/* Next line (without "\n" / "\r\n"); 0 at the end. */
static int next_line(const char *t, size_t size, size_t *pos, const char **line, size_t *len) {
    if (*pos >= size) return 0;
    const char *s = t + *pos;
    const char *nl = memchr(s, '\n', size - *pos);
    size_t n = nl ? (size_t)(nl - s) : size - *pos;
    *pos += n + (nl ? 1 : 0);
    if (n > 0 && s[n - 1] == '\r') n--;
    *line = s;
    *len = n;
    return 1;
}

void tsp_free(tsp_file *f) {
    if (f == NULL) return;
    free(f->first);
    free(f->sp);
    free(f->lab);
    free(f);
}

nmt_status tsp_parse(const char *text, size_t size, const char *name, tsp_file **out, char *err, size_t err_cap) {
    NMT_CHECK(out != NULL && (text != NULL || size == 0), NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    if (!name) name = "spans";
    size_t pos = size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0, lines = 0, max_spans = 0;
    for (size_t i = pos; i < size; i++) lines += text[i] == '\n';
    if (size > pos && text[size - 1] != '\n') lines++;
    for (size_t i = pos; i < size; i++) /* a span takes at least 6 bytes ("0-1:S "): a bound */
        max_spans += text[i] == ':';
    tsp_file *f = calloc(1, sizeof *f);
    if (f) {
        f->first = malloc((lines + 1) * sizeof *f->first);
        f->sp = malloc((max_spans ? max_spans : 1) * sizeof *f->sp);
        f->lab = malloc(max_spans ? max_spans : 1);
    }
    if (!f || !f->first || !f->sp || !f->lab) {
        tsp_free(f);
        nmt_errf(err, err_cap, "%s: out of memory", name);
        return NMT_ERR_IO;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    const char *line;
    size_t len, used = 0;
    while (next_line(text, size, &pos, &line, &len)) {
        char why[160];
        uint32_t k = 0;
        f->first[f->n_lines] = used;
        const nmt_status st = tsp_parse_line(line, len, f->sp + used, f->lab + used,
                                             (uint32_t)NMT_MIN(max_spans - used, (size_t)UINT32_MAX), &k, why,
                                             sizeof why);
        if (st != NMT_OK) {
            nmt_errf(err, err_cap, "%s:%llu: %s", name, (unsigned long long)f->n_lines + 1, why);
            tsp_free(f);
            return st;
        }
        used += k;
        f->n_lines++;
    }
    f->first[f->n_lines] = used;
    *out = f;
    return NMT_OK;
}

nmt_status tsp_read(const char *path, tsp_file **out, char *err, size_t err_cap) {
    NMT_CHECK(path != NULL && out != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    char why[NMT_TOOL_WHY_BYTES];
    size_t n = 0;
    char *buf = nmt_tool_read_file(path, NMT_TOOL_MAX_PIPE_BYTES, &n, why, sizeof why);
    if (buf == NULL) {
        nmt_errf(err, err_cap, "%s", why);
        return NMT_ERR_IO;
    }
    const nmt_status st = tsp_parse(buf, n, path, out, err, err_cap);
    free(buf);
    return st;
}

const char *tsp_name(const tsp_file *f) { return f ? f->name : ""; }
uint64_t tsp_lines(const tsp_file *f) { return f ? f->n_lines : 0; }

void tsp_line(const tsp_file *f, uint64_t i, const nmt_span **sp, const uint8_t **labels, uint32_t *n) {
    const int ok = f != NULL && i < f->n_lines && f->first[i + 1] > f->first[i];
    if (sp) *sp = ok ? f->sp + f->first[i] : NULL;
    if (labels) *labels = ok ? f->lab + f->first[i] : NULL;
    if (n) *n = ok ? (uint32_t)(f->first[i + 1] - f->first[i]) : 0;
}
