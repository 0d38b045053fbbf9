/* gemm_bwd.cl — the products and reductions that gradients of the linear
 * layers need beyond the forward GEMMs (runtime/ops_train.h).
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
 *             rows y*GEMMT_TM, columns x*GEMMT_TN; per k it loads GEMMT_TM
 *             contiguous floats of A's row k and GEMMT_TN of B's row k
 *             (clamped to valid columns at the edges, never stored) and
 *             adds their outer product.  Barrier-free.   [N/TN, M/TM]
 *   col_sum   out[c] = alpha * sum_r X[r*ld + c] (+ out[c] when beta == 1),
 *             rows summed in order 0..rows-1 (deterministic)      [c]
 *
 * beta == 0 means the output is not read (it may hold NaN).  Offsets and
 * leading dimensions are in elements; addresses are 64-bit (ulong).
 *
 * -D knobs (defaults):
 *   GEMMT_TM  rows of C per work-item of gemm_tn     (4; 1..8)
 *   GEMMT_TN  columns of C per work-item of gemm_tn  (4; 1..8)
 */
#ifndef GEMMT_TM
#define GEMMT_TM 4
#endif
#ifndef GEMMT_TN
#define GEMMT_TN 4
#endif

__kernel void gemm_tn(const uint M, const uint N, const uint K, const float alpha,
                      __global const float *A, const ulong a_off, const uint lda,
                      __global const float *B, const ulong b_off, const uint ldb,
                      const float beta, __global float *C, const ulong c_off, const uint ldc) {
    const uint n0 = (uint)get_global_id(0) * GEMMT_TN;
    const uint m0 = (uint)get_global_id(1) * GEMMT_TM;
    if (m0 >= M || n0 >= N) return;

    uint ac[GEMMT_TM], bc[GEMMT_TN];
    for (int i = 0; i < GEMMT_TM; i++) ac[i] = min(m0 + (uint)i, M - 1u);
    for (int j = 0; j < GEMMT_TN; j++) bc[j] = min(n0 + (uint)j, N - 1u);

    float acc[GEMMT_TM][GEMMT_TN];
    for (int i = 0; i < GEMMT_TM; i++)
        for (int j = 0; j < GEMMT_TN; j++) acc[i][j] = 0.0f;

    __global const float *ak = A + a_off;
    __global const float *bk = B + b_off;
    for (uint k = 0; k < K; k++) {
        float a[GEMMT_TM], b[GEMMT_TN];
        for (int i = 0; i < GEMMT_TM; i++) a[i] = ak[ac[i]];
        for (int j = 0; j < GEMMT_TN; j++) b[j] = bk[bc[j]];
        for (int i = 0; i < GEMMT_TM; i++)
            for (int j = 0; j < GEMMT_TN; j++) acc[i][j] = a[i] * b[j] + acc[i][j];
        ak += lda;
        bk += ldb;
    }

    for (int i = 0; i < GEMMT_TM; i++) {
        const uint m = m0 + (uint)i;
        if (m >= M) break;
        __global float *crow = C + c_off + (ulong)m * ldc;
        for (int j = 0; j < GEMMT_TN; j++) {
            const uint n = n0 + (uint)j;
            if (n >= N) break;
            float v = alpha * acc[i][j];
            if (beta != 0.0f) v += crow[n];
            crow[n] = v;
        }
    }
}

__kernel void col_sum(const uint rows, const uint cols, const float alpha,
                      __global const float *X, const ulong x_off, const uint ld,
                      const float beta, __global float *out, const ulong out_off) {
    const uint c = (uint)get_global_id(0);
    if (c >= cols) return;
    __global const float *x = X + x_off + c;
    float s = 0.0f;
    for (uint r = 0; r < rows; r++) s += x[(ulong)r * ld];
    float v = alpha * s;
    if (beta != 0.0f) v += out[out_off + c];
    out[out_off + c] = v;
}
