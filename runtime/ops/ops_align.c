/* SPDX-License-Identifier: MIT */
/* ops_align.c — attention alignments (ops.h: nmt_ops_enable_align,
 * nmt_op_attn_align) over cl/align.cl, built only for sessions created
 * with alignments (include/nmt_edge.h, nmt_session_params.alignment). */
#include "ops_internal.h"

#include "kernel_args.h"

#include <math.h>

nmt_status nmt_ops_enable_align(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_attn_align != NULL) return NMT_OK;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "align", "", &prog));
    return nmt_device_kernel(ops->dev, prog, "attn_align", &ops->k_attn_align);
}

nmt_status nmt_op_attn_align(nmt_ops *ops, uint32_t rows, uint32_t group, uint32_t n_heads, uint32_t d_head,
                             uint32_t head, nmt_buf q, uint32_t q_ld, nmt_buf k, uint32_t k_ld, uint64_t kv_stride,
                             nmt_buf key_len, uint32_t lk_max, nmt_buf out, uint32_t out_ld) {
    if (ops == NULL || ops->k_attn_align == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || lk_max == 0) return NMT_OK;
    if (q.mem == NULL || k.mem == NULL || key_len.mem == NULL || out.mem == NULL || group == 0 || n_heads == 0 ||
        d_head == 0 || head > n_heads || out_ld < lk_max || (uint64_t)n_heads * d_head > q_ld ||
        (uint64_t)n_heads * d_head > k_ld || lk_max > INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_attn_align);
    arg_u32(&a, rows);
    arg_u32(&a, group);
    arg_u32(&a, n_heads);
    arg_u32(&a, d_head);
    arg_u32(&a, head);
    arg_f32(&a, (float)(1.0 / sqrt((double)d_head)));
    arg_mem(&a, q.mem);
    arg_u64(&a, q.off);
    arg_u32(&a, q_ld);
    arg_mem(&a, k.mem);
    arg_u64(&a, k.off);
    arg_u32(&a, k_ld);
    arg_u64(&a, kv_stride);
    arg_mem(&a, key_len.mem);
    arg_u64(&a, key_len.off);
    arg_u32(&a, lk_max);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, out_ld);
    NMT_TRY(args_end(ops->dev, &a, "attn_align"));
    const size_t n[1] = {rows};
    return nmt_ops_launch(ops, ops->k_attn_align, 1, n, "attn_align");
}
