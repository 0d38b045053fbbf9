/* SPDX-License-Identifier: MIT */
/* limits_test.c — the CLI at the edges of its input contract (issue 7):
 * empty input, empty lines, over-long lines, a 1 MB line, a 64 MiB text
 * line cut as it is read (issue 55: its message, --skip-long, a pipe, the
 * program's peak memory), numbers that overflow, binary garbage on stdin, and model files of another format
 * version or architecture.  Each case runs the built `nmt-edge` on the
 * bundled test model (--ids: ids in, ids out; text mode through its
 * embedded tokenizer where noted) and asserts the exit
 * status (0 success, 1 runtime error), that nothing is written to stdout for
 * a rejected batch, and the message on stderr. */
#define _DEFAULT_SOURCE /* wait4() */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format.h"
#include "test_util.h"

#ifndef NMT_EDGE_BIN
#error "NMT_EDGE_BIN must name the nmt-edge program"
#endif

static char *tmp_dir;
static char model_path[1024];

typedef struct run_result {
    int status;     /* exit status, or 128 + signal */
    char *out;      /* stdout, NUL-terminated (malloc'd) */
    size_t out_len;
    char *err;      /* stderr */
    long maxrss_kb; /* the program's peak resident memory (wait4) */
} run_result;

static void free_result(run_result *r) {
    free(r->out);
    free(r->err);
}

/* A program's standard input: before[0, n_before), then `big` bytes of
 * words ("hello hello ..."), then after (a C string).  Written in 64 KiB
 * pieces: the test never holds the big line, so the programs it forks
 * start small (a forked child's peak RSS counts what it inherited). */
typedef struct cli_input {
    const char *before;
    size_t n_before;
    size_t big;
    const char *after;
} cli_input;

/* 0, or -1 when a write fails (a pipe whose reader stopped). */
static int write_input(int fd, const cli_input *in) {
    enum { PIECE = 1 << 16 };
    static char words[PIECE + 6]; /* 6-periodic: words + at % 6 continues the big line at offset at */
    for (size_t i = 0; i < sizeof words; i++) words[i] = (i % 6 == 5) ? ' ' : "hello"[i % 6];
    const size_t sizes[3] = {in->n_before, in->big, strlen(in->after)};
    for (int k = 0; k < 3; k++) {
        for (size_t at = 0; at < sizes[k];) {
            const size_t left = sizes[k] - at;
            const char *src = k == 0 ? in->before + at : k == 2 ? in->after + at : words + at % 6;
            ssize_t w = write(fd, src, k == 1 && left > (size_t)PIECE ? (size_t)PIECE : left);
            if (w <= 0) return -1;
            at += (size_t)w;
        }
    }
    return 0;
}

/* Run nmt-edge with argv (NULL-terminated, without the program) and `in`
 * on stdin: a regular file, or with via_pipe a pipe that a child process
 * fills (it stops when the program stops reading). */
static run_result run_cli_ex(const char *const *args, const cli_input *in, int via_pipe) {
    char in_path[1200], out_path[1200], err_path[1200];
    snprintf(in_path, sizeof in_path, "%s/stdin", tmp_dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", tmp_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", tmp_dir);
    if (!via_pipe) {
        int fd = open(in_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write_input(fd, in), 0);
        assert_int_equal(close(fd), 0);
    }
    const char *argv[32];
    int n = 0;
    argv[n++] = NMT_EDGE_BIN;
    while (*args) argv[n++] = *args++;
    argv[n] = NULL;
    int p[2] = {-1, -1};
    pid_t writer = -1;
    fflush(NULL);
    if (via_pipe) {
        assert_int_equal(pipe(p), 0);
        writer = fork();
        assert_true(writer >= 0);
        if (writer == 0) {
            signal(SIGPIPE, SIG_IGN);
            close(p[0]);
            write_input(p[1], in); /* a failure: the program stopped reading */
            _exit(0);
        }
        close(p[1]);
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int i = via_pipe ? p[0] : open(in_path, O_RDONLY),
            o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (i < 0 || o < 0 || e < 0) _exit(126);
        dup2(i, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (via_pipe) close(p[0]);
    int ws;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    assert_int_equal(wait4(pid, &ws, 0, &ru), pid);
    if (via_pipe) {
        int wst;
        assert_int_equal(waitpid(writer, &wst, 0), writer);
    }
    run_result r;
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.maxrss_kb = ru.ru_maxrss;
    size_t n_out, n_err;
    r.out = nmt_test_read_file(out_path, &n_out);
    r.err = nmt_test_read_file(err_path, &n_err);
    assert_non_null(r.out);
    assert_non_null(r.err);
    r.out = realloc(r.out, n_out + 1);
    r.err = realloc(r.err, n_err + 1);
    r.out[n_out] = '\0';
    r.err[n_err] = '\0';
    r.out_len = n_out;
    return r;
}

static run_result run_cli(const char *const *args, const void *in, size_t in_len) {
    const cli_input ci = {.before = in, .n_before = in_len, .after = ""};
    return run_cli_ex(args, &ci, 0);
}

static void expect_rejected(const run_result *r, const char *needle) {
    if (r->status != 1 || r->out_len != 0 || strstr(r->err, needle) == NULL)
        fail_msg("want exit 1, empty stdout and \"%s\" on stderr; got exit %d, %zu bytes of stdout, stderr: %s",
                 needle, r->status, r->out_len, r->err);
}

static int group_setup(void **state) {
    (void)state;
    tmp_dir = nmt_test_make_temp_dir("limits");
    snprintf(model_path, sizeof model_path, "%s/models/test-model.nmt", NMT_TEST_BUILD_DIR);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    nmt_test_remove_tree(tmp_dir);
    free(tmp_dir);
    return 0;
}

/* ---- input lines --------------------------------------------------------- */

static void test_empty_input(void **state) {
    (void)state;
    const char *args[] = {"translate", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, "", 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.out_len, 0);
    free_result(&r);
}

static void test_empty_lines(void **state) {
    (void)state;
    /* empty sentences translate to empty lines, one per input line */
    const char *args[] = {"translate", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, "\n\r\n\n", 4);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "\n\n\n");
    free_result(&r);
}

/* `count` copies of "7 " (a valid id of the test model's vocabulary). */
static char *id_line(size_t count, size_t *len) {
    char *s = malloc(count * 2 + 2);
    assert_non_null(s);
    for (size_t i = 0; i < count; i++) memcpy(s + 2 * i, "7 ", 2);
    s[count * 2] = '\n';
    s[count * 2 + 1] = '\0';
    *len = count * 2 + 1;
    return s;
}

static void test_line_at_limit(void **state) {
    (void)state;
    size_t len;
    char *line = id_line(16, &len);
    const char *args[] = {"translate", "--ids", "--model", model_path, "--max-src-len", "16", "--beam", "1",
                          "--max-len", "2", NULL};
    run_result r = run_cli(args, line, len);
    assert_int_equal(r.status, 0);
    assert_true(r.out_len >= 2 && r.out[r.out_len - 1] == '\n' && strchr(r.out, '\n') == r.out + r.out_len - 1);
    free_result(&r);
    free(line);
}

static void test_line_over_limit(void **state) {
    (void)state;
    size_t len;
    char *line = id_line(17, &len);
    const char *args[] = {"translate", "--ids", "--model", model_path, "--max-src-len", "16", NULL};
    run_result r = run_cli(args, line, len);
    expect_rejected(&r, "line 1: source sentence has 17 tokens, more than the limit of 16");
    free_result(&r);
    free(line);
}

static void test_one_megabyte_line(void **state) {
    (void)state;
    /* 524288 ids: far beyond the default limit of 256 source tokens */
    size_t len;
    char *line = id_line(512 * 1024, &len);
    assert_true(len > 1000000);
    const char *args[] = {"translate", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, line, len);
    expect_rejected(&r, "line 1: source sentence has 524288 tokens, more than the limit of 256");
    free_result(&r);
    /* the same line scored against a short target */
    line[len - 1] = '\t';
    char *pair = malloc(len + 3);
    assert_non_null(pair);
    memcpy(pair, line, len);
    memcpy(pair + len, "5\n", 3);
    const char *sargs[] = {"score", "--ids", "--model", model_path, NULL};
    r = run_cli(sargs, pair, len + 2);
    expect_rejected(&r, "line 1: source sentence has 524288 tokens, more than the limit of 256");
    free_result(&r);
    free(pair);
    free(line);
}

static void test_one_megabyte_text_line(void **state) {
    (void)state;
    /* text mode (the model's tokenizer): 1 MiB of words on one line */
    size_t len = (1 << 20) + 1;
    char *line = malloc(len);
    assert_non_null(line);
    for (size_t i = 0; i + 1 < len; i++) line[i] = (i % 6 == 5) ? ' ' : "hello"[i % 6];
    line[len - 1] = '\n';
    const char *args[] = {"translate", "--model", model_path, NULL};
    run_result r = run_cli(args, line, len);
    expect_rejected(&r, "line 1");
    free_result(&r);
    free(line);
}

/* Text mode finds an over-long sentence only when tokenizing its batch: the
 * batch is then translated a sentence at a time, so the error names the
 * exact line and the lines before it are written; with --skip-long the line
 * becomes an empty one and every other line is translated as it would be
 * alone. */
static void test_long_text_line_in_batch(void **state) {
    (void)state;
    const char *in = "hello world\n"
                     "w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w\n"
                     "a test\n"
                     "good\n"
                     "x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x\n"
                     "the end\n";
    const char *args[] = {"translate", "--model", model_path, "--max-src-len", "16", "--beam", "1", NULL};
    run_result r = run_cli(args, in, strlen(in));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "line 2 is longer than the limits"));
    assert_null(strstr(r.err, "line 5"));
    const char *short_in = "hello world\na test\ngood\nthe end\n";
    const char *one[] = {"translate", "--model", model_path, "--max-src-len", "16", "--beam", "1", "--batch", "1",
                         NULL};
    run_result ref = run_cli(one, short_in, strlen(short_in));
    assert_int_equal(ref.status, 0);
    /* the random test model's outputs may hold any byte, NUL included */
    const char *ref_line[4];
    size_t ref_len[4];
    const char *p = ref.out, *end = ref.out + ref.out_len;
    for (int i = 0; i < 4; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        assert_non_null(nl);
        ref_line[i] = p;
        ref_len[i] = (size_t)(nl - p);
        p = nl + 1;
    }
    assert_true(p == end);
    /* stdout holds exactly line 1's translation */
    assert_int_equal(r.out_len, ref_len[0] + 1);
    assert_memory_equal(r.out, ref_line[0], ref_len[0]);
    free_result(&r);

    const char *skip[] = {"translate", "--model", model_path, "--max-src-len", "16", "--beam", "1", "--skip-long",
                          NULL};
    r = run_cli(skip, in, strlen(in));
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "line 2 is longer than the limits"));
    assert_non_null(strstr(r.err, "line 5 is longer than the limits"));
    char expect[4096];
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        assert_true(n + ref_len[i] + 2 <= sizeof expect);
        memcpy(expect + n, ref_line[i], ref_len[i]);
        n += ref_len[i];
        expect[n++] = '\n';
        if (i == 0 || i == 2) expect[n++] = '\n'; /* lines 2 and 5: empty */
    }
    assert_int_equal(r.out_len, n);
    assert_memory_equal(r.out, expect, n);
    free_result(&r);
    free_result(&ref);
}

/* --skip-long in ids mode: the over-long line is an empty one, the others
 * are translated; a malformed line still stops the run. */
static void test_skip_long_ids(void **state) {
    (void)state;
    size_t len;
    char *line = id_line(17, &len);
    char in[256];
    snprintf(in, sizeof in, "7 7\n%s7\n", line);
    const char *args[] = {"translate", "--ids", "--model", model_path, "--max-src-len", "16", "--beam", "1",
                          "--max-len", "3", "--skip-long", NULL};
    run_result r = run_cli(args, in, strlen(in));
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "line 2: source sentence has 17 tokens, more than the limit of 16"));
    assert_non_null(strstr(r.err, "--skip-long"));
    /* three lines: a translation, an empty line, a translation */
    char *nl1 = strchr(r.out, '\n');
    assert_non_null(nl1);
    assert_true(nl1 > r.out);
    assert_int_equal(nl1[1], '\n');
    char *nl3 = strchr(nl1 + 2, '\n');
    assert_non_null(nl3);
    assert_true(nl3 > nl1 + 2);
    assert_int_equal(nl3[1], '\0');
    free_result(&r);
    snprintf(in, sizeof in, "7 7\n7 99999\n");
    r = run_cli(args, in, strlen(in));
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "line 2: source token id 99999 is out of range"));
    free_result(&r);
    free(line);
}

/* ---- issue 55: an over-long text line is cut as it is read ----------------- */

#define BIG_LINE ((size_t)64 << 20)
#define RSS_SLACK_KB (16L << 10) /* far below the 64 MiB a buffered line costs */

/* before, then `big` bytes of words ("hello hello ..."), then after. */
static cli_input big_input(const char *before, size_t big, const char *after) {
    const cli_input in = {.before = before, .n_before = strlen(before), .big = big, .after = after};
    return in;
}

/* stdout of a run on `in` (its status 0), each line ending in "\n", into
 * lines[] (pointers into r->out). */
static int out_lines(const run_result *r, const char **lines, size_t *lens, int max) {
    const char *p = r->out, *end = r->out + r->out_len;
    int n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        assert_non_null(nl);
        assert_true(n < max);
        lines[n] = p;
        lens[n++] = (size_t)(nl - p);
        p = nl + 1;
    }
    return n;
}

/* Exactly these lines on stdout ("" for an empty one: the random model's
 * lines may hold any byte, so compared by length). */
static void expect_out(const run_result *r, const char *const *lines, const size_t *lens, int n) {
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (at + lens[i] + 1 > r->out_len || memcmp(r->out + at, lines[i], lens[i]) != 0 ||
            r->out[at + lens[i]] != '\n')
            fail_msg("stdout line %d is not the expected one (%zu bytes of stdout; stderr: %s)", i + 1, r->out_len,
                     r->err);
        at += lens[i] + 1;
    }
    if (at != r->out_len) fail_msg("stdout has %zu bytes after the %d expected lines", r->out_len - at, n);
}

static void expect_err_line(const run_result *r, int status, const char *line) {
    if (r->status != status || strstr(r->err, line) == NULL)
        fail_msg("want exit %d and the line \"%s\" on stderr; got exit %d, stderr: %s", status, line, r->status,
                 r->err);
}

/* The run with the 64 MiB line (r) peaks within RSS_SLACK_KB of the run
 * whose line is 4 KiB (small): the reader never holds the long line. */
static void expect_rss_near(const char *cmd, int via_pipe, const run_result *r, const run_result *small) {
    fprintf(stderr, "%s %s: peak RSS %ld KiB with a 64 MiB line 2, %ld KiB with a 4 KiB one\n", cmd,
            via_pipe ? "pipe" : "file", r->maxrss_kb, small->maxrss_kb);
    if (r->maxrss_kb > small->maxrss_kb + RSS_SLACK_KB)
        fail_msg("%s: peak memory %ld KiB with a 64 MiB line, %ld KiB with a 4 KiB one", via_pipe ? "pipe" : "file",
                 r->maxrss_kb, small->maxrss_kb);
}

/* translate: a 64 MiB line with --max-text-bytes 1024, from a regular file
 * and from a pipe: the run stops with the message a short over-long line
 * gets, naming line 2 and every byte of it, and with --skip-long line 2 is
 * an empty line and line 3 is translated; the program's peak memory is
 * that of a run whose line 2 has 4 KiB (the line was never buffered). */
static void test_text_line_cut(void **state) {
    (void)state;
    const char *base[] = {"translate", "--model", model_path, "--max-text-bytes", "1024", "--beam", "1",
                          "--max-len", "8", NULL};
    const char *skip[] = {"translate", "--model", model_path, "--max-text-bytes", "1024", "--beam", "1",
                          "--max-len", "8", "--skip-long", NULL};
    const char *one[] = {"translate", "--model", model_path, "--max-text-bytes", "1024", "--beam", "1",
                         "--max-len", "8", "--batch", "1", NULL};
    const char *ref_in = "hello world\na test\n";
    run_result ref = run_cli(one, ref_in, strlen(ref_in));
    assert_int_equal(ref.status, 0);
    const char *ref_line[2];
    size_t ref_len[2];
    assert_int_equal(out_lines(&ref, ref_line, ref_len, 2), 2);
    const char *want_skip_line[3] = {ref_line[0], "", ref_line[1]};
    const size_t want_skip_len[3] = {ref_len[0], 0, ref_len[1]};
    char want_stop[512], want_skip[512];
    snprintf(want_stop, sizeof want_stop,
             "nmt-edge: line 2 is longer than the limits: source sentence has %zu bytes, more than the limit of "
             "1024 (--max-text-bytes 1024); --skip-long writes an empty line for it instead\n",
             BIG_LINE);
    snprintf(want_skip, sizeof want_skip,
             "nmt-edge: line 2 is longer than the limits: source sentence has %zu bytes, more than the limit of "
             "1024 (--max-text-bytes 1024); its output is an empty line (--skip-long)\n",
             BIG_LINE);
    const char *args_cmd = "translate";
    const cli_input small = big_input("hello world\n", 4096, "\na test\n");
    for (int via_pipe = 0; via_pipe < 2; via_pipe++) {
        /* CR LF in the file: the CR is no byte of the sentence */
        const cli_input in = big_input("hello world\n", BIG_LINE, via_pipe ? "\na test\n" : "\r\na test\n");
        run_result r = run_cli_ex(base, &in, via_pipe);
        expect_err_line(&r, 1, want_stop);
        assert_null(strstr(r.err, "line 3"));
        expect_out(&r, ref_line, ref_len, 1);
        free_result(&r);

        run_result small_run = run_cli_ex(skip, &small, via_pipe);
        assert_int_equal(small_run.status, 0);
        expect_out(&small_run, want_skip_line, want_skip_len, 3);
        r = run_cli_ex(skip, &in, via_pipe);
        expect_err_line(&r, 0, want_skip);
        expect_out(&r, want_skip_line, want_skip_len, 3);
        expect_rss_near(args_cmd, via_pipe, &r, &small_run);
        free_result(&r);
        free_result(&small_run);
    }
    free_result(&ref);
}

/* score: a cut pair gets the message of the whole pair: its source's bytes,
 * its source's tokens (counted from the bytes kept), its target's bytes,
 * or the TAB error (which --skip-long does not skip). */
static void test_score_line_cut(void **state) {
    (void)state;
    const char *skip[] = {"score", "--model", model_path, "--max-text-bytes", "1024", "--max-src-len", "16",
                          "--skip-long", NULL};
    const char *one[] = {"score", "--model", model_path, "--max-text-bytes", "1024", "--max-src-len", "16",
                         "--batch", "1", NULL};
    const char *ref_in = "hello world\tworld hello\na\tb\n";
    run_result ref = run_cli(one, ref_in, strlen(ref_in));
    assert_int_equal(ref.status, 0);
    const char *ref_line[2];
    size_t ref_len[2];
    assert_int_equal(out_lines(&ref, ref_line, ref_len, 2), 2);
    const char *want_line[3] = {ref_line[0], "", ref_line[1]};
    const size_t want_len[3] = {ref_len[0], 0, ref_len[1]};
    const size_t big = (size_t)1 << 20;
    char want[512];
    for (int via_pipe = 0; via_pipe < 2; via_pipe++) {
        cli_input in = big_input("hello world\tworld hello\n", big, "\tx\na\tb\n");
        run_result r = run_cli_ex(skip, &in, via_pipe);
        snprintf(want, sizeof want,
                 "nmt-edge: line 2 is longer than the limits: source sentence has %zu bytes, more than the limit "
                 "of 1024 (--max-text-bytes 1024); its output is an empty line (--skip-long)\n",
                 big);
        expect_err_line(&r, 0, want);
        expect_out(&r, want_line, want_len, 3);
        free_result(&r);

        in = big_input("hello world\tworld hello\nx\t", big, "\r\na\tb\n");
        r = run_cli_ex(skip, &in, via_pipe);
        snprintf(want, sizeof want,
                 "nmt-edge: line 2 is longer than the limits: target sentence has %zu bytes, more than the limit "
                 "of 1024 (--max-text-bytes 1024); its output is an empty line (--skip-long)\n",
                 big);
        expect_err_line(&r, 0, want);
        expect_out(&r, want_line, want_len, 3);
        free_result(&r);

        in = big_input("hello world\tworld hello\nx\t", big, "\ty\na\tb\n");
        r = run_cli_ex(skip, &in, via_pipe);
        expect_err_line(&r, 1, "nmt-edge: line 2: expected SOURCE<TAB>TARGET (exactly one TAB)\n");
        expect_out(&r, ref_line, ref_len, 1);
        free_result(&r);
    }
    /* a source over --max-src-len in tokens: the same message whole and cut */
    const char *many = "w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w";
    char head[256];
    snprintf(head, sizeof head, "hello world\tworld hello\n%s\t", many);
    cli_input in = big_input(head, 8, "\na\tb\n"); /* whole: an 8-byte target */
    run_result whole = run_cli_ex(skip, &in, 0);
    in = big_input(head, big, "\na\tb\n");
    run_result cut = run_cli_ex(skip, &in, 0);
    assert_int_equal(whole.status, 0);
    const char *msg = strstr(whole.err, "nmt-edge: line 2 is longer than the limits: source sentence has ");
    assert_non_null(msg);
    assert_non_null(strstr(msg, " tokens, more than the limit of 16 (--max-src-len 16); its output is an empty "
                                "line (--skip-long)\n"));
    const char *eol = strchr(msg, '\n');
    snprintf(want, sizeof want, "%.*s", (int)(eol - msg + 1), msg);
    expect_err_line(&cut, 0, want);
    expect_out(&cut, want_line, want_len, 3);
    free_result(&whole);
    free_result(&cut);
    free_result(&ref);
}

/* tokenize: a 64 MiB line with --max-text-bytes 1024 stops the run with
 * tokenize's message for it, every byte counted, after line 1's output, in
 * the memory of a run whose line 2 has 4 KiB. */
static void test_tokenize_line_cut(void **state) {
    (void)state;
    const char *args[] = {"tokenize", "--model", model_path, "--max-text-bytes", "1024", NULL};
    run_result ref = run_cli(args, "hello world\n", 12);
    assert_int_equal(ref.status, 0);
    const char *ref_line[1];
    size_t ref_len[1];
    assert_int_equal(out_lines(&ref, ref_line, ref_len, 1), 1);
    char want[256];
    snprintf(want, sizeof want, "nmt-edge: line 2: %zu bytes, more than --max-text-bytes 1024\n", BIG_LINE);
    const char *args_cmd = "tokenize";
    const cli_input small = big_input("hello world\n", 4096, "\na test\n");
    const cli_input in = big_input("hello world\n", BIG_LINE, "\na test\n");
    for (int via_pipe = 0; via_pipe < 2; via_pipe++) {
        run_result small_run = run_cli_ex(args, &small, via_pipe);
        expect_err_line(&small_run, 1, "nmt-edge: line 2: 4096 bytes, more than --max-text-bytes 1024\n");
        run_result r = run_cli_ex(args, &in, via_pipe);
        expect_err_line(&r, 1, want);
        expect_out(&r, ref_line, ref_len, 1);
        expect_rss_near(args_cmd, via_pipe, &r, &small_run);
        free_result(&r);
        free_result(&small_run);
    }
    free_result(&ref);
}

static void test_one_megabyte_number(void **state) {
    (void)state;
    /* a single 1 MB run of digits: an id that overflows every integer type */
    size_t len = 1 << 20;
    char *line = malloc(len + 1);
    assert_non_null(line);
    memset(line, '9', len);
    line[len] = '\n';
    const char *args[] = {"translate", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, line, len + 1);
    expect_rejected(&r, "line 1");
    free_result(&r);
    free(line);
}

static void test_id_out_of_range(void **state) {
    (void)state;
    const char *args[] = {"translate", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, "4 5\n4 600\n", 10);
    /* line 1 is written before the run stops (cli_batch_test.c) */
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "line 2"));
    assert_true(r.out_len > 0 && strchr(r.out, '\n') == r.out + r.out_len - 1);
    free_result(&r);
    r = run_cli(args, "4 -1\n", 5);
    expect_rejected(&r, "line 1");
    free_result(&r);
}

static void test_binary_garbage(void **state) {
    (void)state;
    /* 64 KiB of seeded random bytes (NULs, 0xff, stray CRs and LFs) */
    nmt_test_rng rng = nmt_test_rng_make(77);
    size_t len = 64 * 1024;
    unsigned char *junk = malloc(len);
    assert_non_null(junk);
    for (size_t i = 0; i < len; i++) junk[i] = (unsigned char)nmt_test_rng_next(&rng);
    junk[0] = 0xff; /* never a valid first token */
    const char *args[] = {"translate", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, junk, len);
    expect_rejected(&r, "line 1");
    free_result(&r);
    const char *sargs[] = {"score", "--ids", "--model", model_path, NULL};
    r = run_cli(sargs, junk, len);
    expect_rejected(&r, "line 1");
    free_result(&r);
    free(junk);
}

static void test_score_without_tab(void **state) {
    (void)state;
    const char *args[] = {"score", "--ids", "--model", model_path, NULL};
    run_result r = run_cli(args, "4 5 6\n", 6);
    expect_rejected(&r, "line 1");
    free_result(&r);
}

/* ---- model files ----------------------------------------------------------- */

/* The test model with `patch` applied and every CRC made valid again, so
 * that the loader reaches the check under test. */
static void write_patched_model(const char *path, void (*patch)(uint8_t *d, size_t n)) {
    size_t n;
    uint8_t *d = nmt_test_read_file(model_path, &n);
    assert_non_null(d);
    assert_true(n > NMT_FILE_HEADER_SIZE);
    patch(d, n);
    uint64_t meta_off, meta_size;
    memcpy(&meta_off, d + 24, 8);
    memcpy(&meta_size, d + 32, 8);
    assert_true(meta_off + meta_size <= n);
    uint32_t crc = nmt_crc32(0, d + meta_off, (size_t)meta_size);
    memcpy(d + 64, &crc, 4);
    crc = nmt_crc32(0, d, 124);
    memcpy(d + 124, &crc, 4);
    assert_int_equal(nmt_test_write_file(path, d, n), 0);
    free(d);
}

static void patch_version(uint8_t *d, size_t n) {
    (void)n;
    uint32_t v = NMT_FILE_VERSION + 1;
    memcpy(d + 8, &v, 4);
}

static void patch_arch(uint8_t *d, size_t n) {
    /* the "arch" value "transformer" becomes "transformeR" (same length) */
    uint64_t meta_off, meta_size;
    memcpy(&meta_off, d + 24, 8);
    memcpy(&meta_size, d + 32, 8);
    assert_true(meta_off + meta_size <= n);
    uint8_t *m = d + meta_off, *hit = NULL;
    for (uint64_t i = 0; i + 11 <= meta_size; i++)
        if (memcmp(m + i, "transformer", 11) == 0) hit = m + i;
    assert_non_null(hit);
    hit[10] = 'R';
}

static void test_model_other_version(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/v2.nmt", tmp_dir);
    write_patched_model(path, patch_version);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect_file(path, &info), NMT_ERR_MODEL_VERSION);
    const char *iargs[] = {"info", "--model", path, NULL};
    run_result r = run_cli(iargs, "", 0);
    expect_rejected(&r, nmt_status_str(NMT_ERR_MODEL_VERSION));
    free_result(&r);
    const char *targs[] = {"translate", "--model", path, NULL};
    r = run_cli(targs, "4 5\n", 4);
    expect_rejected(&r, nmt_status_str(NMT_ERR_MODEL_VERSION));
    free_result(&r);
}

static void test_model_other_architecture(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/arch.nmt", tmp_dir);
    write_patched_model(path, patch_arch);
    nmt_model_info info;
    assert_int_equal(nmt_model_inspect_file(path, &info), NMT_ERR_MODEL_ARCH);
    const char *targs[] = {"translate", "--model", path, NULL};
    run_result r = run_cli(targs, "4 5\n", 4);
    expect_rejected(&r, nmt_status_str(NMT_ERR_MODEL_ARCH));
    free_result(&r);
}

static void test_model_not_a_model(void **state) {
    (void)state;
    char path[1200], text[256];
    snprintf(path, sizeof path, "%s/text.nmt", tmp_dir);
    memset(text, 'x', sizeof text);
    assert_int_equal(nmt_test_write_file(path, text, sizeof text), 0);
    const char *targs[] = {"translate", "--model", path, NULL};
    run_result r = run_cli(targs, "4 5\n", 4);
    expect_rejected(&r, nmt_status_str(NMT_ERR_MODEL_BAD_MAGIC));
    free_result(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_empty_lines),
        cmocka_unit_test(test_line_at_limit),
        cmocka_unit_test(test_line_over_limit),
        cmocka_unit_test(test_one_megabyte_line),
        cmocka_unit_test(test_one_megabyte_text_line),
        cmocka_unit_test(test_long_text_line_in_batch),
        cmocka_unit_test(test_skip_long_ids),
        cmocka_unit_test(test_text_line_cut),
        cmocka_unit_test(test_score_line_cut),
        cmocka_unit_test(test_tokenize_line_cut),
        cmocka_unit_test(test_one_megabyte_number),
        cmocka_unit_test(test_id_out_of_range),
        cmocka_unit_test(test_binary_garbage),
        cmocka_unit_test(test_score_without_tab),
        cmocka_unit_test(test_model_other_version),
        cmocka_unit_test(test_model_other_architecture),
        cmocka_unit_test(test_model_not_a_model),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
