/* SPDX-License-Identifier: MIT */
/* train_env.h — what every `nmt-edge-train` command opens: the OpenCL
 * device (with the program cache of tool_env.h) and a SentencePiece
 * tokenizer, from a model's embedded blob or a file.  The training run
 * (train/cli/nmt_edge_train.c) and the analysis commands (train_cmds.c) share
 * it.  Messages go to stderr prefixed with the program's name; functions
 * returning int give 0 on success and 1 after a message. */
#ifndef NMT_TRAIN_ENV_H
#define NMT_TRAIN_ENV_H

#include <stddef.h>

#include "nmt_edge.h"

typedef struct train_env {
    void *dev_mem;          /* the device handle's memory (nmt_device_footprint) */
    nmt_device *dev;
    char cache_dir[4096];   /* the compiled-program cache */
    void *spm_bytes;        /* the SentencePiece model (owned) */
    size_t spm_size;
    void *tok_arena;        /* the tokenizer's arena (owned) */
    nmt_tokenizer *tok;
} train_env;

/* "nmt-edge-train: WHAT: STATUS" on stderr; 1. */
int train_fail(const char *what, nmt_status st);

/* The whole of a regular file (tool_file.h), malloc'd; NULL with errno set
 * (a refusal errno cannot say is printed here). */
void *train_slurp(const char *path, size_t *size);

/* Open the device SPEC (NULL: the default) and print its name; no_cache
 * turns the program cache off. */
int train_env_open_device(train_env *e, const char *spec, int no_cache);

/* The tokenizer of a model image's embedded source SentencePiece model. */
int train_env_tokenizer_from_model(train_env *e, const void *image, size_t size);

/* The tokenizer of a SentencePiece model file. */
int train_env_tokenizer_from_file(train_env *e, const char *path);

/* Release everything (a zeroed env is fine). */
void train_env_close(train_env *e);

#endif
