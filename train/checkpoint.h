/* SPDX-License-Identifier: MIT */
/* checkpoint.h — training checkpoints: a .nmt file (docs/FORMAT.md) that is
 * the deployment model (metadata + F32 parameters + embedded tokenizers, so
 * `nmt-edge` and `nmt-edge-convert` read it directly) plus
 *   tensors   train.adam_m, train.adam_v      (F32, n_params)
 *   metadata  train.step, train.epoch, train.index (data position),
 *             train.seed, train.tokens (target tokens seen),
 *             train.best_bleu (f64), train.elapsed_s (f64)
 * Written atomically (temp file, fsync, rename, fsync of the directory:
 * nmtw_write_file), named <dir>/ckpt-<step 8 digits>.nmt with <dir>/last.nmt
 * a hard link to it (a link under a temporary name renamed over last.nmt;
 * a copy written the same atomic way where the file system has no hard
 * links); only the newest `keep` numbered ones are kept (older deleted
 * after the new one is durable). */
#ifndef NMT_TRAIN_CHECKPOINT_H
#define NMT_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "nmt_edge.h"
#include "train_model.h"

typedef struct ckpt_state {
    uint64_t step, epoch, index, seed, tokens;
    double best_bleu, elapsed_s;
} ckpt_state;

/* Tokenizer blobs (tokenizer.src / tokenizer.tgt U8 tensors) to embed: the
 * raw SentencePiece model bytes; tgt NULL = shared. */
typedef struct ckpt_tokenizers {
    const void *src, *tgt;
    size_t src_size, tgt_size;
} ckpt_tokenizers;

/* Write <dir>/ckpt-<step>.nmt and <dir>/last.nmt, prune to `keep` (>= 1).
 * dir is created if missing (one level).  Pruning looks only at names
 * "ckpt-<digits>.nmt" and keeps the highest steps.  err (may be NULL)
 * receives a one-line message on failure ("cannot write 'PATH': REASON" for
 * a write that fails: nmtw_write_file_why).  tok may be NULL (no tokenizer). */
nmt_status ckpt_save(ntm_model *m, const ckpt_tokenizers *tok, const ckpt_state *st, const char *dir,
                     uint32_t keep, char *err, size_t err_cap);

/* Read the train.* metadata of a checkpoint image (NMT_ERR_MODEL_ARCH if it
 * is a plain model without them). */
nmt_status ckpt_read_state(const void *image, size_t size, ckpt_state *st);

/* Write a deployment model (no train.* keys or tensors) to path, atomically. */
nmt_status ckpt_export(ntm_model *m, const ckpt_tokenizers *tok, const char *path);
/* The same; on a write failure err receives "cannot write 'PATH': REASON"
 * (nmtw_write_file_why: missing directory, read-only, no space). */
nmt_status ckpt_export_why(ntm_model *m, const ckpt_tokenizers *tok, const char *path, char *err, size_t err_cap);

#endif
