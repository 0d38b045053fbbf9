/* SPDX-License-Identifier: MIT */
/* tuning.h — per-device kernel parameters: which GEMM provider and which
 * -D knobs each product uses, per shape class, plus the work-group sizes of
 * the other kernels.
 *
 * Resolution at nmt_device_open(), later steps overriding earlier ones:
 *   1. the built-in table (tuning.c), keyed by device type, platform/vendor
 *      and name substrings; its first row is the default that works on every
 *      OpenCL 1.2 device;
 *   2. the tuning cache file <cache_dir>/tuning-<16 hex digits>.txt written
 *      by the tuner (bench/nmt_edge_tune.c), the digits being the device's
 *      identity hash (same as the program cache's; docs/PERFORMANCE.md gives
 *      the format);
 *   3. nmt_device_params.gemm when it is not AUTO (forces the provider of
 *      every fp32 product).
 * Everything here is plain data: no allocation, no OpenCL objects. */
#ifndef NMT_TUNING_H
#define NMT_TUNING_H

#include "common.h"

/* The products with tunable kernels. */
typedef enum nmt_gemm_op {
    NMT_GOP_NT = 0,   /* fp32, B = [N,K] (weights) */
    NMT_GOP_NN = 1,   /* fp32, B = [K,N] */
    NMT_GOP_Q8 = 2,   /* int8 weights [N,K] with per-row scales (own kernels only) */
    NMT_GOP_I8 = 3,   /* the same products with int8 activations (cl/gemm_i8.cl; own only) */
    NMT_GOP_COUNT
} nmt_gemm_op;

/* Shape classes by the number of rows M: decoding steps of one beam, of a
 * few beams or sentences, and everything else (encoders, scoring, training). */
typedef enum nmt_gemm_class {
    NMT_GCLASS_M2 = 0,    /* M <= 2 */
    NMT_GCLASS_M16 = 1,   /* 3 <= M <= 16 */
    NMT_GCLASS_BIG = 2,   /* M > 16 */
    NMT_GCLASS_COUNT
} nmt_gemm_class;

static inline nmt_gemm_class nmt_gemm_class_of(uint32_t M) {
    return M <= 2 ? NMT_GCLASS_M2 : M <= 16 ? NMT_GCLASS_M16 : NMT_GCLASS_BIG;
}

/* One kernel configuration: the provider and, for our kernels, the -D knobs
 * of cl/gemm.cl, cl/gemm_q8.cl and cl/gemm_i8.cl and the local size along dimension 0. */
typedef struct nmt_gemm_cfg {
    uint8_t provider;   /* NMT_GEMM_OWN or NMT_GEMM_CLBLAST */
    uint8_t tm, tn;     /* block of C per work-item (GEMM_TM, GEMM_TN) */
    uint8_t vw;         /* GEMM_VW: 1, 2, 4, 8 or 16 */
    uint8_t mfast;      /* GEMM_MFAST */
    uint16_t wg;        /* work-items per group (power of two; clamped to the device) */
    uint8_t kgroup;     /* 1: a work-group of wg per column of C and block of tm rows,
                           splitting K (cl/common.cl GEMM_KGROUP; GPUs' few-row
                           products); NT and Q8 only, tn 1, mfast 0 */
} nmt_gemm_cfg;

/* Which kernel the int8-weight products of a shape class use (ops_i8dot.c):
 * AUTO = int8 x int8 where the device has integer dot products, else int8
 * weights x fp32; OFF = always int8 weights x fp32; ON = always int8 x int8
 * (with the built-in where present, else the portable kernel).  The tuner
 * writes OFF or ON, whichever it measured faster. */
enum { NMT_I8DOT_AUTO = 0, NMT_I8DOT_OFF = 1, NMT_I8DOT_ON = 2 };

typedef struct nmt_tuning {
    nmt_gemm_cfg gemm[NMT_GOP_COUNT][NMT_GCLASS_COUNT];
    uint8_t i8dot[NMT_GCLASS_COUNT]; /* NMT_I8DOT_* per shape class */
    uint16_t wg;            /* element-wise and attention kernels: local size (power of two) */
    uint16_t reduce_wg;     /* per-row reductions (layernorm, log_softmax) */
    char origin[160];       /* where it came from: "table: ...", "cache: <path>" */
} nmt_tuning;

/* The built-in table's choice for a device (always succeeds). */
void nmt_tuning_from_table(nmt_tuning *t, const nmt_device_info *info);

/* Row i of the built-in table into t (origin "table: <label>"), for tests
 * and tools that walk every row; 0 (t untouched) past the last row. */
int nmt_tuning_table_row(size_t i, nmt_tuning *t);

/* 1 if every field of t is in range: each product's configuration
 * (nmt_gemm_cfg_valid), i8dot, and wg and reduce_wg (powers of two up to
 * 1024, as a tuning file must give them). */
int nmt_tuning_valid(const nmt_tuning *t);

/* Override t with the settings of a tuning file's text (the format
 * docs/PERFORMANCE.md describes).  Lines that are not understood, or values
 * out of range, make the whole file rejected (t untouched):
 * NMT_ERR_INVALID_ARGUMENT. */
nmt_status nmt_tuning_parse(nmt_tuning *t, const char *text, size_t n);

/* Write t in the file format into buf (NUL-terminated).  Returns the
 * length, or 0 if cap is too small.  `device` goes into a comment line. */
size_t nmt_tuning_format(const nmt_tuning *t, const char *device, char *buf, size_t cap);

/* 1 if cfg is acceptable for op (knob ranges). */
int nmt_gemm_cfg_valid(nmt_gemm_op op, const nmt_gemm_cfg *cfg);

/* Set a configuration's provider.  CLBlast takes no kgroup: choosing it
 * clears the flag (the table's kgroup classes stay valid under a tuning
 * file's "clblast" or a forced provider). */
void nmt_gemm_cfg_set_provider(nmt_gemm_cfg *cfg, nmt_gemm_provider p);

/* The configurations of our kernels the tuner tries for (op, class): the
 * table's default first.  Returns how many were written (at most cap). */
size_t nmt_gemm_candidates(nmt_gemm_op op, nmt_gemm_class cls, nmt_gemm_cfg *out, size_t cap);

/* Names used in files and logs. */
const char *nmt_gemm_op_name(nmt_gemm_op op);
const char *nmt_gemm_class_name(nmt_gemm_class cls);

#endif
