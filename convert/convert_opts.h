/* SPDX-License-Identifier: MIT */
/* convert_opts.h — nmt-edge-convert's table-driven option parsing and file
 * reading.  Each subcommand declares its options in a table (struct opt_def)
 * that drives both the parsing and its --help text. */
#ifndef NMT_CONVERT_OPTS_H
#define NMT_CONVERT_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PROG "nmt-edge-convert"

typedef enum opt_kind {
    OPT_U32,   /* uint32_t, decimal */
    OPT_U64,   /* uint64_t, decimal or 0x hex */
    OPT_F32,   /* float */
    OPT_STR,   /* const char *, pointing into argv */
    OPT_CHOICE,/* const char *, one of `choices` (space-separated) */
    OPT_FLAG   /* int, set to 1, takes no value */
} opt_kind;

typedef struct opt_def {
    const char *name;     /* long name without "--" */
    char short_name;      /* 0 if none */
    opt_kind kind;
    size_t offset;        /* of the destination inside the subcommand's argument struct */
    const char *metavar;  /* shown in help; NULL for flags */
    const char *choices;  /* OPT_CHOICE only */
    const char *help;
    uint64_t min, max;    /* OPT_U32 / OPT_U64 bounds */
} opt_def;

typedef enum parse_result { PARSE_OK, PARSE_HELP, PARSE_ERROR } parse_result;

/* Parse argv[0..argc) (the arguments after the subcommand name).  Accepts
 * --name VALUE, --name=VALUE, -x VALUE, and --help / -h.  Other arguments
 * are positional: collected into pos[] (at most max_pos, *n_pos of them)
 * when pos is not NULL, else an error.  Messages name `cmd`. */
parse_result parse_opts_pos(const char *cmd, const opt_def *defs, size_t n, int argc, char **argv, void *args,
                            const char **pos, int max_pos, int *n_pos);
/* The same without positional arguments. */
parse_result parse_opts(const char *cmd, const opt_def *defs, size_t n, int argc, char **argv, void *args);
/* The option table as help text, then -h/--help. */
void print_opts(FILE *out, const opt_def *defs, size_t n);

/* The whole of `path` in malloc'd memory (*size bytes; may be 0).  NULL and a
 * message naming `cmd` on failure. */
void *read_whole(const char *cmd, const char *path, size_t *size);

/* Whether the output path names one of the inputs (the same file: st_dev and
 * st_ino of `output` after following links, when it exists, equal to those of
 * an input; the same path, a hard link or a symbolic link).  1 and the
 * message "nmt-edge-convert CMD: -o 'OUT' is the input 'IN' (the same file);
 * it is not replaced (nothing was written)" when it does, before any work; 0
 * otherwise (an output or input that cannot be stat'ed is no match: writing
 * or reading it reports the problem).  NULL inputs are skipped. */
int output_is_input(const char *cmd, const char *output, const char *const *inputs, int n_inputs);

#endif
