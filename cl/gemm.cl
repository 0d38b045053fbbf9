/* gemm.cl — dense fp32 matrix products for the op layer (runtime/ops.c).
 *
 * Kernels:
 *   gemm_nt    C[M,N] = alpha * A[M,K] * B[N,K]^T (+ beta*C) (+ bias) (ReLU)
 *   gemm_nn    C[M,N] = alpha * A[M,K] * B[K,N]   (+ beta*C) (+ bias) (ReLU)
 *   bias_act   C[M,N] += bias[N] and/or ReLU, in place (epilogue for CLBlast)
 *
 * All matrices are row-major with an explicit leading dimension and element
 * offset, so any sub-matrix of a buffer can be addressed.  Index arithmetic
 * is 32-bit: the host guarantees offset + extent < 2^32 elements.
 *
 * Work decomposition (gemm_*): barrier-free; work-item (x, y) computes the
 * GEMM_TM x GEMM_TN block of C at rows y*GEMM_TM, columns x*GEMM_TN.  Out-of-
 * range rows/columns load from a clamped (valid) row/column and are simply
 * not stored, so any M, N, K, offset and leading dimension is correct.  The
 * K loop runs in steps of 4 with vload4 (which needs only float alignment)
 * and finishes with a scalar tail.  The NDRange may be padded beyond
 * ceil(N/TN) x ceil(M/TM): surplus work-items return.
 *
 * flags (gemm_*, bias_act): bit 0 = add bias[n], bit 1 = ReLU.  beta == 0
 * means C is not read (it may hold garbage, NaN included).
 *
 * Multiply-adds are written as a * b + c (contractible to fma by the
 * compiler), never mad(), which may trade accuracy for speed on GPUs.
 *
 * runtime/ops.c builds this file twice: 4 x 4 tiles, and 1 x 8 tiles for
 * products with fewer than 4 rows (decoding steps).
 *
 * -D knobs (defaults):
 *   GEMM_TM  rows of C per work-item     (4; 1..8)
 *   GEMM_TN  columns of C per work-item  (4; 1..8)
 */
#ifndef GEMM_TM
#define GEMM_TM 4
#endif
#ifndef GEMM_TN
#define GEMM_TN 4
#endif

#define GEMM_FLAG_BIAS 1
#define GEMM_FLAG_RELU 2

/* Shared epilogue: v = alpha*acc (+ beta*C) (+ bias) (ReLU), stored in range. */
#define GEMM_EPILOGUE()                                                                 \
    for (int i = 0; i < GEMM_TM; i++) {                                                 \
        const uint m = m0 + (uint)i;                                                    \
        if (m >= M) break;                                                              \
        __global float *crow = C + c_off + m * ldc;                                     \
        for (int j = 0; j < GEMM_TN; j++) {                                             \
            const uint n = n0 + (uint)j;                                                \
            if (n >= N) break;                                                          \
            float v = alpha * acc[i][j];                                                \
            if (beta != 0.0f) v += beta * crow[n];                                \
            if (flags & GEMM_FLAG_BIAS) v += bias[bias_off + n];                        \
            if (flags & GEMM_FLAG_RELU) v = fmax(v, 0.0f);                              \
            crow[n] = v;                                                                \
        }                                                                               \
    }

__kernel void gemm_nt(const uint M, const uint N, const uint K, const float alpha,
                      __global const float *A, const uint a_off, const uint lda,
                      __global const float *B, const uint b_off, const uint ldb,
                      const float beta, __global float *C, const uint c_off, const uint ldc,
                      __global const float *bias, const uint bias_off, const int flags) {
    const uint n0 = (uint)get_global_id(0) * GEMM_TN;
    const uint m0 = (uint)get_global_id(1) * GEMM_TM;
    if (m0 >= M || n0 >= N) return;

    __global const float *ar[GEMM_TM];
    __global const float *br[GEMM_TN];
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    for (int j = 0; j < GEMM_TN; j++) br[j] = B + b_off + min(n0 + (uint)j, N - 1u) * ldb;

    float4 acc4[GEMM_TM][GEMM_TN];
    for (int i = 0; i < GEMM_TM; i++)
        for (int j = 0; j < GEMM_TN; j++) acc4[i][j] = (float4)(0.0f);

    const uint K4 = K & ~3u;
    for (uint k = 0; k < K4; k += 4) {
        float4 a[GEMM_TM], b[GEMM_TN];
        for (int i = 0; i < GEMM_TM; i++) a[i] = vload4(0, ar[i] + k);
        for (int j = 0; j < GEMM_TN; j++) b[j] = vload4(0, br[j] + k);
        for (int i = 0; i < GEMM_TM; i++)
            for (int j = 0; j < GEMM_TN; j++) acc4[i][j] += a[i] * b[j];
    }

    float acc[GEMM_TM][GEMM_TN];
    for (int i = 0; i < GEMM_TM; i++)
        for (int j = 0; j < GEMM_TN; j++)
            acc[i][j] = (acc4[i][j].x + acc4[i][j].y) + (acc4[i][j].z + acc4[i][j].w);
    for (uint k = K4; k < K; k++) {
        float a[GEMM_TM], b[GEMM_TN];
        for (int i = 0; i < GEMM_TM; i++) a[i] = ar[i][k];
        for (int j = 0; j < GEMM_TN; j++) b[j] = br[j][k];
        for (int i = 0; i < GEMM_TM; i++)
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] += a[i] * b[j];
    }

    GEMM_EPILOGUE()
}

__kernel void gemm_nn(const uint M, const uint N, const uint K, const float alpha,
                      __global const float *A, const uint a_off, const uint lda,
                      __global const float *B, const uint b_off, const uint ldb,
                      const float beta, __global float *C, const uint c_off, const uint ldc,
                      __global const float *bias, const uint bias_off, const int flags) {
    const uint n0 = (uint)get_global_id(0) * GEMM_TN;
    const uint m0 = (uint)get_global_id(1) * GEMM_TM;
    if (m0 >= M || n0 >= N) return;

    __global const float *ar[GEMM_TM];
    uint bc[GEMM_TN];  /* clamped column indices of B */
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    for (int j = 0; j < GEMM_TN; j++) bc[j] = min(n0 + (uint)j, N - 1u);
    __global const float *Bp = B + b_off;

    float acc[GEMM_TM][GEMM_TN];
    for (int i = 0; i < GEMM_TM; i++)
        for (int j = 0; j < GEMM_TN; j++) acc[i][j] = 0.0f;

    /* A rows are contiguous along K (vload4); B rows along N (scalar loads of
     * GEMM_TN neighbouring columns, contiguous across the work-group). */
    const uint K4 = K & ~3u;
    for (uint k = 0; k < K4; k += 4) {
        float4 a[GEMM_TM];
        for (int i = 0; i < GEMM_TM; i++) a[i] = vload4(0, ar[i] + k);
        __global const float *b0 = Bp + k * ldb;
        __global const float *b1 = b0 + ldb;
        __global const float *b2 = b1 + ldb;
        __global const float *b3 = b2 + ldb;
        for (int j = 0; j < GEMM_TN; j++) {
            const float4 b = (float4)(b0[bc[j]], b1[bc[j]], b2[bc[j]], b3[bc[j]]);
            for (int i = 0; i < GEMM_TM; i++) acc[i][j] += dot(a[i], b);
        }
    }
    for (uint k = K4; k < K; k++) {
        __global const float *bk = Bp + k * ldb;
        for (int j = 0; j < GEMM_TN; j++) {
            const float b = bk[bc[j]];
            for (int i = 0; i < GEMM_TM; i++) acc[i][j] += ar[i][k] * b;
        }
    }

    GEMM_EPILOGUE()
}

/* Epilogue after a library GEMM: one work-item per element (x = n, y = m). */
__kernel void bias_act(const uint M, const uint N, __global float *C, const uint c_off, const uint ldc,
                       __global const float *bias, const uint bias_off, const int flags) {
    const uint n = (uint)get_global_id(0);
    const uint m = (uint)get_global_id(1);
    if (m >= M || n >= N) return;
    __global float *c = C + c_off + m * ldc + n;
    float v = *c;
    if (flags & GEMM_FLAG_BIAS) v += bias[bias_off + n];
    if (flags & GEMM_FLAG_RELU) v = fmax(v, 0.0f);
    *c = v;
}
