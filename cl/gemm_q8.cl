/* gemm_q8.cl — products with int8 weights and per-row scales (runtime/ops.c,
 * nmt_op_gemm_q8).  Only built for models that carry int8 weights.
 *
 * Kernels:
 *   gemm_q8_gate  a HySAN branch's squeeze gate over a few rows, a
 *               work-item per row (h = ReLU(x W1^T + b1), g = h W2^T + b2,
 *               O = (accumulate ? O : 0) + x * sigmoid(g); flags: bit 0
 *               b1, bit 1 b2, bit 2 accumulate), and
 *   gemm_q8_nt_ln  a product of a few rows with its residual and layer norm
 *               (gemm.cl gemm_nt_ln's int8 counterpart): both with
 *               gemm_q8_nt's sums, so the same bits as their launches apart
 *               (runtime/ops_rows.c nmt_op_gate_q8, nmt_op_gemm_q8_nt_ln);
 *   gemm_q8_nt  C[M,N] = alpha * A[M,K] * W^T (+ beta*C) (+ bias) (ReLU)
 *               with W[n,k] = Q[n,k] * scale[n]: Q is int8 [N,K] (the .nmt
 *               weight layout, row n = the K weights of output n), scale is
 *               fp32 [N]; A, C, bias fp32.
 *
 * Same decomposition as gemm_nt in gemm.cl (barrier-free; GEMM_TM x GEMM_TN
 * block of C per work-item; out-of-range rows/columns clamped on load and not
 * stored; common.cl GEMM_BLOCK_ORIGIN places it): dot products along K
 * in vectors of GEMM_VW int8 weights converted to fp32 in registers, the
 * per-row scale applied once per output.  Accumulation is fp32.
 *
 * flags: bit 0 = add bias[n], bit 1 = ReLU.  beta == 0: C is not read.
 * Indices are 32-bit (the host checks extents < 2^32 elements).
 *
 * -D knobs (defaults):
 *   GEMM_TM     rows of C per work-item      (1; 1..8)
 *   GEMM_TN     columns of C per work-item   (4; 1..8)
 *   GEMM_VW     int8 weights per load        (16; 1, 2, 4, 8, 16)
 *   GEMM_MFAST  1: the blocks in one dimension, M fastest (0)
 */
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
#ifndef GEMM_LN_WG
#define GEMM_LN_WG 256 /* gemm_q8_nt_ln: the largest local size the host may launch it with */
#endif

#if GEMM_VW == 16
#define VFLOAT float16
#define VLOADF(p) vload16(0, (p))
#define VLOADQ(p) convert_float16(vload16(0, (p)))
#define VSUM(v) vsum16(v)
#elif GEMM_VW == 8
#define VFLOAT float8
#define VLOADF(p) vload8(0, (p))
#define VLOADQ(p) convert_float8(vload8(0, (p)))
#define VSUM(v) vsum8(v)
#elif GEMM_VW == 4
#define VFLOAT float4
#define VLOADF(p) vload4(0, (p))
#define VLOADQ(p) convert_float4(vload4(0, (p)))
#define VSUM(v) vsum4(v)
#elif GEMM_VW == 2
#define VFLOAT float2
#define VLOADF(p) vload2(0, (p))
#define VLOADQ(p) convert_float2(vload2(0, (p)))
#define VSUM(v) ((v).x + (v).y)
#elif GEMM_VW == 1
#define VFLOAT float
#define VLOADF(p) (*(p))
#define VLOADQ(p) ((float)*(p))
#define VSUM(v) (v)
#else
#error "GEMM_VW must be 1, 2, 4, 8 or 16"
#endif

__kernel void gemm_q8_nt(const uint M, const uint N, const uint K, const float alpha,
                         __global const float *A, const uint a_off, const uint lda,
                         __global const char *Q, const uint q_off, const uint ldq,
                         __global const float *scale, const uint s_off,
                         const float beta, __global float *C, const uint c_off, const uint ldc,
                         __global const float *bias, const uint bias_off, const int flags) {
    GEMM_BLOCK_ORIGIN() /* common.cl */
    if (m0 >= M || n0 >= N) return;

    __global const float *ar[GEMM_TM];
    __global const char *qr[GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) qr[j] = Q + q_off + min(n0 + (uint)j, N - 1u) * ldq;

    VFLOAT accv[GEMM_TM][GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) accv[i][j] = (VFLOAT)(0.0f);

    const uint KV = K - K % GEMM_VW;
    for (uint k = 0; k < KV; k += GEMM_VW) {
        VFLOAT a[GEMM_TM], b[GEMM_TN];
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) b[j] = VLOADQ(qr[j] + k);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++) a[i] = VLOADF(ar[i] + k);
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
    for (uint k = KV; k < K; k++)
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] = ar[i][k] * (float)qr[j][k] + acc[i][j];

    /* the epilogue (common.cl): alpha * (acc * scale[n]) (+ beta C) (+ bias) (ReLU) */
#define Q8_VAL(i, j, n) (alpha * (acc[i][j] * scale[s_off + n]))
#define Q8_VVAL(i) (alpha * (EPI_VLOAD(0, acc[i]) * EPI_VLOAD(0, scale + s_off + n0)))
#if GEMM_TN_VECTOR
    if (n0 + GEMM_TN <= N) GEMM_EPILOGUE_VECTOR(Q8_VVAL) else
#endif
    GEMM_EPILOGUE_SCALAR(Q8_VAL)
}

/* One output of gemm_q8_nt from a row a (A_AS: its address space), summed
 * in gemm_q8_nt's order (before the row's scale) */
#define Q8_DOT(NAME, A_AS)                                                                      \
    static float NAME(A_AS const float *a, __global const char *q, const uint K) {              \
        VFLOAT accv = (VFLOAT)(0.0f);                                                           \
        const uint KV = K - K % GEMM_VW;                                                        \
        for (uint k = 0; k < KV; k += GEMM_VW) accv = VLOADF(a + k) * VLOADQ(q + k) + accv;     \
        float acc = VSUM(accv);                                                                 \
        for (uint k = KV; k < K; k++) acc = a[k] * (float)q[k] + acc;                           \
        return acc;                                                                             \
    }
Q8_DOT(q8_dot_g, __global)
Q8_DOT(q8_dot_p, __private)
#define Q8_GATE_VAL(sum, S, n) (1.0f * ((sum) * S[n])) /* Q8_VAL, alpha 1 */

/* gemm_q8_gate (runtime/ops_rows.c nmt_op_gate_q8): one work-item per row,
 * h in private memory, every value with the operations of the two
 * products and gate_accum (exp per element): the same bits.  d / r at most
 * Q8_GATE_DR_MAX (the host checks). */
#define Q8_GATE_DR_MAX 512
__kernel void gemm_q8_gate(GATE_ROW_PARAMS) { /* common.cl */
    GATE_ROW_BEGIN();
    float h[Q8_GATE_DR_MAX];
    for (uint j = 0; j < dr; j++) { /* gemm_q8_nt's epilogue: value, bias, ReLU */
        float v = Q8_GATE_VAL(q8_dot_g(x, W1 + w1_off + j * d, d), S1, s1_off + j);
        if (flags & 1) v += B1[b1_off + j];
        h[j] = fmax(v, 0.0f);
    }
    __global float *o = O + o_off + r * ldo;
    for (uint c = 0; c < d; c++) {
        float g = Q8_GATE_VAL(q8_dot_p(h, W2 + w2_off + c * dr, dr), S2, s2_off + c);
        if (flags & 2) g += B2[b2_off + c];
        const float v = x[c] / (1.0f + exp(-g)); /* gate_accum: x * sigmoid(g) */
        o[c] = (flags & 4) ? o[c] + v : v;
    }
}

/* gemm_q8_nt_ln: gemm.cl gemm_nt_ln for int8 weights, one work-group per row
 * m (any power-of-two local size; CPUs: 1): work-item lid computes columns
 * lid, lid + lsz, ... with gemm_q8_nt's sums and epilogue, adds R into O,
 * then the group normalises the row with layernorm's ln_row (common.cl):
 * the same bits as gemm_q8_nt then layernorm.  O may alias R, not A. */
__kernel void gemm_q8_nt_ln(LN_ROW_PARAMS) { /* common.cl */
    __local float red[GEMM_LN_WG];
    const uint m = (uint)get_group_id(0), lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    __global const float *ar = A + a_off + m * lda;
    __global const float *r = R + r_off + m * ldr;
    __global float *o = O + o_off + m * ldo;
    for (uint n = lid; n < N; n += lsz) {
        const float v = Q8_GATE_VAL(q8_dot_g(ar, Q + q_off + n * ldq, K), scale, s_off + n);
        o[n] = (has_bias ? v + bias[bias_off + n] : v) + r[n];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    ln_row(o, o, 0, o, N, G + g_off, Bt + bt_off, eps, red);
}

#ifdef GEMM_KG_WG
/* gemm_q8_nt's product for few rows on GPUs: a work-group per column of C
 * (common.cl GEMM_KGROUP; built with GEMM_TN 1 and GEMM_KG_WG, the local size). */
__kernel __attribute__((reqd_work_group_size(GEMM_KG_WG, 1, 1)))
void gemm_q8_nt_kgroup(const uint M, const uint N, const uint K, const float alpha,
                       __global const float *A, const uint a_off, const uint lda,
                       __global const char *Q, const uint q_off, const uint ldq,
                       __global const float *scale, const uint s_off,
                       const float beta, __global float *C, const uint c_off, const uint ldc,
                       __global const float *bias, const uint bias_off, const int flags) {
    const uint n0 = (uint)get_group_id(0), m0 = (uint)get_group_id(1) * GEMM_TM;
    __global const char *br = Q + q_off + n0 * ldq;
    GEMM_KGROUP(VLOADF, VLOADQ, Q8_VAL)
}
#endif
