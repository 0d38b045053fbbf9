/* random_model.h — random-weight Transformer/HySAN models for tests and
 * benchmarks, from shape options: the metadata through the family's
 * hyper-parameter table and the tensors from its catalogue
 * (writer/family_writer.h: the weight distributions and the reproducible
 * stream, drawn tensor by tensor in file order).  embed_scale is written as
 * sqrt(d_model) when not given.
 *
 * The generator checks only what it needs to compute shapes; it will write
 * models the runtime rejects (e.g. d_model not divisible by n_heads, a `bw`
 * decoder branch), which is useful for negative tests.
 */
#ifndef NMT_RANDOM_MODEL_H
#define NMT_RANDOM_MODEL_H

#include "nmt_writer.h"

#include <stddef.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif
