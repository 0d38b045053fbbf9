/* SPDX-License-Identifier: MIT */
/* registry.c — the family registry and the generic readers of a family's
 * declaration (family.h): hyper-parameter tables, tensor checks. */
#include "family.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ------------------------------------------------------------------------ */
/* Registry: add a family here (docs/ADDING-A-FAMILY.md, step 1)            */
/* ------------------------------------------------------------------------ */

extern const nmt_family nmt_family_transformer;
extern const nmt_family nmt_family_mgsa;
extern const nmt_family nmt_family_phrase;
extern const nmt_family nmt_family_banmt;

static const nmt_family *const registry[] = {
    &nmt_family_transformer,
    &nmt_family_mgsa,
    &nmt_family_phrase,
    &nmt_family_banmt,
};

const nmt_family *nmt_family_find(const char *arch) {
    if (arch == NULL) return NULL;
    for (size_t i = 0; i < NMT_ARRAY_LEN(registry); i++)
        if (strcmp(arch, registry[i]->arch) == 0) return registry[i];
    return NULL;
}

const nmt_family *nmt_family_at(uint32_t i) { return i < NMT_ARRAY_LEN(registry) ? registry[i] : NULL; }

void nmt_family_names(char *buf, size_t cap) {
    nmt_why(buf, cap, "%s", "");
    for (size_t i = 0; i < NMT_ARRAY_LEN(registry); i++) {
        const size_t used = strlen(buf);
        nmt_why(buf + used, cap - used, "%s%s", i ? ", " : "", registry[i]->arch);
    }
}

nmt_status nmt_family_of(const nmt_file *f, const nmt_family **out) {
    char arch[32];
    NMT_TRY(nmt_file_get_str(f, "arch", arch, sizeof arch));
    *out = nmt_family_find(arch);
    if (*out == NULL) {
        char known[160];
        nmt_family_names(known, sizeof known);
        nmt_why(f->why, f->why_cap, "unsupported model architecture: arch '%s' (this runtime knows %s)", arch,
                known);
        return NMT_ERR_MODEL_ARCH;
    }
    return NMT_OK;
}

/* ------------------------------------------------------------------------ */
/* Hyper-parameters                                                         */
/* ------------------------------------------------------------------------ */

static int has_key(const nmt_file *f, const char *key) {
    nmt_meta_view m;
    for (uint32_t i = 0; nmt_file_meta_at(f, i, &m) == NMT_OK; i++)
        if (strcmp(m.key, key) == 0) return 1;
    return 0;
}

void nmt_hparam_range(const nmt_hparam *hp, char *buf, size_t cap) {
    switch (hp->type) {
    case NMT_HP_U32: nmt_why(buf, cap, "an integer in [%.0f, %.0f]", hp->lo, hp->hi); return;
    case NMT_HP_FLAG: nmt_why(buf, cap, "0 or 1"); return;
    case NMT_HP_F32:
        if (hp->lo < hp->hi) nmt_why(buf, cap, "a number in (%g, %g)", hp->lo, hp->hi);
        else nmt_why(buf, cap, "a number finite as f32 (|x| <= %g)", (double)FLT_MAX);
        return;
    case NMT_HP_ENUM:
        nmt_why(buf, cap, "one of");
        for (int i = 0; hp->choices[i]; i++) {
            const size_t used = strlen(buf);
            nmt_why(buf + used, cap - used, "%s %s", i ? "," : "", hp->choices[i]);
        }
        return;
    case NMT_HP_TEXT: nmt_why(buf, cap, "a non-empty string of at most %zu bytes", hp->text_cap - 1); return;
    }
}

/* NMT_ERR_MODEL_ARCH: "hyper-parameter KEY = VALUE: expected RANGE". */
static nmt_status bad_value(const nmt_file *f, const nmt_hparam *hp, const char *value_fmt, double v,
                            const char *sv) {
    char range[160], value[112];
    nmt_hparam_range(hp, range, sizeof range);
    if (sv != NULL) nmt_why(value, sizeof value, "'%s'", sv);
    else nmt_why(value, sizeof value, value_fmt, v);
    nmt_why(f->why, f->why_cap, "unsupported hyper-parameter: %s = %s, expected %s", hp->key, value, range);
    return NMT_ERR_MODEL_ARCH;
}

nmt_status nmt_hparam_set_default(const nmt_hparam *hp, void *cfgp) {
    NMT_CHECK(hp != NULL && cfgp != NULL, NMT_ERR_INVALID_ARGUMENT);
    if (hp->required || hp->computed_default) return NMT_OK;
    void *field = (unsigned char *)cfgp + hp->off;
    switch (hp->type) {
    case NMT_HP_U32: *(uint32_t *)field = (uint32_t)hp->def; return NMT_OK;
    case NMT_HP_FLAG: *(int *)field = (int)hp->def; return NMT_OK;
    case NMT_HP_F32: *(float *)field = (float)hp->def; return NMT_OK;
    case NMT_HP_ENUM:
    case NMT_HP_TEXT:
        if (hp->def_str != NULL && hp->def_str[0] != '\0') return nmt_hparam_set_text(hp, cfgp, hp->def_str);
        if (hp->type == NMT_HP_ENUM) *(int *)field = 0;
        else ((char *)field)[0] = '\0';
        return NMT_OK;
    }
    return NMT_ERR_INVALID_ARGUMENT;
}

/* An NMT_HP_F32 value as the float it is used as: finite after the
 * conversion (|v| <= FLT_MAX; 1e300 is a finite double but an infinite
 * float) and inside (lo, hi) after it (1e-300 in (0, 1) is 0 as a float).
 * 0 when it is not. */
static int hp_f32(const nmt_hparam *hp, double v, float *out) {
    if (!isfinite(v) || fabs(v) > (double)FLT_MAX) return 0;
    const float fv = (float)v;
    const double w = (double)fv;
    if (!isfinite(w) || (hp->lo < hp->hi && !(w > hp->lo && w < hp->hi))) return 0;
    *out = fv;
    return 1;
}

static nmt_status parse_one(const nmt_hparam *hp, const nmt_file *f, unsigned char *cfg, int present) {
    void *field = cfg + hp->off;
    if (!present && hp->required) {
        nmt_why(f->why, f->why_cap, "unsupported model: hyper-parameter '%s' is missing (required)", hp->key);
        return NMT_ERR_MODEL_ARCH;
    }
    if (!present) return nmt_hparam_set_default(hp, cfg) == NMT_OK ? NMT_OK : NMT_ERR_MODEL_ARCH;
    switch (hp->type) {
    case NMT_HP_U32:
    case NMT_HP_FLAG: {
        int64_t v;
        NMT_TRY(nmt_file_get_i64(f, hp->key, &v));
        const double lo = hp->type == NMT_HP_FLAG ? 0 : hp->lo, hi = hp->type == NMT_HP_FLAG ? 1 : hp->hi;
        if (!((double)v >= lo && (double)v <= hi)) return bad_value(f, hp, "%.0f", (double)v, NULL);
        if (hp->type == NMT_HP_FLAG) *(int *)field = (int)v;
        else *(uint32_t *)field = (uint32_t)v;
        return NMT_OK;
    }
    case NMT_HP_F32: {
        double v;
        NMT_TRY(nmt_file_get_f64(f, hp->key, &v));
        if (!hp_f32(hp, v, (float *)field)) return bad_value(f, hp, "%g", v, NULL);
        return NMT_OK;
    }
    case NMT_HP_ENUM: {
        char s[96]; /* longer values are MODEL_CORRUPT (truncation), as for every string key */
        NMT_TRY(nmt_file_get_str(f, hp->key, s, sizeof s));
        for (int i = 0; hp->choices[i]; i++)
            if (strcmp(s, hp->choices[i]) == 0) {
                *(int *)field = i;
                return NMT_OK;
            }
        return bad_value(f, hp, NULL, 0, s);
    }
    case NMT_HP_TEXT:
        NMT_TRY(nmt_file_get_str(f, hp->key, (char *)field, hp->text_cap));
        /* a family's own list present but empty is refused, as an absent
         * required key is (an empty mg_heads or ph_enc would load as a plain
         * Transformer) */
        if (((char *)field)[0] == '\0') return bad_value(f, hp, NULL, 0, "");
        return NMT_OK;
    }
    return NMT_ERR_MODEL_ARCH;
}

nmt_status nmt_family_parse(const nmt_family *fam, const nmt_file *f, void *cfg) {
    NMT_CHECK(fam != NULL && f != NULL && cfg != NULL && fam->n_hparams <= 64 && fam->cfg_size <= NMT_FAMILY_CFG_BYTES,
              NMT_ERR_INVALID_ARGUMENT);
    memset(cfg, 0, fam->cfg_size);
    uint64_t present = 0;
    for (uint32_t i = 0; i < fam->n_hparams; i++) {
        const int here = has_key(f, fam->hparams[i].key);
        if (here) present |= (uint64_t)1 << i;
        NMT_TRY(parse_one(&fam->hparams[i], f, (unsigned char *)cfg, here));
    }
    char why[NMT_FAMILY_WHY_BYTES];
    why[0] = '\0';
    nmt_status s = fam->finish(cfg, present, why, sizeof why);
    if (s != NMT_OK)
        nmt_why(f->why, f->why_cap, "unsupported hyper-parameters of arch '%s': %s", fam->arch,
                why[0] ? why : "an invalid combination");
    return s;
}

nmt_hp_value nmt_hparam_value(const nmt_hparam *hp, const void *cfgp) {
    const unsigned char *field = (const unsigned char *)cfgp + hp->off;
    nmt_hp_value v;
    memset(&v, 0, sizeof v);
    switch (hp->type) {
    case NMT_HP_U32: v.type = NMT_META_I64; v.i64 = *(const uint32_t *)(const void *)field; break;
    case NMT_HP_FLAG: v.type = NMT_META_I64; v.i64 = *(const int *)(const void *)field; break;
    case NMT_HP_F32: v.type = NMT_META_F64; v.f64 = (double)*(const float *)(const void *)field; break;
    case NMT_HP_ENUM: v.type = NMT_META_STR; v.str = hp->choices[*(const int *)(const void *)field]; break;
    case NMT_HP_TEXT: v.type = NMT_META_STR; v.str = (const char *)field; break;
    }
    return v;
}

nmt_status nmt_hparam_set_text(const nmt_hparam *hp, void *cfgp, const char *text) {
    NMT_CHECK(hp != NULL && cfgp != NULL && text != NULL && *text, NMT_ERR_INVALID_ARGUMENT);
    void *field = (unsigned char *)cfgp + hp->off;
    char *end;
    errno = 0;
    switch (hp->type) {
    case NMT_HP_U32:
    case NMT_HP_FLAG: {
        const long long v = strtoll(text, &end, 10);
        const double lo = hp->type == NMT_HP_FLAG ? 0 : hp->lo, hi = hp->type == NMT_HP_FLAG ? 1 : hp->hi;
        NMT_CHECK(errno == 0 && *end == '\0' && (double)v >= lo && (double)v <= hi, NMT_ERR_INVALID_ARGUMENT);
        if (hp->type == NMT_HP_FLAG) *(int *)field = (int)v;
        else *(uint32_t *)field = (uint32_t)v;
        return NMT_OK;
    }
    case NMT_HP_F32: {
        const double v = strtod(text, &end);
        NMT_CHECK(errno == 0 && *end == '\0' && hp_f32(hp, v, (float *)field), NMT_ERR_INVALID_ARGUMENT);
        return NMT_OK;
    }
    case NMT_HP_ENUM:
        for (int i = 0; hp->choices[i]; i++)
            if (strcmp(text, hp->choices[i]) == 0) {
                *(int *)field = i;
                return NMT_OK;
            }
        return NMT_ERR_INVALID_ARGUMENT;
    case NMT_HP_TEXT:
        NMT_CHECK(strlen(text) < hp->text_cap, NMT_ERR_INVALID_ARGUMENT);
        nmt_strlcpy((char *)field, text, hp->text_cap);
        return NMT_OK;
    }
    return NMT_ERR_INVALID_ARGUMENT;
}

const nmt_hparam *nmt_hparam_find(const nmt_family *fam, const char *name) {
    if (fam == NULL || name == NULL) return NULL;
    for (uint32_t i = 0; i < fam->n_hparams; i++)
        if (strcmp(fam->hparams[i].key, name) == 0 || strcmp(fam->hparams[i].flag, name) == 0)
            return &fam->hparams[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Tensor check                                                             */
/* ------------------------------------------------------------------------ */

typedef struct check_ctx {
    const nmt_file *f;
    int any_q8;
} check_ctx;

static nmt_status check_tensor(void *ctx, const nmt_tensor_decl *t) {
    check_ctx *cc = (check_ctx *)ctx;
    nmt_tensor_view v;
    NMT_TRY(nmt_file_expect(cc->f, t->name, t->ndim, t->shape, &v));
    if (v.dtype == NMT_DTYPE_I8 && t->ndim == 2) cc->any_q8 = 1;
    return NMT_OK;
}

nmt_status nmt_family_check_tensors(const nmt_family *fam, const void *cfg, const nmt_file *f, int *any_q8) {
    check_ctx cc = {f, 0};
    NMT_TRY(fam->catalogue(cfg, NULL, check_tensor, &cc));
    if (any_q8) *any_q8 = cc.any_q8;
    return NMT_OK;
}

nmt_status nmt_io_reorder_upload(nmt_ops *ops, const nmt_io_bufs *io, uint32_t rows) {
    if (io->h_reorder == NULL || rows == 0) return NMT_OK;
    if (ops == NULL || io->reorder.mem == NULL) return NMT_ERR_INVALID_ARGUMENT;
    /* queued: the beam changes h_reorder only after the step's blocking read */
    return nmt_device_write_queued(ops->dev, io->reorder.mem, io->reorder.off * sizeof(cl_int),
                                   (size_t)rows * sizeof(cl_int), io->h_reorder);
}
