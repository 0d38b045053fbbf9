/* SPDX-License-Identifier: MIT */
/* weights.c — loading a family's tensors into session buffers, driven by its
 * catalogue (family.h: nmt_family_load_weights), and the catalogues' one
 * way to declare a tensor (nmt_tensor_emit).  No allocation: F16 and I8
 * tensors that become fp32 are converted through a stack buffer.  With fp16
 * compute (nmt_plan_ctx.fp16) 2-D F16 tensors are uploaded as they are. */
#include "family.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

nmt_status nmt_tensor_emit(nmt_tensor_fn fn, void *ctx, nmt_lin *dst, nmt_role role, uint32_t ndim, uint32_t d0,
                           uint32_t d1, nmt_init init, uint32_t fan_in, uint32_t part, uint32_t n_parts,
                           const char *fmt, ...) {
    nmt_tensor_decl t;
    memset(&t, 0, sizeof t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t.name, sizeof t.name, fmt, ap);
    va_end(ap);
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = ndim == 2 ? d1 : 0;
    t.quantizable = ndim == 2;
    t.init = init;
    t.fan_in = fan_in;
    t.dst = dst;
    t.role = role;
    t.part = part;
    t.n_parts = n_parts;
    return fn(ctx, &t);
}

/* Write tensor v as fp32 into mem at byte offset `off`: F32 directly, F16
 * and I8 (dequantized, w = q * scale[row]) converted through a stack buffer
 * in chunks. */
static nmt_status upload_as_f32(nmt_device *dev, cl_mem mem, size_t off, const nmt_tensor_view *v) {
    const size_t n = (size_t)v->n_elements;
    if (v->dtype == NMT_DTYPE_F32) return nmt_device_write(dev, mem, off, n * sizeof(float), v->data);
    float tmp[1024];
    const uint8_t *src = (const uint8_t *)v->data;
    const size_t row_len = v->shape[0] ? n / v->shape[0] : 1;
    for (size_t i0 = 0; i0 < n; i0 += NMT_ARRAY_LEN(tmp)) {
        const size_t cnt = NMT_MIN(NMT_ARRAY_LEN(tmp), n - i0);
        for (size_t j = 0; j < cnt; j++) {
            const size_t i = i0 + j;
            if (v->dtype == NMT_DTYPE_F16) {
                uint16_t h;
                memcpy(&h, src + 2 * i, sizeof h);
                tmp[j] = nmt_half_to_float(h);
            } else { /* I8 */
                float sc;
                memcpy(&sc, (const uint8_t *)v->scales + sizeof(float) * (i / row_len), sizeof sc);
                tmp[j] = (float)(int8_t)src[i] * sc;
            }
        }
        NMT_TRY(nmt_device_write(dev, mem, off + i0 * sizeof(float), cnt * sizeof(float), tmp));
    }
    return NMT_OK;
}

#define MAX_PARTS 4

typedef struct load_ctx {
    nmt_plan_ctx *pc;
    const nmt_file *f;
    nmt_arena *a;
    nmt_tensor_view pend_w[MAX_PARTS], pend_b[MAX_PARTS]; /* parts of the fused block being read */
    nmt_lin dummy;
    int f16; /* nmt_plan_ctx.fp16: 2-D F16 tensors stay half */
} load_ctx;

/* One tensor into its own device buffer: 2-D I8 as is (int8 data then the
 * fp32 scales: q8 = 1), 2-D F16 as is under fp16 compute (f16 = 1),
 * everything else as fp32. */
static nmt_status load_single(load_ctx *lc, const nmt_tensor_view *v, nmt_buf *out, nmt_buf *scales, int *q8,
                              int *f16) {
    *f16 = lc->f16 && v->dtype == NMT_DTYPE_F16 && v->ndim == 2;
    if (*f16) {
        *q8 = 0;
        return nmt_plan_buffer(lc->pc, lc->a, (size_t)v->nbytes, v->data, out);
    }
    if (v->dtype == NMT_DTYPE_I8 && v->ndim == 2) {
        NMT_TRY(nmt_plan_buffer(lc->pc, lc->a, (size_t)v->nbytes, v->data, out));
        *scales = *out;
        scales->off = nmt_align_up((size_t)v->n_elements, 4) / sizeof(float);
        *q8 = 1;
        return NMT_OK;
    }
    *q8 = 0;
    if (v->dtype == NMT_DTYPE_F32) return nmt_plan_buffer(lc->pc, lc->a, (size_t)v->nbytes, v->data, out);
    NMT_TRY(nmt_plan_buffer(lc->pc, lc->a, (size_t)v->n_elements * sizeof(float), NULL, out));
    if (nmt_arena_measuring(lc->a)) return NMT_OK;
    return upload_as_f32(lc->pc->ops->dev, out->mem, 0, v);
}

/* n weight parts [rows, cols] stacked into one [n*rows, cols] weight.  When
 * every part is I8 the result stays int8: the n int8 blocks, then the n*rows
 * scales (the layout of one I8 tensor of the stacked shape); when every part
 * is F16 under fp16 compute it stays half; otherwise all parts become fp32. */
static nmt_status load_fused_w(load_ctx *lc, uint32_t n, nmt_lin *out) {
    int all_q8 = 1, all_f16 = lc->f16;
    for (uint32_t i = 0; i < n; i++) {
        if (lc->pend_w[i].dtype != NMT_DTYPE_I8) all_q8 = 0;
        if (lc->pend_w[i].dtype != NMT_DTYPE_F16) all_f16 = 0;
    }
    const size_t part = (size_t)lc->pend_w[0].n_elements, rows = lc->pend_w[0].shape[0];
    const size_t sbytes = rows * sizeof(float);
    const size_t qbytes = nmt_align_up(part * n, 4);
    const size_t ebytes = all_f16 ? 2 : sizeof(float); /* per element when not int8 */
    const size_t wbytes = all_q8 ? qbytes + sbytes * n : part * ebytes * n;
    NMT_TRY(nmt_plan_buffer(lc->pc, lc->a, wbytes, NULL, &out->w));
    out->q8 = all_q8;
    out->f16 = all_f16;
    out->s = out->w;
    out->s.off = all_q8 ? qbytes / sizeof(float) : 0;
    if (nmt_arena_measuring(lc->a)) return NMT_OK;
    nmt_device *dev = lc->pc->ops->dev;
    for (uint32_t i = 0; i < n; i++) {
        const nmt_tensor_view *v = &lc->pend_w[i];
        if (all_q8) {
            NMT_TRY(nmt_device_write(dev, out->w.mem, part * i, part, v->data));
            NMT_TRY(nmt_device_write(dev, out->w.mem, qbytes + sbytes * i, sbytes, v->scales));
        } else if (all_f16) {
            NMT_TRY(nmt_device_write(dev, out->w.mem, part * 2 * i, part * 2, v->data));
        } else {
            NMT_TRY(upload_as_f32(dev, out->w.mem, part * sizeof(float) * i, v));
        }
    }
    return NMT_OK;
}

static nmt_status load_fused_b(load_ctx *lc, uint32_t n, nmt_buf *out) {
    const size_t bytes = (size_t)lc->pend_b[0].n_elements * sizeof(float);
    NMT_TRY(nmt_plan_buffer(lc->pc, lc->a, bytes * n, NULL, out));
    if (nmt_arena_measuring(lc->a)) return NMT_OK;
    for (uint32_t i = 0; i < n; i++)
        NMT_TRY(upload_as_f32(lc->pc->ops->dev, out->mem, bytes * i, &lc->pend_b[i]));
    return NMT_OK;
}

/* Hands the mapped pages of tensors now on the device back to the OS; the
 * measuring pass touched no page, so it has nothing to give back. */
static void release_views(const load_ctx *lc, const nmt_tensor_view *v, uint32_t n) {
    if (nmt_arena_measuring(lc->a)) return;
    for (uint32_t i = 0; i < n; i++) nmt_plan_release_model(lc->pc, v[i].data, (size_t)v[i].nbytes);
}

static nmt_status load_one(void *ctx, const nmt_tensor_decl *t) {
    load_ctx *lc = (load_ctx *)ctx;
    NMT_CHECK(t->n_parts >= 1 && t->n_parts <= MAX_PARTS && t->part < t->n_parts, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(t->dst != NULL || nmt_arena_measuring(lc->a), NMT_ERR_INVALID_ARGUMENT);
    nmt_lin *dst = t->dst ? t->dst : &lc->dummy; /* measuring: no weight struct yet */
    nmt_tensor_view v;
    NMT_TRY(nmt_file_find(lc->f, t->name, &v));
    const int bias = t->role == NMT_ROLE_BIAS;
    if (t->n_parts == 1) {
        nmt_buf scales = {NULL, 0};
        int q8 = 0, f16 = 0;
        NMT_TRY(load_single(lc, &v, bias ? &dst->b : &dst->w, &scales, &q8, &f16));
        release_views(lc, &v, 1);
        if (!bias) {
            dst->s = scales;
            dst->q8 = q8;
            dst->f16 = f16;
        }
        return NMT_OK;
    }
    (bias ? lc->pend_b : lc->pend_w)[t->part] = v;
    if (t->part + 1 < t->n_parts) return NMT_OK;
    NMT_TRY(bias ? load_fused_b(lc, t->n_parts, &dst->b) : load_fused_w(lc, t->n_parts, dst));
    release_views(lc, bias ? lc->pend_b : lc->pend_w, t->n_parts);
    return NMT_OK;
}

nmt_status nmt_family_load_weights(const nmt_family *fam, const void *cfg, void *weights, nmt_plan_ctx *pc,
                                   const nmt_file *f, nmt_arena *a) {
    load_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.pc = pc;
    lc.f = f;
    lc.a = a;
    lc.f16 = pc->fp16;
    return fam->catalogue(cfg, weights, load_one, &lc);
}
