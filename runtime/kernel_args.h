/* kernel_args.h — setting kernel arguments and enqueueing, shared by the op
 * layers (ops.c for inference, ops_train.c for training).  Arguments are set
 * in order; the first failing clSetKernelArg is remembered and reported once
 * by args_end() with the kernel name and argument index, so an op reads as a
 * flat list of arg_*() calls. */
#ifndef NMT_KERNEL_ARGS_H
#define NMT_KERNEL_ARGS_H

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

/* clEnqueueNDRangeKernel with no events; failures become statuses naming
 * the kernel.  gws must already be multiples of lws (when lws != NULL). */
nmt_status nmt_enqueue(nmt_device *dev, cl_kernel k, cl_uint dims, const size_t *gws,
                       const size_t *lws, const char *kernel);

#endif
