/* SPDX-License-Identifier: MIT */
/* ops_train_additive.c — backward of additive attention (ops_train.h
 * nmt_op_additive_bwd) over cl/additive_bwd.cl (BA-NMT, issue 17): one
 * work-group per row for the softmax backward and the per-element
 * gradients, then a column sum for dv. */
#include "ops_train.h"

#include "kernel_args.h"

/* 1 if the rows x cols block of a (stride lda) and the span [b, b + nb)
 * of the same buffer may intersect (conservative: whole spans). */
static int meet(nmt_buf a, uint64_t rows, uint64_t lda, uint64_t cols, nmt_buf b, uint64_t nb) {
    if (a.mem == NULL || b.mem == NULL || a.mem != b.mem || rows == 0 || nb == 0) return 0;
    const uint64_t na = (rows - 1) * lda + cols;
    return (uint64_t)a.off < (uint64_t)b.off + nb && (uint64_t)b.off < (uint64_t)a.off + na;
}

static void arg_opt(args *a, nmt_buf b, uint32_t ld, nmt_buf fill) {
    arg_mem(a, b.mem ? b.mem : fill.mem);
    arg_u64(a, b.mem ? b.off : 0);
    arg_u32(a, b.mem ? ld : 0);
    arg_i32(a, b.mem != NULL);
}

nmt_status nmt_op_additive_bwd(nmt_train_ops *t, const nmt_additive_bwd_args *p) {
    if (t == NULL || t->dev == NULL || t->k_additive_bwd_rows == NULL || p == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_additive_args *f = &p->fwd;
    NMT_TRY(nmt_additive_check(f));
    if (f->n_rows == 0) return NMT_OK;
    if (f->group != 1 || p->dc.mem == NULL || p->dq.mem == NULL || p->dk.mem == NULL || p->dv.mem == NULL ||
        p->dh.mem == NULL || p->scratch.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    if (p->dc_ld < f->d_h || p->dq_ld < f->a_dim || p->dk_ld < f->a_dim || p->dh_ld < f->d_h ||
        (p->de1.mem && (f->e1.mem == NULL || p->de1_ld < f->a_dim)) ||
        (p->de2.mem && (f->e2.mem == NULL || p->de2_ld < f->a_dim)))
        return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t rows = f->n_rows, pos = rows * f->s_cap, scr = pos + rows * f->a_dim;
    if (scr > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    /* each output against every input and every other output */
    const struct {
        nmt_buf b;
        uint64_t rows, ld, cols;
    } outs[] = {{p->dq, rows, p->dq_ld, f->a_dim},  {p->dk, pos, p->dk_ld, f->a_dim},
                {p->de1, pos, p->de1_ld, f->a_dim}, {p->de2, pos, p->de2_ld, f->a_dim},
                {p->dv, 1, f->a_dim, f->a_dim},     {p->dh, pos, p->dh_ld, f->d_h},
                {p->scratch, 1, scr, scr}};
    const struct {
        nmt_buf b;
        uint64_t rows, ld, cols;
    } ins[] = {{f->q, rows, f->q_ld, f->a_dim}, {f->k, pos, f->k_ld, f->a_dim},   {f->e1, pos, f->e1_ld, f->a_dim},
               {f->e2, pos, f->e2_ld, f->a_dim}, {f->v, 1, f->a_dim, f->a_dim},  {f->h, pos, f->h_ld, f->d_h},
               {f->len, 1, rows, rows},          {f->alpha, 1, pos, pos},         {p->dc, rows, p->dc_ld, f->d_h},
               {p->dalpha, 1, pos, pos}};
    const size_t n_out = sizeof outs / sizeof outs[0], n_in = sizeof ins / sizeof ins[0];
    for (size_t i = 0; i < n_out; i++) {
        if (outs[i].b.mem == NULL) continue;
        const uint64_t span_i = (outs[i].rows - 1) * outs[i].ld + outs[i].cols;
        for (size_t j = 0; j < n_in; j++)
            if (meet(ins[j].b, ins[j].rows, ins[j].ld, ins[j].cols, outs[i].b, span_i)) return NMT_ERR_INVALID_ARGUMENT;
        for (size_t j = i + 1; j < n_out; j++)
            if (meet(outs[j].b, outs[j].rows, outs[j].ld, outs[j].cols, outs[i].b, span_i))
                return NMT_ERR_INVALID_ARGUMENT;
    }
    const size_t wg = t->reduce_wg ? t->reduce_wg : 1;

    args a = args_begin(t->k_additive_bwd_rows);
    arg_mem(&a, f->q.mem);
    arg_u64(&a, f->q.off);
    arg_u32(&a, f->q_ld);
    arg_mem(&a, f->k.mem);
    arg_u64(&a, f->k.off);
    arg_u32(&a, f->k_ld);
    arg_opt(&a, f->e1, f->e1_ld, f->q);
    arg_opt(&a, f->e2, f->e2_ld, f->q);
    arg_mem(&a, f->v.mem);
    arg_u64(&a, f->v.off);
    arg_mem(&a, f->h.mem);
    arg_u64(&a, f->h.off);
    arg_u32(&a, f->h_ld);
    arg_mem(&a, f->len.mem);
    arg_u64(&a, f->len.off);
    arg_mem(&a, f->alpha.mem);
    arg_u64(&a, f->alpha.off);
    arg_mem(&a, p->dc.mem);
    arg_u64(&a, p->dc.off);
    arg_u32(&a, p->dc_ld);
    arg_mem(&a, p->dalpha.mem ? p->dalpha.mem : f->alpha.mem);
    arg_u64(&a, p->dalpha.mem ? p->dalpha.off : 0);
    arg_i32(&a, p->dalpha.mem != NULL);
    arg_mem(&a, p->dq.mem);
    arg_u64(&a, p->dq.off);
    arg_u32(&a, p->dq_ld);
    arg_i32(&a, p->dq_accumulate != 0);
    arg_mem(&a, p->dk.mem);
    arg_u64(&a, p->dk.off);
    arg_u32(&a, p->dk_ld);
    arg_opt(&a, p->de1, p->de1_ld, p->dk);
    arg_opt(&a, p->de2, p->de2_ld, p->dk);
    arg_mem(&a, p->dh.mem);
    arg_u64(&a, p->dh.off);
    arg_u32(&a, p->dh_ld);
    arg_mem(&a, p->scratch.mem);
    arg_u64(&a, p->scratch.off);
    arg_u32(&a, f->n_rows);
    arg_u32(&a, f->s_cap);
    arg_u32(&a, f->a_dim);
    arg_u32(&a, f->d_h);
    NMT_TRY(args_end(t->dev, &a, "additive_bwd_rows"));
    const size_t gws = (size_t)f->n_rows * wg;
    NMT_TRY(nmt_enqueue(t->dev, t->k_additive_bwd_rows, 1, &gws, &wg, "additive_bwd_rows"));

    args d = args_begin(t->k_additive_bwd_dv);
    arg_mem(&d, p->scratch.mem);
    arg_u64(&d, p->scratch.off + pos);
    arg_u32(&d, f->n_rows);
    arg_u32(&d, f->a_dim);
    arg_mem(&d, p->dv.mem);
    arg_u64(&d, p->dv.off);
    NMT_TRY(args_end(t->dev, &d, "additive_bwd_dv"));
    const size_t lws = pow2_floor(t->wg_max ? t->wg_max : 1); /* one local size whatever a_dim */
    const size_t gdv = (f->a_dim + lws - 1) / lws * lws;
    return nmt_enqueue(t->dev, t->k_additive_bwd_dv, 1, &gdv, &lws, "additive_bwd_dv");
}
