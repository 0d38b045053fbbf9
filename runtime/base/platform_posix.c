/* SPDX-License-Identifier: MIT */
/* platform_posix.c — platform.h on POSIX systems (Linux, Android, macOS).
 *
 * No heap memory: paths are assembled in fixed stack buffers (PATH_MAX-sized
 * requests beyond NMT_PLATFORM_PATH_MAX fail with NMT_ERR_IO / ENAMETOOLONG).
 * Every failing call returns with errno describing the first error. */
#define _XOPEN_SOURCE 700 /* realpath() */
#define _DEFAULT_SOURCE   /* madvise(), MADV_DONTNEED */
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h> /* PATH_MAX */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h> /* mkstemp */
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define NMT_PLATFORM_PATH_MAX 4096

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef PATH_MAX
#define PATH_MAX NMT_PLATFORM_PATH_MAX
#endif

/* Return `status` with errno restored to `saved` (cleanup calls may clobber it). */
static nmt_status fail_errno(nmt_status status, int saved) {
    errno = saved;
    return status;
}

nmt_status nmt_map_file(const char *path, nmt_mapping *m) {
    if (m == NULL) return NMT_ERR_INVALID_ARGUMENT;
    m->data = NULL;
    m->size = 0;
    if (path == NULL) return NMT_ERR_INVALID_ARGUMENT;

    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
     * below); reads of a regular file ignore the flag and mmap never reads. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return NMT_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail_errno(NMT_ERR_IO, e);
    }
    if (!S_ISREG(st.st_mode)) {
        /* POSIX mmap's ENODEV: "a file whose type is not supported" (a
         * device such as /dev/zero or /dev/null, a FIFO, a socket) */
        close(fd);
        return fail_errno(NMT_ERR_IO, S_ISDIR(st.st_mode) ? EISDIR : ENODEV);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return fail_errno(NMT_ERR_IO, EFBIG);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {  /* mmap of length 0 is an error; an empty file is not */
        close(fd);
        return NMT_OK;
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);  /* the mapping keeps the file referenced */
    if (p == MAP_FAILED) return fail_errno(NMT_ERR_IO, e);
    m->data = p;
    m->size = size;
    return NMT_OK;
}

void nmt_mapping_release(const nmt_mapping *m, const void *p, size_t n) {
    if (m == NULL || m->data == NULL || p == NULL || n == 0) return;
    const uintptr_t base = (uintptr_t)m->data, end = base + m->size;
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    if (hi < lo || lo >= end || hi <= base) return;
    if (lo < base) lo = base;
    if (hi > end) hi = end;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
    lo &= ~(page - 1); /* mmap returns page-aligned data: lo stays >= base */
#ifdef MADV_DONTNEED
    /* a read-only MAP_PRIVATE file mapping holds no private copies:
     * MADV_DONTNEED only drops the pages, which the file still has
     * (posix_madvise's POSIX_MADV_DONTNEED is a no-op in glibc) */
    (void)madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED);
#else
    (void)hi;
#endif
}

void nmt_unmap_file(nmt_mapping *m) {
    if (m == NULL) return;
    if (m->data != NULL && m->size > 0) munmap((void *)(uintptr_t)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

/* Make the file's blocks exist before writing through a shared mapping, so a
 * full disk is an error here rather than SIGBUS on first touch.  Filesystems
 * without fallocate support (EOPNOTSUPP / EINVAL) fall back to ftruncate's
 * sparse file. */
static int reserve_blocks(int fd, size_t size) {
    if (ftruncate(fd, (off_t)size) != 0) return errno;
    if (size == 0) return 0;
    int r = posix_fallocate(fd, 0, (off_t)size);
    if (r == 0 || r == EOPNOTSUPP || r == EINVAL) return 0;
    return r;
}

nmt_status nmt_replace_target(const char *path, char *out, size_t cap) {
    if (path == NULL || out == NULL || cap == 0 || path[0] == '\0') return NMT_ERR_INVALID_ARGUMENT;
    char resolved[PATH_MAX];
    const char *target = path;
    struct stat st;
    if (lstat(path, &st) != 0) {
        /* missing: a new file (a missing directory fails when the temporary
         * is created, with its own errno) */
        if (errno != ENOENT) return NMT_ERR_IO;
    } else {
        if (S_ISLNK(st.st_mode)) {
            /* write through the link: its target is replaced, the link stays */
            if (realpath(path, resolved) == NULL || stat(resolved, &st) != 0)
                return fail_errno(NMT_ERR_IO, errno == ENOENT ? ENOENT : errno);
            target = resolved;
        }
        if (!S_ISREG(st.st_mode)) return fail_errno(NMT_ERR_IO, S_ISDIR(st.st_mode) ? EISDIR : ENODEV);
    }
    const size_t len = strlen(target);
    if (len >= cap) return fail_errno(NMT_ERR_IO, ENAMETOOLONG);
    memcpy(out, target, len + 1);
    return NMT_OK;
}

nmt_status nmt_write_file_atomic(const char *path_in, size_t size, nmt_fill_fn fill, void *user) {
    if (path_in == NULL || fill == NULL) return NMT_ERR_INVALID_ARGUMENT;
#if SIZE_MAX > INT64_MAX
    if (size > (size_t)INT64_MAX) return NMT_ERR_INVALID_ARGUMENT; /* off_t range */
#endif
    /* never rename over a device, a pipe or a directory; follow a link */
    char path[NMT_PLATFORM_PATH_MAX];
    nmt_status st = nmt_replace_target(path_in, path, sizeof path);
    if (st != NMT_OK) return st;

    /* Temporary file next to the target, so rename() stays on one filesystem. */
    char tmp[NMT_PLATFORM_PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof tmp) return fail_errno(NMT_ERR_IO, ENAMETOOLONG);
    int fd = mkstemp(tmp);
    if (fd < 0) return NMT_ERR_IO;

    int e = 0;
    void *map = NULL;
    /* mkstemp creates the file 0600; publish it with the usual 0644 so the
     * other users of a shared cache directory can read it. */
    if (fchmod(fd, 0644) != 0) e = errno;
    if (e == 0) e = reserve_blocks(fd, size);
    if (e == 0 && size > 0) {
        map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            map = NULL;
            e = errno;
        }
    }
    if (e == 0 && fill(user, map, size) != 0) e = ECANCELED;
    if (map != NULL) {
        if (e == 0 && msync(map, size, MS_SYNC) != 0) e = errno;
        if (munmap(map, size) != 0 && e == 0) e = errno;
    }
    if (e == 0 && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && e == 0) e = errno;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    if (e != 0) {
        unlink(tmp);
        return fail_errno(NMT_ERR_IO, e);
    }

    /* Make the rename itself durable: fsync the directory (best effort). */
    char dir[NMT_PLATFORM_PATH_MAX];
    memcpy(dir, path, strlen(path) + 1);  /* fits: shorter than tmp */
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        dir[0] = '.';
        dir[1] = '\0';
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return NMT_OK;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

nmt_status nmt_make_dirs(const char *path) {
    if (path == NULL || path[0] == '\0') return NMT_ERR_INVALID_ARGUMENT;
    char buf[NMT_PLATFORM_PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof buf) return fail_errno(NMT_ERR_IO, ENAMETOOLONG);
    memcpy(buf, path, len + 1);
    while (len > 1 && buf[len - 1] == '/') buf[--len] = '\0';  /* trailing slashes */

    /* Create each prefix ending before a '/', then the full path. */
    for (size_t i = 1; i <= len; i++) {
        if (i < len && buf[i] != '/') continue;
        if (i < len && buf[i - 1] == '/') continue;  /* "a//b" */
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0) {
            int e = errno;
            if (e != EEXIST || !is_dir(buf)) {
                buf[i] = saved;
                return fail_errno(NMT_ERR_IO, e == EEXIST ? ENOTDIR : e);
            }
        }
        buf[i] = saved;
    }
    return NMT_OK;
}

void nmt_remove_file(const char *path) {
    if (path != NULL) (void)unlink(path);
}

uint64_t nmt_host_llc_bytes(void) {
    uint64_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 8; i++) {
        char path[64], buf[32];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r")) == NULL) continue;
        const int ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        char *end = NULL;
        const unsigned long long v = ok ? strtoull(buf, &end, 10) : 0;
        if (v == 0 || end == buf) continue;
        const uint64_t bytes = (uint64_t)v * (*end == 'K' ? 1024u : *end == 'M' ? 1048576u : 1u);
        if (level > best_level || (level == best_level && bytes > best)) {
            best_level = level;
            best = bytes;
        }
    }
    return best;
}

int nmt_host_has_x86_vnni(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

int nmt_host_x86_lacks_avx512f(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return !__builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}
