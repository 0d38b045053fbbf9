/* SPDX-License-Identifier: MIT */
/* ref_ops.h — naive host references of every nmt_op_* in runtime/ops/ops.h.
 *
 * One function per op with the same semantics and argument order, except
 * that operands are host pointers already positioned at the operand's first
 * element (an nmt_buf's offset becomes pointer arithmetic) and nothing is
 * validated.  They are deliberately plain loops: the obvious formula,
 * accumulated in double, rounded to float once when stored.  Use them to
 * check kernels and to build whole-model reference forwards.
 *
 * Aliasing mirrors the ops: ref_layernorm's out may alias x or res; every
 * other output must not overlap its inputs (except gate_accum's out, which
 * is read when accumulating). */
#ifndef NMT_REF_OPS_H
#define NMT_REF_OPS_H

#include <stdint.h>

#include "format.h"
#include "ops.h"

/* For the whole-model references (ref_model.c, ref_banmt.c): the fp32 data
 * of the tensor named printf(fmt, ...) in f; a missing tensor aborts with
 * "<who>: missing <name>".  And a metadata integer of f (def when absent). */
const float *ref_tensor(const nmt_file *f, const char *who, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int64_t ref_meta_i64(const nmt_file *f, const char *key, int64_t def);

/* C[M,N] = alpha * A[M,K] * op(B) + beta * C (+ bias[N]) (then the
 * activation `relu`: NMT_ACT_* 1 ReLU, 2 GELU, 3 swish; 0 none).
 * trans_b: B is [N,K] (row n = weights of output n), else [K,N].
 * beta == 0: C is not read.  bias may be NULL. */
void ref_gemm(int trans_b, uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A, uint32_t lda,
              const float *B, uint32_t ldb, float beta, float *C, uint32_t ldc, const float *bias, int relu);

/* Int8 weights with per-row scales: W[n,k] = Q[n,k] * scale[n] (Q is [N,K],
 * row stride ldq); otherwise as ref_gemm with trans_b = 1. */
void ref_gemm_q8(uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A, uint32_t lda, const int8_t *Q,
                 uint32_t ldq, const float *scale, float beta, float *C, uint32_t ldc, const float *bias, int relu);

/* Sinusoidal position encoding P(pos, c) for width d (fairseq/tensor2tensor):
 * w_i = 10000^(-i/(d/2-1)) (w_i = 1 when d/2 == 1); sin(pos*w_c) for
 * c < d/2, cos(pos*w_{c-d/2}) for d/2 <= c < 2*(d/2), 0 for the last column
 * of an odd d. */
double ref_sinusoid(uint32_t pos, uint32_t c, uint32_t d);

/* ON-LSTM's cumax: sum_{l <= k} softmax(x)_l over the n values of x. */
double ref_cumax(const double *x, uint32_t n, uint32_t k);

/* One GRU step of one row in double (ops.h nmt_op_gru_cell): xg, hg (3h
 * each, order r, z, n; hg NULL: zeros) the input and recurrent
 * pre-activations, hp (h; NULL: zeros) the previous state; out (h) =
 * (1 - u) n + u hp, u = sigmoid(xz + hz), n = tanh(xn + sigmoid(xr + hr) hn).
 * keep (5h, or NULL) receives r, u, n, hn, hp as the kernel keeps them. */
void ref_gru_cell(const double *xg, const double *hg, const double *hp, uint32_t h, double *out, double *keep);

/* out[r,:] = E[tok[r],:] * scale + P(pos0 + r % seq_len, :), rows x d. */
void ref_embed(const int32_t *tok, uint32_t rows, uint32_t seq_len, uint32_t pos0, const float *E, uint32_t d,
               float scale, float *out);

/* out[r,:] = (v - mean) / sqrt(var + eps) * gamma + beta with v = x[r,:]
 * (+ res[r,:] if res); population variance; rows are contiguous. */
void ref_layernorm(const float *x, const float *res, float *out, uint32_t rows, uint32_t d, const float *gamma,
                   const float *beta, float eps);

/* dst[i] += src[i]. */
void ref_add(float *dst, const float *src, uint32_t n);

/* x[i] = max(x[i], 0). */
void ref_relu(float *x, uint32_t n);

/* out[r,c] = (accumulate ? out[r,c] : 0) + x[r,c] * sigmoid(g[r,c]). */
void ref_gate_accum(const float *x, uint32_t ld_x, const float *g, uint32_t ld_g, float *out, uint32_t ld_out,
                    uint32_t rows, uint32_t d, int accumulate);

/* dst[r*ld_dst + c] = src[r*ld_src + c]. */
void ref_copy_rows(const float *src, uint32_t ld_src, float *dst, uint32_t ld_dst, uint32_t rows, uint32_t cols);

/* dst row r = src row idx[r]. */
void ref_gather_rows(const float *src, uint64_t ld_src, float *dst, uint64_t ld_dst, const int32_t *idx,
                     uint32_t rows, uint32_t cols);

/* In-place log-softmax of each row (stride ld); a row whose entries are all
 * -INF is left unchanged. */
void ref_log_softmax(float *x, uint32_t rows, uint32_t n, uint32_t ld);

/* nmt_attn_args with host pointers (no scratch: the reference needs none). */
typedef struct ref_attn_args {
    uint32_t n_seq, lq, q_pos0, lk_max, group;
    uint32_t n_heads, d_head;
    const float *q; uint32_t q_ld;
    const float *k; uint32_t k_ld;
    const float *v; uint32_t v_ld;
    uint64_t kv_seq_stride;
    const int32_t *key_len; uint32_t key_len_const;  /* key_len NULL: key_len_const */
    int causal;
    uint32_t n_branches;
    nmt_branch branches[NMT_MAX_BRANCHES];
    float *out; uint32_t out_ld;
} ref_attn_args;

/* 1 if query i of query sequence s may attend to key j under branch br:
 * j < min(key_len[s/group], lk_max), causal => j <= pos, and the branch's
 * own mask (FW j <= pos, BW j >= pos, LOCAL |pos - j| <= k), pos = q_pos0 + i. */
int ref_attn_allowed(const ref_attn_args *a, uint32_t s, uint32_t i, uint32_t j, nmt_branch br);

/* out[s*lq+i, b*H*dh + h*dh + c] = sum_j softmax_j(q.k_j / sqrt(dh) over
 * allowed j) * v_j[h*dh + c]; rows without an allowed key get zeros. */
void ref_attention(const ref_attn_args *a);

/* Additive attention (nmt_op_additive_attn) in double on dense host arrays
 * — the FD checks of its backward perturb these inputs: q [n_rows, a_dim],
 * k [n_sent * s_cap, a_dim] (n_sent = ceil(n_rows / group)), e1 / e2
 * [n_rows * s_cap, a_dim] or NULL, v [a_dim], h [n_sent * s_cap, d_h], len
 * [n_sent]; alpha [n_rows, s_cap] (0 at masked positions) and out
 * [n_rows, d_h] (0 for a row without positions) are written. */
typedef struct ref_additive_args {
    uint32_t n_rows, s_cap, a_dim, d_h, group;
    const double *q, *k, *e1, *e2, *v, *h;
    const int32_t *len;
    double *alpha, *out;
} ref_additive_args;

void ref_additive_attn(const ref_additive_args *a);

#endif
