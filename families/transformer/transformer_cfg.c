/* transformer_cfg.c — parsing the Transformer / HySAN hyper-parameters
 * (transformer_cfg.h). */
#include "transformer_cfg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* Parse "global fw bw local:3" into a branch list. */
static nmt_status parse_branches(const char *str, int decoder, nmt_branch *out, uint32_t *n) {
    *n = 0;
    const char *p = str;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ' && *e != ',' && *e != '\t') e++;
        size_t len = (size_t)(e - p);
        NMT_CHECK(*n < NMT_MAX_BRANCHES, NMT_ERR_MODEL_ARCH);
        nmt_branch b = {NMT_BRANCH_GLOBAL, 0};
        if (len == 6 && strncmp(p, "global", 6) == 0) {
            b.kind = NMT_BRANCH_GLOBAL;
        } else if (len == 2 && strncmp(p, "fw", 2) == 0) {
            b.kind = NMT_BRANCH_FW;
        } else if (len == 2 && strncmp(p, "bw", 2) == 0) {
            NMT_CHECK(!decoder, NMT_ERR_MODEL_ARCH); /* would look at the future */
            b.kind = NMT_BRANCH_BW;
        } else if (len > 6 && strncmp(p, "local:", 6) == 0) {
            uint32_t k = 0;
            for (const char *q = p + 6; q < e; q++) {
                NMT_CHECK(*q >= '0' && *q <= '9' && k < 100000u, NMT_ERR_MODEL_ARCH);
                k = k * 10u + (uint32_t)(*q - '0');
            }
            b.kind = NMT_BRANCH_LOCAL;
            b.k = k;
        } else {
            return NMT_ERR_MODEL_ARCH;
        }
        out[(*n)++] = b;
        p = e;
    }
    NMT_CHECK(*n >= 1, NMT_ERR_MODEL_ARCH);
    return NMT_OK;
}

static nmt_status get_dim(const nmt_file *f, const char *key, uint32_t lo, uint32_t *out) {
    int64_t v;
    NMT_TRY(nmt_file_get_i64(f, key, &v));
    NMT_CHECK(v >= (int64_t)lo && v <= (int64_t)NMT_TF_MAX_DIM * 16, NMT_ERR_MODEL_ARCH);
    *out = (uint32_t)v;
    return NMT_OK;
}

static nmt_status get_flag(const nmt_file *f, const char *key, int *out) {
    int64_t v;
    NMT_TRY(nmt_file_get_i64_or(f, key, 0, &v));
    NMT_CHECK(v == 0 || v == 1, NMT_ERR_MODEL_ARCH);
    *out = (int)v;
    return NMT_OK;
}

static nmt_status get_id(const nmt_file *f, const char *key, int64_t def, uint32_t vocab,
                         uint32_t *out) {
    int64_t v;
    NMT_TRY(nmt_file_get_i64_or(f, key, def, &v));
    NMT_CHECK(v >= 0 && v < (int64_t)vocab, NMT_ERR_MODEL_ARCH);
    *out = (uint32_t)v;
    return NMT_OK;
}

void nmt_tf_branches_str(const nmt_branch *br, uint32_t n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && used < cap; i++) {
        static const char *const names[] = {"global", "fw", "bw", "local"};
        int w = br[i].kind == NMT_BRANCH_LOCAL
                    ? snprintf(buf + used, cap - used, "%slocal:%u", i ? " " : "", br[i].k)
                    : snprintf(buf + used, cap - used, "%s%s", i ? " " : "", names[br[i].kind]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

nmt_status nmt_tf_cfg_parse(const nmt_file *f, nmt_tf_cfg *c) {
    memset(c, 0, sizeof *c);
    NMT_TRY(get_dim(f, "d_model", 2, &c->d));
    NMT_TRY(get_dim(f, "n_heads", 1, &c->heads));
    NMT_TRY(get_dim(f, "d_ff", 1, &c->ff));
    NMT_TRY(get_dim(f, "enc_layers", 1, &c->enc_layers));
    NMT_TRY(get_dim(f, "dec_layers", 1, &c->dec_layers));
    NMT_TRY(get_dim(f, "src_vocab", 1, &c->src_vocab));
    NMT_TRY(get_dim(f, "tgt_vocab", 1, &c->tgt_vocab));
    NMT_CHECK(c->d <= NMT_TF_MAX_DIM && c->ff <= NMT_TF_MAX_DIM * 4 && c->d % 2 == 0 &&
                  c->d % c->heads == 0 && c->enc_layers <= NMT_TF_MAX_LAYERS &&
                  c->dec_layers <= NMT_TF_MAX_LAYERS,
              NMT_ERR_MODEL_ARCH);
    c->dh = c->d / c->heads;

    char s[96];
    NMT_TRY(nmt_file_get_str_or(f, "norm", "post", s, sizeof s));
    NMT_CHECK(strcmp(s, "pre") == 0 || strcmp(s, "post") == 0, NMT_ERR_MODEL_ARCH);
    c->pre_norm = s[1] == 'r';
    double eps, scale;
    NMT_TRY(nmt_file_get_f64_or(f, "ln_eps", 1e-5, &eps));
    NMT_TRY(nmt_file_get_f64_or(f, "embed_scale", sqrt((double)c->d), &scale));
    NMT_CHECK(eps > 0 && eps < 1 && isfinite(scale), NMT_ERR_MODEL_ARCH);
    c->eps = (float)eps;
    c->emb_scale = (float)scale;
    NMT_TRY(get_flag(f, "shared_embeddings", &c->shared_emb));
    NMT_TRY(get_flag(f, "tied_output", &c->tied_out));
    NMT_CHECK(!c->shared_emb || c->src_vocab == c->tgt_vocab, NMT_ERR_MODEL_ARCH);

    NMT_TRY(nmt_file_get_str_or(f, "enc_branches", "global", s, sizeof s));
    NMT_TRY(parse_branches(s, 0, c->enc_br, &c->n_enc_br));
    NMT_TRY(nmt_file_get_str_or(f, "dec_branches", "global", s, sizeof s));
    NMT_TRY(parse_branches(s, 1, c->dec_br, &c->n_dec_br));
    NMT_TRY(nmt_file_get_str_or(f, "fusion", "sum", s, sizeof s));
    if (strcmp(s, "sum") == 0) c->fusion = NMT_TF_FUSE_SUM;
    else if (strcmp(s, "concat") == 0) c->fusion = NMT_TF_FUSE_CONCAT;
    else if (strcmp(s, "gate") == 0) c->fusion = NMT_TF_FUSE_GATE;
    else return NMT_ERR_MODEL_ARCH;
    int64_t r;
    NMT_TRY(nmt_file_get_i64_or(f, "gate_reduction", 4, &r));
    NMT_CHECK(r >= 1 && r <= (int64_t)c->d && c->d % (uint32_t)r == 0, NMT_ERR_MODEL_ARCH);
    c->gate_r = (uint32_t)r;

    uint32_t vmin = NMT_MIN(c->src_vocab, c->tgt_vocab);
    NMT_TRY(get_id(f, "bos_id", 0, c->tgt_vocab, &c->bos));
    NMT_TRY(get_id(f, "eos_id", c->tgt_vocab > 1 ? 1 : 0, vmin, &c->eos));
    NMT_TRY(get_id(f, "pad_id", 0, vmin, &c->pad));
    NMT_TRY(get_id(f, "unk_id", 0, vmin, &c->unk));
    return NMT_OK;
}

void nmt_tf_cfg_info(const nmt_tf_cfg *c, nmt_model_info *info) {
    nmt_strlcpy(info->arch, "transformer", sizeof info->arch);
    info->d_model = c->d;
    info->n_heads = c->heads;
    info->d_ff = c->ff;
    info->enc_layers = c->enc_layers;
    info->dec_layers = c->dec_layers;
    info->src_vocab = c->src_vocab;
    info->tgt_vocab = c->tgt_vocab;
    nmt_strlcpy(info->norm, c->pre_norm ? "pre" : "post", sizeof info->norm);
    nmt_tf_branches_str(c->enc_br, c->n_enc_br, info->enc_branches, sizeof info->enc_branches);
    nmt_tf_branches_str(c->dec_br, c->n_dec_br, info->dec_branches, sizeof info->dec_branches);
    static const char *const fus[] = {"sum", "concat", "gate"};
    nmt_strlcpy(info->fusion, fus[c->fusion], sizeof info->fusion);
    info->gate_reduction = c->gate_r;
    info->shared_embeddings = c->shared_emb;
    info->tied_output = c->tied_out;
    info->bos_id = c->bos;
    info->eos_id = c->eos;
    info->pad_id = c->pad;
    info->unk_id = c->unk;
}
