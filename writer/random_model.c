/* SPDX-License-Identifier: MIT */
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
    const nmt_hparam *act = nmt_hparam_find(fam, "ffn_activation"), *pos = nmt_hparam_find(fam, "position_encoding");
    if (nmt_hparam_set_text(norm, t, c->norm) != NMT_OK || nmt_hparam_set_text(fusion, t, c->fusion) != NMT_OK ||
        nmt_hparam_set_text(act, t, c->ffn_activation ? c->ffn_activation : "relu") != NMT_OK ||
        nmt_hparam_set_text(pos, t, c->position_encoding ? c->position_encoding : "sinusoid") != NMT_OK)
        return NMT_ERR_INVALID_ARGUMENT;
    t->pos_offset = c->position_offset;
    t->out_bias = c->output_bias ? 1 : 0;
    t->src_eos = c->no_source_eos ? 0 : 1;
    t->gate_shared = c->gate_shared ? 1 : 0;
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

/* The embedded SentencePiece models: tokenizer.src (shared when tgt is
 * NULL) and tokenizer.tgt (docs/FORMAT.md). */
static nmt_status add_tokenizers(nmtw_writer *w, const void *src, size_t src_n, const void *tgt, size_t tgt_n) {
    if (src != NULL) {
        if (src_n == 0 || src_n > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
        TRY(nmtw_add_blob(w, "tokenizer.src", src, (uint32_t)src_n));
    }
    if (tgt != NULL) {
        if (src == NULL || tgt_n == 0 || tgt_n > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
        TRY(nmtw_add_blob(w, "tokenizer.tgt", tgt, (uint32_t)tgt_n));
    }
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
    return add_tokenizers(w, c->src_sp_model, c->src_sp_size, c->tgt_sp_model, c->tgt_sp_size);
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

/* ------------------------------------------------------------------------ */
/* Any family, from its hyper-parameter table                               */
/* ------------------------------------------------------------------------ */

/* The value fam->random_args gives `flag` ("flag=value" words) into
 * buf[cap]; 0 when it gives none. */
static int random_arg(const nmt_family *fam, const char *flag, char *buf, size_t cap) {
    const char *p = fam->random_args;
    const size_t n = strlen(flag);
    while (p != NULL && *p) {
        while (*p == ' ') p++;
        const size_t len = strcspn(p, " ");
        if (len > n && strncmp(p, flag, n) == 0 && p[n] == '=') {
            snprintf(buf, cap, "%.*s", (int)(len - n - 1), p + n + 1);
            return 1;
        }
        p += len;
    }
    return 0;
}

/* Every refusal below writes its reason: the function's own text where it
 * has one, else this one ("WHAT: STATUS"), so no caller prints a buffer
 * nobody wrote (issue 55 item 7). */
static nmt_status refuse(nmt_status s, char *why, size_t why_cap, const char *what) {
    if (s != NMT_OK && why != NULL && why_cap > 0 && why[0] == '\0')
        nmt_why(why, why_cap, "%s: %s", what, nmt_status_str(s));
    return s;
}

#define TRY_WHY(expr, what)                                                    \
    do {                                                                       \
        nmt_status tw_s_ = (expr);                                             \
        if (tw_s_ != NMT_OK) return refuse(tw_s_, why, why_cap, what);         \
    } while (0)

nmt_status nmt_random_model_init(nmt_random_model *m, const char *arch, char *why, size_t why_cap) {
    if (why != NULL && why_cap > 0) why[0] = '\0';
    memset(m, 0, sizeof *m);
    m->seed = 1;
    m->weight_scale = 1.0f;
    m->fam = nmt_family_find(arch);
    if (m->fam == NULL) {
        char known[160];
        nmt_family_names(known, sizeof known);
        nmt_why(why, why_cap, "unknown --arch '%s' (known: %s)", arch ? arch : "", known);
        return NMT_ERR_MODEL_ARCH;
    }
    const nmt_family *fam = m->fam;
    if (fam->cfg_size > sizeof m->cfg || fam->n_hparams > 64)
        return refuse(NMT_ERR_INVALID_ARGUMENT, why, why_cap, "the family's table does not fit this writer");
    for (uint32_t i = 0; i < fam->n_hparams; i++) {
        if (nmt_hparam_set_default(&fam->hparams[i], m->cfg) != NMT_OK) {
            nmt_why(why, why_cap, "arch '%s': the default of --%s does not parse", fam->arch, fam->hparams[i].flag);
            return NMT_ERR_INVALID_ARGUMENT;
        }
    }
    for (uint32_t i = 0; i < fam->n_hparams; i++) {
        char v[128];
        if (random_arg(fam, fam->hparams[i].flag, v, sizeof v))
            TRY_WHY(nmt_random_model_set(m, fam->hparams[i].flag, v, why, why_cap), "a default of random");
    }
    return NMT_OK;
}

nmt_status nmt_random_model_set(nmt_random_model *m, const char *flag, const char *text, char *why,
                                size_t why_cap) {
    if (why != NULL && why_cap > 0) why[0] = '\0';
    if (m == NULL || m->fam == NULL || flag == NULL || text == NULL)
        return refuse(NMT_ERR_INVALID_ARGUMENT, why, why_cap, "no model, flag or value");
    const nmt_hparam *hp = nmt_hparam_find(m->fam, flag);
    if (hp == NULL) {
        nmt_why(why, why_cap, "arch '%s' has no hyper-parameter '%s'", m->fam->arch, flag);
        return NMT_ERR_MODEL_ARCH;
    }
    if (nmt_hparam_set_text(hp, m->cfg, text) != NMT_OK) {
        char range[160];
        nmt_hparam_range(hp, range, sizeof range);
        nmt_why(why, why_cap, "--%s expects %s, got '%s'", hp->flag, range, text);
        return NMT_ERR_INVALID_ARGUMENT;
    }
    m->present |= (uint64_t)1 << (uint32_t)(hp - m->fam->hparams);
    return NMT_OK;
}

nmt_status nmt_random_model_build(const nmt_random_model *m, nmtw_writer *w, char *why, size_t why_cap) {
    if (why != NULL && why_cap > 0) why[0] = '\0';
    if (m == NULL || m->fam == NULL || w == NULL)
        return refuse(NMT_ERR_INVALID_ARGUMENT, why, why_cap, "no model or writer");
    const nmt_family *fam = m->fam;
    _Alignas(16) unsigned char cfg[NMT_FAMILY_CFG_BYTES];
    memcpy(cfg, m->cfg, sizeof cfg);
    for (uint32_t i = 0; i < fam->n_hparams; i++)
        if (fam->hparams[i].required && !(m->present >> i & 1)) {
            nmt_why(why, why_cap, "--%s is required for --arch %s", fam->hparams[i].flag, fam->arch);
            return NMT_ERR_MODEL_ARCH;
        }
    /* the loader's checks, in the loader's order: the family's finish ... */
    char fw[NMT_FAMILY_WHY_BYTES] = "";
    nmt_status s = fam->finish(cfg, m->present, fw, sizeof fw);
    if (s != NMT_OK) {
        nmt_why(why, why_cap, "%s", fw[0] ? fw : "the hyper-parameters do not fit together");
        return s;
    }
    TRY_WHY(nmtw_add_hparams(w, fam, cfg), "cannot add the hyper-parameters");
    TRY_WHY(nmtw_add_random_tensors(w, fam, cfg, m->seed, m->weight_scale),
            "cannot make the random tensors (too large for this machine or the format?)");
    TRY_WHY(add_tokenizers(w, m->src_sp_model, m->src_sp_size, m->tgt_sp_model, m->tgt_sp_size),
            "cannot embed the SentencePiece models");
    /* ... then the whole image as a session would open it */
    void *img = NULL;
    size_t size = 0;
    TRY_WHY(nmtw_write_memory(w, &img, &size), "cannot build the model image (too large?)");
    s = nmt_model_explain(img, size, why, why_cap);
    (void)refuse(s, why, why_cap, "the runtime refuses the model");
    if (s == NMT_OK) {
        nmt_session_params p;
        memset(&p, 0, sizeof p);
        p.model_data = img;
        p.model_size = size;
        size_t need = 0;
        s = nmt_session_arena_size(&p, &need, NULL);
        if (s == NMT_ERR_TOKENIZER_MODEL)
            nmt_why(why, why_cap, "an embedded SentencePiece model is malformed or has more pieces than the "
                                  "vocabulary it serves");
        else if (s != NMT_OK)
            nmt_why(why, why_cap, "the runtime cannot plan a session for this model: %s", nmt_status_str(s));
    }
    free(img);
    return s;
}

void nmt_random_model_help(FILE *out, const nmt_family *fam, uint32_t first) {
    for (uint32_t i = first; i < fam->n_hparams; i++) {
        const nmt_hparam *hp = &fam->hparams[i];
        char left[64], def[160], metavar[96];
        switch (hp->type) {
        case NMT_HP_U32: snprintf(metavar, sizeof metavar, " N"); break;
        case NMT_HP_F32: snprintf(metavar, sizeof metavar, " X"); break;
        case NMT_HP_FLAG: metavar[0] = '\0'; break;
        case NMT_HP_ENUM:
            snprintf(metavar, sizeof metavar, " ");
            for (int k = 0; hp->choices[k]; k++) {
                const size_t used = strlen(metavar);
                snprintf(metavar + used, sizeof metavar - used, "%s%s", k ? "|" : "", hp->choices[k]);
            }
            break;
        case NMT_HP_TEXT: snprintf(metavar, sizeof metavar, " TEXT"); break;
        }
        snprintf(left, sizeof left, "    --%s%s", hp->flag, metavar);
        char v[128];
        if (random_arg(fam, hp->flag, v, sizeof v)) snprintf(def, sizeof def, "; default %s", v);
        else if (hp->required) snprintf(def, sizeof def, "; required");
        else if (hp->computed_default) def[0] = '\0';
        else if (hp->type == NMT_HP_ENUM || hp->type == NMT_HP_TEXT)
            snprintf(def, sizeof def, "; default \"%s\"", hp->def_str ? hp->def_str : "");
        else snprintf(def, sizeof def, "; default %g", hp->def);
        fprintf(out, "  %-30s %s%s\n", left, hp->help, def);
    }
}
