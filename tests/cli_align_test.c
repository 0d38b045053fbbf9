/* SPDX-License-Identifier: MIT */
/* cli_align_test.c — `nmt-edge score --alignment` (cli/cli_batch.c,
 * cli_align.c), run as a user would:
 *   - scoring each sentence against the model's own greedy translation
 *     prints translate's alignment (hard pairs exactly, soft rows to the
 *     printed precision): the same tokens, the same attention;
 *   - the output is well-formed ("LOGPROB ||| i-j ...", one pair per
 *     target piece, i < source pieces), its log-probabilities those of
 *     score without --alignment, and the same for --batch 1 and 4;
 *   - text pairs: pieces, and whitespace words with --alignment-words;
 *     the BA-NMT family as well as the Transformer;
 *   - bad values: usage errors (exit 2) and the exact messages of what only
 *     the model can refuse (exit 1), phrase cross-attention among them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

#define MAX_LINES 64
static const char *const SENTS[] = {"1 2 3 4 5", "6 7 8", "9 10 11 12 13 14 15", "16", "17 18 19 20", ""};
#define N_SENTS 6u
static const char INPUT[] = "1 2 3 4 5\n6 7 8\n9 10 11 12 13 14 15\n16\n17 18 19 20\n\n";

static uint32_t count_ids(const char *s) { return count_words(s, strlen(s)); }

/* Lines "SRC<TAB>TGT" of the sentences and the lines of `out` (the
 * translation before any " |||"), in a malloc'd buffer. */
static char *pairs_of(const run_result *out) {
    char *copy = malloc(out->out_len + 1), *lines[MAX_LINES];
    memcpy(copy, out->out, out->out_len + 1);
    run_result r = {.out = copy, .out_len = out->out_len};
    assert_int_equal(split_lines(&r, lines, MAX_LINES), N_SENTS);
    char *buf = malloc(8192);
    buf[0] = '\0';
    for (uint32_t k = 0; k < N_SENTS; k++) {
        char *bar = strstr(lines[k], " |||");
        if (bar) *bar = '\0';
        snprintf(buf + strlen(buf), 8192 - strlen(buf), "%s\t%s\n", SENTS[k], lines[k]);
    }
    free(copy);
    return buf;
}

/* Two soft alignments equal to the printed precision (each value within
 * 2e-4: the last printed digit may round either way). */
static void assert_soft_close(const char *a, const char *b) {
    while (*a && *b) {
        if (*a == ';' || *b == ';') {
            assert_true(*a == ';' && *b == ';');
            a += 2, b += 2;
            continue;
        }
        char *ea, *eb;
        const double x = strtod(a, &ea), y = strtod(b, &eb);
        assert_true(ea > a && eb > b);
        assert_true(fabs(x - y) <= 2e-4);
        a = ea + (*ea == ' '), b = eb + (*eb == ' ');
    }
    assert_true(*a == '\0' && *b == '\0');
}

/* The log-probability before " |||" of a score line. */
static double logprob_of(const char *line) {
    char *end;
    const double v = strtod(line, &end);
    assert_true(end > line);
    return v;
}

/* Score's alignment of (source, the model's own greedy output) equals
 * translate's, hard and soft; batch 1 equals batch 4; well-formed;
 * log-probabilities as without --alignment. */
static void score_equals_translate(const char *model) {
    const char *modes[2] = {"hard", "soft"};
    for (int m = 0; m < 2; m++) {
        run_result tr, s1, s4, plain;
        run_cli(&tr, INPUT, "translate", "--model", model, "--beam", "1", "--max-len", "10", "--alignment",
                modes[m], NULL);
        expect_status(&tr, 0);
        char *pairs = pairs_of(&tr);
        run_cli(&s1, pairs, "score", "--model", model, "--alignment", modes[m], "--batch", "1", NULL);
        run_cli(&s4, pairs, "score", "--model", model, "--alignment", modes[m], "--batch", "4", NULL);
        run_cli(&plain, pairs, "score", "--model", model, NULL);
        expect_status(&s1, 0);
        expect_status(&s4, 0);
        expect_status(&plain, 0);
        assert_string_equal(s1.out, s4.out);
        char *lt[MAX_LINES], *ls[MAX_LINES], *lp[MAX_LINES];
        assert_int_equal(split_lines(&tr, lt, MAX_LINES), N_SENTS);
        assert_int_equal(split_lines(&s1, ls, MAX_LINES), N_SENTS);
        assert_int_equal(split_lines(&plain, lp, MAX_LINES), N_SENTS);
        for (uint32_t k = 0; k < N_SENTS; k++) {
            const char *at = split_alignment(lt[k]), *as = split_alignment(ls[k]);
            const uint32_t n_src = count_ids(SENTS[k]), n_tgt = count_ids(lt[k]);
            if (m == 0) {
                check_pairs(as, n_src, n_tgt, 1);
                assert_string_equal(as, at);
            } else {
                check_soft(as, n_src, n_tgt);
                assert_soft_close(as, at);
            }
            if (n_tgt == 0) assert_string_equal(as, "");
            /* incremental decoding's log-probability, printed as the whole-target pass prints it */
            assert_true(fabs(logprob_of(ls[k]) - logprob_of(lp[k])) <= 2e-4);
        }
        free(pairs);
        free_result(&tr);
        free_result(&s1);
        free_result(&s4);
        free_result(&plain);
    }
}

static void test_score_equals_translate(void **state) {
    (void)state;
    score_equals_translate(g_model);
}

/* Text pairs: pieces (counted by tokenize) and whitespace words. */
static void test_text_pairs(void **state) {
    (void)state;
    /* a pair line splits at its first TAB: the sources have none */
    static const char src2[] = "Hello world, this is a test.\nA\n\nTabs and   spaces\n";
    static const char tgt[] = "Hallo Welt, das ist ein Test.\nB C\nnichts\n  \n";
    static const char in2[] = "Hello world, this is a test.\tHallo Welt, das ist ein Test.\nA\tB C\n\tnichts\n"
                              "Tabs and   spaces\t  \n";
    run_result ts, tt, pieces, words, s1;
    run_cli(&ts, src2, "tokenize", "--model", g_text_model, NULL);
    run_cli(&tt, tgt, "tokenize", "--model", g_text_model, "--target", NULL);
    run_cli(&pieces, in2, "score", "--model", g_text_model, "--alignment", NULL);
    run_cli(&words, in2, "score", "--model", g_text_model, "--alignment", "--alignment-words", NULL);
    run_cli(&s1, in2, "score", "--model", g_text_model, "--alignment", "--alignment-words", "--batch", "1", NULL);
    expect_status(&ts, 0);
    expect_status(&tt, 0);
    expect_status(&pieces, 0);
    expect_status(&words, 0);
    expect_status(&s1, 0);
    assert_string_equal(words.out, s1.out);
    char *ls[8], *lt[8], *lp[8], *lw[8], *srcs[8], *tgts[8];
    char sc[sizeof src2], tc[sizeof tgt];
    memcpy(sc, src2, sizeof src2);
    memcpy(tc, tgt, sizeof tgt);
    int n = 0;
    for (char *p = sc, *q = tc, *a, *b; (a = strchr(p, '\n')) != NULL && (b = strchr(q, '\n')) != NULL;
         p = a + 1, q = b + 1) {
        *a = *b = '\0';
        srcs[n] = p;
        tgts[n++] = q;
    }
    assert_int_equal(split_lines(&ts, ls, 8), n);
    assert_int_equal(split_lines(&tt, lt, 8), n);
    assert_int_equal(split_lines(&pieces, lp, 8), n);
    assert_int_equal(split_lines(&words, lw, 8), n);
    for (int k = 0; k < n; k++) {
        const char *pa = split_alignment(lp[k]), *wa = split_alignment(lw[k]);
        assert_string_equal(lp[k], lw[k]); /* the same log-probability */
        const uint32_t n_src = count_ids(ls[k]), n_tgt = count_ids(lt[k]);
        check_pairs(pa, n_src, n_tgt, 1);
        check_pairs(wa, count_words(srcs[k], strlen(srcs[k])), count_words(tgts[k], strlen(tgts[k])), 0);
        if (n_src == 0 || n_tgt == 0) assert_string_equal(wa, "");
        else assert_string_not_equal(wa, "");
    }
    free_result(&ts);
    free_result(&tt);
    free_result(&pieces);
    free_result(&words);
    free_result(&s1);
}

static void expect_error(int status, const char *msg, ...);

/* A BA-NMT model (additive attention, one head): score's alignment equals
 * translate's for the model's own greedy output, hard and soft, at batch 1
 * and 4; translate's alignments equal at batch 1 and 4; the layer and head
 * beyond its one attention refused with the exact message. */
static void test_banmt(void **state) {
    (void)state;
    char model[400];
    snprintf(model, sizeof model, "%s/banmt.nmt", g_dir);
    run_result c;
    char *argv[] = {(char *)NMT_CONVERT_BIN, "random", "-o", model, "--arch", "banmt", "--src-vocab", "50",
                    "--tgt-vocab", "50", "--history", "ba", NULL};
    nmt_test_run(argv, "", g_dir, &c);
    expect_status(&c, 0);
    free_result(&c);
    score_equals_translate(model);
    const char *modes[2] = {"hard", "soft"};
    for (int m = 0; m < 2; m++) {
        run_result t1, t4;
        run_cli(&t1, INPUT, "translate", "--model", model, "--beam", "2", "--max-len", "10", "--alignment", modes[m],
                "--batch", "1", NULL);
        run_cli(&t4, INPUT, "translate", "--model", model, "--beam", "2", "--max-len", "10", "--alignment", modes[m],
                "--batch", "4", NULL);
        expect_status(&t1, 0);
        expect_status(&t4, 0);
        char *l1[MAX_LINES], *l4[MAX_LINES];
        assert_int_equal(split_lines(&t1, l1, MAX_LINES), N_SENTS);
        assert_int_equal(split_lines(&t4, l4, MAX_LINES), N_SENTS);
        for (uint32_t k = 0; k < N_SENTS; k++) {
            const char *a1 = split_alignment(l1[k]), *a4 = split_alignment(l4[k]);
            assert_string_equal(l1[k], l4[k]); /* the same translation */
            if (m == 0) {
                check_pairs(a1, count_ids(SENTS[k]), count_ids(l1[k]), 1);
                assert_string_equal(a1, a4);
            } else {
                check_soft(a1, count_ids(SENTS[k]), count_ids(l1[k]));
                assert_soft_close(a1, a4);
            }
        }
        free_result(&t1);
        free_result(&t4);
    }
    char want[600];
    snprintf(want, sizeof want, "nmt-edge: --align-layer 2: model '%s' has 1 decoder layer\n", model);
    expect_error(1, want, "score", "--model", model, "--alignment", "--align-layer", "2", NULL);
    snprintf(want, sizeof want, "nmt-edge: --align-head 2: model '%s' has 1 head\n", model);
    expect_error(1, want, "score", "--model", model, "--alignment", "--align-head", "2", NULL);
}

/* score with the arguments after msg: exit status `status`, nothing
 * written; 2 (a usage error): "nmt-edge score: MSG" and the --help hint on
 * stderr; 1: exactly MSG. */
static void expect_error(int status, const char *msg, ...) {
    va_list ap;
    va_start(ap, msg);
    run_result r;
    run_cli_va(&r, "1\t2\n", ap);
    va_end(ap);
    expect_status(&r, status);
    assert_int_equal(r.out_len, 0);
    if (status == 2) {
        char want[256];
        snprintf(want, sizeof want, "nmt-edge score: %s\n", msg);
        assert_non_null(strstr(r.err, want));
        assert_non_null(strstr(r.err, "--help"));
    } else {
        assert_string_equal(r.err, msg);
    }
    free_result(&r);
}

static void test_bad_options(void **state) {
    (void)state;
    expect_error(2, "--alignment: 'fuzzy' is not one of hard, soft", "score", "--model", g_model, "--alignment=fuzzy",
                 NULL);
    expect_error(2, "--alignment-words needs --alignment", "score", "--model", g_model, "--alignment-words", NULL);
    expect_error(2, "--align-head needs --alignment", "score", "--model", g_model, "--align-head", "1", NULL);
    expect_error(2, "--alignment-words needs --alignment hard", "score", "--model", g_model, "--alignment", "soft",
                 "--alignment-words", NULL);
    expect_error(2, "--alignment-words needs text, not --ids", "score", "--model", g_text_model, "--alignment",
                 "--alignment-words", "--ids", NULL);
    char want[1024];
    snprintf(want, sizeof want, "nmt-edge: --align-layer 2: model '%s' has 1 decoder layer\n", g_model);
    expect_error(1, want, "score", "--model", g_model, "--alignment", "--align-layer", "2", NULL);
    snprintf(want, sizeof want, "nmt-edge: --align-head 5: model '%s' has 4 heads\n", g_model);
    expect_error(1, want, "score", "--model", g_model, "--alignment", "--align-head", "5", NULL);
    expect_error(1, "nmt-edge: --alignment-words needs text: a model with an embedded tokenizer, without --ids\n",
                   "score", "--model", g_model, "--alignment", "--alignment-words", NULL);
    /* phrase cross-attention: its keys are n-grams, nothing to align */
    char model[400];
    snprintf(model, sizeof model, "%s/phrase-cross.nmt", g_dir);
    char *argv[] = {(char *)NMT_CONVERT_BIN, "random", "-o", model, "--arch", "phrase", "--ph-cross",
                    "convkv:homo:211", "--src-vocab", "50", "--tgt-vocab", "50", NULL};
    run_result c;
    nmt_test_run(argv, "", g_dir, &c);
    expect_status(&c, 0);
    free_result(&c);
    snprintf(want, sizeof want,
             "nmt-edge: --alignment: model '%s' (arch phrase) has no token cross-attention to align with "
             "(phrase cross-attention: its keys are n-grams)\n",
             model);
    expect_error(1, want, "score", "--model", model, "--alignment", NULL);
    /* the same model scores without --alignment */
    run_result ok;
    run_cli(&ok, "1 2\t3\n", "score", "--model", model, NULL);
    expect_status(&ok, 0);
    free_result(&ok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_equals_translate),
        cmocka_unit_test(test_text_pairs),
        cmocka_unit_test(test_banmt),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, cli_group_setup, cli_group_teardown);
}
