/* ops_phrase.c — phrase-memory ops (ops.h: nmt_ops_enable_phrase,
 * nmt_op_segment_max) over cl/phrase.cl, built only for the families that
 * pool tokens into phrases (MG-SA, issue 15). */
#include "ops.h"

#include "kernel_args.h"

nmt_status nmt_ops_enable_phrase(nmt_ops *ops) {
    if (ops == NULL || ops->dev == NULL || ops->k_add == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ops->k_window_rows != NULL) return NMT_OK;
    cl_program prog;
    NMT_TRY(nmt_device_program(ops->dev, "phrase", "", &prog));
    struct {
        cl_kernel *k;
        const char *name;
    } ks[] = {{&ops->k_segment_max, "segment_max"},
              {&ops->k_ngram_spans, "ngram_spans"},
              {&ops->k_span_tokens, "span_tokens"},
              {&ops->k_span_last, "span_last"},
              {&ops->k_window_rows, "window_rows"}}; /* the last one created marks the set done */
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (*ks[i].k == NULL) NMT_TRY(nmt_device_kernel(ops->dev, prog, ks[i].name, ks[i].k));
    return NMT_OK;
}

nmt_status nmt_op_segment_max(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf seg,
                              uint32_t n_sent, uint32_t m_cap, uint32_t d, nmt_buf g, uint32_t ld_g, nmt_buf arg) {
    if (ops == NULL || ops->k_segment_max == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_sent == 0 || m_cap == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || seg.mem == NULL || g.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_x < d || ld_g < d || n_cap == 0) return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t rows = (uint64_t)n_sent * m_cap;
    if (rows > UINT32_MAX || (uint64_t)n_sent * n_cap > INT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_segment_max);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_u32(&a, n_cap);
    arg_mem(&a, seg.mem);
    arg_u64(&a, seg.off);
    arg_u32(&a, m_cap);
    arg_u32(&a, (uint32_t)rows);
    arg_u32(&a, d);
    arg_mem(&a, g.mem);
    arg_u64(&a, g.off);
    arg_u32(&a, ld_g);
    /* without arg the kernel never writes A: any buffer fills the slot */
    arg_mem(&a, arg.mem ? arg.mem : seg.mem);
    arg_u64(&a, arg.mem ? arg.off : 0);
    arg_i32(&a, arg.mem != NULL);
    NMT_TRY(args_end(ops->dev, &a, "segment_max"));
    const size_t n[2] = {d, (size_t)rows};
    return nmt_ops_launch(ops, ops->k_segment_max, 2, n, "segment_max");
}

nmt_status nmt_op_ngram_spans(nmt_ops *ops, nmt_buf len, uint32_t n_sent, uint32_t n, uint32_t m_cap, nmt_buf seg,
                              nmt_buf count) {
    if (ops == NULL || ops->k_ngram_spans == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_sent == 0 || m_cap == 0) return NMT_OK;
    if (len.mem == NULL || seg.mem == NULL || count.mem == NULL || n < 1 || n > 64) return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)m_cap * n > INT32_MAX || (uint64_t)n_sent * m_cap > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_ngram_spans);
    arg_mem(&a, len.mem);
    arg_u64(&a, len.off);
    arg_u32(&a, n_sent);
    arg_u32(&a, n);
    arg_u32(&a, m_cap);
    arg_mem(&a, seg.mem);
    arg_u64(&a, seg.off);
    arg_mem(&a, count.mem);
    arg_u64(&a, count.off);
    NMT_TRY(args_end(ops->dev, &a, "ngram_spans"));
    const size_t g[2] = {m_cap, n_sent};
    return nmt_ops_launch(ops, ops->k_ngram_spans, 2, g, "ngram_spans");
}

nmt_status nmt_op_span_tokens(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf seg, uint32_t n_sent,
                              uint32_t m_cap, uint32_t t_cap, uint32_t d, nmt_buf p, nmt_buf count) {
    if (ops == NULL || ops->k_span_tokens == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_sent == 0 || m_cap == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || seg.mem == NULL || p.mem == NULL || count.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (ld_x < d || n_cap == 0 || t_cap == 0) return NMT_ERR_INVALID_ARGUMENT;
    const uint64_t rows = (uint64_t)n_sent * m_cap;
    if (rows * t_cap > UINT32_MAX || (uint64_t)n_sent * n_cap > INT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_span_tokens);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_u32(&a, n_cap);
    arg_mem(&a, seg.mem);
    arg_u64(&a, seg.off);
    arg_u32(&a, m_cap);
    arg_u32(&a, (uint32_t)rows);
    arg_u32(&a, t_cap);
    arg_u32(&a, d);
    arg_mem(&a, p.mem);
    arg_u64(&a, p.off);
    arg_mem(&a, count.mem);
    arg_u64(&a, count.off);
    NMT_TRY(args_end(ops->dev, &a, "span_tokens"));
    const size_t n[2] = {d, (size_t)(rows * t_cap)};
    return nmt_ops_launch(ops, ops->k_span_tokens, 2, n, "span_tokens");
}

nmt_status nmt_op_span_last(nmt_ops *ops, nmt_buf h, uint32_t ld_h, nmt_buf seg, uint32_t rows, uint32_t t_cap,
                            uint32_t d, nmt_buf g, uint32_t ld_g) {
    if (ops == NULL || ops->k_span_last == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (rows == 0 || d == 0) return NMT_OK;
    if (h.mem == NULL || seg.mem == NULL || g.mem == NULL || ld_h < d || ld_g < d || t_cap == 0)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)rows * t_cap > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_span_last);
    arg_mem(&a, h.mem);
    arg_u64(&a, h.off);
    arg_u32(&a, ld_h);
    arg_mem(&a, seg.mem);
    arg_u64(&a, seg.off);
    arg_u32(&a, rows);
    arg_u32(&a, t_cap);
    arg_u32(&a, d);
    arg_mem(&a, g.mem);
    arg_u64(&a, g.off);
    arg_u32(&a, ld_g);
    NMT_TRY(args_end(ops->dev, &a, "span_last"));
    const size_t n[2] = {d, rows};
    return nmt_ops_launch(ops, ops->k_span_last, 2, n, "span_last");
}

nmt_status nmt_op_window_rows(nmt_ops *ops, nmt_buf x, uint32_t ld_x, uint32_t n_cap, nmt_buf len, uint32_t n_seq,
                              uint32_t t_out, uint32_t n, uint32_t stride, uint32_t pad, uint32_t d, nmt_buf y,
                              uint32_t ld_y) {
    if (ops == NULL || ops->k_window_rows == NULL) return NMT_ERR_INVALID_ARGUMENT;
    if (n_seq == 0 || t_out == 0 || d == 0) return NMT_OK;
    if (x.mem == NULL || len.mem == NULL || y.mem == NULL || n == 0 || stride == 0 || n_cap == 0 || ld_x < d ||
        (uint64_t)ld_y < (uint64_t)n * d)
        return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)n_seq * t_out > UINT32_MAX || (uint64_t)n_seq * n_cap > INT32_MAX ||
        (uint64_t)t_out * stride + n > INT32_MAX)
        return NMT_ERR_INVALID_ARGUMENT;
    args a = args_begin(ops->k_window_rows);
    arg_mem(&a, x.mem);
    arg_u64(&a, x.off);
    arg_u32(&a, ld_x);
    arg_u32(&a, n_cap);
    arg_mem(&a, len.mem);
    arg_u64(&a, len.off);
    arg_u32(&a, n_seq);
    arg_u32(&a, t_out);
    arg_u32(&a, n);
    arg_u32(&a, stride);
    arg_u32(&a, pad);
    arg_u32(&a, d);
    arg_mem(&a, y.mem);
    arg_u64(&a, y.off);
    arg_u32(&a, ld_y);
    NMT_TRY(args_end(ops->dev, &a, "window_rows"));
    const size_t g[3] = {d, n, (size_t)n_seq * t_out};
    return nmt_ops_launch(ops, ops->k_window_rows, 3, g, "window_rows");
}
