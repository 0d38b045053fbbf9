/* cli.h — what the files of the `nmt-edge` program share: output buffer,
 * options, device/session set-up, the batched line loop.  The program, not
 * the library: it may allocate. */
#ifndef NMT_CLI_H
#define NMT_CLI_H

#include "cli_input.h"
#include "nmt_edge.h"

#include <stddef.h>
#include <stdint.h>

#define PROG "nmt-edge"
#define EXIT_USAGE 2

#define xrealloc cli_xrealloc
#define grow cli_grow

/* Growable text buffer: a batch's output is assembled here, then written. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

enum { C_TRANSLATE = 1u, C_SCORE = 2u, C_INFO = 4u, C_DEVICES = 8u, C_TOKENIZE = 16u,
       C_DETOKENIZE = 32u };
#define C_MODEL (C_TRANSLATE | C_SCORE | C_INFO)
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
    int skip_long;  /* translate: over-long sentences give empty lines */
} cli_opts;

/* A device and a session with the memory the program owns for them. */
typedef struct runtime {
    void *dev_mem;
    nmt_device *dev;
    void *arena;
    nmt_session *s;
    nmt_log_level log_level;
    char cache_dir[4096];
} runtime;

typedef cli_seqs seq_buf;
typedef cli_side_rule side_rule;

/* A subcommand's per-line parser and per-batch runner over a shared loop. */
typedef struct batch_job {
    int (*parse)(struct batch_job *job, const char *line, size_t len, unsigned long line_no);
    int (*run)(struct batch_job *job, unsigned long first_index, strbuf *out);
    void (*reset)(struct batch_job *job);
    uint32_t pending;   /* lines parsed into the current batch */
    int keep_cr;        /* a CR before LF is text (tokenize: as spm_encode reads lines) */
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
/* Validate the model file and size the session; prints the error itself. */
int model_sizes(const char *path, const nmt_limits *lim, size_t *arena, uint64_t *device_bytes);
int open_device(const cli_opts *o, runtime *rt);
void close_runtime(runtime *rt);
nmt_limits limits_from(const cli_opts *o, long beam);
/* Size, allocate and create the session (model checked before the device). */
int open_session(const cli_opts *o, long beam, runtime *rt);
/* Parse one line of ids into q under rule r; prints the error itself. */
int parse_sentence(const char *p, const char *end, unsigned long line, const side_rule *r,
                   seq_buf *q);
/* Read stdin line by line, `batch` lines per call to job->run. */
int process_lines(batch_job *job, long batch);

/* --gemm values, indexed by nmt_gemm_provider. */
extern const char *const GEMM_NAMES[3];

/* Subcommands living in their own files. */
int cmd_tokenize(const cli_opts *o);    /* cli_tokenize.c */
int cmd_detokenize(const cli_opts *o);
int cmd_info(const cli_opts *o);        /* cli_info.c */
int cmd_devices(const cli_opts *o);

#endif
