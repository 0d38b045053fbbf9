/* SPDX-License-Identifier: MIT */
/* ops_phrase.c — phrase-memory ops (ops.h: nmt_ops_enable_phrase,
 * nmt_op_segment_max) over cl/phrase.cl, built only for the families that
 * pool tokens into phrases (MG-SA, issue 15). */
#include "ops_internal.h"

#include "kernel_args.h"

#include <math.h>
#include <string.h>

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
              {&ops->k_pattn_scores, "pattn_scores"},
              {&ops->k_pattn_softmax, "pattn_softmax"},
              {&ops->k_pattn_apply, "pattn_apply"},
              {&ops->k_pattn_fused, "pattn_fused"},
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
    if (x.mem == NULL || y.mem == NULL || n == 0 || stride == 0 || n_cap == 0 || ld_x < d ||
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
    arg_mem(&a, len.mem ? len.mem : x.mem); /* without len the kernel never reads the slot */
    arg_u64(&a, len.off);
    arg_i32(&a, len.mem != NULL);
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

/* Checks shared by nmt_op_pattn and its backward (ops_train.c). */
nmt_status nmt_pattn_check(const nmt_pattn_args *a) {
    if (a == NULL || a->group == 0 || a->n_segs == 0 || a->n_segs > NMT_PATTN_MAX_SEG) return NMT_ERR_INVALID_ARGUMENT;
    if (a->n_seq == 0 || a->lq == 0 || a->n_heads == 0 || a->d_head == 0 || a->lk_max == 0) return NMT_OK;
    const uint64_t w = (uint64_t)a->n_heads * a->d_head;
    if (a->p.mem == NULL || a->out.mem == NULL || a->out_ld < w) return NMT_ERR_INVALID_ARGUMENT;
    if ((uint64_t)a->q_pos0 + a->lq >= (1u << 30) || (uint64_t)a->n_segs * a->lk_max >= (1u << 30) ||
        (uint64_t)a->n_seq * a->n_heads * a->lq > UINT32_MAX)
        return NMT_ERR_UNSUPPORTED;
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g];
        const uint32_t n_win = nmt_pattn_n_win(s);
        if (n_win == 0 || s->k.mem == NULL || s->v.mem == NULL || s->k_ld < w || s->v_ld < w) return NMT_ERR_INVALID_ARGUMENT;
        if ((s->q.mem && s->q_ld < w) || (s->n_ext && (s->qx.mem == NULL || s->qx_ld < w * s->n_ext)))
            return NMT_ERR_INVALID_ARGUMENT;
    }
    return NMT_OK;
}

#define NMT_PATTN_MAX_DH 128 /* PATTN_MAX_DH of cl/phrase.cl */

/* The key-length and causal arguments every pattn scoring kernel takes. */
static void pattn_mask_args(args *k, const nmt_pattn_args *a) {
    arg_mem(k, a->key_len.mem ? a->key_len.mem : a->p.mem); /* without key_len the kernel never reads it */
    arg_u64(k, a->key_len.mem ? a->key_len.off : 0);
    arg_i32(k, a->key_len.mem != NULL);
    arg_u32(k, a->key_len_const);
    arg_i32(k, a->causal ? 1 : 0);
}

int nmt_ops_pattn_kv_row(const nmt_ops *ops, uint32_t d_head) {
    return ops != NULL && ops->k_pattn_fused != NULL && ops->attn_mode != NMT_ATTN_SPLIT &&
           d_head <= NMT_PATTN_MAX_DH;
}

/* One launch of pattn_fused (nmt_op_pattn's path for d_head <= 128). */
static nmt_status pattn_fused(nmt_ops *ops, const nmt_pattn_args *a) {
    args k = args_begin(ops->k_pattn_fused);
    arg_u32(&k, a->n_seq);
    arg_u32(&k, a->lq);
    arg_u32(&k, a->q_pos0);
    arg_u32(&k, a->lk_max);
    arg_u32(&k, a->group);
    arg_u32(&k, a->n_heads);
    arg_u32(&k, a->d_head);
    arg_u32(&k, a->n_segs);
    pattn_mask_args(&k, a);
    arg_u32(&k, a->q_lo);
    cl_ulong4 q_off, qx_off, k_off, v_off, k_st, v_st;
    cl_uint4 q_ld, qx_ld, k_ld, v_ld, n_ext, lo;
    cl_int4 has_q;
    memset(&q_off, 0, sizeof q_off), memset(&qx_off, 0, sizeof qx_off), memset(&k_off, 0, sizeof k_off);
    memset(&v_off, 0, sizeof v_off), memset(&k_st, 0, sizeof k_st), memset(&v_st, 0, sizeof v_st);
    memset(&q_ld, 0, sizeof q_ld), memset(&qx_ld, 0, sizeof qx_ld), memset(&k_ld, 0, sizeof k_ld);
    memset(&v_ld, 0, sizeof v_ld), memset(&n_ext, 0, sizeof n_ext), memset(&lo, 0, sizeof lo);
    memset(&has_q, 0, sizeof has_q);
    /* unused segments and absent q / qx are never read: segment 0's k fills them */
    for (int which = 0; which < 4; which++)
        for (uint32_t g = 0; g < NMT_PATTN_MAX_SEG; g++) {
            const nmt_pattn_seg *s = &a->seg[g < a->n_segs ? g : 0];
            const nmt_buf b = which == 0 ? s->q : which == 1 ? s->qx : which == 2 ? s->k : s->v;
            arg_mem(&k, g < a->n_segs && b.mem ? b.mem : a->seg[0].k.mem);
        }
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g];
        q_off.s[g] = s->q.off, qx_off.s[g] = s->qx.off, k_off.s[g] = s->k.off, v_off.s[g] = s->v.off;
        q_ld.s[g] = s->q_ld, qx_ld.s[g] = s->qx_ld, k_ld.s[g] = s->k_ld, v_ld.s[g] = s->v_ld;
        k_st.s[g] = s->k_stride, v_st.s[g] = s->v_stride, n_ext.s[g] = s->n_ext, lo.s[g] = s->lo;
        has_q.s[g] = s->q.mem != NULL;
    }
    arg_raw(&k, sizeof q_off, &q_off);
    arg_raw(&k, sizeof qx_off, &qx_off);
    arg_raw(&k, sizeof k_off, &k_off);
    arg_raw(&k, sizeof v_off, &v_off);
    arg_raw(&k, sizeof q_ld, &q_ld);
    arg_raw(&k, sizeof qx_ld, &qx_ld);
    arg_raw(&k, sizeof k_ld, &k_ld);
    arg_raw(&k, sizeof v_ld, &v_ld);
    arg_raw(&k, sizeof k_st, &k_st);
    arg_raw(&k, sizeof v_st, &v_st);
    arg_raw(&k, sizeof n_ext, &n_ext);
    arg_raw(&k, sizeof lo, &lo);
    arg_raw(&k, sizeof has_q, &has_q);
    arg_mem(&k, a->kv_row.mem ? a->kv_row.mem : a->p.mem); /* without the table the kernel never reads it */
    arg_u64(&k, a->kv_row.mem ? a->kv_row.off : 0);
    arg_u32(&k, a->kv_row_ld);
    arg_i32(&k, a->kv_row.mem != NULL);
    arg_mem(&k, a->p.mem);
    arg_u64(&k, a->p.off);
    arg_i32(&k, 1);
    arg_mem(&k, a->out.mem);
    arg_u64(&k, a->out.off);
    arg_u32(&k, a->out_ld);
    NMT_TRY(args_end(ops->dev, &k, "pattn_fused"));
    const size_t n[2] = {(size_t)a->n_seq * a->n_heads, a->lq};
    return nmt_ops_launch(ops, ops->k_pattn_fused, 2, n, "pattn_fused");
}

nmt_status nmt_op_pattn(nmt_ops *ops, const nmt_pattn_args *a) {
    if (ops == NULL || ops->k_pattn_scores == NULL) return NMT_ERR_INVALID_ARGUMENT;
    NMT_TRY(nmt_pattn_check(a));
    if (a->n_seq == 0 || a->lq == 0 || a->n_heads == 0 || a->d_head == 0 || a->lk_max == 0) return NMT_OK;
    if (nmt_ops_pattn_kv_row(ops, a->d_head)) return pattn_fused(ops, a);
    if (a->kv_row.mem != NULL) return NMT_ERR_UNSUPPORTED; /* only the fused kernel reads through a table */
    const uint32_t p_ld = a->n_segs * a->lk_max, rows = a->n_seq * a->n_heads * a->lq;
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g];
        args k = args_begin(ops->k_pattn_scores);
        arg_u32(&k, a->n_seq);
        arg_u32(&k, a->lq);
        arg_u32(&k, a->q_pos0);
        arg_u32(&k, a->lk_max);
        arg_u32(&k, a->group);
        arg_u32(&k, a->n_heads);
        arg_u32(&k, a->d_head);
        arg_f32(&k, (float)(1.0 / sqrt((double)nmt_pattn_n_win(s) * a->d_head)));
        /* absent q / qx are never read: any buffer fills the slot */
        arg_mem(&k, s->q.mem ? s->q.mem : s->k.mem);
        arg_u64(&k, s->q.off);
        arg_u32(&k, s->q_ld);
        arg_i32(&k, s->q.mem != NULL);
        arg_mem(&k, s->qx.mem ? s->qx.mem : s->k.mem);
        arg_u64(&k, s->qx.off);
        arg_u32(&k, s->qx_ld);
        arg_u32(&k, s->n_ext);
        arg_mem(&k, s->k.mem);
        arg_u64(&k, s->k.off);
        arg_u32(&k, s->k_ld);
        arg_u64(&k, s->k_stride);
        pattn_mask_args(&k, a);
        arg_u32(&k, s->lo);
        arg_u32(&k, a->q_lo);
        arg_mem(&k, a->p.mem);
        arg_u64(&k, a->p.off);
        arg_u32(&k, p_ld);
        arg_u32(&k, g * a->lk_max);
        NMT_TRY(args_end(ops->dev, &k, "pattn_scores"));
        const size_t n[3] = {a->lk_max, a->lq, (size_t)a->n_seq * a->n_heads};
        NMT_TRY(nmt_ops_launch(ops, ops->k_pattn_scores, 3, n, "pattn_scores"));
    }
    args k = args_begin(ops->k_pattn_softmax);
    arg_u32(&k, rows);
    arg_u32(&k, p_ld);
    arg_mem(&k, a->p.mem);
    arg_u64(&k, a->p.off);
    NMT_TRY(args_end(ops->dev, &k, "pattn_softmax"));
    const size_t nr[1] = {rows};
    NMT_TRY(nmt_ops_launch(ops, ops->k_pattn_softmax, 1, nr, "pattn_softmax"));
    for (uint32_t g = 0; g < a->n_segs; g++) {
        const nmt_pattn_seg *s = &a->seg[g];
        args v = args_begin(ops->k_pattn_apply);
        arg_u32(&v, a->n_seq);
        arg_u32(&v, a->lq);
        arg_u32(&v, a->lk_max);
        arg_u32(&v, a->group);
        arg_u32(&v, a->n_heads);
        arg_u32(&v, a->d_head);
        arg_mem(&v, s->v.mem);
        arg_u64(&v, s->v.off);
        arg_u32(&v, s->v_ld);
        arg_u64(&v, s->v_stride);
        arg_mem(&v, a->p.mem);
        arg_u64(&v, a->p.off);
        arg_u32(&v, p_ld);
        arg_u32(&v, g * a->lk_max);
        arg_i32(&v, g > 0);
        arg_mem(&v, a->out.mem);
        arg_u64(&v, a->out.off);
        arg_u32(&v, a->out_ld);
        NMT_TRY(args_end(ops->dev, &v, "pattn_apply"));
        const size_t n[3] = {a->d_head, a->lq, (size_t)a->n_seq * a->n_heads};
        NMT_TRY(nmt_ops_launch(ops, ops->k_pattn_apply, 3, n, "pattn_apply"));
    }
    return NMT_OK;
}
