/* SPDX-License-Identifier: MIT */
/* train_bench.c — speed of one training step of the trainer's model
 * (train/families/transformer/tf_train.h) on the paper's small setting, beside PyTorch on the same
 * machine, model shape and batch, measured in the same run (issue 5, item 8).
 *
 *   train_bench [--variant vanilla|hysan] [--steps N] [--warmup N]
 *               [--threads N] [--device SPEC] [--no-torch]
 *
 * Model: a random-weight image (convert/random_model.h), d_model 256, 4
 * heads, FFN 1024, 2 + 2 layers, one shared 8000-word vocabulary, tied
 * output, post-norm.  vanilla: branches "global" / "global", fusion sum;
 * hysan: encoder "global fw bw local:3", decoder "global local:3", squeeze
 * gate with reduction 4.
 *
 * Batch: 128 sentences, source 31 ids + EOS, target BOS + 31 ids in and
 * 31 ids + EOS out: 4096 target tokens, no padding; ids in [4, 8000) from a
 * fixed xorshift64 stream.  The batch is written to a temporary file that
 * the PyTorch script reads, so both sides train on the same ids.
 *
 * A step is what the trainer does per update: tft_zero_grad +
 * tft_forward_backward (residual dropout 0.1, label smoothing 0.1) +
 * tft_grad_norm + tft_adam_step (clip at norm 1, lr 5e-4, beta 0.9/0.98,
 * eps 1e-9), timed to the end of the queue, with a per-phase breakdown.
 * `--warmup` untimed steps first (PoCL compiles each kernel at its first
 * launch), then `--steps` timed ones.
 *
 * Then `<python> bench/train_step_torch.py` runs the same steps in PyTorch
 * (torch.set_num_threads(--threads)); the interpreter is $NMT_BENCH_PYTHON,
 * else the first of `python3`, `/usr/bin/python3` that imports torch
 * (Debian's python3-torch lives in /usr/bin/python3's dist-packages, which a
 * pyenv `python3` does not see).  Without one the bench says so and exits 0
 * after its own numbers.  --threads also caps PoCL's worker threads
 * (POCL_MAX_PTHREAD_COUNT) unless that is already set.
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
#include "model_arch.h"
#include "tf_train.h"
#include "model_arch.h"

#define N_SEQ 128u
#define SRC_LEN 32u
#define TGT_LEN 32u
#define VOCAB 8000u
#define BOS_ID 1
#define EOS_ID 2
#define PAD_ID 0

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, nmt_status s) {
    fprintf(stderr, "train_bench: %s: %s\n", what, nmt_status_str(s));
    exit(s == NMT_ERR_UNSUPPORTED ? 3 : 1);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: train_bench [--variant vanilla|hysan] [--steps N] [--warmup N] [--threads N]\n"
            "                   [--device SPEC] [--no-torch] [--help]\n"
            "Training-step speed (zero_grad + forward/backward + grad norm + Adam) of the\n"
            "paper's small model (d 256, 4 heads, ff 1024, 2+2 layers, shared 8000 vocabulary,\n"
            "tied output, post-norm) on a fixed batch of 128 x 32 target tokens, then the\n"
            "same in PyTorch (bench/train_step_torch.py) in the same run.\n"
            "  --variant V   vanilla (global/global, sum) or hysan (enc global fw bw local:3,\n"
            "                dec global local:3, squeeze gate r 4); default vanilla\n"
            "  --steps N     timed steps (default 5)\n"
            "  --warmup N    untimed steps first (default 1)\n"
            "  --threads N   PyTorch threads, and PoCL's unless POCL_MAX_PTHREAD_COUNT is set\n"
            "                (default 2)\n"
            "  --device SPEC OpenCL device (P:D, gpu, cpu, or part of a name; default\n"
            "                $NMT_EDGE_DEVICE, else first GPU, else first device)\n"
            "  --no-torch    skip the PyTorch reference\n"
            "  --phrase SPEC the phrase-based attention family with SPEC (e.g. queryk:inter:12)\n"
            "                in every attention (the vanilla model's weights plus its own),\n"
            "                each step followed by a vanilla step: prints the time ratio\n"
            "                (no PyTorch reference)\n"
            "  --profile     after the timed steps, run them again with the queue drained\n"
            "                around every launch and print time per kernel and global size\n"
            "Environment: NMT_BENCH_PYTHON (interpreter for the reference), NMT_EDGE_CACHE_DIR.\n");
}

static uint64_t xorshift(uint64_t x) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
}

typedef struct bench_batch {
    int32_t src[N_SEQ * SRC_LEN], tgt_in[N_SEQ * TGT_LEN], tgt_out[N_SEQ * TGT_LEN];
    uint32_t src_lens[N_SEQ], tgt_lens[N_SEQ];
} bench_batch;

/* Full-length sentences; train_step_torch.py make_batch() is the same. */
static void make_batch(bench_batch *b) {
    uint64_t x = 88172645463325252ull;
    for (uint32_t s = 0; s < N_SEQ; s++) {
        for (uint32_t j = 0; j + 1 < SRC_LEN; j++) {
            x = xorshift(x);
            b->src[s * SRC_LEN + j] = 4 + (int32_t)(x % (VOCAB - 4));
        }
        b->src[s * SRC_LEN + SRC_LEN - 1] = EOS_ID;
        b->tgt_in[s * TGT_LEN] = BOS_ID;
        for (uint32_t j = 0; j + 1 < TGT_LEN; j++) {
            x = xorshift(x);
            int32_t y = 4 + (int32_t)(x % (VOCAB - 4));
            b->tgt_in[s * TGT_LEN + j + 1] = y;
            b->tgt_out[s * TGT_LEN + j] = y;
        }
        b->tgt_out[s * TGT_LEN + TGT_LEN - 1] = EOS_ID;
        b->src_lens[s] = SRC_LEN;
        b->tgt_lens[s] = TGT_LEN;
    }
}

static void write_rows(FILE *f, const int32_t *v, uint32_t len) {
    for (uint32_t s = 0; s < N_SEQ; s++)
        for (uint32_t j = 0; j < len; j++) fprintf(f, "%d%c", v[s * len + j], j + 1 < len ? ' ' : '\n');
}

/* The text format train_step_torch.py read_batch() parses. */
static int write_batch(const bench_batch *b, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "nmt-train-bench-batch 1\n%u %u %u %u %d\n", N_SEQ, SRC_LEN, TGT_LEN, VOCAB, PAD_ID);
    for (int k = 0; k < 2; k++)
        for (uint32_t s = 0; s < N_SEQ; s++)
            fprintf(f, "%u%c", (k ? b->tgt_lens : b->src_lens)[s], s + 1 < N_SEQ ? ' ' : '\n');
    write_rows(f, b->src, SRC_LEN);
    write_rows(f, b->tgt_in, TGT_LEN);
    write_rows(f, b->tgt_out, TGT_LEN);
    return fclose(f) ? -1 : 0;
}

/* An interpreter that imports torch, or NULL. */
static const char *find_python(void) {
    const char *env = getenv("NMT_BENCH_PYTHON");
    static const char *const cands[] = {"python3", "/usr/bin/python3"};
    char cmd[512];
    if (env && *env) {
        snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", env);
        return system(cmd) == 0 ? env : NULL;
    }
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", cands[i]);
        if (system(cmd) == 0) return cands[i];
    }
    return NULL;
}

/* bench/train_step_torch.py next to this source file, else relative to the
 * working directory. */
static void script_path(char *buf, size_t cap) {
    const char *src = __FILE__, *slash = strrchr(src, '/');
    if (slash) {
        snprintf(buf, cap, "%.*s/train_step_torch.py", (int)(slash - src), src);
        if (access(buf, R_OK) == 0) return;
    }
    snprintf(buf, cap, "bench/train_step_torch.py");
}

/* One training step (zero_grad, forward_backward, grad_norm, Adam), each
 * phase ending with the queue drained; ph[k] the time at the end of phase
 * k. */
static void one_step(tft_model *m, nmt_device *dev, const tft_batch *batch, tft_step_opts *so, nmt_adam_params *ap,
                     int i, double ph[4], double *loss, double *norm) {
    nmt_status s;
    so->seed = (uint64_t)i + 1;
    if ((s = tft_zero_grad(m))) die("tft_zero_grad", s);
    if ((s = nmt_device_finish(dev))) die("finish", s);
    ph[0] = now();
    if ((s = tft_forward_backward(m, batch, so, loss, NULL))) die("tft_forward_backward", s);
    ph[1] = now();
    if ((s = tft_grad_norm(m, norm))) die("tft_grad_norm", s);
    ph[2] = now();
    ap->step = (uint64_t)i + 1;
    ap->grad_scale = *norm > 1.0 ? (float)(1.0 / *norm) : 1.0f;
    if ((s = tft_adam_step(m, ap))) die("tft_adam_step", s);
    if ((s = nmt_device_finish(dev))) die("finish", s);
    ph[3] = now();
}

int main(int argc, char **argv) {
    const char *spec = getenv("NMT_EDGE_DEVICE"), *variant = "vanilla", *phrase = NULL;
    int steps = 5, warmup = 1, threads = 2, torch = 1, profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--variant") && i + 1 < argc) variant = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--no-torch")) torch = 0;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--phrase") && i + 1 < argc) phrase = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    int hysan = !strcmp(variant, "hysan");
    if ((!hysan && strcmp(variant, "vanilla")) || steps < 1 || steps > 10000 || warmup < 0 || warmup > 100 ||
        threads < 1 || threads > 1024) {
        usage(stderr);
        return 2;
    }
    if (!getenv("POCL_MAX_PTHREAD_COUNT")) {
        char t[16];
        snprintf(t, sizeof t, "%d", threads);
        setenv("POCL_MAX_PTHREAD_COUNT", t, 1);
    }

    nmt_random_transformer_config cfg;
    nmt_random_transformer_defaults(&cfg);
    cfg.d_model = 256, cfg.n_heads = 4, cfg.d_ff = 1024, cfg.enc_layers = 2, cfg.dec_layers = 2;
    cfg.src_vocab = cfg.tgt_vocab = VOCAB;
    cfg.shared_embeddings = 1, cfg.tied_output = 1, cfg.norm = "post";
    cfg.bos_id = BOS_ID, cfg.eos_id = EOS_ID, cfg.pad_id = PAD_ID;
    cfg.enc_branches = hysan ? "global fw bw local:3" : "global";
    cfg.dec_branches = hysan ? "global local:3" : "global";
    cfg.fusion = hysan ? "gate" : "sum";
    cfg.gate_reduction = 4;
    void *image;
    size_t image_size;
    nmt_status s = nmt_random_transformer_image(&cfg, &image, &image_size);
    if (s) die("model", s);
    void *vanilla_image = NULL;
    size_t vanilla_size = 0;
    if (phrase != NULL) { /* the same Transformer weights plus the phrase attention's own */
        static const char *const keys[3] = {"ph_enc", "ph_dec", "ph_cross"};
        const char *const values[3] = {phrase, phrase, phrase};
        char err[160] = "";
        void *ph = NULL;
        size_t ph_size = 0;
        s = train_model_as_arch(image, image_size, "phrase", keys, values, 3, cfg.seed, 1.7320508f, &ph, &ph_size, err,
                                sizeof err);
        if (s) {
            fprintf(stderr, "train_bench: --phrase %s: %s\n", phrase, err);
            return 2;
        }
        vanilla_image = image;
        vanilla_size = image_size;
        image = ph;
        image_size = ph_size;
        torch = 0; /* the PyTorch reference is the Transformer's */
        variant = phrase;
    }

    static bench_batch bb;
    make_batch(&bb);
    tft_batch batch = {.n_seq = N_SEQ, .src_len = SRC_LEN, .tgt_len = TGT_LEN, .src = bb.src, .src_lens = bb.src_lens,
                       .tgt_in = bb.tgt_in, .tgt_out = bb.tgt_out, .tgt_lens = bb.tgt_lens};
    const uint32_t n_tok = N_SEQ * TGT_LEN; /* no padding: every target position counts */

    const char *cache = getenv("NMT_EDGE_CACHE_DIR");
    nmt_device_params dp = {.device = spec, .cache_dir = cache && *cache ? cache : ""};
    void *dev_mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_device *dev;
    double t0 = now();
    s = nmt_device_open(&dp, dev_mem, nmt_device_footprint(), &dev);
    if (s) die("device", s);
    nmt_device_info di;
    nmt_device_get_info(dev, &di);
    tft_limits lim = {.max_seqs = N_SEQ, .max_src_len = SRC_LEN, .max_tgt_len = TGT_LEN};
    tft_model *m;
    s = tft_create(dev, image, image_size, &lim, &m);
    if (s) die("tft_create", s);
    double t_create = now() - t0;

    printf("device: %s (%s), driver %s\n", di.device_name, di.platform_name, di.driver_version);
    printf("model: %s, d 256, 4 heads, ff 1024, 2+2 layers, post-norm, shared tied vocabulary %u; "
           "enc \"%s\", dec \"%s\", fusion %s; %zu parameters\n",
           variant, VOCAB, cfg.enc_branches, cfg.dec_branches, cfg.fusion, tft_n_params(m));
    printf("batch: %u sentences x src %u / tgt %u, %u target tokens; dropout 0.1, label smoothing 0.1\n", N_SEQ,
           SRC_LEN, TGT_LEN, n_tok);
    printf("device open + tft_create: %.3f s\n", t_create);
    fflush(stdout);

    tft_step_opts so = {.dropout = 0.1f, .label_smoothing = 0.1f, .grad_scale = 1.0f / (float)n_tok};
    nmt_adam_params ap = nmt_adam_defaults();
    ap.lr = 5e-4f;
    nmt_adam_params vap = ap;
    tft_model *mv = NULL; /* --phrase: the vanilla model, timed step for step beside it */
    if (vanilla_image != NULL) {
        s = tft_create(dev, vanilla_image, vanilla_size, &lim, &mv);
        if (s) die("tft_create (vanilla)", s);
    }
    /* phases: zero_grad, forward_backward, grad_norm, adam (each ends with
     * the queue drained: the two middle calls block, the others are
     * followed by nmt_device_finish) */
    double t_sum = 0, t_min = INFINITY, ph_sum[4] = {0}, v_sum = 0;
    for (int i = 0; i < warmup + steps; i++) {
        double loss = 0, norm = 0, ph[4];
        const double ts = now();
        one_step(m, dev, &batch, &so, &ap, i, ph, &loss, &norm);
        double dt = ph[3] - ts;
        int timed = i >= warmup;
        if (timed) {
            t_sum += dt;
            if (dt < t_min) t_min = dt;
            for (int k = 0; k < 4; k++) ph_sum[k] += ph[k] - (k ? ph[k - 1] : ts);
        }
        printf("%s %d: %.1f ms (zero %.1f, fwd+bwd %.1f, norm %.1f, adam %.1f), loss/token %.4f, grad norm %.4f\n",
               timed ? "step" : "warm-up", timed ? i - warmup + 1 : i + 1, dt * 1e3, (ph[0] - ts) * 1e3,
               (ph[1] - ph[0]) * 1e3, (ph[2] - ph[1]) * 1e3, (ph[3] - ph[2]) * 1e3, loss / n_tok, norm);
        if (mv != NULL) { /* the vanilla model's step right after: the same machine state */
            double vph[4], vl = 0, vn = 0;
            const double tv = now();
            one_step(mv, dev, &batch, &so, &vap, i, vph, &vl, &vn);
            if (timed) v_sum += vph[3] - tv;
            printf("  vanilla %s %d: %.1f ms\n", timed ? "step" : "warm-up", timed ? i - warmup + 1 : i + 1,
                   (vph[3] - tv) * 1e3);
        }
        fflush(stdout);
    }
    if (mv != NULL)
        printf("phrase_vs_vanilla_step_time=%.3f (phrase %.1f ms, vanilla %.1f ms per step, interleaved steps)\n",
               t_sum / v_sum, t_sum / steps * 1e3, v_sum / steps * 1e3);
    double ours_ms = t_sum / steps * 1e3, ours_tps = n_tok / (t_sum / steps);
    printf("ours_ms_per_step=%.1f ours_tokens_per_s=%.1f ours_min_ms=%.1f ours_steps=%d\n", ours_ms, ours_tps,
           t_min * 1e3, steps);
    printf("ours per phase (mean ms): zero_grad %.1f, forward_backward %.1f, grad_norm %.1f, adam %.1f\n",
           ph_sum[0] / steps * 1e3, ph_sum[1] / steps * 1e3, ph_sum[2] / steps * 1e3, ph_sum[3] / steps * 1e3);
    fflush(stdout);
    if (profile) {
        nmt_kernel_profile_enable(1);
        for (int i = 0; i < steps; i++) {
            double loss = 0, norm = 0;
            so.seed = (uint64_t)(warmup + steps + i) + 1;
            if ((s = tft_zero_grad(m)) || (s = tft_forward_backward(m, &batch, &so, &loss, NULL)) ||
                (s = tft_grad_norm(m, &norm)))
                die("profiled step", s);
            ap.step = (uint64_t)(warmup + steps + i) + 1;
            ap.grad_scale = norm > 1.0 ? (float)(1.0 / norm) : 1.0f;
            if ((s = tft_adam_step(m, &ap)) || (s = nmt_device_finish(dev))) die("profiled step", s);
        }
        nmt_kernel_profile_enable(0);
        printf("per-kernel profile, mean per step over %d steps (queue drained around each launch):\n", steps);
        nmt_kernel_profile_print(stdout, 1.0 / steps);
        fflush(stdout);
    }
    tft_destroy(m);
    tft_destroy(mv);
    free(vanilla_image);
    nmt_device_close(dev);
    free(dev_mem);
    free(image);

    if (!torch) return 0;
    const char *py = find_python();
    if (!py) {
        printf("PyTorch reference skipped: no python3 that imports torch "
               "(apt-get install python3-torch, or set NMT_BENCH_PYTHON)\n");
        return 0;
    }
    char batch_path[] = "/tmp/nmt-train-bench-XXXXXX";
    int fd = mkstemp(batch_path);
    if (fd < 0 || close(fd) != 0 || write_batch(&bb, batch_path) != 0) {
        fprintf(stderr, "train_bench: cannot write the batch file %s\n", batch_path);
        return 1;
    }
    char script[1024], cmd[2048];
    script_path(script, sizeof script);
    snprintf(cmd, sizeof cmd, "'%s' '%s' --variant %s --steps %d --warmup %d --threads %d --batch '%s'", py, script,
             variant, steps, warmup, threads, batch_path);
    printf("running: %s\n", cmd);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        remove(batch_path);
        fprintf(stderr, "train_bench: cannot run %s\n", py);
        return 1;
    }
    char line[1024];
    double torch_ms = 0, torch_tps = 0;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        const char *a = strstr(line, "torch_ms_per_step="), *b = strstr(line, "torch_tokens_per_s=");
        if (a && b) {
            torch_ms = atof(a + strlen("torch_ms_per_step="));
            torch_tps = atof(b + strlen("torch_tokens_per_s="));
        }
    }
    int rc = pclose(p);
    remove(batch_path);
    if (rc != 0 || torch_ms <= 0) {
        printf("PyTorch reference failed (status %d); our numbers above stand alone\n", rc);
        return 0;
    }
    printf("ours %.1f ms/step, %.1f target tokens/s; PyTorch %.1f ms/step, %.1f target tokens/s "
           "(%d threads)\n",
           ours_ms, ours_tps, torch_ms, torch_tps, threads);
    printf("ratio ours/PyTorch (tokens/s): %.3f\n", ours_tps / torch_tps);
    return 0;
}
