/* SPDX-License-Identifier: MIT */
/* tool_out.c — temporaries removed on signals, standard output checked at
 * exit (tool_out.h). */
#include "tool_out.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The live temporary, for the signal handler (async-signal-safe: a fixed
 * buffer and a flag, unlink and raise). */
static char g_tmp[4200];
static volatile sig_atomic_t g_tmp_live;

static void remove_tmp_and_die(int sig) {
    if (g_tmp_live) unlink(g_tmp);
    raise(sig); /* SA_RESETHAND: the default action, once the handler returns */
}

static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ};
_Static_assert(sizeof sigs / sizeof sigs[0] == sizeof((nmt_tool_signals *)0)->saved, "one slot per signal");

static void install_handlers(void) {
    static int done;
    if (done) return;
    done = 1;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_tmp_and_die;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
    }
}

void nmt_tool_tmp_begin(const char *path) {
    install_handlers();
    g_tmp_live = 0;
    if (path == NULL || strlen(path) >= sizeof g_tmp) return;
    memcpy(g_tmp, path, strlen(path) + 1);
    g_tmp_live = 1;
}

void nmt_tool_tmp_end(void) { g_tmp_live = 0; }

void nmt_tool_signals_save(nmt_tool_signals *s) {
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        s->saved[i] = sigaction(sigs[i], NULL, &s->action[i]) == 0;
}

void nmt_tool_signals_restore(const nmt_tool_signals *s) {
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (s->saved[i]) sigaction(sigs[i], &s->action[i], NULL);
}

int nmt_tool_close_stdout(const char *prog) {
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad) return 0;
    fprintf(stderr, "%s: error writing standard output: %s\n", prog, e ? strerror(e) : "write error");
    return 1;
}

/* Bytes of the valid UTF-8 character at p[0, left) that is printable (no C1
 * control), 0 for a byte to escape. */
static size_t utf8_printable(const unsigned char *p, size_t left) {
    const unsigned c = p[0];
    if (c >= 0x20 && c < 0x7f) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if (len > left || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    if (c == 0xc2 && p[1] <= 0x9f) return 0; /* U+0080..U+009F: C1 controls (0x9b is CSI) */
    return len;
}

const char *nmt_tool_escape(const char *s, size_t n, char *out, size_t cap) {
    if (out == NULL || cap == 0) return out;
    if (n == SIZE_MAX) n = s ? strlen(s) : 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_printable(p + i, n - i);
        if (len == 0) { /* escaped: each byte of a C1 control too */
            size_t k = (p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f) ? 2 : 1;
            if (o + 4 * k >= cap) break;
            for (size_t j = 0; j < k; j++) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i + j]);
            i += k;
            continue;
        }
        if (o + len >= cap) break;
        memcpy(out + o, p + i, len);
        o += len;
        i += len;
    }
    out[o] = '\0';
    return out;
}
