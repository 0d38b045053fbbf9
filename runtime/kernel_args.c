/* kernel_args.c — error reporting for kernel_args.h. */
#include "kernel_args.h"

#include <stdio.h>

nmt_status args_end(nmt_device *dev, const args *a, const char *kernel) {
    if (a->err == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clSetKernelArg(%s, %u)", kernel, (unsigned)a->err_i);
    return nmt_cl_fail(dev, a->err, what);
}

nmt_status nmt_enqueue(nmt_device *dev, cl_kernel k, cl_uint dims, const size_t *gws,
                       const size_t *lws, const char *kernel) {
    cl_int e = clEnqueueNDRangeKernel(dev->queue, k, dims, NULL, gws, lws, 0, NULL, NULL);
    if (e == CL_SUCCESS) return NMT_OK;
    char what[80];
    snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel);
    return nmt_cl_fail(dev, e, what);
}

static cl_kernel *slot(void *base, const nmt_kernel_def *d) {
    return (cl_kernel *)(void *)((char *)base + d->offset);
}

nmt_status nmt_kernel_wg(nmt_device *dev, cl_kernel k, size_t wish, size_t *out) {
    size_t kwg = 0;
    cl_int e = clGetKernelWorkGroupInfo(k, dev->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    if (e != CL_SUCCESS) return nmt_cl_fail(dev, e, "clGetKernelWorkGroupInfo");
    size_t dev_wg = dev->info.max_work_group_size ? dev->info.max_work_group_size : 1;
    *out = pow2_floor(NMT_MAX((size_t)1, NMT_MIN(NMT_MIN(wish ? wish : 1, dev_wg), kwg ? kwg : 1)));
    return NMT_OK;
}

nmt_status nmt_kernel_table_create(nmt_device *dev, void *base, const nmt_kernel_def *defs, size_t n,
                                   const cl_program *progs, size_t *wg, size_t *reduce_wg) {
    for (size_t i = 0; i < n; i++) {
        const nmt_kernel_def *d = &defs[i];
        size_t *limit = d->reduction ? reduce_wg : wg, kwg;
        NMT_TRY(nmt_device_kernel(dev, progs[d->program], d->name, slot(base, d)));
        NMT_TRY(nmt_kernel_wg(dev, *slot(base, d), *limit, &kwg));
        *limit = NMT_MIN(*limit, kwg);
    }
    return NMT_OK;
}

void nmt_kernel_table_release(void *base, const nmt_kernel_def *defs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        cl_kernel *k = slot(base, &defs[i]);
        if (*k) clReleaseKernel(*k);
        *k = NULL;
    }
}
