/* SPDX-License-Identifier: MIT */
/* step_bench.c — a one-row decoder step's chain of products as one launch per
 * product against one launch for the whole chain whose work-groups take the
 * products' chunks by ticket (issue 22; docs/PERFORMANCE.md, "One launch for
 * a step's products").  Not a test: it asserts nothing about speed; it does
 * check that both forms give the same bits.
 *
 *   step_bench [--device SPEC] [--cache DIR] [--shape small|base] [--steps N]
 *              [--rounds R] [--chunk C] [--groups G]
 *
 * The chain is a Transformer decoder step's products at one row, each
 * reading the one before's output: per layer q|k|v (3d x d), the self- and
 * cross-attention outputs and the cross-attention query (d x d each), the
 * FFN (ff x d, d x ff); then the vocabulary (V x d).  Every product is cut
 * into chunks of C outputs (default 16); a chunk is one work-item's dot
 * products over float16 loads, the same code in both forms:
 *   launches   one clEnqueueNDRangeKernel per product, a work-item per chunk
 *              (local size 1: every chunk is a work-group the runtime may
 *              hand to any of its threads)
 *   one        one launch of G work-items (default: the device's compute
 *              units), each in a work-group of its own.  A work-item takes
 *              the next ticket (a chunk, in the chain's order) with a
 *              compare-and-swap, waits until every chunk of the products
 *              before its own is done (a counter), computes it, and counts
 *              it done.  Tickets are taken in order and a chunk waits only
 *              for chunks already taken by work-groups that are running, so
 *              the launch finishes whichever of its work-groups run and in
 *              whatever order: a single thread running them one after the
 *              other does every chunk in the first.  The counters go on
 *              from launch to launch (the host passes where this launch's
 *              tickets begin), so nothing resets them.
 * N steps (default 256) are enqueued back to back, then one clFinish; best
 * of R (default 5) interleaved rounds; microseconds a step, the ratio, and
 * the weights' bytes a step over the time. */
#define _POSIX_C_SOURCE 200809L
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *SRC =
    "inline float sum16(float16 s) {\n"
    "    float8 a = s.lo + s.hi; float4 b = a.lo + a.hi; float2 c = b.lo + b.hi; return c.x + c.y;\n"
    "}\n"
    /* a product's outputs n0..n1 (ReLU when relu) */
    "inline void prod_part(global const float *W, global float *act, uint w, uint n0, uint n1, uint k,\n"
    "                      uint in, uint out, uint relu) {\n"
    "    global const float16 *x = (global const float16 *)(act + in);\n"
    "    for (uint n = n0; n < n1; n++) {\n"
    "        global const float16 *r = (global const float16 *)(W + w + (size_t)n * k);\n"
    "        float16 s = (float16)(0.0f);\n"
    "        for (uint i = 0; i < k / 16; i++) s = fma(r[i], x[i], s);\n"
    "        float y = sum16(s);\n"
    "        act[out + n] = relu ? fmax(y, 0.0f) : y;\n"
    "    }\n"
    "}\n"
    /* a layer norm of n values (no gain or bias: the bench times the pass) */
    "inline void norm(global float *act, uint n, uint in, uint out) {\n"
    "    float m = 0.0f, v = 0.0f;\n"
    "    for (uint i = 0; i < n; i++) m += act[in + i];\n"
    "    m /= (float)n;\n"
    "    for (uint i = 0; i < n; i++) { float t = act[in + i] - m; v += t * t; }\n"
    "    float r = rsqrt(v / (float)n + 1e-6f);\n"
    "    for (uint i = 0; i < n; i++) act[out + i] = (act[in + i] - m) * r;\n"
    "}\n"
    /* one head of one query over T cached positions (keys at W + kv, values after them) */
    "inline void head(global const float *W, global float *act, uint kv, uint d, uint T, uint h, uint in,\n"
    "                 uint out) {\n"
    "    const uint dh = 64, o = h * dh;\n"
    "    float s[64], mx = -INFINITY, z = 0.0f;\n"
    "    for (uint j = 0; j < T; j++) {\n"
    "        float a = 0.0f;\n"
    "        for (uint i = 0; i < dh; i++) a += act[in + o + i] * W[kv + j * d + o + i];\n"
    "        s[j] = a * 0.125f; mx = fmax(mx, s[j]);\n"
    "    }\n"
    "    for (uint j = 0; j < T; j++) { s[j] = exp(s[j] - mx); z += s[j]; }\n"
    "    for (uint i = 0; i < dh; i++) {\n"
    "        float a = 0.0f;\n"
    "        for (uint j = 0; j < T; j++) a += s[j] * W[kv + (T + j) * d + o + i];\n"
    "        act[out + o + i] = a / z;\n"
    "    }\n"
    "}\n"
    /* ops: per op kind, w, n, k, in, out, first chunk; a chunk c of it */
    "inline void run(global const float *W, global float *act, global const uint *o, uint c) {\n"
    "    if (o[0] == 0u || o[0] == 3u) {\n"
    "        uint n0 = c * CHUNK;\n"
    "        prod_part(W, act, o[1], n0, min(n0 + CHUNK, o[2]), o[3], o[4], o[5], o[0] == 3u);\n"
    "    } else if (o[0] == 1u) norm(act, o[2], o[4], o[5]);\n"
    "    else head(W, act, o[1], o[2], o[3], c, o[4], o[5]);\n"
    "}\n"
    "kernel void one(global const float *W, global float *act, global const uint *ops, uint p) {\n"
    "    run(W, act, ops + p * 7u, (uint)get_global_id(0));\n"
    "}\n"
    "kernel void chain(global const float *W, global float *act, global const uint *ops, uint n_ops,\n"
    "                  uint total, uint base, volatile global uint *ctr) {\n"
    "    uint p = 0;\n"
    "    for (;;) {\n"
    "        uint t = atomic_add(&ctr[0], 0u);\n"
    "        if (t - base >= total) break;\n"
    "        if (atomic_cmpxchg(&ctr[0], t, t + 1u) != t) continue;\n"
    "        uint c = t - base;\n"
    "        while (p + 1u < n_ops && ops[(p + 1u) * 7u + 6u] <= c) p++;\n"
    "        global const uint *o = ops + p * 7u;\n"
    "        while (atomic_add(&ctr[1], 0u) - base < o[6]) ;\n"
    "        run(W, act, o, c - o[6]);\n"
    "        atomic_inc(&ctr[1]);\n"
    "    }\n"
    "}\n";

enum { PRODUCT = 0, NORM = 1, HEADS = 2, PRODUCT_RELU = 3 };
typedef struct prod {
    cl_uint kind, w, n, k, in, out, first;
} prod;

static size_t chunks_of(const prod *p, cl_uint chunk) {
    return p->kind == NORM ? 1 : p->kind == HEADS ? p->n / 64 : (p->n + chunk - 1) / chunk;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, long code) {
    fprintf(stderr, "step_bench: %s failed (%ld)\n", what, code);
    exit(1);
}

typedef struct bench {
    cl_command_queue q;
    cl_kernel one, chain;
    cl_mem w, act, ops, ctr;
    prod p[128];
    cl_uint n_ops, total, base, groups, chunk;
} bench;

static void set(cl_kernel k, cl_uint i, size_t sz, const void *v) {
    cl_int e = clSetKernelArg(k, i, sz, v);
    if (e != CL_SUCCESS) die("clSetKernelArg", e);
}

static void step(bench *b, int form) {
    cl_int e;
    if (form == 0) {
        for (cl_uint i = 0; i < b->n_ops; i++) {
            set(b->one, 3, sizeof i, &i);
            const size_t g = chunks_of(&b->p[i], b->chunk), l = 1;
            if ((e = clEnqueueNDRangeKernel(b->q, b->one, 1, NULL, &g, &l, 0, NULL, NULL)) != CL_SUCCESS)
                die("clEnqueueNDRangeKernel", e);
        }
    } else {
        set(b->chain, 5, sizeof b->base, &b->base);
        const size_t g = b->groups, l = 1;
        if ((e = clEnqueueNDRangeKernel(b->q, b->chain, 1, NULL, &g, &l, 0, NULL, NULL)) != CL_SUCCESS)
            die("clEnqueueNDRangeKernel", e);
        b->base += b->total;
    }
}

static double time_form(bench *b, int form, int steps) {
    const double t0 = now();
    for (int s = 0; s < steps; s++) step(b, form);
    cl_int e = clFinish(b->q);
    if (e != CL_SUCCESS) die("clFinish", e);
    return (now() - t0) / steps * 1e6;
}

static void read_out(bench *b, float *dst, size_t n) {
    const prod *last = &b->p[b->n_ops - 1];
    cl_int e = clEnqueueReadBuffer(b->q, b->act, CL_TRUE, last->out * sizeof(float), n * sizeof(float), dst, 0,
                                   NULL, NULL);
    if (e != CL_SUCCESS) die("clEnqueueReadBuffer", e);
}

int main(int argc, char **argv) {
    const char *spec = NULL, *cache = NULL, *shape = "small";
    int steps = 256, rounds = 5;
    cl_uint chunk = 64, groups = 0;
    int with_rest = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = (cl_uint)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--groups") && i + 1 < argc) groups = (cl_uint)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--products-only")) with_rest = 0;
        else {
            fprintf(stderr, "usage: step_bench [--device SPEC] [--cache DIR] [--shape small|base] [--steps N] "
                            "[--rounds R] [--chunk C] [--groups G] [--products-only]\n");
            return 2;
        }
    }
    const int base_shape = !strcmp(shape, "base");
    if ((!base_shape && strcmp(shape, "small")) || steps < 1 || rounds < 1 || chunk < 1 || chunk > 4096) {
        fprintf(stderr, "step_bench: --shape small|base, --steps >= 1, --rounds >= 1, 1 <= --chunk <= 4096\n");
        return 2;
    }
    const cl_uint d = base_shape ? 512 : 256, ff = base_shape ? 2048 : 1024, vocab = base_shape ? 32000 : 8000;
    const int layers = base_shape ? 6 : 2;

    nmt_device_params prm = {.device = spec, .cache_dir = cache ? cache : "" /* NULL: none */};
    void *mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_device *dev = NULL;
    nmt_status st = nmt_device_open(&prm, mem, nmt_device_footprint(), &dev);
    if (st != NMT_OK) die(nmt_status_str(st), st);
    cl_uint cus = 0;
    clGetDeviceInfo(dev->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    if (groups == 0) groups = cus ? cus : 1;
    printf("device: %s (%s), driver %s; %u compute units\n", dev->info.device_name, dev->info.platform_name,
           dev->info.driver_version, cus);

    bench b = {.q = dev->queue, .groups = groups, .chunk = chunk};
    /* the chain; every op writes a region of its own in the act buffer */
    const cl_uint T = 20; /* cached positions the two attentions read */
    size_t wsz = 0, asz = d, prods = 0;
    cl_uint in = 0;
#define OP(KIND, N, K, W)                                                                                  \
    do {                                                                                                   \
        prod *p_ = &b.p[b.n_ops++];                                                                        \
        *p_ = (prod){(KIND), (W), (N), (K), in, (cl_uint)asz, b.total};                                   \
        b.total += (cl_uint)chunks_of(p_, chunk);                                                          \
        in = (cl_uint)asz;                                                                                 \
        asz += ((N) + 15) / 16 * 16;                                                                       \
    } while (0)
#define PROD(N, K, RELU)                                                                                   \
    do {                                                                                                   \
        OP((RELU) ? PRODUCT_RELU : PRODUCT, (N), (K), (cl_uint)wsz);                                       \
        wsz += (size_t)(N) * (K);                                                                          \
        prods += (size_t)(N) * (K);                                                                        \
    } while (0)
#define ATTN()                                                                                             \
    do {                                                                                                   \
        OP(HEADS, d, T, (cl_uint)wsz);                                                                     \
        wsz += 2 * (size_t)T * d;                                                                          \
    } while (0)
    for (int l = 0; l < layers; l++) {
        PROD(3 * d, d, 0);
        if (with_rest) ATTN();
        PROD(d, d, 0);
        if (with_rest) OP(NORM, d, 0, 0);
        PROD(d, d, 0);
        if (with_rest) ATTN();
        PROD(d, d, 0);
        if (with_rest) OP(NORM, d, 0, 0);
        PROD(ff, d, 1);
        PROD(d, ff, 0);
        if (with_rest) OP(NORM, d, 0, 0);
    }
    PROD(vocab, d, 0);
#undef PROD
#undef ATTN
#undef OP
    float *hw = malloc(wsz * sizeof(float)), *ha = calloc(asz, sizeof(float));
    float *r0 = malloc(vocab * sizeof(float)), *r1 = malloc(vocab * sizeof(float));
    if (!hw || !ha || !r0 || !r1) die("malloc", 0);
    unsigned s = 1;
    for (size_t i = 0; i < wsz; i++) {
        s = s * 1664525u + 1013904223u;
        hw[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.12f;
    }
    for (cl_uint i = 0; i < d; i++) ha[i] = (float)(i % 7) * 0.25f - 0.75f;
    cl_uint zero[2] = {0, 0};
    if ((st = nmt_device_buffer(dev, wsz * sizeof(float), hw, &b.w)) != NMT_OK ||
        (st = nmt_device_buffer(dev, asz * sizeof(float), ha, &b.act)) != NMT_OK ||
        (st = nmt_device_buffer(dev, b.n_ops * sizeof(prod), b.p, &b.ops)) != NMT_OK ||
        (st = nmt_device_buffer(dev, sizeof zero, zero, &b.ctr)) != NMT_OK)
        die(nmt_status_str(st), st);

    char opts[64];
    snprintf(opts, sizeof opts, "-DCHUNK=%uu", chunk);
    cl_int e;
    cl_program prog = clCreateProgramWithSource(dev->context, 1, &SRC, NULL, &e);
    if (!prog || e != CL_SUCCESS) die("clCreateProgramWithSource", e);
    if ((e = clBuildProgram(prog, 1, &dev->device, opts, NULL, NULL)) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(prog, dev->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "%s\n", log);
        die("clBuildProgram", e);
    }
    b.one = clCreateKernel(prog, "one", &e);
    if (e != CL_SUCCESS) die("clCreateKernel one", e);
    b.chain = clCreateKernel(prog, "chain", &e);
    if (e != CL_SUCCESS) die("clCreateKernel chain", e);
    set(b.one, 0, sizeof b.w, &b.w);
    set(b.one, 1, sizeof b.act, &b.act);
    set(b.one, 2, sizeof b.ops, &b.ops);
    set(b.chain, 0, sizeof b.w, &b.w);
    set(b.chain, 1, sizeof b.act, &b.act);
    set(b.chain, 2, sizeof b.ops, &b.ops);
    set(b.chain, 3, sizeof b.n_ops, &b.n_ops);
    set(b.chain, 4, sizeof b.total, &b.total);
    set(b.chain, 6, sizeof b.ctr, &b.ctr);

    /* both forms give the same bits (every op writes a region of its own,
     * so every step computes the same values) */
    for (int f = 0; f < 2; f++) {
        if ((e = clEnqueueWriteBuffer(b.q, b.act, CL_TRUE, 0, asz * sizeof(float), ha, 0, NULL,
                                      NULL)) != CL_SUCCESS)
            die("clEnqueueWriteBuffer", e);
        step(&b, f);
        read_out(&b, f ? r1 : r0, vocab);
    }
    /* the largest |y| in float, then widened: the same value as a double
     * fmax over the widened floats, whose -O3 vectorization is an internal
     * compiler error of Debian 12's aarch64 GCC 12.2 (vect_transform_reduction;
     * docs/CROSS.md, "Release builds") */
    float maxf = 0;
    for (cl_uint i = 0; i < vocab; i++) maxf = fmaxf(maxf, fabsf(r0[i]));
    const double maxv = maxf;
    if (memcmp(r0, r1, vocab * sizeof(float)) != 0) die("the two forms' outputs differ", 0);
    if (!(maxv > 0 && maxv < 1e30)) die("outputs all zero or not finite", 0);
    printf("%s shape%s: %u ops a step, %.2f MB of fp32 weights in its products, %u chunks (products' of %u "
           "outputs); the one launch runs %u work-groups; outputs the same bits (largest |y| %.3g)\n",
           shape, with_rest ? "" : ", products only", b.n_ops, prods * 4.0 / 1e6, b.total, chunk, groups, maxv);

    double best[2] = {1e30, 1e30};
    for (int f = 0; f < 2; f++) time_form(&b, f, steps < 16 ? steps : 16); /* warm */
    for (int r = 0; r < rounds; r++)
        for (int f = 0; f < 2; f++) {
            const int ff2 = (r % 2) ? 1 - f : f;
            const double us = time_form(&b, ff2, steps);
            if (us < best[ff2]) best[ff2] = us;
        }
    printf("form       us/step   GB/s\n");
    printf("launches   %7.1f   %5.1f\n", best[0], prods * 4.0 / best[0] / 1e3);
    printf("one        %7.1f   %5.1f\n", best[1], prods * 4.0 / best[1] / 1e3);
    printf("one / launches speed: %.3f\n", best[0] / best[1]);
    clReleaseKernel(b.one);
    clReleaseKernel(b.chain);
    clReleaseProgram(prog);
    clReleaseMemObject(b.w);
    clReleaseMemObject(b.act);
    clReleaseMemObject(b.ops);
    clReleaseMemObject(b.ctr);
    nmt_device_close(dev);
    free(mem);
    free(hw);
    free(ha);
    free(r0);
    free(r1);
    return 0;
}
