/* SPDX-License-Identifier: MIT */
/* param_store.c — a trainer model's flat parameters, gradients and Adam
 * moments (param_store.h), shared by every family's trainer. */
#include "param_store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "device.h"

/* host allocation failure (the writer's convention: no dedicated status) */
#define PS_ERR_NOMEM NMT_ERR_IO

static const char *const MOMENT_NAMES[2] = {"train.adam_m", "train.adam_v"};

int nmt_pstore_is_train_only(const char *name) { return strncmp(name, "train.", 6) == 0; }

/* ------------------------------------------------------------------------ */
/* Layout: one walk counts, one fills the table, one binds the views        */
/* ------------------------------------------------------------------------ */

typedef struct layout_ctx {
    nmt_pstore *s;
    int fill_tab, bind;
    uint32_t n;
    size_t total;
    size_t fused[2]; /* base of the current fused block: weights, biases */
} layout_ctx;

static nmt_status layout_one(void *ctx, const nmt_tensor_decl *t) {
    layout_ctx *lc = (layout_ctx *)ctx;
    const size_t count = (size_t)t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    size_t off;
    if (t->n_parts > 1) {
        size_t *base = &lc->fused[t->role == NMT_ROLE_BIAS];
        if (t->part == 0) {
            *base = lc->total;
            lc->total += count * t->n_parts;
        }
        off = *base + count * t->part;
    } else {
        off = lc->total;
        lc->total += count;
    }
    if (lc->fill_tab) {
        nmt_pstore_tensor *ti = &lc->s->tab[lc->n];
        nmt_strlcpy(ti->name, t->name, sizeof ti->name);
        ti->ndim = t->ndim;
        ti->shape[0] = t->shape[0];
        ti->shape[1] = t->shape[1];
        ti->off = off;
        ti->count = count;
    }
    if (lc->bind && t->dst && (t->n_parts <= 1 || t->part == 0)) {
        nmt_buf *view = t->role == NMT_ROLE_BIAS ? &t->dst->b : &t->dst->w;
        *view = nmt_buf_at(lc->s->P, off);
    }
    lc->n++;
    return NMT_OK;
}

static nmt_status layout(nmt_pstore *s, nmt_pstore_walk walk, void *model, int fill_tab, int bind) {
    layout_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.s = s;
    lc.fill_tab = fill_tab;
    lc.bind = bind;
    NMT_TRY(walk(model, bind, layout_one, &lc));
    s->n_tab = lc.n;
    s->n_params = lc.total;
    return NMT_OK;
}

nmt_status nmt_pstore_plan(nmt_pstore *s, nmt_device *dev, nmt_train_ops *t, const nmt_file *f,
                           nmt_pstore_walk walk, void *model) {
    s->dev = dev;
    s->t = t;
    NMT_TRY(layout(s, walk, model, 0, 0));
    s->tab = calloc(s->n_tab, sizeof *s->tab);
    NMT_CHECK(s->tab != NULL, PS_ERR_NOMEM);
    NMT_TRY(layout(s, walk, model, 1, 0));
    for (uint32_t i = 0; i < s->n_tab; i++) {
        nmt_tensor_view v;
        if (nmt_pstore_is_train_only(s->tab[i].name) && nmt_file_find(f, s->tab[i].name, &v) != NMT_OK)
            continue; /* starts at 0 */
        NMT_TRY(nmt_file_expect(f, s->tab[i].name, s->tab[i].ndim, s->tab[i].shape, &v));
        NMT_CHECK(v.dtype == NMT_DTYPE_F32, NMT_ERR_UNSUPPORTED);
    }
    NMT_CHECK(s->n_params <= UINT32_MAX, NMT_ERR_UNSUPPORTED);
    return NMT_OK;
}

nmt_status nmt_pstore_alloc(nmt_pstore *s, nmt_pstore_walk walk, void *model) {
    nmt_buf *bufs[4] = {&s->P, &s->G, &s->M, &s->V};
    size_t bytes;
    for (int i = 0; i < 4; i++) {
        NMT_CHECK(nmt_mul_ok(s->n_params ? s->n_params : 1, sizeof(float), &bytes), NMT_ERR_DEVICE_MEMORY);
        NMT_TRY(nmt_device_buffer(s->dev, bytes, NULL, &s->mems[i]));
        *bufs[i] = (nmt_buf){s->mems[i], 0};
    }
    return layout(s, walk, model, 0, 1); /* the views into P */
}

/* ------------------------------------------------------------------------ */
/* Loading, releasing, writing                                              */
/* ------------------------------------------------------------------------ */

nmt_status nmt_pstore_load(nmt_pstore *s, const nmt_file *f) {
    float *host = malloc(s->n_params * sizeof(float));
    NMT_CHECK(host != NULL, PS_ERR_NOMEM);
    nmt_status st = NMT_OK;
    for (uint32_t i = 0; i < s->n_tab && st == NMT_OK; i++) {
        nmt_tensor_view v;
        st = nmt_file_find(f, s->tab[i].name, &v);
        if (st != NMT_OK && nmt_pstore_is_train_only(s->tab[i].name)) { /* a new train.* tensor starts at 0 */
            memset(host + s->tab[i].off, 0, s->tab[i].count * sizeof(float));
            st = NMT_OK;
        } else if (st == NMT_OK) {
            memcpy(host + s->tab[i].off, v.data, s->tab[i].count * sizeof(float));
        }
    }
    if (st == NMT_OK) st = nmt_device_write(s->dev, s->P.mem, 0, s->n_params * sizeof(float), host);
    free(host);
    NMT_TRY(st);
    const uint32_t np = (uint32_t)s->n_params;
    NMT_TRY(nmt_op_fill(s->t, s->G, np, 0.0f));
    for (int i = 0; i < 2; i++) {
        nmt_buf dst = i ? s->V : s->M;
        nmt_tensor_view v;
        if (nmt_file_find(f, MOMENT_NAMES[i], &v) == NMT_OK && v.dtype == NMT_DTYPE_F32 && v.ndim == 1 &&
            v.shape[0] == s->n_params)
            NMT_TRY(nmt_device_write(s->dev, dst.mem, 0, s->n_params * sizeof(float), v.data));
        else
            NMT_TRY(nmt_op_fill(s->t, dst, np, 0.0f));
    }
    return nmt_device_finish(s->dev);
}

const char *nmt_pstore_missing_train_only(const nmt_pstore *s, const nmt_file *f) {
    for (uint32_t i = 0; i < s->n_tab; i++) {
        nmt_tensor_view v;
        if (nmt_pstore_is_train_only(s->tab[i].name) && nmt_file_find(f, s->tab[i].name, &v) != NMT_OK)
            return s->tab[i].name;
    }
    return NULL;
}

void nmt_pstore_release(nmt_pstore *s) {
    if (s == NULL) return;
    for (int i = 0; i < 4; i++)
        if (s->mems[i]) clReleaseMemObject(s->mems[i]);
    free(s->tab);
    memset(s, 0, sizeof *s);
}

nmt_status nmt_pstore_add_to_writer(nmt_pstore *s, nmtw_writer *w, int optimizer) {
    float *host = malloc(NMT_MAX(s->n_params, (size_t)1) * sizeof(float));
    NMT_CHECK(host != NULL, PS_ERR_NOMEM);
    nmt_status st = nmt_pstore_read(s, host, NULL, NULL, NULL);
    for (uint32_t i = 0; i < s->n_tab && st == NMT_OK; i++)
        if (optimizer || !nmt_pstore_is_train_only(s->tab[i].name)) /* a deployment model has no train.* */
            st = nmtw_add_f32(w, s->tab[i].name, s->tab[i].ndim, s->tab[i].shape, host + s->tab[i].off);
    const uint32_t shape[1] = {(uint32_t)s->n_params};
    for (int i = 0; i < 2 && optimizer && st == NMT_OK; i++) {
        st = nmt_pstore_read(s, NULL, NULL, i ? NULL : host, i ? host : NULL);
        if (st == NMT_OK) st = nmtw_add_f32(w, MOMENT_NAMES[i], 1, shape, host);
    }
    free(host);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Gradients, optimiser, host copies                                        */
/* ------------------------------------------------------------------------ */

nmt_status nmt_pstore_zero_grad(nmt_pstore *s) { return nmt_op_fill(s->t, s->G, (uint32_t)s->n_params, 0.0f); }

nmt_status nmt_pstore_grad_norm(nmt_pstore *s, nmt_buf partial, nmt_buf red, double *norm) {
    NMT_TRY(nmt_op_reduce_sum(s->t, s->G, (uint32_t)s->n_params, 1, partial, red));
    float sum;
    NMT_TRY(nmt_device_read(s->dev, red.mem, red.off * sizeof(float), sizeof sum, &sum));
    *norm = sqrt((double)sum);
    return NMT_OK;
}

nmt_status nmt_pstore_adam_step(nmt_pstore *s, const nmt_adam_params *ap) {
    return nmt_op_adam(s->t, s->P, s->G, s->M, s->V, (uint32_t)s->n_params, ap);
}

nmt_status nmt_pstore_read(nmt_pstore *s, float *params, float *grads, float *adam_m, float *adam_v) {
    const size_t bytes = s->n_params * sizeof(float);
    if (params) NMT_TRY(nmt_device_read(s->dev, s->P.mem, 0, bytes, params));
    if (grads) NMT_TRY(nmt_device_read(s->dev, s->G.mem, 0, bytes, grads));
    if (adam_m) NMT_TRY(nmt_device_read(s->dev, s->M.mem, 0, bytes, adam_m));
    if (adam_v) NMT_TRY(nmt_device_read(s->dev, s->V.mem, 0, bytes, adam_v));
    return nmt_device_finish(s->dev);
}

nmt_status nmt_pstore_write(nmt_pstore *s, const float *params, const float *adam_m, const float *adam_v) {
    const size_t bytes = s->n_params * sizeof(float);
    NMT_TRY(nmt_device_write(s->dev, s->P.mem, 0, bytes, params));
    if (adam_m) NMT_TRY(nmt_device_write(s->dev, s->M.mem, 0, bytes, adam_m));
    if (adam_v) NMT_TRY(nmt_device_write(s->dev, s->V.mem, 0, bytes, adam_v));
    return NMT_OK;
}

int nmt_pstore_span(const nmt_pstore *s, const char *prefix, size_t *off, size_t *n) {
    size_t lo = SIZE_MAX, hi = 0;
    const size_t len = strlen(prefix);
    for (uint32_t i = 0; s != NULL && i < s->n_tab; i++) {
        const nmt_pstore_tensor *t = &s->tab[i];
        if (strncmp(t->name, prefix, len) != 0) continue;
        if (t->off < lo) lo = t->off;
        if (t->off + t->count > hi) hi = t->off + t->count;
    }
    if (lo >= hi) return 0;
    *off = lo;
    *n = hi - lo;
    return 1;
}
