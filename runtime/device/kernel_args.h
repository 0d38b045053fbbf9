/* SPDX-License-Identifier: MIT */
/* kernel_args.h — setting kernel arguments and enqueueing, shared by the op
 * layers (ops.c for inference, train/ops/ops_train.c for training).  Arguments are set
 * in order; the first failing clSetKernelArg is remembered and reported once
 * by args_end() with the kernel name and argument index, so an op reads as a
 * flat list of arg_*() calls. */
#ifndef NMT_KERNEL_ARGS_H
#define NMT_KERNEL_ARGS_H

#include <stdio.h>

#include "device.h"

typedef struct args {
    cl_kernel k;
    cl_uint i;     /* next argument index */
    cl_int err;    /* first failure */
    cl_uint err_i; /* its index */
} args;

static inline args args_begin(cl_kernel k) {
    args a = {k, 0, CL_SUCCESS, 0};
    return a;
}

static inline void arg_raw(args *a, size_t size, const void *v) {
    if (a->err == CL_SUCCESS) {
        cl_int e = clSetKernelArg(a->k, a->i, size, v);
        if (e != CL_SUCCESS) {
            a->err = e;
            a->err_i = a->i;
        }
    }
    a->i++;
}

static inline void arg_mem(args *a, cl_mem m) { arg_raw(a, sizeof m, &m); }
static inline void arg_u32(args *a, uint32_t v) {
    cl_uint t = (cl_uint)v;
    arg_raw(a, sizeof t, &t);
}
static inline void arg_i32(args *a, int32_t v) {
    cl_int t = (cl_int)v;
    arg_raw(a, sizeof t, &t);
}
static inline void arg_u64(args *a, uint64_t v) {
    cl_ulong t = (cl_ulong)v;
    arg_raw(a, sizeof t, &t);
}
static inline void arg_f32(args *a, float v) {
    cl_float t = v;
    arg_raw(a, sizeof t, &t);
}

/* NMT_OK, or the first clSetKernelArg failure as a status (raw cl_int kept). */
nmt_status args_end(nmt_device *dev, const args *a, const char *kernel);

/* Profiling for benchmarks, keyed by (kernel name, global size) in a fixed
 * table; switching it on clears the table.  NMT_PROFILE_DRAINED: every
 * nmt_enqueue finishes the queue before and after its launch and adds the
 * wall time (each launch alone, the queue's round trip included).
 * NMT_PROFILE_EVENTS: launches keep their order and overlap as in normal
 * runs; each takes an event, and its device time (start to end) and the
 * device's idle time before it (since the previous launch ended: host
 * latency, reads and writes) are added when the events are resolved (every
 * 4,096 launches, at print and when switched off).  It needs a queue
 * created with profiling: the device does that when the environment has
 * NMT_EDGE_QUEUE_PROFILING set at nmt_device_open.  print sorts by device
 * time, scaling times and calls by `scale` (e.g. 1/steps).  Not
 * thread-safe; for bench programs only. */
#define NMT_PROFILE_DRAINED 1
#define NMT_PROFILE_EVENTS 2
void nmt_kernel_profile_enable(int mode);
void nmt_kernel_profile_print(FILE *f, double scale);

/* clEnqueueNDRangeKernel with no events; failures become statuses naming
 * the kernel.  gws must already be multiples of lws (when lws != NULL). */
nmt_status nmt_enqueue(nmt_device *dev, cl_kernel k, cl_uint dims, const size_t *gws,
                       const size_t *lws, const char *kernel);

/* A table of the kernels an op layer holds: each entry names a kernel of
 * one of the layer's programs and where its cl_kernel lives in the layer's
 * struct.  Reduction kernels run with one work-group per row/block. */
typedef struct nmt_kernel_def {
    size_t offset;   /* of the cl_kernel in the op-layer struct */
    int program;     /* index into the layer's programs */
    const char *name;
    int reduction;
} nmt_kernel_def;

/* The local size kernel k can take: the wish, a power of two, within the
 * device's and the kernel's limits. */
nmt_status nmt_kernel_wg(nmt_device *dev, cl_kernel k, size_t wish, size_t *out);

/* Create every kernel of the table into the struct at `base` from
 * progs[program], narrowing *wg (plain kernels) and *reduce_wg (reduction
 * kernels) to what each accepts.  On failure the kernels created so far stay
 * in the struct for nmt_kernel_table_release(). */
nmt_status nmt_kernel_table_create(nmt_device *dev, void *base, const nmt_kernel_def *defs, size_t n,
                                   const cl_program *progs, size_t *wg, size_t *reduce_wg);

/* Release every kernel of the table and clear its slots. */
void nmt_kernel_table_release(void *base, const nmt_kernel_def *defs, size_t n);

#endif
