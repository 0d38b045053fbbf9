/* SPDX-License-Identifier: MIT */
/* gemm.cl — dense fp32 matrix products for the op layer (runtime/ops/ops.c).
 *
 * Kernels:
 *   gemm_nt    C[M,N] = alpha * A[M,K] * B[N,K]^T (+ beta*C) (+ bias) (ReLU)
 *   gemm_nn    C[M,N] = alpha * A[M,K] * B[K,N]   (+ beta*C) (+ bias) (ReLU)
 *   gemm_nt_kgroup  gemm_nt's product, a work-group per column of C (built
 *              with -DGEMM_KG_WG: GPUs' decoding steps, common.cl GEMM_KGROUP)
 *   bias_act   C[M,N] += bias[N] and/or ReLU, in place (epilogue for CLBlast)
 *   gemm_nt_ln O[m,:] = LayerNorm(A[m,:] B^T (+ bias) + R[m,:]) * gamma + beta:
 *              a post-norm sub-layer's last product, residual and norm in
 *              one launch (runtime/ops/ops.c nmt_op_gemm_nt_ln; decoding steps
 *              of one or two rows, where the product is one work-group)
 *
 * All matrices are row-major with an explicit leading dimension and element
 * offset, so any sub-matrix of a buffer can be addressed.  Index arithmetic
 * is 32-bit: the host guarantees offset + extent < 2^32 elements.
 *
 * Work decomposition (gemm_*): barrier-free, so fast on CPU-class devices
 * (PoCL runs a work-group as a loop; local memory and barriers are emulated)
 * and correct everywhere.  Work-item (x, y) computes the GEMM_TM x GEMM_TN
 * block of C at rows m0 = y*GEMM_TM, columns n0 = x*GEMM_TN (GEMM_MFAST = 1:
 * one dimension enumerates the blocks with M fastest, so consecutive
 * work-items share the B rows and walk down A, the better order when B is
 * the larger operand; common.cl GEMM_BLOCK_ORIGIN).
 * Out-of-range rows/columns load from a clamped (valid) row/column and are
 * simply not stored, so any M, N, K, offset and leading dimension is
 * correct.  The NDRange may be padded: surplus work-items return.
 *
 *   gemm_nt: dot products along K in vectors of GEMM_VW floats (vloadN
 *            needs only float alignment), a scalar tail for K % GEMM_VW,
 *            one horizontal sum per output at the end.
 *   gemm_nn: outer products: per k, GEMM_TM scalars of A times GEMM_TN
 *            contiguous floats of B's row k, loaded as GEMM_TN/GEMM_VW
 *            vectors when the whole column block is in range (else scalar
 *            loads of clamped columns).
 *
 * Summation order differs between parameter sets (vector lanes are summed
 * at the end), so results agree with a naive product to rounding, not bits.
 *
 * flags (gemm_*, bias_act): bit 0 = add bias[n], bits 1, 3, 4 = ReLU, GELU,
 * swish (common.cl, act_flags).  beta == 0
 * means C is not read (it may hold garbage, NaN included).
 *
 * Multiply-adds are written as a * b + c (contractible to fma by the
 * compiler), never mad(), which may trade accuracy for speed on GPUs.
 *
 * Every loop over the register block carries `#pragma unroll`: without it
 * PoCL's LLVM keeps the loops rolled and the accumulator arrays in stack
 * memory (a load, an FMA and a store per multiply-add; measured 30-50
 * GFLOP/s instead of 110-150 on the 2-core AVX-512 machine of
 * docs/PERFORMANCE.md).  The same holds for gemm_q8.cl and the training GEMMs.
 *
 * -D knobs (defaults; runtime/ops/ops.c takes them from the device's tuning):
 *   GEMM_TM     rows of C per work-item                   (4; 1..8)
 *   GEMM_TN     columns of C per work-item                (4; 1..8, gemm_nn 1..32)
 *   GEMM_VW     vector width: along K (gemm_nt), along N  (4; 1, 2, 4, 8, 16;
 *               (gemm_nn, must divide GEMM_TN, else 1)     gemm_nn: divides TN)
 *   GEMM_MFAST  1: the blocks in one dimension, M fastest  (0)
 *   GEMM_LN_WG  gemm_nt_ln: the largest local size the host may launch it
 *               with (256; power of two)
 *   GEMM_CHAIN  defined: gemm_chain is compiled (on CPU devices the NT m2
 *               class's program, and the m16 class's where its vector
 *               width differs: runtime/ops/ops.c nmt_ops_chain_host)
 */
#ifndef GEMM_TM
#define GEMM_TM 4
#endif
#ifndef GEMM_TN
#define GEMM_TN 4
#endif
#ifndef GEMM_VW
#define GEMM_VW 4
#endif
#ifndef GEMM_MFAST
#define GEMM_MFAST 0
#endif

#define GEMM_FLAG_BIAS 1
#define GEMM_FLAG_RELU 2

#if GEMM_VW == 16
#define VFLOAT float16
#define VLOAD(p) vload16(0, (p))
#define VSUM(v) vsum16(v)
#elif GEMM_VW == 8
#define VFLOAT float8
#define VLOAD(p) vload8(0, (p))
#define VSUM(v) vsum8(v)
#elif GEMM_VW == 4
#define VFLOAT float4
#define VLOAD(p) vload4(0, (p))
#define VSUM(v) vsum4(v)
#elif GEMM_VW == 2
#define VFLOAT float2
#define VLOAD(p) vload2(0, (p))
#define VSUM(v) ((v).x + (v).y)
#elif GEMM_VW == 1
#define VFLOAT float
#define VLOAD(p) (*(p))
#define VSUM(v) (v)
#else
#error "GEMM_VW must be 1, 2, 4, 8 or 16"
#endif

/* GEMM_BLOCK_ORIGIN(): common.cl */

/* The epilogue (common.cl): v = alpha*acc (+ beta*C) (+ bias) (ReLU). */
#define NT_VAL(i, j, n) (alpha * acc[i][j])
#define NT_VVAL(i) (alpha * EPI_VLOAD(0, acc[i]))
#if GEMM_TN_VECTOR
#define GEMM_EPILOGUE()                                                                 \
    if (n0 + GEMM_TN <= N) GEMM_EPILOGUE_VECTOR(NT_VVAL) else GEMM_EPILOGUE_SCALAR(NT_VAL)
#else
#define GEMM_EPILOGUE() GEMM_EPILOGUE_SCALAR(NT_VAL)
#endif

__kernel void gemm_nt(const uint M, const uint N, const uint K, const float alpha,
                      __global const float *A, const uint a_off, const uint lda,
                      __global const float *B, const uint b_off, const uint ldb,
                      const float beta, __global float *C, const uint c_off, const uint ldc,
                      __global const float *bias, const uint bias_off, const int flags) {
    GEMM_BLOCK_ORIGIN()
    if (m0 >= M || n0 >= N) return;

    __global const float *ar[GEMM_TM];
    __global const float *br[GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) br[j] = B + b_off + min(n0 + (uint)j, N - 1u) * ldb;

    VFLOAT accv[GEMM_TM][GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) accv[i][j] = (VFLOAT)(0.0f);

    const uint KV = K - K % GEMM_VW;
    for (uint k = 0; k < KV; k += GEMM_VW) {
        VFLOAT a[GEMM_TM], b[GEMM_TN];
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++) a[i] = VLOAD(ar[i] + k);
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) b[j] = VLOAD(br[j] + k);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) accv[i][j] = a[i] * b[j] + accv[i][j];
    }

    float acc[GEMM_TM][GEMM_TN];
#if GEMM_VW == 16 && (GEMM_TM * GEMM_TN) % 8 == 0
    GEMM_VSUM16_BATCHED(accv, acc) /* common.cl: bitwise vsum16, eight at a time */
#else
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) acc[i][j] = VSUM(accv[i][j]);
#endif
    K_TAIL_IN_ORDER for (uint k = KV; k < K; k++) {
        float a[GEMM_TM], b[GEMM_TN];
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++) a[i] = ar[i][k];
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) b[j] = br[j][k];
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] = a[i] * b[j] + acc[i][j];
    }

    GEMM_EPILOGUE()
}

#ifdef GEMM_KG_WG
/* gemm_nt's product for few rows on GPUs: a work-group per column of C
 * (common.cl GEMM_KGROUP; built with GEMM_TN 1 and GEMM_KG_WG, the local size). */
__kernel __attribute__((reqd_work_group_size(GEMM_KG_WG, 1, 1)))
void gemm_nt_kgroup(const uint M, const uint N, const uint K, const float alpha,
                    __global const float *A, const uint a_off, const uint lda,
                    __global const float *B, const uint b_off, const uint ldb,
                    const float beta, __global float *C, const uint c_off, const uint ldc,
                    __global const float *bias, const uint bias_off, const int flags) {
    const uint n0 = (uint)get_group_id(0), m0 = (uint)get_group_id(1) * GEMM_TM;
    __global const float *br = B + b_off + n0 * ldb;
    GEMM_KGROUP(VLOAD, VLOAD, NT_VAL)
}
#endif

#if GEMM_TN % GEMM_VW == 0
#define GEMM_NN_VW GEMM_VW
#else
#define GEMM_NN_VW 1
#endif
#define GEMM_NN_NV (GEMM_TN / GEMM_NN_VW)

__kernel void gemm_nn(const uint M, const uint N, const uint K, const float alpha,
                      __global const float *A, const uint a_off, const uint lda,
                      __global const float *B, const uint b_off, const uint ldb,
                      const float beta, __global float *C, const uint c_off, const uint ldc,
                      __global const float *bias, const uint bias_off, const int flags) {
    GEMM_BLOCK_ORIGIN()
    if (m0 >= M || n0 >= N) return;

    __global const float *ar[GEMM_TM];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    __global const float *Bp = B + b_off;
    float acc[GEMM_TM][GEMM_TN];

    if (n0 + GEMM_TN <= N) {
        /* whole column block in range: contiguous vector loads of B's rows */
#if GEMM_NN_VW == 16
        float16 accv[GEMM_TM][GEMM_NN_NV];
#define NN_VLOAD(p) vload16(0, (p))
#define NN_VSTORE(v, p) vstore16((v), 0, (p))
#elif GEMM_NN_VW == 8
        float8 accv[GEMM_TM][GEMM_NN_NV];
#define NN_VLOAD(p) vload8(0, (p))
#define NN_VSTORE(v, p) vstore8((v), 0, (p))
#elif GEMM_NN_VW == 4
        float4 accv[GEMM_TM][GEMM_NN_NV];
#define NN_VLOAD(p) vload4(0, (p))
#define NN_VSTORE(v, p) vstore4((v), 0, (p))
#elif GEMM_NN_VW == 2
        float2 accv[GEMM_TM][GEMM_NN_NV];
#define NN_VLOAD(p) vload2(0, (p))
#define NN_VSTORE(v, p) vstore2((v), 0, (p))
#else
        float accv[GEMM_TM][GEMM_NN_NV];
#define NN_VLOAD(p) (*(p))
#define NN_VSTORE(v, p) (*(p) = (v))
#endif
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int v = 0; v < GEMM_NN_NV; v++) accv[i][v] = 0.0f;
        for (uint k = 0; k < K; k++) {
            __global const float *bk = Bp + k * ldb + n0;
            #pragma unroll
            for (int i = 0; i < GEMM_TM; i++) {
                const float a = ar[i][k];
                #pragma unroll
                for (int v = 0; v < GEMM_NN_NV; v++)
                    accv[i][v] = a * NN_VLOAD(bk + v * GEMM_NN_VW) + accv[i][v];
            }
        }
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int v = 0; v < GEMM_NN_NV; v++) NN_VSTORE(accv[i][v], &acc[i][v * GEMM_NN_VW]);
    } else {
        /* ragged right edge: scalar loads of clamped columns */
        uint bc[GEMM_TN];
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) bc[j] = min(n0 + (uint)j, N - 1u);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] = 0.0f;
        for (uint k = 0; k < K; k++) {
            __global const float *bk = Bp + k * ldb;
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) {
                const float b = bk[bc[j]];
                #pragma unroll
                for (int i = 0; i < GEMM_TM; i++) acc[i][j] = ar[i][k] * b + acc[i][j];
            }
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
    *c = act_flags(v, flags);
}

#ifndef GEMM_LN_WG
#define GEMM_LN_WG 256
#endif

/* One block of GEMM_TN columns n0.. of row ar's product with B^T, with
 * gemm_nt's vector dot products (the same summation order, so the same
 * bits), written as o[n] = acc (+ bias) + r[n] for n < nend.  gemm_nt_ln
 * and gemm_chain's residual products both run it, so every compiler makes
 * the same operations of both (on arm64 PoCL a blocked loop of its own
 * summed the scalar tail differently). */
inline void nt_res_block(__global const float *ar, __global const float *B, const uint b_off, const uint ldb,
                         const uint n0, const uint N, const uint nend, const uint K, __global const float *bias,
                         const uint bias_off, const uint has_bias, __global const float *r, __global float *o) {
    const uint KV = K - K % GEMM_VW;
    __global const float *br[GEMM_TN];
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) br[j] = B + b_off + min(n0 + (uint)j, N - 1u) * ldb;
    VFLOAT accv[GEMM_TN];
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) accv[j] = (VFLOAT)(0.0f);
    for (uint k = 0; k < KV; k += GEMM_VW) {
        const VFLOAT a = VLOAD(ar + k);
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) accv[j] = a * VLOAD(br[j] + k) + accv[j];
    }
    float sums[GEMM_TN];
#if GEMM_VW == 16 && GEMM_TN % 8 == 0
    #pragma unroll
    for (int g = 0; g < GEMM_TN; g += 8) /* common.cl: bitwise vsum16, eight at a time */
        vstore8(vsum16x8(accv[g], accv[g + 1], accv[g + 2], accv[g + 3], accv[g + 4], accv[g + 5], accv[g + 6],
                         accv[g + 7]), 0, sums + g);
#else
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) sums[j] = VSUM(accv[j]);
#endif
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) {
        float acc = sums[j];
        K_TAIL_IN_ORDER for (uint k = KV; k < K; k++) acc = ar[k] * br[j][k] + acc;
        const uint n = n0 + (uint)j;
        if (n < nend) o[n] = (has_bias ? acc + bias[bias_off + n] : acc) + r[n];
    }
}

/* gemm_nt_ln: one work-group per row m (any power-of-two local size <=
 * GEMM_LN_WG; CPUs: 1).  Work-item lid computes the blocks of GEMM_TN
 * columns n0 = lid * GEMM_TN, n0 + lsz * GEMM_TN, ... with gemm_nt's
 * vector dot products (the same summation order, so the same bits) and
 * writes v = acc (+ bias) + R into O; after a barrier the group normalises
 * the row in place with layernorm's own ln_row (common.cl).  Before the
 * barrier a work-item reads and writes only its own columns of R and O,
 * so O may alias R (not A: every work-item reads all of A's row). */
__kernel void gemm_nt_ln(const uint N, const uint K, __global const float *A, const uint a_off, const uint lda,
                         __global const float *B, const uint b_off, const uint ldb,
                         __global const float *bias, const uint bias_off, const int has_bias,
                         __global const float *R, const uint r_off, const uint ldr,
                         __global float *O, const uint o_off, const uint ldo,
                         __global const float *G, const uint g_off, __global const float *Bt, const uint bt_off,
                         const float eps) {
    __local float red[GEMM_LN_WG];
    const uint m = (uint)get_group_id(0), lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global const float *ar = A + a_off + m * lda;
    __global const float *r = R + r_off + m * ldr;
    __global float *o = O + o_off + m * ldo;

    for (uint n0 = lid * GEMM_TN; n0 < N; n0 += lsz * GEMM_TN)
        nt_res_block(ar, B, b_off, ldb, n0, N, N, K, bias, bias_off, (uint)has_bias, r, o);
    barrier(CLK_GLOBAL_MEM_FENCE);
    ln_row(o, o, 0, o, N, G + g_off, Bt + bt_off, eps, red);
}

#ifdef GEMM_CHAIN /* the chain's host classes' programs on CPUs (runtime/ops/ops.c nmt_ops_chain_host) */
/* A product with a residual (gemm_nt_ln's product, recorded apart from its
 * norm): gemm_nt_ln's own blocks, row by row. */
inline void chain_prod_res(const uint *o, uint c, __global const float *A, __global const float *B,
                           __global float *C, __global const float *R, __global const float *bias) {
    const uint N = o[CF_N], nend = min(N, (c + 1u) * CHAIN_COLS);
    for (uint m = 0; m < o[CF_M]; m++)
        for (uint n0 = c * CHAIN_COLS; n0 < nend; n0 += GEMM_TN)
            nt_res_block(A + o[CF_AO] + m * o[CF_LDA], B, o[CF_BO], o[CF_LDB], n0, N, nend, o[CF_K], bias,
                         o[CF_BIASO], o[CF_FLAGS] & CHAIN_FLAG_BIAS, R + o[CF_RO] + m * o[CF_LDR], C + o[CF_CO] + m * o[CF_LDC]);
}

#define CHAIN_F32_VAL(acc, n) (acc) /* gemm_nt's value: the sum */
inline void chain_prod(const uint *o, uint c, __global const float *A, __global const float *B,
                       __global float *C, __global const float *R, __global const float *bias) {
    const uint M = o[CF_M], N = o[CF_N], K = o[CF_K], flags = o[CF_FLAGS];
    const uint KV = K - K % GEMM_VW, nend = min(N, (c + 1u) * CHAIN_COLS);
    const uint m0 = 0;
    if (flags & CHAIN_FLAG_RES) {
        chain_prod_res(o, c, A, B, C, R, bias);
    } else {
        CHAIN_ROWS_M(float, VLOAD, VLOAD, CHAIN_F32_VAL) /* chain.cl */
    }
}

/* gemm_chain's own ops (chain.cl chain_run): CHAIN_PROD */
static void chain_own(__global const uint *a, const uint *o, const uint k, __global float **bufs) {
    chain_prod(o, k, bufs[o[CF_A]], bufs[o[CF_B]], bufs[o[CF_C]], bufs[o[CF_R]], bufs[o[CF_BIAS]]);
}

CHAIN_KERNEL(gemm_chain) /* chain.cl */
#endif /* GEMM_CHAIN */
