/* SPDX-License-Identifier: MIT */
/* transformer_phrase.c — phrase-based attention sub-layers (arch "phrase",
 * issue 16, docs/ARCHITECTURES.md): the Transformer's attention with
 * n-gram keys (ConvKV: convolved keys and values; QueryK: the query as an
 * n-tap kernel over token keys, convolved values), in homogeneous heads
 * (each head group one n-gram size, keys left-padded) or heterogeneous
 * heads (one softmax over the unigram, bigram, ... keys together).  Part
 * of the shared forward (transformer_fwd.h): decoding, scoring and
 * training run this code.
 *
 * Weights.  The Transformer's q|k|v (self) or q and k|v (cross) give the
 * unigram keys and every query; a homogeneous n-gram group adds n - 1 taps
 * (the positions before the key's last one) to its heads' keys and values
 * (ConvKV) or to their queries and values (QueryK), so its window of n
 * positions is the Transformer's row for the last tap plus ph<n>; a
 * heterogeneous n-gram segment has all n taps of its own with biases.
 *
 * Incremental decoding keeps, per decoder layer, the K|V cache of the
 * Transformer (now holding the convolved or QueryK keys), the segments'
 * caches, and the window of the last n_max inputs of the self-attention
 * (two buffers: this step's and the last one's); cross-attention's n-gram
 * keys and values are computed once per sentence (nmt_ph_cross_kv). */
#include "transformer_fwd.h"

#include <string.h>

/* Width of a segment's heads. */
static uint32_t seg_w(const nmt_tf_cfg *c, const nmt_ph_seg *g) { return g->nh * c->dh; }

/* Row width of a heterogeneous segment's own k | v (ConvKV) or v (QueryK). */
static uint32_t seg_ld(const nmt_tf_cfg *c, const nmt_ph_kind *pk) {
    return pk->method == NMT_PH_CONVKV ? 2 * c->d : c->d;
}

nmt_status nmt_ph_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_ph_kind *pk, uint32_t g, nmt_buf x,
                         uint32_t n_seq, uint32_t len, nmt_buf key_len) {
    const nmt_ph_seg *sg = &pk->seg[g];
    const uint32_t d = fw->c->d, taps = nmt_ph_taps(pk, sg);
    return nmt_op_window_rows(fw->ops, x, d, len, key_len, n_seq, len, taps, 1, sg->n - 1, d, a->ph_cols, taps * d);
}

/* QueryK: the extra query taps of segment g from the query input `in`. */
static nmt_status seg_query(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a,
                            const nmt_ph_kind *pk, uint32_t g, nmt_buf in, uint32_t rows) {
    if (pk->method != NMT_PH_QUERYK) return NMT_OK;
    const nmt_ph_seg *sg = &pk->seg[g];
    const uint32_t d = fw->c->d, qw = nmt_ph_taps(pk, sg) * seg_w(fw->c, sg);
    return nmt_layer_matmul(fw->ops, rows, qw, d, in, d, &w->ph_q[g], 0.0f, a->ph_qx[g], qw, w->ph_q[g].b, 0);
}

/* Segment g's keys / values from its window rows (cols, stride ld_cols):
 * homogeneous, added onto its heads' columns of the Transformer's k and v
 * (main, row stride main_ld: k at main_k, v at main_v); heterogeneous,
 * into out (row stride ld_out). */
static nmt_status seg_keys(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_ph_kind *pk, uint32_t g,
                           nmt_buf cols, uint32_t ld_cols, uint32_t rows, nmt_buf main_k, nmt_buf main_v,
                           uint32_t main_ld, nmt_buf out, uint32_t ld_out) {
    const nmt_tf_cfg *c = fw->c;
    const nmt_ph_seg *sg = &pk->seg[g];
    const uint32_t K = nmt_ph_taps(pk, sg) * c->d, wd = seg_w(c, sg), col = sg->h0 * c->dh;
    nmt_ops *ops = fw->ops;
    if (pk->structure == NMT_PH_HOMO) {
        if (pk->method == NMT_PH_CONVKV) {
            const nmt_lin wk = nmt_lin_rows(&w->ph_kv[g], 0, K), wv = nmt_lin_rows(&w->ph_kv[g], wd, K);
            NMT_TRY(nmt_layer_matmul(ops, rows, wd, K, cols, ld_cols, &wk, 1.0f, nmt_buf_at(main_k, col), main_ld,
                                     NMT_NO_BUF, 0));
            return nmt_layer_matmul(ops, rows, wd, K, cols, ld_cols, &wv, 1.0f, nmt_buf_at(main_v, col), main_ld,
                                    NMT_NO_BUF, 0);
        }
        return nmt_layer_matmul(ops, rows, wd, K, cols, ld_cols, &w->ph_v[g], 1.0f, nmt_buf_at(main_v, col), main_ld,
                                NMT_NO_BUF, 0);
    }
    const nmt_lin *wl = pk->method == NMT_PH_CONVKV ? &w->ph_kv[g] : &w->ph_v[g];
    return nmt_layer_matmul(ops, rows, seg_ld(c, pk), K, cols, ld_cols, wl, 0.0f, out, ld_out, wl->b, 0);
}

void nmt_ph_args(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_ph_kind *pk, int dec, int cross,
                 const nmt_tf_pass *p, uint32_t i, nmt_pattn_args *o) {
    const nmt_tf_cfg *c = fw->c;
    const uint32_t d = c->d;
    memset(o, 0, sizeof *o);
    o->n_heads = c->heads;
    o->d_head = c->dh;
    o->group = 1;
    o->n_seq = p->n;
    o->lq = p->len;
    o->p = fw->scores;
    o->out = a->ctx;
    o->out_ld = d;
    /* the Transformer's q, k, v and the positions the keys cover (cap) */
    nmt_buf q = a->qkv, k, v;
    uint32_t q_ld = 3 * d, kv_ld, cap;
    if (cross) {
        q_ld = d;
        k = a->kv;
        v = nmt_buf_at(a->kv, d);
        kv_ld = 2 * d;
        cap = o->lk_max = p->src_len;
        o->group = p->group;
        o->key_len = p->key_len;
        o->q_pos0 = p->step ? p->t : 0; /* the queries' positions (interleaved: b_0 is zero) */
    } else if (p->step) {
        k = a->kv;
        v = nmt_buf_at(a->kv, d);
        kv_ld = 2 * d;
        cap = p->cache_len;
        o->q_pos0 = p->t;
        o->lk_max = o->key_len_const = p->t + 1;
        o->causal = 1;
        o->kv_row = a->kv_row; /* the beam's K|V table covers the segment caches too */
        o->kv_row_ld = a->kv_row_ld;
    } else {
        k = nmt_buf_at(a->qkv, d);
        v = nmt_buf_at(a->qkv, 2 * (size_t)d);
        kv_ld = 3 * d;
        cap = o->lk_max = o->key_len_const = p->len;
        o->key_len = dec ? NMT_NO_BUF : p->key_len;
        o->causal = dec;
    }
    const uint64_t stride = (uint64_t)cap * kv_ld;
    if (pk->structure == NMT_PH_HOMO) {
        const nmt_ph_seg *sg = &pk->seg[i];
        const size_t col = (size_t)sg->h0 * c->dh;
        nmt_pattn_seg *s = &o->seg[0];
        o->n_segs = 1;
        o->n_heads = sg->nh;
        o->out = nmt_buf_at(a->ctx, col);
        *s = (nmt_pattn_seg){.q = nmt_buf_at(q, col), .q_ld = q_ld, .k = nmt_buf_at(k, col), .k_ld = kv_ld,
                             .v = nmt_buf_at(v, col), .v_ld = kv_ld, .k_stride = stride, .v_stride = stride};
        if (pk->method == NMT_PH_QUERYK && sg->n > 1) {
            s->qx = a->ph_qx[i];
            s->n_ext = sg->n - 1;
            s->qx_ld = s->n_ext * seg_w(c, sg);
        }
        return;
    }
    o->n_segs = pk->n_segs;
    if (pk->structure == NMT_PH_INTER) { /* call 0: unigram queries -> u; 1: bigram queries -> b */
        o->out = i == 0 ? nmt_buf_at(a->ctx, d) : a->ctx;
        o->out_ld = 2 * d;
        o->q_lo = i; /* b_0 is the interleaving's zero */
    }
    const uint32_t ld = seg_ld(c, pk);
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        const nmt_ph_seg *sg = &pk->seg[g];
        nmt_pattn_seg *s = &o->seg[g];
        *s = (nmt_pattn_seg){.q = q, .q_ld = q_ld, .k = k, .k_ld = kv_ld, .v = v, .v_ld = kv_ld, .k_stride = stride,
                             .v_stride = stride, .lo = sg->n - 1};
        if (pk->structure == NMT_PH_INTER && i == 1) { /* the bigram queries in place of the unigram ones */
            s->q = a->ph_qb;
            s->q_ld = d;
        }
        if (!nmt_ph_own(sg)) continue;
        s->v = pk->method == NMT_PH_CONVKV ? nmt_buf_at(a->ph_kv[g], d) : a->ph_kv[g];
        s->v_ld = ld;
        s->v_stride = (uint64_t)cap * ld;
        if (pk->method == NMT_PH_CONVKV) {
            s->k = a->ph_kv[g];
            s->k_ld = ld;
            s->k_stride = (uint64_t)cap * ld;
        } else {
            s->q = NMT_NO_BUF;
            s->q_ld = 0;
            s->qx = pk->structure == NMT_PH_INTER && i == 1 ? a->ph_qbx : a->ph_qx[g];
            s->n_ext = sg->n;
            s->qx_ld = sg->n * d;
        }
    }
}

nmt_status nmt_ph_out_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_tf_pass *p) {
    const uint32_t d = fw->c->d;
    return nmt_op_window_rows(fw->ops, a->ctx, 2 * d, p->len, p->key_len, p->n, p->len, 2, 1, 0, 2 * d, a->ph_cols,
                              4 * d);
}

/* Run the attention calls and W_o (interleaved: the output convolution;
 * ctx rows hold b_j | u_j, the encoder's window adds b_{j+1}, 0 past the
 * sentence). */
static nmt_status attend(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, const nmt_ph_kind *pk,
                         int dec, int cross, const nmt_tf_pass *p) {
    const uint32_t d = fw->c->d, rows = p->n * p->len;
    for (uint32_t i = 0; i < nmt_ph_calls(pk); i++) {
        nmt_pattn_args o;
        nmt_ph_args(fw, a, pk, dec, cross, p, i, &o);
        NMT_TRY(nmt_op_pattn(fw->ops, &o));
    }
    if (pk->structure != NMT_PH_INTER) return nmt_layer_linear(fw->ops, a->ctx, d, rows, &w->o, d, d, a->t, d, 0);
    if (dec) return nmt_layer_linear(fw->ops, a->ctx, 2 * d, rows, &w->o, d, 2 * d, a->t, d, 0);
    NMT_TRY(nmt_ph_out_window(fw, a, p));
    return nmt_layer_linear(fw->ops, a->ph_cols, 4 * d, rows, &w->o, d, 3 * d, a->t, d, 0);
}

nmt_status nmt_ph_bigram_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, int dec, const nmt_tf_pass *p,
                                nmt_buf in) {
    const uint32_t d = fw->c->d;
    return nmt_op_window_rows(fw->ops, in, d, p->len, dec ? NMT_NO_BUF : p->key_len, p->n, p->len, 2, 1, 1, d,
                              a->ph_cols, 2 * d);
}

/* Interleaved: the bigram queries from windows of two query inputs
 * (cols, stride ld_cols): ph_qb and QueryK's ph_qbx. */
static nmt_status bigram_queries(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a,
                                 const nmt_ph_kind *pk, nmt_buf cols, uint32_t ld_cols, uint32_t rows) {
    const uint32_t d = fw->c->d;
    NMT_TRY(nmt_layer_matmul(fw->ops, rows, d, 2 * d, cols, ld_cols, &w->ph_qb, 0.0f, a->ph_qb, d, w->ph_qb.b, 0));
    if (pk->method != NMT_PH_QUERYK) return NMT_OK;
    return nmt_layer_matmul(fw->ops, rows, 2 * d, 2 * d, cols, ld_cols, &w->ph_qb2, 0.0f, a->ph_qbx, 2 * d,
                            w->ph_qb2.b, 0);
}

/* Decoder self step: this step's window = the last one's shifted by one
 * position plus this input (positions before 0 are zeros: at t = 0 every
 * shifted tap lies before the sequence). */
static nmt_status shift_window(const nmt_tf_fwd *fw, const nmt_tf_acts *a, const nmt_ph_kind *pk,
                               const nmt_tf_pass *p, nmt_buf in) {
    const uint32_t d = fw->c->d, nm = pk->n_max, rows = p->n;
    if (nm < 2) return NMT_OK;
    const nmt_buf prev = p->t > 0 ? nmt_buf_at(a->ph_win_prev, d) : a->ph_win_prev;
    NMT_TRY(nmt_op_window_rows(fw->ops, prev, d, nm, NMT_NO_BUF, rows, 1, nm - 1, 1, p->t > 0 ? 0 : nm, d, a->ph_win,
                               nm * d));
    return nmt_op_copy_rows(fw->ops, in, d, nmt_buf_at(a->ph_win, (size_t)(nm - 1) * d), nm * d, rows, d);
}

nmt_status nmt_ph_attn(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, const nmt_ph_kind *pk,
                       int dec, int cross, const nmt_tf_pass *p, nmt_buf in) {
    const nmt_tf_cfg *c = fw->c;
    const uint32_t d = c->d, rows = p->n * p->len;
    const int inter = pk->structure == NMT_PH_INTER;
    if (cross) {
        NMT_TRY(nmt_layer_linear(fw->ops, in, d, rows, &w->q, d, d, a->qkv, d, 0));
        for (uint32_t g = 0; g < pk->n_segs; g++)
            if (nmt_ph_own(&pk->seg[g])) NMT_TRY(seg_query(fw, w, a, pk, g, in, rows));
        if (inter && p->step) {
            NMT_TRY(shift_window(fw, a, pk, p, in));
            NMT_TRY(bigram_queries(fw, w, a, pk, a->ph_win, 2 * d, rows));
        } else if (inter) {
            NMT_TRY(nmt_ph_bigram_window(fw, a, 1, p, in));
            NMT_TRY(bigram_queries(fw, w, a, pk, a->ph_cols, 2 * d, rows));
        }
        return attend(fw, w, a, pk, dec, 1, p);
    }
    NMT_TRY(nmt_layer_linear(fw->ops, in, d, rows, &w->qkv, 3 * d, d, a->qkv, 3 * d, 0));
    if (p->step) NMT_TRY(shift_window(fw, a, pk, p, in));
    const uint32_t ld = seg_ld(c, pk);
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        const nmt_ph_seg *sg = &pk->seg[g];
        if (!nmt_ph_own(sg)) continue;
        NMT_TRY(seg_query(fw, w, a, pk, g, in, rows));
        nmt_buf cols = a->ph_cols, out = a->ph_kv[g];
        uint32_t ld_cols = nmt_ph_taps(pk, sg) * d, ld_out = ld;
        if (p->step) { /* the window's taps of this segment; its row of the cache */
            cols = nmt_buf_at(a->ph_win, (size_t)(pk->n_max - sg->n) * d);
            ld_cols = pk->n_max * d;
            out = nmt_buf_at(a->ph_kv[g], (size_t)p->t * ld);
            ld_out = p->cache_len * ld;
        } else {
            NMT_TRY(nmt_ph_window(fw, a, pk, g, in, p->n, p->len, dec ? NMT_NO_BUF : p->key_len));
        }
        NMT_TRY(seg_keys(fw, w, pk, g, cols, ld_cols, rows, nmt_buf_at(a->qkv, d), nmt_buf_at(a->qkv, 2 * (size_t)d),
                         3 * d, out, ld_out));
    }
    if (inter) { /* the bigram queries: the step's window, or windows of the input */
        if (p->step) {
            NMT_TRY(bigram_queries(fw, w, a, pk, a->ph_win, 2 * d, rows));
        } else {
            NMT_TRY(nmt_ph_bigram_window(fw, a, dec, p, in));
            NMT_TRY(bigram_queries(fw, w, a, pk, a->ph_cols, 2 * d, rows));
        }
    }
    if (p->step) /* this position's K|V (with the homogeneous taps) into the cache */
        NMT_TRY(nmt_op_copy_rows(fw->ops, nmt_buf_at(a->qkv, d), 3 * d, nmt_buf_at(a->kv, (size_t)p->t * 2 * d),
                                 p->cache_len * 2 * d, rows, 2 * d));
    return attend(fw, w, a, pk, dec, 0, p);
}

nmt_status nmt_ph_cross_kv(const nmt_tf_fwd *fw, const nmt_tf_sub_w *w, const nmt_tf_acts *a, const nmt_ph_kind *pk,
                           nmt_buf memory, const nmt_tf_pass *p) {
    const uint32_t d = fw->c->d, rows = p->n * p->len;
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        if (!nmt_ph_own(&pk->seg[g])) continue;
        NMT_TRY(nmt_ph_window(fw, a, pk, g, memory, p->n, p->len, p->key_len));
        NMT_TRY(seg_keys(fw, w, pk, g, a->ph_cols, nmt_ph_taps(pk, &pk->seg[g]) * d, rows, a->kv,
                         nmt_buf_at(a->kv, d), 2 * d, a->ph_kv[g], seg_ld(fw->c, pk)));
    }
    return NMT_OK;
}
