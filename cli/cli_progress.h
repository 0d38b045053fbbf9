/* SPDX-License-Identifier: MIT */
/* cli_progress.h — the progress line of `nmt-edge translate` and `score`
 * (issue 20, item 6), as nmt-edge-train draws its own: on standard error,
 * only when that is a terminal and --quiet is not given, never on a pipe or
 * a file.  With a regular file as input its size gives a percentage and an
 * ETA; from a pipe the line shows the count and the rate only.  Redrawn in
 * place ("\r") after a batch, at most 4 times a second, and cleared at the
 * end and before any other message.
 *
 * At the end of a successful run `translate` prints one summary line on
 * standard error (issue 52, item 6), as CTranslate2's and Marian's tools
 * do: when standard error is a terminal, or with --verbose; never with
 * --quiet.  Part of the program, not of the library. */
#ifndef NMT_CLI_PROGRESS_H
#define NMT_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Seconds between two redraws, at least. */
#define CLI_PROGRESS_INTERVAL 0.25

typedef struct cli_progress {
    int on;             /* draw at all: stderr a terminal, input not one, no --quiet */
    int out_tty;        /* standard output is a terminal too: clear before output */
    uint64_t total;     /* bytes of a regular-file input from where reading starts; 0: unknown */
    double t0, shown;   /* start of the line loop, last redraw (CLOCK_MONOTONIC seconds) */
    size_t width;       /* characters of the line on the screen; 0: none */
    int summary;        /* print the summary at the end (cli_progress_finish) */
} cli_progress;

/* When to print the summary (cli_progress_init's `summary`). */
enum { CLI_SUMMARY_NEVER = 0, CLI_SUMMARY_ON_TERMINAL = 1, CLI_SUMMARY_ALWAYS = 2 };

/* The progress line, without "\r" or line end, for `lines` lines done in
 * `elapsed` seconds, with `bytes` of the input's `total` bytes read (total
 * 0: unknown, the line has the count and rate only), in buf[0, cap)
 * (NUL-terminated, truncated to fit).  Returns its length.  E.g.
 *   "nmt-edge: 120 lines, 37%, 12.5 lines/s, ETA 0:00:16"
 *   "nmt-edge: 120 lines, 12.5 lines/s"
 * The ETA assumes the rest of the input goes as fast per byte as what was
 * read; "?" before anything was read. */
size_t cli_progress_format(char *buf, size_t cap, unsigned long lines, uint64_t bytes, uint64_t total,
                           double elapsed);

/* The summary line, without line end, for `lines` lines and `tokens`
 * target tokens in `elapsed` seconds, in buf[0, cap) (NUL-terminated,
 * truncated to fit).  Returns its length.  E.g.
 *   "nmt-edge: translated 3 lines, 42 tokens in 0.52 s, 80.8 tokens/s"
 * (0.0 tokens/s when no time was measured). */
size_t cli_progress_summary(char *buf, size_t cap, unsigned long lines, uint64_t tokens, double elapsed);

/* Decide whether to draw (want: the subcommand shows progress and --quiet
 * is not given) for input descriptor in_fd and output descriptor out_fd,
 * and when to print the summary (CLI_SUMMARY_*). */
void cli_progress_init(cli_progress *p, int want, int summary, int in_fd, int out_fd);
/* The line loop starts: the clock for the rate and the ETA. */
void cli_progress_start(cli_progress *p);
/* After a batch: redraw, unless the last redraw was less than
 * CLI_PROGRESS_INTERVAL ago (the first one comes after the first batch). */
void cli_progress_update(cli_progress *p, unsigned long lines, uint64_t bytes);
/* Erase the line (before a message or output to the same terminal, and at
 * the end); the next update that the interval allows draws it again. */
void cli_progress_clear(cli_progress *p);
/* The run succeeded: print the summary line (cli_progress_summary, timed
 * from cli_progress_start) if p->summary says so. */
void cli_progress_finish(const cli_progress *p, unsigned long lines, uint64_t tokens);

/* ---- First start: the kernels compiling (issue 54) ------------------------ */

/* Seconds of compiling before the note shows: a start whose driver cache
 * holds the kernels (PoCL's: under a second) says nothing. */
#define CLI_BUILD_QUIET_S 2.0

/* State of the note the library's nmt_build_progress_fn draws. */
typedef struct cli_build_note {
    int quiet;      /* --quiet: nothing */
    int tty;        /* standard error is a terminal: a line redrawn in place */
    int noted;      /* the one-line note (not a terminal) was printed */
    double t0;      /* first call (CLOCK_MONOTONIC seconds) */
} cli_build_note;

/* The line for `built` programs compiled for `device` (finished: all of
 * them, `elapsed` seconds) in buf[0, cap), without "\r" or line end:
 *   "nmt-edge: compiling kernels for DEV (first run only): 5 programs"
 *   "nmt-edge: compiled 11 kernel programs for DEV in 6.2 s (first run only)"
 * Returns its length. */
size_t cli_build_format(char *buf, size_t cap, const char *device, uint32_t built, int finished, double elapsed);

/* nmt_build_progress_fn over a cli_build_note (user), once compiling has
 * taken CLI_BUILD_QUIET_S: on a terminal the line above, redrawn at each
 * program and ended when session creation is over; otherwise one line (a
 * log or a pipe gets a note, not a counter); nothing with quiet. */
void cli_build_progress(void *user, const char *device, uint32_t built, int finished);

#endif
