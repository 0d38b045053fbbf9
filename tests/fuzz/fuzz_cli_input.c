/* SPDX-License-Identifier: MIT */
/* fuzz_cli_input.c — libFuzzer harness for the nmt-edge program's input
 * parsing (cli/cli_input.c): line ends, score-line splitting, id
 * parsing with vocabulary and length limits, and the text batch buffers.
 * Byte 0 and 1 pick the vocabulary (1..256) and the token limit (0..255);
 * the rest is read as lines.  Checks: a parsed sentence has only ids below
 * the vocabulary and no more than the limit; a rejected line leaves the
 * batch unchanged; text lines are stored byte for byte.  The same lines
 * also go through the line reader (from a temporary file) with a limit of
 * byte 1 modulo 32 (0: none): a line of at most limit + 1 bytes before its
 * LF comes back whole, a longer one cut (its first limit + 1 bytes, its
 * length, LF, CR and TABs counted exactly), and the buffer stays below
 * 2 * (limit + 1 + 64 KiB).
 *
 * Built with cli/cli_input.c (tests/fuzz/CMakeLists.txt); seeds in
 * tests/fuzz/corpus/fuzz_cli_input/. */
#include "cli_input.h"
#include "fuzz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reader over p[0, n) with `limit`, against a plain split. */
static void check_reader(const char *p, size_t n, size_t limit) {
    FILE *f = tmpfile();
    if (f == NULL) return; /* no temporary file here: nothing to check */
    if ((n && fwrite(p, 1, n, f) != n) || fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0) abort();
    cli_reader r;
    cli_reader_init(&r, fileno(f));
    r.limit = limit;
    const char *end = p + n;
    for (;;) {
        const char *line;
        size_t got_n;
        const int got = cli_reader_line(&r, &line, &got_n);
        if (p == end) {
            if (got != 0) abort();
            break;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const size_t body = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (limit == 0 || body <= limit + 1) {
            if (got != 1 || got_n != body + (nl != NULL) || memcmp(line, p, got_n) != 0) abort();
        } else {
            const char *tab = memchr(p, '\t', body);
            uint64_t tabs = 0;
            for (size_t i = 0; i < body; i++) tabs += p[i] == '\t';
            if (got != 2 || got_n != limit + 1 || memcmp(line, p, got_n) != 0 || r.cut.len != body ||
                r.cut.nl != (nl != NULL) || r.cut.cr != (p[body - 1] == '\r') || r.cut.tabs != tabs ||
                (tab != NULL && r.cut.first_tab != (uint64_t)(tab - p)))
                abort();
        }
        if (limit && r.cap >= 2 * (limit + 1 + 65536)) abort();
        p += body + (nl != NULL);
    }
    cli_reader_free(&r);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    cli_side_rule rule = {.side = "source", .vocab = (uint32_t)data[0] + 1u, .max_tokens = data[1]};
    strcpy(rule.limit_hint, "fuzz");
    const char *p = (const char *)data + 2, *end = (const char *)data + size;
    enum { BATCH = 8 };
    cli_seqs q;
    cli_texts tx;
    cli_seqs_init(&q, BATCH);
    cli_texts_init(&tx, BATCH);
    unsigned long line_no = 0;
    char err[256];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const size_t raw = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        const size_t len = cli_line_len(p, raw);
        line_no++;
        if (q.n == BATCH) cli_seqs_reset(&q);
        if (tx.n == BATCH) cli_texts_reset(&tx);
        const uint32_t before_n = q.n;
        const size_t before_ids = q.n_ids;
        size_t tab;
        const char *a = p, *a_end = p + len;
        if (cli_split_pair(p, len, line_no, &tab, err, sizeof err) == 0) {
            if (p[tab] != '\t') abort();
            a_end = p + tab;
        }
        if (cli_parse_ids(a, a_end, line_no, &rule, &q, err, sizeof err) == 0) {
            if (q.n != before_n + 1 || q.lens[before_n] > rule.max_tokens) abort();
            cli_seqs_ptrs(&q);
            for (uint32_t k = 0; k < q.lens[before_n]; k++)
                if (q.ptrs[before_n][k] < 0 || (uint32_t)q.ptrs[before_n][k] >= rule.vocab) abort();
        } else if (q.n != before_n || q.n_ids != before_ids || memchr(err, '\n', strlen(err))) {
            abort();
        }
        cli_texts_add(&tx, p, len);
        cli_texts_ptrs(&tx);
        if (tx.lens[tx.n - 1] != len || (len && memcmp(tx.ptrs[tx.n - 1], p, len) != 0)) abort();
        p += raw;
    }
    cli_seqs_free(&q);
    cli_texts_free(&tx);
    check_reader((const char *)data + 2, size - 2, data[1] % 32u);
    return 0;
}
