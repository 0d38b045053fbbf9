/* SPDX-License-Identifier: MIT */
/* convert_opts.c — nmt-edge-convert's option parsing and file reading
 * (convert_opts.h). */
#include "convert_opts.h"
#include "tool_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int parse_u64(const char *s, uint64_t *out) {
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+') return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0') return 0;
    *out = (uint64_t)v;
    return 1;
}

static int parse_f32(const char *s, float *out) {
    if (s == NULL || *s == '\0') return 0;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno != 0 || *end != '\0') return 0;
    *out = v;
    return 1;
}

static int word_in_list(const char *word, const char *list) {
    size_t n = strlen(word);
    const char *p = list;
    while (*p) {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return 1;
        if (!sp) break;
        p = sp + 1;
    }
    return 0;
}

static const opt_def *find_long(const opt_def *defs, size_t n, const char *name, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0) return &defs[i];
    return NULL;
}

static const opt_def *find_short(const opt_def *defs, size_t n, char c) {
    for (size_t i = 0; i < n; i++)
        if (defs[i].short_name != 0 && defs[i].short_name == c) return &defs[i];
    return NULL;
}

/* Store `val` for option `d` into `args`.  0 and a message on error. */
static int store_opt(const char *cmd, const opt_def *d, const char *val, void *args) {
    char *dst = (char *)args + d->offset;
    uint64_t u;
    switch (d->kind) {
    case OPT_U32:
    case OPT_U64:
        if (!parse_u64(val, &u) || u < d->min || u > d->max) {
            fprintf(stderr, "%s %s: --%s expects an integer in [%llu, %llu], got '%s'\n", PROG, cmd, d->name,
                    (unsigned long long)d->min, (unsigned long long)d->max, val);
            return 0;
        }
        if (d->kind == OPT_U32) {
            uint32_t v = (uint32_t)u;
            memcpy(dst, &v, sizeof v);
        } else {
            memcpy(dst, &u, sizeof u);
        }
        return 1;
    case OPT_F32: {
        float f;
        if (!parse_f32(val, &f) || !(f > 0.0f) || f > 1e30f) {
            fprintf(stderr, "%s %s: --%s expects a positive number, got '%s'\n", PROG, cmd, d->name, val);
            return 0;
        }
        memcpy(dst, &f, sizeof f);
        return 1;
    }
    case OPT_CHOICE:
        if (!word_in_list(val, d->choices)) {
            fprintf(stderr, "%s %s: --%s must be one of: %s (got '%s')\n", PROG, cmd, d->name, d->choices, val);
            return 0;
        }
        memcpy(dst, &val, sizeof val);
        return 1;
    case OPT_STR:
        memcpy(dst, &val, sizeof val);
        return 1;
    case OPT_FLAG: {
        int one = 1;
        memcpy(dst, &one, sizeof one);
        return 1;
    }
    }
    return 0;
}

parse_result parse_opts_pos(const char *cmd, const opt_def *defs, size_t n, int argc, char **argv,
                            void *args, const char **pos, int max_pos, int *n_pos) {
    if (n_pos) *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *p = argv[i];
        if (pos != NULL && (p[0] != '-' || p[1] == '\0')) {
            if (*n_pos >= max_pos) {
                fprintf(stderr, "%s %s: too many arguments (at most %d)\n", PROG, cmd, max_pos);
                return PARSE_ERROR;
            }
            pos[(*n_pos)++] = p;
            continue;
        }
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return PARSE_HELP;
        const opt_def *d = NULL;
        const char *val = NULL;
        if (strncmp(a, "--", 2) == 0) {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            d = find_long(defs, n, name, len);
            if (eq) val = eq + 1;
        } else if (a[0] == '-' && a[1] != '\0' && a[2] == '\0') {
            d = find_short(defs, n, a[1]);
        } else {
            fprintf(stderr, "%s %s: unexpected argument '%s'\n", PROG, cmd, a);
            return PARSE_ERROR;
        }
        if (d == NULL) {
            fprintf(stderr, "%s %s: unknown option '%s' (see %s %s --help)\n", PROG, cmd, a, PROG, cmd);
            return PARSE_ERROR;
        }
        if (d->kind == OPT_FLAG) {
            if (val != NULL) {
                fprintf(stderr, "%s %s: --%s takes no value\n", PROG, cmd, d->name);
                return PARSE_ERROR;
            }
        } else if (val == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s %s: --%s needs a value\n", PROG, cmd, d->name);
                return PARSE_ERROR;
            }
            val = argv[++i];
        }
        if (!store_opt(cmd, d, val, args)) return PARSE_ERROR;
    }
    return PARSE_OK;
}

parse_result parse_opts(const char *cmd, const opt_def *defs, size_t n, int argc, char **argv, void *args) {
    return parse_opts_pos(cmd, defs, n, argc, argv, args, NULL, 0, NULL);
}

void print_opts(FILE *out, const opt_def *defs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const opt_def *d = &defs[i];
        char left[64];
        if (d->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", d->short_name, d->name, d->metavar ? " " : "",
                     d->metavar ? d->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", d->name, d->metavar ? " " : "", d->metavar ? d->metavar : "");
        fprintf(out, "  %-30s %s\n", left, d->help);
    }
    fprintf(out, "  %-30s %s\n", "-h, --help", "show this help");
}

/* The whole of `path` in malloc'd memory (*size bytes; an empty file gives a
 * 1-byte buffer and *size 0).  Regular files only (tool_file.h): a device,
 * a pipe or a directory is refused before anything is read.  NULL and a
 * message naming `cmd` and the reason on failure. */
void *read_whole(const char *cmd, const char *path, size_t *size) {
    char why[NMT_TOOL_WHY_BYTES];
    void *buf = nmt_tool_read_file(path, 0, size, why, sizeof why);
    if (buf == NULL) fprintf(stderr, "%s %s: %s\n", PROG, cmd, why);
    return buf;
}

int output_is_input(const char *cmd, const char *output, const char *const *inputs, int n_inputs) {
    struct stat so;
    if (output == NULL || stat(output, &so) != 0) return 0; /* a new path names no input */
    for (int i = 0; i < n_inputs; i++) {
        struct stat si;
        if (inputs[i] == NULL || stat(inputs[i], &si) != 0) continue;
        if (si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            fprintf(stderr, "%s %s: -o '%s' is the input '%s' (the same file); it is not replaced (nothing was "
                            "written)\n", PROG, cmd, output, inputs[i]);
            return 1;
        }
    }
    return 0;
}
