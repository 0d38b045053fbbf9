/* SPDX-License-Identifier: MIT */
/* cli.h — what the files of the `nmt-edge` program share: output buffer,
 * options, device/session set-up, the batched line loop.  The program, not
 * the library: it may allocate. */
#ifndef NMT_CLI_H
#define NMT_CLI_H

#include "cli_input.h"
#include "cli_progress.h"
#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PROG "nmt-edge"
#define EXIT_USAGE 2

/* Caps on the options that size a session (docs/RUNTIME.md, "Limits"): far
 * above any real sentence, low enough that what they reserve stays sane
 * (--max-text-bytes 1 MiB plans about 1.2 GB of tokenizer scratch).  Past
 * these, the memory a plan needs is checked against the host and the device
 * before anything is allocated (check_memory). */
#define CLI_MAX_TEXT_BYTES 1048576
#define CLI_MAX_TOKENS 8192
/* The options a session's memory grows with, as the errors name them. */
#define CLI_SESSION_OPTIONS "--max-text-bytes, --max-src-len, --max-len, --batch or --beam"

#define xrealloc cli_xrealloc
#define grow cli_grow

/* Growable text buffer: a batch's output is assembled here, then written. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

enum { C_TRANSLATE = 1u, C_SCORE = 2u, C_INFO = 4u, C_DEVICES = 8u, C_TOKENIZE = 16u,
       C_DETOKENIZE = 32u, C_WARMUP = 64u };
#define C_MODEL (C_TRANSLATE | C_SCORE | C_INFO | C_WARMUP)
/* The options a command takes: warmup takes info's (the session's limits) */
#define C_OPTION_BITS(bit) ((bit) == C_WARMUP ? (C_WARMUP | C_INFO) : (bit))
#define C_TOK (C_TOKENIZE | C_DETOKENIZE)
#define C_ALL (C_MODEL | C_DEVICES | C_TOK)

typedef struct cli_opts {
    const char *model;
    const char *sp_model;
    const char *device;
    long beam, n_best, max_len, batch, max_src_len, max_text_bytes;
    int ids, pieces, target;
    double alpha;
    long gemm;
    int no_cache, no_device, verbose, help;
    int fill_cache;                 /* warmup: write the program cache on every driver (cache_fill) */
    int help_all;                   /* --help-all: every option, grouped */
    int skip_long;  /* translate, score: over-long sentences give empty lines */
    int with_score; /* translate: "SCORE ||| " before each translation */
    int with_pieces; /* translate --format jsonl: "pieces" too */
    int stream;      /* translate --stream: draw each translation as it is decoded (a terminal) */
    const char *input, *output; /* -i / -o FILE, NULL: standard input / output */
    long min_len, no_repeat_ngram;  /* translate: decoding constraints (0: none) */
    const char *max_len_ratio;      /* translate: "A,B", parsed into max_len_a / max_len_b */
    double max_len_a, max_len_b;
    const char *alignment;          /* translate, score, info: "hard" / "soft" (--alignment), NULL: none */
    int alignment_words;            /* translate, score: --alignment-words */
    long align_layer, align_head;   /* --align-layer / --align-head (0: last layer, mean of heads) */
    /* translate: decoding options (cli_decode.c checks and parses them) */
    double coverage_penalty, repetition_penalty; /* 0: off */
    const char *sampling;           /* --sampling topk:K, parsed into sampling_topk */
    double temperature;             /* --temperature (0: not given = 1) */
    const char *seed;               /* --seed N, parsed into seed_value */
    const char *prefix_file;        /* --prefix-file FILE */
    const char *spans_file;         /* --spans FILE: MG-SA syntax spans of the sources (tools/spans_file.h) */
    const char *format;             /* --format text|marian|jsonl (NULL: text) */
    long sampling_topk;
    unsigned long long seed_value;
    const char *kernel_pack;        /* --kernel-pack FILE (else $NMT_EDGE_KERNEL_PACK) */
    int binaries_only;              /* --binaries-only (or $NMT_EDGE_BINARIES_ONLY) */
    int no_fp16;                    /* --no-fp16 (or $NMT_EDGE_NO_FP16): no fp16 compute */
    int quiet;                      /* translate, score: no progress line on a terminal */
    long batch_tokens;              /* translate --batch-tokens N: token batches (0: sentence batches) */
    long read_ahead;                /* translate --read-ahead K: lines sorted together (0: 16 * --batch) */
} cli_opts;

/* --read-ahead's default: lines read and sorted together per --batch. */
#define CLI_READ_AHEAD_BATCHES 16

/* A device and a session with the memory the program owns for them. */
typedef struct runtime {
    void *dev_mem;
    nmt_device *dev;
    void *arena;
    nmt_session *s;
    nmt_log_level log_level;
    cli_build_note build;   /* the first start's note (cli_progress.h) */
    char cache_dir[4096];
} runtime;

typedef cli_seqs seq_buf;
typedef cli_side_rule side_rule;

/* ---- The batch runner (cli_batch.c) ------------------------------------ */

/* What parse() says of a line. */
enum { LINE_OK = 0, LINE_BAD = 1, LINE_LONG = 2 };

/* A subcommand (translate, score, tokenize, detokenize) as hooks over the
 * shared line loop, process_lines().  The hooks fill the first fields; the
 * runner owns the rest. */
typedef struct batch_job {
    /* Parse line `line_no` (1-based, without its line end) into sentence
     * `pending` of the batch.  LINE_BAD: the message ("line N: ...") in
     * err[0, cap), nothing stored.  LINE_LONG: well-formed but over the
     * limits: the message in err and an empty placeholder stored, so that
     * --skip-long can keep the lines aligned. */
    int (*parse)(struct batch_job *job, const char *line, size_t len, unsigned long line_no,
                 char *err, size_t cap);
    /* With line_limit > 0: parse a line the reader cut for being longer
     * than line_limit + 1 bytes (cli_reader.limit), of which only
     * head[0, head_len) (its first bytes) was kept; len is its length
     * without its line end (as parse's), cut its counts.  Returns as parse
     * (LINE_LONG with an empty placeholder stored), with the message the
     * line would have had whole. */
    int (*parse_cut)(struct batch_job *job, const char *head, size_t head_len, uint64_t len,
                     const cli_cut *cut, unsigned long line_no, char *err, size_t cap);
    size_t line_limit;  /* 0: the reader keeps lines whole (id mode) */
    /* Run sentences [lo, lo + n) of the batch through the library: the
     * slots lo .. lo + n - 1, or with `order` set (token batches) the slots
     * order[lo .. lo + n - 1] (batch_slot). */
    nmt_status (*call)(struct batch_job *job, uint32_t lo, uint32_t n);
    /* Token batches: the source tokens of slot i (its row on the device,
     * without the EOS); NULL: the subcommand has no token batches. */
    uint32_t (*length)(struct batch_job *job, uint32_t i);
    /* Append the output of result r of the last call, the input line of
     * 0-based index `index`; 0, or 1 with the message printed. */
    int (*append)(struct batch_job *job, uint32_t r, unsigned long index, strbuf *out);
    /* call() said NMT_ERR_INPUT_TOO_LONG for sentence i alone: say why, as
     * "line N ..." in err[0, cap). */
    void (*why_long)(struct batch_job *job, uint32_t i, unsigned long line_no, char *err, size_t cap);
    void (*reset)(struct batch_job *job);
    const char *what;   /* a library failure is reported as "WHAT: status" */
    const runtime *rt;  /* for OpenCL error codes (NULL: none) */
    int keep_cr;        /* a CR before LF is text (tokenize: as spm_encode reads lines) */
    int blank_skipped;  /* a line skipped by --skip-long is an empty output line */
    int show_progress;  /* a progress line on a terminal unless --quiet (cli_progress.h) */
    int show_summary;   /* translate: the summary line at the end (cli_progress_finish) */
    int can_skip;       /* the subcommand takes --skip-long: a long-line error names it */

    /* runner state */
    uint32_t pending;   /* lines parsed into the current batch */
    uint32_t batch;     /* --batch: sentences per call */
    uint32_t window;    /* lines held before they run: --batch, or --read-ahead with --batch-tokens */
    uint32_t batch_tokens; /* --batch-tokens (0: sentence batches) */
    const uint32_t *order; /* during a token-batch call: slot of each planned position; else NULL */
    uint32_t *plan_order, *plan_sizes, *plan_lens, *plan_live; /* (window) nmt_batch_plan_tokens */
    uint32_t *slot_lens; /* (window) token batches: each slot's length() */
    uint32_t length_limit; /* token batches: a slot longer than this runs alone (0: none) */
    size_t *stage_at, *stage_len; /* (window) token batches: slot i's output is staged.p + at[i], len[i] bytes */
    uint8_t *stage_done; /* (window) slot i's output is staged */
    strbuf staged;      /* token batches: outputs in planned order, written back in input order */
    int skip_long;      /* --skip-long */
    uint8_t *skipped;   /* (window) 1: sentence i is a --skip-long placeholder */
    cli_reader in;
    int in_fd;          /* 0 or the -i file */
    char in_name[4200], out_name[4200]; /* for messages: "standard input", "'FILE'" */
    int out_fd;         /* 1 or the temporary file of -o */
    char *out_path;     /* -o FILE, symbolic links resolved (malloc'd); NULL: stdout */
    char *tmp_path;     /* the temporary beside it (malloc'd) */
    int kept_said;      /* a message already said -o FILE is left as it was */
    cli_progress progress;
} batch_job;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void sb_printf(strbuf *b, const char *fmt, ...);
int write_out(strbuf *b);
/* A decoded text on one output line: line breaks become spaces. */
void append_text(strbuf *out, const char *s, size_t n);
size_t round_up(size_t x, size_t a);

/* Print "nmt-edge: WHAT: status" (+ errno / OpenCL code) and return 1. */
int report_status(const char *what, nmt_status st, const runtime *rt);
int model_error(const char *path, nmt_status st);
/* Validate the model file (o->model) and size the session (with o's
 * alignment options); prints the error itself. */
int model_sizes(const cli_opts *o, const nmt_limits *lim, size_t *arena, uint64_t *device_bytes);
/* The session parameters of the options (model, limits, alignments, fp16 compute). */
nmt_session_params session_params(const cli_opts *o, const nmt_limits *lim);
int open_device(const cli_opts *o, runtime *rt);
void close_runtime(runtime *rt);
nmt_limits limits_from(const cli_opts *o, long beam);
/* Size, allocate and create the session (model checked before the device). */
int open_session(const cli_opts *o, long beam, runtime *rt);
/* Refuse a plan that cannot fit before anything is allocated: `host_bytes`
 * of `arena` (e.g. "session arena") over nmt_tool_host_memory_limit(), or
 * device_bytes over the global memory of `dev` (NULL: not checked).  Prints
 * the numbers and the options to lower (`lower` for host memory), returns 1;
 * 0 if it fits. */
int check_memory(const char *arena, size_t host_bytes, uint64_t device_bytes,
                 const nmt_device *dev, const char *lower);
/* Open the input (-i FILE or stdin) and output (-o FILE or stdout) of a
 * job and take --batch / --skip-long; prints the error itself.  Call
 * batch_close() afterwards in every case. */
int batch_open(batch_job *job, const cli_opts *o);
/* Read every line, run the batches, write their output (see cli_batch.c). */
int process_lines(batch_job *job);
/* Finish: with rc == 0 -o FILE is replaced by the output, otherwise it is
 * left as it was.  Returns rc, or 1 when finishing the output failed. */
int batch_close(batch_job *job, int rc);

/* The slot of sentence i of a call that began at lo (see batch_job.call). */
static inline uint32_t batch_slot(const batch_job *job, uint32_t lo, uint32_t i) {
    return job->order != NULL ? job->order[lo + i] : lo + i;
}

/* ---- Alignments (cli_align.c) ------------------------------------------ */

enum { CLI_ALIGN_NONE = 0, CLI_ALIGN_HARD = 1, CLI_ALIGN_SOFT = 2 };

/* translate / score --alignment: the mode and the scratch of one result. */
typedef struct cli_align {
    int mode;                     /* CLI_ALIGN_* */
    int words;                    /* --alignment-words */
    uint32_t max_tgt, max_src;    /* the session's limits */
    float *soft;                  /* (max_tgt, max_src + 1) */
    int32_t *links;               /* (max_tgt) */
    uint32_t *src_word, *tgt_word; /* piece -> word (--alignment-words) */
} cli_align;

/* From the options, for a live session; 1 with the message printed. */
int cli_align_init(cli_align *a, const cli_opts *o, const runtime *rt);
void cli_align_free(cli_align *a);
/* Append " ||| ALIGNMENT" of hypothesis `rank` of result i of the last
 * translate call, or of pair i (rank 0) of the last score call (nothing
 * without --alignment); src[0, src_len) is its source text, tgt[0,
 * tgt_len) the reference text of a score call (NULL after translate: the
 * hypothesis's tokens), both read for --alignment-words only.  0, or 1
 * with the message printed. */
int cli_align_append(cli_align *a, const runtime *rt, uint32_t i, uint32_t rank, const char *src, size_t src_len,
                     const char *tgt, size_t tgt_len, strbuf *out);
/* The same alignment of a translate result as a JSON array (--format
 * jsonl): hard [[i, j], ...] (source i, target j, as the pairs 'i-j'),
 * soft [[p, ...], ...] (a row per target piece); nothing without
 * --alignment.  0, or 1 with the message printed. */
int cli_align_json(cli_align *a, const runtime *rt, uint32_t i, uint32_t rank, const char *src, size_t src_len,
                   strbuf *out);

/* ---- Decoding options and output formats (cli_decode.c) ---------------- */

enum { CLI_FORMAT_TEXT = 0, CLI_FORMAT_MARIAN = 1, CLI_FORMAT_JSONL = 2 };

/* Check and parse the decoding options of o (beam 0 = not given: 1 with
 * --sampling, else 4).  0, or EXIT_USAGE with the message (no newline) in
 * err[0, cap). */
int cli_decode_check(cli_opts *o, char *err, size_t cap);
/* CLI_FORMAT_* of --format */
static inline int cli_format(const cli_opts *o) {
    if (o->format == NULL || strcmp(o->format, "text") == 0) return CLI_FORMAT_TEXT;
    return strcmp(o->format, "marian") == 0 ? CLI_FORMAT_MARIAN : CLI_FORMAT_JSONL;
}

/* --prefix-file: every line (text, or ids without a tokenizer / with --ids). */
typedef struct cli_prefix {
    unsigned long n;              /* lines */
    cli_texts text;               /* each line's bytes (line end removed) */
    int32_t *ids;                 /* ids mode: every line's ids back to back */
    const int32_t **id_ptrs;      /* (n) */
    uint32_t *id_lens;            /* (n) */
} cli_prefix;

/* Read FILE (ids: parse each line, vocab = target vocabulary); 1 with the
 * message printed. */
int cli_prefix_load(cli_prefix *p, const char *path, int ids, uint32_t vocab);
void cli_prefix_free(cli_prefix *p);

/* JSON string of s[0, n) with its quotes: escapes per RFC 8259, bytes that
 * are not UTF-8 become U+FFFD. */
void cli_json_string(strbuf *out, const char *s, size_t n);

/* --format jsonl: one object for a hypothesis, and its newline:
 *   {"line": L, "rank": R, "text": "...", "tokens": [...], "score": S,
 *    "logprob": P, "token_logprobs": [...], "alignment": [...], "pieces": [...]}
 * tokens, token_logprobs and pieces have n_tokens entries each, the last
 * the end-of-sentence; alignment and pieces only when given. */
typedef struct cli_json_hyp {
    unsigned long line;           /* 0-based input line */
    uint32_t rank;
    const char *text;             /* what the text format prints (ids joined by spaces without a tokenizer) */
    size_t text_len;
    const int32_t *tokens;        /* (n_tokens): the hypothesis's ids, then the end-of-sentence id */
    uint32_t n_tokens;
    float score, logprob;
    const float *token_lp;        /* (n_tokens), summing to logprob */
    const char *alignment;        /* a JSON array (cli_align_json), NULL: none */
    size_t alignment_len;
    const char *const *pieces;    /* (n_tokens) piece strings, NULL entry: null; NULL: no "pieces" */
    const size_t *piece_lens;     /* (n_tokens) */
} cli_json_hyp;
void cli_json_append(strbuf *out, const cli_json_hyp *h);

/* --gemm values, indexed by nmt_gemm_provider. */
extern const char *const GEMM_NAMES[3];

/* Subcommands living in their own files. */
int cmd_translate(const cli_opts *o);   /* cli_batch.c */
int cmd_score(const cli_opts *o);
int cmd_tokenize(const cli_opts *o);    /* cli_tokenize.c */
int cmd_detokenize(const cli_opts *o);
int cmd_info(const cli_opts *o);        /* cli_info.c */
int cmd_warmup(const cli_opts *o);
int cmd_devices(const cli_opts *o);

#endif
