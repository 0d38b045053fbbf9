/* tf_train.c — the Transformer/HySAN family with gradients (tf_train.h).
 *
 * The forward mirrors runtime/transformer.c op for op (same calls, same
 * order of accumulation), keeping every activation the backward needs per
 * sub-layer; the backward (tf_train_bwd.c) chains runtime/ops_train.h as
 * docs/TRAINING-OPS.md describes.  Parameters, gradients and Adam moments
 * are four flat device buffers with one layout (the tensor table). */
#include "tf_train.h"
#include "tf_train_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "format.h"
#include "transformer_cfg.h"

/* host allocation failure (the writer's convention: no dedicated status) */
#define TFT_ERR_NOMEM NMT_ERR_IO

/* ------------------------------------------------------------------------ */
/* Configuration: runtime/transformer_cfg.h, the runtime's own parser       */
/* ------------------------------------------------------------------------ */

static nmt_status parse_cfg(const nmt_file *f, tft_cfg *c) {
    char s[96];
    nmt_status st = nmt_file_get_str(f, "arch", s, sizeof s);
    NMT_CHECK(st == NMT_OK && strcmp(s, "transformer") == 0, NMT_ERR_MODEL_ARCH);
    return nmt_tf_cfg_parse(f, c);
}

/* ------------------------------------------------------------------------ */
/* Tensor catalogue (the runtime's visit_all order) and the flat layout     */
/* ------------------------------------------------------------------------ */

typedef struct cat_ctx {
    const tft_cfg *c;
    tft_tinfo *t;  /* NULL: count only */
    uint32_t n;
    size_t total;
    size_t fused_w, fused_b;  /* base of the current fused q|k|v or k|v block */
} cat_ctx;

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void cat_add(cat_ctx *cc, uint32_t ndim, uint32_t d0, uint32_t d1, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void cat_add(cat_ctx *cc, uint32_t ndim, uint32_t d0, uint32_t d1, const char *fmt, ...) {
    char name[TFT_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const size_t count = (size_t)d0 * (ndim == 2 ? d1 : 1);
    const size_t dd = (size_t)cc->c->d * cc->c->d, d = cc->c->d;
    size_t off;
    /* fused blocks: self q|k|v ([3d, d] then [3d]), cross k|v ([2d, d] then [2d]) */
    if (ends_with(name, ".self_attn.q.weight")) { off = cc->fused_w = cc->total; cc->total += 3 * dd; }
    else if (ends_with(name, ".self_attn.k.weight")) off = cc->fused_w + dd;
    else if (ends_with(name, ".self_attn.v.weight")) off = cc->fused_w + 2 * dd;
    else if (ends_with(name, ".self_attn.q.bias")) { off = cc->fused_b = cc->total; cc->total += 3 * d; }
    else if (ends_with(name, ".self_attn.k.bias")) off = cc->fused_b + d;
    else if (ends_with(name, ".self_attn.v.bias")) off = cc->fused_b + 2 * d;
    else if (ends_with(name, ".cross_attn.k.weight")) { off = cc->fused_w = cc->total; cc->total += 2 * dd; }
    else if (ends_with(name, ".cross_attn.v.weight")) off = cc->fused_w + dd;
    else if (ends_with(name, ".cross_attn.k.bias")) { off = cc->fused_b = cc->total; cc->total += 2 * d; }
    else if (ends_with(name, ".cross_attn.v.bias")) off = cc->fused_b + d;
    else { off = cc->total; cc->total += count; }
    if (cc->t) {
        tft_tinfo *t = &cc->t[cc->n];
        nmt_strlcpy(t->name, name, sizeof t->name);
        t->ndim = ndim;
        t->shape[0] = d0;
        t->shape[1] = ndim == 2 ? d1 : 0;
        t->off = off;
        t->count = count;
    }
    cc->n++;
}

static void cat_lin(cat_ctx *cc, uint32_t out, uint32_t in, const char *prefix) {
    cat_add(cc, 2, out, in, "%s.weight", prefix);
    cat_add(cc, 1, out, 0, "%s.bias", prefix);
}

static void cat_ln(cat_ctx *cc, uint32_t d, const char *prefix) {
    cat_add(cc, 1, d, 0, "%s.weight", prefix);
    cat_add(cc, 1, d, 0, "%s.bias", prefix);
}

static uint32_t attn_out_in(const tft_cfg *c, uint32_t nbr) {
    return (c->fusion == NMT_TF_FUSE_CONCAT && nbr > 1) ? nbr * c->d : c->d;
}

static void cat_self(cat_ctx *cc, const char *stack, uint32_t l, uint32_t nbr) {
    const tft_cfg *c = cc->c;
    char p[64];
    static const char *const qkv[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s.%u.self_attn.%s", stack, l, qkv[i]);
        cat_lin(cc, c->d, c->d, p);
    }
    snprintf(p, sizeof p, "%s.%u.self_attn.o", stack, l);
    cat_lin(cc, c->d, attn_out_in(c, nbr), p);
    if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
        for (uint32_t b = 0; b < nbr; b++) {
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1", stack, l, b);
            cat_lin(cc, c->d / c->gate_r, c->d, p);
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc2", stack, l, b);
            cat_lin(cc, c->d, c->d / c->gate_r, p);
        }
    }
}

static void cat_ffn(cat_ctx *cc, const char *stack, uint32_t l) {
    char p[64];
    snprintf(p, sizeof p, "%s.%u.ffn.fc1", stack, l);
    cat_lin(cc, cc->c->ff, cc->c->d, p);
    snprintf(p, sizeof p, "%s.%u.ffn.fc2", stack, l);
    cat_lin(cc, cc->c->d, cc->c->ff, p);
}

static void cat_all(cat_ctx *cc) {
    const tft_cfg *c = cc->c;
    char p[64];
    cat_add(cc, 2, c->src_vocab, c->d, "src_embed");
    if (!c->shared_emb) cat_add(cc, 2, c->tgt_vocab, c->d, "tgt_embed");
    if (!c->tied_out) cat_add(cc, 2, c->tgt_vocab, c->d, "out_proj");
    for (uint32_t l = 0; l < c->enc_layers; l++) {
        cat_self(cc, "enc", l, c->n_enc_br);
        for (int i = 1; i <= 2; i++) {
            snprintf(p, sizeof p, "enc.%u.ln%d", l, i);
            cat_ln(cc, c->d, p);
        }
        cat_ffn(cc, "enc", l);
    }
    if (c->pre_norm) cat_ln(cc, c->d, "enc.ln");
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        cat_self(cc, "dec", l, c->n_dec_br);
        static const char *const qkvo[4] = {"q", "k", "v", "o"};
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "dec.%u.cross_attn.%s", l, qkvo[i]);
            cat_lin(cc, c->d, c->d, p);
        }
        for (int i = 1; i <= 3; i++) {
            snprintf(p, sizeof p, "dec.%u.ln%d", l, i);
            cat_ln(cc, c->d, p);
        }
        cat_ffn(cc, "dec", l);
    }
    if (c->pre_norm) cat_ln(cc, c->d, "dec.ln");
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

static nmt_status find_off(const tft_model *m, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static nmt_status find_off(const tft_model *m, size_t *off, const char *fmt, ...) {
    char name[TFT_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (uint32_t i = 0; i < m->n_tab; i++)
        if (strcmp(m->tab[i].name, name) == 0) {
            *off = m->tab[i].off;
            return NMT_OK;
        }
    return NMT_ERR_MODEL_MISSING_TENSOR;
}

static nmt_status find_lin(const tft_model *m, lin_o *l, const char *prefix) {
    NMT_TRY(find_off(m, &l->w, "%s.weight", prefix));
    return find_off(m, &l->b, "%s.bias", prefix);
}

static nmt_status find_ln(const tft_model *m, ln_o *l, const char *prefix) {
    NMT_TRY(find_off(m, &l->g, "%s.weight", prefix));
    return find_off(m, &l->b, "%s.bias", prefix);
}

void tft_destroy(tft_model *m) {
    if (m == NULL) return;
    if (m->t_ok) nmt_train_ops_release(&m->t);
    if (m->ops_ok) nmt_ops_release(&m->ops);
    for (size_t i = 0; i < m->n_mems; i++)
        if (m->mems[i]) clReleaseMemObject(m->mems[i]);
    free(m->mems);
    free(m->tab);
    free(m->subs);
    free(m->h_src);
    free(m->h_tin);
    free(m->h_tout);
    free(m->h_klen);
    free(m->h_perm);
    free(m->h_seg);
    free(m->h_segtok);
    free(m->h_count);
    free(m->h_nll);
    free(m);
}

/* Parameter offsets of every sub-layer. */
static nmt_status bind_params(tft_model *m) {
    const tft_cfg *c = &m->c;
    char p[64];
    NMT_TRY(find_off(m, &m->src_emb, "src_embed"));
    if (c->shared_emb) m->tgt_emb = m->src_emb;
    else NMT_TRY(find_off(m, &m->tgt_emb, "tgt_embed"));
    if (c->tied_out) m->out_w = m->tgt_emb;
    else NMT_TRY(find_off(m, &m->out_w, "out_proj"));
    if (c->pre_norm) {
        NMT_TRY(find_ln(m, &m->enc_ln, "enc.ln"));
        NMT_TRY(find_ln(m, &m->dec_ln, "dec.ln"));
    }
    uint32_t k = 0;
    for (int dec = 0; dec < 2; dec++) {
        const char *stack = dec ? "dec" : "enc";
        const uint32_t L = dec ? c->dec_layers : c->enc_layers, nbr = dec ? c->n_dec_br : c->n_enc_br;
        for (uint32_t l = 0; l < L; l++) {
            sub_desc *s = &m->subs[k++];
            s->kind = SUB_SELF;
            s->dec = dec;
            NMT_TRY(find_off(m, &s->qkv.w, "%s.%u.self_attn.q.weight", stack, l));
            NMT_TRY(find_off(m, &s->qkv.b, "%s.%u.self_attn.q.bias", stack, l));
            snprintf(p, sizeof p, "%s.%u.self_attn.o", stack, l);
            NMT_TRY(find_lin(m, &s->o, p));
            if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1)
                for (uint32_t b = 0; b < nbr; b++) {
                    snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1", stack, l, b);
                    NMT_TRY(find_lin(m, &s->g1[b], p));
                    snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc2", stack, l, b);
                    NMT_TRY(find_lin(m, &s->g2[b], p));
                }
            snprintf(p, sizeof p, "%s.%u.ln1", stack, l);
            NMT_TRY(find_ln(m, &s->ln, p));
            if (dec) {
                s = &m->subs[k++];
                s->kind = SUB_CROSS;
                s->dec = 1;
                snprintf(p, sizeof p, "dec.%u.cross_attn.q", l);
                NMT_TRY(find_lin(m, &s->cq, p));
                NMT_TRY(find_off(m, &s->ckv.w, "dec.%u.cross_attn.k.weight", l));
                NMT_TRY(find_off(m, &s->ckv.b, "dec.%u.cross_attn.k.bias", l));
                snprintf(p, sizeof p, "dec.%u.cross_attn.o", l);
                NMT_TRY(find_lin(m, &s->co, p));
                snprintf(p, sizeof p, "dec.%u.ln2", l);
                NMT_TRY(find_ln(m, &s->ln, p));
            }
            s = &m->subs[k++];
            s->kind = SUB_FFN;
            s->dec = dec;
            snprintf(p, sizeof p, "%s.%u.ffn.fc1", stack, l);
            NMT_TRY(find_lin(m, &s->fc1, p));
            snprintf(p, sizeof p, "%s.%u.ffn.fc2", stack, l);
            NMT_TRY(find_lin(m, &s->fc2, p));
            snprintf(p, sizeof p, "%s.%u.ln%d", stack, l, dec ? 3 : 2);
            NMT_TRY(find_ln(m, &s->ln, p));
        }
    }
    return NMT_OK;
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
        NMT_TRY(dbuf(m, R * d, &s->x));
        NMT_TRY(dbuf(m, R * d, &s->t));
        if (s->kind == SUB_SELF) {
            NMT_TRY(dbuf(m, R * 3 * d, &s->qkv_a));
            NMT_TRY(dbuf(m, R * nbr * d, &s->ctx));
            if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
                NMT_TRY(dbuf(m, R * d, &s->fused));
                for (uint32_t b = 0; b < nbr; b++) {
                    NMT_TRY(dbuf(m, R * dr, &s->gh[b]));
                    NMT_TRY(dbuf(m, R * d, &s->g[b]));
                }
            }
        } else if (s->kind == SUB_CROSS) {
            NMT_TRY(dbuf(m, R * d, &s->qkv_a));
            NMT_TRY(dbuf(m, R * 2 * d, &s->kv_a));
            NMT_TRY(dbuf(m, R * d, &s->ctx));
        } else {
            NMT_TRY(dbuf(m, R * c->ff, &s->a));
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
        m->subs[k].out = last_enc ? m->enc_top : last ? m->dec_top : m->subs[k + 1].x;
    }
    NMT_TRY(dbuf(m, R * d, &m->h));
    NMT_TRY(dbuf(m, H * R * Lmax, &m->scores));
    NMT_TRY(dbuf(m, 2 * H * R, &m->stats));
    NMT_TRY(dbuf(m, nbr_max * H * R * Lmax, &m->probs));
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
    NMT_TRY(dbuf(m, R * nbr_max * d, &m->dctx));
    NMT_TRY(dbuf(m, R * d, &m->dfused));
    NMT_TRY(dbuf(m, R * dr, &m->dgh));
    NMT_TRY(dbuf(m, R * d, &m->dg));
    NMT_TRY(dbuf(m, R * c->ff, &m->dffn));
    NMT_TRY(dbuf(m, R * 2 * d, &m->dkv));
    NMT_TRY(dbuf(m, R * d, &m->d_enc));
    NMT_TRY(dbuf(m, 2 * R, &m->lnstats));
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
    return NMT_OK;
}

static nmt_status create_impl(tft_model *m, const void *image, size_t size) {
    nmt_file f;
    NMT_TRY(nmt_file_open(&f, image, size, 1));
    NMT_TRY(parse_cfg(&f, &m->c));
    const tft_cfg *c = &m->c;
    cat_ctx cc;
    memset(&cc, 0, sizeof cc);
    cc.c = c;
    cat_all(&cc);
    m->tab = calloc(cc.n, sizeof *m->tab);
    NMT_CHECK(m->tab != NULL, TFT_ERR_NOMEM);
    memset(&cc, 0, sizeof cc);
    cc.c = c;
    cc.t = m->tab;
    cat_all(&cc);
    m->n_tab = cc.n;
    m->n_params = cc.total;
    for (uint32_t i = 0; i < m->n_tab; i++) {
        nmt_tensor_view v;
        NMT_TRY(nmt_file_expect(&f, m->tab[i].name, m->tab[i].ndim, m->tab[i].shape, &v));
        NMT_CHECK(v.dtype == NMT_DTYPE_F32, NMT_ERR_UNSUPPORTED);
    }
    NMT_CHECK(m->n_params <= UINT32_MAX, NMT_ERR_UNSUPPORTED);

    m->n_enc_sub = 2 * c->enc_layers;
    m->n_dec_sub = 3 * c->dec_layers;
    m->subs = calloc(m->n_enc_sub + m->n_dec_sub, sizeof *m->subs);
    NMT_CHECK(m->subs != NULL, TFT_ERR_NOMEM);
    NMT_TRY(bind_params(m));

    NMT_TRY(nmt_ops_init(&m->ops, m->dev));
    m->ops_ok = 1;
    NMT_TRY(nmt_ops_enable_nn(&m->ops));
    NMT_TRY(nmt_train_ops_init(&m->t, m->dev));
    m->t_ok = 1;

    NMT_TRY(dbuf(m, m->n_params, &m->P));
    NMT_TRY(dbuf(m, m->n_params, &m->G));
    NMT_TRY(dbuf(m, m->n_params, &m->M));
    NMT_TRY(dbuf(m, m->n_params, &m->V));
    NMT_TRY(alloc_acts(m));

    float *host = malloc(m->n_params * sizeof(float));
    NMT_CHECK(host != NULL, TFT_ERR_NOMEM);
    nmt_status st = NMT_OK;
    for (uint32_t i = 0; i < m->n_tab && st == NMT_OK; i++) {
        nmt_tensor_view v;
        st = nmt_file_find(&f, m->tab[i].name, &v);
        if (st == NMT_OK) memcpy(host + m->tab[i].off, v.data, m->tab[i].count * sizeof(float));
    }
    if (st == NMT_OK)
        st = nmt_device_write(m->dev, m->P.mem, 0, m->n_params * sizeof(float), host);
    free(host);
    NMT_TRY(st);
    const uint32_t np = (uint32_t)m->n_params;
    NMT_TRY(nmt_op_fill(&m->t, m->G, np, 0.0f));
    static const char *const mv[2] = {"train.adam_m", "train.adam_v"};
    for (int i = 0; i < 2; i++) {
        nmt_buf dst = i ? m->V : m->M;
        nmt_tensor_view v;
        if (nmt_file_find(&f, mv[i], &v) == NMT_OK && v.dtype == NMT_DTYPE_F32 && v.ndim == 1 &&
            v.shape[0] == m->n_params)
            NMT_TRY(nmt_device_write(m->dev, dst.mem, 0, m->n_params * sizeof(float), v.data));
        else
            NMT_TRY(nmt_op_fill(&m->t, dst, np, 0.0f));
    }
    return nmt_device_finish(m->dev);
}

nmt_status tft_create(nmt_device *dev, const void *image, size_t size, const tft_limits *lim, tft_model **out) {
    NMT_CHECK(out != NULL, NMT_ERR_INVALID_ARGUMENT);
    *out = NULL;
    NMT_CHECK(dev != NULL && image != NULL && lim != NULL, NMT_ERR_INVALID_ARGUMENT);
    tft_limits L = *lim;
    NMT_CHECK(L.max_seqs >= 1 && L.max_seqs <= (1u << 16) && L.max_src_len >= 1 && L.max_src_len <= (1u << 16) &&
                  L.max_tgt_len >= 1 && L.max_tgt_len <= (1u << 16),
              NMT_ERR_INVALID_ARGUMENT);
    const uint64_t full = (uint64_t)L.max_seqs * NMT_MAX(L.max_src_len, L.max_tgt_len);
    if (L.max_tokens == 0) L.max_tokens = (uint32_t)NMT_MIN(full, (uint64_t)UINT32_MAX);
    NMT_CHECK(L.max_tokens >= NMT_MAX(L.max_src_len, L.max_tgt_len) && L.max_tokens <= (1u << 24),
              NMT_ERR_INVALID_ARGUMENT);
    if ((uint64_t)L.max_tokens > full) L.max_tokens = (uint32_t)full;
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

size_t tft_n_params(const tft_model *m) { return m ? m->n_params : 0; }
uint32_t tft_n_tensors(const tft_model *m) { return m ? m->n_tab : 0; }

void tft_tensor(const tft_model *m, uint32_t i, const char **name, uint32_t *ndim, uint32_t shape[2], size_t *offset,
                size_t *count) {
    if (m == NULL || i >= m->n_tab) return;
    const tft_tinfo *t = &m->tab[i];
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

void tft_attn_self_args(const tft_model *m, const sub_desc *s, nmt_attn_args *a) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d, nbr = s->dec ? c->n_dec_br : c->n_enc_br, len = s->dec ? m->T : m->S;
    memset(a, 0, sizeof *a);
    a->n_heads = c->heads;
    a->d_head = c->dh;
    a->group = 1;
    a->causal = s->dec;
    a->n_branches = nbr;
    memcpy(a->branches, s->dec ? c->dec_br : c->enc_br, sizeof(nmt_branch) * nbr);
    a->scores = m->scores;
    a->stats = m->stats;
    a->out = s->ctx;
    a->out_ld = nbr * d;
    a->n_seq = m->n;
    a->lq = len;
    a->lk_max = len;
    a->q = s->qkv_a;
    a->k = nmt_buf_at(s->qkv_a, d);
    a->v = nmt_buf_at(s->qkv_a, 2 * (size_t)d);
    a->q_ld = a->k_ld = a->v_ld = 3 * d;
    a->kv_seq_stride = (uint64_t)len * 3 * d;
    a->key_len = s->dec ? NO_BUF : m->klen; /* the runtime's decoder self-attention has no key_len */
    a->key_len_const = len;
}

void tft_attn_cross_args(const tft_model *m, const sub_desc *s, nmt_attn_args *a) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d;
    memset(a, 0, sizeof *a);
    a->n_heads = c->heads;
    a->d_head = c->dh;
    a->group = 1;
    a->causal = 0;
    a->n_branches = 1;
    a->branches[0].kind = NMT_BRANCH_GLOBAL;
    a->scores = m->scores;
    a->stats = m->stats;
    a->out = s->ctx;
    a->out_ld = d;
    a->n_seq = m->n;
    a->lq = m->T;
    a->lk_max = m->S;
    a->q = s->qkv_a;
    a->q_ld = d;
    a->k = s->kv_a;
    a->v = nmt_buf_at(s->kv_a, d);
    a->k_ld = a->v_ld = 2 * d;
    a->kv_seq_stride = (uint64_t)m->S * 2 * d;
    a->key_len = m->klen;
}

static nmt_status linear(tft_model *m, nmt_buf in, uint32_t ld_in, uint32_t rows, lin_o w, uint32_t out_dim,
                         uint32_t in_dim, nmt_buf out, uint32_t ld_out, int relu) {
    return nmt_op_gemm(&m->ops, 1, rows, out_dim, in_dim, 1.0f, in, ld_in, PB(m, w.w), in_dim, 0.0f, out, ld_out,
                       PB(m, w.b), relu);
}

/* F of a sub-layer: in -> s->t (before dropout). */
static nmt_status fwd_f(tft_model *m, sub_desc *s, nmt_buf in, uint32_t rows) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d;
    if (s->kind == SUB_FFN) {
        NMT_TRY(linear(m, in, d, rows, s->fc1, c->ff, d, s->a, c->ff, 1));
        return linear(m, s->a, c->ff, rows, s->fc2, d, c->ff, s->t, d, 0);
    }
    nmt_attn_args a;
    if (s->kind == SUB_CROSS) {
        NMT_TRY(linear(m, in, d, rows, s->cq, d, d, s->qkv_a, d, 0));
        NMT_TRY(linear(m, m->enc_out, d, m->n * m->S, s->ckv, 2 * d, d, s->kv_a, 2 * d, 0));
        tft_attn_cross_args(m, s, &a);
        NMT_TRY(nmt_op_attention(&m->ops, &a));
        return linear(m, s->ctx, d, rows, s->co, d, d, s->t, d, 0);
    }
    NMT_TRY(linear(m, in, d, rows, s->qkv, 3 * d, d, s->qkv_a, 3 * d, 0));
    tft_attn_self_args(m, s, &a);
    NMT_TRY(nmt_op_attention(&m->ops, &a));
    const uint32_t nbr = a.n_branches, ld = nbr * d;
    if (nbr == 1 || c->fusion == NMT_TF_FUSE_CONCAT) return linear(m, s->ctx, ld, rows, s->o, d, ld, s->t, d, 0);
    if (c->fusion == NMT_TF_FUSE_SUM) {
        for (uint32_t b = 0; b < nbr; b++)
            NMT_TRY(nmt_op_gemm(&m->ops, 1, rows, d, d, 1.0f, nmt_buf_at(s->ctx, (size_t)b * d), ld, PB(m, s->o.w), d,
                                b ? 1.0f : 0.0f, s->t, d, b ? NO_BUF : PB(m, s->o.b), 0));
        return NMT_OK;
    }
    const uint32_t dr = d / c->gate_r;
    for (uint32_t b = 0; b < nbr; b++) {
        nmt_buf xb = nmt_buf_at(s->ctx, (size_t)b * d);
        NMT_TRY(linear(m, xb, ld, rows, s->g1[b], dr, d, s->gh[b], dr, 1));
        NMT_TRY(linear(m, s->gh[b], dr, rows, s->g2[b], d, dr, s->g[b], d, 0));
        NMT_TRY(nmt_op_gate_accum(&m->ops, xb, ld, s->g[b], d, s->fused, d, rows, d, b > 0));
    }
    return linear(m, s->fused, d, rows, s->o, d, d, s->t, d, 0);
}

static nmt_status fwd_sub(tft_model *m, sub_desc *s, uint32_t rows, float p, uint64_t seed, uint64_t site) {
    const tft_cfg *c = &m->c;
    const uint32_t n = rows * c->d;
    if (c->pre_norm) {
        NMT_TRY(nmt_op_layernorm(&m->ops, s->x, NO_BUF, m->h, rows, c->d, PB(m, s->ln.g), PB(m, s->ln.b), c->eps));
        NMT_TRY(fwd_f(m, s, m->h, rows));
        if (p > 0.0f) NMT_TRY(nmt_op_dropout(&m->t, s->t, s->t, n, p, seed, site << 32));
        NMT_TRY(nmt_op_copy_rows(&m->ops, s->x, c->d, s->out, c->d, rows, c->d));
        return nmt_op_add(&m->ops, s->out, s->t, n);
    }
    NMT_TRY(fwd_f(m, s, s->x, rows));
    if (p > 0.0f) NMT_TRY(nmt_op_dropout(&m->t, s->t, s->t, n, p, seed, site << 32));
    return nmt_op_layernorm(&m->ops, s->t, s->x, s->out, rows, c->d, PB(m, s->ln.g), PB(m, s->ln.b), c->eps);
}

/* Dropout sites: 0 source embedding, 1 target embedding, 2 + k sub-layer k. */
static nmt_status forward(tft_model *m, float p, uint64_t seed) {
    const tft_cfg *c = &m->c;
    const uint32_t d = c->d, rs = m->n * m->S, rt = m->n * m->T;
    nmt_buf x0 = m->subs[0].x;
    NMT_TRY(nmt_op_embed(&m->ops, m->src_tok, rs, m->S, 0, PB(m, m->src_emb), d, c->emb_scale, x0));
    if (p > 0.0f) NMT_TRY(nmt_op_dropout(&m->t, x0, x0, rs * d, p, seed, 0));
    for (uint32_t k = 0; k < m->n_enc_sub; k++) NMT_TRY(fwd_sub(m, &m->subs[k], rs, p, seed, 2 + k));
    if (c->pre_norm)
        NMT_TRY(nmt_op_layernorm(&m->ops, m->enc_top, NO_BUF, m->enc_out, rs, d, PB(m, m->enc_ln.g),
                                 PB(m, m->enc_ln.b), c->eps));
    nmt_buf y0 = m->subs[m->n_enc_sub].x;
    NMT_TRY(nmt_op_embed(&m->ops, m->tgt_in, rt, m->T, 0, PB(m, m->tgt_emb), d, c->emb_scale, y0));
    if (p > 0.0f) NMT_TRY(nmt_op_dropout(&m->t, y0, y0, rt * d, p, seed, (uint64_t)1 << 32));
    for (uint32_t k = m->n_enc_sub; k < m->n_enc_sub + m->n_dec_sub; k++)
        NMT_TRY(fwd_sub(m, &m->subs[k], rt, p, seed, 2 + k));
    if (c->pre_norm)
        NMT_TRY(nmt_op_layernorm(&m->ops, m->dec_top, NO_BUF, m->y_fin, rt, d, PB(m, m->dec_ln.g),
                                 PB(m, m->dec_ln.b), c->eps));
    return nmt_op_gemm(&m->ops, 1, rt, c->tgt_vocab, d, 1.0f, m->y_fin, d, PB(m, m->out_w), d, 0.0f, m->logits,
                       c->tgt_vocab, NO_BUF, 0);
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                    */
/* ------------------------------------------------------------------------ */

/* Validate and upload a batch. */
static nmt_status load_batch(tft_model *m, const tft_batch *b) {
    NMT_CHECK(m != NULL && b != NULL && b->src && b->src_lens && b->tgt_in && b->tgt_out && b->tgt_lens,
              NMT_ERR_INVALID_ARGUMENT);
    const tft_limits *L = &m->lim;
    NMT_CHECK(b->n_seq >= 1 && b->n_seq <= L->max_seqs && b->src_len >= 1 && b->src_len <= L->max_src_len &&
                  b->tgt_len >= 1 && b->tgt_len <= L->max_tgt_len &&
                  (uint64_t)b->n_seq * b->src_len <= L->max_tokens &&
                  (uint64_t)b->n_seq * b->tgt_len <= L->max_tokens,
              NMT_ERR_INVALID_ARGUMENT);
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
    memcpy(m->h_src, b->src, rs * sizeof(int32_t));
    memcpy(m->h_tin, b->tgt_in, rt * sizeof(int32_t));
    for (uint32_t i = 0; i < b->n_seq; i++) m->h_klen[i] = (int32_t)b->src_lens[i];
    m->n = b->n_seq;
    m->S = b->src_len;
    m->T = b->tgt_len;
    NMT_TRY(nmt_device_write(m->dev, m->src_tok.mem, 0, rs * sizeof(int32_t), m->h_src));
    NMT_TRY(nmt_device_write(m->dev, m->tgt_in.mem, 0, rt * sizeof(int32_t), m->h_tin));
    NMT_TRY(nmt_device_write(m->dev, m->tgt_out.mem, 0, rt * sizeof(int32_t), m->h_tout));
    return nmt_device_write(m->dev, m->klen.mem, 0, b->n_seq * sizeof(int32_t), m->h_klen);
}

static nmt_status xent(tft_model *m, float eps, float grad_scale, int grad) {
    const uint32_t rt = m->n * m->T, V = m->c.tgt_vocab;
    NMT_TRY(nmt_op_xent(&m->t, m->logits, rt, V, V, m->tgt_out, -1, eps, grad_scale, m->loss, m->nll,
                        grad ? m->logits : NO_BUF, V));
    return NMT_OK;
}

static nmt_status read_sums(tft_model *m, double *loss_sum, double *nll_sum) {
    const uint32_t rt = m->n * m->T;
    NMT_TRY(nmt_op_reduce_sum(&m->t, m->loss, rt, 0, m->partial, m->red));
    NMT_TRY(nmt_op_reduce_sum(&m->t, m->nll, rt, 0, m->partial, nmt_buf_at(m->red, 1)));
    float s[2];
    NMT_TRY(nmt_device_read(m->dev, m->red.mem, 0, sizeof s, s));
    if (loss_sum) *loss_sum = s[0];
    if (nll_sum) *nll_sum = s[1];
    return NMT_OK;
}

nmt_status tft_forward_backward(tft_model *m, const tft_batch *b, const tft_step_opts *o, double *loss_sum,
                                double *nll_sum) {
    NMT_CHECK(m != NULL && o != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(o->dropout >= 0.0f && o->dropout < 1.0f && o->attn_dropout == 0.0f && o->label_smoothing >= 0.0f &&
                  o->label_smoothing < 1.0f && isfinite(o->grad_scale),
              NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(load_batch(m, b));
    NMT_TRY(forward(m, o->dropout, o->seed));
    NMT_TRY(xent(m, o->label_smoothing, o->grad_scale, 1));
    NMT_TRY(tft_backward(m, o->dropout, o->seed));
    return read_sums(m, loss_sum, nll_sum);
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

nmt_status tft_zero_grad(tft_model *m) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_op_fill(&m->t, m->G, (uint32_t)m->n_params, 0.0f);
}

nmt_status tft_grad_norm(tft_model *m, double *norm) {
    NMT_CHECK(m != NULL && norm != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(nmt_op_reduce_sum(&m->t, m->G, (uint32_t)m->n_params, 1, m->partial, m->red));
    float s;
    NMT_TRY(nmt_device_read(m->dev, m->red.mem, 0, sizeof s, &s));
    *norm = sqrt((double)s);
    return NMT_OK;
}

nmt_status tft_adam_step(tft_model *m, const nmt_adam_params *ap) {
    NMT_CHECK(m != NULL && ap != NULL, NMT_ERR_INVALID_ARGUMENT);
    return nmt_op_adam(&m->t, m->P, m->G, m->M, m->V, (uint32_t)m->n_params, ap);
}

nmt_status tft_read_state(tft_model *m, float *params, float *grads, float *adam_m, float *adam_v) {
    NMT_CHECK(m != NULL, NMT_ERR_INVALID_ARGUMENT);
    const size_t bytes = m->n_params * sizeof(float);
    if (params) NMT_TRY(nmt_device_read(m->dev, m->P.mem, 0, bytes, params));
    if (grads) NMT_TRY(nmt_device_read(m->dev, m->G.mem, 0, bytes, grads));
    if (adam_m) NMT_TRY(nmt_device_read(m->dev, m->M.mem, 0, bytes, adam_m));
    if (adam_v) NMT_TRY(nmt_device_read(m->dev, m->V.mem, 0, bytes, adam_v));
    return nmt_device_finish(m->dev);
}

nmt_status tft_write_state(tft_model *m, const float *params, const float *adam_m, const float *adam_v) {
    NMT_CHECK(m != NULL && params != NULL, NMT_ERR_INVALID_ARGUMENT);
    const size_t bytes = m->n_params * sizeof(float);
    NMT_TRY(nmt_device_write(m->dev, m->P.mem, 0, bytes, params));
    if (adam_m) NMT_TRY(nmt_device_write(m->dev, m->M.mem, 0, bytes, adam_m));
    if (adam_v) NMT_TRY(nmt_device_write(m->dev, m->V.mem, 0, bytes, adam_v));
    return NMT_OK;
}

nmt_status tft_add_to_writer(tft_model *m, nmtw_writer *w, int optimizer) {
    NMT_CHECK(m != NULL && w != NULL, NMT_ERR_INVALID_ARGUMENT);
    const tft_cfg *c = &m->c;
    char s[256];
    NMT_TRY(nmtw_set_str(w, "arch", "transformer"));
    NMT_TRY(nmtw_set_i64(w, "d_model", c->d));
    NMT_TRY(nmtw_set_i64(w, "n_heads", c->heads));
    NMT_TRY(nmtw_set_i64(w, "d_ff", c->ff));
    NMT_TRY(nmtw_set_i64(w, "enc_layers", c->enc_layers));
    NMT_TRY(nmtw_set_i64(w, "dec_layers", c->dec_layers));
    NMT_TRY(nmtw_set_i64(w, "src_vocab", c->src_vocab));
    NMT_TRY(nmtw_set_i64(w, "tgt_vocab", c->tgt_vocab));
    NMT_TRY(nmtw_set_str(w, "norm", c->pre_norm ? "pre" : "post"));
    NMT_TRY(nmtw_set_f64(w, "ln_eps", (double)c->eps));
    NMT_TRY(nmtw_set_f64(w, "embed_scale", (double)c->emb_scale));
    NMT_TRY(nmtw_set_i64(w, "shared_embeddings", c->shared_emb));
    NMT_TRY(nmtw_set_i64(w, "tied_output", c->tied_out));
    nmt_tf_branches_str(c->enc_br, c->n_enc_br, s, sizeof s);
    NMT_TRY(nmtw_set_str(w, "enc_branches", s));
    nmt_tf_branches_str(c->dec_br, c->n_dec_br, s, sizeof s);
    NMT_TRY(nmtw_set_str(w, "dec_branches", s));
    static const char *const fus[] = {"sum", "concat", "gate"};
    NMT_TRY(nmtw_set_str(w, "fusion", fus[c->fusion]));
    NMT_TRY(nmtw_set_i64(w, "gate_reduction", c->gate_r));
    NMT_TRY(nmtw_set_i64(w, "bos_id", c->bos));
    NMT_TRY(nmtw_set_i64(w, "eos_id", c->eos));
    NMT_TRY(nmtw_set_i64(w, "pad_id", c->pad));
    NMT_TRY(nmtw_set_i64(w, "unk_id", c->unk));
    float *host = malloc(m->n_params * sizeof(float) * (optimizer ? 2 : 1));
    NMT_CHECK(host != NULL, TFT_ERR_NOMEM);
    nmt_status st = tft_read_state(m, host, NULL, NULL, NULL);
    for (uint32_t i = 0; i < m->n_tab && st == NMT_OK; i++)
        st = nmtw_add_f32(w, m->tab[i].name, m->tab[i].ndim, m->tab[i].shape, host + m->tab[i].off);
    if (optimizer && st == NMT_OK) {
        const uint32_t shape[1] = {(uint32_t)m->n_params};
        float *mv = host + m->n_params;
        st = tft_read_state(m, NULL, NULL, mv, NULL);
        if (st == NMT_OK) st = nmtw_add_f32(w, "train.adam_m", 1, shape, mv);
        if (st == NMT_OK) st = tft_read_state(m, NULL, NULL, NULL, mv);
        if (st == NMT_OK) st = nmtw_add_f32(w, "train.adam_v", 1, shape, mv);
    }
    free(host);
    return st;
}
