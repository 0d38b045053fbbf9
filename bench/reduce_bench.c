/* SPDX-License-Identifier: MIT */
/* reduce_bench.c — the per-row reductions (layernorm, log_softmax,
 * topk_logprobs) with the subgroup reductions of issue 23 against the
 * portable work-group ones, in one process, interleaved round by round
 * (docs/PERFORMANCE.md, "Subgroup reductions").  Not a test: it asserts
 * nothing about speed; it does check that both paths' results agree.
 *
 *   reduce_bench [--device SPEC] [--cache DIR] [--reps-time S] [--queue N] [--launch]
 *
 * --launch: instead, the cost of one launch (issue 23 item 4: what a
 * recorded command buffer would save per launch): nmt_op_add on 16
 * floats, 1, 8 and 64 launches per finish, best of 5 rounds.
 *
 * Two nmt_ops on one device: one as nmt_ops_init builds it (subgroups where
 * the device has them, in mode NMT_SG_ALL: layernorm's subgroup kernel on
 * CPUs too), one with dev->sg_mode NMT_SG_OFF (the portable kernels).  Each row: the best of 5 rounds, each round timing both paths
 * one after the other (as many launches as fill --reps-time seconds, N
 * launches per finish, default 8: a decoder step's pattern), microseconds
 * per launch and the ratio portable / subgroups (> 1: subgroups faster).
 * layernorm is timed at local sizes 1 (what CPUs run: a work-item per row,
 * the portable kernel in mode NMT_SG_AUTO), 16 (one subgroup on Intel's CPU
 * runtime) and 256 (GPUs: reduce_wg). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nmt_edge.h"
#include "ops.h"
#include "ops_beam.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, nmt_status s) {
    fprintf(stderr, "reduce_bench: %s: %s\n", what, nmt_status_str(s));
    exit(1);
}

enum { K_LAYERNORM, K_LOG_SOFTMAX, K_TOPK };

typedef struct row {
    int kernel;
    uint32_t rows, n; /* n: d (layernorm) or the vocabulary */
    size_t local;     /* layernorm: this local size instead of norm_wg (0: norm_wg) */
} row;

typedef struct bufs {
    cl_mem x, y, g, b, score, out;
} bufs;

static nmt_buf B(cl_mem m) {
    nmt_buf b = {m, 0};
    return b;
}

static void launch(nmt_ops *o, const row *r, const bufs *bf) {
    nmt_status s = NMT_OK;
    const nmt_buf none = {NULL, 0};
    size_t saved = o->norm_wg;
    switch (r->kernel) {
    case K_LAYERNORM:
        if (r->local) o->norm_wg = r->local;
        s = nmt_op_layernorm(o, B(bf->x), none, B(bf->y), r->rows, r->n, B(bf->g), B(bf->b), 1e-5f);
        o->norm_wg = saved;
        break;
    case K_LOG_SOFTMAX: s = nmt_op_log_softmax(o, B(bf->y), r->rows, r->n, r->n); break;
    default: s = nmt_op_topk_logprobs(o, B(bf->x), r->rows, r->n, r->n, B(bf->score), 9, 2, B(bf->out)); break;
    }
    if (s != NMT_OK) die("launch", s);
}

/* Microseconds per launch: launches of `queue` per finish for reps_time s. */
static double time_path(nmt_ops *o, const row *r, const bufs *bf, double reps_time, int queue) {
    launch(o, r, bf);
    if (nmt_device_finish(o->dev) != NMT_OK) die("finish", NMT_ERR_OPENCL);
    long n = 0;
    const double t0 = now();
    double t = t0;
    do {
        for (int q = 0; q < queue; q++) launch(o, r, bf);
        if (nmt_device_finish(o->dev) != NMT_OK) die("finish", NMT_ERR_OPENCL);
        n += queue;
        t = now();
    } while (t - t0 < reps_time);
    return (t - t0) / (double)n * 1e6;
}

/* The largest relative difference between the two paths' outputs; h holds
 * 3 * cap floats: both outputs, then the logits every buffer started with. */
static double agree(nmt_ops *fast, nmt_ops *port, const row *r, const bufs *bf, float *h, size_t cap) {
    const size_t n = r->kernel == K_TOPK ? (size_t)r->rows * 9 : (size_t)r->rows * r->n;
    nmt_ops *ops[2] = {fast, port};
    for (int p = 0; p < 2; p++) {
        if (r->kernel == K_LOG_SOFTMAX && nmt_device_write(ops[p]->dev, bf->y, 0, n * sizeof(float), h + 2 * cap) != NMT_OK)
            die("write", NMT_ERR_OPENCL); /* in place: from the same logits */
        launch(ops[p], r, bf);
        if (nmt_device_read(ops[p]->dev, r->kernel == K_TOPK ? bf->out : bf->y, 0, n * sizeof(float), h + p * cap) !=
            NMT_OK)
            die("read", NMT_ERR_OPENCL);
    }
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double a = h[i], b = h[cap + i], d = fabs(a - b) / (1.0 + fabs(b));
        if (d > worst || d != d) worst = d;
    }
    return worst;
}

int main(int argc, char **argv) {
    const char *spec = NULL, *cache = NULL;
    double reps_time = 0.2;
    int queue = 8, launch_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(argv[i], "--reps-time") && i + 1 < argc) reps_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--queue") && i + 1 < argc) queue = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--launch")) launch_only = 1;
        else {
            fprintf(stderr, "usage: reduce_bench [--device SPEC] [--cache DIR] [--reps-time S] [--queue N] [--launch]\n");
            return 2;
        }
    }
    if (queue < 1 || queue > 1024 || !(reps_time > 0)) {
        fprintf(stderr, "reduce_bench: --queue 1..1024, --reps-time > 0\n");
        return 2;
    }
    nmt_device_params p = {.device = spec, .cache_dir = cache ? cache : "" /* NULL: none */};
    void *mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_device *dev = NULL;
    nmt_status st = nmt_device_open(&p, mem, nmt_device_footprint(), &dev);
    if (st != NMT_OK) die("device", st);
    nmt_ops fast, port;
    const int saved = dev->sg_mode;
    dev->sg_mode = saved == NMT_SG_OFF ? NMT_SG_OFF : NMT_SG_ALL;
    st = nmt_ops_init(&fast, dev);
    if (st == NMT_OK) st = nmt_ops_enable_topk(&fast);
    if (st != NMT_OK) die("ops", st);
    dev->sg_mode = NMT_SG_OFF;
    st = nmt_ops_init(&port, dev);
    if (st == NMT_OK) st = nmt_ops_enable_topk(&port);
    dev->sg_mode = saved;
    if (st != NMT_OK) die("portable ops", st);
    printf("device: %s (%s), driver %s\n", dev->info.device_name, dev->info.platform_name, dev->info.driver_version);
    printf("subgroup reductions: %s (subgroup size %u); reduce_wg %zu; layernorm's local size without "
           "NMT_SG_ALL: %s\n",
           fast.subgroups ? "yes" : "NO (both columns are the portable kernels)", (unsigned)fast.sg_size,
           fast.reduce_wg, dev->info.is_cpu ? "1 (CPU), portable" : "reduce_wg");
    if (!launch_only)
        printf("timing: best of 5 interleaved rounds of %.2f s per path, %d launches per finish\n\n", reps_time,
               queue);

    const uint32_t V = 32000, D = 512, maxr = 64;
    const size_t cap = (size_t)maxr * V;
    float *h = malloc(sizeof(float) * cap * 3);
    if (h == NULL) return 1;
    srand(1);
    for (size_t i = 0; i < cap; i++) h[2 * cap + i] = (float)rand() / (float)RAND_MAX * 16.0f - 8.0f;
    bufs bf;
    st = nmt_device_buffer(dev, cap * sizeof(float), h + 2 * cap, &bf.x);
    if (st == NMT_OK) st = nmt_device_buffer(dev, cap * sizeof(float), h + 2 * cap, &bf.y);
    if (st == NMT_OK) st = nmt_device_buffer(dev, D * sizeof(float), h + 2 * cap, &bf.g);
    if (st == NMT_OK) st = nmt_device_buffer(dev, D * sizeof(float), h + 2 * cap + D, &bf.b);
    if (st == NMT_OK) st = nmt_device_buffer(dev, maxr * sizeof(float), h + 2 * cap, &bf.score);
    if (st == NMT_OK) st = nmt_device_buffer(dev, (size_t)maxr * 19 * sizeof(float), NULL, &bf.out);
    if (st != NMT_OK) die("buffers", st);

    if (launch_only) {
        printf("%-8s %14s\n", "queue", "us per launch");
        static const int qs[] = {1, 8, 64};
        for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
            double best = INFINITY;
            for (int round = 0; round < 5; round++) {
                long n = 0;
                const double t0 = now();
                double t = t0;
                do {
                    for (int q = 0; q < qs[qi]; q++)
                        if ((st = nmt_op_add(&port, B(bf.y), B(bf.x), 16)) != NMT_OK) die("add", st);
                    if (nmt_device_finish(dev) != NMT_OK) die("finish", NMT_ERR_OPENCL);
                    n += qs[qi];
                    t = now();
                } while (t - t0 < reps_time);
                const double us = (t - t0) / (double)n * 1e6;
                best = us < best ? us : best;
            }
            printf("%-8d %14.2f\n", qs[qi], best);
        }
        queue = 0; /* skip the table */
    }
    static const char *const names[] = {"layernorm", "log_softmax", "topk_logprobs"};
    const row rows[] = {
        {K_LAYERNORM, 1, D, 1},    {K_LAYERNORM, 4, D, 1},    {K_LAYERNORM, 64, D, 1},
        {K_LAYERNORM, 1, D, 16},   {K_LAYERNORM, 4, D, 16},   {K_LAYERNORM, 64, D, 16},
        {K_LAYERNORM, 1, D, 256},  {K_LAYERNORM, 4, D, 256},  {K_LAYERNORM, 64, D, 256},
        {K_LOG_SOFTMAX, 1, V, 0},  {K_LOG_SOFTMAX, 4, V, 0},  {K_LOG_SOFTMAX, 16, V, 0},
        {K_LOG_SOFTMAX, 4, 8000, 0}, {K_TOPK, 1, V, 0},      {K_TOPK, 4, V, 0},
        {K_TOPK, 16, V, 0},
    };
    if (queue > 0)
        printf("%-14s %5s %6s %9s | %10s %10s %7s | %s\n", "kernel", "rows", "n", "local", "subgroups", "portable",
           "ratio", "max rel diff");
    if (queue > 0)
        printf("%-14s %5s %6s %9s | %10s %10s %7s |\n", "", "", "", "", "us/launch", "us/launch", "");
    for (size_t i = 0; queue > 0 && i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        double best_f = INFINITY, best_p = INFINITY;
        for (int round = 0; round < 5; round++) {
            const double f = time_path(&fast, r, &bf, reps_time, queue);
            const double q = time_path(&port, r, &bf, reps_time, queue);
            best_f = f < best_f ? f : best_f;
            best_p = q < best_p ? q : best_p;
        }
        const double diff = agree(&fast, &port, r, &bf, h, cap);
        char local[16];
        snprintf(local, sizeof local, "%zu",
                 r->kernel != K_LAYERNORM ? fast.reduce_wg : r->local ? r->local : fast.norm_wg);
        printf("%-14s %5u %6u %9s | %10.2f %10.2f %7.2f | %.2g\n", names[r->kernel], r->rows, r->n, local, best_f,
               best_p, best_p / best_f, diff);
    }
    clReleaseMemObject(bf.x);
    clReleaseMemObject(bf.y);
    clReleaseMemObject(bf.g);
    clReleaseMemObject(bf.b);
    clReleaseMemObject(bf.score);
    clReleaseMemObject(bf.out);
    nmt_ops_release(&port);
    nmt_ops_release(&fast);
    nmt_device_close(dev);
    free(mem);
    free(h);
    return 0;
}
