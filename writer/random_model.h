/* SPDX-License-Identifier: MIT */
/* random_model.h — random-weight models.
 *
 * Any family (nmt_random_model_*, what `nmt-edge-convert random --arch`
 * uses): the configuration is set flag by flag from the family's
 * hyper-parameter table (families/family.h), starting from the table's
 * defaults and the family's `random_args`, and checked by the code the
 * loader runs (the family's finish, then the whole image through
 * nmt_model_explain and nmt_session_arena_size) before anything is written.
 * A new family gets random models with no code here.
 *
 * Transformer/HySAN from shape options (nmt_random_transformer_*, for tests
 * and benchmarks): the metadata through the family's hyper-parameter table
 * and the tensors from its catalogue (writer/family_writer.h: the weight
 * distributions and the reproducible stream, drawn tensor by tensor in file
 * order).  embed_scale is written as sqrt(d_model) when not given.  This
 * generator checks only what it needs to compute shapes; it will write
 * models the runtime rejects (e.g. d_model not divisible by n_heads, a `bw`
 * decoder branch), which is useful for negative tests.
 */
#ifndef NMT_RANDOM_MODEL_H
#define NMT_RANDOM_MODEL_H

#include "family.h"
#include "nmt_writer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nmt_random_transformer_config {
    uint32_t d_model, n_heads, d_ff;
    uint32_t enc_layers, dec_layers;
    uint32_t src_vocab, tgt_vocab;
    const char *norm;          /* "pre" or "post" */
    const char *enc_branches;  /* e.g. "global fw bw local:3" */
    const char *dec_branches;  /* e.g. "global" */
    const char *fusion;        /* "sum", "concat" or "gate" */
    uint32_t gate_reduction;   /* r of the squeeze gate */
    int shared_embeddings;     /* 1: only src_embed (tgt_embed absent) */
    int tied_output;           /* 1: no out_proj */
    uint32_t bos_id, eos_id, pad_id, unk_id;
    double ln_eps;             /* written as ln_eps */
    double embed_scale;        /* > 0: written as embed_scale; 0: key omitted */
    /* models of other frameworks (docs/IMPORT.md); zero: today's defaults */
    const char *ffn_activation;    /* NULL: "relu" */
    const char *position_encoding; /* NULL: "sinusoid" */
    uint32_t position_offset;
    int output_bias;               /* 1: an out_bias tensor */
    int no_source_eos;             /* 1: source_eos 0 */
    int gate_shared;               /* 1: gate shared (one squeeze gate per sub-layer) */
    uint64_t seed;
    float weight_scale;        /* b = weight_scale / sqrt(fan_in) */
    /* SentencePiece .model bytes embedded as U8 tensors (docs/FORMAT.md):
     * `tokenizer.src` (shared by both sides when tgt is NULL) and
     * `tokenizer.tgt`; NULL: none.  Copied into the file, not validated. */
    const void *src_sp_model, *tgt_sp_model;
    size_t src_sp_size, tgt_sp_size;
} nmt_random_transformer_config;

/* Defaults: d_model 32, n_heads 4, d_ff 64, 2 + 2 layers, vocabularies 64,
 * norm "post", branches "global"/"global", fusion "sum", gate_reduction 4,
 * separate embeddings and output projection, pad 0, bos 1, eos 2, unk 3,
 * ln_eps 1e-5, embed_scale omitted, seed 1, weight_scale 1. */
void nmt_random_transformer_defaults(nmt_random_transformer_config *cfg);

/* Number of space-separated branches in a branch string (0 if NULL/empty). */
uint32_t nmt_random_count_branches(const char *branches);

/* Add all metadata and tensors to `w`.  NMT_ERR_INVALID_ARGUMENT when the
 * shapes cannot be formed: a zero size, no branch or more than 8, an
 * unknown norm/fusion string, d_model % gate_reduction != 0 for gated
 * fusion with several branches. */
nmt_status nmt_random_transformer_add(nmtw_writer *w, const nmt_random_transformer_config *cfg);

/* Convenience: the whole model written atomically to `path`. */
nmt_status nmt_random_transformer_write(const nmt_random_transformer_config *cfg, const char *path);

/* Convenience: the whole model as a malloc'd image (release with free()). */
nmt_status nmt_random_transformer_image(const nmt_random_transformer_config *cfg, void **data,
                                        size_t *size);

/* ---- any family ---------------------------------------------------------- */

typedef struct nmt_random_model {
    const nmt_family *fam;
    _Alignas(16) unsigned char cfg[NMT_FAMILY_CFG_BYTES]; /* the family's configuration struct */
    uint64_t present;      /* bit i: hparams[i] was set (random_args or a flag) */
    uint64_t seed;         /* default 1 */
    float weight_scale;    /* default 1: b = weight_scale / sqrt(fan_in) */
    /* SentencePiece .model bytes to embed (as in nmt_random_transformer_config) */
    const void *src_sp_model, *tgt_sp_model;
    size_t src_sp_size, tgt_sp_size;
} nmt_random_model;

/* The family `arch` with the table's defaults and its random_args.
 * NMT_ERR_MODEL_ARCH for an unknown arch (the known ones in why). */
nmt_status nmt_random_model_init(nmt_random_model *m, const char *arch, char *why, size_t why_cap);

/* Set the hyper-parameter with this flag or key from command-line text.
 * NMT_ERR_INVALID_ARGUMENT (why: "--FLAG expects RANGE, got 'TEXT'") when it
 * does not parse or is out of the table's range; NMT_ERR_MODEL_ARCH when
 * the family has no such hyper-parameter. */
nmt_status nmt_random_model_set(nmt_random_model *m, const char *flag, const char *text, char *why,
                                size_t why_cap);

/* The hyper-parameters, the random tensors and the tokenizers into w, after
 * the checks the runtime makes: a required key not given, the family's
 * finish (NMT_ERR_MODEL_ARCH), then the image as nmt_model_explain and
 * nmt_session_arena_size (default limits) see it.  On failure why says
 * which key or tensor and what is wrong, and w must not be written. */
nmt_status nmt_random_model_build(const nmt_random_model *m, nmtw_writer *w, char *why, size_t why_cap);

/* "--d-model N" style help of every hyper-parameter of fam from index
 * `first`, with the defaults of `nmt-edge-convert random`. */
void nmt_random_model_help(FILE *out, const nmt_family *fam, uint32_t first);

#ifdef __cplusplus
}
#endif
#endif
