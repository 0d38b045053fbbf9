/* SPDX-License-Identifier: MIT */
/* train_env.c — the device and tokenizer of an `nmt-edge-train` command
 * (train_env.h). */
#include "train_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_env.h"
#include "tool_file.h"
#include "tool_out.h"
#include "train_opts.h"

#define PROG TRAIN_PROG

int train_fail(const char *what, nmt_status st) {
    fprintf(stderr, PROG ": %s: %s\n", what, nmt_status_str(st));
    return 1;
}

void *train_slurp(const char *path, size_t *size) {
    char why[NMT_TOOL_WHY_BYTES];
    void *buf = nmt_tool_read_file(path, 0, size, why, sizeof why);
    if (buf == NULL && (errno == ENODEV || errno == EFBIG)) {
        int e = errno;
        fprintf(stderr, PROG ": %s\n", why);
        errno = e;
    }
    return buf;
}

int train_env_open_device(train_env *e, const char *spec, int no_cache) {
    nmt_device_params dp;
    memset(&dp, 0, sizeof dp);
    nmt_tool_device_params(&dp, spec, no_cache ? NULL : e->cache_dir, sizeof e->cache_dir);
    size_t fp = (nmt_device_footprint() + 63) / 64 * 64;
    e->dev_mem = aligned_alloc(64, fp ? fp : 64);
    if (!e->dev_mem) return train_fail("device memory", NMT_ERR_INVALID_ARGUMENT);
    nmt_tool_signals sigs;
    nmt_tool_signals_save(&sigs);
    nmt_status s = nmt_device_open(&dp, e->dev_mem, fp, &e->dev);
    nmt_tool_signals_restore(&sigs); /* the OpenCL runtime may have installed its own (tool_out.h) */
    if (s != NMT_OK) {
        e->dev = NULL;
        return train_fail("cannot open the OpenCL device", s);
    }
    nmt_device_info di;
    nmt_device_get_info(e->dev, &di);
    fprintf(stderr, PROG ": device %s (%s)\n", di.device_name, di.platform_name);
    return 0;
}

/* The tokenizer over e->spm_bytes. */
static int create_tokenizer(train_env *e) {
    size_t need;
    nmt_status s = nmt_tokenizer_arena_size(e->spm_bytes, e->spm_size, 1 << 16, &need);
    if (s != NMT_OK) return train_fail("SentencePiece model", s);
    e->tok_arena = malloc(need + NMT_ARENA_ALIGNMENT);
    if (!e->tok_arena) return train_fail("tokenizer", NMT_ERR_INVALID_ARGUMENT);
    s = nmt_tokenizer_create(e->spm_bytes, e->spm_size, 1 << 16, e->tok_arena, need + NMT_ARENA_ALIGNMENT, &e->tok);
    if (s != NMT_OK) return train_fail("SentencePiece model", s);
    return 0;
}

int train_env_tokenizer_from_model(train_env *e, const void *image, size_t size) {
    const void *p = NULL;
    size_t n = 0;
    nmt_status s = nmt_model_tokenizer(image, size, 0, &p, &n);
    if (s != NMT_OK) return train_fail("the model has no usable embedded tokenizer (use --ids?)", s);
    e->spm_bytes = malloc(n);
    if (!e->spm_bytes) return train_fail("tokenizer", NMT_ERR_INVALID_ARGUMENT);
    memcpy(e->spm_bytes, p, n);
    e->spm_size = n;
    return create_tokenizer(e);
}

int train_env_tokenizer_from_file(train_env *e, const char *path) {
    e->spm_bytes = train_slurp(path, &e->spm_size);
    if (!e->spm_bytes) {
        fprintf(stderr, PROG ": cannot read '%s': %s\n", path, strerror(errno));
        return 1;
    }
    return create_tokenizer(e);
}

void train_env_close(train_env *e) {
    if (e->dev) nmt_device_close(e->dev);
    free(e->dev_mem);
    free(e->tok_arena);
    free(e->spm_bytes);
    memset(e, 0, sizeof *e);
}
