/* SPDX-License-Identifier: MIT */
/* cli_progress.c — the progress line of `nmt-edge translate` and `score`
 * on a terminal, and translate's summary line at the end (cli_progress.h).
 * The formatting is pure functions (tested in tests/cli_batch_test.c); the
 * rest decides whether to draw and when, and writes to standard error. */
#include "cli_progress.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

size_t cli_progress_format(char *buf, size_t cap, unsigned long lines, uint64_t bytes, uint64_t total,
                           double elapsed) {
    if (cap == 0) return 0;
    const double rate = elapsed > 0 ? (double)lines / elapsed : 0;
    int n;
    if (total == 0) {
        n = snprintf(buf, cap, "nmt-edge: %lu line%s, %.1f lines/s", lines, lines == 1 ? "" : "s", rate);
    } else {
        const uint64_t done = bytes < total ? bytes : total; /* a file that grew: 100% */
        const unsigned pct = (unsigned)(done * 100.0 / (double)total);
        char eta[32] = "?";
        if (done > 0 && elapsed > 0) {
            const double left = elapsed * (double)(total - done) / (double)done;
            if (left < 1e8) {
                const long t = (long)(left + 0.5);
                snprintf(eta, sizeof eta, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
            }
        }
        n = snprintf(buf, cap, "nmt-edge: %lu line%s, %u%%, %.1f lines/s, ETA %s", lines, lines == 1 ? "" : "s",
                     pct, rate, eta);
    }
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t cli_progress_summary(char *buf, size_t cap, unsigned long lines, uint64_t tokens, double elapsed) {
    if (cap == 0) return 0;
    const double rate = elapsed > 0 ? (double)tokens / elapsed : 0;
    const int n = snprintf(buf, cap, "nmt-edge: translated %lu line%s, %llu token%s in %.2f s, %.1f tokens/s", lines,
                           lines == 1 ? "" : "s", (unsigned long long)tokens, tokens == 1 ? "" : "s",
                           elapsed > 0 ? elapsed : 0.0, rate);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, int want, int summary, int in_fd, int out_fd) {
    memset(p, 0, sizeof *p);
    p->summary = summary == CLI_SUMMARY_ALWAYS || (summary == CLI_SUMMARY_ON_TERMINAL && isatty(2));
    /* a user typing the input sees each translation; no line then */
    p->on = want && isatty(2) && !isatty(in_fd);
    if (!p->on) return;
    p->out_tty = isatty(out_fd);
    struct stat st;
    if (fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode)) {
        const off_t at = lseek(in_fd, 0, SEEK_CUR); /* `cmd < file` may start past 0 */
        if (st.st_size > 0 && at >= 0 && at < st.st_size) p->total = (uint64_t)(st.st_size - at);
    }
}

void cli_progress_start(cli_progress *p) {
    p->t0 = now_s();
    p->shown = -1; /* the first update draws */
}

void cli_progress_update(cli_progress *p, unsigned long lines, uint64_t bytes) {
    if (!p->on) return;
    const double t = now_s();
    if (p->shown >= 0 && t - p->shown < CLI_PROGRESS_INTERVAL) return;
    p->shown = t;
    char line[160];
    const size_t n = cli_progress_format(line, sizeof line, lines, bytes, p->total, t - p->t0);
    /* pad over the rest of a longer previous line */
    fprintf(stderr, "\r%s%*s", line, p->width > n ? (int)(p->width - n) : 0, "");
    fflush(stderr);
    if (n > p->width) p->width = n;
}

void cli_progress_clear(cli_progress *p) {
    if (!p->on || p->width == 0) return;
    fprintf(stderr, "\r%*s\r", (int)p->width, "");
    fflush(stderr);
    p->width = 0;
}

void cli_progress_finish(const cli_progress *p, unsigned long lines, uint64_t tokens) {
    if (!p->summary) return;
    char line[160];
    cli_progress_summary(line, sizeof line, lines, tokens, now_s() - p->t0);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

/* ---- First start: the kernels compiling ----------------------------------- */

size_t cli_build_format(char *buf, size_t cap, const char *device, uint32_t built, int finished, double elapsed) {
    if (cap == 0) return 0;
    int n = finished ? snprintf(buf, cap, "nmt-edge: compiled %u kernel program%s for %s in %.1f s (first run only)",
                                (unsigned)built, built == 1 ? "" : "s", device, elapsed)
                     : snprintf(buf, cap, "nmt-edge: compiling kernels for %s (first run only): %u program%s", device,
                                (unsigned)built, built == 1 ? "" : "s");
    if (n < 0) n = 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

void cli_build_progress(void *user, const char *device, uint32_t built, int finished) {
    cli_build_note *b = user;
    if (b == NULL || b->quiet) return;
    const double t = now_s();
    if (b->t0 == 0) b->t0 = t;
    /* compiles that hit the driver's own cache (PoCL's) end in well under a
     * second and say nothing: the note is for a start that takes long */
    if (!b->noted && (finished || t - b->t0 < CLI_BUILD_QUIET_S)) return;
    char line[400];
    if (b->tty) {
        b->noted = 1;
        cli_build_format(line, sizeof line, device ? device : "the device", built, finished, t - b->t0);
        fprintf(stderr, "\r%s\033[K%s", line, finished ? "\n" : "");
    } else if (!b->noted) {
        b->noted = 1;
        fprintf(stderr, "nmt-edge: compiling kernels for %s (first run only; 'nmt-edge warmup' does it ahead)\n",
                device ? device : "the device");
    }
    fflush(stderr);
}
