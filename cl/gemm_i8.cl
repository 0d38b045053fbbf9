/* SPDX-License-Identifier: MIT */
/* gemm_i8.cl — int8 x int8 products (runtime/ops/ops_i8dot.c): activations
 * quantized per row on the fly, then an int8 x int8 -> int32 product with
 * the int8 weights of the .nmt file, rescaled to fp32 with both scales.
 * Built only where the int8 x int8 path is chosen (docs/PORTING.md, "Fast
 * paths: int8 x int8 products").
 *
 * Kernels:
 *   quant_rows  symmetric per-row quantization of X[M,K] (fp32):
 *                 amax = max_k |X[m,k]|,  S[m] = amax / 127,
 *                 Q[m,k] = round_half_even(X[m,k] * (127 / amax)), saturated
 *                 to [-127, 127] (0 where amax == 0 or not finite);
 *               one work-item per row.  Divisions are correctly rounded
 *               (the host builds with -cl-fp32-correctly-rounded-divide-sqrt),
 *               so a host reference with IEEE float arithmetic gets the same
 *               bytes and scales.
 *   gemm_i8_nt_q  (built with -DI8_QUANT=1) quant_rows and gemm_i8_nt in
 *               one launch, for products of few rows (the host uses it up to
 *               4 rows, on CPU devices): every work-group first quantizes all
 *               M rows of X into local memory, then computes gemm_i8_nt's
 *               blocks from there.  The bytes and scales are quant_rows' (the
 *               row maximum is the same in any order; every element takes
 *               the same operations), so the results are gemm_i8_nt's.
 *   gemm_i8_gate  (built with -DI8_ROW=1 and a class's options) one
 *               HySAN branch's squeeze gate over a few rows, x [rows, d]:
 *                 h = ReLU(x W1^T (+ b1)), W1 int8 [dr, d], scales S1
 *                 g = h W2^T (+ b2),        W2 int8 [d, dr], scales S2
 *                 O = (accumulate ? O : 0) + x * sigmoid(g)
 *               (flags: bit 0 b1, bit 1 b2, bit 2 accumulate): quant_rows,
 *               gemm_i8_nt, quant_rows, gemm_i8_nt and gate_accum
 *               (elementwise.cl) of one row in one work-item, with the same
 *               operations per value, so the same bits as those five
 *               launches (the sums are exact in any order).  For CPU
 *               devices (the host launches it with a local size of 1), where
 *               the launches cost more than this work.
 *   gemm_i8_nt_ln  (built with -DI8_ROW=1, beside gemm_i8_gate)
 *               O[m,:] = LayerNorm(A[m,:] Q^T * scales (+ bias) + R[m,:]) *
 *               gamma + beta for a few rows, one work-item per row (local
 *               size 1): quant_rows, gemm_i8_nt and layernorm (norm.cl, a
 *               work-item per row on CPUs) in one launch, the same bits (the
 *               norm is common.cl's ln_row, as in gemm.cl's gemm_nt_ln).
 *   gemm_i8_chain  (built with -DI8_ROW=1 -DI8_CHAIN=1, CPU devices where the
 *               host chains few-row ops) chain.cl's chain_run with this
 *               program's own ops: int8 x int8 products of fp32 rows (the
 *               rows quantized as quant_rows by an op of their own into the
 *               chain's scratch, the sums exact, gemm_i8_nt's or
 *               gemm_i8_nt_ln's epilogue) and gemm_i8_gate's rows.
 *   gemm_i8_nt  C[M,N] = alpha * (sum_k A[m,k] * Q[n,k]) * (sa[m] * sq[n])
 *               (+ beta*C) (+ bias) (ReLU): A int8 [M,K] with row scales sa,
 *               Q int8 [N,K] with row scales sq (the .nmt weight layout).
 *               The sum is exact in int32 (|sum| <= 127^2 K; the host keeps
 *               K < 2^17), converted to fp32 once per output.
 *
 * Same decomposition as gemm_q8_nt in gemm_q8.cl (barrier-free; a GEMM_TM x
 * GEMM_TN block of C per work-item; out-of-range rows/columns clamped on
 * load and not stored; common.cl GEMM_BLOCK_ORIGIN places the blocks).
 *
 * flags: bit 0 = add bias[n], bits 1, 3, 4 = ReLU, GELU, swish (common.cl,
 * act_flags).  beta == 0: C is not read.
 * Indices are 32-bit (the host checks extents < 2^32 elements).
 *
 * -D knobs (defaults):
 *   GEMM_TM     rows of C per work-item      (1; 1..8)
 *   GEMM_TN     columns of C per work-item   (4; 1..8)
 *   GEMM_VW     int8 elements per load       (16; 4, 8, 16)
 *   GEMM_MFAST  1: the blocks in one dimension, M fastest (0)
 *   I8_QUANT    1: build gemm_i8_nt_q instead of gemm_i8_nt (0)
 *   I8_ROW      1: build gemm_i8_gate and gemm_i8_nt_ln instead of gemm_i8_nt (0)
 *   I8_CHAIN    defined (with I8_ROW): gemm_i8_chain as well
 *   I8_DOT      1: four-element products with the cl_khr_integer_dot_product
 *               built-in dot(char4, char4); 2: x86 AVX-512 VNNI through
 *               clang's vpdpbusd builtin (PoCL on a CPU that has it; the
 *               host checks, see below); 0: plain int arithmetic   (0)
 *
 * I8_DOT == 2 (runtime/ops/ops_i8dot.c chooses it only for PoCL's CPU device on
 * an x86-64 host whose CPU reports AVX-512 VNNI): a fixed 4 x 4 block of C
 * per work-item (the host launches it with GEMM_TM = GEMM_TN = 4, GEMM_MFAST
 * 1; for the m2 class GEMM_TM = 1, a 1 x 4 block, so that one row is not
 * computed four times, GEMM_MFAST 0), 64 elements of K per step, one 16-lane int32
 * accumulator per output.
 * vpdpbusd multiplies unsigned by signed bytes, so A's bytes are flipped to
 * A + 128 (xor 0x80) and 128 * sum_k Q[n,k] (the same instruction with 0x80
 * bytes) is taken back out; both are exact in int32 modulo 2^32 and the true
 * sum fits (|sum| <= 127^2 K, K < 2^17).  The 16 accumulators are reduced
 * together by a pairwise even/odd tree (15 adds).  PoCL accepts no -m build
 * options, so the VNNI code is a function compiled for that feature
 * (target attribute) and called once per work-item: the feature cannot be
 * inlined into the kernel, whose work-group wrapper PoCL compiles for the
 * device's own CPU name.
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
#ifndef I8_DOT
#define I8_DOT 0
#endif
#ifndef I8_QUANT
#define I8_QUANT 0
#endif
#ifndef I8_ROW
#define I8_ROW 0
#endif
#if I8_QUANT
#define A_AS __local /* the activations' bytes: quantized by the work-group */
#elif I8_ROW
#define A_AS __private /* quantized by the work-item (gemm_i8_chain's blocks) */
#else
#define A_AS __global
#endif
/* gemm_i8_nt_q's one-row x86 VNNI form reads a private copy of its row of
 * at most I8_Q_ROW_MAX bytes (the host checks K): through a __local
 * pointer that helper gave wrong sums under PoCL 3.1 (docs/PERFORMANCE.md) */
#define I8_Q_ROW_MAX 2048
#if I8_DOT == 2 && ((I8_QUANT && GEMM_TM == 1) || I8_ROW) /* I8_ROW: private rows */
#define ROW_AS __private
#else
#define ROW_AS A_AS
#endif

#if I8_DOT == 1
/* The device reports cl_khr_integer_dot_product with 4x8-bit inputs (the
 * host checks).  OpenCL C 3.0 declares the built-in under a feature macro;
 * built as 1.2, where a compiler may define only the extension's macro,
 * declare it (the device's library provides it). */
#if !defined(__opencl_c_integer_dot_product_input_4x8bit)
#if !defined(cl_khr_integer_dot_product)
#error "I8_DOT=1 needs cl_khr_integer_dot_product"
#endif
int __attribute__((overloadable, const)) dot(char4 a, char4 b);
#endif
#define DOT4(a, b) dot((a), (b))
#elif I8_DOT == 2
#if (GEMM_TM != 4 && GEMM_TM != 1) || GEMM_TN != 4
#error "I8_DOT=2 needs GEMM_TM=4 or 1 and GEMM_TN=4"
#endif
#define DOT4(a, b) ((int)(a).x * (int)(b).x + (int)(a).y * (int)(b).y + (int)(a).z * (int)(b).z + (int)(a).w * (int)(b).w)
/* 64 bytes from any address (no alignment assumed) as 16 int32 lanes */
#define VNNI_LOAD(p) \
    ((int16)(as_int4(vload16(0, (p))), as_int4(vload16(1, (p))), as_int4(vload16(2, (p))), as_int4(vload16(3, (p)))))
/* lanes of x summing to output 2p and of y to 2p+1 -> one vector whose first
 * half sums to 2p and second half to 2p+1 (lane groups kept in order) */
#define VNNI_PAIR(x, y) ((uint16)((x).even, (y).even) + (uint16)((x).odd, (y).odd))

/* The 4 x 4 int32 sums of rows ar[0..3] of A with rows qr[0..3] of Q over K,
 * lane 4 i + j = sum_k A[i,k] Q[j,k]. */
__attribute__((target("avx512vnni,avx512f"))) static int16 vnni_block(A_AS const char *a0, A_AS const char *a1,
                                                                      A_AS const char *a2, A_AS const char *a3,
                                                                      __global const char *q0, __global const char *q1,
                                                                      __global const char *q2, __global const char *q3,
                                                                      const uint K) {
    A_AS const char *ar[4] = {a0, a1, a2, a3};
    __global const char *qr[4] = {q0, q1, q2, q3};
    const int16 flip = (int16)((int)0x80808080);
    int16 acc[4][4], cor[4];
    #pragma unroll
    for (int i = 0; i < 4; i++)
        #pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = (int16)0;
    #pragma unroll
    for (int j = 0; j < 4; j++) cor[j] = (int16)0;
    const uint KV = K - K % 64u;
    for (uint k = 0; k < KV; k += 64u) {
        int16 a[4], b[4];
        #pragma unroll
        for (int i = 0; i < 4; i++) a[i] = VNNI_LOAD(ar[i] + k) ^ flip;
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            b[j] = VNNI_LOAD(qr[j] + k);
            cor[j] = __builtin_ia32_vpdpbusd512(cor[j], flip, b[j]);
        }
        #pragma unroll
        for (int i = 0; i < 4; i++)
            #pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = __builtin_ia32_vpdpbusd512(acc[i][j], a[i], b[j]);
    }
    uint16 x[16]; /* wrapping arithmetic: unsigned */
    #pragma unroll
    for (int i = 0; i < 4; i++)
        #pragma unroll
        for (int j = 0; j < 4; j++) x[i * 4 + j] = as_uint16(acc[i][j]) - as_uint16(cor[j]);
    #pragma unroll
    for (int w = 8; w >= 1; w /= 2)
        #pragma unroll
        for (int p = 0; p < w; p++) x[p] = VNNI_PAIR(x[2 * p], x[2 * p + 1]);
    /* the tail of K (K % 64 elements), plainly */
    int t[16];
    #pragma unroll
    for (int i = 0; i < 4; i++)
        #pragma unroll
        for (int j = 0; j < 4; j++) t[i * 4 + j] = 0;
    for (uint k = KV; k < K; k++)
        #pragma unroll
        for (int i = 0; i < 4; i++)
            #pragma unroll
            for (int j = 0; j < 4; j++) t[i * 4 + j] += (int)ar[i][k] * (int)qr[j][k];
    return as_int16(x[0] + as_uint16(vload16(0, t)));
}

/* The one-row form (GEMM_TM 1, the m2 class): the 4 sums of row a0 of A
 * with rows qr[0..3] of Q, without computing the row four times. */
__attribute__((target("avx512vnni,avx512f"))) static int4 vnni_row(ROW_AS const char *a0, __global const char *q0,
                                                                   __global const char *q1, __global const char *q2,
                                                                   __global const char *q3, const uint K) {
    __global const char *qr[4] = {q0, q1, q2, q3};
    const int16 flip = (int16)((int)0x80808080);
    int16 acc[4], cor[4];
    #pragma unroll
    for (int j = 0; j < 4; j++) acc[j] = cor[j] = (int16)0;
    const uint KV = K - K % 64u;
    for (uint k = 0; k < KV; k += 64u) {
        const int16 a = VNNI_LOAD(a0 + k) ^ flip;
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            const int16 b = VNNI_LOAD(qr[j] + k);
            cor[j] = __builtin_ia32_vpdpbusd512(cor[j], flip, b);
            acc[j] = __builtin_ia32_vpdpbusd512(acc[j], a, b);
        }
    }
    uint16 x[4];
    #pragma unroll
    for (int j = 0; j < 4; j++) x[j] = as_uint16(acc[j]) - as_uint16(cor[j]);
    x[0] = VNNI_PAIR(x[0], x[1]);
    x[1] = VNNI_PAIR(x[2], x[3]);
    x[0] = VNNI_PAIR(x[0], x[1]);             /* output j on lanes 4j .. 4j+3 */
    const uint8 y = x[0].even + x[0].odd;     /* on lanes 2j, 2j+1 */
    uint4 z = y.even + y.odd;                 /* on lane j */
    int t[4] = {0, 0, 0, 0};
    for (uint k = KV; k < K; k++)
        #pragma unroll
        for (int j = 0; j < 4; j++) t[j] += (int)a0[k] * (int)qr[j][k];
    return as_int4(z + as_uint4(vload4(0, t)));
}
#else
#define DOT4(a, b) ((int)(a).x * (int)(b).x + (int)(a).y * (int)(b).y + (int)(a).z * (int)(b).z + (int)(a).w * (int)(b).w)
#endif

#if GEMM_VW == 16
#define VCHAR char16
#define VLOAD(p) vload16(0, (p))
#define VDOT(a, b) (DOT4((a).s0123, (b).s0123) + DOT4((a).s4567, (b).s4567) + DOT4((a).s89ab, (b).s89ab) + \
                    DOT4((a).scdef, (b).scdef))
#elif GEMM_VW == 8
#define VCHAR char8
#define VLOAD(p) vload8(0, (p))
#define VDOT(a, b) (DOT4((a).s0123, (b).s0123) + DOT4((a).s4567, (b).s4567))
#elif GEMM_VW == 4
#define VCHAR char4
#define VLOAD(p) vload4(0, (p))
#define VDOT(a, b) DOT4((a), (b))
#else
#error "GEMM_VW must be 4, 8 or 16"
#endif

/* quant_rows' operations on one row of K floats x into q, returning its
 * scale (X_AS, Q_AS: the address spaces of x and q) */
#define QUANT_ROW(NAME, X_AS, Q_AS)                                                                         \
    static float NAME(X_AS const float *x, const uint K, Q_AS char *q) {                                    \
        /* 16 elements at a time (the same operations per element as the tail) */                         \
        const uint KV = K - K % 16u;                                                                        \
        float16 vmax = (float16)0.0f;                                                                       \
        for (uint k = 0; k < KV; k += 16u) vmax = fmax(vmax, fabs(vload16(0, x + k)));                      \
        float8 m8 = fmax(vmax.lo, vmax.hi);                                                                 \
        float4 m4 = fmax(m8.lo, m8.hi);                                                                     \
        float2 m2 = fmax(m4.lo, m4.hi);                                                                     \
        float amax = fmax(m2.x, m2.y);                                                                      \
        for (uint k = KV; k < K; k++) amax = fmax(amax, fabs(x[k]));                                        \
        const int ok = amax > 0.0f && isfinite(amax);                                                       \
        const float inv = ok ? 127.0f / amax : 0.0f;                                                        \
        for (uint k = 0; k < KV; k += 16u)                                                                  \
            vstore16(convert_char16_sat_rte(clamp(vload16(0, x + k) * inv, -127.0f, 127.0f)), 0, q + k);   \
        for (uint k = KV; k < K; k++) q[k] = convert_char_sat_rte(clamp(x[k] * inv, -127.0f, 127.0f));     \
        return ok ? amax / 127.0f : 0.0f;                                                                   \
    }
QUANT_ROW(quant_row, __global, __global)

__kernel void quant_rows(const uint M, const uint K, __global const float *X, const uint x_off, const uint ldx,
                         __global char *Q, const uint q_off, const uint ldq, __global float *S, const uint s_off) {
    const uint m = (uint)get_global_id(0);
    if (m >= M) return;
    S[s_off + m] = quant_row(X + x_off + m * ldx, K, Q + q_off + m * ldq);
}

#if I8_ROW
/* gemm_i8_gate and gemm_i8_nt_ln (-DI8_ROW=1): see the top.  One work-item
 * per row, its rows of bytes in private arrays; with x86 VNNI the one-row
 * helper (of any class's build: ROW_AS is private here). */
#define I8_ROW_DR_MAX 512 /* the host checks dr (and d <= I8_Q_ROW_MAX) */
QUANT_ROW(quant_row_g, __global, __private)
QUANT_ROW(quant_row_p, __private, __private)

#if I8_DOT == 2
#define ROW4 vnni_row
#else
/* the 4 sums of row a with rows q0..q3 of Q over K */
static int4 row4(__private const char *a, __global const char *q0, __global const char *q1,
                      __global const char *q2, __global const char *q3, const uint K) {
    int4 acc = (int4)0;
    const uint KV = K - K % GEMM_VW;
    for (uint k = 0; k < KV; k += GEMM_VW) {
        const VCHAR v = VLOAD(a + k);
        acc.x += VDOT(v, VLOAD(q0 + k));
        acc.y += VDOT(v, VLOAD(q1 + k));
        acc.z += VDOT(v, VLOAD(q2 + k));
        acc.w += VDOT(v, VLOAD(q3 + k));
    }
    for (uint k = KV; k < K; k++)
        acc += (int4)((int)q0[k], (int)q1[k], (int)q2[k], (int)q3[k]) * (int)a[k];
    return acc;
}
#define ROW4 row4
#endif

/* The 4 sums of row a with rows n .. n + 3 of Q [N, K] (row stride ldq;
 * rows past N clamped to N - 1, their sums not used) */
#define ROW_SUMS(a, Q, N, K, ldq, n)                                                                      \
    ROW4((a), (Q) + min((n), (N) - 1u) * (ldq), (Q) + min((n) + 1u, (N) - 1u) * (ldq),               \
              (Q) + min((n) + 2u, (N) - 1u) * (ldq), (Q) + min((n) + 3u, (N) - 1u) * (ldq), (K))

/* gemm_i8_gate's work for one row: x and o that row's input and output */
static void i8_gate_row(const uint d, const uint dr, __global const float *x, __global const char *W1,
                        __global const float *S1, __global const float *B1, __global const char *W2,
                        __global const float *S2, __global const float *B2, __global float *o, const int flags) {
    char xq[I8_Q_ROW_MAX], hq[I8_ROW_DR_MAX];
    float h[I8_ROW_DR_MAX];
    /* h = ReLU(x W1^T + b1): quant_rows, then gemm_i8_nt's epilogue per
     * output (value, bias, ReLU; alpha 1) */
    const float sx = quant_row_g(x, d, xq);
    for (uint j = 0; j < dr; j += 4u) {
        int s[4];
        vstore4(ROW_SUMS(xq, W1, dr, d, d, j), 0, s);
        for (uint i = 0; i < 4u && j + i < dr; i++) {
            float v = (float)s[i] * (sx * S1[j + i]);
            if (flags & 1) v += B1[j + i];
            h[j + i] = fmax(v, 0.0f);
        }
    }
    /* g = h W2^T + b2 the same way, then gate_accum's operations */
    const float sh = quant_row_p(h, dr, hq);
    for (uint c = 0; c < d; c += 4u) {
        const int4 s = ROW_SUMS(hq, W2, d, dr, dr, c);
        if (c + 4u <= d) {
            float4 g = convert_float4(s) * (sh * vload4(0, S2 + c));
            if (flags & 2) g += vload4(0, B2 + c);
            /* x * sigmoid(g), with gate_accum's scalar exp (a vector exp
             * may differ from it in the last bit) */
            const float4 e4 = (float4)(exp(-g.x), exp(-g.y), exp(-g.z), exp(-g.w));
            const float4 v = vload4(0, x + c) / (1.0f + e4);
            vstore4((flags & 4) ? vload4(0, o + c) + v : v, 0, o + c);
        } else {
            int t[4];
            vstore4(s, 0, t);
            for (uint i = 0; c + i < d; i++) {
                float g = (float)t[i] * (sh * S2[c + i]);
                if (flags & 2) g += B2[c + i];
                const float v = x[c + i] / (1.0f + exp(-g));
                o[c + i] = (flags & 4) ? o[c + i] + v : v;
            }
        }
    }
}

__kernel void gemm_i8_gate(GATE_ROW_PARAMS) { /* common.cl */
    GATE_ROW_BEGIN();
    i8_gate_row(d, dr, x, W1 + w1_off, S1 + s1_off, B1 + b1_off, W2 + w2_off, S2 + s2_off, B2 + b2_off,
                O + o_off + r * ldo, flags);
}

__kernel void gemm_i8_nt_ln(LN_ROW_PARAMS) { /* common.cl; launched with a local size of 1 */
    __local float red[1];
    const uint m = (uint)get_group_id(0);
    __global const float *r = R + r_off + m * ldr;
    __global float *o = O + o_off + m * ldo;
    char aq[I8_Q_ROW_MAX];
    const float sa = quant_row_g(A + a_off + m * lda, K, aq);
    /* gemm_i8_nt's epilogue per output (value, bias; alpha 1), plus R: what
     * layernorm adds before its statistics; o may alias r (each column is
     * read, then written) */
    for (uint n = 0; n < N; n += 4u) {
        int s[4];
        vstore4(ROW_SUMS(aq, Q + q_off, N, K, ldq, n), 0, s);
        for (uint j = 0; j < 4u && n + j < N; j++) {
            float v = (float)s[j] * (sa * scale[s_off + n + j]);
            if (has_bias) v += bias[bias_off + n + j];
            o[n + j] = v + r[n + j];
        }
    }
    ln_row(o, o, 0, o, N, G + g_off, Bt + bt_off, eps, red);
}

#ifdef I8_CHAIN /* CPU devices where the host chains few-row ops (runtime/ops/ops_chain.c) */
/* CHAIN_QUANT's chunk k: row k of the product's A quantized as quant_rows
 * does, into the chain's scratch (chain.cl) */
static void chain_quant_row(const uint *o, const uint k, __global float **bufs) {
    __global char *qs = (__global char *)bufs[o[CF_C]] + o[CF_CO];
    ((__global float *)qs)[k] = quant_row(bufs[o[CF_A]] + o[CF_AO] + k * o[CF_LDA], o[CF_K],
                                          qs + CHAIN_QS_ROWS + k * o[CF_LDC]);
}

/* An int8 x int8 product's chunk c (CHAIN_COLS columns of its M rows):
 * the rows' bytes and scales from the chain's scratch (its CHAIN_QUANT op
 * wrote them: quant_rows' values) copied to private arrays, then 4 columns
 * at a time their
 * sums (exact in int32, so any order gives gemm_i8_nt's: with x86 VNNI and
 * 3-4 rows vnni_block's 4 x 4 block, else each row's 4 sums while the 4
 * weight rows stay in the cache), then gemm_i8_nt's epilogue (alpha 1,
 * beta 0: value, bias, ReLU) or, with a residual, gemm_i8_nt_ln's (value,
 * bias, + R). */
static void chain_i8_prod(__global const uint *a, const uint *o, const uint c, __global float **bufs) {
    const uint M = o[CF_M], N = o[CF_N], K = o[CF_K], flags = o[CF_FLAGS], ldq = o[CF_LDB];
    const uint nend = min(N, (c + 1u) * CHAIN_COLS);
    __global const char *Q = (__global const char *)bufs[o[CF_B]] + o[CF_BO];
    __global const float *sq = bufs[a[CI_SQ]] + a[CI_SQO], *bias = bufs[o[CF_BIAS]] + o[CF_BIASO];
    char xq[4][I8_Q_ROW_MAX]; /* the host records at most 4 rows */
    float sa[4];
    __global const char *qs = (__global const char *)bufs[o[CF_A]] + o[CF_AO];
    const uint KV = K - K % 16u;
    for (uint m = 0; m < M; m++) {
        __global const char *qrow = qs + CHAIN_QS_ROWS + m * o[CF_LDA];
        sa[m] = ((__global const float *)qs)[m];
        for (uint k = 0; k < KV; k += 16u) vstore16(vload16(0, qrow + k), 0, xq[m] + k);
        for (uint k = KV; k < K; k++) xq[m][k] = qrow[k];
    }
    for (uint n0 = c * CHAIN_COLS; n0 < nend; n0 += 4u) {
        int s[4][4];
#if I8_DOT == 2
        if (M >= 3u) {
            int v[16];
            vstore16(vnni_block(xq[0], xq[1], xq[2], xq[min(3u, M - 1u)], Q + min(n0, N - 1u) * ldq,
                                Q + min(n0 + 1u, N - 1u) * ldq, Q + min(n0 + 2u, N - 1u) * ldq,
                                Q + min(n0 + 3u, N - 1u) * ldq, K),
                     0, v);
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) s[i][j] = v[i * 4 + j];
        } else
#endif
        {
            for (uint m = 0; m < M; m++) vstore4(ROW_SUMS(xq[m], Q, N, K, ldq, n0), 0, s[m]);
        }
        for (uint m = 0; m < M; m++) {
            __global const float *r = bufs[o[CF_R]] + o[CF_RO] + m * o[CF_LDR];
            __global float *crow = bufs[o[CF_C]] + o[CF_CO] + m * o[CF_LDC];
            for (uint j = 0; j < 4u && n0 + j < nend; j++) {
                const uint n = n0 + j;
                float v = (float)s[m][j] * (sa[m] * sq[n]);
                if (flags & CHAIN_FLAG_BIAS) v += bias[n];
                if (flags & CHAIN_FLAG_RES) {
                    crow[n] = v + r[n];
                } else {
                    crow[n] = act_flags(v, (int)flags);
                }
            }
        }
    }
}

/* gemm_i8_chain's own ops (chain.cl chain_run): CHAIN_QUANT, CHAIN_I8,
 * CHAIN_GATE */
static void chain_own(__global const uint *a, const uint *o, const uint k, __global float **bufs) {
    if (o[CF_KIND] == CHAIN_QUANT) {
        chain_quant_row(o, k, bufs);
    } else if (o[CF_KIND] == CHAIN_I8) {
        chain_i8_prod(a, o, k, bufs);
    } else {
        CHAIN_GATE_ROW(i8_gate_row); /* chain.cl */
    }
}

CHAIN_KERNEL(gemm_i8_chain) /* chain.cl */
#endif /* I8_CHAIN */
#elif I8_QUANT
/* quant_rows for all M rows of X by the whole work-group, into A (M rows of
 * K bytes) and S; part holds M x local-size partial maxima.  Every
 * work-item reaches the barriers. */
static void quant_rows_group(const uint M, const uint K, __global const float *X, const uint ldx, __local char *A,
                             __local float *S, __local float *part) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0), nc = (K + 15u) / 16u;
    for (uint m = 0; m < M; m++) {
        __global const float *x = X + m * ldx;
        float amax = 0.0f;
        for (uint c = lid; c < nc; c += lsz) {
            const uint k = c * 16u;
            if (k + 16u <= K) {
                const float16 v = fabs(vload16(0, x + k));
                const float8 m8 = fmax(v.lo, v.hi);
                const float4 m4 = fmax(m8.lo, m8.hi);
                const float2 m2 = fmax(m4.lo, m4.hi);
                amax = fmax(amax, fmax(m2.x, m2.y));
            } else {
                for (uint t = k; t < K; t++) amax = fmax(amax, fabs(x[t]));
            }
        }
        part[m * lsz + lid] = amax;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint m = lid; m < M; m += lsz) { /* quant_rows' scale and its reciprocal */
        float amax = 0.0f;
        for (uint i = 0; i < lsz; i++) amax = fmax(amax, part[m * lsz + i]);
        const int ok = amax > 0.0f && isfinite(amax);
        S[m] = ok ? amax / 127.0f : 0.0f;
        part[m * lsz] = ok ? 127.0f / amax : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint c = lid; c < M * nc; c += lsz) {
        const uint m = c / nc, k = (c % nc) * 16u;
        const float inv = part[m * lsz];
        __global const float *x = X + m * ldx;
        __local char *q = A + m * K;
        if (k + 16u <= K) {
            vstore16(convert_char16_sat_rte(clamp(vload16(0, x + k) * inv, -127.0f, 127.0f)), 0, q + k);
        } else {
            for (uint t = k; t < K; t++) q[t] = convert_char_sat_rte(clamp(x[t] * inv, -127.0f, 127.0f));
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel void gemm_i8_nt_q(const uint M, const uint N, const uint K, const float alpha,
                           __global const float *X, const uint x_off, const uint ldx,
                           __local float *scratch,
                           __global const char *Q, const uint q_off, const uint ldq,
                           __global const float *sq, const uint sq_off,
                           const float beta, __global float *C, const uint c_off, const uint ldc,
                           __global const float *bias, const uint bias_off, const int flags) {
    /* scratch: M x local-size partial maxima, M scales, then M rows of K bytes */
    __local float *part = scratch, *sa = scratch + M * (uint)get_local_size(0);
    __local char *A = (__local char *)(sa + M);
    const uint a_off = 0, lda = K, sa_off = 0;
    quant_rows_group(M, K, X + x_off, ldx, A, sa, part);
#endif
#if !I8_ROW
#if !I8_QUANT
__kernel void gemm_i8_nt(const uint M, const uint N, const uint K, const float alpha,
                         __global const char *A, const uint a_off, const uint lda,
                         __global const float *sa, const uint sa_off,
                         __global const char *Q, const uint q_off, const uint ldq,
                         __global const float *sq, const uint sq_off,
                         const float beta, __global float *C, const uint c_off, const uint ldc,
                         __global const float *bias, const uint bias_off, const int flags) {
#endif
    GEMM_BLOCK_ORIGIN() /* common.cl */
    if (m0 >= M || n0 >= N) return;

    A_AS const char *ar[GEMM_TM];
    __global const char *qr[GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++) ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;
    #pragma unroll
    for (int j = 0; j < GEMM_TN; j++) qr[j] = Q + q_off + min(n0 + (uint)j, N - 1u) * ldq;

    int acc[GEMM_TM][GEMM_TN];
#if I8_DOT == 2 && GEMM_TM == 1
    {
#if I8_QUANT
        char row[I8_Q_ROW_MAX];
        for (uint k = 0; k < K; k++) row[k] = ar[0][k];
        const int4 r = vnni_row(row, qr[0], qr[1], qr[2], qr[3], K);
#else
        const int4 r = vnni_row(ar[0], qr[0], qr[1], qr[2], qr[3], K);
#endif
        acc[0][0] = r.x;
        acc[0][1] = r.y;
        acc[0][2] = r.z;
        acc[0][3] = r.w;
    }
#elif I8_DOT == 2
    {
        const int16 r = vnni_block(ar[0], ar[1], ar[2], ar[3], qr[0], qr[1], qr[2], qr[3], K);
        int v[16];
        vstore16(r, 0, v);
        #pragma unroll
        for (int i = 0; i < 4; i++)
            #pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = v[i * 4 + j];
    }
#else
    #pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) acc[i][j] = 0;

    const uint KV = K - K % GEMM_VW;
    for (uint k = 0; k < KV; k += GEMM_VW) {
        VCHAR a[GEMM_TM], b[GEMM_TN];
        #pragma unroll
        for (int j = 0; j < GEMM_TN; j++) b[j] = VLOAD(qr[j] + k);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++) a[i] = VLOAD(ar[i] + k);
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] += VDOT(a[i], b[j]);
    }
    for (uint k = KV; k < K; k++)
        #pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            #pragma unroll
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] += (int)ar[i][k] * (int)qr[j][k];
#endif

    /* the epilogue (common.cl): acc * (alpha sa[m] * sq[n]) (+ beta C) (+ bias) (ReLU) */
#define I8_VAL(i, j, n) ((float)acc[i][j] * ((alpha * sa[sa_off + m]) * sq[sq_off + n]))
#define I8_VVAL(i) (EPI_CONVERT(EPI_VLOAD(0, acc[i])) * ((alpha * sa[sa_off + m]) * EPI_VLOAD(0, sq + sq_off + n0)))
#if GEMM_TN_VECTOR
    if (n0 + GEMM_TN <= N) GEMM_EPILOGUE_VECTOR(I8_VVAL) else
#endif
    GEMM_EPILOGUE_SCALAR(I8_VAL)
}
#endif /* !I8_ROW */
