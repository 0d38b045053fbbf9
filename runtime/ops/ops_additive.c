/* SPDX-License-Identifier: MIT */
/* ops_additive.c — additive (Bahdanau) attention (ops.h:
 * nmt_ops_enable_additive, nmt_op_additive_attn) over cl/additive.cl,
 * built only for the families with additive attention (BA-NMT, issue 17). */
#include "ops_internal.h"

#include "kernel_args.h"

#include <stdio.h>

nmt_status nmt_ops_enable_additive(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_additive_attn != NULL) return NMT_OK;
    const size_t cap = ops->reduce_wg ? ops->reduce_wg : 1;
    char opts[48];
    snprintf(opts, sizeof opts, "-DREDUCE_WG=%zu", cap);
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "additive", opts, &prog));
    cl_kernel k;
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "additive_attn", &k));
    size_t wg = 1;
    nmt_status s = nmt_kernel_wg(ops->dev, k, cap, &wg);
    if (s != NMT_OK) {
        clReleaseKernel(k);
        return s;
    }
    ops->k_additive_attn = k;
    ops->additive_wg = wg;
    return NMT_OK;
}

/* Elements a rows x cols block at stride ld spans from its buffer's start. */
static uint64_t end_of(nmt_buf b, uint64_t rows, uint64_t ld, uint64_t cols) {
    return (uint64_t)b.off + (rows ? (rows - 1) * ld + cols : 0);
}

nmt_status nmt_additive_check(const nmt_additive_args *a) {
    if (a == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (a->n_rows == 0) return NMT_OK;
    if (a->s_cap == 0 || a->a_dim == 0 || a->d_h == 0 || a->group == 0 || a->s_cap > INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    if (a->q.mem == NULL || a->k.mem == NULL || a->v.mem == NULL || a->h.mem == NULL || a->len.mem == NULL ||
        a->alpha.mem == NULL || a->out.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    if (a->q_ld < a->a_dim || a->k_ld < a->a_dim || a->h_ld < a->d_h || a->out_ld < a->d_h)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((a->e1.mem && a->e1_ld < a->a_dim) || (a->e2.mem && a->e2_ld < a->a_dim)) return NMT_ERR_INVALID_ARGUMENT;
    /* positions are uint in the kernel: every row index must fit 32 bits */
    const uint64_t n_sent = ((uint64_t)a->n_rows + a->group - 1) / a->group;
    if ((uint64_t)a->n_rows * a->s_cap > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    /* the outputs must not overlap the inputs they are computed from */
    const uint64_t al_end = end_of(a->alpha, a->n_rows, a->s_cap, a->s_cap);
    const nmt_buf ins[] = {a->q, a->k, a->e1, a->e2, a->v, a->h, a->out};
    const uint64_t ends[] = {end_of(a->q, a->n_rows, a->q_ld, a->a_dim),
                             end_of(a->k, n_sent * a->s_cap, a->k_ld, a->a_dim),
                             end_of(a->e1, (uint64_t)a->n_rows * a->s_cap, a->e1_ld, a->a_dim),
                             end_of(a->e2, (uint64_t)a->n_rows * a->s_cap, a->e2_ld, a->a_dim),
                             end_of(a->v, 1, a->a_dim, a->a_dim),
                             end_of(a->h, n_sent * a->s_cap, a->h_ld, a->d_h),
                             end_of(a->out, a->n_rows, a->out_ld, a->d_h)};
    const uint64_t out_end = ends[6];
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++) {
        if (ins[i].mem == NULL) continue;
        if (ins[i].mem == a->alpha.mem && ins[i].off < al_end && a->alpha.off < ends[i])
            return NMT_ERR_INVALID_ARGUMENT;
        if (i < 6 && ins[i].mem == a->out.mem && ins[i].off < out_end && a->out.off < ends[i])
            return NMT_ERR_INVALID_ARGUMENT;
    }
    return NMT_OK;
}

nmt_status nmt_op_additive_attn(nmt_ops *ops, const nmt_additive_args *p) {
    if (ops == NULL || ops->k_additive_attn == NULL) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_additive_check(p));
    if (p->n_rows == 0) return NMT_OK;
    const size_t wg = ops->additive_wg ? ops->additive_wg : 1;
    if ((wg & (wg - 1)) != 0 || wg > (ops->reduce_wg ? ops->reduce_wg : 1)) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_additive_attn);
    arg_mem(&a, p->q.mem);
    arg_u64(&a, p->q.off);
    arg_u32(&a, p->q_ld);
    arg_mem(&a, p->k.mem);
    arg_u64(&a, p->k.off);
    arg_u32(&a, p->k_ld);
    /* an absent term is never read: q fills its slot */
    arg_mem(&a, p->e1.mem ? p->e1.mem : p->q.mem);
    arg_u64(&a, p->e1.mem ? p->e1.off : 0);
    arg_u32(&a, p->e1.mem ? p->e1_ld : 0);
    arg_i32(&a, p->e1.mem != NULL);
    arg_mem(&a, p->e2.mem ? p->e2.mem : p->q.mem);
    arg_u64(&a, p->e2.mem ? p->e2.off : 0);
    arg_u32(&a, p->e2.mem ? p->e2_ld : 0);
    arg_i32(&a, p->e2.mem != NULL);
    arg_mem(&a, p->v.mem);
    arg_u64(&a, p->v.off);
    arg_mem(&a, p->h.mem);
    arg_u64(&a, p->h.off);
    arg_u32(&a, p->h_ld);
    arg_mem(&a, p->len.mem);
    arg_u64(&a, p->len.off);
    arg_mem(&a, p->alpha.mem);
    arg_u64(&a, p->alpha.off);
    arg_mem(&a, p->out.mem);
    arg_u64(&a, p->out.off);
    arg_u32(&a, p->out_ld);
    arg_u32(&a, p->s_cap);
    arg_u32(&a, p->a_dim);
    arg_u32(&a, p->d_h);
    arg_u32(&a, p->group);
    NMT_TRY(args_end(ops->dev, &a, "additive_attn"));
    const size_t gws = (size_t)p->n_rows * wg;
    return nmt_enqueue(ops->dev, ops->k_additive_attn, 1, &gws, &wg, "additive_attn");
}
