/* SPDX-License-Identifier: MIT */
/* gemm_bench.c — our GEMM kernels (fp32 and int8-weight) against OpenBLAS on
 * the transformer's shapes, in one process and one run, plus the CPU's
 * measured fp32 peak.  Prints GFLOP/s, the ratio ours / OpenBLAS and the
 * fraction of the peak.  Not a test: nothing here asserts speed.
 *
 *   gemm_bench [--device SPEC] [--model small|base|test|all] [--reps-time S]
 *              [--tuning default|table|cache] [--cache DIR] [--nn] [--train] [--queue N]
 *              [--i8] [--ms LIST]
 *
 * --i8 adds a column: the int8-weight products with int8 activations
 * (quantized per row on the fly, then int8 x int8 with the integer dot
 * product built-in where the device has it, else the portable kernel;
 * runtime/ops/ops_i8dot.c), timed in the same run as the int8 weights x fp32
 * column and the fp32 one; --i8-portable the same with the portable
 * int8 x int8 kernel.  --ms replaces the M values (comma list).
 *
 * --train replaces the inference shapes by the three products of every
 * linear layer in a training step on 4096 target tokens: forward C = x W^T
 * (NT), input gradient dx = dy W (NN) and weight gradient dW = dy^T x (TN,
 * nmt_op_gemm_tn), against cblas_sgemm with the same transposes.
 *
 * Shapes: M in {1, 4, 8, 64, 512} times the (N, K) of every product of the
 * model (fused q|k|v [3d, d], output [d, d], FFN [ff, d] and [d, ff],
 * vocabulary projection [V, d]).  The reference is cblas_sgemm (RowMajor,
 * B transposed: the weight layout) and cblas_sgemv for M = 1.  Each timing
 * is the best of 3 runs of as many repetitions as fill --reps-time seconds
 * (machines are shared and noisy).  int8 timings count the same 2*M*N*K
 * flops as fp32 for the same shape.  --queue N enqueues N products per
 * finish, the pattern of a decoder step, and reports the time per product.
 * On a device with cl_khr_fp16 the fp16-compute product (half weights,
 * half-rounded activations, fp32 accumulation: nmt_op_gemm_f16) runs on
 * the same shapes in the same run; its ratio "xfp32" is its speed over our
 * fp32 product's (the portable path it replaces), its error to OpenBLAS on the half-rounded
 * operands.  --no-fp16 leaves it out. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86_PEAK 1
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "nmt_edge.h"
#include "ops.h"
#include "ops_train.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, nmt_status s) {
    fprintf(stderr, "gemm_bench: %s: %s\n", what, nmt_status_str(s));
    exit(1);
}

/* ---- measured fp32 peak: independent FMA chains on every core ------------ */

#if HAVE_X86_PEAK
#define PEAK_ITERS 20000000L

/* 12 independent accumulators in registers (enough to cover FMA latency on
 * two ports); written with intrinsics so the compiler can neither split the
 * FMA into mul + add nor keep the chains in stack memory, both of which an
 * earlier plain-C loop did (it measured 64 instead of ~290 GFLOP/s). */
#define PEAK_BODY(T, SET1, FMA, ADD, LOW)                                                     \
    T x = SET1(1.0000001f), a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3);            \
    T a4 = SET1(4), a5 = SET1(5), a6 = SET1(6), a7 = SET1(7), a8 = SET1(8), a9 = SET1(9);      \
    T a10 = SET1(10), a11 = SET1(11);                                                          \
    for (long it = 0; it < PEAK_ITERS / 8; it++) {                                             \
        a0 = FMA(a0, x, x), a1 = FMA(a1, x, x), a2 = FMA(a2, x, x), a3 = FMA(a3, x, x);         \
        a4 = FMA(a4, x, x), a5 = FMA(a5, x, x), a6 = FMA(a6, x, x), a7 = FMA(a7, x, x);         \
        a8 = FMA(a8, x, x), a9 = FMA(a9, x, x), a10 = FMA(a10, x, x), a11 = FMA(a11, x, x);     \
    }                                                                                          \
    T s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                   \
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                                               \
    *(float *)out = LOW(s);                                                                    \
    return NULL;

__attribute__((target("avx512f,fma"))) static void *fma512(void *out) {
    PEAK_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_cvtss_f32)
}

__attribute__((target("avx2,fma"))) static void *fma256(void *out) {
    PEAK_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_cvtss_f32)
}

/* GFLOP/s of n_threads threads of FMA chains (best of 3). */
static double measure_peak(int n_threads, int *lanes) {
    __builtin_cpu_init();
    int wide = __builtin_cpu_supports("avx512f");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!wide && !avx2) return 0.0;
    *lanes = wide ? 16 : 8;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[64];
        float sink[64];
        double t0 = now();
        for (int t = 0; t < n_threads; t++) pthread_create(&th[t], NULL, wide ? fma512 : fma256, &sink[t]);
        for (int t = 0; t < n_threads; t++) pthread_join(th[t], NULL);
        double dt = now() - t0;
        /* per iteration of the inner loop: 12 FMAs of `lanes` lanes, 2 flops each */
        double flops = (double)n_threads * (PEAK_ITERS / 8) * 12.0 * (*lanes) * 2.0;
        if (flops / dt / 1e9 > best) best = flops / dt / 1e9;
    }
    return best;
}
#else
static double measure_peak(int n_threads, int *lanes) {
    (void)n_threads;
    *lanes = 0;
    return 0.0; /* no measured peak on this architecture: the column prints 0 */
}
#endif

/* ---- timing helpers ------------------------------------------------------ */

typedef struct ctx {
    nmt_device *dev;
    nmt_ops ops;
    nmt_train_ops t; /* gemm_tn, with --train */
    double reps_time;
    int queue; /* products enqueued per finish (--queue) */
} ctx;

/* Product kinds: C = A B^T (weights, forward), C = A B (input gradient),
 * C = A^T B (weight gradient, nmt_op_gemm_tn). */
enum { OP_NN = 0, OP_NT = 1, OP_TN = 2 };

typedef struct shape {
    uint32_t M, N, K;
    const char *what;
} shape;

/* Seconds per call of fn (best of 3 batches filling reps_time). */
typedef void (*run_fn)(void *user);

static double time_calls(run_fn fn, void *user, double reps_time) {
    fn(user); /* warm-up: lazy compiles, caches */
    double t0 = now();
    fn(user);
    double one = now() - t0;
    long reps = one > 0 ? (long)(reps_time / one) : 1000;
    if (reps < 1) reps = 1;
    if (reps > 100000) reps = 100000;
    double best = 1e30;
    for (int b = 0; b < 3; b++) {
        t0 = now();
        for (long r = 0; r < reps; r++) fn(user);
        double dt = (now() - t0) / (double)reps;
        if (dt < best) best = dt;
    }
    return best;
}

typedef struct own_args {
    ctx *c;
    const shape *s;
    cl_mem A, B, C, Q, scale;
    int q8, trans_b, reps;
    cl_mem H; /* half weights: nmt_op_gemm_f16 instead (NULL: not) */
} own_args;

/* --i8: the int8 x int8 path's scratch, attached to the ops only while
 * that column is timed (without it nmt_op_gemm_q8 runs int8 x fp32) */
static nmt_buf i8_scratch_a, i8_scratch_s;
static size_t i8_scratch_cap, i8_scratch_rows;

static void i8_attach(ctx *c, int on) {
    c->ops.i8_a = on ? i8_scratch_a : (nmt_buf){NULL, 0};
    c->ops.i8_s = on ? i8_scratch_s : (nmt_buf){NULL, 0};
    c->ops.i8_cap = on ? i8_scratch_cap : 0;
    c->ops.i8_rows = on ? i8_scratch_rows : 0;
}

static void run_own(void *user) {
    own_args *a = (own_args *)user;
    const shape *s = a->s;
    nmt_buf A = {a->A, 0}, B = {a->B, 0}, C = {a->C, 0}, none = {NULL, 0};
    nmt_status st = NMT_OK;
    /* `reps` products back to back on the in-order queue, then one finish:
     * 1 measures a call's round trip, more the pipelined rate a decoder sees */
    for (int r = 0; r < a->reps && st == NMT_OK; r++) {
    if (a->H) {
        nmt_buf H = {a->H, 0};
        st = nmt_op_gemm_f16(&a->c->ops, s->M, s->N, s->K, 1.0f, A, s->K, H, s->K, 0.0f, C, s->N, none, 0);
    } else if (a->q8) {
        nmt_buf Q = {a->Q, 0}, S = {a->scale, 0};
        st = nmt_op_gemm_q8(&a->c->ops, s->M, s->N, s->K, 1.0f, A, s->K, Q, s->K, S, 0.0f, C, s->N, none, 0);
    } else if (a->trans_b == OP_TN) {
        st = nmt_op_gemm_tn(&a->c->t, s->M, s->N, s->K, 1.0f, A, s->M, B, s->N, 0.0f, C, s->N);
    } else {
        st = nmt_op_gemm(&a->c->ops, a->trans_b, s->M, s->N, s->K, 1.0f, A, s->K, B, a->trans_b ? s->K : s->N,
                         0.0f, C, s->N, none, 0);
    }
    }
    if (st != NMT_OK) die("gemm", st);
    st = nmt_device_finish(a->c->dev);
    if (st != NMT_OK) die("finish", st);
}

typedef struct blas_args {
    const shape *s;
    float *A, *B, *C;
    int trans_b;
} blas_args;

static void run_blas(void *user) {
    blas_args *a = (blas_args *)user;
    const shape *s = a->s;
    if (a->trans_b == OP_TN)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s->M, (int)s->N, (int)s->K, 1.0f, a->A, (int)s->M,
                    a->B, (int)s->N, 0.0f, a->C, (int)s->N);
    else if (s->M == 1 && a->trans_b)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)s->N, (int)s->K, 1.0f, a->B, (int)s->K, a->A, 1, 0.0f, a->C, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, a->trans_b ? CblasTrans : CblasNoTrans, (int)s->M, (int)s->N,
                    (int)s->K, 1.0f, a->A, (int)s->K, a->B, a->trans_b ? (int)s->K : (int)s->N, 0.0f, a->C,
                    (int)s->N);
}

static cl_mem upload(nmt_device *dev, const void *host, size_t bytes) {
    cl_mem m;
    nmt_status st = nmt_device_buffer(dev, bytes, host, &m);
    if (st != NMT_OK) die("buffer", st);
    return m;
}

/* Max |ours - OpenBLAS| / max |OpenBLAS| (sanity, not a test). */
static double rel_err(nmt_device *dev, cl_mem C, const float *ref, size_t n) {
    float *got = malloc(n * sizeof(float));
    if (got == NULL || nmt_device_read(dev, C, 0, n * sizeof(float), got) != NMT_OK) exit(1);
    double mx = 0, md = 0;
    /* x > m ? x : m, the same as fmax for x >= 0 or NaN: a double fmax
     * reduction over widened floats is an internal compiler error of Debian
     * 12's aarch64 GCC 12.2 at -O3 (docs/CROSS.md, "Release builds") */
    for (size_t i = 0; i < n; i++) {
        const double r = fabs((double)ref[i]), d = fabs((double)got[i] - ref[i]);
        mx = r > mx ? r : mx;
        md = d > md ? d : md;
    }
    free(got);
    return md / (mx + 1e-30);
}

/* The fp16-compute product of the shape: prints its GFLOP/s and the ratio
 * to our fp32 product's time t_fp32; returns its error against OpenBLAS on
 * the half-rounded operands (A, B, C host scratch, overwritten). */
static double bench_f16(ctx *c, const shape *s, const own_args *fp32, float *A, float *B, float *C, double t_fp32) {
    const size_t na = (size_t)s->M * s->K, nb = (size_t)s->N * s->K;
    uint16_t *h = malloc(nb * sizeof *h);
    if (h == NULL) exit(1);
    for (size_t i = 0; i < nb; i++) h[i] = nmt_float_to_half(B[i]), B[i] = nmt_half_to_float(h[i]);
    for (size_t i = 0; i < na; i++) A[i] = nmt_half_to_float(nmt_float_to_half(A[i]));
    own_args ha = *fp32;
    ha.H = upload(c->dev, h, nb * sizeof *h);
    const double t = time_calls(run_own, &ha, c->reps_time) / c->queue;
    const double g = 2.0 * s->M * s->N * s->K / t / 1e9;
    printf(" %8.2f %6.2f |", g, t_fp32 / t);
    blas_args bh = {s, A, B, C, 1};
    run_blas(&bh);
    const double err = rel_err(c->dev, ha.C, C, (size_t)s->M * s->N);
    clReleaseMemObject(ha.H);
    free(h);
    return err;
}

static void bench_shape(ctx *c, const shape *s, double peak, int trans_b) {
    const size_t na = (size_t)s->M * s->K, nb = (size_t)s->N * s->K, nc = (size_t)s->M * s->N;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *Bq = malloc(nb * 4);
    signed char *Q = malloc(nb);
    float *scale = malloc((size_t)s->N * 4);
    if (!A || !B || !C || !Q || !scale || !Bq) exit(1);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ ((uint64_t)s->M << 40 | (uint64_t)s->N << 20 | s->K);
    for (size_t i = 0; i < na; i++) x = x * 6364136223846793005ull + 1, A[i] = (float)((x >> 40) & 0xffff) / 32768.0f - 1;
    for (size_t i = 0; i < nb; i++) x = x * 6364136223846793005ull + 1, B[i] = (float)((x >> 40) & 0xffff) / 32768.0f - 1;
    /* int8 weights: symmetric per-row quantisation of B (B' = Q * scale) */
    for (uint32_t n = 0; n < s->N; n++) {
        float mx = 0;
        for (uint32_t k = 0; k < s->K; k++) mx = fmaxf(mx, fabsf(B[(size_t)n * s->K + k]));
        scale[n] = mx > 0 ? mx / 127.0f : 1.0f;
        for (uint32_t k = 0; k < s->K; k++) {
            float q = roundf(B[(size_t)n * s->K + k] / scale[n]);
            Q[(size_t)n * s->K + k] = (signed char)q;
            Bq[(size_t)n * s->K + k] = q * scale[n];
        }
    }
    cl_mem dA = upload(c->dev, A, na * 4), dB = upload(c->dev, B, nb * 4), dC = upload(c->dev, C, nc * 4);
    cl_mem dQ = upload(c->dev, Q, nb), dS = upload(c->dev, scale, (size_t)s->N * 4);
    const double flops = 2.0 * s->M * s->N * s->K;

    blas_args ba = {s, A, B, C, trans_b};
    double t_blas = time_calls(run_blas, &ba, c->reps_time);
    own_args oa = {c, s, dA, dB, dC, dQ, dS, 0, trans_b, c->queue, NULL};
    double t_own = time_calls(run_own, &oa, c->reps_time) / c->queue;
    double err = rel_err(c->dev, dC, C, nc);
    double g_blas = flops / t_blas / 1e9, g_own = flops / t_own / 1e9;
    printf("%-3s %-6s %4u %5u %5u | %8.2f %8.2f %6.2f %5.1f%% |",
           trans_b == OP_TN ? "TN" : trans_b ? "NT" : "NN", s->what, s->M, s->N,
           s->K, g_own, g_blas, g_own / g_blas, peak > 0 ? 100.0 * g_own / peak : 0.0);
    double err_q = -1;
    if (trans_b == OP_NT && c->ops.k_gemm[NMT_GOP_Q8][0] != NULL) {
        own_args qa = oa;
        qa.q8 = 1;
        double t_q8 = time_calls(run_own, &qa, c->reps_time) / c->queue;
        blas_args bq = {s, A, Bq, C, 1};
        run_blas(&bq); /* reference of the dequantised weights */
        err_q = rel_err(c->dev, dC, C, nc);
        double g_q8 = flops / t_q8 / 1e9;
        printf(" %8.2f %6.2f |", g_q8, g_q8 / g_blas);
    } else {
        printf(" %8s %6s |", "-", "-");
    }
    double err_i8 = -1;
    if (i8_scratch_a.mem != NULL) {
        if (trans_b == OP_NT && (uint64_t)s->M * s->K <= i8_scratch_cap && s->M <= i8_scratch_rows) {
            own_args qa = oa;
            qa.q8 = 1;
            i8_attach(c, 1);
            const uint64_t n0 = c->ops.n_i8_products;
            double t_i8 = time_calls(run_own, &qa, c->reps_time) / c->queue;
            if (c->ops.n_i8_products == n0) die("int8 x int8 not taken", NMT_ERR_UNSUPPORTED);
            i8_attach(c, 0);
            err_i8 = rel_err(c->dev, dC, C, nc); /* C: the dequantised weights' reference */
            double g_i8 = flops / t_i8 / 1e9;
            printf(" %8.2f %6.2f |", g_i8, g_i8 / g_blas);
        } else {
            printf(" %8s %6s |", "-", "-");
        }
    }
    double err_h = -1;
    if (trans_b == OP_NT && c->ops.k_gemm_f16[0] != NULL) err_h = bench_f16(c, s, &oa, A, B, C, t_own);
    else printf(" %8s %6s |", "-", "-");
    printf(" %.0e", err);
    if (err_q >= 0) printf(" %.0e", err_q);
    if (err_i8 >= 0) printf(" %.0e", err_i8);
    if (err_h >= 0) printf(" %.0e", err_h);
    printf("\n");
    fflush(stdout);
    free(A), free(B), free(C), free(Q), free(scale), free(Bq);
    clReleaseMemObject(dA), clReleaseMemObject(dB), clReleaseMemObject(dC), clReleaseMemObject(dQ);
    clReleaseMemObject(dS);
}

/* The device's dispatch floor: a 1x16x16 product, which does no measurable
 * work, once per finish and 64 per finish.  Rows whose time is near it are
 * bound by launch latency, not by the kernel. */
static void print_floor(ctx *c) {
    static const shape tiny = {1, 16, 16, "floor"};
    float host[256] = {0};
    cl_mem dA = upload(c->dev, host, 64), dB = upload(c->dev, host, 1024), dC = upload(c->dev, host, 64);
    own_args a = {c, &tiny, dA, dB, dC, NULL, NULL, 0, OP_NT, 1, NULL};
    double t1 = time_calls(run_own, &a, c->reps_time);
    a.reps = 64;
    double t64 = time_calls(run_own, &a, c->reps_time) / 64;
    printf("dispatch floor (1x16x16 product): %.1f us with a finish per call, %.1f us per call 64 to a finish\n",
           t1 * 1e6, t64 * 1e6);
    clReleaseMemObject(dA), clReleaseMemObject(dB), clReleaseMemObject(dC);
}

typedef struct model_dims {
    const char *name;
    uint32_t d, ff, V;
} model_dims;

static const model_dims models[] = {
    {"test", 64, 128, 64},      /* build/models/test-model.nmt */
    {"small", 256, 1024, 8000}, /* the paper's IWSLT "small" shape */
    {"base", 512, 2048, 8000},  /* Transformer base, 8k vocabulary */
};

int main(int argc, char **argv) {
    const char *spec = getenv("NMT_EDGE_DEVICE"), *which = "small", *tuning = "table", *cache = NULL;
    double reps_time = 0.15;
    int nn = 0, train = 0, queue = 1, fp16 = 1, i8 = 0;
    uint32_t Ms[8] = {1, 4, 8, 64, 512};
    size_t n_ms = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--reps-time") && i + 1 < argc) reps_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--tuning") && i + 1 < argc) tuning = argv[++i];
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(argv[i], "--nn")) nn = 1;
        else if (!strcmp(argv[i], "--no-fp16")) fp16 = 0;
        else if (!strcmp(argv[i], "--train")) train = 1;
        else if (!strcmp(argv[i], "--queue") && i + 1 < argc) queue = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--i8")) i8 = 1;
        else if (!strcmp(argv[i], "--i8-portable")) i8 = 2;
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
            n_ms = 0;
            for (char *t = strtok(argv[++i], ","); t != NULL && n_ms < 8; t = strtok(NULL, ","))
                if (atoi(t) > 0 && atoi(t) <= 4096) Ms[n_ms++] = (uint32_t)atoi(t);
            if (n_ms == 0) n_ms = 1;
        } else {
            fprintf(stderr,
                    "usage: gemm_bench [--device SPEC] [--model test|small|base|all] [--reps-time S]\n"
                    "                  [--tuning default|table] [--cache DIR] [--nn] [--train] [--queue N]\n"
                    "                  [--no-fp16]\n"
                    "  --train: instead of the decoding/inference shapes, the products of a training\n"
                    "  step on a 4096-token batch: forward (NT), input gradient (NN), weight gradient (TN)\n"
                    "  --tuning default: the portable row of the table; table: the device's row, or the\n"
                    "  tuner's file when --cache names the directory holding it\n"
                    "  --queue N: enqueue N products per finish (default 1: each call waits for its\n"
                    "  result; a decoder enqueues a whole step, so N > 1 is its per-launch rate)\n"
                    "  --i8: a column of int8 x int8 products (activations quantized per row)\n"
                    "  --i8-portable: the same without the integer dot product built-in\n"
                    "  --ms LIST: the M values (default 1,4,8,64,512)\n");
            return 2;
        }
    }
    ctx c = {0};
    c.reps_time = reps_time > 0 ? reps_time : 0.15;
    if (queue < 1 || queue > 1024) {
        fprintf(stderr, "gemm_bench: --queue must be 1..1024\n");
        return 2;
    }
    c.queue = queue;
    nmt_device_params p = {.device = spec, .cache_dir = cache ? cache : "" /* NULL: none */};
    void *mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_status st = nmt_device_open(&p, mem, nmt_device_footprint(), &c.dev);
    if (st != NMT_OK) die("device", st);
    nmt_tuning t = c.dev->tuning;
    if (!strcmp(tuning, "default")) nmt_tuning_table_row(0, &t); /* the portable default */
    st = nmt_ops_init_tuned(&c.ops, c.dev, &t);
    if (st == NMT_OK) st = nmt_ops_enable_q8(&c.ops);
    if (st == NMT_OK && train) st = nmt_train_ops_init(&c.t, c.dev);
    if (st != NMT_OK) die("ops", st);
    /* fp16 compute where the device has it (the column stays "-" otherwise) */
    st = fp16 ? nmt_ops_enable_f16(&c.ops) : NMT_ERR_UNSUPPORTED;
    if (st != NMT_OK && st != NMT_ERR_UNSUPPORTED) die("fp16 ops", st);
    printf("fp16 compute: %s\n", st == NMT_OK                 ? "measured (cl_khr_fp16)"
                                : !c.dev->info.has_fp16 ? "not available (no cl_khr_fp16)"
                                                        : "off (--no-fp16)");
    if (i8) { /* every class int8 x int8: the built-in where the device has it */
        for (int k = 0; k < NMT_GCLASS_COUNT; k++) {
            const uint8_t want = (uint8_t)(i8 == 1 ? nmt_i8dot_fast_variant(c.dev) : NMT_I8_PORTABLE);
            if (c.ops.i8_use[k] != want && c.ops.k_gemm[NMT_GOP_I8][k] != NULL) {
                clReleaseKernel(c.ops.k_gemm[NMT_GOP_I8][k]);
                c.ops.k_gemm[NMT_GOP_I8][k] = NULL;
            }
            c.ops.i8_use[k] = want;
        }
        st = nmt_ops_enable_i8(&c.ops);
        if (st != NMT_OK) die("int8 x int8 kernels", st);
        i8_scratch_rows = 4096;
        i8_scratch_cap = (size_t)4096 * 8192;
        cl_mem qa = NULL, qs = NULL;
        if (nmt_device_buffer(c.dev, i8_scratch_cap, NULL, &qa) != NMT_OK ||
            nmt_device_buffer(c.dev, i8_scratch_rows * 4, NULL, &qs) != NMT_OK)
            die("int8 x int8 scratch", NMT_ERR_DEVICE_MEMORY);
        i8_scratch_a = (nmt_buf){qa, 0};
        i8_scratch_s = (nmt_buf){qs, 0};
        printf("int8 x int8: %s\n", c.ops.i8_use[0] == NMT_I8_DOT_BUILTIN ? "dot built-in (cl_khr_integer_dot_product)"
                                     : c.ops.i8_use[0] == NMT_I8_VNNI      ? "x86 VNNI (vpdpbusd)"
                                                                           : "portable kernel");
    }

    int lanes = 0;
    int n_threads = (int)(c.dev->info.compute_units ? c.dev->info.compute_units : 1);
    double peak = measure_peak(n_threads, &lanes);
    printf("device: %s (%s), driver %s, %u compute units\n", c.dev->info.device_name, c.dev->info.platform_name,
           c.dev->info.driver_version, (unsigned)c.dev->info.compute_units);
    printf("kernel parameters: %s\n", t.origin);
    for (int op = 0; op < NMT_GOP_COUNT; op++)
        for (int cl = 0; cl < NMT_GCLASS_COUNT; cl++) {
            const nmt_gemm_cfg *g = &c.ops.cfg[op][cl];
            if (g->provider == NMT_GEMM_CLBLAST)
                printf("  %s %-3s clblast\n", nmt_gemm_op_name((nmt_gemm_op)op), nmt_gemm_class_name((nmt_gemm_class)cl));
            else
                printf("  %s %-3s own tm=%u tn=%u vw=%u mfast=%u wg=%u\n", nmt_gemm_op_name((nmt_gemm_op)op),
                       nmt_gemm_class_name((nmt_gemm_class)cl), g->tm, g->tn, g->vw, g->mfast, g->wg);
        }
    printf("measured fp32 peak: %.1f GFLOP/s (%d threads of %d-lane FMA chains, best of 3)\n", peak, n_threads,
           lanes);
    printf("OpenBLAS: %s, %d threads\n", openblas_get_config(), openblas_get_num_threads());
    printf("timing: best of 3 batches of repetitions filling %.2f s each; %d product(s) per finish\n", c.reps_time,
           c.queue);
    print_floor(&c);
    printf("\n");
    printf("%-3s %-6s %4s %5s %5s | %8s %8s %6s %6s | %8s %6s |", "op", "shape", "M", "N", "K", "ours", "OpenBLAS",
           "ratio", "peak", "int8", "ratio");
    if (i8) printf(" %8s %6s |", "i8xi8", "ratio");
    printf(" %8s %6s | max rel err (fp32, int8%s, fp16)\n", "fp16", "xfp32", i8 ? ", i8xi8" : "");
    printf("%-3s %-6s %4s %5s %5s | %8s %8s %6s %6s | %8s %6s |", "", "", "", "", "", "GFLOP/s", "GFLOP/s", "", "",
           "GFLOP/s", "");
    if (i8) printf(" %8s %6s |", "GFLOP/s", "");
    printf(" %8s %6s |\n", "GFLOP/s", "");
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        const model_dims *md = &models[mi];
        if (strcmp(which, "all") != 0 && strcmp(which, md->name) != 0) continue;
        printf("-- model %s: d=%u ff=%u V=%u\n", md->name, md->d, md->ff, md->V);
        if (train) {
            const uint32_t R = 4096; /* target tokens of a batch */
            const uint32_t io[][2] = {{3 * md->d, md->d}, {md->d, md->d}, {md->ff, md->d}, {md->d, md->ff},
                                      {md->V, md->d}};
            static const char *const names[] = {"qkv", "out", "ffn1", "ffn2", "vocab"};
            for (int op = OP_NN; op <= OP_TN; op++)
                for (size_t j = 0; j < sizeof io / sizeof io[0]; j++) {
                    const uint32_t out = io[j][0], in = io[j][1];
                    shape s = op == OP_NT ? (shape){R, out, in, names[j]}
                              : op == OP_NN ? (shape){R, in, out, names[j]}
                                            : (shape){out, in, R, names[j]};
                    bench_shape(&c, &s, peak, op);
                }
            continue;
        }
        const shape nk[] = {{0, 3 * md->d, md->d, "qkv"}, {0, md->d, md->d, "out"}, {0, md->ff, md->d, "ffn1"},
                            {0, md->d, md->ff, "ffn2"},   {0, md->V, md->d, "vocab"}};
        for (size_t m = 0; m < n_ms; m++)
            for (size_t j = 0; j < sizeof nk / sizeof nk[0]; j++) {
                shape s = nk[j];
                s.M = Ms[m];
                bench_shape(&c, &s, peak, 1);
            }
        if (nn) {
            for (size_t m = 0; m < n_ms; m++) {
                shape s = {Ms[m], md->d, md->d, "dxd"};
                bench_shape(&c, &s, peak, 0);
            }
        }
    }
    nmt_train_ops_release(&c.t);
    if (i8_scratch_a.mem) clReleaseMemObject(i8_scratch_a.mem);
    if (i8_scratch_s.mem) clReleaseMemObject(i8_scratch_s.mem);
    nmt_ops_release(&c.ops);
    nmt_device_close(c.dev);
    free(mem);
    return 0;
}
