/* SPDX-License-Identifier: MIT */
/* ops_chain.c — few-row fp32 products, layer norms, attentions and
 * embeddings chained into one launch (ops.h, nmt_ops_chain_*; the kernel is
 * cl/gemm.cl gemm_chain).
 *
 * Why: on a CPU OpenCL runtime a decoding step of one row is a chain of
 * launches of a few microseconds each.  PoCL's worker threads sleep between
 * commands, so each launch pays the runtime's bookkeeping and runs on the
 * one thread that took it (docs/PERFORMANCE.md, "One launch for a decoding
 * step").  Recording the ops between two other launches and running them
 * as one launch whose work-groups take the chunks by ticket keeps both the
 * launches and the idle cores out of the step.
 *
 * Recording is transparent to the callers: nmt_op_gemm, nmt_op_gemm_nt_ln,
 * nmt_op_embed, nmt_op_layernorm and nmt_op_attention record where they
 * may and return; the device's settle hook (device.h) enqueues the chain
 * before anything else reaches the queue. */
#include "common.h"
#include "kernel_args.h"
#include "ops_internal.h"

#include <string.h>

/* the descriptor layout: the op kinds, each kind's fields, the flags, as
 * the chain kernels read them (cl/chain.cl's first part is plain C) */
#include "../../cl/chain.cl"

/* ops.h's capacities are the kernels' */
_Static_assert(NMT_OPS_CHAIN_W == CHAIN_W && NMT_OPS_CHAIN_BUFS == CHAIN_BUFS && NMT_OPS_CHAIN_COLS == CHAIN_COLS &&
                   NMT_OPS_CHAIN_QS_ROWS == CHAIN_QS_ROWS,
               "runtime/ops/ops.h NMT_OPS_CHAIN_* against cl/chain.cl");
_Static_assert(CHAIN_FLAG_RELU == 2u && CHAIN_FLAG_GELU == 8u && CHAIN_FLAG_SWISH == 16u,
               "cl/chain.cl's activation flags against nmt_ops_act_flags (ops_internal.h)");
_Static_assert(NMT_OPS_CHAIN_ROWS == CHAIN_MAX_ROWS, "runtime/ops/ops.h NMT_OPS_CHAIN_ROWS against cl/chain.cl");
_Static_assert(NMT_TOPK_MAX <= CHAIN_TOPK_MAX, "a chained top-k's k must fit cl/chain.cl's arrays");
_Static_assert(NMT_BEAM_DEVICE_MAX <= CHAIN_BEAM_MAX, "a device beam step's K must fit cl/common.cl's arrays");
_Static_assert(CF_FIRST == CHAIN_W - 1 && CA_FIRST2 == 2 * CHAIN_W - 1 && CE_FIRST == CHAIN_W - 1 &&
                   CT_FIRST == CHAIN_W - 1 && CG_FIRST2 == 2 * CHAIN_W - 1 && CB_FIRST == CHAIN_W - 1 &&
                   CK_FIRST == CHAIN_W - 1,
               "an op's first chunk is its last slot's last field");

static nmt_status settle_cb(void *ctx) { return nmt_ops_chain_flush((nmt_ops *)ctx); }

nmt_status nmt_ops_chain_enable(nmt_ops *ops, int on) {
    if (ops == NULL || ops->dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->chain_n) NMT_TRY(nmt_ops_chain_flush(ops));
    ops->chain_on = 0;
    /* gemm_chain's classes: built, or (a session's ops) to be built at first use */
    int chain_classes = ops->k_chain[0] != NULL || ops->k_chain[1] != NULL;
    for (int c = 0; c < 2 && ops->lazy_nt; c++)
        chain_classes |= ops->cfg[NMT_GOP_NT][c].provider == NMT_GEMM_OWN && !ops->cfg[NMT_GOP_NT][c].kgroup;
    if (!on || !ops->dev->info.is_cpu || ops->norm_wg != 1 || nmt_env_flag("NMT_EDGE_NO_PRODUCT_CHAIN") ||
        !chain_classes)
        return NMT_OK;
    /* the chain kernels' arguments: 96 buffers and 7 more (an embedded-profile
     * device may take as few as 256 bytes) */
    size_t param_bytes = 0;
    if (clGetDeviceInfo(ops->dev->device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof param_bytes, &param_bytes, NULL) !=
            CL_SUCCESS ||
        param_bytes < (NMT_OPS_CHAIN_BUFS + 2) * sizeof(cl_mem) + 5 * sizeof(cl_uint))
        return NMT_OK;
    if (ops->chain_ctr == NULL) {
        const cl_uint zero[2] = {0, 0};
        NMT_TRY(nmt_device_buffer(ops->dev, sizeof zero, zero, &ops->chain_ctr));
        ops->chain_base = 0;
    }
    if (ops->chain_desc == NULL) {
        NMT_TRY(nmt_device_buffer(ops->dev, sizeof ops->chain_cache, NULL, &ops->chain_desc));
        memset(ops->chain_cache_n, 0, sizeof ops->chain_cache_n);
        ops->chain_cache_next = 0;
    }
    ops->chain_groups = ops->dev->info.compute_units ? ops->dev->info.compute_units : 1;
    ops->chain_on = 1;
    return NMT_OK;
}

/* An attention's step positions relative to the chain's latest one (pos,
 * returned): the recorded ops of a decoding step then read the same from
 * step to step, and the descriptor block written at one step serves the
 * next ones. */
static uint32_t relative_positions(nmt_ops *ops) {
    cl_uint *v = ops->chain_v;
    uint32_t pos = 0;
    for (uint32_t i = 0; i < ops->chain_n; i++) {
        const cl_uint *o = v + (size_t)i * NMT_OPS_CHAIN_W;
        if (o[CA_KIND] == CHAIN_ATTN) pos = NMT_MAX(pos, o[CA_POS0]);
        if (o[CE_KIND] == CHAIN_EMBED) pos = NMT_MAX(pos, o[CE_POS0]);
    }
    if (pos == 0) return 0;
    for (uint32_t i = 0; i < ops->chain_n; i++) {
        cl_uint *o = v + (size_t)i * NMT_OPS_CHAIN_W;
        if (o[CE_KIND] == CHAIN_EMBED && o[CE_POS0] == pos) {
            o[CE_POS0] = 0;
            o[CE_FLAGS] |= CHAIN_POS_REL;
        }
        if (o[CB_KIND] == CHAIN_BEAM) { /* the step t: pos in a decoding step */
            o[CB_T] -= pos;               /* modulo 2^32, as the kernel adds it back */
            o[CB_FLAGS] |= CHAIN_POS_REL;
        }
        if (o[CK_KIND] == CHAIN_KV_PERMUTE) { /* positions t + 1 */
            o[CK_POSITIONS] -= pos;
            o[CK_FLAGS] |= CHAIN_POS_REL;
        }
        if (o[CA_KIND] != CHAIN_ATTN || o[CA_POS0] != pos) continue;
        o[CA_POS0] -= pos;
        o[CA_LKMAX] -= pos; /* modulo 2^32: the kernel adds pos back */
        o[CA_KLC] -= pos;
        o[CA_NBC] |= CHAIN_POS_REL;
    }
    return pos;
}

/* The descriptor block holding the recorded ops: one already written with
 * the same contents, else the next in turn, written now (a blocking write:
 * the in-order queue runs it after every launch that may still read the
 * block's old contents). */
static nmt_status descriptor_block(nmt_ops *ops, uint32_t *block) {
    const size_t bytes = sizeof(cl_uint) * NMT_OPS_CHAIN_W * ops->chain_n;
    for (uint32_t e = 0; e < NMT_OPS_CHAIN_CACHE; e++)
        if (ops->chain_cache_n[e] == ops->chain_n && memcmp(ops->chain_cache[e], ops->chain_v, bytes) == 0) {
            *block = e;
            return NMT_OK;
        }
    const uint32_t e = ops->chain_cache_next;
    ops->chain_cache_next = (e + 1) % NMT_OPS_CHAIN_CACHE;
    ops->chain_cache_n[e] = 0; /* until the write succeeds */
    NMT_TRY(nmt_device_write(ops->dev, ops->chain_desc, sizeof ops->chain_cache[0] * e, bytes, ops->chain_v));
    memcpy(ops->chain_cache[e], ops->chain_v, bytes);
    ops->chain_cache_n[e] = ops->chain_n;
    ops->n_chain_writes++;
    *block = e;
    return NMT_OK;
}

/* The chain kernel of class cls (NULL: not built). */
static cl_kernel class_kernel(const nmt_ops *ops, uint32_t cls) {
    return cls == NMT_OPS_CHAIN_I8 ? ops->k_i8_chain
           : cls >= NMT_OPS_CHAIN_Q8 ? ops->k_q8_chain[cls - NMT_OPS_CHAIN_Q8]
                                     : ops->k_chain[cls];
}

nmt_status nmt_ops_chain_flush(nmt_ops *ops) {
    if (ops == NULL) return NMT_ERR_INVALID_ARGUMENT;
    nmt_device *dev = ops->dev;
    if (dev->settle_ctx == ops) dev->settle = NULL;
    if (ops->chain_n == 0) return NMT_OK;
    const uint32_t n = ops->chain_n, total = ops->chain_total, pos = relative_positions(ops);
    uint32_t block = 0;
    nmt_status st = descriptor_block(ops, &block);
    ops->chain_n = 0; /* recorded work is enqueued once, whatever happens below */
    ops->chain_total = 0;
    NMT_TRY(st);
    const uint32_t cls = ops->chain_cls;
    cl_kernel k = class_kernel(ops, cls);
    args a = args_begin(k);
    for (uint32_t i = 0; i < NMT_OPS_CHAIN_BUFS; i++)
        arg_mem(&a, ops->chain_bufs[i < ops->chain_nbufs ? i : 0]);
    arg_mem(&a, ops->chain_desc);
    arg_u32(&a, block * NMT_OPS_CHAIN_OPS * NMT_OPS_CHAIN_W);
    arg_u32(&a, n);
    arg_u32(&a, total);
    arg_u32(&a, ops->chain_base);
    arg_u32(&a, pos);
    arg_mem(&a, ops->chain_ctr);
    ops->chain_nbufs = 0;
    const char *kname = cls == NMT_OPS_CHAIN_I8 ? "gemm_i8_chain" : cls >= NMT_OPS_CHAIN_Q8 ? "gemm_q8_chain" : "gemm_chain";
    NMT_TRY(args_end(dev, &a, kname));
    const size_t lws = 1, gws = ops->chain_groups;
    NMT_TRY(nmt_enqueue(dev, k, 1, &gws, &lws, kname));
    ops->chain_base += total; /* modulo 2^32, as the kernel takes it */
    ops->n_chains++;
    ops->n_chained += n;
    return NMT_OK;
}

/* Room for n_ops more ops of class cls using the buffers mems (NULL
 * entries ignored): flushes what is recorded when it is another class or
 * full, and another session's recorded work on the device first. */
static nmt_status reserve(nmt_ops *ops, uint32_t cls, uint32_t n_ops, const cl_mem *mems, int n_mems) {
    nmt_device *dev = ops->dev;
    if (dev->settle != NULL && dev->settle_ctx != ops) NMT_TRY(nmt_device_settle(dev));
    uint32_t fresh = 0;
    for (int i = 0; i < n_mems; i++) {
        int seen = mems[i] == NULL;
        for (uint32_t j = 0; j < ops->chain_nbufs && !seen; j++) seen = ops->chain_bufs[j] == mems[i];
        for (int j = 0; j < i && !seen; j++) seen = mems[j] == mems[i];
        fresh += !seen;
    }
    if (ops->chain_n > 0 && (cls != ops->chain_cls || ops->chain_n + n_ops > NMT_OPS_CHAIN_OPS ||
                             ops->chain_nbufs + fresh > NMT_OPS_CHAIN_BUFS))
        NMT_TRY(nmt_ops_chain_flush(ops));
    if (ops->chain_n == 0) {
        ops->chain_cls = cls;
        ops->chain_nbufs = 0;
        ops->chain_total = 0;
    }
    return NMT_OK;
}

/* Room for an op of n_slots slots (reserve), zeroed at *o. */
static nmt_status open_op(nmt_ops *ops, uint32_t cls, uint32_t n_slots, const cl_mem *mems, int n_mems, cl_uint **o) {
    NMT_TRY(reserve(ops, cls, n_slots, mems, n_mems));
    *o = ops->chain_v + (size_t)ops->chain_n * NMT_OPS_CHAIN_W;
    memset(*o, 0, sizeof(cl_uint) * n_slots * NMT_OPS_CHAIN_W);
    return NMT_OK;
}

/* The kernel takes offsets as 32-bit uints. */
static int offsets_fit(const nmt_buf *b, int n) {
    for (int i = 0; i < n; i++)
        if (b[i].off > UINT32_MAX) return 0;
    return 1;
}

static cl_uint slot(nmt_ops *ops, cl_mem m) {
    for (uint32_t j = 0; j < ops->chain_nbufs; j++)
        if (ops->chain_bufs[j] == m) return j;
    ops->chain_bufs[ops->chain_nbufs] = m;
    return ops->chain_nbufs++;
}

/* o[at], o[at + 1]: buffer b's slot and offset; absent (optional), the
 * slot stand_in and offset 0. */
static void put_buf(nmt_ops *ops, cl_uint *o, int at, nmt_buf b) {
    o[at] = slot(ops, b.mem);
    o[at + 1] = (cl_uint)b.off;
}

static void put_opt(nmt_ops *ops, cl_uint *o, int at, nmt_buf b, cl_uint stand_in) {
    o[at] = b.mem ? slot(ops, b.mem) : stand_in;
    o[at + 1] = b.mem ? (cl_uint)b.off : 0u;
}

/* The op just written takes `slots` slots and `chunks` tickets; the
 * device now has recorded work. */
static void commit(nmt_ops *ops, uint32_t slots, uint32_t chunks) {
    ops->chain_total += chunks;
    ops->chain_n += slots;
    ops->dev->settle = settle_cb;
    ops->dev->settle_ctx = ops;
}

/* Record a product or a norm (R and bias may be absent); mems: the
 * buffers it names. */
static nmt_status push(nmt_ops *ops, uint32_t cls, const cl_mem *mems, cl_uint kind, uint32_t M, uint32_t N,
                       cl_uint K, nmt_buf A, uint32_t lda, nmt_buf B, uint32_t ldb, nmt_buf C, uint32_t ldc, nmt_buf R,
                       uint32_t ldr, nmt_buf bias, cl_uint flags, size_t sq_off) {
    cl_uint *o;
    const int i8 = kind == CHAIN_I8; /* mems[5]: the scales */
    NMT_TRY(open_op(ops, cls, i8 ? 2 : 1, mems, i8 ? 6 : 5, &o));
    o[CF_KIND] = kind;
    o[CF_M] = M;
    o[CF_N] = N;
    o[CF_K] = K;
    put_buf(ops, o, CF_A, A);
    o[CF_LDA] = lda;
    put_buf(ops, o, CF_B, B);
    o[CF_LDB] = ldb;
    put_buf(ops, o, CF_C, C);
    o[CF_LDC] = ldc;
    put_opt(ops, o, CF_R, R, o[CF_A]); /* never read without its flag */
    o[CF_LDR] = ldr;
    put_opt(ops, o, CF_BIAS, bias, o[CF_A]);
    o[CF_FLAGS] = flags;
    o[CF_FIRST] = ops->chain_total;
    const uint32_t chunks =
        kind == CHAIN_LN || kind == CHAIN_QUANT ? M : (N + NMT_OPS_CHAIN_COLS - 1) / NMT_OPS_CHAIN_COLS;
    if (kind == CHAIN_I8) { /* the second slot: the weights' scales (the caller's last mem) */
        o[CI_KIND2] = CHAIN_NONE;
        o[CI_SQ] = slot(ops, mems[5]);
        o[CI_SQO] = (cl_uint)sq_off;
        o[CI_FIRST2] = ops->chain_total + chunks; /* the ticket scan passes over it */
    }
    commit(ops, kind == CHAIN_I8 ? 2 : 1, chunks);
    return NMT_OK;
}

static cl_uint f32_bits(float f) {
    cl_uint u;
    memcpy(&u, &f, sizeof u);
    return u;
}

nmt_status nmt_ops_chain_prod(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda,
                              nmt_buf B, uint32_t ldb, nmt_buf bias, nmt_buf C, uint32_t ldc, nmt_buf R,
                              uint32_t ldr, int relu, int *taken) {
    *taken = 0;
    const nmt_gemm_class g = nmt_gemm_class_of(M);
    if (!ops->chain_on || M == 0 || M > NMT_OPS_CHAIN_ROWS || N == 0 || K == 0 || g == NMT_GCLASS_BIG) return NMT_OK;
    const nmt_gemm_class cls = nmt_ops_chain_host(ops, NMT_GOP_NT, g);
    if (ops->k_chain[cls] == NULL) return NMT_OK;
    const nmt_gemm_cfg *cfg = &ops->cfg[NMT_GOP_NT][g];
    if (cfg->provider != NMT_GEMM_OWN || cfg->kgroup) return NMT_OK;
    const nmt_buf bufs[5] = {A, B, C, R, bias};
    if (!offsets_fit(bufs, 5)) return NMT_OK;
    const cl_mem mems[5] = {A.mem, B.mem, C.mem, R.mem, bias.mem};
    const cl_uint flags = (bias.mem ? CHAIN_FLAG_BIAS : 0u) | (cl_uint)nmt_ops_act_flags(relu) |
                          (R.mem ? CHAIN_FLAG_RES : 0u);
    NMT_TRY(push(ops, (uint32_t)cls, mems, CHAIN_PROD, M, N, K, A, lda, B, ldb, C, ldc, R, ldr, bias, flags, 0));
    *taken = 1;
    return NMT_OK;
}

nmt_status nmt_ops_chain_ln(nmt_ops *ops, uint32_t rows, uint32_t d, nmt_buf x, uint32_t ldx, nmt_buf res,
                            uint32_t ldr, nmt_buf out, uint32_t ldo, nmt_buf gamma, nmt_buf beta, float eps,
                            int *taken) {
    *taken = 0;
    /* norms and attentions join a chain a product began: between launches
     * of other kinds (int8 products, say) they launch as before */
    if (!ops->chain_on || ops->chain_n == 0 || rows == 0 || rows > NMT_OPS_CHAIN_ROWS || d == 0 || ops->norm_wg != 1)
        return NMT_OK;
    const uint64_t lim = UINT32_MAX;
    if ((uint64_t)x.off + (uint64_t)rows * ldx > lim || (uint64_t)out.off + (uint64_t)rows * ldo > lim ||
        (res.mem && (uint64_t)res.off + (uint64_t)rows * ldr > lim) || (uint64_t)gamma.off + d > lim ||
        (uint64_t)beta.off + d > lim)
        return NMT_OK;
    const uint32_t cls = ops->chain_cls; /* a norm's bits do not depend on the class */
    const cl_mem mems[5] = {x.mem, res.mem, out.mem, gamma.mem, beta.mem};
    NMT_TRY(push(ops, cls, mems, CHAIN_LN, rows, d, f32_bits(eps), x, ldx, gamma, 0, out, ldo, res, ldr, beta,
                 res.mem ? CHAIN_FLAG_RES : 0u, 0));
    *taken = 1;
    return NMT_OK;
}

nmt_status nmt_ops_chain_attn(nmt_ops *ops, const nmt_attn_args *p, float scale, cl_uint kinds, const cl_int *radii,
                              int *taken) {
    *taken = 0;
    if (!ops->chain_on || ops->chain_n == 0 || (uint64_t)p->n_seq * p->lq > NMT_OPS_CHAIN_ROWS || p->n_branches > 4)
        return NMT_OK;
    for (uint32_t b = 0; b < p->n_branches; b++)
        if (radii[b] < 0 || radii[b] > 0xffff) return NMT_OK;
    const nmt_buf bufs[8] = {p->q, p->k, p->v, p->kv_row, p->k_new, p->v_new, p->key_len, p->out};
    if (!offsets_fit(bufs, 8) || p->kv_seq_stride > UINT32_MAX) return NMT_OK;
    cl_mem mems[8];
    for (int i = 0; i < 8; i++) mems[i] = bufs[i].mem;
    cl_uint *o;
    NMT_TRY(open_op(ops, ops->chain_cls, 2, mems, 8, &o));
    const uint32_t chunks = p->n_seq * p->n_heads * p->lq * p->n_branches;
    o[CA_KIND] = CHAIN_ATTN;
    o[CA_NSEQ] = p->n_seq;
    o[CA_LQ] = p->lq;
    o[CA_POS0] = p->q_pos0;
    o[CA_LKMAX] = p->lk_max;
    o[CA_GROUP] = p->group;
    o[CA_HEADS] = p->n_heads;
    o[CA_DH] = p->d_head;
    o[CA_SCALE] = f32_bits(scale);
    put_buf(ops, o, CA_Q, p->q);
    o[CA_QLD] = p->q_ld;
    put_buf(ops, o, CA_K, p->k);
    o[CA_KLD] = p->k_ld;
    put_buf(ops, o, CA_V, p->v);
    o[CA_VLD] = p->v_ld;
    o[CA_KVS] = (cl_uint)p->kv_seq_stride;
    o[CA_FIRST] = ops->chain_total;
    o[CA_KIND2] = CHAIN_NONE;
    put_opt(ops, o, CA_KR, p->kv_row, CHAIN_NONE);
    o[CA_KRLD] = p->kv_row_ld;
    put_opt(ops, o, CA_KN, p->k_new, CHAIN_NONE);
    put_opt(ops, o, CA_VN, p->v_new, CHAIN_NONE);
    o[CA_NEWLD] = p->new_ld;
    put_opt(ops, o, CA_KL, p->key_len, CHAIN_NONE);
    o[CA_KLC] = p->key_len_const;
    o[CA_NBC] = p->n_branches | (p->causal ? 1u << 8 : 0u);
    o[CA_KINDS] = kinds;
    for (uint32_t b = 0; b < p->n_branches; b++) o[b < 2 ? CA_RAD0 : CA_RAD1] |= (cl_uint)radii[b] << (16 * (b % 2));
    put_buf(ops, o, CA_OUT, p->out);
    o[CA_OUTLD] = p->out_ld;
    o[CA_FIRST2] = ops->chain_total + chunks; /* the ticket scan passes over it */
    commit(ops, 2, chunks);
    *taken = 1;
    return NMT_OK;
}

/* The chain class of an int8-weight product of M rows (nmt_ops_chain_q8)
 * and whether its kernel is there. */
static int q8_class(const nmt_ops *ops, int i8, uint32_t M, uint32_t *cls) {
    const nmt_gemm_class g = nmt_gemm_class_of(M);
    if (i8) {
        *cls = NMT_OPS_CHAIN_I8;
        return ops->k_i8_chain != NULL;
    }
    if (g == NMT_GCLASS_BIG) return 0;
    const nmt_gemm_class h = nmt_ops_chain_host(ops, NMT_GOP_Q8, g);
    *cls = NMT_OPS_CHAIN_Q8 + (uint32_t)h;
    return ops->k_q8_chain[h] != NULL;
}

nmt_status nmt_ops_chain_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, nmt_buf E,
                               nmt_buf E_scale, uint32_t d, float scale, nmt_buf out, nmt_buf PT, uint32_t pt_rows,
                               int *taken) {
    *taken = 0;
    if (!ops->chain_on || rows == 0 || rows > NMT_OPS_CHAIN_ROWS) return NMT_OK;
    /* it may begin a chain: in a decoding step the q|k|v product follows, so
     * an int8 table begins the recording of the int8 path the product of
     * its rows (K = d) will take */
    const int q8 = E_scale.mem != NULL;
    const nmt_gemm_class g = nmt_gemm_class_of(rows);
    uint32_t cls = (uint32_t)g;
    if (ops->chain_n) {
        cls = ops->chain_cls; /* every chain kernel runs embeddings */
    } else if (q8) {
        const int i8 = nmt_ops_i8_fits(ops, g, rows, d) && d <= NMT_OPS_I8_FUSE_ROW_MAX;
        if (i8) NMT_TRY(nmt_ops_i8_rows_build(ops, g)); /* as the product's record does: built on first use */
        else NMT_TRY(nmt_ops_q8_ready(ops, g));
        if (!q8_class(ops, i8, rows, &cls)) return NMT_OK;
    } else if (g == NMT_GCLASS_BIG) {
        return NMT_OK;
    } else {
        NMT_TRY(nmt_ops_nt_ready(ops, g));
        cls = (uint32_t)nmt_ops_chain_host(ops, NMT_GOP_NT, g);
        if (ops->k_chain[cls] == NULL) return NMT_OK;
    }
    const nmt_buf bufs[5] = {tok, E, out, PT, E_scale};
    if (!offsets_fit(bufs, 5)) return NMT_OK;
    const cl_mem mems[5] = {tok.mem, E.mem, out.mem, PT.mem, E_scale.mem};
    cl_uint *o;
    NMT_TRY(open_op(ops, cls, 1, mems, 5, &o));
    o[CE_KIND] = CHAIN_EMBED;
    put_buf(ops, o, CE_TOK, tok);
    o[CE_ROWS] = rows;
    o[CE_SEQ] = seq_len;
    o[CE_POS0] = pos0;
    put_buf(ops, o, CE_E, E);
    o[CE_D] = d;
    o[CE_SCALE] = f32_bits(scale);
    put_buf(ops, o, CE_OUT, out);
    put_buf(ops, o, CE_PT, PT);
    o[CE_PTROWS] = pt_rows;
    if (q8) {
        put_buf(ops, o, CE_QS, E_scale);
        o[CE_FLAGS] = CHAIN_EMBED_Q8;
    } else {
        o[CE_QS] = o[CE_E]; /* never read without the flag */
    }
    o[CE_FIRST] = ops->chain_total;
    commit(ops, 1, 1);
    *taken = 1;
    return NMT_OK;
}

nmt_status nmt_ops_chain_q8(nmt_ops *ops, int i8, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda,
                            nmt_buf Q, uint32_t ldq, nmt_buf sq, nmt_buf bias, nmt_buf C, uint32_t ldc, nmt_buf R,
                            uint32_t ldr, int relu, int *taken) {
    *taken = 0;
    uint32_t cls = 0;
    if (!ops->chain_on || M == 0 || M > NMT_OPS_CHAIN_ROWS || N == 0 || K == 0 || ldq < K ||
        (i8 && K > NMT_OPS_I8_FUSE_ROW_MAX) || !q8_class(ops, i8, M, &cls))
        return NMT_OK;
    /* the kernel's 32-bit indexing, as gemm_i8_nt's checks */
    const uint64_t lim = UINT32_MAX;
    const nmt_buf bufs[6] = {A, Q, C, R, bias, sq};
    if (!offsets_fit(bufs, 6) || (uint64_t)Q.off + (uint64_t)(N - 1) * ldq + K > lim || (uint64_t)sq.off + N > lim)
        return NMT_OK;
    const cl_uint flags = (bias.mem ? CHAIN_FLAG_BIAS : 0u) | (cl_uint)nmt_ops_act_flags(relu) |
                          (R.mem ? CHAIN_FLAG_RES : 0u);
    if (i8) { /* the rows quantized once, by an op of their own, into chain_qs; the product reads them there */
        if (ops->chain_qs == NULL) return NMT_OK;
        const nmt_buf qs = {ops->chain_qs, 0};
        const nmt_buf none = {NULL, 0};
        const cl_mem all[7] = {A.mem, qs.mem, Q.mem, C.mem, R.mem, bias.mem, sq.mem};
        NMT_TRY(reserve(ops, cls, 3, all, 7)); /* both in one launch */
        const cl_mem qmems[5] = {A.mem, NULL, qs.mem, NULL, NULL};
        NMT_TRY(push(ops, cls, qmems, CHAIN_QUANT, M, 0, K, A, lda, A, 0, qs, NMT_OPS_I8_FUSE_ROW_MAX, none, 0, none,
                     0, 0));
        A = qs;
        lda = NMT_OPS_I8_FUSE_ROW_MAX;
    }
    const cl_mem mems[6] = {A.mem, Q.mem, C.mem, R.mem, bias.mem, sq.mem};
    NMT_TRY(push(ops, cls, mems, CHAIN_I8, M, N, K, A, lda, Q, ldq, C, ldc, R, ldr, bias, flags, sq.off));
    *taken = 1;
    return NMT_OK;
}

nmt_status nmt_ops_chain_gate(nmt_ops *ops, int i8, uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x,
                              nmt_buf w1, nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out,
                              uint32_t ld_out, cl_uint flags, int *taken) {
    *taken = 0;
    /* gates join a chain their path's products began (nmt_op_gate_i8 and
     * nmt_op_gate_q8 checked the rest: sizes, 32-bit extents, no overlap) */
    uint32_t cls = 0;
    if (!ops->chain_on || ops->chain_n == 0 || rows == 0 || rows > NMT_OPS_CHAIN_ROWS || !q8_class(ops, i8, rows, &cls) ||
        ops->chain_cls != cls)
        return NMT_OK;
    const cl_mem mems[8] = {x.mem, w1.mem, s1.mem, b1.mem, w2.mem, s2.mem, b2.mem, out.mem};
    cl_uint *o;
    NMT_TRY(open_op(ops, cls, 2, mems, 8, &o));
    o[CG_KIND] = CHAIN_GATE;
    o[CG_ROWS] = rows;
    o[CG_D] = d;
    o[CG_DR] = dr;
    put_buf(ops, o, CG_X, x);
    o[CG_LDX] = ld_x;
    put_buf(ops, o, CG_W1, w1);
    put_buf(ops, o, CG_S1, s1);
    put_opt(ops, o, CG_B1, b1, o[CG_X]); /* never read without its flag */
    put_buf(ops, o, CG_W2, w2);
    put_buf(ops, o, CG_S2, s2);
    put_opt(ops, o, CG_B2, b2, o[CG_X]);
    o[CG_FIRST] = ops->chain_total;
    o[CG_KIND2] = CHAIN_NONE;
    put_buf(ops, o, CG_OUT, out);
    o[CG_LDO] = ld_out;
    o[CG_FLAGS] = flags;
    o[CG_FIRST2] = ops->chain_total + rows;
    commit(ops, 2, rows);
    *taken = 1;
    return NMT_OK;
}

nmt_status nmt_ops_chain_topk(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                              uint32_t k, uint32_t eos, nmt_buf out, uint32_t pick, nmt_buf tok, int *taken) {
    *taken = 0;
    /* it joins a recording (the step's vocabulary product began one); the
     * lanes' order is the work-group tree's only without subgroup reductions */
    if (!ops->chain_on || ops->chain_n == 0 || rows == 0 || rows > NMT_OPS_CHAIN_ROWS || ops->subgroups ||
        ops->reduce_wg == 0 || ops->reduce_wg > CHAIN_TOPK_LANES || k == 0 || k > CHAIN_TOPK_MAX)
        return NMT_OK;
    const nmt_buf bufs[4] = {x, score, out, tok};
    const uint64_t lim = UINT32_MAX;
    if (!offsets_fit(bufs, 4) || (uint64_t)x.off + (uint64_t)rows * ld > lim ||
        (uint64_t)out.off + (2 * (uint64_t)k + 1) * rows > lim || (uint64_t)score.off + rows > lim ||
        (uint64_t)tok.off + rows > lim)
        return NMT_OK;
    const cl_mem mems[4] = {x.mem, score.mem, out.mem, pick ? tok.mem : NULL};
    cl_uint *o;
    NMT_TRY(open_op(ops, ops->chain_cls, 1, mems, 4, &o));
    o[CT_KIND] = CHAIN_TOPK;
    put_buf(ops, o, CT_X, x);
    o[CT_LD] = ld;
    o[CT_N] = n;
    o[CT_ROWS] = rows;
    o[CT_K] = k;
    o[CT_EOS] = eos;
    put_buf(ops, o, CT_SC, score);
    put_buf(ops, o, CT_OUT, out);
    o[CT_PICK] = pick;
    put_opt(ops, o, CT_TOK, pick ? tok : (nmt_buf){NULL, 0}, o[CT_OUT]); /* not written without pick */
    o[CT_LSZ] = (cl_uint)ops->reduce_wg;
    o[CT_FIRST] = ops->chain_total;
    commit(ops, 1, rows);
    *taken = 1;
    return NMT_OK;
}

/* The beam step and the K|V table's permutation join a recording the
 * step's products began (a decoding step's last ops: its top-k, then
 * these); any class's chain kernel runs them (chain.cl's chain_run).  They
 * do not begin one: where the top-k launched on its own (Intel's runtime,
 * whose reductions use subgroups), a chain of just these two measured no
 * faster than their two launches (docs/PERFORMANCE.md). */
nmt_status nmt_ops_chain_beam(nmt_ops *ops, const nmt_beam_step *b, int *taken) {
    *taken = 0;
    if (!ops->chain_on || ops->chain_n == 0 || b->rows > NMT_OPS_CHAIN_ROWS || b->K == 0 || b->rows % b->K != 0)
        return NMT_OK;
    const nmt_buf bufs[5] = {b->cand, b->state, b->tok, b->score, b->back};
    if (!offsets_fit(bufs, 5)) return NMT_OK;
    const cl_mem mems[5] = {b->cand.mem, b->state.mem, b->tok.mem, b->score.mem, b->back.mem};
    cl_uint *o;
    NMT_TRY(open_op(ops, ops->chain_cls, 1, mems, 5, &o));
    o[CB_KIND] = CHAIN_BEAM;
    put_buf(ops, o, CB_CAND, b->cand);
    o[CB_ROWS] = b->rows;
    o[CB_KC] = b->k;
    o[CB_K] = b->K;
    o[CB_V] = b->V;
    o[CB_EOS] = b->eos;
    o[CB_T] = b->t;
    o[CB_MINLEN] = b->min_len;
    put_buf(ops, o, CB_ST, b->state);
    put_buf(ops, o, CB_TOK, b->tok);
    put_buf(ops, o, CB_SC, b->score);
    put_buf(ops, o, CB_BACK, b->back);
    o[CB_FIRST] = ops->chain_total;
    commit(ops, 1, b->rows / b->K);
    *taken = 1;
    return NMT_OK;
}

nmt_status nmt_ops_chain_kv_permute(nmt_ops *ops, nmt_buf tab, uint32_t ld, uint32_t positions, nmt_buf back,
                                    uint32_t rows, int *taken) {
    *taken = 0;
    const nmt_buf bufs[2] = {tab, back};
    if (!ops->chain_on || ops->chain_n == 0 || rows > NMT_OPS_CHAIN_ROWS || !offsets_fit(bufs, 2) ||
        (uint64_t)tab.off + (uint64_t)positions * ld > UINT32_MAX)
        return NMT_OK;
    const cl_mem mems[2] = {tab.mem, back.mem};
    cl_uint *o;
    NMT_TRY(open_op(ops, ops->chain_cls, 1, mems, 2, &o));
    o[CK_KIND] = CHAIN_KV_PERMUTE;
    put_buf(ops, o, CK_TAB, tab);
    o[CK_LD] = ld;
    o[CK_POSITIONS] = positions;
    put_buf(ops, o, CK_BACK, back);
    o[CK_ROWS] = rows;
    o[CK_FIRST] = ops->chain_total;
    commit(ops, 1, 1);
    *taken = 1;
    return NMT_OK;
}
