/* SPDX-License-Identifier: MIT */
/* bleu_test.c — train/core/bleu.c against sacreBLEU: every 13a tokenization and
 * every corpus score in tests/fixtures/bleu/cases.txt (written by
 * scripts/make_bleu_fixtures.py with sacreBLEU) must come out identical. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bleu.h"

/* Undo the fixture escapes: \\ \t \n \r \xHH. */
static char *unescape(const char *s) {
    char *out = malloc(strlen(s) + 1), *o = out;
    for (; *s; s++) {
        if (*s != '\\') { *o++ = *s; continue; }
        s++;
        if (*s == 't') *o++ = '\t';
        else if (*s == 'n') *o++ = '\n';
        else if (*s == 'r') *o++ = '\r';
        else if (*s == 'x') { unsigned v; sscanf(s + 1, "%2x", &v); *o++ = (char)v; s += 2; }
        else *o++ = *s;
    }
    *o = '\0';
    return out;
}

typedef struct corpus {
    char **hyp, **ref; /* ref[i * n_refs + k] */
    size_t n, n_refs;
} corpus;

static void check_corpus(const corpus *c, const char *stats_line, double want, int id) {
    nmt_bleu_stats st = {0};
    for (size_t i = 0; i < c->n; i++)
        assert_int_equal(nmt_bleu_add(&st, c->hyp[i], (const char *const *)c->ref + i * c->n_refs, c->n_refs), 0);
    unsigned long long v[10];
    assert_int_equal(sscanf(stats_line, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                            &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]), 10);
    if (st.sys_len != v[0] || st.ref_len != v[1])
        fail_msg("corpus %d: lengths %llu/%llu, sacreBLEU %llu/%llu", id, (unsigned long long)st.sys_len,
                 (unsigned long long)st.ref_len, v[0], v[1]);
    for (int n = 0; n < 4; n++) {
        assert_int_equal(st.correct[n], v[2 + n]);
        assert_int_equal(st.total[n], v[6 + n]);
    }
    nmt_bleu_result r = nmt_bleu_score(&st);
    if (fabs(r.score - want) > 1e-9 * fmax(1.0, want))
        fail_msg("corpus %d: BLEU %.17g, sacreBLEU %.17g", id, r.score, want);
}

static void test_matches_sacrebleu(void **state) {
    (void)state;
    FILE *f = fopen(NMT_TEST_FIXTURES "/bleu/cases.txt", "r");
    assert_non_null(f);
    char *line = NULL, *tok_in = NULL;
    size_t cap = 0;
    ssize_t len;
    corpus c = {0};
    int corpus_id = -1, n_tok = 0, n_corpus = 0;
    size_t n_ref_lines = 0;
    char stats[256] = "";
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n') line[--len] = '\0';
        if (line[0] == '#') continue;
        if (strncmp(line, "TOK ", 4) == 0 || strcmp(line, "TOK") == 0) {
            free(tok_in);
            tok_in = unescape(len > 4 ? line + 4 : "");
        } else if (strncmp(line, "EXP", 3) == 0) {
            char *want = unescape(len > 4 ? line + 4 : "");
            char *got = nmt_bleu_tokenize_13a(tok_in);
            assert_non_null(got);
            if (strcmp(got, want) != 0) fail_msg("13a of '%s': got '%s', sacreBLEU '%s'", tok_in, got, want);
            free(got);
            free(want);
            n_tok++;
        } else if (strncmp(line, "CORPUS ", 7) == 0) {
            unsigned id, nr;
            assert_int_equal(sscanf(line + 7, "%u %u", &id, &nr), 2);
            corpus_id = (int)id;
            c.n = 0;
            c.n_refs = nr;
        } else if (line[0] == 'H' && (line[1] == ' ' || line[1] == '\0')) {
            c.hyp = realloc(c.hyp, sizeof(char *) * (c.n + 1));
            c.hyp[c.n++] = unescape(len > 2 ? line + 2 : "");
            c.ref = realloc(c.ref, sizeof(char *) * c.n * c.n_refs);
            n_ref_lines = 0;
        } else if (line[0] == 'R' && (line[1] == ' ' || line[1] == '\0')) {
            assert_true(n_ref_lines < c.n_refs); /* the n_refs references of the last H */
            c.ref[(c.n - 1) * c.n_refs + n_ref_lines++] = unescape(len > 2 ? line + 2 : "");
        } else if (strncmp(line, "STATS ", 6) == 0) {
            snprintf(stats, sizeof stats, "%s", line + 6);
        } else if (strncmp(line, "SCORE ", 6) == 0) {
            check_corpus(&c, stats, strtod(line + 6, NULL), corpus_id);
            for (size_t i = 0; i < c.n; i++) free(c.hyp[i]);
            for (size_t i = 0; i < c.n * c.n_refs; i++) free(c.ref[i]);
            n_corpus++;
        }
    }
    free(line);
    free(tok_in);
    free(c.hyp);
    free(c.ref);
    fclose(f);
    assert_true(n_tok >= 30);
    assert_true(n_corpus >= 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_matches_sacrebleu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
