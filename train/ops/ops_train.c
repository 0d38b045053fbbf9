/* SPDX-License-Identifier: MIT */
/* ops_train.c — the training half of the kernel layer (ops_train.h): builds
 * cl/gemm_bwd.cl, norm_bwd.cl, elementwise_bwd.cl, attention_bwd.cl,
 * loss.cl and optim.cl, creates their kernels once, and turns each call into
 * argument setting plus non-blocking enqueues on the device's in-order
 * queue.  Same launch rules as ops.c: global sizes padded to multiples of
 * the local size (no non-uniform work-groups), per-row reductions one
 * work-group of reduce_wg work-items per row.  No allocation anywhere. */
#include "ops_train.h"

#include "kernel_args.h"
#include "ops_train_launch.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(NMT_HAVE_CLBLAST) && NMT_HAVE_CLBLAST
#include <clblast_c.h>
#define NMT_TRAIN_CLBLAST 1
#else
#define NMT_TRAIN_CLBLAST 0
#endif

#define NMT_TRAIN_GEMM_TM 4
#define NMT_TRAIN_GEMM_TN 4
#define NMT_TRAIN_GEMM_VW 4
#define NMT_TRAIN_GEMM_TM_CPU 6
#define NMT_TRAIN_GEMM_TN_CPU 32
#define NMT_TRAIN_GEMM_VW_CPU 16
#define NMT_TRAIN_K_CHUNK_CPU 256
#define NMT_TRAIN_REDUCE_WG_GPU 256
#define NMT_TRAIN_REDUCE_WG_CPU 64
#define NMT_TRAIN_WG_BUDGET 64
#define NMT_TRAIN_POS_LIMIT (1u << 30)

enum { P_GEMM_BWD, P_NORM_BWD, P_ELEM_BWD, P_ATTN_BWD, P_PHRASE_BWD, P_REC_BWD, P_LOSS, P_OPTIM, P_ADD_BWD, P_COUNT };

static const char *const program_names[P_COUNT] = {"gemm_bwd", "norm_bwd", "elementwise_bwd", "attention_bwd",
                                                   "phrase_bwd", "recurrent_bwd", "loss", "optim", "additive_bwd"};

typedef nmt_kernel_def kernel_def;

static const kernel_def kernel_defs[] = {
    {offsetof(nmt_train_ops, k_gemm_tn), P_GEMM_BWD, "gemm_tn", 0},
    {offsetof(nmt_train_ops, k_col_sum), P_GEMM_BWD, "col_sum", 0},
    {offsetof(nmt_train_ops, k_layernorm_bwd), P_NORM_BWD, "layernorm_bwd", 1},
    {offsetof(nmt_train_ops, k_layernorm_bwd_params), P_NORM_BWD, "layernorm_bwd_params", 0},
    {offsetof(nmt_train_ops, k_embed_bwd), P_ELEM_BWD, "embed_bwd", 0},
    {offsetof(nmt_train_ops, k_relu_bwd), P_ELEM_BWD, "relu_bwd", 0},
    {offsetof(nmt_train_ops, k_act_bwd), P_ELEM_BWD, "act_bwd", 0},
    {offsetof(nmt_train_ops, k_gate_bwd), P_ELEM_BWD, "gate_bwd", 0},
    {offsetof(nmt_train_ops, k_dropout), P_ELEM_BWD, "dropout", 0},
    {offsetof(nmt_train_ops, k_attn_bwd_scores), P_ATTN_BWD, "attn_bwd_scores", 0},
    {offsetof(nmt_train_ops, k_attn_bwd_probs), P_ATTN_BWD, "attn_bwd_probs", 0},
    {offsetof(nmt_train_ops, k_attn_bwd_ds), P_ATTN_BWD, "attn_bwd_ds", 0},
    {offsetof(nmt_train_ops, k_attn_bwd_dq), P_ATTN_BWD, "attn_bwd_dq", 0},
    {offsetof(nmt_train_ops, k_attn_bwd_dkv), P_ATTN_BWD, "attn_bwd_dkv", 0},
    {offsetof(nmt_train_ops, k_segment_max_bwd), P_PHRASE_BWD, "segment_max_bwd", 0},
    {offsetof(nmt_train_ops, k_span_last_bwd), P_PHRASE_BWD, "span_last_bwd", 0},
    {offsetof(nmt_train_ops, k_span_tokens_bwd), P_PHRASE_BWD, "span_tokens_bwd", 0},
    {offsetof(nmt_train_ops, k_window_rows_bwd), P_PHRASE_BWD, "window_rows_bwd", 0},
    {offsetof(nmt_train_ops, k_pattn_dp), P_PHRASE_BWD, "pattn_dp", 0},
    {offsetof(nmt_train_ops, k_pattn_ds), P_PHRASE_BWD, "pattn_ds", 0},
    {offsetof(nmt_train_ops, k_pattn_dq), P_PHRASE_BWD, "pattn_dq", 0},
    {offsetof(nmt_train_ops, k_pattn_dk), P_PHRASE_BWD, "pattn_dk", 0},
    {offsetof(nmt_train_ops, k_pattn_dv), P_PHRASE_BWD, "pattn_dv", 0},
    {offsetof(nmt_train_ops, k_lstm_cell_bwd), P_REC_BWD, "lstm_cell_bwd", 0},
    {offsetof(nmt_train_ops, k_onlstm_master_bwd), P_REC_BWD, "onlstm_master_bwd", 0},
    {offsetof(nmt_train_ops, k_gru_cell_bwd), P_REC_BWD, "gru_cell_bwd", 0},
    {offsetof(nmt_train_ops, k_gru_scaled_input_dp), P_REC_BWD, "gru_scaled_input_dp", 0},
    {offsetof(nmt_train_ops, k_gru_scaled_input_da), P_REC_BWD, "gru_scaled_input_da", 0},
    NMT_TKDEF(act_rows_bwd, P_REC_BWD), NMT_TKDEF(weighted_rows_da, P_REC_BWD), NMT_TKDEF(weighted_rows_dx, P_REC_BWD),
    {offsetof(nmt_train_ops, k_xent), P_LOSS, "xent", 1},
    {offsetof(nmt_train_ops, k_adam), P_OPTIM, "adam", 0},
    {offsetof(nmt_train_ops, k_reduce_partial), P_OPTIM, "reduce_partial", 1},
    {offsetof(nmt_train_ops, k_reduce_final), P_OPTIM, "reduce_final", 1},
    {offsetof(nmt_train_ops, k_scale), P_OPTIM, "scale", 0},
    {offsetof(nmt_train_ops, k_fill), P_OPTIM, "fill", 0},
    {offsetof(nmt_train_ops, k_axpy), P_OPTIM, "axpy", 0},
    {offsetof(nmt_train_ops, k_additive_bwd_rows), P_ADD_BWD, "additive_bwd_rows", 1},
    {offsetof(nmt_train_ops, k_additive_bwd_dv), P_ADD_BWD, "additive_bwd_dv", 0},
};

/* ------------------------------------------------------------------------ */
/* Init / release                                                           */
/* ------------------------------------------------------------------------ */

void nmt_train_ops_release(nmt_train_ops *t) {
    if (t == NULL) return;
    nmt_kernel_table_release(t, kernel_defs, NMT_ARRAY_LEN(kernel_defs));
    memset(t, 0, sizeof *t);  /* programs belong to the device */
}

nmt_status nmt_train_ops_init(nmt_train_ops *t, nmt_device *dev) {
    if (t == NULL || dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const int cpu = dev->info.is_cpu;
    NMT_TRY(nmt_train_ops_init_gemm(t, dev, cpu ? NMT_TRAIN_GEMM_TM_CPU : NMT_TRAIN_GEMM_TM,
                                    cpu ? NMT_TRAIN_GEMM_TN_CPU : NMT_TRAIN_GEMM_TN,
                                    cpu ? NMT_TRAIN_GEMM_VW_CPU : NMT_TRAIN_GEMM_VW));
    t->k_chunk = cpu ? NMT_TRAIN_K_CHUNK_CPU : 0;
    return NMT_OK;
}

nmt_status nmt_train_ops_init_gemm(nmt_train_ops *t, nmt_device *dev, uint32_t tm, uint32_t tn, uint32_t vw) {
    if (t == NULL || dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (tm < 1 || tm > 8 || tn < 1 || tn > 32 || vw < 1 || vw > 16 || (vw & (vw - 1)) != 0)
        return NMT_ERR_INVALID_ARGUMENT;
    /* the training kernels are embedded in this library, not the runtime's */
    nmt_device_add_sources(dev, nmt_train_embedded_sources, nmt_train_embedded_source_count);
    memset(t, 0, sizeof *t);
    t->dev = dev;
    t->gemm = (dev->info.gemm == NMT_GEMM_CLBLAST && NMT_TRAIN_CLBLAST) ? NMT_GEMM_CLBLAST : NMT_GEMM_OWN;
    t->gemm_tm = tm;
    t->gemm_tn = tn;
    t->gemm_vw = tn % vw == 0 ? vw : 1;

    size_t dev_wg = dev->info.max_work_group_size ? dev->info.max_work_group_size : 1;
    size_t reduce_cap = dev->info.is_gpu ? NMT_TRAIN_REDUCE_WG_GPU : NMT_TRAIN_REDUCE_WG_CPU;
    reduce_cap = pow2_floor(NMT_MIN(reduce_cap, dev_wg));

    char opts[P_COUNT][96];
    snprintf(opts[P_GEMM_BWD], sizeof opts[P_GEMM_BWD], "-DGEMMT_TM=%u -DGEMMT_TN=%u -DGEMMT_VW=%u",
             (unsigned)t->gemm_tm, (unsigned)t->gemm_tn, (unsigned)t->gemm_vw);
    snprintf(opts[P_NORM_BWD], sizeof opts[P_NORM_BWD], "-DREDUCE_WG=%zu", reduce_cap);
    opts[P_ELEM_BWD][0] = '\0';
    opts[P_ATTN_BWD][0] = '\0';
    opts[P_PHRASE_BWD][0] = '\0';
    opts[P_REC_BWD][0] = '\0';
    snprintf(opts[P_LOSS], sizeof opts[P_LOSS], "-DREDUCE_WG=%zu", reduce_cap);
    snprintf(opts[P_OPTIM], sizeof opts[P_OPTIM], "-DREDUCE_WG=%zu", reduce_cap);
    snprintf(opts[P_ADD_BWD], sizeof opts[P_ADD_BWD], "-DREDUCE_WG=%zu", reduce_cap);

    cl_program progs[P_COUNT];
    for (int p = 0; p < P_COUNT; p++) {
        nmt_status s = nmt_device_program(dev, program_names[p], opts[p], &progs[p]);
        if (s != NMT_OK) {
            nmt_train_ops_release(t);
            return s;
        }
    }

    size_t reduce_wg = reduce_cap, wg_max = NMT_MIN((size_t)NMT_TRAIN_WG_BUDGET, dev_wg);
    nmt_status s = nmt_kernel_table_create(dev, t, kernel_defs, NMT_ARRAY_LEN(kernel_defs), progs, &wg_max,
                                           &reduce_wg);
    if (s != NMT_OK) {
        nmt_train_ops_release(t);
        return s;
    }
    t->reduce_wg = reduce_wg;
    t->norm_wg = dev->info.is_cpu ? 1 : reduce_wg;
    t->wg_max = wg_max;
    nmt_log(&dev->log, NMT_LOG_DEBUG, "train ops: gemm_tn=%s tile %ux%u vw %u, reduce_wg=%zu, wg_max=%zu",
            t->gemm == NMT_GEMM_CLBLAST ? "clblast" : "own", (unsigned)t->gemm_tm, (unsigned)t->gemm_tn,
            (unsigned)t->gemm_vw, t->reduce_wg, t->wg_max);
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Argument setting and launching                                           */
/* ------------------------------------------------------------------------ */

/* A buffer argument followed by its element offset. */
static void arg_buf(args *a, nmt_buf b) {
    arg_mem(a, b.mem);
    arg_u64(a, b.off);
}

/* `groups` work-groups of reduce_wg work-items. */
static nmt_status launch_groups(nmt_train_ops *t, cl_kernel k, size_t groups, const char *kernel) {
    if (groups == 0) return NMT_OK;
    size_t lws = t->reduce_wg, gws = groups * lws;
    return nmt_enqueue(t->dev, k, 1, &gws, &lws, kernel);
}

static int train_ok(const nmt_train_ops *t) { return t != NULL && t->dev != NULL && t->k_fill != NULL; }

/* 1 if [a, a+na) and [b, b+nb) of the same buffer intersect. */
static int overlaps(nmt_buf a, uint64_t na, nmt_buf b, uint64_t nb) {
    if (a.mem == NULL || b.mem == NULL || a.mem != b.mem || na == 0 || nb == 0) return 0;
    return (uint64_t)a.off < (uint64_t)b.off + nb && (uint64_t)b.off < (uint64_t)a.off + na;
}

/* Elements spanned by rows x cols at stride ld. */
static uint64_t span(uint64_t rows, uint64_t ld, uint64_t cols) { return rows ? (rows - 1) * ld + cols : 0; }

static const nmt_buf NO_BUF = {NULL, 0};

/* ------------------------------------------------------------------------ */
/* Linear layers                                                            */
/* ------------------------------------------------------------------------ */

nmt_status nmt_op_gemm_tn(nmt_train_ops *t, uint32_t M, uint32_t N, uint32_t K, float alpha, nmt_buf A,
                          uint32_t lda, nmt_buf B, uint32_t ldb, float beta, nmt_buf C, uint32_t ldc) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (M == 0 || N == 0) return NMT_OK;
    if (A.mem == NULL || B.mem == NULL || C.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (beta != 0.0f && beta != 1.0f) return NMT_ERR_INVALID_ARGUMENT;
    if (lda < M || ldb < N || ldc < N) return NMT_ERR_INVALID_ARGUMENT;
#if NMT_TRAIN_CLBLAST
    if (t->gemm == NMT_GEMM_CLBLAST && K > 0) {
        NMT_TRY(nmt_device_settle(t->dev)); /* CLBlast enqueues on the queue itself */
        cl_command_queue q = t->dev->queue;
        CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeYes, CLBlastTransposeNo, M, N, K,
                                            alpha, A.mem, A.off, lda, B.mem, B.off, ldb, beta, C.mem, C.off, ldc,
                                            &q, NULL);
        if (st != CLBlastSuccess) return nmt_cl_fail(t->dev, (cl_int)st, "CLBlastSgemm(tn)");
        return NMT_OK;
    }
#endif
    /* Long K in chunks (C accumulates from the second on): a work-group
     * then streams only a chunk of B's rows, which stays in cache for the
     * next groups; alpha distributes over the sum. */
    const uint32_t kc = t->k_chunk && K > 2 * t->k_chunk ? t->k_chunk : (K ? K : 1);
    for (uint64_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
        const uint32_t kn = (uint32_t)(K - k0 < kc ? K - k0 : kc);
        args a = args_begin(t->k_gemm_tn);
        arg_u32(&a, M);
        arg_u32(&a, N);
        arg_u32(&a, kn);
        arg_f32(&a, alpha);
        arg_buf(&a, nmt_buf_at(A, (size_t)k0 * lda));
        arg_u32(&a, lda);
        arg_buf(&a, nmt_buf_at(B, (size_t)k0 * ldb));
        arg_u32(&a, ldb);
        arg_f32(&a, k0 == 0 ? beta : 1.0f);
        arg_buf(&a, C);
        arg_u32(&a, ldc);
        NMT_TRY(args_end(t->dev, &a, "gemm_tn"));
        const size_t n[2] = {(N + t->gemm_tn - 1) / t->gemm_tn, (M + t->gemm_tm - 1) / t->gemm_tm};
        NMT_TRY(nmt_train_launch(t, t->k_gemm_tn, 2, n, "gemm_tn"));
        if (K == 0) break;
    }
    return NMT_OK;
}

nmt_status nmt_op_col_sum(nmt_train_ops *t, uint32_t rows, uint32_t cols, float alpha, nmt_buf X, uint32_t ld,
                          float beta, nmt_buf out) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (cols == 0) return NMT_OK;
    if (X.mem == NULL || out.mem == NULL || ld < cols) return NMT_ERR_INVALID_ARGUMENT;
    if (beta != 0.0f && beta != 1.0f) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_col_sum);
    arg_u32(&a, rows);
    arg_u32(&a, cols);
    arg_f32(&a, alpha);
    arg_buf(&a, X);
    arg_u32(&a, ld);
    arg_f32(&a, beta);
    arg_buf(&a, out);
    NMT_TRY(args_end(t->dev, &a, "col_sum"));
    const size_t n[1] = {(cols + 15u) / 16u}; /* 16 columns per work-item */
    return nmt_train_launch(t, t->k_col_sum, 1, n, "col_sum");
}

nmt_status nmt_op_linear_bwd(nmt_ops *ops, nmt_train_ops *t, uint32_t rows, uint32_t out_dim, uint32_t in_dim,
                             nmt_buf x, uint32_t ld_x, nmt_buf W, nmt_buf dy, uint32_t ld_dy, nmt_buf dx,
                             uint32_t ld_dx, float dx_beta, nmt_buf dW, nmt_buf db, float param_beta) {
    if (!train_ok(t) || ops == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (dy.mem == NULL || ld_dy < out_dim) return NMT_ERR_INVALID_ARGUMENT;
    if (dx.mem) {
        if (W.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
        /* dx[rows, in] = dy[rows, out] * W[out, in] */
        NMT_TRY(nmt_op_gemm(ops, 0, rows, in_dim, out_dim, 1.0f, dy, ld_dy, W, in_dim, dx_beta, dx, ld_dx, NO_BUF,
                            0));
    }
    if (dW.mem) {
        if (x.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
        NMT_TRY(nmt_op_gemm_tn(t, out_dim, in_dim, rows, 1.0f, dy, ld_dy, x, ld_x, param_beta, dW, in_dim));
    }
    if (db.mem) NMT_TRY(nmt_op_col_sum(t, rows, out_dim, 1.0f, dy, ld_dy, param_beta, db));
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Layer norm                                                               */
/* ------------------------------------------------------------------------ */

nmt_status nmt_op_layernorm_bwd(nmt_train_ops *t, nmt_buf x, nmt_buf res, nmt_buf dy, nmt_buf dx, int accumulate,
                                uint32_t rows, uint32_t d, nmt_buf gamma, float eps, nmt_buf dgamma, nmt_buf dbeta,
                                int param_accumulate, nmt_buf stats) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || dy.mem == NULL || dx.mem == NULL || gamma.mem == NULL || stats.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((dgamma.mem == NULL) != (dbeta.mem == NULL)) return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t n = (uint64_t)rows * d;
    if (overlaps(dx, n, x, n) || overlaps(dx, n, res, n) || overlaps(dx, n, dy, n))
        return NMT_ERR_INVALID_ARGUMENT;
    const int has_res = res.mem != NULL;

    args a = args_begin(t->k_layernorm_bwd);
    arg_buf(&a, x);
    arg_buf(&a, has_res ? res : x);
    arg_i32(&a, has_res);
    arg_buf(&a, dy);
    arg_buf(&a, dx);
    arg_i32(&a, accumulate ? 1 : 0);
    arg_u32(&a, d);
    arg_buf(&a, gamma);
    arg_f32(&a, eps);
    arg_buf(&a, stats);
    NMT_TRY(args_end(t->dev, &a, "layernorm_bwd"));
    {
        size_t lws = t->norm_wg ? t->norm_wg : 1, gws = (size_t)rows * lws;
        if (rows) NMT_TRY(nmt_enqueue(t->dev, t->k_layernorm_bwd, 1, &gws, &lws, "layernorm_bwd"));
    }
    if (dgamma.mem == NULL) return NMT_OK;

    a = args_begin(t->k_layernorm_bwd_params);
    arg_u32(&a, rows);
    arg_u32(&a, d);
    arg_buf(&a, x);
    arg_buf(&a, has_res ? res : x);
    arg_i32(&a, has_res);
    arg_buf(&a, dy);
    arg_buf(&a, stats);
    arg_buf(&a, dgamma);
    arg_buf(&a, dbeta);
    arg_i32(&a, param_accumulate ? 1 : 0);
    NMT_TRY(args_end(t->dev, &a, "layernorm_bwd_params"));
    const size_t g[1] = {(d + 15u) / 16u}; /* 16 columns per work-item */
    return nmt_train_launch(t, t->k_layernorm_bwd_params, 1, g, "layernorm_bwd_params");
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                              */
/* ------------------------------------------------------------------------ */

nmt_status nmt_op_segment_max_bwd(nmt_train_ops *t, nmt_buf arg, nmt_buf dg, uint32_t ld_g, uint32_t rows,
                                  uint32_t d, nmt_buf dx, uint32_t ld_x) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (arg.mem == NULL || dg.mem == NULL || dx.mem == NULL || ld_g < d || ld_x < d)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_segment_max_bwd);
    arg_buf(&a, arg);
    arg_buf(&a, dg);
    arg_u32(&a, ld_g);
    arg_u32(&a, rows);
    arg_u32(&a, d);
    arg_buf(&a, dx);
    arg_u32(&a, ld_x);
    NMT_TRY(args_end(t->dev, &a, "segment_max_bwd"));
    const size_t g[2] = {d, rows};
    return nmt_train_launch(t, t->k_segment_max_bwd, 2, g, "segment_max_bwd");
}

nmt_status nmt_op_span_last_bwd(nmt_train_ops *t, nmt_buf dg, uint32_t ld_g, nmt_buf seg, uint32_t rows,
                                uint32_t t_cap, uint32_t d, nmt_buf dh, uint32_t ld_h) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (dg.mem == NULL || seg.mem == NULL || dh.mem == NULL || ld_g < d || ld_h < d || t_cap == 0 ||
        (uint64_t)rows * t_cap > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_span_last_bwd);
    arg_buf(&a, dg);
    arg_u32(&a, ld_g);
    arg_buf(&a, seg);
    arg_u32(&a, rows);
    arg_u32(&a, t_cap);
    arg_u32(&a, d);
    arg_buf(&a, dh);
    arg_u32(&a, ld_h);
    NMT_TRY(args_end(t->dev, &a, "span_last_bwd"));
    const size_t g[2] = {d, (size_t)rows * t_cap};
    return nmt_train_launch(t, t->k_span_last_bwd, 2, g, "span_last_bwd");
}

nmt_status nmt_op_span_tokens_bwd(nmt_train_ops *t, nmt_buf dp, nmt_buf seg, uint32_t n_sent, uint32_t m_cap,
                                  uint32_t t_cap, uint32_t d, uint32_t n_cap, nmt_buf dx, uint32_t ld_x) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n_sent == 0 || m_cap == 0 || d == 0) return NMT_OK;
    const uint64_t rows = (uint64_t)n_sent * m_cap;
    if (dp.mem == NULL || seg.mem == NULL || dx.mem == NULL || ld_x < d || t_cap == 0 || n_cap == 0 ||
        rows * t_cap > UINT32_MAX || (uint64_t)n_sent * n_cap > INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_span_tokens_bwd);
    arg_buf(&a, dp);
    arg_buf(&a, seg);
    arg_u32(&a, m_cap);
    arg_u32(&a, (uint32_t)rows);
    arg_u32(&a, t_cap);
    arg_u32(&a, d);
    arg_u32(&a, n_cap);
    arg_buf(&a, dx);
    arg_u32(&a, ld_x);
    NMT_TRY(args_end(t->dev, &a, "span_tokens_bwd"));
    const size_t g[2] = {d, (size_t)(rows * t_cap)};
    return nmt_train_launch(t, t->k_span_tokens_bwd, 2, g, "span_tokens_bwd");
}

nmt_status nmt_op_window_rows_bwd(nmt_train_ops *t, nmt_buf dy, uint32_t ld_y, nmt_buf len, uint32_t n_seq,
                                  uint32_t n_cap, uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t d,
                                  nmt_buf dx, uint32_t ld_x) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || n_cap == 0 || d == 0) return NMT_OK;
    if (dy.mem == NULL || dx.mem == NULL || n == 0 || stride == 0 || t_out == 0 || ld_x < d ||
        (uint64_t)ld_y < (uint64_t)n * d || (uint64_t)n_seq * t_out > UINT32_MAX ||
        (uint64_t)n_seq * n_cap > INT32_MAX || (uint64_t)n_cap + pad > INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_window_rows_bwd);
    arg_buf(&a, dy);
    arg_u32(&a, ld_y);
    arg_buf(&a, len.mem ? len : dy); /* without len the kernel never reads the slot */
    arg_i32(&a, len.mem != NULL);
    arg_u32(&a, n_seq);
    arg_u32(&a, n_cap);
    arg_u32(&a, t_out);
    arg_u32(&a, n);
    arg_u32(&a, stride);
    arg_u32(&a, pad);
    arg_u32(&a, d);
    arg_buf(&a, dx);
    arg_u32(&a, ld_x);
    NMT_TRY(args_end(t->dev, &a, "window_rows_bwd"));
    const size_t g[2] = {d, (size_t)n_seq * n_cap};
    return nmt_train_launch(t, t->k_window_rows_bwd, 2, g, "window_rows_bwd");
}

nmt_status nmt_op_pattn_bwd(nmt_train_ops *t, const nmt_pattn_bwd_args *b) {
    if (!train_ok(t) || b == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_pattn_args *a = &b->fwd;
    NMT_TRY(nmt_pattn_check(a));
    if (a->n_seq == 0 || a->lq == 0 || a->n_heads == 0 || a->d_head == 0 || a->lk_max == 0) return NMT_OK;
    if (b->d_out.mem == NULL || b->ds.mem == NULL || b->d_out_ld < a->n_heads * a->d_head) return NMT_ERR_INVALID_ARGUMENT;
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g], *d = &b->grad[g];
        if (d->k.mem == NULL || d->v.mem == NULL || (s->q.mem && d->q.mem == NULL) || (s->n_ext && d->qx.mem == NULL))
            return NMT_ERR_INVALID_ARGUMENT;
    }
    const uint32_t p_ld = a->n_segs * a->lk_max, rows = a->n_seq * a->n_heads * a->lq, dh = a->d_head;
    const size_t n_kv = (a->n_seq + a->group - 1) / a->group;
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g];
        args k = args_begin(t->k_pattn_dp);
        arg_u32(&k, a->n_seq);
        arg_u32(&k, a->lq);
        arg_u32(&k, a->lk_max);
        arg_u32(&k, a->group);
        arg_u32(&k, a->n_heads);
        arg_u32(&k, dh);
        arg_buf(&k, s->v);
        arg_u32(&k, s->v_ld);
        arg_u64(&k, s->v_stride);
        arg_buf(&k, b->d_out);
        arg_u32(&k, b->d_out_ld);
        arg_buf(&k, a->p);
        arg_u32(&k, p_ld);
        arg_u32(&k, g * a->lk_max);
        arg_buf(&k, b->ds);
        NMT_TRY(args_end(t->dev, &k, "pattn_dp"));
        const size_t n[2] = {(size_t)a->n_seq * a->n_heads, a->lq};
        NMT_TRY(nmt_train_launch(t, t->k_pattn_dp, 2, n, "pattn_dp"));
    }
    args k = args_begin(t->k_pattn_ds);
    arg_u32(&k, rows);
    arg_u32(&k, p_ld);
    arg_buf(&k, a->p);
    arg_buf(&k, b->ds);
    NMT_TRY(args_end(t->dev, &k, "pattn_ds"));
    const size_t nr[1] = {rows};
    NMT_TRY(nmt_train_launch(t, t->k_pattn_ds, 1, nr, "pattn_ds"));
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g], *d = &b->grad[g];
        const uint32_t n_win = nmt_pattn_n_win(s), col0 = g * a->lk_max;
        const float scale = (float)(1.0 / sqrt((double)n_win * dh));
        args q = args_begin(t->k_pattn_dq);
        arg_u32(&q, a->n_seq);
        arg_u32(&q, a->lq);
        arg_u32(&q, a->lk_max);
        arg_u32(&q, a->group);
        arg_u32(&q, a->n_heads);
        arg_u32(&q, dh);
        arg_f32(&q, scale);
        arg_buf(&q, s->k);
        arg_u32(&q, s->k_ld);
        arg_u64(&q, s->k_stride);
        arg_buf(&q, b->ds);
        arg_u32(&q, p_ld);
        arg_u32(&q, col0);
        arg_buf(&q, d->q.mem ? d->q : d->k); /* absent: never written */
        arg_u32(&q, d->q_ld);
        arg_i32(&q, s->q.mem != NULL);
        arg_buf(&q, d->qx.mem ? d->qx : d->k);
        arg_u32(&q, d->qx_ld);
        arg_u32(&q, s->n_ext);
        NMT_TRY(args_end(t->dev, &q, "pattn_dq"));
        const size_t nq[2] = {(size_t)a->n_seq * a->n_heads, a->lq};
        NMT_TRY(nmt_train_launch(t, t->k_pattn_dq, 2, nq, "pattn_dq"));
        args kk = args_begin(t->k_pattn_dk);
        arg_u32(&kk, a->n_seq);
        arg_u32(&kk, a->lq);
        arg_u32(&kk, a->lk_max);
        arg_u32(&kk, a->group);
        arg_u32(&kk, a->n_heads);
        arg_u32(&kk, dh);
        arg_f32(&kk, scale);
        arg_buf(&kk, s->q.mem ? s->q : s->k);
        arg_u32(&kk, s->q_ld);
        arg_i32(&kk, s->q.mem != NULL);
        arg_buf(&kk, s->qx.mem ? s->qx : s->k);
        arg_u32(&kk, s->qx_ld);
        arg_u32(&kk, s->n_ext);
        arg_buf(&kk, b->ds);
        arg_u32(&kk, p_ld);
        arg_u32(&kk, col0);
        arg_buf(&kk, d->k);
        arg_u32(&kk, d->k_ld);
        arg_u64(&kk, d->k_stride);
        NMT_TRY(args_end(t->dev, &kk, "pattn_dk"));
        const size_t nk[2] = {n_kv * a->n_heads, a->lk_max};
        NMT_TRY(nmt_train_launch(t, t->k_pattn_dk, 2, nk, "pattn_dk"));
        args v = args_begin(t->k_pattn_dv);
        arg_u32(&v, a->n_seq);
        arg_u32(&v, a->lq);
        arg_u32(&v, a->lk_max);
        arg_u32(&v, a->group);
        arg_u32(&v, a->n_heads);
        arg_u32(&v, dh);
        arg_buf(&v, a->p);
        arg_u32(&v, p_ld);
        arg_u32(&v, col0);
        arg_buf(&v, b->d_out);
        arg_u32(&v, b->d_out_ld);
        arg_buf(&v, d->v);
        arg_u32(&v, d->v_ld);
        arg_u64(&v, d->v_stride);
        NMT_TRY(args_end(t->dev, &v, "pattn_dv"));
        NMT_TRY(nmt_train_launch(t, t->k_pattn_dv, 2, nk, "pattn_dv"));
    }
    return NMT_OK;
}

nmt_status nmt_op_lstm_cell_bwd(nmt_train_ops *t, nmt_buf z, nmt_buf c, nmt_buf dh, uint32_t ld_dh, nmt_buf dc,
                                nmt_buf dz, nmt_buf dm, nmt_buf count, uint32_t n_seq, uint32_t t_cap, uint32_t step,
                                uint32_t h, uint32_t chunk) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || h == 0) return NMT_OK;
    if (z.mem == NULL || c.mem == NULL || dh.mem == NULL || dc.mem == NULL || dz.mem == NULL || count.mem == NULL ||
        (chunk && dm.mem == NULL))
        return NMT_ERR_INVALID_ARGUMENT;
    if (step >= t_cap || ld_dh < h || (chunk && h % chunk) || (uint64_t)n_seq * t_cap * 6 * h > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_lstm_cell_bwd);
    arg_buf(&a, z);
    arg_buf(&a, c);
    arg_buf(&a, dh);
    arg_u32(&a, ld_dh);
    arg_buf(&a, dc);
    arg_buf(&a, dz);
    arg_buf(&a, chunk ? dm : dz); /* never written for chunk 0 */
    arg_buf(&a, count);
    arg_u32(&a, n_seq);
    arg_u32(&a, t_cap);
    arg_u32(&a, step);
    arg_u32(&a, h);
    arg_u32(&a, chunk);
    NMT_TRY(args_end(t->dev, &a, "lstm_cell_bwd"));
    const size_t g[2] = {h, n_seq};
    return nmt_train_launch(t, t->k_lstm_cell_bwd, 2, g, "lstm_cell_bwd");
}

nmt_status nmt_op_onlstm_master_bwd(nmt_train_ops *t, nmt_buf z, nmt_buf dm, nmt_buf dz, nmt_buf count,
                                    uint32_t n_seq, uint32_t t_cap, uint32_t step, uint32_t h, uint32_t chunk) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || h == 0) return NMT_OK;
    if (z.mem == NULL || dm.mem == NULL || dz.mem == NULL || count.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (chunk == 0 || h % chunk || step >= t_cap || (uint64_t)n_seq * t_cap * 6 * h > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_onlstm_master_bwd);
    arg_buf(&a, z);
    arg_buf(&a, dm);
    arg_buf(&a, dz);
    arg_buf(&a, count);
    arg_u32(&a, n_seq);
    arg_u32(&a, t_cap);
    arg_u32(&a, step);
    arg_u32(&a, h);
    arg_u32(&a, chunk);
    NMT_TRY(args_end(t->dev, &a, "onlstm_master_bwd"));
    const size_t g[1] = {n_seq};
    return nmt_train_launch(t, t->k_onlstm_master_bwd, 1, g, "onlstm_master_bwd");
}

nmt_status nmt_op_relu_bwd(nmt_train_ops *t, nmt_buf y, nmt_buf dy, nmt_buf dx, uint32_t n) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (y.mem == NULL || dy.mem == NULL || dx.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_relu_bwd);
    arg_buf(&a, y);
    arg_buf(&a, dy);
    arg_buf(&a, dx);
    arg_u32(&a, n);
    NMT_TRY(args_end(t->dev, &a, "relu_bwd"));
    const size_t g[1] = {n};
    return nmt_train_launch(t, t->k_relu_bwd, 1, g, "relu_bwd");
}

nmt_status nmt_op_act_bwd(nmt_train_ops *t, nmt_buf x, nmt_buf dy, nmt_buf dx, uint32_t n, int kind) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (x.mem == NULL || dy.mem == NULL || dx.mem == NULL || (kind != NMT_ACT_GELU && kind != NMT_ACT_SWISH))
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_act_bwd);
    arg_buf(&a, x);
    arg_buf(&a, dy);
    arg_buf(&a, dx);
    arg_u32(&a, n);
    arg_u32(&a, (uint32_t)kind);
    NMT_TRY(args_end(t->dev, &a, "act_bwd"));
    const size_t g[1] = {n};
    return nmt_train_launch(t, t->k_act_bwd, 1, g, "act_bwd");
}

nmt_status nmt_op_gate_bwd(nmt_train_ops *t, nmt_buf x, uint32_t ld_x, nmt_buf g, uint32_t ld_g, nmt_buf dout,
                           uint32_t ld_dout, nmt_buf dx, uint32_t ld_dx, nmt_buf dg, uint32_t ld_dg, uint32_t rows,
                           uint32_t d, int accumulate_dx) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || g.mem == NULL || dout.mem == NULL || dx.mem == NULL || dg.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    if (ld_x < d || ld_g < d || ld_dout < d || ld_dx < d || ld_dg < d) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_gate_bwd);
    arg_buf(&a, x);
    arg_u32(&a, ld_x);
    arg_buf(&a, g);
    arg_u32(&a, ld_g);
    arg_buf(&a, dout);
    arg_u32(&a, ld_dout);
    arg_buf(&a, dx);
    arg_u32(&a, ld_dx);
    arg_buf(&a, dg);
    arg_u32(&a, ld_dg);
    arg_u32(&a, rows);
    arg_u32(&a, d);
    arg_i32(&a, accumulate_dx ? 1 : 0);
    NMT_TRY(args_end(t->dev, &a, "gate_bwd"));
    const size_t n[2] = {d, rows};
    return nmt_train_launch(t, t->k_gate_bwd, 2, n, "gate_bwd");
}

nmt_status nmt_op_dropout(nmt_train_ops *t, nmt_buf x, nmt_buf out, uint32_t n, float p, uint64_t seed,
                          uint64_t offset) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (!(p >= 0.0f && p < 1.0f)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (x.mem == NULL || out.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (offset > UINT64_MAX - n) return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t threshold = (uint32_t)floor((double)p * 16777216.0 + 0.5);
    const float inv_keep = (float)(1.0 / (1.0 - (double)p));
    args a = args_begin(t->k_dropout);
    arg_buf(&a, x);
    arg_buf(&a, out);
    arg_u32(&a, n);
    arg_u32(&a, (uint32_t)seed);
    arg_u32(&a, (uint32_t)(seed >> 32));
    arg_u64(&a, offset);
    arg_u32(&a, threshold);
    arg_f32(&a, inv_keep);
    NMT_TRY(args_end(t->dev, &a, "dropout"));
    const uint64_t counters = ((offset + n - 1) >> 2) - (offset >> 2) + 1; /* Philox counters spanned */
    const size_t g[1] = {(size_t)((counters + 7) / 8)};                     /* 8 per work-item */
    return nmt_train_launch(t, t->k_dropout, 1, g, "dropout");
}

nmt_status nmt_embed_bwd_plan(const int32_t *tok, uint32_t rows, uint32_t vocab, int32_t skip_id, uint32_t *count,
                              int32_t *perm, int32_t *seg, int32_t *seg_tok, uint32_t *n_seg) {
    if (n_seg == NULL || count == NULL || seg == NULL || vocab == 0 || vocab == UINT32_MAX || rows > INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    if (rows > 0 && (tok == NULL || perm == NULL || seg_tok == NULL)) return NMT_ERR_INVALID_ARGUMENT;
    *n_seg = 0;
    memset(count, 0, ((size_t)vocab + 1) * sizeof *count);
    for (uint32_t r = 0; r < rows; r++) {
        if (tok[r] < 0 || (uint32_t)tok[r] >= vocab) return NMT_ERR_TOKEN_OUT_OF_RANGE;
        if (tok[r] != skip_id) count[tok[r] + 1]++;
    }
    /* count[v] becomes the first slot of id v; segments in id order */
    uint32_t ns = 0;
    for (uint32_t v = 0; v < vocab; v++) {
        if (count[v + 1] > 0) {
            seg[ns] = (int32_t)count[v];
            seg_tok[ns] = (int32_t)v;
            ns++;
        }
        count[v + 1] += count[v];
    }
    seg[ns] = (int32_t)count[vocab];
    for (uint32_t r = 0; r < rows; r++)
        if (tok[r] != skip_id) perm[count[tok[r]]++] = (int32_t)r;
    *n_seg = ns;
    return NMT_OK;
}

nmt_status nmt_op_embed_bwd(nmt_train_ops *t, nmt_buf dy, uint32_t d, nmt_buf perm, nmt_buf seg, nmt_buf seg_tok,
                            uint32_t n_seg, float scale, nmt_buf dE) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seg == 0 || d == 0) return NMT_OK;
    if (dy.mem == NULL || perm.mem == NULL || seg.mem == NULL || seg_tok.mem == NULL || dE.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_embed_bwd);
    arg_buf(&a, dy);
    arg_u32(&a, d);
    arg_buf(&a, perm);
    arg_buf(&a, seg);
    arg_buf(&a, seg_tok);
    arg_u32(&a, n_seg);
    arg_f32(&a, scale);
    arg_buf(&a, dE);
    NMT_TRY(args_end(t->dev, &a, "embed_bwd"));
    const size_t n[2] = {d, n_seg};
    return nmt_train_launch(t, t->k_embed_bwd, 2, n, "embed_bwd");
}

/* ------------------------------------------------------------------------ */
/* Loss                                                                     */
/* ------------------------------------------------------------------------ */

nmt_status nmt_op_xent(nmt_train_ops *t, nmt_buf logits, uint32_t rows, uint32_t V, uint32_t ld, nmt_buf tgt,
                       int32_t ignore_id, float eps, float grad_scale, nmt_buf loss, nmt_buf nll, nmt_buf dlogits,
                       uint32_t ld_d) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (!(eps >= 0.0f && eps < 1.0f)) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0) return NMT_OK;
    if (V == 0 || logits.mem == NULL || tgt.mem == NULL || loss.mem == NULL || ld < V) return NMT_ERR_INVALID_ARGUMENT;
    if (V > INT32_MAX) return NMT_ERR_UNSUPPORTED;
    if (dlogits.mem) {
        if (ld_d < V) return NMT_ERR_INVALID_ARGUMENT;
        const int same = dlogits.mem == logits.mem && dlogits.off == logits.off && ld_d == ld;
        if (!same && overlaps(dlogits, span(rows, ld_d, V), logits, span(rows, ld, V)))
            return NMT_ERR_INVALID_ARGUMENT;
    }
    args a = args_begin(t->k_xent);
    arg_buf(&a, logits);
    arg_u32(&a, ld);
    arg_u32(&a, V);
    arg_buf(&a, tgt);
    arg_i32(&a, ignore_id);
    arg_f32(&a, eps);
    arg_f32(&a, grad_scale);
    arg_buf(&a, loss);
    arg_buf(&a, nll.mem ? nll : loss);
    arg_i32(&a, nll.mem != NULL);
    arg_buf(&a, dlogits.mem ? dlogits : loss);
    arg_u32(&a, dlogits.mem ? ld_d : 0u);
    arg_i32(&a, dlogits.mem != NULL);
    NMT_TRY(args_end(t->dev, &a, "xent"));
    return launch_groups(t, t->k_xent, rows, "xent");
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                */
/* ------------------------------------------------------------------------ */

/* key_len arguments: (buffer, offset, has, const). */
static void key_len_args(args *a, const nmt_attn_args *p) {
    arg_mem(a, p->key_len.mem ? p->key_len.mem : p->scores.mem);
    arg_u64(a, p->key_len.mem ? p->key_len.off : 0);
    arg_i32(a, p->key_len.mem != NULL);
    arg_u32(a, p->key_len_const);
}

nmt_status nmt_op_attention_bwd(nmt_train_ops *t, const nmt_attn_bwd_args *ba) {
    if (!train_ok(t) || ba == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_attn_args *p = &ba->fwd;
    if (p->group == 0 || p->n_branches == 0 || p->n_branches > NMT_MAX_BRANCHES) return NMT_ERR_INVALID_ARGUMENT;
    for (uint32_t b = 0; b < p->n_branches; b++)
        if ((unsigned)p->branches[b].kind > (unsigned)NMT_BRANCH_BLOCK ||
            (p->branches[b].kind == NMT_BRANCH_BLOCK && p->branches[b].k == 0))
            return NMT_ERR_INVALID_ARGUMENT;
    if (p->n_seq == 0 || p->lq == 0 || p->n_heads == 0 || p->d_head == 0) return NMT_OK;
    if (p->q.mem == NULL || p->k.mem == NULL || p->v.mem == NULL || p->out.mem == NULL || p->scores.mem == NULL ||
        ba->d_out.mem == NULL || ba->dq.mem == NULL || ba->dk.mem == NULL || ba->dv.mem == NULL ||
        ba->probs.mem == NULL || ba->dstats.mem == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t width = (uint64_t)p->n_heads * p->d_head;
    if (p->q_ld < width || p->k_ld < width || p->v_ld < width || p->out_ld < width * p->n_branches ||
        ba->d_out_ld < width * p->n_branches || ba->dq_ld < width || ba->dk_ld < width || ba->dv_ld < width)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)p->q_pos0 + p->lq >= NMT_TRAIN_POS_LIMIT || p->lk_max >= NMT_TRAIN_POS_LIMIT ||
        (uint64_t)p->n_seq * p->n_heads > UINT32_MAX || (uint64_t)p->n_seq * p->lq > UINT32_MAX) {
        nmt_log(&t->dev->log, NMT_LOG_ERROR, "attention sizes beyond the kernels' index range");
        return NMT_ERR_UNSUPPORTED;
    }
    const uint32_t rows_sh = p->n_seq * p->n_heads;
    const uint32_t n_kv = (p->n_seq + p->group - 1) / p->group;
    const float scale = (float)(1.0 / sqrt((double)p->d_head));

    /* 1. S, as the forward computes it */
    args a = args_begin(t->k_attn_bwd_scores);
    arg_u32(&a, p->n_seq);
    arg_u32(&a, p->lq);
    arg_u32(&a, p->q_pos0);
    arg_u32(&a, p->lk_max);
    arg_u32(&a, p->group);
    arg_u32(&a, p->n_heads);
    arg_u32(&a, p->d_head);
    arg_f32(&a, scale);
    arg_buf(&a, p->q);
    arg_u32(&a, p->q_ld);
    arg_buf(&a, p->k);
    arg_u32(&a, p->k_ld);
    arg_u64(&a, p->kv_seq_stride);
    key_len_args(&a, p);
    arg_i32(&a, p->causal ? 1 : 0);
    arg_buf(&a, p->scores);
    NMT_TRY(args_end(t->dev, &a, "attn_bwd_scores"));
    const size_t n_s[3] = {p->lk_max, p->lq, rows_sh};
    NMT_TRY(nmt_train_launch(t, t->k_attn_bwd_scores, 3, n_s, "attn_bwd_scores"));

    /* 2. per branch: P_b and D_b */
    for (uint32_t b = 0; b < p->n_branches; b++) {
        a = args_begin(t->k_attn_bwd_probs);
        arg_u32(&a, p->n_seq);
        arg_u32(&a, p->lq);
        arg_u32(&a, p->q_pos0);
        arg_u32(&a, p->lk_max);
        arg_u32(&a, p->group);
        arg_u32(&a, p->n_heads);
        arg_u32(&a, p->d_head);
        arg_u32(&a, p->n_branches);
        arg_u32(&a, b);
        arg_i32(&a, (int32_t)p->branches[b].kind);
        arg_i32(&a, (int32_t)NMT_MIN(p->branches[b].k, NMT_TRAIN_POS_LIMIT));
        key_len_args(&a, p);
        arg_i32(&a, p->causal ? 1 : 0);
        arg_buf(&a, p->scores);
        arg_buf(&a, p->out);
        arg_u32(&a, p->out_ld);
        arg_buf(&a, ba->d_out);
        arg_u32(&a, ba->d_out_ld);
        arg_buf(&a, ba->probs);
        arg_buf(&a, ba->dstats);
        NMT_TRY(args_end(t->dev, &a, "attn_bwd_probs"));
        const size_t n_p[2] = {p->lq, rows_sh};
        NMT_TRY(nmt_train_launch(t, t->k_attn_bwd_probs, 2, n_p, "attn_bwd_probs"));
    }

    /* 3. dS over S */
    a = args_begin(t->k_attn_bwd_ds);
    arg_u32(&a, p->n_seq);
    arg_u32(&a, p->lq);
    arg_u32(&a, p->q_pos0);
    arg_u32(&a, p->lk_max);
    arg_u32(&a, p->group);
    arg_u32(&a, p->n_heads);
    arg_u32(&a, p->d_head);
    arg_u32(&a, p->n_branches);
    arg_buf(&a, p->v);
    arg_u32(&a, p->v_ld);
    arg_u64(&a, p->kv_seq_stride);
    key_len_args(&a, p);
    arg_i32(&a, p->causal ? 1 : 0);
    arg_buf(&a, ba->d_out);
    arg_u32(&a, ba->d_out_ld);
    arg_buf(&a, ba->probs);
    arg_buf(&a, ba->dstats);
    arg_buf(&a, p->scores);
    NMT_TRY(args_end(t->dev, &a, "attn_bwd_ds"));
    NMT_TRY(nmt_train_launch(t, t->k_attn_bwd_ds, 3, n_s, "attn_bwd_ds"));

    /* 4. dQ */
    a = args_begin(t->k_attn_bwd_dq);
    arg_u32(&a, p->n_seq);
    arg_u32(&a, p->lq);
    arg_u32(&a, p->lk_max);
    arg_u32(&a, p->group);
    arg_u32(&a, p->n_heads);
    arg_u32(&a, p->d_head);
    arg_f32(&a, scale);
    arg_buf(&a, p->k);
    arg_u32(&a, p->k_ld);
    arg_u64(&a, p->kv_seq_stride);
    arg_buf(&a, p->scores);
    arg_buf(&a, ba->dq);
    arg_u32(&a, ba->dq_ld);
    NMT_TRY(args_end(t->dev, &a, "attn_bwd_dq"));
    /* channels per work-item: attention_bwd.cl bwd_cv() */
    const size_t cv = p->d_head % 16u == 0 ? 16u : 1u;
    const size_t n_q[3] = {p->d_head / cv, p->lq, rows_sh};
    NMT_TRY(nmt_train_launch(t, t->k_attn_bwd_dq, 3, n_q, "attn_bwd_dq"));

    /* 5. dK, dV */
    a = args_begin(t->k_attn_bwd_dkv);
    arg_u32(&a, p->n_seq);
    arg_u32(&a, p->lq);
    arg_u32(&a, p->lk_max);
    arg_u32(&a, p->group);
    arg_u32(&a, p->n_heads);
    arg_u32(&a, p->d_head);
    arg_u32(&a, p->n_branches);
    arg_f32(&a, scale);
    key_len_args(&a, p);
    arg_buf(&a, p->q);
    arg_u32(&a, p->q_ld);
    arg_buf(&a, ba->d_out);
    arg_u32(&a, ba->d_out_ld);
    arg_buf(&a, p->scores);
    arg_buf(&a, ba->probs);
    arg_buf(&a, ba->dk);
    arg_u32(&a, ba->dk_ld);
    arg_buf(&a, ba->dv);
    arg_u32(&a, ba->dv_ld);
    arg_u64(&a, ba->dkv_seq_stride);
    NMT_TRY(args_end(t->dev, &a, "attn_bwd_dkv"));
    const size_t n_kvw[3] = {p->d_head / cv, p->lk_max, (size_t)n_kv * p->n_heads};
    return nmt_train_launch(t, t->k_attn_bwd_dkv, 3, n_kvw, "attn_bwd_dkv");
}

/* ------------------------------------------------------------------------ */
/* Optimiser and gradient buffers                                           */
/* ------------------------------------------------------------------------ */

nmt_adam_params nmt_adam_defaults(void) {
    nmt_adam_params p = {0.0f, 0.9f, 0.98f, 1e-9f, 0.0f, 1.0f, 1};
    return p;
}

nmt_status nmt_op_adam(nmt_train_ops *t, nmt_buf p, nmt_buf g, nmt_buf m, nmt_buf v, uint32_t n,
                       const nmt_adam_params *ap) {
    if (!train_ok(t) || ap == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ap->step == 0 || !(ap->beta1 >= 0.0f && ap->beta1 < 1.0f) || !(ap->beta2 >= 0.0f && ap->beta2 < 1.0f) ||
        !(ap->eps >= 0.0f) || !isfinite(ap->lr) || !isfinite(ap->grad_scale) || !isfinite(ap->weight_decay))
        return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (p.mem == NULL || g.mem == NULL || m.mem == NULL || v.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const double t_step = (double)ap->step;
    const float bc1 = (float)(1.0 - pow((double)ap->beta1, t_step));
    const float bc2 = (float)(1.0 - pow((double)ap->beta2, t_step));
    args a = args_begin(t->k_adam);
    arg_buf(&a, p);
    arg_buf(&a, g);
    arg_buf(&a, m);
    arg_buf(&a, v);
    arg_u32(&a, n);
    arg_f32(&a, ap->lr);
    arg_f32(&a, ap->beta1);
    arg_f32(&a, ap->beta2);
    arg_f32(&a, ap->eps);
    arg_f32(&a, bc1 > 0.0f ? bc1 : 1.0f);
    arg_f32(&a, bc2 > 0.0f ? bc2 : 1.0f);
    arg_f32(&a, ap->grad_scale);
    arg_f32(&a, ap->weight_decay);
    NMT_TRY(args_end(t->dev, &a, "adam"));
    const size_t gsz[1] = {n};
    return nmt_train_launch(t, t->k_adam, 1, gsz, "adam");
}

nmt_status nmt_op_reduce_sum(nmt_train_ops *t, nmt_buf x, uint32_t n, int square, nmt_buf partial, nmt_buf out) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (out.mem == NULL || partial.mem == NULL || (n > 0 && x.mem == NULL)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return nmt_op_fill(t, out, 1, 0.0f);
    const uint32_t groups = NMT_TRAIN_REDUCE_GROUPS;
    const uint32_t chunk = (uint32_t)(((uint64_t)n + groups - 1) / groups);
    args a = args_begin(t->k_reduce_partial);
    arg_buf(&a, x);
    arg_u32(&a, n);
    arg_u32(&a, chunk);
    arg_i32(&a, square ? 1 : 0);
    arg_buf(&a, partial);
    NMT_TRY(args_end(t->dev, &a, "reduce_partial"));
    NMT_TRY(launch_groups(t, t->k_reduce_partial, groups, "reduce_partial"));
    a = args_begin(t->k_reduce_final);
    arg_buf(&a, partial);
    arg_u32(&a, groups);
    arg_buf(&a, out);
    NMT_TRY(args_end(t->dev, &a, "reduce_final"));
    return launch_groups(t, t->k_reduce_final, 1, "reduce_final");
}

static nmt_status flat_op(nmt_train_ops *t, cl_kernel k, const char *name, nmt_buf x, uint32_t n, float v) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (x.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(k);
    arg_buf(&a, x);
    arg_u32(&a, n);
    arg_f32(&a, v);
    NMT_TRY(args_end(t->dev, &a, name));
    const size_t g[1] = {n};
    return nmt_train_launch(t, k, 1, g, name);
}

nmt_status nmt_op_scale(nmt_train_ops *t, nmt_buf x, uint32_t n, float a) {
    return flat_op(t, t ? t->k_scale : NULL, "scale", x, n, a);
}

nmt_status nmt_op_fill(nmt_train_ops *t, nmt_buf x, uint32_t n, float a) {
    return flat_op(t, t ? t->k_fill : NULL, "fill", x, n, a);
}

nmt_status nmt_op_axpy(nmt_train_ops *t, nmt_buf y, nmt_buf x, uint32_t n, float a) {
    if (!train_ok(t)) return NMT_ERR_INVALID_ARGUMENT;
    if (n == 0) return NMT_OK;
    if (y.mem == NULL || x.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    args ar = args_begin(t->k_axpy);
    arg_buf(&ar, y);
    arg_buf(&ar, x);
    arg_u32(&ar, n);
    arg_f32(&ar, a);
    NMT_TRY(args_end(t->dev, &ar, "axpy"));
    const size_t g[1] = {n};
    return nmt_train_launch(t, t->k_axpy, 1, g, "axpy");
}
