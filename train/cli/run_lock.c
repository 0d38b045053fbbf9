/* SPDX-License-Identifier: MIT */
/* run_lock.c — the run directory's lock (see run_lock.h). */
#define _DEFAULT_SOURCE /* flock() */
#include "run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "train_opts.h"

#define PROG TRAIN_PROG

int run_lock_holder(const char *text, size_t n, char *who, size_t cap) {
    static const char head[] = PROG " pid ";
    const size_t nh = sizeof head - 1;
    if (n <= nh || memcmp(text, head, nh) != 0) return 0;
    size_t i = nh, digits = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9') i++, digits++;
    if (digits == 0 || digits > 10 || n - i < 5 || memcmp(text + i, " on ", 4) != 0) return 0;
    size_t end = i + 4;
    while (end < n && text[end] != '\n' && (unsigned char)text[end] >= ' ') end++;
    if (end == i + 4 || (end < n && text[end] != '\n')) return 0; /* no host, or a control byte */
    snprintf(who, cap, "%.*s", (int)(end > 300 ? 300 : end), text);
    return 1;
}

int run_lock_take(const char *dir, int *fd) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" RUN_LOCK_NAME, dir);
    *fd = -1;
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) {
        fprintf(stderr, PROG ": cannot open the lock file '%s': %s\n", path, strerror(errno));
        return 1;
    }
    int rc;
    while ((rc = flock(f, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    if (rc != 0 && errno != EWOULDBLOCK && errno != EAGAIN) {
        /* ENOLCK, EOPNOTSUPP, ...: a file system without locks trains on, unguarded */
        fprintf(stderr, PROG ": warning: cannot lock '%s' (%s): a second trainer on '%s' would not be refused\n",
                path, strerror(errno), dir);
        close(f);
        return 0;
    }
    if (rc != 0) {
        char text[512], who[320];
        ssize_t n;
        while ((n = pread(f, text, sizeof text, 0)) < 0 && errno == EINTR) {
        }
        close(f);
        if (n > 0 && run_lock_holder(text, (size_t)n, who, sizeof who))
            fprintf(stderr, PROG ": '%s' is in use by %s; wait for that run to end or stop it, or choose another --out\n",
                    dir, who);
        else
            fprintf(stderr,
                    PROG ": '%s' is in use by another process (it holds the lock on '%s'); wait for that run to "
                         "end or stop it, or choose another --out\n",
                    dir, path);
        return 1;
    }
    /* ours: say who holds it (a lock file left by a dead trainer is overwritten) */
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0') snprintf(host, sizeof host, "unknown-host");
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if ((unsigned char)*p < ' ') *p = '?';
    char line[400];
    const int len = snprintf(line, sizeof line, PROG " pid %ld on %s\n", (long)getpid(), host);
    ssize_t put = -1;
    if (ftruncate(f, 0) == 0 && (put = pwrite(f, line, (size_t)len, 0)) >= 0 && put != (ssize_t)len) errno = ENOSPC;
    if (put != (ssize_t)len)
        fprintf(stderr, PROG ": warning: cannot write '%s': %s (the lock holds; a second trainer is refused "
                             "without the holder's name)\n", path, strerror(errno));
    *fd = f;
    return 0;
}
