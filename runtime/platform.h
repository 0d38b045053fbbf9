/* platform.h — the few operating-system services the runtime uses, kept in
 * one place (runtime/platform_posix.c) so a port touches one file: read-only
 * file mapping, atomic file replacement, directory creation.  None of them
 * allocates heap memory. */
#ifndef NMT_PLATFORM_H
#define NMT_PLATFORM_H

#include "nmt_edge.h"

#include <stddef.h>

typedef struct nmt_mapping {
    const void *data;   /* NULL for an empty file */
    size_t size;
} nmt_mapping;

/* Map a whole regular file read-only (MAP_PRIVATE: another process that
 * truncates or rewrites the file still changes what the mapping shows, so a
 * caller must copy what it keeps; the session does, session.c).  NMT_ERR_IO
 * if it cannot be opened/mapped, with errno EISDIR for a directory and
 * ENODEV for any other file that is not a regular one (a device such as
 * /dev/zero or /dev/null, a FIFO, a socket), refused without reading. */
nmt_status nmt_map_file(const char *path, nmt_mapping *m);
void nmt_unmap_file(nmt_mapping *m);

/* Atomically replace `path` with `size` bytes produced by `fill` (called
 * with a writable mapping of a temporary file in the same directory; return
 * nonzero to abort).  Temp file + fsync + rename: readers see the old file
 * or the new one, never a partial one. */
typedef int (*nmt_fill_fn)(void *user, void *dst, size_t size);
nmt_status nmt_write_file_atomic(const char *path, size_t size, nmt_fill_fn fill, void *user);

/* mkdir -p (mode 0755).  NMT_ERR_IO on failure. */
nmt_status nmt_make_dirs(const char *path);

/* Remove a file, ignoring errors. */
void nmt_remove_file(const char *path);

#endif
