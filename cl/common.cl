/* SPDX-License-Identifier: MIT */
/* common.cl — helpers shared by every kernel program.  The device layer
 * prepends this file to each program's own source (runtime/device/device.c,
 * nmt_device_program), so a helper is written once for all of cl/.  Only
 * macros and inline functions: nothing here is a kernel, and a program
 * that does not call a helper pays nothing for it. */

/* Attention branch kinds: nmt_branch_kind in runtime/ops/ops.h. */
#define BRANCH_GLOBAL 0
#define BRANCH_FW 1
#define BRANCH_BW 2
#define BRANCH_LOCAL 3
#define BRANCH_BLOCK 4

/* Horizontal sums as pairwise trees (the order every kernel relies on for
 * run-to-run identical results). */
inline float vsum4(const float4 v) { return (v.x + v.y) + (v.z + v.w); }
inline float vsum8(const float8 v) { return vsum4(v.lo + v.hi); }
inline float vsum16(const float16 v) { return vsum8(v.lo + v.hi); }

/* vsum16 of 8 or 16 vectors at once (a GEMM's accumulators): the same
 * additions in the same grouping, so each lane is bitwise vsum16(a[i]),
 * but as whole-vector adds of shuffled halves, quarters and pairs (15 adds
 * for 16 vectors instead of 4 dependent reductions each).  Lane i of the
 * result is the sum of a[i]:
 *   level 1: lanes j, j + 8 of each vector (vsum16's v.lo + v.hi);
 *   level 2: j, j + 4 of those 8 (vsum8's);  level 3: x + y and z + w of
 *   those 4;  level 4: the two (vsum4's (x + y) + (z + w)). */
inline float16 vsum16_quarters(const float16 p, const float16 q) {
    return (float16)(p.s0123, p.s89ab, q.s0123, q.s89ab) + (float16)(p.s4567, p.scdef, q.s4567, q.scdef);
}
inline float16 vsum16_pairs(const float16 r, const float16 t) {
    return (float16)(r.even, t.even) + (float16)(r.odd, t.odd);
}
inline float8 vsum16x8(const float16 a0, const float16 a1, const float16 a2, const float16 a3, const float16 a4,
                       const float16 a5, const float16 a6, const float16 a7) {
    const float16 p0 = (float16)(a0.lo, a1.lo) + (float16)(a0.hi, a1.hi);
    const float16 p1 = (float16)(a2.lo, a3.lo) + (float16)(a2.hi, a3.hi);
    const float16 p2 = (float16)(a4.lo, a5.lo) + (float16)(a4.hi, a5.hi);
    const float16 p3 = (float16)(a6.lo, a7.lo) + (float16)(a6.hi, a7.hi);
    const float16 t = vsum16_pairs(vsum16_quarters(p0, p1), vsum16_quarters(p2, p3));
    return t.even + t.odd;
}

/* A product's block of C, rows m0.. and columns n0.. (gemm.cl,
 * gemm_q8.cl, gemm_f16.cl; the host's launch: runtime/ops/ops.c
 * nmt_ops_launch_gemm).  GEMM_MFAST 0: dimension 0 walks the blocks along
 * N, dimension 1 those along M.  GEMM_MFAST 1: one dimension enumerates
 * the blocks with M fastest, block b at M block b % mb and N block b / mb
 * (mb = ceil(M / GEMM_TM)): consecutive work-items share B's rows where M
 * has several blocks, and a product of one block of rows (a batch-1
 * beam's 4) leaves no work-item idle, as a dimension of M blocks padded
 * to the work-group size did.  Surplus work-items get n0 >= N. */
#if defined(GEMM_MFAST) && GEMM_MFAST
#define GEMM_BLOCK_ORIGIN()                                              \
    const uint mb_ = (M + GEMM_TM - 1u) / GEMM_TM;                      \
    const uint b_ = (uint)get_global_id(0);                              \
    const uint m0 = (b_ % mb_) * GEMM_TM;                                \
    const uint n0 = (b_ / mb_) * GEMM_TN;
#else
#define GEMM_BLOCK_ORIGIN()                                              \
    const uint n0 = (uint)get_global_id(0) * GEMM_TN;                    \
    const uint m0 = (uint)get_global_id(1) * GEMM_TM;
#endif

/* acc[i][j] = vsum16(accv[i][j]) over a GEMM's GEMM_TM x GEMM_TN float16
 * accumulators, eight at a time; for GEMM_VW == 16 and
 * GEMM_TM * GEMM_TN % 8 == 0 (gemm.cl, gemm_q8.cl). */
#define GEMM_ACC_ELEM_(a, x) a[(x) / GEMM_TN][(x) % GEMM_TN]
#define GEMM_VSUM16_BATCHED(accv, acc)                                                              \
    _Pragma("unroll") for (int g_ = 0; g_ < GEMM_TM * GEMM_TN; g_ += 8) {                           \
        float s_[8];                                                                                \
        vstore8(vsum16x8(GEMM_ACC_ELEM_(accv, g_), GEMM_ACC_ELEM_(accv, g_ + 1),                    \
                         GEMM_ACC_ELEM_(accv, g_ + 2), GEMM_ACC_ELEM_(accv, g_ + 3),                \
                         GEMM_ACC_ELEM_(accv, g_ + 4), GEMM_ACC_ELEM_(accv, g_ + 5),                \
                         GEMM_ACC_ELEM_(accv, g_ + 6), GEMM_ACC_ELEM_(accv, g_ + 7)), 0, s_);       \
        _Pragma("unroll") for (int x_ = 0; x_ < 8; x_++) GEMM_ACC_ELEM_(acc, g_ + x_) = s_[x_];     \
    }

/* A HySAN branch's squeeze gate over a few rows in one launch, a work-item
 * per row (gemm_q8.cl gemm_q8_gate, gemm_i8.cl gemm_i8_gate; the host sets
 * these parameters in runtime/ops/ops_rows.c): x [rows, d] (stride ldx), W1
 * int8 [dr, d] with row scales S1 and bias B1, W2 int8 [d, dr] with S2 and
 * B2, O (stride ldo); flags: bit 0 B1, bit 1 B2, bit 2 accumulate into O.
 * GATE_ROW_BEGIN() declares the row r and its x (surplus work-items
 * return). */
#define GATE_ROW_PARAMS                                                                                      \
    const uint rows, const uint d, const uint dr, __global const float *X, const uint x_off, const uint ldx,  \
        __global const char *W1, const uint w1_off, __global const float *S1, const uint s1_off,             \
        __global const float *B1, const uint b1_off, __global const char *W2, const uint w2_off,             \
        __global const float *S2, const uint s2_off, __global const float *B2, const uint b2_off,            \
        __global float *O, const uint o_off, const uint ldo, const int flags
#define GATE_ROW_BEGIN()                      \
    const uint r = (uint)get_global_id(0);    \
    if (r >= rows) return;                    \
    __global const float *x = X + x_off + r * ldx

/* The product with residual and layer norm of a few rows in one launch
 * (gemm.cl gemm_nt_ln's int8 counterparts, gemm_q8.cl gemm_q8_nt_ln and
 * gemm_i8.cl gemm_i8_nt_ln; runtime/ops/ops_rows.c sets these): a work-group
 * per row m of A [*, K] (stride lda), Q int8 [N, K] (stride ldq) with row
 * scales and bias (has_bias), R and O (strides ldr, ldo), gain G, bias Bt. */
#define LN_ROW_PARAMS                                                                                         \
    const uint N, const uint K, __global const float *A, const uint a_off, const uint lda,                   \
        __global const char *Q, const uint q_off, const uint ldq, __global const float *scale,                \
        const uint s_off, __global const float *bias, const uint bias_off, const int has_bias,                \
        __global const float *R, const uint r_off, const uint ldr, __global float *O, const uint o_off,      \
        const uint ldo, __global const float *G, const uint g_off, __global const float *Bt, const uint bt_off, \
        const float eps

/* Before a product's scalar tail along K (k = KV .. K - 1 after the vector
 * part): the tail sums in the order written.  Intel's OpenCL CPU compiler
 * (2026.2, an AVX2 host) vectorised the chain kernel's tail over k, which
 * sums in another order, and not gemm_nt's, so the same product gave bits
 * 1 ulp apart chained and launched (kernels_chain_test, K 40: 8 tail
 * elements).  With this before the fp32 tails of gemm_nt, gemm_nt_ln,
 * gemm_q8_nt and its rows, gemm_f16 and the chain kernels each keeps the
 * written order.  Other compilers do not vectorise a floating-point
 * reduction without reassociation, so it changes nothing there. */
#define K_TAIL_IN_ORDER _Pragma("clang loop vectorize(disable) interleave(disable)")

/* The products' activations, by bits of their flags (bit 1 ReLU, bit 3
 * GELU, bit 4 swish; bit 0 is the bias, bit 2 a chain op's residual), and
 * the act kernel's (elementwise.cl): GELU x Phi(x) with the exact normal
 * CDF, swish (SiLU) x sigmoid(x).  One definition, so a product with its
 * activation in the epilogue gives the bits of the product followed by
 * act. */
#define ACT_FLAG_RELU 2
#define ACT_FLAG_GELU 8
#define ACT_FLAG_SWISH 16
inline float act_gelu(const float v) { return 0.5f * v * (1.0f + erf(v * 0.7071067811865476f)); }
inline float act_swish(const float v) { return v / (1.0f + exp(-v)); }
inline float act_flags(float v, const int flags) {
    if (flags & ACT_FLAG_RELU) v = fmax(v, 0.0f);
    if (flags & ACT_FLAG_GELU) v = act_gelu(v);
    if (flags & ACT_FLAG_SWISH) v = act_swish(v);
    return v;
}

/* The products' epilogue (gemm.cl, gemm_f16.cl, gemm_q8.cl, gemm_i8.cl) for
 * the GEMM_TM x GEMM_TN block of C at (m0, n0): per element
 * v = value (+ beta * C) (+ bias[n]) (activation), stored where in range
 * (flags: bit 0 bias, bits 1, 3, 4 ReLU, GELU, swish as act_flags; beta ==
 * 0: C is not read).  The vector form applies GELU and swish element by
 * element with the scalar functions (their vector forms may round
 * differently).  The kernel passes its
 * value twice: VAL(i, j, n) for one element, VVAL(i) for row i's GEMM_TN
 * columns as one vector with the same operations per element (m is row i's
 * index in both).  Kernels take the vector form for blocks whose columns
 * are all in range when GEMM_TN is a vector width (a scalar epilogue cost
 * about as much as a K = 256 block of gemm_i8's VNNI loop, docs/
 * PERFORMANCE.md), the scalar form elsewhere; after the kernel's defaults:
 *   #if GEMM_TN_VECTOR
 *       if (n0 + GEMM_TN <= N) GEMM_EPILOGUE_VECTOR(VVAL) else
 *   #endif
 *       GEMM_EPILOGUE_SCALAR(VAL)
 * (GEMM_TN_VECTOR is evaluated there, where GEMM_TN has its value). */
#define NMT_CAT_(a, b) a##b
#define NMT_CAT(a, b) NMT_CAT_(a, b)
#define EPI_FLOAT NMT_CAT(float, GEMM_TN)
#define EPI_VLOAD NMT_CAT(vload, GEMM_TN)
#define EPI_VSTORE NMT_CAT(vstore, GEMM_TN)
#define EPI_CONVERT NMT_CAT(convert_float, GEMM_TN)
#define GEMM_TN_VECTOR (GEMM_TN == 2 || GEMM_TN == 4 || GEMM_TN == 8 || GEMM_TN == 16)

#define GEMM_EPILOGUE_SCALAR(VAL)                                                       \
    for (int i = 0; i < GEMM_TM; i++) {                                                 \
        const uint m = m0 + (uint)i;                                                    \
        if (m >= M) break;                                                              \
        __global float *crow = C + c_off + m * ldc;                                     \
        for (int j = 0; j < GEMM_TN; j++) {                                             \
            const uint n = n0 + (uint)j;                                                \
            if (n >= N) break;                                                          \
            float v = VAL(i, j, n);                                                     \
            if (beta != 0.0f) v += beta * crow[n];                                      \
            if (flags & 1) v += bias[bias_off + n];                                     \
            crow[n] = act_flags(v, flags);                                              \
        }                                                                               \
    }

#define GEMM_EPILOGUE_VECTOR(VVAL)                                                      \
    {                                                                                   \
        const EPI_FLOAT bv_ = (flags & 1) ? EPI_VLOAD(0, bias + bias_off + n0) : (EPI_FLOAT)0.0f; \
        for (int i = 0; i < GEMM_TM; i++) {                                             \
            const uint m = m0 + (uint)i;                                                \
            if (m >= M) break;                                                          \
            __global float *crow = C + c_off + m * ldc + n0;                            \
            EPI_FLOAT v = VVAL(i);                                                       \
            if (beta != 0.0f) v += beta * EPI_VLOAD(0, crow);                            \
            if (flags & 1) v += bv_;                                                    \
            if (flags & 2) v = fmax(v, (EPI_FLOAT)0.0f);                                 \
            EPI_VSTORE(v, 0, crow);                                                      \
            if (flags & (ACT_FLAG_GELU | ACT_FLAG_SWISH))                                \
                for (int j = 0; j < GEMM_TN; j++) crow[j] = act_flags(crow[j], flags & ~ACT_FLAG_RELU); \
        }                                                                               \
    }

/* The few-row products of GPUs (nmt_gemm_cfg.kgroup; gemm.cl gemm_nt_kgroup,
 * gemm_q8.cl gemm_q8_nt_kgroup): one work-group of GEMM_KG_WG work-items
 * per column n0 of C and block of GEMM_TM rows at m0.  Work-item l takes
 * the GEMM_VW-vectors l, l + GEMM_KG_WG, ... of K, so the group's loads of
 * B's row n0 are contiguous; the scalar tail K % GEMM_VW goes to the first
 * work-items; then a tree sum in local memory, and work-item 0 stores the
 * GEMM_TM outputs through the scalar epilogue (GEMM_TN is 1).  LOADA and
 * LOADB load a GEMM_VW-vector of A's and of B's rows; the kernel defines
 * `br`, B's row n0, before it, and VAL as for GEMM_EPILOGUE_SCALAR.  The
 * NDRange is exact: (N * GEMM_KG_WG, ceil(M / GEMM_TM)), local (GEMM_KG_WG, 1),
 * so every work-item of a group reaches every barrier. */
#define GEMM_KGROUP(LOADA, LOADB, VAL)                                                  \
    __local float red_[GEMM_TM * GEMM_KG_WG];                                           \
    const uint l_ = (uint)get_local_id(0);                                              \
    __global const float *ar[GEMM_TM];                                                  \
    _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++)                                 \
        ar[i] = A + a_off + min(m0 + (uint)i, M - 1u) * lda;                            \
    VFLOAT accv[GEMM_TM];                                                               \
    _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++) accv[i] = (VFLOAT)(0.0f);       \
    const uint KV = K - K % GEMM_VW;                                                    \
    for (uint k = l_ * GEMM_VW; k < KV; k += GEMM_KG_WG * GEMM_VW) {                    \
        const VFLOAT b = LOADB(br + k);                                                 \
        _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++) accv[i] = LOADA(ar[i] + k) * b + accv[i]; \
    }                                                                                   \
    float acc[GEMM_TM][1];                                                              \
    _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++) acc[i][0] = VSUM(accv[i]);      \
    for (uint k = KV + l_; k < K; k += GEMM_KG_WG)                                      \
        _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++)                             \
            acc[i][0] = ar[i][k] * (float)br[k] + acc[i][0];                            \
    _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++) red_[i * GEMM_KG_WG + l_] = acc[i][0]; \
    barrier(CLK_LOCAL_MEM_FENCE);                                                       \
    for (uint s_ = GEMM_KG_WG / 2u; s_ > 0u; s_ >>= 1) {                                \
        if (l_ < s_)                                                                    \
            _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++)                         \
                red_[i * GEMM_KG_WG + l_] += red_[i * GEMM_KG_WG + l_ + s_];            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                   \
    }                                                                                   \
    if (l_ == 0u) {                                                                     \
        _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++) acc[i][0] = red_[i * GEMM_KG_WG]; \
        GEMM_EPILOGUE_SCALAR(VAL)                                                       \
    }

/* Sinusoidal position term of column c (of d) at position pos (the
 * embeddings: elementwise.cl, gemm_f16.cl): the default layout
 * (position_encoding "sinusoid", docs/ARCHITECTURES.md), the one the
 * kernels compute themselves past their table. */
inline float pos_term(const uint c, const uint d, const float pos) {
    const uint half_d = d / 2;
    float p = 0.0f;
    if (c < 2 * half_d) {
        const uint i = c < half_d ? c : c - half_d;
        const float denom = half_d > 1 ? (float)(half_d - 1) : 1.0f;
        /* 10000^(-i/denom) = exp(-ln(10000) * i / denom) */
        const float w = exp(-9.210340371976184f * (float)i / denom);
        p = c < half_d ? sin(pos * w) : cos(pos * w);
    }
    return p;
}

/* The position term of any layout (pos_table; the host keeps a table of
 * every position a session embeds when the layout is not the default):
 * 0 "sinusoid" (pos_term), 1 "sinusoid-2i": halves [sin | cos] at
 * w_i = 10000^(-2i/d), 2 "sinusoid-interleaved": sin at column 2i, cos at
 * 2i + 1, w_i = 10000^(-2i/d), 3 "none": 0. */
inline float pos_term_layout(const uint c, const uint d, const float pos, const uint layout) {
    if (layout == 0u) return pos_term(c, d, pos);
    if (layout == 3u || d < 2u) return 0.0f;
    const uint half_d = d / 2;
    if (layout == 1u) {
        if (c >= 2 * half_d) return 0.0f;
        const uint i = c < half_d ? c : c - half_d;
        const float w = exp(-9.210340371976184f * (float)(2 * i) / (float)d);
        return c < half_d ? sin(pos * w) : cos(pos * w);
    }
    const uint i = c / 2;
    const float w = exp(-9.210340371976184f * (float)(2 * i) / (float)d);
    return c % 2 ? cos(pos * w) : sin(pos * w);
}

/* The body of the embedding kernels (embed, embed_q8 in elementwise.cl,
 * embed_f16 in gemm_f16.cl): work-item (c, j), NDRange [d, min(rows,
 * seq_len)], takes column c's position term at position pos = pos0 + j
 * once and writes out[r, c] = FETCH(t) * scale + P for every row r = j (mod
 * seq_len), t = tok[r]: the batch's rows (and a decoder step's rows, all at
 * one position) share it.  The term comes from the table PT (pos_table's
 * rows of d, the same bits) when pos < pt_rows, else it is computed: a
 * decoder step's embedding is one row, and the sine and cosine of 256-512
 * columns were most of its time on a CPU (docs/PERFORMANCE.md). */
#define EMBED_ROWS(FETCH)                                                    \
    const uint c = (uint)get_global_id(0), j = (uint)get_global_id(1);      \
    if (c >= d || j >= seq_len || j >= rows) return;                         \
    const uint pos = pos0 + j;                                               \
    const float p = pos < pt_rows ? PT[pt_off + (ulong)pos * d + c]          \
                                  : pos_term(c, d, (float)pos);              \
    for (uint r = j; r < rows; r += seq_len) {                               \
        const ulong t = (ulong)tok[tok_off + r];                             \
        out[out_off + (ulong)r * d + c] = (FETCH) * scale + p;               \
    }

/* Float16 vector v of a row (elements 16v .. 16v + 15), plus the same
 * vector of a residual row when has_res. */
inline float16 load16_res(__global const float *x, __global const float *r, const int has_res, const uint v) {
    float16 t = vload16(v, x);
    if (has_res) t += vload16(v, r);
    return t;
}

/* Subgroup reductions (issue 23): with -DNMT_SUBGROUPS=1, which the host
 * passes to the reduction programs of runtime/ops/ops.c and ops_topk.c only
 * when the device reports cl_khr_subgroups or cl_intel_subgroups and
 * NMT_EDGE_NO_SUBGROUPS is not set (runtime/device/device_paths.c), wg_sum and
 * row_logsumexp reduce each subgroup with sub_group_reduce_add/max and
 * combine the subgroups' partials through local memory in subgroup order:
 * no barrier at all when the work-group is one subgroup, two otherwise
 * (the tree below takes 2 log2(local size) + 1).  Every work-item still
 * receives the same total; the summation order is the device's, fixed per
 * subgroup size (ops_sg.c checks log_softmax and topk_logprobs share it). */
#ifdef NMT_SUBGROUPS
#ifdef cl_khr_subgroups
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif
/* wg_sum by subgroups: each subgroup's sum, then (more than one subgroup)
 * their sum in subgroup order through red[0 .. get_num_sub_groups()). */
inline float sg_wg_sum(float v, __local float *red) {
    v = sub_group_reduce_add(v);
    const uint nsg = get_num_sub_groups();
    if (nsg == 1) return v; /* uniform over the work-group */
    if (get_sub_group_local_id() == 0) red[get_sub_group_id()] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    float t = 0.0f;
    for (uint i = 0; i < nsg; i++) t += red[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    return t;
}
#endif

/* Sum of v over the work-group; red holds at least get_local_size(0)
 * floats and the local size is a power of two.  Every work-item must call
 * it (it contains barriers); all receive the total, and red may be reused
 * right after. */
inline float wg_sum(float v, __local float *red) {
#ifdef NMT_SUBGROUPS
    return sg_wg_sum(v, red);
#else
    const uint lid = (uint)get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = (uint)get_local_size(0) / 2; w > 0; w >>= 1) {
        if (lid < w) red[lid] += red[lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
#endif
}

/* Mean and 1 / sqrt(variance + eps) of a row v = x (+ r) of d floats
 * (population variance, two passes), every work-item of the group
 * calling it.  Element access: float16 vectors v < d / 16 (vector v holds
 * elements 16v .. 16v + 15) and the tail elements from 16 * (d / 16); a
 * work-item owns vectors lid, lid + lsz, ... and tail elements lid + 16 *
 * (d / 16), ... (layernorm, its backward, gemm_nt_ln).  LN_STATS_BODY is
 * its text for a work-item lid of lsz whose group total of v is SUM(v). */
#define LN_STATS_BODY(SUM)                                                         \
    const uint nv = d / 16u, tail0 = nv * 16u;                                     \
    float16 s16 = (float16)(0.0f);                                                 \
    for (uint v = lid; v < nv; v += lsz) s16 += load16_res(x, r, has_res, v);      \
    float s = vsum16(s16);                                                         \
    for (uint c = tail0 + lid; c < d; c += lsz) s += has_res ? x[c] + r[c] : x[c]; \
    const float mean = SUM(s) / (float)d;                                          \
    float16 q16 = (float16)(0.0f);                                                 \
    for (uint v = lid; v < nv; v += lsz) {                                         \
        const float16 t = load16_res(x, r, has_res, v) - mean;                     \
        q16 += t * t;                                                              \
    }                                                                              \
    float q = vsum16(q16);                                                         \
    for (uint c = tail0 + lid; c < d; c += lsz) {                                  \
        const float t = (has_res ? x[c] + r[c] : x[c]) - mean;                     \
        q += t * t;                                                                \
    }                                                                              \
    return (float2)(mean, rsqrt(SUM(q) / (float)d + eps));
#define LN_GROUP_SUM(v) wg_sum((v), red)
#define LN_ITEM_SUM(v) (v)

inline float2 ln_stats(__global const float *x, __global const float *r, const int has_res, const uint d,
                       const float eps, __local float *red) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    LN_STATS_BODY(LN_GROUP_SUM)
}

/* ln_stats of one work-item alone, without a barrier (a chained norm,
 * cl/chain.cl): the operations ln_stats does at local size 1, whose wg_sum
 * hands back its argument, so the same bits.  A barrier in the chain
 * kernel's ticket loop made PoCL's compile of its work-group function
 * about twice as long (docs/PERFORMANCE.md, "Start-up"). */
inline float2 ln_stats_item(__global const float *x, __global const float *r, const int has_res, const uint d,
                            const float eps) {
    const uint lid = 0u, lsz = 1u;
    LN_STATS_BODY(LN_ITEM_SUM)
}

/* One row of layernorm: o = (v - mean(v)) / sqrt(var(v) + eps) * g + bt,
 * v = x (+ r), every work-item of the group calling it.  norm.cl's
 * layernorm and gemm.cl's gemm_nt_ln both end in it, so a fused and an
 * unfused sub-layer give the same bits.  A work-item reads and writes only
 * its own elements (ln_stats), so o may alias x or r.  LN_ROW_BODY: its
 * text after the statistics st. */
#define LN_ROW_BODY                                                          \
    const uint nv = d / 16u, tail0 = nv * 16u;                               \
    const float mean = st.x, rstd = st.y;                                    \
    for (uint v = lid; v < nv; v += lsz) {                                   \
        const float16 t = load16_res(x, r, has_res, v) - mean;               \
        vstore16(t * rstd * vload16(v, g) + vload16(v, bt), v, o);           \
    }                                                                        \
    for (uint c = tail0 + lid; c < d; c += lsz) {                            \
        const float t = (has_res ? x[c] + r[c] : x[c]) - mean;               \
        o[c] = t * rstd * g[c] + bt[c];                                      \
    }
inline void ln_row(__global const float *x, __global const float *r, const int has_res, __global float *o,
                   const uint d, __global const float *g, __global const float *bt, const float eps,
                   __local float *red) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const float2 st = ln_stats(x, r, has_res, d, eps, red);
    LN_ROW_BODY
}

/* ln_row of one work-item alone, without a barrier (ln_stats_item). */
inline void ln_row_item(__global const float *x, __global const float *r, const int has_res, __global float *o,
                        const uint d, __global const float *g, __global const float *bt, const float eps) {
    const uint lid = 0u, lsz = 1u;
    const float2 st = ln_stats_item(x, r, has_res, d, eps);
    LN_ROW_BODY
}

/* cumax(x)[k] of m values (ON-LSTM's master gates): sum_{l <= k} of
 * softmax(x)_l. */
inline float cumax_at(__global const float *x, const uint m, const uint k) {
    float mx = x[0];
    for (uint l = 1; l < m; l++) mx = fmax(mx, x[l]);
    float sum = 0.0f, pre = 0.0f;
    for (uint l = 0; l < m; l++) {
        const float e = exp(x[l] - mx);
        sum += e;
        if (l <= k) pre += e;
    }
    return pre / sum;
}

/* Flags of the GRU kernels (cl/recurrent.cl and its training
 * counterpart; the ops set them in runtime/ops/ops_rec.c and train/): which
 * optional operands are present, the direction. */
#define GRU_HG 1u
#define GRU_HP 2u
#define GRU_OUT 4u
#define GRU_COUNT 8u
#define GRU_REVERSE 16u

/* GRU step t of sequence b (cl/recurrent.cl gru_cell and its backward):
 * 1 when the step is real (t < len, len = min(count[b], t_cap), or t_cap
 * without count), and its data row in *row: b * t_cap + t, or
 * b * t_cap + len - 1 - t for reverse; b * t_cap + t past the sequence. */
inline int gru_step_row(__global const int *count, const ulong count_off, const uint has_count, const uint b,
                        const uint t_cap, const uint t, const uint reverse, ulong *row) {
    uint len = t_cap;
    if (has_count) {
        const int c = count[count_off + b];
        len = c <= 0 ? 0u : min((uint)c, t_cap);
    }
    const int real = t < len;
    *row = (ulong)b * t_cap + (real && reverse ? len - 1 - t : t);
    return real;
}

/* Valid keys of kv sequence m, clamped to [0, lk_max]. */
inline int attn_key_count(__global const int *key_len, const ulong kl_off, const int has_key_len,
                          const uint key_len_const, const uint m, const uint lk_max) {
    const int kl = has_key_len ? key_len[kl_off + m] : (int)min(key_len_const, lk_max);
    return clamp(kl, 0, (int)lk_max);
}

/* Allowed keys [lo, hi] (as int2) of the query at position pos for a
 * branch of kind `kind` (HySAN masks; causal adds the decoder's mask). */
inline int2 attn_range(const int pos, const int n_keys, const int causal, const int kind, const int radius) {
    int lo = 0, hi = n_keys - 1;
    if (causal || kind == BRANCH_FW) hi = min(hi, pos);
    if (kind == BRANCH_BW) lo = max(lo, pos);
    if (kind == BRANCH_LOCAL) {
        lo = max(lo, pos - radius);
        hi = min(hi, pos + radius);
    }
    if (kind == BRANCH_BLOCK) { /* radius = block size >= 1 (checked by the host) */
        lo = max(lo, pos - pos % radius);
        hi = min(hi, pos - pos % radius + radius - 1);
    }
    return (int2)(lo, hi);
}

/* Log-sum-exp of the n values of row x over the work-group (local size a
 * power of two; red_m, red_s hold at least that many floats).  Each
 * work-item owns the float8 chunks lid, lid + lsz, ... of the row (chunk q
 * holds entries 8q .. 8q + 7; the n % 8 trailing entries go one each to the
 * first work-items): a max pass, then a sum-of-exp pass relative to that
 * max, both on float8 vectors (SIMD exp on CPU runtimes, 32-byte loads
 * adjacent across work-items on GPUs), then a tree over the work-items'
 * (max, sum).  Every work-item must call it (barriers); all receive the
 * result, -INFINITY for a row without a finite entry; red_m/red_s may be
 * reused after a barrier.  A NaN entry makes the sum NaN.  *item_max: the
 * largest of the calling work-item's own entries (NaN skipped; -INFINITY
 * when none).  log_softmax (elementwise.cl) and topk_logprobs (topk.cl)
 * both use it: their log-probabilities are the same bits. */
/* Work-item lid's part of row_logsumexp (of lsz): its entries' max (*m)
 * and their sum of exp relative to it (returned).  Also the chained top-k's
 * lanes (lse_chain). */
inline float lse_lane(__global const float *x, const uint n, const uint lid, const uint lsz, float *m_out) {
    const uint nv = n / 8;
    float8 vm = (float8)(-INFINITY);
    for (uint q = lid; q < nv; q += lsz) vm = fmax(vm, vload8(q, x));
    const float4 m4 = fmax(vm.lo, vm.hi);
    float m = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
    for (uint c = nv * 8 + lid; c < n; c += lsz) m = fmax(m, x[c]);
    float s = m == INFINITY ? 1.0f : 0.0f; /* a +INF entry: lse +INF */
    if (m != -INFINITY && m != INFINITY) { /* exp(-INF - m) = 0 for masked entries */
        float8 vs = (float8)(0.0f);
        for (uint q = lid; q < nv; q += lsz) vs += exp(vload8(q, x) - m);
        s = vsum8(vs);
        for (uint c = nv * 8 + lid; c < n; c += lsz) s += exp(x[c] - m);
    }
    *m_out = m;
    return s;
}

/* One step of row_logsumexp's tree: the pair (m1, s1), (m2, s2) into
 * (*m1, *s1) (s1 kept where both maxima are -INFINITY). */
inline void lse_pair(float *m1, float *s1, const float m2, const float s2) {
    const float mm = fmax(*m1, m2);
    if (mm != -INFINITY) *s1 = *s1 * exp(*m1 - mm) + s2 * exp(m2 - mm);
    *m1 = mm;
}

inline float row_logsumexp(__global const float *x, const uint n, __local float *red_m, __local float *red_s,
                           float *item_max) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    float m;
    const float s = lse_lane(x, n, lid, lsz, &m);
    *item_max = m;
#ifdef NMT_SUBGROUPS
    {
        /* the subgroup's (max, sum) first, then the subgroups' in order */
        const float sm = sub_group_reduce_max(m);
        const float ss = sub_group_reduce_add(m == -INFINITY ? 0.0f : s * exp(m - sm));
        const uint nsg = get_num_sub_groups();
        float mx = sm, tot = ss;
        if (nsg > 1) {
            if (get_sub_group_local_id() == 0) {
                red_m[get_sub_group_id()] = sm;
                red_s[get_sub_group_id()] = ss;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            mx = -INFINITY;
            for (uint i = 0; i < nsg; i++) mx = fmax(mx, red_m[i]);
            tot = 0.0f;
            if (mx != -INFINITY)
                for (uint i = 0; i < nsg; i++) tot += red_s[i] * exp(red_m[i] - mx);
        }
        return mx == -INFINITY ? -INFINITY : mx + log(tot);
    }
#else
    red_m[lid] = m;
    red_s[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = lsz / 2; w > 0; w >>= 1) {
        if (lid < w) {
            float m1 = red_m[lid], s1 = red_s[lid];
            lse_pair(&m1, &s1, red_m[lid + w], red_s[lid + w]);
            red_m[lid] = m1;
            red_s[lid] = s1;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mx = red_m[0];
    return mx == -INFINITY ? -INFINITY : mx + log(red_s[0]);
#endif
}

/* topk.cl's top-k steps, shared with the chained top-k (CHAIN_TOPK below),
 * which runs the work-group's lanes one after another in one work-item and
 * so gives topk_logprobs' bits.  TOPK_MAX: the largest k (topk.cl's -D). */
#ifndef TOPK_MAX
#define TOPK_MAX 17
#endif

/* (a, ia) ranks before (b, ib): larger key, then lower id. */
inline int ranks_before(const float a, const int ia, const float b, const int ib) {
    return a > b || (a == b && ia < ib);
}

/* Entry (key, id) into the sorted list tk/ti of cnt (at most k) entries when
 * it is at or above key_min (not NaN) and among the best k; the new count. */
inline uint topk_insert(float *tk, int *ti, uint cnt, const uint k, const float key, const int id,
                        const float key_min) {
    if (!(key >= key_min)) return cnt; /* below the bound, or NaN */
    if (cnt == k && !ranks_before(key, id, tk[k - 1], ti[k - 1])) return cnt;
    uint i = cnt < k ? cnt++ : k - 1;
    while (i > 0 && ranks_before(key, id, tk[i - 1], ti[i - 1])) {
        tk[i] = tk[i - 1];
        ti[i] = ti[i - 1];
        i--;
    }
    tk[i] = key;
    ti[i] = id;
    return cnt;
}

/* A dead row r (its score not > -inf): every entry and its lp_eos missing. */
inline void topk_dead(__global uint *out, const ulong out_off, const uint rows, const uint r, const uint k) {
    for (uint i = 0; i < k; i++) {
        out[out_off + (ulong)r * k + i] = as_uint(-INFINITY);
        out[out_off + (ulong)rows * k + (ulong)r * k + i] = (uint)-1;
    }
    out[out_off + 2 * (ulong)rows * k + r] = as_uint(-INFINITY);
}

/* A bound: the k-th largest of the lanes' maxima T is an entry, and at
 * least k entries are >= T, so an entry whose key is below key(T) cannot be
 * among the k best (keys are monotone in x).  (AS: item_max's address
 * space.) */
#define TOPK_BOUND(NAME, AS)                                                                                 \
    inline float NAME(AS const float *item_max, const uint lsz, const uint k, const float s0, const float lse) { \
        float best[TOPK_MAX];                                                                                \
        uint nb = 0;                                                                                         \
        for (uint w = 0; w < lsz; w++) {                                                                     \
            const float v = item_max[w];                                                                     \
            if (nb == k && !(v > best[k - 1])) continue;                                                     \
            uint i = nb < k ? nb++ : k - 1;                                                                  \
            while (i > 0 && v > best[i - 1]) {                                                               \
                best[i] = best[i - 1];                                                                       \
                i--;                                                                                         \
            }                                                                                                \
            best[i] = v;                                                                                     \
        }                                                                                                    \
        return nb == k ? s0 + (best[k - 1] - lse) : -INFINITY;                                               \
    }

/* Lane lid's best k of its entries (row_logsumexp's chunks) at or above the
 * bound, sorted, into tk/ti; their count.  A float8 chunk is tested at
 * once; the few entries at or above the bound are inserted one by one. */
inline uint topk_lane_list(__global const float *x, const uint n, const uint lid, const uint lsz, const float s0,
                           const float lse, const float key_min, const uint k, float *tk, int *ti) {
    uint cnt = 0;
    const uint nv = n / 8;
    for (uint q = lid; q < nv; q += lsz) {
        const float8 kv = s0 + (vload8(q, x) - lse);
        if (!any(kv >= key_min)) continue; /* all below the bound, or NaN */
        const float kk[8] = {kv.s0, kv.s1, kv.s2, kv.s3, kv.s4, kv.s5, kv.s6, kv.s7};
        for (uint e = 0; e < 8; e++) cnt = topk_insert(tk, ti, cnt, k, kk[e], (int)(8 * q + e), key_min);
    }
    for (uint c = nv * 8 + lid; c < n; c += lsz) cnt = topk_insert(tk, ti, cnt, k, s0 + (x[c] - lse), (int)c, key_min);
    return cnt;
}

/* One lane's list lk/li (k entries, missing ones id INT_MAX) merged into
 * tk/ti of m entries; the new m.  A list is sorted, so it is left at its
 * first entry that does not beat the k-th best so far.  (AS: the list's
 * address space.) */
#define TOPK_MERGE(NAME, AS)                                                                                 \
    inline uint NAME(AS const float *lk, AS const int *li, const uint k, float *tk, int *ti, uint m) {       \
        for (uint j = 0; j < k; j++) {                                                                       \
            const float key = lk[j];                                                                         \
            const int id = li[j];                                                                            \
            if (id == INT_MAX || (m == k && !ranks_before(key, id, tk[k - 1], ti[k - 1]))) break;           \
            m = topk_insert(tk, ti, m, k, key, id, -INFINITY); /* list keys are never NaN */                 \
        }                                                                                                    \
        return m;                                                                                            \
    }

/* Row r's results from its m ranked entries (topk.cl: the lp and ids, lp_eos;
 * with pick, the next token and its key into tok and score). */
inline void topk_write(__global const float *x, const float lse, const float *tk, const int *ti, const uint m,
                       const uint k, const uint eos, const uint n, __global uint *out, const ulong out_off,
                       const uint rows, const uint r, const uint pick, __global int *tok, const ulong tok_off,
                       __global float *score, const ulong s_off) {
    __global uint *o_lp = out + out_off + (ulong)r * k;
    __global uint *o_id = out + out_off + (ulong)rows * k + (ulong)r * k;
    for (uint j = 0; j < k; j++) {
        o_lp[j] = as_uint(j < m ? x[ti[j]] - lse : -INFINITY);
        o_id[j] = j < m ? (uint)ti[j] : (uint)-1;
    }
    out[out_off + 2 * (ulong)rows * k + r] = as_uint(eos < n ? x[eos] - lse : -INFINITY);
    if (pick == 0) return;
    int id = (int)eos;
    float key = -INFINITY;
    for (uint j = 0; j < m; j++)
        if (tk[j] > -INFINITY && (pick == 1 || ti[j] != (int)eos)) {
            id = ti[j];
            key = tk[j];
            break;
        }
    tok[tok_off + r] = id;
    score[s_off + r] = key;
}

/* attention.cl's -D knob: the largest d_head attn_item handles (its
 * private accumulator) */
#ifndef ATTN_MAX_DH
#define ATTN_MAX_DH 128
#endif

/* attn_fused's and attn_group's parameters, and what both derive from them
 * for their (s*H + h, i, branch b): the kv sequence m, the key range r,
 * the row pointers, and the own position (has_new). */
#define ATTN_ROW_PARAMS                                                                                  \
    const uint n_seq, const uint lq, const uint q_pos0, const uint lk_max, const uint group,             \
        const uint n_heads, const uint d_head, const float scale, __global const float *Q,               \
        const ulong q_off, const uint q_ld, __global float *Kc, const ulong k_off, const uint k_ld,      \
        __global float *V, const ulong v_off, const uint v_ld, const ulong kv_stride,                    \
        __global const int *kv_row, const ulong kr_off, const uint kr_ld, const int has_kv_row,          \
        __global const float *Kn, const ulong kn_off, __global const float *Vn, const ulong vn_off,      \
        const uint new_ld, const int has_new, __global const int *key_len, const ulong kl_off,           \
        const int has_key_len, const uint key_len_const, const int causal, const uint n_branches,        \
        const uint kinds, const int8 radii, __global float *out, const ulong out_off, const uint out_ld

#define ATTN_ROW_SETUP(sh, i, b)                                                                         \
    const uint s = sh / n_heads, h = sh - s * n_heads, m = s / group;                                    \
    const int n_keys = attn_key_count(key_len, kl_off, has_key_len, key_len_const, m, lk_max);           \
    const int kind = (int)((kinds >> (4 * b)) & 15u);                                                    \
    const int radius = b == 0 ? radii.s0 : b == 1 ? radii.s1 : b == 2 ? radii.s2 : b == 3 ? radii.s3     \
                     : b == 4 ? radii.s4 : b == 5 ? radii.s5 : b == 6 ? radii.s6 : radii.s7;             \
    const int2 r = attn_range((int)(q_pos0 + i), n_keys, causal, kind, radius);                          \
    __global const float *q = Q + q_off + (ulong)(s * lq + i) * q_ld + (ulong)h * d_head;                \
    __global const float *kb = Kc + k_off + (ulong)h * d_head;                                           \
    __global const float *vb = V + v_off + (ulong)h * d_head;                                            \
    __global float *o = out + out_off + (ulong)(s * lq + i) * out_ld + (ulong)b * n_heads * d_head +     \
                        (ulong)h * d_head;                                                               \
    /* has_kv_row: key j of sequence m at row kr[j * kr_ld] */                                           \
    __global const int *kr = kv_row + kr_off + m;                                                        \
    /* has_new: the own position's key and value, read from the step's rows */                          \
    const int own = has_new ? (int)(q_pos0 + i) : -1;                                                    \
    __global const float *kn = Kn + kn_off + (ulong)(s * lq + i) * new_ld + (ulong)h * d_head;           \
    __global const float *vn = Vn + vn_off + (ulong)(s * lq + i) * new_ld + (ulong)h * d_head;

/* The step's K|V append (has_new), by the branch-0 row of (s, h), after its
 * walk (a walk that read the cache at its own position would see what was
 * there before, not the new rows); work-items c0, c0 + stride, ... of it. */
#define ATTN_APPEND(c0, stride)                                                                          \
    if (has_new && b == 0) {                                                                             \
        const ulong row = (ulong)(has_kv_row ? (uint)kr[(ulong)own * kr_ld] : m) * kv_stride;            \
        __global float *kw = Kc + k_off + row + (ulong)own * k_ld + (ulong)h * d_head;                   \
        __global float *vw = V + v_off + row + (ulong)own * v_ld + (ulong)h * d_head;                    \
        for (uint c = (c0); c < d_head; c += (stride)) {                                                 \
            kw[c] = kn[c];                                                                               \
            vw[c] = vn[c];                                                                               \
        }                                                                                                \
    }

/* ATTN_ROW_PARAMS' names, in order, as arguments */
#define ATTN_ROW_ARGS                                                                                    \
    n_seq, lq, q_pos0, lk_max, group, n_heads, d_head, scale, Q, q_off, q_ld, Kc, k_off, k_ld, V, v_off,  \
        v_ld, kv_stride, kv_row, kr_off, kr_ld, has_kv_row, Kn, kn_off, Vn, vn_off, new_ld, has_new,      \
        key_len, kl_off, has_key_len, key_len_const, causal, n_branches, kinds, radii, out, out_off,      \
        out_ld

/* attn_fused's work-item (s*H + h, i, branch b): attention.cl's attn_fused
 * and gemm.cl's gemm_chain run it, so both give the same bits. */
inline void attn_item(ATTN_ROW_PARAMS, const uint sh, const uint i, const uint b) {
    ATTN_ROW_SETUP(sh, i, b)

    float mx = -INFINITY, sum = 0.0f;
    if (d_head % 16u == 0) {
        /* float16 path: q and the accumulator in registers (the loops over
         * the at most ATTN_MAX_DH / 16 vectors are unrolled, each guarded) */
        const uint nu = d_head / 16u;
        float16 qv[ATTN_MAX_DH / 16], av[ATTN_MAX_DH / 16];
#pragma unroll
        for (uint u = 0; u < ATTN_MAX_DH / 16; u++) {
            qv[u] = u < nu ? vload16(u, q) : (float16)(0.0f);
            av[u] = (float16)(0.0f);
        }
        for (int j = r.x; j <= r.y; j++) {
            const ulong kv = (ulong)(has_kv_row ? (uint)kr[(ulong)j * kr_ld] : m) * kv_stride;
            __global const float *k = j == own ? kn : kb + kv + (ulong)j * k_ld;
            float16 d16 = (float16)(0.0f);
#pragma unroll
            for (uint u = 0; u < ATTN_MAX_DH / 16; u++)
                if (u < nu) d16 += qv[u] * vload16(u, k);
            const float sc = vsum16(d16) * scale;
            if (sc > mx) {
                const float corr = exp(mx - sc); /* exp(-INF) = 0 on the first key */
                sum *= corr;
#pragma unroll
                for (uint u = 0; u < ATTN_MAX_DH / 16; u++) av[u] *= corr;
                mx = sc;
            }
            const float p = exp(sc - mx);
            sum += p;
            __global const float *v = j == own ? vn : vb + kv + (ulong)j * v_ld;
#pragma unroll
            for (uint u = 0; u < ATTN_MAX_DH / 16; u++)
                if (u < nu) av[u] = p * vload16(u, v) + av[u];
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
        for (uint u = 0; u < ATTN_MAX_DH / 16; u++)
            if (u < nu) vstore16(av[u] * inv, u, o);
    } else {
        float acc[ATTN_MAX_DH];
        for (uint c = 0; c < d_head; c++) acc[c] = 0.0f;
        const uint D4 = d_head & ~3u;
        for (int j = r.x; j <= r.y; j++) {
            const ulong kv = (ulong)(has_kv_row ? (uint)kr[(ulong)j * kr_ld] : m) * kv_stride;
            __global const float *k = j == own ? kn : kb + kv + (ulong)j * k_ld;
            float4 d4 = (float4)(0.0f);
            for (uint c = 0; c < D4; c += 4) d4 += vload4(0, q + c) * vload4(0, k + c);
            float dot = (d4.x + d4.y) + (d4.z + d4.w);
            for (uint c = D4; c < d_head; c++) dot += q[c] * k[c];
            const float sc = dot * scale;
            if (sc > mx) {
                const float corr = exp(mx - sc);  /* exp(-INF) = 0 on the first key */
                sum *= corr;
                for (uint c = 0; c < d_head; c++) acc[c] *= corr;
                mx = sc;
            }
            const float p = exp(sc - mx);
            sum += p;
            __global const float *v = j == own ? vn : vb + kv + (ulong)j * v_ld;
            for (uint c = 0; c < d_head; c++) acc[c] = p * v[c] + acc[c];
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (uint c = 0; c < d_head; c++) o[c] = acc[c] * inv;
    }
    ATTN_APPEND(0u, 1u)
}

/* beam.cl's beam_advance for sentence s (its header says what it does),
 * shared with chain.cl's CHAIN_BEAM, so both give the same results.  Its
 * arrays hold BEAM_MAX beams of CAND_MAX candidates a row: the host's
 * NMT_BEAM_DEVICE_MAX and NMT_TOPK_MAX (runtime/ops/ops.h), which
 * runtime/ops/ops_chain.c checks against chain.cl's CHAIN_BEAM_MAX and
 * CHAIN_TOPK_MAX, and chain.cl these against BEAM_MAX and CAND_MAX. */
#define BEAM_MAX 8
#define CAND_MAX 17

/* (s, row, tok) into the descending list of count (at most cap) entries;
 * ties keep the earlier entry first (runtime/session/beam.c, cand_insert). */
inline void cand_insert(float *cs, int *cr, int *ct, uint *count, const uint cap, const float s, const int row,
                               const int tok) {
    const uint c = *count;
    if (c == cap && !(s > cs[c - 1])) return;
    uint i = c < cap ? c : cap - 1;
    while (i > 0 && s > cs[i - 1]) {
        cs[i] = cs[i - 1];
        cr[i] = cr[i - 1];
        ct[i] = ct[i - 1];
        i--;
    }
    cs[i] = s;
    cr[i] = row;
    ct[i] = tok;
    if (c < cap) *count = c + 1;
}

inline void beam_sentence(__global const uint *cand, const ulong cand_off, const uint rows, const uint k,
                          const uint K, const uint V, const uint eos, const uint t, const uint min_len,
                          __global int *state, const ulong state_off, __global int *tok, const ulong tok_off,
                          __global float *score, const ulong score_off, __global int *back, const ulong back_off,
                          const uint s) {
    __global int *st = state + state_off + 3 * (ulong)s;
    __global const float *c_lp = (__global const float *)(cand + cand_off);
    __global const int *c_id = (__global const int *)(cand + cand_off + (ulong)rows * k);
    __global const float *c_eos = (__global const float *)(cand + cand_off + 2 * (ulong)rows * k);
    __global int *o_tok = tok + tok_off;
    __global float *o_score = score + score_off;
    __global int *o_back = back + back_off;
    const uint r0 = s * K;
    if (st[0]) { /* done: the rows continue themselves */
        for (uint j = r0; j < r0 + K; j++) {
            o_back[j] = (int)j;
            o_tok[j] = (int)eos;
        }
        return;
    }
    const int force_eos = t >= (uint)st[2], no_eos = t < min_len;
    float cs[2 * BEAM_MAX];
    int cr[2 * BEAM_MAX], ct[2 * BEAM_MAX];
    uint nc = 0;
    const uint cap = 2 * K;
    for (uint r = r0; r < r0 + K; r++) {
        const float sr = o_score[r];
        if (!(sr > -INFINITY)) continue;
        if (force_eos) {
            cand_insert(cs, cr, ct, &nc, cap, sr + c_eos[r], (int)r, (int)eos);
            continue;
        }
        float lp[CAND_MAX];
        int id[CAND_MAX];
        uint m = 0;
        for (uint i = 0; i < k; i++) { /* the row's valid candidates, id ascending */
            const int v = c_id[(ulong)r * k + i];
            if (v < 0 || (uint)v >= V) continue;
            uint p = m++;
            while (p > 0 && id[p - 1] > v) {
                id[p] = id[p - 1];
                lp[p] = lp[p - 1];
                p--;
            }
            id[p] = v;
            lp[p] = c_lp[(ulong)r * k + i];
        }
        for (uint i = 0; i < m; i++) {
            const float sc = sr + lp[i];
            if (nc == cap && !(sc > cs[cap - 1])) continue;
            if (!(sc > -INFINITY) || (no_eos && id[i] == (int)eos)) continue;
            cand_insert(cs, cr, ct, &nc, cap, sc, (int)r, id[i]);
        }
    }
    if (nc == 0) /* nothing allowed: the live rows end here */
        for (uint r = r0; r < r0 + K; r++) {
            const float sr = o_score[r];
            if (sr > -INFINITY) cand_insert(cs, cr, ct, &nc, cap, sr + c_eos[r], (int)r, (int)eos);
        }
    int n_fin = st[1];
    uint alive = 0;
    for (uint i = 0; i < nc && alive < K; i++) {
        if (ct[i] == (int)eos) {
            if (i < K && n_fin < (int)K) n_fin++;
            continue;
        }
        if (n_fin >= (int)K) break;
        const uint j = r0 + alive++;
        o_back[j] = cr[i];
        o_tok[j] = ct[i];
        o_score[j] = cs[i]; /* the scores read above are all read */
    }
    for (uint j = r0 + alive; j < r0 + K; j++) {
        o_back[j] = (int)r0;
        o_tok[j] = (int)eos;
        o_score[j] = -INFINITY;
    }
    st[1] = n_fin;
    if (n_fin >= (int)K || force_eos || alive == 0) st[0] = 1;
}
