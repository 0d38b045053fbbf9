/* SPDX-License-Identifier: MIT */
/* cmdbuf_bench.c — what a recorded command buffer (cl_khr_command_buffer,
 * issue 23 item 4) saves per launch against enqueueing each kernel, on the
 * device the runtime opens (docs/PERFORMANCE.md, "Launches per decoder
 * step").  Not a test: it asserts nothing about speed; it does check that
 * every path added what it should.
 *
 *   cmdbuf_bench [--device SPEC] [--cache DIR] [--reps-time S]
 *
 * For N = 8 and 64 launches of the `add` kernel (16 floats; a decoder step
 * launches 39 kernels for the bundled model) per clFinish, microseconds per
 * launch of:
 *   op       nmt_op_add: arguments set, then clEnqueueNDRangeKernel (what a
 *            decoder step does today)
 *   enqueue  clEnqueueNDRangeKernel alone, arguments set once
 *   replay   clEnqueueCommandBufferKHR of the N launches recorded once
 *   mutable  clUpdateMutableCommandsKHR of one scalar argument of every
 *            command (what a step would need: its position and lengths),
 *            then the replay; only with cl_khr_command_buffer_mutable_dispatch
 * Best of 5 interleaved rounds of --reps-time seconds (default 0.2) each.
 * The extension's entry points are declared here: the four this program
 * uses (create, record a kernel, finalize, enqueue) have had the same
 * signatures from cl_khr_command_buffer 0.9.0 (PoCL 3.1) to 1.0 (Intel's
 * runtime); the mutable dispatch's update takes the array form of 0.9.3
 * (structures without type/next), and older versions of it are reported
 * and skipped, never called. */
#define _POSIX_C_SOURCE 200809L
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void *cb_t;  /* cl_command_buffer_khr */
typedef void *mut_t; /* cl_mutable_command_khr */
typedef cb_t (*create_fn)(cl_uint, const cl_command_queue *, const cl_ulong *, cl_int *);
typedef cl_int (*ndrange_fn)(cb_t, cl_command_queue, const cl_ulong *, cl_kernel, cl_uint, const size_t *,
                             const size_t *, const size_t *, cl_uint, const cl_uint *, cl_uint *, mut_t *);
typedef cl_int (*cb_fn)(cb_t);
typedef cl_int (*enqueue_fn)(cl_uint, cl_command_queue *, cb_t, cl_uint, const cl_event *, cl_event *);
typedef struct {
    cl_uint index;
    size_t size;
    const void *value;
} mut_arg;
typedef struct {
    mut_t command;
    cl_uint num_args, num_svm_args, num_exec_infos, work_dim;
    const mut_arg *args;
    const void *svm_args, *exec_infos;
    const size_t *gwo, *gws, *lws;
} mut_config;
typedef cl_int (*update_fn)(cb_t, cl_uint, const cl_uint *, const void **);

enum { CB_FLAGS = 0x1293, CB_MUTABLE = 1 << 1, MUT_FIELDS = 0x12B1, MUT_ARGS = 1 << 3, MAXN = 64 };

/* OpenCL 3.0's extension-version query (the runtime targets 1.2 headers) */
#define EXTENSIONS_WITH_VERSION 0x1060
typedef struct {
    cl_uint version;
    char name[64];
} name_version;
#define VER(ma, mi, pa) (((cl_uint)(ma) << 22) | ((cl_uint)(mi) << 12) | (cl_uint)(pa))
#define VER_MAJOR(v) ((unsigned)((v) >> 22))
#define VER_MINOR(v) ((unsigned)(((v) >> 12) & 0x3ffu))
#define VER_PATCH(v) ((unsigned)((v)&0xfffu))

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, long code) {
    fprintf(stderr, "cmdbuf_bench: %s failed (%ld)\n", what, code);
    exit(1);
}

/* The version the device reports for an extension, 0 when absent. */
static cl_uint ext_version(cl_device_id d, const char *name) {
    size_t sz = 0;
    if (clGetDeviceInfo(d, EXTENSIONS_WITH_VERSION, 0, NULL, &sz) != CL_SUCCESS || sz == 0) return 0;
    name_version *v = malloc(sz);
    cl_uint out = 0;
    if (v && clGetDeviceInfo(d, EXTENSIONS_WITH_VERSION, sz, v, NULL) == CL_SUCCESS)
        for (size_t i = 0; i < sz / sizeof *v; i++)
            if (!strcmp(v[i].name, name)) out = v[i].version;
    free(v);
    return out;
}

typedef struct bench {
    nmt_ops *ops;
    cl_mem y, x;
    cl_uint n;
    create_fn create;
    ndrange_fn ndrange;
    cb_fn finalize, release;
    enqueue_fn enqueue;
    update_fn update;
    cb_t cb[2];       /* N = 8, 64 */
    mut_t h[2][MAXN]; /* their commands */
} bench;

static void set_add_args(bench *b) {
    const cl_ulong off = 0;
    cl_int e = clSetKernelArg(b->ops->k_add, 0, sizeof b->y, &b->y);
    e |= clSetKernelArg(b->ops->k_add, 1, sizeof off, &off);
    e |= clSetKernelArg(b->ops->k_add, 2, sizeof b->x, &b->x);
    e |= clSetKernelArg(b->ops->k_add, 3, sizeof off, &off);
    e |= clSetKernelArg(b->ops->k_add, 4, sizeof b->n, &b->n);
    if (e != CL_SUCCESS) die("clSetKernelArg", e);
}

/* One batch of n launches the way `path` does it. */
static void batch(bench *b, int path, int which, int n) {
    const size_t g = b->n;
    cl_command_queue q = b->ops->dev->queue;
    cl_int e = CL_SUCCESS;
    if (path == 0) {
        for (int i = 0; i < n; i++) {
            nmt_buf y = {b->y, 0}, x = {b->x, 0};
            if (nmt_op_add(b->ops, y, x, b->n) != NMT_OK) die("nmt_op_add", 0);
        }
    } else if (path == 1) {
        for (int i = 0; i < n && e == CL_SUCCESS; i++) e = clEnqueueNDRangeKernel(q, b->ops->k_add, 1, NULL, &g, NULL, 0, NULL, NULL);
    } else {
        if (path == 3) {
            mut_arg a[MAXN];
            mut_config c[MAXN];
            const void *cp[MAXN];
            cl_uint types[MAXN];
            for (int i = 0; i < n; i++) {
                a[i] = (mut_arg){4, sizeof b->n, &b->n};
                memset(&c[i], 0, sizeof c[i]);
                c[i].command = b->h[which][i];
                c[i].num_args = 1;
                c[i].args = &a[i];
                cp[i] = &c[i];
                types[i] = 0; /* CL_STRUCTURE_TYPE_MUTABLE_DISPATCH_CONFIG_KHR */
            }
            if ((e = b->update(b->cb[which], (cl_uint)n, types, cp)) != CL_SUCCESS) die("clUpdateMutableCommandsKHR", e);
        }
        e = b->enqueue(0, NULL, b->cb[which], 0, NULL, NULL);
    }
    if (e != CL_SUCCESS) die("enqueue", e);
    if ((e = clFinish(q)) != CL_SUCCESS) die("clFinish", e);
}

static double time_path(bench *b, int path, int which, int n, double reps_time, long *launches) {
    if (path == 1) set_add_args(b);
    batch(b, path, which, n);
    long k = 0;
    const double t0 = now();
    double t = t0;
    do {
        batch(b, path, which, n);
        k += n;
        t = now();
    } while (t - t0 < reps_time);
    *launches += k + n;
    return (t - t0) / (double)k * 1e6;
}

int main(int argc, char **argv) {
    const char *spec = NULL, *cache = NULL;
    double reps_time = 0.2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
        else if (!strcmp(argv[i], "--reps-time") && i + 1 < argc) reps_time = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: cmdbuf_bench [--device SPEC] [--cache DIR] [--reps-time S]\n");
            return 2;
        }
    }
    if (!(reps_time > 0)) {
        fprintf(stderr, "cmdbuf_bench: --reps-time must be > 0\n");
        return 2;
    }
    nmt_device_params p = {.device = spec, .cache_dir = cache ? cache : "" /* NULL: none */};
    void *mem = aligned_alloc(64, (nmt_device_footprint() + 63) / 64 * 64);
    nmt_device *dev = NULL;
    nmt_status st = nmt_device_open(&p, mem, nmt_device_footprint(), &dev);
    if (st != NMT_OK) die(nmt_status_str(st), st);
    nmt_ops ops;
    if ((st = nmt_ops_init(&ops, dev)) != NMT_OK) die(nmt_status_str(st), st);
    printf("device: %s (%s), driver %s\n", dev->info.device_name, dev->info.platform_name, dev->info.driver_version);
    const cl_uint vcb = ext_version(dev->device, "cl_khr_command_buffer");
    const cl_uint vmut = ext_version(dev->device, "cl_khr_command_buffer_mutable_dispatch");
    printf("cl_khr_command_buffer %u.%u.%u, cl_khr_command_buffer_mutable_dispatch %u.%u.%u (0.0.0: absent or "
           "not reported by version)\n",
           VER_MAJOR(vcb), VER_MINOR(vcb), VER_PATCH(vcb), VER_MAJOR(vmut), VER_MINOR(vmut), VER_PATCH(vmut));
    bench b = {.ops = &ops, .n = 16};
    const int have_cb = vcb >= VER(0, 9, 0);
    const int have_mut = have_cb && vmut >= VER(0, 9, 3);
    if (vmut && vmut < VER(0, 9, 3)) printf("mutable dispatch older than 0.9.3: its update API differs; not timed\n");
    if (have_cb) {
        cl_platform_id pl = dev->platform;
        b.create = (create_fn)clGetExtensionFunctionAddressForPlatform(pl, "clCreateCommandBufferKHR");
        b.ndrange = (ndrange_fn)clGetExtensionFunctionAddressForPlatform(pl, "clCommandNDRangeKernelKHR");
        b.finalize = (cb_fn)clGetExtensionFunctionAddressForPlatform(pl, "clFinalizeCommandBufferKHR");
        b.release = (cb_fn)clGetExtensionFunctionAddressForPlatform(pl, "clReleaseCommandBufferKHR");
        b.enqueue = (enqueue_fn)clGetExtensionFunctionAddressForPlatform(pl, "clEnqueueCommandBufferKHR");
        b.update = (update_fn)clGetExtensionFunctionAddressForPlatform(pl, "clUpdateMutableCommandsKHR");
        if (!b.create || !b.ndrange || !b.finalize || !b.release || !b.enqueue) die("extension entry points", 0);
    }
    const int mutable_ok = have_mut && b.update != NULL;
    float h[16];
    for (int i = 0; i < 16; i++) h[i] = 0.0f;
    if ((st = nmt_device_buffer(dev, sizeof h, h, &b.y)) != NMT_OK) die("buffer", st);
    for (int i = 0; i < 16; i++) h[i] = 1.0f;
    if ((st = nmt_device_buffer(dev, sizeof h, h, &b.x)) != NMT_OK) die("buffer", st);
    static const int ns[2] = {8, 64};
    if (have_cb) {
        set_add_args(&b);
        const size_t g = b.n;
        for (int w = 0; w < 2; w++) {
            cl_int e = CL_SUCCESS;
            const cl_ulong props[] = {CB_FLAGS, mutable_ok ? CB_MUTABLE : 0, 0};
            const cl_ulong cprops[] = {MUT_FIELDS, MUT_ARGS, 0};
            b.cb[w] = b.create(1, &dev->queue, props, &e);
            if (e != CL_SUCCESS) die("clCreateCommandBufferKHR", e);
            for (int i = 0; i < ns[w]; i++) {
                e = b.ndrange(b.cb[w], NULL, mutable_ok ? cprops : NULL, ops.k_add, 1, NULL, &g, NULL, 0, NULL,
                              NULL, mutable_ok ? &b.h[w][i] : NULL);
                if (e != CL_SUCCESS) die("clCommandNDRangeKernelKHR", e);
            }
            if ((e = b.finalize(b.cb[w])) != CL_SUCCESS) die("clFinalizeCommandBufferKHR", e);
        }
    }
    static const char *const names[4] = {"op", "enqueue", "replay", "mutable"};
    const int paths = have_cb ? (mutable_ok ? 4 : 3) : 2;
    printf("us per launch of add (16 floats), best of 5 interleaved rounds of %.2f s per path\n", reps_time);
    printf("%-10s", "per finish");
    for (int pth = 0; pth < paths; pth++) printf(" %10s", names[pth]);
    printf(paths > 2 ? " %14s\n" : "\n", "op / replay");
    long launches = 0;
    for (int w = 0; w < 2; w++) {
        double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
        for (int round = 0; round < 5; round++)
            for (int pth = 0; pth < paths; pth++) {
                const double us = time_path(&b, pth, w, ns[w], reps_time, &launches);
                best[pth] = us < best[pth] ? us : best[pth];
            }
        printf("%-10d", ns[w]);
        for (int pth = 0; pth < paths; pth++) printf(" %10.2f", best[pth]);
        if (paths > 2) printf(" %14.2f", best[0] / best[2]);
        printf("\n");
    }
    /* every launch added 1 to each of the 16 floats */
    if ((st = nmt_device_read(dev, b.y, 0, sizeof h, h)) != NMT_OK) die("read", st);
    for (int i = 0; i < 16; i++)
        if (h[i] != (float)launches) {
            fprintf(stderr, "cmdbuf_bench: y[%d] = %.0f after %ld launches\n", i, (double)h[i], launches);
            return 1;
        }
    printf("check: every launch of every path ran (y = %ld)\n", launches);
    for (int w = 0; w < 2 && have_cb; w++) b.release(b.cb[w]);
    clReleaseMemObject(b.y);
    clReleaseMemObject(b.x);
    nmt_ops_release(&ops);
    nmt_device_close(dev);
    free(mem);
    return 0;
}
