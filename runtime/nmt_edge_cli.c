/* nmt_edge_cli.c — the `nmt-edge` program: translate, score, info, devices.
 *
 * Uses only the public API in include/nmt_edge.h.  Unlike the library, this
 * program may allocate: it owns the session arena and the device memory and
 * hands them to the library, and it buffers input lines and output text.
 *
 * Input contract (translate, score, tokenize, detokenize): one sentence per
 * line; CR LF line ends are accepted; lines may be of any length.  A model
 * with an embedded SentencePiece tokenizer reads and writes text (newlines
 * inside a decoded text are written as spaces to keep lines aligned);
 * without one, or with --ids, sentences are whitespace-separated
 * non-negative decimal ids.  Parsing lives in cli_input.c (fuzzed).  A batch is parsed and checked
 * completely before the library sees it, and its output is written in one
 * piece and flushed, so an error never leaves partial output for that batch.
 *
 * Exit status: 0 success, 1 runtime error (input, model, device), 2 usage.
 * This file: options, set-up, translate, score, main; tokenize/detokenize in
 * cli_tokenize.c, info/devices in cli_info.c, line parsing in cli_input.c.
 */
#include "cli.h"
#include "tool_env.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>


/* ======================================================================== */
/* Small utilities                                                          */
/* ======================================================================== */



void sb_printf(strbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        grow((void **)&b->p, &b->cap, b->len + (size_t)n + 1, 1);
    }
}

int write_out(strbuf *b) {
    if ((b->len && fwrite(b->p, 1, b->len, stdout) != b->len) || fflush(stdout) != 0) {
        fprintf(stderr, PROG ": error writing standard output: %s\n", strerror(errno));
        return 1;
    }
    b->len = 0;
    return 0;
}

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }


/* ======================================================================== */
/* Options: one table, one parser, shared by every subcommand               */
/* ======================================================================== */


typedef enum opt_kind { OPT_FLAG, OPT_LONG, OPT_DOUBLE, OPT_STRING, OPT_GEMM } opt_kind;

typedef struct opt_spec {
    const char *name;     /* without the leading "--" */
    opt_kind kind;
    size_t offset;        /* field of cli_opts */
    double min, max;      /* numeric range (inclusive) */
    unsigned cmds;        /* subcommands accepting it */
    const char *metavar;
    const char *help;
} opt_spec;

#define OFF(f) offsetof(cli_opts, f)
static const opt_spec OPTIONS[] = {
    {"model", OPT_STRING, OFF(model), 0, 0, C_MODEL | C_TOK, "FILE",
     "model file (.nmt), required (tokenize/detokenize: its embedded tokenizer)"},
    {"sp-model", OPT_STRING, OFF(sp_model), 0, 0, C_TOK, "FILE",
     "a SentencePiece .model file instead of --model"},
    {"target", OPT_FLAG, OFF(target), 0, 0, C_TOK, NULL,
     "with --model: the target-side tokenizer (default source)"},
    {"pieces", OPT_FLAG, OFF(pieces), 0, 0, C_TOKENIZE, NULL, "print pieces instead of ids"},
    {"ids", OPT_FLAG, OFF(ids), 0, 0, C_TRANSLATE | C_SCORE, NULL,
     "read and write token ids even if the model embeds a tokenizer"},
    {"max-text-bytes", OPT_LONG, OFF(max_text_bytes), 1, 16777216, C_MODEL | C_TOK, "N",
     "limit on the bytes of one input sentence in text mode (default 2048)"},
    {"beam", OPT_LONG, OFF(beam), 1, 256, C_TRANSLATE | C_INFO, "N",
     "beam width, 1 = greedy (default 4)"},
    {"alpha", OPT_DOUBLE, OFF(alpha), 0, 100, C_TRANSLATE, "A",
     "length penalty exponent, ((5+len)/6)^A (default 0.6)"},
    {"max-len", OPT_LONG, OFF(max_len), 0, 65535, C_MODEL, "N",
     "max target tokens without end-of-sentence, 0 = source length + 50 (default 0)"},
    {"skip-long", OPT_FLAG, OFF(skip_long), 0, 0, C_TRANSLATE, NULL,
     "a sentence over the limits gives an empty output line and a warning instead of stopping"},
    {"n-best", OPT_LONG, OFF(n_best), 1, 256, C_TRANSLATE, "N",
     "hypotheses per sentence, <= --beam; > 1 prints 'INDEX ||| TOKENS ||| SCORE' (default 1)"},
    {"batch", OPT_LONG, OFF(batch), 1, 4096, C_MODEL | C_TOK, "N", "sentences per call (default 8)"},
    {"max-src-len", OPT_LONG, OFF(max_src_len), 1, 65536, C_MODEL, "N",
     "session limit on source tokens per sentence, end-of-sentence not counted (default 256)"},
    {"device", OPT_STRING, OFF(device), 0, 0, C_MODEL, "SPEC",
     "OpenCL device: P:D, gpu, cpu, accelerator or a name substring "
     "(default $NMT_EDGE_DEVICE, else first GPU, else first device)"},
    {"no-cache", OPT_FLAG, OFF(no_cache), 0, 0, C_MODEL, NULL,
     "do not cache compiled kernels "
     "(default dir $NMT_EDGE_CACHE_DIR, $XDG_CACHE_HOME/nmt-edge or ~/.cache/nmt-edge)"},
    {"gemm", OPT_GEMM, OFF(gemm), 0, 0, C_MODEL, "auto|own|clblast", "GEMM provider (default auto)"},
    {"no-device", OPT_FLAG, OFF(no_device), 0, 0, C_INFO, NULL, "do not open a device"},
    {"verbose", OPT_FLAG, OFF(verbose), 0, 0, C_ALL, NULL, "log progress (INFO) to stderr"},
    {"help", OPT_FLAG, OFF(help), 0, 0, C_ALL, NULL, "show this help and exit"},
};
#undef OFF

const char *const GEMM_NAMES[3] = {"auto", "own", "clblast"};

typedef struct command {
    const char *name;
    unsigned bit;
    int (*run)(const cli_opts *o);
    const char *synopsis;
    const char *summary;      /* one line for the top-level help */
    const char *description;
} command;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int usage_error(const command *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, PROG "%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '" PROG "%s%s --help'.\n", cmd ? " " : "", cmd ? cmd->name : "");
    return EXIT_USAGE;
}

static int set_option(const command *cmd, const opt_spec *sp, const char *val, cli_opts *o) {
    char *field = (char *)o + sp->offset;
    char *end = NULL;
    switch (sp->kind) {
    case OPT_FLAG:
        *(int *)field = 1;
        return 0;
    case OPT_STRING:
        if (*val == '\0') return usage_error(cmd, "--%s needs a non-empty value", sp->name);
        *(const char **)field = val;
        return 0;
    case OPT_GEMM:
        for (size_t i = 0; i < sizeof GEMM_NAMES / sizeof GEMM_NAMES[0]; i++)
            if (strcmp(val, GEMM_NAMES[i]) == 0) {
                *(long *)field = (long)i;
                return 0;
            }
        return usage_error(cmd, "--gemm: '%s' is not one of auto, own, clblast", val);
    case OPT_LONG: {
        errno = 0;
        long v = (val[0] >= '0' && val[0] <= '9') ? strtol(val, &end, 10) : 0;
        if (end == NULL || *end != '\0' || errno != 0 || v < (long)sp->min || v > (long)sp->max)
            return usage_error(cmd, "--%s: '%s' is not an integer in [%ld, %ld]", sp->name, val,
                               (long)sp->min, (long)sp->max);
        *(long *)field = v;
        return 0;
    }
    case OPT_DOUBLE: {
        errno = 0;
        double v = strtod(val, &end);
        if (end == val || *end != '\0' || errno != 0 || !isfinite(v) || v < sp->min || v > sp->max)
            return usage_error(cmd, "--%s: '%s' is not a number in [%g, %g]", sp->name, val,
                               sp->min, sp->max);
        *(double *)field = v;
        return 0;
    }
    }
    return usage_error(cmd, "internal: bad option kind");
}

/* Parse argv[1..] ("--name VALUE", "--name=VALUE" or "--flag") for `cmd`. */
static int parse_options(const command *cmd, int argc, char **argv, cli_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return usage_error(cmd, "unexpected argument '%s'", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_spec *sp = NULL;
        for (size_t k = 0; k < sizeof OPTIONS / sizeof OPTIONS[0]; k++)
            if ((OPTIONS[k].cmds & cmd->bit) && strlen(OPTIONS[k].name) == name_len &&
                strncmp(OPTIONS[k].name, name, name_len) == 0)
                sp = &OPTIONS[k];
        if (sp == NULL) return usage_error(cmd, "unknown option '%s'", arg);
        const char *val = eq ? eq + 1 : NULL;
        if (sp->kind == OPT_FLAG && val != NULL)
            return usage_error(cmd, "--%s takes no value", sp->name);
        if (sp->kind != OPT_FLAG && val == NULL) {
            if (i + 1 >= argc) return usage_error(cmd, "--%s needs a value", sp->name);
            val = argv[++i];
        }
        int rc = set_option(cmd, sp, val, o);
        if (rc != 0) return rc;
    }
    return 0;
}

static void print_command_help(const command *cmd) {
    printf("Usage: " PROG " %s %s\n\n%s\n\nOptions:\n", cmd->name, cmd->synopsis,
           cmd->description);
    for (size_t k = 0; k < sizeof OPTIONS / sizeof OPTIONS[0]; k++) {
        const opt_spec *sp = &OPTIONS[k];
        if (!(sp->cmds & cmd->bit)) continue;
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", sp->name, sp->metavar ? " " : "",
                 sp->metavar ? sp->metavar : "");
        printf("  %-26s", head);
        /* the help text, word-wrapped at 80 columns under its column */
        int col = 28;
        for (const char *w = sp->help; *w;) {
            size_t n = strcspn(w, " ");
            if (col + 1 + (int)n > 80) {
                printf("\n%28s", "");
                col = 28;
            }
            printf(" %.*s", (int)n, w);
            col += 1 + (int)n;
            w += n + strspn(w + n, " ");
        }
        putchar('\n');
    }
}

/* ======================================================================== */
/* Reporting library statuses                                               */
/* ======================================================================== */


int report_status(const char *what, nmt_status st, const runtime *rt) {
    int saved_errno = errno;
    fprintf(stderr, PROG ": %s: %s", what, nmt_status_str(st));
    if (st == NMT_ERR_IO && saved_errno != 0) fprintf(stderr, " (%s)", strerror(saved_errno));
    if (st == NMT_ERR_OPENCL || st == NMT_ERR_KERNEL_BUILD) {
        int32_t code = 0;
        if (rt && rt->s) code = nmt_session_last_cl_error(rt->s);
        if (code == 0 && rt && rt->dev) code = nmt_device_last_cl_error(rt->dev);
        fprintf(stderr, " (OpenCL error %d)", (int)code);
    }
    fputc('\n', stderr);
    return 1;
}

int model_error(const char *path, nmt_status st) {
    int saved_errno = errno;
    char what[64 + 4096];
    snprintf(what, sizeof what, "cannot load model '%s'", path);
    errno = saved_errno;
    return report_status(what, st, NULL);
}

int model_sizes(const char *path, const nmt_limits *lim, size_t *arena,
                       uint64_t *device_bytes) {
    nmt_session_params sp = {.model_path = path, .limits = *lim};
    errno = 0;
    nmt_status st = nmt_session_arena_size(&sp, arena, device_bytes);
    if (st == NMT_ERR_INVALID_ARGUMENT)
        return report_status("cannot plan a session for --max-src-len, --max-len, --batch and "
                             "--beam (lower them)", st, NULL);
    return st == NMT_OK ? 0 : model_error(path, st);
}

/* ======================================================================== */
/* Device and session set-up                                                */
/* ======================================================================== */

static void log_to_stderr(void *user, nmt_log_level level, const char *msg) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    const nmt_log_level *max = user;
    if (level > *max) return;
    fprintf(stderr, PROG ": %s: %s\n", names[(unsigned)level < 4 ? level : 3], msg);
}

int open_device(const cli_opts *o, runtime *rt) {
    rt->log_level = o->verbose ? NMT_LOG_INFO : NMT_LOG_WARN;
    nmt_device_params dp = {
        .gemm = (nmt_gemm_provider)o->gemm,
        .log = log_to_stderr,
        .log_user = &rt->log_level,
        .log_level = rt->log_level,
    };
    nmt_tool_device_params(&dp, o->device, o->no_cache ? NULL : rt->cache_dir, sizeof rt->cache_dir);
    size_t fp = round_up(nmt_device_footprint() ? nmt_device_footprint() : 1, 64);
    rt->dev_mem = aligned_alloc(64, fp);
    if (rt->dev_mem == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    char what[300];
    snprintf(what, sizeof what, "cannot open device '%.200s'", dp.device ? dp.device : "default");
    nmt_status st = nmt_device_open(&dp, rt->dev_mem, fp, &rt->dev);
    if (st != NMT_OK) {
        rt->dev = NULL;
        return report_status(what, st, rt);
    }
    return 0;
}

void close_runtime(runtime *rt) {
    if (rt->s) nmt_session_destroy(rt->s);
    if (rt->dev) nmt_device_close(rt->dev);
    free(rt->arena);
    free(rt->dev_mem);
    memset(rt, 0, offsetof(runtime, cache_dir));
}

nmt_limits limits_from(const cli_opts *o, long beam) {
    nmt_limits lim = {
        .max_src_len = (uint32_t)o->max_src_len,
        .max_tgt_len = (uint32_t)o->max_len, /* 0: the library's max_src_len + 50 */
        .max_batch = (uint32_t)o->batch,
        .max_beam = (uint32_t)beam,
        .max_text_bytes = (uint32_t)o->max_text_bytes,
    };
    return lim;
}

int open_session(const cli_opts *o, long beam, runtime *rt) {
    nmt_limits lim = limits_from(o, beam);
    size_t need;
    if (model_sizes(o->model, &lim, &need, NULL) != 0) return 1;
    if (open_device(o, rt) != 0) return 1;
    size_t size = round_up(need ? need : 1, NMT_ARENA_ALIGNMENT);
    rt->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, size);
    if (rt->arena == NULL) {
        fprintf(stderr, PROG ": cannot allocate the %zu-byte session arena\n", size);
        return 1;
    }
    nmt_session_params sp = {.model_path = o->model, .limits = lim};
    errno = 0;
    nmt_status st = nmt_session_create(rt->dev, &sp, rt->arena, size, &rt->s);
    if (st != NMT_OK) {
        rt->s = NULL;
        return report_status("cannot create session", st, rt);
    }
    if (o->verbose)
        fprintf(stderr, PROG ": info: session ready, arena %zu bytes (%zu used)\n", size,
                nmt_session_arena_used(rt->s));
    return 0;
}

/* ======================================================================== */
/* Input: lines of token ids, batched                                       */
/* ======================================================================== */


static nmt_batch seq_view(seq_buf *q) {
    cli_seqs_ptrs(q);
    nmt_batch b = {.tokens = q->ptrs, .lens = q->lens, .n = q->n};
    return b;
}

static nmt_text_batch text_view(cli_texts *q) {
    cli_texts_ptrs(q);
    nmt_text_batch b = {.text = q->ptrs, .lens = q->lens, .n = q->n};
    return b;
}

/* Parse [p, end) as one sentence; on error print "line N: ..." and return 1. */
int parse_sentence(const char *p, const char *end, unsigned long line, const side_rule *r,
                   seq_buf *q) {
    char err[256];
    if (cli_parse_ids(p, end, line, r, q, err, sizeof err) == 0) return 0;
    fprintf(stderr, PROG ": %s\n", err);
    return 1;
}

void append_text(strbuf *out, const char *s, size_t n) {
    grow((void **)&out->p, &out->cap, out->len + n + 1, 1);
    for (size_t i = 0; i < n; i++) out->p[out->len + i] = (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
    out->len += n;
    out->p[out->len] = '\0';
}


int process_lines(batch_job *job, long batch) {
    char *line = NULL;
    size_t cap = 0;
    unsigned long line_no = 0, first = 0;
    strbuf out = {0};
    int rc = 0;
    for (;;) {
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0 && ferror(stdin)) {
            fprintf(stderr, PROG ": error reading standard input: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        if (n >= 0) {
            size_t len = job->keep_cr ? (size_t)n - (n > 0 && line[n - 1] == '\n')
                                      : cli_line_len(line, (size_t)n);
            if ((rc = job->parse(job, line, len, ++line_no)) != 0) break;
            job->pending++;
        }
        if (job->pending > 0 && (n < 0 || job->pending == (uint32_t)batch)) {
            if ((rc = job->run(job, first, &out)) != 0 || (rc = write_out(&out)) != 0) break;
            first += job->pending;
            job->pending = 0;
            job->reset(job);
        }
        if (n < 0) break;
    }
    free(line);
    free(out.p);
    return rc;
}

/* ======================================================================== */
/* translate                                                                */
/* ======================================================================== */

typedef struct translate_job {
    batch_job base;
    runtime *rt;
    nmt_decode_opts dopts;
    side_rule src_rule;
    int text;             /* the model's tokenizer reads and writes text */
    int skip_long;        /* --skip-long */
    seq_buf src;
    cli_texts src_text;
} translate_job;

static int translate_parse(batch_job *job, const char *line, size_t len, unsigned long line_no) {
    translate_job *t = (translate_job *)job;
    if (t->text) {
        cli_texts_add(&t->src_text, line, len);
        return 0;
    }
    char err[256];
    int rc = cli_parse_ids(line, line + len, line_no, &t->src_rule, &t->src, err, sizeof err);
    if (rc == 2 && t->skip_long) { /* over the limit: an empty sentence keeps the lines aligned */
        fprintf(stderr, PROG ": %s; its output is an empty line (--skip-long)\n", err);
        return cli_parse_ids(line, line, line_no, &t->src_rule, &t->src, err, sizeof err);
    }
    if (rc != 0) fprintf(stderr, PROG ": %s\n", err);
    return rc != 0;
}

static void translate_reset(batch_job *job) {
    translate_job *t = (translate_job *)job;
    cli_seqs_reset(&t->src);
    cli_texts_reset(&t->src_text);
}

static void append_ids(strbuf *out, const int32_t *ids, uint32_t n) {
    for (uint32_t k = 0; k < n; k++) sb_printf(out, k ? " %d" : "%d", (int)ids[k]);
}

/* Text-mode failures name the batch when the status is about one sentence. */
static int text_status(const char *what, nmt_status st, const runtime *rt, unsigned long first,
                       const nmt_limits *lim) {
    if (st == NMT_ERR_INPUT_TOO_LONG) {
        fprintf(stderr,
                PROG ": a sentence of the batch starting at line %lu is longer than the limits "
                     "(%u bytes: --max-text-bytes; %u tokens: --max-src-len / --max-len)\n",
                first + 1, lim->max_text_bytes, lim->max_src_len);
        return 1;
    }
    return report_status(what, st, rt);
}

/* Translate sentences [lo, lo + n) of the pending batch. */
static nmt_status translate_call(translate_job *t, uint32_t lo, uint32_t n) {
    if (t->text) {
        nmt_text_batch b = text_view(&t->src_text);
        b.text += lo, b.lens += lo, b.n = n;
        return nmt_session_translate_text(t->rt->s, &b, &t->dopts);
    }
    nmt_batch b = seq_view(&t->src);
    b.tokens += lo, b.lens += lo, b.n = n;
    return nmt_session_translate(t->rt->s, &b, &t->dopts);
}

/* Append the results of the last call (n sentences, the first being
 * sentence `first` of the input, 0-based) to out. */
static int append_results(translate_job *t, uint32_t n, unsigned long first, strbuf *out) {
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t r = 0; r < t->dopts.n_best; r++) {
            const int32_t *ids;
            const char *text;
            size_t text_len;
            uint32_t len;
            float score, logprob;
            nmt_status st;
            if (t->text)
                st = nmt_session_result_text(t->rt->s, i, r, &text, &text_len, &score, &logprob);
            else
                st = nmt_session_result(t->rt->s, i, r, &ids, &len, &score, &logprob);
            /* the search may finish fewer than n_best hypotheses; print those */
            if (st == NMT_ERR_INVALID_ARGUMENT && r > 0) break;
            if (st != NMT_OK) return report_status("reading a translation failed", st, t->rt);
            if (t->dopts.n_best > 1) sb_printf(out, "%lu ||| ", first + i);
            if (t->text) append_text(out, text, text_len);
            else append_ids(out, ids, len);
            if (t->dopts.n_best > 1) sb_printf(out, " ||| %.6f", (double)score);
            sb_printf(out, "\n");
        }
    }
    return 0;
}

static int translate_run(batch_job *job, unsigned long first, strbuf *out) {
    translate_job *t = (translate_job *)job;
    const uint32_t n = job->pending;
    nmt_status st = translate_call(t, 0, n);
    if (st == NMT_OK) return append_results(t, n, first, out);
    if (st != NMT_ERR_INPUT_TOO_LONG || !t->text) return report_status("translation failed", st, t->rt);
    /* Text over the limits is only seen once tokenized: translate the batch
     * one sentence at a time to find it, keeping every other translation. */
    nmt_limits lim;
    nmt_session_limits(t->rt->s, &lim);
    for (uint32_t i = 0; i < n; i++) {
        st = translate_call(t, i, 1);
        if (st == NMT_ERR_INPUT_TOO_LONG) {
            fprintf(stderr,
                    PROG ": line %lu is longer than the limits (%u bytes: --max-text-bytes; %u tokens: "
                         "--max-src-len)%s\n",
                    first + i + 1, lim.max_text_bytes, lim.max_src_len,
                    t->skip_long ? "; its output is an empty line (--skip-long)" : "");
            if (!t->skip_long) {
                write_out(out); /* the lines before it */
                return 1;
            }
            if (t->dopts.n_best == 1) sb_printf(out, "\n");
            continue;
        }
        if (st != NMT_OK) return report_status("translation failed", st, t->rt);
        int rc = append_results(t, 1, first + i, out);
        if (rc != 0) return rc;
    }
    return 0;
}

/* The vocabulary and length rules of a live session for one side. */
static side_rule session_rule(const runtime *rt, int target) {
    nmt_model_info mi;
    nmt_limits lim;
    nmt_session_model_info(rt->s, &mi);
    nmt_session_limits(rt->s, &lim);
    uint32_t limit = target ? lim.max_tgt_len : lim.max_src_len;
    side_rule r = {
        .side = target ? "target" : "source",
        .vocab = target ? mi.tgt_vocab : mi.src_vocab,
        .max_tokens = limit,
    };
    snprintf(r.limit_hint, sizeof r.limit_hint, "%s %u%s", target ? "target limit" : "--max-src-len",
             limit, target ? "; see --max-len" : "");
    return r;
}

/* Text mode: the session's model embeds a tokenizer and --ids is not given. */
static int text_mode(const cli_opts *o, const runtime *rt) {
    return !o->ids && nmt_session_tokenizer(rt->s, 0) != NULL;
}

static int cmd_translate(const cli_opts *o) {
    runtime rt = {0};
    translate_job t = {
        .base = {.parse = translate_parse, .run = translate_run, .reset = translate_reset},
        .rt = &rt,
        .dopts = {.beam = (uint32_t)o->beam, .alpha = (float)o->alpha, .alpha_set = 1,
                  .max_len = (uint32_t)o->max_len, .n_best = (uint32_t)o->n_best},
    };
    int rc = open_session(o, o->beam, &rt);
    if (rc == 0) {
        t.src_rule = session_rule(&rt, 0);
        t.text = text_mode(o, &rt);
        t.skip_long = o->skip_long;
        cli_seqs_init(&t.src, (size_t)o->batch);
        cli_texts_init(&t.src_text, (size_t)o->batch);
        rc = process_lines(&t.base, o->batch);
        cli_seqs_free(&t.src);
        cli_texts_free(&t.src_text);
    }
    close_runtime(&rt);
    return rc;
}

/* ======================================================================== */
/* score                                                                    */
/* ======================================================================== */

typedef struct score_job {
    batch_job base;
    runtime *rt;
    side_rule rules[2];   /* source, target */
    int text;
    seq_buf seqs[2];
    cli_texts texts[2];
    float *logprob;       /* (batch) */
} score_job;

static int score_parse(batch_job *job, const char *line, size_t len, unsigned long line_no) {
    score_job *sj = (score_job *)job;
    char err[256];
    size_t tab;
    if (cli_split_pair(line, len, line_no, &tab, err, sizeof err) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (sj->text) {
        cli_texts_add(&sj->texts[0], line, tab);
        cli_texts_add(&sj->texts[1], line + tab + 1, len - tab - 1);
        return 0;
    }
    return parse_sentence(line, line + tab, line_no, &sj->rules[0], &sj->seqs[0]) ||
           parse_sentence(line + tab + 1, line + len, line_no, &sj->rules[1], &sj->seqs[1]);
}

static void score_reset(batch_job *job) {
    score_job *sj = (score_job *)job;
    for (int k = 0; k < 2; k++) {
        cli_seqs_reset(&sj->seqs[k]);
        cli_texts_reset(&sj->texts[k]);
    }
}

static int score_run(batch_job *job, unsigned long first, strbuf *out) {
    score_job *sj = (score_job *)job;
    nmt_status st;
    uint32_t n;
    if (sj->text) {
        nmt_text_batch src = text_view(&sj->texts[0]), tgt = text_view(&sj->texts[1]);
        n = src.n;
        st = nmt_session_score_text(sj->rt->s, &src, &tgt, sj->logprob);
        if (st != NMT_OK) {
            nmt_limits lim;
            nmt_session_limits(sj->rt->s, &lim);
            return text_status("scoring failed", st, sj->rt, first, &lim);
        }
    } else {
        nmt_batch src = seq_view(&sj->seqs[0]), tgt = seq_view(&sj->seqs[1]);
        n = src.n;
        st = nmt_session_score(sj->rt->s, &src, &tgt, sj->logprob);
        if (st != NMT_OK) return report_status("scoring failed", st, sj->rt);
    }
    for (uint32_t i = 0; i < n; i++) sb_printf(out, "%.6f\n", (double)sj->logprob[i]);
    return 0;
}

static int cmd_score(const cli_opts *o) {
    runtime rt = {0};
    score_job sj = {
        .base = {.parse = score_parse, .run = score_run, .reset = score_reset},
        .rt = &rt,
    };
    int rc = open_session(o, 1, &rt);
    if (rc == 0) {
        sj.text = text_mode(o, &rt);
        for (int k = 0; k < 2; k++) {
            sj.rules[k] = session_rule(&rt, k);
            cli_seqs_init(&sj.seqs[k], (size_t)o->batch);
            cli_texts_init(&sj.texts[k], (size_t)o->batch);
        }
        sj.logprob = xrealloc(NULL, (size_t)o->batch * sizeof *sj.logprob);
        rc = process_lines(&sj.base, o->batch);
        for (int k = 0; k < 2; k++) {
            cli_seqs_free(&sj.seqs[k]);
            cli_texts_free(&sj.texts[k]);
        }
        free(sj.logprob);
    }
    close_runtime(&rt);
    return rc;
}

/* ======================================================================== */
/* main                                                                     */
/* ======================================================================== */

static const command COMMANDS[] = {
    {"translate", C_TRANSLATE, cmd_translate, "--model FILE [options] < text > text",
     "translate lines of source text (or token ids) to the target language",
     "Translate standard input, one sentence per line, to one line per input line (empty\n"
     "in, empty out).  A model with an embedded tokenizer reads and writes text; otherwise,\n"
     "or with --ids, lines are whitespace-separated token ids.\n"
     "With --n-best N > 1 each sentence gives N lines 'INDEX ||| TOKENS ||| SCORE' (0-based\n"
     "input line index, length-normalised score, best first; fewer lines only when the\n"
     "search finished fewer hypotheses)."},
    {"score", C_SCORE, cmd_score, "--model FILE [options] < pairs > scores",
     "log-probability of given translations (forced decoding)",
     "Forced decoding: read lines 'SOURCE<TAB>TARGET' (text with a tokenizer, else ids; --ids\n"
     "forces ids) and print the natural-log\n"
     "probability log P(target | source), end-of-sentence included, one per line (%.6f)."},
    {"tokenize", C_TOKENIZE, cmd_tokenize, "(--sp-model FILE | --model FILE) [options] < text > ids",
     "text to SentencePiece ids (or pieces), as spm_encode does",
     "Tokenize standard input, one sentence per line, with a SentencePiece model: a .model\n"
     "file (--sp-model) or the tokenizer embedded in an .nmt file (--model; --target for its\n"
     "target side).  Prints space-separated ids, or pieces with --pieces, one line per line;\n"
     "identical to 'spm_encode --output_format=id'.  As spm_encode, only LF ends a line: a CR\n"
     "before it is part of the text."},
    {"detokenize", C_DETOKENIZE, cmd_detokenize,
     "(--sp-model FILE | --model FILE) [options] < ids > text",
     "SentencePiece ids to text, as spm_decode does",
     "Detokenize lines of whitespace-separated ids to text (identical to 'spm_decode\n"
     "--input_format=id'; a line break inside a decoded text is written as a space)."},
    {"info", C_INFO, cmd_info, "--model FILE [options]",
     "describe a model, its memory needs and the device",
     "Describe a model (architecture, hyper-parameters, sizes), the host arena and device\n"
     "bytes a session needs under the given limits, and the device that would be used."},
    {"devices", C_DEVICES, cmd_devices, "[options]", "list OpenCL devices",
     "List OpenCL devices as 'P:D  platform / device  (type)'; P:D is a --device SPEC."},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void print_main_help(void) {
    printf("Usage: " PROG " COMMAND [options]\n\n"
           "OpenCL neural machine translation runtime for edge devices.\n\nCommands:\n");
    for (size_t c = 0; c < N_COMMANDS; c++)
        printf("  %-10s %s\n", COMMANDS[c].name, COMMANDS[c].summary);
    printf("\nRun '" PROG " COMMAND --help' for the options of a command.\n"
           "  --help       show this help\n  --version    show the version\n");
}

static int check_combination(const command *cmd, const cli_opts *o) {
    if ((cmd->bit & C_MODEL) && o->model == NULL)
        return usage_error(cmd, "--model FILE is required");
    if ((cmd->bit & C_TOK) && (o->model == NULL) == (o->sp_model == NULL))
        return usage_error(cmd, "give exactly one of --model FILE and --sp-model FILE");
    if ((cmd->bit & C_TOK) && o->target && o->model == NULL)
        return usage_error(cmd, "--target needs --model");
    if (o->n_best > o->beam)
        return usage_error(cmd, "--n-best %ld is larger than --beam %ld", o->n_best, o->beam);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage_error(NULL, "missing command");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_main_help();
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf(PROG " %d.%d.%d (library %s)\n", NMT_VERSION_MAJOR, NMT_VERSION_MINOR,
               NMT_VERSION_PATCH, nmt_version());
        return 0;
    }
    const command *cmd = NULL;
    for (size_t c = 0; c < N_COMMANDS; c++)
        if (strcmp(argv[1], COMMANDS[c].name) == 0) cmd = &COMMANDS[c];
    if (cmd == NULL) return usage_error(NULL, "unknown command '%s'", argv[1]);

    cli_opts o = {.beam = 4, .n_best = 1, .alpha = 0.6, .batch = 8, .max_src_len = 256,
                  .max_text_bytes = 2048, .gemm = NMT_GEMM_AUTO};
    int rc = parse_options(cmd, argc - 1, argv + 1, &o);
    if (rc != 0) return rc;
    if (o.help) {
        print_command_help(cmd);
        return 0;
    }
    if ((rc = check_combination(cmd, &o)) != 0) return rc;
    return cmd->run(&o);
}
