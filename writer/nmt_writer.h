/* SPDX-License-Identifier: MIT */
/* nmt_writer.h — builds .nmt model files, format version 1 (docs/FORMAT.md).
 *
 * The one writer of the project, shared by convert/, train/ and the tests.
 * It is not part of the runtime and allocates freely.  Typical use:
 *
 *     nmtw_writer *w = nmtw_create();
 *     nmtw_set_str(w, "arch", "transformer");
 *     nmtw_set_i64(w, "d_model", 512);
 *     nmtw_add_tensor(w, "src_embed", NMT_DTYPE_F32, 2, (uint32_t[]){V, 512}, data, NULL);
 *     nmt_status s = nmtw_write_file(w, "model.nmt");
 *     nmtw_destroy(w);
 *
 * Output is deterministic: metadata in the order keys were first set,
 * tensors in the order they were added, every padding byte zero.  Layout:
 * header at 0, metadata at 128, tensor table right after it (8-aligned),
 * tensor data from the next multiple of 64, each tensor at the next multiple
 * of 64 after the previous one; file_size = end of the last tensor.
 *
 * Errors: NMT_ERR_INVALID_ARGUMENT for anything the reader would reject
 * (bad key/name, duplicate name, bad shape, limits), NMT_ERR_IO for file
 * errors (errno kept; nmtw_write_file_why says why) and for running out of
 * memory.
 */
#ifndef NMT_WRITER_H
#define NMT_WRITER_H

#include "format.h"
#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits the v1 reader enforces (runtime/model/format.c); the writer refuses to
 * exceed them. */
#define NMTW_MAX_TENSORS 16384u
#define NMTW_MAX_META 4096u

typedef struct nmtw_writer nmtw_writer;

/* NULL when out of memory. */
nmtw_writer *nmtw_create(void);
void nmtw_destroy(nmtw_writer *w);

/* Metadata.  Keys are 1..63 bytes.  Setting a key again replaces its value
 * and type in place (the record keeps its first position), so a file never
 * holds a key twice.  Strings must be shorter than 4 GiB. */
nmt_status nmtw_set_i64(nmtw_writer *w, const char *key, int64_t value);
nmt_status nmtw_set_f64(nmtw_writer *w, const char *key, double value);
nmt_status nmtw_set_str(nmtw_writer *w, const char *key, const char *value);

/* Add a tensor; the data are copied.  name: 1..79 bytes, unique.  ndim 1..4,
 * every dim >= 1, shape outermost first.  `data` holds n = prod(shape)
 * elements of the dtype (F32: float, F16: uint16_t binary16 bits, I8: int8_t,
 * U8: bytes; U8 tensors are 1-D).  For I8, `scales` holds shape[0] floats
 * (row r = all elements with first index r; w = q * scales[r]); for the other
 * dtypes `scales` must be NULL. */
nmt_status nmtw_add_tensor(nmtw_writer *w, const char *name, nmt_dtype dtype, uint32_t ndim,
                           const uint32_t *shape, const void *data, const float *scales);

/* Shorthands. */
nmt_status nmtw_add_f32(nmtw_writer *w, const char *name, uint32_t ndim, const uint32_t *shape,
                        const float *data);
nmt_status nmtw_add_blob(nmtw_writer *w, const char *name, const void *data, uint32_t size);

/* Number of tensors / metadata records added so far. */
size_t nmtw_tensor_count(const nmtw_writer *w);
size_t nmtw_meta_count(const nmtw_writer *w);

/* Exact size in bytes of the file the writer would produce now. */
uint64_t nmtw_file_size(const nmtw_writer *w);

/* Serialise into dst, which must be exactly nmtw_file_size() bytes. */
nmt_status nmtw_write_buffer(const nmtw_writer *w, void *dst, size_t size);

/* Serialise into a new malloc'd buffer (release with free()). */
nmt_status nmtw_write_memory(const nmtw_writer *w, void **out, size_t *out_size);

/* Write the file atomically: a temporary file in the same directory is
 * written, flushed, fsync'ed and renamed over `path`.  On any failure the
 * temporary file is removed and an existing `path` is left untouched. */
nmt_status nmtw_write_file(const nmtw_writer *w, const char *path);

/* The same, saying why it failed: on NMT_ERR_IO, why[0, why_cap) holds
 * "cannot write 'PATH': REASON" with errno's reason and what it means here:
 * "the directory 'D' does not exist", "cannot create a file in 'D':
 * Read-only file system", "No space left on device (the file was not
 * replaced)", "not a regular file (a character device); only a regular
 * file or a new path is replaced" (docs/RELIABILITY.md, "files replaced or
 * lost").  Only a regular file or a missing path is replaced; a symbolic
 * link is written through to its target.  A terminating signal during the
 * write removes the temporary file (tools/tool_out.h).  why may be NULL. */
nmt_status nmtw_write_file_why(const nmtw_writer *w, const char *path, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
