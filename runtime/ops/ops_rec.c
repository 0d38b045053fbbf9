/* SPDX-License-Identifier: MIT */
/* ops_rec.c — recurrent-cell ops (ops.h: nmt_ops_enable_recurrent,
 * nmt_op_lstm_cell, nmt_op_gru_cell, nmt_op_gru_scaled_input, the RNN helpers) over cl/recurrent.cl, built only for
 * the families with recurrent layers (MG-SA's LSTM / ON-LSTM interaction,
 * issue 15; BA-NMT's GRUs, issue 17). */
#include "ops_internal.h"

#include "kernel_args.h"

nmt_status nmt_ops_enable_recurrent(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_lstm_cell != NULL && ops->k_gru_cell != NULL && ops->k_gru_scaled_input != NULL &&
        ops->k_act_rows != NULL && ops->k_weighted_rows != NULL && ops->k_lookup_q8 != NULL)
        return NMT_OK;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "recurrent", "", &prog));
    if (ops->k_lstm_cell == NULL) NMT_TRY(nmt_device_kernel(ops->dev, prog, "lstm_cell", &ops->k_lstm_cell));
    if (ops->k_gru_cell == NULL) NMT_TRY(nmt_device_kernel(ops->dev, prog, "gru_cell", &ops->k_gru_cell));
    if (ops->k_gru_scaled_input == NULL)
        NMT_TRY(nmt_device_kernel(ops->dev, prog, "gru_scaled_input", &ops->k_gru_scaled_input));
    if (ops->k_act_rows == NULL) NMT_TRY(nmt_device_kernel(ops->dev, prog, "act_rows", &ops->k_act_rows));
    if (ops->k_weighted_rows == NULL)
        NMT_TRY(nmt_device_kernel(ops->dev, prog, "weighted_rows", &ops->k_weighted_rows));
    if (ops->k_lookup_q8 == NULL) NMT_TRY(nmt_device_kernel(ops->dev, prog, "lookup_q8", &ops->k_lookup_q8));
    return NMT_OK;
}

nmt_status nmt_op_lstm_cell(nmt_ops *ops, nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out, nmt_buf count,
                            uint32_t n_seq, uint32_t t_cap, uint32_t t, uint32_t h, uint32_t chunk) {
    if (ops == NULL || ops->k_lstm_cell == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || h == 0) return NMT_OK;
    if (z.mem == NULL || c.mem == NULL || out.mem == NULL || count.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (t >= t_cap || ld_out < h || (chunk && h % chunk) || (uint64_t)n_seq * t_cap * 6 * h > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_lstm_cell);
    arg_mem(&a, z.mem);
    arg_u64(&a, z.off);
    arg_mem(&a, c.mem);
    arg_u64(&a, c.off);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_mem(&a, count.mem);
    arg_u64(&a, count.off);
    arg_u32(&a, n_seq);
    arg_u32(&a, t_cap);
    arg_u32(&a, t);
    arg_u32(&a, h);
    arg_u32(&a, chunk);
    NMT_TRY(args_end(ops->dev, &a, "lstm_cell"));
    const size_t n[2] = {h, n_seq};
    return nmt_ops_launch(ops, ops->k_lstm_cell, 2, n, "lstm_cell");
}

/* gru_cell's flags (cl/recurrent.cl) */
enum { GRU_HG = 1u, GRU_HP = 2u, GRU_OUT = 4u, GRU_COUNT = 8u, GRU_REVERSE = 16u };

nmt_status nmt_op_gru_cell(nmt_ops *ops, nmt_buf z, uint32_t ld_z, nmt_buf hg, uint32_t ld_hg, nmt_buf hp,
                           uint32_t ld_hp, nmt_buf hs, uint32_t ld_hs, nmt_buf out, uint32_t ld_out, nmt_buf count,
                           uint32_t n_seq, uint32_t t_cap, uint32_t t, int reverse, uint32_t h) {
    if (ops == NULL || ops->k_gru_cell == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || h == 0) return NMT_OK;
    if (z.mem == NULL || hs.mem == NULL || t >= t_cap || (uint64_t)h * 5 > UINT32_MAX || ld_z < 5 * h ||
        ld_hs < h || (hg.mem && ld_hg != 0 && ld_hg < 3 * h) || (hp.mem && ld_hp < h) || (out.mem && ld_out < h) ||
        (uint64_t)n_seq * t_cap > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t flags = (hg.mem ? GRU_HG : 0) | (hp.mem ? GRU_HP : 0) | (out.mem ? GRU_OUT : 0) |
                           (count.mem ? GRU_COUNT : 0) | (reverse ? GRU_REVERSE : 0);
    args a = args_begin(ops->k_gru_cell);
    arg_mem(&a, z.mem);
    arg_u64(&a, z.off);
    arg_u32(&a, ld_z);
    arg_mem(&a, hg.mem ? hg.mem : z.mem); /* absent operands: any buffer, never read */
    arg_u64(&a, hg.off);
    arg_u32(&a, ld_hg);
    arg_mem(&a, hp.mem ? hp.mem : z.mem);
    arg_u64(&a, hp.off);
    arg_u32(&a, ld_hp);
    arg_mem(&a, hs.mem);
    arg_u64(&a, hs.off);
    arg_u32(&a, ld_hs);
    arg_mem(&a, out.mem ? out.mem : z.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_mem(&a, count.mem ? count.mem : z.mem);
    arg_u64(&a, count.off);
    arg_u32(&a, n_seq);
    arg_u32(&a, t_cap);
    arg_u32(&a, t);
    arg_u32(&a, h);
    arg_u32(&a, flags);
    NMT_TRY(args_end(ops->dev, &a, "gru_cell"));
    const size_t n[2] = {h, n_seq};
    return nmt_ops_launch(ops, ops->k_gru_cell, 2, n, "gru_cell");
}

nmt_status nmt_op_gru_scaled_input(nmt_ops *ops, nmt_buf p, uint32_t ld_p, nmt_buf alpha, uint32_t ld_a, nmt_buf bias,
                                   uint32_t n_rows, uint32_t s_cap, uint32_t group, uint32_t n, nmt_buf out,
                                   uint32_t ld_out) {
    if (ops == NULL || ops->k_gru_scaled_input == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_rows == 0 || s_cap == 0 || n == 0) return NMT_OK;
    if (p.mem == NULL || alpha.mem == NULL || out.mem == NULL || group == 0 || n_rows % group || ld_p < n ||
        ld_a < s_cap || ld_out < n || (uint64_t)n_rows * s_cap > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_gru_scaled_input);
    arg_mem(&a, p.mem);
    arg_u64(&a, p.off);
    arg_u32(&a, ld_p);
    arg_mem(&a, alpha.mem);
    arg_u64(&a, alpha.off);
    arg_u32(&a, ld_a);
    arg_mem(&a, bias.mem ? bias.mem : p.mem); /* absent: never read */
    arg_u64(&a, bias.off);
    arg_u32(&a, bias.mem != NULL);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_u32(&a, n_rows);
    arg_u32(&a, s_cap);
    arg_u32(&a, group);
    arg_u32(&a, n);
    NMT_TRY(args_end(ops->dev, &a, "gru_scaled_input"));
    const size_t g[2] = {n, (size_t)n_rows * s_cap};
    return nmt_ops_launch(ops, ops->k_gru_scaled_input, 2, g, "gru_scaled_input");
}

nmt_status nmt_op_act_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t rows, uint32_t n, int maxout, nmt_buf out,
                           uint32_t ld_out) {
    if (ops == NULL || ops->k_act_rows == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || n == 0) return NMT_OK;
    if (x.mem == NULL || out.mem == NULL || ld_x < (maxout ? 2 * n : n) || ld_out < n) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_act_rows);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_u32(&a, rows);
    arg_u32(&a, n);
    arg_u32(&a, maxout ? 2 : 1);
    NMT_TRY(args_end(ops->dev, &a, "act_rows"));
    const size_t g[2] = {n, rows};
    return nmt_ops_launch(ops, ops->k_act_rows, 2, g, "act_rows");
}

nmt_status nmt_op_weighted_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, nmt_buf alpha, uint32_t ld_a,
                                uint32_t n_rows, uint32_t s_cap, uint32_t n, nmt_buf out, uint32_t ld_out) {
    if (ops == NULL || ops->k_weighted_rows == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_rows == 0 || n == 0) return NMT_OK;
    if (alpha.mem == NULL || out.mem == NULL || ld_a < s_cap || ld_out < n || (x.mem && ld_x < n))
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_weighted_rows);
    arg_mem(&a, x.mem ? x.mem : alpha.mem); /* absent: never read */
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_u32(&a, x.mem != NULL);
    arg_mem(&a, alpha.mem);
    arg_u64(&a, alpha.off);
    arg_u32(&a, ld_a);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    arg_u32(&a, n_rows);
    arg_u32(&a, s_cap);
    arg_u32(&a, n);
    NMT_TRY(args_end(ops->dev, &a, "weighted_rows"));
    const size_t g[2] = {n, n_rows};
    return nmt_ops_launch(ops, ops->k_weighted_rows, 2, g, "weighted_rows");
}

nmt_status nmt_op_lookup_q8(nmt_ops *ops, nmt_buf tok, uint32_t rows, nmt_buf q, nmt_buf qscale, uint32_t d,
                            nmt_buf out, uint32_t ld_out) {
    if (ops == NULL || ops->k_lookup_q8 == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (tok.mem == NULL || q.mem == NULL || qscale.mem == NULL || out.mem == NULL || ld_out < d)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_lookup_q8);
    arg_mem(&a, tok.mem);
    arg_u64(&a, tok.off);
    arg_u32(&a, rows);
    arg_mem(&a, q.mem);
    arg_u64(&a, q.off);
    arg_mem(&a, qscale.mem);
    arg_u64(&a, qscale.off);
    arg_u32(&a, d);
    arg_mem(&a, out.mem);
    arg_u64(&a, out.off);
    arg_u32(&a, ld_out);
    NMT_TRY(args_end(ops->dev, &a, "lookup_q8"));
    const size_t g[2] = {d, rows};
    return nmt_ops_launch(ops, ops->k_lookup_q8, 2, g, "lookup_q8");
}
