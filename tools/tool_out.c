/* SPDX-License-Identifier: MIT */
/* tool_out.c — temporaries removed on signals, standard output checked at
 * exit (tool_out.h). */
#include "tool_out.h"

#include <errno.h>
#include <signal.h>
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
