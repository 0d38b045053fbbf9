/* SPDX-License-Identifier: MIT */
/* ops_internal.h — what the op layer's files (runtime/ops/ops*.c) share and
 * nothing above them calls: building product kernels and their options,
 * launches with the layer's fixed local sizes, the chain recorder's entry
 * points, the deferred and partial releases.  The op layer's face is
 * ops.h; tests of these internals include this header too. */
#ifndef NMT_OPS_INTERNAL_H
#define NMT_OPS_INTERNAL_H

#include "ops.h"
#include "ops_attn.h"
#include "ops_beam.h"
#include "ops_phrase.h"
#include "ops_rec.h"


/* The flag bits of a product's activation `act` (NMT_ACT_*: 0 none, 1 ReLU,
 * 2 GELU, 3 swish), as cl/common.cl's act_flags and cl/chain.cl's
 * CHAIN_FLAG_* read them. */
static inline int nmt_ops_act_flags(int act) {
    return act == NMT_ACT_RELU ? 2 : act == NMT_ACT_GELU ? 8 : act == NMT_ACT_SWISH ? 16 : 0;
}

/* Subgroup reductions (runtime/ops/ops_sg.c; whether a device takes them:
 * nmt_device_sg_wanted, device.h).  nmt_ops_sg_setup: sets ops->sg_size
 * once the kernels exist (nmt_ops_init calls it). */
nmt_status nmt_ops_sg_setup(nmt_ops *ops);

/* Build a deferred product class now: fp32 NT (nmt_ops_init_session) or
 * int8 weights x fp32 (nmt_ops_enable_q8 on such ops); NMT_OK at once when
 * it exists or is not deferred. */
nmt_status nmt_ops_nt_ready(nmt_ops *ops, nmt_gemm_class cls);
nmt_status nmt_ops_q8_ready(nmt_ops *ops, nmt_gemm_class cls);

/* For the op files (ops*.c): build one product kernel (ops->k_gemm[op][cls])
 * from ops->cfg; check the operands every product shares; launch a product
 * kernel whose arguments are set (blocks of cfg->tm x cfg->tn). */
nmt_status nmt_ops_gemm_kernel(nmt_ops *ops, nmt_gemm_op op, nmt_gemm_class cls);
/* The largest k of topk_logprobs (its TOPK_MAX) at local size wg: what the
 * device's local memory holds, at most NMT_TOPK_MAX (ops_topk.c). */
uint32_t nmt_ops_topk_max_k(const nmt_device *dev, size_t wg);
/* topk.cl's build options for local size wg and k (the joined rows program
 * takes the same string, ops->rows_opts). */
void nmt_ops_topk_opts(char opts[NMT_OPS_ROWS_OPTS], size_t wg, uint32_t k, int subgroups);
/* The class whose program holds the chain kernel (gemm_chain for op NT,
 * gemm_q8_chain for Q8; ops_chain.c) of class cls's few-row products: the
 * m2 class's for the m16 class too when both are ours and sum along K in
 * vectors of one width, so one chain kernel serves 1-4 rows and PoCL
 * compiles one, not two (a chain product's bits depend on GEMM_VW alone,
 * cl/chain.cl CHAIN_ROWS; its GEMM_TN only blocks the columns); else cls. */
nmt_gemm_class nmt_ops_chain_host(const nmt_ops *ops, nmt_gemm_op op, nmt_gemm_class cls);
/* The build options (-D knobs) of that kernel's program. */
#define NMT_OPS_GEMM_OPTS 160
void nmt_ops_gemm_opts(const nmt_ops *ops, nmt_gemm_op op, nmt_gemm_class cls, char opts[NMT_OPS_GEMM_OPTS]);
nmt_status nmt_ops_check_gemm(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda,
                              float beta, nmt_buf C, uint32_t ldc, nmt_buf bias);
nmt_status nmt_ops_launch_gemm(nmt_ops *ops, cl_kernel k, const nmt_gemm_cfg *c, uint32_t M, uint32_t N,
                               const char *kname);
/* The arguments the int8-weight product kernels share (kernel_args.h):
 * head M, N, K, alpha, A (mem, offset, ld); tail beta, C (mem, offset,
 * ld), bias (mem, offset; C when absent) and the flags (bias, activation). */
struct args;
void nmt_ops_args_gemm_head(struct args *a, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                            uint32_t lda);
void nmt_ops_args_gemm_tail(struct args *a, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias, int relu);

/* ops_i8dot.c, for nmt_op_gemm_q8: 1 if a product of class cls with M x K
 * activations runs int8 x int8 (chosen, built, and A fits the scratch);
 * then nmt_op_gemm_q8's work that way (arguments already checked). */
int nmt_ops_i8_fits(const nmt_ops *ops, nmt_gemm_class cls, uint32_t M, uint32_t K);
nmt_status nmt_ops_gemm_q8_as_i8(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                                 uint32_t lda, nmt_buf Q, uint32_t ldq, nmt_buf scale, float beta, nmt_buf C,
                                 uint32_t ldc, nmt_buf bias, int relu);

/* Enqueue kernel k over n[0..dims) work-items with the op layer's fixed
 * local size (ops->wg_max in dimension 0, 1 elsewhere; global sizes padded
 * to multiples, surplus work-items return); any n[d] == 0 is a no-op.  For
 * the op files (ops_*.c). */
nmt_status nmt_ops_launch(nmt_ops *ops, cl_kernel k, cl_uint dims, const size_t *n, const char *kernel);

/* nmt_ops_launch with explicit local sizes lws[0..dims); n[] is padded up to
 * multiples of them. */
nmt_status nmt_ops_launch_local(nmt_ops *ops, cl_kernel k, cl_uint dims, const size_t *n, const size_t *lws,
                                const char *kernel);

/* ops_attn.c, called by the init with the attention program: creates
 * attn_group where the device runs it in work-groups of its size (else it
 * stays NULL and attn_fused serves) and reads $NMT_EDGE_ATTN. */
nmt_status nmt_ops_attn_setup(nmt_ops *ops, cl_program prog);

/* Record an embedding (nmt_op_embed's launch, or with E_scale, an int8
 * table E and its row scales, nmt_op_embed_q8's, into the int8 recording
 * the step's products will take); the position table PT of pt_rows rows
 * or, pt_rows 0, none; internal, *taken as above). */
nmt_status nmt_ops_chain_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, nmt_buf E,
                               nmt_buf E_scale, uint32_t d, float scale, nmt_buf out, nmt_buf PT, uint32_t pt_rows,
                               int *taken);
/* Record a top-k launch (nmt_op_topk_logprobs / nmt_op_topk_pick's
 * topk_logprobs; internal, *taken as above): only into a recording a
 * product began, and only where the reductions are the work-group tree's
 * (no subgroups), whose order the chained lanes follow. */
nmt_status nmt_ops_chain_topk(nmt_ops *ops, nmt_buf x, uint32_t rows, uint32_t n, uint32_t ld, nmt_buf score,
                              uint32_t k, uint32_t eos, nmt_buf out, uint32_t pick, nmt_buf tok, int *taken);
/* Record nmt_op_attention's attn_fused launch (internal: nmt_op_attention
 * calls it with its scale, packed kinds and radii; *taken as above). */
struct nmt_attn_args;
nmt_status nmt_ops_chain_attn(nmt_ops *ops, const struct nmt_attn_args *p, float scale, cl_uint kinds,
                              const cl_int *radii, int *taken);
/* Record a product of fp32 rows A with int8 weights Q and their row scales
 * sq: C = A Q^T (+ bias) (ReLU), or with R, C = A Q^T (+ bias) + R (the
 * product of gemm_i8_nt_ln / gemm_q8_nt_ln); alpha 1, beta 0 (internal;
 * *taken as above).  i8: int8 x int8, A quantized per row as quant_rows
 * does (where that path is in use: the caller checks; K <=
 * NMT_OPS_I8_FUSE_ROW_MAX); else int8 weights x fp32 with gemm_q8_nt's sums
 * of the rows' class. */
nmt_status nmt_ops_chain_q8(nmt_ops *ops, int i8, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda,
                            nmt_buf Q, uint32_t ldq, nmt_buf sq, nmt_buf bias, nmt_buf C, uint32_t ldc, nmt_buf R,
                            uint32_t ldr, int relu, int *taken);
/* Record nmt_op_gate_i8's gemm_i8_gate launch (i8) or nmt_op_gate_q8's
 * gemm_q8_gate (after their checks; flags as the kernels': bit 0 b1, bit 1
 * b2, bit 2 accumulate; *taken as above), in a chain of that path's
 * products. */
nmt_status nmt_ops_chain_gate(nmt_ops *ops, int i8, uint32_t rows, uint32_t d, uint32_t dr, nmt_buf x, uint32_t ld_x,
                              nmt_buf w1, nmt_buf s1, nmt_buf b1, nmt_buf w2, nmt_buf s2, nmt_buf b2, nmt_buf out,
                              uint32_t ld_out, cl_uint flags, int *taken);

/* The fp16-compute kernels' part of it (ops_f16.c). */
void nmt_ops_release_f16(nmt_ops *ops);

/* For op files with products of their own (ops_f16.c): the checks of
 * nmt_op_gemm_q8 with a weight W [N, K] (stride ldw, in elements); launch
 * with nmt_ops_launch_gemm. */
/* The token embedding's launch with a given kernel (embed, embed_f16,
 * embed_q8: the same arguments; E fp32, half or int8, and for int8 its row
 * scales E_scale, passed after E; absent for the others).  The position
 * terms come from the ops' table (nmt_ops_set_pos_table) where it has the
 * position and d. */
nmt_status nmt_ops_embed_kernel(nmt_ops *ops, cl_kernel k, const char *name, nmt_buf tok, uint32_t rows,
                                uint32_t seq_len, uint32_t pos0, nmt_buf E, nmt_buf E_scale, uint32_t d, float scale,
                                nmt_buf out);
nmt_status nmt_ops_gemm_check(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda, nmt_buf W,
                              uint32_t ldw, float beta, nmt_buf C, uint32_t ldc, nmt_buf bias);

/* Record C = A B^T (+ bias) (+ R) (ReLU) of M rows (internal; *taken 0:
 * not chainable, the caller launches it). */
nmt_status nmt_ops_chain_prod(nmt_ops *ops, uint32_t M, uint32_t N, uint32_t K, nmt_buf A, uint32_t lda,
                              nmt_buf B, uint32_t ldb, nmt_buf bias, nmt_buf C, uint32_t ldc, nmt_buf R,
                              uint32_t ldr, int relu, int *taken);
/* Record out = LN(x (+ res)) * gamma + beta of rows x d (rows contiguous,
 * stride d; internal, *taken as above). */
nmt_status nmt_ops_chain_ln(nmt_ops *ops, uint32_t rows, uint32_t d, nmt_buf x, uint32_t ldx, nmt_buf res,
                            uint32_t ldr, nmt_buf out, uint32_t ldo, nmt_buf gamma, nmt_buf beta, float eps,
                            int *taken);

/* Build cl/gemm_i8.cl's one-work-item-per-row program (-DI8_ROW=1) with
 * class cls's options, once: k_i8_gate, k_i8_ln and, on CPU devices,
 * k_i8_chain (runtime/ops/ops_rows.c; internal). */
nmt_status nmt_ops_i8_rows_build(nmt_ops *ops, nmt_gemm_class cls);

/* The beam kernels' part of nmt_ops_release (ops_beam.c). */
void nmt_ops_release_beam(nmt_ops *ops);

/* Record the two launches above into the chain (internal: they call these
 * first, after their checks; *taken as nmt_ops_chain_topk's): only into a
 * recording a product began, rows <= NMT_OPS_CHAIN_ROWS. */
nmt_status nmt_ops_chain_beam(nmt_ops *ops, const nmt_beam_step *b, int *taken);
nmt_status nmt_ops_chain_kv_permute(nmt_ops *ops, nmt_buf tab, uint32_t ld, uint32_t positions, nmt_buf back,
                                    uint32_t rows, int *taken);

#endif
