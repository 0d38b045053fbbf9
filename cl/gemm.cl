/* gemm.cl — dense fp32 matrix products for the op layer (runtime/ops.c).
 *
 * Kernels:
 *   gemm_nt    C[M,N] = alpha * A[M,K] * B[N,K]^T (+ beta*C) (+ bias) (ReLU)
 *   gemm_nn    C[M,N] = alpha * A[M,K] * B[K,N]   (+ beta*C) (+ bias) (ReLU)
 *   gemm_nt_kgroup  gemm_nt's product, a work-group per column of C (built
 *              with -DGEMM_KG_WG: GPUs' decoding steps, common.cl GEMM_KGROUP)
 *   bias_act   C[M,N] += bias[N] and/or ReLU, in place (epilogue for CLBlast)
 *   gemm_nt_ln O[m,:] = LayerNorm(A[m,:] B^T (+ bias) + R[m,:]) * gamma + beta:
 *              a post-norm sub-layer's last product, residual and norm in
 *              one launch (runtime/ops.c nmt_op_gemm_nt_ln; decoding steps
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
 * flags (gemm_*, bias_act): bit 0 = add bias[n], bit 1 = ReLU.  beta == 0
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
 * -D knobs (defaults; runtime/ops.c takes them from the device's tuning):
 *   GEMM_TM     rows of C per work-item                   (4; 1..8)
 *   GEMM_TN     columns of C per work-item                (4; 1..8, gemm_nn 1..32)
 *   GEMM_VW     vector width: along K (gemm_nt), along N  (4; 1, 2, 4, 8, 16;
 *               (gemm_nn, must divide GEMM_TN, else 1)     gemm_nn: divides TN)
 *   GEMM_MFAST  1: the blocks in one dimension, M fastest  (0)
 *   GEMM_LN_WG  gemm_nt_ln: the largest local size the host may launch it
 *               with (256; power of two)
 *   GEMM_CHAIN  defined: gemm_chain is compiled (the NT m2 and m16 classes
 *               on CPU devices)
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
    for (uint k = KV; k < K; k++) {
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
    if (flags & GEMM_FLAG_RELU) v = fmax(v, 0.0f);
    *c = v;
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
        for (uint k = KV; k < K; k++) acc = ar[k] * br[j][k] + acc;
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

#ifdef GEMM_CHAIN /* the NT m2 and m16 classes' programs on CPUs (runtime/ops.c nmt_ops_gemm_opts) */
/* gemm_chain: a chain of few-row products, layer norms, attentions and
 * embeddings in one launch (runtime/ops_chain.c records them; CPU devices,
 * decoding steps).
 *
 * The ops are CHAIN_W uints each at P + p_off (a block of the session's
 * descriptor buffer, written once and reused while the recorded ops repeat;
 * an attention's step positions are relative to the argument pos where
 * CHAIN_POS_REL says so), their buffers CHAIN_BUFS arguments named by
 * slot.  An op is cut into chunks:
 * a product (CHAIN_PROD) into blocks of CHAIN_COLS columns of all its M
 * rows, a norm (CHAIN_LN) into its rows.  The chunks of the whole chain are
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
 * scalar tail; then + bias, ReLU; or + bias + R as gemm_nt_ln), a norm's
 * ln_row with one work-item (layernorm and gemm_nt_ln at local size 1), an
 * attention's attn_item (attn_fused's work-item), an embedding's embed's
 * expressions, so the chain gives the bits of the launches it replaces. */
#define CHAIN_W 20
#define CHAIN_BUFS 64
#define CHAIN_COLS 64
#define CHAIN_PROD 0u
#define CHAIN_LN 1u
#define CHAIN_ATTN 2u
#define CHAIN_EMBED 3u
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
/* An embedding (embed's work-items, all in one chunk): */
enum { CE_KIND, CE_TOK, CE_TOKO, CE_ROWS, CE_SEQ, CE_POS0, CE_E, CE_EO, CE_D, CE_SCALE, CE_OUT, CE_OUTO, CE_PT,
       CE_PTO, CE_PTROWS, CE_FLAGS /* CHAIN_POS_REL */, CE_FIRST = 19 };

inline uint chain_chunks(const uint *o) {
    return o[CF_KIND] == CHAIN_LN ? o[CF_M] : (o[CF_N] + CHAIN_COLS - 1u) / CHAIN_COLS;
}

/* CHAIN_TMR rows m0.. of a product's columns n0 .. nend - 1 (rows past M
 * load row M - 1 and are not stored), GEMM_TN columns at a time sharing
 * the loads of B. */
#define CHAIN_ROWS(CHAIN_TMR)                                                                         \
    for (uint n0 = c * CHAIN_COLS; n0 < nend; n0 += GEMM_TN) {                                        \
        __global const float *br[GEMM_TN];                                                            \
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
            _Pragma("unroll") for (int j = 0; j < GEMM_TN; j++) b_[j] = VLOAD(br[j] + k);             \
            _Pragma("unroll") for (int i = 0; i < CHAIN_TMR; i++) {                                   \
                const VFLOAT a = VLOAD(ar[i] + k);                                                    \
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
            __global const float *r = R + o[CF_RO] + m * o[CF_LDR];                                   \
            for (int j = 0; j < GEMM_TN; j++) {                                                       \
                const uint n = n0 + (uint)j;                                                          \
                if (n >= nend) break;                                                                 \
                float v = acc[i][j];                                                                  \
                if (flags & 1u) v += bias[o[CF_BIASO] + n];                                           \
                if (flags & 4u) v += r[n];                                                            \
                if (flags & 2u) v = fmax(v, 0.0f);                                                    \
                crow[n] = v;                                                                          \
            }                                                                                         \
        }                                                                                             \
    }

/* A product with a residual (gemm_nt_ln's product, recorded apart from its
 * norm): gemm_nt_ln's own blocks, row by row. */
inline void chain_prod_res(const uint *o, uint c, __global const float *A, __global const float *B,
                           __global float *C, __global const float *R, __global const float *bias) {
    const uint N = o[CF_N], nend = min(N, (c + 1u) * CHAIN_COLS);
    for (uint m = 0; m < o[CF_M]; m++)
        for (uint n0 = c * CHAIN_COLS; n0 < nend; n0 += GEMM_TN)
            nt_res_block(A + o[CF_AO] + m * o[CF_LDA], B, o[CF_BO], o[CF_LDB], n0, N, nend, o[CF_K], bias,
                         o[CF_BIASO], o[CF_FLAGS] & 1u, R + o[CF_RO] + m * o[CF_LDR], C + o[CF_CO] + m * o[CF_LDC]);
}

inline void chain_prod(const uint *o, uint c, __global const float *A, __global const float *B,
                       __global float *C, __global const float *R, __global const float *bias) {
    const uint M = o[CF_M], N = o[CF_N], K = o[CF_K], flags = o[CF_FLAGS];
    const uint KV = K - K % GEMM_VW, nend = min(N, (c + 1u) * CHAIN_COLS);
    const uint m0 = 0;
    if (flags & 4u) {
        chain_prod_res(o, c, A, B, C, R, bias);
    } else if (M == 1u) {
        CHAIN_ROWS(1)
    } else if (M == 2u) {
        CHAIN_ROWS(2)
    } else {
        CHAIN_ROWS(4) /* the host records at most 4 rows */
    }
}

/* gemm_chain's buffer parameters b0 .. b63 and the array of them */
#define CHAIN_BUF_PARAMS                                                                               \
    __global float *b0, __global float *b1, __global float *b2, __global float *b3, __global float *b4, __global float *b5, \
    __global float *b6, __global float *b7, __global float *b8, __global float *b9, __global float *b10, __global float *b11, \
    __global float *b12, __global float *b13, __global float *b14, __global float *b15, __global float *b16, __global float *b17, \
    __global float *b18, __global float *b19, __global float *b20, __global float *b21, __global float *b22, __global float *b23, \
    __global float *b24, __global float *b25, __global float *b26, __global float *b27, __global float *b28, __global float *b29, \
    __global float *b30, __global float *b31, __global float *b32, __global float *b33, __global float *b34, __global float *b35, \
    __global float *b36, __global float *b37, __global float *b38, __global float *b39, __global float *b40, __global float *b41, \
    __global float *b42, __global float *b43, __global float *b44, __global float *b45, __global float *b46, __global float *b47, \
    __global float *b48, __global float *b49, __global float *b50, __global float *b51, __global float *b52, __global float *b53, \
    __global float *b54, __global float *b55, __global float *b56, __global float *b57, __global float *b58, __global float *b59, \
    __global float *b60, __global float *b61, __global float *b62, __global float *b63
#define CHAIN_BUF_NAMES                                                                                \
    b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, \
    b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29, b30, b31, \
    b32, b33, b34, b35, b36, b37, b38, b39, b40, b41, b42, b43, b44, b45, b46, b47, \
    b48, b49, b50, b51, b52, b53, b54, b55, b56, b57, b58, b59, b60, b61, b62, b63

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void gemm_chain(CHAIN_BUF_PARAMS, __global const uint *P, const uint p_off, const uint n_ops, const uint total,
                const uint base, const uint pos, volatile __global uint *ctr) {
    __local float red[1];
    __global float *bufs[CHAIN_BUFS] = {CHAIN_BUF_NAMES};
    P += p_off;
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
            __global const float *E = bufs[o[CE_E]], *PT = bufs[o[CE_PT]];
            __global float *out = bufs[o[CE_OUT]];
            const ulong tok_off = o[CE_TOKO], e_off = o[CE_EO], out_off = o[CE_OUTO], pt_off = o[CE_PTO];
            for (uint j = 0; j < seq_len && j < rows; j++)
                for (uint c = 0; c < d; c++) {
                    const uint at = pos0 + j;
                    const float p = at < pt_rows ? PT[pt_off + (ulong)at * d + c] : pos_term(c, d, (float)at);
                    for (uint r = j; r < rows; r += seq_len) {
                        const ulong t = (ulong)tok[tok_off + r];
                        out[out_off + (ulong)r * d + c] = (E[e_off + t * d + c]) * scale + p;
                    }
                }
        } else if (o[CF_KIND] == CHAIN_PROD) {
            chain_prod(o, k, bufs[o[CF_A]], bufs[o[CF_B]], bufs[o[CF_C]], bufs[o[CF_R]], bufs[o[CF_BIAS]]);
        } else {
            const uint d = o[CF_N];
            __global float *out = bufs[o[CF_C]] + o[CF_CO] + k * o[CF_LDC];
            ln_row(bufs[o[CF_A]] + o[CF_AO] + k * o[CF_LDA], bufs[o[CF_R]] + o[CF_RO] + k * o[CF_LDR],
                   (o[CF_FLAGS] & 4u) != 0u, out, d, bufs[o[CF_B]] + o[CF_BO], bufs[o[CF_BIAS]] + o[CF_BIASO],
                   as_float(o[CF_K]), red);
        }
        atomic_inc(&ctr[1]);
    }
}
#endif /* GEMM_CHAIN */
