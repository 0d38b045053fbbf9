/* SPDX-License-Identifier: MIT */
/* format.h — the .nmt model file, version 1: on-disk structures and the
 * reader's view.  docs/FORMAT.md is the byte-level specification; keep the
 * two in step.  All integers little-endian.  The reader treats the image as
 * untrusted: every offset/size is bounds-checked before use.
 *
 *   [0, 128)            nmt_file_header
 *   [meta_offset, +meta_size)    metadata: sequence of key/value records
 *   [table_offset, +n_tensors*128) tensor table: nmt_tensor_entry[n_tensors]
 *   [data_offset, file_size)     tensor data, each tensor 64-byte aligned
 */
#ifndef NMT_FORMAT_H
#define NMT_FORMAT_H

#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>

#define NMT_FILE_MAGIC "NMTEDGE\x1a"   /* 8 bytes */
#define NMT_FILE_VERSION 1u
#define NMT_FILE_HEADER_SIZE 128u
#define NMT_TENSOR_ENTRY_SIZE 128u
#define NMT_DATA_ALIGN 64u
#define NMT_TENSOR_NAME_MAX 80u        /* incl. the terminating NUL */
#define NMT_META_KEY_MAX 64u           /* incl. NUL */
#define NMT_MAX_DIMS 4u

/* Tensor element types.  Append-only; values are stored in files. */
typedef enum nmt_dtype {
    NMT_DTYPE_F32 = 0,
    NMT_DTYPE_F16 = 1,   /* IEEE binary16 */
    NMT_DTYPE_I8 = 2,    /* symmetric int8, fp32 per-row scales (see FORMAT.md) */
    NMT_DTYPE_U8 = 3,    /* opaque bytes: embedded tokenizer models and other blobs */
    NMT_DTYPE_COUNT_
} nmt_dtype;

typedef struct nmt_dtype_traits {
    const char *name;
    uint32_t bytes;  /* bytes per element */
} nmt_dtype_traits;

extern const nmt_dtype_traits nmt_dtype_table[NMT_DTYPE_COUNT_];

/* Metadata value types.  Append-only. */
typedef enum nmt_meta_type {
    NMT_META_I64 = 1,  /* int64 */
    NMT_META_F64 = 2,  /* IEEE binary64 */
    NMT_META_STR = 3   /* UTF-8 bytes, no NUL on disk */
} nmt_meta_type;

/* Fixed header, 128 bytes. */
typedef struct nmt_file_header {
    char magic[8];           /*   0: "NMTEDGE\x1a" */
    uint32_t version;        /*   8: 1 */
    uint32_t header_size;    /*  12: 128 */
    uint64_t file_size;      /*  16: total bytes of the file */
    uint64_t meta_offset;    /*  24 */
    uint64_t meta_size;      /*  32 */
    uint64_t table_offset;   /*  40 */
    uint32_t n_tensors;      /*  48 */
    uint32_t n_meta;         /*  52: number of metadata records */
    uint64_t data_offset;    /*  56: 64-aligned start of tensor data */
    uint32_t meta_crc;       /*  64: CRC-32 of the metadata bytes */
    uint32_t table_crc;      /*  68: CRC-32 of the tensor table bytes */
    uint8_t reserved[52];    /*  72: zero */
    uint32_t header_crc;     /* 124: CRC-32 of bytes [0, 124) */
} nmt_file_header;
_Static_assert(sizeof(nmt_file_header) == NMT_FILE_HEADER_SIZE, "header is 128 bytes");

/* Tensor table entry, 128 bytes. */
typedef struct nmt_tensor_entry {
    char name[NMT_TENSOR_NAME_MAX]; /*   0: NUL-terminated, NUL-padded */
    uint32_t dtype;                 /*  80: nmt_dtype */
    uint32_t ndim;                  /*  84: 1..4 */
    uint32_t shape[NMT_MAX_DIMS];   /*  88: outermost first; unused dims 0 */
    uint64_t offset;                /* 104: absolute, multiple of 64, >= data_offset */
    uint64_t nbytes;                /* 112: elements * dtype bytes (+ scales for I8) */
    uint32_t crc;                   /* 120: CRC-32 of the nbytes data bytes */
    uint32_t reserved;              /* 124: zero */
} nmt_tensor_entry;
_Static_assert(sizeof(nmt_tensor_entry) == NMT_TENSOR_ENTRY_SIZE, "entry is 128 bytes");

/* Reader's view of a validated tensor (points into the image). */
typedef struct nmt_tensor_view {
    const char *name;
    nmt_dtype dtype;
    uint32_t ndim;
    uint32_t shape[NMT_MAX_DIMS];
    uint64_t n_elements;
    const void *data;        /* n_elements * dtype bytes */
    const float *scales;     /* I8 only: shape[0] fp32 scales after the data; else NULL */
    uint64_t nbytes;
} nmt_tensor_view;

/* A validated image.  Holds only pointers into it: no allocation. */
typedef struct nmt_file {
    const uint8_t *data;
    size_t size;
    const nmt_file_header *hdr; /* points into data (aligned copy not needed: read via memcpy) */
    nmt_file_header h;          /* decoded copy */
    /* Where the reader and the family code say why a model is refused (the
     * caller's buffer, NULL: nowhere): nmt_file_open_why. */
    char *why;
    size_t why_cap;
} nmt_file;

/* Validate header, metadata, table and (if verify_data) every tensor CRC.
 * Statuses: MODEL_TRUNCATED, MODEL_BAD_MAGIC, MODEL_VERSION, MODEL_CHECKSUM,
 * MODEL_CORRUPT, INVALID_ARGUMENT. */
nmt_status nmt_file_open(nmt_file *f, const void *data, size_t size, int verify_data);

/* The same, with a detail buffer (why[0, why_cap), may be NULL): a refusal
 * writes one line naming the region, the metadata key or the tensor and
 * what was expected and found, e.g. "tensor 'enc.0.ffn.fc1.weight': CRC-32
 * 0x1a2b3c4d stored, 0x5e6f7081 computed (the data are damaged)".  The
 * buffer stays attached to f (f->why): the getters below, nmt_file_expect
 * and the family code (families/registry.c) write their refusals there too,
 * so after a failing call it holds the reason of that failure.  why[0] is
 * set to '\0' first. */
nmt_status nmt_file_open_why(nmt_file *f, const void *data, size_t size, int verify_data, char *why,
                             size_t why_cap);

/* printf into why[0, cap) (nothing when why is NULL or cap is 0); cut to fit. */
void nmt_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "[64, 32]" for ndim dims into buf[cap]. */
void nmt_shape_str(uint32_t ndim, const uint32_t *shape, char *buf, size_t cap);

/* Metadata lookup.  NMT_ERR_MODEL_ARCH if absent (when required) or of the
 * wrong type (the key and the types in f->why).  Strings are copied NUL-terminated into buf (truncation is an
 * error: MODEL_CORRUPT). */
nmt_status nmt_file_get_i64(const nmt_file *f, const char *key, int64_t *out);
nmt_status nmt_file_get_f64(const nmt_file *f, const char *key, double *out);
nmt_status nmt_file_get_str(const nmt_file *f, const char *key, char *buf, size_t cap);
/* Optional variants: return def / leave buf when absent; still fail on a wrong type. */
nmt_status nmt_file_get_i64_or(const nmt_file *f, const char *key, int64_t def, int64_t *out);
nmt_status nmt_file_get_f64_or(const nmt_file *f, const char *key, double def, double *out);
nmt_status nmt_file_get_str_or(const nmt_file *f, const char *key, const char *def, char *buf,
                               size_t cap);

/* Metadata record i (0 .. n_meta-1, file order) of an opened file.  The key
 * is copied NUL-terminated; a str value points into the image (str_len
 * bytes, not NUL-terminated).  NMT_ERR_INVALID_ARGUMENT for i >= n_meta. */
typedef struct nmt_meta_view {
    char key[NMT_META_KEY_MAX];
    nmt_meta_type type;
    int64_t i64;          /* NMT_META_I64 */
    double f64;           /* NMT_META_F64 */
    const char *str;      /* NMT_META_STR */
    uint32_t str_len;
} nmt_meta_view;

nmt_status nmt_file_meta_at(const nmt_file *f, uint32_t i, nmt_meta_view *out);

/* Tensor lookup by name; NMT_ERR_MODEL_MISSING_TENSOR if absent. */
nmt_status nmt_file_find(const nmt_file *f, const char *name, nmt_tensor_view *out);
/* Tensor by index (0 .. n_tensors-1). */
nmt_status nmt_file_tensor_at(const nmt_file *f, uint32_t i, nmt_tensor_view *out);

/* Lookup with an expected shape (ndim and dims; dtype must be F32/F16/I8).
 * NMT_ERR_MODEL_MISSING_TENSOR when absent, NMT_ERR_MODEL_TENSOR_SHAPE on
 * mismatch (the name, the expected and the found shape / dtype in f->why). */
nmt_status nmt_file_expect(const nmt_file *f, const char *name, uint32_t ndim, const uint32_t *shape,
                           nmt_tensor_view *out);

/* CRC-32 (IEEE 802.3, the zlib/PNG polynomial; crc32(0, ...) chaining). */
uint32_t nmt_crc32(uint32_t crc, const void *data, size_t n);

/* IEEE half -> float. */
float nmt_half_to_float(uint16_t h);
uint16_t nmt_float_to_half(float f);

#endif
