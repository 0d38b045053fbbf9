/* SPDX-License-Identifier: MIT */
/* ops_f16.c — fp16 compute (ops.h: nmt_ops_enable_f16, nmt_op_gemm_f16,
 * nmt_op_embed_f16) over cl/gemm_f16.cl: products and the embedding read
 * fp16 weights as they are stored, on devices with cl_khr_fp16 (the fast
 * path of docs/PORTING.md, "Fast paths: fp16 compute").  The products take
 * the int8 product's tuned knobs (the same loop: narrow weights widened in
 * registers), per shape class. */
#include "ops_internal.h"

#include "kernel_args.h"

#include <stdio.h>
#include <string.h>

void nmt_ops_release_f16(nmt_ops *ops) {
    for (int c = 0; c < NMT_GCLASS_COUNT; c++)
        if (ops->k_gemm_f16[c]) clReleaseKernel(ops->k_gemm_f16[c]);
    if (ops->k_embed_f16) clReleaseKernel(ops->k_embed_f16);
}

nmt_status nmt_ops_enable_f16(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (!ops->dev->info.has_fp16) return NMT_ERR_UNSUPPORTED;
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        if (ops->k_gemm_f16[c] != NULL) continue;
        nmt_gemm_cfg *g = &ops->cfg_f16[c];
        *g = ops->cfg[NMT_GOP_Q8][c];
        if (g->kgroup) { /* gemm_f16.cl has no kgroup kernel: the portable blocks */
            g->tm = c == NMT_GCLASS_M2 ? 1 : 4;
            g->tn = 4;
            g->kgroup = 0;
        }
        char opts[96];
        snprintf(opts, sizeof opts, "-DGEMM_TM=%u -DGEMM_TN=%u -DGEMM_VW=%u -DGEMM_MFAST=%u", (unsigned)g->tm,
                 (unsigned)g->tn, (unsigned)g->vw, (unsigned)g->mfast);
        cl_program prog;
        NMT_TRY(nmt_device_program(ops->dev, "gemm_f16", opts, &prog));
        NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_f16_nt", &ops->k_gemm_f16[c]));
        size_t wg;
        NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_gemm_f16[c], g->wg, &wg));
        g->wg = (uint16_t)wg;
    }
    if (ops->k_embed_f16 == NULL) {
        cl_program prog;
        NMT_TRY(nmt_device_program(ops->dev, "gemm_f16", "", &prog));
        NMT_TRY(nmt_device_kernel(ops->dev, prog, "embed_f16", &ops->k_embed_f16));
        size_t wg;
        NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_embed_f16, ops->wg_max, &wg));
        if (wg < ops->wg_max) return NMT_ERR_UNSUPPORTED; /* every launch uses wg_max */
    }
    return NMT_OK;
}

nmt_status nmt_op_gemm_f16(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A, uint32_t lda,
                           nmt_buf W, uint32_t ldw, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias, int relu) {
    if (ops == NULL || ops->dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    cl_kernel k = ops->k_gemm_f16[cls];
    if (k == NULL) return NMT_ERR_INVALID_ARGUMENT; /* not enabled */
    if (M == 0 || N == 0) return NMT_OK;
    NMT_TRY(nmt_ops_gemm_check(ops, M, N, K, A, lda, W, ldw, beta, C, ldc, bias));
    args a = args_begin(k);
    nmt_ops_args_gemm_head(&a, M, N, K, alpha, A, lda);
    arg_mem(&a, W.mem);
    arg_u32(&a, (uint32_t)W.off);
    arg_u32(&a, ldw);
    nmt_ops_args_gemm_tail(&a, beta, C, ldc, bias, relu);
    NMT_TRY(args_end(ops->dev, &a, "gemm_f16_nt"));
    return nmt_ops_launch_gemm(ops, k, &ops->cfg_f16[cls], M, N, "gemm_f16_nt");
}

nmt_status nmt_op_embed_f16(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, nmt_buf E,
                            uint32_t d, float scale, nmt_buf out) {
    if (ops == NULL || ops->k_embed_f16 == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_buf none = {NULL, 0};
    return nmt_ops_embed_kernel(ops, ops->k_embed_f16, "embed_f16", tok, rows, seq_len, pos0, E, none, d, scale, out);
}
