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

/* The bounds a resumed checkpoint's fields are checked against: a step
 * counter no run reaches (2^40), --seed's range, and per step at most
 * --accum's maximum of batches, each of at most --max-tokens' maximum of
 * target tokens (a run may change those options between resumes). */
#define CKPT_MAX_STEP (1ull << 40)
#define CKPT_MAX_SEED (1ull << 30)
#define CKPT_MAX_BATCHES_PER_STEP 4096ull
#define CKPT_MAX_TOKENS_PER_BATCH (1ull << 24)
#define CKPT_MAX_ELAPSED_S 1e12

/* The train.* metadata of a checkpoint to resume, read as ckpt_read_state
 * does and every field checked against the others: train.step in
 * [0, CKPT_MAX_STEP] and equal to name_step (the step of the file's name
 * ckpt-<step>.nmt; UINT64_MAX: no name to match), train.epoch and
 * train.index at most train.step * CKPT_MAX_BATCHES_PER_STEP (each epoch
 * and each batch of one took a step), train.seed in [0, CKPT_MAX_SEED],
 * train.tokens in [train.step, train.step * CKPT_MAX_BATCHES_PER_STEP *
 * CKPT_MAX_TOKENS_PER_BATCH] (each step trains on one token at least),
 * train.best_bleu in [0, 100], train.elapsed_s finite in
 * [0, CKPT_MAX_ELAPSED_S].  err receives one line naming the field and its
 * value: "train.step -5: must be >= 0".  NMT_ERR_MODEL_ARCH for a field
 * absent or of the wrong type, NMT_ERR_MODEL_CORRUPT for one out of range,
 * the reader's MODEL_* status for an image that does not open. */
nmt_status ckpt_check_state(const void *image, size_t size, uint64_t name_step, ckpt_state *st, char *err,
                            size_t err_cap);

/* The data position st (train.epoch, train.index) against this corpus and
 * these batching options: train.index below batches_per_epoch
 * (NMT_ERR_MODEL_CORRUPT, err as above). */
nmt_status ckpt_check_position(const ckpt_state *st, uint32_t batches_per_epoch, char *err, size_t err_cap);

/* The optimizer moments of a checkpoint to resume against the model's
 * n_params: train.adam_m and train.adam_v present (MODEL_MISSING_TENSOR),
 * F32 of shape [n_params] (MODEL_TENSOR_SHAPE), every value finite and
 * adam_v's >= 0, a mean of squares (MODEL_CORRUPT); err as above
 * ("train.adam_v[12] -0.5: must be >= 0 (a mean of squared gradients)"). */
nmt_status ckpt_check_moments(const void *image, size_t size, size_t n_params, char *err, size_t err_cap);

/* Write a deployment model (no train.* keys or tensors) to path, atomically. */
nmt_status ckpt_export(ntm_model *m, const ckpt_tokenizers *tok, const char *path);
/* The same; on a write failure err receives "cannot write 'PATH': REASON"
 * (nmtw_write_file_why: missing directory, read-only, no space). */
nmt_status ckpt_export_why(ntm_model *m, const ckpt_tokenizers *tok, const char *path, char *err, size_t err_cap);

#endif
