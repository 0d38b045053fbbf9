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
/* Programs of several files (runtime/device/device.h, nmt_device_program;
 * issue 54: on PoCL a build costs about as much for one small file as for
 * several): attention.cl with beam.cl, both without options; elementwise.cl,
 * norm.cl and topk.cl with topk's options where the three agree
 * (ops->rows_opts).  NMT_OPS_TOPK_MIN: the smallest k the device top-k
 * takes (beam 1 with a minimum length). */
#define NMT_OPS_ATTN_PROGRAM "attention+beam"
#define NMT_OPS_ROWS_PROGRAM "elementwise+norm+topk"
#define NMT_OPS_ROWS_OPTS 96
#define NMT_OPS_TOPK_MIN 3u
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
 * weights x fp32 products of a class whose chain kernel is class cls's
 * (NMT_OPS_CHAIN_Q8 + cls, gemm_q8_chain; ops_internal.h
 * nmt_ops_chain_host); 0 and 1: fp32 products, the NT m2 and m16 classes'
 * (gemm_chain) */
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
     * gemm_i8_chain): k_chain[cls] of the NT classes' own programs (fp32
     * products), k_q8_chain[cls] of the q8 ones (int8 weights x fp32), of
     * the classes that host a chain (nmt_ops_chain_host: the m2 class for
     * both where their vector widths agree, the m16 one NULL then),
     * k_i8_chain above (int8 x int8); chain_on (nmt_ops_chain_enable: inference
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
    /* issue 54: the options of the one program of elementwise.cl, norm.cl
     * and topk.cl (NMT_OPS_ROWS_PROGRAM; topk's options, nmt_ops_init), ""
     * where they differ and each has its own */
    char rows_opts[NMT_OPS_ROWS_OPTS];
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

/* C[M,N] = alpha * A[M,K] * op(B) + beta * C (+ bias[N]) (then the
 * activation `relu`: 0 none, 1 = NMT_ACT_RELU, NMT_ACT_GELU, NMT_ACT_SWISH,
 * the bits of nmt_op_act after the product; every product op below takes
 * the same argument, and so do the layers of layers.h).
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

/* Whether a product over `rows` rows should take GELU or swish in its
 * epilogue rather than leave it to nmt_op_act: always on GPUs and other
 * devices; on CPU devices only up to NMT_ACT_FUSE_CPU_ROWS rows, where the
 * launch saved is worth more than the epilogue's scalar exp/erf (PoCL
 * vectorises the act kernel across work-items, not the epilogue's loop:
 * docs/PERFORMANCE.md, "GELU and swish in the product's epilogue").
 * Both ways give the same bits. */
#define NMT_ACT_FUSE_CPU_ROWS 8u
int nmt_ops_fuse_act(const nmt_ops *ops, uint32_t rows);

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

#endif
