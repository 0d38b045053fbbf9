/* random_model.c — random-weight Transformer/HySAN models (random_model.h). */
#include "random_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BRANCHES 8u

void nmt_random_transformer_defaults(nmt_random_transformer_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->d_model = 32;
    cfg->n_heads = 4;
    cfg->d_ff = 64;
    cfg->enc_layers = 2;
    cfg->dec_layers = 2;
    cfg->src_vocab = 64;
    cfg->tgt_vocab = 64;
    cfg->norm = "post";
    cfg->enc_branches = "global";
    cfg->dec_branches = "global";
    cfg->fusion = "sum";
    cfg->gate_reduction = 4;
    cfg->shared_embeddings = 0;
    cfg->tied_output = 0;
    cfg->pad_id = 0;
    cfg->bos_id = 1;
    cfg->eos_id = 2;
    cfg->unk_id = 3;
    cfg->ln_eps = 1e-5;
    cfg->embed_scale = 0.0;
    cfg->seed = 1;
    cfg->weight_scale = 1.0f;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

uint32_t nmt_random_count_branches(const char *s) {
    uint32_t n = 0;
    if (s == NULL) return 0;
    while (*s) {
        while (*s && is_space(*s)) s++;
        if (!*s) break;
        n++;
        while (*s && !is_space(*s)) s++;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Reproducible uniform numbers: splitmix64, 24 bits per float              */
/* ------------------------------------------------------------------------ */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1): exact in binary32, so identical everywhere. */
static float rng_sym(rng *r) { return (float)(rng_next(r) >> 40) * 0x1p-23f - 1.0f; }

/* ------------------------------------------------------------------------ */
/* Tensor emission                                                          */
/* ------------------------------------------------------------------------ */

typedef struct gen {
    nmtw_writer *w;
    rng r;
    float scale;
} gen;

typedef enum fill_kind { FILL_UNIFORM, FILL_LN_WEIGHT, FILL_LN_BIAS } fill_kind;

static nmt_status add_tensor(gen *g, const char *name, uint32_t ndim, uint32_t d0, uint32_t d1, fill_kind kind,
                             uint32_t fan_in) {
    uint32_t shape[2] = {d0, d1};
    uint64_t n = ndim == 1 ? (uint64_t)d0 : (uint64_t)d0 * d1;
    if (n == 0 || n > SIZE_MAX / sizeof(float)) return NMT_ERR_INVALID_ARGUMENT;
    float *buf = (float *)malloc((size_t)n * sizeof(float));
    if (buf == NULL) return NMT_ERR_IO;
    float bound = g->scale / sqrtf((float)fan_in);
    for (uint64_t i = 0; i < n; i++) {
        float u = rng_sym(&g->r);
        switch (kind) {
        case FILL_UNIFORM: buf[i] = u * bound; break;
        case FILL_LN_WEIGHT: buf[i] = 1.0f + 0.05f * u; break;
        case FILL_LN_BIAS: buf[i] = 0.05f * u; break;
        }
    }
    nmt_status s = nmtw_add_f32(g->w, name, ndim, shape, buf);
    free(buf);
    return s;
}

/* `<prefix>.weight` [out, in] and `<prefix>.bias` [out], fan_in = in. */
static nmt_status add_linear(gen *g, const char *prefix, uint32_t out, uint32_t in) {
    char name[128]; /* > prefix buffers (96) + suffix */
    snprintf(name, sizeof name, "%s.weight", prefix);
    nmt_status s = add_tensor(g, name, 2, out, in, FILL_UNIFORM, in);
    if (s != NMT_OK) return s;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return add_tensor(g, name, 1, out, 0, FILL_UNIFORM, in);
}

static nmt_status add_layer_norm(gen *g, const char *prefix, uint32_t d) {
    char name[128]; /* > prefix buffers (96) + suffix */
    snprintf(name, sizeof name, "%s.weight", prefix);
    nmt_status s = add_tensor(g, name, 1, d, 0, FILL_LN_WEIGHT, 1);
    if (s != NMT_OK) return s;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return add_tensor(g, name, 1, d, 0, FILL_LN_BIAS, 1);
}

#define TRY(expr)                                                              \
    do {                                                                       \
        nmt_status try_s_ = (expr);                                            \
        if (try_s_ != NMT_OK) return try_s_;                                   \
    } while (0)

typedef struct shapes {
    uint32_t d, d_ff, n_br, d_gate;
    int concat, gated;
} shapes;

/* `<stack>.<l>.self_attn.*` for n_br branches. */
static nmt_status add_self_attn(gen *g, const char *stack, uint32_t l, const shapes *S) {
    char p[96];
    static const char *const qkv[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s.%u.self_attn.%s", stack, l, qkv[i]);
        TRY(add_linear(g, p, S->d, S->d));
    }
    snprintf(p, sizeof p, "%s.%u.self_attn.o", stack, l);
    TRY(add_linear(g, p, S->d, S->concat ? S->n_br * S->d : S->d));
    if (S->gated) {
        for (uint32_t b = 0; b < S->n_br; b++) {
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc1", stack, l, b);
            TRY(add_linear(g, p, S->d_gate, S->d));
            snprintf(p, sizeof p, "%s.%u.self_attn.gate.%u.fc2", stack, l, b);
            TRY(add_linear(g, p, S->d, S->d_gate));
        }
    }
    return NMT_OK;
}

static nmt_status add_ffn(gen *g, const char *stack, uint32_t l, const shapes *S) {
    char p[96];
    snprintf(p, sizeof p, "%s.%u.ffn.fc1", stack, l);
    TRY(add_linear(g, p, S->d_ff, S->d));
    snprintf(p, sizeof p, "%s.%u.ffn.fc2", stack, l);
    return add_linear(g, p, S->d, S->d_ff);
}

static nmt_status add_ln(gen *g, const char *stack, uint32_t l, const char *which, uint32_t d) {
    char p[96];
    snprintf(p, sizeof p, "%s.%u.%s", stack, l, which);
    return add_layer_norm(g, p, d);
}

static nmt_status set_metadata(nmtw_writer *w, const nmt_random_transformer_config *c) {
    TRY(nmtw_set_str(w, "arch", "transformer"));
    TRY(nmtw_set_i64(w, "d_model", c->d_model));
    TRY(nmtw_set_i64(w, "n_heads", c->n_heads));
    TRY(nmtw_set_i64(w, "d_ff", c->d_ff));
    TRY(nmtw_set_i64(w, "enc_layers", c->enc_layers));
    TRY(nmtw_set_i64(w, "dec_layers", c->dec_layers));
    TRY(nmtw_set_i64(w, "src_vocab", c->src_vocab));
    TRY(nmtw_set_i64(w, "tgt_vocab", c->tgt_vocab));
    TRY(nmtw_set_str(w, "norm", c->norm));
    TRY(nmtw_set_f64(w, "ln_eps", c->ln_eps));
    if (c->embed_scale > 0.0) TRY(nmtw_set_f64(w, "embed_scale", c->embed_scale));
    TRY(nmtw_set_i64(w, "shared_embeddings", c->shared_embeddings ? 1 : 0));
    TRY(nmtw_set_i64(w, "tied_output", c->tied_output ? 1 : 0));
    TRY(nmtw_set_str(w, "enc_branches", c->enc_branches));
    TRY(nmtw_set_str(w, "dec_branches", c->dec_branches));
    TRY(nmtw_set_str(w, "fusion", c->fusion));
    TRY(nmtw_set_i64(w, "gate_reduction", c->gate_reduction));
    TRY(nmtw_set_i64(w, "bos_id", c->bos_id));
    TRY(nmtw_set_i64(w, "eos_id", c->eos_id));
    TRY(nmtw_set_i64(w, "pad_id", c->pad_id));
    TRY(nmtw_set_i64(w, "unk_id", c->unk_id));
    return NMT_OK;
}

/* Shapes of one stack's self-attention, from its branch string. */
static nmt_status stack_shapes(const nmt_random_transformer_config *c, const char *branches, shapes *S) {
    S->d = c->d_model;
    S->d_ff = c->d_ff;
    S->n_br = nmt_random_count_branches(branches);
    if (S->n_br < 1 || S->n_br > MAX_BRANCHES) return NMT_ERR_INVALID_ARGUMENT;
    S->concat = strcmp(c->fusion, "concat") == 0;
    S->gated = strcmp(c->fusion, "gate") == 0 && S->n_br > 1;
    S->d_gate = 0;
    if (S->gated) {
        if (c->gate_reduction == 0 || c->d_model % c->gate_reduction != 0 ||
            c->d_model / c->gate_reduction == 0)
            return NMT_ERR_INVALID_ARGUMENT;
        S->d_gate = c->d_model / c->gate_reduction;
    }
    return NMT_OK;
}

nmt_status nmt_random_transformer_add(nmtw_writer *w, const nmt_random_transformer_config *c) {
    if (w == NULL || c == NULL || c->norm == NULL || c->fusion == NULL || c->enc_branches == NULL ||
        c->dec_branches == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    if (c->d_model == 0 || c->d_ff == 0 || c->n_heads == 0 || c->enc_layers == 0 || c->dec_layers == 0 ||
        c->src_vocab == 0 || c->tgt_vocab == 0)
        return NMT_ERR_INVALID_ARGUMENT;
    int pre = strcmp(c->norm, "pre") == 0;
    if (!pre && strcmp(c->norm, "post") != 0) return NMT_ERR_INVALID_ARGUMENT;
    if (strcmp(c->fusion, "sum") != 0 && strcmp(c->fusion, "concat") != 0 && strcmp(c->fusion, "gate") != 0)
        return NMT_ERR_INVALID_ARGUMENT;
    if (c->d_model > UINT32_MAX / MAX_BRANCHES) return NMT_ERR_INVALID_ARGUMENT;
    shapes enc, dec;
    TRY(stack_shapes(c, c->enc_branches, &enc));
    TRY(stack_shapes(c, c->dec_branches, &dec));

    TRY(set_metadata(w, c));

    gen g = {.w = w, .r = {c->seed}, .scale = c->weight_scale};
    uint32_t d = c->d_model;
    TRY(add_tensor(&g, "src_embed", 2, c->src_vocab, d, FILL_UNIFORM, d));
    if (!c->shared_embeddings) TRY(add_tensor(&g, "tgt_embed", 2, c->tgt_vocab, d, FILL_UNIFORM, d));
    if (!c->tied_output) TRY(add_tensor(&g, "out_proj", 2, c->tgt_vocab, d, FILL_UNIFORM, d));

    for (uint32_t l = 0; l < c->enc_layers; l++) {
        TRY(add_self_attn(&g, "enc", l, &enc));
        TRY(add_ln(&g, "enc", l, "ln1", d));
        TRY(add_ffn(&g, "enc", l, &enc));
        TRY(add_ln(&g, "enc", l, "ln2", d));
    }
    if (pre) TRY(add_layer_norm(&g, "enc.ln", d));

    static const char *const qkvo[4] = {"q", "k", "v", "o"};
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        char p[96];
        TRY(add_self_attn(&g, "dec", l, &dec));
        TRY(add_ln(&g, "dec", l, "ln1", d));
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "dec.%u.cross_attn.%s", l, qkvo[i]);
            TRY(add_linear(&g, p, d, d));
        }
        TRY(add_ln(&g, "dec", l, "ln2", d));
        TRY(add_ffn(&g, "dec", l, &dec));
        TRY(add_ln(&g, "dec", l, "ln3", d));
    }
    if (pre) TRY(add_layer_norm(&g, "dec.ln", d));
    if (c->src_sp_model != NULL) {
        if (c->src_sp_size == 0 || c->src_sp_size > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
        TRY(nmtw_add_blob(w, "tokenizer.src", c->src_sp_model, (uint32_t)c->src_sp_size));
    }
    if (c->tgt_sp_model != NULL) {
        if (c->src_sp_model == NULL || c->tgt_sp_size == 0 || c->tgt_sp_size > UINT32_MAX)
            return NMT_ERR_INVALID_ARGUMENT;
        TRY(nmtw_add_blob(w, "tokenizer.tgt", c->tgt_sp_model, (uint32_t)c->tgt_sp_size));
    }
    return NMT_OK;
}

static nmt_status build(const nmt_random_transformer_config *cfg, nmtw_writer **out) {
    nmtw_writer *w = nmtw_create();
    if (w == NULL) return NMT_ERR_IO;
    nmt_status s = nmt_random_transformer_add(w, cfg);
    if (s != NMT_OK) {
        nmtw_destroy(w);
        return s;
    }
    *out = w;
    return NMT_OK;
}

nmt_status nmt_random_transformer_write(const nmt_random_transformer_config *cfg, const char *path) {
    nmtw_writer *w;
    TRY(build(cfg, &w));
    nmt_status s = nmtw_write_file(w, path);
    nmtw_destroy(w);
    return s;
}

nmt_status nmt_random_transformer_image(const nmt_random_transformer_config *cfg, void **data, size_t *size) {
    nmtw_writer *w;
    TRY(build(cfg, &w));
    nmt_status s = nmtw_write_memory(w, data, size);
    nmtw_destroy(w);
    return s;
}
