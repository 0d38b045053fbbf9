/* SPDX-License-Identifier: MIT */
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
 * non-negative decimal ids.  Parsing lives in cli_input.c (fuzzed).  The
 * batch runner (cli_batch.c) writes the output of every line before one that
 * stops a run, names that line and why, and replaces -o FILE atomically.
 *
 * Exit status: 0 success, 1 runtime error (input, model, device, output),
 * 2 usage.  This file: the option table and its parser, the command table,
 * help and main; set-up and reporting in cli_common.c; the batch runner, translate and score in
 * cli_batch.c, tokenize/detokenize in cli_tokenize.c, info/devices in
 * cli_info.c, alignments in cli_align.c, line parsing in cli_input.c.
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
/* Options: one table, one parser, shared by every subcommand               */
/* ======================================================================== */


typedef enum opt_kind { OPT_FLAG, OPT_LONG, OPT_DOUBLE, OPT_STRING, OPT_GEMM } opt_kind;

/* The groups the help lists options under, in this order (docs/CLI.md has
 * the same sections). */
typedef enum opt_group { G_IO, G_DECODE, G_FORMAT, G_LIMITS, G_DEVICE, G_GENERAL, N_GROUPS } opt_group;
static const char *const GROUP_NAMES[N_GROUPS] = {
    [G_IO] = "Input and output", [G_DECODE] = "Decoding", [G_FORMAT] = "Output format",
    [G_LIMITS] = "Limits", [G_DEVICE] = "Device and kernels", [G_GENERAL] = "General"};

/* One option.  `--help` shows the options marked COMMON with their brief
 * text (one screen); `--help-all` every option with its full help text.
 * Both read this table, as the parser does, so they cannot drift apart. */
typedef struct opt_spec {
    const char *name;     /* without the leading "--" */
    opt_kind kind;
    size_t offset;        /* field of cli_opts */
    double min, max;      /* numeric range (inclusive) */
    unsigned cmds;        /* subcommands accepting it */
    const char *metavar;
    opt_group group;
    int common;           /* COMMON: listed by --help */
    const char *brief;    /* --help: fits one line beside the option (<= 51 columns) */
    const char *help;     /* --help-all: the whole story, word-wrapped */
} opt_spec;

#define COMMON 1
#define OFF(f) offsetof(cli_opts, f)
static const opt_spec OPTIONS[] = {
    /* ---- input and output */
    {"model", OPT_STRING, OFF(model), 0, 0, C_MODEL | C_TOK, "FILE", G_IO, COMMON, "model file (.nmt)",
     "model file (.nmt), required (tokenize/detokenize: its embedded tokenizer, or --sp-model)"},
    {"sp-model", OPT_STRING, OFF(sp_model), 0, 0, C_TOK, "FILE", G_IO, COMMON,
     "a SentencePiece .model file instead of --model", "a SentencePiece .model file instead of --model"},
    {"target", OPT_FLAG, OFF(target), 0, 0, C_TOK, NULL, G_IO, COMMON, "--model's target-side tokenizer",
     "with --model: the target-side tokenizer (default: the source side's)"},
    {"input", OPT_STRING, OFF(input), 0, 0, C_TRANSLATE | C_SCORE | C_TOK, "FILE", G_IO, COMMON,
     "read lines from FILE (default: standard input)", "read lines from FILE instead of standard input"},
    {"output", OPT_STRING, OFF(output), 0, 0, C_TRANSLATE | C_SCORE | C_TOK, "FILE", G_IO, COMMON,
     "write FILE, replaced only if the run succeeds",
     "write to FILE instead of standard output; FILE is replaced only when the whole run succeeds "
     "(written to a temporary beside it, then renamed; a failed run leaves it as it was); a regular "
     "file, symbolic links followed"},
    {"ids", OPT_FLAG, OFF(ids), 0, 0, C_TRANSLATE | C_SCORE, NULL, G_IO, COMMON,
     "token ids in and out, even with a tokenizer",
     "read and write whitespace-separated token ids even if the model embeds a tokenizer"},
    {"prefix-file", OPT_STRING, OFF(prefix_file), 0, 0, C_TRANSLATE, "FILE", G_IO, 0,
     "target prefixes, one per input line",
     "force a target prefix: line L of FILE (text, or ids as the input) starts the translation of input "
     "line L, which then continues; the output includes it; an empty line forces nothing"},

    {"spans", OPT_STRING, OFF(spans_file), 0, 0, C_TRANSLATE | C_SCORE, "FILE", G_IO, 0,
     "MG-SA syntax spans, one line per input line",
     "phrase spans of each source for models with MG-SA syntax heads: line L of FILE gives input line L's "
     "spans as START-END:LABEL piece offsets (nmt-edge-train's spans files, docs/TRAINING.md), for text "
     "and --ids input alike; an empty line gives the model's n-gram fallback; without --spans, text input "
     "is parsed with link-grammar where the build has it; other models check and ignore the spans"},

    /* ---- decoding */
    {"beam", OPT_LONG, OFF(beam), 1, 256, C_TRANSLATE | C_INFO, "N", G_DECODE, COMMON,
     "beam width, 1 = greedy (default 4)", "beam width, 1 = greedy (default 4, with --sampling 1)"},
    {"alpha", OPT_DOUBLE, OFF(alpha), 0, 100, C_TRANSLATE, "A", G_DECODE, COMMON,
     "length penalty exponent (default 0.6)",
     "length penalty exponent: a hypothesis's score is its log-probability / ((5+len)/6)^A (default 0.6)"},
    {"n-best", OPT_LONG, OFF(n_best), 1, 256, C_TRANSLATE, "N", G_DECODE, COMMON,
     "hypotheses per sentence, <= --beam (default 1)",
     "hypotheses per sentence, <= --beam (default 1); > 1 prints 'INDEX ||| TRANSLATION ||| SCORE' "
     "lines, best first (--format marian: Marian's n-best lines)"},
    {"min-len", OPT_LONG, OFF(min_len), 0, CLI_MAX_TOKENS, C_TRANSLATE, "N", G_DECODE, 0,
     "no end-of-sentence before N target tokens",
     "no end-of-sentence before N target tokens (a sentence's max length still ends it; default 0)"},
    {"no-repeat-ngram", OPT_LONG, OFF(no_repeat_ngram), 0, 64, C_TRANSLATE, "N", G_DECODE, 0,
     "no n-gram of N tokens twice (default 0, off)",
     "no n-gram of N tokens twice in a translation, 0 = off (default 0)"},
    {"coverage-penalty", OPT_DOUBLE, OFF(coverage_penalty), 0, 100, C_TRANSLATE, "B", G_DECODE, 0,
     "GNMT coverage penalty (default 0, off)",
     "GNMT coverage penalty: B * sum over source pieces of log(min(attention received, 1)) added to each "
     "finished hypothesis's score, which re-ranks them (the session records attention as --alignment does; "
     "default 0, off)"},
    {"repetition-penalty", OPT_DOUBLE, OFF(repetition_penalty), 0.001, 100, C_TRANSLATE, "P", G_DECODE, 0,
     "CTRL repetition penalty (default 1, off)",
     "CTRL/CTranslate2 repetition penalty: the logit z of each token already in a hypothesis becomes z/P "
     "(z >= 0) or z*P (z < 0) before the softmax; 1 = off (default)"},
    {"sampling", OPT_STRING, OFF(sampling), 0, 0, C_TRANSLATE, "topk:K", G_DECODE, COMMON,
     "sample among the K most probable tokens",
     "random sampling instead of beam search (implies --beam 1): each token drawn among the K most probable "
     "(0: all, 1: greedy), with probabilities p^(1/T) (--temperature T)"},
    {"temperature", OPT_DOUBLE, OFF(temperature), 0.001, 100, C_TRANSLATE, "T", G_DECODE, 0,
     "sampling temperature (default 1)",
     "with --sampling: sampling temperature (default 1; scores stay the model's)"},
    {"seed", OPT_STRING, OFF(seed), 0, 0, C_TRANSLATE, "N", G_DECODE, 0, "sampling seed (default 0)",
     "with --sampling: the random seed (default 0); input line L draws from seed N + L, so the output "
     "does not depend on --batch"},

    /* ---- output format */
    {"format", OPT_STRING, OFF(format), 0, 0, C_TRANSLATE, "FORMAT", G_FORMAT, COMMON,
     "text, marian or jsonl (default text)",
     "text (default; --n-best > 1 gives 'INDEX ||| TRANSLATION ||| SCORE' lines), marian (Marian's "
     "n-best lines 'INDEX ||| TRANSLATION ||| F0= LOGPROB ||| SCORE', the alignment before F0=, for any "
     "--n-best) or jsonl (one JSON object per hypothesis: line, rank, text, tokens, score, logprob, "
     "token_logprobs, alignment with --alignment, pieces with --with-pieces; tokens and token_logprobs "
     "end with the end-of-sentence)"},
    {"with-score", OPT_FLAG, OFF(with_score), 0, 0, C_TRANSLATE, NULL, G_FORMAT, 0,
     "print 'SCORE ||| TRANSLATION'",
     "print 'SCORE ||| TRANSLATION': the best hypothesis's length-normalised score (--format text)"},
    {"stream", OPT_FLAG, OFF(stream), 0, 0, C_TRANSLATE, NULL, G_FORMAT, 0,
     "show each translation as it is decoded",
     "on a terminal: draw each translation as it is decoded, the best hypothesis so far after every step, "
     "then the final one on its line (one sentence at a time; text format, --n-best 1); elsewhere, or with "
     "-o, --with-score, --alignment, ignored: the output is the same either way"},
    {"with-pieces", OPT_FLAG, OFF(with_pieces), 0, 0, C_TRANSLATE, NULL, G_FORMAT, 0,
     "jsonl: the target pieces too",
     "with --format jsonl: add \"pieces\", the target tokenizer's piece of each of \"tokens\" (needs a "
     "model with an embedded tokenizer)"},
    {"pieces", OPT_FLAG, OFF(pieces), 0, 0, C_TOKENIZE, NULL, G_FORMAT, COMMON, "print pieces instead of ids",
     "print pieces instead of ids"},
    {"alignment", OPT_STRING, OFF(alignment), 0, 0, C_TRANSLATE | C_SCORE | C_INFO, "[hard|soft]", G_FORMAT,
     COMMON, "append ' ||| ALIGNMENT' (default hard)",
     "append ' ||| ALIGNMENT' to each translation (score: to each log-probability, the pair's alignment "
     "under teacher forcing): hard (the default) Pharaoh pairs 'i-j', source piece i "
     "most attended by target piece j; soft the attention rows, ' ; ' between target pieces, each over the "
     "source pieces and end-of-sentence (mean of the last decoder layer's cross-attention heads; info: the "
     "sizes with alignments)"},
    {"alignment-words", OPT_FLAG, OFF(alignment_words), 0, 0, C_TRANSLATE | C_SCORE, NULL, G_FORMAT, 0,
     "align whitespace words, not pieces",
     "with --alignment hard: pairs between whitespace words instead of pieces (a word is linked to a word "
     "when any of their pieces are); text mode only"},
    {"align-layer", OPT_LONG, OFF(align_layer), 0, 1024, C_TRANSLATE | C_SCORE | C_INFO, "N", G_FORMAT, 0,
     "decoder layer to align with (0: the last)",
     "with --alignment: the decoder layer (1-based) whose cross-attention aligns, 0 = the last (default 0)"},
    {"align-head", OPT_LONG, OFF(align_head), 0, 1024, C_TRANSLATE | C_SCORE | C_INFO, "N", G_FORMAT, 0,
     "attention head to align with (0: the mean)",
     "with --alignment: that layer's head (1-based), 0 = the mean over its heads (default 0)"},

    /* ---- limits */
    {"max-len", OPT_LONG, OFF(max_len), 0, CLI_MAX_TOKENS, C_MODEL, "N", G_LIMITS, COMMON,
     "max target tokens, 0 = source + 50 (default 0)",
     "max target tokens without end-of-sentence, 0 = source length + 50 (default 0, at most 8192)"},
    {"max-len-ratio", OPT_STRING, OFF(max_len_ratio), 0, 0, C_TRANSLATE, "A,B", G_LIMITS, 0,
     "max target tokens = A * source tokens + B",
     "without --max-len: max target tokens = A * source tokens + B, capped by the session "
     "(default: source tokens + 50)"},
    {"max-src-len", OPT_LONG, OFF(max_src_len), 1, CLI_MAX_TOKENS, C_MODEL, "N", G_LIMITS, COMMON,
     "max source tokens per sentence (default 256)",
     "session limit on source tokens per sentence, end-of-sentence not counted "
     "(default 256, at most 8192)"},
    {"max-text-bytes", OPT_LONG, OFF(max_text_bytes), 1, CLI_MAX_TEXT_BYTES, C_MODEL | C_TOK, "N", G_LIMITS,
     COMMON, "max bytes of one input sentence (default 2048)",
     "limit on the bytes of one input sentence in text mode (default 2048, at most 1 MiB)"},
    {"batch", OPT_LONG, OFF(batch), 1, 4096, C_MODEL | C_TOK, "N", G_LIMITS, COMMON,
     "sentences per call (default 8)", "sentences per call (default 8, at most 4096)"},
    {"batch-tokens", OPT_LONG, OFF(batch_tokens), 1, 16777216, C_TRANSLATE, "N", G_LIMITS, 0,
     "token batches: at most N padded tokens a call",
     "token batches: read --read-ahead lines, sort them by source tokens and translate them in calls of at "
     "most N padded tokens (sentences x (longest + 1), the end-of-sentence counted: what the device "
     "computes) and at most --batch sentences; a sentence over N runs alone; output in input order and "
     "the same as sentence batches (not with --sampling)"},
    {"read-ahead", OPT_LONG, OFF(read_ahead), 1, 1048576, C_TRANSLATE, "K", G_LIMITS, 0,
     "with --batch-tokens: lines sorted together",
     "with --batch-tokens: lines read and sorted together before they are translated (default 16 x "
     "--batch); a terminal or pipe that pauses runs the lines read so far"},
    {"skip-long", OPT_FLAG, OFF(skip_long), 0, 0, C_TRANSLATE | C_SCORE, NULL, G_LIMITS, COMMON,
     "empty output for a line over the limits",
     "a sentence over the limits gives an empty output line (no lines with --n-best > 1 or --format "
     "marian/jsonl) and a warning instead of stopping the run"},

    /* ---- device and kernels */
    {"device", OPT_STRING, OFF(device), 0, 0, C_MODEL, "SPEC", G_DEVICE, COMMON,
     "OpenCL device: P:D, gpu, cpu or a name part",
     "OpenCL device: P:D, gpu, cpu, accelerator or a name substring "
     "(default $NMT_EDGE_DEVICE, else first GPU, else first device)"},
    {"no-device", OPT_FLAG, OFF(no_device), 0, 0, C_INFO, NULL, G_DEVICE, COMMON, "do not open a device",
     "do not open a device"},
    {"no-cache", OPT_FLAG, OFF(no_cache), 0, 0, C_MODEL, NULL, G_DEVICE, 0, "do not cache compiled kernels",
     "do not cache compiled kernels "
     "(default dir $NMT_EDGE_CACHE_DIR, $XDG_CACHE_HOME/nmt-edge or ~/.cache/nmt-edge)"},
    {"gemm", OPT_GEMM, OFF(gemm), 0, 0, C_MODEL, "auto|own|clblast", G_DEVICE, 0,
     "GEMM provider (default auto)", "GEMM provider (default auto)"},
    {"kernel-pack", OPT_STRING, OFF(kernel_pack), 0, 0, C_MODEL, "FILE", G_DEVICE, 0,
     "programs from this kernel pack",
     "programs from this kernel pack (nmt-edge-convert kernels; default $NMT_EDGE_KERNEL_PACK)"},
    {"binaries-only", OPT_FLAG, OFF(binaries_only), 0, 0, C_MODEL, NULL, G_DEVICE, 0,
     "never compile kernels from source",
     "never compile kernels from source: every program from the pack or the cache "
     "(default: when $NMT_EDGE_BINARIES_ONLY is set, or the device has no compiler)"},
    {"no-fp16", OPT_FLAG, OFF(no_fp16), 0, 0, C_MODEL, NULL, G_DEVICE, 0, "fp32 products for fp16 weights",
     "keep fp32 products: fp16 weights become fp32 at load even on a device with cl_khr_fp16 "
     "(default: fp16 compute there, unless $NMT_EDGE_NO_FP16=1)"},

    /* ---- general */
    {"quiet", OPT_FLAG, OFF(quiet), 0, 0, C_TRANSLATE | C_SCORE, NULL, G_GENERAL, COMMON,
     "no progress line or summary on stderr",
     "no progress line (lines done, rate, ETA; drawn only when stderr is a terminal and the input is not) "
     "and no summary at the end (translate: lines, tokens, time, tokens/s; printed when stderr is a "
     "terminal, or with --verbose)"},
    {"verbose", OPT_FLAG, OFF(verbose), 0, 0, C_ALL, NULL, G_GENERAL, COMMON, "log progress (INFO) to stderr",
     "log progress (INFO) to stderr (translate: and the summary at the end, even when stderr is not a "
     "terminal)"},
    {"help", OPT_FLAG, OFF(help), 0, 0, C_ALL, NULL, G_GENERAL, COMMON, "show the common options and exit",
     "show the common options and exit"},
    {"help-all", OPT_FLAG, OFF(help_all), 0, 0, C_ALL, NULL, G_GENERAL, COMMON, "show every option and exit",
     "show every option, grouped, and the environment variables read, and exit"},
};
#undef OFF
#undef COMMON

/* The environment variables the device set-up reads (tools/tool_env.c),
 * listed by --help-all of the commands that open a device. */
static const struct {
    const char *name, *help;
} ENVIRONMENT[] = {
    {"NMT_EDGE_DEVICE", "the --device SPEC when none is given"},
    {"NMT_EDGE_CACHE_DIR", "compiled-kernel cache (else $XDG_CACHE_HOME/nmt-edge, ~/.cache/nmt-edge)"},
    {"NMT_EDGE_KERNEL_PACK", "the --kernel-pack FILE when none is given"},
    {"NMT_EDGE_BINARIES_ONLY", "set, and not 0: as --binaries-only"},
    {"NMT_EDGE_NO_FP16", "set, and not 0: as --no-fp16"},
    {"NMT_EDGE_KERNEL_DIR", "kernel sources from this directory, not the embedded ones"},
    {"NMT_EDGE_NO_BUILD_NOTE", "set, and not 0: no note or progress line while kernels compile"},
};

/* One-letter aliases: -i FILE, -o FILE. */
static const struct {
    char letter;
    const char *name;
} SHORT_OPTIONS[] = {{'i', "input"}, {'o', "output"}};

static char short_option(const opt_spec *sp) {
    for (size_t k = 0; k < sizeof SHORT_OPTIONS / sizeof SHORT_OPTIONS[0]; k++)
        if (strcmp(SHORT_OPTIONS[k].name, sp->name) == 0) return SHORT_OPTIONS[k].letter;
    return 0;
}


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
        char alias[64]; /* -X: the long name of its option */
        for (size_t k = 0; k < sizeof SHORT_OPTIONS / sizeof SHORT_OPTIONS[0]; k++)
            if (arg[0] == '-' && arg[1] == SHORT_OPTIONS[k].letter && arg[2] == '\0') {
                snprintf(alias, sizeof alias, "--%s", SHORT_OPTIONS[k].name);
                arg = alias;
            }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            return usage_error(cmd, "unexpected argument '%s'", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_spec *sp = NULL;
        for (size_t k = 0; k < sizeof OPTIONS / sizeof OPTIONS[0]; k++)
            if ((OPTIONS[k].cmds & C_OPTION_BITS(cmd->bit)) && strlen(OPTIONS[k].name) == name_len &&
                strncmp(OPTIONS[k].name, name, name_len) == 0)
                sp = &OPTIONS[k];
        if (sp == NULL) return usage_error(cmd, "unknown option '%s'", arg);
        const char *val = eq ? eq + 1 : NULL;
        if (sp->kind == OPT_FLAG && val != NULL)
            return usage_error(cmd, "--%s takes no value", sp->name);
        /* --alignment's value is optional: hard unless the next argument is a mode */
        if (val == NULL && sp->offset == offsetof(cli_opts, alignment) &&
            (i + 1 >= argc || (strcmp(argv[i + 1], "hard") != 0 && strcmp(argv[i + 1], "soft") != 0)))
            val = "hard";
        if (sp->kind != OPT_FLAG && val == NULL) {
            if (i + 1 >= argc) return usage_error(cmd, "--%s needs a value", sp->name);
            val = argv[++i];
        }
        int rc = set_option(cmd, sp, val, o);
        if (rc != 0) return rc;
    }
    return 0;
}

/* Columns of the help: options from 2, their text from HELP_TEXT_COL, at
 * most HELP_WIDTH in all. */
#define HELP_TEXT_COL 28
#define HELP_WIDTH 80

/* "  -i, --input FILE" padded to the text column; a longer head has its
 * text on the next line. */
static void print_option_head(const opt_spec *sp) {
    char head[64], alias[8] = "";
    if (short_option(sp)) snprintf(alias, sizeof alias, "-%c, ", short_option(sp));
    snprintf(head, sizeof head, "%s--%s%s%s", alias, sp->name, sp->metavar ? " " : "",
             sp->metavar ? sp->metavar : "");
    if (strlen(head) > HELP_TEXT_COL - 3) printf("  %s\n%*s", head, HELP_TEXT_COL - 1, "");
    else printf("  %-*s", HELP_TEXT_COL - 3, head);
}

/* `text` word-wrapped under the text column (the cursor is on it). */
static void print_wrapped(const char *text) {
    int col = HELP_TEXT_COL - 1;
    for (const char *w = text; *w;) {
        size_t n = strcspn(w, " ");
        if (col > HELP_TEXT_COL - 1 && col + 1 + (int)n > HELP_WIDTH) {
            printf("\n%*s", HELP_TEXT_COL - 1, "");
            col = HELP_TEXT_COL - 1;
        }
        printf(" %.*s", (int)n, w);
        col += 1 + (int)n;
        w += n + strspn(w + n, " ");
    }
    putchar('\n');
}

/* A command's description, word-wrapped at HELP_WIDTH: a line break in it
 * is a space, a blank line ("\n\n") starts a paragraph. */
static void print_paragraphs(const char *text) {
    int col = 0;
    for (const char *w = text; *w;) {
        if (w[0] == '\n' && w[1] == '\n') {
            printf("\n\n");
            col = 0;
            w += 2;
            continue;
        }
        if (*w == ' ' || *w == '\n') {
            w++;
            continue;
        }
        size_t n = strcspn(w, " \n");
        if (col > 0 && col + 1 + (int)n > HELP_WIDTH) {
            putchar('\n');
            col = 0;
        }
        printf("%s%.*s", col ? " " : "", (int)n, w);
        col += (col ? 1 : 0) + (int)n;
        w += n;
    }
    putchar('\n');
}

/* --help (all == 0): the summary and the common options, one screen
 * (<= 40 lines, <= 80 columns; tests/cli_test.c checks it), ending with a
 * pointer to --help-all.  --help-all: the description, every option with
 * its full text, the environment.  Both grouped under GROUP_NAMES. */
static void print_command_help(const command *cmd, int all) {
    printf("Usage: " PROG " %s %s\n\n", cmd->name, cmd->synopsis);
    if (all) print_paragraphs(cmd->description);
    else printf("%c%s.\n", toupper((unsigned char)cmd->summary[0]), cmd->summary + 1);
    unsigned shown = 0, total = 0;
    for (int g = 0; g < N_GROUPS; g++) {
        int heading = 0;
        for (size_t k = 0; k < sizeof OPTIONS / sizeof OPTIONS[0]; k++) {
            const opt_spec *sp = &OPTIONS[k];
            if (!(sp->cmds & C_OPTION_BITS(cmd->bit)) || sp->group != (opt_group)g) continue;
            total++;
            if (!all && !sp->common) continue;
            if (!heading) printf("\n%s:\n", GROUP_NAMES[g]);
            heading = 1;
            shown++;
            print_option_head(sp);
            print_wrapped(all ? sp->help : sp->brief);
        }
    }
    if (all && (cmd->bit & C_MODEL)) {
        printf("\nEnvironment:\n");
        for (size_t k = 0; k < sizeof ENVIRONMENT / sizeof ENVIRONMENT[0]; k++) {
            printf("  %-*s", HELP_TEXT_COL - 3, ENVIRONMENT[k].name);
            print_wrapped(ENVIRONMENT[k].help);
        }
    }
    if (all) printf("\nEvery option and output format is described in docs/CLI.md.\n");
    else printf("\n%u of %u options.  All of them: '" PROG " %s --help-all', docs/CLI.md.\n", shown, total,
                cmd->name);
}

/* ======================================================================== */
/* main                                                                     */
/* ======================================================================== */

static const command COMMANDS[] = {
    {"translate", C_TRANSLATE, cmd_translate, "--model FILE [options] < text > text",
     "translate lines of text (or token ids) to the target language",
     "Translate standard input, one sentence per line, to one line per input line (empty\n"
     "in, empty out).  A model with an embedded tokenizer reads and writes text; otherwise,\n"
     "or with --ids, lines are whitespace-separated token ids.\n\n"
     "With --n-best N > 1 each sentence gives N lines 'INDEX ||| TRANSLATION ||| SCORE'\n"
     "(0-based input line index, length-normalised score, best first; fewer lines only\n"
     "when the search finished fewer hypotheses); --format marian prints Marian's n-best\n"
     "lines 'INDEX ||| TRANSLATION ||| F0= LOGPROB ||| SCORE' for any --n-best, and\n"
     "--format jsonl one JSON object per hypothesis.  --with-score prefixes each line with\n"
     "the best hypothesis's score: 'SCORE ||| TRANSLATION' (%.6f, length-normalised).\n\n"
     "Lines are translated in batches of --batch, each passed longest first so that\n"
     "finished sentences leave the search early (output stays in input order); when a\n"
     "terminal or pipe pauses, the lines read so far are translated and written at once.\n"
     "--batch-tokens N reads --read-ahead lines at a time, sorts them by length and\n"
     "translates calls of at most N padded tokens instead: less padding, the same output.\n\n"
     "On a terminal, stderr shows a progress line and, at the end, a summary (lines,\n"
     "tokens, time, tokens/s); --quiet turns both off.\n\n"
     "--alignment appends ' ||| ALIGNMENT' to every line (scripts/compare/aer.py reads it):\n"
     "'i-j' pairs, source piece i (0-based, end-of-sentence never) most attended by target\n"
     "piece j, from the mean of the last decoder layer's cross-attention heads over the\n"
     "source (--align-layer, --align-head choose another; BA-NMT: its one additive\n"
     "attention); --batch does not change it, and an empty translation ends its line with '|||'.\n"
     "--alignment soft prints the attention rows instead."},
    {"score", C_SCORE, cmd_score, "--model FILE [options] < pairs > scores",
     "log-probability of given translations (forced decoding)",
     "Forced decoding: read lines 'SOURCE<TAB>TARGET' (text with a tokenizer, else ids; --ids\n"
     "forces ids) and print the natural-log\n"
     "probability log P(target | source), end-of-sentence included, one per line (%.6f).\n\n"
     "--alignment appends ' ||| ALIGNMENT' to every line, as translate does, for the given\n"
     "target under teacher forcing: 'i-j' pairs, source piece i most attended when the\n"
     "decoder predicts target piece j (--alignment-words, --align-layer, --align-head,\n"
     "--alignment soft as in translate; an empty source or target gives ' |||').  With it\n"
     "the targets are decoded position by position, as beam search does."},
    {"tokenize", C_TOKENIZE, cmd_tokenize, "(--model | --sp-model) FILE [options] < text > ids",
     "text to SentencePiece ids (or pieces), as spm_encode does",
     "Tokenize standard input, one sentence per line, with a SentencePiece model: a .model\n"
     "file (--sp-model) or the tokenizer embedded in an .nmt file (--model; --target for its\n"
     "target side).  Prints space-separated ids, or pieces with --pieces, one line per line;\n"
     "identical to 'spm_encode --output_format=id'.  As spm_encode, only LF ends a line: a CR\n"
     "before it is part of the text."},
    {"detokenize", C_DETOKENIZE, cmd_detokenize,
     "(--model | --sp-model) FILE [options] < ids > text",
     "SentencePiece ids to text, as spm_decode does",
     "Detokenize lines of whitespace-separated ids to text (identical to 'spm_decode\n"
     "--input_format=id'; a line break inside a decoded text is written as a space)."},
    {"info", C_INFO, cmd_info, "--model FILE [options]",
     "describe a model, its memory needs and the device",
     "Describe a model (architecture, hyper-parameters, sizes), the host arena and device\n"
     "bytes a session needs under the given limits, and the device that would be used."},
    {"warmup", C_WARMUP, cmd_warmup, "--model FILE [options]",
     "compile the model's kernels for the device into the program cache",
     "Compile the OpenCL programs a session of the model needs on the device (under the\n"
     "given limits: --beam, --batch, --max-src-len, ...; translate with the same ones)\n"
     "and write them to the program cache ($NMT_EDGE_CACHE_DIR, else $XDG_CACHE_HOME/nmt-edge,\n"
     "else ~/.cache/nmt-edge), on every driver, so that the next start loads them instead\n"
     "of compiling (a package's postinst, or an image build, runs it once).  Prints the\n"
     "cache directory and the time taken.  A cache that already holds them is left as is."},
    {"devices", C_DEVICES, cmd_devices, "[options]", "list OpenCL devices",
     "List OpenCL devices as 'P:D  platform / device  (type)'; P:D is a --device SPEC."},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void print_main_help(void) {
    printf("Usage: " PROG " COMMAND [options]\n\n"
           "OpenCL neural machine translation runtime for edge devices.\n\nCommands:\n");
    for (size_t c = 0; c < N_COMMANDS; c++)
        printf("  %-10s %s\n", COMMANDS[c].name, COMMANDS[c].summary);
    printf("\nRun '" PROG " COMMAND --help' for a command's common options, --help-all for all\n"
           "of them; docs/CLI.md describes every option and output format.\n"
           "  --help       show this help\n  --version    show the version\n");
}

static int parse_len_ratio(const command *cmd, cli_opts *o);

static int check_combination(const command *cmd, const cli_opts *o) {
    if ((cmd->bit & C_MODEL) && o->model == NULL)
        return usage_error(cmd, "--model FILE is required");
    if ((cmd->bit & C_TOK) && (o->model == NULL) == (o->sp_model == NULL))
        return usage_error(cmd, "give exactly one of --model FILE and --sp-model FILE");
    if ((cmd->bit & C_TOK) && o->target && o->model == NULL)
        return usage_error(cmd, "--target needs --model");
    if (o->n_best > o->beam)
        return usage_error(cmd, "--n-best %ld is larger than --beam %ld", o->n_best, o->beam);
    if (o->alignment != NULL && strcmp(o->alignment, "hard") != 0 && strcmp(o->alignment, "soft") != 0)
        return usage_error(cmd, "--alignment: '%s' is not one of hard, soft", o->alignment);
    if (o->alignment == NULL && (o->alignment_words || o->align_layer || o->align_head))
        return usage_error(cmd, "--%s needs --alignment",
                           o->alignment_words ? "alignment-words" : o->align_layer ? "align-layer" : "align-head");
    if (o->alignment_words && strcmp(o->alignment, "hard") != 0)
        return usage_error(cmd, "--alignment-words needs --alignment hard");
    if (o->alignment_words && o->ids) return usage_error(cmd, "--alignment-words needs text, not --ids");
    if (o->read_ahead > 0 && o->batch_tokens == 0) return usage_error(cmd, "--read-ahead needs --batch-tokens");
    if (o->batch_tokens > 0 && o->sampling != NULL)
        return usage_error(cmd, "--batch-tokens cannot be used with --sampling: a call's sentence i samples with "
                                "seed + i, so reordering the lines would change their samples");
    if (o->read_ahead > 0 && o->read_ahead < o->batch)
        return usage_error(cmd, "--read-ahead %ld is smaller than --batch %ld", o->read_ahead, o->batch);
    return 0;
}

/* --max-len-ratio A,B into o->max_len_a / max_len_b: two numbers in [0, 1000]. */
static int parse_len_ratio(const command *cmd, cli_opts *o) {
    if (o->max_len_ratio == NULL) return 0;
    char *end = NULL;
    const double a = strtod(o->max_len_ratio, &end);
    double b = -1;
    if (end != o->max_len_ratio && *end == ',') {
        const char *p = end + 1;
        b = strtod(p, &end);
        if (end == p || *end) b = -1;
    }
    if (!(a >= 0 && a <= 1000 && b >= 0 && b <= 1000))
        return usage_error(cmd, "--max-len-ratio '%s': expected A,B, two numbers from 0 to 1000 (e.g. 1.5,10)",
                           o->max_len_ratio);
    o->max_len_a = a;
    o->max_len_b = b;
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

    cli_opts o = {.beam = 0 /* not given: cli_decode_check */, .n_best = 1, .alpha = 0.6, .batch = 8, .max_src_len = 256,
                  .max_text_bytes = 2048, .gemm = NMT_GEMM_AUTO};
    int rc = parse_options(cmd, argc - 1, argv + 1, &o);
    if (rc != 0) return rc;
    if (o.help || o.help_all) {
        print_command_help(cmd, o.help_all);
        return 0;
    }
    char derr[512];
    if (cli_decode_check(&o, derr, sizeof derr) != 0) return usage_error(cmd, "%s", derr);
    if ((rc = check_combination(cmd, &o)) != 0 || (rc = parse_len_ratio(cmd, &o)) != 0) return rc;
    return cmd->run(&o);
}
