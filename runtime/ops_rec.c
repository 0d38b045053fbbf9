/* ops_rec.c — recurrent-cell ops (ops.h: nmt_ops_enable_recurrent,
 * nmt_op_lstm_cell) over cl/recurrent.cl, built only for the families with
 * recurrent layers (MG-SA's LSTM / ON-LSTM interaction, issue 15). */
#include "ops.h"

#include "kernel_args.h"

nmt_status nmt_ops_enable_recurrent(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_lstm_cell != NULL) return NMT_OK;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "recurrent", "", &prog));
    return nmt_device_kernel(ops->dev, prog, "lstm_cell", &ops->k_lstm_cell);
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
