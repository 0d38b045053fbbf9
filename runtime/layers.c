/* layers.c — shared layers over the op layer (layers.h). */
#include "layers.h"

nmt_status nmt_layer_matmul(nmt_ops *ops, uint32_t rows, uint32_t N, uint32_t K, nmt_buf in, uint32_t ld_in,
                            const nmt_lin *w, float beta, nmt_buf out, uint32_t ld_out, nmt_buf bias, int relu) {
    if (w->q8)
        return nmt_op_gemm_q8(ops, rows, N, K, 1.0f, in, ld_in, w->w, K, w->s, beta, out, ld_out, bias, relu);
    return nmt_op_gemm(ops, 1, rows, N, K, 1.0f, in, ld_in, w->w, K, beta, out, ld_out, bias, relu);
}

nmt_status nmt_layer_embed(nmt_ops *ops, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                           const nmt_lin *E, uint32_t d, float scale, nmt_buf out) {
    if (E->q8) return nmt_op_embed_q8(ops, tok, rows, seq_len, pos0, E->w, E->s, d, scale, out);
    return nmt_op_embed(ops, tok, rows, seq_len, pos0, E->w, d, scale, out);
}
