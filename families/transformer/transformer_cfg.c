/* SPDX-License-Identifier: MIT */
/* transformer_cfg.c — the Transformer / HySAN family's declaration
 * (transformer_cfg.h): hyper-parameter table, cross-key checks, tensor
 * catalogue, info.  Every key, default, check and tensor name of the family
 * is written here and nowhere else. */
#include "transformer_cfg.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* ------------------------------------------------------------------------ */
/* Hyper-parameters                                                         */
/* ------------------------------------------------------------------------ */

#define OFF(field) offsetof(nmt_tf_cfg, field)
#define DIM_MAX ((double)NMT_TF_MAX_DIM * 16)
#define DIM(k, fl, field, lo_, help_) \
    {.key = k, .flag = fl, .type = NMT_HP_U32, .off = OFF(field), .required = 1, .lo = lo_, .hi = DIM_MAX, .help = help_}
#define FLAG(k, fl, field, help_) {.key = k, .flag = fl, .type = NMT_HP_FLAG, .off = OFF(field), .help = help_}
#define ID(k, fl, field, def_, help_) \
    {.key = k, .flag = fl, .type = NMT_HP_U32, .off = OFF(field), .def = def_, .lo = 0, .hi = DIM_MAX, .help = help_}

static const char *const norm_choices[] = {"post", "pre", NULL};
static const char *const fusion_choices[] = {"sum", "concat", "gate", NULL};
static const char *const gate_choices[] = {"branch", "shared", NULL};
static const char *const act_choices[] = {"relu", "gelu", "swish", NULL};
static const char *const pos_choices[] = {"sinusoid", "sinusoid-2i", "sinusoid-interleaved", "none", NULL};
static const char *const mg_compose_choices[] = {"max", "san", "lstm", NULL};
static const char *const mg_interact_choices[] = {"none", "lstm", "onlstm", NULL};

/* Index of each entry that finish() needs to know was present. */
enum { HP_EMBED_SCALE = 9, HP_GATE_R = 15, HP_EOS = 17 };

/* The Transformer's keys: the first NMT_TF_N_HPARAMS entries of both
 * tables below. */
#define TF_HPARAMS \
    DIM("d_model", "d-model", d, 2, "model width d (even, divisible by n_heads)"), \
    DIM("n_heads", "heads", heads, 1, "attention heads"), \
    DIM("d_ff", "ff", ff, 1, "FFN hidden width"), \
    DIM("enc_layers", "enc-layers", enc_layers, 1, "encoder layers (<= 64)"), \
    DIM("dec_layers", "dec-layers", dec_layers, 1, "decoder layers (<= 64)"), \
    DIM("src_vocab", "src-vocab", src_vocab, 1, "source vocabulary size"), \
    DIM("tgt_vocab", "tgt-vocab", tgt_vocab, 1, "target vocabulary size"), \
    {.key = "norm", .flag = "norm", .type = NMT_HP_ENUM, .off = OFF(pre_norm), .def_str = "post", \
     .choices = norm_choices, .help = "post: x = LN(x + F(x)); pre: x = x + F(LN(x)) with final norms"}, \
    {.key = "ln_eps", .flag = "ln-eps", .type = NMT_HP_F32, .off = OFF(eps), .def = 1e-5, .lo = 0, .hi = 1, \
     .help = "layer-norm epsilon"}, \
    [HP_EMBED_SCALE] = {.key = "embed_scale", .flag = "embed-scale", .type = NMT_HP_F32, .off = OFF(emb_scale), \
                        .computed_default = 1, .help = "embedding multiplier (default sqrt(d_model))"}, \
    FLAG("shared_embeddings", "shared-embeddings", shared_emb, "one embedding for both sides (equal vocabularies)"), \
    FLAG("tied_output", "tied-output", tied_out, "output projection = target embedding"), \
    {.key = "enc_branches", .flag = "enc-branches", .type = NMT_HP_TEXT, .off = OFF(enc_br_text), \
     .def_str = "global", .text_cap = NMT_TF_BRANCH_TEXT, \
     .help = "encoder self-attention branches: 1-8 of global fw bw local:K"}, \
    {.key = "dec_branches", .flag = "dec-branches", .type = NMT_HP_TEXT, .off = OFF(dec_br_text), \
     .def_str = "global", .text_cap = NMT_TF_BRANCH_TEXT, \
     .help = "decoder self-attention branches: 1-8 of global fw local:K"}, \
    {.key = "fusion", .flag = "fusion", .type = NMT_HP_ENUM, .off = OFF(fusion), .def_str = "sum", \
     .choices = fusion_choices, .help = "fusion of the branches: sum, concat or gate (squeeze-gated sum)"}, \
    {.key = "gate_reduction", .flag = "gate-reduction", .type = NMT_HP_U32, .off = OFF(gate_r), .def = 4, .lo = 1, \
     .hi = DIM_MAX, .help = "reduction r of the squeeze gate (d_model % r == 0)"}, \
    ID("bos_id", "bos-id", bos, 0, "target start id (< tgt_vocab)"), \
    [HP_EOS] = {.key = "eos_id", .flag = "eos-id", .type = NMT_HP_U32, .off = OFF(eos), .computed_default = 1, \
                .lo = 0, .hi = DIM_MAX, .help = "end-of-sentence id (default 1, or 0 for a 1-word vocabulary)"}, \
    ID("pad_id", "pad-id", pad, 0, "padding id (< both vocabularies)"), \
    ID("unk_id", "unk-id", unk, 0, "unknown-piece id (< both vocabularies)"), \
    {.key = "ffn_activation", .flag = "ffn-activation", .type = NMT_HP_ENUM, .off = OFF(ffn_act), .def_str = "relu", \
     .choices = act_choices, .help = "FFN activation: relu, gelu (x Phi(x), erf) or swish (x sigmoid(x), SiLU)"}, \
    {.key = "position_encoding", .flag = "position-encoding", .type = NMT_HP_ENUM, .off = OFF(pos_enc), \
     .def_str = "sinusoid", .choices = pos_choices, \
     .help = "position terms: sinusoid ([sin | cos], 10000^(-i/(d/2-1))), sinusoid-2i ([sin | cos], " \
             "10000^(-2i/d)), sinusoid-interleaved (sin, cos alternating, 10000^(-2i/d)) or none"}, \
    {.key = "position_offset", .flag = "position-offset", .type = NMT_HP_U32, .off = OFF(pos_offset), .def = 0, \
     .lo = 0, .hi = 65536, .help = "position of the first token (fairseq: padding id + 1)"}, \
    FLAG("output_bias", "output-bias", out_bias, "a bias (tensor out_bias) added to the logits"), \
    {.key = "source_eos", .flag = "source-eos", .type = NMT_HP_FLAG, .off = OFF(src_eos), .def = 1, \
     .help = "append eos_id to every source sentence (0: the source ends at its last token)"}, \
    {.key = "gate", .flag = "gate", .type = NMT_HP_ENUM, .off = OFF(gate_shared), .def_str = "branch", \
     .choices = gate_choices, \
     .help = "fusion gate: one squeeze gate per branch, or one per sub-layer shared by its branches (reduction " \
             "16 unless gate_reduction says otherwise)"},

const nmt_hparam nmt_tf_hparams[] = {
    TF_HPARAMS
    /* MG-SA (arch "mgsa") only: */
    {.key = "mg_layers", .flag = "mg-layers", .type = NMT_HP_TEXT, .off = OFF(mg_layers_text), .def_str = "1",
     .text_cap = NMT_MG_TEXT, .help = "MG-SA: encoder layers (1-based) with phrase heads, e.g. \"1\" or \"1 2\""},
    {.key = "mg_heads", .flag = "mg-heads", .type = NMT_HP_TEXT, .off = OFF(mg_heads_text),
     .def_str = "word word ngram:2 ngram:3", .text_cap = NMT_MG_TEXT,
     .help = "MG-SA: partition of each head, n_heads of word | ngram:N (N 2-64) | syntax (the caller's phrase spans)"},
    {.key = "mg_compose", .flag = "mg-compose", .type = NMT_HP_ENUM, .off = OFF(mg_compose), .def_str = "max",
     .choices = mg_compose_choices,
     .help = "MG-SA: phrase composition COM (max: max-pooling; san: self-attention inside each phrase, then "
             "max-pooling; lstm: an LSTM over each phrase, its last state)"},
    {.key = "mg_interact", .flag = "mg-interact", .type = NMT_HP_ENUM, .off = OFF(mg_interact), .def_str = "none",
     .choices = mg_interact_choices,
     .help = "MG-SA: phrase interaction REC over each phrase sequence (none | lstm | onlstm: ordered neurons)"},
    {.key = "mg_syntax_fallback", .flag = "mg-syntax-fallback", .type = NMT_HP_U32, .off = OFF(mg_fallback),
     .def = 2, .lo = 2, .hi = NMT_MG_MAX_N,
     .help = "MG-SA syntax heads: n-gram phrases of this size for a sentence given without spans"},
    {.key = "mg_chunk", .flag = "mg-chunk", .type = NMT_HP_U32, .off = OFF(mg_chunk), .def = 8, .lo = 1,
     .hi = DIM_MAX, .help = "MG-SA ON-LSTM: chunk size of the master gates (d_model / chunk of them; divides d_model)"},
};
_Static_assert(NMT_ARRAY_LEN(nmt_tf_hparams) == NMT_MGSA_N_HPARAMS, "table size: update NMT_MGSA_N_HPARAMS");

#define PH_KIND(k, fl, i, help_)                                                                                  \
    {.key = k, .flag = fl, .type = NMT_HP_TEXT, .off = OFF(ph_text[i]), .def_str = "none", .text_cap = NMT_PH_TEXT, \
     .help = help_}
const nmt_hparam nmt_ph_hparams[] = {
    TF_HPARAMS
    PH_KIND("ph_enc", "ph-enc", NMT_PH_ENC,
            "phrase attention of the encoder self-attention: none | METHOD:STRUCTURE:NGRAMS, METHOD convkv or "
            "queryk; homo:DIGITS heads per n-gram size from 1 (e.g. homo:22: 2 unigram, 2 bigram heads); "
            "hetero:SIZES (e.g. hetero:12, hetero:123); inter:12 (interleaved unigram and bigram queries)"),
    PH_KIND("ph_dec", "ph-dec", NMT_PH_DEC, "phrase attention of the decoder self-attention (causal), as ph_enc"),
    PH_KIND("ph_cross", "ph-cross", NMT_PH_CROSS, "phrase attention of the cross-attention, as ph_enc"),
};
_Static_assert(NMT_ARRAY_LEN(nmt_ph_hparams) == NMT_PH_N_HPARAMS, "table size: update NMT_PH_N_HPARAMS");

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

/* A decimal number in [lo, hi] from p..e. */
static nmt_status parse_uint(const char *p, const char *e, uint32_t lo, uint32_t hi, uint32_t *out) {
    uint32_t v = 0;
    NMT_CHECK(p < e, NMT_ERR_MODEL_ARCH);
    for (; p < e; p++) {
        NMT_CHECK(*p >= '0' && *p <= '9' && v < 100000u, NMT_ERR_MODEL_ARCH);
        v = v * 10u + (uint32_t)(*p - '0');
    }
    NMT_CHECK(v >= lo && v <= hi, NMT_ERR_MODEL_ARCH);
    *out = v;
    return NMT_OK;
}

/* The next word of a space/comma separated list: [*p, *e); 0 at the end. */
static int next_word(const char **p, const char **e) {
    const char *q = *p;
    while (*q == ' ' || *q == ',' || *q == '\t') q++;
    if (!*q) return 0;
    const char *r = q;
    while (*r && *r != ' ' && *r != ',' && *r != '\t') r++;
    *p = q;
    *e = r;
    return 1;
}

/* printf into buf[NMT_MG_TEXT] at *used; NMT_ERR_MODEL_ARCH when it does not fit. */
static nmt_status append(char *buf, size_t *used, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nmt_status append(char *buf, size_t *used, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *used, NMT_MG_TEXT - *used, fmt, ap);
    va_end(ap);
    NMT_CHECK(w >= 0 && (size_t)w < NMT_MG_TEXT - *used, NMT_ERR_MODEL_ARCH);
    *used += (size_t)w;
    return NMT_OK;
}

/* MG-SA: "1 2" (1-based encoder layers) and one partition per head, in
 * adjacent runs; the canonical spellings are written back. */
static nmt_status mg_finish(nmt_tf_cfg *c) {
    /* phrase heads replace the encoder's global self-attention (the paper's
     * base); HySAN branches with phrase heads are not defined */
    NMT_CHECK(c->n_enc_br == 1 && c->enc_br[0].kind == NMT_BRANCH_GLOBAL, NMT_ERR_MODEL_ARCH);
    const char *p = c->mg_layers_text, *e;
    c->mg_mask = 0;
    while (next_word(&p, &e)) {
        uint32_t l;
        NMT_TRY(parse_uint(p, e, 1, c->enc_layers, &l));
        c->mg_mask |= 1ull << (l - 1);
        p = e;
    }
    NMT_CHECK(c->mg_mask != 0, NMT_ERR_MODEL_ARCH); /* no phrase layer: not an MG-SA model */
    uint32_t h = 0;
    c->mg_n_groups = 0;
    p = c->mg_heads_text;
    while (next_word(&p, &e)) {
        uint32_t n = 0, syntax = 0;
        if (e - p == 6 && strncmp(p, "syntax", 6) == 0) {
            n = syntax = 1;
        } else if (!(e - p == 4 && strncmp(p, "word", 4) == 0)) {
            NMT_CHECK(e - p > 6 && strncmp(p, "ngram:", 6) == 0, NMT_ERR_MODEL_ARCH);
            NMT_TRY(parse_uint(p + 6, e, 2, NMT_MG_MAX_N, &n));
        }
        NMT_CHECK(h < c->heads, NMT_ERR_MODEL_ARCH);
        nmt_mg_group *g = c->mg_n_groups ? &c->mg_group[c->mg_n_groups - 1] : NULL;
        if (g && g->n == n && g->syntax == syntax) {
            g->nh++;
        } else {
            NMT_CHECK(c->mg_n_groups < NMT_MG_MAX_GROUPS, NMT_ERR_MODEL_ARCH);
            c->mg_group[c->mg_n_groups++] = (nmt_mg_group){h, 1, n, syntax};
        }
        h++;
        p = e;
    }
    NMT_CHECK(h == c->heads, NMT_ERR_MODEL_ARCH);
    /* canonical spellings; a list that does not fit is an error, not a cut */
    char buf[NMT_MG_TEXT];
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t l = 0; l < c->enc_layers && l < 64; l++)
        if (c->mg_mask >> l & 1) NMT_TRY(append(buf, &used, "%s%u", used ? " " : "", l + 1));
    memcpy(c->mg_layers_text, buf, sizeof buf);
    used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < c->mg_n_groups; i++)
        for (uint32_t j = 0; j < c->mg_group[i].nh; j++) {
            const uint32_t n = c->mg_group[i].n;
            NMT_TRY(c->mg_group[i].syntax ? append(buf, &used, "%ssyntax", used ? " " : "")
                    : n                   ? append(buf, &used, "%sngram:%u", used ? " " : "", n)
                                          : append(buf, &used, "%sword", used ? " " : ""));
        }
    memcpy(c->mg_heads_text, buf, sizeof buf);
    return NMT_OK;
}

/* Phrase attention: "none" or METHOD:STRUCTURE:DIGITS (transformer_cfg.h
 * nmt_ph_kind); `dec` kinds are causal (nothing to refuse: every n-gram key
 * ends at its last token). */
static nmt_status ph_parse(const char *text, uint32_t heads, nmt_ph_kind *k) {
    memset(k, 0, sizeof *k);
    if (strcmp(text, "none") == 0) return NMT_OK;
    const char *p = text;
    if (strncmp(p, "convkv:", 7) == 0) k->method = NMT_PH_CONVKV;
    else if (strncmp(p, "queryk:", 7) == 0) k->method = NMT_PH_QUERYK;
    else return NMT_ERR_MODEL_ARCH;
    p += 7;
    if (strncmp(p, "homo:", 5) == 0) {
        k->structure = NMT_PH_HOMO;
        p += 5;
    } else if (strncmp(p, "hetero:", 7) == 0) {
        k->structure = NMT_PH_HETERO;
        p += 7;
    } else if (strcmp(p, "inter:12") == 0) { /* unigram and bigram only (the paper's) */
        k->structure = NMT_PH_INTER;
        p += 6;
    } else {
        return NMT_ERR_MODEL_ARCH;
    }
    const size_t nd = strlen(p);
    NMT_CHECK(nd >= 1 && nd <= NMT_PH_MAX_N, NMT_ERR_MODEL_ARCH);
    uint32_t h = 0, prev = 0;
    for (size_t i = 0; i < nd; i++) {
        NMT_CHECK(p[i] >= '0' && p[i] <= '9', NMT_ERR_MODEL_ARCH);
        const uint32_t v = (uint32_t)(p[i] - '0');
        if (k->structure == NMT_PH_HOMO) { /* heads of n-gram size i + 1 */
            if (v == 0) continue;
            NMT_CHECK(k->n_segs < NMT_PATTN_MAX_SEG, NMT_ERR_MODEL_ARCH);
            k->seg[k->n_segs++] = (nmt_ph_seg){(uint32_t)i + 1, h, v};
            h += v;
        } else { /* n-gram sizes, ascending from 1 */
            NMT_CHECK(v > prev && (i > 0 || v == 1) && k->n_segs < NMT_PATTN_MAX_SEG, NMT_ERR_MODEL_ARCH);
            k->seg[k->n_segs++] = (nmt_ph_seg){v, 0, heads};
            prev = v;
        }
    }
    NMT_CHECK(k->n_segs >= 1 && (k->structure != NMT_PH_HOMO || h == heads), NMT_ERR_MODEL_ARCH);
    for (uint32_t g = 0; g < k->n_segs; g++) k->n_max = NMT_MAX(k->n_max, k->seg[g].n);
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

/* Return NMT_ERR_MODEL_ARCH with the reason in why (finish's contract). */
#define TF_CHECK NMT_FINISH_CHECK

nmt_status nmt_tf_finish(void *cfgp, uint64_t present, char *why, size_t why_cap) {
    nmt_tf_cfg *c = (nmt_tf_cfg *)cfgp;
    TF_CHECK(c->d <= NMT_TF_MAX_DIM, "d_model %u: at most %u", c->d, NMT_TF_MAX_DIM);
    TF_CHECK(c->ff <= NMT_TF_MAX_DIM * 4, "d_ff %u: at most %u", c->ff, NMT_TF_MAX_DIM * 4);
    TF_CHECK(c->d % 2 == 0, "d_model %u must be even", c->d);
    TF_CHECK(c->d % c->heads == 0, "d_model %u must be divisible by n_heads %u", c->d, c->heads);
    TF_CHECK(c->enc_layers <= NMT_TF_MAX_LAYERS && c->dec_layers <= NMT_TF_MAX_LAYERS,
             "enc_layers %u, dec_layers %u: at most %u each", c->enc_layers, c->dec_layers, NMT_TF_MAX_LAYERS);
    c->dh = c->d / c->heads;
    if (!(present >> HP_EMBED_SCALE & 1)) c->emb_scale = (float)sqrt((double)c->d);
    TF_CHECK(!c->shared_emb || c->src_vocab == c->tgt_vocab,
             "shared_embeddings needs src_vocab == tgt_vocab (found %u and %u)", c->src_vocab, c->tgt_vocab);
    TF_CHECK(parse_branches(c->enc_br_text, 0, c->enc_br, &c->n_enc_br) == NMT_OK,
             "enc_branches '%s': expected 1 to %u of global, fw, bw, local:K", c->enc_br_text, NMT_MAX_BRANCHES);
    TF_CHECK(parse_branches(c->dec_br_text, 1, c->dec_br, &c->n_dec_br) == NMT_OK,
             "dec_branches '%s': expected 1 to %u of global, fw, local:K (no bw in the decoder)", c->dec_br_text,
             NMT_MAX_BRANCHES);
    /* the canonical spelling, as every writer stores it */
    nmt_tf_branches_str(c->enc_br, c->n_enc_br, c->enc_br_text, sizeof c->enc_br_text);
    nmt_tf_branches_str(c->dec_br, c->n_dec_br, c->dec_br_text, sizeof c->dec_br_text);
    if (c->gate_shared && !(present >> HP_GATE_R & 1)) c->gate_r = 16; /* the paper's parameter counts */
    TF_CHECK(c->gate_r <= c->d && c->d % c->gate_r == 0, "gate_reduction %u must divide d_model %u", c->gate_r,
             c->d);
    if (!(present >> HP_EOS & 1)) c->eos = c->tgt_vocab > 1 ? 1 : 0;
    const uint32_t vmin = NMT_MIN(c->src_vocab, c->tgt_vocab);
    TF_CHECK(c->bos < c->tgt_vocab, "bos_id %u must be < tgt_vocab %u", c->bos, c->tgt_vocab);
    TF_CHECK(c->eos < vmin && c->pad < vmin && c->unk < vmin,
             "eos_id %u, pad_id %u and unk_id %u must be < both vocabularies (src_vocab %u, tgt_vocab %u)", c->eos,
             c->pad, c->unk, c->src_vocab, c->tgt_vocab);
    /* only the phrase record reads the ph_* keys, only the MG-SA record the
     * mg_* keys (their defaults are not empty) */
    if (c->ph_text[0][0]) {
        TF_CHECK(c->n_enc_br == 1 && c->enc_br[0].kind == NMT_BRANCH_GLOBAL && c->n_dec_br == 1 &&
                     c->dec_br[0].kind == NMT_BRANCH_GLOBAL,
                 "phrase attention replaces the global attention: enc_branches and dec_branches must be global "
                 "(found '%s', '%s')",
                 c->enc_br_text, c->dec_br_text);
        static const char *const keys[NMT_PH_KINDS] = {"ph_enc", "ph_dec", "ph_cross"};
        for (int i = 0; i < NMT_PH_KINDS; i++)
            TF_CHECK(ph_parse(c->ph_text[i], c->heads, &c->ph[i]) == NMT_OK,
                     "%s '%s': expected none or convkv|queryk:homo:DIGITS (heads per n-gram size 1, 2, ..., "
                     "summing to n_heads %u, at most %u sizes in use), convkv|queryk:hetero:SIZES (ascending "
                     "from 1, at most %u) or convkv|queryk:inter:12",
                     keys[i], c->ph_text[i], c->heads, NMT_PATTN_MAX_SEG, NMT_PATTN_MAX_SEG);
        return NMT_OK;
    }
    if (!c->mg_heads_text[0]) return NMT_OK;
    char layers[NMT_MG_TEXT], heads[NMT_MG_TEXT];
    memcpy(layers, c->mg_layers_text, sizeof layers);
    memcpy(heads, c->mg_heads_text, sizeof heads);
    TF_CHECK(mg_finish(c) == NMT_OK,
             "mg_layers '%s', mg_heads '%s': expected encoder layers in [1, %u] and one of word | ngram:N (N 2-%u) | syntax "
             "for each of the %u heads, and a global-only encoder (enc_branches '%s')",
             layers, heads, c->enc_layers, NMT_MG_MAX_N, c->heads, c->enc_br_text);
    TF_CHECK(c->mg_compose == NMT_MG_COM_MAX || !nmt_mg_has_syntax(c),
             "mg_compose %s works on n-gram heads only (mg_heads '%s': syntax heads take max)",
             mg_compose_choices[c->mg_compose], c->mg_heads_text);
    TF_CHECK(c->mg_interact != NMT_MG_REC_ONLSTM || c->d % c->mg_chunk == 0,
             "mg_chunk %u must divide d_model %u (mg_interact onlstm)", c->mg_chunk, c->d);
    return NMT_OK;
}

/* "; key value" (no "; " first) at buf[*used], truncated at cap. */
static void add_opt(char *buf, size_t cap, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_opt(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
    if (*used + 2 >= cap) return;
    if (*used) {
        memcpy(buf + *used, "; ", 3);
        *used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    *used = w < 0 ? cap : NMT_MIN(cap - 1, *used + (size_t)w);
}

/* The keys for models of other frameworks (docs/IMPORT.md) that differ
 * from their defaults, "ffn_activation swish; position_encoding
 * sinusoid-2i" ("" for every model nmt-edge-train writes by default). */
static void tf_options_str(const nmt_tf_cfg *c, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    if (c->ffn_act) add_opt(buf, cap, &used, "ffn_activation %s", act_choices[c->ffn_act]);
    if (c->pos_enc) add_opt(buf, cap, &used, "position_encoding %s", pos_choices[c->pos_enc]);
    if (c->pos_offset) add_opt(buf, cap, &used, "position_offset %u", c->pos_offset);
    if (c->out_bias) add_opt(buf, cap, &used, "output_bias 1");
    if (!c->src_eos) add_opt(buf, cap, &used, "source_eos 0");
    if (c->gate_shared) add_opt(buf, cap, &used, "gate shared");
}

void nmt_tf_info(const void *cfgp, nmt_model_info *info) {
    const nmt_tf_cfg *c = (const nmt_tf_cfg *)cfgp;
    nmt_strlcpy(info->arch, c->ph_text[0][0] ? NMT_PH_ARCH : c->mg_heads_text[0] ? NMT_MGSA_ARCH : NMT_TF_ARCH,
                sizeof info->arch);
    info->d_model = c->d;
    info->n_heads = c->heads;
    info->d_ff = c->ff;
    info->enc_layers = c->enc_layers;
    info->dec_layers = c->dec_layers;
    info->src_vocab = c->src_vocab;
    info->tgt_vocab = c->tgt_vocab;
    nmt_strlcpy(info->norm, norm_choices[c->pre_norm], sizeof info->norm);
    nmt_strlcpy(info->enc_branches, c->enc_br_text, sizeof info->enc_branches);
    nmt_strlcpy(info->dec_branches, c->dec_br_text, sizeof info->dec_branches);
    nmt_strlcpy(info->fusion, fusion_choices[c->fusion], sizeof info->fusion);
    tf_options_str(c, info->family_config, sizeof info->family_config);
    info->gate_reduction = c->gate_r;
    info->shared_embeddings = c->shared_emb;
    info->tied_output = c->tied_out;
    info->bos_id = c->bos;
    info->eos_id = c->eos;
    info->pad_id = c->pad;
    info->unk_id = c->unk;
    const size_t o = strlen(info->family_config), cap = sizeof info->family_config - o;
    if (c->ph_text[0][0])
        snprintf(info->family_config + o, cap, "%sph_enc %s; ph_dec %s; ph_cross %s", o ? "; " : "", c->ph_text[0],
                 c->ph_text[1], c->ph_text[2]);
    if (c->mg_heads_text[0]) {
        char chunk[64] = "";
        if (c->mg_interact == NMT_MG_REC_ONLSTM) snprintf(chunk, sizeof chunk, "; mg_chunk %u", c->mg_chunk);
        if (nmt_mg_has_syntax(c))
            snprintf(chunk + strlen(chunk), sizeof chunk - strlen(chunk), "; mg_syntax_fallback %u", c->mg_fallback);
        snprintf(info->family_config + o, cap, "%smg_layers %s; mg_heads %s; mg_compose %s; mg_interact %s%s",
                 o ? "; " : "", c->mg_layers_text, c->mg_heads_text,
                 mg_compose_choices[c->mg_compose], mg_interact_choices[c->mg_interact], chunk);
    }
}

/* ------------------------------------------------------------------------ */
/* Tensor catalogue                                                         */
/* ------------------------------------------------------------------------ */

typedef struct cat {
    const nmt_tf_cfg *c;
    nmt_tensor_fn fn;
    void *ctx;
    char prefix[64];
} cat;

/* emit(k, dst, role, ndim, d0, d1, init, fan_in, part, n_parts, fmt, ...): nmt_tensor_emit to k's walker */
#define emit(k, ...) nmt_tensor_emit((k)->fn, (k)->ctx, __VA_ARGS__)

/* <prefix>.weight [out, in] and <prefix>.bias [out]; part i of n fused. */
static nmt_status lin(cat *k, nmt_lin *dst, uint32_t out, uint32_t in, uint32_t part, uint32_t n, const char *name) {
    NMT_TRY(emit(k, dst, NMT_ROLE_WEIGHT, 2, out, in, NMT_INIT_UNIFORM, in, part, n, "%s.%s.weight", k->prefix, name));
    return emit(k, dst, NMT_ROLE_BIAS, 1, out, 0, NMT_INIT_UNIFORM, in, part, n, "%s.%s.bias", k->prefix, name);
}

static nmt_status norm(cat *k, nmt_lin *dst, const char *name) {
    NMT_TRY(emit(k, dst, NMT_ROLE_WEIGHT, 1, k->c->d, 0, NMT_INIT_LN_GAIN, 0, 0, 1, "%s.weight", name));
    return emit(k, dst, NMT_ROLE_BIAS, 1, k->c->d, 0, NMT_INIT_LN_BIAS, 0, 0, 1, "%s.bias", name);
}

#define SUB(w, i) ((w) ? &(w)->sub[i] : NULL)
#define FIELD(s, f) ((s) ? &(s)->f : NULL)

static nmt_status self_attn(cat *k, nmt_tf_sub_w *s, const char *stack, uint32_t l, uint32_t nbr) {
    const nmt_tf_cfg *c = k->c;
    static const char *const qkv[3] = {"q", "k", "v"};
    snprintf(k->prefix, sizeof k->prefix, "%s.%u.self_attn", stack, l);
    for (uint32_t i = 0; i < 3; i++) NMT_TRY(lin(k, FIELD(s, qkv), c->d, c->d, i, 3, qkv[i]));
    const int dec = stack[0] == 'd';
    const uint32_t o_in = (c->fusion == NMT_TF_FUSE_CONCAT && nbr > 1) ? nbr * c->d
                                                                       : nmt_ph_o_in(nmt_ph_of(c, dec, 0), c->d, dec);
    NMT_TRY(lin(k, FIELD(s, o), c->d, o_in, 0, 1, "o"));
    if (c->fusion == NMT_TF_FUSE_GATE && nbr > 1)
        for (uint32_t b = 0; b < (c->gate_shared ? 1 : nbr); b++) { /* shared: gate.0, aliased by the others */
            char n[32];
            snprintf(n, sizeof n, "gate.%u.fc1", b);
            NMT_TRY(lin(k, FIELD(s, g1[b]), c->d / c->gate_r, c->d, 0, 1, n));
            snprintf(n, sizeof n, "gate.%u.fc2", b);
            NMT_TRY(lin(k, FIELD(s, g2[b]), c->d, c->d / c->gate_r, 0, 1, n));
        }
    return NMT_OK;
}

/* An LSTM of MG-SA's encoder layer l named `name` (shared by the layer's
 * phrase groups): w_ih [G, d] with its bias, w_hh [G, d]; gate rows i, f,
 * g, o (then ON-LSTM's masters).  The interaction REC ("phrase_lstm", G =
 * nmt_mg_rec_gates) and the LSTM composition COM ("phrase_com_lstm", 4d). */
static nmt_status phrase_lstm(cat *k, nmt_lin *ih, nmt_lin *hh, uint32_t l, const char *name, uint32_t G) {
    const uint32_t d = k->c->d;
    snprintf(k->prefix, sizeof k->prefix, "enc.%u.self_attn.%s", l, name);
    NMT_TRY(lin(k, ih, G, d, 0, 1, "ih"));
    return emit(k, hh, NMT_ROLE_WEIGHT, 2, G, d, NMT_INIT_UNIFORM, d, 0, 1, "%s.hh.weight", k->prefix);
}

/* MG-SA's SAN composition COM of encoder layer l (shared by the layer's
 * phrase groups): q|k|v of a self-attention inside each phrase, [3d, d]
 * with biases, fused like the self-attention's. */
static nmt_status phrase_san(cat *k, nmt_tf_sub_w *s, uint32_t l) {
    static const char *const qkv[3] = {"q", "k", "v"};
    snprintf(k->prefix, sizeof k->prefix, "enc.%u.self_attn.phrase_san", l);
    for (uint32_t i = 0; i < 3; i++) NMT_TRY(lin(k, FIELD(s, mg_cqkv), k->c->d, k->c->d, i, 3, qkv[i]));
    return NMT_OK;
}

/* The phrase attention's own weights of a sub-layer (transformer_cfg.h
 * nmt_tf_sub_w ph_*), named <prefix>.ph<n>.{kv,q,v} after the segment's
 * n-gram size. */
static nmt_status phrase_weights(cat *k, nmt_tf_sub_w *s, const nmt_ph_kind *pk) {
    if (pk == NULL) return NMT_OK;
    const nmt_tf_cfg *c = k->c;
    const uint32_t d = c->d;
    for (uint32_t g = 0; g < pk->n_segs; g++) {
        const nmt_ph_seg *sg = &pk->seg[g];
        if (!nmt_ph_own(sg)) continue;
        const uint32_t w = sg->nh * c->dh, taps = nmt_ph_taps(pk, sg);
        const int bias = pk->structure != NMT_PH_HOMO;
        char n[32];
        const char *names[3] = {"kv", "q", "v"};
        nmt_lin *dst[3] = {FIELD(s, ph_kv[g]), FIELD(s, ph_q[g]), FIELD(s, ph_v[g])};
        const uint32_t out[3] = {2 * w, taps * w, w}, in[3] = {taps * d, d, taps * d};
        for (int t = pk->method == NMT_PH_CONVKV ? 0 : 1; t < (pk->method == NMT_PH_CONVKV ? 1 : 3); t++) {
            snprintf(n, sizeof n, "ph%u.%s", sg->n, names[t]);
            if (bias) NMT_TRY(lin(k, dst[t], out[t], in[t], 0, 1, n));
            else
                NMT_TRY(emit(k, dst[t], NMT_ROLE_WEIGHT, 2, out[t], in[t], NMT_INIT_UNIFORM, in[t], 0, 1, "%s.%s.weight",
                             k->prefix, n));
        }
    }
    if (pk->structure == NMT_PH_INTER) { /* the bigram queries */
        NMT_TRY(lin(k, FIELD(s, ph_qb), d, 2 * d, 0, 1, "phq.q"));
        if (pk->method == NMT_PH_QUERYK) NMT_TRY(lin(k, FIELD(s, ph_qb2), 2 * d, 2 * d, 0, 1, "phq.q2"));
    }
    return NMT_OK;
}

static nmt_status ffn(cat *k, nmt_tf_sub_w *s, const char *stack, uint32_t l) {
    snprintf(k->prefix, sizeof k->prefix, "%s.%u.ffn", stack, l);
    NMT_TRY(lin(k, FIELD(s, fc1), k->c->ff, k->c->d, 0, 1, "fc1"));
    return lin(k, FIELD(s, fc2), k->c->d, k->c->ff, 0, 1, "fc2");
}

nmt_status nmt_tf_catalogue(const void *cfgp, void *wp, nmt_tensor_fn fn, void *ctx) {
    const nmt_tf_cfg *c = (const nmt_tf_cfg *)cfgp;
    nmt_tf_weights *w = (nmt_tf_weights *)wp;
    cat k = {c, fn, ctx, ""};
    char n[64];
    const uint32_t d = c->d, E = nmt_tf_n_enc_sub(c);
    NMT_TRY(emit(&k, FIELD(w, src_emb), NMT_ROLE_WEIGHT, 2, c->src_vocab, d, NMT_INIT_UNIFORM, d, 0, 1, "src_embed"));
    if (!c->shared_emb)
        NMT_TRY(emit(&k, FIELD(w, tgt_emb), NMT_ROLE_WEIGHT, 2, c->tgt_vocab, d, NMT_INIT_UNIFORM, d, 0, 1, "tgt_embed"));
    if (!c->tied_out)
        NMT_TRY(emit(&k, FIELD(w, out), NMT_ROLE_WEIGHT, 2, c->tgt_vocab, d, NMT_INIT_UNIFORM, d, 0, 1, "out_proj"));
    for (uint32_t l = 0; l < c->enc_layers; l++) {
        nmt_tf_sub_w *sa = SUB(w, 2 * l), *ff = SUB(w, 2 * l + 1);
        NMT_TRY(self_attn(&k, sa, "enc", l, c->n_enc_br));
        NMT_TRY(phrase_weights(&k, sa, nmt_ph_of(c, 0, 0)));
        if (nmt_mg_layer(c, l) && c->mg_compose == NMT_MG_COM_SAN) NMT_TRY(phrase_san(&k, sa, l));
        if (nmt_mg_layer(c, l) && c->mg_compose == NMT_MG_COM_LSTM)
            NMT_TRY(phrase_lstm(&k, FIELD(sa, mg_com_ih), FIELD(sa, mg_com_hh), l, "phrase_com_lstm", 4 * d));
        if (nmt_mg_layer(c, l) && c->mg_interact != NMT_MG_REC_NONE)
            NMT_TRY(phrase_lstm(&k, FIELD(sa, mg_ih), FIELD(sa, mg_hh), l, "phrase_lstm", nmt_mg_rec_gates(c)));
        snprintf(n, sizeof n, "enc.%u.ln1", l);
        NMT_TRY(norm(&k, FIELD(sa, ln), n));
        snprintf(n, sizeof n, "enc.%u.ln2", l);
        NMT_TRY(norm(&k, FIELD(ff, ln), n));
        NMT_TRY(ffn(&k, ff, "enc", l));
    }
    if (c->pre_norm) NMT_TRY(norm(&k, FIELD(w, enc_ln), "enc.ln"));
    for (uint32_t l = 0; l < c->dec_layers; l++) {
        nmt_tf_sub_w *sa = SUB(w, E + 3 * l), *ca = SUB(w, E + 3 * l + 1), *ff = SUB(w, E + 3 * l + 2);
        NMT_TRY(self_attn(&k, sa, "dec", l, c->n_dec_br));
        NMT_TRY(phrase_weights(&k, sa, nmt_ph_of(c, 1, 0)));
        snprintf(k.prefix, sizeof k.prefix, "dec.%u.cross_attn", l);
        NMT_TRY(lin(&k, FIELD(ca, q), d, d, 0, 1, "q"));
        NMT_TRY(lin(&k, FIELD(ca, kv), d, d, 0, 2, "k"));
        NMT_TRY(lin(&k, FIELD(ca, kv), d, d, 1, 2, "v"));
        NMT_TRY(lin(&k, FIELD(ca, o), d, nmt_ph_o_in(nmt_ph_of(c, 1, 1), d, 1), 0, 1, "o"));
        NMT_TRY(phrase_weights(&k, ca, nmt_ph_of(c, 1, 1)));
        nmt_tf_sub_w *subs[3] = {sa, ca, ff};
        for (int i = 0; i < 3; i++) {
            snprintf(n, sizeof n, "dec.%u.ln%d", l, i + 1);
            NMT_TRY(norm(&k, FIELD(subs[i], ln), n));
        }
        NMT_TRY(ffn(&k, ff, "dec", l));
    }
    if (c->pre_norm) NMT_TRY(norm(&k, FIELD(w, dec_ln), "dec.ln"));
    if (c->out_bias)
        NMT_TRY(emit(&k, FIELD(w, out_b), NMT_ROLE_WEIGHT, 1, c->tgt_vocab, 0, NMT_INIT_LN_BIAS, 0, 0, 1, "out_bias"));
    if (w) {
        if (c->shared_emb) w->tgt_emb = w->src_emb;
        if (c->tied_out) w->out = w->tgt_emb;
        for (uint32_t i = 0; c->gate_shared && i < nmt_tf_n_sub(c); i++) /* one gate for the branches */
            for (uint32_t b = 1; b < NMT_MAX_BRANCHES; b++) {
                w->sub[i].g1[b] = w->sub[i].g1[0];
                w->sub[i].g2[b] = w->sub[i].g2[0];
            }
    }
    return NMT_OK;
}

