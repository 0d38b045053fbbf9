/* SPDX-License-Identifier: MIT */
/* fuzz_cli_input.c — libFuzzer harness for the nmt-edge program's input
 * parsing (runtime/cli_input.c): line ends, score-line splitting, id
 * parsing with vocabulary and length limits, and the text batch buffers.
 * Byte 0 and 1 pick the vocabulary (1..256) and the token limit (0..255);
 * the rest is read as lines.  Checks: a parsed sentence has only ids below
 * the vocabulary and no more than the limit; a rejected line leaves the
 * batch unchanged; text lines are stored byte for byte.
 *
 * Built with runtime/cli_input.c (tests/fuzz/CMakeLists.txt); seeds in
 * tests/fuzz/corpus/fuzz_cli_input/. */
#include "cli_input.h"
#include "fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    return 0;
}
