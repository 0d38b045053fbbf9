/* SPDX-License-Identifier: MIT */
/* convert_export.c — nmt-edge-convert export: checkpoints -> a deployment
 * model (average, strip train.*, fp32 / fp16 / int8). */
#include "convert_cmds.h"
#include "family.h"
#include "nmt_writer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT_MAX_INPUTS 256

typedef struct export_args {
    const char *output;
    const char *dtype;
} export_args;

#define EA(field) offsetof(export_args, field)

static const opt_def export_opts[] = {
    {"output", 'o', OPT_STR, EA(output), "FILE", NULL, "output model file (required)", 0, 0},
    {"dtype", 0, OPT_CHOICE, EA(dtype), "fp32|fp16|int8", "fp32 fp16 int8",
     "storage type of the tensors the family marks quantizable (default fp32); others stay fp32", 0, 0},
};

static void export_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " export CKPT... -o FILE [--dtype fp32|fp16|int8]\n\n"
            "Write a deployment model from one or several checkpoints of the same\n"
            "architecture (same metadata and tensor names/shapes).  Several checkpoints\n"
            "are averaged element-wise (in double precision).  Tensors and metadata keys\n"
            "named 'train.*' (optimizer state, step counters) are dropped; other metadata\n"
            "and U8 tensors (embedded tokenizers) are copied unchanged.\n"
            "int8: symmetric per-output-row quantization of every tensor the family's\n"
            "catalogue marks quantizable (Transformer/HySAN, MG-SA: every 2-D weight),\n"
            "q = round(w * 127 / max|w_row|), stored scale = max|w_row| / 127 (w = q * scale).\n"
            "fp16: the same tensors as IEEE binary16; the others stay fp32.  See docs/CONVERT.md.\n\noptions:\n");
    print_opts(out, export_opts, sizeof export_opts / sizeof export_opts[0]);
}

/* Check that every input has the architecture of the first one. */
static int export_check_same(const model_image *in, int n) {
    const nmt_file *r = &in[0].f;
    for (int k = 1; k < n; k++) {
        const nmt_file *f = &in[k].f;
        /* metadata: the same non-train keys with the same values */
        for (int pass = 0; pass < 2; pass++) {
            const nmt_file *a = pass ? f : r, *b = pass ? r : f;
            const char *an = pass ? in[k].path : in[0].path, *bn = pass ? in[0].path : in[k].path;
            for (uint32_t i = 0; i < a->h.n_meta; i++) {
                nmt_meta_view ma, mb;
                if (nmt_file_meta_at(a, i, &ma) != NMT_OK) return 0;
                if (starts_with(ma.key, TRAIN_PREFIX)) continue;
                if (meta_index(b, ma.key, &mb) < 0) {
                    fprintf(stderr, PROG " export: architecture mismatch: metadata key '%s' is in '%s' but not in '%s'\n",
                            ma.key, an, bn);
                    return 0;
                }
                if (!pass && !meta_equal(&ma, &mb)) {
                    fprintf(stderr, PROG " export: architecture mismatch: metadata '%s' differs between '%s' and '%s'\n",
                            ma.key, an, bn);
                    return 0;
                }
            }
        }
        /* tensors: the same non-train names, dtypes and shapes */
        for (int pass = 0; pass < 2; pass++) {
            const nmt_file *a = pass ? f : r, *b = pass ? r : f;
            const char *an = pass ? in[k].path : in[0].path, *bn = pass ? in[0].path : in[k].path;
            for (uint32_t i = 0; i < a->h.n_tensors; i++) {
                nmt_tensor_view va, vb;
                if (nmt_file_tensor_at(a, i, &va) != NMT_OK) return 0;
                if (starts_with(va.name, TRAIN_PREFIX)) continue;
                if (nmt_file_find(b, va.name, &vb) != NMT_OK) {
                    fprintf(stderr, PROG " export: architecture mismatch: tensor '%s' is in '%s' but not in '%s'\n",
                            va.name, an, bn);
                    return 0;
                }
                if (pass) continue;
                char sa[64], sb[64];
                shape_str(&va, sa, sizeof sa);
                shape_str(&vb, sb, sizeof sb);
                if (!same_shape(&va, &vb)) {
                    fprintf(stderr, PROG " export: architecture mismatch: tensor '%s' has shape %s in '%s' but %s in '%s'\n",
                            va.name, sa, an, sb, bn);
                    return 0;
                }
                if ((va.dtype == NMT_DTYPE_U8) != (vb.dtype == NMT_DTYPE_U8)) {
                    fprintf(stderr, PROG " export: architecture mismatch: tensor '%s' is %s in '%s' but %s in '%s'\n",
                            va.name, nmt_dtype_table[va.dtype].name, an, nmt_dtype_table[vb.dtype].name, bn);
                    return 0;
                }
                if (va.dtype == NMT_DTYPE_U8 && (va.nbytes != vb.nbytes || memcmp(va.data, vb.data, va.nbytes) != 0)) {
                    fprintf(stderr, PROG " export: tensor '%s' (opaque bytes, e.g. a tokenizer) differs between '%s' and '%s'\n",
                            va.name, an, bn);
                    return 0;
                }
            }
        }
    }
    return 1;
}

/* Symmetric per-row int8: q = round(w * 127 / max|w_row|), scale = max/127. */
static void quantize_rows(const float *w, uint64_t rows, uint64_t row_len, int8_t *q, float *scales) {
    for (uint64_t r = 0; r < rows; r++) {
        const float *x = w + r * row_len;
        /* the row's largest |x| in float, then widened (exact): a double
         * fmax over widened floats is an internal compiler error of Debian
         * 12's aarch64 GCC 12.2 at -O3 (docs/CROSS.md, "Release builds") */
        float mf = 0.0f;
        for (uint64_t c = 0; c < row_len; c++) mf = fmaxf(mf, fabsf(x[c]));
        const double m = mf;
        if (!(m > 0.0) || !isfinite(m)) {
            for (uint64_t c = 0; c < row_len; c++) q[r * row_len + c] = 0;
            scales[r] = 1.0f;
            continue;
        }
        for (uint64_t c = 0; c < row_len; c++) {
            double v = round((double)x[c] * 127.0 / m);
            if (v > 127.0) v = 127.0;
            if (v < -127.0) v = -127.0;
            q[r * row_len + c] = (int8_t)v;
        }
        scales[r] = (float)(m / 127.0);
    }
}

/* The tensors the family's catalogue marks quantizable (nmt_tensor_decl.
 * quantizable): the only ones --dtype int8 / fp16 converts. */
typedef struct qnames {
    char (*name)[NMT_TENSOR_NAME_MAX];
    size_t n, cap;
} qnames;

static nmt_status add_qname(void *ctx, const nmt_tensor_decl *t) {
    qnames *q = (qnames *)ctx;
    if (!t->quantizable) return NMT_OK;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        void *p = realloc(q->name, cap * sizeof *q->name);
        if (p == NULL) return NMT_ERR_IO;
        q->name = p;
        q->cap = cap;
    }
    memcpy(q->name[q->n++], t->name, NMT_TENSOR_NAME_MAX);
    return NMT_OK;
}

static nmt_status quantizable_names(const nmt_file *f, qnames *q) {
    const nmt_family *fam;
    _Alignas(16) unsigned char cfg[NMT_FAMILY_CFG_BYTES];
    nmt_status s = nmt_family_of(f, &fam);
    if (s == NMT_OK) s = nmt_family_parse(fam, f, cfg);
    return s == NMT_OK ? fam->catalogue(cfg, NULL, add_qname, q) : s;
}

static int is_quantizable(const qnames *q, const char *name) {
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->name[i], name) == 0) return 1;
    return 0;
}

/* Every value of tensor `name` finite and, for fp16, inside binary16's range
 * (|x| <= 65504 after rounding: 65520 and beyond would be stored as
 * infinities).  0 and a message naming the tensor, the element and the value
 * when one is not: the export is refused, nothing is written. */
static int values_fit(const char *cmd, const char *name, const float *x, uint64_t n, nmt_dtype dt) {
    for (uint64_t e = 0; e < n; e++) {
        const char *why = NULL;
        if (!isfinite(x[e])) why = "is not finite";
        else if (dt == NMT_DTYPE_F16 && (nmt_float_to_half(x[e]) & 0x7c00u) == 0x7c00u)
            why = "is beyond fp16's range (|x| <= 65504); export with --dtype fp32 or int8";
        if (why != NULL) {
            fprintf(stderr, PROG " %s: tensor '%s' element %llu = %g %s (nothing was written)\n", cmd, name,
                    (unsigned long long)e, (double)x[e], why);
            return 0;
        }
    }
    return 1;
}

int cmd_export(int argc, char **argv) {
    export_args a;
    memset(&a, 0, sizeof a);
    a.dtype = "fp32";
    const char *inputs[EXPORT_MAX_INPUTS];
    int n_in = 0;
    switch (parse_opts_pos("export", export_opts, sizeof export_opts / sizeof export_opts[0], argc, argv, &a, inputs,
                           EXPORT_MAX_INPUTS, &n_in)) {
    case PARSE_HELP: export_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if (a.output == NULL || a.output[0] == '\0' || n_in == 0) {
        fprintf(stderr, PROG " export: %s (see " PROG " export --help)\n",
                n_in == 0 ? "at least one checkpoint is required" : "-o FILE is required");
        return EXIT_USAGE;
    }
    if (output_is_input("export", a.output, inputs, n_in)) return EXIT_USAGE;
    model_image *in = calloc((size_t)n_in, sizeof *in);
    int rc = 1, n_read = 0;
    if (in == NULL) {
        fprintf(stderr, PROG " export: out of memory\n");
        return 1;
    }
    for (int k = 0; k < n_in; k++) {
        if (!read_image("export", inputs[k], &in[k])) goto done;
        n_read = k + 1;
    }
    rc = export_images("export", in, n_in, a.output, a.dtype);
done:
    for (int k = 0; k < n_read; k++) free_image(&in[k]);
    free(in);
    return rc;
}

int export_images(const char *cmd, model_image *in, int n_in, const char *output, const char *dtype) {
    const nmt_dtype out_dtype = strcmp(dtype, "int8") == 0   ? NMT_DTYPE_I8
                                : strcmp(dtype, "fp16") == 0 ? NMT_DTYPE_F16
                                                             : NMT_DTYPE_F32;
    nmtw_writer *w = nmtw_create();
    int rc = 1;
    double *acc = NULL;
    float *avg = NULL, *scales = NULL;
    void *packed = NULL;
    char *str = NULL;
    qnames q = {NULL, 0, 0};
    if (w == NULL) {
        fprintf(stderr, PROG " %s: out of memory\n", cmd);
        goto done;
    }
    for (int k = 0; k < n_in; k++) {
        nmt_status s = nmt_file_open(&in[k].f, in[k].data, in[k].size, 1);
        if (s == NMT_OK) {
            nmt_model_info info;
            s = nmt_model_inspect(in[k].data, in[k].size, &info);
        }
        if (s != NMT_OK) {
            char why[600];
            model_problem(in[k].data, in[k].size, s, why, sizeof why);
            fprintf(stderr, PROG " %s: '%s': %s\n", cmd, in[k].path, why);
            goto done;
        }
    }
    if (!export_check_same(in, n_in)) goto done;
    const nmt_file *r = &in[0].f;
    nmt_status s = quantizable_names(r, &q);
    for (uint32_t i = 0; i < r->h.n_meta && s == NMT_OK; i++) {
        nmt_meta_view m;
        s = nmt_file_meta_at(r, i, &m);
        if (s != NMT_OK || starts_with(m.key, TRAIN_PREFIX)) continue;
        if (m.type == NMT_META_I64) s = nmtw_set_i64(w, m.key, m.i64);
        else if (m.type == NMT_META_F64) s = nmtw_set_f64(w, m.key, m.f64);
        else {
            free(str);
            str = malloc((size_t)m.str_len + 1);
            if (str == NULL) {
                s = NMT_ERR_IO;
                break;
            }
            memcpy(str, m.str, m.str_len);
            str[m.str_len] = '\0';
            s = nmtw_set_str(w, m.key, str);
        }
    }
    uint64_t max_n = 0;
    for (uint32_t i = 0; i < r->h.n_tensors; i++) {
        nmt_tensor_view v;
        if (nmt_file_tensor_at(r, i, &v) == NMT_OK && v.n_elements > max_n) max_n = v.n_elements;
    }
    if (s == NMT_OK && max_n > (uint64_t)(SIZE_MAX / sizeof(double))) s = NMT_ERR_IO;
    if (s == NMT_OK) {
        acc = malloc((size_t)max_n * sizeof *acc + 1);
        avg = malloc((size_t)max_n * sizeof *avg + 1);
        packed = malloc((size_t)max_n * sizeof(float) + 1);
        scales = malloc((size_t)max_n * sizeof *scales + 1);
        if (acc == NULL || avg == NULL || packed == NULL || scales == NULL) s = NMT_ERR_IO;
    }
    for (uint32_t i = 0; i < r->h.n_tensors && s == NMT_OK; i++) {
        nmt_tensor_view v;
        s = nmt_file_tensor_at(r, i, &v);
        if (s != NMT_OK || starts_with(v.name, TRAIN_PREFIX)) continue;
        if (v.dtype == NMT_DTYPE_U8) {
            s = nmtw_add_tensor(w, v.name, NMT_DTYPE_U8, v.ndim, v.shape, v.data, NULL);
            continue;
        }
        const uint64_t n = v.n_elements;
        if (n_in == 1 && v.dtype == NMT_DTYPE_F32) {
            memcpy(avg, v.data, (size_t)n * sizeof(float)); /* exact copy */
        } else {
            for (uint64_t e = 0; e < n; e++) acc[e] = elem(&v, e);
            for (int k = 1; k < n_in; k++) {
                nmt_tensor_view vk;
                s = nmt_file_find(&in[k].f, v.name, &vk);
                if (s != NMT_OK) break;
                for (uint64_t e = 0; e < n; e++) acc[e] += elem(&vk, e);
            }
            if (s != NMT_OK) break;
            for (uint64_t e = 0; e < n; e++) avg[e] = (float)(acc[e] / (double)n_in);
        }
        const nmt_dtype dt = is_quantizable(&q, v.name) ? out_dtype : NMT_DTYPE_F32;
        if (!values_fit(cmd, v.name, avg, n, dt)) {
            rc = 1;
            goto done;
        }
        if (dt == NMT_DTYPE_F32) {
            s = nmtw_add_tensor(w, v.name, NMT_DTYPE_F32, v.ndim, v.shape, avg, NULL);
        } else if (dt == NMT_DTYPE_F16) {
            uint16_t *h = (uint16_t *)packed;
            for (uint64_t e = 0; e < n; e++) h[e] = nmt_float_to_half(avg[e]);
            s = nmtw_add_tensor(w, v.name, NMT_DTYPE_F16, v.ndim, v.shape, h, NULL);
        } else {
            quantize_rows(avg, v.shape[0], n / v.shape[0], (int8_t *)packed, scales);
            s = nmtw_add_tensor(w, v.name, NMT_DTYPE_I8, v.ndim, v.shape, packed, scales);
        }
    }
    if (s != NMT_OK) {
        fprintf(stderr, PROG " %s: cannot build the model: %s\n", cmd, nmt_status_str(s));
        goto done;
    }
    char why[4400];
    s = nmtw_write_file_why(w, output, why, sizeof why);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " %s: %s\n", cmd, why[0] ? why : nmt_status_str(s));
        goto done;
    }
    if (strcmp(cmd, "export") == 0)
        printf("wrote %s: %s, %d checkpoint%s averaged, %llu bytes\n", output, dtype, n_in, n_in == 1 ? "" : "s",
               (unsigned long long)nmtw_file_size(w));
    else
        printf("wrote %s: %s, %llu bytes\n", output, dtype, (unsigned long long)nmtw_file_size(w));
    rc = 0;
done:
    nmtw_destroy(w);
    free(acc);
    free(avg);
    free(packed);
    free(scales);
    free(str);
    free(q.name);
    return rc;
}
