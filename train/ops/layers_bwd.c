/* SPDX-License-Identifier: MIT */
/* layers_bwd.c — backward of the shared layers of runtime/ops/layers.h that
 * are more than one op (ops_train.h, "shared layers"). */
#include "ops_train.h"

nmt_status nmt_layer_lstm_bwd(nmt_ops *ops, nmt_train_ops *t, nmt_buf x, uint32_t ld_x, uint32_t n_seq,
                              uint32_t t_cap, uint32_t in_dim, uint32_t h, uint32_t chunk, nmt_buf w_ih, nmt_buf w_hh,
                              nmt_buf count, nmt_buf z, nmt_buf c, nmt_buf out, uint32_t ld_out, nmt_buf dout,
                              uint32_t ld_dout, nmt_buf dz, nmt_buf dc, nmt_buf dm, nmt_buf dx, uint32_t ld_dx,
                              float dx_beta, nmt_buf g_ih, nmt_buf g_ib, nmt_buf g_hh) {
    if (n_seq == 0 || t_cap == 0) return NMT_OK;
    if (chunk && h % chunk) return NMT_ERR_INVALID_ARGUMENT;
    const uint32_t G = nmt_lstm_gates(h, chunk);
    const uint64_t rows = (uint64_t)n_seq * t_cap;
    if ((uint64_t)t_cap * ld_out > UINT32_MAX || (uint64_t)t_cap * ld_dout > UINT32_MAX ||
        (uint64_t)t_cap * G > UINT32_MAX || rows > UINT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    const nmt_buf none = {NULL, 0};
    const uint32_t sz = t_cap * G; /* stride between a sequence's rows of one step */
    NMT_TRY(nmt_op_fill(t, dc, n_seq * h, 0.0f));
    for (uint32_t s = t_cap; s-- > 0;) {
        /* dh_s += dz_{s+1} W_hh (h_s fed step s + 1) */
        if (s + 1 < t_cap)
            NMT_TRY(nmt_op_gemm(ops, 0, n_seq, h, G, 1.0f, nmt_buf_at(dz, (size_t)(s + 1) * G), sz, w_hh, h, 1.0f,
                                nmt_buf_at(dout, (size_t)s * ld_dout), t_cap * ld_dout, none, 0));
        NMT_TRY(nmt_op_lstm_cell_bwd(t, z, c, dout, ld_dout, dc, dz, dm, count, n_seq, t_cap, s, h, chunk));
        if (chunk) NMT_TRY(nmt_op_onlstm_master_bwd(t, z, dm, dz, count, n_seq, t_cap, s, h, chunk));
        /* W_hh's gradient: dz_s^T h_{s-1} */
        if (s > 0)
            NMT_TRY(nmt_op_gemm_tn(t, G, h, n_seq, 1.0f, nmt_buf_at(dz, (size_t)s * G), sz,
                                   nmt_buf_at(out, (size_t)(s - 1) * ld_out), t_cap * ld_out, 1.0f, g_hh, h));
    }
    return nmt_op_linear_bwd(ops, t, (uint32_t)rows, G, in_dim, x, ld_x, w_ih, dz, G, dx, ld_dx, dx_beta, g_ih, g_ib,
                             1.0f);
}

nmt_status nmt_layer_conv1d_bwd(nmt_ops *ops, nmt_train_ops *t, nmt_buf len, uint32_t n_seq, uint32_t n_cap,
                                uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t in_dim, nmt_buf w,
                                uint32_t out_dim, nmt_buf cols, nmt_buf dout, uint32_t ld_dout, nmt_buf dcols,
                                nmt_buf dx, uint32_t ld_dx, nmt_buf g_w, nmt_buf g_b) {
    if (n_seq == 0 || t_out == 0) return NMT_OK;
    const uint64_t k = (uint64_t)n * in_dim, rows = (uint64_t)n_seq * t_out;
    if (k > UINT32_MAX || rows > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_op_linear_bwd(ops, t, (uint32_t)rows, out_dim, (uint32_t)k, cols, (uint32_t)k, w, dout, ld_dout,
                              dcols, (uint32_t)k, 0.0f, g_w, g_b, 1.0f));
    return nmt_op_window_rows_bwd(t, dcols, (uint32_t)k, len, n_seq, n_cap, t_out, n, stride, pad, in_dim, dx, ld_dx);
}

nmt_status nmt_layer_gru_bwd(nmt_ops *ops, nmt_train_ops *t, nmt_buf x, uint32_t ld_x, uint32_t n_seq, uint32_t t_cap,
                             uint32_t in_dim, uint32_t h, int reverse, nmt_buf w_ih, nmt_buf w_hh, nmt_buf count,
                             nmt_buf z, nmt_buf dout, uint32_t ld_dout, nmt_buf dz, nmt_buf dg, nmt_buf dh, nmt_buf dx,
                             uint32_t ld_dx, float dx_beta, nmt_buf g_ih, nmt_buf g_ib, nmt_buf g_hh, nmt_buf g_hb) {
    if (n_seq == 0 || t_cap == 0) return NMT_OK;
    const uint64_t rows = (uint64_t)n_seq * t_cap;
    if (rows > UINT32_MAX || (uint64_t)h * 5 > UINT32_MAX || w_hh.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    const nmt_buf none = {NULL, 0};
    const uint32_t G = 3 * h, W = 5 * h, D = 4 * h; /* rows of z (r, u, n, hn, h_prev) and dz (3h, hn) */
    NMT_TRY(nmt_op_fill(t, dh, n_seq * h, 0.0f));
    for (uint32_t s = t_cap; s-- > 0;) {
        NMT_TRY(nmt_op_gru_cell_bwd(t, z, W, dout, ld_dout, dh, dz, D, dg, count, n_seq, t_cap, s, reverse, h));
        /* dh_{s-1} += dg_s W_hh (h_{s-1} fed step s's product) */
        NMT_TRY(nmt_op_gemm(ops, 0, n_seq, h, G, 1.0f, dg, G, w_hh, h, 1.0f, dh, h, none, 0));
    }
    /* W_hh, b_hh: r and z rows from dz's first 2h columns, n rows from its hn column block */
    const nmt_buf hp = nmt_buf_at(z, 4 * (size_t)h);
    NMT_TRY(nmt_op_linear_bwd(ops, t, (uint32_t)rows, 2 * h, h, hp, W, none, dz, D, none, 0, 0.0f, g_hh, g_hb, 1.0f));
    NMT_TRY(nmt_op_linear_bwd(ops, t, (uint32_t)rows, h, h, hp, W, none, nmt_buf_at(dz, G), D, none, 0, 0.0f,
                              nmt_buf_at(g_hh, 2 * (size_t)h * h), g_hb.mem ? nmt_buf_at(g_hb, 2 * (size_t)h) : none,
                              1.0f));
    return nmt_op_linear_bwd(ops, t, (uint32_t)rows, G, in_dim, x, ld_x, w_ih, dz, D, dx, ld_dx, dx_beta, g_ih, g_ib,
                             1.0f);
}
