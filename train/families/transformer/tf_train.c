/* SPDX-License-Identifier: MIT */
/* tf_train.c — the Transformer/HySAN family with gradients (tf_train.h).
 *
 * The forward is the runtime's own (transformer_fwd.c), run over buffers
 * that keep every activation the backward needs per sub-layer, with
 * dropout; the backward (tf_train_bwd.c) chains ops_train.h as
 * docs/TRAINING-OPS.md describes.  Parameters, gradients and Adam moments
 * are four flat device buffers with one layout (train/ops/param_store.h). */
#include "tf_train.h"
#include "tf_train_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "format.h"
#include "family_writer.h"
#include "spans.h"

/* host allocation failure (the writer's convention: no dedicated status) */
#define TFT_ERR_NOMEM NMT_ERR_IO

/* ------------------------------------------------------------------------ */
/* Configuration and parameter layout: the family's declaration             */
/* (transformer_cfg.h: hyper-parameter table, tensor catalogue)             */
/* ------------------------------------------------------------------------ */

static nmt_status parse_cfg(const nmt_file *f, tft_model *m) {
    const nmt_family *fam;
    NMT_TRY(nmt_family_of(f, &fam));
    /* this file is the trainer's model of the Transformer family, of MG-SA
     * (the same weights, phrase heads in the forward) and of the
     * phrase-based attentions (n-gram keys in its attention sub-layers) */
    NMT_CHECK(fam == &nmt_family_transformer || fam == &nmt_family_mgsa || fam == &nmt_family_phrase,
              NMT_ERR_MODEL_ARCH);
    m->fam = fam;
    NMT_TRY(nmt_family_parse(fam, f, &m->c));
    return NMT_OK;
}

/* The tensors of P (train/ops/param_store.h lays them out): the catalogue,
 * then the training-only train.* ones (the MG-SA tagger). */
static nmt_status walk(void *mp, int bind, nmt_tensor_fn fn, void *ctx) {
    tft_model *m = (tft_model *)mp;
    NMT_TRY(nmt_tf_catalogue(&m->c, bind ? &m->w : NULL, fn, ctx));
    return tft_tag_catalogue(&m->c, bind ? m->tag : NULL, fn, ctx);
}

/* ------------------------------------------------------------------------ */
/* The model (its types: tf_train_internal.h)                              */
/* ------------------------------------------------------------------------ */

static nmt_status dbuf(tft_model *m, size_t elems, nmt_buf *out) {
    size_t bytes;
    NMT_CHECK(nmt_mul_ok(elems ? elems : 1, sizeof(float), &bytes), NMT_ERR_DEVICE_MEMORY);
    if (m->n_mems == m->cap_mems) {
        size_t cap = m->cap_mems ? m->cap_mems * 2 : 64;
        cl_mem *p = realloc(m->mems, cap * sizeof *p);
        NMT_CHECK(p != NULL, TFT_ERR_NOMEM);
        m->mems = p;
        m->cap_mems = cap;
    }
    cl_mem mem = NULL;
    NMT_TRY(nmt_device_buffer(m->dev, bytes, NULL, &mem));
    m->mems[m->n_mems++] = mem;
    out->mem = mem;
    out->off = 0;
    return NMT_OK;
}

void tft_destroy(tft_model *m) {
    if (m == NULL) return;
    if (m->t_ok) nmt_train_ops_release(&m->t);
    if (m->ops_ok) nmt_ops_release(&m->ops);
    for (size_t i = 0; i < m->n_mems; i++)
        if (m->mems[i]) clReleaseMemObject(m->mems[i]);
    free(m->mems);
    nmt_pstore_release(&m->ps);
    free(m->subs);
    free(m->w.sub);
    free(m->h_src);
    free(m->h_tin);
    free(m->h_tout);
    free(m->h_klen);
    free(m->h_perm);
    free(m->h_seg);
    free(m->h_segtok);
    free(m->h_count);
    free(m->h_syn_seg);
    free(m->h_syn_cnt);
    free(m->h_tag);
    free(m->tag);
    free(m->h_nll);
    free(m);
}

/* Every sub-layer's kind and weights (the views bound by nmt_pstore_alloc). */
static void bind_subs(tft_model *m) {
    const tft_cfg *c = &m->c;
    for (uint32_t k = 0; k < m->n_enc_sub + m->n_dec_sub; k++) {
        m->subs[k].kind = (int)nmt_tf_sub_kind_of(c, k);
        m->subs[k].dec = nmt_tf_sub_is_dec(c, k);
        m->subs[k].w = &m->w.sub[k];
    }
}

/* Rows of a phrase group's phrases as sequences of n steps: n_sent *
 * ceil(S / n) * n <= n_sent * (S + n - 1) <= max_tokens + max_seqs * (n - 1). */
static size_t mg_seq_rows(const tft_model *m, uint32_t n) {
    return m->lim.max_tokens + (size_t)m->lim.max_seqs * (n - 1);
}

static nmt_status alloc_acts(tft_model *m) {
    const tft_cfg *c = &m->c;
    const size_t R = m->lim.max_tokens, d = c->d, dr = c->d / c->gate_r, H = c->heads;
    const size_t Lmax = NMT_MAX(m->lim.max_src_len, m->lim.max_tgt_len);
    const size_t nbr_max = NMT_MAX(c->n_enc_br, c->n_dec_br);
    const uint32_t n_sub = m->n_enc_sub + m->n_dec_sub;
    for (uint32_t k = 0; k < n_sub; k++) {
        sub_desc *s = &m->subs[k];
        const uint32_t nbr = s->dec ? c->n_dec_br : c->n_enc_br;
        NMT_TRY(dbuf(m, R * d, &s->a.x));
        NMT_TRY(dbuf(m, R * d, &s->a.t));
        if (s->kind == SUB_SELF && !s->dec && nmt_mg_layer(c, k / 2)) {
            /* MG-SA phrase memories of this layer, kept for the backward: a
             * group's phrase rows n * ceil(S / n_g) <= n * S <= R */
            if (c->mg_compose == NMT_MG_COM_SAN) NMT_TRY(dbuf(m, R * 3 * d, &s->a.mg_cqkv));
            for (uint32_t g = 0; g < c->mg_n_groups; g++) {
                if (c->mg_group[g].n == 0) continue;
                if (c->mg_compose == NMT_MG_COM_SAN) NMT_TRY(dbuf(m, R * d, &s->a.mg_cctx[g]));
                if (c->mg_compose == NMT_MG_COM_LSTM) {
                    const size_t pr = mg_seq_rows(m, c->mg_group[g].n);
                    NMT_TRY(dbuf(m, pr * d, &s->a.mg_ptok[g]));
                    NMT_TRY(dbuf(m, R, &s->a.mg_pcnt[g]));
                    NMT_TRY(dbuf(m, pr * 4 * d, &s->a.mg_pz[g]));
                    NMT_TRY(dbuf(m, pr * d, &s->a.mg_pc[g]));
                    NMT_TRY(dbuf(m, pr * d, &s->a.mg_ph[g]));
                }
                NMT_TRY(dbuf(m, 2 * R, &s->a.mg_seg[g]));
                NMT_TRY(dbuf(m, m->lim.max_seqs, &s->a.mg_cnt[g]));
                NMT_TRY(dbuf(m, R * d, &s->a.mg_hg[g]));
                NMT_TRY(dbuf(m, R * 2 * c->mg_group[g].nh * c->dh, &s->a.mg_kv[g]));
                NMT_TRY(dbuf(m, R * d, &s->a.mg_arg[g]));
                if (c->mg_interact != NMT_MG_REC_NONE) {
                    NMT_TRY(dbuf(m, R * d, &s->a.mg_pool[g]));
                    NMT_TRY(dbuf(m, R * nmt_mg_rec_gates(c), &s->a.mg_z[g]));
                    NMT_TRY(dbuf(m, R * d, &s->a.mg_c[g]));
                }
            }
        }
        const nmt_ph_kind *pk = s->kind == SUB_FFN ? NULL : nmt_ph_of(c, s->dec, s->kind == SUB_CROSS);
        for (uint32_t g = 0; pk != NULL && g < pk->n_segs; g++) {
            /* phrase attention, kept for the backward: QueryK's extra query
             * taps, a heterogeneous segment's k | v or v (rows of the
             * sub-layer, or of the memory for cross: n * S <= R) */
            const nmt_ph_seg *sg = &pk->seg[g];
            if (!nmt_ph_own(sg)) continue;
            if (pk->method == NMT_PH_QUERYK)
                NMT_TRY(dbuf(m, R * nmt_ph_taps(pk, sg) * sg->nh * c->dh, &s->a.ph_qx[g]));
            if (pk->structure != NMT_PH_HOMO) NMT_TRY(dbuf(m, R * 2 * d, &s->a.ph_kv[g]));
        }
        const int inter = pk != NULL && pk->structure == NMT_PH_INTER;
        if (inter) { /* interleaved: the bigram queries */
            NMT_TRY(dbuf(m, R * d, &s->a.ph_qb));
            if (pk->method == NMT_PH_QUERYK) NMT_TRY(dbuf(m, R * 2 * d, &s->a.ph_qbx));
        }
        if (s->kind == SUB_SELF) {
            NMT_TRY(dbuf(m, R * 3 * d, &s->a.qkv));
            NMT_TRY(dbuf(m, R * (inter ? 2 : nbr) * d, &s->a.ctx)); /* interleaved: b | u */
            if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
                NMT_TRY(dbuf(m, R * d, &s->a.fused));
                for (uint32_t b = 0; b < nbr; b++) {
                    NMT_TRY(dbuf(m, R * dr, &s->a.gh[b]));
                    NMT_TRY(dbuf(m, R * d, &s->a.g[b]));
                }
            }
        } else if (s->kind == SUB_CROSS) {
            NMT_TRY(dbuf(m, R * d, &s->a.qkv));
            NMT_TRY(dbuf(m, R * 2 * d, &s->a.kv));
            NMT_TRY(dbuf(m, R * (inter ? 2 : 1) * d, &s->a.ctx));
        } else {
            NMT_TRY(dbuf(m, R * c->ff, &s->a.ffh));
            if (c->ffn_act) NMT_TRY(dbuf(m, R * c->ff, &s->a.ffp)); /* GELU / swish: the backward reads x */
        }
    }
    NMT_TRY(dbuf(m, R * d, &m->enc_top));
    NMT_TRY(dbuf(m, R * d, &m->dec_top));
    if (c->pre_norm) {
        NMT_TRY(dbuf(m, R * d, &m->enc_out));
        NMT_TRY(dbuf(m, R * d, &m->y_fin));
    } else {
        m->enc_out = m->enc_top;
        m->y_fin = m->dec_top;
    }
    for (uint32_t k = 0; k < n_sub; k++) {
        const int last_enc = k + 1 == m->n_enc_sub, last = k + 1 == n_sub;
        m->subs[k].a.out = last_enc ? m->enc_top : last ? m->dec_top : m->subs[k + 1].a.x;
    }
    NMT_TRY(dbuf(m, R * d, &m->h));
    for (uint32_t k = 0; k < n_sub; k++) m->subs[k].a.h = m->h; /* pre-norm LN(x): recomputed by the backward */
    /* phrase attention: a column block of the probabilities per segment;
     * window rows and their gradient, scratch shared by the sub-layers */
    uint32_t ph_segs = 1, ph_n = 0, ph_inter = 0;
    for (int k = 0; k < NMT_PH_KINDS; k++) {
        ph_segs = NMT_MAX(ph_segs, c->ph[k].n_segs);
        ph_n = NMT_MAX(ph_n, c->ph[k].n_max);
        ph_inter |= c->ph[k].structure == NMT_PH_INTER;
    }
    if (ph_inter) ph_n = NMT_MAX(ph_n, 4u); /* the interleaved encoder's output windows (4d) */
    NMT_TRY(dbuf(m, H * R * Lmax * ph_segs, &m->scores));
    NMT_TRY(dbuf(m, 2 * H * R, &m->stats));
    NMT_TRY(dbuf(m, NMT_MAX(nbr_max, ph_segs) * H * R * Lmax, &m->probs));
    if (ph_n) {
        NMT_TRY(dbuf(m, R * ph_n * d, &m->ph_cols));
        NMT_TRY(dbuf(m, R * ph_n * d, &m->d_cols));
        for (uint32_t g = 0; g < ph_segs; g++) {
            NMT_TRY(dbuf(m, R * ph_n * d, &m->d_phqx[g]));
            NMT_TRY(dbuf(m, R * 2 * d, &m->d_phkv[g]));
        }
        for (uint32_t k = 0; k < n_sub; k++) m->subs[k].a.ph_cols = m->ph_cols;
        if (ph_inter) {
            NMT_TRY(dbuf(m, R * d, &m->d_qb));
            NMT_TRY(dbuf(m, R * 2 * d, &m->d_qbx));
        }
    }
    NMT_TRY(dbuf(m, nbr_max * H * R, &m->dstats));
    NMT_TRY(dbuf(m, R * c->tgt_vocab, &m->logits));
    NMT_TRY(dbuf(m, R, &m->loss));
    NMT_TRY(dbuf(m, R, &m->nll));
    NMT_TRY(dbuf(m, NMT_TRAIN_REDUCE_GROUPS, &m->partial));
    NMT_TRY(dbuf(m, 2, &m->red));
    NMT_TRY(dbuf(m, R * d, &m->g_a));
    NMT_TRY(dbuf(m, R * d, &m->g_b));
    NMT_TRY(dbuf(m, R * d, &m->dtmp));
    NMT_TRY(dbuf(m, R * d, &m->dh));
    NMT_TRY(dbuf(m, R * 3 * d, &m->dqkv));
    NMT_TRY(dbuf(m, R * NMT_MAX(nbr_max, 2) * d, &m->dctx));
    NMT_TRY(dbuf(m, R * d, &m->dfused));
    NMT_TRY(dbuf(m, R * dr, &m->dgh));
    NMT_TRY(dbuf(m, R * d, &m->dg));
    NMT_TRY(dbuf(m, R * c->ff, &m->dffn));
    NMT_TRY(dbuf(m, R * 2 * d, &m->dkv));
    NMT_TRY(dbuf(m, R * d, &m->d_enc));
    NMT_TRY(dbuf(m, 2 * R, &m->lnstats));
    if (c->mg_mask) {
        NMT_TRY(dbuf(m, R * d, &m->d_hg));
        NMT_TRY(dbuf(m, R * 2 * d, &m->d_kvg));
        if (c->mg_compose == NMT_MG_COM_LSTM) {
            uint32_t nmax = 1;
            for (uint32_t g = 0; g < c->mg_n_groups; g++) nmax = NMT_MAX(nmax, c->mg_group[g].n);
            const size_t pr = mg_seq_rows(m, nmax);
            NMT_TRY(dbuf(m, pr * d, &m->d_ph));
            NMT_TRY(dbuf(m, pr * 4 * d, &m->d_pz));
            NMT_TRY(dbuf(m, R * d, &m->d_pc));
            NMT_TRY(dbuf(m, pr * d, &m->d_ptok));
        }
        if (c->mg_compose == NMT_MG_COM_SAN) {
            NMT_TRY(dbuf(m, R * d, &m->d_cctx));
            NMT_TRY(dbuf(m, R * 3 * d, &m->d_cqkv));
            NMT_TRY(dbuf(m, R * 3 * d, &m->d_cqkv_sum));
        }
        if (c->mg_interact != NMT_MG_REC_NONE) {
            NMT_TRY(dbuf(m, R * d, &m->d_pool));
            NMT_TRY(dbuf(m, R * nmt_mg_rec_gates(c), &m->d_z));
            NMT_TRY(dbuf(m, m->lim.max_seqs * d, &m->d_c));
            NMT_TRY(dbuf(m, m->lim.max_seqs * 2 * d, &m->d_m));
        }
    }
    /* int buffers (cl_int is 4 bytes, like float) */
    NMT_TRY(dbuf(m, R, &m->src_tok));
    NMT_TRY(dbuf(m, R, &m->tgt_in));
    NMT_TRY(dbuf(m, R, &m->tgt_out));
    NMT_TRY(dbuf(m, m->lim.max_seqs, &m->klen));
    NMT_TRY(dbuf(m, R, &m->perm_s));
    NMT_TRY(dbuf(m, R + 1, &m->seg_s));
    NMT_TRY(dbuf(m, R, &m->segtok_s));
    NMT_TRY(dbuf(m, R, &m->perm_t));
    NMT_TRY(dbuf(m, R + 1, &m->seg_t));
    NMT_TRY(dbuf(m, R, &m->segtok_t));
    const size_t vmax = NMT_MAX(c->src_vocab, c->tgt_vocab);
    m->h_src = malloc(R * sizeof(int32_t));
    m->h_tin = malloc(R * sizeof(int32_t));
    m->h_tout = malloc(R * sizeof(int32_t));
    m->h_klen = malloc(m->lim.max_seqs * sizeof(int32_t));
    m->h_perm = malloc(R * sizeof(int32_t));
    m->h_seg = malloc((R + 1) * sizeof(int32_t));
    m->h_segtok = malloc(R * sizeof(int32_t));
    m->h_count = malloc((vmax + 1) * sizeof(uint32_t));
    m->h_nll = malloc(R * sizeof(float));
    NMT_CHECK(m->h_src && m->h_tin && m->h_tout && m->h_klen && m->h_perm && m->h_seg && m->h_segtok &&
                  m->h_count && m->h_nll,
              TFT_ERR_NOMEM);
    if (nmt_mg_has_syntax(c)) {
        m->h_syn_seg = malloc(2 * R * sizeof(int32_t));
        m->h_syn_cnt = malloc(m->lim.max_seqs * sizeof(int32_t));
        NMT_CHECK(m->h_syn_seg && m->h_syn_cnt, TFT_ERR_NOMEM);
    }
    return NMT_OK;
}

static void bind_forward(tft_model *m);

static nmt_status create_impl(tft_model *m, const void *image, size_t size) {
    nmt_file f;
    NMT_TRY(nmt_file_open(&f, image, size, 1));
    NMT_TRY(parse_cfg(&f, m));
    const tft_cfg *c = &m->c;
    m->tag = calloc(c->enc_layers, sizeof *m->tag);
    NMT_CHECK(m->tag != NULL, TFT_ERR_NOMEM);
    NMT_TRY(nmt_pstore_plan(&m->ps, m->dev, &m->t, &f, walk, m)); /* a tagger may be absent (0) */

    m->n_enc_sub = 2 * c->enc_layers;
    m->n_dec_sub = 3 * c->dec_layers;
    m->subs = calloc(m->n_enc_sub + m->n_dec_sub, sizeof *m->subs);
    m->w.sub = calloc(m->n_enc_sub + m->n_dec_sub, sizeof *m->w.sub);
    NMT_CHECK(m->subs != NULL && m->w.sub != NULL, TFT_ERR_NOMEM);

    NMT_TRY(nmt_ops_init(&m->ops, m->dev));
    m->ops_ok = 1;
    NMT_TRY(nmt_ops_enable_nn(&m->ops));
    if (c->mg_mask || c->ph_text[0][0]) NMT_TRY(nmt_ops_enable_phrase(&m->ops));
    if (c->mg_mask && (c->mg_interact != NMT_MG_REC_NONE || c->mg_compose == NMT_MG_COM_LSTM))
        NMT_TRY(nmt_ops_enable_recurrent(&m->ops));
    NMT_TRY(nmt_train_ops_init(&m->t, m->dev));
    m->t_ok = 1;

    NMT_TRY(nmt_pstore_alloc(&m->ps, walk, m)); /* P, G, M, V and the views into P */
    bind_subs(m);
    NMT_TRY(alloc_acts(m));
    NMT_TRY(tft_tag_alloc(m, dbuf));
    bind_forward(m);
    if (c->pos_enc != NMT_POS_SINUSOID || c->pos_offset) { /* a layout the kernels take from a table only */
        const size_t n_pos = NMT_MAX(m->lim.max_src_len, m->lim.max_tgt_len) + 2;
        nmt_buf pt;
        NMT_TRY(dbuf(m, n_pos * c->d, &pt));
        NMT_TRY(nmt_ops_set_pos_table(&m->ops, pt, (uint32_t)n_pos, c->d, (uint32_t)c->pos_enc, c->pos_offset));
    }

    return nmt_pstore_load(&m->ps, &f); /* a new tagger starts at 0 */
}

nmt_status tft_create(nmt_device *dev, const void *image, size_t size, const tft_limits *lim, tft_model **out) {
    NMT_CHECK(out != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    NMT_CHECK(dev != NULL && image != NULL && lim != NULL, NMT_ERR_INVALID_ARGUMENT);
    tft_limits L = *lim;
    NMT_TRY(nmt_train_limits_resolve(&L));
    tft_model *m = calloc(1, sizeof *m);
    NMT_CHECK(m != NULL, TFT_ERR_NOMEM);
    m->dev = dev;
    m->lim = L;
    nmt_status st = create_impl(m, image, size);
    if (st != NMT_OK) {
        tft_destroy(m);
        return st;
    }
    *out = m;
    return NMT_OK;
}

size_t tft_n_params(const tft_model *m) { return m ? m->ps.n_params : 0; }
uint32_t tft_n_tensors(const tft_model *m) { return m ? m->ps.n_tab : 0; }

void tft_tensor(const tft_model *m, uint32_t i, const char **name, uint32_t *ndim, uint32_t shape[2], size_t *offset,
                size_t *count) {
    if (m == NULL || i >= m->ps.n_tab) return;
    const nmt_pstore_tensor *t = &m->ps.tab[i];
    if (name) *name = t->name;
    if (ndim) *ndim = t->ndim;
    if (shape) {
        shape[0] = t->shape[0];
        shape[1] = t->shape[1];
    }
    if (offset) *offset = t->off;
    if (count) *count = t->count;
}

void tft_vocab(const tft_model *m, uint32_t *src_vocab, uint32_t *tgt_vocab, int32_t *bos, int32_t *eos, int32_t *pad,
               int32_t *unk) {
    if (m == NULL) return;
    if (src_vocab) *src_vocab = m->c.src_vocab;
    if (tgt_vocab) *tgt_vocab = m->c.tgt_vocab;
    if (bos) *bos = (int32_t)m->c.bos;
    if (eos) *eos = (int32_t)m->c.eos;
    if (pad) *pad = (int32_t)m->c.pad;
    if (unk) *unk = (int32_t)m->c.unk;
}

uint32_t tft_d_model(const tft_model *m) { return m ? m->c.d : 0; }

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

static nmt_tf_pass enc_pass(const tft_model *m) {
    return (nmt_tf_pass){.n = m->n, .len = m->S, .key_len = m->klen};
}

static nmt_tf_pass dec_pass(const tft_model *m) {
    return (nmt_tf_pass){.n = m->n, .len = m->T, .key_len = m->klen, .group = 1, .src_len = m->S};
}

void tft_attn_self_args(const tft_model *m, const sub_desc *s, nmt_attn_args *a) {
    const nmt_tf_pass p = s->dec ? dec_pass(m) : enc_pass(m);
    nmt_tf_self_args(&m->fw, &s->a, s->dec, &p, a);
}

void tft_attn_cross_args(const tft_model *m, const sub_desc *s, nmt_attn_args *a) {
    const nmt_tf_pass p = dec_pass(m);
    nmt_tf_cross_args(&m->fw, &s->a, &p, a);
}

int tft_is_mg(const tft_model *m, const sub_desc *s) {
    const uint32_t k = (uint32_t)(s - m->subs);
    return s->kind == SUB_SELF && !s->dec && nmt_mg_layer(&m->c, k / 2);
}

void tft_mg_compose_args(const tft_model *m, const sub_desc *s, uint32_t g, nmt_attn_args *a) {
    const nmt_tf_pass p = enc_pass(m);
    nmt_mg_compose_args(&m->fw, &s->a, &p, g, a);
}

const nmt_ph_kind *tft_ph_args(const tft_model *m, const sub_desc *s, uint32_t i, nmt_pattn_args *a) {
    const nmt_ph_kind *pk = s->kind == SUB_FFN ? NULL : nmt_ph_of(&m->c, s->dec, s->kind == SUB_CROSS);
    if (pk == NULL || a == NULL) return pk;
    const nmt_tf_pass p = s->dec ? dec_pass(m) : enc_pass(m);
    nmt_ph_args(&m->fw, &s->a, pk, s->dec, s->kind == SUB_CROSS, &p, i, a);
    return pk;
}

nmt_status tft_ph_bigram_window(const tft_model *m, const sub_desc *s, nmt_buf in) {
    const nmt_tf_pass p = s->dec ? dec_pass(m) : enc_pass(m);
    return nmt_ph_bigram_window(&m->fw, &s->a, s->dec, &p, in);
}

nmt_status tft_ph_out_window(const tft_model *m, const sub_desc *s) {
    const nmt_tf_pass p = enc_pass(m);
    return nmt_ph_out_window(&m->fw, &s->a, &p);
}

void tft_mg_group_args(const tft_model *m, const sub_desc *s, uint32_t g, nmt_attn_args *a) {
    const nmt_tf_pass p = enc_pass(m);
    nmt_mg_group_args(&m->fw, &s->a, &p, g, a);
}

static void train_acts(void *user, uint32_t k, nmt_tf_acts *out) { *out = ((const tft_model *)user)->subs[k].a; }

/* Dropout sites: 0 source embedding, 1 target embedding, 2 + k sub-layer k. */
static nmt_status train_drop(void *user, nmt_buf x, uint32_t n, uint64_t site) {
    tft_model *m = (tft_model *)user;
    return nmt_op_dropout(&m->t, x, x, n, m->drop_p, m->drop_seed, site << 32);
}

/* The shared forward (transformer_fwd.h) over this model's buffers. */
static void bind_forward(tft_model *m) {
    m->fw.ops = &m->ops;
    m->fw.c = &m->c;
    m->fw.w = &m->w;
    m->fw.scores = m->scores;
    m->fw.stats = m->stats;
    m->fw.acts = train_acts;
    m->fw.drop = NULL;
    m->fw.fuse_norm = 0; /* the backward reads every sub-layer's t */
    m->fw.user = m;
}

/* Teacher-forced forward of the loaded batch into m->logits, keeping every
 * sub-layer's activations; dropout p (0: none). */
static nmt_status forward(tft_model *m, float p, uint64_t seed) {
    const uint32_t rs = m->n * m->S, rt = m->n * m->T, E = m->n_enc_sub;
    m->fw.drop = p > 0.0f ? train_drop : NULL;
    m->drop_p = p;
    m->drop_seed = seed;
    const nmt_tf_pass pe = enc_pass(m), pd = dec_pass(m);
    NMT_TRY(nmt_tf_embed(&m->fw, &m->w.src_emb, m->src_tok, rs, m->S, 0, m->subs[0].a.x, 0));
    NMT_TRY(nmt_tf_encoder(&m->fw, &pe, m->enc_out));
    NMT_TRY(nmt_tf_cross_kv(&m->fw, m->enc_out, &pe));
    NMT_TRY(nmt_tf_embed(&m->fw, &m->w.tgt_emb, m->tgt_in, rt, m->T, 0, m->subs[E].a.x, 1));
    NMT_TRY(nmt_tf_decoder(&m->fw, &pd, m->y_fin));
    return nmt_tf_logits(&m->fw, m->y_fin, rt, m->logits);
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                    */
/* ------------------------------------------------------------------------ */

/* MG-SA syntax heads: the batch's spans against its sentences (the
 * runtime's check, families/spans.h: INVALID_SPANS, nothing uploaded). */
static nmt_status check_spans(const tft_batch *b) {
    if (b->spans == NULL) return NMT_OK;
    NMT_CHECK(b->n_spans != NULL, NMT_ERR_INVALID_ARGUMENT);
    for (uint32_t i = 0; i < b->n_seq; i++)
        NMT_TRY(nmt_spans_check(b->spans[i], b->n_spans[i], b->src_lens[i] - 1, NULL));
    return NMT_OK;
}

/* The batch's phrase partition, built by the runtime's own call
 * (nmt_spans_partition), into every syntax group of every MG layer. */
static nmt_status upload_partition(tft_model *m, const tft_batch *b) {
    const nmt_spans sp = {b->spans, b->n_spans, b->n_seq};
    nmt_spans_partition(m->c.mg_fallback, b->spans ? &sp : NULL, m->h_klen, b->n_seq, b->src_len, m->h_syn_seg,
                        m->h_syn_cnt);
    for (uint32_t k = 0; k < m->n_enc_sub; k++) {
        if (!tft_is_mg(m, &m->subs[k])) continue;
        for (uint32_t g = 0; g < m->c.mg_n_groups; g++) {
            if (!m->c.mg_group[g].syntax) continue;
            const nmt_tf_acts *a = &m->subs[k].a;
            NMT_TRY(nmt_device_write(m->dev, a->mg_seg[g].mem, 0, (size_t)b->n_seq * b->src_len * 2 * sizeof(int32_t),
                                     m->h_syn_seg));
            NMT_TRY(nmt_device_write(m->dev, a->mg_cnt[g].mem, 0, (size_t)b->n_seq * sizeof(int32_t), m->h_syn_cnt));
        }
    }
    return NMT_OK;
}

/* Validate and upload a batch. */
static nmt_status load_batch(tft_model *m, const tft_batch *b) {
    NMT_CHECK(m != NULL && nmt_train_batch_fits(b, &m->lim), NMT_ERR_INVALID_ARGUMENT);
    for (uint32_t i = 0; i < b->n_seq; i++)
        NMT_CHECK(b->src_lens[i] >= 1 && b->src_lens[i] <= b->src_len && b->tgt_lens[i] >= 1 &&
                      b->tgt_lens[i] <= b->tgt_len,
                  NMT_ERR_INVALID_ARGUMENT);
    const tft_cfg *c = &m->c;
    const size_t rs = (size_t)b->n_seq * b->src_len, rt = (size_t)b->n_seq * b->tgt_len;
    for (size_t r = 0; r < rs; r++)
        NMT_CHECK(b->src[r] >= 0 && (uint32_t)b->src[r] < c->src_vocab, NMT_ERR_TOKEN_OUT_OF_RANGE);
    for (uint32_t i = 0; i < b->n_seq; i++)
        for (uint32_t p = 0; p < b->tgt_len; p++) {
            const size_t r = (size_t)i * b->tgt_len + p;
            NMT_CHECK(b->tgt_in[r] >= 0 && (uint32_t)b->tgt_in[r] < c->tgt_vocab, NMT_ERR_TOKEN_OUT_OF_RANGE);
            if (p < b->tgt_lens[i])
                NMT_CHECK(b->tgt_out[r] >= 0 && (uint32_t)b->tgt_out[r] < c->tgt_vocab, NMT_ERR_TOKEN_OUT_OF_RANGE);
            m->h_tout[r] = p < b->tgt_lens[i] ? b->tgt_out[r] : -1; /* ignored by the loss */
        }
    if (m->h_syn_seg) NMT_TRY(check_spans(b)); /* before anything is uploaded */
    memcpy(m->h_src, b->src, rs * sizeof(int32_t));
    memcpy(m->h_tin, b->tgt_in, rt * sizeof(int32_t));
    for (uint32_t i = 0; i < b->n_seq; i++) m->h_klen[i] = (int32_t)b->src_lens[i];
    m->n = b->n_seq;
    m->S = b->src_len;
    m->T = b->tgt_len;
    NMT_TRY(nmt_device_write(m->dev, m->src_tok.mem, 0, rs * sizeof(int32_t), m->h_src));
    NMT_TRY(nmt_device_write(m->dev, m->tgt_in.mem, 0, rt * sizeof(int32_t), m->h_tin));
    NMT_TRY(nmt_device_write(m->dev, m->tgt_out.mem, 0, rt * sizeof(int32_t), m->h_tout));
    if (m->h_syn_seg) NMT_TRY(upload_partition(m, b));
    if (m->h_tag) NMT_TRY(tft_tag_targets(m, b));
    return nmt_device_write(m->dev, m->klen.mem, 0, b->n_seq * sizeof(int32_t), m->h_klen);
}

static nmt_status xent(tft_model *m, float eps, float grad_scale, int grad) {
    const uint32_t rt = m->n * m->T, V = m->c.tgt_vocab;
    NMT_TRY(nmt_op_xent(&m->t, m->logits, rt, V, V, m->tgt_out, -1, eps, grad_scale, m->loss, m->nll,
                        grad ? m->logits : NO_BUF, V));
    return NMT_OK;
}

static nmt_status read_sums(tft_model *m, double *loss_sum, double *nll_sum) {
    return nmt_train_loss_sums(&m->t, m->loss, m->nll, m->n * m->T, m->partial, m->red, loss_sum, nll_sum);
}

nmt_status tft_forward_backward(tft_model *m, const tft_batch *b, const tft_step_opts *o, double *loss_sum,
                                double *nll_sum) {
    NMT_CHECK(m != NULL && o != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(nmt_train_step_opts_ok(o), NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, o->dropout, o->seed));
    NMT_TRY(xent(m, o->label_smoothing, o->grad_scale, 1));
    double tag = 0.0; /* MG-SA: lambda L_tag joins the objective (tf_train_tag.c) */
    NMT_TRY(tft_tag_forward(m, o->tag_lambda, o->grad_scale, &tag));
    NMT_TRY(tft_backward(m, o));
    NMT_TRY(read_sums(m, loss_sum, nll_sum));
    if (loss_sum) *loss_sum += (double)o->tag_lambda * tag;
    return NMT_OK;
}

nmt_status tft_forward_loss(tft_model *m, const tft_batch *b, float label_smoothing, double *loss_sum,
                            double *nll_sum) {
    NMT_CHECK(m != NULL && label_smoothing >= 0.0f && label_smoothing < 1.0f, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, 0.0f, 0));
    NMT_TRY(xent(m, label_smoothing, 1.0f, 0));
    return read_sums(m, loss_sum, nll_sum);
}

nmt_status tft_token_logprobs(tft_model *m, const tft_batch *b, float *lp) {
    NMT_CHECK(m != NULL && lp != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, 0.0f, 0));
    NMT_TRY(xent(m, 0.0f, 1.0f, 0));
    const uint32_t rt = m->n * m->T;
    NMT_TRY(nmt_device_read(m->dev, m->nll.mem, 0, rt * sizeof(float), m->h_nll));
    for (uint32_t i = 0; i < m->n; i++)
        for (uint32_t p = 0; p < m->T; p++) {
            const size_t r = (size_t)i * m->T + p;
            lp[r] = p < b->tgt_lens[i] ? -m->h_nll[r] : 0.0f;
        }
    return NMT_OK;
}

nmt_status tft_attention_mass(tft_model *m, const tft_batch *b, ntm_attn_mass *out, uint32_t cap, uint32_t *n) {
    NMT_CHECK(m != NULL && b != NULL && out != NULL && n != NULL, NMT_ERR_INVALID_ARGUMENT);
    *n = 0;
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, 0.0f, 0));
    float *p = NULL;
    nmt_status st = NMT_OK;
    for (uint32_t k = 0; k < m->n_enc_sub + m->n_dec_sub && st == NMT_OK; k++) {
        const sub_desc *s = &m->subs[k];
        const nmt_ph_kind *pk = tft_ph_args(m, s, 0, NULL);
        if (pk == NULL || pk->structure != NMT_PH_INTER) continue;
        if (*n >= cap) {
            st = NMT_ERR_INVALID_ARGUMENT;
            break;
        }
        ntm_attn_mass *o = &out[(*n)++];
        const int cross = s->kind == SUB_CROSS;
        const uint32_t l = s->dec ? (k - m->n_enc_sub) / 3 : k / 2;
        snprintf(o->where, sizeof o->where, "%s.%u.%s", s->dec ? "dec" : "enc", l, cross ? "cross_attn" : "self_attn");
        for (uint32_t call = 0; call < 2 && st == NMT_OK; call++) {
            /* the forward's probabilities of this sub-layer, recomputed from its kept activations */
            nmt_pattn_args a;
            tft_ph_args(m, s, call, &a);
            a.p = m->probs;
            const size_t p_ld = (size_t)a.n_segs * a.lk_max, rows = (size_t)a.n_seq * a.n_heads * a.lq;
            float *grown = realloc(p, sizeof(float) * NMT_MAX(rows * p_ld, (size_t)1));
            if (grown == NULL) {
                st = TFT_ERR_NOMEM;
                break;
            }
            p = grown;
            st = nmt_op_pattn(&m->ops, &a);
            if (st == NMT_OK) st = nmt_device_read(m->dev, a.p.mem, a.p.off * sizeof(float), rows * p_ld * sizeof(float), p);
            for (size_t r = 0; r < rows && st == NMT_OK; r++) {
                const uint32_t i = (uint32_t)(r % a.lq), seq = (uint32_t)(r / a.lq / a.n_heads);
                const uint32_t qlen = s->dec ? b->tgt_lens[seq] : b->src_lens[seq];
                if (i >= qlen) continue; /* padding queries */
                for (uint32_t g = 0; g < 2; g++)
                    for (uint32_t j = 0; j < a.lk_max; j++) o->mass[call * 2 + g] += p[r * p_ld + g * a.lk_max + j];
            }
        }
    }
    free(p);
    return st;
}

nmt_status tft_zero_grad(tft_model *m) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_zero_grad(&m->ps);
}

nmt_status tft_grad_norm(tft_model *m, double *norm) {
    NMT_CHECK(m != NULL && norm != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_grad_norm(&m->ps, m->partial, m->red, norm);
}

nmt_status tft_adam_step(tft_model *m, const nmt_adam_params *ap) {
    NMT_CHECK(m != NULL && ap != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_adam_step(&m->ps, ap);
}

nmt_status tft_read_state(tft_model *m, float *params, float *grads, float *adam_m, float *adam_v) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_read(&m->ps, params, grads, adam_m, adam_v);
}

nmt_status tft_write_state(tft_model *m, const float *params, const float *adam_m, const float *adam_v) {
    NMT_CHECK(m != NULL && params != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_pstore_write(&m->ps, params, adam_m, adam_v);
}

nmt_status tft_add_to_writer(tft_model *m, nmtw_writer *w, int optimizer) {
    NMT_CHECK(m != NULL && w != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(nmtw_add_hparams(w, m->fam, &m->c));
    return nmt_pstore_add_to_writer(&m->ps, w, optimizer); /* a deployment model has no tagger */
}

/* ------------------------------------------------------------------------ */
/* The family's record in the trainer's registry (train/families/train_family.h)      */
/* ------------------------------------------------------------------------ */

static nmt_status rec_create(nmt_device *dev, const void *image, size_t size, const nmt_train_limits *lim, void **m) {
    return tft_create(dev, image, size, lim, (tft_model **)m);
}
static void rec_destroy(void *m) { tft_destroy(m); }
static size_t rec_n_params(const void *m) { return tft_n_params(m); }
static uint32_t rec_d_model(const void *m) { return tft_d_model(m); }
static nmt_status rec_add_to_writer(void *m, nmtw_writer *w, int optimizer) { return tft_add_to_writer(m, w, optimizer); }
static nmt_status rec_zero_grad(void *m) { return tft_zero_grad(m); }
static nmt_status rec_forward_backward(void *m, const nmt_train_batch *b, const nmt_train_step_opts *o, double *loss,
                                       double *nll) {
    return tft_forward_backward(m, b, o, loss, nll);
}
static nmt_status rec_forward_loss(void *m, const nmt_train_batch *b, float ls, double *loss, double *nll) {
    return tft_forward_loss(m, b, ls, loss, nll);
}
static nmt_status rec_token_logprobs(void *m, const nmt_train_batch *b, float *lp) { return tft_token_logprobs(m, b, lp); }
static nmt_status rec_grad_norm(void *m, double *norm) { return tft_grad_norm(m, norm); }
static nmt_status rec_attention_mass(void *m, const nmt_train_batch *b, ntm_attn_mass *out, uint32_t cap,
                                     uint32_t *n) {
    return tft_attention_mass(m, b, out, cap, n);
}
static nmt_status rec_adam_step(void *m, const nmt_adam_params *ap) { return tft_adam_step(m, ap); }
static nmt_pstore *rec_store(void *m) { return m ? &((tft_model *)m)->ps : NULL; }

/* One set of calls, three records: the Transformer, MG-SA (the same model
 * with phrase heads) and the phrase-based attentions (n-gram keys in its
 * attention sub-layers); create checks the image's arch. */
#define TFT_RECORD(arch_)                                                                                    \
    {                                                                                                        \
        .arch = arch_, .create = rec_create, .destroy = rec_destroy, .n_params = rec_n_params,               \
        .d_model = rec_d_model, .add_to_writer = rec_add_to_writer, .zero_grad = rec_zero_grad,               \
        .forward_backward = rec_forward_backward, .forward_loss = rec_forward_loss,                          \
        .token_logprobs = rec_token_logprobs, .grad_norm = rec_grad_norm, .adam_step = rec_adam_step,         \
        .attention_mass = rec_attention_mass, .store = rec_store,                                            \
    }

const nmt_train_family nmt_tf_train_family = TFT_RECORD(NMT_TF_ARCH);
const nmt_train_family nmt_mgsa_train_family = TFT_RECORD(NMT_MGSA_ARCH);
const nmt_train_family nmt_phrase_train_family = TFT_RECORD(NMT_PH_ARCH);
