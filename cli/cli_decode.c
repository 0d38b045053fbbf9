/* SPDX-License-Identifier: MIT */
/* cli_decode.c — `nmt-edge translate`'s decoding options beyond the search
 * limits (--coverage-penalty, --repetition-penalty, --sampling topk:K,
 * --temperature, --seed, --prefix-file) and its output formats (--format
 * text | marian | jsonl): checking and parsing the options, reading the
 * prefix file, and writing a hypothesis as one JSON object.  The program,
 * not the library: it may allocate. */
#define _POSIX_C_SOURCE 200809L /* getline() */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Options                                                                  */
/* ======================================================================== */

/* A decimal integer in [0, max] filling all of s. */
static int parse_u64(const char *s, unsigned long long max, unsigned long long *out) {
    if (s[0] < '0' || s[0] > '9') return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' || errno != 0 || v > max) return 0;
    *out = v;
    return 1;
}

int cli_decode_check(cli_opts *o, char *err, size_t cap) {
    const int beam_given = o->beam != 0;
    if (o->sampling != NULL) {
        unsigned long long k;
        if (strncmp(o->sampling, "topk:", 5) != 0 || !parse_u64(o->sampling + 5, 1000000, &k)) {
            snprintf(err, cap, "--sampling '%s': expected topk:K, K an integer from 0 to 1000000 (0: the whole "
                               "distribution, 1: greedy)", o->sampling);
            return EXIT_USAGE;
        }
        o->sampling_topk = (long)k;
        if (beam_given && o->beam != 1) {
            snprintf(err, cap, "--sampling draws one hypothesis: it needs --beam 1 (got --beam %ld)", o->beam);
            return EXIT_USAGE;
        }
    }
    if (!beam_given) o->beam = o->sampling != NULL ? 1 : 4;
    if (o->sampling == NULL && (o->temperature != 0 || o->seed != NULL)) {
        snprintf(err, cap, "--%s needs --sampling", o->temperature != 0 ? "temperature" : "seed");
        return EXIT_USAGE;
    }
    if (o->seed != NULL && !parse_u64(o->seed, ~0ull, &o->seed_value)) {
        snprintf(err, cap, "--seed: '%s' is not an integer in [0, 18446744073709551615]", o->seed);
        return EXIT_USAGE;
    }
    if (o->format != NULL && strcmp(o->format, "text") != 0 && strcmp(o->format, "marian") != 0 &&
        strcmp(o->format, "jsonl") != 0) {
        snprintf(err, cap, "--format: '%s' is not one of text, marian, jsonl", o->format);
        return EXIT_USAGE;
    }
    if (o->with_pieces && cli_format(o) != CLI_FORMAT_JSONL) {
        snprintf(err, cap, "--with-pieces is for --format jsonl");
        return EXIT_USAGE;
    }
    if (o->with_score && cli_format(o) != CLI_FORMAT_TEXT) {
        snprintf(err, cap, "--with-score is for --format text (the %s format has the scores)", o->format);
        return EXIT_USAGE;
    }
    return 0;
}

/* ======================================================================== */
/* --prefix-file                                                            */
/* ======================================================================== */

int cli_prefix_load(cli_prefix *p, const char *path, int ids, uint32_t vocab) {
    memset(p, 0, sizeof *p);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, PROG ": cannot open --prefix-file '%s': %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap_lines = 64, n_ids = 0, cap_ids = 64;
    cli_texts_init(&p->text, cap_lines);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    int rc = 0;
    size_t *id_start = ids ? xrealloc(NULL, cap_lines * sizeof *id_start) : NULL;
    if (ids) {
        p->ids = xrealloc(NULL, cap_ids * sizeof *p->ids);
        p->id_lens = xrealloc(NULL, cap_lines * sizeof *p->id_lens);
    }
    while ((got = getline(&line, &line_cap, f)) >= 0) {
        size_t n = cli_line_len(line, (size_t)got);
        if (p->n == cap_lines) { /* cli_texts holds `batch` lines: grow it by re-adding */
            cli_texts bigger;
            cli_texts_init(&bigger, cap_lines * 2);
            cli_texts_ptrs(&p->text);
            for (uint32_t k = 0; k < p->text.n; k++) cli_texts_add(&bigger, p->text.ptrs[k], p->text.lens[k]);
            cli_texts_free(&p->text);
            p->text = bigger;
            cap_lines *= 2;
            if (ids) {
                id_start = xrealloc(id_start, cap_lines * sizeof *id_start);
                p->id_lens = xrealloc(p->id_lens, cap_lines * sizeof *p->id_lens);
            }
        }
        cli_texts_add(&p->text, line, n);
        if (ids) {
            id_start[p->n] = n_ids;
            p->id_lens[p->n] = 0;
            const char *c = line, *e = line + n;
            while (c < e) {
                while (c < e && (*c == ' ' || *c == '\t')) c++;
                if (c == e) break;
                unsigned long long v = 0;
                const char *d = c;
                while (d < e && *d >= '0' && *d <= '9' && v <= vocab) v = v * 10 + (unsigned)(*d++ - '0');
                if (d == c || (d < e && *d != ' ' && *d != '\t') || v >= vocab) {
                    fprintf(stderr, PROG ": --prefix-file '%s' line %lu: '%.*s' is not a target token id (0 to %u)\n",
                            path, p->n + 1, (int)strcspn(c, " \t\r\n"), c, vocab - 1);
                    rc = 1;
                    break;
                }
                if (n_ids == cap_ids) p->ids = xrealloc(p->ids, (cap_ids *= 2) * sizeof *p->ids);
                p->ids[n_ids++] = (int32_t)v;
                p->id_lens[p->n]++;
                c = d;
            }
            if (rc) break;
        }
        p->n++;
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, PROG ": error reading --prefix-file '%s': %s\n", path, strerror(errno));
        rc = 1;
    }
    fclose(f);
    free(line);
    cli_texts_ptrs(&p->text);
    if (ids) {
        p->id_ptrs = xrealloc(NULL, (p->n + 1) * sizeof *p->id_ptrs);
        for (unsigned long k = 0; k < p->n; k++) p->id_ptrs[k] = p->ids + id_start[k];
    }
    free(id_start);
    return rc;
}

void cli_prefix_free(cli_prefix *p) {
    cli_texts_free(&p->text);
    free(p->ids);
    free(p->id_ptrs);
    free(p->id_lens);
    memset(p, 0, sizeof *p);
}

/* ======================================================================== */
/* JSON                                                                     */
/* ======================================================================== */

/* Length of the well-formed UTF-8 sequence at s[0, n) (RFC 3629: no
 * overlongs, no surrogates, at most U+10FFFF), 0 if there is none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    return len;
}

void cli_json_string(strbuf *out, const char *s, size_t n) {
    sb_printf(out, "\"");
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        const size_t len = utf8_len((const unsigned char *)s + i, n - i);
        if (len == 0) {
            sb_printf(out, "\\ufffd");
            i++;
            continue;
        }
        if (len > 1) {
            sb_printf(out, "%.*s", (int)len, s + i);
        } else if (c == '"' || c == '\\') {
            sb_printf(out, "\\%c", c);
        } else if (c == '\n') {
            sb_printf(out, "\\n");
        } else if (c == '\r') {
            sb_printf(out, "\\r");
        } else if (c == '\t') {
            sb_printf(out, "\\t");
        } else if (c == '\b') {
            sb_printf(out, "\\b");
        } else if (c == '\f') {
            sb_printf(out, "\\f");
        } else if (c < 0x20 || c == 0x7F) {
            sb_printf(out, "\\u%04x", c);
        } else {
            sb_printf(out, "%c", c);
        }
        i += len;
    }
    sb_printf(out, "\"");
}

/* A float as a JSON number (null when not finite: JSON has no infinities). */
static void json_number(strbuf *out, float v) {
    if (isfinite(v)) sb_printf(out, "%.6f", (double)v);
    else sb_printf(out, "null");
}

void cli_json_append(strbuf *out, const cli_json_hyp *h) {
    sb_printf(out, "{\"line\": %lu, \"rank\": %u, \"text\": ", h->line, h->rank);
    cli_json_string(out, h->text, h->text_len);
    sb_printf(out, ", \"tokens\": [");
    for (uint32_t k = 0; k < h->n_tokens; k++) sb_printf(out, k ? ", %d" : "%d", (int)h->tokens[k]);
    sb_printf(out, "], \"score\": ");
    json_number(out, h->score);
    sb_printf(out, ", \"logprob\": ");
    json_number(out, h->logprob);
    sb_printf(out, ", \"token_logprobs\": [");
    for (uint32_t k = 0; k < h->n_tokens; k++) {
        if (k) sb_printf(out, ", ");
        json_number(out, h->token_lp[k]);
    }
    sb_printf(out, "]");
    if (h->alignment != NULL) sb_printf(out, ", \"alignment\": %.*s", (int)h->alignment_len, h->alignment);
    if (h->pieces != NULL) {
        sb_printf(out, ", \"pieces\": [");
        for (uint32_t k = 0; k < h->n_tokens; k++) {
            if (k) sb_printf(out, ", ");
            if (h->pieces[k] != NULL) cli_json_string(out, h->pieces[k], h->piece_lens[k]);
            else sb_printf(out, "null");
        }
        sb_printf(out, "]");
    }
    sb_printf(out, "}\n");
}
