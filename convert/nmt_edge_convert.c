/* nmt_edge_convert.c — the nmt-edge-convert program: writes .nmt models.
 *
 *   nmt-edge-convert --help | --version
 *   nmt-edge-convert random -o FILE [options]     random-weight Transformer/HySAN
 *   nmt-edge-convert export CKPT... -o FILE [--dtype fp32|fp16|int8]
 *   nmt-edge-convert info MODEL [--max-batch N ...]
 *   nmt-edge-convert verify MODEL [--device SPEC]
 *
 * Exit status: 0 success, 1 I/O or internal error, 2 bad usage.
 * Each subcommand declares its options in a table (struct opt_def) that
 * drives both parsing and its --help text.
 */
#include "nmt_edge.h"
#include "convert_opts.h"
#include "random_model.h"
#include "tool_env.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2

/* ------------------------------------------------------------------------ */
/* random                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct random_args {
    const char *output;
    const char *sp_model, *src_sp_model, *tgt_sp_model;
    nmt_random_transformer_config cfg;
} random_args;

#define RA(field) offsetof(random_args, field)
#define U32_OPT(nm, fld, mn, mx, hlp) {nm, 0, OPT_U32, RA(fld), "N", NULL, hlp, mn, mx}

static const opt_def random_opts[] = {
    {"output", 'o', OPT_STR, RA(output), "FILE", NULL, "output model file (required)", 0, 0},
    U32_OPT("d-model", cfg.d_model, 2, 65536, "model width d (default 32)"),
    U32_OPT("heads", cfg.n_heads, 1, 4096, "attention heads (default 4)"),
    U32_OPT("ff", cfg.d_ff, 1, 1u << 20, "feed-forward width (default 64)"),
    U32_OPT("enc-layers", cfg.enc_layers, 1, 256, "encoder layers (default 2)"),
    U32_OPT("dec-layers", cfg.dec_layers, 1, 256, "decoder layers (default 2)"),
    U32_OPT("src-vocab", cfg.src_vocab, 1, 1u << 24, "source vocabulary size (default 64)"),
    U32_OPT("tgt-vocab", cfg.tgt_vocab, 1, 1u << 24, "target vocabulary size (default 64)"),
    {"norm", 0, OPT_CHOICE, RA(cfg.norm), "pre|post", "pre post", "layer-norm placement (default post)", 0, 0},
    {"enc-branches", 0, OPT_STR, RA(cfg.enc_branches), "LIST", NULL,
     "encoder self-attention branches, e.g. \"global fw bw local:3\" (default \"global\")", 0, 0},
    {"dec-branches", 0, OPT_STR, RA(cfg.dec_branches), "LIST", NULL,
     "decoder self-attention branches (default \"global\")", 0, 0},
    {"fusion", 0, OPT_CHOICE, RA(cfg.fusion), "sum|concat|gate", "sum concat gate",
     "fusion of the branches (default sum)", 0, 0},
    U32_OPT("gate-reduction", cfg.gate_reduction, 1, 65536, "squeeze-gate reduction r (default 4)"),
    {"shared-embeddings", 0, OPT_FLAG, RA(cfg.shared_embeddings), NULL, NULL,
     "one embedding for both sides (needs equal vocabularies)", 0, 0},
    {"tied-output", 0, OPT_FLAG, RA(cfg.tied_output), NULL, NULL, "output projection = target embedding", 0, 0},
    U32_OPT("bos-id", cfg.bos_id, 0, UINT32_MAX, "begin-of-sentence id (default 1)"),
    U32_OPT("eos-id", cfg.eos_id, 0, UINT32_MAX, "end-of-sentence id (default 2)"),
    U32_OPT("pad-id", cfg.pad_id, 0, UINT32_MAX, "padding id (default 0)"),
    U32_OPT("unk-id", cfg.unk_id, 0, UINT32_MAX, "unknown-token id (default 3)"),
    {"seed", 0, OPT_U64, RA(cfg.seed), "S", NULL, "random seed (default 1)", 0, UINT64_MAX},
    {"weight-scale", 0, OPT_F32, RA(cfg.weight_scale), "X", NULL,
     "weights uniform in +-X/sqrt(fan_in) (default 1)", 0, 0},
    {"sp-model", 0, OPT_STR, RA(sp_model), "FILE", NULL,
     "embed a SentencePiece .model shared by both sides (tokenizer.src)", 0, 0},
    {"src-sp-model", 0, OPT_STR, RA(src_sp_model), "FILE", NULL,
     "embed the source-side SentencePiece .model (tokenizer.src)", 0, 0},
    {"tgt-sp-model", 0, OPT_STR, RA(tgt_sp_model), "FILE", NULL,
     "embed the target-side SentencePiece .model (tokenizer.tgt; needs --src-sp-model)", 0, 0},
};

/* An embedded file: read whole, and not empty.  NULL (message printed) on failure. */
static void *slurp(const char *path, size_t *size) {
    void *buf = read_whole("random", path, size);
    if (buf != NULL && *size == 0) {
        fprintf(stderr, PROG " random: '%s' is empty\n", path);
        free(buf);
        buf = NULL;
    }
    return buf;
}

static void random_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " random -o FILE [options]\n\n"
            "Write a Transformer/HySAN model with random weights (every tensor of\n"
            "docs/ARCHITECTURES.md, reproducible from --seed).\n\noptions:\n");
    print_opts(out, random_opts, sizeof random_opts / sizeof random_opts[0]);
}

static int cmd_random(int argc, char **argv) {
    random_args a;
    memset(&a, 0, sizeof a);
    nmt_random_transformer_defaults(&a.cfg);
    switch (parse_opts("random", random_opts, sizeof random_opts / sizeof random_opts[0], argc, argv, &a)) {
    case PARSE_HELP: random_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    const nmt_random_transformer_config *c = &a.cfg;
    const char *why = NULL;
    if (a.output == NULL || a.output[0] == '\0') why = "-o FILE is required";
    else if (c->d_model % 2 != 0) why = "--d-model must be even";
    else if (c->d_model % c->n_heads != 0) why = "--d-model must be divisible by --heads";
    else if (c->shared_embeddings && c->src_vocab != c->tgt_vocab)
        why = "--shared-embeddings needs --src-vocab equal to --tgt-vocab";
    else if (nmt_random_count_branches(c->enc_branches) < 1 || nmt_random_count_branches(c->enc_branches) > 8)
        why = "--enc-branches needs 1 to 8 branches";
    else if (nmt_random_count_branches(c->dec_branches) < 1 || nmt_random_count_branches(c->dec_branches) > 8)
        why = "--dec-branches needs 1 to 8 branches";
    else if (strcmp(c->fusion, "gate") == 0 && c->d_model % c->gate_reduction != 0)
        why = "--d-model must be divisible by --gate-reduction";
    else if (a.sp_model != NULL && (a.src_sp_model != NULL || a.tgt_sp_model != NULL))
        why = "--sp-model excludes --src-sp-model and --tgt-sp-model";
    else if (a.tgt_sp_model != NULL && a.src_sp_model == NULL)
        why = "--tgt-sp-model needs --src-sp-model";
    if (why != NULL) {
        fprintf(stderr, PROG " random: %s\n", why);
        return EXIT_USAGE;
    }
    void *src_sp = NULL, *tgt_sp = NULL;
    const char *src_path = a.sp_model ? a.sp_model : a.src_sp_model;
    if (src_path != NULL && (src_sp = slurp(src_path, &a.cfg.src_sp_size)) == NULL) return 1;
    if (a.tgt_sp_model != NULL && (tgt_sp = slurp(a.tgt_sp_model, &a.cfg.tgt_sp_size)) == NULL) {
        free(src_sp);
        return 1;
    }
    a.cfg.src_sp_model = src_sp;
    a.cfg.tgt_sp_model = tgt_sp;

    nmt_status s = nmt_random_transformer_write(c, a.output);
    free(src_sp);
    free(tgt_sp);
    if (s == NMT_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, PROG " random: invalid model configuration\n");
        return EXIT_USAGE;
    }
    if (s != NMT_OK) {
        fprintf(stderr, PROG " random: cannot write '%s': %s\n", a.output, nmt_status_str(s));
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Shared helpers of export / info / verify                                 */
/* ------------------------------------------------------------------------ */

/* A model file read whole into malloc'd memory (8-byte aligned). */
typedef struct model_image {
    const char *path;
    unsigned char *data;
    size_t size;
    nmt_file f;
} model_image;

/* Read `path` whole (an empty file is fine: the format check reports it).
 * 0 and a message on I/O failure. */
static int read_image(const char *cmd, const char *path, model_image *m) {
    memset(m, 0, sizeof *m);
    m->path = path;
    m->data = read_whole(cmd, path, &m->size);
    return m->data != NULL;
}

static void free_image(model_image *m) {
    free(m->data);
    m->data = NULL;
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

#define TRAIN_PREFIX "train."

/* Element i of a float tensor (F32, F16 or I8 dequantized) as double. */
static double elem(const nmt_tensor_view *v, uint64_t i) {
    const unsigned char *p = (const unsigned char *)v->data;
    switch (v->dtype) {
    case NMT_DTYPE_F32: {
        float x;
        memcpy(&x, p + 4 * i, sizeof x);
        return x;
    }
    case NMT_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);
        return nmt_half_to_float(h);
    }
    case NMT_DTYPE_I8: {
        uint64_t row_len = v->n_elements / v->shape[0];
        float sc;
        memcpy(&sc, (const unsigned char *)v->scales + 4 * (i / row_len), sizeof sc);
        return (double)(int8_t)p[i] * sc;
    }
    default: return 0.0;
    }
}

static void shape_str(const nmt_tensor_view *v, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t d = 0; d < v->ndim && used < cap; d++) {
        int w = snprintf(buf + used, cap - used, "%s%u", d ? "x" : "", v->shape[d]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static int same_shape(const nmt_tensor_view *a, const nmt_tensor_view *b) {
    if (a->ndim != b->ndim) return 0;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static int meta_equal(const nmt_meta_view *a, const nmt_meta_view *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case NMT_META_I64: return a->i64 == b->i64;
    case NMT_META_F64: return memcmp(&a->f64, &b->f64, sizeof a->f64) == 0;
    case NMT_META_STR: return a->str_len == b->str_len && memcmp(a->str, b->str, a->str_len) == 0;
    }
    return 0;
}

/* Index of the metadata record `key` in f, or -1. */
static int64_t meta_index(const nmt_file *f, const char *key, nmt_meta_view *out) {
    for (uint32_t i = 0; i < f->h.n_meta; i++) {
        if (nmt_file_meta_at(f, i, out) != NMT_OK) return -1;
        if (strcmp(out->key, key) == 0) return i;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* export                                                                   */
/* ------------------------------------------------------------------------ */

#define EXPORT_MAX_INPUTS 256

typedef struct export_args {
    const char *output;
    const char *dtype;
} export_args;

#define EA(field) offsetof(export_args, field)

static const opt_def export_opts[] = {
    {"output", 'o', OPT_STR, EA(output), "FILE", NULL, "output model file (required)", 0, 0},
    {"dtype", 0, OPT_CHOICE, EA(dtype), "fp32|fp16|int8", "fp32 fp16 int8",
     "storage type of every 2-D weight (default fp32); 1-D tensors stay fp32", 0, 0},
};

static void export_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " export CKPT... -o FILE [--dtype fp32|fp16|int8]\n\n"
            "Write a deployment model from one or several checkpoints of the same\n"
            "architecture (same metadata and tensor names/shapes).  Several checkpoints\n"
            "are averaged element-wise (in double precision).  Tensors and metadata keys\n"
            "named 'train.*' (optimizer state, step counters) are dropped; other metadata\n"
            "and U8 tensors (embedded tokenizers) are copied unchanged.\n"
            "int8: symmetric per-output-row quantization of every 2-D weight,\n"
            "q = round(w * 127 / max|w_row|), stored scale = max|w_row| / 127 (w = q * scale).\n"
            "fp16: every 2-D weight as IEEE binary16.  See docs/CONVERT.md.\n\noptions:\n");
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
        double m = 0.0;
        for (uint64_t c = 0; c < row_len; c++) m = fmax(m, fabs((double)x[c]));
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

static int cmd_export(int argc, char **argv) {
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
    const nmt_dtype out_dtype = strcmp(a.dtype, "int8") == 0   ? NMT_DTYPE_I8
                                : strcmp(a.dtype, "fp16") == 0 ? NMT_DTYPE_F16
                                                               : NMT_DTYPE_F32;
    model_image *in = calloc((size_t)n_in, sizeof *in);
    nmtw_writer *w = nmtw_create();
    int rc = 1, n_read = 0;
    double *acc = NULL;
    float *avg = NULL, *scales = NULL;
    void *packed = NULL;
    char *str = NULL;
    if (in == NULL || w == NULL) {
        fprintf(stderr, PROG " export: out of memory\n");
        goto done;
    }
    for (int k = 0; k < n_in; k++) {
        if (!read_image("export", inputs[k], &in[k])) goto done;
        n_read = k + 1;
        nmt_status s = nmt_file_open(&in[k].f, in[k].data, in[k].size, 1);
        if (s == NMT_OK) {
            nmt_model_info info;
            s = nmt_model_inspect(in[k].data, in[k].size, &info);
        }
        if (s != NMT_OK) {
            fprintf(stderr, PROG " export: '%s': %s\n", inputs[k], nmt_status_str(s));
            goto done;
        }
    }
    if (!export_check_same(in, n_in)) goto done;

    const nmt_file *r = &in[0].f;
    nmt_status s = NMT_OK;
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
        const nmt_dtype dt = v.ndim >= 2 ? out_dtype : NMT_DTYPE_F32;
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
        fprintf(stderr, PROG " export: cannot build the model: %s\n", nmt_status_str(s));
        goto done;
    }
    s = nmtw_write_file(w, a.output);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " export: cannot write '%s': %s\n", a.output, nmt_status_str(s));
        goto done;
    }
    printf("wrote %s: %s, %d checkpoint%s averaged, %llu bytes\n", a.output, a.dtype, n_in, n_in == 1 ? "" : "s",
           (unsigned long long)nmtw_file_size(w));
    rc = 0;
done:
    for (int k = 0; k < n_read; k++) free_image(&in[k]);
    free(in);
    nmtw_destroy(w);
    free(acc);
    free(avg);
    free(packed);
    free(scales);
    free(str);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* info                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct limits_args {
    uint32_t max_batch, max_beam, max_src_len, max_tgt_len;
    const char *device;
} limits_args;

#define LA(field) offsetof(limits_args, field)

static const opt_def info_opts[] = {
    {"max-batch", 0, OPT_U32, LA(max_batch), "N", NULL, "sentences per call (default 1)", 1, 1u << 20},
    {"max-beam", 0, OPT_U32, LA(max_beam), "N", NULL, "beam width (default 4)", 1, 1024},
    {"max-src-len", 0, OPT_U32, LA(max_src_len), "N", NULL, "source tokens per sentence (default 256)", 1, 1u << 20},
    {"max-tgt-len", 0, OPT_U32, LA(max_tgt_len), "N", NULL, "target tokens (default max-src-len + 50)", 1, 1u << 20},
};

static void info_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " info MODEL [--max-batch N --max-beam N --max-src-len N --max-tgt-len N]\n\n"
            "Describe a model file: architecture and hyper-parameters, every metadata key,\n"
            "every tensor (dtype, shape, bytes, CRC), the int8 scale range, and the host\n"
            "arena and device bytes a session needs under the given limits.\n"
            "Exit status 0 when the file is valid, 1 otherwise.\n\noptions:\n");
    print_opts(out, info_opts, sizeof info_opts / sizeof info_opts[0]);
}

static int single_path(const char *cmd, const char **pos, int n_pos) {
    if (n_pos != 1) {
        fprintf(stderr, PROG " %s: exactly one MODEL file is required (see " PROG " %s --help)\n", cmd, cmd);
        return 0;
    }
    (void)pos;
    return 1;
}

static int cmd_info(int argc, char **argv) {
    limits_args a;
    memset(&a, 0, sizeof a);
    const char *pos[2];
    int n_pos = 0;
    switch (parse_opts_pos("info", info_opts, sizeof info_opts / sizeof info_opts[0], argc, argv, &a, pos, 2, &n_pos)) {
    case PARSE_HELP: info_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if (!single_path("info", pos, n_pos)) return EXIT_USAGE;
    model_image m;
    if (!read_image("info", pos[0], &m)) return 1;
    int rc = 0;
    nmt_status s = nmt_file_open(&m.f, m.data, m.size, 0);
    printf("file: %s (%zu bytes)\n", m.path, m.size);
    if (s != NMT_OK) {
        printf("structure: FAIL (%s)\n", nmt_status_str(s));
        fprintf(stderr, PROG " info: '%s': %s\n", m.path, nmt_status_str(s));
        free_image(&m);
        return 1;
    }
    printf("format: version %u, %u metadata records, %u tensors\n", m.f.h.version, m.f.h.n_meta, m.f.h.n_tensors);

    nmt_model_info info;
    nmt_status si = nmt_model_inspect(m.data, m.size, &info);
    if (si == NMT_OK) {
        printf("architecture: %s\n", info.arch);
        printf("  d_model %u, n_heads %u, d_ff %u, layers %u + %u\n", info.d_model, info.n_heads, info.d_ff,
               info.enc_layers, info.dec_layers);
        printf("  vocab src %u tgt %u, norm %s, fusion %s (gate r %u)\n", info.src_vocab, info.tgt_vocab, info.norm,
               info.fusion, info.gate_reduction);
        printf("  branches: encoder \"%s\", decoder \"%s\"\n", info.enc_branches, info.dec_branches);
        printf("  shared embeddings %d, tied output %d, tokenizer %d\n", info.shared_embeddings, info.tied_output,
               info.tokenizer);
        printf("  ids: bos %u eos %u pad %u unk %u\n", info.bos_id, info.eos_id, info.pad_id, info.unk_id);
        printf("  parameters %llu, weight bytes %llu, dtype %s\n", (unsigned long long)info.n_params,
               (unsigned long long)info.weight_bytes, info.dtype);
    } else {
        printf("architecture: FAIL (%s)\n", nmt_status_str(si));
        rc = 1;
    }

    printf("metadata:\n");
    for (uint32_t i = 0; i < m.f.h.n_meta; i++) {
        nmt_meta_view mv;
        if (nmt_file_meta_at(&m.f, i, &mv) != NMT_OK) break;
        if (mv.type == NMT_META_I64) printf("  %-24s i64 %lld\n", mv.key, (long long)mv.i64);
        else if (mv.type == NMT_META_F64) printf("  %-24s f64 %.17g\n", mv.key, mv.f64);
        else printf("  %-24s str \"%.*s\"\n", mv.key, (int)(mv.str_len > 200 ? 200 : mv.str_len), mv.str);
    }

    printf("tensors:\n");
    uint32_t bad_crc = 0, n_i8 = 0;
    float smin = INFINITY, smax = 0.0f;
    uint64_t bytes_by[NMT_DTYPE_COUNT_] = {0};
    for (uint32_t i = 0; i < m.f.h.n_tensors; i++) {
        nmt_tensor_view v;
        if (nmt_file_tensor_at(&m.f, i, &v) != NMT_OK) break;
        nmt_tensor_entry e;
        memcpy(&e, m.data + m.f.h.table_offset + (size_t)i * NMT_TENSOR_ENTRY_SIZE, sizeof e);
        const int crc_ok = nmt_crc32(0, v.data, (size_t)v.nbytes) == e.crc;
        bad_crc += !crc_ok;
        bytes_by[v.dtype] += v.nbytes;
        char sh[64], extra[96] = "";
        shape_str(&v, sh, sizeof sh);
        if (v.dtype == NMT_DTYPE_I8) {
            float lo = INFINITY, hi = 0.0f;
            for (uint32_t rr = 0; rr < v.shape[0]; rr++) {
                float sc;
                memcpy(&sc, (const unsigned char *)v.scales + 4 * (size_t)rr, sizeof sc);
                lo = fminf(lo, sc);
                hi = fmaxf(hi, sc);
            }
            smin = fminf(smin, lo);
            smax = fmaxf(smax, hi);
            n_i8++;
            snprintf(extra, sizeof extra, "  scales [%.4g, %.4g]", lo, hi);
        }
        printf("  %-40s %-3s %-14s %10llu%s%s\n", v.name, nmt_dtype_table[v.dtype].name, sh,
               (unsigned long long)v.nbytes, crc_ok ? "" : "  CRC MISMATCH", extra);
    }
    printf("bytes by dtype:");
    for (int d = 0; d < NMT_DTYPE_COUNT_; d++)
        if (bytes_by[d]) printf(" %s %llu", nmt_dtype_table[d].name, (unsigned long long)bytes_by[d]);
    printf("\n");
    if (n_i8) printf("int8 scales: %u tensors, min %.6g, max %.6g\n", n_i8, smin, smax);
    else printf("int8 scales: none (no I8 tensors)\n");
    nmt_status sv = nmt_file_open(&m.f, m.data, m.size, 1);
    if (sv == NMT_OK && bad_crc == 0) {
        printf("checksums: ok (header, metadata, table and %u tensors)\n", m.f.h.n_tensors);
    } else {
        printf("checksums: FAIL (%s; %u tensor%s mismatched)\n", nmt_status_str(sv), bad_crc, bad_crc == 1 ? "" : "s");
        rc = 1;
    }

    if (si == NMT_OK) {
        nmt_session_params p;
        memset(&p, 0, sizeof p);
        p.model_data = m.data;
        p.model_size = m.size;
        p.limits.max_batch = a.max_batch;
        p.limits.max_beam = a.max_beam;
        p.limits.max_src_len = a.max_src_len;
        p.limits.max_tgt_len = a.max_tgt_len;
        size_t arena = 0;
        uint64_t dev_bytes = 0;
        nmt_status sa = nmt_session_arena_size(&p, &arena, &dev_bytes);
        if (sa == NMT_OK)
            printf("session (max_batch %u, max_beam %u, max_src_len %u, max_tgt_len %u; 0 = default):\n"
                   "  arena bytes %zu, device bytes %llu\n",
                   a.max_batch, a.max_beam, a.max_src_len, a.max_tgt_len, arena, (unsigned long long)dev_bytes);
        else {
            printf("session: FAIL (%s)\n", nmt_status_str(sa));
            rc = 1;
        }
    }
    if (rc != 0) fprintf(stderr, PROG " info: '%s' is not a valid model\n", m.path);
    free_image(&m);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* verify                                                                   */
/* ------------------------------------------------------------------------ */

static const opt_def verify_opts[] = {
    {"device", 0, OPT_STR, LA(device), "SPEC", NULL,
     "OpenCL device: P:D, gpu, cpu, accelerator or a name substring (default $NMT_EDGE_DEVICE, "
     "else the runtime's default)", 0, 0},
};

static void verify_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " verify MODEL [--device SPEC]\n\n"
            "Check a model file: structure and every CRC-32, the architecture, then open\n"
            "a session on the device and translate a short token sequence, checking that\n"
            "the scores are finite.  Prints 'OK' and exits 0, or prints the failing\n"
            "step and the runtime's status string and exits 1.\n\noptions:\n");
    print_opts(out, verify_opts, sizeof verify_opts / sizeof verify_opts[0]);
}

static int verify_fail(const char *path, const char *step, nmt_status s) {
    fprintf(stderr, PROG " verify: '%s': %s: %s\n", path, step, nmt_status_str(s));
    return 1;
}

static int cmd_verify(int argc, char **argv) {
    limits_args a;
    memset(&a, 0, sizeof a);
    const char *pos[2];
    int n_pos = 0;
    switch (parse_opts_pos("verify", verify_opts, sizeof verify_opts / sizeof verify_opts[0], argc, argv, &a, pos, 2,
                           &n_pos)) {
    case PARSE_HELP: verify_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    if (!single_path("verify", pos, n_pos)) return EXIT_USAGE;
    model_image m;
    if (!read_image("verify", pos[0], &m)) return 1;
    int rc = 1;
    void *dev_mem = NULL, *arena = NULL;
    nmt_device *dev = NULL;
    nmt_session *sess = NULL;
    nmt_status s = nmt_file_open(&m.f, m.data, m.size, 1);
    if (s != NMT_OK) {
        rc = verify_fail(m.path, "structure/checksums", s);
        goto done;
    }
    printf("structure and checksums: ok (%u tensors)\n", m.f.h.n_tensors);
    nmt_model_info info;
    s = nmt_model_inspect(m.data, m.size, &info);
    if (s != NMT_OK) {
        rc = verify_fail(m.path, "architecture", s);
        goto done;
    }
    printf("architecture: ok (%s, d_model %u, %u + %u layers, dtype %s)\n", info.arch, info.d_model,
           info.enc_layers, info.dec_layers, info.dtype);

    nmt_device_params dp;
    char cache_dir[4096];
    memset(&dp, 0, sizeof dp);
    nmt_tool_device_params(&dp, a.device, cache_dir, sizeof cache_dir);
    size_t fp = (nmt_device_footprint() + 63) / 64 * 64;
    dev_mem = aligned_alloc(64, fp ? fp : 64);
    if (dev_mem == NULL) {
        fprintf(stderr, PROG " verify: out of memory\n");
        goto done;
    }
    s = nmt_device_open(&dp, dev_mem, fp, &dev);
    if (s != NMT_OK) {
        dev = NULL;
        rc = verify_fail(m.path, "device", s);
        goto done;
    }
    nmt_session_params p;
    memset(&p, 0, sizeof p);
    p.model_data = m.data;
    p.model_size = m.size;
    p.limits.max_batch = 1;
    p.limits.max_beam = 2;
    p.limits.max_src_len = 16;
    p.limits.max_tgt_len = 8;
    size_t need = 0;
    s = nmt_session_arena_size(&p, &need, NULL);
    if (s == NMT_OK) {
        arena = aligned_alloc(NMT_ARENA_ALIGNMENT, (need + NMT_ARENA_ALIGNMENT - 1) / NMT_ARENA_ALIGNMENT *
                                                       NMT_ARENA_ALIGNMENT);
        if (arena == NULL) {
            fprintf(stderr, PROG " verify: out of memory\n");
            goto done;
        }
        s = nmt_session_create(dev, &p, arena, need, &sess);
    }
    if (s != NMT_OK) {
        sess = NULL;
        rc = verify_fail(m.path, "session", s);
        goto done;
    }
    int32_t toks[6];
    for (uint32_t i = 0; i < 6; i++) toks[i] = (int32_t)((info.unk_id + 1 + 3 * i) % info.src_vocab);
    const int32_t *rows[1] = {toks};
    const uint32_t lens[1] = {6};
    nmt_batch b = {rows, lens, 1};
    nmt_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam = 2;
    o.max_len = 8;
    s = nmt_session_translate(sess, &b, &o);
    const int32_t *out = NULL;
    uint32_t out_len = 0;
    float score = NAN, logprob = NAN;
    if (s == NMT_OK) s = nmt_session_result(sess, 0, 0, &out, &out_len, &score, &logprob);
    if (s != NMT_OK) {
        rc = verify_fail(m.path, "test translation", s);
        goto done;
    }
    float lp = NAN;
    s = nmt_session_score(sess, &b, &b, &lp);
    if (s != NMT_OK) {
        rc = verify_fail(m.path, "test scoring", s);
        goto done;
    }
    if (!isfinite(score) || !isfinite(logprob) || !isfinite(lp)) {
        fprintf(stderr, PROG " verify: '%s': test forward: non-finite score (score %g, logprob %g, forced %g)\n",
                m.path, score, logprob, lp);
        goto done;
    }
    printf("test forward: ok (%u output tokens, score %.4f, logprob %.4f, forced logprob %.4f)\n", out_len, score,
           logprob, lp);
    printf("OK\n");
    rc = 0;
done:
    if (sess) nmt_session_destroy(sess);
    if (dev) nmt_device_close(dev);
    free(arena);
    free(dev_mem);
    free_image(&m);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"random", cmd_random, "write a random-weight Transformer/HySAN model"},
    {"export", cmd_export, "checkpoint(s) -> deployment model (average, strip train.*, fp32/fp16/int8)"},
    {"info", cmd_info, "describe a model: hyper-parameters, metadata, tensors, checksums, memory"},
    {"verify", cmd_verify, "check structure and checksums, then run a test forward on a device"},
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: " PROG " <command> [options]\n"
            "       " PROG " --help | --version\n\n"
            "Write nmt-edge model files (.nmt, format version %u; see docs/FORMAT.md).\n\n"
            "commands:\n",
            NMT_FILE_VERSION);
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\nRun '" PROG " <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf(PROG " %s (model format v%u)\n", nmt_version(), NMT_FILE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(cmd, subcommands[i].name) == 0) return subcommands[i].run(argc - 2, argv + 2);
    fprintf(stderr, PROG ": unknown command '%s' (see " PROG " --help)\n", cmd);
    return EXIT_USAGE;
}
