/* SPDX-License-Identifier: MIT */
/* chain.cl — the chained few-row ops: the text every chain kernel runs.
 * The device layer puts it between cl/common.cl and the program's own
 * source for the programs that have a chain kernel, those whose own text
 * has a line beginning with CHAIN_KERNEL( (gemm, gemm_i8, gemm_q8:
 * runtime/device/device_program.c, nmt_program_has_chain), and for no other, so
 * the rest of cl/ neither compiles nor hashes it.
 *
 * Its first part, the descriptor layout (to CHAIN_LAYOUT's end), is plain
 * C that runtime/ops/ops_chain.c includes as well: the host writes the fields
 * the kernels read from this one definition. */

/* Chained few-row ops: a chain of few-row products, layer norms,
 * attentions, embeddings and HySAN gates in one launch (runtime/ops/ops_chain.c
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
 * all its M rows, a norm (CHAIN_LN), a gate (CHAIN_GATE), a quantization
 * (CHAIN_QUANT) and a top-k (CHAIN_TOPK) into their rows, an attention
 * into its work-items, a beam step (CHAIN_BEAM) into its sentences; an
 * embedding and a K|V table's permutation (CHAIN_KV_PERMUTE) are one chunk
 * each.  The chunks of the whole chain are
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
#ifndef CHAIN_LAYOUT
#define CHAIN_LAYOUT
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
#define CHAIN_BEAM 8u
#define CHAIN_KV_PERMUTE 9u
#define CHAIN_NONE 0xffffffffu
#define CHAIN_POS_REL (1u << 9) /* in CA_NBC */
/* op fields (runtime/ops/ops_chain.c writes them): kind, M, N, K, then
 * (slot, offset, ld) of A, B, C, R; the bias (slot, offset); flags (1 bias,
 * 2 ReLU, 4 residual, 8 GELU, 16 swish); the op's first chunk.  A norm: M
 * rows of N = d, A = x, R = res, C = out (each with its row stride), B =
 * gamma, bias = beta, K = eps's bits. */
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
#define CHAIN_TOPK_LANES 256u /* the largest CT_LSZ (the host checks reduce_wg) */
#define CHAIN_TOPK_MAX 17u     /* the largest CT_K and CB_KC: the chained top-k's and beam step's arrays */
#define CHAIN_BEAM_MAX 8u      /* the largest CB_K (common.cl's BEAM_MAX) */
/* A gate (gemm_i8_gate's operands, one chunk per row) takes two slots: */
enum { CG_KIND, CG_ROWS, CG_D, CG_DR, CG_X, CG_XO, CG_LDX, CG_W1, CG_W1O, CG_S1, CG_S1O, CG_B1, CG_B1O, CG_W2,
       CG_W2O, CG_S2, CG_S2O, CG_B2, CG_B2O, CG_FIRST,
       CG_KIND2, CG_OUT, CG_OUTO, CG_LDO, CG_FLAGS, CG_FIRST2 = 2 * CHAIN_W - 1 };
/* A beam step (beam_advance's operands, one chunk per sentence; t relative
 * to the launch's pos where CB_FLAGS has CHAIN_POS_REL): */
enum { CB_KIND, CB_CAND, CB_CANDO, CB_ROWS, CB_KC /* candidates a row */, CB_K /* the beam */, CB_V, CB_EOS, CB_T,
       CB_MINLEN, CB_ST, CB_STO, CB_TOK, CB_TOKO, CB_SC, CB_SCO, CB_BACK, CB_BACKO, CB_FLAGS, CB_FIRST };
/* The K|V table's permutation after it (kv_table_permute's operands, every
 * position in one chunk, CK_ROWS <= CHAIN_MAX_ROWS; the position count
 * relative to pos where CK_FLAGS has CHAIN_POS_REL): */
enum { CK_KIND, CK_TAB, CK_TABO, CK_LD, CK_POSITIONS, CK_BACK, CK_BACKO, CK_ROWS, CK_FLAGS, CK_FIRST = 19 };
#define CHAIN_MAX_ROWS 4u /* the most rows an op may have */
/* a product's flags (CF_FLAGS) */
#define CHAIN_FLAG_BIAS 1u
#define CHAIN_FLAG_RELU 2u
#define CHAIN_FLAG_RES 4u
#define CHAIN_FLAG_GELU 8u  /* the activations: common.cl's ACT_FLAG_* bits */
#define CHAIN_FLAG_SWISH 16u
#endif /* CHAIN_LAYOUT */

#if defined(__OPENCL_VERSION__) && (defined(GEMM_CHAIN) || defined(I8_CHAIN) || defined(Q8_CHAIN))
#if TOPK_MAX < CHAIN_TOPK_MAX /* common.cl's TOPK_BOUND / TOPK_MERGE size their lists by it */
#error "TOPK_MAX below CHAIN_TOPK_MAX"
#endif
#if CAND_MAX < CHAIN_TOPK_MAX || BEAM_MAX < CHAIN_BEAM_MAX /* common.cl's beam_sentence's arrays */
#error "beam_sentence's arrays below CHAIN_TOPK_MAX or CHAIN_BEAM_MAX"
#endif
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
        K_TAIL_IN_ORDER for (uint k = KV; k < K; k++)                                                 \
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
                if (flags & CHAIN_FLAG_BIAS) v += bias[o[CF_BIASO] + n];                                           \
                crow[n] = act_flags(v, (int)flags);                                                   \
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
    float tk[CHAIN_TOPK_MAX], lk[CHAIN_TOPK_MAX];
    int ti[CHAIN_TOPK_MAX], li[CHAIN_TOPK_MAX];
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

/* CHAIN_KV_PERMUTE's chunk: kv_table_permute's work, every position in
 * turn: entry (p, r) = the old entry (p, back[r]) for r < rows.  The old
 * entries this overwrites are kept first, so an entry r >= rows (never
 * written) is read where it is. */
inline void chain_kv_permute(const uint *o, const uint pos, __global float **bufs) {
    __global int *tab = (__global int *)bufs[o[CK_TAB]] + o[CK_TABO];
    __global const int *back = (__global const int *)bufs[o[CK_BACK]] + o[CK_BACKO];
    const uint ld = o[CK_LD], rows = o[CK_ROWS];
    const uint positions = o[CK_POSITIONS] + ((o[CK_FLAGS] & CHAIN_POS_REL) ? pos : 0u);
    for (uint p = 0; p < positions; p++) {
        __global int *e = tab + (ulong)p * ld;
        int old[CHAIN_MAX_ROWS];
        for (uint r = 0; r < rows; r++) old[r] = e[r];
        for (uint r = 0; r < rows; r++) {
            const uint b = (uint)back[r];
            e[r] = b < rows ? old[b] : e[b];
        }
    }
}

/* The program's own kinds (products, gates), defined after this file;
 * a: the op's slots, o: a copy of its first. */
static void chain_own(__global const uint *a, const uint *o, const uint k, __global float **bufs);

/* The ticket loop (see the top of this section). */
inline void chain_run(__global float **bufs, __global const uint *P, const uint n_ops, const uint total,
                      const uint base, const uint pos, volatile __global uint *ctr) {
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
        } else if (o[CF_KIND] == CHAIN_BEAM) { /* sentence k */
            beam_sentence((__global const uint *)bufs[o[CB_CAND]], o[CB_CANDO], o[CB_ROWS], o[CB_KC], o[CB_K], o[CB_V],
                          o[CB_EOS], o[CB_T] + ((o[CB_FLAGS] & CHAIN_POS_REL) ? pos : 0u), o[CB_MINLEN],
                          (__global int *)bufs[o[CB_ST]], o[CB_STO], (__global int *)bufs[o[CB_TOK]], o[CB_TOKO],
                          bufs[o[CB_SC]], o[CB_SCO], (__global int *)bufs[o[CB_BACK]], o[CB_BACKO], k);
        } else if (o[CF_KIND] == CHAIN_KV_PERMUTE) {
            chain_kv_permute(o, pos, bufs);
        } else if (o[CF_KIND] == CHAIN_LN) {
            const uint d = o[CF_N];
            __global float *out = bufs[o[CF_C]] + o[CF_CO] + k * o[CF_LDC];
            ln_row_item(bufs[o[CF_A]] + o[CF_AO] + k * o[CF_LDA], bufs[o[CF_R]] + o[CF_RO] + k * o[CF_LDR],
                        (o[CF_FLAGS] & CHAIN_FLAG_RES) != 0u, out, d, bufs[o[CF_B]] + o[CF_BO],
                        bufs[o[CF_BIAS]] + o[CF_BIASO], as_float(o[CF_K]));
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
        __global float *bufs[CHAIN_BUFS] = {CHAIN_BUF_NAMES};                                               \
        chain_run(bufs, P + p_off, n_ops, total, base, pos, ctr);                                           \
    }
#endif /* __OPENCL_VERSION__ && (GEMM_CHAIN || I8_CHAIN || Q8_CHAIN) */
