/* SPDX-License-Identifier: MIT */
/* ops_rows.c — decoding steps of a few rows on CPU devices, where a launch
 * costs more than a small product: a HySAN branch's squeeze gate with int8
 * weights in one launch, one work-item per row (cl/gemm_i8.cl gemm_i8_gate
 * for int8 x int8 products, cl/gemm_q8.cl gemm_q8_gate for int8 weights x
 * fp32), and a post-norm sub-layer's last int8 product with its residual
 * and norm (gemm_i8_nt_ln, gemm_q8_nt_ln; gemm_nt_ln, the fp32 one, is in
 * ops.c).  Each computes every value with the operations of the launches
 * it replaces, so the results are the same bits (docs/PERFORMANCE.md, "The
 * HySAN gate in one launch; the int8 products' norms in theirs"). */
#include "ops_internal.h"

#include "kernel_args.h"

#include <string.h>

/* a buffer argument and its element offset (an absent one: stand_in, never
 * read) */
static void arg_buf(args *a, nmt_buf b, cl_mem stand_in) {
    arg_mem(a, b.mem ? b.mem : stand_in);
    arg_u32(a, b.mem ? (uint32_t)b.off : 0u);
}

/* The gate's checks shared by its forms: NMT_OK to go on, NMT_ERR_UNSUPPORTED
 * to leave it to the three launches, or a bad argument. */
static nmt_status gate_check(uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x, nmt_buf w1,
                             nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out,
                             uint32_t ld_out) {
    if (x.mem == NULL || out.mem == NULL || w1.mem == NULL || w2.mem == NULL || s1.mem == NULL || s2.mem == NULL ||
        dr == 0 || ld_x < d || ld_out < d)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t x_end = x.off + (uint64_t)(rows - 1) * ld_x + d;
    const uint64_t o_end = out.off + (uint64_t)(rows - 1) * ld_out + d, lim = UINT32_MAX;
    if (x.mem == out.mem && x.off < o_end && out.off < x_end) return NMT_ERR_INVALID_ARGUMENT;
    if (x_end > lim || o_end > lim || (uint64_t)w1.off + (uint64_t)dr * d > lim ||
        (uint64_t)w2.off + (uint64_t)d * dr > lim || (uint64_t)s1.off + dr > lim || (uint64_t)s2.off + d > lim ||
        (b1.mem && (uint64_t)b1.off + dr > lim) || (b2.mem && (uint64_t)b2.off + d > lim))
        return NMT_ERR_UNSUPPORTED;
    return NMT_OK;
}

/* Record the gate into a chain of its path's products (ops_chain.c; i8:
 * int8 x int8), or set the gate kernel k's arguments (gemm_q8_gate's and
 * gemm_i8_gate's, the same list) and launch a work-item per row. */
static nmt_status gate_launch(nmt_ops *ops, int i8, cl_kernel k, const char *kname, uint32_t rows, uint32_t d,
                              uint32_t dr, nmt_buf x, uint32_t ld_x, nmt_buf w1, nmt_buf s1, nmt_buf b1, nmt_buf w2,
                              nmt_buf s2, nmt_buf b2, nmt_buf out, uint32_t ld_out, int accumulate) {
    if (ops->chain_on) {
        int taken = 0;
        const cl_uint flags = (b1.mem != NULL) | (b2.mem != NULL) << 1 | (accumulate != 0) << 2;
        NMT_TRY(nmt_ops_chain_gate(ops, i8, rows, d, dr, x, ld_x, w1, s1, b1, w2, s2, b2, out, ld_out, flags, &taken));
        if (taken) {
            ops->n_gates++;
            return NMT_OK;
        }
    }
    args a = args_begin(k);
    arg_u32(&a, rows);
    arg_u32(&a, d);
    arg_u32(&a, dr);
    arg_buf(&a, x, x.mem);
    arg_u32(&a, ld_x);
    arg_buf(&a, w1, x.mem);
    arg_buf(&a, s1, x.mem);
    arg_buf(&a, b1, x.mem);
    arg_buf(&a, w2, x.mem);
    arg_buf(&a, s2, x.mem);
    arg_buf(&a, b2, x.mem);
    arg_buf(&a, out, x.mem);
    arg_u32(&a, ld_out);
    arg_i32(&a, (b1.mem != NULL) | (b2.mem != NULL) << 1 | (accumulate != 0) << 2);
    NMT_TRY(args_end(ops->dev, &a, kname));
    ops->n_gates++;
    const size_t gws = rows, lws = 1;
    return nmt_enqueue(ops->dev, k, 1, &gws, &lws, kname);
}

/* ---- int8 x int8 (cl/gemm_i8.cl, -DI8_ROW=1) ------------------------------ */

/* The one-work-item-per-row kernels (cl/gemm_i8.cl, -DI8_ROW=1:
 * gemm_i8_gate, gemm_i8_nt_ln, and gemm_i8_chain on CPU devices),
 * built on first use (in the session's warm-up) with the options of the
 * smallest class whose products take int8 x int8 (cls, the caller's, has
 * them): any variant gives the same bits, the sums are exact, and the
 * options do not depend on which op comes first (a kernel pack made with
 * the chain on serves a session with it off).  A build that fails (a
 * kernel pack without it in binaries-only mode:
 * NMT_ERR_KERNEL_PACK_MISSING) is the caller's status, as for every other
 * program; later calls then take the separate launches. */
nmt_status nmt_ops_i8_rows_build(nmt_ops *ops, nmt_gemm_class cls) {
    if (ops->i8_row_tried) return NMT_OK;
    ops->i8_row_tried = 1;
    for (int c = NMT_GCLASS_COUNT - 1; c >= 0; c--)
        if (ops->i8_use[c] != 0) cls = (nmt_gemm_class)c;
    char opts[NMT_OPS_GEMM_OPTS + 80];
    nmt_ops_gemm_opts(ops, NMT_GOP_I8, cls, opts);
    strncat(opts, " -DI8_ROW=1 -cl-fp32-correctly-rounded-divide-sqrt", sizeof opts - strlen(opts) - 1);
    /* gemm_i8_chain on CPU devices, as gemm_chain and gemm_q8_chain: the
     * program's options do not depend on whether a session chains
     * (NMT_EDGE_NO_PRODUCT_CHAIN), so one kernel pack serves both */
    const int chain = ops->dev->info.is_cpu;
    if (chain) strncat(opts, " -DI8_CHAIN=1", sizeof opts - strlen(opts) - 1);
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "gemm_i8", opts, &prog));
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_i8_gate", &ops->k_i8_gate));
    NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_i8_nt_ln", &ops->k_i8_ln));
    if (chain) {
        NMT_TRY(nmt_device_kernel(ops->dev, prog, "gemm_i8_chain", &ops->k_i8_chain));
        NMT_TRY(nmt_device_buffer(ops->dev, NMT_OPS_CHAIN_QS_BYTES, NULL, &ops->chain_qs));
    }
    return NMT_OK;
}

/* *out: gemm_i8_nt_ln (ln) or gemm_i8_gate, built on first use. */
static nmt_status row_kernel(nmt_ops *ops, nmt_gemm_class cls, int ln, cl_kernel *out) {
    NMT_TRY(nmt_ops_i8_rows_build(ops, cls));
    *out = ln ? ops->k_i8_ln : ops->k_i8_gate;
    return *out != NULL ? NMT_OK : NMT_ERR_UNSUPPORTED;
}

nmt_status nmt_op_gate_i8(nmt_ops *ops, uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x, nmt_buf w1,
                          nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out, uint32_t ld_out,
                          int accumulate) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_gemm_class cls = nmt_gemm_class_of(rows);
    if (!ops->fuse_gate || rows > NMT_OPS_I8_ROW_ROWS || d > NMT_OPS_I8_FUSE_ROW_MAX ||
        dr > NMT_OPS_I8_ROW_DR_MAX || !nmt_ops_i8_fits(ops, cls, rows, d) || !nmt_ops_i8_fits(ops, cls, rows, dr))
        return NMT_ERR_UNSUPPORTED;
    if (rows == 0 || d == 0) return NMT_OK;
    NMT_TRY(gate_check(rows, d, dr, x, ld_x, w1, s1, b1, w2, s2, b2, out, ld_out));
    cl_kernel k;
    NMT_TRY(row_kernel(ops, cls, 0, &k));
    return gate_launch(ops, 1, k, "gemm_i8_gate", rows, d, dr, x, ld_x, w1, s1, b1, w2, s2, b2, out, ld_out, accumulate);
}

/* The product-with-norm ops' checks shared by both forms: NMT_OK to go on,
 * or a bad argument / NMT_ERR_UNSUPPORTED (beyond 32-bit indexing). */
static nmt_status ln_check(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf Q,
                           uint32_t ldq, nmt_buf scale, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma,
                           nmt_buf beta, nmt_buf O, uint32_t ldo) {
    if (Q.mem == NULL || scale.mem == NULL || R.mem == NULL || gamma.mem == NULL || beta.mem == NULL || ldq < K ||
        ldr < N)
        return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_ops_check_gemm(ops, M, N, K, A, lda, 0.0f, O, ldo, bias));
    const uint64_t a_end = A.off + (uint64_t)(M - 1) * lda + K, o_end = O.off + (uint64_t)(M - 1) * ldo + N;
    if (A.mem == O.mem && A.off < o_end && O.off < a_end) return NMT_ERR_INVALID_ARGUMENT; /* O must not alias A */
    const uint64_t lim = UINT32_MAX;
    if ((uint64_t)Q.off + (uint64_t)(N - 1) * ldq + K > lim || (uint64_t)scale.off + N > lim ||
        R.off + (uint64_t)(M - 1) * ldr + N > lim || (uint64_t)gamma.off + N > lim || (uint64_t)beta.off + N > lim)
        return NMT_ERR_UNSUPPORTED;
    return NMT_OK;
}

/* Record the product with R, then the norm in place, into a chain of its
 * path's products (ops_chain.c; i8: int8 x int8), or set a
 * product-with-norm kernel's arguments (common.cl LN_ROW_PARAMS) and launch
 * a work-group of lws per row. */
static nmt_status ln_launch(nmt_ops *ops, int i8, cl_kernel k, const char *kname, size_t lws, uint32_t M, uint32_t N,
                            uint32_t K, nmt_buf A, uint32_t lda, nmt_buf Q, uint32_t ldq, nmt_buf scale,
                            nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma, nmt_buf beta, float eps, nmt_buf O,
                            uint32_t ldo) {
    if (ops->chain_on) {
        int taken = 0;
        NMT_TRY(nmt_ops_chain_q8(ops, i8, M, N, K, A, lda, Q, ldq, scale, bias, O, ldo, R, ldr, 0, &taken));
        if (taken) {
            ops->n_norms++;
            NMT_TRY(nmt_ops_chain_ln(ops, M, N, O, ldo, (nmt_buf){NULL, 0}, 0, O, ldo, gamma, beta, eps, &taken));
            return taken ? NMT_OK : nmt_op_layernorm(ops, O, (nmt_buf){NULL, 0}, O, M, N, gamma, beta, eps);
        }
    }
    args a = args_begin(k);
    arg_u32(&a, N);
    arg_u32(&a, K);
    arg_buf(&a, A, A.mem);
    arg_u32(&a, lda);
    arg_buf(&a, Q, A.mem);
    arg_u32(&a, ldq);
    arg_buf(&a, scale, A.mem);
    arg_buf(&a, bias, A.mem);
    arg_i32(&a, bias.mem != NULL);
    arg_buf(&a, R, A.mem);
    arg_u32(&a, ldr);
    arg_buf(&a, O, A.mem);
    arg_u32(&a, ldo);
    arg_buf(&a, gamma, A.mem);
    arg_buf(&a, beta, A.mem);
    arg_f32(&a, eps);
    NMT_TRY(args_end(ops->dev, &a, kname));
    ops->n_norms++;
    const size_t gws = (size_t)M * lws;
    return nmt_enqueue(ops->dev, k, 1, &gws, &lws, kname);
}

nmt_status nmt_op_gemm_i8_nt_ln(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf Q,
                               uint32_t ldq, nmt_buf sq, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma,
                               nmt_buf beta, float eps, nmt_buf O, uint32_t ldo) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    if (!ops->i8_fuse_norm || !ops->fused_norm || ops->norm_wg != 1 || M > NMT_OPS_I8_LN_ROWS ||
        K > NMT_OPS_I8_FUSE_ROW_MAX || !nmt_ops_i8_fits(ops, cls, M, K))
        return NMT_ERR_UNSUPPORTED;
    if (M == 0 || N == 0) return NMT_OK;
    NMT_TRY(ln_check(ops, M, N, K, A, lda, Q, ldq, sq, bias, R, ldr, gamma, beta, O, ldo));
    cl_kernel k;
    NMT_TRY(row_kernel(ops, cls, 1, &k));
    ops->n_i8_products++;
    return ln_launch(ops, 1, k, "gemm_i8_nt_ln", 1, M, N, K, A, lda, Q, ldq, sq, bias, R, ldr, gamma, beta, eps, O, ldo);
}


/* ---- int8 weights x fp32 (cl/gemm_q8.cl) ---------------------------------- */

nmt_status nmt_op_gate_q8(nmt_ops *ops, uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x, nmt_buf w1,
                          nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out, uint32_t ld_out,
                          int accumulate) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_gemm_class cls = nmt_gemm_class_of(rows);
    if (!ops->fuse_gate || rows > NMT_OPS_I8_ROW_ROWS || cls == NMT_GCLASS_BIG || dr > NMT_OPS_I8_ROW_DR_MAX)
        return NMT_ERR_UNSUPPORTED;
    /* the products' own class's kernel; int8 x int8 ones are nmt_op_gate_i8's */
    if (nmt_ops_i8_fits(ops, cls, rows, d) || nmt_ops_i8_fits(ops, cls, rows, dr)) return NMT_ERR_UNSUPPORTED;
    NMT_TRY(nmt_ops_q8_ready(ops, cls));
    cl_kernel k = ops->k_q8_gate[cls];
    if (k == NULL) return NMT_ERR_UNSUPPORTED;
    if (rows == 0 || d == 0) return NMT_OK;
    NMT_TRY(gate_check(rows, d, dr, x, ld_x, w1, s1, b1, w2, s2, b2, out, ld_out));
    return gate_launch(ops, 0, k, "gemm_q8_gate", rows, d, dr, x, ld_x, w1, s1, b1, w2, s2, b2, out, ld_out,
                       accumulate);
}

nmt_status nmt_op_gemm_q8_nt_ln(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf Q,
                               uint32_t ldq, nmt_buf scale, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma,
                               nmt_buf beta, float eps, nmt_buf O, uint32_t ldo) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_gemm_class cls = nmt_gemm_class_of(M);
    if (!ops->fused_norm || cls != NMT_GCLASS_M2 || nmt_ops_i8_fits(ops, cls, M, K)) return NMT_ERR_UNSUPPORTED;
    NMT_TRY(nmt_ops_q8_ready(ops, cls));
    if (ops->k_q8_ln == NULL) return NMT_ERR_UNSUPPORTED;
    if (M == 0 || N == 0) return NMT_OK;
    NMT_TRY(ln_check(ops, M, N, K, A, lda, Q, ldq, scale, bias, R, ldr, gamma, beta, O, ldo));
    /* layernorm's local size, as gemm_nt_ln: the same reduction */
    const size_t lws = pow2_floor(NMT_MIN(ops->norm_wg ? ops->norm_wg : 1, ops->q8_ln_wg ? ops->q8_ln_wg : 1));
    return ln_launch(ops, 0, ops->k_q8_ln, "gemm_q8_nt_ln", lws, M, N, K, A, lda, Q, ldq, scale, bias, R, ldr, gamma,
                     beta, eps, O, ldo);
}
