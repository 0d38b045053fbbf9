/* SPDX-License-Identifier: MIT */
/* tf_train_tag.c — MG-SA's phrase-tag supervision (a training-time loss of
 * syntax heads, docs/ARCHITECTURES.md): in every MG layer,
 *   p = softmax(W_t g_m + b_t)  over the phrase labels of spans_file.h,
 *   L_tag = -sum over the phrases that are spans of log p(label),
 * g_m the phrase's composed (max-pooled) row before the interaction, of
 * the layer's first syntax head group; the objective is L_nmt + lambda
 * L_tag.  W_t, b_t are training-only tensors named train.enc.L.self_attn.
 * phrase_tag.{weight,bias}: in the trainer's layout and checkpoints, never
 * in the runtime's catalogue, dropped by `nmt-edge-convert export` and by
 * the trainer's deployment model (the train.* rule). */
#include "tf_train.h"
#include "tf_train_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spans_file.h"

/* The layer's first syntax group; mg_n_groups when none. */
static uint32_t tag_group(const tft_cfg *c) {
    uint32_t g = 0;
    while (g < c->mg_n_groups && !c->mg_group[g].syntax) g++;
    return g;
}

int tft_tag_layer(const tft_cfg *c, uint32_t l) { return nmt_mg_has_syntax(c) && nmt_mg_layer(c, l); }

nmt_status tft_tag_catalogue(const tft_cfg *c, nmt_lin *tag, nmt_tensor_fn fn, void *ctx) {
    for (uint32_t l = 0; l < c->enc_layers; l++) {
        if (!tft_tag_layer(c, l)) continue;
        nmt_tensor_decl t;
        memset(&t, 0, sizeof t);
        t.ndim = 2;
        t.shape[0] = TSP_N_LABELS;
        t.shape[1] = c->d;
        t.fan_in = c->d;
        t.dst = tag ? &tag[l] : NULL;
        t.role = NMT_ROLE_WEIGHT;
        t.part = 0;
        t.n_parts = 1;
        snprintf(t.name, sizeof t.name, "train.enc.%u.self_attn.phrase_tag.weight", l);
        NMT_TRY(fn(ctx, &t));
        t.ndim = 1;
        t.shape[1] = 0;
        t.role = NMT_ROLE_BIAS;
        snprintf(t.name, sizeof t.name, "train.enc.%u.self_attn.phrase_tag.bias", l);
        NMT_TRY(fn(ctx, &t));
    }
    return NMT_OK;
}

nmt_status tft_tag_alloc(tft_model *m, nmt_status (*dbuf)(tft_model *, size_t, nmt_buf *)) {
    if (!nmt_mg_has_syntax(&m->c)) return NMT_OK;
    const size_t R = m->lim.max_tokens;
    NMT_TRY(dbuf(m, R * TSP_N_LABELS * m->c.enc_layers, &m->tag_logits));
    NMT_TRY(dbuf(m, R, &m->tag_tgt));
    NMT_TRY(dbuf(m, R, &m->tag_loss));
    m->h_tag = malloc(R * sizeof(int32_t));
    NMT_CHECK(m->h_tag != NULL, NMT_ERR_IO);
    return NMT_OK;
}

nmt_status tft_tag_targets(tft_model *m, const tft_batch *b) {
    const uint32_t S = b->src_len;
    m->tag_n = 0;
    for (uint32_t i = 0; i < b->n_seq; i++) {
        const int32_t *seg = m->h_syn_seg + (size_t)i * S * 2;
        const uint32_t ns = b->spans ? b->n_spans[i] : 0;
        uint32_t k = 0;
        for (uint32_t r = 0; r < S; r++) {
            int32_t lab = -1;
            if (b->span_labels && (int32_t)r < m->h_syn_cnt[i] && k < ns &&
                (uint32_t)seg[2 * r] == b->spans[i][k].start) {
                lab = b->span_labels[i] ? b->span_labels[i][k] : -1;
                k++;
            }
            m->h_tag[(size_t)i * S + r] = lab;
            m->tag_n += lab >= 0;
        }
    }
    if (m->tag_n == 0) return NMT_OK;
    return nmt_device_write(m->dev, m->tag_tgt.mem, 0, (size_t)b->n_seq * S * sizeof(int32_t), m->h_tag);
}

/* The composed phrase rows g of MG layer sub-layer s (before any interaction). */
static nmt_buf tag_input(const tft_model *m, const sub_desc *s) {
    const uint32_t g = tag_group(&m->c);
    return m->c.mg_interact != NMT_MG_REC_NONE ? s->a.mg_pool[g] : s->a.mg_hg[g];
}

static nmt_buf tag_logits(const tft_model *m, uint32_t l) {
    return nmt_buf_at(m->tag_logits, (size_t)l * m->lim.max_tokens * TSP_N_LABELS);
}

nmt_status tft_tag_forward(tft_model *m, float lambda, float grad_scale, double *sum) {
    *sum = 0.0;
    m->tag_on = 0;
    if (m->tag_logits.mem == NULL || lambda == 0.0f || m->tag_n == 0) return NMT_OK;
    const uint32_t rows = m->n * m->S, d = m->c.d;
    for (uint32_t k = 0; k < m->n_enc_sub; k++) {
        const sub_desc *s = &m->subs[k];
        if (!tft_is_mg(m, s)) continue;
        const uint32_t l = k / 2;
        const nmt_buf lg = tag_logits(m, l);
        NMT_TRY(nmt_layer_linear(&m->ops, tag_input(m, s), d, rows, &m->tag[l], TSP_N_LABELS, d, lg, TSP_N_LABELS, 0));
        NMT_TRY(nmt_op_xent(&m->t, lg, rows, TSP_N_LABELS, TSP_N_LABELS, m->tag_tgt, -1, 0.0f, lambda * grad_scale,
                            m->tag_loss, NO_BUF, lg, TSP_N_LABELS));
        NMT_TRY(nmt_op_reduce_sum(&m->t, m->tag_loss, rows, 0, m->partial, m->red));
        float v;
        NMT_TRY(nmt_device_read(m->dev, m->red.mem, 0, sizeof v, &v));
        *sum += v;
    }
    m->tag_on = 1;
    return NMT_OK;
}

nmt_status tft_tag_bwd(tft_model *m, const sub_desc *s, uint32_t g, nmt_buf d_pooled) {
    if (!m->tag_on || g != tag_group(&m->c)) return NMT_OK;
    const uint32_t l = (uint32_t)(s - m->subs) / 2, rows = m->n * m->S, d = m->c.d;
    const nmt_lin *w = &m->tag[l];
    return nmt_op_linear_bwd(&m->ops, &m->t, rows, TSP_N_LABELS, d, tag_input(m, s), d, w->w, tag_logits(m, l),
                             TSP_N_LABELS, d_pooled, d, 1.0f, GB(m, w->w), GB(m, w->b), 1.0f);
}
