/* SPDX-License-Identifier: MIT */
/* cli_batch_test.c — the batch runner of `nmt-edge` (cli/cli_batch.c),
 * run as a user would (issue 21, items 7, 13 and 14):
 *   - every line before the one that stops a run is written, for translate,
 *     score and tokenize alike, and the message names that exact line and
 *     why (a line without a TAB, an id out of range, a sentence over the
 *     limits in ids or text mode); --skip-long makes an over-long line an
 *     empty output line in score as in translate;
 *   - a sentence typed into a pipe is translated and written before the next
 *     one arrives (and the line reader's look-ahead, driven directly);
 *   - the line reader's cut of a line over its limit (issue 55), driven
 *     directly on a file and a pipe: a 64 MiB line through a buffer of the
 *     limit's size, its length, CR and TABs counted, the next lines whole;
 *   - --with-score, -i / -o: -o FILE replaced only by a successful run, a
 *     device refused, write errors and signals leave FILE as it was;
 *   - the progress line (issue 20, item 6): its text (cli_progress_format,
 *     called directly), drawn on a terminal (a pseudo-terminal as stderr):
 *     percentage and ETA for a file, count and rate for a pipe, cleared at
 *     the end; nothing with --quiet, nothing when stderr is a pipe;
 *   - translate's summary line (issue 52, item 6): its text
 *     (cli_progress_summary), after the progress line on a terminal, with
 *     --verbose on a pipe, never otherwise;
 *   - a line over the limits with -o FILE (issue 52, item 7): the message
 *     says FILE is left as it was and names --skip-long.
 * Expected outputs are the program's own outputs for the good lines alone,
 * compared byte for byte; messages are compared whole. */
#define _XOPEN_SOURCE 700 /* posix_openpt */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "cli_input.h"
#include "cli_progress.h"
#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* stdout of a run that must succeed, malloc'd and NUL-terminated. */
static char *good_output(const char *in, ...) {
    run_result r;
    va_list ap;
    va_start(ap, in);
    run_cli_va(&r, in, ap);
    va_end(ap);
    expect_status(&r, 0);
    assert_string_equal(r.err, "");
    char *out = r.out;
    r.out = NULL;
    free_result(&r);
    return out;
}

static char *concat(const char *a, const char *b) {
    char *s = malloc(strlen(a) + strlen(b) + 1);
    assert_non_null(s);
    strcpy(s, a);
    strcat(s, b);
    return s;
}

/* The first `n` lines of `s` (malloc'd). */
static char *first_lines(const char *s, int n) {
    const char *p = s;
    for (int i = 0; i < n; i++) {
        p = strchr(p, '\n');
        assert_non_null(p);
        p++;
    }
    char *out = malloc((size_t)(p - s) + 1);
    assert_non_null(out);
    memcpy(out, s, (size_t)(p - s));
    out[p - s] = '\0';
    return out;
}

/* Number of tokens the text model's tokenizer makes of `text`. */
static int count_tokens(const char *text, int target) {
    char *in = concat(text, "\n");
    char *ids = target ? good_output(in, "tokenize", "--model", g_text_model, "--target", NULL)
                       : good_output(in, "tokenize", "--model", g_text_model, NULL);
    int n = ids[0] != '\n';
    for (const char *p = ids; *p; p++) n += *p == ' ';
    free(in);
    free(ids);
    return n;
}

/* Ten good score pairs: text, or ids of the 50-word model (static). */
static const char *ten_pairs(int ids) {
    static char buf[2][1024];
    buf[ids][0] = '\0';
    for (int i = 0; i < 10; i++) {
        char line[96];
        snprintf(line, sizeof line, ids ? "%d 2 3\t%d 7\n" : "a test %d\tein Test %d\n", i + 1, 40 - i);
        strcat(buf[ids], line);
    }
    return buf[ids];
}

static void sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void expect_run(const run_result *r, int status, const char *out, const char *err) {
    expect_status(r, status);
    assert_string_equal(r->err, err);
    assert_int_equal(r->out_len, strlen(out));
    assert_string_equal(r->out, out);
}

/* ------------------------------------------------------------------------ */
/* Item 7: every line before the stopping one is written, the line named    */
/* ------------------------------------------------------------------------ */

/* 10 good lines, then one without a TAB: 10 scores, "line 11". */
static void test_score_line_without_tab(void **state) {
    (void)state;
    const char *sets[2] = {ten_pairs(0), ten_pairs(1)};
    const char *models[2] = {g_text_model, g_model};
    for (int k = 0; k < 2; k++) {
        char *want = good_output(sets[k], "score", "--model", models[k], NULL);
        char *in = concat(sets[k], "1 2 3 without a tab\n4\t5\n");
        run_result r;
        run_cli(&r, in, "score", "--model", models[k], NULL);
        expect_run(&r, 1, want, "nmt-edge: line 11: expected SOURCE<TAB>TARGET (exactly one TAB)\n");
        free_result(&r);
        free(in);
        free(want);
    }
}

/* What a line over the limits that stops translate or score adds
 * (issue 52, item 7). */
#define SKIP_HINT "; --skip-long writes an empty line for it instead"

/* Text mode: line 11 over --max-src-len is found by the per-sentence retry
 * of the shared runner; --skip-long gives an empty line and goes on. */
static void test_score_long_text_line(void **state) {
    (void)state;
    const char *ten = ten_pairs(0);
    const char *longer = "w w w w w w w w w w w w w w w w w w w w w w";
    const int n_tok = count_tokens(longer, 0);
    assert_true(n_tok > 16);
    char line11[256], msg[512];
    snprintf(line11, sizeof line11, "%s\tok\n", longer);
    char *want10 = good_output(ten, "score", "--model", g_text_model, "--max-src-len", "16", NULL);
    char *want12 = good_output("the last one\tder letzte\n", "score", "--model", g_text_model, NULL);
    char *head = concat(ten, line11), *in = concat(head, "the last one\tder letzte\n");
    snprintf(msg, sizeof msg,
             "nmt-edge: line 11 is longer than the limits: source sentence has %d tokens, more "
             "than the limit of 16 (--max-src-len 16)" SKIP_HINT "\n",
             n_tok);
    run_result r;
    run_cli(&r, in, "score", "--model", g_text_model, "--max-src-len", "16", NULL);
    expect_run(&r, 1, want10, msg);
    free_result(&r);
    snprintf(msg, sizeof msg,
             "nmt-edge: line 11 is longer than the limits: source sentence has %d tokens, more "
             "than the limit of 16 (--max-src-len 16)\n",
             n_tok);

    run_cli(&r, in, "score", "--model", g_text_model, "--max-src-len", "16", "--skip-long", NULL);
    char *blank = concat(want10, "\n"), *want = concat(blank, want12);
    msg[strlen(msg) - 1] = '\0';
    char *skip_msg = concat(msg, "; its output is an empty line (--skip-long)\n");
    expect_run(&r, 0, want, skip_msg);
    free_result(&r);

    /* the target side, against --max-len */
    const int n_tgt = count_tokens(longer, 1);
    assert_true(n_tgt > 5);
    char *pair = concat("a\t", longer);
    char *pair_in = concat(pair, "\n");
    snprintf(msg, sizeof msg,
             "nmt-edge: line 1 is longer than the limits: target sentence has %d tokens, more "
             "than the limit of 5 (target limit 5; see --max-len)" SKIP_HINT "\n",
             n_tgt);
    run_cli(&r, pair_in, "score", "--model", g_text_model, "--max-len", "5", NULL);
    expect_run(&r, 1, "", msg);
    free_result(&r);
    free(pair);
    free(pair_in);
    free(skip_msg);
    free(blank);
    free(want);
    free(head);
    free(in);
    free(want10);
    free(want12);
}

/* Ids mode: the same through the parser's limit check. */
static void test_score_long_id_line(void **state) {
    (void)state;
    const char *ten = ten_pairs(1);
    char *want10 = good_output(ten, "score", "--model", g_model, "--max-src-len", "16", NULL);
    char *want12 = good_output("9 8\t7 6\n", "score", "--model", g_model, NULL);
    char *head = concat(ten, "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\t5\n");
    char *in = concat(head, "9 8\t7 6\n");
    const char *msg = "nmt-edge: line 11: source sentence has 17 tokens, more than the limit of 16 "
                      "(--max-src-len 16)";
    char *msg_nl = concat(msg, SKIP_HINT "\n"), *skip_msg = concat(msg, "; its output is an empty line (--skip-long)\n");
    run_result r;
    run_cli(&r, in, "score", "--model", g_model, "--max-src-len", "16", NULL);
    expect_run(&r, 1, want10, msg_nl);
    free_result(&r);
    run_cli(&r, in, "score", "--model", g_model, "--max-src-len", "16", "--skip-long", NULL);
    char *blank = concat(want10, "\n"), *want = concat(blank, want12);
    expect_run(&r, 0, want, skip_msg);
    free_result(&r);
    /* a malformed target still stops the run with --skip-long */
    char *bad = concat(ten, "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\t5 x\n");
    run_cli(&r, bad, "score", "--model", g_model, "--max-src-len", "16", "--skip-long", NULL);
    expect_run(&r, 1, want10, "nmt-edge: line 11: target token 'x' is not a non-negative integer id\n");
    free_result(&r);
    free(bad);
    free(blank);
    free(want);
    free(msg_nl);
    free(skip_msg);
    free(head);
    free(in);
    free(want10);
    free(want12);
}

/* A bad line stops the run after the lines before it, which are written;
 * the message names the line (moved here from cli_test.c, where the old
 * contract, nothing written for the failing batch, was asserted). */
static void expect_input_error(const char *in, const char *cmd, const char *must1,
                               const char *must2, const char *batch) {
    unsigned long bad_line = strtoul(must1 + 5, NULL, 10);
    assert_true(bad_line >= 1);
    char *good = first_lines(in, (int)bad_line - 1);
    char *want = good_output(good, cmd, "--model", g_model, "--max-src-len", "16", "--batch", batch,
                             NULL);
    run_result r;
    run_cli(&r, in, cmd, "--model", g_model, "--max-src-len", "16", "--batch", batch, NULL);
    expect_status(&r, 1);
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.err, "nmt-edge: "));
    if (strstr(r.err, must1) == NULL || (must2 && strstr(r.err, must2) == NULL))
        fprintf(stderr, "stderr lacks '%s'/'%s':\n%s\n", must1, must2 ? must2 : "", r.err);
    assert_non_null(strstr(r.err, must1));
    if (must2) assert_non_null(strstr(r.err, must2));
    free_result(&r);
    free(good);
    free(want);
}

static void test_input_errors(void **state) {
    (void)state;
    expect_input_error("1 2\n3 x 4\n", "translate", "line 2", "'x'", "8");
    expect_input_error("1 2\n-3\n", "translate", "line 2", "-3", "8");
    expect_input_error("1 2\n3 4\n5 6\n1.5\n", "translate", "line 4", NULL, "8");
    expect_input_error("1 2\n3 4\n5 6\n1.5\n", "translate", "line 4", NULL, "2");
    expect_input_error("99999999999\n", "translate", "line 1", "99999999999", "8");
    expect_input_error("2147483648\n", "translate", "line 1", NULL, "8");
    expect_input_error("1\n2 3 50\n", "translate", "line 2", "out of range", "8");
    expect_input_error("1\n2 3 2147483647\n", "translate", "line 2", "out of range", "8");
    expect_input_error("1 2\t3 50\n", "score", "line 1", "out of range", "8");
    expect_input_error("1 2\t3\t4\n", "score", "line 1", "TAB", "8");
    expect_input_error("1 2 3\n", "score", "line 1", "TAB", "8");
    expect_input_error("1 2\t3 y\n", "score", "line 1", "'y'", "8");
    expect_input_error("1\t2\n3\t4\n5\t6\n7 8\n", "score", "line 4", "TAB", "3");
    /* longer than --max-src-len 16 (EOS not counted) */
    expect_input_error("1 2\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n", "translate",
                       "line 2", "max-src-len", "8");
    /* a 1 MB line: no crash, a message */
    size_t big = 500000;
    char *huge = malloc(2 * big + 2);
    assert_non_null(huge);
    for (size_t i = 0; i < big; i++) memcpy(huge + 2 * i, "7 ", 2);
    huge[2 * big] = '\n';
    huge[2 * big + 1] = '\0';
    expect_input_error(huge, "translate", "line 1", "max-src-len", "8");
    free(huge);
}

/* tokenize: a line over --max-text-bytes after a good one in its batch. */
static void test_tokenize_long_line(void **state) {
    (void)state;
    char *want = good_output("ab\n", "tokenize", "--sp-model", SPM_FIXTURE, NULL);
    run_result r;
    run_cli(&r, "ab\n123456789\nc\n", "tokenize", "--sp-model", SPM_FIXTURE, "--max-text-bytes", "8",
            NULL);
    expect_run(&r, 1, want, "nmt-edge: line 2: 9 bytes, more than --max-text-bytes 8\n");
    free_result(&r);
    free(want);
}

/* ------------------------------------------------------------------------ */
/* Item 13: a paused pipe is a batch                                        */
/* ------------------------------------------------------------------------ */

typedef struct child {
    pid_t pid;
    int in, out, err; /* our ends of its stdin, stdout (-1 if a file) and stderr pipes */
} child;

/* Start nmt-edge with args (NULL-terminated, without the program); stdin,
 * stdout and stderr on pipes, or stdout into out_path.  fsize_limit >= 0:
 * under RLIMIT_FSIZE, SIGXFSZ ignored (a write past it fails with EFBIG). */
static child start(const char *const *args, const char *out_path, long fsize_limit) {
    int to[2], from[2], from_err[2];
    assert_int_equal(pipe(to), 0);
    assert_int_equal(pipe(from), 0);
    assert_int_equal(pipe(from_err), 0);
    const char *argv[40];
    int n = 0;
    argv[n++] = NMT_EDGE_BIN;
    while (*args) argv[n++] = *args++;
    argv[n] = NULL;
    fflush(NULL);
    child c = {.pid = fork()};
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        int o = out_path ? open(out_path, O_WRONLY) : from[1];
        if (o < 0 || dup2(to[0], 0) < 0 || dup2(o, 1) < 0 || dup2(from_err[1], 2) < 0) _exit(126);
        close(to[1]);
        close(from[0]);
        close(from_err[0]);
        if (fsize_limit >= 0) {
            struct rlimit rl = {.rlim_cur = (rlim_t)fsize_limit, .rlim_max = (rlim_t)fsize_limit};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(125);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    close(from_err[1]);
    c.in = to[1];
    c.out = from[0];
    c.err = from_err[0];
    if (out_path) {
        close(c.out);
        c.out = -1;
    }
    return c;
}

/* Read one line from fd within `seconds` into buf (NUL-terminated, '\n'
 * kept); 0 when no whole line came in time. */
static int read_line_within(int fd, char *buf, size_t cap, int seconds) {
    size_t n = 0;
    time_t end = time(NULL) + seconds;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(end - time(NULL));
        if (left <= 0 || poll(&p, 1, left * 1000) <= 0) break;
        ssize_t k = read(fd, buf + n, 1); /* byte by byte: nothing past the line */
        if (k <= 0) break;
        if (buf[n++] == '\n') {
            buf[n] = '\0';
            return 1;
        }
    }
    buf[n] = '\0';
    return 0;
}

static int wait_status(pid_t pid) {
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* One sentence written into the pipe comes back translated while the
 * program waits for more (--batch 8), then the next one. */
static void test_pipe_pause_runs_batch(void **state) {
    (void)state;
    char *want1 = good_output("1 2 3\n", "translate", "--model", g_model, "--beam", "1", NULL);
    char *want2 = good_output("4 5 6 7\n", "translate", "--model", g_model, "--beam", "1", NULL);
    char line[4096];
    const char *args[] = {"translate", "--model", g_model, "--beam", "1", "--batch", "8", NULL};
    child c = start(args, NULL, -1);
    assert_int_equal(write(c.in, "1 2 3\n", 6), 6);
    if (!read_line_within(c.out, line, sizeof line, 120))
        fail_msg("no translation of the first line while the pipe stays open (got '%s')", line);
    assert_string_equal(line, want1);
    assert_int_equal(write(c.in, "4 5 6 7\n", 8), 8);
    if (!read_line_within(c.out, line, sizeof line, 120))
        fail_msg("no translation of the second line while the pipe stays open (got '%s')", line);
    assert_string_equal(line, want2);
    close(c.in);
    assert_int_equal(read_line_within(c.out, line, sizeof line, 120), 0);
    assert_string_equal(line, ""); /* end of output, nothing more */
    close(c.out);
    assert_int_equal(wait_status(c.pid), 0);
    close(c.err);
    free(want1);
    free(want2);
}

/* The look-ahead the runner asks after each line. */
static void test_reader_ready(void **state) {
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    cli_reader rd;
    cli_reader_init(&rd, p[0]);
    assert_int_equal(rd.pauses, 1);
    const char *line;
    size_t n;
    assert_int_equal(write(p[1], "a\nb", 3), 3);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_int_equal(n, 2);
    assert_memory_equal(line, "a\n", 2);
    assert_int_equal(cli_reader_ready(&rd), 0); /* "b" waits for its end */
    assert_int_equal(write(p[1], "\nc\n", 3), 3);
    assert_int_equal(cli_reader_ready(&rd), 1);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_memory_equal(line, "b\n", 2);
    assert_int_equal(cli_reader_ready(&rd), 1); /* "c\n" is buffered */
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_memory_equal(line, "c\n", 2);
    assert_int_equal(cli_reader_ready(&rd), 0);
    close(p[1]);
    assert_int_equal(cli_reader_ready(&rd), 1); /* hung up: reading ends at once */
    assert_int_equal(cli_reader_line(&rd, &line, &n), 0);
    cli_reader_free(&rd);
    close(p[0]);

    /* a regular file never pauses; a 200 kB line; a last line without LF */
    char path[400];
    snprintf(path, sizeof path, "%s/reader.txt", g_dir);
    size_t big = 200000;
    char *data = malloc(big + 3);
    assert_non_null(data);
    memset(data, 'x', big);
    memcpy(data + big, "\ny", 3);
    assert_int_equal(nmt_test_write_file(path, data, big + 2), 0);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    cli_reader_init(&rd, fd);
    assert_int_equal(rd.pauses, 0);
    assert_int_equal(cli_reader_ready(&rd), 1);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_int_equal(n, big + 1);
    assert_memory_equal(line, data, big + 1);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_int_equal(n, 1);
    assert_int_equal(line[0], 'y');
    assert_int_equal(cli_reader_line(&rd, &line, &n), 0);
    cli_reader_free(&rd);
    close(fd);
    free(data);
}

/* The reader's cut of over-long lines (issue 55): write the test input to
 * fd in 1 MiB pieces: "ab\n", a 64 MiB line (TABs at 5 and 40000000, CR
 * LF), "cd\n", a line of exactly limit + 1 bytes (kept whole), a 1100-byte
 * line (cut though wholly buffered), "\n", and a last 70000-byte line
 * without LF (cut at the end of input). */
#define CUT_LIMIT 1024
#define CUT_BIG ((size_t)64 << 20)

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k <= 0) _exit(1);
        p += k;
        n -= (size_t)k;
    }
}

static void write_cut_input(int fd) {
    enum { PIECE = 1 << 20 };
    char *piece = malloc(PIECE);
    if (piece == NULL) _exit(1);
    write_all(fd, "ab\n", 3);
    for (size_t at = 0; at < CUT_BIG; at += PIECE) {
        for (size_t i = 0; i < PIECE; i++) piece[i] = (char)('a' + (at + i) % 23);
        if (at == 0) piece[5] = '\t';
        if (at <= 40000000 && 40000000 < at + PIECE) piece[40000000 - at] = '\t';
        if (at + PIECE == CUT_BIG) piece[PIECE - 1] = '\r';
        write_all(fd, piece, PIECE);
    }
    write_all(fd, "\ncd\n", 4);
    memset(piece, 'y', CUT_LIMIT + 1);
    piece[CUT_LIMIT + 1] = '\n';
    write_all(fd, piece, CUT_LIMIT + 2);
    memset(piece, 'z', 1100);
    piece[1100] = '\n';
    piece[1101] = '\n';
    write_all(fd, piece, 1102);
    memset(piece, 'w', 70000);
    write_all(fd, piece, 70000);
    free(piece);
}

/* The next line is cut with these counts; its kept bytes are `fill` (when
 * not 0); *kept (when not NULL) points at them until the next call. */
static void expect_cut(cli_reader *rd, uint64_t len, int nl, int cr, uint64_t tabs, uint64_t first_tab, char fill,
                       const char **kept) {
    const char *line;
    size_t n;
    assert_int_equal(cli_reader_line(rd, &line, &n), 2);
    if (kept) *kept = line;
    assert_int_equal(n, CUT_LIMIT + 1);
    assert_true(rd->cut.len == len);
    assert_int_equal(rd->cut.nl, nl);
    assert_int_equal(rd->cut.cr, cr);
    assert_true(rd->cut.tabs == tabs);
    if (tabs) assert_true(rd->cut.first_tab == first_tab);
    for (size_t i = 0; fill && i < n; i++) assert_int_equal(line[i], fill);
}

static void read_cut_input(int fd) {
    cli_reader rd;
    cli_reader_init(&rd, fd);
    rd.limit = CUT_LIMIT;
    const char *line;
    size_t n;
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_int_equal(n, 3);
    assert_memory_equal(line, "ab\n", 3);
    expect_cut(&rd, CUT_BIG, 1, 1, 2, 5, 0, &line);
    for (size_t i = 0; i < CUT_LIMIT + 1; i++) assert_int_equal(line[i], i == 5 ? '\t' : (char)('a' + i % 23));
    /* the 64 MiB went through a buffer of the limit's size */
    if (rd.cap >= 2 * (CUT_LIMIT + 1 + 65536)) fail_msg("the reader's buffer grew to %zu bytes", rd.cap);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_int_equal(n, 3);
    assert_memory_equal(line, "cd\n", 3);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1); /* limit + 1 bytes: a CR may follow the limit */
    assert_int_equal(n, CUT_LIMIT + 2);
    assert_int_equal(line[CUT_LIMIT], 'y');
    expect_cut(&rd, 1100, 1, 0, 0, 0, 'z', NULL);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 1);
    assert_int_equal(n, 1);
    assert_int_equal(line[0], '\n');
    expect_cut(&rd, 70000, 0, 0, 0, 0, 'w', NULL);
    assert_int_equal(cli_reader_line(&rd, &line, &n), 0);
    if (rd.cap >= 2 * (CUT_LIMIT + 1 + 65536)) fail_msg("the reader's buffer grew to %zu bytes", rd.cap);
    cli_reader_free(&rd);
}

static void test_reader_cut(void **state) {
    (void)state;
    /* a regular file */
    char path[400];
    snprintf(path, sizeof path, "%s/reader-cut.txt", g_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    write_cut_input(fd);
    assert_int_equal(close(fd), 0);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    read_cut_input(fd);
    close(fd);
    unlink(path);
    /* a pipe, filled by a child process */
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        write_cut_input(p[1]);
        _exit(0);
    }
    close(p[1]);
    read_cut_input(p[0]);
    close(p[0]);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* ------------------------------------------------------------------------ */
/* Item 14: --with-score, -i / -o                                           */
/* ------------------------------------------------------------------------ */

/* "SCORE ||| TEXT": the best hypothesis and score the n-best list gives. */
static void test_with_score(void **state) {
    (void)state;
    const char *in = "1 2 3\n\n4 5\n";
    char *nbest = good_output(in, "translate", "--model", g_model, "--beam", "2", "--n-best", "2",
                              "--max-len", "6", NULL);
    /* the first line of each index "I ||| TEXT ||| SCORE" -> "SCORE ||| TEXT" */
    char want[2048] = "";
    long last = -1;
    for (char *p = nbest; *p;) {
        char *nl = strchr(p, '\n');
        assert_non_null(nl);
        *nl = '\0';
        char *end;
        long index = strtol(p, &end, 10);
        assert_true(strncmp(end, " ||| ", 5) == 0);
        char *text = end + 5, *sep = strstr(text, " ||| ");
        assert_non_null(sep);
        *sep = '\0';
        if (index != last) {
            assert_int_equal(index, last + 1);
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s ||| %s\n", sep + 5, text);
            last = index;
        }
        p = nl + 1;
    }
    assert_int_equal(last, 2);
    run_result r;
    run_cli(&r, in, "translate", "--model", g_model, "--beam", "2", "--with-score", "--max-len", "6",
            NULL);
    expect_run(&r, 0, want, "");
    free_result(&r);
    free(nbest);
}

static void path_in_dir(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", g_dir, name);
}

/* Names in g_dir starting with ".NAME.nmt-edge-": temporaries of -o NAME. */
static int count_temporaries(const char *name) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, ".%s.nmt-edge-", name);
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void expect_file(const char *path, const char *content) {
    size_t n;
    char *got = nmt_test_read_file(path, &n);
    assert_non_null(got);
    assert_int_equal(n, strlen(content));
    assert_memory_equal(got, content, n);
    free(got);
}

/* -i / -o give what stdin / stdout give, for every command of the runner;
 * a new file gets the umask's permissions, a symbolic link is followed. */
static void test_input_output_files(void **state) {
    (void)state;
    char in_path[400], out_path[400], link_path[400];
    path_in_dir(in_path, sizeof in_path, "in.txt");
    path_in_dir(out_path, sizeof out_path, "out.txt");
    path_in_dir(link_path, sizeof link_path, "link.txt");
    const char *in = "1 2 3\n4 5\n6\n";
    assert_int_equal(nmt_test_write_file(in_path, in, strlen(in)), 0);
    char *want = good_output(in, "translate", "--model", g_model, "--batch", "2", NULL);
    unlink(out_path);
    run_result r;
    run_cli(&r, NULL, "translate", "--model", g_model, "--batch", "2", "-i", in_path, "-o", out_path,
            NULL);
    expect_run(&r, 0, "", "");
    free_result(&r);
    expect_file(out_path, want);
    mode_t mask = umask(0);
    umask(mask);
    struct stat st;
    assert_int_equal(stat(out_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    assert_int_equal(count_temporaries("out.txt"), 0);

    /* through a symbolic link: the file it names is replaced, the link stays */
    const char *pairs = "1 2\t3\n4\t5 6\n";
    char *want_scores = good_output(pairs, "score", "--model", g_model, NULL);
    unlink(link_path);
    assert_int_equal(symlink("out.txt", link_path), 0);
    run_cli(&r, pairs, "score", "--model", g_model, "--output", link_path, NULL);
    expect_run(&r, 0, "", "");
    free_result(&r);
    expect_file(out_path, want_scores);
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    /* tokenize and detokenize share the runner */
    const char *text = "Hello world\nthis is a test\n";
    assert_int_equal(nmt_test_write_file(in_path, text, strlen(text)), 0);
    char *want_ids = good_output(text, "tokenize", "--sp-model", SPM_FIXTURE, NULL);
    run_cli(&r, NULL, "tokenize", "--sp-model", SPM_FIXTURE, "-i", in_path, "-o", out_path, NULL);
    expect_run(&r, 0, "", "");
    free_result(&r);
    expect_file(out_path, want_ids);
    run_cli(&r, NULL, "detokenize", "--sp-model", SPM_FIXTURE, "-i", out_path, NULL);
    expect_run(&r, 0, text, "");
    free_result(&r);

    run_cli(&r, "1\n", "translate", "--model", g_model, "-i", "/nonexistent/in.txt", NULL);
    expect_run(&r, 1, "", "nmt-edge: cannot open '/nonexistent/in.txt': No such file or directory\n");
    free_result(&r);
    free(want);
    free(want_scores);
    free(want_ids);
}

/* A failed run leaves -o FILE as it was, says so, and leaves no temporary. */
static void test_output_failed_run(void **state) {
    (void)state;
    char out_path[400], msg[1024];
    path_in_dir(out_path, sizeof out_path, "kept.txt");
    assert_int_equal(nmt_test_write_file(out_path, "old\n", 4), 0);
    run_result r;
    run_cli(&r, "1 2\n3 4\n5 z\n", "translate", "--model", g_model, "-o", out_path, NULL);
    snprintf(msg, sizeof msg,
             "nmt-edge: line 3: source token 'z' is not a non-negative integer id\n"
             "nmt-edge: nothing written to '%s' (the run failed; the file is as it was)\n",
             out_path);
    expect_run(&r, 1, "", msg);
    free_result(&r);
    expect_file(out_path, "old\n");
    assert_int_equal(count_temporaries("kept.txt"), 0);
}

/* Issue 52, item 7: a line over the limits with -o FILE: the message says
 * FILE is left as it was and what --skip-long would do (once, no second
 * "nothing written" line); with --skip-long FILE is replaced, the line
 * empty. */
static void test_output_long_line(void **state) {
    (void)state;
    char out_path[400], msg[1024];
    path_in_dir(out_path, sizeof out_path, "long.txt");
    assert_int_equal(nmt_test_write_file(out_path, "old\n", 4), 0);
    const char *in = "ok\n123456789012\nfoo\n";
    run_result r;
    run_cli(&r, in, "translate", "--model", g_text_model, "--max-text-bytes", "8", "--max-len", "3", "-o", out_path,
            NULL);
    snprintf(msg, sizeof msg,
             "nmt-edge: line 2 is longer than the limits: source sentence has 12 bytes, more than the limit of 8 "
             "(--max-text-bytes 8); '%s' is left as it was; --skip-long writes an empty line for it instead\n",
             out_path);
    expect_run(&r, 1, "", msg);
    free_result(&r);
    expect_file(out_path, "old\n");
    assert_int_equal(count_temporaries("long.txt"), 0);
    /* --n-best 2: --skip-long would write no lines */
    run_cli(&r, in, "translate", "--model", g_text_model, "--max-text-bytes", "8", "--max-len", "3", "--beam", "2",
            "--n-best", "2", "-o", out_path, NULL);
    snprintf(msg, sizeof msg,
             "nmt-edge: line 2 is longer than the limits: source sentence has 12 bytes, more than the limit of 8 "
             "(--max-text-bytes 8); '%s' is left as it was; --skip-long writes no lines for it instead\n",
             out_path);
    expect_run(&r, 1, "", msg);
    free_result(&r);
    expect_file(out_path, "old\n");
    /* ids through the parser's check, to standard output: no file to name */
    run_cli(&r, "1 2\n1 1 1 1 1\n", "translate", "--model", g_model, "--max-src-len", "4", NULL);
    expect_status(&r, 1);
    assert_string_equal(r.err, "nmt-edge: line 2: source sentence has 5 tokens, more than the limit of 4 "
                               "(--max-src-len 4); --skip-long writes an empty line for it instead\n");
    free_result(&r);
    /* --skip-long: FILE replaced, line 2 empty */
    run_cli(&r, in, "translate", "--model", g_text_model, "--max-text-bytes", "8", "--max-len", "3", "--skip-long",
            "-o", out_path, NULL);
    expect_status(&r, 0);
    free_result(&r);
    size_t n;
    char *got = nmt_test_read_file(out_path, &n);
    assert_non_null(got);
    char *second = memchr(got, '\n', n);
    assert_non_null(second);
    assert_int_equal(second[1], '\n');
    free(got);
    assert_int_equal(count_temporaries("long.txt"), 0);
}

/* -o onto a device or a directory: refused, the device untouched. */
static void test_output_not_regular(void **state) {
    (void)state;
    const char *targets[] = {"/dev/full", g_dir};
    for (int i = 0; i < 2; i++) {
        char msg[1024];
        snprintf(msg, sizeof msg,
                 "nmt-edge: cannot write to '%s': not a regular file (-o replaces a file; write to "
                 "standard output for a device or a pipe)\n",
                 targets[i]);
        run_result r;
        run_cli(&r, "1 2\n", "translate", "--model", g_model, "-o", targets[i], NULL);
        expect_run(&r, 1, "", msg);
        free_result(&r);
    }
    struct stat st;
    assert_int_equal(lstat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
}

/* Run nmt-edge with `in` on stdin, stdout into out_path; its exit status,
 * and stderr in *err (malloc'd). */
static int run_limited(const char *const *args, const char *in, const char *out_path,
                       long fsize_limit, char **err) {
    child c = start(args, out_path, fsize_limit);
    assert_int_equal(write(c.in, in, strlen(in)), (ssize_t)strlen(in));
    close(c.in);
    size_t len = 0, cap = 4096;
    *err = malloc(cap);
    assert_non_null(*err);
    ssize_t k;
    while (len + 1 < cap && (k = read(c.err, *err + len, cap - len - 1)) > 0) len += (size_t)k;
    (*err)[len] = '\0';
    close(c.err);
    return wait_status(c.pid);
}

/* Write errors: a non-zero exit and the reason, for -o and stdout. */
static void test_output_write_errors(void **state) {
    (void)state;
    char out_path[400], msg[1024];
    path_in_dir(out_path, sizeof out_path, "big.txt");
    assert_int_equal(nmt_test_write_file(out_path, "old\n", 4), 0);
    const char *args[] = {"translate", "--model", g_model, "-o", out_path, NULL};
    char *err;
    /* 4 bytes: the file as it is may stay, one more byte may not be written */
    int status = run_limited(args, "1 2\n3 4\n", "/dev/null", 4, &err);
    snprintf(msg, sizeof msg,
             "nmt-edge: error writing '%s': File too large\n"
             "nmt-edge: nothing written to '%s' (the run failed; the file is as it was)\n",
             out_path, out_path);
    assert_int_equal(status, 1);
    assert_string_equal(err, msg);
    free(err);
    expect_file(out_path, "old\n");
    assert_int_equal(count_temporaries("big.txt"), 0);

    const char *to_stdout[] = {"translate", "--model", g_model, NULL};
    status = run_limited(to_stdout, "1 2\n", "/dev/full", -1, &err);
    assert_int_equal(status, 1);
    assert_string_equal(err, "nmt-edge: error writing standard output: No space left on device\n");
    free(err);
}

/* SIGTERM while -o's temporary exists: it is removed, FILE as it was. */
static void test_output_signal(void **state) {
    (void)state;
    char out_path[400], line[64];
    path_in_dir(out_path, sizeof out_path, "sig.txt");
    assert_int_equal(nmt_test_write_file(out_path, "old\n", 4), 0);
    const char *args[] = {"translate", "--model", g_model, "-o", out_path, NULL};
    child c = start(args, NULL, -1);
    assert_int_equal(write(c.in, "1 2\n", 4), 4); /* then the program waits for more */
    time_t end = time(NULL) + 120;
    while (count_temporaries("sig.txt") == 0 && time(NULL) < end) sleep_ms(10);
    assert_int_equal(count_temporaries("sig.txt"), 1);
    sleep_ms(200);
    assert_int_equal(kill(c.pid, SIGTERM), 0);
    assert_int_equal(wait_status(c.pid), 128 + SIGTERM);
    assert_int_equal(read_line_within(c.out, line, sizeof line, 1), 0);
    assert_string_equal(line, "");
    close(c.in);
    close(c.out);
    close(c.err);
    assert_int_equal(count_temporaries("sig.txt"), 0);
    expect_file(out_path, "old\n");
}

/* The signal actions the program inherited and set stay its own once the
 * device is open: LLVM-based OpenCL compilers (PoCL 3.1, Intel's CPU
 * runtime 2026.2) install crash handlers over them, an inherited "ignore"
 * of SIGXFSZ included (then Intel's printed "PLEASE submit a bug report"
 * on a write past the file size limit).  Read from /proc/PID/status while
 * the program, its first translation written, waits for more input. */
static void test_signal_actions_kept(void **state) {
    (void)state;
    char path[64], line[4096];
    const char *args[] = {"translate", "--model", g_model, "--beam", "1", "--batch", "8", NULL};
    child c = start(args, NULL, 1L << 30); /* SIGXFSZ ignored */
    assert_int_equal(write(c.in, "1 2 3\n", 6), 6);
    if (!read_line_within(c.out, line, sizeof line, 120)) fail_msg("no translation (got '%s')", line);
    snprintf(path, sizeof path, "/proc/%d/status", (int)c.pid);
    static char st[8192]; /* a /proc file has no size to read up to */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    st[fread(st, 1, sizeof st - 1, f)] = '\0';
    fclose(f);
    const char *ign = strstr(st, "SigIgn:"), *cgt = strstr(st, "SigCgt:");
    assert_true(ign != NULL && cgt != NULL);
    const unsigned long long ignored = strtoull(ign + 7, NULL, 16), caught = strtoull(cgt + 7, NULL, 16);
    const unsigned long long xfsz = 1ull << (SIGXFSZ - 1);
    close(c.in);
    assert_int_equal(read_line_within(c.out, line, sizeof line, 120), 0);
    close(c.out);
    close(c.err);
    assert_int_equal(wait_status(c.pid), 0);
    if (!(ignored & xfsz) || (caught & xfsz))
        fail_msg("SIGXFSZ is %s after the device opened, not ignored as inherited",
                 caught & xfsz ? "caught by a handler" : "at its default action");
}

/* ------------------------------------------------------------------------ */
/* Issue 20, item 6: the progress line on a terminal                        */
/* ------------------------------------------------------------------------ */

static void expect_progress_text(unsigned long lines, uint64_t bytes, uint64_t total, double elapsed,
                                 const char *want) {
    char buf[160];
    size_t n = cli_progress_format(buf, sizeof buf, lines, bytes, total, elapsed);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

/* The text of the line: count, percentage of the input's bytes, rate, ETA
 * (from bytes: the rest goes as fast per byte as what was read). */
static void test_progress_format(void **state) {
    (void)state;
    /* 370 of 1000 bytes in 9.6 s: 630 bytes left take 9.6 * 630 / 370 = 16.3 s */
    expect_progress_text(120, 370, 1000, 9.6, "nmt-edge: 120 lines, 37%, 12.5 lines/s, ETA 0:00:16");
    /* a pipe: the total is unknown */
    expect_progress_text(120, 370, 0, 9.6, "nmt-edge: 120 lines, 12.5 lines/s");
    expect_progress_text(1, 40, 0, 0.5, "nmt-edge: 1 line, 2.0 lines/s");
    /* nothing read yet, no time: no rate, ETA unknown */
    expect_progress_text(0, 0, 1000, 0, "nmt-edge: 0 lines, 0%, 0.0 lines/s, ETA ?");
    /* hours: 100 of 100000 bytes in 36 s leave 35964 s */
    expect_progress_text(10, 100, 100000, 36, "nmt-edge: 10 lines, 0%, 0.3 lines/s, ETA 9:59:24");
    /* an ETA past 1e8 s is unknown */
    expect_progress_text(1, 1, 1000000000000ull, 1, "nmt-edge: 1 line, 0%, 1.0 lines/s, ETA ?");
    /* done, and a file that grew while read: 100%, nothing left */
    expect_progress_text(30, 1000, 1000, 2, "nmt-edge: 30 lines, 100%, 15.0 lines/s, ETA 0:00:00");
    expect_progress_text(31, 1200, 1000, 2, "nmt-edge: 31 lines, 100%, 15.5 lines/s, ETA 0:00:00");
    /* truncated to the buffer, NUL-terminated */
    char small[10];
    assert_int_equal(cli_progress_format(small, sizeof small, 120, 370, 1000, 9.6), 9);
    assert_string_equal(small, "nmt-edge:");
}

/* Run nmt-edge with descriptor tty_fd (1 or 2) on a pseudo-terminal, the
 * other of stdout and stderr on /dev/null, and `in` on a pipe as stdin
 * (NULL: /dev/null): what it wrote on the terminal (malloc'd) and *status;
 * NULL when this machine gives no pseudo-terminal. */
static char *run_on_pty_fd(const char *const *args, const char *in, int tty_fd, int *status) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0) return NULL;
    const char *name = grantpt(m) == 0 && unlockpt(m) == 0 ? ptsname(m) : NULL;
    /* the test keeps the terminal open too: reading the master never ends
     * in EIO before the program has opened it */
    int s = name ? open(name, O_RDWR | O_NOCTTY) : -1;
    if (s < 0) {
        close(m);
        return NULL;
    }
    int to[2];
    assert_int_equal(pipe(to), 0);
    if (in) assert_int_equal(write(to[1], in, strlen(in)), (ssize_t)strlen(in)); /* fits the pipe */
    close(to[1]);
    const char *argv[40];
    int n = 0;
    argv[n++] = NMT_EDGE_BIN;
    while (*args) argv[n++] = *args++;
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul < 0 || dup2(in ? to[0] : nul, 0) < 0 || dup2(tty_fd == 1 ? s : nul, 1) < 0 ||
            dup2(tty_fd == 2 ? s : nul, 2) < 0)
            _exit(126);
        close(m);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(to[0]);
    size_t len = 0, cap = 4096;
    char *got = malloc(cap);
    assert_non_null(got);
    for (int exited = 0;;) {
        struct pollfd p = {.fd = m, .events = POLLIN};
        int ready = poll(&p, 1, exited ? 0 : 100);
        if (ready > 0) {
            if (len + 1024 > cap) assert_non_null(got = realloc(got, cap *= 2));
            ssize_t k = read(m, got + len, cap - len - 1);
            if (k > 0) {
                len += (size_t)k;
                continue;
            }
        }
        if (exited) break; /* drained */
        int ws;
        pid_t w = waitpid(pid, &ws, WNOHANG);
        assert_true(w >= 0);
        if (w == pid) {
            *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            exited = 1;
        }
    }
    got[len] = '\0';
    close(s);
    close(m);
    return got;
}

static char *run_on_pty(const char *const *args, const char *in, int *status) {
    return run_on_pty_fd(args, in, 2, status);
}

/* The progress line is drawn after every batch (the first at once, then at
 * most every CLI_PROGRESS_INTERVAL) and erased at the end: "\rTEXT" draws,
 * then "\r", as many spaces as the longest text drawn, "\r". */
static void expect_drawn(const char *got, const char *first) {
    assert_int_equal(got[0], '\r');
    if (strncmp(got + 1, first, strlen(first)) != 0)
        fail_msg("progress line '%s', expected it to start '%s'", got, first);
    assert_null(strchr(got, '\n'));
    const size_t len = strlen(got);
    assert_true(len > 2 && got[len - 1] == '\r');
    size_t sp = 0;
    while (sp + 2 < len && got[len - 2 - sp] == ' ') sp++;
    assert_int_equal(got[len - 2 - sp], '\r'); /* "\r" + spaces + "\r" */
    size_t longest = 0;
    for (const char *p = got; (p = strchr(p, '\r')) != NULL && p < got + len - 2 - sp; p++) {
        size_t w = strcspn(p + 1, "\r");
        while (w > 0 && p[w] == ' ') w--; /* padding over a longer line before */
        if (w > longest) longest = w;
    }
    assert_int_equal(sp, longest);
}

static void test_progress_on_terminal(void **state) {
    (void)state;
    char in_path[400];
    path_in_dir(in_path, sizeof in_path, "progress.txt");
    const char *in = "1 2 3\n4 5 6\n7 8 9\n"; /* three lines of 6 bytes */
    assert_int_equal(nmt_test_write_file(in_path, in, strlen(in)), 0);
    int status = -1;
    const char *file_args[] = {"translate", "--model", g_model, "--beam", "1", "--batch", "1", "-i", in_path, NULL};
    char *got = run_on_pty(file_args, NULL, &status);
    if (got == NULL) skip(); /* no pseudo-terminals here */
    assert_int_equal(status, 0);
    /* translate: the summary after the erased progress line (the terminal
     * writes its "\n" as "\r\n") */
    char *summary = strstr(got, "nmt-edge: translated 3 lines, ");
    if (summary == NULL) fail_msg("no summary line on the terminal: '%s'", got);
    const size_t sl = strlen(summary);
    assert_true(sl > 11 && strcmp(summary + sl - 11, " tokens/s\r\n") == 0);
    assert_non_null(strstr(summary, " tokens in "));
    *summary = '\0';
    expect_drawn(got, "nmt-edge: 1 line, 33%, ");
    assert_non_null(strstr(got, " lines/s, ETA "));
    free(got);
    /* score from a pipe: the count and the rate, no percentage */
    const char *pipe_args[] = {"score", "--model", g_model, "--batch", "1", NULL};
    got = run_on_pty(pipe_args, "1 2\t3 4\n5 6\t7 8\n", &status);
    assert_int_equal(status, 0);
    expect_drawn(got, "nmt-edge: 1 line, ");
    assert_null(strchr(got, '%'));
    assert_null(strstr(got, "ETA"));
    free(got);
    /* --quiet: nothing at all */
    const char *quiet_args[] = {"translate", "--model", g_model, "--beam", "1", "--batch", "1", "-i", in_path,
                                "--quiet", NULL};
    got = run_on_pty(quiet_args, NULL, &status);
    assert_int_equal(status, 0);
    assert_string_equal(got, "");
    free(got);
}

/* --stream with stdout on a terminal: each line is drawn after every
 * decoding step ("\r\033[K" and the text so far) and ends with the final
 * translation, which is the line the run without --stream writes; on a
 * pipe --stream changes no byte. */
static void test_stream_on_terminal(void **state) {
    (void)state;
    char in_path[400];
    path_in_dir(in_path, sizeof in_path, "stream.txt");
    const char *in = "Hello world.\nThis package contains the development files.\n";
    assert_int_equal(nmt_test_write_file(in_path, in, strlen(in)), 0);
    for (int beam = 1; beam <= 2; beam++) {
        const char *b = beam == 1 ? "1" : "2";
        char *want = good_output(NULL, "translate", "--model", g_text_model, "--beam", b, "-i", in_path, NULL);
        char *piped = good_output(NULL, "translate", "--model", g_text_model, "--beam", b, "-i", in_path,
                                  "--stream", NULL);
        assert_string_equal(piped, want);
        const char *args[] = {"translate", "--model", g_text_model, "--beam", b, "-i", in_path, "--stream", NULL};
        int status = -1;
        char *got = run_on_pty_fd(args, NULL, 1, &status);
        if (got == NULL) skip(); /* no pseudo-terminals here */
        assert_int_equal(status, 0);
        /* each terminal line (the terminal writes "\n" as "\r\n"): redraws, the last the translation */
        char *finals = calloc(strlen(got) + 1, 1);
        assert_non_null(finals);
        unsigned draws = 0, lines = 0;
        for (char *line = got, *nl; (nl = strstr(line, "\r\n")) != NULL; line = nl + 2, lines++) {
            *nl = '\0';
            char *last = line;
            for (char *p = line; (p = strstr(p, "\r\033[K")) != NULL; p += 4, draws++) last = p + 4;
            strcat(finals, last);
            strcat(finals, "\n");
        }
        assert_int_equal(lines, 2);
        assert_string_equal(finals, want);
        assert_true(draws > 2 * 2); /* at least the final draw and a step of each line */
        free(finals);
        free(got);
        free(piped);
        free(want);
    }
}

/* --spans FILE (MG-SA syntax heads, issue 57): the spans reach translate
 * and score, with --ids input, in every batching (the batch is sorted
 * longest first inside: each line keeps its own spans); a line with spans
 * scores differently from the same line with an empty spans line (the
 * n-gram fallback), which scores as without --spans; a malformed file and
 * spans past a sentence are refused with their messages. */
static void test_spans_file(void **state) {
    (void)state;
    char model[400], spans[400], bad[400], past[400];
    path_in_dir(model, sizeof model, "mgsa-syntax.nmt");
    path_in_dir(spans, sizeof spans, "in.spans");
    path_in_dir(bad, sizeof bad, "bad.spans");
    path_in_dir(past, sizeof past, "past.spans");
    run_result r;
    char *conv[] = {(char *)NMT_CONVERT_BIN, "random", "-o", model, "--arch", "mgsa", "--mg-heads",
                    "syntax syntax word word", "--mg-syntax-fallback", "2", "--src-vocab", "50", "--tgt-vocab", "50",
                    "--seed", "4", NULL};
    nmt_test_run(conv, NULL, g_dir, &r);
    expect_status(&r, 0);
    free_result(&r);
    const char *sp = "0-3:NP 3-5:VP\n\n1-2:PP\n";
    assert_int_equal(nmt_test_write_file(spans, sp, strlen(sp)), 0);
    const char *pairs = "5 6 7 8 9 10\t11 12 13\n5 6 7 8 9 10\t11 12 13\n20 21 22 23\t24 25\n";
    char *with1 = good_output(pairs, "score", "--model", model, "--ids", "--spans", spans, "--batch", "1", NULL);
    run_result w3, wo;
    run_cli(&w3, pairs, "score", "--model", model, "--ids", "--spans", spans, "--batch", "3", NULL);
    run_cli(&wo, pairs, "score", "--model", model, "--ids", NULL);
    expect_status(&w3, 0);
    expect_status(&wo, 0);
    assert_string_equal(w3.out, with1);
    char *a[3], *b[3];
    assert_int_equal(split_lines(&w3, a, 3), 3);
    assert_int_equal(split_lines(&wo, b, 3), 3);
    assert_string_equal(a[1], b[1]);     /* an empty spans line: the fallback, as without --spans */
    assert_string_not_equal(a[0], b[0]); /* the spans are used */
    assert_string_not_equal(a[0], a[1]); /* the same pair, other spans */
    free_result(&w3);
    free_result(&wo);
    char *t1 = good_output("5 6 7 8 9 10\n5 6 7 8 9 10\n20 21 22 23\n", "translate", "--model", model, "--ids",
                           "--spans", spans, "--batch", "1", "--beam", "2", NULL);
    char *t3 = good_output("5 6 7 8 9 10\n5 6 7 8 9 10\n20 21 22 23\n", "translate", "--model", model, "--ids",
                           "--spans", spans, "--batch", "3", "--beam", "2", NULL);
    assert_string_equal(t1, t3);
    free(t1);
    free(t3);
    free(with1);
    /* overlapping spans: refused when read, naming the file and line */
    assert_int_equal(nmt_test_write_file(bad, "0-3:NP 2-4:VP\n", 14), 0);
    run_cli(&r, "5 6 7 8\n", "translate", "--model", model, "--ids", "--spans", bad, NULL);
    expect_status(&r, 1);
    if (strstr(r.err, "--spans: ") == NULL || strstr(r.err, ":1: ") == NULL) fail_msg("message: %s", r.err);
    free_result(&r);
    /* a span past its sentence (line 3 of a batch of 3): that line named,
     * the lines before it written */
    assert_int_equal(nmt_test_write_file(past, "0-2:NP\n\n2-9:NP\n", 15), 0);
    run_cli(&r, "5 6 7 8\t9 10\n5 6\t7\n5 6 7 8\t9 10\n", "score", "--model", model, "--ids", "--spans", past,
            "--batch", "3", NULL);
    expect_status(&r, 1);
    char want_err[200];
    snprintf(want_err, sizeof want_err, "nmt-edge: line 3: scoring failed: %s\n", nmt_status_str(NMT_ERR_INVALID_SPANS));
    assert_string_equal(r.err, want_err);
    char *two[3];
    assert_int_equal(split_lines(&r, two, 3), 2);
    free_result(&r);
}

/* stderr on a pipe (as every other test here runs the program): never a
 * progress line, for a file or a pipe as input, translate or score. */
static void test_progress_never_on_pipe(void **state) {
    (void)state;
    char in_path[400];
    path_in_dir(in_path, sizeof in_path, "progress-pipe.txt");
    const char *in = "1 2 3\n4 5 6\n7 8 9\n";
    assert_int_equal(nmt_test_write_file(in_path, in, strlen(in)), 0);
    run_result r;
    run_cli(&r, NULL, "translate", "--model", g_model, "--batch", "1", "-i", in_path, NULL);
    expect_status(&r, 0);
    assert_string_equal(r.err, "");
    free_result(&r);
    run_cli(&r, in, "translate", "--model", g_model, "--batch", "1", NULL);
    expect_status(&r, 0);
    assert_string_equal(r.err, "");
    free_result(&r);
    run_cli(&r, "1 2\t3 4\n5 6\t7 8\n", "score", "--model", g_model, "--batch", "1", NULL);
    expect_status(&r, 0);
    assert_string_equal(r.err, "");
    free_result(&r);
    /* --verbose: the summary, on a pipe too, as the last line; --quiet wins */
    run_cli(&r, in, "translate", "--model", g_model, "--batch", "2", "--verbose", NULL);
    expect_status(&r, 0);
    char *lines[8];
    assert_int_equal(split_lines(&r, lines, 8), 3);
    unsigned long tokens = 0;
    for (int k = 0; k < 3; k++) /* the ids model: a token is a number */
        for (const char *c = lines[k]; *c; c++) tokens += (c == lines[k] || c[-1] == ' ') && *c != ' ';
    char want[128];
    snprintf(want, sizeof want, "\nnmt-edge: translated 3 lines, %lu token%s in ", tokens, tokens == 1 ? "" : "s");
    const char *at = strstr(r.err, want);
    if (at == NULL) fail_msg("expected '%s' in stderr, got:\n%s", want + 1, r.err);
    assert_non_null(strstr(at, " tokens/s\n"));
    assert_int_equal(strcmp(strstr(at, " tokens/s\n"), " tokens/s\n"), 0); /* the last line */
    free_result(&r);
    run_cli(&r, in, "translate", "--model", g_model, "--verbose", "--quiet", NULL);
    expect_status(&r, 0);
    assert_null(strstr(r.err, "translated"));
    free_result(&r);
}

/* Issue 52, item 6: the summary's text. */
static void expect_summary(unsigned long lines, uint64_t tokens, double elapsed, const char *want) {
    char buf[160];
    const size_t n = cli_progress_summary(buf, sizeof buf, lines, tokens, elapsed);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_summary_format(void **state) {
    (void)state;
    expect_summary(3, 42, 0.52, "nmt-edge: translated 3 lines, 42 tokens in 0.52 s, 80.8 tokens/s");
    expect_summary(1, 1, 2, "nmt-edge: translated 1 line, 1 token in 2.00 s, 0.5 tokens/s");
    expect_summary(0, 0, 0, "nmt-edge: translated 0 lines, 0 tokens in 0.00 s, 0.0 tokens/s");
    expect_summary(100000, 2500000, 3600.25, "nmt-edge: translated 100000 lines, 2500000 tokens in 3600.25 s, "
                                             "694.4 tokens/s");
    char small[12];
    assert_int_equal(cli_progress_summary(small, sizeof small, 3, 42, 0.52), 11);
    assert_string_equal(small, "nmt-edge: t");
}


/* ------------------------------------------------------------------------ */
/* Issue 56, item 4: token batches (--batch-tokens, --read-ahead)           */
/* ------------------------------------------------------------------------ */

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Run the same input twice, as sentence batches and as token batches:
 * status, stdout and stderr byte for byte the same. */
static void expect_same_runs(const run_result *a, const run_result *b) {
    assert_int_equal(a->status, b->status);
    assert_string_equal(a->err, b->err);
    assert_int_equal(a->out_len, b->out_len);
    assert_memory_equal(a->out, b->out, a->out_len);
}

/* 40 id lines of 0 to 14 ids (vocabulary 50), lengths shuffled so that
 * sorting moves them. */
static const char *varied_ids(void) {
    static char buf[4096];
    size_t at = 0;
    uint32_t seed = 7;
    for (int line = 0; line < 40; line++) {
        seed = seed * 1103515245u + 12345u;
        const int n = (int)((seed >> 16) % 15);
        for (int k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            at += (size_t)snprintf(buf + at, sizeof buf - at, k ? " %u" : "%u", 3 + (seed >> 16) % 47);
        }
        buf[at++] = '\n';
    }
    buf[at] = '\0';
    return buf;
}

static void test_token_batches_same_output(void **state) {
    (void)state;
    const char *in = varied_ids();
    char *want = good_output(in, "translate", "--model", g_model, "--batch", "4", "--max-len", "8", NULL);
    assert_int_equal(strlen(want) > 40, 1);
    /* budgets from one sentence a call (1: each over it) to whole windows */
    const char *budgets[] = {"1", "16", "40", "100", "100000"};
    for (size_t k = 0; k < sizeof budgets / sizeof budgets[0]; k++) {
        char *got = good_output(in, "translate", "--model", g_model, "--batch", "4", "--max-len", "8",
                                "--batch-tokens", budgets[k], NULL);
        assert_string_equal(got, want);
        free(got);
    }
    /* windows smaller than the input, not a multiple of --batch */
    char *got = good_output(in, "translate", "--model", g_model, "--batch", "4", "--max-len", "8", "--batch-tokens",
                            "30", "--read-ahead", "7", NULL);
    assert_string_equal(got, want);
    free(got);
    /* n-best lines (their INDEX is the input line) and alignments */
    char *nbest = good_output(in, "translate", "--model", g_model, "--batch", "4", "--max-len", "8", "--beam", "3",
                              "--n-best", "3", "--alignment", NULL);
    got = good_output(in, "translate", "--model", g_model, "--batch", "8", "--max-len", "8", "--beam", "3",
                      "--n-best", "3", "--alignment", "--batch-tokens", "40", NULL);
    assert_string_equal(got, nbest);
    free(got);
    free(nbest);
    char *json = good_output(in, "translate", "--model", g_model, "--max-len", "8", "--format", "jsonl", NULL);
    got = good_output(in, "translate", "--model", g_model, "--max-len", "8", "--format", "jsonl", "--batch-tokens",
                      "24", NULL);
    assert_string_equal(got, json);
    free(got);
    free(json);
    /* text through the embedded tokenizer, and -o FILE */
    const char *text = "Hello world\nthis is a test of a longer line with more pieces\n\nok\n"
                       "a b c d e f g h\nHello\nworld again and again\n";
    char *want_text = good_output(text, "translate", "--model", g_text_model, "--max-len", "6", NULL);
    char out_path[400];
    path_in_dir(out_path, sizeof out_path, "tokens.txt");
    run_result r;
    run_cli(&r, text, "translate", "--model", g_text_model, "--max-len", "6", "--batch", "3", "--batch-tokens", "20",
            "-o", out_path, NULL);
    expect_run(&r, 0, "", "");
    free_result(&r);
    expect_file(out_path, want_text);
    assert_int_equal(count_temporaries("tokens.txt"), 0);
    free(want_text);
    free(want);
}

/* Lines over the limits: the same messages, output and status as sentence
 * batches, with and without --skip-long, for a line found by the parser
 * (ids) and one found only once tokenized (text). */
static void test_token_batches_long_lines(void **state) {
    (void)state;
    const char *ids = "1 2\n3 4 5\n1 1 1 1 1 1\n6\n7 8 9\n";
    run_result a, b;
    for (int skip = 0; skip < 2; skip++) {
        run_cli(&a, ids, "translate", "--model", g_model, "--max-src-len", "4", "--max-len", "5", skip ? "--skip-long"
                : "--quiet", NULL);
        run_cli(&b, ids, "translate", "--model", g_model, "--max-src-len", "4", "--max-len", "5", "--batch-tokens",
                "12", skip ? "--skip-long" : "--quiet", NULL);
        expect_status(&a, skip ? 0 : 1);
        expect_same_runs(&a, &b);
        free_result(&a);
        free_result(&b);
    }
    /* text: 'this is a long sentence' has more than 3 pieces */
    const char *text = "ok\nHello\nthis is a long sentence\nworld\nfoo\n";
    run_cli(&a, text, "translate", "--model", g_text_model, "--max-src-len", "3", "--max-len", "4", NULL);
    run_cli(&b, text, "translate", "--model", g_text_model, "--max-src-len", "3", "--max-len", "4", "--batch-tokens",
            "8", NULL);
    expect_status(&a, 1);
    assert_non_null(strstr(a.err, "nmt-edge: line 3 is longer than the limits: source sentence has "));
    assert_int_equal(count_lines(a.out), 2); /* the two lines before it */
    expect_same_runs(&a, &b);
    free_result(&a);
    free_result(&b);
    run_cli(&a, text, "translate", "--model", g_text_model, "--max-src-len", "3", "--max-len", "4", "--skip-long",
            NULL);
    run_cli(&b, text, "translate", "--model", g_text_model, "--max-src-len", "3", "--max-len", "4", "--skip-long",
            "--batch-tokens", "8", NULL);
    expect_status(&a, 0);
    assert_int_equal(count_lines(a.out), 5);
    expect_same_runs(&a, &b);
    free_result(&a);
    free_result(&b);
    /* a bad line stops both after the lines before it */
    run_cli(&a, "1 2\n3\n4 x\n5\n", "translate", "--model", g_model, "--max-len", "4", NULL);
    run_cli(&b, "1 2\n3\n4 x\n5\n", "translate", "--model", g_model, "--max-len", "4", "--batch-tokens", "9", NULL);
    expect_status(&a, 1);
    assert_int_equal(count_lines(a.out), 2);
    expect_same_runs(&a, &b);
    free_result(&a);
    free_result(&b);
}

static void test_token_batches_usage(void **state) {
    (void)state;
    run_result r;
    run_cli(&r, "1\n", "translate", "--model", g_model, "--read-ahead", "64", NULL);
    expect_run(&r, 2, "",
               "nmt-edge translate: --read-ahead needs --batch-tokens\nTry 'nmt-edge translate --help'.\n");
    free_result(&r);
    run_cli(&r, "1\n", "translate", "--model", g_model, "--batch-tokens", "0", NULL);
    expect_run(&r, 2, "",
               "nmt-edge translate: --batch-tokens: '0' is not an integer in [1, 16777216]\n"
               "Try 'nmt-edge translate --help'.\n");
    free_result(&r);
    run_cli(&r, "1\n", "translate", "--model", g_model, "--batch-tokens", "64", "--batch", "8", "--read-ahead", "4",
            NULL);
    expect_run(&r, 2, "", "nmt-edge translate: --read-ahead 4 is smaller than --batch 8\nTry 'nmt-edge translate --help'.\n");
    free_result(&r);
    run_cli(&r, "1\n", "translate", "--model", g_model, "--batch-tokens", "64", "--sampling", "topk:0", NULL);
    expect_run(&r, 2, "",
               "nmt-edge translate: --batch-tokens cannot be used with --sampling: a call's sentence i samples "
               "with seed + i, so reordering the lines would change their samples\n"
               "Try 'nmt-edge translate --help'.\n");
    free_result(&r);
    run_cli(&r, "1\t2\n", "score", "--model", g_model, "--batch-tokens", "64", NULL);
    expect_run(&r, 2, "", "nmt-edge score: unknown option '--batch-tokens'\nTry 'nmt-edge score --help'.\n");
    free_result(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_line_without_tab),
        cmocka_unit_test(test_score_long_text_line),
        cmocka_unit_test(test_score_long_id_line),
        cmocka_unit_test(test_input_errors),
        cmocka_unit_test(test_tokenize_long_line),
        cmocka_unit_test(test_pipe_pause_runs_batch),
        cmocka_unit_test(test_reader_ready),
        cmocka_unit_test(test_reader_cut),
        cmocka_unit_test(test_with_score),
        cmocka_unit_test(test_input_output_files),
        cmocka_unit_test(test_output_failed_run),
        cmocka_unit_test(test_output_long_line),
        cmocka_unit_test(test_output_not_regular),
        cmocka_unit_test(test_output_write_errors),
        cmocka_unit_test(test_output_signal),
        cmocka_unit_test(test_signal_actions_kept),
        cmocka_unit_test(test_progress_format),
        cmocka_unit_test(test_summary_format),
        cmocka_unit_test(test_progress_on_terminal),
        cmocka_unit_test(test_stream_on_terminal),
        cmocka_unit_test(test_spans_file),
        cmocka_unit_test(test_progress_never_on_pipe),
        cmocka_unit_test(test_token_batches_same_output),
        cmocka_unit_test(test_token_batches_long_lines),
        cmocka_unit_test(test_token_batches_usage),
    };
    return cmocka_run_group_tests(tests, cli_group_setup, cli_group_teardown);
}
