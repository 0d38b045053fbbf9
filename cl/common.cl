/* common.cl — helpers shared by every kernel program.  The device layer
 * prepends this file to each program's own source (runtime/device.c,
 * nmt_device_program), so a helper is written once for all of cl/.  Only
 * macros and inline functions: nothing here is a kernel, and a program
 * that does not call a helper pays nothing for it. */

/* Attention branch kinds: nmt_branch_kind in runtime/ops.h. */
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
 * gemm_q8.cl, gemm_f16.cl; the host's launch: runtime/ops.c
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
 * these parameters in runtime/ops_rows.c): x [rows, d] (stride ldx), W1
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
 * gemm_i8.cl gemm_i8_nt_ln; runtime/ops_rows.c sets these): a work-group
 * per row m of A [*, K] (stride lda), Q int8 [N, K] (stride ldq) with row
 * scales and bias (has_bias), R and O (strides ldr, ldo), gain G, bias Bt. */
#define LN_ROW_PARAMS                                                                                         \
    const uint N, const uint K, __global const float *A, const uint a_off, const uint lda,                   \
        __global const char *Q, const uint q_off, const uint ldq, __global const float *scale,                \
        const uint s_off, __global const float *bias, const uint bias_off, const int has_bias,                \
        __global const float *R, const uint r_off, const uint ldr, __global float *O, const uint o_off,      \
        const uint ldo, __global const float *G, const uint g_off, __global const float *Bt, const uint bt_off, \
        const float eps

/* The products' epilogue (gemm.cl, gemm_f16.cl, gemm_q8.cl, gemm_i8.cl) for
 * the GEMM_TM x GEMM_TN block of C at (m0, n0): per element
 * v = value (+ beta * C) (+ bias[n]) (ReLU), stored where in range (flags:
 * bit 0 bias, bit 1 ReLU; beta == 0: C is not read).  The kernel passes its
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
            if (flags & 2) v = fmax(v, 0.0f);                                           \
            crow[n] = v;                                                                \
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
 * embeddings: elementwise.cl, gemm_f16.cl). */
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
 * passes to the reduction programs of runtime/ops.c and ops_topk.c only
 * when the device reports cl_khr_subgroups or cl_intel_subgroups and
 * NMT_EDGE_NO_SUBGROUPS is not set (runtime/ops_sg.c), wg_sum and
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
 * (d / 16), ... (layernorm, its backward, gemm_nt_ln). */
inline float2 ln_stats(__global const float *x, __global const float *r, const int has_res, const uint d,
                       const float eps, __local float *red) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint nv = d / 16u, tail0 = nv * 16u;

    float16 s16 = (float16)(0.0f);
    for (uint v = lid; v < nv; v += lsz) s16 += load16_res(x, r, has_res, v);
    float s = vsum16(s16);
    for (uint c = tail0 + lid; c < d; c += lsz) s += has_res ? x[c] + r[c] : x[c];
    const float mean = wg_sum(s, red) / (float)d;

    float16 q16 = (float16)(0.0f);
    for (uint v = lid; v < nv; v += lsz) {
        const float16 t = load16_res(x, r, has_res, v) - mean;
        q16 += t * t;
    }
    float q = vsum16(q16);
    for (uint c = tail0 + lid; c < d; c += lsz) {
        const float t = (has_res ? x[c] + r[c] : x[c]) - mean;
        q += t * t;
    }
    return (float2)(mean, rsqrt(wg_sum(q, red) / (float)d + eps));
}

/* One row of layernorm: o = (v - mean(v)) / sqrt(var(v) + eps) * g + bt,
 * v = x (+ r), every work-item of the group calling it.  norm.cl's
 * layernorm and gemm.cl's gemm_nt_ln both end in it, so a fused and an
 * unfused sub-layer give the same bits.  A work-item reads and writes only
 * its own elements (ln_stats), so o may alias x or r. */
inline void ln_row(__global const float *x, __global const float *r, const int has_res, __global float *o,
                   const uint d, __global const float *g, __global const float *bt, const float eps,
                   __local float *red) {
    const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
    const uint nv = d / 16u, tail0 = nv * 16u;
    const float2 st = ln_stats(x, r, has_res, d, eps, red);
    const float mean = st.x, rstd = st.y;

    for (uint v = lid; v < nv; v += lsz) {
        const float16 t = load16_res(x, r, has_res, v) - mean;
        vstore16(t * rstd * vload16(v, g) + vload16(v, bt), v, o);
    }
    for (uint c = tail0 + lid; c < d; c += lsz) {
        const float t = (has_res ? x[c] + r[c] : x[c]) - mean;
        o[c] = t * rstd * g[c] + bt[c];
    }
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
 * counterpart; the ops set them in runtime/ops_rec.c and train/): which
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

#if defined(GEMM_CHAIN) || defined(I8_CHAIN) || defined(Q8_CHAIN)
/* Chained few-row ops: a chain of few-row products, layer norms,
 * attentions, embeddings and HySAN gates in one launch (runtime/ops_chain.c
 * records them; CPU devices, decoding steps).  The kernels are gemm.cl's
 * gemm_chain (fp32 products, -DGEMM_CHAIN), gemm_i8.cl's gemm_i8_chain
 * (int8 x int8 products and gates, -DI8_CHAIN) and gemm_q8.cl's
 * gemm_q8_chain (int8 weights x fp32, -DQ8_CHAIN); all run chain_run below,
 * which does the norms, attentions and embeddings itself and hands every
 * other kind to the program's own chain_own.
 *
 * The ops are CHAIN_W uints each at P + p_off (a block of the session's
 * descriptor buffer, written once and reused while the recorded ops repeat;
 * an attention's step positions are relative to the argument pos where
 * CHAIN_POS_REL says so), their buffers CHAIN_BUFS arguments named by
 * slot.  An op is cut into chunks:
 * a product (CHAIN_PROD, CHAIN_I8) into blocks of CHAIN_COLS columns of
 * all its M rows, a norm (CHAIN_LN) and a gate (CHAIN_GATE) into their
 * rows, an attention into its work-items, an embedding is one chunk.  The chunks of the whole chain are
 * numbered in order, and the launch's work-groups (one work-item each; the
 * host launches as many as the device has compute units) take them as
 * tickets: a compare-and-swap on ctr[0] claims the next, the work-item
 * waits until ctr[1] (chunks done) has counted every chunk of the ops
 * before its own, computes it and counts it done.  A chunk waits only for
 * chunks that running work-groups have claimed, so the launch finishes
 * whichever of its work-groups run and in whatever order (one thread
 * running them in turn does every chunk in the first).  The counters run
 * on from launch to launch: the host passes where this launch's tickets
 * begin (base) and the chunk count (total), so nothing resets them; their
 * differences are taken modulo 2^32.  The atomics order the chunks' plain
 * stores before the count (coherent memory, as on CPUs).
 *
 * A product's value per output is gemm_nt's (vector dot along K, VSUM,
 * scalar tail; then + bias, ReLU; or + bias + R as gemm_nt_ln) or, int8,
 * gemm_i8_nt's (or gemm_i8_nt_ln's) with quant_rows' bytes, a gate's
 * gemm_i8_gate's, a norm's
 * ln_row with one work-item (layernorm and gemm_nt_ln at local size 1), an
 * attention's attn_item (attn_fused's work-item), an embedding's embed's
 * expressions, so the chain gives the bits of the launches it replaces. */
#define CHAIN_W 20
#define CHAIN_BUFS 96
#define CHAIN_COLS 64
#define CHAIN_PROD 0u
#define CHAIN_LN 1u
#define CHAIN_ATTN 2u
#define CHAIN_EMBED 3u
#define CHAIN_I8 4u
#define CHAIN_GATE 5u
#define CHAIN_QUANT 6u
#define CHAIN_TOPK 7u
#define CHAIN_NONE 0xffffffffu
#define CHAIN_POS_REL (1u << 9) /* in CA_NBC */
/* op fields (runtime/ops_chain.c writes them): kind, M, N, K, then
 * (slot, offset, ld) of A, B, C, R; the bias (slot, offset); flags (1 bias,
 * 2 ReLU, 4 residual); the op's first chunk.  A norm: M rows of N = d, A =
 * x, R = res, C = out (each with its row stride), B = gamma, bias = beta,
 * K = eps's bits. */
enum { CF_KIND, CF_M, CF_N, CF_K, CF_A, CF_AO, CF_LDA, CF_B, CF_BO, CF_LDB, CF_C, CF_CO, CF_LDC,
       CF_R, CF_RO, CF_LDR, CF_BIAS, CF_BIASO, CF_FLAGS, CF_FIRST };
/* An attention (attn_item's work-items, one chunk each, (s*H + h) * lq + i)
 * * n_branches + b) takes two slots: */
enum { CA_KIND, CA_NSEQ, CA_LQ, CA_POS0, CA_LKMAX, CA_GROUP, CA_HEADS, CA_DH, CA_SCALE, CA_Q, CA_QO, CA_QLD,
       CA_K, CA_KO, CA_KLD, CA_V, CA_VO, CA_VLD, CA_KVS, CA_FIRST,
       /* the second slot (its first field the kind CHAIN_NONE, its CF_FIRST
        * the next op's first chunk); CHAIN_NONE slots: absent */
       CA_KIND2, CA_KR, CA_KRO, CA_KRLD, CA_KN, CA_KNO, CA_VN, CA_VNO, CA_NEWLD, CA_KL, CA_KLO, CA_KLC,
       CA_NBC /* n_branches | causal << 8 | CHAIN_POS_REL */, CA_KINDS, CA_RAD0, CA_RAD1 /* radii of branches 0-3, 16 bits each */, CA_OUT, CA_OUTO, CA_OUTLD, CA_FIRST2 };
/* An embedding (embed's or, CHAIN_EMBED_Q8, embed_q8's work-items, all in
 * one chunk; E: the int8 table, CE_QS its row scales): */
enum { CE_KIND, CE_TOK, CE_TOKO, CE_ROWS, CE_SEQ, CE_POS0, CE_E, CE_EO, CE_D, CE_SCALE, CE_OUT, CE_OUTO, CE_PT,
       CE_PTO, CE_PTROWS, CE_FLAGS /* CHAIN_POS_REL, CHAIN_EMBED_Q8 */, CE_QS, CE_QSO, CE_FIRST = 19 };
#define CHAIN_EMBED_Q8 (1u << 10) /* in CE_FLAGS */
/* An int8-weight product (CHAIN_I8: int8 x int8 in gemm_i8_chain, int8
 * weights x fp32 in gemm_q8_chain) takes a product's slot (B: the int8
 * weights Q, offset in bytes; A: the fp32 activations) and a second one
 * with the weights' row scales: */
enum { CI_KIND2 = CHAIN_W, CI_SQ, CI_SQO, CI_FIRST2 = 2 * CHAIN_W - 1 };
/* An int8 x int8 product's rows are quantized first, by an op of its own
 * (CHAIN_QUANT, gemm_i8_chain; one chunk per row, so the product's chunks
 * wait for all of them): A, lda, M and K are the product's, C the
 * chain's scratch (the M scales, then row m's bytes at CHAIN_QS_ROWS +
 * m * ldc), which the product then names as its A. */
#define CHAIN_QS_ROWS 16u
/* A top-k (topk_logprobs' operands, one chunk per row, its work-group's
 * CT_LSZ lanes run one after another): */
enum { CT_KIND, CT_X, CT_XO, CT_LD, CT_N, CT_ROWS, CT_K, CT_EOS, CT_SC, CT_SCO, CT_OUT, CT_OUTO, CT_PICK, CT_TOK,
       CT_TOKO, CT_LSZ, CT_FIRST = 19 };
#define CHAIN_TOPK_LANES 256 /* the largest CT_LSZ (the host checks reduce_wg) */
/* A gate (gemm_i8_gate's operands, one chunk per row) takes two slots: */
enum { CG_KIND, CG_ROWS, CG_D, CG_DR, CG_X, CG_XO, CG_LDX, CG_W1, CG_W1O, CG_S1, CG_S1O, CG_B1, CG_B1O, CG_W2,
       CG_W2O, CG_S2, CG_S2O, CG_B2, CG_B2O, CG_FIRST,
       CG_KIND2, CG_OUT, CG_OUTO, CG_LDO, CG_FLAGS, CG_FIRST2 = 2 * CHAIN_W - 1 };

/* a chain kernel's buffer parameters b0 .. b95 and the array of them */
#define CHAIN_BUF_PARAMS \
    __global float *b0, __global float *b1, __global float *b2, __global float *b3, __global float *b4, __global float *b5,\
    __global float *b6, __global float *b7, __global float *b8, __global float *b9, __global float *b10, __global float *b11,\
    __global float *b12, __global float *b13, __global float *b14, __global float *b15, __global float *b16, __global float *b17,\
    __global float *b18, __global float *b19, __global float *b20, __global float *b21, __global float *b22, __global float *b23,\
    __global float *b24, __global float *b25, __global float *b26, __global float *b27, __global float *b28, __global float *b29,\
    __global float *b30, __global float *b31, __global float *b32, __global float *b33, __global float *b34, __global float *b35,\
    __global float *b36, __global float *b37, __global float *b38, __global float *b39, __global float *b40, __global float *b41,\
    __global float *b42, __global float *b43, __global float *b44, __global float *b45, __global float *b46, __global float *b47,\
    __global float *b48, __global float *b49, __global float *b50, __global float *b51, __global float *b52, __global float *b53,\
    __global float *b54, __global float *b55, __global float *b56, __global float *b57, __global float *b58, __global float *b59,\
    __global float *b60, __global float *b61, __global float *b62, __global float *b63, __global float *b64, __global float *b65,\
    __global float *b66, __global float *b67, __global float *b68, __global float *b69, __global float *b70, __global float *b71,\
    __global float *b72, __global float *b73, __global float *b74, __global float *b75, __global float *b76, __global float *b77,\
    __global float *b78, __global float *b79, __global float *b80, __global float *b81, __global float *b82, __global float *b83,\
    __global float *b84, __global float *b85, __global float *b86, __global float *b87, __global float *b88, __global float *b89,\
    __global float *b90, __global float *b91, __global float *b92, __global float *b93, __global float *b94, __global float *b95
#define CHAIN_BUF_NAMES \
    b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15,\
    b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29, b30, b31,\
    b32, b33, b34, b35, b36, b37, b38, b39, b40, b41, b42, b43, b44, b45, b46, b47,\
    b48, b49, b50, b51, b52, b53, b54, b55, b56, b57, b58, b59, b60, b61, b62, b63,\
    b64, b65, b66, b67, b68, b69, b70, b71, b72, b73, b74, b75, b76, b77, b78, b79,\
    b80, b81, b82, b83, b84, b85, b86, b87, b88, b89, b90, b91, b92, b93, b94, b95

/* A product chunk's blocks (gemm.cl and gemm_q8.cl, with their GEMM_TN,
 * GEMM_VW, VFLOAT and VSUM): CHAIN_TMR rows m0.. of its columns n0 ..
 * nend - 1 (rows past M load row M - 1 and are not stored), GEMM_TN columns
 * at a time sharing the loads of B (elements of type BT), with the
 * operations of gemm_nt / gemm_q8_nt: LOADA / LOADB vectors of A and B,
 * their products summed along K, VSUM, the scalar tail, then VAL(acc, n)
 * (+ bias) (ReLU).  The caller's locals: o, c, A, B, C, bias, M, N, K, KV,
 * nend, m0, flags. */
#define CHAIN_ROWS(CHAIN_TMR, BT, LOADA, LOADB, VAL)                                                                         \
    for (uint n0 = c * CHAIN_COLS; n0 < nend; n0 += GEMM_TN) {                                        \
        __global const BT *br[GEMM_TN];                                                            \
        _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++)                                           \
            br[j] = B + o[CF_BO] + min(n0 + (uint)j, N - 1u) * o[CF_LDB];                             \
        __global const float *ar[CHAIN_TMR];                                                          \
        _Pragma("unroll") for (int i = 0; i < CHAIN_TMR; i++)                                         \
            ar[i] = A + o[CF_AO] + min(m0 + (uint)i, M - 1u) * o[CF_LDA];                             \
        VFLOAT accv[CHAIN_TMR][GEMM_TN];                                                              \
        _Pragma("unroll") for (int i = 0; i < CHAIN_TMR; i++)                                         \
            _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++) accv[i][j] = (VFLOAT)(0.0f);          \
        for (uint k = 0; k < KV; k += GEMM_VW) {                                                      \
            VFLOAT b_[GEMM_TN];                                                                       \
            _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++) b_[j] = LOADB(br[j] + k);             \
            _Pragma("unroll") for (int i = 0; i < CHAIN_TMR; i++) {                                   \
                const VFLOAT a = LOADA(ar[i] + k);                                                    \
                _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++) accv[i][j] = a * b_[j] + accv[i][j]; \
            }                                                                                         \
        }                                                                                             \
        float acc[CHAIN_TMR][GEMM_TN];                                                                \
        _Pragma("unroll") for (int i = 0; i < CHAIN_TMR; i++)                                         \
            _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++) acc[i][j] = VSUM(accv[i][j]);         \
        for (uint k = KV; k < K; k++)                                                                 \
            _Pragma("unroll") for (int i = 0; i < CHAIN_TMR; i++)                                     \
                _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++)                                   \
                    acc[i][j] = ar[i][k] * br[j][k] + acc[i][j];                                      \
        for (int i = 0; i < CHAIN_TMR; i++) { /* the epilogue: rolled, it stops at M and nend */      \
            const uint m = m0 + (uint)i;                                                              \
            if (m >= M) break;                                                                        \
            __global float *crow = C + o[CF_CO] + m * o[CF_LDC];                                      \
            for (int j = 0; j < GEMM_TN; j++) {                                                       \
                const uint n = n0 + (uint)j;                                                          \
                if (n >= nend) break;                                                                 \
                float v = VAL(acc[i][j], n);                                                          \
                if (flags & 1u) v += bias[o[CF_BIASO] + n];                                           \
                if (flags & 2u) v = fmax(v, 0.0f);                                                    \
                crow[n] = v;                                                                          \
            }                                                                                         \
        }                                                                                             \
    }

/* CHAIN_ROWS for the op's M rows (1, 2, or 3-4 as 4: the host records at
 * most 4) */
#define CHAIN_ROWS_M(BT, LOADA, LOADB, VAL)        \
    if (M == 1u) {                                 \
        CHAIN_ROWS(1, BT, LOADA, LOADB, VAL)       \
    } else if (M == 2u) {                          \
        CHAIN_ROWS(2, BT, LOADA, LOADB, VAL)       \
    } else {                                       \
        CHAIN_ROWS(4, BT, LOADA, LOADB, VAL)       \
    }

/* A gate's row k (CHAIN_GATE) through the program's ROW function
 * (gemm_i8_gate's or gemm_q8_gate's work for one row). */
#define CHAIN_GATE_ROW(ROW)                                                                                   \
    ROW(a[CG_D], a[CG_DR], bufs[a[CG_X]] + a[CG_XO] + k * a[CG_LDX],                                           \
        (__global const char *)bufs[a[CG_W1]] + a[CG_W1O], bufs[a[CG_S1]] + a[CG_S1O], bufs[a[CG_B1]] + a[CG_B1O], \
        (__global const char *)bufs[a[CG_W2]] + a[CG_W2O], bufs[a[CG_S2]] + a[CG_S2O], bufs[a[CG_B2]] + a[CG_B2O], \
        bufs[a[CG_OUT]] + a[CG_OUTO] + k * a[CG_LDO], (int)a[CG_FLAGS])

TOPK_BOUND(topk_bound_p, __private)
TOPK_MERGE(topk_merge_p, __private)

/* CHAIN_TOPK's chunk: topk_logprobs' work for row r, its lanes in turn:
 * row_logsumexp's lane parts and tree (lse_lane, lse_pair, in the tree's
 * order), the bound from the lanes' maxima, each lane's list merged in lane
 * order, topk_write. */
inline void chain_topk_row(__global const uint *a, const uint r, __global float **bufs) {
    const uint n = a[CT_N], k = a[CT_K], lsz = a[CT_LSZ], rows = a[CT_ROWS];
    __global const float *x = bufs[a[CT_X]] + a[CT_XO] + (ulong)r * a[CT_LD];
    __global float *score = bufs[a[CT_SC]];
    __global uint *out = (__global uint *)bufs[a[CT_OUT]];
    const ulong s_off = a[CT_SCO], out_off = a[CT_OUTO];
    const float s0 = score[s_off + r];
    if (!(s0 > -INFINITY)) {
        topk_dead(out, out_off, rows, r, k);
        return;
    }
    float lm[CHAIN_TOPK_LANES], ls[CHAIN_TOPK_LANES], im[CHAIN_TOPK_LANES];
    for (uint l = 0; l < lsz; l++) {
        ls[l] = lse_lane(x, n, l, lsz, &lm[l]);
        im[l] = lm[l];
    }
    for (uint w = lsz / 2; w > 0; w >>= 1)
        for (uint l = 0; l < w; l++) lse_pair(&lm[l], &ls[l], lm[l + w], ls[l + w]);
    float lse = lm[0] == -INFINITY ? -INFINITY : lm[0] + log(ls[0]);
    if (lse == -INFINITY) lse = 0.0f;
    const float key_min = topk_bound_p(im, lsz, k, s0, lse);
    float tk[TOPK_MAX], lk[TOPK_MAX];
    int ti[TOPK_MAX], li[TOPK_MAX];
    uint m = 0;
    for (uint l = 0; l < lsz; l++) {
        const uint cnt = topk_lane_list(x, n, l, lsz, s0, lse, key_min, k, lk, li);
        for (uint i = cnt; i < k; i++) {
            lk[i] = -INFINITY;
            li[i] = INT_MAX;
        }
        m = topk_merge_p(lk, li, k, tk, ti, m);
    }
    topk_write(x, lse, tk, ti, m, k, a[CT_EOS], n, out, out_off, rows, r, a[CT_PICK],
               (__global int *)bufs[a[CT_TOK]], a[CT_TOKO], score, s_off);
}

/* The program's own kinds (products, gates), defined after this file;
 * a: the op's slots, o: a copy of its first. */
static void chain_own(__global const uint *a, const uint *o, const uint k, __global float **bufs);

/* The ticket loop (see the top of this section). */
inline void chain_run(__global float **bufs, __global const uint *P, const uint n_ops, const uint total,
                      const uint base, const uint pos, volatile __global uint *ctr, __local float *red) {
    uint p = 0;
    for (;;) {
        const uint t = atomic_add(&ctr[0], 0u);
        if (t - base >= total) break;
        if (atomic_cmpxchg(&ctr[0], t, t + 1u) != t) continue;
        const uint c = t - base;
        while (p + 1u < n_ops && P[(p + 1u) * CHAIN_W + CF_FIRST] <= c) p++;
        uint o[CHAIN_W];
        for (int f = 0; f < CHAIN_W; f++) o[f] = P[p * CHAIN_W + f];
        while (atomic_add(&ctr[1], 0u) - base < o[CF_FIRST])
            ;
        const uint k = c - o[CF_FIRST];
        if (o[CF_KIND] == CHAIN_ATTN) {
            __global const uint *a = P + p * CHAIN_W;
            const uint lq = a[CA_LQ], nbc = a[CA_NBC], nb = nbc & 255u, b = k % nb, row = k / nb;
            const uint sh = row / lq, i = row - sh * lq;
            /* CHAIN_POS_REL: q_pos0, lk_max and key_len_const relative to pos */
            const uint rel = (nbc & CHAIN_POS_REL) ? pos : 0u;
            const int has_kr = a[CA_KR] != CHAIN_NONE, has_new = a[CA_KN] != CHAIN_NONE;
            const int has_kl = a[CA_KL] != CHAIN_NONE;
            const uint r0 = a[CA_RAD0], r1 = a[CA_RAD1]; /* 16 bits each, branches 0-3 */
            const int8 radii = (int8)((int)(r0 & 0xffffu), (int)(r0 >> 16), (int)(r1 & 0xffffu), (int)(r1 >> 16),
                                      0, 0, 0, 0);
            attn_item(a[CA_NSEQ], lq, a[CA_POS0] + rel, a[CA_LKMAX] + rel, a[CA_GROUP], a[CA_HEADS], a[CA_DH],
                      as_float(a[CA_SCALE]), bufs[a[CA_Q]], a[CA_QO], a[CA_QLD], bufs[a[CA_K]], a[CA_KO], a[CA_KLD],
                      bufs[a[CA_V]], a[CA_VO], a[CA_VLD], a[CA_KVS],
                      (__global const int *)bufs[has_kr ? a[CA_KR] : 0u], a[CA_KRO], a[CA_KRLD], has_kr,
                      bufs[has_new ? a[CA_KN] : 0u], a[CA_KNO], bufs[has_new ? a[CA_VN] : 0u], a[CA_VNO],
                      a[CA_NEWLD], has_new, (__global const int *)bufs[has_kl ? a[CA_KL] : 0u], a[CA_KLO], has_kl,
                      a[CA_KLC] + rel, (int)((nbc >> 8) & 1u), nb, a[CA_KINDS], radii, bufs[a[CA_OUT]],
                      a[CA_OUTO], a[CA_OUTLD], sh, i, b);
        } else if (o[CF_KIND] == CHAIN_EMBED) {
            /* embed's work-items (c, j) in turn, with its expressions (common.cl EMBED_ROWS) */
            const uint rows = o[CE_ROWS], seq_len = o[CE_SEQ], d = o[CE_D], pt_rows = o[CE_PTROWS];
            const uint pos0 = o[CE_POS0] + ((o[CE_FLAGS] & CHAIN_POS_REL) ? pos : 0u);
            const float scale = as_float(o[CE_SCALE]);
            __global const int *tok = (__global const int *)bufs[o[CE_TOK]];
            __global const float *E = bufs[o[CE_E]], *PT = bufs[o[CE_PT]], *qs = bufs[o[CE_QS]];
            __global const char *Q = (__global const char *)bufs[o[CE_E]];
            __global float *out = bufs[o[CE_OUT]];
            const ulong tok_off = o[CE_TOKO], e_off = o[CE_EO], out_off = o[CE_OUTO], pt_off = o[CE_PTO];
            const ulong s_off = o[CE_QSO];
            const int q8 = (o[CE_FLAGS] & CHAIN_EMBED_Q8) != 0u;
            for (uint j = 0; j < seq_len && j < rows; j++)
                for (uint c = 0; c < d; c++) {
                    const uint at = pos0 + j;
                    const float p = at < pt_rows ? PT[pt_off + (ulong)at * d + c] : pos_term(c, d, (float)at);
                    for (uint r = j; r < rows; r += seq_len) {
                        const ulong t = (ulong)tok[tok_off + r];
                        if (q8) /* embed_q8's FETCH */
                            out[out_off + (ulong)r * d + c] = ((float)Q[e_off + t * d + c] * qs[s_off + t]) * scale + p;
                        else
                            out[out_off + (ulong)r * d + c] = (E[e_off + t * d + c]) * scale + p;
                    }
                }
        } else if (o[CF_KIND] == CHAIN_TOPK) {
            chain_topk_row(P + p * CHAIN_W, k, bufs);
        } else if (o[CF_KIND] == CHAIN_LN) {
            const uint d = o[CF_N];
            __global float *out = bufs[o[CF_C]] + o[CF_CO] + k * o[CF_LDC];
            ln_row(bufs[o[CF_A]] + o[CF_AO] + k * o[CF_LDA], bufs[o[CF_R]] + o[CF_RO] + k * o[CF_LDR],
                   (o[CF_FLAGS] & 4u) != 0u, out, d, bufs[o[CF_B]] + o[CF_BO], bufs[o[CF_BIAS]] + o[CF_BIASO],
                   as_float(o[CF_K]), red);
        } else {
            chain_own(P + p * CHAIN_W, o, k, bufs);
        }
        atomic_inc(&ctr[1]);
    }
}

/* A chain kernel: one work-item per work-group, as many groups as the
 * device has compute units (the host launches it). */
#define CHAIN_KERNEL(NAME)                                                                                 \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(                                      \
        CHAIN_BUF_PARAMS, __global const uint *P, const uint p_off, const uint n_ops, const uint total,      \
        const uint base, const uint pos, volatile __global uint *ctr) {                                     \
        __local float red[1];                                                                               \
        __global float *bufs[CHAIN_BUFS] = {CHAIN_BUF_NAMES};                                               \
        chain_run(bufs, P + p_off, n_ops, total, base, pos, ctr, red);                                      \
    }
#endif /* GEMM_CHAIN || I8_CHAIN || Q8_CHAIN */
