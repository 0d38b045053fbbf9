/* SPDX-License-Identifier: MIT */
/* ops_train_rnn.c — backward of the RNN helpers of ops.h (nmt_op_act_rows,
 * nmt_op_weighted_rows; BA-NMT, issue 17) over cl/recurrent_bwd.cl
 * (ops_train.h nmt_op_act_rows_bwd, nmt_op_weighted_rows_bwd).  Launched
 * by ops_train_launch.h, like ops_train.c. */
#include "ops_train.h"

#include "kernel_args.h"
#include "ops_train_launch.h"

nmt_status nmt_op_act_rows_bwd(nmt_train_ops *t, nmt_buf x, uint32_t ld_x, nmt_buf dy, uint32_t ld_dy, uint32_t rows,
                               uint32_t n, int mode, nmt_buf dx, uint32_t ld_dx) {
    if (t == NULL || t->dev == NULL || t->k_act_rows_bwd == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (mode != NMT_ACT_BWD_TANH_IN && mode != NMT_ACT_BWD_TANH_OUT && mode != NMT_ACT_BWD_MAXOUT)
        return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || n == 0) return NMT_OK;
    const uint32_t w = mode == NMT_ACT_BWD_MAXOUT ? 2 * n : n;
    if (x.mem == NULL || dy.mem == NULL || dx.mem == NULL || (uint64_t)n * 2 > UINT32_MAX || ld_x < w ||
        ld_dy < n || ld_dx < w)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(t->k_act_rows_bwd);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_mem(&a, dy.mem);
    arg_u64(&a, dy.off);
    arg_u32(&a, ld_dy);
    arg_mem(&a, dx.mem);
    arg_u64(&a, dx.off);
    arg_u32(&a, ld_dx);
    arg_u32(&a, rows);
    arg_u32(&a, n);
    arg_u32(&a, (uint32_t)mode);
    NMT_TRY(args_end(t->dev, &a, "act_rows_bwd"));
    const size_t g[2] = {n, rows};
    return nmt_train_launch(t, t->k_act_rows_bwd, 2, g, "act_rows_bwd");
}

nmt_status nmt_op_weighted_rows_bwd(nmt_train_ops *t, nmt_buf x, uint32_t ld_x, nmt_buf alpha, uint32_t ld_a,
                                    nmt_buf dout, uint32_t ld_dout, uint32_t n_rows, uint32_t s_cap, uint32_t n,
                                    nmt_buf dx, uint32_t ld_dx, nmt_buf dalpha, uint32_t ld_da) {
    if (t == NULL || t->dev == NULL || t->k_weighted_rows_da == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_rows == 0 || s_cap == 0 || n == 0) return NMT_OK;
    if (dout.mem == NULL || ld_dout < n || (uint64_t)n_rows * s_cap > UINT32_MAX ||
        (dalpha.mem && (x.mem == NULL || ld_x < n || ld_da < s_cap)) ||
        (dx.mem && (alpha.mem == NULL || ld_a < s_cap || ld_dx < n)))
        return NMT_ERR_INVALID_ARGUMENT;
    if (dalpha.mem) {
        args a = args_begin(t->k_weighted_rows_da);
        arg_mem(&a, x.mem);
        arg_u64(&a, x.off);
        arg_u32(&a, ld_x);
        arg_mem(&a, dout.mem);
        arg_u64(&a, dout.off);
        arg_u32(&a, ld_dout);
        arg_mem(&a, dalpha.mem);
        arg_u64(&a, dalpha.off);
        arg_u32(&a, ld_da);
        arg_u32(&a, n_rows);
        arg_u32(&a, s_cap);
        arg_u32(&a, n);
        NMT_TRY(args_end(t->dev, &a, "weighted_rows_da"));
        const size_t g[2] = {s_cap, n_rows};
        NMT_TRY(nmt_train_launch(t, t->k_weighted_rows_da, 2, g, "weighted_rows_da"));
    }
    if (dx.mem) {
        args a = args_begin(t->k_weighted_rows_dx);
        arg_mem(&a, alpha.mem);
        arg_u64(&a, alpha.off);
        arg_u32(&a, ld_a);
        arg_mem(&a, dout.mem);
        arg_u64(&a, dout.off);
        arg_u32(&a, ld_dout);
        arg_mem(&a, dx.mem);
        arg_u64(&a, dx.off);
        arg_u32(&a, ld_dx);
        arg_u32(&a, n_rows);
        arg_u32(&a, s_cap);
        arg_u32(&a, n);
        NMT_TRY(args_end(t->dev, &a, "weighted_rows_dx"));
        const size_t g[2] = {n, (size_t)n_rows * s_cap};
        NMT_TRY(nmt_train_launch(t, t->k_weighted_rows_dx, 2, g, "weighted_rows_dx"));
    }
    return NMT_OK;
}
