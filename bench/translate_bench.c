/* SPDX-License-Identifier: MIT */
/* translate_bench.c — end-to-end translation throughput of random-weight
 * models on the chosen OpenCL device, and session start-up with a cold and
 * a warm program cache.  Prints one table; ratios compare configurations
 * measured in the same run (machines are shared and noisy).
 *
 *   translate_bench [--device SPEC] [--sentences N] [--model small|test | --model-file FILE]
 *                   [--batch N] [--fixed-len] [--versus FILE]... [--cache DIR]
 *
 * --batch N (2..64, default 8): the larger batch of the configurations
 * (batch 1 and N, beam 1 and 4) and the sessions' max_batch.
 * --fixed-len: every hypothesis exactly 40 tokens (end-of-sentence barred
 * before 40, forced at 40), so that every model does the same decoding work.
 *
 * --cache DIR: the device of the throughput rows reads its tuning file
 * (nmt-edge-tune's, docs/PERFORMANCE.md) and program cache from DIR; by
 * default it has no cache directory and runs the built-in table's choice.
 * --versus FILE (up to 4): after the table, the same sentences and
 * configurations through each FILE's model on the same device, timed in
 * interleaved rounds (median of 3), as output tokens per second relative to
 * the first model (e.g. MG-SA against the Transformer of the same shape).
 * Random models stop at different lengths, so decoding rows do different
 * work per model; the "score" row (teacher-forced, every sentence against
 * the same 40-token target, batches of 8, or --batch when smaller) does
 * the same work for all.
 * --versus-no-i8dot: the --versus sessions are created with
 * NMT_EDGE_NO_I8DOT=1, so `--model-file M.nmt --versus M.nmt` of an int8
 * model times its int8 x int8 products (model 0, where the device chooses
 * them) against int8 weights x fp32 (model 1) in the same run.
 * --profile (with --versus): then each model's batch-1 beam-1 decoding
 * once more with the queue drained around every launch, time per kernel
 * per output token; --profile-config BxK profiles batch B beam K instead.
 * --timeline: the same profile without draining the queue: the launches
 * run back to back as in a normal run, and each one's device time and the
 * device's idle time before it come from its event (the queue is created
 * with profiling: NMT_EDGE_QUEUE_PROFILING; runtime/device/kernel_args.h).
 * Sessions use fp16 compute where the device has cl_khr_fp16 and the model
 * fp16 weights (NMT_FP16_AUTO, as nmt-edge), unless $NMT_EDGE_NO_FP16=1.
 * --fp16-versus: the first model runs with fp16 compute off (the portable
 * path) and the versus table adds the same model with it on (AUTO), so
 * that the two paths are timed interleaved in one run (with an fp16
 * --model-file; alone or with --versus FILEs).
 *
 * --text FILE --model-file M.nmt [--batch-tokens N[,N...]] [--rounds R]
 * (issue 56): the lines of FILE (e.g. data/de-en/test.en), tokenized with
 * the model's tokenizer, translated at beam 4 as sentence batches of
 * --batch in input order and as token batches of at most N padded tokens
 * (nmt_batch_plan_tokens over windows of 16 x --batch lines, as `nmt-edge
 * translate --batch-tokens N` reads ahead), R interleaved rounds (default
 * 3, the median); each row's best hypotheses are compared with the
 * sentence batches' and the padded source tokens counted.  Lines over 256
 * source tokens are left out (nmt-edge --skip-long gives them empty lines).
 *
 * Not a test: nothing here asserts speed. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nmt_edge.h"
#include "kernel_args.h"
#include "random_model.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, nmt_status s) {
    fprintf(stderr, "translate_bench: %s: %s\n", what, nmt_status_str(s));
    exit(1);
}

typedef struct bench {
    nmt_device *dev;
    void *dev_mem;
    void *image;
    size_t size;
} bench;

static void open_device(bench *b, const char *spec, const char *cache) {
    /* a given cache is written on every driver (cache_fill), as before issue 54 */
    nmt_device_params p = {.device = spec, .cache_dir = cache ? cache : "" /* NULL: none */, .cache_fill = 1};
    b->dev_mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_status s = nmt_device_open(&p, b->dev_mem, nmt_device_footprint(), &b->dev);
    if (s) die("device", s);
}

/* The whole file in a malloc'd buffer; NULL when it cannot be read. */
static void *read_file(const char *path, size_t *size) {
    FILE *mf = fopen(path, "rb");
    long sz = -1;
    void *img = NULL;
    if (mf && fseek(mf, 0, SEEK_END) == 0) sz = ftell(mf);
    if (mf == NULL || sz <= 0 || fseek(mf, 0, SEEK_SET) != 0 || (img = malloc((size_t)sz)) == NULL ||
        fread(img, 1, (size_t)sz, mf) != (size_t)sz) {
        free(img);
        img = NULL;
    }
    if (mf) fclose(mf);
    *size = img ? (size_t)sz : 0;
    return img;
}

/* --fixed-len: every hypothesis exactly 40 tokens (min_len = max_len), so
 * that models that stop at different lengths do the same decoding work. */
static int g_fixed_len;

/* All n_sent sentences through sess in batches of `batch` with beam `beam`:
 * seconds, and the output tokens (EOS included) added to *out_tokens. */
static double run_config(nmt_session *sess, int32_t **toks, const uint32_t *lens, int n_sent, uint32_t batch,
                         uint32_t beam, uint64_t *out_tokens) {
    nmt_decode_opts o = {.beam = beam, .max_len = 40, .min_len = g_fixed_len ? 40 : 0};
    double t0 = now();
    for (int i = 0; i < n_sent; i += (int)batch) {
        uint32_t n = (uint32_t)(n_sent - i) < batch ? (uint32_t)(n_sent - i) : batch;
        nmt_batch bt = {(const int32_t *const *)toks + i, lens + i, n};
        nmt_status s = nmt_session_translate(sess, &bt, &o);
        if (s) die("translate", s);
        for (uint32_t k = 0; k < n; k++) {
            const int32_t *t;
            uint32_t len;
            nmt_session_result(sess, k, 0, &t, &len, NULL, NULL);
            *out_tokens += len + 1;
        }
    }
    return now() - t0;
}

static int g_versus_no_i8dot; /* --versus-no-i8dot */

/* fp16_compute of the sessions (the first model's under --fp16-versus). */
static int g_fp16 = NMT_FP16_AUTO;

static nmt_session *open_session_mode(bench *b, nmt_limits lim, void **arena, size_t *bytes, int fp16) {
    nmt_session_params p = {.model_data = b->image, .model_size = b->size, .limits = lim, .fp16_compute = fp16};
    nmt_status s = nmt_session_arena_size(&p, bytes, NULL);
    if (s) die("arena size", s);
    *arena = aligned_alloc(64, (*bytes + 63) / 64 * 64);
    nmt_session *sess;
    s = nmt_session_create(b->dev, &p, *arena, *bytes, &sess);
    if (s) die("session", s);
    return sess;
}

static nmt_session *open_session(bench *b, nmt_limits lim, void **arena, size_t *bytes) {
    return open_session_mode(b, lim, arena, bytes, g_fp16);
}

/* --fp16-versus: the versus table's last model is the first one with fp16
 * compute on. */
static int g_fp16_versus;

/* ---- --text: sentence batches against token batches (issue 56) ---------- */

typedef struct text_run {
    uint32_t batch_tokens;  /* 0: sentence batches */
    double secs[16];
    uint64_t out_tokens, padded;
    int same;               /* best hypotheses equal to the sentence batches' */
} text_run;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One pass over every sentence: best[i] (max 256 ids + length) filled in
 * input order; seconds. */
static double text_pass(nmt_session *sess, int32_t **toks, const uint32_t *lens, uint32_t n_sent, uint32_t batch,
                        uint32_t batch_tokens, int32_t *best, uint32_t *best_len, uint64_t *out_tokens,
                        uint64_t *padded) {
    nmt_decode_opts o = {.beam = 4};
    const uint32_t window = batch * 16;
    uint32_t *order = malloc(window * sizeof *order), *sizes = malloc(window * sizeof *sizes);
    const int32_t **bt = malloc(batch * sizeof *bt);
    uint32_t *bl = malloc(batch * sizeof *bl), *idx = malloc(batch * sizeof *idx);
    *out_tokens = *padded = 0;
    double t0 = now();
    for (uint32_t w = 0; w < n_sent; w += batch_tokens ? window : batch) {
        const uint32_t wn = batch_tokens ? (n_sent - w < window ? n_sent - w : window)
                                         : (n_sent - w < batch ? n_sent - w : batch);
        uint32_t nb = 1;
        if (batch_tokens) {
            nmt_status st = nmt_batch_plan_tokens(lens + w, wn, batch_tokens, batch, order, sizes, &nb);
            if (st) die("plan", st);
        } else {
            for (uint32_t k = 0; k < wn; k++) order[k] = k;
            sizes[0] = wn;
        }
        for (uint32_t b = 0, lo = 0; b < nb; lo += sizes[b++]) {
            uint32_t longest = 0;
            for (uint32_t k = 0; k < sizes[b]; k++) {
                idx[k] = w + order[lo + k];
                bt[k] = toks[idx[k]];
                bl[k] = lens[idx[k]];
                if (bl[k] > longest) longest = bl[k];
            }
            *padded += (uint64_t)sizes[b] * (longest + 1);
            nmt_batch src = {bt, bl, sizes[b]};
            nmt_status st = nmt_session_translate(sess, &src, &o);
            if (st) die("translate", st);
            for (uint32_t k = 0; k < sizes[b]; k++) {
                const int32_t *t;
                uint32_t len;
                nmt_session_result(sess, k, 0, &t, &len, NULL, NULL);
                if (len > 256) len = 256;
                memcpy(best + (size_t)idx[k] * 256, t, len * sizeof *t);
                best_len[idx[k]] = len;
                *out_tokens += len + 1;
            }
        }
    }
    const double dt = now() - t0;
    free(order), free(sizes), free(bt), free(bl), free(idx);
    return dt;
}

static int text_bench(const char *spec, const char *model_file, const char *text_file, uint32_t batch,
                      const char *budgets, int rounds) {
    bench b = {0};
    if (model_file == NULL || (b.image = read_file(model_file, &b.size)) == NULL) {
        fprintf(stderr, "translate_bench: --text needs a readable --model-file\n");
        return 2;
    }
    open_device(&b, spec, NULL);
    nmt_limits lim = {.max_src_len = 256, .max_batch = batch, .max_beam = 4};
    void *arena;
    size_t bytes;
    nmt_session *sess = open_session(&b, lim, &arena, &bytes);
    nmt_tokenizer *tok = nmt_session_tokenizer(sess, 0);
    FILE *f = fopen(text_file, "r");
    if (tok == NULL || f == NULL) {
        fprintf(stderr, "translate_bench: --text: %s\n", tok == NULL ? "the model has no tokenizer" : "cannot open");
        return 2;
    }
    uint32_t n = 0, cap = 0;
    int32_t **toks = NULL;
    uint32_t *lens = NULL;
    uint64_t src_tokens = 0;
    uint32_t skipped = 0;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        const int32_t *ids;
        uint32_t k;
        nmt_status st = nmt_tokenizer_encode(tok, line, len, &ids, &k);
        if (st) die("tokenize", st);
        if (k > lim.max_src_len) { /* as nmt-edge --skip-long: not translated */
            skipped++;
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            toks = realloc(toks, cap * sizeof *toks);
            lens = realloc(lens, cap * sizeof *lens);
        }
        toks[n] = malloc((k ? k : 1) * sizeof(int32_t));
        memcpy(toks[n], ids, k * sizeof(int32_t));
        lens[n++] = k;
        src_tokens += k;
    }
    fclose(f);
    text_run runs[9] = {{0}};
    int n_runs = 1;
    for (const char *p = budgets; p && *p && n_runs < 9;) {
        runs[n_runs].same = 1;
        runs[n_runs++].batch_tokens = (uint32_t)strtoul(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    int32_t *best0 = malloc((size_t)n * 256 * sizeof *best0), *best = malloc((size_t)n * 256 * sizeof *best);
    uint32_t *len0 = malloc(n * sizeof *len0), *lenb = malloc(n * sizeof *lenb);
    /* warm-up: PoCL compiles kernels per work-group size on first use */
    uint64_t ot, pt;
    text_pass(sess, toks, lens, n < batch ? n : batch, batch, 0, best0, len0, &ot, &pt);
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < n_runs; k++) { /* every round starts at the next row */
            text_run *run = &runs[(k + r) % n_runs];
            int32_t *bb = run->batch_tokens ? best : best0;
            uint32_t *bl = run->batch_tokens ? lenb : len0;
            run->secs[r] = text_pass(sess, toks, lens, n, batch, run->batch_tokens, bb, bl, &run->out_tokens,
                                     &run->padded);
            if (run->batch_tokens == 0) continue;
            for (uint32_t i = 0; i < n; i++) /* best0 is whole: round 0 starts at the sentence batches */
                if (lenb[i] != len0[i] || memcmp(best + (size_t)i * 256, best0 + (size_t)i * 256,
                                                 len0[i] * sizeof *best) != 0)
                    run->same = -1;
        }
    nmt_device_info di;
    nmt_device_get_info(b.dev, &di);
    printf("device: %s (%s), driver %s\n", di.device_name, di.platform_name, di.driver_version);
    printf("text: %s, %u lines (%u over max_src_len 256 left out), %llu source tokens; beam 4, --batch %u, "
           "read-ahead %u lines; median of %d rounds\n",
           text_file, n, skipped, (unsigned long long)src_tokens, batch, batch * 16, rounds);
    printf("%-16s %10s %10s %12s %14s %8s %10s\n", "batches", "seconds", "sent/s", "out tok/s", "padded src tok",
           "vs sent", "same out");
    double base = 0;
    for (int k = 0; k < n_runs; k++) {
        text_run *run = &runs[k];
        qsort(run->secs, (size_t)rounds, sizeof run->secs[0], cmp_double);
        const double med = run->secs[rounds / 2];
        if (k == 0) base = med;
        char name[32];
        if (run->batch_tokens) snprintf(name, sizeof name, "tokens %u", run->batch_tokens);
        else snprintf(name, sizeof name, "sentences %u", batch);
        printf("%-16s %10.3f %10.2f %12.1f %14llu %7.2fx %10s\n", name, med, n / med, run->out_tokens / med,
               (unsigned long long)run->padded, base / med, run->batch_tokens ? (run->same > 0 ? "yes" : "NO") : "-");
    }
    nmt_session_destroy(sess);
    nmt_device_close(b.dev);
    free(arena), free(b.dev_mem), free(b.image), free(best0), free(best), free(len0), free(lenb);
    for (uint32_t i = 0; i < n; i++) free(toks[i]);
    free(toks), free(lens);
    return 0;
}
static uint32_t g_prof_batch = 1, g_prof_beam = 1; /* --profile-config BxK */
static int g_prof_mode = NMT_PROFILE_DRAINED;        /* --timeline: NMT_PROFILE_EVENTS */

static double median3(const double *v) {
    const double lo = fmin(v[0], v[1]), hi = fmax(v[0], v[1]);
    return fmax(lo, fmin(hi, v[2]));
}

/* The --versus table: sess (model `name`) and each file's model, the same
 * configurations, rounds interleaved across the models, median of 3. */
static void versus(bench *b, nmt_session *sess, const char *name, const char *const *files, int n_vs,
                   nmt_limits lim, int32_t **toks, const uint32_t *lens, int n_sent, int profile,
                   const uint32_t (*configs)[2], size_t n_configs) {
    nmt_session *ss[5] = {sess};
    void *arenas[5] = {NULL}, *images[5] = {NULL};
    const char *labels[5] = {name};
    for (int m = 1; m <= n_vs; m++) labels[m] = files[m - 1];
    if (g_fp16_versus) { /* the same image, fp16 compute on */
        n_vs++;
        size_t bytes;
        ss[n_vs] = open_session_mode(b, lim, &arenas[n_vs], &bytes, NMT_FP16_AUTO);
        labels[n_vs] = nmt_session_fp16_compute(ss[n_vs]) ? "the same, fp16 compute on"
                                                          : "the same, fp16 compute asked (not available: fp32)";
    }
    for (int m = 1; m <= n_vs - (g_fp16_versus ? 1 : 0); m++) {
        bench vb = *b;
        if ((images[m] = vb.image = read_file(files[m - 1], &vb.size)) == NULL) {
            fprintf(stderr, "translate_bench: cannot read '%s'\n", files[m - 1]);
            exit(1);
        }
        size_t bytes;
        if (g_versus_no_i8dot) setenv("NMT_EDGE_NO_I8DOT", "1", 1); /* read at session creation */
        ss[m] = open_session(&vb, lim, &arenas[m], &bytes);
        if (g_versus_no_i8dot) unsetenv("NMT_EDGE_NO_I8DOT");
    }
    printf("\nversus (same device and sentences; out tok/s, median of 3 interleaved rounds; ratio to the first)\n");
    printf("model 0: %s%s\n", name, g_fp16_versus ? " (fp16 compute off)" : "");
    for (int m = 1; m <= n_vs; m++) printf("model %d: %s\n", m, labels[m]);
    for (size_t c = 0; c < n_configs; c++) {
        double tps[5][3];
        for (int m = 0; m <= n_vs; m++) { /* warm-up: lazy kernel builds */
            uint64_t t = 0;
            run_config(ss[m], toks, lens, configs[c][0] < (uint32_t)n_sent ? (int)configs[c][0] : n_sent,
                       configs[c][0], configs[c][1], &t);
        }
        for (int r = 0; r < 3; r++)
            for (int m = 0; m <= n_vs; m++) {
                uint64_t out = 0;
                const double dt = run_config(ss[m], toks, lens, n_sent, configs[c][0], configs[c][1], &out);
                tps[m][r] = (double)out / dt;
            }
        printf("batch %u beam %u:", configs[c][0], configs[c][1]);
        double base = 0;
        for (int m = 0; m <= n_vs; m++) {
            const double v = median3(tps[m]);
            if (m == 0) base = v;
            printf("  [%d] %.1f tok/s (%.3fx)", m, v, v / base);
        }
        printf("\n");
    }
    /* fixed work: score every sentence against one 40-token target */
    int32_t tgt[40];
    for (int i = 0; i < 40; i++) tgt[i] = 4 + (i * 7) % 50;
    const int32_t *tg[8] = {tgt, tgt, tgt, tgt, tgt, tgt, tgt, tgt};
    const uint32_t tl[8] = {40, 40, 40, 40, 40, 40, 40, 40};
    double sc[5][3];
    for (int r = 0; r < 4; r++)
        for (int m = 0; m <= n_vs; m++) {
            const double t0 = now();
            const int sb = lim.max_batch < 8 ? (int)lim.max_batch : 8; /* --batch below 8 */
            for (int i = 0; i < n_sent; i += sb) {
                const uint32_t n = n_sent - i < sb ? (uint32_t)(n_sent - i) : (uint32_t)sb;
                nmt_batch src = {(const int32_t *const *)toks + i, lens + i, n}, tb = {tg, tl, n};
                float lp[8];
                nmt_status s = nmt_session_score(ss[m], &src, &tb, lp);
                if (s) die("score", s);
            }
            if (r > 0) sc[m][r - 1] = 40.0 * n_sent / (now() - t0); /* round 0 warms up */
        }
    printf("score (40 target tokens each):");
    double base = 0;
    for (int m = 0; m <= n_vs; m++) {
        const double v = median3(sc[m]);
        if (m == 0) base = v;
        printf("  [%d] %.1f tok/s (%.3fx)", m, v, v / base);
    }
    printf("\n");
    for (int m = 0; profile && m <= n_vs; m++) { /* where a model's decoding time goes */
        uint64_t out = 0;
        nmt_kernel_profile_enable(g_prof_mode);
        run_config(ss[m], toks, lens, n_sent, g_prof_batch, g_prof_beam, &out);
        nmt_kernel_profile_enable(0);
        printf("\nper-kernel profile of model %d, batch %u beam %u, per output token (%llu tokens; %s):\n", m,
               g_prof_batch, g_prof_beam, (unsigned long long)out,
               g_prof_mode == NMT_PROFILE_EVENTS
                   ? "launches back to back, device times from events, idle = device idle before the launch"
                   : "queue drained around each launch");
        nmt_kernel_profile_print(stdout, out ? 1.0 / (double)out : 1.0);
    }
    for (int m = 1; m <= n_vs; m++) {
        nmt_session_destroy(ss[m]);
        free(arenas[m]);
        free(images[m]);
    }
}

int main(int argc, char **argv) {
    const char *spec = getenv("NMT_EDGE_DEVICE");
    int n_sent = 32;
    const char *which = "test", *model_file = NULL, *vs_files[4], *tuned_cache = NULL;
    int n_vs = 0, profile = 0, big = 8, timeline = 0, rounds = 3;
    const char *text_file = NULL, *budgets = "256,512,1024";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--sentences") && i + 1 < argc) n_sent = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--model-file") && i + 1 < argc) which = model_file = argv[++i];
        else if (!strcmp(argv[i], "--versus") && i + 1 < argc && n_vs < 4) vs_files[n_vs++] = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) big = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--timeline")) profile = timeline = 1;
        else if (!strcmp(argv[i], "--profile-config") && i + 1 < argc) {
            unsigned pb = 0, pk = 0;
            char tail = 0;
            if (sscanf(argv[++i], "%ux%u%c", &pb, &pk, &tail) != 2 || pb < 1 || pk < 1 || pk > 4) {
                fprintf(stderr, "translate_bench: --profile-config BxK, e.g. 8x4 (beam 1..4, batch up to --batch)\n");
                return 2;
            }
            profile = 1;
            g_prof_batch = pb;
            g_prof_beam = pk;
        }
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) tuned_cache = argv[++i];
        else if (!strcmp(argv[i], "--fixed-len")) g_fixed_len = 1;
        else if (!strcmp(argv[i], "--fp16-versus")) g_fp16_versus = 1;
        else if (!strcmp(argv[i], "--versus-no-i8dot")) g_versus_no_i8dot = 1;
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) text_file = argv[++i];
        else if (!strcmp(argv[i], "--batch-tokens") && i + 1 < argc) budgets = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: translate_bench [--device SPEC] [--sentences N] [--model test|small | --model-file FILE]"
                            " [--batch N] [--fixed-len] [--versus FILE]... (up to 4) [--profile | --timeline] [--profile-config BxK] [--cache DIR]"
                            " [--fp16-versus] [--versus-no-i8dot] [--text FILE [--batch-tokens N,...] [--rounds R]]\n");
            return 2;
        }
    }
    const char *no16 = getenv("NMT_EDGE_NO_FP16");
    if (g_fp16_versus || (no16 != NULL && *no16 && strcmp(no16, "0") != 0)) g_fp16 = NMT_FP16_OFF;
    if (profile && n_vs == 0 && !g_fp16_versus) {
        fprintf(stderr, "translate_bench: --profile, --timeline and --profile-config profile the --versus models: give "
                        "--versus FILE (e.g. the --model-file itself)\n");
        return 2;
    }
    if (n_sent < 1 || n_sent > 4096 || big < 2 || big > 64 || g_prof_batch > (uint32_t)big) {
        fprintf(stderr, "translate_bench: --sentences must be 1..4096, --batch 2..64, --profile-config batch <= --batch\n");
        return 2;
    }
    if (text_file != NULL) {
        if (rounds < 1 || rounds > 16) {
            fprintf(stderr, "translate_bench: --rounds must be 1..16\n");
            return 2;
        }
        return text_bench(spec, model_file, text_file, (uint32_t)big, budgets, rounds);
    }
    if (timeline) {
        setenv("NMT_EDGE_QUEUE_PROFILING", "1", 1); /* read when the device opens */
        g_prof_mode = NMT_PROFILE_EVENTS;
    }
    const uint32_t configs[4][2] = {{1, 1}, {1, 4}, {(uint32_t)big, 1}, {(uint32_t)big, 4}};
    const size_t n_configs = 4;
    nmt_random_transformer_config cfg;
    nmt_random_transformer_defaults(&cfg);
    cfg.enc_branches = "global fw bw local:3";
    cfg.dec_branches = "global local:3";
    cfg.fusion = "gate";
    cfg.shared_embeddings = 1;
    if (!strcmp(which, "small")) { /* the paper's IWSLT "small" shape, 8k vocabulary */
        cfg.d_model = 256, cfg.n_heads = 4, cfg.d_ff = 1024, cfg.src_vocab = cfg.tgt_vocab = 8000;
    } else { /* build/models/test-model.nmt */
        cfg.d_model = 64, cfg.n_heads = 4, cfg.d_ff = 128, cfg.src_vocab = cfg.tgt_vocab = 64;
    }
    bench b = {0};
    nmt_status s = NMT_OK;
    if (model_file != NULL) { /* e.g. an nmt-edge-convert export (fp32 / fp16 / int8) */
        if ((b.image = read_file(model_file, &b.size)) == NULL) {
            fprintf(stderr, "translate_bench: cannot read '%s'\n", model_file);
            return 1;
        }
    } else {
        s = nmt_random_transformer_image(&cfg, &b.image, &b.size);
        if (s) die("model", s);
    }

    /* start-up: fresh cache directory (cold) vs the same directory again (warm) */
    char cache[] = "/tmp/nmt-bench-cache-XXXXXX";
    if (!mkdtemp(cache)) return 1;
    nmt_limits lim = {.max_src_len = 64, .max_batch = (uint32_t)big, .max_beam = 4};
    double t_cold = 0, t_warm = 0;
    for (int pass = 0; pass < 2; pass++) {
        double t0 = now();
        open_device(&b, spec, cache);
        void *arena;
        size_t bytes;
        nmt_session *sess = open_session(&b, lim, &arena, &bytes);
        *(pass ? &t_warm : &t_cold) = now() - t0;
        nmt_session_destroy(sess);
        free(arena);
        nmt_device_close(b.dev);
        free(b.dev_mem);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    if (system(cmd) != 0) fprintf(stderr, "translate_bench: could not remove %s\n", cache);

    open_device(&b, spec, tuned_cache);
    nmt_device_info di;
    nmt_device_get_info(b.dev, &di);
    void *arena;
    size_t bytes;
    uint64_t dev_bytes = 0;
    nmt_session_params sp = {.model_data = b.image, .model_size = b.size, .limits = lim, .fp16_compute = g_fp16};
    nmt_session_arena_size(&sp, &bytes, &dev_bytes);
    nmt_session *sess = open_session(&b, lim, &arena, &bytes);
    nmt_model_info mi;
    nmt_session_model_info(sess, &mi);

    /* fixed pseudo-random sentences of 8..24 tokens */
    int32_t **toks = calloc((size_t)n_sent, sizeof *toks);
    uint32_t *lens = calloc((size_t)n_sent, sizeof *lens);
    uint64_t x = 88172645463325252ull, src_tokens = 0;
    for (int i = 0; i < n_sent; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        lens[i] = 8 + (uint32_t)(x % 17);
        toks[i] = calloc(lens[i], sizeof(int32_t));
        for (uint32_t j = 0; j < lens[i]; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            toks[i][j] = 4 + (int32_t)(x % (mi.src_vocab - 4));
        }
        src_tokens += lens[i];
    }

    printf("device: %s (%s), driver %s\n", di.device_name, di.platform_name, di.driver_version);
    printf("int8 products: %s\n", di.int8_products);
    printf("model: %s d=%u heads=%u ff=%u layers=%u+%u vocab=%u, %llu parameters, %zu file bytes\n",
           which, mi.d_model, mi.n_heads, mi.d_ff, mi.enc_layers, mi.dec_layers, mi.tgt_vocab,
           (unsigned long long)mi.n_params, b.size);
    printf("limits: max_src_len %u, batch %u, beam %u -> arena %zu bytes, device %llu bytes\n",
           lim.max_src_len, lim.max_batch, lim.max_beam, bytes, (unsigned long long)dev_bytes);
    printf("start-up (device open + session create): cold cache %.3f s, warm cache %.3f s (cold/warm %.1fx)\n",
           t_cold, t_warm, t_cold / t_warm);
    printf("%-6s %-6s %12s %12s %14s %10s\n", "batch", "beam", "seconds", "sent/s", "out tok/s", "vs b1k1");
    double base = 0;
    /* warm-up: PoCL compiles each kernel lazily per work-group size */
    for (size_t c = 0; c < n_configs; c++) {
        nmt_decode_opts o = {.beam = configs[c][1], .max_len = 40, .min_len = g_fixed_len ? 40 : 0};
        uint32_t n = configs[c][0] < (uint32_t)n_sent ? configs[c][0] : (uint32_t)n_sent;
        nmt_batch bt = {(const int32_t *const *)toks, lens, n};
        s = nmt_session_translate(sess, &bt, &o);
        if (s) die("translate", s);
    }
    for (size_t c = 0; c < n_configs; c++) {
        uint32_t batch = configs[c][0], beam = configs[c][1];
        uint64_t out_tokens = 0;
        double dt = run_config(sess, toks, lens, n_sent, batch, beam, &out_tokens), sps = n_sent / dt;
        if (c == 0) base = sps;
        printf("%-6u %-6u %12.3f %12.2f %14.1f %9.2fx\n", batch, beam, dt, sps, out_tokens / dt, sps / base);
    }
    printf("(%d sentences, %llu source tokens, %s 40 output tokens each)\n", n_sent,
           (unsigned long long)src_tokens, g_fixed_len ? "exactly" : "max");
    printf("fp16 compute: %s\n", nmt_session_fp16_compute(sess) ? "on" : "off");
    if (n_vs > 0 || g_fp16_versus) versus(&b, sess, which, vs_files, n_vs, lim, toks, lens, n_sent, profile, configs, n_configs);
    nmt_session_destroy(sess);
    nmt_device_close(b.dev);
    free(arena);
    free(b.dev_mem);
    free(b.image);
    for (int i = 0; i < n_sent; i++) free(toks[i]);
    free(toks);
    free(lens);
    return 0;
}
