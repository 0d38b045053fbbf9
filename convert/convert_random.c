/* SPDX-License-Identifier: MIT */
/* convert_random.c — nmt-edge-convert random: a random-weight model of any
 * registered family (--arch; default transformer).  The family's
 * hyper-parameters are command-line flags read from its table
 * (families/family.h: flag, type, range, default, help; the defaults of
 * `random` from the family's random_args), so a new family needs no code
 * here.  The model is checked by the loader's own code before it is written
 * (writer/random_model.h: nmt_random_model_build). */
#include "convert_cmds.h"
#include "random_model.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct random_args {
    const char *output, *arch;
    const char *sp_model, *src_sp_model, *tgt_sp_model;
    uint64_t seed;
    float weight_scale;
} random_args;

#define RA(field) offsetof(random_args, field)

/* The options every family has; its hyper-parameters come from its table. */
static const opt_def random_opts[] = {
    {"output", 'o', OPT_STR, RA(output), "FILE", NULL, "output model file (required)", 0, 0},
    {"arch", 0, OPT_STR, RA(arch), "NAME", NULL, "model family (default transformer; see below)", 0, 0},
    {"seed", 0, OPT_U64, RA(seed), "S", NULL, "random seed (default 1)", 0, UINT64_MAX},
    {"weight-scale", 0, OPT_F32, RA(weight_scale), "X", NULL, "weights uniform in +-X/sqrt(fan_in) (default 1)", 0,
     0},
    {"sp-model", 0, OPT_STR, RA(sp_model), "FILE", NULL,
     "embed a SentencePiece .model shared by both sides (tokenizer.src)", 0, 0},
    {"src-sp-model", 0, OPT_STR, RA(src_sp_model), "FILE", NULL,
     "embed the source-side SentencePiece .model (tokenizer.src)", 0, 0},
    {"tgt-sp-model", 0, OPT_STR, RA(tgt_sp_model), "FILE", NULL,
     "embed the target-side SentencePiece .model (tokenizer.tgt; needs --src-sp-model)", 0, 0},
};
#define N_RANDOM_OPTS (sizeof random_opts / sizeof random_opts[0])

static void random_help(FILE *out) {
    fprintf(out,
            "usage: " PROG " random -o FILE [--arch NAME] [options]\n\n"
            "Write a model of any family with random weights (every tensor of its\n"
            "catalogue, docs/ARCHITECTURES.md, reproducible from --seed).  The model is\n"
            "checked as the runtime will load it before it is written: a configuration\n"
            "the runtime would refuse is an error naming the key, and nothing is written.\n\n"
            "options:\n");
    print_opts(out, random_opts, N_RANDOM_OPTS);
    const nmt_family *prev = NULL;
    for (uint32_t i = 0; nmt_family_at(i) != NULL; i++) {
        const nmt_family *fam = nmt_family_at(i);
        /* a family whose table extends an earlier one's lists only its own keys */
        const int ext = prev != NULL && fam->hparams == prev->hparams && fam->n_hparams > prev->n_hparams;
        fprintf(out, "\nhyper-parameters of --arch %s%s (%s):\n", fam->arch, i == 0 ? " (the default)" : "",
                fam->summary);
        if (ext) fprintf(out, "  those of --arch %s, and:\n", prev->arch);
        nmt_random_model_help(out, fam, ext ? prev->n_hparams : 0);
        prev = fam;
    }
}

/* An embedded SentencePiece model: read whole, and one this runtime reads.
 * NULL (message printed) on failure; *pieces receives its vocabulary size. */
static void *read_sp_model(const char *path, size_t *size, uint32_t *pieces) {
    void *buf = read_whole("random", path, size);
    if (buf == NULL) return NULL;
    size_t need = 0;
    nmt_status s = nmt_tokenizer_arena_size(buf, *size, 2048, &need);
    void *arena = s == NMT_OK ? malloc(need + NMT_ARENA_ALIGNMENT) : NULL;
    nmt_tokenizer *t = NULL;
    nmt_tokenizer_info ti;
    if (s == NMT_OK && arena == NULL) s = NMT_ERR_IO;
    if (s == NMT_OK) s = nmt_tokenizer_create(buf, *size, 2048, arena, need + NMT_ARENA_ALIGNMENT, &t);
    if (s == NMT_OK) s = nmt_tokenizer_get_info(t, &ti);
    free(arena);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " random: '%s' is not a SentencePiece model this runtime reads (%s)\n", path,
                *size == 0 ? "the file is empty" : nmt_status_str(s));
        free(buf);
        return NULL;
    }
    *pieces = ti.vocab_size;
    return buf;
}

/* --NAME[=VALUE] naming one of the family's hyper-parameters: the flag in
 * name[cap], the value in *value (NULL when not in the argument).  0 when
 * it is not one. */
static int family_flag(const nmt_family *fam, const char *arg, char *name, size_t cap, const char **value) {
    if (strncmp(arg, "--", 2) != 0) return 0;
    const char *eq = strchr(arg + 2, '=');
    const size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    if (len == 0 || len >= cap) return 0;
    memcpy(name, arg + 2, len);
    name[len] = '\0';
    const nmt_hparam *hp = nmt_hparam_find(fam, name);
    if (hp == NULL || strcmp(hp->flag, name) != 0) return 0;
    *value = eq ? eq + 1 : NULL;
    return 1;
}

/* The value of --arch in argv (default "transformer"). */
static const char *find_arch(int argc, char **argv) {
    const char *arch = "transformer";
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--arch=", 7) == 0) arch = argv[i] + 7;
        else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) arch = argv[++i];
    }
    return arch;
}

int cmd_random(int argc, char **argv) {
    char why[600] = ""; /* every refusal below writes it (random_model.h) */
    random_args a;
    memset(&a, 0, sizeof a);
    a.seed = 1;
    a.weight_scale = 1.0f;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            random_help(stdout);
            return 0;
        }
    nmt_random_model m;
    if (nmt_random_model_init(&m, find_arch(argc, argv), why, sizeof why) != NMT_OK) {
        fprintf(stderr, PROG " random: %s\n", why);
        return EXIT_USAGE;
    }
    /* the family's flags here, the common options through the table */
    char **rest = malloc(((size_t)argc + 1) * sizeof *rest);
    if (rest == NULL) {
        fprintf(stderr, PROG " random: out of memory\n");
        return 1;
    }
    int n_rest = 0;
    for (int i = 0; i < argc; i++) {
        char name[64];
        const char *value;
        if (!family_flag(m.fam, argv[i], name, sizeof name, &value)) {
            rest[n_rest++] = argv[i];
            continue;
        }
        const int is_flag = nmt_hparam_find(m.fam, name)->type == NMT_HP_FLAG;
        if (value == NULL && is_flag) value = "1";
        if (value == NULL && i + 1 < argc) value = argv[++i];
        if (value == NULL) {
            fprintf(stderr, PROG " random: --%s needs a value\n", name);
            free(rest);
            return EXIT_USAGE;
        }
        if (nmt_random_model_set(&m, name, value, why, sizeof why) != NMT_OK) {
            fprintf(stderr, PROG " random: %s\n", why);
            free(rest);
            return EXIT_USAGE;
        }
    }
    parse_result pr = parse_opts("random", random_opts, N_RANDOM_OPTS, n_rest, rest, &a);
    free(rest);
    if (pr != PARSE_OK) return EXIT_USAGE;

    const char *usage = NULL;
    if (a.output == NULL || a.output[0] == '\0') usage = "-o FILE is required";
    else if (a.sp_model != NULL && (a.src_sp_model != NULL || a.tgt_sp_model != NULL))
        usage = "--sp-model excludes --src-sp-model and --tgt-sp-model";
    else if (a.tgt_sp_model != NULL && a.src_sp_model == NULL) usage = "--tgt-sp-model needs --src-sp-model";
    if (usage != NULL) {
        fprintf(stderr, PROG " random: %s\n", usage);
        return EXIT_USAGE;
    }
    const char *const inputs[] = {a.sp_model, a.src_sp_model, a.tgt_sp_model};
    if (output_is_input("random", a.output, inputs, 3)) return EXIT_USAGE;
    m.seed = a.seed;
    m.weight_scale = a.weight_scale;

    void *src_sp = NULL, *tgt_sp = NULL;
    uint32_t src_pieces = 0, tgt_pieces = 0;
    const char *src_path = a.sp_model ? a.sp_model : a.src_sp_model;
    int rc = 1;
    nmtw_writer *w = NULL;
    if (src_path != NULL && (src_sp = read_sp_model(src_path, &m.src_sp_size, &src_pieces)) == NULL) goto done;
    if (a.tgt_sp_model != NULL && (tgt_sp = read_sp_model(a.tgt_sp_model, &m.tgt_sp_size, &tgt_pieces)) == NULL)
        goto done;
    m.src_sp_model = src_sp;
    m.tgt_sp_model = tgt_sp;

    w = nmtw_create();
    if (w == NULL) {
        fprintf(stderr, PROG " random: out of memory\n");
        goto done;
    }
    nmt_status s = nmt_random_model_build(&m, w, why, sizeof why);
    if (s == NMT_ERR_TOKENIZER_MODEL) {
        nmt_model_info info;
        if (tgt_sp)
            fprintf(stderr, PROG " random: the SentencePiece models have %u (source) and %u (target) pieces",
                    src_pieces, tgt_pieces);
        else
            fprintf(stderr, PROG " random: the SentencePiece model has %u pieces", src_pieces);
        void *img = NULL;
        size_t n = 0;
        if (nmtw_write_memory(w, &img, &n) == NMT_OK && nmt_model_inspect(img, n, &info) == NMT_OK)
            fprintf(stderr, "; --src-vocab %u and --tgt-vocab %u must be at least that", info.src_vocab,
                    info.tgt_vocab);
        fprintf(stderr, " (nothing was written)\n");
        free(img);
        rc = EXIT_USAGE;
        goto done;
    }
    if (s != NMT_OK) {
        fprintf(stderr, PROG " random: invalid configuration of arch '%s': %s (nothing was written)\n", m.fam->arch,
                why);
        rc = EXIT_USAGE;
        goto done;
    }
    if ((s = nmtw_write_file_why(w, a.output, why, sizeof why)) != NMT_OK) {
        fprintf(stderr, PROG " random: %s\n", why[0] ? why : nmt_status_str(s));
        goto done;
    }
    rc = 0;
done:
    nmtw_destroy(w);
    free(src_sp);
    free(tgt_sp);
    return rc;
}
