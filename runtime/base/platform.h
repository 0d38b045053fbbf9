/* SPDX-License-Identifier: MIT */
/* platform.h — the few operating-system services the runtime uses, kept in
 * one place (runtime/base/platform_posix.c) so a port touches one file: read-only
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

/* Give back the resident pages of bytes [p, p + n) of mapping m (the pages
 * that hold any of them, clipped to the mapping): the mapping stays valid
 * and a later read brings the bytes in again from the file.  Lets a session
 * that has copied a tensor to the device, or checked its CRC, keep the
 * file's pages out of its resident set, so that peak memory is the larger of
 * the file and the device buffers, not their sum.  Does nothing where the
 * system has no such call, and for bytes outside m. */
void nmt_mapping_release(const nmt_mapping *m, const void *p, size_t n);

/* Where an atomic replacement of `path` writes (docs/RELIABILITY.md, "files
 * replaced or lost"): `path` itself when it is a regular file or does not
 * exist; for a symbolic link, the regular file it points to (the link is
 * written through and stays a link).  Anything else is refused with
 * NMT_ERR_IO and errno: ENODEV for a device, a FIFO or a socket (/dev/full
 * is never replaced by a regular file), EISDIR for a directory, ENOENT for a
 * link to a missing file, ENAMETOOLONG when the result does not fit in
 * out[cap]. */
nmt_status nmt_replace_target(const char *path, char *out, size_t cap);

/* Atomically replace `path` with `size` bytes produced by `fill` (called
 * with a writable mapping of a temporary file in the same directory; return
 * nonzero to abort).  Temp file + fsync + rename: readers see the old file
 * or the new one, never a partial one.  Only what nmt_replace_target()
 * accepts is replaced (its errno otherwise); the temporary is removed on
 * every error. */
typedef int (*nmt_fill_fn)(void *user, void *dst, size_t size);
nmt_status nmt_write_file_atomic(const char *path, size_t size, nmt_fill_fn fill, void *user);

/* mkdir -p (mode 0755).  NMT_ERR_IO on failure. */
nmt_status nmt_make_dirs(const char *path);

/* Remove a file, ignoring errors. */
void nmt_remove_file(const char *path);

/* 1 when the host CPU executes AVX-512 VNNI and the OS saves the AVX-512
 * state (libgcc's and compiler-rt's feature bits include that check); 0
 * elsewhere, and always outside x86-64 GCC / clang builds. */
int nmt_host_has_x86_vnni(void);

/* 1 on an x86-64 host (GCC / clang builds) whose CPU or OS lacks AVX-512F:
 * where clang warns of the ABI of every 512-bit vector passed by value
 * (runtime/device/device.h, nmt_build_log_abi_note); 0 elsewhere. */
int nmt_host_x86_lacks_avx512f(void);

/* Bytes of the host CPU's largest cache as Linux describes it for CPU 0
 * (/sys/devices/system/cpu/cpu0/cache/index*: the highest level's size,
 * the cache one core's complex shares, e.g. an EPYC CCX's L3); 0 where the
 * files are missing or unreadable. */
uint64_t nmt_host_llc_bytes(void);

#endif
