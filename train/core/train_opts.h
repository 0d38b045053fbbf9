/* SPDX-License-Identifier: MIT */
/* train_opts.h — the command line of `nmt-edge-train` (train/cli/nmt_edge_train.c):
 * the options, their defaults and checks, and the usage text. */
#ifndef NMT_TRAIN_OPTS_H
#define NMT_TRAIN_OPTS_H

#include <stdio.h>

#define TRAIN_PROG "nmt-edge-train"
#define TRAIN_EXIT_USAGE 2

/* Bytes of a buffer that receives a reason (a library's err/why output)
 * printed by the trainer: room for the longest one, a family's
 * configuration reason (NMT_FAMILY_WHY_BYTES) behind train_model_as_arch's
 * prefix included, so no reason is cut before its cause. */
#define TRAIN_WHY_BYTES 512
/* ... and one that may name two paths (the data reader's "A has N lines
 * but B has M"). */
#define TRAIN_PATH_WHY_BYTES (2 * 4096 + TRAIN_WHY_BYTES)

typedef struct train_opts {
    const char *train_src, *train_tgt, *dev_src, *dev_tgt, *out_dir, *spm, *init, *device;
    int ids, resume, quiet, no_cache;
    int overwrite;      /* a new run may replace another run's files in --out */
    /* architecture (new models) */
    const char *arch;   /* "transformer" (HySAN) or "mgsa" */
    long d_model, heads, ff, enc_layers, dec_layers, vocab, gate_r;
    const char *norm, *enc_branches, *dec_branches, *fusion;
    const char *gate, *ffn_act, *pos_enc; /* --gate, --ffn-activation, --position-encoding */
    int separate_embeddings;
    const char *mg_layers, *mg_heads, *mg_compose, *mg_interact, *mg_chunk;  /* MG-SA; NULL: defaults */
    const char *ph_enc, *ph_dec, *ph_cross;  /* phrase attention; NULL: defaults */
    const char *train_spans, *dev_spans;     /* MG-SA syntax heads: spans files (tools/spans_file.h) */
    double mg_tag_lambda;                    /* MG-SA syntax heads: weight of the tag loss */
    const char *ba[7];  /* BA-NMT: emb, hidden, att, readout, hist, history, maxout (train_opts_ba_keys); NULL: defaults */
    double max_act_bytes;                    /* cap on a batch's planned activation bytes (0: device memory) */
    /* optimisation */
    const char *schedule;
    double lr, dropout, label_smoothing, clip_norm, weight_decay;
    double adam_beta1, adam_beta2, adam_eps;  /* Adam (0.9, 0.98, 1e-9) */
    long warmup, max_tokens, max_seqs, accum;
    long max_steps, max_epochs;
    double max_time;
    long seed;
    /* data */
    long max_len;
    double max_ratio;
    long spm_vocab;
    /* reporting */
    long log_every, eval_every, save_every, keep, beam, dev_bleu_max;
    /* several ranks (train/cli/train_dist.h) */
    double dist_timeout; /* seconds a collective may wait */
    double bucket_mb;    /* gradient all-reduce bucket */
    int no_overlap;      /* all-reduce only after the backward */
} train_opts;

/* Parse argv (after the program name; subcommands are the caller's) into o,
 * defaults first.  0 on success (*help set for --help), else
 * TRAIN_EXIT_USAGE after a message on stderr naming the option. */
int train_opts_parse(int argc, char **argv, train_opts *o, int *help);

/* The BA-NMT keys of train_opts.ba, in its order (the family's table keys). */
extern const char *const train_opts_ba_keys[7];

/* The --help text. */
void train_opts_usage(FILE *f);

/* Warnings about options that parse but defeat each other, one line each
 * on f: --max-steps below --warmup (a schedule with a warm-up), below
 * --log-every, below --eval-every (with a dev set) or below --save-every.
 * The count of lines written. */
int train_opts_warn(const train_opts *o, FILE *f);

/* Every option of o, resolved (defaults filled in), as one JSON object on
 * f, keyed by the option's long name ("max-steps" for --max-steps); an
 * option without a value is null, a flag true or false, --adam-betas an
 * array of two numbers. */
void train_opts_write_json(const train_opts *o, FILE *f);

/* s as a JSON string (quotes, backslashes and control characters
 * escaped; other bytes as they are), or null when s is NULL. */
void train_opts_json_str(FILE *f, const char *s);

#endif
