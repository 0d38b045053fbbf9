/* SPDX-License-Identifier: MIT */
/* cli_common.c — running the built `nmt-edge` from a test (cli_common.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

char g_dir[256];
char g_model[320];
char g_text_model[300];

void run_cli(run_result *r, const char *in, ...) {
    va_list ap;
    va_start(ap, in);
    run_cli_va(r, in, ap);
    va_end(ap);
}

void run_cli_va(run_result *r, const char *in, va_list args) {
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)NMT_EDGE_BIN;
    const char *a;
    while ((a = va_arg(args, const char *)) != NULL) {
        assert_true(n < 39);
        argv[n++] = (char *)a;
    }
    argv[n] = NULL;
    nmt_test_run(argv, in, g_dir, r);
    if (r->status != 0 && r->status != 1 && r->status != 2)
        fprintf(stderr, "nmt-edge exited %d; stderr:\n%s\n", r->status, r->err);
}

void free_result(run_result *r) { nmt_test_proc_free(r); }

/* Assert the status; show stderr when it is not what we expect. */
void expect_status(const run_result *r, int status) {
    if (r->status != status)
        fprintf(stderr, "expected exit %d, got %d; stderr:\n%s\n", status, r->status, r->err);
    assert_int_equal(r->status, status);
}

/* Split stdout into lines (in place); every line must end with '\n'. */
int split_lines(run_result *r, char **lines, int max) {
    int n = 0;
    char *p = r->out;
    if (r->out_len) assert_int_equal(r->out[r->out_len - 1], '\n');
    while (*p) {
        assert_true(n < max);
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        assert_non_null(nl);
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}


int cli_group_setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/nmt-cli-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(g_dir) == NULL) return -1;
    snprintf(g_model, sizeof g_model, "%s/model.nmt", g_dir);
    char *argv[] = {(char *)NMT_CONVERT_BIN, "random", "-o", g_model, "--d-model", "32",
                    "--heads", "4", "--ff", "64", "--enc-layers", "1", "--dec-layers", "1",
                    "--src-vocab", "50", "--tgt-vocab", "50", "--seed", "1", NULL};
    run_result r;
    nmt_test_run(argv, NULL, g_dir, &r);
    if (r.status != 0) fprintf(stderr, "nmt-edge-convert random failed (%d):\n%s\n", r.status, r.err);
    int ok = r.status == 0;
    free_result(&r);
    snprintf(g_text_model, sizeof g_text_model, "%s/text.nmt", g_dir);
    char *argv2[] = {(char *)NMT_CONVERT_BIN, "random", "-o", g_text_model, "--d-model", "32",
                     "--heads", "4", "--ff", "64", "--enc-layers", "1", "--dec-layers", "1",
                     "--src-vocab", "600", "--tgt-vocab", "600", "--seed", "1", "--sp-model",
                     SPM_FIXTURE, NULL};
    nmt_test_run(argv2, NULL, g_dir, &r);
    if (r.status != 0) fprintf(stderr, "nmt-edge-convert random --sp-model failed (%d):\n%s\n", r.status, r.err);
    ok = ok && r.status == 0;
    free_result(&r);
    return ok ? 0 : -1;
}

int cli_group_teardown(void **state) {
    (void)state;
    nmt_test_remove_tree(g_dir);
    return 0;
}

/* ---- alignments (translate / score --alignment) -------------------------- */

/* Whitespace-separated words of s[0, n). */
uint32_t count_words(const char *s, size_t n) {
    uint32_t w = 0;
    for (size_t k = 0; k < n; k++)
        if (s[k] != ' ' && s[k] != '\t' && (k == 0 || s[k - 1] == ' ' || s[k - 1] == '\t')) w++;
    return w;
}

/* A line "TRANSLATION ||| ALIGNMENT": split at the last " |||" into the
 * translation (NUL-terminated in place) and the alignment after it. */
const char *split_alignment(char *line) {
    char *bar = strstr(line, " |||");
    assert_non_null(bar);
    while (strstr(bar + 1, " |||")) bar = strstr(bar + 1, " |||");
    *bar = '\0';
    const char *a = bar + 4;
    assert_true(*a == '\0' || *a == ' ');
    return *a ? a + 1 : a;
}

/* Pharaoh pairs "i-j" with i < n_src, j < n_tgt, single spaces; with
 * one_per_target each j in [0, n_tgt) appears exactly once, in order. */
void check_pairs(const char *a, uint32_t n_src, uint32_t n_tgt, int one_per_target) {
    uint32_t k = 0;
    while (*a) {
        char *end;
        const long i = strtol(a, &end, 10);
        assert_true(end > a && *end == '-' && i >= 0 && (uint32_t)i < n_src);
        a = end + 1;
        const long j = strtol(a, &end, 10);
        assert_true(end > a && j >= 0 && (uint32_t)j < n_tgt);
        if (one_per_target) assert_int_equal(j, k);
        k++;
        a = end;
        if (*a == ' ') a++;
    }
    if (one_per_target) assert_int_equal(k, n_src ? n_tgt : 0);
}

/* Soft rows: n_tgt rows of n_src + 1 numbers, " ; " between rows, each
 * summing to 1 (up to the printed precision). */
void check_soft(const char *a, uint32_t n_src, uint32_t n_tgt) {
    uint32_t rows = 0;
    while (*a) {
        double sum = 0;
        for (uint32_t c = 0; c <= n_src; c++) {
            char *end;
            const double v = strtod(a, &end);
            assert_true(end > a && v >= 0 && v <= 1);
            sum += v;
            a = end;
            if (*a == ' ') a++;
        }
        assert_float_equal(sum, 1.0, 1e-3);
        rows++;
        if (*a == ';') a += 2;
        else assert_int_equal(*a, '\0');
    }
    assert_int_equal(rows, n_tgt);
}
