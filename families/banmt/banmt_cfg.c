/* SPDX-License-Identifier: MIT */
/* banmt_cfg.c — the BA-NMT family's declaration (banmt_cfg.h):
 * hyper-parameter table, cross-key checks, tensor catalogue, info.  Every
 * key, default, check and tensor name of the family is written here and
 * nowhere else. */
#include "banmt_cfg.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* ------------------------------------------------------------------------ */
/* Hyper-parameters                                                         */
/* ------------------------------------------------------------------------ */

#define OFF(field) offsetof(nmt_ba_cfg, field)
#define DIM_MAX ((double)NMT_BA_MAX_DIM * 16)
#define DIM(k, fl, field, help_) \
    {.key = k, .flag = fl, .type = NMT_HP_U32, .off = OFF(field), .required = 1, .lo = 1, .hi = DIM_MAX, .help = help_}
#define WIDTH(k, fl, field, help_)                                                                             \
    {.key = k, .flag = fl, .type = NMT_HP_U32, .off = OFF(field), .computed_default = 1, .lo = 1, .hi = DIM_MAX, \
     .help = help_}
#define ID(k, fl, field, help_) \
    {.key = k, .flag = fl, .type = NMT_HP_U32, .off = OFF(field), .def = 0, .lo = 0, .hi = DIM_MAX, .help = help_}

static const char *const history_choices[] = {"none", "sa", "ta", "ba", NULL};

/* Index of each entry that finish() needs to know was present. */
enum { HP_ATT = 4, HP_READOUT = 5, HP_HIST = 6, HP_EOS = 10 };

const nmt_hparam nmt_ba_hparams[NMT_BA_N_HPARAMS] = {
    DIM("src_vocab", "src-vocab", src_vocab, "source vocabulary size"),
    DIM("tgt_vocab", "tgt-vocab", tgt_vocab, "target vocabulary size"),
    DIM("emb", "emb", emb, "embedding width E (both sides)"),
    DIM("hidden", "hidden", hidden, "hidden width H of every GRU but the history ones (h_j is 2H)"),
    [HP_ATT] = WIDTH("att", "att", att, "attention width A (default hidden)"),
    [HP_READOUT] = WIDTH("readout", "readout", readout, "readout width R (default emb)"),
    [HP_HIST] = WIDTH("hist", "hist", hist, "state width of the history GRUs (default hidden)"),
    {.key = "history", .flag = "history", .type = NMT_HP_ENUM, .off = OFF(history), .def_str = "ba",
     .choices = history_choices, .help = "history in the attention: none (RNNsearch), sa, ta or ba (both)"},
    {.key = "maxout", .flag = "maxout", .type = NMT_HP_FLAG, .off = OFF(maxout),
     .help = "readout: maxout over pairs of 2R rows instead of tanh"},
    ID("bos_id", "bos-id", bos, "target start id (< tgt_vocab)"),
    [HP_EOS] = {.key = "eos_id", .flag = "eos-id", .type = NMT_HP_U32, .off = OFF(eos), .computed_default = 1,
                .lo = 0, .hi = DIM_MAX, .help = "end-of-sentence id (default 1, or 0 for a 1-word vocabulary)"},
    ID("pad_id", "pad-id", pad, "padding id (< both vocabularies)"),
    ID("unk_id", "unk-id", unk, "unknown-piece id (< both vocabularies)"),
};

#define BA_CHECK NMT_FINISH_CHECK /* finish's contract: MODEL_ARCH, the reason in why */

nmt_status nmt_ba_finish(void *cfgp, uint64_t present, char *why, size_t why_cap) {
    nmt_ba_cfg *c = (nmt_ba_cfg *)cfgp;
    if (!(present >> HP_ATT & 1)) c->att = c->hidden;
    if (!(present >> HP_READOUT & 1)) c->readout = c->emb;
    if (!(present >> HP_HIST & 1)) c->hist = c->hidden;
    if (!(present >> HP_EOS & 1)) c->eos = c->tgt_vocab > 1 ? 1 : 0;
    BA_CHECK(c->emb <= NMT_BA_MAX_DIM && c->hidden <= NMT_BA_MAX_DIM && c->att <= NMT_BA_MAX_DIM &&
                 c->readout <= NMT_BA_MAX_DIM && c->hist <= NMT_BA_MAX_DIM,
             "emb %u, hidden %u, att %u, readout %u, hist %u: at most %u each", c->emb, c->hidden, c->att,
             c->readout, c->hist, NMT_BA_MAX_DIM);
    BA_CHECK(c->history >= NMT_BA_NONE && c->history <= NMT_BA_BA, "history %d: expected none, sa, ta or ba",
             c->history);
    BA_CHECK(c->maxout == 0 || c->maxout == 1, "maxout %d must be 0 or 1", c->maxout);
    const uint32_t vmin = NMT_MIN(c->src_vocab, c->tgt_vocab);
    BA_CHECK(c->bos < c->tgt_vocab, "bos_id %u must be < tgt_vocab %u", c->bos, c->tgt_vocab);
    BA_CHECK(c->eos < vmin && c->pad < vmin && c->unk < vmin,
             "eos_id %u, pad_id %u and unk_id %u must be < both vocabularies (src_vocab %u, tgt_vocab %u)", c->eos,
             c->pad, c->unk, c->src_vocab, c->tgt_vocab);
    c->sa = c->history == NMT_BA_SA || c->history == NMT_BA_BA;
    c->ta = c->history == NMT_BA_TA || c->history == NMT_BA_BA;
    c->cat = c->emb + 3 * c->hidden + (c->sa ? c->hist : 0) + (c->ta ? c->hist : 0);
    return NMT_OK;
}

void nmt_ba_info(const void *cfgp, nmt_model_info *info) {
    const nmt_ba_cfg *c = (const nmt_ba_cfg *)cfgp;
    nmt_strlcpy(info->arch, NMT_BA_ARCH, sizeof info->arch);
    info->d_model = c->hidden;
    info->enc_layers = 1;
    info->dec_layers = 1;
    info->src_vocab = c->src_vocab;
    info->tgt_vocab = c->tgt_vocab;
    info->bos_id = c->bos;
    info->eos_id = c->eos;
    info->pad_id = c->pad;
    info->unk_id = c->unk;
    snprintf(info->family_config, sizeof info->family_config,
             "emb %u; hidden %u; att %u; readout %u; hist %u; history %s; maxout %d", c->emb, c->hidden, c->att,
             c->readout, c->hist, history_choices[c->history], c->maxout);
}

/* ------------------------------------------------------------------------ */
/* Tensor catalogue                                                         */
/* ------------------------------------------------------------------------ */

/* Every tensor U(-0.1, 0.1) at weight_scale 1 (the paper's init): fan_in
 * 100 whatever the shape. */
#define BA_FAN_IN 100

typedef struct cat {
    nmt_tensor_fn fn;
    void *ctx;
} cat;

/* emit(k, dst, role, ndim, d0, d1, fmt, ...): one unfused tensor, U(-0.1, 0.1) */
#define emit(k, dst, role, ndim, d0, d1, ...) \
    nmt_tensor_emit((k)->fn, (k)->ctx, dst, role, ndim, d0, d1, NMT_INIT_UNIFORM, BA_FAN_IN, 0, 1, __VA_ARGS__)

/* <name>.weight [out, in] (and <name>.bias [out] when bias). */
static nmt_status lin(cat *k, nmt_lin *dst, uint32_t out, uint32_t in, int bias, const char *name) {
    NMT_TRY(emit(k, dst, NMT_ROLE_WEIGHT, 2, out, in, "%s.weight", name));
    return bias ? emit(k, dst, NMT_ROLE_BIAS, 1, out, 0, "%s.bias", name) : NMT_OK;
}

/* <name>.ih.{weight,bias} [3h, in], <name>.hh.{weight,bias} [3h, h]. */
static nmt_status gru(cat *k, nmt_ba_gru *g, uint32_t in, uint32_t h, const char *name) {
    char n[64];
    snprintf(n, sizeof n, "%s.ih", name);
    NMT_TRY(lin(k, g ? &g->ih : NULL, 3 * h, in, 1, n));
    snprintf(n, sizeof n, "%s.hh", name);
    return lin(k, g ? &g->hh : NULL, 3 * h, h, 1, n);
}

#define FIELD(s, f) ((s) ? &(s)->f : NULL)

nmt_status nmt_ba_catalogue(const void *cfgp, void *wp, nmt_tensor_fn fn, void *ctx) {
    const nmt_ba_cfg *c = (const nmt_ba_cfg *)cfgp;
    nmt_ba_weights *w = (nmt_ba_weights *)wp;
    cat k = {fn, ctx};
    const uint32_t E = c->emb, H = c->hidden, A = c->att, Hh = c->hist;
    NMT_TRY(lin(&k, FIELD(w, src_emb), c->src_vocab, E, 0, "enc.emb"));
    NMT_TRY(gru(&k, FIELD(w, enc_fw), E, H, "enc.fwd"));
    NMT_TRY(gru(&k, FIELD(w, enc_rev), E, H, "enc.bwd"));
    NMT_TRY(lin(&k, FIELD(w, tgt_emb), c->tgt_vocab, E, 0, "dec.emb"));
    NMT_TRY(lin(&k, FIELD(w, init), H, 2 * H, 1, "dec.init"));
    NMT_TRY(gru(&k, FIELD(w, gru1), E, H, "dec.gru1"));
    NMT_TRY(lin(&k, FIELD(w, att_q), A, H, 1, "att.q"));
    NMT_TRY(lin(&k, FIELD(w, att_k), A, 2 * H, 0, "att.k"));
    NMT_TRY(emit(&k, FIELD(w, att_v), NMT_ROLE_WEIGHT, 1, A, 0, "att.v"));
    if (c->sa) NMT_TRY(lin(&k, FIELD(w, att_hs), A, Hh, 0, "att.hist_s"));
    if (c->ta) NMT_TRY(lin(&k, FIELD(w, att_ts), A, Hh, 0, "att.hist_t"));
    NMT_TRY(gru(&k, FIELD(w, gru2), 2 * H, H, "dec.gru2"));
    if (c->sa) NMT_TRY(gru(&k, FIELD(w, hist_s), 2 * H, Hh, "hist.src"));
    if (c->ta) NMT_TRY(gru(&k, FIELD(w, hist_t), H, Hh, "hist.tgt"));
    NMT_TRY(lin(&k, FIELD(w, readout), nmt_ba_r_rows(c), c->cat, 1, "dec.readout"));
    return lin(&k, FIELD(w, out), c->tgt_vocab, c->readout, 1, "out.proj");
}
