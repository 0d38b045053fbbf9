/* SPDX-License-Identifier: MIT */
/* checkpoint.c — training checkpoints and deployment exports (see
 * checkpoint.h).  Every file goes through nmtw_write_file (temp file, fsync,
 * rename), so a crash leaves either the old file or the new one. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include "common.h"
#include "format.h"
#include "nmt_writer.h"

static nmt_status add_tokenizers(nmtw_writer *w, const ckpt_tokenizers *tok) {
    if (!tok || !tok->src) {
        if (tok && tok->tgt) return NMT_ERR_INVALID_ARGUMENT; /* tgt alone is an invalid model */
        return NMT_OK;
    }
    if (tok->src_size == 0 || tok->src_size > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
    nmt_status s = nmtw_add_blob(w, "tokenizer.src", tok->src, (uint32_t)tok->src_size);
    if (s != NMT_OK) return s;
    if (tok->tgt) {
        if (tok->tgt_size == 0 || tok->tgt_size > UINT32_MAX) return NMT_ERR_INVALID_ARGUMENT;
        s = nmtw_add_blob(w, "tokenizer.tgt", tok->tgt, (uint32_t)tok->tgt_size);
    }
    return s;
}

/* The whole model (+ optimizer state and train.* keys when st != NULL). */
static nmt_status build_writer(ntm_model *m, const ckpt_tokenizers *tok, const ckpt_state *st, nmtw_writer **out) {
    *out = NULL;
    nmtw_writer *w = nmtw_create();
    if (!w) return NMT_ERR_IO;
    nmt_status s = ntm_add_to_writer(m, w, st != NULL);
    if (s == NMT_OK && st) {
        const struct {
            const char *k;
            uint64_t v;
        } iv[] = {{"train.step", st->step},   {"train.epoch", st->epoch}, {"train.index", st->index},
                  {"train.seed", st->seed},   {"train.tokens", st->tokens}};
        for (size_t i = 0; s == NMT_OK && i < sizeof iv / sizeof iv[0]; i++)
            s = nmtw_set_i64(w, iv[i].k, (int64_t)iv[i].v); /* seed: two's-complement bits */
        if (s == NMT_OK) s = nmtw_set_f64(w, "train.best_bleu", st->best_bleu);
        if (s == NMT_OK) s = nmtw_set_f64(w, "train.elapsed_s", st->elapsed_s);
    }
    if (s == NMT_OK) s = add_tokenizers(w, tok);
    if (s != NMT_OK) {
        nmtw_destroy(w);
        return s;
    }
    *out = w;
    return NMT_OK;
}

/* Step of a numbered checkpoint name "ckpt-<digits>.nmt"; -1 otherwise. */
static int parse_ckpt_name(const char *name, uint64_t *step) {
    if (strncmp(name, "ckpt-", 5) != 0) return -1;
    const char *p = name + 5;
    uint64_t v = 0;
    int nd = 0;
    while (*p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
        nd++;
    }
    if (nd == 0 || strcmp(p, ".nmt") != 0) return -1;
    *step = v;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : (x > y);
}

/* Delete all but the newest `keep` numbered checkpoints of dir. */
/* last.nmt as a second name of the checkpoint just written (no second
 * copy of the bytes): a hard link under a temporary name, renamed over
 * last.nmt (atomic), then the directory synced.  NMT_ERR_IO where the file
 * system has no hard links (the caller then writes a copy). */
static nmt_status link_last(const char *path, const char *last, const char *dir) {
    char tmp[4200];
    int n = snprintf(tmp, sizeof tmp, "%s.link-%ld", last, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) return NMT_ERR_IO;
    (void)unlink(tmp);
    if (link(path, tmp) != 0) return NMT_ERR_IO;
    if (rename(tmp, last) != 0) {
        (void)unlink(tmp);
        return NMT_ERR_IO;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        int ok = fsync(fd) == 0;
        close(fd);
        if (!ok) return NMT_ERR_IO;
    }
    return NMT_OK;
}

static nmt_status prune(const char *dir, uint32_t keep, char *err, size_t err_cap) {
    DIR *d = opendir(dir);
    if (!d) {
        nmt_errf(err, err_cap, "%s: cannot list: %s", dir, strerror(errno));
        return NMT_ERR_IO;
    }
    uint64_t *steps = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t st;
        if (parse_ckpt_name(e->d_name, &st) != 0) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            uint64_t *p = realloc(steps, nc * sizeof *p);
            if (!p) {
                free(steps);
                closedir(d);
                nmt_errf(err, err_cap, "out of memory");
                return NMT_ERR_IO;
            }
            steps = p;
            cap = nc;
        }
        steps[n++] = st;
    }
    closedir(d);
    nmt_status s = NMT_OK;
    if (n > keep) {
        qsort(steps, n, sizeof *steps, cmp_u64);
        for (size_t i = 0; i < n - keep; i++) {
            char path[4096];
            int len = snprintf(path, sizeof path, "%s/ckpt-%08llu.nmt", dir, (unsigned long long)steps[i]);
            if (len < 0 || (size_t)len >= sizeof path) continue;
            if (remove(path) != 0 && errno != ENOENT && s == NMT_OK) {
                nmt_errf(err, err_cap, "%s: cannot remove: %s", path, strerror(errno));
                s = NMT_ERR_IO;
            }
        }
    }
    free(steps);
    return s;
}

nmt_status ckpt_save(ntm_model *m, const ckpt_tokenizers *tok, const ckpt_state *st, const char *dir,
                     uint32_t keep, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!m || !st || !dir || !*dir || keep == 0) {
        nmt_errf(err, err_cap, "ckpt_save: bad argument (model, state, directory, keep >= 1)");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    char path[4096], last[4096];
    int a = snprintf(path, sizeof path, "%s/ckpt-%08llu.nmt", dir, (unsigned long long)st->step);
    int b = snprintf(last, sizeof last, "%s/last.nmt", dir);
    if (a < 0 || b < 0 || (size_t)a >= sizeof path || (size_t)b >= sizeof last) {
        nmt_errf(err, err_cap, "ckpt_save: directory name too long");
        return NMT_ERR_INVALID_ARGUMENT;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        nmt_errf(err, err_cap, "%s: cannot create directory: %s", dir, strerror(errno));
        return NMT_ERR_IO;
    }
    nmtw_writer *w;
    nmt_status s = build_writer(m, tok, st, &w);
    if (s != NMT_OK) {
        nmt_errf(err, err_cap, "ckpt_save: cannot assemble the checkpoint: %s", nmt_status_str(s));
        return s;
    }
    char why[4400];
    s = nmtw_write_file_why(w, path, why, sizeof why);
    if (s != NMT_OK) {
        nmt_errf(err, err_cap, "%s", why[0] ? why : nmt_status_str(s));
        nmtw_destroy(w);
        return s;
    }
    s = link_last(path, last, dir);
    if (s != NMT_OK) s = nmtw_write_file_why(w, last, why, sizeof why); /* no hard links here: a copy */
    nmtw_destroy(w);
    if (s != NMT_OK) {
        nmt_errf(err, err_cap, "%s", why[0] ? why : nmt_status_str(s));
        return s;
    }
    return prune(dir, keep, err, err_cap);
}

/* The train.* metadata of an opened checkpoint into st; raw[i]: the i64
 * values as stored (step, epoch, index, seed, tokens), for the checks. */
static const char *const STATE_KEYS[5] = {"train.step", "train.epoch", "train.index", "train.seed", "train.tokens"};

static nmt_status read_fields(const nmt_file *f, ckpt_state *st, int64_t raw[5]) {
    memset(st, 0, sizeof *st);
    uint64_t *dst[5] = {&st->step, &st->epoch, &st->index, &st->seed, &st->tokens};
    for (int i = 0; i < 5; i++) {
        NMT_TRY(nmt_file_get_i64(f, STATE_KEYS[i], &raw[i]));
        *dst[i] = (uint64_t)raw[i];
    }
    NMT_TRY(nmt_file_get_f64(f, "train.best_bleu", &st->best_bleu));
    return nmt_file_get_f64(f, "train.elapsed_s", &st->elapsed_s);
}

nmt_status ckpt_read_state(const void *image, size_t size, ckpt_state *st) {
    if (!image || !st) return NMT_ERR_INVALID_ARGUMENT;
    nmt_file f;
    int64_t raw[5];
    NMT_TRY(nmt_file_open(&f, image, size, 0));
    return read_fields(&f, st, raw);
}

nmt_status ckpt_export(ntm_model *m, const ckpt_tokenizers *tok, const char *path) {
    return ckpt_export_why(m, tok, path, NULL, 0);
}

nmt_status ckpt_export_why(ntm_model *m, const ckpt_tokenizers *tok, const char *path, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!m || !path || !*path) return NMT_ERR_INVALID_ARGUMENT;
    nmtw_writer *w;
    nmt_status s = build_writer(m, tok, NULL, &w);
    if (s != NMT_OK) return s;
    s = nmtw_write_file_why(w, path, err, err_cap);
    nmtw_destroy(w);
    return s;
}

/* ------------------------------------------------------------------------ */
/* What --resume checks                                                     */
/* ------------------------------------------------------------------------ */

/* A field out of range: its reason into err, NMT_ERR_MODEL_CORRUPT. */
#define CKPT_BAD(...) return (nmt_errf(err, err_cap, __VA_ARGS__), NMT_ERR_MODEL_CORRUPT)

nmt_status ckpt_check_state(const void *image, size_t size, uint64_t name_step, ckpt_state *st, char *err,
                            size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!image || !st) return NMT_ERR_INVALID_ARGUMENT;
    nmt_file f;
    NMT_TRY(nmt_file_open_why(&f, image, size, 0, err, err_cap));
    int64_t raw[5];
    NMT_TRY(read_fields(&f, st, raw));
    for (int i = 0; i < 5; i++)
        if (raw[i] < 0) {
            nmt_errf(err, err_cap, "%s %lld: must be >= 0", STATE_KEYS[i], (long long)raw[i]);
            return NMT_ERR_MODEL_CORRUPT;
        }
    const unsigned long long step = (unsigned long long)st->step;
    if (st->step > CKPT_MAX_STEP) CKPT_BAD("train.step %llu: more than 2^40 steps", step);
    if (name_step != UINT64_MAX && st->step != name_step)
        CKPT_BAD("train.step %llu: the file's name says step %llu", step, (unsigned long long)name_step);
    const uint64_t max_batches = st->step * CKPT_MAX_BATCHES_PER_STEP;
    if (st->epoch > max_batches)
        CKPT_BAD("train.epoch %llu: more than %llu steps of at most %llu batches reach", (unsigned long long)st->epoch,
                 step, CKPT_MAX_BATCHES_PER_STEP);
    if (st->index > max_batches)
        CKPT_BAD("train.index %llu: more than %llu steps of at most %llu batches reach", (unsigned long long)st->index,
                 step, CKPT_MAX_BATCHES_PER_STEP);
    if (st->seed > CKPT_MAX_SEED)
        CKPT_BAD("train.seed %llu: outside --seed's range [0, %llu]", (unsigned long long)st->seed, CKPT_MAX_SEED);
    if (st->tokens < st->step)
        CKPT_BAD("train.tokens %llu: fewer than train.step %llu (each step trains on a token at least)",
                 (unsigned long long)st->tokens, step);
    if (st->tokens / CKPT_MAX_TOKENS_PER_BATCH > max_batches)
        CKPT_BAD("train.tokens %llu: more than %llu steps of at most %llu batches of %llu tokens reach",
                 (unsigned long long)st->tokens, step, CKPT_MAX_BATCHES_PER_STEP, CKPT_MAX_TOKENS_PER_BATCH);
    if (!(st->best_bleu >= 0 && st->best_bleu <= 100))
        CKPT_BAD("train.best_bleu %g: must be in [0, 100]", st->best_bleu);
    if (!(st->elapsed_s >= 0 && st->elapsed_s <= CKPT_MAX_ELAPSED_S))
        CKPT_BAD("train.elapsed_s %g: must be in [0, %g] seconds", st->elapsed_s, CKPT_MAX_ELAPSED_S);
    return NMT_OK;
}

nmt_status ckpt_check_position(const ckpt_state *st, uint32_t batches_per_epoch, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!st) return NMT_ERR_INVALID_ARGUMENT;
    if (st->index >= batches_per_epoch)
        CKPT_BAD("train.index %llu: not below the %u batches of an epoch of this corpus with these --max-tokens, "
                 "--max-seqs, --max-len and --max-ratio",
                 (unsigned long long)st->index, batches_per_epoch);
    return NMT_OK;
}

nmt_status ckpt_check_moments(const void *image, size_t size, size_t n_params, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!image) return NMT_ERR_INVALID_ARGUMENT;
    nmt_file f;
    NMT_TRY(nmt_file_open_why(&f, image, size, 0, err, err_cap));
    const char *names[2] = {"train.adam_m", "train.adam_v"};
    for (int i = 0; i < 2; i++) {
        nmt_tensor_view v;
        if (nmt_file_find(&f, names[i], &v) != NMT_OK) {
            nmt_errf(err, err_cap, "%s: missing (the optimizer's %s moment)", names[i], i ? "second" : "first");
            return NMT_ERR_MODEL_MISSING_TENSOR;
        }
        if (v.dtype != NMT_DTYPE_F32 || v.ndim != 1 || v.shape[0] != n_params) {
            char shape[64];
            nmt_shape_str(v.ndim, v.shape, shape, sizeof shape);
            nmt_errf(err, err_cap, "%s %s %s: must be fp32 [%zu], the model's parameter count", names[i],
                     nmt_dtype_table[v.dtype < NMT_DTYPE_COUNT_ ? v.dtype : 0].name, shape, n_params);
            return NMT_ERR_MODEL_TENSOR_SHAPE;
        }
        for (size_t k = 0; k < n_params; k++) {
            float x;
            memcpy(&x, (const char *)v.data + k * sizeof x, sizeof x);
            if (!isfinite(x)) CKPT_BAD("%s[%zu] %g: not finite", names[i], k, (double)x);
            if (i == 1 && x < 0)
                CKPT_BAD("%s[%zu] %g: must be >= 0 (a mean of squared gradients)", names[i], k, (double)x);
        }
    }
    return NMT_OK;
}
#undef CKPT_BAD
