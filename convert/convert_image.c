/* SPDX-License-Identifier: MIT */
/* convert_image.c — what the subcommands of nmt-edge-convert share
 * (convert_cmds.h): model files read whole, tensor and metadata helpers. */
#include "convert_cmds.h"
#include "tool_file.h"
#include "tool_out.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read `path` whole (an empty file is fine: the format check reports it).
 * 0 and a message on I/O failure. */
int read_image(const char *cmd, const char *path, model_image *m) {
    memset(m, 0, sizeof *m);
    m->path = path;
    m->data = read_whole(cmd, path, &m->size);
    return m->data != NULL;
}

void free_image(model_image *m) {
    free(m->data);
    m->data = NULL;
}

int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Element i of a float tensor (F32, F16 or I8 dequantized) as double. */
double elem(const nmt_tensor_view *v, uint64_t i) {
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

void shape_str(const nmt_tensor_view *v, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t d = 0; d < v->ndim && used < cap; d++) {
        int w = snprintf(buf + used, cap - used, "%s%u", d ? "x" : "", v->shape[d]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

int same_shape(const nmt_tensor_view *a, const nmt_tensor_view *b) {
    if (a->ndim != b->ndim) return 0;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

int meta_equal(const nmt_meta_view *a, const nmt_meta_view *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case NMT_META_I64: return a->i64 == b->i64;
    case NMT_META_F64: return memcmp(&a->f64, &b->f64, sizeof a->f64) == 0;
    case NMT_META_STR: return a->str_len == b->str_len && memcmp(a->str, b->str, a->str_len) == 0;
    }
    return 0;
}

/* Index of the metadata record `key` in f, or -1. */
int64_t meta_index(const nmt_file *f, const char *key, nmt_meta_view *out) {
    for (uint32_t i = 0; i < f->h.n_meta; i++) {
        if (nmt_file_meta_at(f, i, out) != NMT_OK) return -1;
        if (strcmp(out->key, key) == 0) return i;
    }
    return -1;
}

/* The detail is escaped (tool_out.h): it may quote the file's bytes. */
void model_problem(const void *data, size_t size, nmt_status s, char *buf, size_t cap) {
    char why[NMT_MODEL_WHY_BYTES], shown[4 * NMT_MODEL_WHY_BYTES];
    nmt_status se = nmt_model_explain(data, size, why, sizeof why);
    if ((se == s && why[0]) ||
        (s == NMT_ERR_TOKENIZER_MODEL && nmt_tool_tokenizer_problem(data, size, why, sizeof why)))
        snprintf(buf, cap, "%s: %s", nmt_status_str(s), nmt_tool_escape(why, SIZE_MAX, shown, sizeof shown));
    else snprintf(buf, cap, "%s", nmt_status_str(s));
}
