/* SPDX-License-Identifier: MIT */
/* ops.h — the kernel layer: one C call per op, each launching kernels from
 * cl/.  Every model family (and the trainer) is written against these calls
 * only.  An nmt_ops holds the cl_kernel objects, created once (at session
 * creation); calls enqueue work and never create OpenCL objects.
 *
 * Buffers are (cl_mem, element offset) pairs; all data fp32 unless noted.
 * Matrices are row-major with an explicit leading dimension (ld, elements). */
#ifndef NMT_OPS_H
#define NMT_OPS_H

#include "device.h"

typedef struct nmt_buf {
    cl_mem mem;      /* NULL = absent (for optional arguments) */
    size_t off;      /* offset in elements (floats or ints) */
} nmt_buf;

static inline nmt_buf nmt_buf_at(nmt_buf b, size_t elements) {
    b.off += elements;
    return b;
}

/* Attention masks: HySAN's self-attention branches (the paper's eq. 9 and
 * 11), and MG-SA's attention inside n-gram phrases (SAN composition). */
typedef enum nmt_branch_kind {
    NMT_BRANCH_GLOBAL = 0, /* every key */
    NMT_BRANCH_FW = 1,     /* j <= i */
    NMT_BRANCH_BW = 2,     /* j >= i */
    NMT_BRANCH_LOCAL = 3,  /* |i - j| <= k (combined with the causal mask in a decoder) */
    NMT_BRANCH_BLOCK = 4   /* floor(i / k) == floor(j / k), k >= 1: the n-gram phrase of i */
} nmt_branch_kind;

#define NMT_MAX_BRANCHES 8

typedef struct nmt_branch {
    nmt_branch_kind kind;
    uint32_t k;            /* LOCAL radius, BLOCK size */
} nmt_branch;

/* The chain kernels' capacity: op slots of NMT_OPS_CHAIN_W uints
 * (cl/chain.cl CHAIN_W) a launch, buffers a launch (CHAIN_BUFS), a product's columns a
 * chunk (CHAIN_COLS), the most rows an op may have, and how many recorded
 * chains the descriptor buffer keeps. */
#define NMT_OPS_CHAIN_OPS 96
#define NMT_OPS_CHAIN_W 20
#define NMT_OPS_CHAIN_BUFS 96
#define NMT_OPS_CHAIN_COLS 64
#define NMT_OPS_CHAIN_ROWS 4u
#define NMT_OPS_CHAIN_CACHE 8
/* gemm_i8_chain's scratch (chain_qs; cl/chain.cl CHAIN_QS_ROWS): the
 * scales of up to 4 rows, then their bytes, NMT_OPS_I8_FUSE_ROW_MAX each */
#define NMT_OPS_CHAIN_QS_ROWS 16u
#define NMT_OPS_CHAIN_QS_BYTES (NMT_OPS_CHAIN_QS_ROWS + NMT_OPS_CHAIN_ROWS * NMT_OPS_I8_FUSE_ROW_MAX)
/* chain_cls of a chain of int8 x int8 products (gemm_i8_chain), and of int8
 * weights x fp32 products of class cls (NMT_OPS_CHAIN_Q8 + cls,
 * gemm_q8_chain); 0 and 1 are the fp32 NT m2 and m16 classes (gemm_chain) */
#define NMT_OPS_CHAIN_I8 2u
#define NMT_OPS_CHAIN_Q8 3u

typedef struct nmt_ops {
    nmt_device *dev;
    nmt_gemm_provider gemm;  /* provider of large fp32 NT products (OWN or CLBLAST) */
    /* products: [op][shape class] (tuning.h); NN ones exist after nmt_ops_enable_nn
     * (or the first NN call), Q8 ones after nmt_ops_enable_q8 */
    cl_kernel k_gemm[NMT_GOP_COUNT][NMT_GCLASS_COUNT];
    /* issue 54, a session's ops (nmt_ops_init_session): fp32 NT products
     * (with their chain and gemm_nt_ln kernels) and the int8-weight x fp32
     * ones of the classes that take int8 x int8 are built at their first
     * use (nmt_ops_nt_ready, nmt_ops_q8_ready) instead of up front: an int8
     * model never compiles the fp32 programs it does not run */
    int lazy_nt;
    uint8_t lazy_q8[NMT_GCLASS_COUNT];
    cl_kernel k_bias_act;    /* epilogue after CLBlast (only when some class uses it) */
    /* product + residual + layer norm of one or two rows (cl/gemm.cl
     * gemm_nt_ln, the NT m2 class's program); NULL unless that class is
     * ours; fused_norm 0 (NMT_EDGE_NO_FUSED_NORM=1; a plain field, tests set
     * it) makes nmt_op_gemm_nt_ln refuse so callers launch the two apart */
    cl_kernel k_gemm_ln;
    size_t gemm_ln_wg;       /* its largest local size (<= GEMM_LN_WG) */
    int fused_norm;
    /* other kernels (created by nmt_ops_init) */
    cl_kernel k_embed, k_embed_q8, k_pos_table, k_layernorm, k_add, k_relu, k_act, k_gate_accum, k_copy_rows;
    /* the position terms of positions [0, pos_rows) of a d_model pos_d
     * (nmt_ops_set_pos_table); pos_rows 0: every embedding computes them */
    nmt_buf pos_tab;
    uint32_t pos_rows, pos_d;
    int pos_table_only; /* the table's layout is not the kernels' own (NMT_POS_SINUSOID at offset 0) */
    cl_kernel k_gather_rows, k_log_softmax;
    cl_kernel k_attn_scores, k_attn_stats, k_attn_apply, k_attn_fused;
    cl_kernel k_attn_group;     /* attn_group (NULL where a work-group of 64 cannot run it) */
    /* phrase memories (cl/phrase.cl), created by nmt_ops_enable_phrase */
    cl_kernel k_segment_max, k_ngram_spans, k_span_tokens, k_span_last, k_pattn_scores, k_pattn_softmax,
        k_pattn_apply, k_pattn_fused, k_window_rows;
    /* recurrent cells (cl/recurrent.cl), created by nmt_ops_enable_recurrent */
    cl_kernel k_lstm_cell, k_gru_cell, k_gru_scaled_input;
    cl_kernel k_act_rows, k_weighted_rows, k_lookup_q8; /* the same program: RNN helpers (BA-NMT) */
    /* additive attention (cl/additive.cl), created by nmt_ops_enable_additive */
    cl_kernel k_additive_attn;
    /* attention alignments (cl/align.cl), created by nmt_ops_enable_align */
    cl_kernel k_attn_align;
    /* fp16 compute (cl/gemm_f16.cl, ops_f16.c), created by nmt_ops_enable_f16:
     * products per shape class with the int8 product's knobs, and the embedding */
    cl_kernel k_gemm_f16[NMT_GCLASS_COUNT], k_embed_f16;
    nmt_gemm_cfg cfg_f16[NMT_GCLASS_COUNT];  /* their knobs, wg clamped to the kernel */
    /* the beam's candidates (cl/topk.cl), created by nmt_ops_enable_topk */
    cl_kernel k_topk;
    uint32_t topk_max;          /* its largest k (<= NMT_TOPK_MAX, what local memory holds) */
    /* beam steps chained on the device (cl/beam.cl), created by nmt_ops_enable_beam */
    cl_kernel k_beam_advance, k_kv_permute;
    size_t kv_permute_wg;
    size_t additive_wg;         /* local size of additive_attn: a power of two <= reduce_wg
                                   (a plain field; tests lower it) */
    /* launch geometry chosen by nmt_ops_init: every kernel is launched with
     * one fixed local size (PoCL compiles a kernel once per local size, so
     * the warm-up at session creation covers every launch) */
    nmt_gemm_cfg cfg[NMT_GOP_COUNT][NMT_GCLASS_COUNT];  /* wg clamped to the kernel */
    size_t reduce_wg;           /* local size of the per-row reductions (power of two) */
    size_t norm_wg;             /* local size of layernorm: 1 on CPUs (a work-item per
                                   row, no barrier work) unless norm_subgroups, else
                                   reduce_wg; a plain
                                   field (tests set both) */
    size_t wg_max;              /* local size (dimension 0) of the other kernels */
    int attn_mode;              /* NMT_ATTN_*: $NMT_EDGE_ATTN at init, else AUTO (tests force one) */
    /* cache blocking of own fp32 products on CPUs (0: none; plain fields,
     * tests change them): NN split K into chunks of k_chunk rows, NT split M
     * into tiles of about a_tile_bytes of A (whole work-groups of rows) */
    uint32_t k_chunk;           /* CPUs: NMT_OPS_K_CHUNK_CPU */
    uint32_t a_tile_bytes;      /* CPUs: NMT_OPS_A_TILE_BYTES */
    /* subgroup reductions (runtime/device/device_paths.c, issue 23): 1 when log_softmax
     * and topk_logprobs were built with -DNMT_SUBGROUPS=1; norm_subgroups,
     * layernorm (not on CPUs, whose layernorm is a work-item per row: no
     * reduction across work-items; unless dev->sg_mode is NMT_SG_ALL, which
     * also makes norm_wg reduce_wg) */
    int subgroups, norm_subgroups;
    uint32_t sg_size;           /* log_softmax's subgroup size at reduce_wg (0: none) */
    /* int8 x int8 products (cl/gemm_i8.cl, ops_i8dot.c): nmt_ops_enable_q8
     * builds k_gemm[NMT_GOP_I8][c] and k_quant_rows where nmt_i8dot_path
     * chooses them; nmt_op_gemm_q8 then quantizes A into i8_a / i8_s
     * (scratch the session plans: nmt_ops_i8dot_plan) and runs gemm_i8_nt */
    cl_kernel k_quant_rows;
    /* gemm_i8_nt_q (quant_rows and the product in one launch) per class,
     * built for m2 and m16 where i8_fuse_quant (nmt_ops_init: CPU devices,
     * unless $NMT_EDGE_NO_FUSED_QUANT; a plain field, tests set it); NULL
     * elsewhere (two launches) */
    cl_kernel k_i8_quant[NMT_GCLASS_COUNT];
    int i8_fuse_quant;
    uint8_t i8_use[NMT_GCLASS_COUNT]; /* nmt_i8dot_path per class (plain field; tests set it) */
    nmt_buf i8_a;               /* int8 activations, i8_cap bytes */
    nmt_buf i8_s;               /* their row scales, i8_rows floats */
    size_t i8_cap, i8_rows;
    size_t i8_quant_wg;         /* local size of quant_rows */
    uint64_t n_i8_products;     /* int8-weight products run as int8 x int8 (tests read it) */
    uint64_t n_i8_fused;        /* of them, in one launch with the quantization (k_i8_quant) */
    /* decoding steps of a few rows on CPU devices (runtime/ops/ops_rows.c): a
     * HySAN branch's squeeze gate in one launch, a work-item per row, where
     * fuse_gate (nmt_ops_init: CPU devices, unless $NMT_EDGE_NO_FUSED_GATE):
     * k_q8_gate[cls] (gemm_q8_gate) of the q8 m2 and m16 classes' own
     * product programs, and, where the products take int8 x
     * int8, the one-work-item-per-row kernels of cl/gemm_i8.cl (-DI8_ROW=1:
     * k_i8_gate and k_i8_ln, gemm_i8_nt_ln; and, on CPU devices,
     * k_i8_chain, gemm_i8_chain), built on first use
     * (i8_row_tried: a build was attempted; NULL after it: separate
     * launches), k_i8_ln where i8_fuse_norm (CPU devices) and fused_norm;
     * k_q8_ln (gemm_q8_nt_ln, the q8 m2 class's program, its largest local
     * size q8_ln_wg) where fused_norm.  Plain fields: tests set them. */
    cl_kernel k_q8_gate[2], k_q8_ln, k_i8_gate, k_i8_ln, k_i8_chain;
    size_t q8_ln_wg;
    int i8_row_tried, fuse_gate, i8_fuse_norm;
    uint64_t n_gates;           /* gates run in one launch (tests read it) */
    uint64_t n_norms;           /* int8 products run with their norm (tests read it) */
    /* few-row products, norms, attentions and gates chained into one
     * launch (runtime/ops/ops_chain.c, cl/gemm.cl gemm_chain, cl/gemm_i8.cl
     * gemm_i8_chain): k_chain[cls] of the NT m2 and m16 classes' own
     * programs (fp32 products), k_q8_chain[cls] of the q8 ones (int8
     * weights x fp32), k_i8_chain above (int8 x int8); chain_on (nmt_ops_chain_enable: inference
     * sessions on CPU devices, unless $NMT_EDGE_NO_PRODUCT_CHAIN; a plain
     * field, tests set it); the ops recorded so far (chain_v, CHAIN_W
     * uints each, of class chain_cls) and their buffers; the ticket
     * counters (chain_ctr, 2 uints) and where the next launch's tickets
     * begin (chain_base); the int8 x int8 products' quantized rows
     * (chain_qs: NMT_OPS_CHAIN_QS_BYTES, where k_i8_chain is built); the device's descriptor blocks (chain_desc,
     * NMT_OPS_CHAIN_CACHE of them) and the host's copies of what they hold
     * (chain_cache, chain_cache_n slots each; chain_cache_next is replaced
     * next). */
    cl_kernel k_chain[2], k_q8_chain[2];
    int chain_on;
    uint32_t chain_n, chain_nbufs, chain_total, chain_cls, chain_base, chain_groups, chain_cache_next;
    cl_uint chain_v[NMT_OPS_CHAIN_OPS * NMT_OPS_CHAIN_W];
    cl_mem chain_bufs[NMT_OPS_CHAIN_BUFS];
    cl_mem chain_ctr, chain_desc, chain_qs;
    cl_uint chain_cache[NMT_OPS_CHAIN_CACHE][NMT_OPS_CHAIN_OPS * NMT_OPS_CHAIN_W];
    uint32_t chain_cache_n[NMT_OPS_CHAIN_CACHE];
    /* chain launches, op slots run in them, descriptor blocks written
     * (tests read them) */
    uint64_t n_chains, n_chained, n_chain_writes;
} nmt_ops;

/* gemm_i8_gate and gemm_i8_nt_ln serve steps of at most this many rows (a
 * work-item per row, for CPU devices), K (gate: d) up to
 * NMT_OPS_I8_FUSE_ROW_MAX and the gate's d / r up to NMT_OPS_I8_ROW_DR_MAX
 * (their private arrays, cl/gemm_i8.cl). */
#define NMT_OPS_I8_ROW_ROWS 4u
#define NMT_OPS_I8_ROW_DR_MAX 512u
/* gemm_i8_nt_ln only up to 2 rows: at 3 and 4 the m16 class's 4 x 4 blocks,
 * which read a weight row once for 4 rows, outrun a row per work-item on the
 * sub-layers' larger products (docs/PERFORMANCE.md) */
#define NMT_OPS_I8_LN_ROWS 2u

/* gemm_i8_nt_q serves products of at most this many rows: every work-group
 * quantizes all of them, so with more rows (more row blocks, fewer columns
 * per group) the repeated quantization outweighs the launch it saves
 * (docs/PERFORMANCE.md); and, in its one-row x86 VNNI form, K of at most
 * NMT_OPS_I8_FUSE_ROW_MAX (cl/gemm_i8.cl I8_Q_ROW_MAX). */
#define NMT_OPS_I8_FUSE_ROWS 4u
#define NMT_OPS_I8_FUSE_ROW_MAX 2048u

#define NMT_OPS_K_CHUNK_CPU 256u
#define NMT_OPS_A_TILE_BYTES (512u * 1024u)

/* Attention path, for d_head <= 128 (larger heads always take the scores /
 * stats / apply kernels): FUSED = attn_fused (a work-item per query row and
 * head: CPUs), GROUP = attn_group (a work-group of 64 per row and head:
 * GPUs), SPLIT = the three kernels; AUTO = GROUP on GPUs, else FUSED.
 * $NMT_EDGE_ATTN = item | group | split forces one at nmt_ops_init (to time
 * one against another). */
enum { NMT_ATTN_AUTO = 0, NMT_ATTN_FUSED = 1, NMT_ATTN_SPLIT = 2, NMT_ATTN_GROUP = 3 };

/* Build the programs and create every kernel above.  Called at session
 * creation; on failure everything created so far is released.  Kernel
 * parameters come from the device's tuning (dev->tuning, tuning.h). */
nmt_status nmt_ops_init(nmt_ops *ops, nmt_device *dev);

/* nmt_ops_init with explicit parameters (NULL = the device's): the tuner
 * and the tests run candidate sets through it.  Invalid sets:
 * NMT_ERR_INVALID_ARGUMENT; CLBlast requested without it: NMT_ERR_UNSUPPORTED. */
nmt_status nmt_ops_init_tuned(nmt_ops *ops, nmt_device *dev, const nmt_tuning *t);

/* nmt_ops_init for a session: the fp32 NT products are left to their
 * first use (ops->lazy_nt), and nmt_ops_enable_q8 builds the int8-weight x
 * fp32 programs only of the classes without int8 x int8 (ops->lazy_q8):
 * a session compiles the programs its model runs.  The session's warm-up
 * (warmup.c) makes those first uses, so nothing is built while
 * translating. */
nmt_status nmt_ops_init_session(nmt_ops *ops, nmt_device *dev);

/* Build the fp32 NN product kernels (B = [K,N]).  No model family uses
 * them (weights are [N,K]), so nmt_ops_init leaves them out and the first
 * nmt_op_gemm with trans_b = 0 builds them; callers that must not create
 * OpenCL objects later (the trainer) call this up front.  Idempotent. */
nmt_status nmt_ops_enable_nn(nmt_ops *ops);

/* Build the int8-weight kernels (cl/gemm_q8.cl), for models that have int8
 * weights, and the int8 x int8 ones (cl/gemm_i8.cl) of the shape classes
 * whose nmt_i8dot_path is not 0; call at session creation (it creates OpenCL
 * objects).  Idempotent. */
nmt_status nmt_ops_enable_q8(nmt_ops *ops);

/* Build the fp16-compute kernels (cl/gemm_f16.cl: products with half
 * weights, the half embedding) for models whose fp16 weights stay fp16 on
 * the device; call at session creation.  NMT_ERR_UNSUPPORTED when the
 * device does not report cl_khr_fp16 (nothing built).  Idempotent. */
nmt_status nmt_ops_enable_f16(nmt_ops *ops);
/* The int8 x int8 kernels for the classes with ops->i8_use[c] != 0 (the
 * NMT_I8_* variant of device.h); nmt_ops_enable_q8 calls it.  A device that
 * fails to build the dot built-in variant gets the portable one, and one
 * that fails to build the x86 VNNI variant int8 weights x fp32 (i8_use 0;
 * both logged). */
nmt_status nmt_ops_enable_i8(nmt_ops *ops);


/* Build the phrase-memory kernels (cl/phrase.cl) for the families that
 * pool tokens into phrases (MG-SA); call at session creation (it creates
 * OpenCL objects), so families without phrases never compile them.
 * Idempotent. */
nmt_status nmt_ops_enable_phrase(nmt_ops *ops);

/* Build the recurrent-cell kernels (cl/recurrent.cl) for the families
 * with recurrent layers (MG-SA's LSTM interaction, BA-NMT's GRUs); call at session
 * creation.  Idempotent. */
nmt_status nmt_ops_enable_recurrent(nmt_ops *ops);

/* Build the additive-attention kernel (cl/additive.cl) for the families
 * with Bahdanau attention (BA-NMT); call at session creation.  Idempotent. */
nmt_status nmt_ops_enable_additive(nmt_ops *ops);

void nmt_ops_release(nmt_ops *ops);

/* C[M,N] = alpha * A[M,K] * op(B) + beta * C (+ bias[N]) (then ReLU if relu).
 * trans_b = 1: B is [N,K] (row n holds the K weights of output n: the layout
 * of every weight matrix in .nmt files);  trans_b = 0: B is [K,N].
 * bias.mem == NULL: no bias.  beta must be 0 or 1. */
nmt_status nmt_op_gemm(nmt_ops *ops, int trans_b, uint32_t M, uint32_t N, uint32_t K, float alpha,
                       nmt_buf A, uint32_t lda, nmt_buf B, uint32_t ldb, float beta, nmt_buf C,
                       uint32_t ldc, nmt_buf bias, int relu);

/* Int8 weights with per-row scales:
 *   C[M,N] = alpha * A[M,K] * W^T + beta * C (+ bias[N]) (then ReLU),
 *   W[n,k] = Q[n,k] * scale[n].
 * Q is a buffer of int8 (signed char) [N,K] with row stride ldq, its offset
 * in elements (bytes); scale holds N floats.  A, C, bias fp32 as in
 * nmt_op_gemm; beta must be 0 or 1.  Requires nmt_ops_enable_q8 (else
 * NMT_ERR_INVALID_ARGUMENT). */
nmt_status nmt_op_gemm_q8(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                          uint32_t lda, nmt_buf Q, uint32_t ldq, nmt_buf scale, float beta, nmt_buf C,
                          uint32_t ldc, nmt_buf bias, int relu);

/* fp16 weights (fp16 compute, ops_f16.c): nmt_op_gemm_q8's product with
 * W a buffer of half [N,K] (row stride ldw, offset in halves): each A
 * value is rounded to half, products are formed and accumulated in fp32.
 * Requires nmt_ops_enable_f16 (else NMT_ERR_INVALID_ARGUMENT). */
nmt_status nmt_op_gemm_f16(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                           uint32_t lda, nmt_buf W, uint32_t ldw, float beta, nmt_buf C, uint32_t ldc,
                           nmt_buf bias, int relu);

/* Symmetric per-row quantization (cl/gemm_i8.cl, quant_rows): for m < M,
 * S[m] = max_k |X[m,k]| / 127 and Q[m,k] = X[m,k] * 127 / max rounded half
 * to even (all 0 for a zero or non-finite row).  Q int8 with row stride ldq
 * (offset in bytes), S floats.  Requires nmt_ops_enable_i8. */
nmt_status nmt_op_quant_rows(nmt_ops *ops, uint32_t M, uint32_t K, nmt_buf X, uint32_t ldx, nmt_buf Q,
                             uint32_t ldq, nmt_buf S);

/* C[M,N] = alpha * (A[M,K] . Q[N,K]^T) * sa[m] * sq[n] + beta * C (+ bias)
 * (then ReLU): A and Q int8 (offsets in bytes), the sums exact in int32;
 * K < 2^17.  Requires the class's kernel (nmt_ops_enable_i8), else
 * NMT_ERR_INVALID_ARGUMENT. */
nmt_status nmt_op_gemm_i8(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                          uint32_t lda, nmt_buf sa, nmt_buf Q, uint32_t ldq, nmt_buf sq, float beta, nmt_buf C,
                          uint32_t ldc, nmt_buf bias, int relu);

/* out[r, :] = E[tok[r], :] * scale + P(pos(r)) for r < rows, where
 * pos(r) = pos0 + (r % seq_len) and P is the sinusoidal table (sin in
 * columns [0, d/2), cos in [d/2, d); inv_freq_i = 10000^(-i/(d/2-1)) as in
 * fairseq/tensor2tensor).  tok is an int buffer; ids are validated by the
 * host before upload. */
/* Position layouts (the Transformer's position_encoding key; cl/common.cl
 * pos_term_layout): the embeddings compute NMT_POS_SINUSOID themselves past
 * the table; every other layout, and any offset, only comes from it. */
enum { NMT_POS_SINUSOID = 0, NMT_POS_SINUSOID_2I = 1, NMT_POS_INTERLEAVED = 2, NMT_POS_NONE = 3 };
/* Fills PT (n_pos rows of d floats) with the position terms of positions
 * offset .. offset + n_pos - 1 in `layout` (cl/elementwise.cl pos_table:
 * the embeddings' own function, so the same bits) and makes every later
 * embedding of that d read them from it instead of computing them; row p
 * is embedding position p.  n_pos 0 (or PT.mem NULL) switches the table
 * off.  With a layout other than NMT_POS_SINUSOID or an offset, an
 * embedding of a position past the table is NMT_ERR_INVALID_ARGUMENT.  PT
 * must stay allocated while it is set. */
nmt_status nmt_ops_set_pos_table(nmt_ops *ops, nmt_buf PT, uint32_t n_pos, uint32_t d, uint32_t layout,
                                 uint32_t offset);

/* y[i] = act(x[i]) for i < n (y may be x): NMT_ACT_GELU (x Phi(x), the
 * exact normal CDF) or NMT_ACT_SWISH (x sigmoid(x)); NMT_ACT_RELU in place
 * only (nmt_op_relu; the products' epilogue does it otherwise);
 * NMT_ACT_NONE copies. */
enum { NMT_ACT_NONE = 0, NMT_ACT_RELU = 1, NMT_ACT_GELU = 2, NMT_ACT_SWISH = 3 };
nmt_status nmt_op_act(nmt_ops *ops, nmt_buf x, nmt_buf y, uint32_t n, int kind);

/* A session's decoder step streams step_bytes of fp32 weights.  On a CPU
 * device whose cache (device.h global_cache_bytes: the driver's figure or
 * the host's last-level cache, the larger) holds less, the
 * step is bound by memory bandwidth, and its one- and two-row products are
 * spread over every core: the NT m2 class is launched in work-groups of at
 * most 8 (a product of N = 512 is 8 of them, not 1) and the layer norm is
 * not fused into a one-work-group product (fused_norm 0; the same bits
 * either way).  Elsewhere, or with the cache unknown, nothing changes.
 * Returns 1 when it applied them (docs/PERFORMANCE.md, "Weights that do
 * not fit the cache"). */
int nmt_ops_plan_streaming(nmt_ops *ops, uint64_t step_bytes);

nmt_status nmt_op_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                        nmt_buf E, uint32_t d, float scale, nmt_buf out);

/* nmt_op_embed with a half table E [V, d] (offset in halves); requires
 * nmt_ops_enable_f16. */
nmt_status nmt_op_embed_f16(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                            nmt_buf E, uint32_t d, float scale, nmt_buf out);

/* nmt_op_embed with an int8 table: E[t, c] = Q[t, c] * qscale[t], Q int8
 * [V, d] row-major (offset in elements = bytes), qscale V floats (the
 * layout of an I8 tensor of a .nmt file). */
nmt_status nmt_op_embed_q8(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                           nmt_buf Q, nmt_buf qscale, uint32_t d, float scale, nmt_buf out);

/* O[m,:] = LayerNorm(A[m,:] B^T (+ bias) + R[m,:]) * gamma + beta for M
 * rows in one launch: B [N, K] fp32, the others as nmt_op_gemm and
 * nmt_op_layernorm; O may alias R, not A.  NMT_ERR_UNSUPPORTED where it does
 * not run (M > 2, the NT m2 class not ours, ops->fused_norm 0): the
 * caller then runs the product and nmt_op_layernorm. */
nmt_status nmt_op_gemm_nt_ln(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf B,
                             uint32_t ldb, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma, nmt_buf beta,
                             float eps, nmt_buf O, uint32_t ldo);

/* out[r,:] = LayerNorm(x[r,:] (+ res[r,:] if res.mem)) * gamma + beta.
 * out may alias x or res.  Population variance, eps inside the sqrt. */
nmt_status nmt_op_layernorm(nmt_ops *ops, nmt_buf x, nmt_buf res, nmt_buf out, uint32_t rows,
                            uint32_t d, nmt_buf gamma, nmt_buf beta, float eps);

/* dst[i] += src[i] for i < n. */
nmt_status nmt_op_add(nmt_ops *ops, nmt_buf dst, nmt_buf src, uint32_t n);

/* x[i] = max(x[i], 0) for i < n, in place. */
nmt_status nmt_op_relu(nmt_ops *ops, nmt_buf x, uint32_t n);

/* Gated-sum fusion step, over rows x d (row strides ld_*):
 *   out = (accumulate ? out : 0) + x * sigmoid(g). */
nmt_status nmt_op_gate_accum(nmt_ops *ops, nmt_buf x, uint32_t ld_x, nmt_buf g, uint32_t ld_g,
                             nmt_buf out, uint32_t ld_out, uint32_t rows, uint32_t d,
                             int accumulate);

/* Chained few-row ops (runtime/ops/ops_chain.c).  Where ops->chain_on and the
 * device is a CPU, nmt_op_gemm (fp32, B transposed, alpha 1, beta 0, K > 0,
 * at most NMT_OPS_CHAIN_ROWS rows, the NT class's own kernel) and
 * nmt_op_gemm_nt_ln record their work instead of launching it, and so do
 * nmt_op_layernorm (norm_wg 1) and nmt_op_attention (attn_fused, at most 4
 * query rows and branches) when such a product has begun a chain, and
 * nmt_op_embed (fp32, at most 4 rows) at any time; likewise the
 * int8-weight products of nmt_op_gemm_q8, nmt_op_gemm_q8_nt_ln and
 * nmt_op_gemm_i8_nt_ln (alpha 1, beta 0, at most 4 rows; int8 x int8: K <=
 * NMT_OPS_I8_FUSE_ROW_MAX), and nmt_op_gate_q8 / nmt_op_gate_i8 in a chain
 * their path's products began (classes NMT_OPS_CHAIN_Q8 + cls,
 * NMT_OPS_CHAIN_I8).  The next launch, read, write or finish on the device
 * (nmt_device_settle), or a full chain, enqueues everything recorded as one
 * gemm_chain (gemm_q8_chain, gemm_i8_chain) launch, with the bits of the
 * launches it replaces.
 * nmt_ops_chain_enable turns it on where the device allows it (then
 * ops->chain_on is 1; the counters' buffer is created on the first call)
 * or off; nmt_ops_chain_flush enqueues what is recorded. */
nmt_status nmt_ops_chain_enable(nmt_ops *ops, int on);
nmt_status nmt_ops_chain_flush(nmt_ops *ops);

/* The int8 x int8 products' scratch (i8_a, i8_s above): q of cap bytes,
 * scales of rows floats (families/plan.c, nmt_plan_i8dot, plans them). */
void nmt_ops_set_i8_scratch(nmt_ops *ops, nmt_buf q, nmt_buf scales, size_t cap, size_t rows);

/* One branch's squeeze gate over rows x d, int8 weights W1 [dr, d] and
 * W2 [d, dr] with row scales s1, s2, in one launch (cl/gemm_i8.cl
 * gemm_i8_gate):
 *   h = ReLU(x W1^T + b1), g = h W2^T + b2,
 *   out = (accumulate ? out : 0) + x * sigmoid(g)
 * (b1, b2 may be absent: mem NULL), the same bits as the two products by
 * way of int8 x int8 (nmt_op_gemm_q8 where nmt_ops_i8_fits) and
 * nmt_op_gate_accum.  NMT_ERR_UNSUPPORTED (nothing enqueued; callers launch
 * the three) where !ops->fuse_gate, rows > NMT_OPS_I8_ROW_ROWS, either
 * product would not take int8 x int8, or d or dr is over its limit; the
 * first call builds the kernel (its failure is the status; the calls after
 * it are NMT_ERR_UNSUPPORTED).  out must not overlap x. */
nmt_status nmt_op_gate_i8(nmt_ops *ops, uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x, nmt_buf w1,
                          nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out, uint32_t ld_out,
                          int accumulate);

/* The squeeze gate of nmt_op_gate_i8 where its int8 products take int8
 * weights x fp32 in one launch (a work-item per row: cl/gemm_q8.cl
 * gemm_q8_gate), the same bits as the two products (nmt_op_gemm_q8) and
 * nmt_op_gate_accum.  NMT_ERR_UNSUPPORTED (nothing enqueued) where
 * !ops->fuse_gate, rows > NMT_OPS_I8_ROW_ROWS, d / r >
 * NMT_OPS_I8_ROW_DR_MAX, the class's products are not ours (CLBlast,
 * kgroup: no kernel) or a product would take int8 x int8 (that is
 * nmt_op_gate_i8's).  fp32 weights keep three launches: one work-item per
 * row measured no faster there (docs/PERFORMANCE.md).  out must not
 * overlap x. */
nmt_status nmt_op_gate_q8(nmt_ops *ops, uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x, nmt_buf w1,
                          nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out, uint32_t ld_out,
                          int accumulate);

/* nmt_op_gemm_nt_ln for int8 weights Q [N, K] with row scales, one or two
 * rows (the q8 m2 class's program: gemm_q8_nt_ln, a work-group per row of
 * layernorm's local size), the same bits as nmt_op_gemm_q8 then
 * nmt_op_layernorm.  NMT_ERR_UNSUPPORTED (nothing enqueued) where the kernel
 * is not there (the class's products not ours), !ops->fused_norm, M > 2 or
 * the product would take int8 x int8 (nmt_op_gemm_i8_nt_ln's).  O may
 * alias R, not A. */
nmt_status nmt_op_gemm_q8_nt_ln(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf Q,
                               uint32_t ldq, nmt_buf scale, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma,
                               nmt_buf beta, float eps, nmt_buf O, uint32_t ldo);

/* O[m,:] = LayerNorm(A[m,:] Q^T * (row scales) (+ bias) + R[m,:]) * gamma +
 * beta, Q int8 [N, K] with scales sq (a post-norm sub-layer's last product,
 * its residual and its norm; nmt_op_gemm_nt_ln's int8 counterpart) in one
 * launch (cl/gemm_i8.cl gemm_i8_nt_ln), the same bits as nmt_op_gemm_q8 by
 * way of int8 x int8 and nmt_op_layernorm.  NMT_ERR_UNSUPPORTED (nothing
 * enqueued; callers launch the two) where !ops->i8_fuse_norm,
 * !ops->fused_norm, the layer norm is not a work-item per row (norm_wg !=
 * 1), M > NMT_OPS_I8_LN_ROWS, K > NMT_OPS_I8_FUSE_ROW_MAX or the product
 * would not take int8 x int8; the first call builds the kernel, as
 * nmt_op_gate_i8's.  O may alias R, not A. */
nmt_status nmt_op_gemm_i8_nt_ln(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf Q,
                               uint32_t ldq, nmt_buf sq, nmt_buf bias, nmt_buf R, uint32_t ldr, nmt_buf gamma,
                               nmt_buf beta, float eps, nmt_buf O, uint32_t ldo);

/* dst[r*ld_dst + c] = src[r*ld_src + c], r < rows, c < cols (strided copy;
 * used to write K/V of a step into the cache and to pack/unpack). */
nmt_status nmt_op_copy_rows(nmt_ops *ops, nmt_buf src, uint32_t ld_src, nmt_buf dst,
                            uint32_t ld_dst, uint32_t rows, uint32_t cols);

/* dst row r = src row idx[r] (rows of `cols` elements, strides ld_*); idx is
 * an int buffer.  Beam reordering of any decoder state. */
nmt_status nmt_op_gather_rows(nmt_ops *ops, nmt_buf src, uint64_t ld_src, nmt_buf dst,
                              uint64_t ld_dst, nmt_buf idx, uint32_t rows, uint32_t cols);

/* In-place log-softmax over each of `rows` rows of length n (row stride ld). */
nmt_status nmt_op_log_softmax(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld);

/* Multi-head masked attention with HySAN branches sharing one score matrix.
 *
 * Query sequences s < n_seq, each with lq queries; query i sits at absolute
 * position q_pos0 + i.  Query sequence s reads key/value sequence s / group.
 * Key j of kv sequence m is at k + m*kv_seq_stride + j*k_ld (same for v);
 * head h uses columns [h*d_head, (h+1)*d_head).  Valid keys of kv sequence m:
 * j < key_len[m] (int buffer) or, if key_len.mem == NULL, j < key_len_const.
 *
 *   S[s,h,i,j] = (q_i . k_j) / sqrt(d_head)                 (computed once)
 *   for each branch b: P_b = softmax_j(S + M_b + M_pad (+ M_causal))
 *                      out[s*lq+i, b*H*d_head + h*d_head + c] = sum_j P_b v_j[c]
 *
 * Rows with no allowed key produce zeros.  scores: scratch of
 * n_seq*H*lq*lk_max floats; stats: scratch of n_seq*H*lq*2 floats.
 *
 * kv_row (optional; int): key and value j of kv sequence m are read from
 * kv sequence kv_row[j*kv_row_ld + m] instead of m — a beam search's rows
 * reading their shared history in place (docs/RUNTIME.md, "The beam's K|V
 * table").  Only the fused path takes it (nmt_ops_attn_kv_row); elsewhere
 * NMT_ERR_UNSUPPORTED.
 *
 * k_new, v_new (optional, both or neither; a decoding step: lq == 1,
 * group == 1): the key and value of each query's own position q_pos0 are
 * row s of k_new / v_new (row stride new_ld), not the cache's, and the call
 * also writes them into the cache there (at kv sequence kv_row[q_pos0 *
 * kv_row_ld + s] with a table, else s) for the next steps: the step's K|V
 * append, in the fused path without a launch of its own. */
typedef struct nmt_attn_args {
    uint32_t n_seq, lq, q_pos0, lk_max, group;
    uint32_t n_heads, d_head;
    nmt_buf q; uint32_t q_ld;
    nmt_buf k; uint32_t k_ld;
    nmt_buf v; uint32_t v_ld;
    uint64_t kv_seq_stride;
    nmt_buf kv_row; uint32_t kv_row_ld;
    nmt_buf k_new, v_new; uint32_t new_ld;
    nmt_buf key_len; uint32_t key_len_const;
    int causal;
    uint32_t n_branches;
    nmt_branch branches[NMT_MAX_BRANCHES];
    nmt_buf scores, stats;
    nmt_buf out; uint32_t out_ld;
} nmt_attn_args;

nmt_status nmt_op_attention(nmt_ops *ops, const nmt_attn_args *a);

/* 1 when nmt_op_attention takes a kv_row table for heads of d_head (its
 * fused path), else 0. */
int nmt_ops_attn_kv_row(const nmt_ops *ops, uint32_t d_head);

/* Phrase memory by max-pooling (cl/phrase.cl segment_max; MG-SA's COM =
 * max): phrase row r = b * m_cap + m (b < n_sent) of G (row stride ld_g)
 * is the column-wise max of the rows b * n_cap + t, start <= t < start +
 * len, of X (row stride ld_x), with start = seg[2r], len = seg[2r + 1]
 * (int; len 0 = no phrase: a zero row).  arg (optional: NONE) receives the
 * argmax rows of X (int [n_sent * m_cap, d]; -1 for no phrase) for the
 * backward.  Spans must satisfy 0 <= start, start + len <= n_cap, and be
 * disjoint within a sentence (the caller's phrase partition guarantees it;
 * the kernel trusts them).  Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_segment_max(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf seg,
                              uint32_t n_sent, uint32_t m_cap, uint32_t d, nmt_buf g, uint32_t ld_g, nmt_buf arg);

/* The n-gram phrase partition (cl/phrase.cl ngram_spans) of n_sent
 * sentences whose lengths (int, EOS included, padding excluded) are in
 * `len`: spans for nmt_op_segment_max in seg (int [n_sent * m_cap, 2]:
 * phrase m starts at m * n, its length min(n, L - m * n), 0 past the
 * sentence) and the phrase count min(ceil(L / n), m_cap) of each sentence
 * in count (int [n_sent]; an attention's key lengths).  1 <= n <= 64.
 * Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_ngram_spans(nmt_ops *ops, nmt_buf len, uint32_t n_sent, uint32_t n, uint32_t m_cap, nmt_buf seg,
                              nmt_buf count);

/* Width of an LSTM's gate rows: 4h, plus ON-LSTM's 2 * (h / chunk) master
 * gates when chunk > 0. */
static inline uint32_t nmt_lstm_gates(uint32_t h, uint32_t chunk) { return 4 * h + (chunk ? 2 * (h / chunk) : 0); }

/* The gates of LSTM step t (cl/recurrent.cl lstm_cell) over n_seq
 * sequences whose step-t rows are r = b * t_cap + t: z (float [n_seq *
 * t_cap, nmt_lstm_gates(h, chunk)]) holds the pre-activations (order i,
 * f, g, o, then ON-LSTM's master forget and input gates), i, f, g, o
 * replaced by their activations; c (float [n_seq * t_cap, h]) receives the
 * cell c_t = f c_{t-1} + i g (ON-LSTM, chunk > 0: f and i combined with
 * the cumax master gates of unit j's chunk j / chunk; c_{t-1} read from
 * row r - 1; none at t = 0), out (row stride ld_out) the output
 * h_t = o tanh(c_t).  Steps t >= count[b] (int [n_seq]) are written as
 * zeros.  chunk must divide h.  Requires nmt_ops_enable_recurrent. */
nmt_status nmt_op_lstm_cell(nmt_ops *ops, nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out, nmt_buf count,
                            uint32_t n_seq, uint32_t t_cap, uint32_t t, uint32_t h, uint32_t chunk);

/* Width of the rows a GRU step keeps (nmt_op_gru_cell's z): r, z, n, hn,
 * h_prev, h each. */
static inline uint32_t nmt_gru_width(uint32_t h) { return 5 * h; }

/* One GRU step (cl/recurrent.cl gru_cell), the cuDNN / PyTorch form:
 *   r = sigmoid(xr + hr), u = sigmoid(xz + hz), n = tanh(xn + r * hn),
 *   h' = (1 - u) * n + u * h_prev,
 * where xr, xz, xn are x W_ih^T + b_ih and hr, hz, hn are h_prev W_hh^T +
 * b_hh (gate order r, z, n).  r scales the projected hn, so a step needs
 * one recurrent product (dl4mt / Bahdanau's GRU applies r to h_prev before
 * U_n, which puts a second product inside the cell; docs/ARCHITECTURES.md).
 * n_seq state rows b; step t's data row is b * t_cap + t, or for reverse
 * b * t_cap + len - 1 - t, len = min(count[b], t_cap) (count int [n_seq];
 * NMT_NO_BUF: len = t_cap).  A step with t >= len is padding: the state
 * is kept (hs = h_prev) and z and out row b * t_cap + t get zeros.
 *   z   (row stride ld_z >= 5h, nmt_gru_width) data rows: in, columns
 *       0 .. 3h hold x W_ih^T + b_ih; out, r, u, n, hn, h_prev (the
 *       backward's inputs);
 *   hg  row b (stride ld_hg >= 3h, or 0: one row for every b, e.g. the bias
 *       alone when h_prev is zero): h_prev W_hh^T + b_hh; NMT_NO_BUF: zeros;
 *   hp  row b (stride ld_hp): h_prev; NMT_NO_BUF: zeros;
 *   hs  row b (stride ld_hs): receives h' (may be hp: in place);
 *   out data rows (stride ld_out): h' too; NMT_NO_BUF: not written.
 * A layer over time passes its count and t; a decoder step over arbitrary
 * rows passes t_cap 1, t 0 and count NMT_NO_BUF (all rows step) or an
 * int 0/1 mask (rows with 0 keep their state).  Requires
 * nmt_ops_enable_recurrent. */
nmt_status nmt_op_gru_cell(nmt_ops *ops, nmt_buf z, uint32_t ld_z, nmt_buf hg, uint32_t ld_hg, nmt_buf hp,
                           uint32_t ld_hp, nmt_buf hs, uint32_t ld_hs, nmt_buf out, uint32_t ld_out, nmt_buf count,
                           uint32_t n_seq, uint32_t t_cap, uint32_t t, int reverse, uint32_t h);

/* Input pre-activations of GRUs fed a shared projection scaled per row
 * (cl/recurrent.cl gru_scaled_input; BA-NMT's history GRUs, input
 * alpha_bj h_j): out row b * s_cap + j (b < n_rows, j < s_cap, stride
 * ld_out, n columns) = alpha[b * ld_a + j] * p row (b / group) * s_cap + j
 * (stride ld_p: the projection h_j W_ih^T of sentence b / group, shared
 * by its group rows, e.g. beams) + bias (NMT_NO_BUF: none).  Write it
 * into the first 3h columns of nmt_op_gru_cell's z.  group divides
 * n_rows.  Requires nmt_ops_enable_recurrent. */
nmt_status nmt_op_gru_scaled_input(nmt_ops *ops, nmt_buf p, uint32_t ld_p, nmt_buf alpha, uint32_t ld_a, nmt_buf bias,
                                   uint32_t n_rows, uint32_t s_cap, uint32_t group, uint32_t n, nmt_buf out,
                                   uint32_t ld_out);

/* RNN helpers (cl/recurrent.cl; BA-NMT, issue 17).  Requires
 * nmt_ops_enable_recurrent.
 * nmt_op_act_rows: out row r (stride ld_out), c < n = tanh(x[r, c])
 * (maxout 0; out may be x: in place) or max(x[r, 2c], x[r, 2c + 1])
 * (maxout 1: x rows 2n wide), r < rows. */
nmt_status nmt_op_act_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t rows, uint32_t n, int maxout, nmt_buf out,
                           uint32_t ld_out);
/* out row b (stride ld_out, n columns) = sum_{j < s_cap} alpha[b * ld_a
 * + j] * x row b * s_cap + j (stride ld_x), b < n_rows: per-row weighted
 * sums over positions (BA-NMT's history sums); x NMT_NO_BUF: zeros. */
nmt_status nmt_op_weighted_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, nmt_buf alpha, uint32_t ld_a,
                                uint32_t n_rows, uint32_t s_cap, uint32_t n, nmt_buf out, uint32_t ld_out);
/* An embedding without position terms, int8 table (fp32 tables:
 * nmt_op_gather_rows): out row r (stride ld_out) = Q row tok[r] * qscale
 * [tok[r]], d columns, r < rows; tok an int buffer of validated ids. */
nmt_status nmt_op_lookup_q8(nmt_ops *ops, nmt_buf tok, uint32_t rows, nmt_buf q, nmt_buf qscale, uint32_t d,
                            nmt_buf out, uint32_t ld_out);

/* Phrases as sequences (cl/phrase.cl; MG-SA's LSTM composition): phrase
 * row r = b * m_cap + m (r < n_sent * m_cap) of span (start, len) = (seg[2r],
 * seg[2r + 1]) becomes rows r * t_cap + t of p (float, d wide): the token
 * rows b * n_cap + start + t of x (row stride ld_x) for t < len, zero rows
 * after; count[r] (int) = len.  t_cap must be >= every len (n-grams: n).
 * Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_span_tokens(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf seg, uint32_t n_sent,
                              uint32_t m_cap, uint32_t t_cap, uint32_t d, nmt_buf p, nmt_buf count);

/* g[r] (row stride ld_g) = h[r * t_cap + len - 1] (row stride ld_h), the
 * state after phrase r's last token (zero for len 0), r < rows.  Requires
 * nmt_ops_enable_phrase. */
nmt_status nmt_op_span_last(nmt_ops *ops, nmt_buf h, uint32_t ld_h, nmt_buf seg, uint32_t rows, uint32_t t_cap,
                            uint32_t d, nmt_buf g, uint32_t ld_g);

/* Windows of positions as rows (cl/phrase.cl window_rows; a 1-D
 * convolution over positions is this and one GEMM, layers.h
 * nmt_layer_conv1d): row s * t_out + t of y (row stride ld_y >= n * d)
 * holds, for i < n, the row of position p = t * stride + i - pad of
 * sequence s in x (rows s * n_cap + p, stride ld_x) when 0 <= p < len[s]
 * (int [n_seq]; len NMT_NO_BUF: p < n_cap), else zeros.  Requires
 * nmt_ops_enable_phrase. */
nmt_status nmt_op_window_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf len, uint32_t n_seq,
                              uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t d, nmt_buf y,
                              uint32_t ld_y);

/* Phrase-based attention (issue 16, docs/ARCHITECTURES.md; cl/phrase.cl
 * pattn_*): one softmax per query over the concatenated keys of up to
 * NMT_PATTN_MAX_SEG segments (n-gram types).  Query sequence s < n_seq
 * (lq queries at positions q_pos0 + i, rows s * lq + i) reads key/value
 * sequence m = s / group.  Segment g's key j < lk_max (the window of
 * positions ending at j) scores, for head h,
 *   S = scale * sum_{u < n_win} qtap_u . k[j - n_win + 1 + u]   (rows < 0: 0)
 * with scale = 1 / sqrt(n_win * d_head); tap u < n_ext is columns
 * [(h * n_ext + u) * d_head, +d_head) of qx (row stride qx_ld), tap
 * n_win - 1 is head h's columns of q when q.mem (n_win = n_ext + 1), else
 * n_win = n_ext; key row j of sequence m is k + m * k_stride + j * k_ld,
 * head columns [h * d_head, +d_head); v likewise (v_stride, v_ld).  ConvKV:
 * n_win 1 over convolved keys; QueryK: n_win n over token keys.  Valid
 * keys: lo <= j < key_len[m] (or key_len_const), and j <= position when
 * causal; queries at positions below q_lo have none; a row without one
 * gives zeros.  Probabilities go to p (float,
 * row (s * H + h) * lq + i, n_segs * lk_max columns, segment g at g *
 * lk_max; the trainer's backward reads them), the output to head h's
 * columns of out (row stride out_ld). */
#define NMT_PATTN_MAX_SEG 4
typedef struct nmt_pattn_seg {
    nmt_buf q; uint32_t q_ld;      /* optional: the window's last tap */
    nmt_buf qx; uint32_t qx_ld, n_ext;
    nmt_buf k; uint32_t k_ld;
    nmt_buf v; uint32_t v_ld;
    uint64_t k_stride, v_stride;   /* key / value sequence m starts m * stride elements in */
    uint32_t lo;
} nmt_pattn_seg;
typedef struct nmt_pattn_args {
    uint32_t n_seq, lq, q_pos0, lk_max, group, n_heads, d_head;
    nmt_buf key_len; uint32_t key_len_const;
    int causal;
    uint32_t q_lo;
    uint32_t n_segs;
    nmt_pattn_seg seg[NMT_PATTN_MAX_SEG];
    /* optional (int): every segment's key and value at position p of
     * sequence m are those of sequence kv_row[p * kv_row_ld + m] (a beam's
     * rows reading the decoder caches where each position was written, as
     * nmt_attn_args.kv_row); only the fused kernel takes it
     * (nmt_ops_pattn_kv_row), elsewhere NMT_ERR_UNSUPPORTED */
    nmt_buf kv_row; uint32_t kv_row_ld;
    nmt_buf p;
    nmt_buf out; uint32_t out_ld;
} nmt_pattn_args;

static inline uint32_t nmt_pattn_n_win(const nmt_pattn_seg *g) { return g->n_ext + (g->q.mem != NULL); }

/* Requires nmt_ops_enable_phrase. */
nmt_status nmt_op_pattn(nmt_ops *ops, const nmt_pattn_args *a);
/* 1 when nmt_op_pattn takes a kv_row table for heads of d_head (its fused
 * kernel: not NMT_ATTN_SPLIT, d_head <= 128, the phrase kernels enabled). */
int nmt_ops_pattn_kv_row(const nmt_ops *ops, uint32_t d_head);
/* The argument checks of nmt_op_pattn (and of its backward). */
nmt_status nmt_pattn_check(const nmt_pattn_args *a);

/* Additive (Bahdanau) attention, one target step (cl/additive.cl; BA-NMT,
 * issue 17, docs/ARCHITECTURES.md).  Row b < n_rows (a decoder state)
 * reads sentence m = b / group (beams share a sentence's K, H and len),
 * whose valid positions are j < n = min(len[m], s_cap) (len int [n_rows /
 * group rounded up]):
 *   e[b,j]     = v . tanh(q[b,:] + K[m,j,:] (+ E1[b,j,:]) (+ E2[b,j,:]))
 *   alpha[b,j] = softmax over j < n of e[b,:], 0 for n <= j < s_cap
 *   out[b,:]   = sum_{j < n} alpha[b,j] H[m,j,:]          (zeros when n = 0)
 * q [n_rows, a_dim] is W s~ + bias (a GEMM); K = U h_j, computed once per
 * sentence, row (m, j) = m * s_cap + j; E1 / E2 (optional, NMT_NO_BUF) are
 * extra per-row, per-position terms added inside the tanh — BA-NMT's
 * source- and target-history terms — row (b, j) = b * s_cap + j; v [a_dim];
 * H rows (m, j) like K, d_h wide; alpha dense [n_rows, s_cap] (the
 * backward, the history updates and the alignment output read it); out
 * [n_rows, d_h] with its own stride (a slice of a concatenated buffer).
 * Requires nmt_ops_enable_additive. */
typedef struct nmt_additive_args {
    uint32_t n_rows, s_cap, a_dim, d_h, group;
    nmt_buf q; uint32_t q_ld;
    nmt_buf k; uint32_t k_ld;
    nmt_buf e1; uint32_t e1_ld;    /* optional */
    nmt_buf e2; uint32_t e2_ld;    /* optional */
    nmt_buf v;
    nmt_buf h; uint32_t h_ld;
    nmt_buf len;
    nmt_buf alpha;
    nmt_buf out; uint32_t out_ld;
} nmt_additive_args;

nmt_status nmt_op_additive_attn(nmt_ops *ops, const nmt_additive_args *a);
/* The argument checks of nmt_op_additive_attn (and of its backward). */
nmt_status nmt_additive_check(const nmt_additive_args *a);

/* Attention alignments (cl/align.cl, runtime/ops/ops_align.c): the softmax
 * probabilities of a cross-attention's queries over its keys, averaged over
 * heads (head 0) or of head `head` (1-based), recomputed from q and k:
 *   out[r, j] = mean_h softmax_j(q[r, h] . k[m, j, h] / sqrt(d_head)),
 * m = r / group, j < min(key_len[m], lk_max); 0 for the other j < lk_max.
 * q rows q_ld apart; key j of sequence m at k + m * kv_stride + j * k_ld;
 * out [rows, out_ld], out_ld >= lk_max.  Requires nmt_ops_enable_align. */
nmt_status nmt_ops_enable_align(nmt_ops *ops);
nmt_status nmt_op_attn_align(nmt_ops *ops, uint32_t rows, uint32_t group, uint32_t n_heads, uint32_t d_head,
                             uint32_t head, nmt_buf q, uint32_t q_ld, nmt_buf k, uint32_t k_ld, uint64_t kv_stride,
                             nmt_buf key_len, uint32_t lk_max, nmt_buf out, uint32_t out_ld);

/* The beam search's candidates (cl/topk.cl, runtime/ops/ops_topk.c): per row r
 * of x (n logits, stride ld) the log-softmax, bit for bit nmt_op_log_softmax's,
 * fused with the k <= ops->topk_max entries of largest score[r] + lp (ties:
 * the lower id first; NaN never), written into out as uint32 words: lp bits
 * at [r*k + i], ids at [rows*k + r*k + i] (rank order; missing: -inf, -1),
 * the EOS's lp bits at [2*rows*k + r].  A row whose score is not > -inf is
 * not searched (all missing).  One work-group of ops->reduce_wg per row.
 * nmt_ops_enable_topk sets topk_max: NMT_TOPK_MAX or less, as the device's
 * local memory holds reduce_wg * topk_max candidates; NMT_ERR_UNSUPPORTED
 * when it holds fewer than 3 or the kernel cannot take that local size
 * (the caller then reads the whole distribution). */
#define NMT_TOPK_MAX 17u
nmt_status nmt_ops_enable_topk(nmt_ops *ops);
nmt_status nmt_op_topk_logprobs(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                                uint32_t k, uint32_t eos, nmt_buf out);
/* The same, and the greedy step's choice written on the device (greedy
 * steps chained without the host, runtime/session/session.c): for every row whose
 * score is > -inf, tok[r] = the id of its first ranked entry with a key
 * > -inf that is not eos when no_eos (eos when there is none) and
 * score[r] = that key (score + lp: the host's float sum).  That is the
 * token and the score nmt_beam_advance_topk gives the row at beam 1.  Dead
 * rows are left as they are.  score and tok may be parts of one buffer. */
nmt_status nmt_op_topk_pick(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                            uint32_t k, uint32_t eos, nmt_buf out, int no_eos, nmt_buf tok);

/* Beam search steps chained on the device (cl/beam.cl, runtime/ops/ops_beam.c;
 * runtime/session/session.c decode_chained).  nmt_op_beam_advance: for each
 * sentence s < rows / K, what nmt_beam_advance_topk does to its K rows at
 * step t from the candidates cand (nmt_op_topk_logprobs's layout, k a
 * row; scores ranked by score[r] + lp) when the only constraints are
 * min_len and each sentence's length limit: tok[j], score[j] and back[j]
 * of its rows are the beam's next_tok, score and back after the step, the
 * same bits.  state: 3 ints a sentence (done, finished hypotheses, length
 * limit), 0, 0, max_len at the start of a search, kept by the kernel.
 * K <= NMT_BEAM_DEVICE_MAX.  nmt_op_kv_table_permute: entries (p, r) of the
 * table tab (positions of ld ints) become old (p, back[r]) for p <
 * positions, r < rows; NMT_ERR_UNSUPPORTED when ld ints take more than half
 * the device's local memory. */
#define NMT_BEAM_DEVICE_MAX 8u
typedef struct nmt_beam_step {
    nmt_buf cand, state, tok, score, back;
    uint32_t rows, k, K, V, eos, t, min_len;
} nmt_beam_step;
nmt_status nmt_ops_enable_beam(nmt_ops *ops);
nmt_status nmt_op_beam_advance(nmt_ops *ops, const nmt_beam_step *b);
int nmt_ops_kv_permute_fits(const nmt_ops *ops, uint32_t ld); /* 1: the kernel exists and ld ints fit */
nmt_status nmt_op_kv_table_permute(nmt_ops *ops, nmt_buf tab, uint32_t ld, uint32_t positions, nmt_buf back,
                                   uint32_t rows);
/* nmt_ops_chain_open: 1 while ops have been recorded and not yet enqueued
 * (the session reads a chained beam step's candidates after its reorder,
 * so that the permutation joins the recording). */
static inline int nmt_ops_chain_open(const nmt_ops *ops) { return ops->chain_n > 0; }

#endif
