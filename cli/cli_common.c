/* SPDX-License-Identifier: MIT */
/* cli_common.c — what every subcommand of `nmt-edge` uses (cli.h): small
 * utilities (growing buffers, the output string builder), reporting
 * library statuses, and the device and session set-up.  The subcommands (cli_batch.c, cli_tokenize.c,
 * cli_info.c, cli_align.c) call these; main (nmt_edge_cli.c) calls the
 * subcommands; nothing here calls either.
 */
#include "cli.h"
#include "common.h"
#include "tool_env.h"
#include "tool_file.h"
#include "tool_out.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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


/* --gemm values, by nmt_device_params.gemm */
const char *const GEMM_NAMES[3] = {"auto", "own", "clblast"};

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
    /* A file the library refused for its kind (/dev/null, a FIFO: NMT_ERR_IO
     * with ENODEV) or an empty one: say so rather than the errno's text. */
    char why[64];
    if ((st == NMT_ERR_IO || st == NMT_ERR_MODEL_TRUNCATED) &&
        nmt_tool_file_problem(path, why, sizeof why)) {
        fprintf(stderr, PROG ": cannot load model '%s': %s\n", path, why);
        return 1;
    }
    /* A model refused for its contents: name the key or tensor, the
     * expected and the found value (nmt_model_explain). */
    char detail[NMT_MODEL_WHY_BYTES];
    if (st >= NMT_ERR_MODEL_TRUNCATED && st <= NMT_ERR_MODEL_TENSOR_SHAPE &&
        nmt_model_explain_file(path, detail, sizeof detail) == st && detail[0]) {
        char shown[4 * NMT_MODEL_WHY_BYTES]; /* the reason may quote the file's bytes (tool_out.h) */
        fprintf(stderr, PROG ": cannot load model '%s': %s: %s\n", path, nmt_status_str(st),
                nmt_tool_escape(detail, SIZE_MAX, shown, sizeof shown));
        return 1;
    }
    /* a tokenizer with ids past the embeddings: say which and by how much */
    size_t size = 0;
    void *img = st == NMT_ERR_TOKENIZER_MODEL ? nmt_tool_read_file(path, 0, &size, NULL, 0) : NULL;
    const int told = img != NULL && nmt_tool_tokenizer_problem(img, size, detail, sizeof detail);
    free(img);
    if (told) {
        fprintf(stderr, PROG ": cannot load model '%s': %s: %s\n", path, nmt_status_str(st), detail);
        return 1;
    }
    char what[64 + 4096];
    snprintf(what, sizeof what, "cannot load model '%s'", path);
    errno = saved_errno;
    return report_status(what, st, NULL);
}

/* The session parameters of the options (model, limits, alignments). */
nmt_session_params session_params(const cli_opts *o, const nmt_limits *lim) {
    nmt_session_params sp = {.model_path = o->model, .limits = *lim,
                             .alignment = o->alignment != NULL || o->coverage_penalty > 0,
                             .align_layer = (uint32_t)o->align_layer, .align_head = (uint32_t)o->align_head,
                             .token_logprobs = cli_format(o) == CLI_FORMAT_JSONL, .sampling = o->sampling != NULL,
                             .fp16_compute = nmt_tool_fp16_compute(o->no_fp16)};
    return sp;
}

/* --alignment on a model that cannot give them, or --align-layer /
 * --align-head beyond it: 1 with the message printed, else 0. */
static int alignment_refused(const cli_opts *o, nmt_status st) {
    nmt_model_info mi;
    if ((o->alignment == NULL && !(o->coverage_penalty > 0)) || nmt_model_inspect_file(o->model, &mi) != NMT_OK)
        return 0;
    if (st == NMT_ERR_UNSUPPORTED) {
        fprintf(stderr, PROG ": %s: model '%s' (arch %s) has no token cross-attention to align with "
                        "(phrase cross-attention: its keys are n-grams)\n",
                o->alignment ? "--alignment" : "--coverage-penalty", o->model, mi.arch);
        return 1;
    }
    if (st != NMT_ERR_INVALID_ARGUMENT) return 0;
    if (o->align_layer > (long)mi.dec_layers) {
        fprintf(stderr, PROG ": --align-layer %ld: model '%s' has %u decoder layer%s\n", o->align_layer, o->model,
                mi.dec_layers, mi.dec_layers == 1 ? "" : "s");
        return 1;
    }
    /* a family without heads (BA-NMT: one additive attention) aligns with one */
    const uint32_t heads = mi.n_heads ? mi.n_heads : 1;
    if (o->align_head > (long)heads) {
        fprintf(stderr, PROG ": --align-head %ld: model '%s' has %u head%s\n", o->align_head, o->model, heads,
                heads == 1 ? "" : "s");
        return 1;
    }
    return 0;
}

int model_sizes(const cli_opts *o, const nmt_limits *lim, size_t *arena, uint64_t *device_bytes) {
    const char *path = o->model;
    /* (--batch is at most 4096: with the default beam of 4 the product fits) */
    const uint64_t rows = (uint64_t)lim->max_batch * lim->max_beam;
    if (rows > NMT_SESSION_MAX_ROWS) {
        fprintf(stderr, PROG ": --batch %u x --beam %u = %llu hypotheses a decoder step, more than a session's "
                        "plan holds (%u): lower --batch or --beam\n", lim->max_batch, lim->max_beam,
                (unsigned long long)rows, NMT_SESSION_MAX_ROWS);
        return 1;
    }
    nmt_session_params sp = session_params(o, lim);
    errno = 0;
    nmt_status st = nmt_session_arena_size(&sp, arena, device_bytes);
    if (st != NMT_OK && alignment_refused(o, st)) return 1;
    if (st == NMT_ERR_INVALID_ARGUMENT)
        return report_status("cannot plan a session for --max-src-len, --max-len, --batch and "
                             "--beam (lower them)", st, NULL);
    if (st == NMT_ERR_DEVICE_MEMORY && sizeof(size_t) < 8) {
        /* a buffer's size does not fit this host's size_t (32-bit builds) */
        fprintf(stderr,
                PROG ": these limits need buffers larger than a %u-bit host can address; lower --max-src-len, "
                     "--max-len, --batch or --beam\n",
                (unsigned)(8 * sizeof(size_t)));
        return 1;
    }
    return st == NMT_OK ? 0 : model_error(path, st);
}

/* ======================================================================== */
/* Device and session set-up                                                */
/* ======================================================================== */

static void log_to_stderr(void *user, nmt_log_level level, const char *msg) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    const nmt_log_level *max = user;
    if (level > *max) return;
    char shown[4 * 1024 + 1]; /* a refused model's reason may quote its bytes (tool_out.h) */
    fprintf(stderr, PROG ": %s: %s\n", names[(unsigned)level < 4 ? level : 3],
            nmt_tool_escape(msg, SIZE_MAX, shown, sizeof shown));
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
    /* NMT_EDGE_NO_BUILD_NOTE: scripts (and the tests) that compare stderr
     * whatever the kernel caches hold */
    const char *no_note = getenv("NMT_EDGE_NO_BUILD_NOTE");
    rt->build = (cli_build_note){.quiet = o->quiet || (no_note && *no_note && strcmp(no_note, "0")),
                                 .tty = isatty(2)};
    dp.progress = cli_build_progress;
    dp.progress_user = &rt->build;
    if (o->kernel_pack && o->kernel_pack[0]) dp.kernel_pack = o->kernel_pack;
    if (o->fill_cache) dp.cache_fill = 1;
    if (o->binaries_only) dp.binaries_only = 1;
    size_t fp = round_up(nmt_device_footprint() ? nmt_device_footprint() : 1, 64);
    rt->dev_mem = aligned_alloc(64, fp);
    if (rt->dev_mem == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    char what[300];
    snprintf(what, sizeof what, "cannot open device '%.200s'", dp.device ? dp.device : "default");
    nmt_tool_signals sigs;
    nmt_tool_signals_save(&sigs);
    nmt_status st = nmt_device_open(&dp, rt->dev_mem, fp, &rt->dev);
    nmt_tool_signals_restore(&sigs); /* the OpenCL runtime may have installed its own (tool_out.h) */
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

/* What device memory grows with (--max-text-bytes only sizes host scratch). */
#define DEVICE_OPTIONS "--max-src-len, --max-len, --batch or --beam"

int check_memory(const char *arena, size_t host_bytes, uint64_t device_bytes,
                 const nmt_device *dev, const char *lower) {
    const uint64_t host_cap = nmt_tool_host_memory_limit();
    if ((uint64_t)host_bytes > host_cap) {
        fprintf(stderr,
                PROG ": these limits need %zu bytes of host memory for the %s, more than the "
                     "%llu bytes this process may use (physical memory, ulimit -v, ulimit -d); "
                     "lower %s\n",
                host_bytes, arena, (unsigned long long)host_cap, lower);
        return 1;
    }
    if (dev == NULL) return 0;
    nmt_device_info di;
    nmt_device_get_info(dev, &di);
    if (di.global_mem_bytes != 0 && device_bytes > di.global_mem_bytes) {
        fprintf(stderr,
                PROG ": these limits need %llu bytes of device memory, more than the %llu bytes "
                     "of device '%s' (largest buffer %llu bytes); lower " DEVICE_OPTIONS "\n",
                (unsigned long long)device_bytes, (unsigned long long)di.global_mem_bytes,
                di.device_name, (unsigned long long)di.max_alloc_bytes);
        return 1;
    }
    return 0;
}

int open_session(const cli_opts *o, long beam, runtime *rt) {
    nmt_limits lim = limits_from(o, beam);
    size_t need;
    uint64_t device_bytes = 0;
    if (model_sizes(o, &lim, &need, &device_bytes) != 0) return 1;
    /* what the plan takes, reported and checked before any of it is taken */
    if (o->verbose)
        fprintf(stderr, PROG ": info: session plan: %zu bytes of host memory (arena), %llu bytes of "
                        "device memory\n", need, (unsigned long long)device_bytes);
    if (check_memory("session arena", need, 0, NULL, CLI_SESSION_OPTIONS) != 0) return 1;
    if (open_device(o, rt) != 0) return 1;
    if (check_memory("session arena", need, device_bytes, rt->dev, CLI_SESSION_OPTIONS) != 0) return 1;
    size_t size = round_up(need ? need : 1, NMT_ARENA_ALIGNMENT);
    rt->arena = aligned_alloc(NMT_ARENA_ALIGNMENT, size);
    if (rt->arena == NULL) {
        fprintf(stderr, PROG ": cannot allocate the %zu-byte session arena\n", size);
        return 1;
    }
    nmt_session_params sp = session_params(o, &lim);
    errno = 0;
    nmt_status st = nmt_session_create(rt->dev, &sp, rt->arena, size, &rt->s);
    if (st == NMT_ERR_DEVICE_MEMORY) {
        /* fits in total but not buffer by buffer, or the driver refused */
        rt->s = NULL;
        nmt_device_info di;
        nmt_device_get_info(rt->dev, &di);
        fprintf(stderr,
                PROG ": cannot create session: %s (the session needs %llu bytes of device memory; "
                     "device '%s' has %llu bytes, largest buffer %llu bytes); lower "
                     DEVICE_OPTIONS "\n",
                nmt_status_str(st), (unsigned long long)device_bytes, di.device_name,
                (unsigned long long)di.global_mem_bytes, (unsigned long long)di.max_alloc_bytes);
        return 1;
    }
    if (st != NMT_OK) {
        rt->s = NULL;
        return report_status("cannot create session", st, rt);
    }
    if (o->verbose)
        fprintf(stderr, PROG ": info: session ready, arena %zu bytes (%zu used)\n", size,
                nmt_session_arena_used(rt->s));
    return 0;
}
