/* SPDX-License-Identifier: MIT */
/* train_cmds.c — the analysis commands of `nmt-edge-train` besides
 * training (train_cmds.h): `plot`, `bleu`, `attention` and `parse-spans`. */
#include "train_cmds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "bleu.h"
#include "data.h"
#include "parse_spans.h"
#include "plot.h"
#include "tool_out.h"
#include "train_env.h"
#include "train_model.h"
#include "train_opts.h"

#define PROG TRAIN_PROG
#define EXIT_USAGE TRAIN_EXIT_USAGE

/* `plot LOG -o SVG` (one run: plot_svg, unchanged), or `plot LOG1 LOG2 ...
 * -o SVG [--label NAME]...` (runs overlaid: plot_svg_multi; the labels name
 * the logs in order, a log without one is named after its folder). */
int train_cmd_plot(int argc, char **argv) {
    static const char usage[] =
        "Usage: nmt-edge-train plot LOG.jsonl [LOG.jsonl...] -o|--out PLOT.svg [--label NAME]...\n";
    const char *logs[PLOT_MAX_LOGS], *labels[PLOT_MAX_LOGS] = {0};
    const char *out = NULL;
    int n_logs = 0, n_labels = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("%s\n"
                   "Plot training loss, dev loss and dev BLEU over steps from a training log.\n"
                   "Several logs (at most %d) are overlaid, one colour each, with a legend;\n"
                   "--label NAME names them in order (default: the log's folder).\n",
                   usage, PLOT_MAX_LOGS);
            return 0;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            if (n_labels == PLOT_MAX_LOGS) {
                fprintf(stderr, PROG " plot: more than %d labels\n", PLOT_MAX_LOGS);
                return EXIT_USAGE;
            }
            labels[n_labels++] = argv[++i];
        } else if (argv[i][0] != '-') {
            if (n_logs == PLOT_MAX_LOGS) {
                fprintf(stderr, PROG " plot: more than %d logs in one plot\n", PLOT_MAX_LOGS);
                return EXIT_USAGE;
            }
            logs[n_logs++] = argv[i];
        } else {
            fprintf(stderr, PROG " plot: unexpected argument '%s'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!n_logs || !out) {
        fprintf(stderr, "%s", usage);
        return EXIT_USAGE;
    }
    if (n_labels > n_logs) {
        fprintf(stderr, PROG " plot: %d labels for %d logs\n", n_labels, n_logs);
        return EXIT_USAGE;
    }
    char err[TRAIN_PATH_WHY_BYTES] = "";
    nmt_status s = n_logs == 1 && n_labels == 0 ? plot_svg(logs[0], out, err, sizeof err)
                                                : plot_svg_multi(logs, labels, n_logs, out, err, sizeof err);
    if (s != NMT_OK) {
        fprintf(stderr, PROG " plot: %s%s%s\n", nmt_status_str(s), *err ? ": " : "", err);
        return 1;
    }
    return 0;
}

/* Corpus BLEU of a hypothesis file against one reference file, in
 * sacreBLEU's order: `bleu REF HYP`, `bleu REF < HYP` (as `sacrebleu REF <
 * HYP`), or named, `--ref REF --hyp HYP` (either order; a named one leaves
 * the positional argument to the other). */
int train_cmd_bleu(int argc, char **argv) {
    static const char usage[] =
        "Usage: nmt-edge-train bleu REF [HYP]\n"
        "       nmt-edge-train bleu --ref REF --hyp HYP\n";
    const char *ref = NULL, *hyp = NULL, *pos[2] = {NULL, NULL};
    int n_pos = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("%s\n"
                   "Corpus BLEU of the hypotheses HYP (a system's output) against the references REF,\n"
                   "line by line, as sacreBLEU's default (13a tokenizer, exp smoothing, mixed case).\n"
                   "The order is sacreBLEU's (sacrebleu REF < HYP): the reference first. Without HYP,\n"
                   "or with HYP '-', the hypotheses are read from standard input.\n"
                   "  --ref FILE    the reference translations\n"
                   "  --hyp FILE    the hypotheses to score ('-': standard input)\n",
                   usage);
            return 0;
        } else if ((!strcmp(argv[i], "--ref") || !strcmp(argv[i], "--hyp")) && i + 1 < argc) {
            const char **slot = !strcmp(argv[i], "--ref") ? &ref : &hyp;
            if (*slot) {
                fprintf(stderr, PROG " bleu: %s given twice\n%s", argv[i], usage);
                return EXIT_USAGE;
            }
            *slot = argv[++i];
        } else if ((argv[i][0] != '-' || !strcmp(argv[i], "-")) && n_pos < 2) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, PROG " bleu: unexpected argument '%s'\n%s", argv[i], usage);
            return EXIT_USAGE;
        }
    }
    for (int k = 0; k < n_pos; k++) { /* positional: REF, then HYP, the ones not named */
        const char **slot = !ref ? &ref : !hyp ? &hyp : NULL;
        if (!slot) {
            fprintf(stderr, PROG " bleu: unexpected argument '%s' (--ref and --hyp are given)\n%s", pos[k], usage);
            return EXIT_USAGE;
        }
        *slot = pos[k];
    }
    if (!ref) {
        fprintf(stderr, PROG " bleu: no reference file (REF or --ref FILE)\n%s", usage);
        return EXIT_USAGE;
    }
    if (!strcmp(ref, "-")) {
        fprintf(stderr, PROG " bleu: the reference must be a file (only HYP may be standard input)\n%s", usage);
        return EXIT_USAGE;
    }
    const int hyp_stdin = !hyp || !strcmp(hyp, "-");
    if (!hyp && isatty(0)) { /* nothing piped: a usage error, not a wait on the terminal */
        fprintf(stderr, PROG " bleu: no hypotheses (HYP, --hyp FILE, or REF < HYP)\n%s", usage);
        return EXIT_USAGE;
    }
    const char *hyp_name = hyp_stdin ? "standard input" : hyp;
    FILE *rf = fopen(ref, "r"), *h = rf == NULL ? NULL : hyp_stdin ? stdin : fopen(hyp, "r");
    if (!h || !rf) {
        fprintf(stderr, PROG " bleu: cannot open '%s': %s\n", !rf ? ref : hyp, strerror(errno));
        if (rf) fclose(rf);
        return 1;
    }
    nmt_bleu_stats bs;
    memset(&bs, 0, sizeof bs);
    char *a = NULL, *b = NULL;
    size_t ca = 0, cb = 0;
    unsigned long n = 0;
    int rc = 0;
    for (;;) {
        ssize_t la = getline(&a, &ca, h), lb = getline(&b, &cb, rf);
        if (la < 0 && lb < 0) break;
        if (la < 0 || lb < 0) {
            fprintf(stderr, PROG " bleu: the hypotheses (%s) and the references (%s) have different line counts "
                            "(%s ends first)\n", hyp_name, ref, la < 0 ? hyp_name : ref);
            rc = 1;
            break;
        }
        while (la > 0 && (a[la - 1] == '\n' || a[la - 1] == '\r')) a[--la] = 0;
        while (lb > 0 && (b[lb - 1] == '\n' || b[lb - 1] == '\r')) b[--lb] = 0;
        const char *refs[1] = {b};
        nmt_bleu_add(&bs, a, refs, 1);
        n++;
    }
    free(a);
    free(b);
    if (!hyp_stdin) fclose(h);
    fclose(rf);
    if (rc) return rc;
    nmt_bleu_result res = nmt_bleu_score(&bs);
    printf("BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %llu ref_len = %llu) %lu sentences\n",
           res.score, res.precisions[0], res.precisions[1], res.precisions[2], res.precisions[3], res.bp,
           bs.ref_len ? (double)bs.sys_len / (double)bs.ref_len : 0.0, (unsigned long long)bs.sys_len,
           (unsigned long long)bs.ref_len, n);
    return nmt_tool_close_stdout(PROG " bleu"); /* the score reached standard output, or status 1 */
}

/* nmt-edge-train attention MODEL SRC TGT: the interleaved phrase
 * attention's activation shares (the paper's Table 3) over a parallel text,
 * teacher-forced with the model's embedded tokenizer. */
int train_cmd_attention(int argc, char **argv) {
    static const char usage[] =
        "Usage: nmt-edge-train attention MODEL SRC TGT [--device SPEC] [--max-len N] [--max-tokens N]\n";
    static train_env r;
    const char *device = NULL;
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    long max_len = 250, max_tokens = 4096;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("%s\n"
                   "Attention shares by kind of query and key of a model with the interleaved phrase\n"
                   "attention (--ph-* inter:12): for each such sub-layer, the attention mass of unigram\n"
                   "(token) and bigram (phrase) queries on unigram and bigram keys, as percentages of\n"
                   "their sum over the teacher-forced pairs of SRC / TGT (tokenized with the model's\n"
                   "embedded SentencePiece model; pairs longer than --max-len tokens (250) skipped;\n"
                   "batches of --max-tokens (4096)).\n",
                   usage);
            return 0;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            device = argv[++i];
        } else if ((!strcmp(argv[i], "--max-len") || !strcmp(argv[i], "--max-tokens")) && i + 1 < argc) {
            char *end;
            const long v = strtol(argv[i + 1], &end, 10);
            if (*end || v < 1 || v > (1 << 24)) {
                fprintf(stderr, PROG " attention: invalid value '%s' for %s\n", argv[i + 1], argv[i]);
                return EXIT_USAGE;
            }
            *(!strcmp(argv[i], "--max-len") ? &max_len : &max_tokens) = v;
            i++;
        } else if (argv[i][0] != '-' && n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, PROG " attention: unexpected argument '%s'\n%s", argv[i], usage);
            return EXIT_USAGE;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "%s", usage);
        return EXIT_USAGE;
    }
    size_t size = 0;
    void *img = train_slurp(pos[0], &size);
    if (!img) {
        fprintf(stderr, PROG " attention: cannot read '%s': %s\n", pos[0], strerror(errno));
        return 1;
    }
    nmt_model_info mi;
    nmt_status s = nmt_model_inspect(img, size, &mi);
    int rc = 0;
    if (s != NMT_OK) {
        fprintf(stderr, PROG " attention: '%s': %s\n", pos[0], nmt_status_str(s));
        rc = 1;
    }
    if (!rc) rc = train_env_tokenizer_from_model(&r, img, size);
    if (!rc) rc = train_env_open_device(&r, device, 0);
    td_corpus *c = NULL;
    td_batcher *b = NULL;
    ntm_model *m = NULL;
    if (!rc) {
        td_stats ts;
        char err[TRAIN_PATH_WHY_BYTES] = "";
        td_filter flt = {(uint32_t)max_len, 0};
        s = td_load(pos[1], pos[2], r.tok, r.tok, &flt, &c, &ts, err, sizeof err);
        if (s == NMT_OK && ts.kept == 0) {
            fprintf(stderr, PROG " attention: no pairs of at most %ld tokens in %s / %s\n", max_len, pos[1], pos[2]);
            rc = 1;
        } else if (s != NMT_OK) {
            fprintf(stderr, PROG " attention: %s%s%s\n", nmt_status_str(s), *err ? ": " : "", err);
            rc = 1;
        }
    }
    if (!rc) {
        s = td_batcher_create(c, (uint32_t)max_tokens, 1u << 16, 0, (int32_t)mi.bos_id, (int32_t)mi.eos_id,
                              (int32_t)mi.pad_id, &b);
        if (s != NMT_OK) rc = train_fail("batching (is --max-tokens below 2 * (--max-len + 1)?)", s);
    }
    if (!rc) {
        nmt_train_limits lim;
        memset(&lim, 0, sizeof lim);
        td_batcher_bounds(b, &lim.max_seqs, &lim.max_src_len, &lim.max_tgt_len);
        lim.max_tokens = (uint32_t)max_tokens;
        s = ntm_create(r.dev, img, size, &lim, &m);
        if (s != NMT_OK) rc = train_fail("cannot create the model on the device", s);
    }
    enum { CAP = 3 * 64 };
    static ntm_attn_mass mass[CAP];
    uint32_t n = 0;
    for (uint32_t k = 0; !rc && k < td_batches_per_epoch(b); k++) {
        nmt_train_batch bt;
        uint32_t nt;
        s = td_batch_at(b, k, &bt, &nt);
        if (s == NMT_OK) s = ntm_attention_mass(m, &bt, mass, CAP, &n);
        if (s == NMT_ERR_UNSUPPORTED || (s == NMT_OK && n == 0)) {
            fprintf(stderr, PROG " attention: '%s' (arch %s) has no interleaved phrase attention (--ph-* inter:12)\n",
                    pos[0], mi.arch);
            rc = 1;
        } else if (s != NMT_OK) {
            rc = train_fail("attention", s);
        }
    }
    if (!rc) {
        printf("%-20s %15s %15s %15s %15s\n", "sub-layer", "token-to-token", "token-to-phrase", "phrase-to-token",
               "phrase-to-phrase");
        for (uint32_t i = 0; i < n; i++) {
            const double t = mass[i].mass[0] + mass[i].mass[1] + mass[i].mass[2] + mass[i].mass[3];
            printf("%-20s", mass[i].where);
            for (int q = 0; q < 4; q++) printf(" %15.2f", t > 0 ? 100.0 * mass[i].mass[q] / t : 0.0);
            printf("\n");
        }
        printf("(%u pairs of %s / %s; percentages of each sub-layer's attention mass)\n", td_size(c), pos[1], pos[2]);
        rc = nmt_tool_close_stdout(PROG " attention");
    }
    if (m) ntm_destroy(m);
    td_batcher_free(b);
    td_free(c);
    train_env_close(&r);
    free(img);
    return rc;
}

/* `parse-spans SRC -o SPANS (--spm FILE | --model MODEL)`: one line of
 * START-END:LABEL spans (tools/spans_file.h) per line of SRC, from the
 * link-grammar parse of each sentence mapped onto its pieces; a line the
 * parser cannot parse gets an empty line (the n-gram fallback), counted. */
int train_cmd_parse_spans(int argc, char **argv) {
    static const char usage[] = "Usage: nmt-edge-train parse-spans SRC -o SPANS (--spm FILE | --model MODEL.nmt)\n";
    const char *src = NULL, *out = NULL, *spm = NULL, *model = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("%s\nWrite the MG-SA phrase spans of an English source file for --train-src-spans /\n"
                   "--dev-src-spans: the link-grammar parse of each line, its base constituents mapped\n"
                   "onto the SentencePiece pieces of the given model (docs/TRAINING.md).\n", usage);
            return 0;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--spm") && i + 1 < argc) {
            spm = argv[++i];
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            model = argv[++i];
        } else if (!src && argv[i][0] != '-') {
            src = argv[i];
        } else {
            fprintf(stderr, PROG " parse-spans: unexpected argument '%s'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!src || !out || !spm == !model) {
        fprintf(stderr, "%s", usage);
        return EXIT_USAGE;
    }
    char why[TRAIN_WHY_BYTES] = "";
    nmt_parser *p = nmt_parser_create(why, sizeof why);
    if (p == NULL) {
        fprintf(stderr, PROG " parse-spans: %s\n", why);
        return 1;
    }
    train_env r;
    memset(&r, 0, sizeof r);
    int rc = 0;
    size_t size = 0;
    void *img = NULL;
    if (model) {
        img = train_slurp(model, &size);
        if (!img) {
            fprintf(stderr, PROG " parse-spans: cannot read '%s': %s\n", model, strerror(errno));
            rc = 1;
        }
        if (!rc) rc = train_env_tokenizer_from_model(&r, img, size);
    } else {
        rc = train_env_tokenizer_from_file(&r, spm);
    }
    size_t n = 0;
    char *text = rc ? NULL : train_slurp(src, &n);
    if (!rc && !text) {
        fprintf(stderr, PROG " parse-spans: cannot read '%s': %s\n", src, strerror(errno));
        rc = 1;
    }
    FILE *f = rc ? NULL : fopen(out, "w");
    if (!rc && !f) {
        fprintf(stderr, PROG " parse-spans: cannot write '%s': %s\n", out, strerror(errno));
        rc = 1;
    }
    uint64_t lines = 0, empty = 0;
    size_t pos = n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0;
    static nmt_parsed_span sp[1024];
    while (!rc && pos < n) {
        const char *line = text + pos, *nl = memchr(line, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - line) : n - pos;
        pos += len + (nl != NULL);
        if (len > 0 && line[len - 1] == '\r') len--;
        lines++;
        const int32_t *ids = NULL;
        uint32_t n_ids = 0;
        int k = -1;
        if (nmt_tokenizer_encode(r.tok, line, len, &ids, &n_ids) == NMT_OK && n_ids == 0) {
            empty++;
            k = 0;
        } else if (ids) {
            k = nmt_parser_piece_spans(p, r.tok, ids, n_ids, sp, 1024);
        }
        for (int i = 0; i < k; i++)
            fprintf(f, "%s%u-%u:%s", i ? " " : "", sp[i].start, sp[i].start + sp[i].len, sp[i].label);
        fputc('\n', f);
    }
    uint64_t parsed = 0, fallback = 0;
    nmt_parser_counts(p, &parsed, &fallback);
    if (f && fclose(f) != 0) {
        fprintf(stderr, PROG " parse-spans: cannot write '%s': %s\n", out, strerror(errno));
        rc = 1;
    }
    if (!rc)
        fprintf(stderr, PROG " parse-spans: %llu lines: %llu parsed, %llu empty, %llu not parsed (n-gram fallback)\n",
                (unsigned long long)lines, (unsigned long long)parsed, (unsigned long long)empty,
                (unsigned long long)(lines - parsed - empty));
    (void)fallback;
    free(text);
    free(img);
    train_env_close(&r);
    nmt_parser_destroy(p);
    return rc;
}
