/* SPDX-License-Identifier: MIT */
/* nmt_edge_train.c — `nmt-edge-train`: trains a model of any family with a
 * trainer record (train/families/train_family.h; the Transformer, HySAN, MG-SA and
 * phrase attention: train/families/transformer/tf_train.c) on the runtime's own
 * kernels, with token batches from length buckets (train/core/data.c), Adam with a warm-up schedule, gradient
 * clipping and accumulation, dev loss and BLEU (decoded with the runtime's
 * beam search), atomic checkpoints and bit-exact --resume
 * (train/core/checkpoint.c), a live progress line, a JSON-lines log (the run's
 * configuration first, then train and dev records; docs/TRAINING.md "The
 * log") and an SVG plot (train/core/plot.c).  The device and tokenizer come from
 * train/cli/train_env.c, the other commands (plot, bleu, attention) are in
 * train/cli/train_cmds.c.  docs/TRAINING.md is the user's guide. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "bleu.h"
#include "checkpoint.h"
#include "data.h"
#include "format.h"
#include "model_arch.h"
#include "nmt_edge.h"
#include "nmt_writer.h"
#include "plot.h"
#include "random_model.h"
#include "run_lock.h"
#include "schedule.h"
#include "train_model.h"
#include "train_cmds.h"
#include "train_dist.h"
#include "train_env.h"
#include "train_opts.h"

#define PROG TRAIN_PROG
#define EXIT_USAGE TRAIN_EXIT_USAGE

/* ------------------------------------------------------------------------ */
/* Small utilities                                                          */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig) { g_signal = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int mkdir_p(const char *path) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    return 0;
}

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ------------------------------------------------------------------------ */
/* The training run                                                         */
/* ------------------------------------------------------------------------ */

typedef struct run {
    train_opts o;
    char dir[4096];
    train_env env;  /* device; tokenizer (text mode) */
    /* data */
    td_corpus *train, *dev_c;
    td_batcher *tb, *db;
    /* model */
    ntm_model *m;
    uint32_t src_vocab, tgt_vocab;
    int32_t bos, eos, pad, unk;
    int src_eos; /* the model's source_eos: EOS after every source */
    ckpt_state st;
    FILE *log;
    sched_params sp;
    double t_start, elapsed0;
    int tty;
    train_dist dist; /* this process's rank among several (train_dist.h); rank 0 of 1 alone */
    char dev_spec[32];
    int lock_fd;     /* rank 0: DIR/.lock, held until exit (run_lock.h); -1: none */
} run;

static void log_json(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_json(run *r, const char *fmt, ...) {
    if (!r->log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->log, fmt, ap);
    va_end(ap);
    fputc('\n', r->log);
    fflush(r->log);
}

/* The config record that starts each run's part of the log (a new run's
 * first line; each --resume appends another): the program's version and
 * every option, resolved, and what the run built from them. */
static void log_config(run *r) {
    if (!r->log) return;
    nmt_device_info di;
    memset(&di, 0, sizeof di);
    nmt_device_get_info(r->env.dev, &di);
    fprintf(r->log, "{\"kind\":\"config\",\"program\":\"" PROG "\",\"version\":\"%s\",\"start_step\":%llu,"
                    "\"options\":", nmt_version(), (unsigned long long)r->st.step);
    train_opts_write_json(&r->o, r->log);
    fprintf(r->log, ",\"params\":%zu,\"src_vocab\":%u,\"tgt_vocab\":%u,\"batches_per_epoch\":%u,\"ranks\":%d,"
                    "\"device_name\":",
            ntm_n_params(r->m), r->src_vocab, r->tgt_vocab, td_batches_per_epoch(r->tb), r->dist.size);
    train_opts_json_str(r->log, di.device_name[0] ? di.device_name : NULL);
    fputs("}\n", r->log);
    fflush(r->log);
}

static int open_device(run *r) {
    const char *spec = train_dist_device(&r->dist, r->o.device, r->dev_spec, sizeof r->dev_spec);
    return train_env_open_device(&r->env, spec, r->o.no_cache);
}

/* The line the child writes to the log when spm_train cannot be run. */
#define SPM_EXEC_FAILED "nmt-edge-train: cannot run spm_train: "

/* Why spm_train failed, from its log: not installed (the exec failed), or
 * its own reason (the last lines of its log, where it says why). 1. */
static int spm_failed(int status, const char *log_path) {
    char tail[4096] = "";
    FILE *lf = fopen(log_path, "r");
    if (lf != NULL) {
        if (fseek(lf, 0, SEEK_END) == 0) {
            long end = ftell(lf);
            fseek(lf, end > (long)sizeof tail - 1 ? end - (long)(sizeof tail - 1) : 0, SEEK_SET);
        }
        size_t n = fread(tail, 1, sizeof tail - 1, lf);
        tail[n] = '\0';
        fclose(lf);
    }
    const char *exec_failed = strstr(tail, SPM_EXEC_FAILED);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && exec_failed != NULL) {
        const char *reason = exec_failed + strlen(SPM_EXEC_FAILED);
        fprintf(stderr,
                PROG ": spm_train is not installed (%.*s): install it with 'apt-get install sentencepiece' "
                     "or pass --spm MODEL\n",
                (int)strcspn(reason, "\n"), reason);
        return 1;
    }
    /* the last two non-empty lines of the log: spm_train's reason */
    size_t len = strlen(tail);
    while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == '\r' || tail[len - 1] == ' ')) tail[--len] = '\0';
    const char *start = tail;
    int lines = 0;
    for (size_t i = len; i > 0; i--)
        if (tail[i - 1] == '\n' && ++lines == 2) {
            start = tail + i;
            break;
        }
    char reason[sizeof tail];
    snprintf(reason, sizeof reason, "%s", *start ? start : "(its log is empty)");
    for (char *q = reason; *q; q++)
        if (*q == '\n' || *q == '\r') *q = ' ';
    if (WIFEXITED(status))
        fprintf(stderr, PROG ": spm_train failed (exit %d): %s (log: %s; or pass --spm MODEL)\n",
                WEXITSTATUS(status), reason, log_path);
    else
        fprintf(stderr, PROG ": spm_train failed (signal %d): %s (log: %s; or pass --spm MODEL)\n",
                WIFSIGNALED(status) ? WTERMSIG(status) : 0, reason, log_path);
    return 1;
}

/* Train a SentencePiece model with spm_train into DIR/spm.model. */
static int train_spm(run *r, char *path, size_t cap) {
    snprintf(path, cap, "%s/spm.model", r->dir);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        fprintf(stderr, PROG ": using the existing %s\n", path);
        return 0;
    }
    char input[8300], prefix[4200], vocab[64];
    snprintf(input, sizeof input, "--input=%s,%s", r->o.train_src, r->o.train_tgt);
    snprintf(prefix, sizeof prefix, "--model_prefix=%s/spm", r->dir);
    snprintf(vocab, sizeof vocab, "--vocab_size=%ld", r->o.spm_vocab);
    fprintf(stderr, PROG ": training a %ld-piece SentencePiece model with spm_train\n", r->o.spm_vocab);
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/spm_train.log", r->dir);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        FILE *lf = freopen(log_path, "w", stderr);
        (void)lf;
        execlp("spm_train", "spm_train", input, prefix, vocab, "--model_type=unigram",
               "--character_coverage=1.0", "--byte_fallback=true", "--unk_id=0", "--bos_id=1", "--eos_id=2",
               "--pad_id=3", "--input_sentence_size=2000000", "--shuffle_input_sentence=true",
               (char *)NULL);
        fprintf(stderr, SPM_EXEC_FAILED "%s\n", strerror(errno));
        fflush(stderr); /* _exit does not flush */
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    return spm_failed(status, log_path);
}

static int setup_tokenizer(run *r, const void *model_image, size_t model_size) {
    if (r->o.ids) return 0;
    if (model_image) return train_env_tokenizer_from_model(&r->env, model_image, model_size);
    char path[4200];
    if (r->o.spm) {
        snprintf(path, sizeof path, "%s", r->o.spm);
    } else if (train_spm(r, path, sizeof path)) {
        return 1;
    }
    if (train_env_tokenizer_from_file(&r->env, path)) return 1;
    nmt_tokenizer_info ti;
    nmt_tokenizer_get_info(r->env.tok, &ti);
    if (ti.pad_id < 0 || ti.bos_id < 0 || ti.eos_id < 0) {
        fprintf(stderr,
                PROG ": the SentencePiece model needs pad, bos and eos pieces (spm_train --pad_id=3 "
                     "--bos_id=1 --eos_id=2); it has pad %d bos %d eos %d\n",
                ti.pad_id, ti.bos_id, ti.eos_id);
        return 1;
    }
    r->src_vocab = r->tgt_vocab = ti.vocab_size;
    r->bos = ti.bos_id;
    r->eos = ti.eos_id;
    r->pad = ti.pad_id;
    r->unk = ti.unk_id;
    return 0;
}

/* A new model image: random weights (LeCun-uniform: variance 1/fan_in). */
static int new_model_image(run *r, void **img, size_t *size) {
    const train_opts *o = &r->o;
    nmt_random_transformer_config c;
    nmt_random_transformer_defaults(&c);
    c.d_model = (uint32_t)o->d_model;
    c.n_heads = (uint32_t)o->heads;
    c.d_ff = (uint32_t)o->ff;
    c.enc_layers = (uint32_t)o->enc_layers;
    c.dec_layers = (uint32_t)o->dec_layers;
    c.src_vocab = r->src_vocab;
    c.tgt_vocab = r->tgt_vocab;
    c.norm = o->norm;
    c.enc_branches = o->enc_branches;
    c.dec_branches = o->dec_branches;
    c.fusion = o->fusion;
    c.gate_reduction = (uint32_t)o->gate_r;
    c.gate_shared = !strcmp(o->gate, "shared");
    c.ffn_activation = o->ffn_act;
    c.position_encoding = o->pos_enc;
    c.shared_embeddings = !o->separate_embeddings;
    c.tied_output = 1;
    c.bos_id = (uint32_t)r->bos;
    c.eos_id = (uint32_t)r->eos;
    c.pad_id = (uint32_t)r->pad;
    c.unk_id = (uint32_t)r->unk;
    c.ln_eps = 1e-5;
    c.seed = (uint64_t)o->seed;
    c.weight_scale = 1.7320508f; /* sqrt(3): U(-b, b) with variance 1/fan_in */
    c.src_sp_model = r->env.spm_bytes;
    c.src_sp_size = r->env.spm_size;
    nmt_status s = nmt_random_transformer_image(&c, img, size);
    if (s != NMT_OK) return train_fail("cannot build the model (check the architecture options)", s);
    if (strcmp(o->arch, "transformer") != 0) {
        /* the same weights as the Transformer of this seed, as `arch` */
        static const char *const keys[15] = {"mg_layers", "mg_heads", "mg_compose", "mg_interact", "mg_chunk",
                                             "ph_enc", "ph_dec", "ph_cross", "emb", "hidden", "att", "readout",
                                             "hist", "history", "maxout"}; /* ba: train_opts_ba_keys */
        const char *const values[15] = {o->mg_layers, o->mg_heads, o->mg_compose, o->mg_interact, o->mg_chunk,
                                        o->ph_enc, o->ph_dec, o->ph_cross, o->ba[0], o->ba[1], o->ba[2], o->ba[3],
                                        o->ba[4], o->ba[5], o->ba[6]};
        char err[TRAIN_WHY_BYTES] = ""; /* the family's reason whole, its cause last */
        void *as = NULL;
        size_t as_size = 0;
        s = train_model_as_arch(*img, *size, o->arch, keys, values, 15, c.seed, c.weight_scale, &as, &as_size, err,
                                sizeof err);
        free(*img);
        *img = as;
        *size = as_size;
        if (s != NMT_OK) {
            fprintf(stderr, PROG ": cannot build the %s model: %s (%s)\n", o->arch, err, nmt_status_str(s));
            return 1;
        }
    }
    return 0;
}

/* Newest checkpoint in DIR whose checksums verify: path into buf, the step
 * of its name into *name_step (its train.* fields are build_model's to
 * check: a bad one is refused, not skipped). */
static int find_resume(const char *dir, char *buf, size_t cap, uint64_t *name_step) {
    DIR *d = opendir(dir);
    if (!d) return 1;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* ckpt-NNNNNNNN.nmt (temporary files of interrupted writes differ) */
        if (strncmp(e->d_name, "ckpt-", 5) != 0 || strlen(e->d_name) != 17 || strcmp(e->d_name + 13, ".nmt") != 0)
            continue;
        long step = atol(e->d_name + 5);
        if (step > best) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            size_t n;
            void *img = train_slurp(path, &n);
            nmt_file f;
            if (img && nmt_file_open(&f, img, n, 1) == NMT_OK) {
                best = step;
                *name_step = (uint64_t)step;
                snprintf(buf, cap, "%s", path);
            } else {
                fprintf(stderr, PROG ": skipping the unreadable checkpoint %s\n", path);
            }
            free(img);
        }
    }
    closedir(d);
    return best < 0;
}

/* MG-SA syntax heads: a spans file onto a loaded corpus (data.h td_set_spans). */
static int attach_spans(td_corpus *c, const char *path) {
    char err[TRAIN_PATH_WHY_BYTES] = "";
    tsp_file *f = NULL;
    nmt_status s = tsp_read(path, &f, err, sizeof err);
    if (s == NMT_OK) s = td_set_spans(c, f, err, sizeof err);
    tsp_free(f);
    if (s != NMT_OK) {
        fprintf(stderr, PROG ": %s%s%s\n", nmt_status_str(s), *err ? ": " : "", err);
        return 1;
    }
    return 0;
}

/* A checkpoint --resume refuses: "PROG: 'PATH': FIELD VALUE: why"; 1. */
static int resume_refused(const char *path, const char *why, nmt_status s) {
    fprintf(stderr, PROG ": '%s': %s\n", path, why[0] ? why : nmt_status_str(s));
    return 1;
}

static int build_model(run *r) {
    void *img = NULL;
    size_t size = 0;
    int from_file = 0;
    nmt_status s;
    char path[4400], why[TRAIN_WHY_BYTES] = "";
    uint64_t name_step = UINT64_MAX;
    if (r->o.resume) {
        if (find_resume(r->dir, path, sizeof path, &name_step)) {
            fprintf(stderr, PROG ": --resume: no valid checkpoint (ckpt-*.nmt) in %s\n", r->dir);
            return 1;
        }
        from_file = 1;
    } else if (r->o.init) {
        snprintf(path, sizeof path, "%s", r->o.init);
        from_file = 1;
    }
    if (from_file) {
        img = train_slurp(path, &size);
        if (!img) {
            fprintf(stderr, PROG ": cannot read '%s': %s\n", path, strerror(errno));
            return 1;
        }
        nmt_model_info mi;
        s = nmt_model_inspect(img, size, &mi);
        if (s != NMT_OK) {
            free(img);
            fprintf(stderr, PROG ": '%s': %s\n", path, nmt_status_str(s));
            return 1;
        }
        r->src_vocab = mi.src_vocab;
        r->tgt_vocab = mi.tgt_vocab;
        r->bos = (int32_t)mi.bos_id;
        r->eos = (int32_t)mi.eos_id;
        r->pad = (int32_t)mi.pad_id;
        r->unk = (int32_t)mi.unk_id;
        if (r->o.resume) { /* every train.* field checked before the run directory changes */
            s = ckpt_check_state(img, size, name_step, &r->st, why, sizeof why);
            if (s != NMT_OK) {
                free(img);
                return resume_refused(path, why, s);
            }
            r->o.seed = (long)r->st.seed; /* the run's data order and dropout, whatever --seed says */
            fprintf(stderr, PROG ": resuming from %s (step %llu)\n", path, (unsigned long long)r->st.step);
        }
        if (setup_tokenizer(r, img, size)) {
            free(img);
            return 1;
        }
    } else {
        if (r->o.ids) {
            r->src_vocab = r->tgt_vocab = (uint32_t)r->o.vocab;
            r->pad = 0;
            r->bos = 1;
            r->eos = 2;
            r->unk = 3;
        } else if (setup_tokenizer(r, NULL, 0)) {
            return 1;
        }
        if (new_model_image(r, &img, &size)) return 1;
    }
    r->o.vocab = r->src_vocab;
    int rc = 0;
    { /* the model's source_eos key (an imported OpenNMT model: 0) */
        nmt_file mf;
        int64_t src_eos = 1;
        if (nmt_file_open(&mf, img, size, 1) == NMT_OK) nmt_file_get_i64_or(&mf, "source_eos", 1, &src_eos);
        r->src_eos = src_eos != 0;
    }
    nmt_model_info smi; /* MG-SA syntax heads (a resumed or --init model too) train on spans only */
    if (!r->o.train_spans && nmt_model_inspect(img, size, &smi) == NMT_OK && !strcmp(smi.arch, "mgsa") &&
        strstr(smi.family_config, "syntax")) {
        fprintf(stderr, PROG ": the model has syntax heads: give --train-src-spans FILE (nmt-edge-train parse-spans "
                             "writes one)\n");
        free(img);
        return TRAIN_EXIT_USAGE;
    }
    /* data first: the limits come from the batches */
    td_stats ts;
    char err[TRAIN_PATH_WHY_BYTES] = "";
    td_filter flt = {(uint32_t)r->o.max_len, r->o.max_ratio};
    if (r->o.ids)
        s = td_load_ids(r->o.train_src, r->o.train_tgt, r->src_vocab, r->src_vocab, &flt, &r->train, &ts, err,
                        sizeof err);
    else
        s = td_load(r->o.train_src, r->o.train_tgt, r->env.tok, r->env.tok, &flt, &r->train, &ts, err, sizeof err);
    if (s != NMT_OK) {
        fprintf(stderr, PROG ": %s%s%s\n", nmt_status_str(s), *err ? ": " : "", err);
        rc = 1;
    }
    if (!rc) {
        fprintf(stderr,
                PROG ": train: %llu pairs kept of %llu (dropped: %llu empty, %llu long, %llu ratio); "
                     "%llu source and %llu target tokens\n",
                (unsigned long long)ts.kept, (unsigned long long)ts.lines, (unsigned long long)ts.dropped_empty,
                (unsigned long long)ts.dropped_long, (unsigned long long)ts.dropped_ratio,
                (unsigned long long)ts.src_tokens, (unsigned long long)ts.tgt_tokens);
        if (ts.kept == 0) {
            fprintf(stderr, PROG ": no training pairs left after filtering\n");
            rc = 1;
        }
    }
    if (!rc && r->o.train_spans) rc = attach_spans(r->train, r->o.train_spans);
    if (!rc && r->o.dev_src) {
        td_filter dflt = {(uint32_t)r->o.max_len, 0};
        if (r->o.ids)
            s = td_load_ids(r->o.dev_src, r->o.dev_tgt, r->src_vocab, r->src_vocab, &dflt, &r->dev_c, &ts, err,
                            sizeof err);
        else
            s = td_load(r->o.dev_src, r->o.dev_tgt, r->env.tok, r->env.tok, &dflt, &r->dev_c, &ts, err, sizeof err);
        if (s != NMT_OK) {
            fprintf(stderr, PROG ": %s%s%s\n", nmt_status_str(s), *err ? ": " : "", err);
            rc = 1;
        }
        if (!rc && r->o.dev_spans) rc = attach_spans(r->dev_c, r->o.dev_spans);
        if (!rc) fprintf(stderr, PROG ": dev: %llu pairs\n", (unsigned long long)ts.kept);
        if (!rc && ts.kept == 0) r->dev_c = (td_free(r->dev_c), NULL);
    }
    if (!rc) {
        s = td_batcher_create(r->train, (uint32_t)r->o.max_tokens, (uint32_t)r->o.max_seqs, (uint64_t)r->o.seed,
                              r->bos, r->eos, r->pad, &r->tb);
        if (s == NMT_OK && r->dev_c)
            s = td_batcher_create(r->dev_c, (uint32_t)r->o.max_tokens, (uint32_t)r->o.max_seqs, 0, r->bos, r->eos,
                                  r->pad, &r->db);
        if (s != NMT_OK) rc = train_fail("batching (is --max-tokens below 2 * (--max-len + 1)?)", s);
        td_batcher_source_eos(r->tb, r->src_eos);
        td_batcher_source_eos(r->db, r->src_eos);
    }
    if (!rc && r->o.resume) {
        td_position p = {r->st.epoch, r->st.index};
        s = ckpt_check_position(&r->st, td_batches_per_epoch(r->tb), why, sizeof why);
        if (s == NMT_OK) s = td_seek(r->tb, p);
        if (s != NMT_OK) rc = resume_refused(path, why, s);
    }
    if (!rc) {
        nmt_train_limits lim;
        memset(&lim, 0, sizeof lim);
        td_batcher_bounds(r->tb, &lim.max_seqs, &lim.max_src_len, &lim.max_tgt_len);
        if (r->db) {
            uint32_t a, b, c;
            td_batcher_bounds(r->db, &a, &b, &c);
            lim.max_seqs = NMT_MAX(lim.max_seqs, a);
            lim.max_src_len = NMT_MAX(lim.max_src_len, b);
            lim.max_tgt_len = NMT_MAX(lim.max_tgt_len, c);
        }
        lim.max_tokens = (uint32_t)r->o.max_tokens;
        lim.max_act_bytes = (uint64_t)r->o.max_act_bytes;
        const size_t act = ntm_act_bytes(img, size, &lim); /* families whose activations outgrow tokens */
        if (act && r->o.max_act_bytes > 0 && act > (uint64_t)r->o.max_act_bytes)
            fprintf(stderr, PROG ": the activations of a batch of %u sentences, source length %u, target length %u "
                                 "(--max-tokens %u) need %zu bytes, above --max-act-bytes %.0f: lower --max-tokens "
                                 "or --max-len\n", lim.max_seqs, lim.max_src_len, lim.max_tgt_len, lim.max_tokens, act,
                    r->o.max_act_bytes);
        else if (act)
            fprintf(stderr, PROG ": activations of the largest batch (%u sentences, %u x %u tokens): %zu bytes\n",
                    lim.max_seqs, lim.max_src_len, lim.max_tgt_len, act);
        s = ntm_create(r->env.dev, img, size, &lim, &r->m);
        if (s == NMT_ERR_DEVICE_MEMORY && act && !(r->o.max_act_bytes > 0))
            fprintf(stderr, PROG ": %zu bytes of activations do not fit the device: lower --max-tokens or --max-len "
                                 "(or set --max-act-bytes)\n", act);
        if (s != NMT_OK) rc = train_fail("cannot create the model on the device", s);
    }
    if (!rc && r->o.resume) { /* the moments against the model just built */
        s = ckpt_check_moments(img, size, ntm_n_params(r->m), why, sizeof why);
        const char *absent = s == NMT_OK ? ntm_missing_train_tensor(r->m, img, size) : NULL;
        if (absent) {
            snprintf(why, sizeof why, "%s: missing (a training-only tensor of this model)", absent);
            s = NMT_ERR_MODEL_MISSING_TENSOR;
        }
        if (s != NMT_OK) rc = resume_refused(path, why, s);
    }
    free(img);
    if (!rc && !r->o.resume) {
        r->st.seed = (uint64_t)r->o.seed;
    }
    return rc;
}

static ckpt_tokenizers run_tokenizers(const run *r) {
    ckpt_tokenizers t = {r->env.spm_bytes, NULL, r->env.spm_size, 0};
    return t;
}

/* Dev loss (label-smoothed and NLL, per target token) over every dev batch. */
static int dev_loss(run *r, double *loss, double *nll) {
    double ls = 0, nl = 0, toks = 0;
    for (uint32_t k = 0; k < td_batches_per_epoch(r->db); k++) {
        nmt_train_batch b;
        uint32_t nt;
        nmt_status s = td_batch_at(r->db, k, &b, &nt);
        double l1 = 0, n1 = 0;
        if (s == NMT_OK) s = ntm_forward_loss(r->m, &b, (float)r->o.label_smoothing, &l1, &n1);
        if (s != NMT_OK) return train_fail("dev loss", s);
        ls += l1;
        nl += n1;
        toks += nt;
    }
    *loss = toks > 0 ? ls / toks : 0;
    *nll = toks > 0 ? nl / toks : 0;
    return 0;
}

/* Token ids as text: SentencePiece detokenized, or space-separated ids. */
static char *ids_text(const run *r, const int32_t *ids, uint32_t n) {
    if (r->env.tok) {
        size_t len = 0;
        nmt_tokenizer_decode(r->env.tok, ids, n, NULL, 0, &len);
        char *s = malloc(len + 1);
        if (!s) return NULL;
        if (nmt_tokenizer_decode(r->env.tok, ids, n, s, len + 1, &len) != NMT_OK) len = 0;
        s[len] = 0;
        return s;
    }
    char *s = malloc((size_t)n * 12 + 1);
    if (!s) return NULL;
    size_t o = 0;
    for (uint32_t i = 0; i < n; i++) o += (size_t)sprintf(s + o, i ? " %d" : "%d", ids[i]);
    s[o] = 0;
    return s;
}

/* Dev BLEU: export the current weights to an image, decode the first
 * dev_bleu_max dev pairs with the runtime's beam search, score against the
 * (detokenized) references. */
static int dev_bleu(run *r, double *bleu) {
    *bleu = 0;
    nmtw_writer *w = nmtw_create();
    if (!w) return train_fail("dev BLEU", NMT_ERR_INVALID_ARGUMENT);
    nmt_status s = ntm_add_to_writer(r->m, w, 0);
    if (s == NMT_OK && r->env.spm_bytes) s = nmtw_add_blob(w, "tokenizer.src", r->env.spm_bytes, (uint32_t)r->env.spm_size);
    void *img = NULL;
    size_t size = 0;
    if (s == NMT_OK) s = nmtw_write_memory(w, &img, &size);
    nmtw_destroy(w);
    if (s != NMT_OK) return train_fail("dev BLEU: export", s);
    uint32_t n = td_size(r->dev_c);
    if (r->o.dev_bleu_max > 0 && n > (uint32_t)r->o.dev_bleu_max) n = (uint32_t)r->o.dev_bleu_max;
    const uint32_t B = 16;
    nmt_session_params sp;
    memset(&sp, 0, sizeof sp);
    sp.model_data = img;
    sp.model_size = size;
    sp.limits.max_src_len = (uint32_t)r->o.max_len + 1;
    sp.limits.max_tgt_len = (uint32_t)r->o.max_len * 2 + 10;
    sp.limits.max_batch = B;
    sp.limits.max_beam = (uint32_t)r->o.beam;
    size_t arena_bytes;
    s = nmt_session_arena_size(&sp, &arena_bytes, NULL);
    void *arena = s == NMT_OK ? aligned_alloc(NMT_ARENA_ALIGNMENT, (arena_bytes + 63) / 64 * 64) : NULL;
    nmt_session *sess = NULL;
    if (s == NMT_OK && !arena) s = NMT_ERR_ARENA_TOO_SMALL;
    if (s == NMT_OK) s = nmt_session_create(r->env.dev, &sp, arena, (arena_bytes + 63) / 64 * 64, &sess);
    nmt_bleu_stats bs;
    memset(&bs, 0, sizeof bs);
    nmt_decode_opts dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.beam = (uint32_t)r->o.beam;
    for (uint32_t i0 = 0; s == NMT_OK && i0 < n; i0 += B) {
        uint32_t nb = NMT_MIN(B, n - i0);
        const int32_t *toks[16];
        uint32_t lens[16], n_spans[16];
        const nmt_span *spans[16]; /* --dev-src-spans (MG-SA syntax heads); else none */
        for (uint32_t j = 0; j < nb; j++) {
            const int32_t *t;
            uint32_t tl;
            td_pair(r->dev_c, i0 + j, &toks[j], &lens[j], &t, &tl);
            td_pair_spans(r->dev_c, i0 + j, &spans[j], NULL, &n_spans[j], NULL);
        }
        nmt_batch batch = {toks, lens, nb};
        if (r->o.dev_spans) s = nmt_session_set_spans(sess, spans, n_spans, nb);
        if (s == NMT_OK) s = nmt_session_translate(sess, &batch, &dopt);
        for (uint32_t j = 0; s == NMT_OK && j < nb; j++) {
            const int32_t *hyp = NULL, *ref, *src;
            uint32_t hl = 0, rl, sl;
            float sc, lp;
            if (nmt_session_n_results(sess, j) > 0) s = nmt_session_result(sess, j, 0, &hyp, &hl, &sc, &lp);
            td_pair(r->dev_c, i0 + j, &src, &sl, &ref, &rl);
            char *ht = ids_text(r, hyp, hl), *rt = ids_text(r, ref, rl);
            if (ht && rt) {
                const char *refs[1] = {rt};
                nmt_bleu_add(&bs, ht, refs, 1);
            }
            free(ht);
            free(rt);
        }
    }
    if (sess) nmt_session_destroy(sess);
    free(arena);
    free(img);
    if (s != NMT_OK) return train_fail("dev BLEU: decoding", s);
    *bleu = nmt_bleu_score(&bs).score;
    return 0;
}

static int save(run *r) {
    char err[TRAIN_PATH_WHY_BYTES] = "";
    r->st.elapsed_s = r->elapsed0 + (now_s() - r->t_start);
    td_position p = td_tell(r->tb);
    r->st.epoch = p.epoch;
    r->st.index = p.index;
    ckpt_tokenizers t = run_tokenizers(r);
    nmt_status s = ckpt_save(r->m, &t, &r->st, r->dir, (uint32_t)r->o.keep, err, sizeof err);
    if (s != NMT_OK) {
        fprintf(stderr, "\n" PROG ": checkpoint at step %llu failed: %s%s%s\n", (unsigned long long)r->st.step,
                nmt_status_str(s), *err ? ": " : "", err);
        return 1;
    }
    return 0;
}

/* Dev loss and BLEU at `step`: a "dev" record in the log and a line on
 * stderr.  0, or 1 after a message. */
static int evaluate(run *r, uint64_t step) {
    double dl = 0, dn = 0, bleu = 0;
    if (dev_loss(r, &dl, &dn) || dev_bleu(r, &bleu)) return 1;
    if (bleu > r->st.best_bleu) r->st.best_bleu = bleu;
    log_json(r, "{\"kind\":\"dev\",\"step\":%llu,\"loss\":%.6f,\"nll\":%.6f,\"bleu\":%.2f}", (unsigned long long)step,
             dl, dn, bleu);
    if (!r->o.quiet)
        fprintf(stderr, "%s" PROG ": step %llu dev loss %.3f nll %.3f ppl %.2f BLEU %.2f\n", r->tty ? "\n" : "",
                (unsigned long long)step, dl, dn, exp(dn), bleu);
    return 0;
}

static void fmt_eta(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, cap, "?");
        return;
    }
    long t = (long)s;
    snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static int train_loop(run *r) {
    const train_opts *o = &r->o;
    double win_loss = 0, win_nll = 0, win_tok = 0, win_t0 = now_s();
    uint64_t first_step = r->st.step;
    int rc = 0;
    uint32_t per_epoch = td_batches_per_epoch(r->tb);
    for (;;) {
        /* stopping rules (checked before a step: a resumed run that already
         * reached its limit does nothing) */
        double elapsed = r->elapsed0 + (now_s() - r->t_start);
        td_position pos = td_tell(r->tb);
        int stop = 0;
        if (o->max_steps && r->st.step >= (uint64_t)o->max_steps) stop = 1;
        if (o->max_epochs && pos.epoch >= (uint64_t)o->max_epochs) stop = 1;
        if (o->max_time > 0 && elapsed >= o->max_time) stop = 1;
        if (g_signal) stop = 2;
        if (r->dist.size > 1) { /* every rank stops at the same step (time and signals differ) */
            int sig = train_dist_max_int(&r->dist, (int)g_signal, "the stop check", 0);
            stop = train_dist_max_int(&r->dist, stop, "the stop check", 0);
            if (sig) g_signal = sig;
        }
        if (stop) {
            if (stop == 2 && !o->quiet) fprintf(stderr, "\n" PROG ": signal %d: saving a checkpoint\n", (int)g_signal);
            break;
        }
        uint64_t step = r->st.step + 1;
        nmt_status s = ntm_zero_grad(r->m);
        double loss = 0, nll = 0, tokens = 0;
        for (long a = 0; s == NMT_OK && a < o->accum; a++) {
            nmt_train_batch b;
            uint32_t nt;
            s = td_next(r->tb, &b, &nt);
            if (s != NMT_OK) break;
            tokens += nt;
            if (a % r->dist.size != r->dist.rank) continue; /* another rank's micro-batch */
            if (a == r->dist.rank) s = train_dist_step_begin(&r->dist, r->m, step);
            if (s != NMT_OK) break;
            nmt_train_step_opts so;
            memset(&so, 0, sizeof so);
            so.dropout = (float)o->dropout;
            so.label_smoothing = (float)o->label_smoothing;
            so.tag_lambda = (float)o->mg_tag_lambda; /* MG-SA syntax heads with labelled spans only */
            so.grad_scale = 1.0f;
            so.seed = mix64(r->st.seed * 0x100000001B3ull ^ mix64(step * 4096u + (uint64_t)a));
            if (a + r->dist.size >= o->accum) train_dist_hook(&r->dist, &so); /* this rank's last */
            double l1 = 0, n1 = 0, t0 = now_s();
            s = ntm_forward_backward(r->m, &b, &so, &l1, &n1);
            r->dist.t_compute += now_s() - t0;
            loss += l1;
            nll += n1;
        }
        double sums[2] = {loss, nll};
        if (s == NMT_OK) s = train_dist_allreduce(&r->dist, r->m, sums, step); /* several ranks: the sums of all */
        loss = sums[0];
        nll = sums[1];
        double gnorm = 0;
        if (s == NMT_OK) s = ntm_grad_norm(r->m, &gnorm);
        if (s != NMT_OK) {
            rc = train_fail("training step", s);
            break;
        }
        double inv = tokens > 0 ? 1.0 / tokens : 0;
        double gn = gnorm * inv;  /* norm of the mean-loss gradient */
        double clip = (o->clip_norm > 0 && gn > o->clip_norm) ? o->clip_norm / gn : 1.0;
        nmt_adam_params ap = nmt_adam_defaults();
        ap.lr = (float)sched_lr(&r->sp, step);
        ap.weight_decay = (float)o->weight_decay;
        ap.beta1 = (float)o->adam_beta1;
        ap.beta2 = (float)o->adam_beta2;
        ap.eps = (float)o->adam_eps;
        ap.grad_scale = (float)(inv * clip);
        ap.step = step;
        if (!isfinite(loss) || !isfinite(gnorm)) {
            fprintf(stderr, "\n" PROG ": step %llu: loss or gradient is not finite (loss %g, |g| %g); stopping "
                            "without an update (lower --lr or set --clip-norm)\n",
                    (unsigned long long)step, loss, gnorm);
            rc = 1;
            break;
        }
        s = ntm_adam_step(r->m, &ap);
        if (s != NMT_OK) {
            rc = train_fail("optimiser step", s);
            break;
        }
        r->st.step = step;
        r->st.tokens += (uint64_t)tokens;
        win_loss += loss;
        win_nll += nll;
        win_tok += tokens;
        if (step % (uint64_t)o->log_every == 0) {
            double t = now_s(), dt = t - win_t0;
            double tps = dt > 0 ? win_tok / dt : 0;
            td_position p = td_tell(r->tb);
            double ep = (double)p.epoch + (per_epoch ? (double)p.index / per_epoch : 0);
            char dist[512] = ""; /* several ranks: rank 0's time split of the window, in seconds */
            if (r->dist.mpi)
                snprintf(dist, sizeof dist,
                         ",\"ranks\":%d,\"compute_s\":%.4f,\"readback_s\":%.4f,\"allreduce_wait_s\":%.4f,"
                         "\"write_s\":%.4f,\"window_s\":%.4f,\"slices\":%zu,\"slices_queued_in_backward\":%zu,"
                         "\"slices_in_backward\":%zu",
                         r->dist.size, r->dist.t_compute, r->dist.t_read, r->dist.t_wait, r->dist.t_write, dt,
                         r->dist.slices, r->dist.n_queued, r->dist.n_early);
            r->dist.t_compute = r->dist.t_read = r->dist.t_wait = r->dist.t_write = 0;
            r->dist.slices = r->dist.n_early = r->dist.n_queued = 0;
            log_json(r,
                     "{\"kind\":\"train\",\"step\":%llu,\"epoch\":%.4f,\"loss\":%.6f,\"nll\":%.6f,\"lr\":%.6g,"
                     "\"gnorm\":%.6g,\"tokens_per_s\":%.1f,\"tokens\":%llu,\"elapsed_s\":%.1f%s}",
                     (unsigned long long)step, ep, win_loss / win_tok, win_nll / win_tok, (double)ap.lr, gn, tps,
                     (unsigned long long)r->st.tokens, r->elapsed0 + (t - r->t_start), dist);
            if (!o->quiet) {
                double left = -1;
                double run_s = t - r->t_start;
                uint64_t done = step - first_step;
                if (o->max_steps && done > 0) left = run_s / (double)done * (double)((uint64_t)o->max_steps - step);
                if (o->max_time > 0) {
                    double lt = o->max_time - (r->elapsed0 + run_s);
                    left = left < 0 ? lt : NMT_MIN(left, lt);
                }
                char eta[32], total[32] = "";
                fmt_eta(left, eta, sizeof eta);
                if (o->max_steps) snprintf(total, sizeof total, "/%ld", o->max_steps);
                fprintf(stderr,
                        "%sstep %llu%s  epoch %.2f  loss %.3f  nll %.3f  lr %.2e  |g| %.2f  %.0f tok/s  ETA %s%s",
                        r->tty ? "\r" : "", (unsigned long long)step, total, ep, win_loss / win_tok, win_nll / win_tok,
                        (double)ap.lr, gn, tps, eta, r->tty ? "   " : "\n");
                fflush(stderr);
            }
            win_loss = win_nll = win_tok = 0;
            win_t0 = now_s();
        }
        if (r->db && r->dist.rank == 0 && o->eval_every && step % (uint64_t)o->eval_every == 0) {
            if (evaluate(r, step)) {
                rc = 1;
                break;
            }
            win_t0 = now_s(); /* evaluation time is not training speed */
        }
        if (r->dist.rank == 0 && o->save_every && step % (uint64_t)o->save_every == 0 && save(r)) {
            rc = 1;
            break;
        }
    }
    if (r->tty && !o->quiet) fputc('\n', stderr);
    /* the last step evaluated too (not after an error or a signal, nor when
     * this run made no step or the last one was an eval step) */
    const uint64_t last = r->st.step;
    if (!rc && !g_signal && r->db && r->dist.rank == 0 && last > first_step &&
        !(o->eval_every && last % (uint64_t)o->eval_every == 0))
        rc = evaluate(r, last);
    return rc;
}

/* The files of a run in its directory (besides the tokenizer, which a new
 * run reuses): numbered checkpoints and these. */
static const char *const run_files[] = {"last.nmt", "model.nmt", "log.jsonl", "plot.svg"};

/* A new run (no --resume) into DIR: refused when DIR holds another run,
 * unless --overwrite, which removes that run's files first (an old
 * ckpt-N.nmt with a higher step would otherwise survive --keep in place of
 * the new run's, and a later --resume would continue the old run). */
static int claim_dir(const run *r) {
    DIR *d = opendir(r->dir);
    if (!d) return 0;
    char found[512] = "";
    size_t n_found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int ours = strncmp(e->d_name, "ckpt-", 5) == 0 && strlen(e->d_name) > 9 &&
                   strcmp(e->d_name + strlen(e->d_name) - 4, ".nmt") == 0;
        for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) ours |= !strcmp(e->d_name, run_files[i]);
        if (!ours) continue;
        if (r->o.overwrite) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", r->dir, e->d_name);
            if (unlink(path) != 0) {
                fprintf(stderr, PROG ": --overwrite: cannot remove '%s': %s\n", path, strerror(errno));
                closedir(d);
                return 1;
            }
            continue;
        }
        size_t used = strlen(found);
        if (n_found++ < 4) snprintf(found + used, sizeof found - used, "%s%s", used ? ", " : "", e->d_name);
    }
    closedir(d);
    if (r->o.overwrite || n_found == 0) return 0;
    fprintf(stderr,
            PROG ": '%s' holds another run (%s%s): continue it with --resume, or start a new one there with "
                 "--overwrite (which removes that run's checkpoints, last.nmt, model.nmt, log.jsonl and "
                 "plot.svg), or choose another --out\n",
            r->dir, found, n_found > 4 ? ", ..." : "");
    return 1;
}

/* The run of this rank (of one, alone): rank 0 locks the directory
 * (run_lock.h: before anything in it is read or removed, so a second
 * trainer, --overwrite included, stops there), claims it and builds first
 * (spm_train, kernels compiled into the cache), and alone writes
 * checkpoints, the log, the plot and the model.  A failure every
 * rank shares returns; one of this rank alone stops the job
 * (train_dist_fail). */
static int run_main(run *r) {
    const int lead = r->dist.rank == 0;
    if (r->o.accum < r->dist.size) {
        if (lead)
            fprintf(stderr, PROG ": %d ranks need --accum N of at least %d (rank r runs micro-batches r, r + %d, ... "
                                 "of each step's N)\n", r->dist.size, r->dist.size, r->dist.size);
        return EXIT_USAGE;
    }
    snprintf(r->dir, sizeof r->dir, "%s", r->o.out_dir);
    int rc = 0;
    if (lead && mkdir_p(r->dir)) {
        fprintf(stderr, PROG ": cannot create '%s': %s\n", r->dir, strerror(errno));
        rc = 1;
    }
    if (lead && !rc && run_lock_take(r->dir, &r->lock_fd)) rc = 1;
    if (lead && !rc && !r->o.resume && claim_dir(r)) rc = EXIT_USAGE;
    if (lead && !rc) train_opts_warn(&r->o, stderr);
    rc = train_dist_bcast_int(&r->dist, rc, "the start");
    if (rc) return rc;
    if (!lead) r->o.quiet = 1; /* one progress line: rank 0's, with the global rate */
    r->tty = isatty(2);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* rank 0 first; the others start once it has (or stop with it) */
    if (!lead && train_dist_bcast_int(&r->dist, 0, "waiting for rank 0's start")) return 1;
    rc = open_device(r);
    if (!rc) rc = build_model(r);
    if (lead && r->dist.size > 1) train_dist_bcast_int(&r->dist, rc, "the start");
    if (!lead || rc == 0) /* every rank's model built (a failing one said why) */
        rc = train_dist_max_int(&r->dist, rc, "the start (every rank building its model)", 1);
    if (rc) return rc;
    r->sp.kind = (sched_kind)sched_parse(r->o.schedule);
    r->sp.lr = r->o.lr;
    r->sp.warmup = (uint32_t)r->o.warmup;
    r->sp.d_model = ntm_d_model(r->m);
    r->elapsed0 = r->st.elapsed_s;
    r->t_start = now_s();
    char path[4200];
    snprintf(path, sizeof path, "%s/log.jsonl", r->dir);
    if (lead) {
        r->log = fopen(path, "a");
        if (!r->log) fprintf(stderr, PROG ": warning: cannot write the log %s: %s\n", path, strerror(errno));
        log_config(r);
        fprintf(stderr, PROG ": %zu parameters, %u batches an epoch, schedule %s (lr %g, warm-up %ld)%s\n",
                ntm_n_params(r->m), td_batches_per_epoch(r->tb), sched_name(r->sp.kind), r->o.lr, r->o.warmup,
                r->dist.size > 1 ? ", data-parallel" : "");
        if (r->dist.size > 1)
            fprintf(stderr, PROG ": %d ranks, %ld micro-batches a step (rank r runs r, r + %d, ...)\n", r->dist.size,
                    r->o.accum, r->dist.size);
    }
    rc = train_loop(r);
    /* a checkpoint at the end (also after a signal or an error past step 0) */
    uint64_t last_saved = r->o.save_every ? r->st.step / (uint64_t)r->o.save_every * (uint64_t)r->o.save_every : 0;
    if (lead && r->st.step > 0 && (last_saved != r->st.step || g_signal) && save(r)) rc = 1;
    if (lead && !rc && !g_signal) {
        snprintf(path, sizeof path, "%s/model.nmt", r->dir);
        ckpt_tokenizers t = run_tokenizers(r);
        char why[4400];
        nmt_status s = ckpt_export_why(r->m, &t, path, why, sizeof why);
        if (s != NMT_OK && why[0]) {
            fprintf(stderr, PROG ": %s\n", why);
            rc = 1;
        } else if (s != NMT_OK) {
            rc = train_fail("writing the model", s);
        } else {
            fprintf(stderr, PROG ": wrote %s (step %llu)\n", path, (unsigned long long)r->st.step);
        }
    }
    if (r->log) {
        fclose(r->log);
        char svg[4200], err[TRAIN_PATH_WHY_BYTES] = "";
        snprintf(path, sizeof path, "%s/log.jsonl", r->dir);
        snprintf(svg, sizeof svg, "%s/plot.svg", r->dir);
        if (plot_svg(path, svg, err, sizeof err) != NMT_OK) fprintf(stderr, PROG ": warning: no plot: %s\n", err);
    }
    if (rc) return train_dist_fail(&r->dist, rc);
    if (g_signal) rc = 128 + (int)g_signal;
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "plot")) return train_cmd_plot(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "bleu")) return train_cmd_bleu(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "attention")) return train_cmd_attention(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "parse-spans")) return train_cmd_parse_spans(argc, argv);
    static run r;
    r.lock_fd = -1;
    int help = 0;
    int rc = train_opts_parse(argc, argv, &r.o, &help);
    if (help) {
        train_opts_usage(stdout);
        return 0;
    }
    if (rc) return rc;
    if (train_dist_init(&r.dist, &argc, &argv, r.o.dist_timeout, r.o.bucket_mb, !r.o.no_overlap)) return 1;
    rc = run_main(&r);
    if (r.m) ntm_destroy(r.m);
    td_batcher_free(r.tb);
    td_batcher_free(r.db);
    td_free(r.train);
    td_free(r.dev_c);
    train_env_close(&r.env);
    train_dist_finish(&r.dist);
    if (r.lock_fd >= 0) close(r.lock_fd); /* the lock ends with the run (exit would drop it too) */
    return rc;
}
