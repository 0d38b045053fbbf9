/* SPDX-License-Identifier: MIT */
/* cli_common.h — what the tests that run the built `nmt-edge` share
 * (cli_test.c, cli_batch_test.c, cli_decode_test.c, cli_align_test.c): a
 * scratch directory with two small random models made by `nmt-edge-convert
 * random`, running the program on a given stdin, checks of its exit status
 * and output lines, and of --alignment output.  Each test program compiles
 * cli_common.c with its own NMT_EDGE_BIN / NMT_CONVERT_BIN. */
#ifndef NMT_CLI_COMMON_H
#define NMT_CLI_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "test_util.h"

#ifndef NMT_EDGE_BIN
#error "NMT_EDGE_BIN must name the nmt-edge executable"
#endif
#ifndef NMT_CONVERT_BIN
#error "NMT_CONVERT_BIN must name the nmt-edge-convert executable"
#endif

#define SPM_FIXTURE NMT_TEST_FIXTURES "/spm/uni_nfkc.model"

typedef nmt_test_proc run_result; /* status, out (out_len), err */

extern char g_dir[256];        /* scratch directory of the group */
extern char g_model[320];      /* ids model: d 32, vocabularies of 50 */
extern char g_text_model[300]; /* the same shape (vocabularies of 600) with SPM_FIXTURE embedded */

/* cmocka group setup / teardown: make / remove g_dir and the two models. */
int cli_group_setup(void **state);
int cli_group_teardown(void **state);

/* Run nmt-edge with the given arguments (NULL-terminated), `in` on stdin. */
void run_cli(run_result *r, const char *in, ...);
void run_cli_va(run_result *r, const char *in, va_list args);
void free_result(run_result *r);
/* Assert the status; show stderr when it is not what we expect. */
void expect_status(const run_result *r, int status);
/* Split stdout into lines (in place); every line must end with '\n'. */
int split_lines(run_result *r, char **lines, int max);

/* --alignment output: a line "TEXT ||| ALIGNMENT" split at the last " |||"
 * (TEXT NUL-terminated in place; returns the alignment); Pharaoh pairs
 * "i-j" with i < n_src, j < n_tgt (one_per_target: each j once, in order,
 * none when n_src is 0); soft rows, n_tgt of n_src + 1 numbers summing to
 * 1; the whitespace words of s[0, n). */
const char *split_alignment(char *line);
void check_pairs(const char *a, uint32_t n_src, uint32_t n_tgt, int one_per_target);
void check_soft(const char *a, uint32_t n_src, uint32_t n_tgt);
uint32_t count_words(const char *s, size_t n);

#endif
