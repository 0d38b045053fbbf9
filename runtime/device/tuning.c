/* SPDX-License-Identifier: MIT */
/* tuning.c — the per-device parameter table, the tuning-file reader and
 * writer, and the candidate configurations the tuner measures (tuning.h).
 *
 * Table rows are matched in order; the first row (every device) is the
 * portable default: our kernels with float4 loads and 4x4 blocks, 64
 * work-items per group (clamped to the device), which any OpenCL 1.2 device
 * runs correctly.  Later rows refine it for device classes whose best
 * settings were measured (docs/PERFORMANCE.md).  A row changes only the
 * fields it names; the tuner's file, when present, overrides the result. */
#include "tuning.h"

#include <string.h>

#define CFG(p, m, n, v, f, w, k) \
    {(uint8_t)(p), (uint8_t)(m), (uint8_t)(n), (uint8_t)(v), (uint8_t)(f), (uint16_t)(w), (uint8_t)(k)}
#define OWN(m, n, v, f, w) CFG(NMT_GEMM_OWN, m, n, v, f, w, 0)
#define BLAS CFG(NMT_GEMM_CLBLAST, 4, 4, 4, 0, 64, 0)
#define KGROUP(m, v, w) CFG(NMT_GEMM_OWN, m, 1, v, 0, w, 1)

/* ------------------------------------------------------------------------ */
/* The table                                                                */
/* ------------------------------------------------------------------------ */

enum { ANY = 0, CPU = 1, GPU = 2 };

typedef struct table_row {
    const char *label;
    int type;                 /* ANY, CPU or GPU */
    const char *platform;     /* substring of the platform name, or NULL */
    const char *name;         /* substring of the device name, or NULL */
    nmt_tuning t;
} table_row;

static const table_row table[] = {
    {"default", ANY, NULL, NULL,
     {.gemm = {[NMT_GOP_NT] = {OWN(1, 8, 4, 0, 64), OWN(4, 4, 4, 0, 64), OWN(4, 4, 4, 0, 64)},
               [NMT_GOP_NN] = {OWN(1, 8, 4, 0, 64), OWN(4, 4, 4, 0, 64), OWN(4, 4, 4, 0, 64)},
               [NMT_GOP_Q8] = {OWN(1, 4, 4, 0, 64), OWN(4, 4, 4, 0, 64), OWN(4, 4, 4, 0, 64)},
               [NMT_GOP_I8] = {OWN(1, 4, 16, 0, 64), OWN(4, 4, 16, 0, 64), OWN(4, 4, 16, 0, 64)}},
      .wg = 64, .reduce_wg = 256}},
    /* GPUs: CLBlast for products of more than 16 rows; up to 16 (decoding
     * steps) a work-group per output column splitting K, whose loads of a
     * weight row are contiguous across the group, where CLBlast's kernels
     * and ours with a work-item per output block left most of an H200 idle
     * (docs/PERFORMANCE.md, "On an NVIDIA H200"). */
    {"GPU", GPU, NULL, NULL,
     {.gemm = {[NMT_GOP_NT] = {KGROUP(2, 4, 64), KGROUP(8, 4, 64), BLAS},
               [NMT_GOP_NN] = {BLAS, BLAS, BLAS},
               [NMT_GOP_Q8] = {KGROUP(2, 4, 64), KGROUP(8, 4, 64), OWN(4, 4, 4, 0, 64)},
               [NMT_GOP_I8] = {OWN(1, 4, 16, 0, 64), OWN(4, 4, 16, 0, 64), OWN(4, 4, 16, 0, 64)}},
      .wg = 64, .reduce_wg = 256}},
    /* PoCL on a CPU (measured on a 2-core AVX-512 Xeon, docs/PERFORMANCE.md):
     * float16 loads, barrier-free; work-groups are loops, so wide groups.
     * int8 x int8 where the CPU has x86 VNNI, every class (its blocks are
     * fixed: 1 x 4 for m2, 4 x 4 above, so the I8 row below serves the
     * portable variant only; docs/PERFORMANCE.md, "x86 VNNI through PoCL").
     * mfast: the blocks M fastest in one dimension (cl/common.cl
     * GEMM_BLOCK_ORIGIN), so a batch-1 beam's 4 rows leave no work-item
     * idle (docs/PERFORMANCE.md, "A few rows leave no work-item idle"). */
#define POCL_CPU_NT {OWN(1, 8, 16, 0, 64), OWN(4, 4, 16, 1, 16), OWN(6, 4, 16, 1, 16)}
#define POCL_CPU_NN {OWN(1, 16, 16, 0, 16), OWN(8, 16, 16, 0, 16), OWN(6, 32, 16, 0, 16)}
#define POCL_CPU_I8 {OWN(1, 4, 16, 0, 64), OWN(2, 8, 16, 0, 64), OWN(6, 4, 16, 1, 16)}
    {"PoCL CPU", CPU, "Portable Computing Language", NULL,
     {.gemm = {[NMT_GOP_NT] = POCL_CPU_NT, [NMT_GOP_NN] = POCL_CPU_NN,
               [NMT_GOP_Q8] = {OWN(1, 2, 16, 0, 64), OWN(2, 8, 16, 0, 64), OWN(6, 4, 16, 1, 16)},
               [NMT_GOP_I8] = POCL_CPU_I8},
      .wg = 64, .reduce_wg = 64}},
    /* PoCL on a CPU its LLVM names haswell (AVX2 and FMA, no AVX-512: a
     * 2-core AMD EPYC VM): the m16 class's int8-weight products in the big
     * class's blocks, so one program and one work-group compile serve both
     * (a cold start 1.4 s shorter) and 16 rows decode 1.36x as fast
     * (docs/PERFORMANCE.md, "Start-up"). */
    {"PoCL CPU haswell", CPU, "Portable Computing Language", "haswell",
     {.gemm = {[NMT_GOP_NT] = POCL_CPU_NT, [NMT_GOP_NN] = POCL_CPU_NN,
               [NMT_GOP_Q8] = {OWN(1, 2, 16, 0, 64), OWN(6, 4, 16, 1, 16), OWN(6, 4, 16, 1, 16)},
               [NMT_GOP_I8] = POCL_CPU_I8},
      .wg = 64, .reduce_wg = 64}},
    /* Intel's OpenCL CPU runtime: the tuner's choice on the small shapes
     * (d 256, FFN 1024, vocabulary 8,000) on a 2-core AMD EPYC: float16
     * loads, as PoCL's row, where the default's float4 ran 1.3x (nt m2) to
     * 7.9x (nn big) slower (docs/PERFORMANCE.md, "Intel's runtime gets its
     * own row").  It reports integer dot products, but int8 x int8 measured
     * 1.7-3.1x slower end to end than int8 weights x fp32 (docs/PERFORMANCE.md,
     * "int8 x int8 products"), so its int8 products stay int8 x fp32.
     * Row reductions (log-softmax, top-k) in groups of 64, as on PoCL: the
     * small model then decoded 1.03-1.18x as fast as with 256. */
    {"Intel CPU", CPU, "Intel(R) OpenCL", NULL,
     {.gemm = {[NMT_GOP_NT] = {OWN(1, 4, 16, 0, 16), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 1, 64)},
               [NMT_GOP_NN] = {OWN(1, 16, 16, 0, 16), OWN(8, 16, 16, 0, 16), OWN(6, 32, 16, 1, 16)},
               [NMT_GOP_Q8] = {OWN(1, 8, 16, 0, 64), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 0, 64)},
               [NMT_GOP_I8] = {OWN(1, 8, 4, 0, 64), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 0, 64)}},
      .i8dot = {NMT_I8DOT_OFF, NMT_I8DOT_OFF, NMT_I8DOT_OFF},
      .wg = 64, .reduce_wg = 64}},
};

static int row_matches(const table_row *r, const nmt_device_info *info) {
    if (r->type == CPU && !info->is_cpu) return 0;
    if (r->type == GPU && !info->is_gpu) return 0;
    if (r->platform && !nmt_strcasestr_ascii(info->platform_name, r->platform)) return 0;
    if (r->name && !nmt_strcasestr_ascii(info->device_name, r->name)) return 0;
    return 1;
}

static void row_settings(const table_row *r, nmt_tuning *t) {
    *t = r->t;
    nmt_strlcpy(t->origin, "table: ", sizeof t->origin);
    nmt_strlcpy(t->origin + 7, r->label, sizeof t->origin - 7);
}

void nmt_tuning_from_table(nmt_tuning *t, const nmt_device_info *info) {
    const table_row *chosen = &table[0];
    for (size_t i = 1; i < NMT_ARRAY_LEN(table); i++)
        if (row_matches(&table[i], info)) chosen = &table[i];
    row_settings(chosen, t);
}

int nmt_tuning_table_row(size_t i, nmt_tuning *t) {
    if (i >= NMT_ARRAY_LEN(table) || t == NULL) return 0;
    row_settings(&table[i], t);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Validity and candidates                                                  */
/* ------------------------------------------------------------------------ */

static int pow2(unsigned x) { return x != 0 && (x & (x - 1)) == 0; }
static int wg_valid(unsigned wg) { return pow2(wg) && wg <= 1024; }

int nmt_gemm_cfg_valid(nmt_gemm_op op, const nmt_gemm_cfg *c) {
    if (c == NULL || (unsigned)op >= NMT_GOP_COUNT) return 0;
    if (c->provider != NMT_GEMM_OWN && c->provider != NMT_GEMM_CLBLAST) return 0;
    if (c->provider == NMT_GEMM_CLBLAST && (op == NMT_GOP_Q8 || op == NMT_GOP_I8)) return 0;
    if (c->kgroup > 1 || (c->kgroup && (c->provider != NMT_GEMM_OWN || (op != NMT_GOP_NT && op != NMT_GOP_Q8) ||
                                        c->tn != 1 || c->mfast != 0)))
        return 0;
    if (op == NMT_GOP_I8 && c->vw < 4) return 0;  /* four-element dot products */
    const unsigned tn_max = op == NMT_GOP_NN ? 32u : 8u;
    if (c->tm < 1 || c->tm > 8 || c->tn < 1 || c->tn > tn_max) return 0;
    if (!pow2(c->vw) || c->vw > 16 || c->mfast > 1 || !wg_valid(c->wg)) return 0;
    return 1;
}

int nmt_tuning_valid(const nmt_tuning *t) {
    if (t == NULL || !wg_valid(t->wg) || !wg_valid(t->reduce_wg)) return 0;
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++)
            if (!nmt_gemm_cfg_valid((nmt_gemm_op)op, &t->gemm[op][c])) return 0;
    for (int c = 0; c < NMT_GCLASS_COUNT; c++)
        if (t->i8dot[c] > NMT_I8DOT_ON) return 0;
    return 1;
}

void nmt_gemm_cfg_set_provider(nmt_gemm_cfg *c, nmt_gemm_provider p) {
    c->provider = (uint8_t)p;
    if (p == NMT_GEMM_CLBLAST) c->kgroup = 0;
}

/* Candidates of our kernels per (op, class); the PoCL-CPU row's choice and
 * the portable default are among them (the tuner adds the table's own
 * choice first anyway). */
static const nmt_gemm_cfg cand_nt_m2[] = {
    OWN(1, 8, 4, 0, 64), OWN(1, 4, 16, 0, 64), OWN(1, 8, 16, 0, 64), OWN(1, 8, 8, 0, 64),
    OWN(2, 4, 16, 0, 64), OWN(1, 4, 16, 0, 16), KGROUP(2, 4, 64),
};
static const nmt_gemm_cfg cand_nt_m16[] = {
    OWN(4, 4, 4, 0, 64), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 0, 64), OWN(8, 2, 16, 1, 16),
    OWN(2, 8, 16, 0, 64), OWN(4, 4, 8, 1, 16), OWN(1, 8, 16, 0, 64), OWN(4, 4, 16, 0, 16), KGROUP(8, 4, 64),
};
static const nmt_gemm_cfg cand_nt_big[] = {
    OWN(4, 4, 4, 0, 64), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 0, 64), OWN(4, 5, 16, 1, 16),
    OWN(5, 4, 16, 1, 16), OWN(4, 6, 16, 1, 16), OWN(6, 4, 16, 1, 16), OWN(4, 4, 8, 1, 16),
    OWN(4, 4, 16, 1, 64),
};
static const nmt_gemm_cfg cand_nn_m2[] = {
    OWN(1, 8, 4, 0, 64), OWN(1, 32, 16, 0, 16), OWN(1, 16, 16, 0, 16), OWN(2, 32, 16, 0, 16),
};
static const nmt_gemm_cfg cand_nn_m16[] = {
    OWN(4, 4, 4, 0, 64), OWN(4, 32, 16, 0, 16), OWN(8, 16, 16, 0, 16), OWN(4, 16, 16, 0, 16),
};
static const nmt_gemm_cfg cand_nn_big[] = {
    OWN(4, 4, 4, 0, 64), OWN(6, 32, 16, 0, 16), OWN(4, 32, 16, 0, 16), OWN(8, 16, 16, 0, 16),
    OWN(6, 32, 16, 1, 16),
};
static const nmt_gemm_cfg cand_q8_m2[] = {
    OWN(1, 4, 4, 0, 64), OWN(1, 4, 16, 0, 64), OWN(1, 8, 16, 0, 64), OWN(1, 2, 16, 0, 64),
    OWN(2, 4, 16, 0, 64), OWN(1, 4, 16, 0, 16), KGROUP(2, 8, 32),
};
static const nmt_gemm_cfg cand_q8_m16[] = {
    OWN(4, 4, 4, 0, 64), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 0, 64), OWN(8, 2, 16, 1, 16),
    OWN(8, 2, 16, 0, 64), OWN(2, 8, 16, 0, 64), OWN(4, 2, 16, 0, 64), KGROUP(8, 4, 64),
};
static const nmt_gemm_cfg cand_q8_big[] = {
    OWN(4, 4, 4, 0, 64), OWN(4, 4, 16, 1, 16), OWN(4, 4, 16, 0, 64), OWN(4, 6, 16, 1, 16),
    OWN(6, 4, 16, 1, 16),
};
static const nmt_gemm_cfg cand_i8_m2[] = {
    OWN(1, 4, 16, 0, 64), OWN(1, 8, 16, 0, 64), OWN(1, 4, 8, 0, 64), OWN(1, 8, 4, 0, 64), OWN(2, 4, 16, 0, 64),
};
static const nmt_gemm_cfg cand_i8_m16[] = {
    OWN(4, 4, 16, 0, 64), OWN(2, 8, 16, 0, 64), OWN(4, 4, 16, 1, 16), OWN(8, 2, 16, 1, 16), OWN(4, 4, 4, 0, 64),
};
static const nmt_gemm_cfg cand_i8_big[] = {
    OWN(4, 4, 16, 0, 64), OWN(6, 4, 16, 1, 16), OWN(4, 4, 16, 1, 16), OWN(4, 6, 16, 1, 16), OWN(4, 4, 4, 0, 64),
};

typedef struct cand_list {
    const nmt_gemm_cfg *c;
    size_t n;
} cand_list;

#define LIST(a) {a, NMT_ARRAY_LEN(a)}
static const cand_list candidates[NMT_GOP_COUNT][NMT_GCLASS_COUNT] = {
    [NMT_GOP_NT] = {LIST(cand_nt_m2), LIST(cand_nt_m16), LIST(cand_nt_big)},
    [NMT_GOP_NN] = {LIST(cand_nn_m2), LIST(cand_nn_m16), LIST(cand_nn_big)},
    [NMT_GOP_Q8] = {LIST(cand_q8_m2), LIST(cand_q8_m16), LIST(cand_q8_big)},
    [NMT_GOP_I8] = {LIST(cand_i8_m2), LIST(cand_i8_m16), LIST(cand_i8_big)},
};

size_t nmt_gemm_candidates(nmt_gemm_op op, nmt_gemm_class cls, nmt_gemm_cfg *out, size_t cap) {
    if ((unsigned)op >= NMT_GOP_COUNT || (unsigned)cls >= NMT_GCLASS_COUNT || out == NULL) return 0;
    const cand_list *l = &candidates[op][cls];
    size_t n = NMT_MIN(l->n, cap);
    memcpy(out, l->c, n * sizeof *out);
    return n;
}

/* ------------------------------------------------------------------------ */
/* File format                                                              */
/* ------------------------------------------------------------------------ */

static const char *const op_names[NMT_GOP_COUNT] = {"nt", "nn", "q8", "i8"};
static const char *const i8dot_names[3] = {"auto", "off", "on"};
static const char *const class_names[NMT_GCLASS_COUNT] = {"m2", "m16", "big"};

const char *nmt_gemm_op_name(nmt_gemm_op op) {
    return (unsigned)op < NMT_GOP_COUNT ? op_names[op] : "?";
}

const char *nmt_gemm_class_name(nmt_gemm_class cls) {
    return (unsigned)cls < NMT_GCLASS_COUNT ? class_names[cls] : "?";
}

/* A cursor over one line. */
typedef struct lex {
    const char *p, *end;
} lex;

static void skip_ws(lex *l) {
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r')) l->p++;
}

/* Next whitespace-delimited word; returns its length (0 at the end). */
static size_t word(lex *l, const char **w) {
    skip_ws(l);
    *w = l->p;
    while (l->p < l->end && *l->p != ' ' && *l->p != '\t' && *l->p != '\r') l->p++;
    return (size_t)(l->p - *w);
}

static int word_is(const char *w, size_t n, const char *s) { return strlen(s) == n && memcmp(w, s, n) == 0; }

static int index_of(const char *w, size_t n, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (word_is(w, n, names[i])) return i;
    return -1;
}

/* "key=value" with a decimal value < 65536. */
static int key_value(const char *w, size_t n, const char *key, unsigned *v) {
    size_t kl = strlen(key);
    if (n <= kl + 1 || memcmp(w, key, kl) != 0 || w[kl] != '=') return 0;
    unsigned x = 0;
    for (size_t i = kl + 1; i < n; i++) {
        if (w[i] < '0' || w[i] > '9' || x > 6553u) return 0;
        x = x * 10u + (unsigned)(w[i] - '0');
    }
    if (x > 65535u) return 0;
    *v = x;
    return 1;
}

/* gemm <op> <class> own tm=.. tn=.. vw=.. mfast=.. wg=.. [kgroup=0|1]  |  gemm <op> <class> clblast */
static int parse_gemm(lex *l, nmt_tuning *t) {
    const char *w;
    size_t n = word(l, &w);
    int op = index_of(w, n, op_names, NMT_GOP_COUNT);
    n = word(l, &w);
    int cls = index_of(w, n, class_names, NMT_GCLASS_COUNT);
    if (op < 0 || cls < 0) return 0;
    nmt_gemm_cfg c = t->gemm[op][cls];
    n = word(l, &w);
    if (word_is(w, n, "clblast")) {
        nmt_gemm_cfg_set_provider(&c, NMT_GEMM_CLBLAST); /* over the GPU row's kgroup classes too */
    } else if (word_is(w, n, "own")) {
        nmt_gemm_cfg_set_provider(&c, NMT_GEMM_OWN);
        static const char *const keys[5] = {"tm", "tn", "vw", "mfast", "wg"};
        unsigned v[5];
        for (int k = 0; k < 5; k++) {
            n = word(l, &w);
            if (!key_value(w, n, keys[k], &v[k])) return 0;
        }
        c.tm = (uint8_t)NMT_MIN(v[0], 255u);
        c.tn = (uint8_t)NMT_MIN(v[1], 255u);
        c.vw = (uint8_t)NMT_MIN(v[2], 255u);
        c.mfast = (uint8_t)NMT_MIN(v[3], 255u);
        c.wg = (uint16_t)v[4];
        c.kgroup = 0;
        lex rest = *l;
        n = word(&rest, &w);
        unsigned kg;
        if (n != 0 && key_value(w, n, "kgroup", &kg)) { /* optional */
            c.kgroup = (uint8_t)NMT_MIN(kg, 255u);
            *l = rest;
        }
    } else {
        return 0;
    }
    if (word(l, &w) != 0 || !nmt_gemm_cfg_valid((nmt_gemm_op)op, &c)) return 0;
    t->gemm[op][cls] = c;
    return 1;
}

nmt_status nmt_tuning_parse(nmt_tuning *t, const char *text, size_t len) {
    NMT_CHECK(t != NULL && (text != NULL || len == 0), NMT_ERR_INVALID_ARGUMENT);
    nmt_tuning r = *t;
    const char *p = text, *end = text + len;
    int saw_magic = 0;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (e == NULL) e = end;
        lex l = {p, e};
        const char *w;
        size_t n = word(&l, &w);
        if (n == 0 || w[0] == '#') {
            /* blank or comment */
        } else if (word_is(w, n, "nmt-edge-tuning")) {
            n = word(&l, &w);
            NMT_CHECK(word_is(w, n, "1") && word(&l, &w) == 0, NMT_ERR_INVALID_ARGUMENT);
            saw_magic = 1;
        } else if (!saw_magic) {
            return NMT_ERR_INVALID_ARGUMENT;  /* the first line names the format */
        } else if (word_is(w, n, "gemm")) {
            NMT_CHECK(parse_gemm(&l, &r), NMT_ERR_INVALID_ARGUMENT);
        } else if (word_is(w, n, "i8dot")) { /* i8dot <class> auto|off|on */
            n = word(&l, &w);
            const int cls = index_of(w, n, class_names, NMT_GCLASS_COUNT);
            n = word(&l, &w);
            const int v = index_of(w, n, i8dot_names, 3);
            NMT_CHECK(cls >= 0 && v >= 0 && word(&l, &w) == 0, NMT_ERR_INVALID_ARGUMENT);
            r.i8dot[cls] = (uint8_t)v;
        } else if (word_is(w, n, "wg") || word_is(w, n, "reduce_wg")) {
            const int is_wg = n == 2;
            const char *v;
            size_t vn = word(&l, &v);
            unsigned x = 0;
            NMT_CHECK(vn > 0 && vn < 6, NMT_ERR_INVALID_ARGUMENT);
            for (size_t i = 0; i < vn; i++) {
                NMT_CHECK(v[i] >= '0' && v[i] <= '9', NMT_ERR_INVALID_ARGUMENT);
                x = x * 10u + (unsigned)(v[i] - '0');
            }
            NMT_CHECK(wg_valid(x) && word(&l, &w) == 0, NMT_ERR_INVALID_ARGUMENT);
            if (is_wg) r.wg = (uint16_t)x;
            else r.reduce_wg = (uint16_t)x;
        } else {
            return NMT_ERR_INVALID_ARGUMENT;
        }
        p = e < end ? e + 1 : end;
    }
    NMT_CHECK(saw_magic, NMT_ERR_INVALID_ARGUMENT);
    *t = r;
    return NMT_OK;
}

/* Append with bounds; *used becomes cap on overflow. */
static void put(char *buf, size_t cap, size_t *used, const char *s) {
    size_t n = strlen(s);
    if (*used >= cap || n >= cap - *used) {
        *used = cap;
        return;
    }
    memcpy(buf + *used, s, n + 1);
    *used += n;
}

static void put_uint(char *buf, size_t cap, size_t *used, unsigned v) {
    char tmp[12];
    int i = (int)sizeof tmp - 1;
    tmp[i] = '\0';
    do {
        tmp[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v && i > 0);
    put(buf, cap, used, tmp + i);
}

size_t nmt_tuning_format(const nmt_tuning *t, const char *device, char *buf, size_t cap) {
    if (t == NULL || buf == NULL || cap == 0) return 0;
    size_t u = 0;
    buf[0] = '\0';
    put(buf, cap, &u, "nmt-edge-tuning 1\n# device: ");
    put(buf, cap, &u, device ? device : "?");
    put(buf, cap, &u, "\n");
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int cls = 0; cls < NMT_GCLASS_COUNT; cls++) {
            const nmt_gemm_cfg *c = &t->gemm[op][cls];
            put(buf, cap, &u, "gemm ");
            put(buf, cap, &u, op_names[op]);
            put(buf, cap, &u, " ");
            put(buf, cap, &u, class_names[cls]);
            if (c->provider == NMT_GEMM_CLBLAST) {
                put(buf, cap, &u, " clblast\n");
                continue;
            }
            static const char *const keys[5] = {" own tm=", " tn=", " vw=", " mfast=", " wg="};
            const unsigned v[5] = {c->tm, c->tn, c->vw, c->mfast, c->wg};
            for (int k = 0; k < 5; k++) {
                put(buf, cap, &u, keys[k]);
                put_uint(buf, cap, &u, v[k]);
            }
            put(buf, cap, &u, c->kgroup ? " kgroup=1\n" : "\n");
        }
    for (int cls = 0; cls < NMT_GCLASS_COUNT; cls++) {
        put(buf, cap, &u, "i8dot ");
        put(buf, cap, &u, class_names[cls]);
        put(buf, cap, &u, " ");
        put(buf, cap, &u, i8dot_names[t->i8dot[cls] < 3 ? t->i8dot[cls] : 0]);
        put(buf, cap, &u, "\n");
    }
    put(buf, cap, &u, "wg ");
    put_uint(buf, cap, &u, t->wg);
    put(buf, cap, &u, "\nreduce_wg ");
    put_uint(buf, cap, &u, t->reduce_wg);
    put(buf, cap, &u, "\n");
    return u >= cap ? 0 : u;
}
