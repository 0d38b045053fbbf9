/* SPDX-License-Identifier: MIT */
/* ops_train_rec.c — the GRU's backward ops (ops_train.h
 * nmt_op_gru_cell_bwd, nmt_op_gru_scaled_input_bwd) over
 * cl/recurrent_bwd.cl, whose kernels ops_train.c creates with the others.  Kept apart so ops_train.c stays
 * one file of the general ops; launched by ops_train_launch.h, like ops_train.c. */
#include "ops_train.h"

#include "kernel_args.h"
#include "ops_train_launch.h"

/* gru_cell_bwd's flags (cl/common.cl GRU_*) */
enum { GRU_OUT = 4u, GRU_COUNT = 8u, GRU_REVERSE = 16u };

nmt_status nmt_op_gru_cell_bwd(nmt_train_ops *t, nmt_buf z, uint32_t ld_z, nmt_buf dout, uint32_t ld_dout, nmt_buf dh,
                               nmt_buf dz, uint32_t ld_dz, nmt_buf dg, nmt_buf count, uint32_t n_seq, uint32_t t_cap,
                               uint32_t step, int reverse, uint32_t h) {
    if (t == NULL || t->dev == NULL || t->k_gru_cell_bwd == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || h == 0) return NMT_OK;
    if (z.mem == NULL || dh.mem == NULL || dz.mem == NULL || dg.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (step >= t_cap || (uint64_t)h * 5 > UINT32_MAX || ld_z < 5 * h || ld_dz < 4 * h ||
        (dout.mem && ld_dout < h) || (uint64_t)n_seq * t_cap > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t flags = (dout.mem ? GRU_OUT : 0) | (count.mem ? GRU_COUNT : 0) | (reverse ? GRU_REVERSE : 0);
    args a = args_begin(t->k_gru_cell_bwd);
    arg_mem(&a, z.mem);
    arg_u64(&a, z.off);
    arg_u32(&a, ld_z);
    arg_mem(&a, dout.mem ? dout.mem : z.mem); /* absent operands: any buffer, never read */
    arg_u64(&a, dout.off);
    arg_u32(&a, ld_dout);
    arg_mem(&a, dh.mem);
    arg_u64(&a, dh.off);
    arg_mem(&a, dz.mem);
    arg_u64(&a, dz.off);
    arg_u32(&a, ld_dz);
    arg_mem(&a, dg.mem);
    arg_u64(&a, dg.off);
    arg_mem(&a, count.mem ? count.mem : z.mem);
    arg_u64(&a, count.off);
    arg_u32(&a, n_seq);
    arg_u32(&a, t_cap);
    arg_u32(&a, step);
    arg_u32(&a, h);
    arg_u32(&a, flags);
    NMT_TRY(args_end(t->dev, &a, "gru_cell_bwd"));
    const size_t g[2] = {h, n_seq};
    return nmt_train_launch(t, t->k_gru_cell_bwd, 2, g, "gru_cell_bwd");
}

nmt_status nmt_op_gru_scaled_input_bwd(nmt_train_ops *t, nmt_buf p, uint32_t ld_p, nmt_buf alpha, uint32_t ld_a,
                                       nmt_buf dout, uint32_t ld_dout, uint32_t n_rows, uint32_t s_cap,
                                       uint32_t group, uint32_t n, nmt_buf dp, uint32_t ld_dp, nmt_buf dalpha,
                                       uint32_t ld_da, float alpha_beta, nmt_buf dbias) {
    if (t == NULL || t->dev == NULL || t->k_gru_scaled_input_dp == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_rows == 0 || s_cap == 0 || n == 0) return NMT_OK;
    if (p.mem == NULL || alpha.mem == NULL || dout.mem == NULL || dp.mem == NULL || dalpha.mem == NULL ||
        group == 0 || n_rows % group || ld_p < n || ld_a < s_cap || ld_dout < n || ld_dp < n || ld_da < s_cap ||
        (alpha_beta != 0.0f && alpha_beta != 1.0f) || (uint64_t)n_rows * s_cap > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t n_sent = n_rows / group;
    args a = args_begin(t->k_gru_scaled_input_dp);
    arg_mem(&a, alpha.mem);
    arg_u64(&a, alpha.off);
    arg_u32(&a, ld_a);
    arg_mem(&a, dout.mem);
    arg_u64(&a, dout.off);
    arg_u32(&a, ld_dout);
    arg_mem(&a, dp.mem);
    arg_u64(&a, dp.off);
    arg_u32(&a, ld_dp);
    arg_u32(&a, n_sent);
    arg_u32(&a, s_cap);
    arg_u32(&a, group);
    arg_u32(&a, n);
    NMT_TRY(args_end(t->dev, &a, "gru_scaled_input_dp"));
    const size_t gp[2] = {n, (size_t)n_sent * s_cap};
    NMT_TRY(nmt_train_launch(t, t->k_gru_scaled_input_dp, 2, gp, "gru_scaled_input_dp"));
    a = args_begin(t->k_gru_scaled_input_da);
    arg_mem(&a, p.mem);
    arg_u64(&a, p.off);
    arg_u32(&a, ld_p);
    arg_mem(&a, dout.mem);
    arg_u64(&a, dout.off);
    arg_u32(&a, ld_dout);
    arg_mem(&a, dalpha.mem);
    arg_u64(&a, dalpha.off);
    arg_u32(&a, ld_da);
    arg_u32(&a, alpha_beta != 0.0f);
    arg_u32(&a, n_rows);
    arg_u32(&a, s_cap);
    arg_u32(&a, group);
    arg_u32(&a, n);
    NMT_TRY(args_end(t->dev, &a, "gru_scaled_input_da"));
    const size_t ga[2] = {s_cap, n_rows};
    NMT_TRY(nmt_train_launch(t, t->k_gru_scaled_input_da, 2, ga, "gru_scaled_input_da"));
    if (dbias.mem) NMT_TRY(nmt_op_col_sum(t, n_rows * s_cap, n, 1.0f, dout, ld_dout, 1.0f, dbias));
    return NMT_OK;
}
