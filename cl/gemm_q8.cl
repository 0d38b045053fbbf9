/* SPDX-License-Identifier: MIT */
/* gemm_q8.cl — products with int8 weights and per-row scales (runtime/ops/ops.c,
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
 *               (runtime/ops/ops_rows.c nmt_op_gate_q8, nmt_op_gemm_q8_nt_ln);
 *   gemm_q8_chain  (-DQ8_CHAIN, on CPU devices the m2 class's program,
 *               and the m16 class's where its vector width differs:
 *               runtime/ops/ops.c nmt_ops_chain_host) chain.cl's chain_run with this program's own
 *               ops: int8-weight products (gemm_q8_nt's sums, q8_dot_g) and
 *               gemm_q8_gate's rows;
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
 * flags: bit 0 = add bias[n], bits 1, 3, 4 = ReLU, GELU, swish (common.cl,
 * act_flags).  beta == 0: C is not read.
 * Indices are 32-bit (the host checks extents < 2^32 elements).
 *
 * -D knobs (defaults):
 *   GEMM_TM     rows of C per work-item      (1; 1..8)
 *   GEMM_TN     columns of C per work-item   (4; 1..8)
 *   GEMM_VW     int8 weights per load        (16; 1, 2, 4, 8, 16)
 *   GEMM_MFAST  1: the blocks in one dimension, M fastest (0)
 *   Q8_CHAIN    defined: gemm_q8_chain is compiled
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
    K_TAIL_IN_ORDER for (uint k = KV; k < K; k++)
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
        K_TAIL_IN_ORDER for (uint k = KV; k < K; k++) acc = a[k] * (float)q[k] + acc;           \
        return acc;                                                                             \
    }
Q8_DOT(q8_dot_g, __global)
Q8_DOT(q8_dot_p, __private)
#define Q8_GATE_VAL(sum, S, n) (1.0f * ((sum) * S[n])) /* Q8_VAL, alpha 1 */

/* gemm_q8_gate (runtime/ops/ops_rows.c nmt_op_gate_q8): one work-item per row,
 * h in private memory, every value with the operations of the two
 * products and gate_accum (exp per element): the same bits.  d / r at most
 * Q8_GATE_DR_MAX (the host checks). */
#define Q8_GATE_DR_MAX 512
/* gemm_q8_gate's work for one row: x and o that row's input and output */
static void q8_gate_row(const uint d, const uint dr, __global const float *x, __global const char *W1,
                        __global const float *S1, __global const float *B1, __global const char *W2,
                        __global const float *S2, __global const float *B2, __global float *o, const int flags) {
    float h[Q8_GATE_DR_MAX];
    for (uint j = 0; j < dr; j++) { /* gemm_q8_nt's epilogue: value, bias, ReLU */
        float v = Q8_GATE_VAL(q8_dot_g(x, W1 + j * d, d), S1, j);
        if (flags & 1) v += B1[j];
        h[j] = fmax(v, 0.0f);
    }
    for (uint c = 0; c < d; c++) {
        float g = Q8_GATE_VAL(q8_dot_p(h, W2 + c * dr, dr), S2, c);
        if (flags & 2) g += B2[c];
        const float v = x[c] / (1.0f + exp(-g)); /* gate_accum: x * sigmoid(g) */
        o[c] = (flags & 4) ? o[c] + v : v;
    }
}

__kernel void gemm_q8_gate(GATE_ROW_PARAMS) { /* common.cl */
    GATE_ROW_BEGIN();
    q8_gate_row(d, dr, x, W1 + w1_off, S1 + s1_off, B1 + b1_off, W2 + w2_off, S2 + s2_off, B2 + b2_off,
                O + o_off + r * ldo, flags);
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

#ifdef Q8_CHAIN /* the chain's host classes' programs on CPUs (runtime/ops/ops.c nmt_ops_chain_host) */
/* An int8-weight product's chunk c (CHAIN_COLS columns of its M rows):
 * gemm_q8_nt's blocks (chain.cl CHAIN_ROWS with its loads and value) and
 * epilogue (alpha 1, beta 0: value, bias, ReLU) or, with a residual,
 * gemm_q8_nt_ln's outputs (q8_dot_g; value, bias, + R). */
#define CHAIN_Q8_VAL(acc, n) Q8_GATE_VAL(acc, sq, n)
static void chain_q8_prod(__global const uint *a, const uint *o, const uint c, __global float **bufs) {
    const uint M = o[CF_M], N = o[CF_N], K = o[CF_K], flags = o[CF_FLAGS];
    const uint KV = K - K % GEMM_VW, nend = min(N, (c + 1u) * CHAIN_COLS), m0 = 0;
    __global const float *A = bufs[o[CF_A]];
    __global const char *B = (__global const char *)bufs[o[CF_B]];
    __global float *C = bufs[o[CF_C]];
    __global const float *sq = bufs[a[CI_SQ]] + a[CI_SQO], *bias = bufs[o[CF_BIAS]];
    if (flags & 4u) {
        for (uint m = 0; m < M; m++) {
            __global const float *ar = A + o[CF_AO] + m * o[CF_LDA], *r = bufs[o[CF_R]] + o[CF_RO] + m * o[CF_LDR];
            __global float *crow = C + o[CF_CO] + m * o[CF_LDC];
            for (uint n = c * CHAIN_COLS; n < nend; n++) {
                const float v = Q8_GATE_VAL(q8_dot_g(ar, B + o[CF_BO] + n * o[CF_LDB], K), sq, n);
                crow[n] = ((flags & 1u) ? v + bias[o[CF_BIASO] + n] : v) + r[n];
            }
        }
    } else {
        CHAIN_ROWS_M(char, VLOADF, VLOADQ, CHAIN_Q8_VAL) /* chain.cl */
    }
}

/* gemm_q8_chain's own ops (chain.cl chain_run): CHAIN_I8 (here int8
 * weights x fp32), CHAIN_GATE */
static void chain_own(__global const uint *a, const uint *o, const uint k, __global float **bufs) {
    if (o[CF_KIND] == CHAIN_I8) {
        chain_q8_prod(a, o, k, bufs);
    } else {
        CHAIN_GATE_ROW(q8_gate_row); /* chain.cl */
    }
}

CHAIN_KERNEL(gemm_q8_chain) /* chain.cl */
#endif /* Q8_CHAIN */

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
