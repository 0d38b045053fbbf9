/* SPDX-License-Identifier: MIT */
/* nmt_writer.c — the .nmt v1 writer (see nmt_writer.h, docs/FORMAT.md). */
#include "nmt_writer.h"

#include "platform.h"
#include "tool_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct nmtw_meta {
    char key[NMT_META_KEY_MAX];
    uint32_t key_len;
    nmt_meta_type type;
    uint8_t value[8];  /* i64 / f64, little-endian */
    char *str;         /* NMT_META_STR: malloc'd, str_len bytes */
    uint32_t str_len;
} nmtw_meta;

typedef struct nmtw_tensor {
    char name[NMT_TENSOR_NAME_MAX]; /* NUL-padded */
    nmt_dtype dtype;
    uint32_t ndim;
    uint32_t shape[NMT_MAX_DIMS];
    uint64_t nbytes;
    uint8_t *blob; /* exactly the on-disk bytes */
    uint32_t crc;
} nmtw_tensor;

struct nmtw_writer {
    nmtw_meta *meta;
    size_t n_meta, cap_meta;
    nmtw_tensor *tensors;
    size_t n_tensors, cap_tensors;
};

/* ------------------------------------------------------------------------ */
/* Little-endian stores                                                     */
/* ------------------------------------------------------------------------ */

static void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t align_up64(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------------ */
/* Building                                                                 */
/* ------------------------------------------------------------------------ */

nmtw_writer *nmtw_create(void) { return (nmtw_writer *)calloc(1, sizeof(nmtw_writer)); }

void nmtw_destroy(nmtw_writer *w) {
    if (w == NULL) return;
    for (size_t i = 0; i < w->n_meta; i++) free(w->meta[i].str);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].blob);
    free(w->meta);
    free(w->tensors);
    free(w);
}

size_t nmtw_tensor_count(const nmtw_writer *w) { return w ? w->n_tensors : 0; }
size_t nmtw_meta_count(const nmtw_writer *w) { return w ? w->n_meta : 0; }

/* Grow an array of `elem`-byte items to hold one more. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 16;
    if (nc > SIZE_MAX / elem) return 0;
    void *p = realloc(*arr, nc * elem);
    if (p == NULL) return 0;
    *arr = p;
    *cap = nc;
    return 1;
}

/* Slot for `key`: the existing record, or a new one at the end. */
static nmt_status meta_slot(nmtw_writer *w, const char *key, nmtw_meta **out) {
    if (w == NULL || key == NULL) return NMT_ERR_INVALID_ARGUMENT;
    size_t len = strlen(key);
    if (len == 0 || len >= NMT_META_KEY_MAX) return NMT_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < w->n_meta; i++) {
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].str);
            w->meta[i].str = NULL;
            w->meta[i].str_len = 0;
            *out = &w->meta[i];
            return NMT_OK;
        }
    }
    if (w->n_meta >= NMTW_MAX_META) return NMT_ERR_INVALID_ARGUMENT;
    if (!grow((void **)&w->meta, &w->cap_meta, w->n_meta, sizeof *w->meta)) return NMT_ERR_IO;
    nmtw_meta *m = &w->meta[w->n_meta++];
    memset(m, 0, sizeof *m);
    memcpy(m->key, key, len);
    m->key_len = (uint32_t)len;
    *out = m;
    return NMT_OK;
}

nmt_status nmtw_set_i64(nmtw_writer *w, const char *key, int64_t value) {
    nmtw_meta *m;
    nmt_status s = meta_slot(w, key, &m);
    if (s != NMT_OK) return s;
    uint64_t u;
    memcpy(&u, &value, sizeof u);
    m->type = NMT_META_I64;
    wr64(m->value, u);
    return NMT_OK;
}

nmt_status nmtw_set_f64(nmtw_writer *w, const char *key, double value) {
    nmtw_meta *m;
    nmt_status s = meta_slot(w, key, &m);
    if (s != NMT_OK) return s;
    uint64_t u;
    memcpy(&u, &value, sizeof u);
    m->type = NMT_META_F64;
    wr64(m->value, u);
    return NMT_OK;
}

nmt_status nmtw_set_str(nmtw_writer *w, const char *key, const char *value) {
    if (value == NULL) return NMT_ERR_INVALID_ARGUMENT;
    size_t len = strlen(value);
    if (len > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    char *copy = (char *)malloc(len ? len : 1);
    if (copy == NULL) return NMT_ERR_IO;
    memcpy(copy, value, len);
    nmtw_meta *m;
    nmt_status s = meta_slot(w, key, &m);
    if (s != NMT_OK) {
        free(copy);
        return s;
    }
    m->type = NMT_META_STR;
    m->str = copy;
    m->str_len = (uint32_t)len;
    return NMT_OK;
}

nmt_status nmtw_add_tensor(nmtw_writer *w, const char *name, nmt_dtype dtype, uint32_t ndim,
                           const uint32_t *shape, const void *data, const float *scales) {
    if (w == NULL || name == NULL || shape == NULL || data == NULL) return NMT_ERR_INVALID_ARGUMENT;
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len >= NMT_TENSOR_NAME_MAX) return NMT_ERR_INVALID_ARGUMENT;
    if ((unsigned)dtype >= NMT_DTYPE_COUNT_) return NMT_ERR_INVALID_ARGUMENT;
    if (ndim < 1 || ndim > NMT_MAX_DIMS) return NMT_ERR_INVALID_ARGUMENT;
    if (dtype == NMT_DTYPE_U8 && ndim != 1) return NMT_ERR_INVALID_ARGUMENT;
    if ((dtype == NMT_DTYPE_I8) != (scales != NULL)) return NMT_ERR_INVALID_ARGUMENT;
    if (w->n_tensors >= NMTW_MAX_TENSORS) return NMT_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return NMT_ERR_INVALID_ARGUMENT;

    uint64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] == 0 || n > UINT64_MAX / shape[d]) return NMT_ERR_INVALID_ARGUMENT;
        n *= shape[d];
    }
    uint64_t elem_bytes;  /* bytes of the elements */
    uint64_t nbytes;      /* bytes on disk */
    uint64_t scales_at = 0;
    if (n > (uint64_t)SIZE_MAX / 8) return NMT_ERR_INVALID_ARGUMENT;
    elem_bytes = n * nmt_dtype_table[dtype].bytes;
    if (dtype == NMT_DTYPE_I8) {
        scales_at = align_up64(n, 4);
        nbytes = scales_at + 4u * (uint64_t)shape[0];
    } else {
        nbytes = elem_bytes;
    }
    if (nbytes > (uint64_t)SIZE_MAX) return NMT_ERR_INVALID_ARGUMENT;

    if (!grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors)) return NMT_ERR_IO;
    uint8_t *blob = (uint8_t *)calloc(1, (size_t)nbytes);
    if (blob == NULL) return NMT_ERR_IO;
    memcpy(blob, data, (size_t)elem_bytes);
    if (dtype == NMT_DTYPE_I8) {
        for (uint32_t r = 0; r < shape[0]; r++) {
            uint32_t bits;
            memcpy(&bits, &scales[r], sizeof bits);
            wr32(blob + scales_at + 4u * (uint64_t)r, bits);
        }
    } else if (dtype == NMT_DTYPE_F32 || dtype == NMT_DTYPE_F16) {
        /* host order -> little-endian (a no-op on little-endian hosts) */
        size_t eb = nmt_dtype_table[dtype].bytes;
        for (uint64_t i = 0; i < n; i++) {
            uint8_t *p = blob + i * eb;
            if (eb == 4) {
                uint32_t v;
                memcpy(&v, p, 4);
                wr32(p, v);
            } else {
                uint16_t v;
                memcpy(&v, p, 2);
                wr16(p, v);
            }
        }
    }

    nmtw_tensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, name_len);
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    t->nbytes = nbytes;
    t->blob = blob;
    t->crc = nmt_crc32(0, blob, (size_t)nbytes);
    return NMT_OK;
}

nmt_status nmtw_add_f32(nmtw_writer *w, const char *name, uint32_t ndim, const uint32_t *shape,
                        const float *data) {
    return nmtw_add_tensor(w, name, NMT_DTYPE_F32, ndim, shape, data, NULL);
}

nmt_status nmtw_add_blob(nmtw_writer *w, const char *name, const void *data, uint32_t size) {
    return nmtw_add_tensor(w, name, NMT_DTYPE_U8, 1, &size, data, NULL);
}

/* ------------------------------------------------------------------------ */
/* Layout and serialisation                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t meta_record_size(const nmtw_meta *m) {
    uint64_t v = m->type == NMT_META_STR ? m->str_len : 8u;
    return 8u + align_up64(m->key_len, 8) + align_up64(v, 8);
}

typedef struct layout {
    uint64_t meta_offset, meta_size;
    uint64_t table_offset, table_size;
    uint64_t data_offset;
    uint64_t file_size;
} layout;

static uint64_t tensor_offset(uint64_t end) { return align_up64(end, NMT_DATA_ALIGN); }

static void compute_layout(const nmtw_writer *w, layout *L) {
    L->meta_offset = NMT_FILE_HEADER_SIZE;
    L->meta_size = 0;
    for (size_t i = 0; i < w->n_meta; i++) L->meta_size += meta_record_size(&w->meta[i]);
    L->table_offset = L->meta_offset + L->meta_size;
    L->table_size = (uint64_t)w->n_tensors * NMT_TENSOR_ENTRY_SIZE;
    L->data_offset = align_up64(L->table_offset + L->table_size, NMT_DATA_ALIGN);
    uint64_t end = L->data_offset;
    for (size_t i = 0; i < w->n_tensors; i++) end = tensor_offset(end) + w->tensors[i].nbytes;
    L->file_size = end;
}

uint64_t nmtw_file_size(const nmtw_writer *w) {
    if (w == NULL) return 0;
    layout L;
    compute_layout(w, &L);
    return L.file_size;
}

/* Header, metadata and table: the first data_offset bytes of the file. */
static uint8_t *build_prefix(const nmtw_writer *w, const layout *L) {
    uint8_t *buf = (uint8_t *)calloc(1, (size_t)L->data_offset);
    if (buf == NULL) return NULL;

    uint8_t *p = buf + L->meta_offset;
    for (size_t i = 0; i < w->n_meta; i++) {
        const nmtw_meta *m = &w->meta[i];
        wr16(p, (uint16_t)m->key_len);
        p[2] = (uint8_t)m->type;
        p[3] = 0;
        wr32(p + 4, m->type == NMT_META_STR ? m->str_len : 1u);
        memcpy(p + 8, m->key, m->key_len);
        uint8_t *v = p + 8 + align_up64(m->key_len, 8);
        if (m->type == NMT_META_STR) {
            if (m->str_len) memcpy(v, m->str, m->str_len);
        } else {
            memcpy(v, m->value, 8);
        }
        p += meta_record_size(m);
    }

    uint64_t end = L->data_offset;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const nmtw_tensor *t = &w->tensors[i];
        uint8_t *e = buf + L->table_offset + i * NMT_TENSOR_ENTRY_SIZE;
        uint64_t off = tensor_offset(end);
        end = off + t->nbytes;
        memcpy(e, t->name, NMT_TENSOR_NAME_MAX);
        wr32(e + 80, (uint32_t)t->dtype);
        wr32(e + 84, t->ndim);
        for (uint32_t d = 0; d < NMT_MAX_DIMS; d++) wr32(e + 88 + 4 * d, t->shape[d]);
        wr64(e + 104, off);
        wr64(e + 112, t->nbytes);
        wr32(e + 120, t->crc);
        wr32(e + 124, 0);
    }

    memcpy(buf, NMT_FILE_MAGIC, 8);
    wr32(buf + 8, NMT_FILE_VERSION);
    wr32(buf + 12, NMT_FILE_HEADER_SIZE);
    wr64(buf + 16, L->file_size);
    wr64(buf + 24, L->meta_offset);
    wr64(buf + 32, L->meta_size);
    wr64(buf + 40, L->table_offset);
    wr32(buf + 48, (uint32_t)w->n_tensors);
    wr32(buf + 52, (uint32_t)w->n_meta);
    wr64(buf + 56, L->data_offset);
    wr32(buf + 64, nmt_crc32(0, buf + L->meta_offset, (size_t)L->meta_size));
    wr32(buf + 68, nmt_crc32(0, buf + L->table_offset, (size_t)L->table_size));
    wr32(buf + 124, nmt_crc32(0, buf, 124));
    return buf;
}

/* Output: either a memory buffer or a stdio stream. */
typedef struct sink {
    uint8_t *mem;
    FILE *fp;
    uint64_t pos;
    int failed;
} sink;

static void sink_put(sink *s, const void *p, uint64_t n) {
    if (s->failed || n == 0) return;
    if (s->mem) memcpy(s->mem + s->pos, p, (size_t)n);
    else if (fwrite(p, 1, (size_t)n, s->fp) != (size_t)n) s->failed = 1;
    s->pos += n;
}

static void sink_zeros(sink *s, uint64_t n) {
    static const uint8_t zeros[NMT_DATA_ALIGN];
    while (n > 0 && !s->failed) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        sink_put(s, zeros, k);
        n -= k;
    }
}

static nmt_status emit(const nmtw_writer *w, sink *s) {
    layout L;
    compute_layout(w, &L);
    if (L.file_size > (uint64_t)SIZE_MAX) return NMT_ERR_INVALID_ARGUMENT;
    uint8_t *prefix = build_prefix(w, &L);
    if (prefix == NULL) return NMT_ERR_IO;
    sink_put(s, prefix, L.data_offset);
    free(prefix);
    for (size_t i = 0; i < w->n_tensors; i++) {
        sink_zeros(s, tensor_offset(s->pos) - s->pos);
        sink_put(s, w->tensors[i].blob, w->tensors[i].nbytes);
    }
    return s->failed ? NMT_ERR_IO : NMT_OK;
}

nmt_status nmtw_write_buffer(const nmtw_writer *w, void *dst, size_t size) {
    if (w == NULL || dst == NULL || (uint64_t)size != nmtw_file_size(w)) return NMT_ERR_INVALID_ARGUMENT;
    sink s = {.mem = (uint8_t *)dst};
    return emit(w, &s);
}

nmt_status nmtw_write_memory(const nmtw_writer *w, void **out, size_t *out_size) {
    if (w == NULL || out == NULL || out_size == NULL) return NMT_ERR_INVALID_ARGUMENT;
    *out = NULL;
    *out_size = 0;
    uint64_t size = nmtw_file_size(w);
    if (size > (uint64_t)SIZE_MAX) return NMT_ERR_INVALID_ARGUMENT;
    void *buf = malloc((size_t)size);
    if (buf == NULL) return NMT_ERR_IO;
    nmt_status st = nmtw_write_buffer(w, buf, (size_t)size);
    if (st != NMT_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_size = (size_t)size;
    return NMT_OK;
}

/* fsync the directory holding `path` so the rename itself is durable.
 * Best effort: some file systems refuse fsync on directories. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (slash == NULL) {
        dir = (char *)malloc(2);
        if (dir) memcpy(dir, ".", 2);
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = (char *)malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (dir == NULL) return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* The kind of a file that is not a regular one, as a phrase. */
static const char *kind_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return "not a regular file";
    if (S_ISDIR(st.st_mode)) return "a directory";
    if (S_ISCHR(st.st_mode)) return "not a regular file (a character device)";
    if (S_ISBLK(st.st_mode)) return "not a regular file (a block device)";
    if (S_ISFIFO(st.st_mode)) return "not a regular file (a pipe or FIFO)";
    if (S_ISSOCK(st.st_mode)) return "not a regular file (a socket)";
    return "not a regular file";
}

/* "cannot write 'PATH': REASON" into why (when given); errno = e. */
static nmt_status write_fail(int e, char *why, size_t cap, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static nmt_status write_fail(int e, char *why, size_t cap, const char *path, const char *fmt, ...) {
    if (why != NULL && cap > 0) {
        int n = snprintf(why, cap, "cannot write '%s': ", path);
        if (n >= 0 && (size_t)n < cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(why + n, cap - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    errno = e;
    return NMT_ERR_IO;
}

/* The directory part of `path` ("." when none), into dir[cap]. */
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) snprintf(dir, cap, ".");
    else snprintf(dir, cap, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

nmt_status nmtw_write_file_why(const nmtw_writer *w, const char *path_in, char *why, size_t why_cap) {
    if (why != NULL && why_cap > 0) why[0] = '\0';
    if (w == NULL || path_in == NULL || path_in[0] == '\0') return NMT_ERR_INVALID_ARGUMENT;
    /* What may be replaced (platform.h): a regular file or a new path; a
     * symbolic link is written through to its target. */
    char path[4096];
    if (nmt_replace_target(path_in, path, sizeof path) != NMT_OK) {
        const int e = errno;
        if (e == ENODEV || e == EISDIR)
            return write_fail(e, why, why_cap, path_in, "%s; only a regular file or a new path is replaced",
                              kind_of(path_in));
        if (e == ENOENT) return write_fail(e, why, why_cap, path_in, "a symbolic link to a missing file");
        return write_fail(e, why, why_cap, path_in, "%s", strerror(e));
    }
    size_t cap = strlen(path) + 48;
    char *tmp = (char *)malloc(cap);
    if (tmp == NULL) return write_fail(ENOMEM, why, why_cap, path_in, "out of memory");

    /* O_EXCL with a fresh name: never clobbers someone else's file; mode
     * 0666 minus the umask, like any newly created file.  The temporary is
     * registered so that a terminating signal removes it (tool_out.h). */
    int fd = -1;
    for (unsigned attempt = 0; attempt < 1000 && fd < 0; attempt++) {
        snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        const int e = errno;
        char dir[4096];
        dir_of(path, dir, sizeof dir);
        free(tmp);
        if (e == ENOENT || e == ENOTDIR)
            return write_fail(e, why, why_cap, path_in, "the directory '%s' does not exist", dir);
        return write_fail(e, why, why_cap, path_in, "cannot create a file in '%s': %s", dir, strerror(e));
    }
    nmt_tool_tmp_begin(tmp);
    FILE *fp = fdopen(fd, "wb");
    int e = 0;
    nmt_status st = NMT_OK;
    if (fp == NULL) {
        e = errno;
        close(fd);
        st = NMT_ERR_IO;
    } else {
        sink s = {.fp = fp};
        st = emit(w, &s);
        if (st == NMT_OK && s.failed) st = NMT_ERR_IO;
        if (st != NMT_OK && e == 0) e = errno;
        if (st == NMT_OK && fflush(fp) != 0) st = NMT_ERR_IO, e = errno;
        if (st == NMT_OK && fsync(fileno(fp)) != 0) st = NMT_ERR_IO, e = errno;
        if (fclose(fp) != 0 && st == NMT_OK) st = NMT_ERR_IO, e = errno;
    }
    if (st == NMT_OK && rename(tmp, path) != 0) {
        st = NMT_ERR_IO;
        e = errno;
        unlink(tmp);
        nmt_tool_tmp_end();
        free(tmp);
        return write_fail(e, why, why_cap, path_in, "renaming the temporary file into place: %s", strerror(e));
    }
    if (st != NMT_OK) unlink(tmp);
    else sync_parent_dir(path);
    nmt_tool_tmp_end();
    free(tmp);
    if (st == NMT_ERR_IO)
        return write_fail(e ? e : EIO, why, why_cap, path_in, "%s (the file was not replaced)",
                          e == ENOMEM ? "out of memory" : strerror(e ? e : EIO));
    return st;
}

nmt_status nmtw_write_file(const nmtw_writer *w, const char *path) { return nmtw_write_file_why(w, path, NULL, 0); }
