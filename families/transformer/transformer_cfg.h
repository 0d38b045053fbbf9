/* transformer_cfg.h — the hyper-parameters of the Transformer / HySAN family
 * as the .nmt metadata stores them (docs/FORMAT.md): one parser for the
 * runtime (transformer.c) and the trainer (train/tf_train.c), so a key, a
 * default or a check cannot differ between them.  Internal header. */
#ifndef NMT_TRANSFORMER_CFG_H
#define NMT_TRANSFORMER_CFG_H

#include "format.h"
#include "ops.h" /* nmt_branch */

enum { NMT_TF_FUSE_SUM = 0, NMT_TF_FUSE_CONCAT = 1, NMT_TF_FUSE_GATE = 2 };

#define NMT_TF_MAX_LAYERS 64
#define NMT_TF_MAX_DIM (1u << 16)

typedef struct nmt_tf_cfg {
    uint32_t d, heads, dh, ff, enc_layers, dec_layers, src_vocab, tgt_vocab, gate_r;
    int pre_norm, shared_emb, tied_out, fusion; /* fusion: NMT_TF_FUSE_* */
    float eps, emb_scale;
    uint32_t n_enc_br, n_dec_br;
    nmt_branch enc_br[NMT_MAX_BRANCHES], dec_br[NMT_MAX_BRANCHES];
    uint32_t bos, eos, pad, unk;
    int any_q8; /* runtime only: some 2-D weight is I8 (set while checking tensors) */
} nmt_tf_cfg;

/* Every hyper-parameter key with its default and checks (the "arch" key is
 * the caller's); NMT_ERR_MODEL_ARCH for a missing required or invalid
 * value.  Tensors are not looked at; any_q8 is 0. */
nmt_status nmt_tf_cfg_parse(const nmt_file *f, nmt_tf_cfg *c);

/* A branch list as the metadata writes it ("global fw bw local:3"). */
void nmt_tf_branches_str(const nmt_branch *br, uint32_t n, char *buf, size_t cap);

/* The architecture part of nmt_model_info (arch, sizes, branches, fusion,
 * special ids). */
void nmt_tf_cfg_info(const nmt_tf_cfg *c, nmt_model_info *info);

#endif
