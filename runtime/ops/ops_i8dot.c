/* SPDX-License-Identifier: MIT */
/* ops_i8dot.c — int8 x int8 products (issue 23, item 2) over cl/gemm_i8.cl:
 * the per-row quantization of activations, the int8 x int8 product, and the
 * scratch they use (which path a device takes per shape class is
 * runtime/device/device_paths.c's).  Beside, not instead of, the int8 weights x
 * fp32 path of cl/gemm_q8.cl, which stays the default on devices without
 * integer dot products (docs/PORTING.md, "Fast paths: int8 x int8
 * products"). */
#include "ops_internal.h"

#include "kernel_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMT_OPS_QUANT_WG 4 /* quant_rows' rows per work-group */

/* ------------------------------------------------------------------------ */
/* Choice                                                                   */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

/* gemm_i8_nt_q for class cls (cl/gemm_i8.cl: quant_rows and the product
 * in one launch) where ops->i8_fuse_quant (CPU devices, whose runtimes
 * spend microseconds between launches; GPUs not measured), for the classes
 * of few rows (nmt_ops_gemm_q8_as_i8 uses it up to NMT_OPS_I8_FUSE_ROWS).
 * Kept only if it runs at the product's local size. */
static nmt_status build_fused_quant(nmt_ops *ops, nmt_gemm_class cls) {
    if (ops->k_i8_quant[cls] != NULL) clReleaseKernel(ops->k_i8_quant[cls]);
    ops->k_i8_quant[cls] = NULL;
    if (cls == NMT_GCLASS_BIG || !ops->i8_fuse_quant) return NMT_OK;
    char opts[NMT_OPS_GEMM_OPTS + 64];
    nmt_ops_gemm_opts(ops, NMT_GOP_I8, cls, opts);
    strncat(opts, " -DI8_QUANT=1 -cl-fp32-correctly-rounded-divide-sqrt", sizeof opts - strlen(opts) - 1);
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "gemm_i8", opts, &prog));
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_i8_nt_q", &ops->k_i8_quant[cls]));
    size_t wg = 0;
    NMT_TRY(nmt_kernel_wg(ops->dev, ops->k_i8_quant[cls], ops->cfg[NMT_GOP_I8][cls].wg, &wg));
    if (wg < ops->cfg[NMT_GOP_I8][cls].wg) {
        clReleaseKernel(ops->k_i8_quant[cls]);
        ops->k_i8_quant[cls] = NULL;
    }
    return NMT_OK;
}

nmt_status nmt_ops_enable_i8(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    cl_kernel any = NULL;
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        if (ops->i8_use[c] == 0 || ops->k_gemm[NMT_GOP_I8][c] != NULL) {
            if (ops->k_gemm[NMT_GOP_I8][c] != NULL) any = ops->k_gemm[NMT_GOP_I8][c];
            continue;
        }
        nmt_status s = nmt_ops_gemm_kernel(ops, NMT_GOP_I8, (nmt_gemm_class)c);
        if (s == NMT_ERR_KERNEL_BUILD && ops->i8_use[c] == NMT_I8_VNNI) {
            /* the compiler does not know the builtin: int8 weights x fp32 */
            nmt_log(&ops->dev->log, NMT_LOG_WARN, "gemm_i8: the x86 VNNI variant did not build; int8 weights x fp32");
            ops->i8_use[c] = 0;
            continue;
        }
        if (s == NMT_ERR_KERNEL_BUILD && ops->i8_use[c] == 1) {
            /* the extension is reported but its built-in does not compile
             * (OpenCL C 1.2 mode): the portable kernel */
            nmt_log(&ops->dev->log, NMT_LOG_WARN,
                    "gemm_i8: the integer dot product built-in did not build; portable int8 x int8 kernel");
            ops->i8_use[c] = 2;
            s = nmt_ops_gemm_kernel(ops, NMT_GOP_I8, (nmt_gemm_class)c);
        }
        NMT_TRY(s);
        any = ops->k_gemm[NMT_GOP_I8][c];
        NMT_TRY(build_fused_quant(ops, (nmt_gemm_class)c));
    }
    if (any == NULL || ops->k_quant_rows != NULL) return NMT_OK;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "gemm_i8", "-cl-fp32-correctly-rounded-divide-sqrt", &prog));
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "quant_rows", &ops->k_quant_rows));
    return nmt_kernel_wg(ops->dev, ops->k_quant_rows, ops->wg_max ? ops->wg_max : 1, &ops->i8_quant_wg);
}

nmt_status nmt_op_quant_rows(nmt_ops *ops, uint32_t M, uint32_t K, nmt_buf X, uint32_t ldx, nmt_buf Q, uint32_t ldq,
                             nmt_buf S) {
    if (ops == NULL || ops->dev == NULL || ops->k_quant_rows == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (M == 0) return NMT_OK;
    if (X.mem == NULL || Q.mem == NULL || S.mem == NULL || ldx < K || ldq < K) return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t lim = UINT32_MAX;
    if ((uint64_t)X.off + (uint64_t)(M - 1) * ldx + K > lim || (uint64_t)Q.off + (uint64_t)(M - 1) * ldq + K > lim ||
        (uint64_t)S.off + M > lim)
        return NMT_ERR_UNSUPPORTED;
    args a = args_begin(ops->k_quant_rows);
    arg_u32(&a, M);
    arg_u32(&a, K);
    arg_mem(&a, X.mem);
    arg_u32(&a, (uint32_t)X.off);
    arg_u32(&a, ldx);
    arg_mem(&a, Q.mem);
    arg_u32(&a, (uint32_t)Q.off);
    arg_u32(&a, ldq);
    arg_mem(&a, S.mem);
    arg_u32(&a, (uint32_t)S.off);
    NMT_TRY(args_end(ops->dev, &a, "quant_rows"));
    /* a work-item per row, in groups of NMT_OPS_QUANT_WG rows: a CPU
     * runtime (a group per thread) spreads a few dozen rows, and PoCL, which
     * compiles a kernel per local size at its first launch, compiles one, at
     * the session's warm-up, never while translating (issue 54: the groups
     * were at most a quarter of the rows, a local size per power of two) */
    const size_t lws = NMT_MIN((size_t)NMT_OPS_QUANT_WG, ops->i8_quant_wg ? ops->i8_quant_wg : 1);
    const size_t gws = (M + lws - 1) / lws * lws;
    return nmt_enqueue(ops->dev, ops->k_quant_rows, 1, &gws, &lws, "quant_rows");
}

#define I8_K_MAX (1u << 17) /* 127^2 * K stays inside int32 */

/* The local memory gemm_i8_nt_q takes for M rows of K: a partial maximum per
 * row and work-item, a scale per row, then the rows' bytes (cl/gemm_i8.cl). */
static uint64_t fused_local_bytes(const nmt_ops *ops, uint32_t M, uint32_t K) {
    return (uint64_t)M * K + sizeof(float) * (uint64_t)M * (1u + ops->cfg[NMT_GOP_I8][nmt_gemm_class_of(M)].wg);
}

/* gemm_i8_nt (A int8 with row scales sa), or with fused set gemm_i8_nt_q
 * (A the fp32 activations, quantized in the launch; sa unused), after the
 * same checks; kernel k of class cls, arguments set here. */
static nmt_status launch_i8(nmt_ops *ops, cl_kernel k, int fused, uint32_t M, uint32_t N, uint32_t K, float alpha,
                            nmt_buf A, uint32_t lda, nmt_buf sa, nmt_buf Q, uint32_t ldq, nmt_buf sq, float beta,
                            nmt_buf C, uint32_t ldc, nmt_buf bias, int relu) {
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    const char *kname = fused ? "gemm_i8_nt_q" : "gemm_i8_nt";
    if ((!fused && sa.mem == NULL) || Q.mem == NULL || sq.mem == NULL || ldq < K) return NMT_ERR_INVALID_ARGUMENT;
    if (K >= I8_K_MAX) return NMT_ERR_UNSUPPORTED;
    NMT_TRY(nmt_ops_check_gemm(ops, M, N, K, A, lda, beta, C, ldc, bias));
    const uint64_t lim = UINT32_MAX;
    if ((uint64_t)Q.off + (uint64_t)(N - 1) * ldq + K > lim || (!fused && (uint64_t)sa.off + M > lim) ||
        (uint64_t)sq.off + N > lim)
        return NMT_ERR_UNSUPPORTED;
    const nmt_gemm_cfg *c = &ops->cfg[NMT_GOP_I8][cls];
    args a = args_begin(k);
    nmt_ops_args_gemm_head(&a, M, N, K, alpha, A, lda);
    if (fused) { /* local: partial maxima per work-item, the rows' scales, their int8 bytes */
        arg_raw(&a, (size_t)fused_local_bytes(ops, M, K), NULL);
    } else {
        arg_mem(&a, sa.mem);
        arg_u32(&a, (uint32_t)sa.off);
    }
    arg_mem(&a, Q.mem);
    arg_u32(&a, (uint32_t)Q.off);
    arg_u32(&a, ldq);
    arg_mem(&a, sq.mem);
    arg_u32(&a, (uint32_t)sq.off);
    nmt_ops_args_gemm_tail(&a, beta, C, ldc, bias, relu);
    NMT_TRY(args_end(ops->dev, &a, kname));
    return nmt_ops_launch_gemm(ops, k, c, M, N, kname);
}

nmt_status nmt_op_gemm_i8(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A, uint32_t lda,
                          nmt_buf sa, nmt_buf Q, uint32_t ldq, nmt_buf sq, float beta, nmt_buf C, uint32_t ldc,
                          nmt_buf bias, int relu) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    cl_kernel k = ops->k_gemm[NMT_GOP_I8][nmt_gemm_class_of(M)];
    if (k == NULL) return NMT_ERR_INVALID_ARGUMENT; /* not enabled */
    if (M == 0 || N == 0) return NMT_OK;
    return launch_i8(ops, k, 0, M, N, K, alpha, A, lda, sa, Q, ldq, sq, beta, C, ldc, bias, relu);
}

/* ------------------------------------------------------------------------ */
/* nmt_op_gemm_q8 by way of int8 activations                                */
/* ------------------------------------------------------------------------ */

int nmt_ops_i8_fits(const nmt_ops *ops, nmt_gemm_class cls, uint32_t M, uint32_t K) {
    return ops->i8_use[cls] != 0 && ops->k_gemm[NMT_GOP_I8][cls] != NULL && ops->k_quant_rows != NULL &&
           ops->i8_a.mem != NULL && M <= ops->i8_rows && K > 0 && K < I8_K_MAX &&
           (uint64_t)M * K <= (uint64_t)ops->i8_cap;
}

nmt_status nmt_ops_gemm_q8_as_i8(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                                 uint32_t lda, nmt_buf Q, uint32_t ldq, nmt_buf scale, float beta, nmt_buf C,
                                 uint32_t ldc, nmt_buf bias, int relu) {
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    cl_kernel kq = ops->k_i8_quant[cls];
    ops->n_i8_products++;
    if (ops->chain_on && alpha == 1.0f && beta == 0.0f) { /* recorded into a chain (ops_chain.c) */
        int taken = 0;
        NMT_TRY(nmt_ops_i8_rows_build(ops, cls));
        NMT_TRY(nmt_ops_chain_q8(ops, 1, M, N, K, A, lda, Q, ldq, scale, bias, C, ldc, (nmt_buf){NULL, 0}, 0, relu,
                                 &taken));
        if (taken) return NMT_OK;
    }
    if (kq != NULL && M <= NMT_OPS_I8_FUSE_ROWS && fused_local_bytes(ops, M, K) <= ops->dev->info.local_mem_bytes &&
        (ops->i8_use[cls] != NMT_I8_VNNI || cls != NMT_GCLASS_M2 || K <= NMT_OPS_I8_FUSE_ROW_MAX)) {
        ops->n_i8_fused++;
        return launch_i8(ops, kq, 1, M, N, K, alpha, A, lda, A, Q, ldq, scale, beta, C, ldc, bias, relu);
    }
    NMT_TRY(nmt_op_quant_rows(ops, M, K, A, lda, ops->i8_a, K, ops->i8_s));
    return nmt_op_gemm_i8(ops, M, N, K, alpha, ops->i8_a, K, ops->i8_s, Q, ldq, scale, beta, C, ldc, bias, relu);
}

void nmt_ops_set_i8_scratch(nmt_ops *ops, nmt_buf q, nmt_buf scales, size_t cap, size_t rows) {
    ops->i8_a = q;
    ops->i8_s = scales;
    ops->i8_cap = cap;
    ops->i8_rows = rows;
}
