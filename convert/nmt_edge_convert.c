/* nmt_edge_convert.c — the nmt-edge-convert program: writes .nmt models.
 *
 *   nmt-edge-convert --help | --version
 *   nmt-edge-convert random -o FILE [options]     random-weight Transformer/HySAN
 *
 * Exit status: 0 success, 1 I/O or internal error, 2 bad usage.
 * Each subcommand declares its options in a table (struct opt_def) that
 * drives both parsing and its --help text.
 */
#include "nmt_edge.h"
#include "random_model.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "nmt-edge-convert"
#define EXIT_USAGE 2

/* ------------------------------------------------------------------------ */
/* Table-driven option parsing                                              */
/* ------------------------------------------------------------------------ */

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

typedef enum parse_result { PARSE_OK, PARSE_HELP, PARSE_ERROR } parse_result;

/* Parse argv[0..argc) (the arguments after the subcommand name).  Accepts
 * --name VALUE, --name=VALUE, -x VALUE, and --help / -h. */
static parse_result parse_opts(const char *cmd, const opt_def *defs, size_t n, int argc, char **argv, void *args) {
    for (int i = 0; i < argc; i++) {
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

static void print_opts(FILE *out, const opt_def *defs, size_t n) {
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

/* ------------------------------------------------------------------------ */
/* random                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct random_args {
    const char *output;
    const char *sp_model, *src_sp_model, *tgt_sp_model;
    nmt_random_transformer_config cfg;
} random_args;

#define RA(field) offsetof(random_args, field)
#define U32_OPT(nm, fld, mn, mx, hlp) {nm, 0, OPT_U32, RA(fld), "N", NULL, hlp, mn, mx}

static const opt_def random_opts[] = {
    {"output", 'o', OPT_STR, RA(output), "FILE", NULL, "output model file (required)", 0, 0},
    U32_OPT("d-model", cfg.d_model, 2, 65536, "model width d (default 32)"),
    U32_OPT("heads", cfg.n_heads, 1, 4096, "attention heads (default 4)"),
    U32_OPT("ff", cfg.d_ff, 1, 1u << 20, "feed-forward width (default 64)"),
    U32_OPT("enc-layers", cfg.enc_layers, 1, 256, "encoder layers (default 2)"),
    U32_OPT("dec-layers", cfg.dec_layers, 1, 256, "decoder layers (default 2)"),
    U32_OPT("src-vocab", cfg.src_vocab, 1, 1u << 24, "source vocabulary size (default 64)"),
    U32_OPT("tgt-vocab", cfg.tgt_vocab, 1, 1u << 24, "target vocabulary size (default 64)"),
    {"norm", 0, OPT_CHOICE, RA(cfg.norm), "pre|post", "pre post", "layer-norm placement (default post)", 0, 0},
    {"enc-branches", 0, OPT_STR, RA(cfg.enc_branches), "LIST", NULL,
     "encoder self-attention branches, e.g. \"global fw bw local:3\" (default \"global\")", 0, 0},
    {"dec-branches", 0, OPT_STR, RA(cfg.dec_branches), "LIST", NULL,
     "decoder self-attention branches (default \"global\")", 0, 0},
    {"fusion", 0, OPT_CHOICE, RA(cfg.fusion), "sum|concat|gate", "sum concat gate",
     "fusion of the branches (default sum)", 0, 0},
    U32_OPT("gate-reduction", cfg.gate_reduction, 1, 65536, "squeeze-gate reduction r (default 4)"),
    {"shared-embeddings", 0, OPT_FLAG, RA(cfg.shared_embeddings), NULL, NULL,
     "one embedding for both sides (needs equal vocabularies)", 0, 0},
    {"tied-output", 0, OPT_FLAG, RA(cfg.tied_output), NULL, NULL, "output projection = target embedding", 0, 0},
    U32_OPT("bos-id", cfg.bos_id, 0, UINT32_MAX, "begin-of-sentence id (default 1)"),
    U32_OPT("eos-id", cfg.eos_id, 0, UINT32_MAX, "end-of-sentence id (default 2)"),
    U32_OPT("pad-id", cfg.pad_id, 0, UINT32_MAX, "padding id (default 0)"),
    U32_OPT("unk-id", cfg.unk_id, 0, UINT32_MAX, "unknown-token id (default 3)"),
    {"seed", 0, OPT_U64, RA(cfg.seed), "S", NULL, "random seed (default 1)", 0, UINT64_MAX},
    {"weight-scale", 0, OPT_F32, RA(cfg.weight_scale), "X", NULL,
     "weights uniform in +-X/sqrt(fan_in) (default 1)", 0, 0},
    {"sp-model", 0, OPT_STR, RA(sp_model), "FILE", NULL,
     "embed a SentencePiece .model shared by both sides (tokenizer.src)", 0, 0},
    {"src-sp-model", 0, OPT_STR, RA(src_sp_model), "FILE", NULL,
     "embed the source-side SentencePiece .model (tokenizer.src)", 0, 0},
    {"tgt-sp-model", 0, OPT_STR, RA(tgt_sp_model), "FILE", NULL,
     "embed the target-side SentencePiece .model (tokenizer.tgt; needs --src-sp-model)", 0, 0},
};

/* Whole file into malloc'd memory; NULL (message printed) on failure. */
static void *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, PROG " random: cannot open '%s'\n", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf != NULL) {
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (buf == NULL || ferror(f) || n == 0) {
        fprintf(stderr, PROG " random: cannot read '%s' (or it is empty)\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n;
    return buf;
}

static void random_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " random -o FILE [options]\n\n"
            "Write a Transformer/HySAN model with random weights (every tensor of\n"
            "docs/ARCHITECTURES.md, reproducible from --seed).\n\noptions:\n");
    print_opts(out, random_opts, sizeof random_opts / sizeof random_opts[0]);
}

static int cmd_random(int argc, char **argv) {
    random_args a;
    memset(&a, 0, sizeof a);
    nmt_random_transformer_defaults(&a.cfg);
    switch (parse_opts("random", random_opts, sizeof random_opts / sizeof random_opts[0], argc, argv, &a)) {
    case PARSE_HELP: random_help(stdout); return 0;
    case PARSE_ERROR: return EXIT_USAGE;
    case PARSE_OK: break;
    }
    const nmt_random_transformer_config *c = &a.cfg;
    const char *why = NULL;
    if (a.output == NULL || a.output[0] == '\0') why = "-o FILE is required";
    else if (c->d_model % 2 != 0) why = "--d-model must be even";
    else if (c->d_model % c->n_heads != 0) why = "--d-model must be divisible by --heads";
    else if (c->shared_embeddings && c->src_vocab != c->tgt_vocab)
        why = "--shared-embeddings needs --src-vocab equal to --tgt-vocab";
    else if (nmt_random_count_branches(c->enc_branches) < 1 || nmt_random_count_branches(c->enc_branches) > 8)
        why = "--enc-branches needs 1 to 8 branches";
    else if (nmt_random_count_branches(c->dec_branches) < 1 || nmt_random_count_branches(c->dec_branches) > 8)
        why = "--dec-branches needs 1 to 8 branches";
    else if (strcmp(c->fusion, "gate") == 0 && c->d_model % c->gate_reduction != 0)
        why = "--d-model must be divisible by --gate-reduction";
    else if (a.sp_model != NULL && (a.src_sp_model != NULL || a.tgt_sp_model != NULL))
        why = "--sp-model excludes --src-sp-model and --tgt-sp-model";
    else if (a.tgt_sp_model != NULL && a.src_sp_model == NULL)
        why = "--tgt-sp-model needs --src-sp-model";
    if (why != NULL) {
        fprintf(stderr, PROG " random: %s\n", why);
        return EXIT_USAGE;
    }
    void *src_sp = NULL, *tgt_sp = NULL;
    const char *src_path = a.sp_model ? a.sp_model : a.src_sp_model;
    if (src_path != NULL && (src_sp = slurp(src_path, &a.cfg.src_sp_size)) == NULL) return 1;
    if (a.tgt_sp_model != NULL && (tgt_sp = slurp(a.tgt_sp_model, &a.cfg.tgt_sp_size)) == NULL) {
        free(src_sp);
        return 1;
    }
    a.cfg.src_sp_model = src_sp;
    a.cfg.tgt_sp_model = tgt_sp;

    nmt_status s = nmt_random_transformer_write(c, a.output);
    free(src_sp);
    free(tgt_sp);
    if (s == NMT_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, PROG " random: invalid model configuration\n");
        return EXIT_USAGE;
    }
    if (s != NMT_OK) {
        fprintf(stderr, PROG " random: cannot write '%s': %s\n", a.output, nmt_status_str(s));
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"random", cmd_random, "write a random-weight Transformer/HySAN model"},
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: " PROG " <command> [options]\n"
            "       " PROG " --help | --version\n\n"
            "Write nmt-edge model files (.nmt, format version %u; see docs/FORMAT.md).\n\n"
            "commands:\n",
            NMT_FILE_VERSION);
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\nRun '" PROG " <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf(PROG " %s (model format v%u)\n", nmt_version(), NMT_FILE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(cmd, subcommands[i].name) == 0) return subcommands[i].run(argc - 2, argv + 2);
    fprintf(stderr, PROG ": unknown command '%s' (see " PROG " --help)\n", cmd);
    return EXIT_USAGE;
}
