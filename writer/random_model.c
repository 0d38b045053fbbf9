/* random_model.c — random-weight Transformer/HySAN models (random_model.h). */
#include "random_model.h"

#include "family_writer.h"
#include "transformer_cfg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BRANCHES 8u

#define TRY(expr)                                                              \
    do {                                                                       \
        nmt_status try_s_ = (expr);                                            \
        if (try_s_ != NMT_OK) return try_s_;                                   \
    } while (0)

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

/* The family's configuration for these shapes, unvalidated: the metadata
 * is written as given (also what the runtime would reject), the tensors
 * from the family's catalogue. */
static nmt_status to_cfg(const nmt_random_transformer_config *c, nmt_tf_cfg *t) {
    memset(t, 0, sizeof *t);
    if (c->d_model == 0 || c->d_ff == 0 || c->n_heads == 0 || c->enc_layers == 0 || c->dec_layers == 0 ||
        c->src_vocab == 0 || c->tgt_vocab == 0 || c->d_model > UINT32_MAX / MAX_BRANCHES)
        return NMT_ERR_INVALID_ARGUMENT;
    const nmt_family *fam = &nmt_family_transformer;
    const nmt_hparam *norm = nmt_hparam_find(fam, "norm"), *fusion = nmt_hparam_find(fam, "fusion");
    if (nmt_hparam_set_text(norm, t, c->norm) != NMT_OK || nmt_hparam_set_text(fusion, t, c->fusion) != NMT_OK)
        return NMT_ERR_INVALID_ARGUMENT;
    if (strlen(c->enc_branches) >= sizeof t->enc_br_text || strlen(c->dec_branches) >= sizeof t->dec_br_text)
        return NMT_ERR_INVALID_ARGUMENT;
    strcpy(t->enc_br_text, c->enc_branches);
    strcpy(t->dec_br_text, c->dec_branches);
    t->n_enc_br = nmt_random_count_branches(c->enc_branches);
    t->n_dec_br = nmt_random_count_branches(c->dec_branches);
    if (t->n_enc_br < 1 || t->n_enc_br > MAX_BRANCHES || t->n_dec_br < 1 || t->n_dec_br > MAX_BRANCHES)
        return NMT_ERR_INVALID_ARGUMENT;
    t->gate_r = c->gate_reduction;
    if (t->fusion == NMT_TF_FUSE_GATE && (t->n_enc_br > 1 || t->n_dec_br > 1) &&
        (c->gate_reduction == 0 || c->d_model % c->gate_reduction != 0))
        return NMT_ERR_INVALID_ARGUMENT;
    t->d = c->d_model;
    t->heads = c->n_heads;
    t->ff = c->d_ff;
    t->enc_layers = c->enc_layers;
    t->dec_layers = c->dec_layers;
    t->src_vocab = c->src_vocab;
    t->tgt_vocab = c->tgt_vocab;
    t->eps = (float)c->ln_eps;
    t->emb_scale = c->embed_scale > 0.0 ? (float)c->embed_scale : sqrtf((float)c->d_model);
    t->shared_emb = c->shared_embeddings ? 1 : 0;
    t->tied_out = c->tied_output ? 1 : 0;
    t->bos = c->bos_id;
    t->eos = c->eos_id;
    t->pad = c->pad_id;
    t->unk = c->unk_id;
    return NMT_OK;
}

nmt_status nmt_random_transformer_add(nmtw_writer *w, const nmt_random_transformer_config *c) {
    if (w == NULL || c == NULL || c->norm == NULL || c->fusion == NULL || c->enc_branches == NULL ||
        c->dec_branches == NULL)
        return NMT_ERR_INVALID_ARGUMENT;
    nmt_tf_cfg t;
    TRY(to_cfg(c, &t));
    TRY(nmtw_add_hparams(w, &nmt_family_transformer, &t));
    TRY(nmtw_add_random_tensors(w, &nmt_family_transformer, &t, c->seed, c->weight_scale));
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
