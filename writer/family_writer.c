/* SPDX-License-Identifier: MIT */
/* family_writer.c — hyper-parameters and random tensors of any family
 * (family_writer.h). */
#include "family_writer.h"

#include <math.h>
#include <stdlib.h>

nmt_status nmtw_add_hparams(nmtw_writer *w, const nmt_family *fam, const void *cfg) {
    NMT_CHECK(w != NULL && fam != NULL && cfg != NULL, NMT_ERR_INVALID_ARGUMENT);
    NMT_TRY(nmtw_set_str(w, "arch", fam->arch));
    for (uint32_t i = 0; i < fam->n_hparams; i++) {
        const nmt_hp_value v = nmt_hparam_value(&fam->hparams[i], cfg);
        const char *key = fam->hparams[i].key;
        if (v.type == NMT_META_I64) NMT_TRY(nmtw_set_i64(w, key, v.i64));
        else if (v.type == NMT_META_F64) NMT_TRY(nmtw_set_f64(w, key, v.f64));
        else NMT_TRY(nmtw_set_str(w, key, v.str));
    }
    return NMT_OK;
}

/* Reproducible uniform numbers: splitmix64, 24 bits per float. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1): exact in binary32, so identical everywhere. */
static float rng_sym(uint64_t *s) { return (float)(rng_next(s) >> 40) * 0x1p-23f - 1.0f; }

typedef struct gen {
    nmtw_writer *w;
    uint64_t state;
    float scale;
    const nmt_file *have;  /* copy the tensors it holds with the declared shape (NULL: none) */
} gen;

static nmt_status add_random(void *ctx, const nmt_tensor_decl *t) {
    gen *g = (gen *)ctx;
    nmt_tensor_view have;
    if (g->have && nmt_file_find(g->have, t->name, &have) == NMT_OK && have.ndim == t->ndim &&
        have.shape[0] == t->shape[0] && (t->ndim == 1 || have.shape[1] == t->shape[1]))
        return nmtw_add_tensor(g->w, have.name, have.dtype, have.ndim, have.shape, have.data, have.scales);
    const uint64_t n = t->ndim == 1 ? (uint64_t)t->shape[0] : (uint64_t)t->shape[0] * t->shape[1];
    NMT_CHECK(n > 0 && n <= SIZE_MAX / sizeof(float), NMT_ERR_INVALID_ARGUMENT);
    NMT_CHECK(t->init != NMT_INIT_UNIFORM || t->fan_in > 0, NMT_ERR_INVALID_ARGUMENT);
    float *buf = (float *)malloc((size_t)n * sizeof(float));
    NMT_CHECK(buf != NULL, NMT_ERR_IO);
    const float bound = t->init == NMT_INIT_UNIFORM ? g->scale / sqrtf((float)t->fan_in) : 0.0f;
    for (uint64_t i = 0; i < n; i++) {
        const float u = rng_sym(&g->state);
        switch (t->init) {
        case NMT_INIT_UNIFORM: buf[i] = u * bound; break;
        case NMT_INIT_LN_GAIN: buf[i] = 1.0f + 0.05f * u; break;
        case NMT_INIT_LN_BIAS: buf[i] = 0.05f * u; break;
        }
    }
    nmt_status s = nmtw_add_f32(g->w, t->name, t->ndim, t->shape, buf);
    free(buf);
    return s;
}

nmt_status nmtw_add_random_tensors(nmtw_writer *w, const nmt_family *fam, const void *cfg, uint64_t seed,
                                   float weight_scale) {
    NMT_CHECK(w != NULL && fam != NULL && cfg != NULL, NMT_ERR_INVALID_ARGUMENT);
    gen g = {w, seed, weight_scale, NULL};
    return fam->catalogue(cfg, NULL, add_random, &g);
}

nmt_status nmtw_add_random_missing(nmtw_writer *w, const nmt_family *fam, const void *cfg, const nmt_file *have,
                                   uint64_t seed, float weight_scale) {
    NMT_CHECK(w != NULL && fam != NULL && cfg != NULL && have != NULL, NMT_ERR_INVALID_ARGUMENT);
    gen g = {w, seed, weight_scale, have};
    return fam->catalogue(cfg, NULL, add_random, &g);
}
