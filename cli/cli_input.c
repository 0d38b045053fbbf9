/* SPDX-License-Identifier: MIT */
/* cli_input.c — input lines of the nmt-edge program (see cli_input.h): the
 * line reader with its look-ahead and its cut of over-long lines, id
 * parsing, score-line splitting. */
#include "cli_input.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "nmt-edge"

void *cli_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    return q;
}

void cli_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    *p = cli_xrealloc(*p, c * elem);
    *cap = c;
}

void cli_seqs_init(cli_seqs *q, size_t batch) {
    memset(q, 0, sizeof *q);
    q->start = cli_xrealloc(NULL, batch * sizeof *q->start);
    q->lens = cli_xrealloc(NULL, batch * sizeof *q->lens);
    q->ptrs = cli_xrealloc(NULL, batch * sizeof *q->ptrs);
}

void cli_seqs_free(cli_seqs *q) {
    free(q->ids);
    free(q->start);
    free(q->lens);
    free(q->ptrs);
    memset(q, 0, sizeof *q);
}

void cli_seqs_reset(cli_seqs *q) {
    q->n = 0;
    q->n_ids = 0;
}

void cli_seqs_ptrs(cli_seqs *q) {
    /* empty sentences only: no id array yet (NULL + 0 is undefined in C) */
    for (uint32_t i = 0; i < q->n; i++) q->ptrs[i] = q->ids ? q->ids + q->start[i] : NULL;
}

void cli_texts_init(cli_texts *q, size_t batch) {
    memset(q, 0, sizeof *q);
    q->start = cli_xrealloc(NULL, batch * sizeof *q->start);
    q->lens = cli_xrealloc(NULL, batch * sizeof *q->lens);
    q->ptrs = cli_xrealloc(NULL, batch * sizeof *q->ptrs);
}

void cli_texts_free(cli_texts *q) {
    free(q->bytes);
    free(q->start);
    free(q->lens);
    free(q->ptrs);
    memset(q, 0, sizeof *q);
}

void cli_texts_reset(cli_texts *q) {
    q->n = 0;
    q->n_bytes = 0;
}

void cli_texts_add(cli_texts *q, const char *s, size_t n) {
    cli_grow((void **)&q->bytes, &q->cap_bytes, q->n_bytes + n + 1, 1);
    if (n) memcpy(q->bytes + q->n_bytes, s, n);
    q->start[q->n] = q->n_bytes;
    q->lens[q->n++] = n;
    q->n_bytes += n;
}

void cli_texts_ptrs(cli_texts *q) {
    for (uint32_t i = 0; i < q->n; i++) q->ptrs[i] = q->bytes ? q->bytes + q->start[i] : NULL;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

int cli_parse_ids(const char *p, const char *end, unsigned long line, const cli_side_rule *r,
                  cli_seqs *q, char *err, size_t cap) {
    uint32_t count = 0;
    const size_t first = q->n_ids;
    while (p < end) {
        if (is_space(*p)) {
            p++;
            continue;
        }
        const char *tok = p;
        int64_t v = 0;
        int digits = 1;
        while (p < end && !is_space(*p)) {
            if (*p < '0' || *p > '9') digits = 0;
            else if (v <= INT32_MAX) v = v * 10 + (*p - '0');
            p++;
        }
        int len = (int)((p - tok) > 24 ? 24 : (p - tok));
        const char *ell = (p - tok) > 24 ? "..." : "";
        if (!digits) {
            snprintf(err, cap, "line %lu: %s token '%.*s%s' is not a non-negative integer id", line,
                     r->side, len, tok, ell);
            goto fail;
        }
        if (v > INT32_MAX) {
            snprintf(err, cap, "line %lu: %s token '%.*s%s' overflows a 32-bit id", line, r->side,
                     len, tok, ell);
            goto fail;
        }
        if (v >= (int64_t)r->vocab) {
            snprintf(err, cap,
                     "line %lu: %s token id %lld is out of range (the model's %s vocabulary has "
                     "ids 0..%u)",
                     line, r->side, (long long)v, r->side, r->vocab ? r->vocab - 1u : 0u);
            goto fail;
        }
        if (count >= r->max_tokens) {
            while (p < end) { /* count the rest for the message */
                while (p < end && is_space(*p)) p++;
                if (p < end) count++;
                while (p < end && !is_space(*p)) p++;
            }
            snprintf(err, cap, "line %lu: %s sentence has %u tokens, more than the limit of %u (%s)",
                     line, r->side, count + 1u, r->max_tokens, r->limit_hint);
            q->n_ids = first;
            return 2;
        }
        cli_grow((void **)&q->ids, &q->cap_ids, q->n_ids + 1, sizeof *q->ids);
        q->ids[q->n_ids++] = (int32_t)v;
        count++;
    }
    q->start[q->n] = first;
    q->lens[q->n++] = count;
    return 0;
fail:
    q->n_ids = first;
    return 1;
}

void cli_reader_init(cli_reader *r, int fd) {
    memset(r, 0, sizeof *r);
    r->fd = fd;
    struct stat st;
    r->pauses = !(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
}

void cli_reader_free(cli_reader *r) {
    free(r->buf);
    memset(r, 0, sizeof *r);
}

/* Append what one read() returns (at least 1 byte, or eof / -1). */
static int reader_fill(cli_reader *r) {
    if (r->start > 0) { /* keep the unread bytes at the front */
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->cap - r->end < 65536) cli_grow((void **)&r->buf, &r->cap, r->end + 65536, 1);
    for (;;) {
        ssize_t got = read(r->fd, r->buf + r->end, r->cap - r->end);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) r->eof = 1;
        r->end += (size_t)got;
        return 0;
    }
}

/* Count p[0, n) of a line being cut into c. */
static void cut_scan(cli_cut *c, const char *p, size_t n) {
    for (const char *q = p, *end = p + n; (q = memchr(q, '\t', (size_t)(end - q))) != NULL; q++) {
        if (c->tabs++ == 0) c->first_tab = c->len + (uint64_t)(q - p);
    }
    if (n) c->cr = p[n - 1] == '\r';
    c->len += n;
}

/* The line at buf[start, end) has no "\n" there and more than limit + 1
 * bytes: keep its first limit + 1 bytes at the front of buf, read the rest
 * of it into the space after them one read() at a time, counting, up to
 * its "\n" or the end of input; the bytes after that "\n" stay unread. */
static int reader_skip(cli_reader *r, const char **line, size_t *n) {
    const size_t keep = r->limit + 1;
    memset(&r->cut, 0, sizeof r->cut);
    cut_scan(&r->cut, r->buf + r->start, r->end - r->start);
    memmove(r->buf, r->buf + r->start, keep);
    r->start = 0;
    r->end = keep;
    if (r->cap - keep < 65536) cli_grow((void **)&r->buf, &r->cap, keep + 65536, 1);
    for (;;) {
        ssize_t got = read(r->fd, r->buf + keep, r->cap - keep);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) {
            r->eof = 1;
            break;
        }
        const char *nl = memchr(r->buf + keep, '\n', (size_t)got);
        cut_scan(&r->cut, r->buf + keep, nl ? (size_t)(nl - (r->buf + keep)) : (size_t)got);
        if (nl != NULL) { /* the next lines' bytes move up behind the kept ones */
            r->cut.nl = 1;
            const size_t rest = (size_t)got - (size_t)(nl + 1 - (r->buf + keep));
            memmove(r->buf + keep, nl + 1, rest);
            r->end = keep + rest;
            break;
        }
    }
    *line = r->buf;
    *n = keep;
    r->start = keep;
    return 2;
}

int cli_reader_line(cli_reader *r, const char **line, size_t *n) {
    size_t scanned = r->start;
    for (;;) {
        const char *nl = r->end > scanned ? memchr(r->buf + scanned, '\n', r->end - scanned) : NULL;
        if (nl != NULL || (r->eof && r->end > r->start)) {
            const size_t body = (nl ? (size_t)(nl - r->buf) : r->end) - r->start;
            const size_t stop = r->start + body + (nl != NULL);
            *line = r->buf + r->start;
            if (r->limit && body > r->limit + 1) { /* whole in the buffer, but over: cut as any other */
                memset(&r->cut, 0, sizeof r->cut);
                cut_scan(&r->cut, *line, body);
                r->cut.nl = nl != NULL;
                *n = r->limit + 1;
                r->start = stop;
                return 2;
            }
            *n = stop - r->start;
            r->start = stop;
            return 1;
        }
        if (r->eof) return 0;
        if (r->limit && r->end - r->start > r->limit + 1) return reader_skip(r, line, n);
        scanned = r->end - r->start; /* offset survives the move in reader_fill */
        if (reader_fill(r) != 0) return -1;
        scanned += r->start;
    }
}

int cli_reader_ready(cli_reader *r) {
    if (!r->pauses || r->eof) return 1;
    if (r->end > r->start && memchr(r->buf + r->start, '\n', r->end - r->start) != NULL) return 1;
    struct pollfd p = {.fd = r->fd, .events = POLLIN};
    int k;
    while ((k = poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    return k != 0; /* readable, hung up, or an error the next read reports */
}

size_t cli_line_len(const char *line, size_t n) {
    if (n && line[n - 1] == '\n') n--;
    if (n && line[n - 1] == '\r') n--;
    return n;
}

void cli_pair_error(unsigned long line_no, char *err, size_t cap) {
    snprintf(err, cap, "line %lu: expected SOURCE<TAB>TARGET (exactly one TAB)", line_no);
}

int cli_split_pair(const char *line, size_t n, unsigned long line_no, size_t *tab, char *err,
                   size_t cap) {
    const char *t = memchr(line, '\t', n);
    if (t == NULL || memchr(t + 1, '\t', n - (size_t)(t - line) - 1) != NULL) {
        cli_pair_error(line_no, err, cap);
        return 1;
    }
    *tab = (size_t)(t - line);
    return 0;
}
