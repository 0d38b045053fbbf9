/* SPDX-License-Identifier: MIT */
/* nmt_edge_tune.c — the tuner: measures candidate kernel parameters for
 * every product (fp32 NT, fp32 NN, int8-weight NT with fp32 or with int8
 * activations) and shape class (M <= 2,
 * 3..16, > 16) on the chosen OpenCL device — our kernels' candidate sets
 * (runtime/device/tuning.c) and CLBlast where the build has it — and writes the
 * fastest per class into the device's tuning file, which nmt_device_open()
 * reads from the same cache directory (format: docs/PERFORMANCE.md).
 *
 *   nmt-edge-tune [--device SPEC] [--cache DIR] [--model test|small|base]
 *                 [--d D --ff F --vocab V] [--no-clblast] [--reps-time S]
 *                 [--only OP:CLASS] [--dry-run]
 *
 * The cache directory defaults to the CLI's: $NMT_EDGE_CACHE_DIR,
 * $XDG_CACHE_HOME/nmt-edge or ~/.cache/nmt-edge.  Score of a candidate: the
 * summed time of one call on each of the model's product shapes (q|k|v,
 * output, FFN in and out, vocabulary) at the class's representative row
 * counts (1; 4 and 8; 64 and 512), each the best of 3 batches of repeated
 * calls.  The int8-weight products of a class then take the faster of the
 * two (the file's "i8dot <class> on|off"): q8 (activations fp32) or i8
 * (activations quantized per row, then int8 x int8 with the integer dot
 * product built-in where the device has it, x86 VNNI on PoCL's CPU device
 * where the host has it, else the portable kernel; the quantization counted
 * in its time; the VNNI variant's blocks are fixed, so it is timed once per
 * class, not per candidate).
 * --only times one product and class (OP nt|nn|q8|i8, CLASS m2|m16|big)
 * and keeps the table's choice for the others; --dry-run prints the result
 * without writing it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nmt_edge.h"
#include "ops.h"
#include "tune_plan.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct tuner {
    const char *spec;
    double reps_time;
    uint32_t d, ff, V;
    int clblast;
} tuner;

static void fill(float *x, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
}

/* Seconds for one call of every shape with `t` set for (op, cls); < 0 if the
 * candidate cannot run here. */
static double score(const tuner *tu, const nmt_tuning *t, nmt_gemm_op op, nmt_gemm_class cls) {
    nmt_device_params p = {.device = tu->spec, .cache_dir = ""}; /* no cache, no tuning file */
    void *mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_device *dev = NULL;
    if (mem == NULL || nmt_device_open(&p, mem, nmt_device_footprint(), &dev) != NMT_OK) {
        free(mem);
        return -1;
    }
    nmt_ops ops;
    double total = -1;
    cl_mem A = NULL, B = NULL, C = NULL, S = NULL, QA = NULL, QS = NULL;
    float *host = NULL;
    if (nmt_ops_init_tuned(&ops, dev, t) != NMT_OK) goto out_dev;
    const int q8 = op == NMT_GOP_Q8 || op == NMT_GOP_I8;
    if (q8 && nmt_ops_enable_q8(&ops) != NMT_OK) goto out_ops;
    if (op == NMT_GOP_I8) { /* the class's int8 x int8 kernel, then nmt_op_gemm_q8 takes that path */
        if (ops.k_gemm[NMT_GOP_I8][cls] != NULL) clReleaseKernel(ops.k_gemm[NMT_GOP_I8][cls]);
        ops.k_gemm[NMT_GOP_I8][cls] = NULL;
        ops.i8_use[cls] = (uint8_t)nmt_i8dot_fast_variant(dev);
        if (nmt_ops_enable_i8(&ops) != NMT_OK) goto out_ops;
    }
    nmt_tune_plan plan;
    if (nmt_tune_plan_make(tu->d, tu->ff, tu->V, op, cls, &plan) != 0) goto out_ops;
    /* staging for A, B and the scales in turn (C starts uninitialised) */
    host = malloc(plan.host * sizeof(float));
    if (host == NULL) goto out_ops;
    fill(host, plan.a, 1);
    nmt_status st = nmt_device_buffer(dev, plan.a * 4, host, &A);
    fill(host, plan.b, 2);
    if (q8) {
        for (size_t i = 0; i < plan.b; i++) ((signed char *)host)[i] = (signed char)(host[i] * 127.0f);
        if (st == NMT_OK) st = nmt_device_buffer(dev, plan.b, host, &B);
        fill(host, plan.scales, 3);
        if (st == NMT_OK) st = nmt_device_buffer(dev, plan.scales * 4, host, &S);
    } else if (st == NMT_OK) {
        st = nmt_device_buffer(dev, plan.b * 4, host, &B);
    }
    if (st == NMT_OK) st = nmt_device_buffer(dev, plan.c * 4, NULL, &C);
    if (st == NMT_OK && op == NMT_GOP_I8) { /* the session's scratch: int8 rows and their scales */
        st = nmt_device_buffer(dev, plan.a, NULL, &QA);
        if (st == NMT_OK) st = nmt_device_buffer(dev, 512 * 4, NULL, &QS);
        ops.i8_a = (nmt_buf){QA, 0};
        ops.i8_s = (nmt_buf){QS, 0};
        ops.i8_cap = plan.a;
        ops.i8_rows = 512;
    }
    if (st == NMT_OK) {
        total = 0;
        for (size_t i = 0; i < plan.n && total >= 0; i++) {
            const nmt_tune_shape *s = &plan.shape[i];
            nmt_buf a = {A, 0}, b = {B, 0}, c = {C, 0}, sc = {S, 0}, none = {NULL, 0};
            double best = 1e30;
            long reps = 1;
            for (int batch = -1; batch < 3; batch++) { /* batch -1: warm-up and calibration */
                double t0 = now();
                for (long r = 0; r < reps && st == NMT_OK; r++) {
                    if (q8)
                        st = nmt_op_gemm_q8(&ops, s->M, s->N, s->K, 1.0f, a, s->K, b, s->K, sc, 0.0f, c, s->N, none, 0);
                    else
                        st = nmt_op_gemm(&ops, op == NMT_GOP_NT, s->M, s->N, s->K, 1.0f, a, s->K, b,
                                         op == NMT_GOP_NT ? s->K : s->N, 0.0f, c, s->N, none, 0);
                }
                if (st == NMT_OK) st = nmt_device_finish(dev);
                double dt = now() - t0;
                if (batch == -1) {
                    /* second call, now compiled, for the calibration */
                    t0 = now();
                    if (q8)
                        st = nmt_op_gemm_q8(&ops, s->M, s->N, s->K, 1.0f, a, s->K, b, s->K, sc, 0.0f, c, s->N, none, 0);
                    else
                        st = nmt_op_gemm(&ops, op == NMT_GOP_NT, s->M, s->N, s->K, 1.0f, a, s->K, b,
                                         op == NMT_GOP_NT ? s->K : s->N, 0.0f, c, s->N, none, 0);
                    if (st == NMT_OK) st = nmt_device_finish(dev);
                    dt = now() - t0;
                    reps = dt > 0 ? (long)(tu->reps_time / dt) : 100;
                    reps = NMT_MAX(1L, NMT_MIN(reps, 10000L));
                    continue;
                }
                best = fmin(best, dt / (double)reps);
            }
            if (st != NMT_OK) total = -1;
            else total += best;
        }
    }
    if (A) clReleaseMemObject(A);
    if (B) clReleaseMemObject(B);
    if (C) clReleaseMemObject(C);
    if (S) clReleaseMemObject(S);
    if (op == NMT_GOP_I8 && ops.n_i8_products == 0) total = -1; /* the int8 x int8 path was not taken */
out_ops:
    free(host);
    if (QA) clReleaseMemObject(QA);
    if (QS) clReleaseMemObject(QS);
    nmt_ops_release(&ops);
out_dev:
    nmt_device_close(dev);
    free(mem);
    return total;
}

static void describe(const nmt_gemm_cfg *c, char *buf, size_t cap) {
    if (c->provider == NMT_GEMM_CLBLAST)
        snprintf(buf, cap, "clblast");
    else
        snprintf(buf, cap, "own tm=%u tn=%u vw=%u mfast=%u wg=%u%s", c->tm, c->tn, c->vw, c->mfast, c->wg,
                 c->kgroup ? " kgroup=1" : "");
}

/* "OP:CLASS" by the tuning file's names; 1 if both are known. */
static int parse_only(const char *s, int *op, int *cls) {
    const char *colon = strchr(s, ':');
    if (colon == NULL) return 0;
    *op = *cls = -1;
    for (int o = 0; o < NMT_GOP_COUNT; o++) {
        const char *name = nmt_gemm_op_name((nmt_gemm_op)o);
        if (strlen(name) == (size_t)(colon - s) && !strncmp(s, name, (size_t)(colon - s))) *op = o;
    }
    for (int c = 0; c < NMT_GCLASS_COUNT; c++)
        if (!strcmp(colon + 1, nmt_gemm_class_name((nmt_gemm_class)c))) *cls = c;
    return *op >= 0 && *cls >= 0;
}

static int usage(void) {
    fprintf(stderr,
            "usage: nmt-edge-tune [--device SPEC] [--cache DIR] [--model test|small|base]\n"
            "                     [--d D --ff F --vocab V] [--no-clblast] [--reps-time S]\n"
            "                     [--only OP:CLASS] [--dry-run]\n");
    return 2;
}

int main(int argc, char **argv) {
    tuner tu = {getenv("NMT_EDGE_DEVICE"), 0.1, 256, 1024, 8000, nmt_device_have_clblast()};
    const char *cache = NULL;
    int dry = 0, only_op = -1, only_cls = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--device") && i + 1 < argc) tu.spec = argv[++i];
        else if (!strcmp(a, "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(a, "--reps-time") && i + 1 < argc) tu.reps_time = atof(argv[++i]);
        else if (!strcmp(a, "--d") && i + 1 < argc) tu.d = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--ff") && i + 1 < argc) tu.ff = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--vocab") && i + 1 < argc) tu.V = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(a, "--no-clblast")) tu.clblast = 0;
        else if (!strcmp(a, "--dry-run")) dry = 1;
        else if (!strcmp(a, "--only") && i + 1 < argc) {
            if (!parse_only(argv[++i], &only_op, &only_cls)) return usage();
        }
        else if (!strcmp(a, "--model") && i + 1 < argc) {
            const char *m = argv[++i];
            if (!strcmp(m, "test")) tu.d = 64, tu.ff = 128, tu.V = 64;
            else if (!strcmp(m, "small")) tu.d = 256, tu.ff = 1024, tu.V = 8000;
            else if (!strcmp(m, "base")) tu.d = 512, tu.ff = 2048, tu.V = 8000;
            else return usage();
        } else {
            return usage();
        }
    }
    if (tu.d < 1 || tu.ff < 1 || tu.V < 1 || tu.d > 65536 || tu.ff > 262144 || tu.V > 1000000) return usage();
    char dir[4096];
    if (cache == NULL) {
        const char *v = getenv("NMT_EDGE_CACHE_DIR");
        if (v && *v) snprintf(dir, sizeof dir, "%s", v);
        else if ((v = getenv("XDG_CACHE_HOME")) && *v) snprintf(dir, sizeof dir, "%s/nmt-edge", v);
        else snprintf(dir, sizeof dir, "%s/.cache/nmt-edge", getenv("HOME") ? getenv("HOME") : ".");
        cache = dir;
    }

    /* The device with its cache directory: the built-in table's choice is the
     * starting point (a previous tuning file is ignored: it is what we redo). */
    nmt_device_params p = {.device = tu.spec, .cache_dir = cache ? cache : "" /* NULL: none */};
    void *mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_device *dev = NULL;
    nmt_status st = nmt_device_open(&p, mem, nmt_device_footprint(), &dev);
    if (st != NMT_OK) {
        fprintf(stderr, "nmt-edge-tune: device: %s\n", nmt_status_str(st));
        return 1;
    }
    nmt_tuning best;
    nmt_tuning_from_table(&best, &dev->info);
    if (!nmt_device_have_clblast())
        for (int op = 0; op < NMT_GOP_COUNT; op++)
            for (int c = 0; c < NMT_GCLASS_COUNT; c++) best.gemm[op][c].provider = NMT_GEMM_OWN;
    char path[NMT_PATH_MAX + 64], devname[512];
    nmt_device_tuning_path(dev, path, sizeof path);
    /* the x86 VNNI variant's blocks are fixed (nmt_ops_gemm_kernel): its
     * int8 x int8 products are timed once per class, not per candidate */
    const int i8_fixed = nmt_i8dot_fast_variant(dev) == NMT_I8_VNNI;
    snprintf(devname, sizeof devname, "%s (%s, driver %s)", dev->info.device_name, dev->info.platform_name,
             dev->info.driver_version);
    nmt_device_close(dev);
    printf("device: %s\nshapes: d=%u ff=%u vocab=%u; start: %s\n", devname, tu.d, tu.ff, tu.V, best.origin);

    double t_start = now();
    double best_time[NMT_GOP_COUNT][NMT_GCLASS_COUNT];
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++) best_time[op][c] = -1;
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
            if (only_op >= 0 && (op != only_op || c != only_cls)) continue;
            nmt_gemm_cfg cand[40];
            size_t n = 0;
            cand[n++] = best.gemm[op][c];
            if (op != NMT_GOP_I8 || !i8_fixed)
                n += nmt_gemm_candidates((nmt_gemm_op)op, (nmt_gemm_class)c, cand + n, 32);
            if (tu.clblast && op != NMT_GOP_Q8 && op != NMT_GOP_I8) {
                nmt_gemm_cfg b = {NMT_GEMM_CLBLAST, 4, 4, 4, 0, 64, 0};
                cand[n++] = b;
            }
            double best_t = -1;
            size_t best_i = 0;
            for (size_t i = 0; i < n; i++) {
                int dup = 0;
                for (size_t j = 0; j < i && !dup; j++) dup = memcmp(&cand[i], &cand[j], sizeof cand[i]) == 0;
                if (dup) continue;
                nmt_tuning t = best;
                t.gemm[op][c] = cand[i];
                double s = score(&tu, &t, (nmt_gemm_op)op, (nmt_gemm_class)c);
                char desc[96];
                describe(&cand[i], desc, sizeof desc);
                if (s < 0) printf("  %s %-3s %-44s  (cannot run here)\n", nmt_gemm_op_name((nmt_gemm_op)op),
                                  nmt_gemm_class_name((nmt_gemm_class)c), desc);
                else printf("  %s %-3s %-44s %10.3f ms\n", nmt_gemm_op_name((nmt_gemm_op)op),
                            nmt_gemm_class_name((nmt_gemm_class)c), desc, s * 1e3);
                fflush(stdout);
                if (s >= 0 && (best_t < 0 || s < best_t)) best_t = s, best_i = i;
            }
            best.gemm[op][c] = cand[best_i];
            best_time[op][c] = best_t;
            char desc[96];
            describe(&cand[best_i], desc, sizeof desc);
            printf("=> %s %s: %s\n", nmt_gemm_op_name((nmt_gemm_op)op), nmt_gemm_class_name((nmt_gemm_class)c), desc);
        }
    /* int8 weights: activations fp32 or int8, whichever measured faster
     * (both must have run: --only of one keeps the table's choice) */
    for (int c = 0; c < NMT_GCLASS_COUNT; c++) {
        const double q = best_time[NMT_GOP_Q8][c], i = best_time[NMT_GOP_I8][c];
        if (q < 0 && i < 0) continue;
        if (q < 0 || i < 0) {
            printf("=> i8dot %s: kept (%s not timed here)\n", nmt_gemm_class_name((nmt_gemm_class)c),
                   q < 0 ? "int8 x fp32" : "int8 x int8");
            continue;
        }
        best.i8dot[c] = (uint8_t)(i < q ? NMT_I8DOT_ON : NMT_I8DOT_OFF);
        printf("=> i8dot %s: %s (int8 x fp32 %.3f ms, int8 x int8 %.3f ms)\n", nmt_gemm_class_name((nmt_gemm_class)c),
               best.i8dot[c] == NMT_I8DOT_ON ? "on" : "off", q * 1e3, i * 1e3);
    }
    printf("tuning took %.1f s\n", now() - t_start);

    char text[4096];
    if (nmt_tuning_format(&best, devname, text, sizeof text) == 0) return 1;
    if (dry || path[0] == '\0') {
        printf("%s%s", dry ? "" : "(no cache directory: not written)\n", text);
        free(mem);
        return 0;
    }
    char tmp[sizeof path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "nmt-edge-tune: cannot write %s\n", path);
        return 1;
    }
    printf("wrote %s\n", path);
    free(mem);
    return 0;
}
