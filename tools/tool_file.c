/* SPDX-License-Identifier: MIT */
/* tool_file.c — bounded whole-file reading for the programs (tool_file.h). */
#include "tool_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "nmt_edge.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* The kind of a file that is not a regular one, as a phrase. */
static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "is a directory";
    if (S_ISCHR(m)) return "not a regular file (a character device)";
    if (S_ISBLK(m)) return "not a regular file (a block device)";
    if (S_ISFIFO(m)) return "not a regular file (a pipe or FIFO)";
    if (S_ISSOCK(m)) return "not a regular file (a socket)";
    return "not a regular file";
}

/* NULL with errno `e` and "cannot VERB 'PATH': REASON" in why. */
static void *fail(int e, char *why, size_t cap, const char *verb, const char *path,
                  const char *reason) {
    if (why != NULL && cap > 0) snprintf(why, cap, "cannot %s '%s': %s", verb, path, reason);
    errno = e;
    return NULL;
}

/* Read fd to its end or `limit` bytes, whichever comes first; *over = 1 if
 * more bytes followed the limit.  NULL and errno on failure. */
static char *read_fd(int fd, size_t first_cap, size_t limit, size_t *n_out, int *over) {
    size_t cap = first_cap, n = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL) return NULL;
    *over = 0;
    for (;;) {
        if (n == cap) {
            if (n >= limit) {  /* one more byte decides whether there is more */
                char extra;
                ssize_t r;
                do r = read(fd, &extra, 1);
                while (r < 0 && errno == EINTR);
                if (r < 0) break;
                *over = r > 0;
                buf[n] = '\0';
                *n_out = n;
                return buf;
            }
            size_t grown = cap > limit / 2 ? limit : cap * 2;
            char *nb = realloc(buf, grown + 1);
            if (nb == NULL) break;
            buf = nb;
            cap = grown;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        if (r == 0) {
            buf[n] = '\0';
            *n_out = n;
            return buf;
        }
        n += (size_t)r;
    }
    int e = errno;
    free(buf);
    errno = e;
    return NULL;
}

void *nmt_tool_read_file(const char *path, size_t max_pipe_bytes, size_t *size, char *why,
                         size_t why_cap) {
    *size = 0;
    struct stat st;
    /* A FIFO is refused before open() could block waiting for a writer. */
    if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode) && max_pipe_bytes == 0)
        return fail(ENODEV, why, why_cap, "read", path, kind_of(st.st_mode));
    int fd = open(path, O_RDONLY | O_CLOEXEC | (max_pipe_bytes ? 0 : O_NONBLOCK));
    if (fd < 0) {
        int e = errno;
        return fail(e, why, why_cap, "open", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(e, why, why_cap, "read", path, strerror(e));
    }
    const int pipe_ok = S_ISFIFO(st.st_mode) && max_pipe_bytes > 0;
    if (!S_ISREG(st.st_mode) && !pipe_ok) {
        close(fd);
        return fail(S_ISDIR(st.st_mode) ? EISDIR : ENODEV, why, why_cap, "read", path,
                    kind_of(st.st_mode));
    }
    /* A regular file: what it holds now, and one byte more to notice growth
     * (which is ignored: the file as it was when opened is read). */
    size_t first = max_pipe_bytes < 65536 ? max_pipe_bytes : 65536, limit = max_pipe_bytes;
    if (!pipe_ok) {
        if ((uint64_t)st.st_size >= (uint64_t)SIZE_MAX / 2) {
            close(fd);
            return fail(EFBIG, why, why_cap, "read", path, "too large to read into memory");
        }
        first = limit = (size_t)st.st_size;
    }
    size_t n = 0;
    int over = 0;
    char *buf = read_fd(fd, first, limit, &n, &over);
    int e = errno;
    close(fd);
    if (buf == NULL) {
        char reason[128];
        snprintf(reason, sizeof reason, "%s", e == ENOMEM ? "out of memory" : strerror(e));
        return fail(e, why, why_cap, "read", path, reason);
    }
    if (over && pipe_ok) {
        free(buf);
        char reason[128];
        snprintf(reason, sizeof reason, "more than the %zu bytes read from a pipe", max_pipe_bytes);
        return fail(EFBIG, why, why_cap, "read", path, reason);
    }
    if (!pipe_ok && n < limit) {
        free(buf);
        return fail(EIO, why, why_cap, "read", path, "the file shrank while it was read");
    }
    *size = n;
    return buf;
}

int nmt_tool_file_problem(const char *path, char *why, size_t why_cap) {
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) return 0;
    const char *reason = !S_ISREG(st.st_mode) ? kind_of(st.st_mode)
                         : st.st_size == 0    ? "the file is empty"
                                              : NULL;
    if (reason == NULL) return 0;
    if (why != NULL && why_cap > 0) snprintf(why, why_cap, "%s", reason);
    return 1;
}

/* Pieces of a SentencePiece model (0: it does not load). */
static uint32_t spm_pieces(const void *spm, size_t n) {
    size_t need = 0;
    if (nmt_tokenizer_arena_size(spm, n, 1, &need) != NMT_OK) return 0;
    void *arena = malloc(need + NMT_ARENA_ALIGNMENT);
    nmt_tokenizer *t = NULL;
    nmt_tokenizer_info ti;
    uint32_t pieces = 0;
    if (arena && nmt_tokenizer_create(spm, n, 1, arena, need + NMT_ARENA_ALIGNMENT, &t) == NMT_OK &&
        nmt_tokenizer_get_info(t, &ti) == NMT_OK)
        pieces = ti.vocab_size;
    free(arena);
    return pieces;
}

int nmt_tool_tokenizer_problem(const void *image, size_t size, char *why, size_t why_cap) {
    nmt_model_info mi;
    if (nmt_model_inspect(image, size, &mi) != NMT_OK || mi.tokenizer == 0) return 0;
    for (int target = 0; target < 2; target++) {
        const void *spm;
        size_t n;
        if (nmt_model_tokenizer(image, size, target, &spm, &n) != NMT_OK) return 0;
        const uint32_t pieces = spm_pieces(spm, n), vocab = target ? mi.tgt_vocab : mi.src_vocab;
        if (pieces > vocab) {
            snprintf(why, why_cap, "tokenizer.%s has %u pieces, more than %s_vocab %u",
                     target && mi.tokenizer == 2 ? "tgt" : "src", pieces, target ? "tgt" : "src", vocab);
            return 1;
        }
    }
    return 0;
}
