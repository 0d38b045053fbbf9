/* SPDX-License-Identifier: MIT */
/* gemm_f16.cl — fp16 compute (runtime/ops/ops_f16.c): products and the token
 * embedding with fp16 weights kept fp16 on the device.  Built only on
 * devices that report cl_khr_fp16, for models with fp16 weights, unless
 * turned off (nmt_session_params.fp16_compute, docs/PORTING.md "Fast paths:
 * fp16 compute").
 *
 * Kernels:
 *   gemm_f16_nt  C[M,N] = alpha * A[M,K] * W^T (+ beta*C) (+ bias) (ReLU)
 *                W half [N,K] (the .nmt weight layout), A, C, bias fp32.
 *                Each A value is rounded to half (round to nearest even)
 *                as it is loaded; products of two halves are exact in
 *                fp32 and accumulate in fp32: the arithmetic of a
 *                half x half -> fp32 multiply-accumulate.
 *   embed_f16    out[r,c] = E[tok[r],c] * scale + P(pos0 + r % seq_len, c)
 *                with E half [V, d]           [c, min(rows, seq_len)]
 *
 * Decomposition of gemm_f16_nt as gemm_q8_nt in gemm_q8.cl (barrier-free;
 * GEMM_TM x GEMM_TN block of C per work-item; out-of-range rows/columns
 * clamped on load and not stored; common.cl GEMM_BLOCK_ORIGIN places the
 * blocks), vectors of GEMM_VW halves along K.
 *
 * flags: bit 0 = add bias[n], bits 1, 3, 4 = ReLU, GELU, swish (common.cl,
 * act_flags).  beta == 0: C is not read.
 * gemm indices are 32-bit (the host checks extents < 2^32 elements);
 * embed_f16 addresses with ulong.  Softmax, layer norm, attention and the
 * log-softmax are not here: they stay fp32 whatever the weights.
 *
 * -D knobs (defaults; the host passes the int8 product's tuned set):
 *   GEMM_TM     rows of C per work-item      (1; 1..8)
 *   GEMM_TN     columns of C per work-item   (4; 1..8)
 *   GEMM_VW     halves per load              (16; 1, 2, 4, 8, 16)
 *   GEMM_MFAST  1: the blocks in one dimension, M fastest (0)
 */
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#ifndef GEMM_TM
#define GEMM_TM 1
#endif
#ifndef GEMM_TN
#define GEMM_TN 4
#endif
#ifndef GEMM_VW
#define GEMM_VW 16
#endif
#ifndef GEMM_MFAST
#define GEMM_MFAST 0
#endif

#if GEMM_VW == 1
#define VFLOAT float
#define VLOADH(p) ((float)*(p))
#define VLOADA(p) ((float)(half)*(p))
#define VSUM(v) (v)
#else
#define VCAT(a, b) a##b
#define VX(a, b) VCAT(a, b)
#define VFLOAT VX(float, GEMM_VW)
#define VLOADH(p) VX(convert_float, GEMM_VW)(VX(vload, GEMM_VW)(0, (p)))
#define VLOADA(p) VX(convert_float, GEMM_VW)(VX(convert_half, GEMM_VW)(VX(vload, GEMM_VW)(0, (p))))
#if GEMM_VW == 2
#define VSUM(v) ((v).x + (v).y)
#elif GEMM_VW == 4 || GEMM_VW == 8 || GEMM_VW == 16
#define VSUM(v) VX(vsum, GEMM_VW)(v)
#else
#error "GEMM_VW must be 1, 2, 4, 8 or 16"
#endif
#endif

__kernel void gemm_f16_nt(const uint M, const uint N, const uint K, const float alpha,
                          __global const float *A, const uint a_off, const uint lda,
                          __global const half *W, const uint w_off, const uint ldw,
                          const float beta, __global float *C, const uint c_off, const uint ldc,
                          __global const float *bias, const uint bias_off, const int flags) {
    GEMM_BLOCK_ORIGIN() /* common.cl */
    if (m0 >= M || n0 >= N) return;

    __global const float *ar[GEMM_TM];
    __global const half *wr[GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) wr[j] = W + w_off + min(n0 + (uint)j, N - 1u) * ldw;

    VFLOAT accv[GEMM_TM][GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) accv[i][j] = (VFLOAT)(0.0f);

    const uint KV = K - K % GEMM_VW;
    for (uint k = 0; k < KV; k += GEMM_VW) {
        VFLOAT a[GEMM_TM], b[GEMM_TN];
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) b[j] = VLOADH(wr[j] + k);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++) a[i] = VLOADA(ar[i] + k);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) accv[i][j] = a[i] * b[j] + accv[i][j];
    }

    float acc[GEMM_TM][GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) acc[i][j] = VSUM(accv[i][j]);
    K_TAIL_IN_ORDER for (uint k = KV; k < K; k++)
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++)
                acc[i][j] = (float)(half)ar[i][k] * (float)wr[j][k] + acc[i][j];

    /* the epilogue (common.cl): alpha * acc (+ beta C) (+ bias) (ReLU) */
#define F16_VAL(i, j, n) (alpha * acc[i][j])
#define F16_VVAL(i) (alpha * EPI_VLOAD(0, acc[i]))
#if GEMM_TN_VECTOR
    if (n0 + GEMM_TN <= N) GEMM_EPILOGUE_VECTOR(F16_VVAL) else
#endif
    GEMM_EPILOGUE_SCALAR(F16_VAL)
}

__kernel void embed_f16(__global const int *tok, const ulong tok_off, const uint rows, const uint seq_len,
                        const uint pos0, __global const half *E, const ulong e_off, const uint d,
                        const float scale, __global float *out, const ulong out_off, __global const float *PT,
                        const ulong pt_off, const uint pt_rows) {
    EMBED_ROWS((float)E[e_off + t * d + c])
}
