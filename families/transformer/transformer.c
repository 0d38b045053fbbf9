/* transformer.c — the Transformer / HySAN family (docs/ARCHITECTURES.md).
 *
 * Encoder and decoder stacks with HySAN self-attention (branches sharing one
 * score matrix, fused by sum, concat or squeeze-gated sum), ordinary
 * cross-attention, ReLU FFN, pre- or post-norm.  The decoder runs either one
 * incremental step for all beam rows (KV cache) or teacher-forced over whole
 * target prefixes (scoring, training); both use the same ops and must agree
 * (tested).  Everything is planned once: weights, activations and caches are
 * device buffers created in plan(); the forward functions only enqueue. */
#include "family.h"
#include "transformer_cfg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

typedef nmt_tf_cfg tf_cfg; /* transformer_cfg.h */
_Static_assert(sizeof(tf_cfg) <= NMT_FAMILY_CFG_BYTES, "config fits the session's slot");

/* ------------------------------------------------------------------------ */
/* Tensor catalogue: one walker enumerates every tensor the config needs,   */
/* used both to validate (parse) and to upload (plan).                      */
/* ------------------------------------------------------------------------ */

typedef nmt_status (*tf_visit_fn)(void *ctx, const char *name, uint32_t ndim, const uint32_t *shape);

static nmt_status visit(tf_visit_fn fn, void *ctx, uint32_t ndim, uint32_t d0, uint32_t d1,
                        const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static nmt_status visit(tf_visit_fn fn, void *ctx, uint32_t ndim, uint32_t d0, uint32_t d1,
                        const char *fmt, ...) {
    char name[NMT_TENSOR_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    uint32_t shape[2] = {d0, d1};
    return fn(ctx, name, ndim, shape);
}

static nmt_status visit_linear(tf_visit_fn fn, void *ctx, uint32_t out, uint32_t in, const char *prefix) {
    NMT_TRY(visit(fn, ctx, 2, out, in, "%s.weight", prefix));
    return visit(fn, ctx, 1, out, 0, "%s.bias", prefix);
}

static nmt_status visit_ln(tf_visit_fn fn, void *ctx, uint32_t d, const char *prefix) {
    NMT_TRY(visit(fn, ctx, 1, d, 0, "%s.weight", prefix));
    return visit(fn, ctx, 1, d, 0, "%s.bias", prefix);
}

static uint32_t attn_out_in(const tf_cfg *c, uint32_t nbr) {
    return (c->fusion == NMT_TF_FUSE_CONCAT && nbr > 1) ? nbr * c->d : c->d;
}

static nmt_status visit_self(const tf_cfg *c, tf_visit_fn fn, void *ctx, const char *stack, uint32_t l,
                             uint32_t nbr) {
    char p[64];
    static const char *const qkv[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s.%u.self_attn.%s", stack, l, qkv[i]);
        NMT_TRY(visit_linear(fn, ctx, c->d, c->d, p));
    }
    snprintf(p, sizeof p, "%s.%u.self_attn.o", stack, l);
    NMT_TRY(visit_linear(fn, ctx, c->d, attn_out_in(c, nbr), p));
    if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
        for (uint32_t b = 0; b < nbr; b++) {
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1", stack, l, b);
            NMT_TRY(visit_linear(fn, ctx, c->d / c->gate_r, c->d, p));
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc2", stack, l, b);
            NMT_TRY(visit_linear(fn, ctx, c->d, c->d / c->gate_r, p));
        }
    }
    return NMT_OK;
}

static nmt_status visit_ffn(const tf_cfg *c, tf_visit_fn fn, void *ctx, const char *stack, uint32_t l) {
    char p[64];
    snprintf(p, sizeof p, "%s.%u.ffn.fc1", stack, l);
    NMT_TRY(visit_linear(fn, ctx, c->ff, c->d, p));
    snprintf(p, sizeof p, "%s.%u.ffn.fc2", stack, l);
    return visit_linear(fn, ctx, c->d, c->ff, p);
}

static nmt_status visit_all(const tf_cfg *c, tf_visit_fn fn, void *ctx) {
    char p[64];
    NMT_TRY(visit(fn, ctx, 2, c->src_vocab, c->d, "src_embed"));
    if (!c->shared_emb) NMT_TRY(visit(fn, ctx, 2, c->tgt_vocab, c->d, "tgt_embed"));
    if (!c->tied_out) NMT_TRY(visit(fn, ctx, 2, c->tgt_vocab, c->d, "out_proj"));
    for (uint32_t l = 0; l < c->enc_layers; l++) {
        NMT_TRY(visit_self(c, fn, ctx, "enc", l, c->n_enc_br));
        for (int i = 1; i <= 2; i++) {
            snprintf(p, sizeof p, "enc.%u.ln%d", l, i);
            NMT_TRY(visit_ln(fn, ctx, c->d, p));
        }
        NMT_TRY(visit_ffn(c, fn, ctx, "enc", l));
    }
    if (c->pre_norm) NMT_TRY(visit_ln(fn, ctx, c->d, "enc.ln"));
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        NMT_TRY(visit_self(c, fn, ctx, "dec", l, c->n_dec_br));
        static const char *const qkvo[4] = {"q", "k", "v", "o"};
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "dec.%u.cross_attn.%s", l, qkvo[i]);
            NMT_TRY(visit_linear(fn, ctx, c->d, c->d, p));
        }
        for (int i = 1; i <= 3; i++) {
            snprintf(p, sizeof p, "dec.%u.ln%d", l, i);
            NMT_TRY(visit_ln(fn, ctx, c->d, p));
        }
        NMT_TRY(visit_ffn(c, fn, ctx, "dec", l));
    }
    if (c->pre_norm) NMT_TRY(visit_ln(fn, ctx, c->d, "dec.ln"));
    return NMT_OK;
}

typedef struct tf_check_ctx {
    const nmt_file *f;
    tf_cfg *c;
} tf_check_ctx;

/* Every tensor may be F32, F16 or I8 (nmt_file_expect checks the dtype).
 * F16 tensors and 1-D I8 tensors are converted to fp32 at load; 2-D I8
 * tensors (linear weights, embeddings) stay int8 on the device. */
static nmt_status check_tensor(void *ctx, const char *name, uint32_t ndim, const uint32_t *shape) {
    tf_check_ctx *cc = (tf_check_ctx *)ctx;
    nmt_tensor_view v;
    NMT_TRY(nmt_file_expect(cc->f, name, ndim, shape, &v));
    if (v.dtype == NMT_DTYPE_I8 && ndim == 2) cc->c->any_q8 = 1;
    return NMT_OK;
}

static nmt_status tf_parse(const nmt_file *f, void *cfgp, nmt_model_info *info) {
    tf_cfg *c = (tf_cfg *)cfgp;
    NMT_TRY(nmt_tf_cfg_parse(f, c));
    tf_check_ctx cc = {f, c};
    NMT_TRY(visit_all(c, check_tensor, &cc));

    if (info != NULL) nmt_tf_cfg_info(c, info);
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* State: weights, activations, caches                                      */
/* ------------------------------------------------------------------------ */

/* w [out, in], b [out].  q8: w is int8 (offsets in bytes) with the per-row
 * scales in s (fp32; same buffer, after the int8 data); else w is fp32. */
typedef struct tf_lin {
    nmt_buf w, b, s;
    int q8;
} tf_lin;
typedef struct tf_ln { nmt_buf g, b; } tf_ln;

typedef struct tf_self {
    tf_lin qkv;                       /* fused [3d, d] / [3d] */
    tf_lin o;                         /* [d, d] or [d, nbr*d] (concat) */
    tf_lin g1[NMT_MAX_BRANCHES];      /* gate squeeze  [d/r, d] */
    tf_lin g2[NMT_MAX_BRANCHES];      /* gate excite   [d, d/r] */
} tf_self;

typedef struct tf_enc_layer {
    tf_self sa;
    tf_ln ln1, ln2;
    tf_lin fc1, fc2;
} tf_enc_layer;

typedef struct tf_dec_layer {
    tf_self sa;
    tf_lin cq, ckv, co;               /* cross: q [d,d]; fused k,v [2d, d]; out [d,d] */
    tf_ln ln1, ln2, ln3;
    tf_lin fc1, fc2;
    nmt_buf cache;                    /* (step_rows, tgt_cap, 2d): self-attn K | V per position */
    nmt_buf cross_kv;                 /* (max_batch * src_cap, 2d): cross-attn K | V */
} tf_dec_layer;

typedef struct tf_state {
    tf_cfg c;
    nmt_plan_dims dims;
    nmt_ops *ops;
    tf_lin src_emb, tgt_emb, out_w;   /* weights only (.b unused); tgt_emb / out_w may alias */
    tf_ln enc_ln, dec_ln;
    tf_enc_layer *enc;                /* [enc_layers] */
    tf_dec_layer *dec;                /* [dec_layers] */
    /* activations, rows = max(B*src_cap, B*tgt_cap, step_rows) */
    nmt_buf x;        /* (rows, d) residual stream */
    nmt_buf h;        /* (rows, d) pre-norm input */
    nmt_buf tmp;      /* (rows, d) sub-layer output */
    nmt_buf qkv;      /* (rows, 3d) */
    nmt_buf ctx;      /* (rows, nbr_max*d) per-branch attention outputs */
    nmt_buf fused;    /* (rows, d) gated-sum accumulator */
    nmt_buf gh;       /* (rows, d/r) gate hidden */
    nmt_buf gout;     /* (rows, d) gate logits */
    nmt_buf ffh;      /* (rows, d_ff) */
    nmt_buf scores;   /* attention scores scratch */
    nmt_buf stats;    /* softmax stats scratch */
    nmt_buf cache_tmp;/* (step_rows, tgt_cap, 2d) spare cache: beam reorder target */
    uint32_t src_pad_len;  /* padded source length of the last encode */
    uint32_t full_len;     /* positions of the last decode_full */
} tf_state;

typedef struct tf_load_ctx {
    nmt_session *s;
    const nmt_file *f;
    nmt_arena *a;
} tf_load_ctx;

/* Write tensor v as fp32 into mem at byte offset `off`: F32 directly, F16
 * and I8 (dequantized, w = q * scale[row]) converted through a stack buffer
 * in chunks (no allocation). */
static nmt_status upload_as_f32(nmt_device *dev, cl_mem mem, size_t off, const nmt_tensor_view *v) {
    const size_t n = (size_t)v->n_elements;
    if (v->dtype == NMT_DTYPE_F32) return nmt_device_write(dev, mem, off, n * sizeof(float), v->data);
    float tmp[1024];
    const uint8_t *src = (const uint8_t *)v->data;
    const size_t row_len = v->shape[0] ? n / v->shape[0] : 1;
    for (size_t i0 = 0; i0 < n; i0 += NMT_ARRAY_LEN(tmp)) {
        const size_t cnt = NMT_MIN(NMT_ARRAY_LEN(tmp), n - i0);
        for (size_t j = 0; j < cnt; j++) {
            const size_t i = i0 + j;
            if (v->dtype == NMT_DTYPE_F16) {
                uint16_t h;
                memcpy(&h, src + 2 * i, sizeof h);
                tmp[j] = nmt_half_to_float(h);
            } else { /* I8 */
                float sc;
                memcpy(&sc, (const uint8_t *)v->scales + sizeof(float) * (i / row_len), sizeof sc);
                tmp[j] = (float)(int8_t)src[i] * sc;
            }
        }
        NMT_TRY(nmt_device_write(dev, mem, off + i0 * sizeof(float), cnt * sizeof(float), tmp));
    }
    return NMT_OK;
}

/* One tensor into its own device buffer: 2-D I8 as is (int8 data then the
 * fp32 scales: out->q8 = 1), everything else as fp32. */
static nmt_status load_tensor(tf_load_ctx *lc, const char *name, tf_lin *out) {
    nmt_tensor_view v;
    NMT_TRY(nmt_file_find(lc->f, name, &v));
    if (v.dtype == NMT_DTYPE_I8 && v.ndim == 2) {
        NMT_TRY(nmt_session_buffer(lc->s, lc->a, (size_t)v.nbytes, v.data, &out->w));
        out->s = out->w;
        out->s.off = nmt_align_up((size_t)v.n_elements, 4) / sizeof(float);
        out->q8 = 1;
        return NMT_OK;
    }
    out->q8 = 0;
    if (v.dtype == NMT_DTYPE_F32)
        return nmt_session_buffer(lc->s, lc->a, (size_t)v.nbytes, v.data, &out->w);
    NMT_TRY(nmt_session_buffer(lc->s, lc->a, (size_t)v.n_elements * sizeof(float), NULL, &out->w));
    if (nmt_arena_measuring(lc->a)) return NMT_OK;
    return upload_as_f32(nmt_session_ops(lc->s)->dev, out->w.mem, 0, &v);
}

static nmt_status load_lin(tf_load_ctx *lc, const char *prefix, tf_lin *out) {
    char n[NMT_TENSOR_NAME_MAX];
    tf_lin b;
    snprintf(n, sizeof n, "%s.weight", prefix);
    NMT_TRY(load_tensor(lc, n, out));
    snprintf(n, sizeof n, "%s.bias", prefix);
    NMT_TRY(load_tensor(lc, n, &b));
    out->b = b.w;
    return NMT_OK;
}

static nmt_status load_ln(tf_load_ctx *lc, const char *prefix, tf_ln *out) {
    tf_lin t;
    NMT_TRY(load_lin(lc, prefix, &t));
    out->g = t.w;
    out->b = t.b;
    return NMT_OK;
}

/* Concatenate the linears `prefix.<part>` (each [d, d]) along the output
 * dimension into one [n*d, d] weight and [n*d] bias.  When every part is I8
 * the weight stays int8: the n int8 blocks, then the n*d scales (the layout
 * of one I8 tensor of shape [n*d, d]); otherwise all parts become fp32. */
static nmt_status load_fused(tf_load_ctx *lc, const char *prefix, const char *const *parts, int n,
                             uint32_t d, tf_lin *out) {
    nmt_tensor_view wv[4], bv[4];
    int all_q8 = 1;
    for (int i = 0; i < n; i++) {
        char name[NMT_TENSOR_NAME_MAX];
        snprintf(name, sizeof name, "%s.%s.weight", prefix, parts[i]);
        NMT_TRY(nmt_file_find(lc->f, name, &wv[i]));
        snprintf(name, sizeof name, "%s.%s.bias", prefix, parts[i]);
        NMT_TRY(nmt_file_find(lc->f, name, &bv[i]));
        if (wv[i].dtype != NMT_DTYPE_I8) all_q8 = 0;
    }
    const size_t dd = (size_t)d * d, bbytes = (size_t)d * sizeof(float);
    const size_t qbytes = nmt_align_up(dd * (size_t)n, 4);  /* d is even: dd % 4 == 0 */
    const size_t wbytes = all_q8 ? qbytes + bbytes * (size_t)n : dd * sizeof(float) * (size_t)n;
    NMT_TRY(nmt_session_buffer(lc->s, lc->a, wbytes, NULL, &out->w));
    NMT_TRY(nmt_session_buffer(lc->s, lc->a, bbytes * (size_t)n, NULL, &out->b));
    out->q8 = all_q8;
    out->s = out->w;
    out->s.off = all_q8 ? qbytes / sizeof(float) : 0;
    if (nmt_arena_measuring(lc->a)) return NMT_OK;
    nmt_device *dev = nmt_session_ops(lc->s)->dev;
    for (int i = 0; i < n; i++) {
        if (all_q8) {
            NMT_TRY(nmt_device_write(dev, out->w.mem, dd * (size_t)i, dd, wv[i].data));
            NMT_TRY(nmt_device_write(dev, out->w.mem, qbytes + bbytes * (size_t)i, bbytes, wv[i].scales));
        } else {
            NMT_TRY(upload_as_f32(dev, out->w.mem, dd * sizeof(float) * (size_t)i, &wv[i]));
        }
        NMT_TRY(upload_as_f32(dev, out->b.mem, bbytes * (size_t)i, &bv[i]));
    }
    return NMT_OK;
}

static nmt_status load_self(tf_load_ctx *lc, const tf_cfg *c, const char *stack, uint32_t l,
                            uint32_t nbr, tf_self *sa) {
    static const char *const qkv[3] = {"q", "k", "v"};
    char p[64];
    snprintf(p, sizeof p, "%s.%u.self_attn", stack, l);
    NMT_TRY(load_fused(lc, p, qkv, 3, c->d, &sa->qkv));
    snprintf(p, sizeof p, "%s.%u.self_attn.o", stack, l);
    NMT_TRY(load_lin(lc, p, &sa->o));
    if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
        for (uint32_t b = 0; b < nbr; b++) {
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1", stack, l, b);
            NMT_TRY(load_lin(lc, p, &sa->g1[b]));
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc2", stack, l, b);
            NMT_TRY(load_lin(lc, p, &sa->g2[b]));
        }
    }
    return NMT_OK;
}

static nmt_status load_ffn_norms(tf_load_ctx *lc, const char *stack, uint32_t l, tf_ln *lns, int n_ln,
                                 tf_lin *fc1, tf_lin *fc2) {
    char p[64];
    for (int i = 0; i < n_ln; i++) {
        snprintf(p, sizeof p, "%s.%u.ln%d", stack, l, i + 1);
        NMT_TRY(load_ln(lc, p, &lns[i]));
    }
    snprintf(p, sizeof p, "%s.%u.ffn.fc1", stack, l);
    NMT_TRY(load_lin(lc, p, fc1));
    snprintf(p, sizeof p, "%s.%u.ffn.fc2", stack, l);
    return load_lin(lc, p, fc2);
}

static nmt_status scratch(tf_load_ctx *lc, size_t floats, nmt_buf *out) {
    size_t bytes;
    NMT_CHECK(nmt_mul_ok(floats, sizeof(float), &bytes), NMT_ERR_DEVICE_MEMORY);
    return nmt_session_buffer(lc->s, lc->a, bytes, NULL, out);
}

static size_t max3(size_t a, size_t b, size_t c) { return NMT_MAX(a, NMT_MAX(b, c)); }

static nmt_status tf_plan(nmt_session *s, const nmt_file *f, const void *cfgp,
                          const nmt_plan_dims *dims, nmt_arena *a, void **state) {
    const tf_cfg *c = (const tf_cfg *)cfgp;
    tf_state *st = NMT_ARENA_NEW(a, tf_state, 1);
    tf_enc_layer *enc = NMT_ARENA_NEW(a, tf_enc_layer, c->enc_layers);
    tf_dec_layer *dec = NMT_ARENA_NEW(a, tf_dec_layer, c->dec_layers);
    NMT_CHECK(st != NULL && enc != NULL && dec != NULL, NMT_ERR_ARENA_TOO_SMALL);
    *state = st;
    /* In the measuring pass the arena hands out dummy pointers: record
     * everything in locals and copy into the arena only for real. */
    const int real = !nmt_arena_measuring(a);
    tf_state local;
    memset(&local, 0, sizeof local);
    local.c = *c;
    local.dims = *dims;
    local.ops = nmt_session_ops(s);
    local.enc = enc;
    local.dec = dec;
    tf_enc_layer enc_l;
    tf_dec_layer dec_l;
    tf_load_ctx lc = {s, f, a};
    const uint32_t d = c->d;

    /* int8 kernels exist only for models with int8 weights; the ops are
     * initialised before the real pass (not in the measuring one) */
    if (real && c->any_q8) NMT_TRY(nmt_ops_enable_q8(local.ops));
    NMT_TRY(load_tensor(&lc, "src_embed", &local.src_emb));
    if (c->shared_emb) local.tgt_emb = local.src_emb;
    else NMT_TRY(load_tensor(&lc, "tgt_embed", &local.tgt_emb));
    if (c->tied_out) local.out_w = local.tgt_emb;
    else NMT_TRY(load_tensor(&lc, "out_proj", &local.out_w));

    const size_t B = dims->max_batch, S = dims->src_cap, T = dims->tgt_cap, R = dims->step_rows;
    for (uint32_t l = 0; l < c->enc_layers; l++) {
        memset(&enc_l, 0, sizeof enc_l);
        NMT_TRY(load_self(&lc, c, "enc", l, c->n_enc_br, &enc_l.sa));
        tf_ln lns[2];
        NMT_TRY(load_ffn_norms(&lc, "enc", l, lns, 2, &enc_l.fc1, &enc_l.fc2));
        enc_l.ln1 = lns[0];
        enc_l.ln2 = lns[1];
        if (real) enc[l] = enc_l;
    }
    if (c->pre_norm) NMT_TRY(load_ln(&lc, "enc.ln", &local.enc_ln));
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        static const char *const kv[2] = {"k", "v"};
        char p[64];
        memset(&dec_l, 0, sizeof dec_l);
        NMT_TRY(load_self(&lc, c, "dec", l, c->n_dec_br, &dec_l.sa));
        snprintf(p, sizeof p, "dec.%u.cross_attn.q", l);
        NMT_TRY(load_lin(&lc, p, &dec_l.cq));
        snprintf(p, sizeof p, "dec.%u.cross_attn", l);
        NMT_TRY(load_fused(&lc, p, kv, 2, d, &dec_l.ckv));
        snprintf(p, sizeof p, "dec.%u.cross_attn.o", l);
        NMT_TRY(load_lin(&lc, p, &dec_l.co));
        tf_ln lns[3];
        NMT_TRY(load_ffn_norms(&lc, "dec", l, lns, 3, &dec_l.fc1, &dec_l.fc2));
        dec_l.ln1 = lns[0];
        dec_l.ln2 = lns[1];
        dec_l.ln3 = lns[2];
        NMT_TRY(scratch(&lc, R * T * 2 * d, &dec_l.cache));
        NMT_TRY(scratch(&lc, B * S * 2 * d, &dec_l.cross_kv));
        if (real) dec[l] = dec_l;
    }
    if (c->pre_norm) NMT_TRY(load_ln(&lc, "dec.ln", &local.dec_ln));

    const size_t rows = max3(B * S, B * T, R);
    const size_t nbr = NMT_MAX(c->n_enc_br, c->n_dec_br);
    const size_t H = c->heads;
    NMT_TRY(scratch(&lc, rows * d, &local.x));
    NMT_TRY(scratch(&lc, rows * d, &local.h));
    NMT_TRY(scratch(&lc, rows * d, &local.tmp));
    NMT_TRY(scratch(&lc, rows * 3 * d, &local.qkv));
    NMT_TRY(scratch(&lc, rows * nbr * d, &local.ctx));
    if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1) {
        NMT_TRY(scratch(&lc, rows * d, &local.fused));
        NMT_TRY(scratch(&lc, rows * (d / c->gate_r), &local.gh));
        NMT_TRY(scratch(&lc, rows * d, &local.gout));
    }
    NMT_TRY(scratch(&lc, rows * c->ff, &local.ffh));
    size_t sc = max3(B * H * S * S, B * H * T * T, B * H * T * S);
    sc = NMT_MAX(sc, R * H * NMT_MAX(S, T));
    NMT_TRY(scratch(&lc, sc, &local.scores));
    NMT_TRY(scratch(&lc, 2 * max3(B * H * S, B * H * T, R * H), &local.stats));
    NMT_TRY(scratch(&lc, R * T * 2 * d, &local.cache_tmp));

    if (real) *st = local;
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Forward building blocks                                                  */
/* ------------------------------------------------------------------------ */

static const nmt_buf NO_BUF = {NULL, 0};

/* out[rows, N] = in[rows, K] * W^T (+ beta * out) (+ bias) (ReLU), W [N, K]
 * fp32 or int8 with per-row scales. */
static nmt_status matmul(tf_state *st, uint32_t rows, uint32_t N, uint32_t K, nmt_buf in, uint32_t ld_in,
                         const tf_lin *w, float beta, nmt_buf out, uint32_t ld_out, nmt_buf bias, int relu) {
    if (w->q8)
        return nmt_op_gemm_q8(st->ops, rows, N, K, 1.0f, in, ld_in, w->w, K, w->s, beta, out, ld_out, bias,
                              relu);
    return nmt_op_gemm(st->ops, 1, rows, N, K, 1.0f, in, ld_in, w->w, K, beta, out, ld_out, bias, relu);
}

static nmt_status linear(tf_state *st, nmt_buf in, uint32_t ld_in, uint32_t rows, const tf_lin *w,
                         uint32_t out_dim, uint32_t in_dim, nmt_buf out, uint32_t ld_out, int relu) {
    return matmul(st, rows, out_dim, in_dim, in, ld_in, w, 0.0f, out, ld_out, w->b, relu);
}

static nmt_status embed(tf_state *st, nmt_buf tok, uint32_t rows, uint32_t seq_len, uint32_t pos0,
                        const tf_lin *E) {
    const tf_cfg *c = &st->c;
    if (E->q8)
        return nmt_op_embed_q8(st->ops, tok, rows, seq_len, pos0, E->w, E->s, c->d, c->emb_scale, st->x);
    return nmt_op_embed(st->ops, tok, rows, seq_len, pos0, E->w, c->d, c->emb_scale, st->x);
}

static nmt_status layer_norm(tf_state *st, nmt_buf x, nmt_buf res, nmt_buf out, uint32_t rows,
                             const tf_ln *ln) {
    return nmt_op_layernorm(st->ops, x, res, out, rows, st->c.d, ln->g, ln->b, st->c.eps);
}

/* ctx (rows, nbr*d) -> out (rows, d): fusion of the branches, then W_o. */
static nmt_status fuse_and_project(tf_state *st, const tf_self *w, uint32_t nbr, uint32_t rows,
                                   nmt_buf out) {
    const tf_cfg *c = &st->c;
    const uint32_t d = c->d, ld = nbr * d;
    if (nbr == 1 || c->fusion == NMT_TF_FUSE_CONCAT)
        return linear(st, st->ctx, ld, rows, &w->o, d, ld, out, d, 0);
    if (c->fusion == NMT_TF_FUSE_SUM) {
        /* W_o (sum_b x_b) + b_o = sum_b W_o x_b + b_o: accumulate GEMMs */
        for (uint32_t b = 0; b < nbr; b++)
            NMT_TRY(matmul(st, rows, d, d, nmt_buf_at(st->ctx, (size_t)b * d), ld, &w->o, b ? 1.0f : 0.0f,
                           out, d, b ? NO_BUF : w->o.b, 0));
        return NMT_OK;
    }
    const uint32_t dr = d / c->gate_r;
    for (uint32_t b = 0; b < nbr; b++) {
        nmt_buf xb = nmt_buf_at(st->ctx, (size_t)b * d);
        NMT_TRY(linear(st, xb, ld, rows, &w->g1[b], dr, d, st->gh, dr, 1));
        NMT_TRY(linear(st, st->gh, dr, rows, &w->g2[b], d, dr, st->gout, d, 0));
        NMT_TRY(nmt_op_gate_accum(st->ops, xb, ld, st->gout, d, st->fused, d, rows, d, b > 0));
    }
    return linear(st, st->fused, d, rows, &w->o, d, d, out, d, 0);
}

static void attn_common(const tf_state *st, nmt_attn_args *a, const nmt_branch *br, uint32_t nbr,
                        int causal) {
    memset(a, 0, sizeof *a);
    a->n_heads = st->c.heads;
    a->d_head = st->c.dh;
    a->group = 1;
    a->causal = causal;
    a->n_branches = nbr;
    memcpy(a->branches, br, sizeof(nmt_branch) * nbr);
    a->scores = st->scores;
    a->stats = st->stats;
    a->out = st->ctx;
    a->out_ld = nbr * st->c.d;
}

/* Self-attention over whole sequences: n sequences of len positions,
 * queries, keys and values all from `in`. */
static nmt_status self_attn_full(tf_state *st, const tf_self *w, const nmt_branch *br, uint32_t nbr,
                                 int causal, nmt_buf key_len, nmt_buf in, uint32_t n, uint32_t len,
                                 nmt_buf out) {
    const uint32_t d = st->c.d, rows = n * len;
    NMT_TRY(linear(st, in, d, rows, &w->qkv, 3 * d, d, st->qkv, 3 * d, 0));
    nmt_attn_args a;
    attn_common(st, &a, br, nbr, causal);
    a.n_seq = n;
    a.lq = len;
    a.lk_max = len;
    a.q = st->qkv;
    a.k = nmt_buf_at(st->qkv, d);
    a.v = nmt_buf_at(st->qkv, 2 * (size_t)d);
    a.q_ld = a.k_ld = a.v_ld = 3 * d;
    a.kv_seq_stride = (uint64_t)len * 3 * d;
    a.key_len = key_len;
    a.key_len_const = len;
    NMT_TRY(nmt_op_attention(st->ops, &a));
    return fuse_and_project(st, w, nbr, rows, out);
}

/* Cross-attention of n_seq query sequences (lq each) over the encoder
 * memory; query sequence s reads sentence s / group. */
static nmt_status cross_attn(tf_state *st, const tf_dec_layer *L, nmt_buf key_len, nmt_buf in,
                             uint32_t n_seq, uint32_t lq, uint32_t group, nmt_buf out) {
    const uint32_t d = st->c.d, rows = n_seq * lq;
    static const nmt_branch global = {NMT_BRANCH_GLOBAL, 0};
    NMT_TRY(linear(st, in, d, rows, &L->cq, d, d, st->qkv, d, 0));
    nmt_attn_args a;
    attn_common(st, &a, &global, 1, 0);
    a.n_seq = n_seq;
    a.lq = lq;
    a.group = group;
    a.lk_max = st->src_pad_len;
    a.q = st->qkv;
    a.q_ld = d;
    a.k = L->cross_kv;
    a.v = nmt_buf_at(L->cross_kv, d);
    a.k_ld = a.v_ld = 2 * d;
    a.kv_seq_stride = (uint64_t)st->src_pad_len * 2 * d;
    a.key_len = key_len;
    a.out_ld = d;
    NMT_TRY(nmt_op_attention(st->ops, &a));
    return linear(st, st->ctx, d, rows, &L->co, d, d, out, d, 0);
}

static nmt_status ffn(tf_state *st, const tf_lin *fc1, const tf_lin *fc2, nmt_buf in, uint32_t rows,
                      nmt_buf out) {
    NMT_TRY(linear(st, in, st->c.d, rows, fc1, st->c.ff, st->c.d, st->ffh, st->c.ff, 1));
    return linear(st, st->ffh, st->c.ff, rows, fc2, st->c.d, st->c.ff, out, st->c.d, 0);
}

/* A residual sub-layer around F: which F and its arguments. */
typedef enum { SUB_SELF_FULL, SUB_SELF_STEP, SUB_CROSS, SUB_FFN } tf_sub_kind;

typedef struct tf_sub {
    tf_sub_kind kind;
    const tf_self *sa;
    const tf_dec_layer *dl;
    const tf_lin *fc1, *fc2;
    const nmt_branch *br;
    uint32_t nbr;
    int causal;
    nmt_buf key_len;
    uint32_t n, len, group, t;
} tf_sub;

static nmt_status self_attn_step(tf_state *st, const tf_sub *sb, nmt_buf in, nmt_buf out);

static nmt_status run_f(tf_state *st, const tf_sub *sb, nmt_buf in, nmt_buf out) {
    switch (sb->kind) {
    case SUB_SELF_FULL:
        return self_attn_full(st, sb->sa, sb->br, sb->nbr, sb->causal, sb->key_len, in, sb->n,
                              sb->len, out);
    case SUB_SELF_STEP: return self_attn_step(st, sb, in, out);
    case SUB_CROSS: return cross_attn(st, sb->dl, sb->key_len, in, sb->n, sb->len, sb->group, out);
    case SUB_FFN: return ffn(st, sb->fc1, sb->fc2, in, sb->n * sb->len, out);
    }
    return NMT_ERR_INVALID_ARGUMENT;
}

/* post-norm: x = LN(x + F(x));  pre-norm: x = x + F(LN(x)). */
static nmt_status sublayer(tf_state *st, const tf_sub *sb, const tf_ln *ln) {
    const uint32_t rows = sb->n * sb->len;
    if (st->c.pre_norm) {
        NMT_TRY(layer_norm(st, st->x, NO_BUF, st->h, rows, ln));
        NMT_TRY(run_f(st, sb, st->h, st->tmp));
        return nmt_op_add(st->ops, st->x, st->tmp, rows * st->c.d);
    }
    NMT_TRY(run_f(st, sb, st->x, st->tmp));
    return layer_norm(st, st->tmp, st->x, st->x, rows, ln);
}

/* One decoder step's self-attention: append this position's K/V to the
 * cache, attend over positions [0, t]. */
static nmt_status self_attn_step(tf_state *st, const tf_sub *sb, nmt_buf in, nmt_buf out) {
    const uint32_t d = st->c.d, rows = sb->n, T = st->dims.tgt_cap;
    const tf_dec_layer *L = sb->dl;
    NMT_TRY(linear(st, in, d, rows, &L->sa.qkv, 3 * d, d, st->qkv, 3 * d, 0));
    NMT_TRY(nmt_op_copy_rows(st->ops, nmt_buf_at(st->qkv, d), 3 * d,
                             nmt_buf_at(L->cache, (size_t)sb->t * 2 * d), T * 2 * d, rows, 2 * d));
    nmt_attn_args a;
    attn_common(st, &a, sb->br, sb->nbr, 1);
    a.n_seq = rows;
    a.lq = 1;
    a.q_pos0 = sb->t;
    a.lk_max = sb->t + 1;
    a.q = st->qkv;
    a.q_ld = 3 * d;
    a.k = L->cache;
    a.v = nmt_buf_at(L->cache, d);
    a.k_ld = a.v_ld = 2 * d;
    a.kv_seq_stride = (uint64_t)T * 2 * d;
    a.key_len_const = sb->t + 1;
    NMT_TRY(nmt_op_attention(st->ops, &a));
    return fuse_and_project(st, &L->sa, sb->nbr, rows, out);
}

/* ------------------------------------------------------------------------ */
/* Family entry points                                                      */
/* ------------------------------------------------------------------------ */

static nmt_status tf_encode(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t len) {
    tf_state *st = (tf_state *)state;
    const tf_cfg *c = &st->c;
    NMT_CHECK(n >= 1 && n <= st->dims.max_batch && len >= 1 && len <= st->dims.src_cap,
              NMT_ERR_LIMIT_EXCEEDED);
    const uint32_t rows = n * len;
    st->src_pad_len = len;
    NMT_TRY(embed(st, io->src_tok, rows, len, 0, &st->src_emb));
    for (uint32_t l = 0; l < c->enc_layers; l++) {
        const tf_enc_layer *L = &st->enc[l];
        tf_sub sa = {.kind = SUB_SELF_FULL, .sa = &L->sa, .br = c->enc_br, .nbr = c->n_enc_br,
                     .key_len = io->src_len, .n = n, .len = len};
        NMT_TRY(sublayer(st, &sa, &L->ln1));
        tf_sub ff = {.kind = SUB_FFN, .fc1 = &L->fc1, .fc2 = &L->fc2, .n = n, .len = len};
        NMT_TRY(sublayer(st, &ff, &L->ln2));
    }
    if (c->pre_norm) NMT_TRY(layer_norm(st, st->x, NO_BUF, st->x, rows, &st->enc_ln));
    for (uint32_t l = 0; l < c->dec_layers; l++)
        NMT_TRY(linear(st, st->x, c->d, rows, &st->dec[l].ckv, 2 * c->d, c->d, st->dec[l].cross_kv,
                       2 * c->d, 0));
    return NMT_OK;
}

/* The decoder stack over rows already embedded in st->x. */
static nmt_status decoder_layers(tf_state *st, const nmt_io_bufs *io, uint32_t n, uint32_t len,
                                 uint32_t group, int step, uint32_t t) {
    const tf_cfg *c = &st->c;
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        const tf_dec_layer *L = &st->dec[l];
        tf_sub sa = {.kind = step ? SUB_SELF_STEP : SUB_SELF_FULL, .sa = &L->sa, .dl = L,
                     .br = c->dec_br, .nbr = c->n_dec_br, .causal = 1, .n = n, .len = len, .t = t};
        NMT_TRY(sublayer(st, &sa, &L->ln1));
        tf_sub ca = {.kind = SUB_CROSS, .dl = L, .key_len = io->src_len, .n = n, .len = len,
                     .group = group};
        NMT_TRY(sublayer(st, &ca, &L->ln2));
        tf_sub ff = {.kind = SUB_FFN, .fc1 = &L->fc1, .fc2 = &L->fc2, .n = n, .len = len};
        NMT_TRY(sublayer(st, &ff, &L->ln3));
    }
    if (c->pre_norm) NMT_TRY(layer_norm(st, st->x, NO_BUF, st->x, n * len, &st->dec_ln));
    return NMT_OK;
}

static nmt_status tf_step(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t group, uint32_t t) {
    tf_state *st = (tf_state *)state;
    const tf_cfg *c = &st->c;
    NMT_CHECK(rows >= 1 && rows <= st->dims.step_rows && group >= 1 && t < st->dims.tgt_cap,
              NMT_ERR_LIMIT_EXCEEDED);
    NMT_TRY(embed(st, io->step_tok, rows, 1, t, &st->tgt_emb));
    NMT_TRY(decoder_layers(st, io, rows, 1, group, 1, t));
    return matmul(st, rows, c->tgt_vocab, c->d, st->x, c->d, &st->out_w, 0.0f, io->logits, c->tgt_vocab,
                  NO_BUF, 0);
}

static nmt_status tf_reorder(void *state, const nmt_io_bufs *io, uint32_t rows, uint32_t t) {
    tf_state *st = (tf_state *)state;
    const uint32_t d = st->c.d, T = st->dims.tgt_cap, live = (t + 1) * 2 * d;
    NMT_CHECK(rows <= st->dims.step_rows && t < T, NMT_ERR_LIMIT_EXCEEDED);
    /* All caches and the spare have one shape: gather each layer's cache into
     * the spare, which becomes that layer's cache, and the old cache becomes
     * the spare for the next layer — one copy per layer, no copy back. */
    for (uint32_t l = 0; l < st->c.dec_layers; l++) {
        tf_dec_layer *L = &st->dec[l];
        NMT_TRY(nmt_op_gather_rows(st->ops, L->cache, (uint64_t)T * 2 * d, st->cache_tmp,
                                   (uint64_t)T * 2 * d, io->reorder, rows, live));
        nmt_buf old = L->cache;
        L->cache = st->cache_tmp;
        st->cache_tmp = old;
    }
    return NMT_OK;
}

static nmt_status tf_decode_full(void *state, const nmt_io_bufs *io, uint32_t n, uint32_t tlen) {
    tf_state *st = (tf_state *)state;
    NMT_CHECK(n >= 1 && n <= st->dims.max_batch && tlen >= 1 && tlen <= st->dims.tgt_cap,
              NMT_ERR_LIMIT_EXCEEDED);
    st->full_len = tlen;
    NMT_TRY(embed(st, io->tgt_tok, n * tlen, tlen, 0, &st->tgt_emb));
    return decoder_layers(st, io, n, tlen, 1, 0, 0);
}

static nmt_status tf_project(void *state, const nmt_io_bufs *io, uint32_t first, uint32_t rows) {
    tf_state *st = (tf_state *)state;
    const tf_cfg *c = &st->c;
    NMT_CHECK(rows <= st->dims.step_rows, NMT_ERR_LIMIT_EXCEEDED);
    return matmul(st, rows, c->tgt_vocab, c->d, nmt_buf_at(st->x, (size_t)first * c->d), c->d, &st->out_w,
                  0.0f, io->logits, c->tgt_vocab, NO_BUF, 0);
}

static void tf_release(void *state) { (void)state; /* all buffers are session-owned */ }

const nmt_family nmt_family_transformer = {
    .arch = "transformer",
    .parse = tf_parse,
    .plan = tf_plan,
    .encode = tf_encode,
    .step = tf_step,
    .reorder = tf_reorder,
    .decode_full = tf_decode_full,
    .project = tf_project,
    .release = tf_release,
};
