/* SPDX-License-Identifier: MIT */
/* gemm_bwd.cl — the products and reductions that gradients of the linear
 * layers need beyond the forward GEMMs (train/ops/ops_train.h).
 *
 * For y = x W^T + b (W [out, in], the .nmt layout):
 *   dx = dy W        forward gemm_nn (nmt_op_gemm, trans_b = 0)
 *   dW = dy^T x      gemm_tn below   (A = dy [rows, out], B = x [rows, in])
 *   db = sum_r dy    col_sum below
 *
 * Kernels (NDRange in brackets; every dimension may be padded, surplus
 * work-items return):
 *   gemm_tn   C[M,N] = alpha * A[K,M]^T * B[K,N] (+ C when beta == 1)
 *             work-item (x, y) owns the GEMMT_TM x GEMMT_TN block of C at
 *             rows y*GEMMT_TM, columns x*GEMMT_TN and adds, per k, the
 *             outer product of GEMMT_TM floats of A's row k (broadcast
 *             scalars) and GEMMT_TN floats of B's row k (GEMMT_VW-wide
 *             vector loads when the column block is in range, else scalar
 *             loads of clamped columns).  Rows past M load a clamped row
 *             and are never stored.  Barrier-free.         [N/TN, M/TM]
 *             The host splits long K into chunks (beta = 1 after the
 *             first) so the B rows a work-group streams stay in cache.
 *   col_sum   out[c] = alpha * sum_r X[r*ld + c] (+ out[c] when beta == 1),
 *             rows summed in order 0..rows-1 (deterministic); 16 columns
 *             per work-item                                  [cols / 16]
 *
 * beta == 0 means the output is not read (it may hold NaN).  Offsets and
 * leading dimensions are in elements; addresses are 64-bit (ulong).
 *
 * -D knobs (defaults):
 *   GEMMT_TM  rows of C per work-item of gemm_tn     (4; 1..8)
 *   GEMMT_TN  columns of C per work-item of gemm_tn  (4; 1..32)
 *   GEMMT_VW  vector width along N (4; 1, 2, 4, 8, 16; must divide
 *             GEMMT_TN, else 1 is used)
 */
#ifndef GEMMT_TM
#define GEMMT_TM 4
#endif
#ifndef GEMMT_TN
#define GEMMT_TN 4
#endif
#ifndef GEMMT_VW
#define GEMMT_VW 4
#endif
#if GEMMT_TN % GEMMT_VW == 0
#define TN_VW GEMMT_VW
#else
#define TN_VW 1
#endif
#define TN_NV (GEMMT_TN / TN_VW)
#if TN_VW == 16
#define TN_VFLOAT float16
#define TN_VLOAD(p) vload16(0, (p))
#define TN_VSTORE(v, p) vstore16((v), 0, (p))
#elif TN_VW == 8
#define TN_VFLOAT float8
#define TN_VLOAD(p) vload8(0, (p))
#define TN_VSTORE(v, p) vstore8((v), 0, (p))
#elif TN_VW == 4
#define TN_VFLOAT float4
#define TN_VLOAD(p) vload4(0, (p))
#define TN_VSTORE(v, p) vstore4((v), 0, (p))
#elif TN_VW == 2
#define TN_VFLOAT float2
#define TN_VLOAD(p) vload2(0, (p))
#define TN_VSTORE(v, p) vstore2((v), 0, (p))
#elif TN_VW == 1
#define TN_VFLOAT float
#define TN_VLOAD(p) (*(p))
#define TN_VSTORE(v, p) (*(p) = (v))
#else
#error "GEMMT_VW must be 1, 2, 4, 8 or 16"
#endif

__kernel void gemm_tn(const uint M, const uint N, const uint K, const float alpha,
                      __global const float *A, const ulong a_off, const uint lda,
                      __global const float *B, const ulong b_off, const uint ldb,
                      const float beta, __global float *C, const ulong c_off, const uint ldc) {
    const uint n0 = (uint)get_global_id(0) * GEMMT_TN;
    const uint m0 = (uint)get_global_id(1) * GEMMT_TM;
    if (m0 >= M || n0 >= N) return;

    uint ac[GEMMT_TM];
    #pragma unroll
    for (int i = 0; i < GEMMT_TM; i++) ac[i] = min(m0 + (uint)i, M - 1u);
    float acc[GEMMT_TM][GEMMT_TN];
    __global const float *ak = A + a_off;
    __global const float *bk = B + b_off;

    if (n0 + GEMMT_TN <= N) {
        /* whole column block in range: vector loads of B's row k */
        TN_VFLOAT accv[GEMMT_TM][TN_NV];
        #pragma unroll
        for (int i = 0; i < GEMMT_TM; i++)
            #pragma unroll
            for (int v = 0; v < TN_NV; v++) accv[i][v] = (TN_VFLOAT)(0.0f);
        for (uint k = 0; k < K; k++) {
            TN_VFLOAT b[TN_NV];
            #pragma unroll
            for (int v = 0; v < TN_NV; v++) b[v] = TN_VLOAD(bk + n0 + v * TN_VW);
            #pragma unroll
            for (int i = 0; i < GEMMT_TM; i++) {
                const float a = ak[ac[i]];
                #pragma unroll
                for (int v = 0; v < TN_NV; v++) accv[i][v] = a * b[v] + accv[i][v];
            }
            ak += lda;
            bk += ldb;
        }
        #pragma unroll
        for (int i = 0; i < GEMMT_TM; i++)
            #pragma unroll
            for (int v = 0; v < TN_NV; v++) TN_VSTORE(accv[i][v], &acc[i][v * TN_VW]);
    } else {
        /* ragged right edge: scalar loads of clamped columns */
        uint bc[GEMMT_TN];
        #pragma unroll
        for (int j = 0; j < GEMMT_TN; j++) bc[j] = min(n0 + (uint)j, N - 1u);
        #pragma unroll
        for (int i = 0; i < GEMMT_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMMT_TN; j++) acc[i][j] = 0.0f;
        for (uint k = 0; k < K; k++) {
            float a[GEMMT_TM];
            #pragma unroll
            for (int i = 0; i < GEMMT_TM; i++) a[i] = ak[ac[i]];
            #pragma unroll
            for (int j = 0; j < GEMMT_TN; j++) {
                const float b = bk[bc[j]];
                #pragma unroll
                for (int i = 0; i < GEMMT_TM; i++) acc[i][j] = a[i] * b + acc[i][j];
            }
            ak += lda;
            bk += ldb;
        }
    }

    #pragma unroll
    for (int i = 0; i < GEMMT_TM; i++) {
        const uint m = m0 + (uint)i;
        if (m >= M) break;
        __global float *crow = C + c_off + (ulong)m * ldc;
        #pragma unroll
        for (int j = 0; j < GEMMT_TN; j++) {
            const uint n = n0 + (uint)j;
            if (n >= N) break;
            float v = alpha * acc[i][j];
            if (beta != 0.0f) v += crow[n];
            crow[n] = v;
        }
    }
}

/* 16 columns per work-item (float16 loads along the row), rows in order. */
__kernel void col_sum(const uint rows, const uint cols, const float alpha,
                      __global const float *X, const ulong x_off, const uint ld,
                      const float beta, __global float *out, const ulong out_off) {
    const uint c0 = (uint)get_global_id(0) * 16u;
    if (c0 >= cols) return;
    __global const float *x = X + x_off + c0;
    __global float *o = out + out_off + c0;
    if (c0 + 16u <= cols) {
        float16 s = (float16)(0.0f);
        for (uint r = 0; r < rows; r++) s += vload16(0, x + (ulong)r * ld);
        float16 v = alpha * s;
        if (beta != 0.0f) v += vload16(0, o);
        vstore16(v, 0, o);
        return;
    }
    for (uint c = 0; c < cols - c0; c++) {
        float s = 0.0f;
        for (uint r = 0; r < rows; r++) s += x[(ulong)r * ld + c];
        float v = alpha * s;
        if (beta != 0.0f) v += o[c];
        o[c] = v;
    }
}
