/* SPDX-License-Identifier: MIT */
/* model_arch.c — a new model of a family extending the Transformer, or of
 * a family with a configuration of its own (model_arch.h). */
#include "model_arch.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "family.h"
#include "family_writer.h"
#include "format.h"
#include "transformer_cfg.h"

static nmt_status fail(char *err, size_t cap, nmt_status s, const char *msg, const char *key) {
    if (err && cap) snprintf(err, cap, "%s%s%s", msg, key ? " " : "", key ? key : "");
    return s;
}

/* A family with a configuration of its own (BA-NMT): its table's keys from
 * keys / values, the vocabularies and special ids of the Transformer image,
 * required widths without a value = its d_model, the others their
 * defaults; the Transformer's blobs (tokenizers) copied; every tensor drawn
 * by the family's catalogue at weight scale 1 (its own init: BA-NMT's
 * U(-0.1, 0.1), the paper's). */
static nmt_status new_of_family(const nmt_family *fam, const nmt_file *f, const nmt_tf_cfg *t,
                                const char *const *keys, const char *const *values, size_t n, uint64_t seed,
                                void **out, size_t *out_size, char *err, size_t err_cap) {
    _Alignas(max_align_t) unsigned char cfg[NMT_FAMILY_CFG_BYTES];
    memset(cfg, 0, sizeof cfg);
    uint64_t present = 0;
    for (uint32_t i = 0; i < fam->n_hparams && i < 64; i++) {
        const nmt_hparam *hp = &fam->hparams[i];
        const char *v = NULL;
        char num[24];
        for (size_t k = 0; k < n; k++)
            if (values[k] && !strcmp(keys[k], hp->key)) v = values[k];
        static const char *const ids[6] = {"src_vocab", "tgt_vocab", "bos_id", "eos_id", "pad_id", "unk_id"};
        const uint32_t idv[6] = {t->src_vocab, t->tgt_vocab, t->bos, t->eos, t->pad, t->unk};
        for (int k = 0; k < 6 && v == NULL; k++)
            if (!strcmp(hp->key, ids[k])) v = (snprintf(num, sizeof num, "%u", idv[k]), num);
        if (v == NULL && hp->required && hp->type == NMT_HP_U32) v = (snprintf(num, sizeof num, "%u", t->d), num);
        nmt_status s = v ? nmt_hparam_set_text(hp, cfg, v) : nmt_hparam_set_default(hp, cfg);
        if (s != NMT_OK) return fail(err, err_cap, s, "invalid value for", hp->flag);
        if (v) present |= 1ull << i;
    }
    char why[NMT_FAMILY_WHY_BYTES] = "";
    nmt_status s = fam->finish(cfg, present, why, sizeof why);
    if (s != NMT_OK) return fail(err, err_cap, s, "the options do not form a valid configuration:", why);
    nmtw_writer *w = nmtw_create();
    NMT_CHECK(w != NULL, NMT_ERR_IO);
    s = nmtw_add_hparams(w, fam, cfg);
    for (uint32_t i = 0; i < f->h.n_tensors && s == NMT_OK; i++) {
        nmt_tensor_view v;
        s = nmt_file_tensor_at(f, i, &v);
        if (s == NMT_OK && v.dtype == NMT_DTYPE_U8)
            s = nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, v.scales);
    }
    if (s == NMT_OK) s = nmtw_add_random_tensors(w, fam, cfg, seed, 1.0f);
    if (s == NMT_OK) s = nmtw_write_memory(w, out, out_size);
    nmtw_destroy(w);
    return s;
}

nmt_status train_model_as_arch(const void *tf, size_t tf_size, const char *arch, const char *const *keys,
                               const char *const *values, size_t n, uint64_t seed, float weight_scale, void **out,
                               size_t *out_size, char *err, size_t err_cap) {
    *out = NULL;
    const nmt_family *fam = nmt_family_find(arch);
    if (fam == NULL) return fail(err, err_cap, NMT_ERR_MODEL_ARCH, "unknown architecture", arch);
    nmt_file f;
    NMT_TRY(nmt_file_open(&f, tf, tf_size, 1));
    nmt_tf_cfg c;
    NMT_TRY(nmt_family_parse(&nmt_family_transformer, &f, &c));
    /* the families whose configuration struct and catalogue are the Transformer's; others start anew */
    if (fam->cfg_size != sizeof(nmt_tf_cfg) || fam->catalogue != nmt_family_transformer.catalogue)
        return new_of_family(fam, &f, &c, keys, values, n, seed ^ 0x62616e6d74ull, out, out_size, err, err_cap);
    /* the family's keys past the Transformer's: the given values, else defaults */
    for (uint32_t i = NMT_TF_N_HPARAMS; i < fam->n_hparams; i++) {
        const nmt_hparam *hp = &fam->hparams[i];
        const char *v = NULL;
        for (size_t k = 0; k < n; k++)
            if (values[k] && !strcmp(keys[k], hp->key)) v = values[k];
        nmt_status s = v ? nmt_hparam_set_text(hp, &c, v) : nmt_hparam_set_default(hp, &c);
        if (s != NMT_OK) return fail(err, err_cap, s, "invalid value for", hp->flag);
    }
    char why[NMT_FAMILY_WHY_BYTES] = "";
    nmt_status s = fam->finish(&c, ~0ull, why, sizeof why);
    if (s != NMT_OK) {
        char msg[96];
        snprintf(msg, sizeof msg, "the options do not form a valid configuration of %s:", arch);
        return fail(err, err_cap, s, msg, why);
    }
    nmtw_writer *w = nmtw_create();
    NMT_CHECK(w != NULL, NMT_ERR_IO);
    s = nmtw_add_hparams(w, fam, &c);
    for (uint32_t i = 0; i < f.h.n_tensors && s == NMT_OK; i++) { /* the blobs: embedded tokenizers */
        nmt_tensor_view v;
        s = nmt_file_tensor_at(&f, i, &v);
        if (s == NMT_OK && v.dtype == NMT_DTYPE_U8)
            s = nmtw_add_tensor(w, v.name, v.dtype, v.ndim, v.shape, v.data, v.scales);
    }
    if (s == NMT_OK) s = nmtw_add_random_missing(w, fam, &c, &f, seed ^ 0x6d67736172636800ull, weight_scale);
    if (s == NMT_OK) s = nmtw_write_memory(w, out, out_size);
    nmtw_destroy(w);
    return s;
}
